//! Kubeflow Trainer v2's `trainer.kubeflow.org/v1alpha1` `TrainJob`, rendered through its runtime
//! (a `TrainingRuntime` of its namespace or a `ClusterTrainingRuntime`) into what Trainer's
//! controller creates: a JobSet named after the TrainJob and, with a `podGroupPolicy`, the PodGroup
//! its scheduler plugin writes. `simulate` then treats them as objects of the input (admitted,
//! expanded), so a TrainJob is judged as its JobSet and PodGroup are: a runtime whose trainer step
//! depends on initializer steps under a PodGroup that counts every step's pods is staged creation
//! that can never be satisfied, and is refused as such.
//!
//! As Trainer's runtime framework renders it (`pkg/runtime/core/trainingruntime.go`, the
//! `jobset`, `torch`, `plainml`, `coscheduling` and `volcano` plugins):
//! - each replicated job runs `count` pods: its `parallelism` (1 when unset), but for the trainer
//!   step (label `trainer.kubeflow.org/trainjob-ancestor-step: trainer`) the TrainJob's
//!   `trainer.numNodes`, else the runtime's `mlPolicy.numNodes`, else 1; `parallelism` and
//!   `completions` are set to it, and the trainer step's `replicas` to 1;
//! - `trainer.resourcesPerNode` is merged key by key into the resources of the trainer step's
//!   container named `node` (Trainer's strategic merge of two resource maps);
//! - `podGroupPolicy.coscheduling`: a `scheduling.x-k8s.io` PodGroup named after the TrainJob whose
//!   `minMember` is every replicated job's `count` added up, `scheduleTimeoutSeconds` the
//!   policy's (60 when unset), and every pod labelled with it; `podGroupPolicy.volcano`: a Volcano
//!   PodGroup of the same count, every pod annotated with it.
//!
//! - `runtimePatches` (what Kueue writes when it admits a TrainJob: node selector, tolerations,
//!   scheduling gates, labels) are merged into the runtime's JobSet before anything is counted,
//!   in order, as Trainer's `mergeRuntimePatches` does with a strategic merge patch: replicated
//!   jobs, containers, volumes, scheduling gates, env and pull secrets by name, volume mounts by
//!   mount path, maps key by key, tolerations and other lists replaced; the JobSet's labels and
//!   annotations take each patch's. What Trainer's webhook refuses in them is refused in its
//!   words (a manager not a domain-prefixed path, a replicated job or container the runtime
//!   lacks, env on the `node` and initializer containers).
//!
//! Not modelled, said by a warning naming the field: the PodGroup's `minResources`
//! (coscheduling's quorum check of free resources; the placement shows the same).
//! Image, command, arguments and environment do not change where a pod may go. A suspended
//! TrainJob is rendered as it runs once unsuspended (Kueue's admission, as `simulate` models it for
//! Jobs); `activeDeadlineSeconds` bounds its run, not its placement; one `managedBy` another
//! controller (MultiKueue) is rendered as Trainer's own would render it.

use serde_json::{Map, Value, json};

use crate::read::error::FieldError;
use crate::read::object::At;

/// The API group of TrainJob and its runtimes.
pub const GROUP: &str = "trainer.kubeflow.org";
/// The label Trainer marks a runtime's replicated jobs with, by step.
pub const ANCESTOR_LABEL: &str = "trainer.kubeflow.org/trainjob-ancestor-step";

/// Whether `obj` is a TrainJob.
pub fn is_trainjob(obj: &Value) -> bool {
    is(obj, "TrainJob")
}

/// Whether `obj` is a runtime a TrainJob may name.
pub fn is_runtime(obj: &Value) -> bool {
    is(obj, "TrainingRuntime") || is(obj, "ClusterTrainingRuntime")
}

fn is(obj: &Value, kind: &str) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some(kind)
        && obj.get("apiVersion").and_then(Value::as_str).map(crate::read::dialect::group_of) == Some(GROUP)
}

