//! The webhook's own resident memory under the heaviest legal load: the release `gang-webhook`
//! binary in a process of its own (not this bench's), driven over TLS by `RSS_CLIENTS` clients
//! (default 8) over HTTP/1.1 and `RSS_H2_CLIENTS` HTTP/2 connections (default 2) of
//! `RSS_H2_STREAMS` concurrent streams each (default 16, the server's limit), sending maximum-size
//! AdmissionReviews back to back for `RSS_SECONDS` (default 10):
//! each object just under the API server's 3 MiB request limit — a Job's env vars, a PyTorchJob's
//! replica specs, a JobSet's replicated jobs — and an UPDATE of the Job (object and oldObject, twice
//! the body) — and a Job with 3 MiB of tolerations, which the pruned reader keeps. `RSS_ENV=K=V,...`
//! sets environment variables of the webhook process, e.g. glibc's `MALLOC_ARENA_MAX=2` (the
//! Deployment does not set it: with 32 clients it changed the peak by less than the run-to-run
//! spread, 80–98 MiB without, 88–89 MiB with). Reports the
//! process's VmRSS when idle, its peak (VmHWM) under the load, and VmRSS after it — the figures the
//! Deployment's memory request and limit are set from (`manifests/base/webhook.yaml`).
//!
//! Run: `cargo bench -p gang-webhook --bench rss`

use std::process::Stdio;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};

#[path = "../tests/support/mod.rs"]
mod support;
use support::{
    job_with_env, job_with_tolerations, jobset_with_jobs, opted_in, pod_spec, pytorchjob_with_roles,
};

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (clients, seconds) = (env("RSS_CLIENTS", 8), env("RSS_SECONDS", 10));
    let (h2_clients, streams) = (env("RSS_H2_CLIENTS", 2), env("RSS_H2_STREAMS", 16));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(run(clients as usize, h2_clients as usize, streams as usize, seconds));
}

