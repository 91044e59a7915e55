//! Kueue alongside kube-gang, through the front doors: the recipe in `examples/kueue/` is admitted
//! as any other workload (`scheduler_core::admit`, the webhook's and `kubectl gang validate`'s one
//! decision), Kueue's own changes on admission (unsuspending, adding its ResourceFlavor's node
//! labels to the pod template) are allowed as an UPDATE, and the gang is then placed only where
//! Kueue's node selector allows. Kueue's semantics (it suspends a Job at creation and unsuspends
//! it with the flavor's `nodeLabels` merged into the template's nodeSelector) are from
//! kubernetes-sigs/kueue `pkg/controller/jobframework` (podset info merged on start).

use std::path::PathBuf;

use kubectl_gang::input::parse_text;
use kubectl_gang::simulate::{prepare, simulate};
use scheduler_core::cluster::Cluster;
use scheduler_core::{Config, Time, admit};
use serde::Deserialize;
use serde_json::{Value, json};

fn recipe() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/kueue/queued-gang.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let docs: Vec<Value> =
        serde_norway::Deserializer::from_str(&text).map(|d| Value::deserialize(d).unwrap()).collect();
    docs
}

fn job(docs: &[Value]) -> Value {
    docs.iter().find(|d| d["kind"] == "Job").cloned().unwrap()
}

#[test]
fn a_queued_job_is_injected_and_validated_like_any_other() {
    let docs = recipe();
    for doc in &docs {
        let mut object = doc.clone();
        let verdict = admit(&mut object, None, None);
        assert!(verdict.allowed(), "{}: {:?}", doc["kind"], verdict.errors);
        if doc["kind"] != "Job" {
            assert!(verdict.changes.is_empty(), "Kueue's own objects are not ours: {}", doc["kind"]);
        }
    }
    let mut object = job(&docs);
    let verdict = admit(&mut object, None, None);
    assert!(!verdict.changes.is_empty());
    let template = &object["spec"]["template"];
    assert_eq!(template["spec"]["schedulerName"], "gang-scheduler");
    assert_eq!(template["metadata"]["labels"]["kube-gang.io/gang"], "finetune");
    assert_eq!(template["metadata"]["annotations"]["kube-gang.io/min-member"], "4");
    // What Kueue owns is left alone: its queue label and the suspension it admits by.
    assert_eq!(object["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "team-a");
    assert_eq!(object["spec"]["suspend"], true);
}

#[test]
fn kueue_admitting_the_job_is_an_allowed_update() {
    let docs = recipe();
    let mut created = job(&docs);
    assert!(admit(&mut created, None, None).allowed());
    let mut admitted = created.clone();
    admitted["spec"]["suspend"] = json!(false);
    admitted["spec"]["template"]["spec"]["nodeSelector"] = json!({"accelerator": "a100"});
    let verdict = admit(&mut admitted, Some(&created), None);
    assert!(verdict.allowed(), "{:?}", verdict.errors);
    assert!(verdict.changes.is_empty(), "nothing is injected on UPDATE");
    assert!(verdict.warnings.is_empty(), "{:?}", verdict.warnings);
}

#[test]
fn the_admitted_gang_lands_only_where_kueue_s_flavor_allows() {
    let docs = recipe();
    let mut admitted = job(&docs);
    admitted["spec"]["suspend"] = json!(false);
    admitted["spec"]["template"]["spec"]["nodeSelector"] = json!({"accelerator": "a100"});
    let text = serde_json::to_string(&admitted).unwrap();
    let sourced = parse_text("admitted.json", &text).unwrap();
    let now = Time::parse_rfc3339("2026-11-22T09:00:00Z").unwrap();
    let prepared = prepare(&sourced, "ml", now);
    assert!(prepared.errors.is_empty(), "{:?}", prepared.errors);
    let mut cluster = Cluster::new();
    // The h100 nodes are emptier and would be chosen without Kueue's selector.
    for (name, accelerator) in
        [("a100-1", "a100"), ("a100-2", "a100"), ("h100-1", "h100"), ("h100-2", "h100")]
    {
        cluster
            .push(json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"accelerator": accelerator}},
                "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8", "pods": "110"},
                           "conditions": [{"type": "Ready", "status": "True"}]}}))
            .unwrap();
    }
    let sim = simulate(&cluster, &prepared, &Config::default(), now);
    let gang = sim.gangs.iter().find(|g| g.name == "finetune").unwrap();
    assert!(gang.schedulable, "{}", gang.message);
    assert_eq!(gang.placements.len(), 4);
    assert!(gang.placements.iter().all(|p| p.node.starts_with("a100-")), "{:?}", gang.placements);
    // Without room on Kueue's flavor (one a100 node), nothing is placed: all or nothing.
    let mut small = Cluster::new();
    small
        .push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "a100-1", "labels": {"accelerator": "a100"}},
            "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}))
        .unwrap();
    for name in ["h100-1", "h100-2"] {
        small
            .push(json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"accelerator": "h100"}},
                "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8", "pods": "110"},
                           "conditions": [{"type": "Ready", "status": "True"}]}}))
            .unwrap();
    }
    let sim = simulate(&small, &prepared, &Config::default(), now);
    let gang = sim.gangs.iter().find(|g| g.name == "finetune").unwrap();
    assert!(!gang.schedulable && gang.placements.is_empty(), "{gang:?}");
}

