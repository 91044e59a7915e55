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

/// Deserialises a raw object into a k8s-openapi type, the serde message as the error.
fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, Vec<FieldError>> {
    // Deserializing from a borrowed `Value` reads it in place: no copy of the object.
    T::deserialize(v).map_err(|e| vec![FieldError::new("", format!("cannot decode: {e}"))])
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
