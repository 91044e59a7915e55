//! Gang trees built from many objects: upstream PodGroups under one CompositePodGroup (1.37),
//! each PodGroup with one pod, as one tenant may create them. What is timed is what every front
//! door pays for them: the one-pass assembly (`Cluster::snapshot`, what `kubectl gang status`
//! and `simulate` run), one scheduling cycle over the result, and the scheduler's patched view
//! (`Live`) resolving gangs again after one claiming pod changed (what it does whenever a gang
//! object or a claiming pod changes). Each must grow linearly with the PodGroups: the time per
//! PodGroup is printed beside each figure, and should stay flat from 5,000 to 40,000.
//!
//! Run: `cargo bench -p scheduler-core --bench hierarchy` (`HIERARCHY_SIZES=40000` for one size).

use std::time::{Duration, Instant};

use scheduler_core::cluster::{Cluster, Live};
use scheduler_core::model::Time;
use scheduler_core::{Config, schedule};
use serde_json::{Value, json};

fn composite() -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
        "metadata": {"name": "llm", "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}}}})
}

fn podgroup(i: usize) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup",
        "metadata": {"name": format!("pg-{i:05}"), "namespace": "ml",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"parentCompositePodGroupName": "llm", "schedulingPolicy": {"gang": {"minCount": 1}}}})
}

fn pod(i: usize, generation: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("p-{i:05}"), "namespace": "ml", "uid": format!("u-{i}"),
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"generation": generation.to_string()}},
        "spec": {"schedulerName": "gang-scheduler", "schedulingGroup": {"podGroupName": format!("pg-{i:05}")},
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"}})
}

fn node() -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn objects(n: usize) -> Vec<Value> {
    let mut out = vec![node(), composite()];
    out.extend((0..n).map(podgroup));
    out.extend((0..n).map(|i| pod(i, 0)));
    out
}

/// The best of `runs` timings of `f`.
fn best(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let sizes: Vec<usize> = std::env::var("HIERARCHY_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![5_000, 10_000, 20_000, 40_000]);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("hierarchy: PodGroups under one CompositePodGroup, one pod each (load average {})", load.trim());
    let per = |d: Duration, n: usize| d.as_secs_f64() * 1e6 / n as f64;
    for n in sizes {
        let objs = objects(n);
        let mut cluster = Cluster::new();
        for o in &objs {
            cluster.push(o.clone()).expect("a readable object");
        }
        let mut snapshot = None;
        let assembly = best(3, || snapshot = Some(cluster.snapshot()));
        let assembled = snapshot.expect("assembled");
        let gangs = assembled.snapshot.gangs.len();
        let now = Time(1_767_225_600_000);
        let config = Config::default();
        let mut outcome = String::new();
        let cycle = best(3, || {
            let plan = schedule(&assembled.snapshot, &config, now);
            outcome = plan.outcomes.first().map(|o| format!("{:?}", o.reason)).unwrap_or_default();
        });
        let mut live = Live::new();
        for o in objs {
            live.push(o).expect("a readable object");
        }
        live.refresh();
        let mut generation = 0;
        let refresh = best(3, || {
            generation += 1;
            live.push(pod(0, generation)).expect("a readable pod");
            live.refresh();
        });
        println!(
            "  {n:>6} PodGroups: assembly {assembly:>10.2?} ({:.2} µs each), cycle {cycle:>10.2?} ({:.2} µs each, {gangs} gang(s), {outcome}), Live after one pod changed {refresh:>10.2?} ({:.2} µs each)",
            per(assembly, n),
            per(cycle, n),
            per(refresh, n)
        );
    }
}
