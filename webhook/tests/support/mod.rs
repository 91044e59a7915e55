//! Test and bench support shared by `tests/{tls,hostile,emfile,gang_lookup}.rs` and
//! `benches/{abuse,load_tls,rss,memory}.rs` (each includes it with `#[path]`): free loopback ports,
//! certificates for `localhost`, a TLS client that verifies the webhook against its CA, as the API
//! server does, a webhook served in-process, and the largest legal objects.
#![allow(dead_code)]

use std::sync::Arc;

/// The `gang-webhook` binary of this build, serving TLS on loopback `port` (probes on `probe`)
/// with the certificates [`localhost_certs`] wrote into `dir`; the caller adds its own flags, its
/// environment and what to do with the child's output.
pub fn webhook_command(dir: &std::path::Path, port: u16, probe: u16) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_gang-webhook"));
    command
        .args(["--listen", &format!("127.0.0.1:{port}"), "--probe-listen", &format!("127.0.0.1:{probe}")])
        .arg("--tls-cert-file")
        .arg(dir.join("tls.crt"))
        .arg("--tls-key-file")
        .arg(dir.join("tls.key"));
    command
}

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

/// An HTTP/2 client connection over TLS (ALPN `h2`) to `localhost:port`, the server verified
/// against `ca_pem` (the connection driven on a task of its own). Its sender is cloned for each
/// concurrent stream.
pub async fn http2(
    port: u16,
    ca_pem: &[u8],
) -> hyper::client::conn::http2::SendRequest<http_body_util::Full<hyper::body::Bytes>> {
    let mut config = (*client_config(ca_pem)).clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let _ = tcp.set_nodelay(true);
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]), "the server speaks HTTP/2");
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    send
}

/// A webhook served in-process on loopback (its TLS certificate for `localhost`), ready.
pub struct Server {
    pub port: u16,
    pub probe: u16,
    pub ca: String,
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub done: tokio::task::JoinHandle<anyhow::Result<()>>,
    pub dir: tempfile::TempDir,
}

/// Starts the webhook with `extra` flags on free loopback ports and waits (up to 20 s) until
/// `/readyz` answers 200. `dir` holds its certificate files (and whatever else a test puts there).
pub async fn start(extra: &[&str]) -> Server {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let bundle = localhost_certs(dir.path());
    let (port, probe) = (free_port(), free_port());
    let mut argv: Vec<String> = vec![
        "gang-webhook".into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--probe-listen".into(),
        format!("127.0.0.1:{probe}"),
        "--tls-cert-file".into(),
        dir.path().join("tls.crt").display().to_string(),
        "--tls-key-file".into(),
        dir.path().join("tls.key").display().to_string(),
    ];
    argv.extend(extra.iter().map(|s| s.to_string()));
    let args = <gang_webhook::Args as clap::Parser>::parse_from(argv);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(gang_webhook::serve(args, async move {
        let _ = stopped.await;
    }));
    let server = Server { port, probe, ca: bundle.ca_pem, stop: Some(stop), done, dir };
    let ready = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            if let Ok((200, _)) =
                plain(server.probe, "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(ready.is_ok(), "the webhook became ready");
    server
}

/// One raw HTTP/1.1 exchange on a plain port: the status and the whole response.
pub async fn plain(port: u16, raw: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(raw.as_bytes()).await?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).await?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    Ok((status, text))
}

/// An opted-in workload of `kind` (`(apiVersion, kind)`) with `spec`.
pub fn opted_in(kind: (&str, &str), spec: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"apiVersion": kind.0, "kind": kind.1,
           "metadata": {"name": "big", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
           "spec": spec})
}

/// A pod spec whose one container carries `env` env vars.
pub fn pod_spec(env: usize) -> serde_json::Value {
    let env: Vec<serde_json::Value> = (0..env)
        .map(|i| serde_json::json!({"name": format!("VARIABLE_{i:06}"), "value": "some-value"}))
        .collect();
    serde_json::json!({"containers": [{"name": "main", "image": "registry.example/train:1", "env": env}]})
}

/// An opted-in Job whose container carries `n` env vars.
pub fn job_with_env(n: usize) -> serde_json::Value {
    opted_in(("batch/v1", "Job"), serde_json::json!({"parallelism": 4, "template": {"spec": pod_spec(n)}}))
}

/// An opted-in Job whose pod template carries `n` tolerations: bulk the pruned reader keeps (the
/// rules read tolerations), unlike env vars. Kubernetes bounds neither their number nor, unlike
/// annotations (256 KiB), their total size: only the request's 3 MiB does.
pub fn job_with_tolerations(n: usize) -> serde_json::Value {
    let tolerations: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({"key": format!("example.com/taint-{i:06}"), "operator": "Equal",
                                    "value": "some-value", "effect": "NoSchedule"})
        })
        .collect();
    let mut spec = pod_spec(0);
    spec["tolerations"] = serde_json::Value::Array(tolerations);
    opted_in(("batch/v1", "Job"), serde_json::json!({"parallelism": 4, "template": {"spec": spec}}))
}

/// An opted-in PyTorchJob with `n` replica types (none of them Master or Worker).
pub fn pytorchjob_with_roles(n: usize) -> serde_json::Value {
    let specs: serde_json::Map<String, serde_json::Value> = (0..n)
        .map(|i| {
            (format!("Role{i:05}"), serde_json::json!({"replicas": 1, "template": {"spec": pod_spec(0)}}))
        })
        .collect();
    opted_in(("kubeflow.org/v1", "PyTorchJob"), serde_json::json!({"pytorchReplicaSpecs": specs}))
}

/// An opted-in JobSet with `n` replicated jobs.
pub fn jobset_with_jobs(n: usize) -> serde_json::Value {
    let jobs: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({"name": format!("rj{i:05}"), "replicas": 1,
                   "template": {"spec": {"parallelism": 1, "template": {"spec": pod_spec(0)}}}})
        })
        .collect();
    opted_in(("jobset.x-k8s.io/v1alpha2", "JobSet"), serde_json::json!({"replicatedJobs": jobs}))
}
