//! Test and bench support shared by `tests/{tls,hostile,emfile}.rs` and `benches/{abuse,load_tls}.rs`
//! (each includes it with `#[path]`): free loopback ports, certificates for `localhost`, and a TLS
//! client that verifies the webhook against its CA, as the API server does.
#![allow(dead_code)]

use std::sync::Arc;

/// A loopback port free at the time of the call.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A CA and a serving certificate for `localhost` (and the in-cluster names), written as
/// `tls.crt`/`tls.key`/`ca.crt` into `dir`; returns the bundle (its `ca_pem` for clients).
pub fn localhost_certs(dir: &std::path::Path) -> gang_webhook::certs::Bundle {
    let names = gang_webhook::certs::dns_names("gang-webhook", "kube-gang-system", &["localhost".into()]);
    let bundle = gang_webhook::certs::generate(&names, 2).unwrap();
    gang_webhook::certs::write(dir, &bundle).unwrap();
    bundle
}

/// A rustls client trusting only the CA in `ca_pem`, with the safe default protocol versions.
pub fn client_config(ca_pem: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut &ca_pem[..]) {
        roots.add(c.unwrap()).unwrap();
    }
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// [`client_config`] as a connector.
pub fn connector(ca_pem: &[u8]) -> tokio_rustls::TlsConnector {
    tokio_rustls::TlsConnector::from(client_config(ca_pem))
}

/// A TLS connection to `localhost:port`, the server verified against `ca_pem`.
pub async fn tls(
    port: u16,
    ca_pem: &[u8],
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let _ = tcp.set_nodelay(true);
    let name = rustls::pki_types::ServerName::try_from("localhost").map_err(std::io::Error::other)?;
    connector(ca_pem).connect(name, tcp).await
}

/// An HTTP/1.1 client connection over [`tls`] (the connection driven on a task of its own).
pub async fn http1(
    port: u16,
    ca_pem: &[u8],
) -> hyper::client::conn::http1::SendRequest<http_body_util::Full<hyper::body::Bytes>> {
    let stream = tls(port, ca_pem).await.unwrap();
    let (send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    send
}
