//! The webhook under abuse, over real TLS on loopback: legitimate AdmissionReviews sent at a fixed
//! rate while (a) 500 slow clients hold connections open, (b) two clients send maximum-size objects
//! back to back, (c) the rate alone is 2,000 requests/s, and the attacks of issue 32: (d) 520
//! uploads that declare 64 KiB and send one byte, (e) five chunked uploads that never finish beside
//! a client sending 100 KiB reviews, (f) a flood of idle TCP connections while the legitimate
//! client opens a new connection for every request, (g) one client sending 62 KiB reviews on 200
//! connections (per-client fairness), and (h) a flood of the probe port with unfinished headers.
//! Attackers connect from addresses of their own (127.0.0.2 and up: other Pods), the legitimate
//! client from 127.0.0.1 (the API server). gang-scheduler's probe port has a bench of its own:
//! `cargo bench -p gang-scheduler --bench probes`.
//!
//! What is measured is the webhook, as far as one 2-core machine allows:
//!
//! - the webhook is the release `gang-webhook` binary in a process of its own (as in its Pod), not a
//!   runtime inside this bench;
//! - the legitimate client (4 kept-alive connections, like an API server's) runs on a thread and
//!   current-thread runtime of its own, and so does the `/healthz` poller (every 20 ms, plain
//!   blocking I/O), both at normal priority;
//! - the abusive clients — the slow clients and the senders of maximum-size objects — run on a
//!   runtime whose threads move themselves to `SCHED_IDLE` (or, with `ABUSE_NICE=n`, lower their
//!   priority by nice +n): in a cluster they are on other machines and cost the webhook's node
//!   nothing, here they only take the CPU the webhook and the legitimate client leave;
//! - (a) is measured once the 500 slow clients are open (their storm of handshakes before is a
//!   case of its own, bounded by the webhook's handshake limit);
//! - each legitimate request and each `/healthz` poll is timed from the moment it was *scheduled*
//!   to be sent, not from when it was sent, so a client held up by a slow answer counts the wait of
//!   every request behind it (no coordinated omission); the worst poll is split into how late the
//!   poller woke and how long the answer took;
//! - a **control**: a bare HTTP server on a thread of this bench, polled by the same poller between
//!   the `/healthz` polls. It does nothing, so what it shows under the same load (a machine's
//!   loopback, scheduler and hypervisor hiccups: 10–20 ms outliers were seen on this 2-core VM,
//!   with no thread of the webhook delayed, by `perf sched`) is not the webhook's.
//!
//! Reports, per case: the load average at its start; the legitimate requests' p50/p99/p99.9/max;
//! `/healthz`'s p99 and worst, and the control's; the server's own decision-time histogram from `/metrics`
//! (`gang_webhook_request_duration_seconds`, legitimate requests on `/mutate`, maximum-size ones on
//! `/validate`) beside the client-side figures; for (b), the maximum-size requests' own latency and
//! the webhook's peak resident memory over what it held before (VmHWM − VmRSS, from /proc).
//!
//! - **What each attack costs each side**: the CPU time the webhook process spent during the case
//!   over what it spends on the same legitimate load alone (case (0), no attack, per second), and
//!   the CPU time of the abusive clients' threads during the case (their tasks' own, from
//!   `/proc/self/task/<tid>/stat`, kernel time for their sockets included): an attack should cost
//!   the defender no more than it costs the attacker.
//!
//! Every loop is bounded in count and time. `ABUSE_SECONDS` (default 10) sets each case's length.
//! Run: `cargo bench -p gang-webhook --bench abuse`

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::json;
use tokio::io::AsyncWriteExt;

#[path = "../tests/support/mod.rs"]
mod support;

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let seconds = env("ABUSE_SECONDS", 10);
    let nice = std::env::var("ABUSE_NICE").ok().and_then(|v| v.parse().ok());
    run(seconds, nice);
}

/// The webhook process.
struct Webhook {
    child: Child,
    port: u16,
    probe: u16,
    /// The control server's port (see [`control_server`]).
    control: u16,
    config: Arc<rustls::ClientConfig>,
    _dir: tempfile::TempDir,
}

