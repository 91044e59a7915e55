//! Volcano: `scheduling.volcano.sh/v1beta1` `PodGroup` (with per-task `minTaskMember`) and the pod
//! annotation `scheduling.k8s.io/group-name`; a pod's task comes from `volcano.sh/task-spec`.
//!
//! `minTaskMember` becomes one leaf subgroup per task, all required, with `minMember` as the
//! gang's pod floor — as Volcano's scheduler holds a job to its task minimums only when
//! `minMember` is at least their sum (`CheckTaskReady`, `CheckTaskValid`: below it, the per-task
//! minimums are skipped and only `minMember` counts, so the gang is read flat).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;
use serde_json::Value;

use super::{Claim, Meta, annotation_path, count_field, min_resources, typed};
use crate::read::error::FieldError;
use crate::read::model::{Admission, Dialect, Gang, GangKey, Source, SubGroup};

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
    network_topology: Option<NetworkTopology>,
    sub_group_policy: Option<Vec<SubGroupPolicy>>,
}

/// One `spec.subGroupPolicy` entry (Volcano's `SubGroupPolicySpec`).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SubGroupPolicy {
    #[serde(default)]
    name: String,
    sub_group_size: Option<i32>,
    min_sub_groups: Option<i32>,
    label_selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    #[serde(default)]
    match_label_keys: Option<Vec<String>>,
    network_topology: Option<NetworkTopology>,
}

/// How many `subGroupPolicy` entries a PodGroup may have here: each is an inner subgroup, and a
/// gang's whole tree holds at most [`crate::read::tree::MAX_SUBGROUPS`].
pub const MAX_POLICIES: usize = 16;

/// The pod label Volcano's job controller puts each pod's partition index in (`index /
/// partitionSize`), and the key of the `subGroupPolicy` it writes for a task's
/// `partitionPolicy`.
pub const PARTITION_LABEL: &str = "volcano.sh/partition-id";

/// `spec.networkTopology`: the HyperNode tier a job may not cross (`hard`), or tries not to
/// (`soft`).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NetworkTopology {
    #[serde(default)]
    mode: Option<String>,
    highest_tier_allowed: Option<i64>,
    #[serde(default)]
    highest_tier_name: Option<String>,
}

/// The phase Volcano's scheduler gives a PodGroup it admits to be scheduled. Volcano's job
/// controller creates a Job's pods only once the Job's PodGroup has a phase other than `Pending`
/// (`syncJob` in its `pkg/controllers/job`), and Kubeflow's operators wait the same way for a
/// Volcano PodGroup (`DelayPodCreationDueToPodGroup`): without a scheduler that moves it, such
/// a gang never gets its pods.
pub const PHASE_INQUEUE: &str = "Inqueue";

/// Whether the Volcano PodGroup `pg` (as the API serves it) waits for this scheduler to move it
/// to [`PHASE_INQUEUE`]: it is a Volcano Job's (its controller owner reference), its phase is
/// unset or `Pending`, it is not being deleted, and it is opted in to kube-gang as its Job is —
/// by its own `kube-gang.io/enabled` label (Volcano's job controller copies the Job's labels onto
/// its PodGroup), else by its namespace's (`namespace_enabled`, that label's value on the
/// namespace). PodGroups Volcano's controller makes for plain pods (a Deployment's), and those of
/// other operators, are left to Volcano's scheduler: their pods exist already, or are Volcano's.
/// Volcano's scheduler moves only what its `enqueue` action admits by queue capacity; kube-gang
/// admits at once, as Volcano does with that action turned off, and gangs then wait with their
/// pods in the cycle.
pub fn awaits_enqueue(pg: &Value, namespace_enabled: Option<&str>) -> bool {
    admission(pg).is_some_and(|a| a.waiting() && a.opted_in(namespace_enabled))
}

/// The Kubeflow training-operator kinds whose Volcano PodGroup holds back their pods: the
/// operator creates a job's pods only once its PodGroup's phase is neither unset nor `Pending`
/// (`VolcanoControl.DelayPodCreationDueToPodGroup`, with `--gang-scheduler-name=volcano`).
pub const KUBEFLOW_WAITING: &[&str] = &["PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob"];

