//! The decision alone: decode an AdmissionReview, apply the core's rules, encode the answer.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use gang_webhook::admission::{Hook, review};
use serde_json::json;

fn bench(c: &mut Criterion) {
    let template = json!({"spec": {"containers": [{"name": "pytorch", "image": "x",
        "resources": {"limits": {"nvidia.com/gpu": 8}, "requests": {"cpu": "32", "memory": "256Gi"}}}]}});
    let job = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template},
                                         "Worker": {"replicas": 31, "template": template}}}});
    let gang = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"minMember": 2, "subGroups": [{"name": "prefill", "minMember": 2}, {"name": "decode", "minMember": 4}]}});
    let body = |obj: &serde_json::Value| {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "CREATE", "namespace": "ml", "object": obj}}))
        .unwrap()
    };
    let (job, gang) = (body(&job), body(&gang));
    c.bench_function("admit/mutate_pytorchjob", |b| b.iter(|| review(Hook::Mutate, black_box(&job), false)));
    c.bench_function("admit/validate_pytorchjob", |b| {
        b.iter(|| review(Hook::Validate, black_box(&job), false))
    });
    c.bench_function("admit/validate_gang", |b| b.iter(|| review(Hook::Validate, black_box(&gang), false)));
}

criterion_group!(benches, bench);
criterion_main!(benches);