impl Webhook {
    fn start() -> Webhook {
        let dir = tempfile::tempdir().unwrap();
        let bundle = support::localhost_certs(dir.path());
        let (port, probe) = (support::free_port(), support::free_port());
        let child = support::webhook_command(dir.path(), port, probe)
            .args(["--gang-lookup=false", "--log-format", "plain"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gang-webhook started");
        let webhook = Webhook {
            child,
            port,
            probe,
            control: control_server(),
            config: support::client_config(bundle.ca_pem.as_bytes()),
            _dir: dir,
        };
        let started = Instant::now();
        while get(probe, "/readyz").is_none_or(|r| !r.starts_with("HTTP/1.1 200")) {
            assert!(started.elapsed() < Duration::from_secs(20), "gang-webhook did not become ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        webhook
    }

    fn status_kb(&self, field: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// The decision-time histogram of each hook: upper bounds (seconds) and cumulative counts.
    fn histograms(&self) -> BTreeMap<String, Vec<(f64, u64)>> {
        let text = get(self.probe, "/metrics").unwrap_or_default();
        let mut out = BTreeMap::<String, Vec<(f64, u64)>>::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("gang_webhook_request_duration_seconds_bucket{") else {
                continue;
            };
            let (labels, count) = rest.split_once("} ").unwrap_or_default();
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(name))
                    .map(|v| v.trim_matches('"').to_string())
            };
            let (Some(hook), Some(le)) = (label("hook="), label("le=")) else { continue };
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(f64::INFINITY) };
            out.entry(hook).or_default().push((le, count.trim().parse().unwrap_or(0)));
        }
        out
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One plain-HTTP GET on the probe port (blocking), the whole response.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// What the server's histogram of `hook` gained between two readings: the count, and the bucket
/// bounds p50 and p99 fall under.
fn server_figures(
    before: &BTreeMap<String, Vec<(f64, u64)>>,
    after: &BTreeMap<String, Vec<(f64, u64)>>,
    hook: &str,
) -> String {
    let b = before.get(hook).cloned().unwrap_or_default();
    let Some(a) = after.get(hook) else { return format!("{hook}: none") };
    let count_at = |i: usize| a[i].1 - b.get(i).map_or(0, |x| x.1);
    let n = a.last().map_or(0, |_| count_at(a.len() - 1));
    if n == 0 {
        return format!("{hook}: none");
    }
    let bound = |q: f64| {
        let want = (n as f64 * q).ceil() as u64;
        (0..a.len()).find(|&i| count_at(i) >= want).map_or(f64::INFINITY, |i| a[i].0)
    };
    let ms = |s: f64| if s.is_finite() { format!("{:.2} ms", s * 1000.0) } else { "∞".into() };
    format!("{hook}: {n} decided, p50 ≤ {}, p99 ≤ {}", ms(bound(0.5)), ms(bound(0.99)))
}

async fn connect_tls(port: u16, config: Arc<rustls::ClientConfig>) -> std::io::Result<Tls> {
    connect_tls_from(1, port, config).await
}

/// A TCP connection to the webhook's `port` from 127.0.0.`client` (a client of its own).
async fn connect_from(client: u8, port: u16) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(std::net::SocketAddr::from(([127, 0, 0, client], 0)))?;
    let tcp = socket.connect(std::net::SocketAddr::from(([127, 0, 0, 1], port))).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

async fn connect_tls_from(client: u8, port: u16, config: Arc<rustls::ClientConfig>) -> std::io::Result<Tls> {
    let tcp = connect_from(client, port).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").map_err(std::io::Error::other)?;
    tokio_rustls::TlsConnector::from(config).connect(name, tcp).await
}

async fn sender(
    port: u16,
    config: Arc<rustls::ClientConfig>,
) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let stream = connect_tls(port, config).await.unwrap();
    let (send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    send
}

fn review(object: serde_json::Value) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "CREATE", "namespace": "ml",
                "kind": {"group": object["apiVersion"].as_str().unwrap_or("").split('/').next(), "version": "v1",
                         "kind": object["kind"].clone()},
                "object": object}}))
        .unwrap(),
    )
}