/// A Job under Kueue's partial admission, as kubernetes-sigs/kueue's KEP-420 describes it: it asks
/// for 6 pods of 8 GPUs, accepts as few as 2 (`kueue.x-k8s.io/job-min-parallelism`), and keeps its
/// completions equal to its parallelism.
fn partial_job() -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "sweep", "namespace": "ml",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a", "kube-gang.io/enabled": "true"},
            "annotations": {"kueue.x-k8s.io/job-min-parallelism": "2",
                            "kueue.x-k8s.io/job-completions-equal-parallelism": "true"}},
        "spec": {"suspend": true, "parallelism": 6, "completions": 6, "completionMode": "Indexed",
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "w", "image": "w:1",
                "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}}})
}

/// What Kueue's job reconciler writes when it admits `count` pods: the counts, its flavor's node
/// labels, and `suspend: false`, in one update.
fn kueue_admits(job: &Value, count: u32) -> Value {
    let mut admitted = job.clone();
    admitted["spec"]["suspend"] = json!(false);
    admitted["spec"]["parallelism"] = json!(count);
    admitted["spec"]["completions"] = json!(count);
    admitted["spec"]["template"]["spec"]["nodeSelector"] = json!({"accelerator": "a100"});
    admitted
}

fn members(job: &Value) -> (String, String) {
    let a = &job["spec"]["template"]["metadata"]["annotations"];
    (
        a["kube-gang.io/min-member"].as_str().unwrap().into(),
        a["kube-gang.io/total-member"].as_str().unwrap().into(),
    )
}

/// Whether the gang of an admitted `job` is placed whole on four 8-GPU a100 nodes; the errors
/// when `simulate` refuses the Job (it admits it as on create first).
fn placed_on_four_nodes(job: &Value) -> Result<(bool, usize, String), Vec<String>> {
    let text = serde_json::to_string(job).unwrap();
    let sourced = parse_text("admitted.json", &text).unwrap();
    let now = Time::parse_rfc3339("2026-11-22T09:00:00Z").unwrap();
    let prepared = prepare(&sourced, "ml", now);
    if !prepared.errors.is_empty() {
        return Err(prepared.errors);
    }
    let mut cluster = Cluster::new();
    for i in 0..4 {
        cluster
            .push(json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": format!("a100-{i}"), "labels": {"accelerator": "a100"}},
                "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8", "pods": "110"},
                           "conditions": [{"type": "Ready", "status": "True"}]}}))
            .unwrap();
    }
    let sim = simulate(&cluster, &prepared, &Config::default(), now);
    let gang = sim.gangs.iter().find(|g| g.name == "sweep").unwrap();
    Ok((gang.schedulable, gang.placements.len(), gang.message.clone()))
}

