//! Kubernetes objects → the model: k8s-openapi `Node`, `Pod`, `PriorityClass` and
//! `PodDisruptionBudget`.
//!
//! Total: anything that cannot be understood is a [`FieldError`] with its field path, never a panic
//! or a silent default. Gang membership is not read here; the dialects resolve it
//! ([`crate::cluster`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::Value;

use crate::error::FieldError;
use crate::model::{
    Budget, LabelOperator, LabelRequirement, LabelSelector, Node, NodeSelectorOperator,
    NodeSelectorRequirement, NodeSelectorTerm, ObjectKey, Pod, PodPhase, PreemptionPolicy, Taint,
    TaintEffect, Time, Toleration, TolerationOperator,
};
use crate::resources::{PODS, Resources, effective_requests, resource_list};

/// Priority class name → value, and the global default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PriorityClasses {
    values: BTreeMap<String, i32>,
    default: Option<i32>,
}

impl PriorityClasses {
    pub fn from_objects(classes: &[PriorityClass]) -> Self {
        let mut pcs = PriorityClasses::default();
        for pc in classes {
            let Some(name) = pc.metadata.name.clone() else { continue };
            let value = pc.value.unwrap_or(0);
            if pc.global_default == Some(true) {
                // Several global defaults: the lowest wins, as the admission plugin picks it.
                pcs.default = Some(pcs.default.map_or(value, |d| d.min(value)));
            }
            pcs.values.insert(name, value);
        }
        pcs
    }

    /// A pod's priority: `spec.priority` (set by admission) wins; else its class; else the global
    /// default; else 0. An unknown class name is an error, as admission would reject the pod.
    pub fn resolve(&self, spec: &core::PodSpec) -> Result<i32, FieldError> {
        if let Some(p) = spec.priority {
            return Ok(p);
        }
        match spec.priority_class_name.as_deref() {
            Some("system-cluster-critical") => Ok(2_000_000_000),
            Some("system-node-critical") => Ok(2_000_001_000),
            Some(name) if !name.is_empty() => self.values.get(name).copied().ok_or_else(|| {
                FieldError::new("spec.priorityClassName", format!("priority class {name:?} not found"))
            }),
            _ => Ok(self.default.unwrap_or(0)),
        }
    }
}

/// Deserialises a raw object into a k8s-openapi type in place (no copy), an error naming the exact
/// field that could not be read.
fn typed<'de, T: serde::Deserialize<'de>>(v: &'de Value) -> Result<T, Vec<FieldError>> {
    crate::error::decode(v, "", crate::error::Wording::BuiltIn)
}

/// The pod spec at `spec` (a pod template's), decoded as the API server decodes it (an error names
/// the exact field, under `path`: `spec.template.spec.volumes[0].configMap.defaultMode`), with
/// only the fields the scheduler reads ([`pod`], [`effective_requests`]: containers' and init
/// containers' names, resources and restart policy, overhead, node selector, node affinity,
/// tolerations, priority, preemption policy, scheduler, node name, scheduling gates) and the
/// dialects read (`schedulingGroup`; 1.35's `workloadRef`, kept as written) — what `simulate`
/// stamps its pods from, so that a pod costs its scheduling fields, not its template (a 100 KB
/// template of environment variables, copied for 2,000 pods, was 443 MB). Converting the result
/// gives the pod that converting the whole spec would (`scheduling_spec_converts_as_the_whole_spec`).
pub fn scheduling_spec(spec: Option<&Value>, path: &str) -> Result<Value, Vec<FieldError>> {
    let full: core::PodSpec = match spec {
        None | Some(Value::Null) => core::PodSpec::default(),
        Some(v) => crate::error::decode(v, path, crate::error::Wording::BuiltIn)?,
    };
    let slim = |c: &core::Container| core::Container {
        name: c.name.clone(),
        resources: c.resources.clone(),
        restart_policy: c.restart_policy.clone(),
        ..core::Container::default()
    };
    let node_affinity = full.affinity.as_ref().and_then(|a| a.node_affinity.clone());
    let pruned = core::PodSpec {
        containers: full.containers.iter().map(slim).collect(),
        init_containers: full.init_containers.as_ref().map(|cs| cs.iter().map(slim).collect()),
        overhead: full.overhead.clone(),
        node_selector: full.node_selector.clone(),
        affinity: node_affinity
            .map(|n| core::Affinity { node_affinity: Some(n), ..core::Affinity::default() }),
        tolerations: full.tolerations.clone(),
        priority: full.priority,
        priority_class_name: full.priority_class_name.clone(),
        preemption_policy: full.preemption_policy.clone(),
        scheduler_name: full.scheduler_name.clone(),
        node_name: full.node_name.clone(),
        scheduling_gates: full.scheduling_gates.clone(),
        scheduling_group: full.scheduling_group.clone(),
        ..core::PodSpec::default()
    };
    let mut out = serde_json::to_value(pruned).map_err(|e| vec![FieldError::new(path, e.to_string())])?;
    if let (Some(r), Some(map)) = (spec.and_then(|s| s.get("workloadRef")), out.as_object_mut()) {
        map.insert("workloadRef".into(), r.clone());
    }
    Ok(out)
}