fn legit() -> Bytes {
    let template = json!({"spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}});
    review(json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template},
                                         "Worker": {"replicas": 7, "template": template}}}}))
}

/// The largest legal object of the kind that costs the most: an opted-in Job whose pod template
/// carries env vars up to the API server's 3 MiB request limit.
fn maximum() -> Bytes {
    let env: Vec<_> = (0..90_000).map(|i| json!({"name": format!("V{i}"), "value": "x"})).collect();
    let body = review(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "huge", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"parallelism": 4, "template": {"spec": {"containers": [{"name": "c", "image": "x", "env": env}]}}}}));
    assert!(body.len() < 3 * 1024 * 1024, "{} bytes", body.len());
    body
}

/// Sends `rps` legitimate requests a second to `/mutate` for `seconds` over 4 kept-alive
/// connections (or, `fresh`, a new TLS connection for every request, as an API server that had
/// to reconnect), on a thread and current-thread runtime of its own; returns each request's
/// latency from the time it was scheduled, sorted.
fn legit_load(webhook: &Webhook, rps: u64, seconds: u64) -> std::thread::JoinHandle<Vec<Duration>> {
    legit_load_with(webhook, rps, seconds, false)
}

fn legit_load_with(
    webhook: &Webhook,
    rps: u64,
    seconds: u64,
    fresh: bool,
) -> std::thread::JoinHandle<Vec<Duration>> {
    let (port, config) = (webhook.port, webhook.config.clone());
    std::thread::Builder::new()
        .name("legitimate".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let connections = 4u64;
                let period = Duration::from_secs_f64(connections as f64 / rps as f64);
                let per_connection = rps * seconds / connections;
                let body = legit();
                let mut senders = Vec::new();
                for _ in 0..connections {
                    senders.push(sender(port, config.clone()).await);
                }
                let start = tokio::time::Instant::now() + Duration::from_millis(50);
                let mut tasks = Vec::new();
                for (c, mut send) in senders.into_iter().enumerate() {
                    let (body, config) = (body.clone(), config.clone());
                    let offset = period.mul_f64(c as f64 / connections as f64);
                    tasks.push(tokio::spawn(async move {
                        let mut out = Vec::with_capacity(per_connection as usize);
                        for k in 0..per_connection {
                            let scheduled = start + offset + period * k as u32;
                            tokio::time::sleep_until(scheduled).await;
                            if scheduled.elapsed() > Duration::from_secs(seconds * 3) {
                                break;
                            }
                            if fresh {
                                send = sender(port, config.clone()).await;
                            }
                            let req = hyper::Request::post("/mutate")
                                .header("host", "localhost")
                                .body(Full::new(body.clone()))
                                .unwrap();
                            let res = send.send_request(req).await.unwrap();
                            assert_eq!(res.status(), 200);
                            let _ = res.into_body().collect().await.unwrap();
                            out.push(scheduled.elapsed());
                        }
                        out
                    }));
                }
                let mut all = Vec::new();
                for t in tasks {
                    all.extend(t.await.unwrap());
                }
                all.sort();
                all
            })
        })
        .unwrap()
}

/// What the `/healthz` poller saw: each poll's latency from the time it was scheduled (sorted),
/// and the parts of the worst: how late the poller itself woke, and the answer time (connect to
/// the whole answer).
#[derive(Default)]
struct Polls {
    latency: Vec<Duration>,
    worst_late: Duration,
    worst_answer: Duration,
}

impl Polls {
    fn add(&mut self, scheduled: Instant, sent: Instant) {
        self.worst_answer = self.worst_answer.max(sent.elapsed());
        self.worst_late = self.worst_late.max(sent.saturating_duration_since(scheduled));
        self.latency.push(scheduled.elapsed());
    }
}

/// A bare HTTP server on a thread of this bench (blocking accept, one answer per connection, at
/// normal priority): the control for `/healthz`. What it shows under the same load is what the
/// machine's loopback and scheduler cost any server, not the webhook.
fn control_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                let mut buf = [0u8; 1024];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n");
            }
        })
        .unwrap();
    port
}

