//! Volcano's `subGroupPolicy` at assembly: what `Cluster::snapshot` (what `kubectl gang status`
//! and `simulate` run, and the scheduler's resolution whenever a gang object or claiming pod
//! changes) pays to group a gang's pods by their labels, against the same gangs and pods with no
//! policy. Two shapes: one gang of 3,840 pods in 60 groups of 64 (near the 64-subgroup bound), and
//! 1,000 gangs of 8 pods in 2 groups of 4 (a Volcano Job's partitions, many tenants).
//!
//! Run: `cargo bench -p scheduler-core --bench partitions`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use scheduler_core::cluster::Cluster;
use serde_json::{Value, json};

fn podgroup(name: &str, min: usize, groups: usize, size: usize, policy: bool) -> Value {
    let mut pg = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"minMember": min}});
    if policy {
        pg["spec"]["subGroupPolicy"] = json!([{"name": "worker", "subGroupSize": size, "minSubGroups": groups,
            "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
            "matchLabelKeys": ["volcano.sh/partition-id"],
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]);
    }
    pg
}

fn pod(gang: &str, i: usize, size: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{gang}-worker-{i}"), "namespace": "ml", "uid": format!("{gang}-{i}"),
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"volcano.sh/task-spec": "worker", "volcano.sh/partition-id": (i / size).to_string()},
                     "annotations": {"scheduling.k8s.io/group-name": gang, "volcano.sh/task-spec": "worker"}},
        "spec": {"schedulerName": "gang-scheduler", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"}})
}

fn cluster(gangs: usize, groups: usize, size: usize, policy: bool) -> Cluster {
    let mut c = Cluster::new();
    for g in 0..gangs {
        let name = format!("pg-{g:04}");
        c.push(podgroup(&name, groups * size, groups, size, policy)).unwrap();
        for i in 0..groups * size {
            c.push(pod(&name, i, size)).unwrap();
        }
    }
    c
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("partitions");
    group.sample_size(20);
    for (label, gangs, groups, size) in
        [("1-gang-3840-pods-60-groups", 1, 60, 64), ("1000-gangs-8-pods-2-groups", 1000, 2, 4)]
    {
        for policy in [false, true] {
            let cl = cluster(gangs, groups, size, policy);
            let a = cl.snapshot();
            assert!(a.problems.is_empty(), "{:?}", a.problems);
            let leaves = a.snapshot.gangs[0].leaves().count();
            assert_eq!(leaves, if policy { groups } else { 0 }, "{label}");
            let name = format!("{label}/{}", if policy { "policy" } else { "none" });
            group.bench_function(name, |b| b.iter(|| black_box(cl.snapshot())));
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
