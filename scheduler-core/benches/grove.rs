//! Grove's objects at their largest: reading a PodGang of 64 pod groups (the subgroup bound) whose
//! pod references fill the API server's 3 MiB (what the scheduler and the webhook's gang lookup
//! read on every change), and expanding PodCliqueSets (what `simulate` writes out: 8 pods, and
//! 10,000 pods in 1,000 scaled PodGangs).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use scheduler_core::dialect::read_object;
use scheduler_core::workload::{expand_admitted, grove};
use serde_json::{Value, json};

/// A PodGang of 64 pod groups, each listing `refs` pods.
fn podgang(refs: usize) -> Value {
    let groups: Vec<Value> = (0..64)
        .map(|g| {
            let pods: Vec<Value> = (0..refs)
                .map(|p| json!({"namespace": "llm", "name": format!("serve-0-c{g:02}-{p:06}")}))
                .collect();
            json!({"name": format!("serve-0-c{g:02}"), "minReplicas": refs.max(1), "podReferences": pods})
        })
        .collect();
    json!({"apiVersion": "scheduler.grove.io/v1alpha1", "kind": "PodGang",
           "metadata": {"name": "serve-0", "namespace": "llm"},
           "spec": {"podgroups": groups,
                    "topologyConstraint": {"packConstraint": {"required": "topology.kubernetes.io/zone"}}}})
}

/// A PodCliqueSet of one replica: a frontend clique and a scaling group of a leader and
/// `workers` workers with `replicas` replicas, one in the base PodGang.
fn pcs(workers: u32, replicas: u32) -> Value {
    let pod = json!({"containers": [{"name": "c", "image": "x",
        "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "16", "memory": "64Gi"}}}]});
    json!({"apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet",
        "metadata": {"name": "serve", "namespace": "llm"},
        "spec": {"replicas": 1, "template": {
            "cliques": [
                {"name": "frontend", "spec": {"roleName": "frontend", "replicas": 1, "podSpec": pod}},
                {"name": "leader", "spec": {"roleName": "leader", "replicas": 1, "podSpec": pod}},
                {"name": "worker", "spec": {"roleName": "worker", "replicas": workers, "podSpec": pod}}],
            "podCliqueScalingGroups": [{"name": "decode", "cliqueNames": ["leader", "worker"],
                                        "replicas": replicas, "minAvailable": 1}]}}})
}

fn bench(c: &mut Criterion) {
    // ~46 bytes a reference: 64 × 1,000 ≈ 3 MiB.
    let big = podgang(1_000);
    let bytes = serde_json::to_vec(&big).unwrap().len();
    assert!(bytes > 2_900_000 && bytes < 3_300_000, "{bytes} bytes");
    assert!(matches!(read_object(&big), Some(Ok(_))));
    let mut group = c.benchmark_group("grove");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("read_podgang_64_groups_3MiB", |b| b.iter(|| read_object(black_box(&big))));
    group.throughput(Throughput::Elements(1));
    let small = podgang(4);
    group.bench_function("read_podgang_64_groups_4_pods", |b| b.iter(|| read_object(black_box(&small))));
    let (serve, wide) = (pcs(2, 2), pcs(9, 1_000));
    assert_eq!(grove::pod_count(&serve).unwrap(), 7);
    assert_eq!(grove::pod_count(&wide).unwrap(), 10_001);
    group.throughput(Throughput::Elements(7));
    group.bench_function("expand_podcliqueset_7_pods", |b| b.iter(|| expand_admitted(black_box(&serve))));
    group.sample_size(10);
    group.throughput(Throughput::Elements(10_001));
    group.bench_function("expand_podcliqueset_10001_pods", |b| b.iter(|| expand_admitted(black_box(&wide))));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
