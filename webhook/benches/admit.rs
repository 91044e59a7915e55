//! The decision alone: decode an AdmissionReview, apply the core's rules, encode the answer. The
//! `admit/by_size` group times one decision by body size, on the costliest bytes admission keeps
//! (a pod template's annotations: built into the JSON tree, unlike container lists): what
//! `gang_webhook::lanes::SMALL_BODY`, the small lane's limit, is set from.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
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
    // The same PyTorchJob wrapped in an AppWrapper (read twice: as the wrapper's component and
    // as the kind it wraps), and the widest AppWrapper its webhook allows: 8 components (Kueue's
    // pod-set limit), each a JobSet of one replicated job with declared pod sets, checked against
    // the inferred ones.
    let wrapped = json!({"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
        "metadata": {"name": "bert", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"components": [{"template": job}]}});
    let components: Vec<serde_json::Value> = (0..8)
        .map(|i| {
            json!({"template": {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": format!("js-{i}")},
                "spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {
                    "parallelism": 4, "template": template}}}]}},
                "podSets": [{"path": "template.spec.replicatedJobs[0].template.spec.template", "replicas": 8}]})
        })
        .collect();
    let widest = json!({"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
        "metadata": {"name": "wide", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"components": components}});
    let (wrapped, widest) = (body(&wrapped), body(&widest));
    c.bench_function("admit/mutate_appwrapper_pytorchjob", |b| {
        b.iter(|| review(Hook::Mutate, black_box(&wrapped), false))
    });
    c.bench_function("admit/mutate_appwrapper_8_jobsets", |b| {
        b.iter(|| review(Hook::Mutate, black_box(&widest), false))
    });
    // Kinds and shapes added with the dialects of 2026: a LeaderWorkerSet of 4 groups of 8 with
    // subgroups (named as its controller names pods, SHA-1 keys), a Job whose gang minimum is
    // KAI's `batch-min-member`, a Job with Kubernetes 1.37's `spec.scheduling` (its gang is
    // upstream's PodGroup), and a JobSet created with only `generateName` (its gang named from
    // the label its controller writes).
    let lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"},
                     "annotations": {"leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology": "kube-gang.io/rack"}},
        "spec": {"replicas": 4, "leaderWorkerTemplate": {"size": 8,
            "subGroupPolicy": {"subGroupSize": 4},
            "leaderTemplate": template, "workerTemplate": template}}});
    let kai_job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml",
                     "labels": {"kube-gang.io/enabled": "true"}, "annotations": {"kai.scheduler/batch-min-member": "6"}},
        "spec": {"parallelism": 8, "completions": 8, "template": template}});
    let scheduled_job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"parallelism": 8, "completions": 8, "template": template,
                 "scheduling": {"schedulingPolicy": {"gang": {"minCount": 8}}}}});
    let unnamed = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"generateName": "sweep-", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 4, "template": {"spec": {
            "parallelism": 2, "template": template}}}]}});
    for (name, obj) in [
        ("admit/mutate_leaderworkerset_subgroups", &lws),
        ("admit/mutate_job_kai_batch_min_member", &kai_job),
        ("admit/mutate_job_spec_scheduling", &scheduled_job),
        ("admit/mutate_jobset_generate_name", &unnamed),
    ] {
        let (_, summary) = review(Hook::Mutate, &body(obj), false).expect("a review");
        assert!(summary.allowed && summary.patched > 0, "{name}: {summary:?}");
        let sent = body(obj);
        c.bench_function(name, |b| b.iter(|| review(Hook::Mutate, black_box(&sent), false)));
    }
    let (job, gang) = (body(&job), body(&gang));
    c.bench_function("admit/mutate_pytorchjob", |b| b.iter(|| review(Hook::Mutate, black_box(&job), false)));
    c.bench_function("admit/validate_pytorchjob", |b| {
        b.iter(|| review(Hook::Validate, black_box(&job), false))
    });
    c.bench_function("admit/validate_gang", |b| b.iter(|| review(Hook::Validate, black_box(&gang), false)));

    let mut group = c.benchmark_group("admit/by_size");
    for kib in [4usize, 16, 64, 256, 1024] {
        // An opted-in Job whose template annotations fill the body to `kib` KiB.
        let entries = (kib * 1024).saturating_sub(600) / 48;
        let annotations: serde_json::Map<String, serde_json::Value> = (0..entries)
            .map(|i| (format!("example.com/annotation-{i:07}"), json!("value-of-some-length")))
            .collect();
        let object = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "sized", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
            "spec": {"parallelism": 4, "template": {"metadata": {"annotations": annotations},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        let sized = body(&object);
        group.throughput(Throughput::Bytes(sized.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(format!("{kib}KiB")), &sized, |b, sized| {
            b.iter(|| review(Hook::Mutate, black_box(sized), false))
        });
    }
    group.finish();

    // The costliest shape per byte found (webhook/benches/memory.rs): a Volcano Job whose tasks,
    // each read by Volcano's rules and ours, fill the API server's 3 MiB.
    let mut group = c.benchmark_group("admit/volcano_tasks");
    group.sample_size(10);
    for tasks in [1_000usize, 20_000] {
        let list: Vec<serde_json::Value> = (0..tasks)
            .map(|i| {
                json!({"name": format!("t{i:06}"), "replicas": 1,
                       "template": {"spec": {"containers": [{"name": "main", "image": "registry.example/train:1"}]}}})
            })
            .collect();
        let object = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "big", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
            "spec": {"minAvailable": 1, "tasks": list}});
        let sized = body(&object);
        group.throughput(Throughput::Bytes(sized.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(tasks), &sized, |b, sized| {
            b.iter(|| review(Hook::Validate, black_box(sized), false))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
