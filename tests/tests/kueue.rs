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
