//! Certificates for the webhook: a CA ([`new_ca`]) and serving certificates it signs ([`issue`]),
//! used by the webhook's own certificate management ([`crate::rotation`]), and
//! `gang-webhook certs`, which writes a pair to files (serving from files, for development).
//!
//! Every run makes a new CA that can sit beside the previous one in a `caBundle` during a
//! rotation: its subject names the generation (`kube-gang webhook CA <id>`, the id taken from the
//! CA's own public key, as is its serial number), both certificates carry a Subject Key
//! Identifier, and the serving certificate an Authority Key Identifier, so a verifier (OpenSSL,
//! Go's crypto/x509, rustls) picks the right CA out of the bundle by key, not by a name that every
//! generation shared.

use std::path::{Path, PathBuf};

use anyhow::Context;
use base64::Engine as _;
use clap::Args;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SerialNumber,
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

/// A CA: its certificate and its private key, PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Ca {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for Ca {
    /// The key is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").field("cert_pem", &self.cert_pem).finish_non_exhaustive()
    }
}

/// A validity period, in seconds since the Unix epoch.
fn validity(params: &mut CertificateParams, not_before: i64, not_after: i64) -> anyhow::Result<()> {
    let at = |secs: i64| {
        x509_parser::time::ASN1Time::from_timestamp(secs)
            .map(|t| t.to_datetime())
            .map_err(|_| anyhow::anyhow!("{secs} is not a time a certificate can hold"))
    };
    params.not_before = at(not_before)?;
    params.not_after = at(not_after)?;
    Ok(())
}

/// A new CA valid from `not_before` to `not_after` (seconds since the epoch).
pub fn new_ca(not_before: i64, not_after: i64) -> anyhow::Result<Ca> {
    let ca_key = KeyPair::generate().context("generating the CA key")?;
    let id = generation_id(ca_key.public_key_raw());
    let mut ca = CertificateParams::new(Vec::<String>::new()).context("CA parameters")?;
    ca.distinguished_name = DistinguishedName::new();
    ca.distinguished_name.push(DnType::CommonName, format!("kube-gang webhook CA {}", hex(&id[..6])));
    ca.serial_number = Some(SerialNumber::from_slice(&id));
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    validity(&mut ca, not_before, not_after)?;
    let cert = ca.self_signed(&ca_key).context("signing the CA")?;
    Ok(Ca { cert_pem: cert.pem(), key_pem: ca_key.serialize_pem() })
}

/// A serving certificate for `names` signed by `ca`, valid from `not_before` to `not_after`;
/// returns the certificate and its new key, PEM.
pub fn issue(ca: &Ca, names: &[String], not_before: i64, not_after: i64) -> anyhow::Result<(String, String)> {
    let ca_key = KeyPair::from_pem(&ca.key_pem).context("reading the CA key")?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).context("reading the CA certificate")?;
    let key = KeyPair::generate().context("generating the serving key")?;
    let mut leaf = CertificateParams::new(names.to_vec()).context("serving certificate names")?;
    leaf.distinguished_name = DistinguishedName::new();
    leaf.distinguished_name.push(DnType::CommonName, names.first().cloned().unwrap_or_default());
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    // ExplicitNoCa writes `CA:FALSE` and the Subject Key Identifier; the Authority Key Identifier
    // names the CA's key.
    leaf.is_ca = IsCa::ExplicitNoCa;
    leaf.use_authority_key_identifier_extension = true;
    leaf.serial_number = Some(SerialNumber::from_slice(&generation_id(key.public_key_raw())));
    validity(&mut leaf, not_before, not_after)?;
    let cert = leaf.signed_by(&key, &issuer).context("signing the serving certificate")?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Generates a CA and a serving certificate for `names`, both valid from yesterday for
/// `valid_days`.
pub fn generate(names: &[String], valid_days: u32) -> anyhow::Result<Bundle> {
    let now = jiff::Timestamp::now().as_second();
    let (from, until) = (now - 86_400, now + i64::from(valid_days) * 86_400);
    let ca = new_ca(from, until)?;
    let (cert_pem, key_pem) = issue(&ca, names, from, until)?;
    Ok(Bundle { ca_pem: ca.cert_pem, cert_pem, key_pem })
}

