//! Volcano: `scheduling.volcano.sh/v1beta1` `PodGroup` (with per-task `minTaskMember`) and the pod
//! annotation `scheduling.k8s.io/group-name`; a pod's task comes from `volcano.sh/task-spec`.
//!
//! `minTaskMember` becomes one leaf subgroup per task, all required. Volcano's `minMember` also
//! bounds the total; when it exceeds the sum of the task minimums the remainder ("any N more pods
//! of any task") has no per-task form, so the gang is read flat with `minMember` — the total is the
//! stronger guarantee — and the per-task minimums are not enforced.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;
use serde_json::Value;

use super::{Claim, Meta, annotation_path, count_field, min_resources, typed};
use crate::error::FieldError;
use crate::model::{Dialect, Gang, GangKey, Source, SubGroup};

/// The API group.
pub const GROUP: &str = "scheduling.volcano.sh";
/// Pod annotation naming the PodGroup.
pub const ANNOTATION: &str = "scheduling.k8s.io/group-name";
/// Pod annotation naming the Volcano job task.
pub const TASK_ANNOTATION: &str = "volcano.sh/task-spec";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodGroup {
    #[serde(default)]
    spec: Spec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    min_member: i32,
    #[serde(default)]
    min_task_member: BTreeMap<String, i32>,
    min_resources: Option<BTreeMap<String, Quantity>>,
    priority_class_name: Option<String>,
}

pub(crate) fn claim(meta: &Meta<'_>, _pod: &Value) -> Result<Option<Claim>, FieldError> {
    Ok(meta.annotations.get(ANNOTATION).map(|name| Claim {
        dialect: Dialect::Volcano,
        gang: GangKey::new(meta.namespace, name),
        subgroup: meta.annotations.get(TASK_ANNOTATION).map(|t| t.to_string()),
        path: annotation_path(ANNOTATION),
    }))
}

/// Reads a Volcano PodGroup.
pub fn read(obj: &Value) -> Result<Gang, Vec<FieldError>> {
    let meta = Meta::of(obj);
    let pg: PodGroup = typed(obj)?;
    let mut errors = Vec::new();
    let min = count_field("spec.minMember", pg.spec.min_member).map_err(|e| errors.push(e)).unwrap_or(0);
    let mut gang = Gang::new(meta.key(), min, Source { dialect: Dialect::Volcano, kind: "PodGroup".into() });
    gang.created = meta.created();
    gang.uid = meta.uid();
    // Volcano orders and preempts jobs by their PodGroup's class (its job controller copies the
    // Job's `spec.priorityClassName` here).
    gang.priority_class_name = pg.spec.priority_class_name.clone().filter(|c| !c.is_empty());
    match min_resources("spec.minResources", pg.spec.min_resources.as_ref()) {
        Ok(r) => gang.min_resources = r,
        Err(e) => errors.extend(e),
    }
    let mut tasks = Vec::new();
    let mut sum = 0u64;
    for (task, n) in &pg.spec.min_task_member {
        match count_field(&format!("spec.minTaskMember[{task}]"), *n) {
            Ok(0) => {}
            Ok(n) => {
                sum += u64::from(n);
                tasks.push(SubGroup {
                    name: task.clone(),
                    parent: None,
                    min_member: n,
                    pod_floor: 0,
                    topology_preferred: None,
                    topology_key: None,
                });
            }
            Err(e) => errors.push(e),
        }
    }
    if !tasks.is_empty() && sum >= u64::from(min) {
        gang.min_member = u32::try_from(tasks.len()).unwrap_or(u32::MAX);
        gang.subgroups = tasks;
    }
    if errors.is_empty() { Ok(gang) } else { Err(errors) }
}

/// Why a Volcano field naming HyperNode tiers is not evaluated.
const HYPERNODES: &str = "not evaluated: Volcano's HyperNode tiers are not read yet, so the gang is placed without a network-topology bound (kube-gang.io/topology-required on a node label bounds it)";

/// What a Volcano PodGroup asks that the cycle does not evaluate, naming the field:
/// `spec.networkTopology` and `spec.subGroupPolicy` (HyperNode tiers). For `validate`, `simulate`
/// and the webhook.
pub fn warnings(obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for field in ["networkTopology", "subGroupPolicy"] {
        if obj.pointer(&format!("/spec/{field}")).is_some_and(|v| !v.is_null()) {
            out.push(format!("spec.{field}: {HYPERNODES}"));
        }
    }
    out
}

/// What a `batch.volcano.sh` Job asks that the cycle does not evaluate, naming the field:
/// `spec.networkTopology` (copied to its PodGroup by Volcano's controller) and each task's
/// `partitionPolicy`.
pub fn job_warnings(obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if obj.pointer("/spec/networkTopology").is_some_and(|v| !v.is_null()) {
        out.push(format!("spec.networkTopology: {HYPERNODES}"));
    }
    let tasks = obj.pointer("/spec/tasks").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    for (i, t) in tasks.iter().enumerate() {
        if t.get("partitionPolicy").is_some_and(|v| !v.is_null()) {
            out.push(format!("spec.tasks[{i}].partitionPolicy: {HYPERNODES}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hypernode_tier_fields_are_warned_about_by_name() {
        let pg = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ml"},
            "spec": {"minMember": 2, "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                     "subGroupPolicy": [{"name": "workers"}]}});
        let w = warnings(&pg);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("spec.networkTopology: not evaluated")
                && w[1].starts_with("spec.subGroupPolicy: ")
        );
        assert!(warnings(&json!({"spec": {"minMember": 1}})).is_empty());
        let job = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "spec": {"networkTopology": {"mode": "soft"}, "tasks": [
                {"name": "a", "replicas": 1},
                {"name": "b", "replicas": 4, "partitionPolicy": {"totalPartitions": 2, "partitionSize": 2}}]}});
        let w = job_warnings(&job);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[1].starts_with("spec.tasks[1].partitionPolicy: not evaluated"), "{w:?}");
    }
}
