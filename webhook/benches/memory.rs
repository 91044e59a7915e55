//! Heap per AdmissionReview for the largest legal objects of issue 16: a Job with 90,000 env vars, a
//! PyTorchJob with 30,000 replica specs and a JobSet with 12,000 replicated jobs, each opted in;
//! and, the worst case for the pruned reader, a Job whose pod template carries 3 MiB of
//! tolerations, which admission reads and so are built into the JSON tree; and a Volcano Job of
//! ~20,000 tasks, every one of which Volcano's rules (and so ours) read.
//! The PyTorchJob's types are not Master or Worker, so it is denied (eight types named, the rest
//! counted) and nothing is patched: its answer is bounded, not a patch per type. The JobSet has more
//! replicated jobs than a gang has subgroups, so it too is denied with one error. None of the bulk is
//! built into the JSON tree (`gang_webhook::pruned`): not the Job's env vars, not the values of the
//! PyTorchJob's refused replica types, not the JobSet's jobs past the 65th.
//!
//! For each object and hook, one decision runs under dhat's heap profiler (this bench's global
//! allocator; nothing else in the workspace uses it) and reports the peak heap above what was live
//! before the call (the request body is already in memory), the bytes allocated in total, and the
//! size of the answer. Then the same decision runs three times without the profiler and reports the
//! wall time range.
//!
//! `cargo bench -p gang-webhook --bench memory`

use std::time::Instant;

use gang_webhook::admission::{Hook, review};
use serde_json::{Value, json};

#[path = "../tests/support/mod.rs"]
mod support;
use support::{job_with_env, job_with_tolerations, jobset_with_jobs, pytorchjob_with_roles};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn body(object: &Value) -> Vec<u8> {
    let kind = object["kind"].as_str().unwrap_or_default();
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": kind},
                    "resource": {"group": "", "version": "v1", "resource": "objects"},
                    "userInfo": {"username": "admin"}, "operation": "CREATE",
                    "namespace": "ml", "name": "big", "object": object, "dryRun": false}}))
    .unwrap_or_default()
}

/// `make(n)` with the largest `n` whose JSON is under the API server's 3 MiB request limit.
fn largest(make: impl Fn(usize) -> Value, probe: usize) -> Value {
    let size = |v: &Value| serde_json::to_vec(v).map_or(0, |b| b.len());
    let n = probe * (3 * 1024 * 1024 - 4096) / size(&make(probe)).max(1);
    make(n)
}

/// A Volcano `batch.volcano.sh` Job of `n` one-replica tasks (Volcano's admission reads every
/// task: names unique, `minAvailable` within the replicas), opted in.
fn vcjob_with_tasks(n: usize) -> Value {
    let tasks: Vec<Value> = (0..n)
        .map(|i| {
            json!({"name": format!("t{i:06}"), "replicas": 1,
                   "template": {"spec": {"containers": [{"name": "main", "image": "registry.example/train:1"}]}}})
        })
        .collect();
    support::opted_in(("batch.volcano.sh/v1alpha1", "Job"), json!({"minAvailable": 1, "tasks": tasks}))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let cases = [
        ("Job, 90k env vars", job_with_env(90_000)),
        ("PyTorchJob, 30k replica specs", pytorchjob_with_roles(30_000)),
        ("JobSet, 12k replicated jobs", jobset_with_jobs(12_000)),
        ("Job, 3 MiB of tolerations", largest(job_with_tolerations, 1_000)),
        ("Volcano Job, 3 MiB of tasks", largest(vcjob_with_tasks, 1_000)),
    ];
    println!(
        "{:<32} {:<8} {:>9} {:>10} {:>11} {:>10} {:>16}",
        "object", "hook", "body MiB", "peak MiB", "alloc MiB", "answer KiB", "time ms (3 runs)"
    );
    for (name, object) in cases {
        let body = body(&object);
        drop(object);
        for hook in [Hook::Mutate, Hook::Validate] {
            let (peak, total, answer) = {
                let _profiler = dhat::Profiler::builder().testing().build();
                let before = dhat::HeapStats::get();
                let answer = review(hook, &body, false).map(|(r, _)| serde_json::to_vec(&r));
                let after = dhat::HeapStats::get();
                let answer = match answer {
                    Ok(Ok(bytes)) => bytes.len(),
                    _ => 0,
                };
                (
                    after.max_bytes.saturating_sub(before.curr_bytes),
                    after.total_bytes - before.total_bytes,
                    answer,
                )
            };
            let mut times = Vec::new();
            for _ in 0..3 {
                let started = Instant::now();
                let out = review(hook, &body, false).map(|(r, _)| serde_json::to_vec(&r));
                times.push(started.elapsed().as_secs_f64() * 1000.0);
                drop(std::hint::black_box(out));
            }
            let (lo, hi) = times.iter().fold((f64::MAX, 0.0f64), |(lo, hi), t| (lo.min(*t), hi.max(*t)));
            println!(
                "{:<32} {:<8} {:>9.2} {:>10.1} {:>11.1} {:>10.1} {:>16}",
                name,
                hook.as_str(),
                mib(body.len() as u64),
                mib(peak as u64),
                mib(total),
                answer as f64 / 1024.0,
                format!("{lo:.0}–{hi:.0}"),
            );
        }
    }
}
