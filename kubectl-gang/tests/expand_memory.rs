//! `simulate`'s memory follows its input, not the pod count times the template: a 120 KB Job (1,000
//! environment variables) run 2,000 times in parallel was 443 MB resident when every pod was a copy
//! of its template. Measured here with a counting allocator (this binary's only test, so nothing
//! else allocates meanwhile; dhat, as `webhook/benches/memory.rs`): the peak heap of preparing and
//! simulating it.

use kubectl_gang::{input, simulate};
use scheduler_core::cluster::Cluster;
use scheduler_core::{Config, Time};
use serde_json::json;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn job(parallelism: u32) -> input::Sourced {
    let env: Vec<_> = (0..1000).map(|i| json!({"name": format!("V{i}"), "value": "x".repeat(90)})).collect();
    input::Sourced {
        file: "big.json".into(),
        object: json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "big", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
            "spec": {"parallelism": parallelism, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "x", "env": env,
                                "resources": {"requests": {"cpu": "1m"}}}]}}}}),
    }
}

/// Peak heap above what was in use before, in bytes, while preparing and simulating `parallelism`
/// pods of the 120 KB Job on an empty cluster.
fn peak(parallelism: u32) -> usize {
    let sourced = vec![job(parallelism)];
    let now = Time::parse_rfc3339("2026-11-22T09:00:00Z").unwrap();
    let cluster = Cluster::new();
    let _profiler = dhat::Profiler::builder().testing().build();
    let base = dhat::HeapStats::get().curr_bytes;
    let prepared = simulate::prepare(&sourced, "ml", now);
    assert!(prepared.errors.is_empty(), "{:?}", prepared.errors);
    assert_eq!(prepared.pods.len(), parallelism as usize);
    let sim = simulate::simulate(&cluster, &prepared, &Config::default(), now);
    assert_eq!(sim.gangs.len(), 1);
    drop((sim, prepared));
    dhat::HeapStats::get().max_bytes.saturating_sub(base)
}

#[test]
fn a_big_template_run_many_times_costs_its_pods_not_their_copies() {
    let small = peak(200);
    let large = peak(2_000);
    let mib = |b: usize| b as f64 / f64::from(1 << 20);
    println!("peak heap: 200 pods {:.1} MiB, 2,000 pods {:.1} MiB", mib(small), mib(large));
    // 2,000 copies of the template alone would be over 240 MiB (120 KB of JSON each, more as values).
    assert!(large < 64 << 20, "2,000 pods peaked at {:.1} MiB", mib(large));
    // Ten times the pods cost less than ten times the memory of the first tenth plus the template:
    // what grows is the per-pod part (a name, labels, requests), not the template.
    let per_pod = (large - small) / 1_800;
    assert!(per_pod < 32 << 10, "{per_pod} bytes a pod");
}