#[test]
fn partial_admission_makes_the_gang_what_kueue_admitted() {
    let mut created = partial_job();
    assert!(admit(&mut created, None, None).allowed());
    assert_eq!(members(&created), ("6".into(), "6".into()));

    // Kueue admits 4 of the 6: the template follows, in the same update.
    let mut admitted = kueue_admits(&created, 4);
    let verdict = admit(&mut admitted, Some(&created), None);
    assert!(verdict.allowed(), "{:?}", verdict.errors);
    assert_eq!(members(&admitted), ("4".into(), "4".into()));
    assert_eq!(verdict.changes.len(), 2, "the mutating hook's patch: {:?}", verdict.changes);
    assert!(verdict.changes.iter().all(|c| c.path.starts_with("/spec/template/metadata/annotations/")));
    // The four admitted pods are the whole gang: placed on the four nodes there are.
    let (schedulable, placed, message) = placed_on_four_nodes(&admitted).unwrap();
    assert!(schedulable && placed == 4, "{message}");
    // Without following the count, the gang would wait for members that never come: admission
    // (which `simulate` runs first) names why.
    let stale = kueue_admits(&created, 4);
    let errors = placed_on_four_nodes(&stale).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].ends_with(
            "spec.template.metadata.annotations[kube-gang.io/min-member]: 6 exceeds the 4 pods the Job runs at once: the gang can never be satisfied"
        ),
        "{errors:?}"
    );

    // Kueue evicts it: suspends it, then puts the original counts back while it is suspended.
    let mut suspended = admitted.clone();
    suspended["spec"]["suspend"] = json!(true);
    assert!(
        admit(&mut suspended, Some(&admitted), None).changes.is_empty(),
        "a running Job's template is immutable"
    );
    let mut restored = suspended.clone();
    restored["spec"]["parallelism"] = json!(6);
    restored["spec"]["completions"] = json!(6);
    assert!(admit(&mut restored, Some(&suspended), None).allowed());
    assert_eq!(members(&restored), ("6".into(), "6".into()));

    // Had the counts come back in the suspending update itself (template then immutable), the next
    // admission still follows: min-member was the whole gang.
    let mut late = suspended.clone();
    late["spec"]["parallelism"] = json!(6);
    late["spec"]["completions"] = json!(6);
    let mut readmitted = kueue_admits(&late, 3);
    assert!(admit(&mut readmitted, Some(&late), None).allowed());
    assert_eq!(members(&readmitted), ("3".into(), "3".into()));
}

#[test]
fn a_min_member_the_user_chose_stays_unless_kueue_admits_fewer() {
    let mut created = partial_job();
    created["spec"]["template"]["metadata"] = json!({"annotations": {"kube-gang.io/min-member": "3"}});
    assert!(admit(&mut created, None, None).allowed());
    assert_eq!(members(&created), ("3".into(), "6".into()));
    let mut four = kueue_admits(&created, 4);
    assert!(admit(&mut four, Some(&created), None).allowed());
    assert_eq!(members(&four), ("3".into(), "4".into()));
    let mut two = kueue_admits(&created, 2);
    assert!(admit(&mut two, Some(&created), None).allowed());
    assert_eq!(members(&two), ("2".into(), "2".into()));
}

#[test]
fn without_partial_admission_an_update_changes_no_counts() {
    let mut created = partial_job();
    created["metadata"]["annotations"] = json!({});
    assert!(admit(&mut created, None, None).allowed());
    let mut admitted = kueue_admits(&created, 4);
    let verdict = admit(&mut admitted, Some(&created), None);
    assert!(verdict.changes.is_empty(), "{:?}", verdict.changes);
    assert_eq!(members(&admitted), ("6".into(), "6".into()));
}
