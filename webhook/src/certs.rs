//! `gang-webhook certs`: a CA and a serving certificate for the webhook Service's DNS names, for
//! installs without cert-manager. The CA goes into the webhook configurations' `caBundle`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use base64::Engine as _;
use clap::Args;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, date_time_ymd,
};

/// Flags of `gang-webhook certs`.
#[derive(Debug, Clone, Args)]
pub struct CertsArgs {
    /// The webhook Service's name.
    #[arg(long, default_value = "gang-webhook")]
    pub service: String,
    /// The Service's namespace.
    #[arg(long, default_value = "kube-gang-system")]
    pub namespace: String,
    /// Extra DNS names for the serving certificate (repeatable).
    #[arg(long = "dns-name", value_name = "NAME")]
    pub dns_names: Vec<String>,
    /// Where to write ca.crt, tls.crt and tls.key.
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
    /// How long the certificates are valid, in days.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub valid_days: u32,
}

/// PEM-encoded CA certificate, serving certificate and serving key.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// The Service's DNS names as the API server may address it.
pub fn dns_names(service: &str, namespace: &str, extra: &[String]) -> Vec<String> {
    let mut names = vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ];
    names.extend(extra.iter().cloned());
    names
}

fn validity(params: &mut CertificateParams, days: u32) {
    let today = jiff::Zoned::now().date();
    let until = today.saturating_add(jiff::Span::new().days(i64::from(days)));
    let ymd = |d: jiff::civil::Date| date_time_ymd(i32::from(d.year()), d.month() as u8, d.day() as u8);
    params.not_before = ymd(today.saturating_sub(jiff::Span::new().days(1)));
    params.not_after = ymd(until);
}

/// Generates a CA and a serving certificate for `names`.
pub fn generate(names: &[String], valid_days: u32) -> anyhow::Result<Bundle> {
    let ca_key = KeyPair::generate().context("generating the CA key")?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).context("CA parameters")?;
    ca.distinguished_name = DistinguishedName::new();
    ca.distinguished_name.push(DnType::CommonName, "kube-gang webhook CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    validity(&mut ca, valid_days);
    let ca_cert = ca.self_signed(&ca_key).context("signing the CA")?;
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate().context("generating the serving key")?;
    let mut leaf = CertificateParams::new(names.to_vec()).context("serving certificate names")?;
    leaf.distinguished_name = DistinguishedName::new();
    leaf.distinguished_name.push(DnType::CommonName, names.first().cloned().unwrap_or_default());
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut leaf, valid_days);
    let cert = leaf.signed_by(&key, &issuer).context("signing the serving certificate")?;
    Ok(Bundle { ca_pem: ca_cert.pem(), cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

/// Writes the bundle into `dir` (the key readable by its owner only) and returns the `caBundle`
/// value (base64 of the CA PEM).
pub fn write(dir: &Path, bundle: &Bundle) -> anyhow::Result<String> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let put = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    put("ca.crt", &bundle.ca_pem)?;
    put("tls.crt", &bundle.cert_pem)?;
    put("tls.key", &bundle.key_pem)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("tls.key"), std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(base64::engine::general_purpose::STANDARD.encode(&bundle.ca_pem))
}

/// Runs `gang-webhook certs`.
pub fn run(args: &CertsArgs) -> anyhow::Result<()> {
    let names = dns_names(&args.service, &args.namespace, &args.dns_names);
    let bundle = generate(&names, args.valid_days)?;
    let ca_bundle = write(&args.out_dir, &bundle)?;
    eprintln!(
        "wrote {dir}/ca.crt, {dir}/tls.crt and {dir}/tls.key for {}",
        names.join(", "),
        dir = args.out_dir.display()
    );
    println!("{ca_bundle}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serving_certificate_chains_to_the_ca_and_names_the_service() {
        use rustls::client::danger::ServerCertVerifier as _;
        let names = dns_names("gang-webhook", "kube-gang-system", &["localhost".into()]);
        assert!(names.contains(&"gang-webhook.kube-gang-system.svc".to_string()));
        let b = generate(&names, 30).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca_bundle = write(dir.path(), &b).unwrap();
        let decoded = base64::engine::general_purpose::STANDARD.decode(ca_bundle).unwrap();
        assert_eq!(decoded, b.ca_pem.as_bytes());
        // The pair loads as a rustls serving key (keys match), and the CA verifies it.
        crate::tls::load(&dir.path().join("tls.crt"), &dir.path().join("tls.key")).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_pemfile::certs(&mut b.ca_pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let leaf = rustls_pemfile::certs(&mut b.cert_pem.as_bytes()).next().unwrap().unwrap();
        let name = rustls::pki_types::ServerName::try_from("gang-webhook.kube-gang-system.svc").unwrap();
        verifier
            .verify_server_cert(&leaf, &[], &name, &[], rustls::pki_types::UnixTime::now())
            .expect("the CA vouches for the service name");
        let other = rustls::pki_types::ServerName::try_from("evil.example").unwrap();
        assert!(
            verifier.verify_server_cert(&leaf, &[], &other, &[], rustls::pki_types::UnixTime::now()).is_err()
        );
    }
}
