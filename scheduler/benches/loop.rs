//! gang-scheduler end to end against the HTTP-level fake API: 1,000 nodes, 100 gangs of 10 pods
//! created in a steady stream, then all at once; reports binds per second and the pod-created → bound latency
//! (p50/p99), then what the loop itself costs per cycle on top of the core's `schedule` (index →
//! snapshot, plan → writes), measured on the same cluster, on one of S4's size (4,000 nodes,
//! 140,000 running pods, one pending gang) and on one with 1,500 gangs of 10.
//!
//! Run: `cargo bench -p gang-scheduler --bench loop` (a bench binary, not criterion: one run of
//! the whole flow). Everything runs on loopback in one process; the fake answers instantly, so the
//! figures are the scheduler's, not an API server's.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gang_scheduler::apply::{self, EventLimiter};
use gang_scheduler::index::Index;
use gang_scheduler::metrics::Metrics;
use gang_scheduler::run::{Settings, run};
use kube_gang_tests::{FakeApi, gang, gang_pod, node};
use scheduler_core::model::Time;
use scheduler_core::{Config, schedule};
use tokio_util::sync::CancellationToken;

const NODES: usize = 1_000;
const GANGS: usize = 100;
const MEMBERS: usize = 10;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// `spacing`: the pause between one gang's creation and the next (zero: all at once).
async fn end_to_end(spacing: Duration) {
    let fake = FakeApi::start(&[("/apis/kube-gang.io/v1alpha1", "gangs")]).await;
    for i in 0..NODES {
        fake.put(node(&format!("node-{i:04}"), "64", 8, &[]));
    }
    let client = kube::Config::new(fake.url().parse().expect("url"));
    let settings = Settings {
        config: Config::default(),
        period: Duration::from_secs(1),
        leader_elect: false,
        lease_name: "gang-scheduler".into(),
        lease_namespace: "kube-gang-system".into(),
        identity: "bench".into(),
        lease_duration: Duration::from_secs(15),
        retry_period: Duration::from_secs(2),
        bind_concurrency: 16,
        qps: 10_000.0,
        burst: 10_000,
        discovery_period: Duration::from_secs(30),
    };
    let stop = CancellationToken::new();
    let metrics = Metrics::new();
    let task = tokio::spawn(run(client, settings, metrics, stop.clone()));
    // Let the watches sync before the clock starts.
    tokio::time::sleep(Duration::from_secs(2)).await;

    // A gang (and its 10 members, 2 GPUs each) every `spacing`.
    let mut created: BTreeMap<String, Instant> = BTreeMap::new();
    let start = Instant::now();
    for g in 0..GANGS {
        let name = format!("job-{g:03}");
        fake.put(gang("bench", &name, MEMBERS as u32));
        for m in 0..MEMBERS {
            let pod = format!("{name}-{m}");
            fake.put(gang_pod("bench", &pod, &name, 2));
            created.insert(format!("/api/v1/namespaces/bench/pods/{pod}/binding"), Instant::now());
        }
        if !spacing.is_zero() {
            tokio::time::sleep(spacing).await;
        }
    }
    let created_in = start.elapsed();
    let all = fake
        .wait_for(Duration::from_secs(120), |f| {
            f.requests_to("POST", "/binding").iter().filter(|r| r.status == 201).count() >= GANGS * MEMBERS
        })
        .await;
    assert!(all, "every pod bound");
    stop.cancel();
    let _ = task.await;

    let binds: Vec<_> =
        fake.requests_to("POST", "/binding").into_iter().filter(|r| r.status == 201).collect();
    let mut latency: Vec<Duration> = binds
        .iter()
        .filter_map(|r| created.get(&r.path).map(|c| r.at.saturating_duration_since(*c)))
        .collect();
    latency.sort();
    let first = binds.iter().map(|r| r.at).min().expect("binds");
    let last = binds.iter().map(|r| r.at).max().expect("binds");
    let retries = fake.requests_to("POST", "/binding").len() - binds.len();
    println!(
        "end to end: {NODES} nodes, {GANGS} gangs × {MEMBERS} pods, a gang every {} (created over {})",
        ms(spacing),
        ms(created_in)
    );
    println!(
        "  binds: {} in {} → {:.0} binds/s (from the first bind to the last); {retries} retried",
        binds.len(),
        ms(last - first),
        binds.len() as f64 / (last - first).as_secs_f64().max(1e-9)
    );
    println!(
        "  pod created → bound: p50 {}, p99 {}, max {} (includes the loop's 100 ms debounce)",
        ms(percentile(&latency, 0.5)),
        ms(percentile(&latency, 0.99)),
        ms(*latency.last().expect("latency"))
    );
}

