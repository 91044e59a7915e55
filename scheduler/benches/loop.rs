//! gang-scheduler end to end against the HTTP-level fake API: 1,000 nodes, 100 gangs of 10 pods
//! created in a steady stream, then all at once; reports binds per second and the pod-created → bound latency
//! (p50/p99), then what the loop itself costs per cycle on top of the core's `schedule` (index →
//! snapshot, plan → writes), measured on the same cluster, on one of S4's size (4,000 nodes,
//! 140,000 running pods, one pending gang) and on one with 1,500 gangs of 10.
//!
//! Then the same burst at scheduler_perf's scale: 5,000 nodes, 1,000 gangs of 10, alone and beside
//! 140,000 running pods; and the initial load of each shape, one event at a time and in bulk.
//!
//! Run: `cargo bench -p gang-scheduler --bench loop` (a bench binary, not criterion: one run of
//! the whole flow); `LOOP_CASES=s4-cycle,large-running` runs only the cases named (see [`CASES`]). Everything runs on loopback in one process; the fake answers instantly, so the
//! figures are the scheduler's, not an API server's.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gang_scheduler::apply::{self, EventLimiter};
use gang_scheduler::index::Index;
use gang_scheduler::metrics::Metrics;
use gang_scheduler::run::{Settings, run};
use kube_gang_tests::{FakeApi, gang, gang_pod, node};
use scheduler_core::cluster::{GANG, NODE, POD};
use scheduler_core::model::Time;
use scheduler_core::object::ObjectRef;
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

/// The shape of an end-to-end run.
#[derive(Clone, Copy)]
struct Shape {
    nodes: usize,
    gangs: usize,
    members: usize,
    /// Pods already running (bound by another scheduler), 100m CPU each.
    running: usize,
    /// The pause between one gang's creation and the next (zero: all at once).
    spacing: Duration,
}