/// What a TrainJob renders as: the objects Trainer's controller creates (the JobSet first), and
/// warnings naming what is not modelled.
pub type Rendered = (Vec<Value>, Vec<String>);

/// What Trainer's webhook refuses in a TrainJob alone (its runtime reference, `numNodes`), in its
/// field paths: what `validate` can say without the runtime.
pub fn check(trainjob: &Value) -> Vec<FieldError> {
    render(trainjob, &[]).err().unwrap_or_default()
}

/// What Trainer's controller creates for `trainjob`: the JobSet, then the PodGroup its
/// `podGroupPolicy` asks for; and warnings naming what is not modelled. `Ok(None)`: its runtime is
/// not among `runtimes` (the input's), so nothing can be rendered.
pub fn render(trainjob: &Value, runtimes: &[Value]) -> Result<Option<Rendered>, Vec<FieldError>> {
    let name = trainjob.at("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let ns = trainjob
        .at("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push(FieldError::new("metadata.name", "Required value"));
    }
    let runtime_name = trainjob.at("/spec/runtimeRef/name").and_then(Value::as_str).unwrap_or("");
    if runtime_name.is_empty() {
        errors.push(FieldError::new("spec.runtimeRef.name", "Required value"));
    }
    let kind =
        trainjob.at("/spec/runtimeRef/kind").and_then(Value::as_str).unwrap_or("ClusterTrainingRuntime");
    if !matches!(kind, "ClusterTrainingRuntime" | "TrainingRuntime") {
        errors.push(FieldError::new(
            "spec.runtimeRef.kind",
            format!("Unsupported value: {kind:?}: supported values: \"ClusterTrainingRuntime\", \"TrainingRuntime\""),
        ));
    }
    let num_nodes = match trainjob.at("/spec/trainer/numNodes") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_i64().filter(|&n| (1..=i64::from(i32::MAX)).contains(&n)) {
            Some(n) => Some(n),
            None => {
                errors.push(FieldError::new("spec.trainer.numNodes", format!("must be at least 1, got {v}")));
                None
            }
        },
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let Some(runtime) = runtimes.iter().find(|r| {
        is(r, kind)
            && r.at("/metadata/name").and_then(Value::as_str) == Some(runtime_name)
            && (kind == "ClusterTrainingRuntime"
                || r.at("/metadata/namespace")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .unwrap_or("default")
                    == ns)
    }) else {
        return Ok(None);
    };
    let warnings = Vec::new();
    let ml_policy = runtime.at("/spec/mlPolicy").filter(|p| p.is_object());
    let policy_nodes = ml_policy.and_then(|p| p.get("numNodes")).and_then(Value::as_i64).unwrap_or(1);
    let mut spec = runtime.at("/spec/template/spec").cloned().unwrap_or_else(|| json!({}));
    let mut jobset_meta = Map::new();
    for field in ["labels", "annotations"] {
        if let Some(m) = runtime.at(&format!("/spec/template/metadata/{field}")).filter(|m| m.is_object()) {
            jobset_meta.insert(field.into(), m.clone());
        }
    }
    let patches =
        trainjob.at("/spec/runtimePatches").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let patch_errors = check_runtime_patches(patches, &spec);
    if !patch_errors.is_empty() {
        return Err(patch_errors);
    }
    for patch in patches {
        if let Some(meta) = patch.at("/trainingRuntimeSpec/template/metadata").filter(|m| m.is_object()) {
            for field in ["labels", "annotations"] {
                if let Some(add) = meta.get(field).filter(|m| m.is_object()) {
                    strategic_merge(jobset_meta.entry(field).or_insert_with(|| json!({})), add, "");
                }
            }
        }
        if let Some(over) = patch.at("/trainingRuntimeSpec/template/spec").filter(|p| p.is_object()) {
            strategic_merge(&mut spec, over, "");
        }
    }
    let mut total: i64 = 0;
    let jobs = spec.get_mut("replicatedJobs").and_then(Value::as_array_mut);
    for job in jobs.into_iter().flatten() {
        let trainer_step = job
            .at(&format!("/template/metadata/labels/{}", ANCESTOR_LABEL.replace('/', "~1")))
            .and_then(Value::as_str)
            == Some("trainer");
        let mut count = job.at("/template/spec/parallelism").and_then(Value::as_i64).unwrap_or(1);
        if trainer_step && ml_policy.is_some() {
            count = num_nodes.unwrap_or(policy_nodes);
        }
        total = total.saturating_add(count);
        if let Some(t) =
            job.get_mut("template").and_then(|t| t.get_mut("spec")).and_then(Value::as_object_mut)
        {
            t.insert("parallelism".into(), json!(count));
            t.insert("completions".into(), json!(count));
        }
        if trainer_step {
            if let Some(j) = job.as_object_mut() {
                j.insert("replicas".into(), json!(1));
            }
            if let Some(res) = trainjob.at("/spec/trainer/resourcesPerNode").filter(|r| r.is_object()) {
                merge_node_resources(job, res);
            }
        }
    }
    let policy = runtime.at("/spec/podGroupPolicy");
    let mut out = Vec::new();
    let mut label = None;
    let mut annotation = None;
    if let Some(c) = policy.and_then(|p| p.get("coscheduling")) {
        let timeout = c.get("scheduleTimeoutSeconds").and_then(Value::as_i64).unwrap_or(60);
        out.push(json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": total, "scheduleTimeoutSeconds": timeout}}));
        label = Some(crate::read::dialect::coscheduling::LABEL);
    } else if policy.and_then(|p| p.get("volcano")).is_some() {
        // The runtime's annotations with the patches' laid over them (Trainer's `info.Annotations`).
        let queue = jobset_meta
            .get("annotations")
            .and_then(|a| a.get("scheduling.volcano.sh/queue-name"))
            .and_then(Value::as_str)
            .unwrap_or("default");
        out.push(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": total, "queue": queue}}));
        annotation = Some(crate::read::dialect::volcano::ANNOTATION);
    }
    if label.is_some() || annotation.is_some() {
        let jobs = spec.get_mut("replicatedJobs").and_then(Value::as_array_mut);
        for job in jobs.into_iter().flatten() {
            let Some(meta) = job.pointer_mut("/template/spec/template").and_then(Value::as_object_mut) else {
                continue;
            };
            let meta = meta.entry("metadata").or_insert_with(|| json!({}));
            let (key, field) = match (label, annotation) {
                (Some(l), _) => (l, "labels"),
                (None, Some(a)) => (a, "annotations"),
                (None, None) => continue,
            };
            if let Some(m) = meta.as_object_mut() {
                let map = m.entry(field).or_insert_with(|| json!({}));
                if let Some(map) = map.as_object_mut() {
                    map.insert(key.into(), json!(name));
                }
            }
        }
    }
    // Trainer's JobSet carries the runtime template's labels and the patches' (`info.Labels`),
    // not the TrainJob's own.
    let labels = jobset_meta.get("labels").and_then(Value::as_object).cloned().unwrap_or_default();
    let mut metadata = json!({"name": name, "namespace": ns, "labels": labels});
    if let Some(a) = jobset_meta.get("annotations").filter(|a| a.as_object().is_some_and(|m| !m.is_empty())) {
        metadata["annotations"] = a.clone();
    }
    let jobset = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": metadata, "spec": spec});
    out.insert(0, jobset);
    Ok(Some((out, warnings)))
}

/// The key lists of a JobSet spec are merged by, as the strategic merge patch Trainer applies
/// finds them in the Go types (`patchMergeKey`), by the path of the list (array indexes left
/// out); any other list is replaced whole.
fn merge_key(path: &str) -> Option<&'static str> {
    const BY_NAME: &[&str] = &[
        "/replicatedJobs",
        "/template/spec/template/spec/containers",
        "/template/spec/template/spec/initContainers",
        "/template/spec/template/spec/volumes",
        "/template/spec/template/spec/schedulingGates",
        "/template/spec/template/spec/imagePullSecrets",
        "/template/spec/template/spec/containers/env",
        "/template/spec/template/spec/initContainers/env",
    ];
    if BY_NAME.iter().any(|p| path.ends_with(p)) {
        return Some("name");
    }
    if path.ends_with("/containers/volumeMounts") || path.ends_with("/initContainers/volumeMounts") {
        return Some("mountPath");
    }
    None
}

/// A strategic merge of `patch` into `target` at `path` (see [`merge_key`]): objects key by key,
/// lists with a merge key entry by entry (new entries appended), anything else replaced. A
/// `null` is no value: Trainer re-encodes a patch from Go types whose fields are all
/// `omitempty`, so none ever reaches its merge (and the API server prunes them).
fn strategic_merge(target: &mut Value, patch: &Value, path: &str) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    continue;
                }
                let child = format!("{path}/{k}");
                match t.get_mut(k) {
                    Some(existing) => strategic_merge(existing, v, &child),
                    None => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Value::Array(t), Value::Array(p)) if merge_key(path).is_some() => {
            let key = merge_key(path).unwrap_or("name");
            // The entries by key, found once: a patch's entries each look theirs up, so a long
            // runtime list costs its length once, not once per patch entry.
            let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
            for (i, e) in t.iter().enumerate() {
                if let Some(id) = e.get(key) {
                    at.entry(id.to_string()).or_insert(i);
                }
            }
            for entry in p {
                match entry.get(key).map(ToString::to_string).and_then(|id| at.get(&id).copied()) {
                    Some(i) => strategic_merge(&mut t[i], entry, path),
                    None => {
                        if let Some(id) = entry.get(key) {
                            at.insert(id.to_string(), t.len());
                        }
                        t.push(entry.clone());
                    }
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// What Trainer's webhook refuses in `runtimePatches` (`pkg/runtime/framework/plugins/jobset`
/// `Validate`), in its words: a manager that is not a domain-prefixed path, a patch of a
/// replicated job the runtime's JobSet lacks, of a container or init container its pod template
/// lacks, or env for the `node` and initializer containers (set through the Trainer and
/// Initializer APIs only). At most 16 patches, as the CRD bounds them.
fn check_runtime_patches(patches: &[Value], spec: &Value) -> Vec<FieldError> {
    let path = "spec.runtimePatches";
    let mut errors = Vec::new();
    if patches.len() > 16 {
        errors
            .push(FieldError::new(path, format!("Too many: {}: must have at most 16 items", patches.len())));
        return errors;
    }
    // The CRD's bounds on what a patch lists (`RuntimePatch` and its parts), which the API server
    // enforces before Trainer sees a TrainJob: past them the merge would cost what the lists
    // multiplied, so a file fed to `simulate` is held to them too.
    let bounds: [(&str, usize); 10] = [
        ("/trainingRuntimeSpec/template/spec/replicatedJobs", 100),
        ("containers", 64),
        ("initContainers", 64),
        ("volumes", 128),
        ("tolerations", 128),
        ("schedulingGates", 16),
        ("imagePullSecrets", 64),
        ("env", 128),
        ("volumeMounts", 128),
        ("", 0),
    ];
    for (i, patch) in patches.iter().enumerate() {
        let rjobs = patch.at(bounds[0].0).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let mut too_many = |at: String, n: usize, max: usize| {
            if n > max {
                errors.push(FieldError::new(at, format!("Too many: {n}: must have at most {max} items")));
            }
        };
        too_many(
            format!("{path}[{i}].trainingRuntimeSpec.template.spec.replicatedJobs"),
            rjobs.len(),
            bounds[0].1,
        );
        for (j, rj) in rjobs.iter().enumerate().take(bounds[0].1) {
            let Some(pod) = rj.at("/template/spec/template/spec") else { continue };
            let at = format!(
                "{path}[{i}].trainingRuntimeSpec.template.spec.replicatedJobs[{j}].template.spec.template.spec"
            );
            for (list, max) in &bounds[1..7] {
                let n = pod.get(*list).and_then(Value::as_array).map_or(0, Vec::len);
                too_many(format!("{at}.{list}"), n, *max);
            }
            for list in ["containers", "initContainers"] {
                for (k, c) in
                    pod.get(list).and_then(Value::as_array).into_iter().flatten().enumerate().take(64)
                {
                    for (field, max) in &bounds[7..9] {
                        let n = c.get(*field).and_then(Value::as_array).map_or(0, Vec::len);
                        too_many(format!("{at}.{list}[{k}].{field}"), n, *max);
                    }
                }
            }
        }
    }
    if !errors.is_empty() {
        return errors;
    }
    let jobs = spec.get("replicatedJobs").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let names = |job: &Value, list: &str| -> Vec<String> {
        job.at(&format!("/template/spec/template/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("name").and_then(Value::as_str).map(String::from))
            .collect()
    };
    for (i, patch) in patches.iter().enumerate() {
        let manager = patch.get("manager").and_then(Value::as_str).unwrap_or("");
        if let Some(why) = domain_prefixed_path(manager) {
            errors.push(FieldError::new(format!("{path}[{i}].manager"), why));
        }
        let rjobs = patch.at("/trainingRuntimeSpec/template/spec/replicatedJobs").and_then(Value::as_array);
        for rj in rjobs.into_iter().flatten() {
            let name = rj.get("name").and_then(Value::as_str).unwrap_or("");
            let Some(job) = jobs.iter().find(|j| j.get("name").and_then(Value::as_str) == Some(name)) else {
                errors.push(FieldError::new(
                    path,
                    "must not have replicated job that doesn't exist in the runtime job template",
                ));
                continue;
            };
            let Some(pod) = rj.at("/template/spec/template/spec") else { continue };
            for (list, what) in [("initContainers", "initContainer"), ("containers", "container")] {
                let have = names(job, list);
                for c in pod.get(list).and_then(Value::as_array).into_iter().flatten() {
                    let cname = c.get("name").and_then(Value::as_str).unwrap_or("");
                    if !have.iter().any(|h| h == cname) {
                        errors.push(FieldError::new(
                            path,
                            format!("must not have {what} that doesn't exist in the runtime job {name}"),
                        ));
                    } else if list == "containers"
                        && c.get("env").and_then(Value::as_array).is_some_and(|e| !e.is_empty())
                        && matches!(cname, "node" | "dataset-initializer" | "model-initializer")
                    {
                        errors.push(FieldError::new(
                            path,
                            "must not have envs for the dataset-initializer, model-initializer, node containers",
                        ));
                    }
                }
            }
        }
    }
    errors
}

/// Why `s` is not a domain-prefixed path (`acme.io/foo`), as apimachinery's
/// `IsDomainPrefixedPath` words it; `None` when it is one.
fn domain_prefixed_path(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("Required value".into());
    }
    let Some((host, rest)) = s.split_once('/').filter(|(h, r)| !h.is_empty() && !r.is_empty()) else {
        return Some(format!(
            "Invalid value: {s:?}: must be a domain-prefixed path (such as \"acme.io/foo\")"
        ));
    };
    if !crate::read::labels::is_dns_subdomain(host) {
        return Some(format!(
            "Invalid value: {host:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        ));
    }
    if !rest.chars().all(|c| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c)) {
        return Some(format!(
            "Invalid value: {rest:?}: Invalid path: regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+'"
        ));
    }
    None
}

/// Trainer's merge of `resourcesPerNode` into the trainer step's `node` container: each of
/// `limits` and `requests` key by key, the TrainJob's value winning.
fn merge_node_resources(job: &mut Value, over: &Value) {
    let containers = job.pointer_mut("/template/spec/template/spec/containers").and_then(Value::as_array_mut);
    let Some(node) =
        containers.into_iter().flatten().find(|c| c.get("name").and_then(Value::as_str) == Some("node"))
    else {
        return;
    };
    let Some(node) = node.as_object_mut() else { return };
    let resources = node.entry("resources").or_insert_with(|| json!({}));
    let Some(resources) = resources.as_object_mut() else { return };
    for key in ["limits", "requests"] {
        let Some(add) = over.get(key).and_then(Value::as_object) else { continue };
        let entry = resources.entry(key).or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        if let Some(m) = entry.as_object_mut() {
            for (k, v) in add {
                m.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(policy: Value) -> Value {
        json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "torch-distributed"},
            "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "podGroupPolicy": policy,
                "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {
                    "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                    "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "pytorch",
                        "resources": {"limits": {"cpu": "4"}}}]}}}}}]}}}})
    }

    fn trainjob() -> Value {
        json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "fine-tune", "namespace": "ml"},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": 4, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}}}})
    }

    #[test]
    fn runtime_patches_merge_as_trainers_strategic_merge_does() {
        let mut rt = runtime(json!({"coscheduling": {}}));
        rt["spec"]["template"]["metadata"] = json!({"labels": {"team": "a"}});
        let pod = &mut rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
        pod["spec"]["nodeSelector"] = json!({"zone": "z1"});
        pod["spec"]["tolerations"] = json!([{"key": "old", "operator": "Exists"}]);
        pod["spec"]["schedulingGates"] = json!([{"name": "one"}]);
        let mut tj = trainjob();
        tj["spec"]["runtimePatches"] = json!([
            {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {
                "metadata": {"labels": {"kueue": "yes"}},
                "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
                    "metadata": {"labels": {"flavor": "h100"}},
                    "spec": {"nodeSelector": {"pool": "p5"},
                             "tolerations": [{"key": "gpu", "operator": "Exists"}],
                             "schedulingGates": [{"name": "two"}],
                             "containers": [{"name": "node", "volumeMounts": [{"name": "v", "mountPath": "/d"}]}]}}}}}]}}}},
            {"manager": "example.com/second", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"zone": null, "rack": "r1"}}}}}}]}}}}
        ]);
        let (out, warnings) = render(&tj, &[rt]).unwrap().unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let js = &out[0];
        assert_eq!(js["metadata"]["labels"]["team"], "a");
        assert_eq!(js["metadata"]["labels"]["kueue"], "yes", "a patch's JobSet labels are the JobSet's");
        let pod = &js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
        assert_eq!(pod["metadata"]["labels"]["flavor"], "h100");
        assert_eq!(
            pod["spec"]["nodeSelector"],
            json!({"zone": "z1", "pool": "p5", "rack": "r1"}),
            "merged key by key; a null is no value (never reaches Trainer's merge)"
        );
        assert_eq!(
            pod["spec"]["tolerations"],
            json!([{"key": "gpu", "operator": "Exists"}]),
            "replaced whole"
        );
        assert_eq!(
            pod["spec"]["schedulingGates"],
            json!([{"name": "one"}, {"name": "two"}]),
            "merged by name"
        );
        let node = &pod["spec"]["containers"][0];
        assert_eq!(
            (node["image"].as_str(), node["volumeMounts"][0]["mountPath"].as_str()),
            (Some("pytorch"), Some("/d"))
        );
        assert_eq!(node["resources"]["limits"]["nvidia.com/gpu"], "8", "resourcesPerNode still merged after");
        assert_eq!(js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"], 4);
        // What Trainer's webhook refuses.
        let mut bad = trainjob();
        bad["spec"]["runtimePatches"] = json!([{"manager": "example.com/x", "trainingRuntimeSpec": {"template": {"spec": {
            "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
                "containers": [{"name": "node", "env": [{"name": "A", "value": "b"}]}]}}}}}]}}}}]);
        let e = render(&bad, &[runtime(json!({}))]).unwrap_err();
        assert!(e[0].to_string().contains("must not have envs for the"), "{e:?}");
        // Past the CRD's bounds a patch is refused before it is merged (the merge is per entry).
        let mut hostile = trainjob();
        let env: Vec<Value> = (0..100_000).map(|i| json!({"name": format!("E{i}"), "value": "x"})).collect();
        hostile["spec"]["runtimePatches"] = json!([{"manager": "example.com/x", "trainingRuntimeSpec": {"template": {"spec": {
            "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
                "initContainers": [{"name": "init", "env": env}]}}}}}]}}}}]);
        let e = render(&hostile, &[runtime(json!({}))]).unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(
            e[0].to_string(),
            "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.initContainers[0].env: Too many: 100000: must have at most 128 items"
        );
        for (manager, why) in
            [("", "Required value"), ("a/b/c", ""), ("Upper.io/x", "RFC 1123"), ("x.io/a b", "Invalid path")]
        {
            let found = domain_prefixed_path(manager);
            assert_eq!(found.is_none(), why.is_empty(), "{manager:?}: {found:?}");
            assert!(found.unwrap_or_default().contains(why), "{manager:?}");
        }
    }

    #[test]
    fn a_trainjob_renders_as_its_runtime_says_with_the_podgroup_its_plugin_writes() {
        let (out, warnings) =
            render(&trainjob(), &[runtime(json!({"coscheduling": {"scheduleTimeoutSeconds": 120}}))])
                .unwrap()
                .unwrap();
        assert!(warnings.is_empty());
        let jobset = &out[0];
        assert_eq!(
            (jobset["kind"].as_str(), jobset["metadata"]["name"].as_str()),
            (Some("JobSet"), Some("fine-tune"))
        );
        let node = &jobset["spec"]["replicatedJobs"][0];
        assert_eq!(
            (node["replicas"].as_i64(), node["template"]["spec"]["parallelism"].as_i64()),
            (Some(1), Some(4))
        );
        assert_eq!(node["template"]["spec"]["completions"], 4);
        let pod = &node["template"]["spec"]["template"];
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["limits"],
            json!({"cpu": "4", "nvidia.com/gpu": "8"})
        );
        assert_eq!(pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"], "fine-tune");
        assert_eq!(out[1]["kind"], "PodGroup");
        assert_eq!(out[1]["spec"], json!({"minMember": 4, "scheduleTimeoutSeconds": 120}));
        // Volcano's plugin: its PodGroup, and pods annotated with it.
        let (out, _) = render(&trainjob(), &[runtime(json!({"volcano": {}}))]).unwrap().unwrap();
        assert_eq!(out[1]["apiVersion"], "scheduling.volcano.sh/v1beta1");
        let pod = &out[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
        assert_eq!(pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"], "fine-tune");
        // No policy: the JobSet alone; the runtime's numNodes when the TrainJob says none.
        let mut plain = trainjob();
        plain["spec"]["trainer"] = json!({});
        let (out, _) = render(&plain, &[runtime(Value::Null)]).unwrap().unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"], 1);
    }

    #[test]
    fn a_runtime_not_in_the_input_renders_nothing_and_bad_references_are_errors() {
        assert!(render(&trainjob(), &[]).unwrap().is_none());
        // A TrainingRuntime is looked up in the TrainJob's namespace only.
        let mut ns_runtime = runtime(Value::Null);
        ns_runtime["kind"] = json!("TrainingRuntime");
        ns_runtime["metadata"]["namespace"] = json!("other");
        let mut tj = trainjob();
        tj["spec"]["runtimeRef"]["kind"] = json!("TrainingRuntime");
        assert!(render(&tj, std::slice::from_ref(&ns_runtime)).unwrap().is_none());
        ns_runtime["metadata"]["namespace"] = json!("ml");
        assert!(render(&tj, &[ns_runtime]).unwrap().is_some());
        let mut bad = trainjob();
        bad["spec"]["runtimeRef"] = json!({"kind": "Runtime"});
        bad["spec"]["trainer"]["numNodes"] = json!(0);
        let e = render(&bad, &[]).unwrap_err();
        let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["spec.runtimeRef.name", "spec.runtimeRef.kind", "spec.trainer.numNodes"]);
    }
}
