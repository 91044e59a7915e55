//! Reading a large cluster dump: S4's cluster (4,000 nodes, 100 of them with 8 GPUs, 140,000
//! pods), as `kubectl get -o json|yaml` prints it, through the plugin's reader, the cluster store
//! and snapshot assembly — what every `--cluster` command pays before it computes anything.
//! Target (JSON): ≤ 1.5 s. The cycle on the same shape is `scheduler-core`'s `shapes` bench.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kubectl_gang::input::{Objects, parse_text};
use scheduler_core::cluster::{Assembled, Cluster, Compact};
use serde_json::{Value, json};

fn dump(nodes: usize, pods: usize) -> Value {
    let mut items = Vec::with_capacity(nodes + pods);
    for n in 0..nodes {
        let mut allocatable = json!({"cpu": "64", "memory": "256Gi", "pods": "110"});
        if n < 100 {
            allocatable["nvidia.com/gpu"] = json!("8");
        }
        items.push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{n}"), "labels": {"kubernetes.io/hostname": format!("node-{n}"),
                "topology.kubernetes.io/zone": format!("zone-{}", n % 3), "kube-gang.io/rack": format!("rack-{}", n / 32)}},
            "status": {"allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]}}));
    }
    for p in 0..pods {
        let gang = format!("job-{}", p / 8);
        let bound = p % 10 != 0;
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{gang}-{}", p % 8), "namespace": format!("team-{}", (p / 8) % 40),
                "uid": format!("00000000-0000-0000-0000-{p:012}"), "creationTimestamp": "2026-11-22T08:00:00Z",
                "labels": {"kube-gang.io/gang": gang, "app": "trainer", "batch.kubernetes.io/job-name": gang},
                "annotations": {"kube-gang.io/min-member": "8"}},
            "spec": {"schedulerName": "gang-scheduler", "priorityClassName": "training", "priority": 1000,
                "containers": [{"name": "trainer", "image": "example/trainer:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "200Mi"}}}],
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
            "status": {"phase": if bound { "Running" } else { "Pending" }}});
        if bound {
            pod["spec"]["nodeName"] = json!(format!("node-{}", p % nodes));
        }
        items.push(pod);
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// What `--cluster` does: the text read into compact storage, each object decoded and stored
/// compact in the cluster, then decoded again where assembly converts it.
fn read(text: &str) -> (Cluster<Compact>, Assembled) {
    let mut objects = Objects::default();
    objects.add_text("dump".into(), text).expect("parses");
    let mut cluster = Cluster::compact();
    for s in objects.iter() {
        cluster.push(s.object).expect("stores");
    }
    let assembled = cluster.snapshot();
    (cluster, assembled)
}

/// The objects read whole and held decoded: what reading cost before the cluster kept objects
/// compact (in time; in memory, some 10 to 50 times the text of small objects).
fn read_decoded(text: &str) -> (Cluster, Assembled) {
    let mut cluster = Cluster::new();
    for s in parse_text("dump", text).expect("parses") {
        cluster.push(s.object).expect("stores");
    }
    let assembled = cluster.snapshot();
    (cluster, assembled)
}

/// The JSON read as one tree and its items stored as they are: what reading cost before objects
/// were kept compact (and what it would cost in memory: some 50 times the text of small objects).
fn read_as_one_tree(text: &str) -> (Cluster, Assembled) {
    let mut cluster = Cluster::new();
    let list: Value = serde_json::from_str(text).expect("parses");
    cluster.push(list).expect("stores");
    let assembled = cluster.snapshot();
    (cluster, assembled)
}

fn bench(c: &mut Criterion) {
    let list = dump(4_000, 140_000);
    let as_json = serde_json::to_string(&list).expect("json");
    let as_yaml = serde_norway::to_string(&list).expect("yaml");
    assert_eq!(read(&as_json).1.snapshot.pods.len(), 140_000);
    assert_eq!(read(&as_json).1, read_decoded(&as_json).1, "the same snapshot either way");
    let mut g = c.benchmark_group("read_dump_140k_pods");
    g.sample_size(10);
    // The CLI exits without freeing what it read (see status.rs): drops are not timed.
    g.bench_function("json", |b| b.iter_with_large_drop(|| read(black_box(&as_json))));
    g.bench_function("yaml", |b| b.iter_with_large_drop(|| read(black_box(&as_yaml))));
    g.bench_function("json_decoded", |b| b.iter_with_large_drop(|| read_decoded(black_box(&as_json))));
    g.bench_function("json_one_tree", |b| b.iter_with_large_drop(|| read_as_one_tree(black_box(&as_json))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