/// Polls `/healthz` every 20 ms on a thread of its own (blocking I/O) until `stop`, and the
/// control server 10 ms after each; returns the webhook's polls and the control's.
fn healthz(probe: u16, control: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(Polls, Polls)> {
    std::thread::Builder::new()
        .name("healthz".into())
        .spawn(move || {
            let period = Duration::from_millis(20);
            let start = Instant::now();
            let (mut webhook, mut bare) = (Polls::default(), Polls::default());
            for k in 0..200_000u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let scheduled = start + period / 2 * k;
                if let Some(wait) = scheduled.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let sent = Instant::now();
                let (port, path, out) =
                    if k % 2 == 0 { (probe, "/healthz", &mut webhook) } else { (control, "/", &mut bare) };
                let answer = get(port, path).unwrap_or_default();
                assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
                out.add(scheduled, sent);
            }
            webhook.latency.sort();
            bare.latency.sort();
            (webhook, bare)
        })
        .unwrap()
}

fn pct(lat: &[Duration], p: f64) -> Duration {
    lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs the legitimate load and the `/healthz` poller for one case and reports them beside the
/// server's own histogram.
/// CPU time in ticks of `USER_HZ` (100 a second on Linux, as `/proc` reports it) from a
/// `/proc/.../stat` line: utime + stime, the 14th and 15th fields (counted after the `)` that ends
/// the command name, which may hold spaces).
fn cpu_ticks(stat: &str) -> u64 {
    let Some((_, rest)) = stat.rsplit_once(')') else { return 0 };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    let at = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    at(14) + at(15)
}

/// The abusive clients' threads (their ids), recorded as each starts ([`abusers`]).
static ATTACKERS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// The webhook's CPU per second under the legitimate load alone (case (0)), in ticks × 1000.
static BASELINE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// (the webhook process's CPU ticks, the live abusive threads' CPU ticks) now.
fn costs(webhook: &Webhook) -> (u64, u64) {
    let own =
        std::fs::read_to_string(format!("/proc/{}/stat", webhook.child.id())).map_or(0, |s| cpu_ticks(&s));
    let tids = ATTACKERS.lock().map(|t| t.clone()).unwrap_or_default();
    let theirs = tids
        .iter()
        .filter_map(|t| std::fs::read_to_string(format!("/proc/self/task/{t}/stat")).ok())
        .map(|s| cpu_ticks(&s))
        .sum();
    (own, theirs)
}

fn measure(case: &str, webhook: &Webhook, rps: u64, seconds: u64) {
    let load = load_average();
    let before = webhook.histograms();
    let (cpu_before, attack_before) = costs(webhook);
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let polls = healthz(webhook.probe, webhook.control, stop.clone());
    let lat = legit_load(webhook, rps, seconds).join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let (polls, control) = polls.join().unwrap();
    let (cpu_after, attack_after) = costs(webhook);
    let elapsed = started.elapsed().as_secs_f64();
    let after = webhook.histograms();
    println!("{case} (load average at start {load}):");
    // Ticks of 10 ms.
    let defender = cpu_after.saturating_sub(cpu_before) as f64 * 10.0;
    let attacker = attack_after.saturating_sub(attack_before) as f64 * 10.0;
    if rps == 200 && attacker == 0.0 && BASELINE.load(Ordering::Relaxed) == 0 {
        BASELINE.store((defender / elapsed * 1000.0) as u64, Ordering::Relaxed);
        println!(
            "  cost: the webhook spent {defender:.0} ms of CPU in {elapsed:.1} s (the baseline per second for the cases below)"
        );
    } else if rps == 200 {
        let baseline = BASELINE.load(Ordering::Relaxed) as f64 / 1000.0 * elapsed;
        let extra = (defender - baseline).max(0.0);
        println!(
            "  cost: the webhook spent {defender:.0} ms of CPU, {extra:.0} ms over the legitimate load alone; the abusive clients {attacker:.0} ms{}",
            if attacker > 0.0 {
                format!(" (defender/attacker {:.2})", extra / attacker)
            } else {
                String::new()
            }
        );
    }
    println!(
        "  legitimate: {} requests, p50 {:.2?}, p99 {:.2?}, p99.9 {:.2?}, max {:.2?} (from their scheduled send time)",
        lat.len(),
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        pct(&lat, 0.999),
        lat[lat.len() - 1]
    );
    let lat_polls = &polls.latency;
    println!(
        "  /healthz: {} polls, p99 {:.2?}, worst {:.2?} (the webhook's worst answer {:.2?}; the poller woke up to {:.2?} late)",
        lat_polls.len(),
        pct(lat_polls, 0.99),
        lat_polls[lat_polls.len() - 1],
        polls.worst_answer,
        polls.worst_late
    );
    println!(
        "  control (a bare loopback server in this bench, polled between): p99 {:.2?}, worst {:.2?} (answer {:.2?}, late {:.2?})",
        pct(&control.latency, 0.99),
        control.latency[control.latency.len() - 1],
        control.worst_answer,
        control.worst_late
    );
    println!(
        "  server's decision time: {}; {}",
        server_figures(&before, &after, "mutate"),
        server_figures(&before, &after, "validate")
    );
}

/// A runtime for the abusive clients, its threads in the `SCHED_IDLE` class (or, with
/// `ABUSE_NICE` set, at nice +`nice`), set by each thread on itself.
fn abusers(nice: Option<i32>) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || {
            if let Ok(mut t) = ATTACKERS.lock() {
                t.push(rustix::thread::gettid().as_raw_nonzero().get());
            }
            if nice.is_none() && gang_webhook::lanes::idle_this_thread().is_ok() {
                return;
            }
            let me = Some(rustix::thread::gettid());
            let now = rustix::process::getpriority_process(me).unwrap_or(0);
            let _ = rustix::process::setpriority_process(me, (now + nice.unwrap_or(10)).min(19));
        })
        .enable_all()
        .build()
        .unwrap()
}