/// What a Volcano PodGroup whose controller waits for its admission says of it
/// ([`crate::read::model::Gang::admission`]): a Volcano Job's, or a Kubeflow training job's
/// ([`KUBEFLOW_WAITING`]); `None` for any other.
pub fn admission(pg: &Value) -> Option<Admission> {
    let owners = pg.pointer("/metadata/ownerReferences").and_then(Value::as_array);
    let controller = owners.into_iter().flatten().find_map(|o| {
        let kind = o.get("kind").and_then(Value::as_str)?;
        let group = crate::read::object::group_of(o.get("apiVersion").and_then(Value::as_str)?);
        // The training operator's own version: mpi-operator's `kubeflow.org/v2beta1` MPIJob never
        // waits for its PodGroup (and names Volcano's scheduler on every pod).
        let version = o.get("apiVersion").and_then(Value::as_str)?;
        let waits = (group == "batch.volcano.sh" && kind == "Job")
            || (version == "kubeflow.org/v1" && KUBEFLOW_WAITING.contains(&kind));
        (o.get("controller").and_then(Value::as_bool) == Some(true) && waits).then_some(kind)
    })?;
    let by_kubeflow = controller != "Job";
    let label = pg.pointer("/metadata/labels").and_then(|l| l.get(crate::read::labels::LABEL_ENABLED));
    Some(Admission {
        phase: pg.pointer("/status/phase").and_then(Value::as_str).unwrap_or("").to_string(),
        enabled: label.and_then(Value::as_str).map(String::from),
        deleting: pg.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()),
        kubeflow: by_kubeflow.then(|| controller.to_string()),
    })
}