/// 16 bytes that tell this generation apart: taken from a freshly generated public key (random by
/// construction), the first byte's top bit cleared so that, as a serial number, it is positive.
fn generation_id(public_key: &[u8]) -> [u8; 16] {
    let mut id = [0u8; 16];
    // Skip the point-format byte of an uncompressed EC key; the rest is the key's random point.
    let bytes = public_key.get(1..).unwrap_or(public_key);
    for (i, b) in bytes.iter().enumerate() {
        id[i % 16] ^= b;
    }
    id[0] &= 0x7f;
    if id[0] == 0 {
        id[0] = 1;
    }
    id
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

    fn verifier(ca_pems: &[&str]) -> std::sync::Arc<rustls::client::WebPkiServerVerifier> {
        let mut roots = rustls::RootCertStore::empty();
        for pem in ca_pems {
            for c in rustls_pemfile::certs(&mut pem.as_bytes()) {
                roots.add(c.unwrap()).unwrap();
            }
        }
        rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap()
    }

    /// A rotation: the caBundle holds the old and the new CA while serving certificates of both
    /// generations are in use. OpenSSL (an independent verifier) and rustls accept both leaves.
    #[test]
    fn old_and_new_generations_verify_against_one_bundle() {
        use rustls::client::danger::ServerCertVerifier as _;
        let names = dns_names("gang-webhook", "kube-gang-system", &[]);
        let old = generate(&names, 30).unwrap();
        let new = generate(&names, 30).unwrap();
        let subject = |pem: &str| {
            let out = std::process::Command::new("openssl")
                .args(["x509", "-noout", "-subject", "-ext", "subjectKeyIdentifier,authorityKeyIdentifier"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut c| {
                    use std::io::Write as _;
                    c.stdin.take().unwrap().write_all(pem.as_bytes())?;
                    c.wait_with_output()
                })
                .expect("openssl is installed (.ci/run installs it)");
            String::from_utf8(out.stdout).unwrap()
        };
        // OpenSSL is an independent verifier; without it (outside CI) only rustls checks.
        if kube_gang_tests::tools::required_tool("openssl").is_some() {
            let (old_ca, new_ca) = (subject(&old.ca_pem), subject(&new.ca_pem));
            assert_ne!(old_ca.lines().next(), new_ca.lines().next(), "each generation has its own subject");
            assert!(new_ca.contains("Subject Key Identifier"), "{new_ca}");
            let leaf = subject(&new.cert_pem);
            assert!(
                leaf.contains("Authority Key Identifier") && leaf.contains("Subject Key Identifier"),
                "{leaf}"
            );

            let dir = tempfile::tempdir().unwrap();
            let bundle = dir.path().join("bundle.crt");
            std::fs::write(&bundle, format!("{}{}", old.ca_pem, new.ca_pem)).unwrap();
            for (which, b) in [("old", &old), ("new", &new)] {
                let leaf_file = dir.path().join(format!("{which}.crt"));
                std::fs::write(&leaf_file, &b.cert_pem).unwrap();
                let out = std::process::Command::new("openssl")
                    .args(["verify", "-CAfile"])
                    .arg(&bundle)
                    .arg(&leaf_file)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "openssl verify {which}: {}",
                    String::from_utf8_lossy(&out.stdout)
                );
            }
        }
        let both = verifier(&[&old.ca_pem, &new.ca_pem]);
        let name = rustls::pki_types::ServerName::try_from("gang-webhook.kube-gang-system.svc").unwrap();
        for b in [&old, &new] {
            let leaf = rustls_pemfile::certs(&mut b.cert_pem.as_bytes()).next().unwrap().unwrap();
            both.verify_server_cert(&leaf, &[], &name, &[], rustls::pki_types::UnixTime::now()).unwrap();
        }
        // And the new CA alone does not vouch for the old leaf.
        let leaf = rustls_pemfile::certs(&mut old.cert_pem.as_bytes()).next().unwrap().unwrap();
        assert!(
            verifier(&[&new.ca_pem])
                .verify_server_cert(&leaf, &[], &name, &[], rustls::pki_types::UnixTime::now())
                .is_err()
        );
    }

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
