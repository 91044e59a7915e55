//! The real `gang-webhook` binary over real TLS: certificates from its own `certs` command, a client
//! that verifies the CA, a certificate rotation by symlink swap (as a Secret volume updates), probes,
//! and a clean exit on SIGTERM.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "support/mod.rs"]
mod support;
use support::{connector, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_gang-webhook");

fn certs(dir: &Path) -> String {
    let out = Command::new(BIN)
        .args(["certs", "--dns-name", "localhost", "--valid-days", "2", "--out-dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Points `link` at `target` atomically (a new symlink renamed over the old one).
fn swap_symlink(target: &Path, link: &Path) {
    let tmp = link.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

/// One HTTP/1.1 request; returns (status, body).
async fn http<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut s: S,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, String) {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

async fn over_tls(
    port: u16,
    ca_pem: &[u8],
    path: &str,
    body: &[u8],
) -> Result<(u16, String), std::io::Error> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = connector(ca_pem).connect(name, tcp).await?;
    Ok(http(tls, "POST", path, body).await)
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_over_verified_tls_rotates_certificates_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (v1, v2, current) = (dir.path().join("v1"), dir.path().join("v2"), dir.path().join("current"));
    let bundle_v1 = certs(&v1);
    assert!(!bundle_v1.is_empty());
    swap_symlink(&v1, &current);
    let (port, probe) = (free_port(), free_port());
    let mut server = Server(
        Command::new(BIN)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--probe-listen", &format!("127.0.0.1:{probe}")])
            .args(["--tls-reload-period", "1", "--log-format", "plain"])
            .arg("--tls-cert-file")
            .arg(current.join("tls.crt"))
            .arg("--tls-key-file")
            .arg(current.join("tls.key"))
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // Ready once it serves.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(tcp) = tokio::net::TcpStream::connect(("127.0.0.1", probe)).await
            && http(tcp, "GET", "/readyz", b"").await.0 == 200
        {
            break;
        }
        assert!(Instant::now() < deadline, "never became ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let ca1 = std::fs::read(v1.join("ca.crt")).unwrap();
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "abc-123", "kind": {"group": "kube-gang.io", "version": "v1alpha1", "kind": "Gang"},
                    "namespace": "ml", "name": "g", "operation": "CREATE",
                    "object": {"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
                               "metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 0}}}});
    let body = serde_json::to_vec(&review).unwrap();
    let (status, text) = over_tls(port, &ca1, "/validate", &body).await.unwrap();
    assert_eq!(status, 200, "{text}");
    let out: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(out["response"]["uid"], "abc-123");
    assert_eq!(out["response"]["allowed"], false);
    assert!(out["response"]["status"]["message"].as_str().unwrap().contains("spec.minMember"));

    // Malformed JSON over the wire: a 400 that says why.
    let (status, text) = over_tls(port, &ca1, "/mutate", b"{").await.unwrap();
    assert_eq!(status, 400, "{text}");

    // Rotate: a new CA and certificate, swapped in by symlink. Clients trusting only the new CA
    // succeed within a few reload periods; clients of the old CA then fail.
    certs(&v2);
    swap_symlink(&v2, &current);
    let ca2 = std::fs::read(v2.join("ca.crt")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok((200, _)) = over_tls(port, &ca2, "/validate", &body).await {
            break;
        }
        assert!(Instant::now() < deadline, "the new certificate was never served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(over_tls(port, &ca1, "/validate", &body).await.is_err(), "the old CA no longer verifies");

    // Metrics saw the requests.
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", probe)).await.unwrap();
    let (_, metrics) = http(tcp, "GET", "/metrics", b"").await;
    assert!(metrics.contains(r#"gang_webhook_requests_total{hook="validate",result="denied"}"#), "{metrics}");
    assert!(metrics.contains(r#"result="bad_request""#), "{metrics}");

    // SIGTERM: a clean, prompt exit.
    let pid = server.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = server.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "did not exit on SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_bad_certificate_is_a_clear_startup_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), "not a certificate").unwrap();
    std::fs::write(dir.path().join("tls.key"), "not a key").unwrap();
    let out = Command::new(BIN)
        .args(["--listen", "127.0.0.1:0", "--probe-listen", "127.0.0.1:0"])
        .arg("--tls-cert-file")
        .arg(dir.path().join("tls.crt"))
        .arg("--tls-key-file")
        .arg(dir.path().join("tls.key"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: --tls-cert-file"), "{err}");
}
