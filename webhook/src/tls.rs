//! The serving certificate: [`Served`] holds the key served now and swaps in a new one whole.
//! It is fed either by the webhook's own certificate management ([`crate::managed`], from its
//! Secret) or by [`Reloading`], from files: a Kubernetes Secret volume updates by swapping a
//! symlink (`..data`), which a watch on the file itself misses, so the files are re-read on a timer
//! and swapped in when their bytes differ. A bad new pair is logged and the old one kept.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context;
use rustls::crypto::ring::sign::any_supported_type;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The certificate and key served now, and the bytes they were read from.
#[derive(Debug)]
pub struct Served {
    current: RwLock<(Vec<u8>, Arc<CertifiedKey>)>,
}

/// Parses a PEM certificate chain and private key; errors name them as `cert` and `key`.
pub fn parse(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert: &str,
    key: &str,
) -> anyhow::Result<(Vec<u8>, Arc<CertifiedKey>)> {
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &*cert_pem)
        .collect::<Result<_, _>>()
        .with_context(|| format!("{cert}: not PEM"))?;
    anyhow::ensure!(!certs.is_empty(), "{cert}: no certificate in it");
    let private: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut &*key_pem)
        .with_context(|| format!("{key}: not PEM"))?
        .with_context(|| format!("{key}: no private key in it"))?;
    let signing = any_supported_type(&private).with_context(|| format!("{key}: unsupported key"))?;
    let certified = CertifiedKey::new(certs, signing);
    certified.keys_match().with_context(|| format!("{cert} and {key} do not belong together"))?;
    let mut fingerprint = cert_pem.to_vec();
    fingerprint.extend_from_slice(key_pem);
    Ok((fingerprint, Arc::new(certified)))
}

/// Reads and parses a PEM certificate chain and private key.
pub fn load(cert_file: &Path, key_file: &Path) -> anyhow::Result<(Vec<u8>, Arc<CertifiedKey>)> {
    let cert_pem =
        std::fs::read(cert_file).with_context(|| format!("--tls-cert-file {}", cert_file.display()))?;
    let key_pem =
        std::fs::read(key_file).with_context(|| format!("--tls-key-file {}", key_file.display()))?;
    parse(
        &cert_pem,
        &key_pem,
        &format!("--tls-cert-file {}", cert_file.display()),
        &format!("--tls-key-file {}", key_file.display()),
    )
    .map_err(|e| {
        // The pair's own error says "… do not belong together" for both flags.
        if e.to_string().contains("do not belong together") {
            anyhow::anyhow!("--tls-cert-file and --tls-key-file do not belong together")
        } else {
            e
        }
    })
}

impl Served {
    /// Serves the pair parsed from PEM.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> anyhow::Result<Arc<Self>> {
        Ok(Arc::new(Served { current: RwLock::new(parse(cert_pem, key_pem, "tls.crt", "tls.key")?) }))
    }

    fn with(current: (Vec<u8>, Arc<CertifiedKey>)) -> Arc<Self> {
        Arc::new(Served { current: RwLock::new(current) })
    }

    /// Serves `(fingerprint, key)` from now on, when its bytes differ from what is served;
    /// returns whether it did.
    fn swap(&self, next: (Vec<u8>, Arc<CertifiedKey>)) -> bool {
        let mut cur = self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cur.0 == next.0 {
            return false;
        }
        *cur = next;
        true
    }

    /// Serves the pair parsed from PEM from now on (a bad pair is an error and changes nothing);
    /// returns whether it differed from what was served.
    pub fn set(&self, cert_pem: &[u8], key_pem: &[u8]) -> anyhow::Result<bool> {
        Ok(self.swap(parse(cert_pem, key_pem, "tls.crt", "tls.key")?))
    }

    /// The certificate chain served now (DER).
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).1.cert.clone()
    }

    /// A rustls server configuration (TLS 1.2 and 1.3, HTTP/1.1 and HTTP/2) serving from `self`.
    pub fn server_config(self: &Arc<Self>) -> anyhow::Result<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .context("TLS versions")?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

impl ResolvesServerCert for Served {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).1.clone())
    }
}

/// The certificate and key files, re-read into what is served.
#[derive(Debug)]
pub struct Reloading {
    cert_file: PathBuf,
    key_file: PathBuf,
    served: Arc<Served>,
}

impl Reloading {
    pub fn new(cert_file: &Path, key_file: &Path) -> anyhow::Result<Arc<Self>> {
        let current = load(cert_file, key_file)?;
        Ok(Arc::new(Reloading {
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            served: Served::with(current),
        }))
    }

    /// What is served.
    pub fn served(&self) -> Arc<Served> {
        self.served.clone()
    }

    /// Re-reads the files; swaps the key in when they changed. Returns whether it did.
    pub fn reload(&self) -> anyhow::Result<bool> {
        Ok(self.served.swap(load(&self.cert_file, &self.key_file)?))
    }

    /// Re-reads the files every `period`, forever.
    pub async fn watch(self: Arc<Self>, period: Duration) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match self.reload() {
                Ok(true) => tracing::info!(cert = %self.cert_file.display(), "serving certificate reloaded"),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "serving certificate not reloaded; keeping the current one")
                }
            }
        }
    }

    /// A rustls server configuration serving from the files.
    pub fn server_config(self: &Arc<Self>) -> anyhow::Result<rustls::ServerConfig> {
        self.served.server_config()
    }
}
