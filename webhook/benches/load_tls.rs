//! A load run over real TLS: the webhook served in-process on loopback, AdmissionReviews sent at a
//! fixed rate over kept-alive HTTP/1.1 connections (as the API server does), end-to-end latency per
//! request reported as p50/p99/max. `LOAD_RPS` (default 500) and `LOAD_SECONDS` (default 30).
//!
//! Run: `cargo bench -p gang-webhook --bench load_tls`

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::json;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` and test discovery: nothing to list.
    }
    let rps = env("LOAD_RPS", 500);
    let seconds = env("LOAD_SECONDS", 30);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(run(rps, seconds));
}

async fn run(rps: u64, seconds: u64) {
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
    ]);
    tokio::spawn(gang_webhook::serve(args, std::future::pending()));
    tokio::time::sleep(Duration::from_millis(300)).await;

    let config = support::client_config(bundle.ca_pem.as_bytes());
    let template = json!({"spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}});
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "CREATE", "namespace": "ml",
            "kind": {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"},
            "object": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": "bert", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
                "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template},
                                                 "Worker": {"replicas": 7, "template": template}}}}}});
    let body = Bytes::from(serde_json::to_vec(&review).unwrap());

    let connections = 8u64;
    let per_conn = Duration::from_secs_f64(connections as f64 / rps as f64);
    let total = rps * seconds;
    let mut tasks = Vec::new();
    let started = Instant::now();
    for c in 0..connections {
        let (config, body) = (config.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            tcp.set_nodelay(true).unwrap();
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.unwrap();
            let (mut send, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await.unwrap();
            tokio::spawn(conn);
            // Stagger the connections across one period.
            tokio::time::sleep(per_conn.mul_f64(c as f64 / connections as f64)).await;
            let mut tick = tokio::time::interval(per_conn);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut latencies = Vec::new();
            for _ in 0..total / connections {
                tick.tick().await;
                let t = Instant::now();
                let req = hyper::Request::post("/mutate")
                    .header("host", "localhost")
                    .header("content-type", "application/json")
                    .body(Full::new(body.clone()))
                    .unwrap();
                let res = send.send_request(req).await.unwrap();
                assert_eq!(res.status(), 200);
                let _ = res.into_body().collect().await.unwrap();
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let elapsed = started.elapsed();
    all.sort();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    println!(
        "load_tls: {} requests in {:.1} s ({:.0}/s) over {connections} TLS connections: p50 {:?}, p99 {:?}, max {:?}",
        all.len(),
        elapsed.as_secs_f64(),
        all.len() as f64 / elapsed.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        all[all.len() - 1]
    );
}