async fn end_to_end(shape: Shape) {
    let Shape { nodes, gangs, members, running, spacing } = shape;
    let fake = FakeApi::start(&[("/apis/kube-gang.io/v1alpha1", "gangs")]).await;
    for i in 0..nodes {
        fake.put(node(&format!("node-{i:05}"), "64", 8, &[]));
    }
    for p in 0..running {
        fake.put(running_pod(&format!("running-{p:06}"), &format!("node-{:05}", p % nodes)));
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
    let task = tokio::spawn(run(client, settings, metrics.clone(), stop.clone()));
    // Let the watches sync before the clock starts.
    let listed = Instant::now();
    while !metrics.is_ready() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let synced = listed.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;

    // A gang (and its 10 members, 2 GPUs each) every `spacing`.
    let mut created: BTreeMap<String, Instant> = BTreeMap::new();
    let start = Instant::now();
    for g in 0..gangs {
        let name = format!("job-{g:04}");
        fake.put(gang("bench", &name, members as u32));
        for m in 0..members {
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
        .wait_for(Duration::from_secs(600), |f| {
            f.requests_to("POST", "/binding").iter().filter(|r| r.status == 201).count() >= gangs * members
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
    let all_binds = fake.requests_to("POST", "/binding");
    let retries = all_binds.len() - binds.len();
    // What the refused ones were answered with: a 409 means a binding was sent twice.
    let mut refused: BTreeMap<u16, usize> = BTreeMap::new();
    for r in all_binds.iter().filter(|r| r.status != 201) {
        *refused.entry(r.status).or_default() += 1;
    }
    println!(
        "end to end: {nodes} nodes, {running} running pods, {gangs} gangs × {members} pods, a gang every {} (created over {}); watches synced in {}",
        ms(spacing),
        ms(created_in),
        ms(synced)
    );
    println!(
        "  binds: {} in {} → {:.0} binds/s (from the first bind to the last); {retries} retried {refused:?}",
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
    let entering = |v: serde_json::Value| (ObjectRef::of(&v), v);
    let mut index = Index::new();
    let load = Instant::now();
    for i in 0..nodes {
        let (r, v) = entering(versioned(node(&format!("node-{i:05}"), "64", 8, &[])));
        index.apply(r, v);
    }
    for p in 0..running {
        let on = format!("node-{:05}", p % nodes);
        let (r, v) = entering(versioned(running_pod(&format!("running-{p:06}"), &on)));
        index.apply(r, v);
    }
    for g in 0..gangs {
        let name = format!("job-{g:04}");
        let (r, v) = entering(versioned(gang("bench", &name, members as u32)));
        index.apply(r, v);
        for m in 0..members {
            let (r, v) = entering(versioned(gang_pod("bench", &format!("{name}-{m}"), &name, 2)));
            index.apply(r, v);
        }
    }
    index.refresh();
    let loaded = load.elapsed();
    // The same objects as the initial lists a watch delivers, each with the identity the watch
    // gives it: each list loaded whole, in both orders (nodes first, pods first).
    let lists = || {
        // As the watch lists them: each with a resourceVersion.
        let mut version = 0u64;
        let mut entering = |mut v: serde_json::Value| {
            version += 1;
            v["metadata"]["resourceVersion"] = serde_json::json!(version.to_string());
            (ObjectRef::of(&v), v)
        };
        let mut node_list = Vec::new();
        let mut pod_list = Vec::new();
        let mut gang_list = Vec::new();
        for i in 0..nodes {
            node_list.push(entering(node(&format!("node-{i:05}"), "64", 8, &[])));
        }
        for p in 0..running {
            let on = format!("node-{:05}", p % nodes);
            pod_list.push(entering(running_pod(&format!("running-{p:06}"), &on)));
        }
        for g in 0..gangs {
            let name = format!("job-{g:04}");
            gang_list.push(entering(gang("bench", &name, members as u32)));
            for m in 0..members {
                pod_list.push(entering(gang_pod("bench", &format!("{name}-{m}"), &name, 2)));
            }
        }
        (node_list, pod_list, gang_list)
    };
    let mut bulk_loaded = Vec::new();
    for pods_first in [false, true] {
        let (node_list, pod_list, gang_list) = lists();
        let order = if pods_first {
            [(&POD, pod_list), (&GANG, gang_list), (&NODE, node_list)]
        } else {
            [(&NODE, node_list), (&GANG, gang_list), (&POD, pod_list)]
        };
        let mut bulk = Index::new();
        let load = Instant::now();
        for (kind, objects) in order {
            bulk.replace(kind, objects);
        }
        bulk.refresh();
        bulk_loaded.push(load.elapsed());
        drop(bulk);
    }
    let config = Config::default();
    let now = Time::from_secs(1_000);
    let (mut snap_t, mut plan_t, mut req_t) = (Vec::new(), Vec::new(), Vec::new());
    println!("{nodes} nodes, {running} running pods, {gangs} gangs × {members} pending pods:");
    println!(
        "  every object into the index, one watch event at a time, and the first snapshot: {}",
        ms(loaded)
    );
    println!(
        "  the same as initial lists, each loaded in bulk, and the first snapshot: {} (nodes listed first), {} (pods first)",
        ms(bulk_loaded[0]),
        ms(bulk_loaded[1])
    );
    for _ in 0..20 {
        // A cycle after a change: one pod updated (the first round converts everything).
        let (r, changed) = entering(versioned(gang_pod("bench", "job-0000-0", "job-0000", 2)));
        let t = Instant::now();
        index.apply(r, changed);
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
        let writes = apply::writes(
            &plan,
            snapshot,
            &(),
            &mut limiter,
            &BTreeMap::new(),
            "bench",
            "gang-scheduler",
            now,
        );
        // Turned into HTTP as the loop does when it sends them.
        let sent: Vec<apply::Http> = writes
            .bindings
            .iter()
            .map(|b| apply::binding(&b.binding))
            .chain(writes.statuses.iter().map(apply::StatusWrite::http))
            .chain(writes.events.iter().map(apply::event_request))
            .collect();
        req_t.push(t.elapsed());
        assert!(sent.len() >= gangs * members);
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

/// The cases, by name: `LOOP_CASES=s4-cycle,large-running` runs only those (all by default).
const CASES: &[&str] =
    &["small-cycle", "s4-cycle", "many-cycle", "stream", "burst", "large", "large-running"];

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let chosen = std::env::var("LOOP_CASES").unwrap_or_default();
    let chosen: Vec<&str> = chosen.split(',').map(str::trim).filter(|c| !c.is_empty()).collect();
    if let Some(bad) = chosen.iter().find(|c| !CASES.contains(c)) {
        eprintln!("LOOP_CASES: unknown case {bad:?}; the cases are {}", CASES.join(", "));
        std::process::exit(2);
    }
    let runs = |case: &str| chosen.is_empty() || chosen.contains(&case);
    if runs("small-cycle") {
        per_cycle(NODES, 0, GANGS, MEMBERS);
    }
    // S4's size: what a cycle costs the loop on a big, busy cluster.
    if runs("s4-cycle") {
        per_cycle(4_000, 140_000, 1, 16);
    }
    // Many gangs: a member's update must not re-resolve all 1,500 of them.
    if runs("many-cycle") {
        per_cycle(4_000, 0, 1_500, 10);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    // A steady stream (latency as a user sees it), then a burst (throughput).
    let small = Shape {
        nodes: NODES,
        gangs: GANGS,
        members: MEMBERS,
        running: 0,
        spacing: Duration::from_millis(20),
    };
    if runs("stream") {
        runtime.block_on(end_to_end(small));
    }
    if runs("burst") {
        runtime.block_on(end_to_end(Shape { spacing: Duration::ZERO, ..small }));
    }
    // scheduler_perf's scale: 5,000 nodes, 10,000 pending pods in 1,000 gangs of 10 at once —
    // on an empty cluster, then beside 140,000 running pods.
    let large = Shape { nodes: 5_000, gangs: 1_000, members: 10, running: 0, spacing: Duration::ZERO };
    if runs("large") {
        runtime.block_on(end_to_end(large));
    }
    if runs("large-running") {
        runtime.block_on(end_to_end(Shape { running: 140_000, ..large }));
    }
}
