//! The serving certificate, reloaded when its files change. A Kubernetes Secret volume updates by
//! swapping a symlink (`..data`), which a watch on the file itself misses; so the files are re-read
//! on a timer and swapped in when their bytes differ. A bad new pair is logged and the old one kept.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context;
use rustls::crypto::ring::sign::any_supported_type;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The certificate and key files and the key currently served.
#[derive(Debug)]
pub struct Reloading {
    cert_file: PathBuf,
    key_file: PathBuf,
    current: RwLock<(Vec<u8>, Arc<CertifiedKey>)>,
}

/// Reads and parses a PEM certificate chain and private key.
pub fn load(cert_file: &Path, key_file: &Path) -> anyhow::Result<(Vec<u8>, Arc<CertifiedKey>)> {
    let cert_pem =
        std::fs::read(cert_file).with_context(|| format!("--tls-cert-file {}", cert_file.display()))?;
    let key_pem =
        std::fs::read(key_file).with_context(|| format!("--tls-key-file {}", key_file.display()))?;
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<_, _>>()
        .with_context(|| format!("--tls-cert-file {}: not PEM", cert_file.display()))?;
    anyhow::ensure!(!certs.is_empty(), "--tls-cert-file {}: no certificate in it", cert_file.display());
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .with_context(|| format!("--tls-key-file {}: not PEM", key_file.display()))?
        .with_context(|| format!("--tls-key-file {}: no private key in it", key_file.display()))?;
    let signing = any_supported_type(&key)
        .with_context(|| format!("--tls-key-file {}: unsupported key", key_file.display()))?;
    let certified = CertifiedKey::new(certs, signing);
    certified.keys_match().context("--tls-cert-file and --tls-key-file do not belong together")?;
    let mut fingerprint = cert_pem;
    fingerprint.extend_from_slice(&key_pem);
    Ok((fingerprint, Arc::new(certified)))
}

impl Reloading {
    pub fn new(cert_file: &Path, key_file: &Path) -> anyhow::Result<Arc<Self>> {
        let current = load(cert_file, key_file)?;
        Ok(Arc::new(Reloading {
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            current: RwLock::new(current),
        }))
    }

    /// Re-reads the files; swaps the key in when they changed. Returns whether it did.
    pub fn reload(&self) -> anyhow::Result<bool> {
        let (fingerprint, key) = load(&self.cert_file, &self.key_file)?;
        let mut cur = self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cur.0 == fingerprint {
            return Ok(false);
        }
        *cur = (fingerprint, key);
        Ok(true)
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

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).1.clone())
    }
}
