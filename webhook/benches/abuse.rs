//! The webhook under abuse, over real TLS on loopback: legitimate AdmissionReviews sent at a fixed
//! rate while (a) 500 slow clients hold connections open, (b) maximum-size objects are in flight,
//! and (c) the rate alone is 2,000 requests/s. Reports each case's legitimate p50/p99/max, the
//! worst `/healthz` latency sampled meanwhile, the maximum-size requests' own latency, and the
//! process's resident memory growth (VmHWM − VmRSS at start).
//!
//! Every loop is bounded in count and time. `ABUSE_SECONDS` (default 10) sets each case's length.
//! Run: `cargo bench -p gang-webhook --bench abuse`

use std::sync::Arc;
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
    let seconds = std::env::var("ABUSE_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(10u64);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(run(seconds));
}

fn status_kb(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Env {
    port: u16,
    config: Arc<rustls::ClientConfig>,
}

impl Env {
    async fn connect(&self) -> Tls {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        tokio_rustls::TlsConnector::from(self.config.clone()).connect(name, tcp).await.unwrap()
    }

    async fn sender(&self) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
        let (send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(self.connect().await))
                .await
                .unwrap();
        tokio::spawn(conn);
        send
    }
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

/// Sends `rps` legitimate requests a second for `seconds` over 4 kept-alive connections; returns the
/// sorted latencies.
async fn legit_load(env: &Arc<Env>, rps: u64, seconds: u64) -> Vec<Duration> {
    let connections = 4u64;
    let per_conn = Duration::from_secs_f64(connections as f64 / rps as f64);
    let total = rps * seconds / connections;
    let body = legit();
    let mut tasks = Vec::new();
    for c in 0..connections {
        let (env, body) = (env.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let mut send = env.sender().await;
            tokio::time::sleep(per_conn.mul_f64(c as f64 / connections as f64)).await;
            let mut tick = tokio::time::interval(per_conn);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut out = Vec::with_capacity(total as usize);
            let deadline = Instant::now() + Duration::from_secs(seconds * 3);
            for _ in 0..total {
                if Instant::now() > deadline {
                    break;
                }
                tick.tick().await;
                let t = Instant::now();
                let req = hyper::Request::post("/mutate")
                    .header("host", "localhost")
                    .body(Full::new(body.clone()))
                    .unwrap();
                let res = send.send_request(req).await.unwrap();
                assert_eq!(res.status(), 200);
                let _ = res.into_body().collect().await.unwrap();
                out.push(t.elapsed());
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
}

/// Polls `/healthz` every 20 ms until `stop`; returns the worst latency.
async fn healthz_worst(probe: u16, stop: tokio::sync::watch::Receiver<bool>) -> Duration {
    let mut worst = Duration::ZERO;
    for _ in 0..10_000 {
        if *stop.borrow() {
            break;
        }
        let t = Instant::now();
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", probe)).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut s, &mut out).await;
        assert!(out.starts_with(b"HTTP/1.1 200"));
        worst = worst.max(t.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worst
}

fn report(case: &str, lat: &[Duration], healthz: Duration) {
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    println!(
        "{case}: {} legitimate requests: p50 {:.2?}, p99 {:.2?}, max {:.2?}; /healthz worst {:.2?}",
        lat.len(),
        pct(0.5),
        pct(0.99),
        lat[lat.len() - 1],
        healthz
    );
}

async fn with_healthz<F: std::future::Future<Output = Vec<Duration>>>(
    probe: u16,
    f: F,
) -> (Vec<Duration>, Duration) {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let h = tokio::spawn(healthz_worst(probe, stop_rx));
    let lat = f.await;
    let _ = stop_tx.send(true);
    (lat, h.await.unwrap())
}

async fn run(seconds: u64) {
    let dir = tempfile::tempdir().unwrap();
    let bundle = support::localhost_certs(dir.path());
    let (port, probe) = (support::free_port(), support::free_port());
    let args = <gang_webhook::Args as clap::Parser>::parse_from([
        "gang-webhook",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--probe-listen",
        &format!("127.0.0.1:{probe}"),
        "--tls-cert-file",
        dir.path().join("tls.crt").to_str().unwrap(),
        "--tls-key-file",
        dir.path().join("tls.key").to_str().unwrap(),
        "--log-format",
        "plain",
    ]);
    // The webhook on a runtime of its own, as in its own process in a cluster: the bench's clients
    // (500 of them doing TLS) must not share its worker threads, or their handshakes are measured
    // as the webhook's latency.
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        let _ = rt.block_on(gang_webhook::serve(args, std::future::pending()));
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let config = support::client_config(bundle.ca_pem.as_bytes());
    let env = Arc::new(Env { port, config });
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("abuse: {seconds} s per case; load average at start: {}", load.trim());

    // (a) 500 slow clients: TLS done, then a header byte every 2 s (under the 10 s header timeout
    // they are cut off and reconnect, as a slowloris would).
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut slow = Vec::new();
    for _ in 0..500 {
        let (env, stop) = (env.clone(), stop_rx.clone());
        slow.push(tokio::spawn(async move {
            for _ in 0..100 {
                let mut s = env.connect().await;
                if s.write_all(b"POST /validate HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.is_err() {
                    continue;
                }
                for _ in 0..10 {
                    if *stop.borrow() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    if s.write_all(b"a").await.is_err() {
                        break;
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (lat, h) = with_healthz(probe, legit_load(&env, 200, seconds)).await;
    report("500 slow clients open, 200 legitimate req/s", &lat, h);
    let _ = stop_tx.send(true);
    for s in slow {
        s.abort();
    }

    // (b) maximum-size objects in flight: 2 clients sending them back to back.
    let rss_before = status_kb("VmRSS:");
    let big = maximum();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut heavy = Vec::new();
    for _ in 0..2 {
        let (env, big, stop) = (env.clone(), big.clone(), stop_rx.clone());
        heavy.push(tokio::spawn(async move {
            let mut send = env.sender().await;
            let mut lat = Vec::new();
            for _ in 0..1_000 {
                if *stop.borrow() {
                    break;
                }
                let t = Instant::now();
                let req = hyper::Request::post("/mutate")
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
    let (lat, h) = with_healthz(probe, legit_load(&env, 200, seconds)).await;
    let _ = stop_tx.send(true);
    let mut big_lat = Vec::new();
    for t in heavy {
        big_lat.extend(t.await.unwrap());
    }
    big_lat.sort();
    report(
        &format!("2 clients sending {:.2} MiB Jobs, 200 legitimate req/s", big.len() as f64 / 1048576.0),
        &lat,
        h,
    );
    println!(
        "  maximum-size requests: {} answered, p50 {:.2?}, max {:.2?}; peak RSS {} MiB over the {} MiB before",
        big_lat.len(),
        big_lat[big_lat.len() / 2],
        big_lat[big_lat.len() - 1],
        status_kb("VmHWM:").saturating_sub(rss_before) / 1024,
        rss_before / 1024
    );

    // (c) 2,000 requests/s.
    let (lat, h) = with_healthz(probe, legit_load(&env, 2_000, seconds)).await;
    report("2,000 legitimate req/s", &lat, h);
}