fn status_kb(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn review(operation: &str, object: &Value, old: Option<&Value>) -> Bytes {
    let kind = object["kind"].as_str().unwrap_or_default();
    let mut request = json!({"uid": "u", "operation": operation, "namespace": "ml", "name": "big",
        "kind": {"group": "", "version": "v1", "kind": kind},
        "resource": {"group": "", "version": "v1", "resource": "objects"},
        "userInfo": {"username": "admin"}, "object": object});
    if let Some(old) = old {
        request["oldObject"] = old.clone();
    }
    let body = serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": request}))
    .unwrap();
    Bytes::from(body)
}

/// The API server refuses a request body over 3 MiB: each object is sized to just under it.
const OBJECT_LIMIT: usize = 3 * 1024 * 1024;

/// `make(n)` with the largest `n` whose JSON fits in [`OBJECT_LIMIT`] (scaled from a probe size).
fn largest(make: impl Fn(usize) -> Value, probe: usize) -> Value {
    let size = |v: &Value| serde_json::to_vec(v).map_or(0, |b| b.len());
    let n = probe * (OBJECT_LIMIT - 4096) / size(&make(probe)).max(1);
    let object = make(n);
    assert!(size(&object) <= OBJECT_LIMIT, "{} bytes", size(&object));
    object
}

fn bodies() -> Vec<(&'static str, Bytes)> {
    let job = largest(job_with_env, 10_000);
    let pytorch = largest(pytorchjob_with_roles, 5_000);
    let jobset = largest(jobset_with_jobs, 5_000);
    let tolerations = largest(job_with_tolerations, 1_000);
    vec![
        ("Job, env vars up to 3 MiB (CREATE)", review("CREATE", &job, None)),
        ("Job, tolerations up to 3 MiB (read, not skipped)", review("CREATE", &tolerations, None)),
        ("PyTorchJob, replica specs up to 3 MiB", review("CREATE", &pytorch, None)),
        ("JobSet, replicated jobs up to 3 MiB", review("CREATE", &jobset, None)),
        ("Job, env vars up to 3 MiB (UPDATE: object + oldObject)", review("UPDATE", &job, Some(&job))),
    ]
}

async fn run(clients: usize, h2_clients: usize, streams: usize, seconds: u64) {
    let dir = tempfile::tempdir().unwrap();
    let bundle = support::localhost_certs(dir.path());
    let (port, probe) = (support::free_port(), support::free_port());
    let mut child = support::webhook_command(dir.path(), port, probe)
        .args(["--gang-lookup=false", "--log-format", "plain"])
        .env("RUST_LOG", "warn")
        .envs(extra_env())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gang-webhook started");
    let pid = child.id();
    // Ready when a connection is accepted.
    let started = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(10), "gang-webhook did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ca = bundle.ca_pem.clone();
    // Warm: one legitimate request, so the idle figure includes the runtime and TLS state.
    {
        let mut send = support::http1(port, ca.as_bytes()).await;
        let small = review(
            "CREATE",
            &opted_in(("batch/v1", "Job"), json!({"template": {"spec": pod_spec(1)}})),
            None,
        );
        let res = send.send_request(post(small)).await.unwrap();
        let _ = res.into_body().collect().await;
    }
    let idle = status_kb(pid, "VmRSS:");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let bodies = bodies();
    println!(
        "rss: gang-webhook pid {pid}, {clients} HTTP/1.1 clients and {h2_clients} HTTP/2 connections × {streams} streams, {seconds} s, env {:?}; load average at start: {}",
        extra_env(),
        load.trim()
    );
    for (name, body) in &bodies {
        println!("  body: {name}: {:.2} MiB", body.len() as f64 / 1048576.0);
    }
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (ca, bodies) = (ca.clone(), bodies.clone());
        tasks.push(tokio::spawn(async move {
            let mut send = support::http1(port, ca.as_bytes()).await;
            let mut answered = std::collections::BTreeMap::<u16, usize>::new();
            let mut i = c;
            while Instant::now() < deadline {
                let (_, body) = &bodies[i % bodies.len()];
                i += 1;
                match send.send_request(post(body.clone())).await {
                    Ok(res) => {
                        *answered.entry(res.status().as_u16()).or_default() += 1;
                        let _ = res.into_body().collect().await;
                    }
                    // A connection closed by the server's per-connection limits: open another.
                    Err(_) => send = support::http1(port, ca.as_bytes()).await,
                }
            }
            answered
        }));
    }
    // HTTP/2: connections carrying `streams` requests at once each, so that one connection's
    // bodies count many times, not once.
    for c in 0..h2_clients {
        let (ca, bodies) = (ca.clone(), bodies.clone());
        let send = support::http2(port, ca.as_bytes()).await;
        for s in 0..streams {
            let (mut send, bodies) = (send.clone(), bodies.clone());
            tasks.push(tokio::spawn(async move {
                let mut answered = std::collections::BTreeMap::<u16, usize>::new();
                let mut i = c + s;
                while Instant::now() < deadline {
                    let (_, body) = &bodies[i % bodies.len()];
                    i += 1;
                    match send.send_request(post(body.clone())).await {
                        Ok(res) => {
                            *answered.entry(res.status().as_u16()).or_default() += 1;
                            let _ = res.into_body().collect().await;
                        }
                        // The connection closed (a per-connection limit): this stream is done.
                        Err(_) => break,
                    }
                }
                answered
            }));
        }
    }
    let mut peak_rss = 0;
    while Instant::now() < deadline {
        peak_rss = peak_rss.max(status_kb(pid, "VmRSS:"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut answered = std::collections::BTreeMap::<u16, usize>::new();
    for t in tasks {
        for (status, n) in t.await.unwrap() {
            *answered.entry(status).or_default() += n;
        }
    }
    let hwm = status_kb(pid, "VmHWM:");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = status_kb(pid, "VmRSS:");
    println!("  answered by status: {answered:?}");
    println!(
        "  VmRSS idle {:.1} MiB; peak VmHWM {:.1} MiB (sampled VmRSS max {:.1} MiB); VmRSS 2 s after {:.1} MiB",
        idle as f64 / 1024.0,
        hwm as f64 / 1024.0,
        peak_rss as f64 / 1024.0,
        after as f64 / 1024.0
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// `RSS_ENV=K=V,K2=V2`.
fn extra_env() -> Vec<(String, String)> {
    std::env::var("RSS_ENV")
        .unwrap_or_default()
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn post(body: Bytes) -> hyper::Request<Full<Bytes>> {
    hyper::Request::post("/validate").header("host", "localhost").body(Full::new(body)).unwrap()
}
