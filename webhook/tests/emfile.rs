//! The real `gang-webhook` binary out of file descriptors (issue 16): run as a child process, its
//! `RLIMIT_NOFILE` lowered (prlimit) to just above what it holds, then sent more connections than
//! it may open. It must neither spin (CPU time read from /proc/<pid>/stat over a window) nor flood
//! its log, and must serve again once the connections close. Linux only (prlimit, /proc).
#![cfg(target_os = "linux")]

use std::io::Read as _;
use std::process::{Child, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "support/mod.rs"]
mod support;
use support::free_port;

/// A generous bound on any wait, so a broken limit fails the test instead of hanging it.
const BOUND: Duration = Duration::from_secs(30);
/// How long the process is watched while it has no descriptor left.
const WINDOW: Duration = Duration::from_secs(3);
/// /proc reports CPU time in USER_HZ ticks, 100 a second on every Linux ABI.
const TICKS_PER_SECOND: u64 = 100;

const REVIEW: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","operation":"CREATE","namespace":"ml","kind":{"group":"","version":"v1","kind":"ConfigMap"},"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ml"}}}}"#;

/// Kills the child when the test ends, however it ends.
struct Webhook(Child);

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// User plus system CPU time of `pid`, in ticks (fields 14 and 15 of /proc/<pid>/stat, counted
/// after the command name, which may hold spaces but ends at the last `)`).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // after_name starts at field 3 (state): utime is field 14, stime field 15.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn open_descriptors(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count() as u64
}

fn log_lines_with(path: &std::path::Path, needle: &str) -> usize {
    let mut text = String::new();
    std::fs::File::open(path).unwrap().read_to_string(&mut text).unwrap();
    text.lines().filter(|l| l.contains(needle)).count()
}

async fn plain_status(port: u16, raw: &str) -> Option<u16> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    s.write_all(raw.as_bytes()).await.ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.ok()?;
    String::from_utf8_lossy(&out).split_whitespace().nth(1)?.parse().ok()
}

/// One AdmissionReview over TLS; the HTTP status line of the answer.
async fn review_over_tls(port: u16, ca_pem: &str) -> std::io::Result<String> {
    let mut s = support::tls(port, ca_pem.as_bytes()).await?;
    let head = format!(
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        REVIEW.len()
    );
    s.write_all(head.as_bytes()).await?;
    s.write_all(REVIEW.as_bytes()).await?;
    let mut out = Vec::new();
    // The server closes after answering; a TLS close without close_notify is fine here.
    let _ = s.read_to_end(&mut out).await;
    Ok(String::from_utf8_lossy(&out).lines().next().unwrap_or("").to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_the_real_binary_backs_off_logs_little_and_recovers() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let bundle = support::localhost_certs(dir.path());
    let (port, probe) = (free_port(), free_port());
    let log = dir.path().join("webhook.log");
    let child = support::webhook_command(dir.path(), port, probe)
        // Connections that never handshake stay open for the whole test.
        .args(["--log-format", "plain", "--request-timeout", "120"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let webhook = Webhook(child);
    let pid = webhook.0.id();
    let ready = "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    tokio::time::timeout(BOUND, async {
        while plain_status(probe, ready).await != Some(200) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the webhook became ready");
    assert!(
        review_over_tls(port, &bundle.ca_pem).await.unwrap().contains(" 200 "),
        "served before the limit"
    );

    // A limit a few descriptors above what the process holds now.
    let limit = open_descriptors(pid) + 4;
    let rlimit = rustix::process::Rlimit { current: Some(limit), maximum: Some(limit) };
    let target = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap());
    rustix::process::prlimit(target, rustix::process::Resource::Nofile, rlimit).unwrap();

    // More connections than it may accept: the rest wait in the kernel's backlog.
    let mut held = Vec::new();
    for _ in 0..32 {
        held.push(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    tokio::time::timeout(BOUND, async {
        while log_lines_with(&log, "accept failed") == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("accept ran out of descriptors");
    assert!(log_lines_with(&log, "os error 24") > 0, "accept failed for another reason than EMFILE");

    // Out of descriptors, with connections waiting: no busy loop, a few log lines.
    let (cpu_before, logged_before) = (cpu_ticks(pid), log_lines_with(&log, "accept failed"));
    tokio::time::sleep(WINDOW).await;
    let cpu = cpu_ticks(pid) - cpu_before;
    let logged = log_lines_with(&log, "accept failed") - logged_before;
    // Spinning costs a core: WINDOW × 100 ticks. Backing off costs next to nothing.
    assert!(cpu * 10 <= WINDOW.as_secs() * TICKS_PER_SECOND, "{cpu} ticks of CPU in {WINDOW:?}");
    // At most one line a second (with the count of the others).
    assert!(logged as u64 <= WINDOW.as_secs() + 1, "{logged} 'accept failed' lines in {WINDOW:?}");

    // The connections close: descriptors come back, and a legitimate client is served again.
    drop(held);
    let status = tokio::time::timeout(BOUND, async {
        loop {
            if let Ok(line) = review_over_tls(port, &bundle.ca_pem).await
                && line.contains(" 200 ")
            {
                return line;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("served again once connections closed");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    drop(webhook);
}