/// What the API server would refuse in the labels and annotations of the metadata at `meta` (an
/// object's, or a pod template's, under `path`): a value that is not a string. YAML reads an
/// unquoted `yes` or `on` as `true`, and kubectl sends it so; the API server cannot decode it into
/// `ObjectMeta` and refuses the object before any webhook sees it. Every such value is named.
pub fn metadata_errors(meta: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for field in ["labels", "annotations"] {
        let Some(map) = meta.and_then(|m| m.get(field)).and_then(Value::as_object) else { continue };
        for (k, v) in map {
            if v.is_string() {
                continue;
            }
            let hint = if v.is_boolean() {
                ": quote it (YAML reads an unquoted yes, no, on, off, true or false as a boolean)"
            } else if v.is_number() {
                ": quote it"
            } else {
                ""
            };
            errors.push(FieldError::new(
                crate::error::join_path(path, &format!("metadata.{field}[{k}]")),
                format!("Invalid value: {v}: must be a string{hint}"),
            ));
        }
    }
    errors
}

/// A raw Node.
pub fn node_from_value(v: &Value) -> Result<Node, Vec<FieldError>> {
    node(&typed::<core::Node>(v)?)
}

/// A raw Pod.
pub fn pod_from_value(v: &Value, priorities: &PriorityClasses) -> Result<Pod, Vec<FieldError>> {
    pod(&typed::<core::Pod>(v)?, priorities)
}

fn effect(path: &str, e: &str) -> Result<TaintEffect, FieldError> {
    match e {
        "NoSchedule" => Ok(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Ok(TaintEffect::PreferNoSchedule),
        "NoExecute" => Ok(TaintEffect::NoExecute),
        other => Err(FieldError::new(path, format!("unknown taint effect {other:?}"))),
    }
}

/// A Node. Allocatable comes from `status.allocatable` (falling back to capacity). Readiness: the
/// `Ready` condition must be `True`; a node that reports no conditions at all (hand-written
/// snapshot files) is taken as Ready.
pub fn node(n: &core::Node) -> Result<Node, Vec<FieldError>> {
    let mut errors = Vec::new();
    let name = n.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        errors.push(FieldError::new("metadata.name", "required"));
    }
    let status = n.status.as_ref();
    let list = status.and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
    let allocatable = match list {
        Some(l) => resource_list("status.allocatable", l).unwrap_or_else(|e| {
            errors.extend(e);
            Resources::new()
        }),
        None => Resources::new(),
    };
    let spec = n.spec.as_ref();
    let mut taints = Vec::new();
    for (i, t) in spec.and_then(|s| s.taints.as_ref()).into_iter().flatten().enumerate() {
        match effect(&format!("spec.taints[{i}].effect"), &t.effect) {
            Ok(effect) => taints.push(Taint {
                key: t.key.clone(),
                value: t.value.clone().filter(|v| !v.is_empty()),
                effect,
            }),
            Err(e) => errors.push(e),
        }
    }
    let conditions = status.and_then(|s| s.conditions.as_ref());
    let ready = match conditions {
        None => true,
        Some(cs) if cs.is_empty() => true,
        Some(cs) => cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"),
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Node {
        name,
        allocatable,
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        ready,
    })
}

fn requirement(path: &str, r: &core::NodeSelectorRequirement) -> Result<NodeSelectorRequirement, FieldError> {
    let operator = match r.operator.as_str() {
        "In" => NodeSelectorOperator::In,
        "NotIn" => NodeSelectorOperator::NotIn,
        "Exists" => NodeSelectorOperator::Exists,
        "DoesNotExist" => NodeSelectorOperator::DoesNotExist,
        "Gt" => NodeSelectorOperator::Gt,
        "Lt" => NodeSelectorOperator::Lt,
        other => {
            return Err(FieldError::new(format!("{path}.operator"), format!("unknown operator {other:?}")));
        }
    };
    Ok(NodeSelectorRequirement { key: r.key.clone(), operator, values: r.values.clone().unwrap_or_default() })
}