/// A running pod bound to `node` by another scheduler: 100m CPU.
fn running_pod(name: &str, node: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "apps", "uid": format!("uid-{name}")},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x",
                 "resources": {"requests": {"cpu": "100m", "memory": "200Mi"}}}]},
        "status": {"phase": "Running"}})
}

/// The loop's own work per cycle, beside the core's: `nodes` nodes, `running` pods bound by
/// another scheduler, and `gangs` gangs of `members` pending pods, after one pod changed.
fn per_cycle(nodes: usize, running: usize, gangs: usize, members: usize) {
    // As a watch delivers them: every object carries a resourceVersion.
    let mut version = 0u64;
    let mut versioned = |mut v: serde_json::Value| {
        version += 1;
        v["metadata"]["resourceVersion"] = serde_json::json!(version.to_string());
        v
    };
    let mut index = Index::new();
    let load = Instant::now();
    for i in 0..nodes {
        index.apply("v1/Node", versioned(node(&format!("node-{i:05}"), "64", 8, &[])));
    }
    for p in 0..running {
        let on = format!("node-{:05}", p % nodes);
        index.apply("v1/Pod", versioned(running_pod(&format!("running-{p:06}"), &on)));
    }
    for g in 0..gangs {
        let name = format!("job-{g:04}");
        index.apply("kube-gang.io/v1alpha1/Gang", versioned(gang("bench", &name, members as u32)));
        for m in 0..members {
            index.apply("v1/Pod", versioned(gang_pod("bench", &format!("{name}-{m}"), &name, 2)));
        }
    }
    index.refresh();
    let loaded = load.elapsed();
    let config = Config::default();
    let now = Time::from_secs(1_000);
    let (mut snap_t, mut plan_t, mut req_t) = (Vec::new(), Vec::new(), Vec::new());
    println!("{nodes} nodes, {running} running pods, {gangs} gangs × {members} pending pods:");
    println!(
        "  every object into the index, one watch event at a time, and the first snapshot: {}",
        ms(loaded)
    );
    for _ in 0..20 {
        // A cycle after a change: one pod updated (the first round converts everything).
        let changed = versioned(gang_pod("bench", "job-0000-0", "job-0000", 2));
        let t = Instant::now();
        index.apply("v1/Pod", changed);
        index.refresh();
        let snapshot_took = t.elapsed();
        let snapshot = index.snapshot();
        snap_t.push(snapshot_took);
        let t = Instant::now();
        let plan = schedule(snapshot, &config, now);
        plan_t.push(t.elapsed());
        assert_eq!(plan.bindings.len(), gangs * members);
        let t = Instant::now();
        let mut limiter = EventLimiter::default();
        let writes = apply::writes(&plan, snapshot, &(), &mut limiter, &BTreeMap::new(), now);
        // Turned into HTTP as the loop does when it sends them.
        let sent = writes.bindings.iter().map(|b| apply::binding(&b.binding)).count()
            + writes.statuses.iter().map(apply::StatusWrite::http).count()
            + writes.events.iter().map(apply::event_request).count();
        req_t.push(t.elapsed());
        assert!(sent >= gangs * members);
    }
    for v in [&mut snap_t, &mut plan_t, &mut req_t] {
        v.sort();
    }
    let (s, p, r) = (percentile(&snap_t, 0.5), percentile(&plan_t, 0.5), percentile(&req_t, 0.5));
    println!("  per cycle after one change (median of 20): core schedule {}", ms(p));
    println!(
        "  loop: the change into the index and the snapshot {}, plan → writes {}; total {} over the core",
        ms(s),
        ms(r),
        ms(s + r)
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    per_cycle(NODES, 0, GANGS, MEMBERS);
    // S4's size: what a cycle costs the loop on a big, busy cluster.
    per_cycle(4_000, 140_000, 1, 16);
    // Many gangs: a member's update must not re-resolve all 1,500 of them.
    per_cycle(4_000, 0, 1_500, 10);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    // A steady stream (latency as a user sees it), then a burst (throughput).
    runtime.block_on(end_to_end(Duration::from_millis(20)));
    runtime.block_on(end_to_end(Duration::ZERO));
}
