//! The webhook's own serving certificate and CA, decided: what its Secret should hold next, given
//! what it holds, the `caBundle`s the webhook configurations publish, and the time. No I/O and no
//! clock (`now` is a parameter); [`crate::managed`] reads and writes the objects.
//!
//! A CA is rotated with overlap, so that no client ever sees a certificate from a CA it does not
//! trust:
//!
//! 1. **publish**: when the active CA nears its end, a next CA is made and added to the bundle
//!    (the active CA still signs the serving certificate);
//! 2. **promote**: once every webhook entry of both configurations trusts the next CA (their
//!    `caBundle` holds it) and [`Policy::overlap`] has passed since it was published, it becomes
//!    the active CA and signs a new serving certificate; the old CA stays in the bundle;
//! 3. **retire**: [`Policy::overlap`] after that (every replica has loaded the new serving
//!    certificate: they read the Secret every few seconds), CAs other than the active and the next
//!    leave the bundle. Expired ones leave at once.
//!
//! The serving certificate is issued again, by the active CA, whenever it is not fresh: not
//! signed by the active CA, not naming every Service name, its key not its own, or within
//! [`Policy::leaf_renew_before`] of its end. Every decision is a function of the Secret's content
//! and the time, so a replica restarted mid-rotation carries on where the last write left it, and
//! two replicas deciding at once decide alike (the API server keeps one write: each carries the
//! `resourceVersion` it read).

use x509_parser::prelude::{FromDer as _, GeneralName, X509Certificate};

use crate::certs::{self, Ca};

/// How long certificates live and how rotations are paced, in seconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// A CA's lifetime.
    pub ca_validity: i64,
    /// A next CA is published this long before the active one ends.
    pub ca_renew_before: i64,
    /// A serving certificate's lifetime (never beyond its CA's end).
    pub leaf_validity: i64,
    /// The serving certificate is issued again this long before it ends.
    pub leaf_renew_before: i64,
    /// How long a next CA is published before it signs, and how long an old CA stays trusted
    /// after it stopped signing.
    pub overlap: i64,
}

const DAY: i64 = 86_400;

/// Certificates are valid from this long before they are made (clocks differ between nodes).
pub const CLOCK_SKEW: i64 = 3_600;

impl Default for Policy {
    fn default() -> Self {
        Policy {
            ca_validity: 365 * DAY,
            ca_renew_before: 90 * DAY,
            leaf_validity: 90 * DAY,
            leaf_renew_before: 30 * DAY,
            overlap: 300,
        }
    }
}

/// What the Secret holds (PEM text), as the rotation reads and writes it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Material {
    /// The active CA: it signs the serving certificate.
    pub ca: Option<Ca>,
    /// A CA published in the bundle, not signing yet (step 1 of a rotation).
    pub next_ca: Option<Ca>,
    /// When the next CA was published, seconds since the epoch.
    pub next_since: Option<i64>,
    /// When CAs other than the active and the next may leave the bundle.
    pub retire_at: Option<i64>,
    /// Every CA clients must trust, PEM, concatenated: what `caBundle` carries.
    pub bundle: String,
    /// The serving certificate and its key.
    pub tls_crt: String,
    pub tls_key: String,
}

impl std::fmt::Debug for Material {
    /// Keys are never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Material")
            .field("ca", &self.ca)
            .field("next_ca", &self.next_ca)
            .field("next_since", &self.next_since)
            .field("retire_at", &self.retire_at)
            .field("bundle", &self.bundle)
            .field("tls_crt", &self.tls_crt)
            .finish_non_exhaustive()
    }
}

/// One thing a decision changed, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A new CA and serving certificate, why.
    Created(String),
    /// Step 1: a next CA added to the bundle.
    NextCaPublished,
    /// Step 2: the next CA signs now.
    CaPromoted,
    /// A serving certificate issued by the active CA, why.
    ServingIssued(String),
    /// A CA the bundle lacked added to it.
    BundleRepaired,
    /// CAs that no longer sign given a date to leave the bundle.
    RetireScheduled,
    /// Step 3: CAs that no longer sign (or expired) removed from the bundle.
    Retired(usize),
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Created(why) => write!(f, "new CA and serving certificate ({why})"),
            Change::NextCaPublished => f.write_str("next CA published in the bundle"),
            Change::CaPromoted => f.write_str("next CA promoted: it signs the serving certificate now"),
            Change::ServingIssued(why) => write!(f, "serving certificate issued ({why})"),
            Change::BundleRepaired => f.write_str("bundle repaired: it lacked a CA in use"),
            Change::RetireScheduled => f.write_str("CAs that no longer sign scheduled to leave the bundle"),
            Change::Retired(n) => write!(f, "{n} CA(s) removed from the bundle"),
        }
    }
}