/// A Pod. Namespace defaults to `default`; `schedulerName` to `default-scheduler`, as the API
/// server defaults them.
pub fn pod(p: &core::Pod, priorities: &PriorityClasses) -> Result<Pod, Vec<FieldError>> {
    let mut errors = Vec::new();
    let meta = &p.metadata;
    let name = meta.name.clone().unwrap_or_default();
    if name.is_empty() {
        errors.push(FieldError::new("metadata.name", "required"));
    }
    let namespace = meta.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into());
    let default_spec = core::PodSpec::default();
    let spec = p.spec.as_ref().unwrap_or(&default_spec);
    let requests = effective_requests(spec).unwrap_or_else(|e| {
        errors.extend(e);
        Resources::new()
    });
    let priority = priorities.resolve(spec).unwrap_or_else(|e| {
        errors.push(e);
        0
    });
    let mut affinity = Vec::new();
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref());
    if let Some(sel) = required {
        let base =
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
        for (i, term) in sel.node_selector_terms.iter().enumerate() {
            let mut t = NodeSelectorTerm::default();
            for (j, r) in term.match_expressions.iter().flatten().enumerate() {
                match requirement(&format!("{base}[{i}].matchExpressions[{j}]"), r) {
                    Ok(r) => t.match_expressions.push(r),
                    Err(e) => errors.push(e),
                }
            }
            for (j, r) in term.match_fields.iter().flatten().enumerate() {
                let path = format!("{base}[{i}].matchFields[{j}]");
                if r.key != "metadata.name" {
                    errors.push(FieldError::new(
                        format!("{path}.key"),
                        format!("{:?} is not a supported field (only metadata.name)", r.key),
                    ));
                    continue;
                }
                match requirement(&path, r) {
                    Ok(r) => t.match_fields.push(r),
                    Err(e) => errors.push(e),
                }
            }
            affinity.push(t);
        }
    }
    let mut tolerations = Vec::new();
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let operator = match t.operator.as_deref() {
            None | Some("Equal") | Some("") => TolerationOperator::Equal,
            Some("Exists") => TolerationOperator::Exists,
            Some(other) => {
                errors.push(FieldError::new(
                    format!("spec.tolerations[{i}].operator"),
                    format!("unknown operator {other:?}"),
                ));
                continue;
            }
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(e) => match effect(&format!("spec.tolerations[{i}].effect"), e) {
                Ok(e) => Some(e),
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            },
        };
        tolerations.push(Toleration {
            key: t.key.clone().unwrap_or_default(),
            operator,
            value: t.value.clone(),
            effect,
        });
    }
    let status = p.status.as_ref();
    let phase = match status.and_then(|s| s.phase.as_deref()) {
        None | Some("Pending") | Some("") => PodPhase::Pending,
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some("Unknown") => PodPhase::Unknown,
        Some(other) => {
            errors.push(FieldError::new("status.phase", format!("unknown phase {other:?}")));
            PodPhase::Unknown
        }
    };
    let preemption_policy = match spec.preemption_policy.as_deref() {
        Some("Never") => PreemptionPolicy::Never,
        None | Some("PreemptLowerPriority") | Some("") => PreemptionPolicy::PreemptLowerPriority,
        Some(other) => {
            errors.push(FieldError::new("spec.preemptionPolicy", format!("unknown policy {other:?}")));
            PreemptionPolicy::PreemptLowerPriority
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Pod {
        key: ObjectKey::new(namespace, name),
        uid: meta.uid.clone().unwrap_or_default(),
        requests,
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        affinity,
        tolerations,
        priority,
        preemption_policy,
        phase,
        node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
        nominated_node: status.and_then(|s| s.nominated_node_name.clone()).filter(|n| !n.is_empty()),
        created: meta.creation_timestamp.as_ref().map(Time::from_k8s).unwrap_or_default(),
        deleting: meta.deletion_timestamp.is_some(),
        scheduler_name: spec
            .scheduler_name
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default-scheduler".into()),
        gang: None,
        failure: status
            .filter(|_| phase == PodPhase::Failed && spec.node_name.as_deref().is_some_and(|n| !n.is_empty()))
            .and_then(|s| s.reason.as_deref().filter(|r| !r.is_empty()))
            .map(|reason| match status.and_then(|s| s.message.as_deref()).filter(|m| !m.is_empty()) {
                Some(message) => format!("{reason}: {message}"),
                None => reason.to_string(),
            }),
        scheduling_gates: spec.scheduling_gates.iter().flatten().map(|g| g.name.clone()).collect(),
        labels: meta.labels.clone().unwrap_or_default().into(),
        exclusive_topology: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::labels::JOBSET_EXCLUSIVE_TOPOLOGY))
            .filter(|k| !k.is_empty())
            .cloned(),
    })
}