pub(crate) fn claim(meta: &Meta<'_>, _pod: &Value) -> Result<Option<Claim>, FieldError> {
    // The task: its annotation, else its label (Volcano's `getTaskRole` reads both, in turn).
    let task = meta.annotations.get(TASK_ANNOTATION).filter(|t| !t.is_empty());
    let task = task.or_else(|| meta.labels.get(TASK_ANNOTATION).filter(|t| !t.is_empty()));
    Ok(meta.annotations.get(ANNOTATION).map(|name| Claim {
        dialect: Dialect::Volcano,
        gang: GangKey::new(meta.namespace, name),
        subgroup: task.map(str::to_string),
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
    if let Some(admitted) = admission(obj).filter(Admission::waiting) {
        gang.admission = Some(Box::new(admitted));
    }
    // Volcano orders and preempts jobs by their PodGroup's class (its job controller copies the
    // Job's `spec.priorityClassName` here).
    gang.priority_class_name = pg.spec.priority_class_name.clone().filter(|c| !c.is_empty());
    if let Some(t) = &pg.spec.network_topology {
        network_topology(t, &mut gang, &mut errors);
    }
    match min_resources("spec.minResources", pg.spec.min_resources.as_ref()) {
        Ok(r) => gang.min_resources = r,
        Err(e) => errors.extend(e),
    }
    let mut tasks = Vec::new();
    let mut sum = 0u64;
    for (task, n) in &pg.spec.min_task_member {
        match count_field(&format!("spec.minTaskMember[{task}]"), *n) {
            // A task that needs none of its pods still has them: a subgroup that needs none.
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
    // (A `minMember` of 0 keeps the tasks' minimums, as before Volcano's rule was read: it asks
    // for no gang at all there.)
    if sum > 0 && (sum <= u64::from(min) || min == 0) {
        gang.pod_floor = if sum < u64::from(min) { min } else { 0 };
        gang.min_member = u32::try_from(tasks.len()).unwrap_or(u32::MAX);
        gang.subgroups = tasks;
    }
    let policies = pg.spec.sub_group_policy.as_deref().unwrap_or(&[]);
    let made = partitions(policies, &gang.subgroups, &mut errors);
    gang.partitioning = (!made.is_empty()).then(|| Box::new(made));
    if errors.is_empty() { Ok(gang) } else { Err(errors) }
}

/// The task whose pods a policy partitions: a selector of exactly `volcano.sh/task-spec: <task>`
/// (what Volcano's job controller writes for a task's `partitionPolicy`) naming one of `tasks`.
fn task_of<'t>(
    selector: Option<&crate::read::model::LabelSelector>,
    tasks: &'t [SubGroup],
) -> Option<&'t str> {
    let s = selector?;
    if !s.match_expressions.is_empty() || s.match_labels.len() != 1 {
        return None;
    }
    let task = s.match_labels.get(TASK_ANNOTATION)?;
    tasks.iter().find(|t| t.name == *task).map(|t| t.name.as_str())
}

/// `spec.subGroupPolicy` as [`Partitioning`]s, as Volcano's scheduler reads it: `subGroupSize`
/// (default 1) pods make a group ready, `minSubGroups` (default 0) groups must be, `networkTopology`
/// bounds each group (`hard` with `highestTierAllowed`: required; `soft`: preferred). A policy
/// partitioning one task of `tasks` (the PodGroup's `minTaskMember` read as subgroups) takes that
/// task's place in the tree; beside task subgroups, a policy of any other selector is not
/// evaluated (its pods would count in two places: [`warnings`] says so).
fn partitions(
    policies: &[SubGroupPolicy],
    tasks: &[SubGroup],
    errors: &mut Vec<FieldError>,
) -> Vec<crate::read::model::Partitioning> {
    if policies.len() > MAX_POLICIES {
        errors.push(FieldError::new(
            "spec.subGroupPolicy",
            format!("has {} entries; a gang is read with at most {MAX_POLICIES}", policies.len()),
        ));
        return Vec::new();
    }
    let mut out: Vec<crate::read::model::Partitioning> = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, p) in policies.iter().enumerate() {
        let path = format!("spec.subGroupPolicy[{i}]");
        let before = errors.len();
        // (An empty name is one Volcano accepts; two alike would share one count there.)
        if !names.insert(p.name.as_str()) {
            errors.push(FieldError::new(format!("{path}.name"), format!("Duplicate value: {:?}", p.name)));
        }
        let size = match p.sub_group_size {
            None => 1,
            Some(n) if n >= 1 => n.unsigned_abs(),
            Some(n) => {
                errors.push(FieldError::new(
                    format!("{path}.subGroupSize"),
                    format!("must be greater than or equal to 1, got {n}"),
                ));
                1
            }
        };
        let min = count_field(&format!("{path}.minSubGroups"), p.min_sub_groups.unwrap_or(0))
            .map_err(|e| errors.push(e))
            .unwrap_or(0);
        // Each group needed is a subgroup (a placeholder until its pods exist): past the bound
        // of a gang's tree it could never be held.
        if min as usize > crate::read::tree::MAX_SUBGROUPS {
            errors.push(FieldError::new(
                format!("{path}.minSubGroups"),
                format!(
                    "{min} groups cannot be held: a gang has at most {} subgroups",
                    crate::read::tree::MAX_SUBGROUPS
                ),
            ));
        }
        let selector = p
            .label_selector
            .as_ref()
            .map(|s| crate::read::volume::selector(s, &format!("{path}.labelSelector"), errors));
        let keys = p.match_label_keys.clone().unwrap_or_default();
        let mut group =
            Gang::new(GangKey::new("", ""), 0, Source { dialect: Dialect::Volcano, kind: String::new() });
        if let Some(t) = &p.network_topology {
            let mut errs = Vec::new();
            network_topology(t, &mut group, &mut errs);
            errors.extend(
                errs.into_iter()
                    .map(|e| FieldError::new(e.path.replacen("spec.", &format!("{path}."), 1), e.message)),
            );
        }
        if errors.len() > before {
            continue;
        }
        let task = task_of(selector.as_ref(), tasks).map(str::to_string);
        // Beside task subgroups only a task's own partitions have a place in the tree, one policy
        // a task (a second is said: `warnings`).
        if (!tasks.is_empty() && task.is_none()) || (task.is_some() && out.iter().any(|o| o.task == task)) {
            continue;
        }
        out.push(crate::read::model::Partitioning {
            name: p.name.clone(),
            task,
            size,
            min,
            selector,
            keys,
            topology_key: group.topology_key,
            topology_preferred: group.topology_preferred,
        });
    }
    out
}

/// A PodGroup's `networkTopology` as levels ([`crate::read::hypernode`]), as Volcano's scheduler reads
/// it (`IsHardTopologyMode`, `jobSoftTopologyPreferredTier`): `hard` (the CRD's default mode) with
/// `highestTierAllowed` t requires the gang within one tier-t HyperNode; `soft` with t prefers one
/// tier-t HyperNode. Without `highestTierAllowed` Volcano sets no tier bound (the Job CRD defaults
/// it to 1, which a Job's expansion applies; a PodGroup's has no default), so nothing is required;
/// in `soft` mode tier 1 is preferred, as low as it packs.
///
/// `highestTierName` names a tier by the HyperNodes' `tierName` instead; it becomes a tier once
/// the cluster's HyperNodes are known ([`crate::read::model::Gang::tier_name`]), as Volcano's
/// session translates it (`translateHighestTierNameToAllowed`).
fn network_topology(t: &NetworkTopology, gang: &mut Gang, errors: &mut Vec<FieldError>) {
    let mode = t.mode.as_deref().unwrap_or("hard");
    if !matches!(mode, "hard" | "soft") {
        errors.push(FieldError::new(
            "spec.networkTopology.mode",
            format!("Unsupported value: {mode:?}: supported values: \"hard\", \"soft\""),
        ));
        return;
    }
    if let Some(name) = t.highest_tier_name.as_deref().filter(|n| !n.is_empty()) {
        if t.highest_tier_allowed.is_some() {
            errors.push(FieldError::new(
                "spec.networkTopology",
                "HighestTierAllowed and HighestTierName cannot be set simultaneously",
            ));
            return;
        }
        gang.tier_name =
            Some(Box::new(crate::read::model::TierName { name: name.to_string(), soft: mode == "soft" }));
        return;
    }
    let tier = match t.highest_tier_allowed.map(u32::try_from) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => {
            errors.push(FieldError::new(
                "spec.networkTopology.highestTierAllowed",
                format!(
                    "must be greater than or equal to 0, got {}",
                    t.highest_tier_allowed.unwrap_or_default()
                ),
            ));
            return;
        }
    };
    if mode == "hard" {
        gang.topology_key = tier.map(crate::read::hypernode::key_of);
    } else {
        gang.topology_preferred = Some(crate::read::hypernode::key_of(tier.unwrap_or(1)));
    }
}

/// What a Volcano PodGroup asks that the cycle does not evaluate, naming the field: a
/// `subGroupPolicy` entry beside `minTaskMember` subgroups that partitions no single task (its
/// pods would count toward two subgroups), a policy's tier named by `highestTierName` (not
/// resolved per subgroup), a policy without `matchLabelKeys` (Volcano groups no pod by it), and
/// the queue. For `validate`, `simulate` and the webhook.
pub fn warnings(obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let policies =
        obj.pointer("/spec/subGroupPolicy").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let tasks = read(obj).map(|g| g.subgroups).unwrap_or_default();
    let mut partitioned = std::collections::BTreeSet::new();
    for (i, p) in policies.iter().enumerate().take(MAX_POLICIES) {
        let Ok(policy) = serde_json::from_value::<SubGroupPolicy>(p.clone()) else { continue };
        let selector =
            policy.label_selector.as_ref().map(|s| crate::read::volume::selector(s, "", &mut Vec::new()));
        let task = task_of(selector.as_ref(), &tasks);
        if !tasks.is_empty() && task.is_none() {
            out.push(format!(
                "spec.subGroupPolicy[{i}]: not evaluated: beside spec.minTaskMember (whose sum is within minMember) only a policy whose labelSelector is exactly {TASK_ANNOTATION}: <a task with a minimum> is read (its pods would count toward two subgroups)"
            ));
            continue;
        }
        if let Some(t) = task
            && !partitioned.insert(t)
        {
            out.push(format!(
                "spec.subGroupPolicy[{i}]: not evaluated: an earlier policy groups task {t:?}'s pods, and only one policy a task is read (Volcano tries this one for pods missing the earlier one's keys and holds its minSubGroups too; here such pods are the task's ungrouped pods)"
            ));
            continue;
        }
        if policy.match_label_keys.as_ref().is_none_or(Vec::is_empty) {
            out.push(format!(
                "spec.subGroupPolicy[{i}].matchLabelKeys: empty: Volcano groups no pod by this policy (each pod stays in the gang's own group)"
            ));
        }
        if policy
            .network_topology
            .as_ref()
            .and_then(|t| t.highest_tier_name.as_deref())
            .is_some_and(|n| !n.is_empty())
        {
            out.push(format!(
                "spec.subGroupPolicy[{i}].networkTopology.highestTierName: not evaluated: a tier named per subgroup is not resolved, so each group's pods are placed without this bound (highestTierAllowed is)"
            ));
        }
    }
    out.extend(queue_warning(obj));
    out
}

/// `spec.queue` naming a queue other than Volcano's `default`: Volcano admits a PodGroup only
/// within its queue's capacity (and never into a queue that does not exist); kube-gang has none.
fn queue_warning(obj: &Value) -> Option<String> {
    let queue =
        obj.pointer("/spec/queue").and_then(Value::as_str).filter(|q| !q.is_empty() && *q != "default")?;
    Some(format!(
        "spec.queue: not evaluated: kube-gang has no queues, so {queue:?}'s capacity and state do not hold the gang back"
    ))
}

/// What a `batch.volcano.sh` Job asks that the cycle does not evaluate, naming the field: a
/// task's NUMA `topologyPolicy`, a partition's tier named by `highestTierName`, the queue.
pub fn job_warnings(obj: &Value) -> Vec<String> {
    let mut out: Vec<String> = queue_warning(obj).into_iter().collect();
    let tasks = obj.pointer("/spec/tasks").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    for (i, t) in tasks.iter().enumerate() {
        // NUMA placement by Volcano's numa-aware plugin: kube-gang places by node, not by NUMA
        // zone (`none` asks for nothing).
        if let Some(policy) =
            t.get("topologyPolicy").and_then(Value::as_str).filter(|p| !p.is_empty() && *p != "none")
        {
            out.push(format!(
                "spec.tasks[{i}].topologyPolicy: not evaluated: {policy:?} NUMA placement is left to the kubelet's topology manager; kube-gang chooses nodes, not NUMA zones"
            ));
        }
        if t.pointer("/partitionPolicy/networkTopology/highestTierName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty())
        {
            out.push(format!(
                "spec.tasks[{i}].partitionPolicy.networkTopology.highestTierName: not evaluated: a tier named per partition is not resolved, so each partition's pods are placed without this bound (highestTierAllowed is)"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pending_podgroup_opted_in_awaits_enqueue() {
        let pg = |labels: Value, status: Value| {
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "pg", "namespace": "ml", "labels": labels, "ownerReferences": [
                    {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "pg", "uid": "j",
                     "controller": true}]},
                "spec": {"minMember": 2}, "status": status})
        };
        let on = json!({"kube-gang.io/enabled": "true"});
        // As Volcano's job controller makes it (no status yet), and as its scheduler leaves it.
        assert!(awaits_enqueue(&pg(on.clone(), Value::Null), None));
        assert!(awaits_enqueue(&pg(on.clone(), json!({"phase": "Pending"})), None));
        for phase in ["Inqueue", "Running", "Unknown", "Completed"] {
            assert!(!awaits_enqueue(&pg(on.clone(), json!({"phase": phase})), None), "{phase}");
        }
        // Opted in by the namespace; its own label wins either way, as for the Job it came from.
        assert!(awaits_enqueue(&pg(json!({}), Value::Null), Some("true")));
        assert!(!awaits_enqueue(&pg(json!({}), Value::Null), None));
        assert!(!awaits_enqueue(&pg(json!({}), Value::Null), Some("false")));
        assert!(!awaits_enqueue(&pg(json!({"kube-gang.io/enabled": "false"}), Value::Null), Some("true")));
        assert!(!awaits_enqueue(&pg(json!({"kube-gang.io/enabled": "yes"}), Value::Null), None));
        // Not a Volcano Job's: one Volcano's controller made for a Deployment's pods, or by hand.
        let mut plain = pg(on.clone(), Value::Null);
        plain["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "r", "controller": true}]);
        assert!(!awaits_enqueue(&plain, Some("true")));
        plain["metadata"].as_object_mut().unwrap().remove("ownerReferences");
        assert!(!awaits_enqueue(&plain, Some("true")));
        let mut going = pg(on, Value::Null);
        going["metadata"]["deletionTimestamp"] = json!("2026-11-27T10:00:00Z");
        assert!(!awaits_enqueue(&going, None), "a PodGroup being deleted is left alone");
        // A Kubeflow training job's (training-operator with Volcano as its gang scheduler holds
        // the pods back the same way): in an opted-in namespace only — the operator copies the
        // job's annotations, not its labels.
        let mut kubeflow = pg(json!({}), Value::Null);
        kubeflow["metadata"]["ownerReferences"] = json!([{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "name": "pg", "uid": "p", "controller": true}]);
        assert!(awaits_enqueue(&kubeflow, Some("true")));
        assert!(!awaits_enqueue(&kubeflow, None));
        assert_eq!(admission(&kubeflow).unwrap().kubeflow.as_deref(), Some("PyTorchJob"));
        // mpi-operator's MPIJob (`kubeflow.org/v2beta1`) never waits for its PodGroup and names
        // Volcano's scheduler on its pods: left alone.
        kubeflow["metadata"]["ownerReferences"][0]["kind"] = json!("MPIJob");
        assert!(awaits_enqueue(&kubeflow, Some("true")), "training-operator's v1 MPIJob waits");
        kubeflow["metadata"]["ownerReferences"][0]["apiVersion"] = json!("kubeflow.org/v2beta1");
        assert!(!awaits_enqueue(&kubeflow, Some("true")));
        // Not one of the training operator's kinds (a TrainJob's JobSet, say): left alone.
        kubeflow["metadata"]["ownerReferences"][0]["apiVersion"] = json!("kubeflow.org/v1");
        kubeflow["metadata"]["ownerReferences"][0]["kind"] = json!("TrainJob");
        assert!(!awaits_enqueue(&kubeflow, Some("true")));
    }

    #[test]
    fn network_topology_is_the_gangs_hypernode_level() {
        let pg = |t: Value| {
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": 2, "networkTopology": t}})
        };
        let g = read(&pg(json!({"mode": "hard", "highestTierAllowed": 2}))).unwrap();
        assert_eq!(
            (g.topology_key.as_deref(), g.topology_preferred),
            (Some("volcano.sh/hypernode-tier-2"), None)
        );
        let g = read(&pg(json!({"mode": "hard"}))).unwrap();
        assert_eq!((g.topology_key, g.topology_preferred), (None, None), "no tier: no bound, as in Volcano");
        let g = read(&pg(json!({"mode": "soft", "highestTierAllowed": 3}))).unwrap();
        assert_eq!(
            (g.topology_key, g.topology_preferred.as_deref()),
            (None, Some("volcano.sh/hypernode-tier-3"))
        );
        let g = read(&pg(json!({"mode": "soft"}))).unwrap();
        assert_eq!(g.topology_preferred.as_deref(), Some("volcano.sh/hypernode-tier-1"));
        let e = read(&pg(json!({"mode": "strict"}))).unwrap_err();
        assert_eq!(e[0].path, "spec.networkTopology.mode");
        let e = read(&pg(json!({"highestTierAllowed": 1, "highestTierName": "spine"}))).unwrap_err();
        assert_eq!(e[0].path, "spec.networkTopology");
    }

    #[test]
    fn hypernode_tier_fields_are_warned_about_by_name() {
        let pg = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ml"},
            "spec": {"minMember": 2, "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                     "subGroupPolicy": [{"name": "workers"}]}});
        let w = warnings(&pg);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("spec.subGroupPolicy[0].matchLabelKeys: empty"), "{w:?}");
        let queued = |q: &str| {
            warnings(&json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "pg"}, "spec": {"minMember": 1, "queue": q}}))
        };
        assert!(queued("default").is_empty());
        assert!(queued("research")[0].starts_with("spec.queue: not evaluated"), "{:?}", queued("research"));
        let job = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "vj"}, "spec": {"queue": "research", "tasks": []}});
        assert!(job_warnings(&job)[0].starts_with("spec.queue: not evaluated"));
        let numa = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "vj"},
            "spec": {"tasks": [{"name": "a", "topologyPolicy": "none"}, {"name": "b", "topologyPolicy": "single-numa-node"}]}});
        let w = job_warnings(&numa);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("spec.tasks[1].topologyPolicy: not evaluated"), "{w:?}");
        assert!(warnings(&json!({"spec": {"minMember": 1}})).is_empty());
        // A named tier is read now (a tier once the HyperNodes are known): no warning.
        let named = json!({"spec": {"minMember": 1, "networkTopology": {"highestTierName": "spine"}}});
        assert!(warnings(&named).is_empty());
        let job = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "spec": {"networkTopology": {"mode": "soft", "highestTierName": "spine"}, "tasks": [
                {"name": "a", "replicas": 1},
                {"name": "b", "replicas": 4, "partitionPolicy": {"totalPartitions": 2, "partitionSize": 2,
                    "networkTopology": {"highestTierName": "leaf"}}}]}});
        let w = job_warnings(&job);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("spec.tasks[1].partitionPolicy.networkTopology.highestTierName: not evaluated"),
            "{w:?}"
        );
    }

    /// `subGroupPolicy` as Volcano's scheduler reads it (defaults `subGroupSize` 1 and
    /// `minSubGroups` 0, the CRD's bounds), a task's policy found by its exact selector, and what
    /// has no place in the tree said.
    /// Volcano holds a job to its task minimums only when `minMember` is at least their sum
    /// (`CheckTaskReady`): then the tasks are subgroups and `minMember` their floor; below it,
    /// only `minMember` counts.
    #[test]
    fn task_minimums_count_only_within_min_member_as_in_volcano() {
        let pg = |min: i32, tasks: Value| {
            read(&json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": min, "minTaskMember": tasks}}))
            .unwrap()
        };
        // 1 + 4 above 3: flat, three pods of any task.
        let g = pg(3, json!({"master": 1, "worker": 4}));
        assert_eq!((g.subgroups.len(), g.min_member, g.pod_floor), (0, 3, 0));
        // 1 + 2 within 5: both tasks' minimums, and five pods in all.
        let g = pg(5, json!({"master": 1, "worker": 2}));
        assert_eq!((g.subgroups.len(), g.min_member, g.pod_floor), (2, 2, 5));
        assert_eq!(g.min_pods(), Some(5));
        // Equal: the tasks alone.
        let g = pg(3, json!({"master": 1, "worker": 2}));
        assert_eq!((g.subgroups.len(), g.pod_floor), (2, 0));
        // A task that needs none is a subgroup that needs none (its pods still count).
        let g = pg(3, json!({"master": 1, "worker": 0}));
        assert_eq!((g.subgroups.len(), g.subgroups[1].min_member, g.pod_floor), (2, 0, 3));
        assert!(g.subgroups_may_need_none(), "the rule book lets a Volcano task need none");
        // No minMember (Volcano asks for no gang): the tasks' minimums are kept, as before.
        let g = pg(0, json!({"master": 1, "worker": 2}));
        assert_eq!((g.subgroups.len(), g.pod_floor), (2, 0));
    }

    #[test]
    fn sub_group_policies_are_read_with_volcano_s_defaults_and_bounds() {
        let pg = |spec: Value| {
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "pg", "namespace": "ml"}, "spec": spec})
        };
        let g = read(&pg(json!({"minMember": 4, "subGroupPolicy": [
            {"name": "racks", "matchLabelKeys": ["rack-id"], "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
            {"name": "pairs", "subGroupSize": 2, "minSubGroups": 1, "matchLabelKeys": ["pair"],
             "labelSelector": {"matchExpressions": [{"key": "role", "operator": "In", "values": ["w"]}]},
             "networkTopology": {"mode": "soft"}}]})))
        .unwrap();
        let p = g.partitions();
        assert_eq!((p[0].size, p[0].min, p[0].task.as_deref()), (1, 0, None));
        assert_eq!(p[0].topology_key.as_deref(), Some("volcano.sh/hypernode-tier-1"));
        assert_eq!((p[1].size, p[1].min), (2, 1));
        assert_eq!(p[1].topology_preferred.as_deref(), Some("volcano.sh/hypernode-tier-1"));
        assert_eq!(p[1].selector.as_ref().unwrap().match_expressions.len(), 1);
        // A task's own policy takes its place; another policy beside tasks is not evaluated.
        let spec = json!({"minMember": 5, "minTaskMember": {"master": 1, "worker": 4}, "subGroupPolicy": [
            {"name": "worker", "subGroupSize": 2, "minSubGroups": 2,
             "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}}, "matchLabelKeys": ["volcano.sh/partition-id"]},
            {"name": "other", "labelSelector": {"matchLabels": {"app": "x"}}, "matchLabelKeys": ["k"]}]});
        let g = read(&pg(spec.clone())).unwrap();
        assert_eq!(g.partitions().len(), 1);
        assert_eq!(g.partitions()[0].task.as_deref(), Some("worker"));
        let w = warnings(&pg(spec));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("spec.subGroupPolicy[1]: not evaluated"), "{w:?}");
        // The CRD's bounds and Volcano's rules, each at its field.
        let e = read(&pg(json!({"minMember": 1, "subGroupPolicy": [
            {"name": "a", "subGroupSize": 0, "matchLabelKeys": ["k"]},
            {"name": "a", "minSubGroups": -1, "matchLabelKeys": ["k"]},
            {"name": "d", "matchLabelKeys": ["k"], "networkTopology": {"mode": "tight"}},
            {"name": "b", "matchLabelKeys": ["k"], "networkTopology": {"highestTierAllowed": 1, "highestTierName": "x"}},
            {"name": "c", "labelSelector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}]})))
        .unwrap_err();
        let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.subGroupPolicy[0].subGroupSize",
                "spec.subGroupPolicy[1].name",
                "spec.subGroupPolicy[1].minSubGroups",
                "spec.subGroupPolicy[2].networkTopology.mode",
                "spec.subGroupPolicy[3].networkTopology",
                "spec.subGroupPolicy[4].labelSelector.matchExpressions[0].operator",
            ],
            "{e:?}"
        );
        // More groups needed than a gang's tree may hold: refused at the field (a placeholder
        // each would be made otherwise).
        let e = read(&pg(json!({"minMember": 1, "subGroupPolicy": [
            {"name": "a", "minSubGroups": 2_000_000_000, "matchLabelKeys": ["k"]}]})))
        .unwrap_err();
        assert_eq!(e[0].path, "spec.subGroupPolicy[0].minSubGroups", "{e:?}");
        // A second policy for one task finds no pod (the first takes them): not read, and said.
        let twice = json!({"minMember": 4, "minTaskMember": {"worker": 4}, "subGroupPolicy": [
            {"name": "a", "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}}, "matchLabelKeys": ["x"]},
            {"name": "b", "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}}, "matchLabelKeys": ["y"]}]});
        assert_eq!(read(&pg(twice.clone())).unwrap().partitions().len(), 1);
        let w = warnings(&pg(twice));
        assert!(
            w.iter().any(|w| w.starts_with("spec.subGroupPolicy[1]: not evaluated: an earlier policy")),
            "{w:?}"
        );
        let many: Vec<Value> =
            (0..=MAX_POLICIES).map(|i| json!({"name": format!("p{i}"), "matchLabelKeys": ["k"]})).collect();
        let e = read(&pg(json!({"minMember": 1, "subGroupPolicy": many}))).unwrap_err();
        assert_eq!(e[0].path, "spec.subGroupPolicy", "{e:?}");
    }

    #[test]
    fn a_named_tier_waits_for_the_hypernodes() {
        let pg = |t: Value| {
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": 2, "networkTopology": t}})
        };
        let g = read(&pg(json!({"mode": "hard", "highestTierName": "spine"}))).unwrap();
        assert_eq!((g.topology_key, g.topology_preferred), (None, None), "not a tier until assembly");
        assert_eq!(
            g.tier_name.as_deref(),
            Some(&crate::read::model::TierName { name: "spine".into(), soft: false })
        );
        let g = read(&pg(json!({"mode": "soft", "highestTierName": "spine"}))).unwrap();
        assert!(g.tier_name.is_some_and(|t| t.soft));
        let e = read(&pg(json!({"mode": "strict", "highestTierName": "spine"}))).unwrap_err();
        assert_eq!(e[0].path, "spec.networkTopology.mode");
    }
}