fn run(seconds: u64, nice: Option<i32>) {
    let webhook = Webhook::start();
    println!(
        "abuse: gang-webhook pid {}, {seconds} s per case, abusive clients {}; load average at start: {}",
        webhook.child.id(),
        nice.map_or("in SCHED_IDLE".to_string(), |n| format!("at nice +{n}")),
        load_average()
    );
    let (port, config) = (webhook.port, webhook.config.clone());

    // (0) The legitimate load alone: what the webhook spends on it, the baseline of every case's cost.
    measure("(0) no attack, 200 legitimate req/s", &webhook, 200, seconds);

    // (a) 500 slow clients: TLS done, then a header byte every 2 s (under the 10 s header timeout
    // they are cut off and reconnect, as a slowloris would). Measured once all are open (the
    // storm of 500 handshakes before is a case of its own, bounded by the webhook's handshake
    // limit), for at most 20 s of waiting.
    let rt = abusers(nice);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for i in 0..500 {
        let (config, stop, open) = (config.clone(), stop_rx.clone(), open.clone());
        // From 10 clients of their own (50 each, as 10 Pods would), not the API server's address.
        let client = 10 + (i % 10) as u8;
        rt.spawn(async move {
            for _ in 0..100 {
                if *stop.borrow() {
                    return;
                }
                let Ok(mut s) = connect_tls_from(client, port, config.clone()).await else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                if s.write_all(b"POST /validate HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.is_err() {
                    continue;
                }
                open.fetch_add(1, Ordering::Relaxed);
                for _ in 0..10 {
                    if *stop.borrow() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    if s.write_all(b"a").await.is_err() {
                        break;
                    }
                }
                open.fetch_sub(1, Ordering::Relaxed);
                if *stop.borrow() {
                    return;
                }
            }
        });
    }
    let waiting = Instant::now();
    while open.load(Ordering::Relaxed) < 500 && waiting.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    println!(
        "(a) {} slow clients open after {:.2?} (then 200 ms to settle)",
        open.load(Ordering::Relaxed),
        waiting.elapsed()
    );
    measure("(a) 500 slow clients open, 200 legitimate req/s", &webhook, 200, seconds);
    println!("  slow clients still open at the end: {}", open.load(Ordering::Relaxed));
    let _ = stop_tx.send(true);
    rt.shutdown_timeout(Duration::from_secs(1));

    // (b) maximum-size objects in flight: 2 clients sending them to /validate back to back.
    let rss_before = webhook.status_kb("VmRSS:");
    let big = maximum();
    let rt = abusers(nice);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut heavy = Vec::new();
    for _ in 0..2 {
        let (big, stop, config) = (big.clone(), stop_rx.clone(), config.clone());
        heavy.push(rt.spawn(async move {
            let mut send = sender(port, config).await;
            let mut lat = Vec::new();
            for _ in 0..10_000 {
                if *stop.borrow() {
                    break;
                }
                let t = Instant::now();
                let req = hyper::Request::post("/validate")
                    .header("host", "localhost")
                    .body(Full::new(big.clone()))
                    .unwrap();
                let res = send.send_request(req).await.unwrap();
                assert_eq!(res.status(), 200);
                let _ = res.into_body().collect().await.unwrap();
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    measure(
        &format!(
            "(b) 2 clients sending {:.2} MiB Jobs back to back, 200 legitimate req/s",
            big.len() as f64 / 1048576.0
        ),
        &webhook,
        200,
        seconds,
    );
    let _ = stop_tx.send(true);
    let mut big_lat = Vec::new();
    for t in heavy {
        big_lat.extend(rt.block_on(t).unwrap());
    }
    rt.shutdown_timeout(Duration::from_secs(1));
    big_lat.sort();
    println!(
        "  maximum-size requests: {} answered, p50 {:.2?}, p99 {:.2?}, max {:.2?}; webhook peak RSS {} MiB over the {} MiB before",
        big_lat.len(),
        pct(&big_lat, 0.5),
        pct(&big_lat, 0.99),
        big_lat[big_lat.len() - 1],
        webhook.status_kb("VmHWM:").saturating_sub(rss_before) / 1024,
        rss_before / 1024
    );

    // (c) 2,000 requests/s.
    measure("(c) 2,000 legitimate req/s", &webhook, 2_000, seconds);

    issue_32(&webhook, seconds, nice);
}

/// A review of a Gang carrying ~60 KiB in an annotation: the most the small lane takes, legal.
fn gang_62k() -> Bytes {
    let body = review(json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
        "metadata": {"name": "g", "namespace": "ml", "annotations": {"example.com/note": "x".repeat(60_000)}},
        "spec": {"minMember": 1}}));
    assert!(body.len() <= 64 * 1024, "{} bytes", body.len());
    body
}

/// A legal review of ~100 KiB (a Job with 3,000 env vars): the big lane.
fn review_100k() -> Bytes {
    let env: Vec<_> =
        (0..3_000).map(|i| json!({"name": format!("VARIABLE_{i:06}"), "value": "some-value"})).collect();
    let body = review(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "mid", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"parallelism": 4, "template": {"spec": {"containers": [{"name": "c", "image": "x", "env": env}]}}}}));
    assert!(body.len() > 64 * 1024, "{} bytes", body.len());
    body
}

