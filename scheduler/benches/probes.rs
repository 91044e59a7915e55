//! gang-scheduler's probe port under a flood (issue 32: no header timeout and no connection limit —
//! 2,000 connections of partial headers all stayed open, and 1,000 of ~370 KB unfinished headers
//! added 378 MB; about 5,500 would have OOM-killed it at its 2 Gi limit).
//!
//! The release `gang-scheduler` runs in a process of its own against the fake API server (leader
//! election off, its caches synced), its probe port on loopback. `/healthz` is polled every 20 ms
//! from 127.0.0.1 (the kubelet) on a thread of its own, each poll timed from when it was scheduled;
//! the flooding clients connect from 127.0.0.2 and .3 (another Pod), in a runtime whose threads are
//! in `SCHED_IDLE` (in a cluster they are on other machines). Reported per case: the load average,
//! `/healthz` p50/p99/worst, the connections the flood holds open, and the scheduler's resident
//! memory before and at its peak during the case (VmRSS, VmHWM from /proc).
//!
//! Cases: (1) 2,000 connections sending partial headers a byte every 100 ms, reopened as they are
//! closed; (2) 1,000 connections each sending a 370 KB header as fast as they can, reopened.
//!
//! Run: `cargo bench -p gang-scheduler --bench probes` (`PROBES_SECONDS=10` per case by default).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube_gang_tests::FakeApi;
use tokio::io::AsyncWriteExt;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let seconds = std::env::var("PROBES_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let fake = rt.block_on(FakeApi::start(&[("/apis/kube-gang.io/v1alpha1", "gangs")]));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let scheduler = Scheduler(
        Command::new(env!("CARGO_BIN_EXE_gang-scheduler"))
            .args(["--leader-elect=false", &format!("--probe-listen=127.0.0.1:{probe}")])
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gang-scheduler started"),
    );
    let started = Instant::now();
    while !get(probe, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
        assert!(started.elapsed() < Duration::from_secs(30), "gang-scheduler did not become ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "probes: gang-scheduler pid {}, {seconds} s per case, load average at start {}",
        scheduler.0.id(),
        load_average()
    );
    case(
        &scheduler,
        probe,
        seconds,
        "(1) 2,000 connections sending partial headers, a byte every 100 ms",
        2_000,
        2,
        |mut s, stop| async move {
            if s.write_all(b"GET /metrics HTTP/1.1\r\nX-Grow: ").await.is_err() {
                return;
            }
            for _ in 0..1_000 {
                if stop.load(Ordering::Relaxed) || s.write_all(b"a").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        },
    );
    case(
        &scheduler,
        probe,
        seconds,
        "(2) 1,000 connections each sending a 370 KB header",
        1_000,
        3,
        |mut s, stop| async move {
            let chunk = vec![b'a'; 16 * 1024];
            if s.write_all(b"GET /metrics HTTP/1.1\r\nX-Big: ").await.is_err() {
                return;
            }
            for _ in 0..(370 / 16) {
                if stop.load(Ordering::Relaxed) || s.write_all(&chunk).await.is_err() {
                    return;
                }
            }
            // Held open once sent, as long as the server lets it.
            let mut buf = [0u8; 256];
            let _ = tokio::time::timeout(
                Duration::from_secs(30),
                tokio::io::AsyncReadExt::read(&mut s, &mut buf),
            )
            .await;
        },
    );
    drop(scheduler);
    drop(fake);
}

struct Scheduler(Child);

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Scheduler {
    fn status_kb(&self, field: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.0.id())).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One plain GET from 127.0.0.1, the whole response.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

fn pct(lat: &[Duration], p: f64) -> Duration {
    lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)]
}

/// Runs `tasks` flooding clients from 127.0.0.`client`, each running `one` on a connection and
/// reconnecting when it ends, while `/healthz` is polled; prints the figures.
fn case<F, Fut>(scheduler: &Scheduler, probe: u16, seconds: u64, name: &str, tasks: usize, client: u8, one: F)
where
    F: Fn(tokio::net::TcpStream, Arc<AtomicBool>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let load = load_average();
    let rss_before = scheduler.status_kb("VmRSS:");
    let stop = Arc::new(AtomicBool::new(false));
    let open = Arc::new(AtomicUsize::new(0));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(|| {
            let _ = thread_priority::set_thread_priority_and_policy(
                thread_priority::thread_native_id(),
                thread_priority::ThreadPriority::Min,
                thread_priority::ThreadSchedulePolicy::Normal(
                    thread_priority::NormalThreadSchedulePolicy::Idle,
                ),
            );
        })
        .enable_all()
        .build()
        .unwrap();
    let one = Arc::new(one);
    for _ in 0..tasks {
        let (stop, open, one) = (stop.clone(), open.clone(), one.clone());
        rt.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let socket = tokio::net::TcpSocket::new_v4().unwrap();
                let _ = socket.bind(SocketAddr::from(([127, 0, 0, client], 0)));
                let Ok(s) = socket.connect(SocketAddr::from(([127, 0, 0, 1], probe))).await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                open.fetch_add(1, Ordering::Relaxed);
                one(s, stop.clone()).await;
                open.fetch_sub(1, Ordering::Relaxed);
            }
        });
    }
    std::thread::sleep(Duration::from_millis(500));
    // The kubelet's probes, every 20 ms, each from its scheduled time.
    let start = Instant::now();
    let period = Duration::from_millis(20);
    let mut polls = Vec::new();
    let mut most_open = 0;
    for k in 0..(seconds * 1000 / 20) as u32 {
        let scheduled = start + period * k;
        if let Some(wait) = scheduled.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let answer = get(probe, "/healthz").unwrap_or_default();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
        polls.push(scheduled.elapsed());
        most_open = most_open.max(open.load(Ordering::Relaxed));
    }
    let peak = scheduler.status_kb("VmHWM:");
    stop.store(true, Ordering::Relaxed);
    rt.shutdown_timeout(Duration::from_secs(1));
    polls.sort();
    println!("{name} (load average at start {load}):");
    println!(
        "  /healthz: {} polls, p50 {:.2?}, p99 {:.2?}, worst {:.2?}; the flood's client had up to {most_open} connections (its tasks' view)",
        polls.len(),
        pct(&polls, 0.5),
        pct(&polls, 0.99),
        polls[polls.len() - 1]
    );
    println!("  scheduler RSS {} MiB before, peak (VmHWM) {} MiB", rss_before / 1024, peak / 1024);
}