/// What to store: `material` and why; `changes` empty means keep what is stored.
#[derive(Clone, Debug)]
pub struct Decision {
    pub material: Material,
    pub changes: Vec<Change>,
}

/// One certificate, read.
#[derive(Clone, Debug)]
pub struct Cert {
    pub der: Vec<u8>,
    pub not_before: i64,
    pub not_after: i64,
    /// DNS names of its Subject Alternative Name.
    pub names: Vec<String>,
    /// Its SubjectPublicKeyInfo, DER.
    pub spki: Vec<u8>,
}

/// Every certificate of a PEM text, in order; an error names the first that does not parse.
pub fn read_certs(pem: &str) -> Result<Vec<Cert>, String> {
    let mut out = Vec::new();
    for (i, block) in x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()).enumerate() {
        let block = block.map_err(|e| format!("PEM block {i}: {e}"))?;
        let cert = block.parse_x509().map_err(|e| format!("certificate {i}: {e}"))?;
        let names = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .filter_map(|n| match n {
                        GeneralName::DNSName(d) => Some((*d).to_string()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(Cert {
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
            names,
            spki: cert.public_key().raw.to_vec(),
            der: block.contents.clone(),
        });
    }
    Ok(out)
}

fn read_one(pem: &str, what: &str) -> Result<Cert, String> {
    let mut certs = read_certs(pem).map_err(|e| format!("{what}: {e}"))?;
    match certs.len() {
        1 => Ok(certs.remove(0)),
        0 => Err(format!("{what}: no certificate")),
        n => Err(format!("{what}: {n} certificates where one was expected")),
    }
}

/// Whether `key_pem` is the private key of `cert`.
fn key_matches(key_pem: &str, cert: &Cert) -> bool {
    rcgen::KeyPair::from_pem(key_pem)
        .is_ok_and(|k| rcgen::PublicKeyData::subject_public_key_info(&k) == cert.spki)
}

/// Whether `leaf` carries a signature of `ca`'s key.
fn signed_by(leaf: &Cert, ca: &Cert) -> bool {
    let Ok((_, leaf)) = X509Certificate::from_der(&leaf.der) else { return false };
    let Ok((_, ca)) = X509Certificate::from_der(&ca.der) else { return false };
    leaf.verify_signature(Some(ca.public_key())).is_ok()
}

/// The active CA read and checked: it parses, its key is its own, it has not ended.
fn usable_ca(ca: &Ca, now: i64) -> Result<Cert, String> {
    let cert = read_one(&ca.cert_pem, "ca.crt")?;
    if !key_matches(&ca.key_pem, &cert) {
        return Err("ca.key is not the key of ca.crt".into());
    }
    if cert.not_after <= now {
        return Err("the CA has expired".into());
    }
    Ok(cert)
}

/// Why the serving certificate must be issued again, if it must.
fn stale_leaf(m: &Material, ca: &Cert, names: &[String], now: i64, policy: &Policy) -> Option<String> {
    let leaf = match read_one(&m.tls_crt, "tls.crt") {
        Ok(l) => l,
        Err(e) => return Some(e),
    };
    if !key_matches(&m.tls_key, &leaf) {
        return Some("tls.key is not the key of tls.crt".into());
    }
    if !signed_by(&leaf, ca) {
        return Some("not signed by the active CA".into());
    }
    if let Some(missing) = names.iter().find(|n| !leaf.names.contains(n)) {
        return Some(format!("does not name {missing}"));
    }
    if leaf.not_before > now {
        return Some("not valid yet".into());
    }
    if leaf.not_after - now <= policy.leaf_renew_before.min(ca.not_after - now) {
        return Some("near its end".into());
    }
    None
}

fn fresh(names: &[String], now: i64, policy: &Policy, why: String) -> anyhow::Result<Decision> {
    let ca = certs::new_ca(now - CLOCK_SKEW, now + policy.ca_validity)?;
    let (tls_crt, tls_key) = certs::issue(&ca, names, now - CLOCK_SKEW, now + policy.leaf_validity)?;
    let bundle = pem_of(&read_one(&ca.cert_pem, "new CA").map_err(anyhow::Error::msg)?.der);
    Ok(Decision {
        material: Material { ca: Some(ca), bundle, tls_crt, tls_key, ..Material::default() },
        changes: vec![Change::Created(why)],
    })
}

/// Whether every published bundle trusts `ca` (and there is at least one).
fn trusted_everywhere(ca: &Cert, published: &[String]) -> bool {
    !published.is_empty()
        && published.iter().all(|b| read_certs(b).is_ok_and(|certs| certs.iter().any(|c| c.der == ca.der)))
}

/// What the Secret should hold next. `current` is what it holds (`None`: nothing yet),
/// `published` the `caBundle` of every webhook entry of both configurations (PEM), `names` the
/// Service's DNS names.
pub fn decide(
    current: Option<&Material>,
    names: &[String],
    published: &[String],
    now: i64,
    policy: &Policy,
) -> anyhow::Result<Decision> {
    let Some(current) = current else { return fresh(names, now, policy, "none stored".into()) };
    let Some(active) = &current.ca else { return fresh(names, now, policy, "none stored".into()) };
    let mut ca_cert = match usable_ca(active, now) {
        Ok(c) => c,
        Err(why) => return fresh(names, now, policy, why),
    };
    let mut m = current.clone();
    let mut changes = Vec::new();

    // A next CA that cannot be used is dropped; it is made again below.
    let mut next_cert = m.next_ca.as_ref().and_then(|n| usable_ca(n, now).ok());
    if m.next_ca.is_some() && next_cert.is_none() {
        m.next_ca = None;
        m.next_since = None;
    }
    match (&m.next_ca, &next_cert) {
        (Some(next), Some(next_c)) => {
            let since = m.next_since.unwrap_or(now);
            m.next_since = Some(since);
            if now >= since + policy.overlap && trusted_everywhere(next_c, published) {
                m.ca = Some(next.clone());
                ca_cert = next_c.clone();
                m.next_ca = None;
                m.next_since = None;
                next_cert = None;
                m.retire_at = Some(now + policy.overlap);
                changes.push(Change::CaPromoted);
            }
        }
        _ if ca_cert.not_after - now <= policy.ca_renew_before => {
            let next = certs::new_ca(now - CLOCK_SKEW, now + policy.ca_validity)?;
            next_cert = Some(read_one(&next.cert_pem, "next CA").map_err(anyhow::Error::msg)?);
            m.next_ca = Some(next);
            m.next_since = Some(now);
            changes.push(Change::NextCaPublished);
        }
        _ => {}
    }

    if let Some(why) = stale_leaf(&m, &ca_cert, names, now, policy) {
        let ca = m.ca.clone().ok_or_else(|| anyhow::anyhow!("no active CA after deciding one"))?;
        let until = (now + policy.leaf_validity).min(ca_cert.not_after);
        let (crt, key) = certs::issue(&ca, names, now - CLOCK_SKEW, until)?;
        m.tls_crt = crt;
        m.tls_key = key;
        if !changes.contains(&Change::CaPromoted) {
            changes.push(Change::ServingIssued(why));
        }
    }

    // The bundle: the active and next CAs always; others until their retirement; expired never.
    let held = read_certs(&m.bundle).unwrap_or_default();
    let in_use: Vec<(&Cert, &Ca)> =
        [(Some(&ca_cert), m.ca.as_ref()), (next_cert.as_ref(), m.next_ca.as_ref())]
            .into_iter()
            .filter_map(|(c, ca)| Some((c?, ca?)))
            .collect();
    let mut bundle: Vec<String> = Vec::new();
    let mut missing = false;
    for (cert, _) in &in_use {
        missing |= !held.iter().any(|h| h.der == cert.der);
        bundle.push(pem_of(&cert.der));
    }
    let others: Vec<&Cert> = held.iter().filter(|h| !in_use.iter().any(|(c, _)| c.der == h.der)).collect();
    let live: Vec<&Cert> = others.iter().copied().filter(|c| c.not_after > now).collect();
    let mut retired = others.len() - live.len();
    match m.retire_at {
        _ if live.is_empty() => m.retire_at = None,
        Some(at) if now >= at => {
            retired += live.len();
            m.retire_at = None;
        }
        Some(_) => bundle.extend(live.iter().map(|c| pem_of(&c.der))),
        None => {
            m.retire_at = Some(now + policy.overlap);
            bundle.extend(live.iter().map(|c| pem_of(&c.der)));
            changes.push(Change::RetireScheduled);
        }
    }
    if missing && !changes.contains(&Change::NextCaPublished) {
        changes.push(Change::BundleRepaired);
    }
    if retired > 0 {
        changes.push(Change::Retired(retired));
    }
    let bundle = bundle.concat();
    if bundle != m.bundle && changes.is_empty() {
        // Same certificates, other text (order, whitespace): stored as we write it.
        changes.push(Change::BundleRepaired);
    }
    m.bundle = bundle;
    if m == *current {
        changes.clear();
    }
    Ok(Decision { material: m, changes })
}

/// A certificate as PEM, 64 characters a line.
fn pem_of(der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}
