//! gang-scheduler's probe port against a flood (issue 32): it had no header timeout and no
//! connection limit — 2,000 connections with partial headers all stayed open, and each could grow
//! its headers to ~370 KB (1,000 of them added 378 MB). The port is served by
//! `metrics::serve_probes`, the function the binary calls, on loopback; each client binds an
//! address of its own in 127.0.0.0/8. Every wait is bounded.

use std::net::SocketAddr;
use std::time::Duration;

use gang_scheduler::metrics::{Metrics, serve_probes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BOUND: Duration = Duration::from_secs(20);

async fn connect(client: u8, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from(([127, 0, 0, client], 0)))?;
    socket.connect(addr).await
}

/// `GET path` from 127.0.0.`client` on a connection of its own: status and body.
async fn get(client: u8, addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = connect(client, addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(BOUND, s.read_to_string(&mut out)).await.expect("answered in time").unwrap();
    let code = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, out.split("\r\n\r\n").nth(1).unwrap_or("").to_string())
}

/// Connections the server still holds open among `conns`: a read that neither ends nor fails within
/// a short wait means it is open.
async fn still_open(conns: &mut [TcpStream]) -> usize {
    let mut open = 0;
    for c in conns.iter_mut() {
        let mut buf = [0u8; 64];
        if tokio::time::timeout(Duration::from_millis(5), c.read(&mut buf)).await.is_err() {
            open += 1;
        }
    }
    open
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_partial_headers_holds_a_handful_of_connections_and_probes_are_answered() {
    let metrics = Metrics::new();
    let probes = serve_probes("127.0.0.1:0".parse().unwrap(), &metrics).unwrap();
    let addr = probes.addr();
    // One client opens 500 connections, each sending part of a request line, then part of a
    // header that would grow without end.
    let mut flood = Vec::new();
    for _ in 0..500 {
        let Ok(mut c) = connect(2, addr).await else { continue };
        let _ = c.write_all(b"GET /metrics HTTP/1.1\r\nX-Grow: aaaaaaaa").await;
        flood.push(c);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The kubelet (another address) is answered meanwhile.
    assert_eq!(get(3, addr, "/healthz").await, (200, "ok\n".into()));
    // The flooding client keeps at most its share (8) open; the rest were closed as they came.
    let open = still_open(&mut flood).await;
    assert!(open <= 8, "{open} of the flood's connections are open");
    // A header that grows past 16 KiB is refused (431), not buffered.
    let mut big = connect(4, addr).await.unwrap();
    let _ = big
        .write_all(format!("GET /healthz HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(32 * 1024)).as_bytes())
        .await;
    let mut answer = String::new();
    let _ = tokio::time::timeout(BOUND, big.read_to_string(&mut answer)).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:?}");
    // What is left of the flood is cut off within the 2 s header timeout.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(still_open(&mut flood).await, 0);
    let text = get(3, addr, "/metrics").await.1;
    for reason in ["source_limit", "header_timeout", "headers_too_large"] {
        assert!(
            text.contains(&format!("gang_connections_closed_total{{port=\"probe\",reason=\"{reason}\"}}")),
            "{reason} not counted in\n{text}"
        );
    }
    probes.stop();
}

/// The binary serves its probe port as the Deployment probes it (from the thread and listener
/// above), and stops on SIGTERM within its drain period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_its_probes_and_stops_on_sigterm() {
    let fake = kube_gang_tests::FakeApi::start(&[("/apis/kube-gang.io/v1alpha1", "gangs")]).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gang-scheduler"))
        .args(["--leader-elect=false", &format!("--probe-listen={addr}")])
        .env("KUBECONFIG", &kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ready = tokio::time::timeout(BOUND, async {
        loop {
            if let Ok(mut s) = TcpStream::connect(addr).await {
                let _ = s.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
                let mut out = String::new();
                let _ = s.read_to_string(&mut out).await;
                if out.starts_with("HTTP/1.1 200") {
                    return out;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let ready = ready.unwrap_or_else(|_| {
        let _ = child.kill();
        panic!("the probe port never said ready")
    });
    assert!(ready.ends_with("ok: leader\n"), "{ready}");
    assert_eq!(get(1, addr, "/healthz").await, (200, "ok\n".into()));
    rustix::process::kill_process(rustix::process::Pid::from_child(&child), rustix::process::Signal::TERM)
        .unwrap();
    let exited = tokio::time::timeout(BOUND, async {
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let status = exited.unwrap_or_else(|_| {
        let _ = child.kill();
        panic!("gang-scheduler did not stop on SIGTERM")
    });
    assert!(status.success(), "{status}");
}