/// Runs `attack` (each task from one of `clients`, 127.0.0.`c`) on an abusers' runtime until the
/// returned stop is sent; `count` counts what the attackers hold open.
fn attack<F, Fut>(
    nice: Option<i32>,
    tasks: usize,
    clients: &[u8],
    attack: F,
) -> (tokio::runtime::Runtime, tokio::sync::watch::Sender<bool>, Arc<std::sync::atomic::AtomicUsize>)
where
    F: Fn(u8, tokio::sync::watch::Receiver<bool>, Arc<std::sync::atomic::AtomicUsize>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let rt = abusers(nice);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for i in 0..tasks {
        rt.spawn(attack(clients[i % clients.len()], stop_rx.clone(), open.clone()));
    }
    (rt, stop_tx, open)
}

/// Waits (at most `most`) until `open` reaches `want`, and says how many it reached.
fn settle(open: &std::sync::atomic::AtomicUsize, want: usize, most: Duration) -> usize {
    let t = Instant::now();
    while open.load(Ordering::Relaxed) < want && t.elapsed() < most {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    open.load(Ordering::Relaxed)
}

/// Sends `body` to `/validate` every `every` from 127.0.0.1 on one kept-alive connection until
/// `seconds` pass: each latency from its scheduled time, sorted.
fn paced_client(
    port: u16,
    config: Arc<rustls::ClientConfig>,
    body: Bytes,
    every: Duration,
    seconds: u64,
) -> Vec<Duration> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let mut send = sender(port, config).await;
        let start = tokio::time::Instant::now();
        let mut lat = Vec::new();
        for k in 0..(seconds * 1000 / every.as_millis().max(1) as u64) {
            let scheduled = start + every * k as u32;
            tokio::time::sleep_until(scheduled).await;
            let req = hyper::Request::post("/validate")
                .header("host", "localhost")
                .body(Full::new(body.clone()))
                .unwrap();
            let res = send.send_request(req).await.unwrap();
            assert_eq!(res.status(), 200);
            let _ = res.into_body().collect().await.unwrap();
            lat.push(scheduled.elapsed());
        }
        lat.sort();
        lat
    })
}