/// A raw PodDisruptionBudget.
pub fn budget_from_value(v: &Value) -> Result<Budget, Vec<FieldError>> {
    budget(&typed::<PodDisruptionBudget>(v)?)
}

/// A PodDisruptionBudget, as kube-scheduler's preemption reads it: namespace, selector (absent
/// or empty selects nothing), `status.disruptionsAllowed` and `status.disruptedPods`.
pub fn budget(b: &PodDisruptionBudget) -> Result<Budget, Vec<FieldError>> {
    let mut errors = Vec::new();
    let meta = &b.metadata;
    let name = meta.name.clone().unwrap_or_default();
    if name.is_empty() {
        errors.push(FieldError::new("metadata.name", "required"));
    }
    let namespace = meta.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into());
    let mut selector = LabelSelector::default();
    if let Some(s) = b.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        selector.match_labels = s.match_labels.clone().unwrap_or_default();
        for (i, r) in s.match_expressions.iter().flatten().enumerate() {
            let path = format!("spec.selector.matchExpressions[{i}]");
            let operator = match r.operator.as_str() {
                "In" => LabelOperator::In,
                "NotIn" => LabelOperator::NotIn,
                "Exists" => LabelOperator::Exists,
                "DoesNotExist" => LabelOperator::DoesNotExist,
                other => {
                    errors.push(FieldError::new(
                        format!("{path}.operator"),
                        format!("unknown operator {other:?}"),
                    ));
                    continue;
                }
            };
            selector.match_expressions.push(LabelRequirement {
                key: r.key.clone(),
                operator,
                values: r.values.clone().unwrap_or_default(),
            });
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let status = b.status.as_ref();
    let empty = selector.match_labels.is_empty() && selector.match_expressions.is_empty();
    Ok(Budget {
        key: ObjectKey::new(namespace, name),
        selector: (!empty).then_some(selector),
        disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
        disrupted_pods: status
            .and_then(|s| s.disrupted_pods.as_ref())
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default(),
    })
}

/// The pod-count limit a node reports (for messages).
pub fn pod_slots(n: &Node) -> i64 {
    n.allocatable.get(PODS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_label_or_annotation_that_is_not_a_string_is_named() {
        let meta = json!({"labels": {"kube-gang.io/enabled": true, "app": "x"}, "annotations": {"n": 3}});
        let e = metadata_errors(Some(&meta), "spec.template");
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!(e[0].path, "spec.template.metadata.labels[kube-gang.io/enabled]");
        assert!(e[0].message.starts_with("Invalid value: true: must be a string: quote it"), "{}", e[0]);
        assert_eq!(e[1].path, "spec.template.metadata.annotations[n]");
        assert!(metadata_errors(Some(&json!({"labels": {"a": "b"}})), "").is_empty());
    }

    #[test]
    fn scheduling_spec_converts_as_the_whole_spec() {
        let spec = json!({
            "containers": [{"name": "c", "image": "x", "env": [{"name": "A", "value": "x".repeat(10_000)}],
                            "ports": [{"containerPort": 80}],
                            "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": 1}}}],
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                {"name": "init", "resources": {"requests": {"cpu": "4"}}}],
            "overhead": {"cpu": "100m"},
            "nodeSelector": {"pool": "gpu"},
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"a": "b"}}}]}},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "system-cluster-critical",
            "preemptionPolicy": "Never",
            "schedulerName": "gang-scheduler",
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "schedulingGroup": {"podGroupName": "pg"},
            "workloadRef": {"name": "w", "podGroup": "g"},
            "volumes": [{"name": "v", "configMap": {"name": "cm", "defaultMode": 420}}]
        });
        let pod = |spec: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": spec});
        let slim = scheduling_spec(Some(&spec), "spec").unwrap();
        let classes = PriorityClasses::default();
        assert_eq!(
            pod_from_value(&pod(slim.clone()), &classes),
            pod_from_value(&pod(spec.clone()), &classes)
        );
        assert_eq!(slim["workloadRef"], spec["workloadRef"]);
        assert_eq!(slim["schedulingGroup"], spec["schedulingGroup"]);
        assert!(slim.to_string().len() < spec.to_string().len() / 3, "{slim}");
        let e = scheduling_spec(
            Some(&json!({"volumes": [{"name": "v", "configMap": {"defaultMode": "abc"}}]})),
            "spec.template.spec",
        )
        .unwrap_err();
        assert_eq!(e[0].path, "spec.template.spec.volumes[0].configMap.defaultMode");
    }
}