fn issue_32(webhook: &Webhook, seconds: u64, nice: Option<i32>) {
    let (port, probe, config) = (webhook.port, webhook.probe, webhook.config.clone());

    // (d) 520 uploads that declare 64 KiB and send one byte, from 4 clients (130 each); each is
    // cut off by the body pace, and reconnects at once.
    let cfg = config.clone();
    let (rt, stop, open) = attack(nice, 520, &[2, 3, 4, 5], move |client, stop, open| {
        let cfg = cfg.clone();
        async move {
            while !*stop.borrow() {
                let Ok(mut s) = connect_tls_from(client, port, cfg.clone()).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let head = "POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n{";
                if s.write_all(head.as_bytes()).await.is_err() {
                    continue;
                }
                open.fetch_add(1, Ordering::Relaxed);
                let mut buf = [0u8; 512];
                let _ = tokio::time::timeout(
                    Duration::from_secs(30),
                    tokio::io::AsyncReadExt::read(&mut s, &mut buf),
                )
                .await;
                open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    });
    let reached = settle(&open, 520, Duration::from_secs(20));
    println!("(d) {reached} of 520 idle uploads open (declared 64 KiB, sent 1 byte; cut off and reopened)");
    measure(
        "(d) 520 uploads declaring 64 KiB and sending one byte, 200 legitimate req/s",
        webhook,
        200,
        seconds,
    );
    let _ = stop.send(true);
    rt.shutdown_timeout(Duration::from_secs(1));

    // (e) five chunked uploads that never finish (they used to reserve 7 MiB each) beside a client
    // sending 100 KiB reviews every 50 ms.
    let cfg = config.clone();
    let (rt, stop, open) = attack(nice, 5, &[6], move |client, stop, open| {
        let cfg = cfg.clone();
        async move {
            while !*stop.borrow() {
                let Ok(mut s) = connect_tls_from(client, port, cfg.clone()).await else { continue };
                let head =
                    "POST /validate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n";
                if s.write_all(head.as_bytes()).await.is_err() {
                    continue;
                }
                open.fetch_add(1, Ordering::Relaxed);
                let mut buf = [0u8; 512];
                let _ = tokio::time::timeout(
                    Duration::from_secs(30),
                    tokio::io::AsyncReadExt::read(&mut s, &mut buf),
                )
                .await;
                open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    });
    settle(&open, 5, Duration::from_secs(10));
    let load = load_average();
    let big = std::thread::spawn({
        let config = config.clone();
        move || paced_client(port, config, review_100k(), Duration::from_millis(50), seconds)
    })
    .join()
    .unwrap();
    println!(
        "(e) 5 chunked uploads never finishing (load average {load}): 100 KiB reviews, {} sent, p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        big.len(),
        pct(&big, 0.5),
        pct(&big, 0.99),
        big[big.len() - 1]
    );
    let _ = stop.send(true);
    rt.shutdown_timeout(Duration::from_secs(1));

    // (f) 1,100 idle TCP connections (no handshake) from one client, reopened as they are closed;
    // the legitimate client opens a new TLS connection for every request.
    let (rt, stop, open) = attack(nice, 1_100, &[7], move |client, stop, open| async move {
        while !*stop.borrow() {
            let Ok(mut s) = connect_from(client, port).await else {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            open.fetch_add(1, Ordering::Relaxed);
            let mut buf = [0u8; 64];
            let _ = tokio::time::timeout(
                Duration::from_secs(30),
                tokio::io::AsyncReadExt::read(&mut s, &mut buf),
            )
            .await;
            open.fetch_sub(1, Ordering::Relaxed);
        }
    });
    let reached = settle(&open, 1_100, Duration::from_secs(5));
    println!(
        "(f) {reached} of the flood's connections open at once, as its tasks see them (its client may hold 256, open 200 at once and then 100 a second; the rest are closed as they are accepted)"
    );
    let load = load_average();
    let fresh = legit_load_with(webhook, 50, seconds, true).join().unwrap();
    println!(
        "(f) 1,100 idle connections from one client (load average {load}): legitimate requests each on a new TLS connection, {} sent, p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        fresh.len(),
        pct(&fresh, 0.5),
        pct(&fresh, 0.99),
        fresh[fresh.len() - 1]
    );
    let _ = stop.send(true);
    rt.shutdown_timeout(Duration::from_secs(1));

    // (g) one client sending 62 KiB Gang reviews back to back on 200 connections.
    let cfg = config.clone();
    let heavy = gang_62k();
    let (rt, stop, open) = attack(nice, 200, &[8], move |client, stop, open| {
        let (cfg, heavy) = (cfg.clone(), heavy.clone());
        async move {
            // Retried until it is let in: the client may open 200 connections at once, then 100 a
            // second.
            let mut send = loop {
                if *stop.borrow() {
                    return;
                }
                if let Ok(stream) = connect_tls_from(client, port, cfg.clone()).await
                    && let Ok((send, conn)) =
                        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await
                {
                    tokio::spawn(conn);
                    break send;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            open.fetch_add(1, Ordering::Relaxed);
            while !*stop.borrow() {
                let req = hyper::Request::post("/validate")
                    .header("host", "localhost")
                    .body(Full::new(heavy.clone()))
                    .unwrap();
                let Ok(res) = send.send_request(req).await else { break };
                let _ = res.into_body().collect().await;
            }
        }
    });
    settle(&open, 200, Duration::from_secs(20));
    measure(
        "(g) one client sending 62 KiB reviews on 200 connections, 200 legitimate req/s",
        webhook,
        200,
        seconds,
    );
    let _ = stop.send(true);
    rt.shutdown_timeout(Duration::from_secs(1));

    // (h) the probe port flooded: 2,000 connections with unfinished headers from one client,
    // reopened as they are closed.
    let rss_before = webhook.status_kb("VmRSS:");
    let (rt, stop, open) = attack(nice, 2_000, &[9], move |client, stop, open| async move {
        while !*stop.borrow() {
            let Ok(mut s) = connect_from(client, probe).await else {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            if s.write_all(b"GET /metrics HTTP/1.1\r\nX-Grow: ").await.is_err() {
                continue;
            }
            open.fetch_add(1, Ordering::Relaxed);
            // The header grows by a byte every 100 ms until the server closes the connection.
            for _ in 0..300 {
                if *stop.borrow() || s.write_all(b"a").await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            open.fetch_sub(1, Ordering::Relaxed);
        }
    });
    let reached = settle(&open, 2_000, Duration::from_secs(5));
    println!("(h) {reached} of the probe flood's connections open at once");
    measure(
        "(h) 2,000 connections with unfinished headers on the probe port, 200 legitimate req/s",
        webhook,
        200,
        seconds,
    );
    println!(
        "  webhook RSS {} MiB during the flood ({} MiB before)",
        webhook.status_kb("VmRSS:") / 1024,
        rss_before / 1024
    );
    let _ = stop.send(true);
    rt.shutdown_timeout(Duration::from_secs(1));
}
