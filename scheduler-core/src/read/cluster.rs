//! Cluster assembly: raw Kubernetes objects (nodes, pods, priority classes, namespaces, every
//! dialect's gang objects) in, a [`Snapshot`] out — with every object that could not be understood
//! listed as a [`Problem`] instead of being dropped silently.
//!
//! Membership is resolved here, once every object is known: a pod's claims (one per dialect that
//! names a gang) resolve to the gang object that exists; CRD-less gangs (kube-gang and Koordinator
//! annotations) are built from the oldest pod that claims them; upstream PodGroups resolve to the
//! root of their CompositePodGroup tree.
//!
//! [`Cluster::snapshot`] assembles in one pass (files, dumps, the CLI); [`Live`] keeps a snapshot
//! assembled while a watch delivers changes one object at a time (the scheduler).

mod assembly;
mod resolve;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::dialect;
use crate::error::FieldError;
use crate::model::Snapshot;
use crate::object::{Filed, ObjectRef};
use assembly::Assembly;
pub use assembly::{Live, Overlay};

/// A kind the cluster view reads from the API: every front door that lists or watches the cluster
/// reads exactly these, so a dialect added here reaches the scheduler and the plugin alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    /// A built-in Kubernetes kind (always served); the others are CRDs that may be absent.
    pub builtin: bool,
}

const fn api_kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
) -> ApiKind {
    ApiKind { group, version, kind, plural, builtin: false }
}

const fn builtin(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
) -> ApiKind {
    ApiKind { group, version, kind, plural, builtin: true }
}

/// Everything [`Cluster`] understands: nodes, pods, namespaces, priority classes,
/// PodDisruptionBudgets and every gang dialect's objects.
pub const READ: &[ApiKind] = &[
    builtin("", "v1", "Node", "nodes"),
    builtin("", "v1", "Pod", "pods"),
    builtin("", "v1", "Namespace", "namespaces"),
    builtin("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses"),
    builtin("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    api_kind(crate::GROUP, crate::VERSION, "Gang", "gangs"),
    // PodGroups, preferred version first: 1.37 serves v1beta1 and v1alpha3 (either may be
    // enabled alone), 1.36 v1alpha2 only; 1.35 has Workloads pods point at. A cluster serving two
    // of them is watched at both, and the copy of the preferred version is the one kept
    // ([`Cluster::push`]), so no PodGroup is read twice.
    api_kind("scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups"),
    api_kind("scheduling.k8s.io", "v1alpha3", "PodGroup", "podgroups"),
    api_kind("scheduling.k8s.io", "v1alpha2", "PodGroup", "podgroups"),
    api_kind("scheduling.k8s.io", "v1alpha1", "Workload", "workloads"),
    api_kind("scheduling.k8s.io", "v1alpha3", "CompositePodGroup", "compositepodgroups"),
    api_kind("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups"),
    api_kind("scheduling.sigs.k8s.io", "v1alpha1", "PodGroup", "podgroups"),
    api_kind("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups"),
    api_kind("scheduling.run.ai", "v2alpha2", "PodGroup", "podgroups"),
];

/// Where an object's API version comes in [`READ`] among the versions of its kind: lower is
/// preferred; a version not listed comes last.
fn preference(obj: &Value) -> usize {
    let api_version = str_at(obj, "/apiVersion");
    let kind = str_at(obj, "/kind");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    READ.iter().position(|k| k.group == group && k.version == version && k.kind == kind).unwrap_or(usize::MAX)
}

/// One object that could not be read, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// `Kind namespace/name` (or `Kind name` for cluster-scoped objects).
    pub object: String,
    pub errors: Vec<FieldError>,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let errors: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
        write!(f, "{}: {}", self.object, errors.join("; "))
    }
}

/// A snapshot and the problems met building it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assembled {
    pub snapshot: Snapshot,
    pub problems: Vec<Problem>,
}

/// Raw API objects, as listed from the API or read from a dump. Later pushes of the same object
/// replace earlier ones.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    nodes: BTreeMap<String, Value>,
    pods: BTreeMap<(String, String), Value>,
    priority_classes: BTreeMap<String, Value>,
    namespaces: BTreeMap<String, Value>,
    /// PodDisruptionBudgets by (namespace, name).
    budgets: BTreeMap<(String, String), Value>,
    gang_objects: BTreeMap<(String, String, String, String), Value>,
    /// Objects of kinds the cluster view does not use (Jobs, Services, …), kept for callers.
    pub others: Vec<Value>,
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    crate::object::at(v, ptr).and_then(Value::as_str).unwrap_or("")
}

/// `Kind namespace/name` for messages.
pub fn describe(obj: &Value) -> String {
    let kind = str_at(obj, "/kind");
    let ns = str_at(obj, "/metadata/namespace");
    let name = str_at(obj, "/metadata/name");
    let kind = if kind.is_empty() { "object" } else { kind };
    if ns.is_empty() { format!("{kind} {name}") } else { format!("{kind} {ns}/{name}") }
}

impl Cluster {
    pub fn new() -> Self {
        Cluster::default()
    }

    /// Adds one object; a `List` (`v1 List`, `PodList`, …) is flattened.
    pub fn push(&mut self, obj: Value) -> Result<(), FieldError> {
        if !obj.is_object() {
            return Err(FieldError::new("", "not an object"));
        }
        let kind = str_at(&obj, "/kind").to_string();
        if kind.is_empty() {
            return Err(FieldError::new("kind", "missing"));
        }
        if kind.ends_with("List") && obj.get("items").is_some() {
            let mut obj = obj;
            // Taken, not cloned: a dump's list holds the whole cluster.
            let Some(Value::Array(items)) = obj.get_mut("items").map(Value::take) else {
                return Err(FieldError::new("items", "must be a list"));
            };
            let mut first_error = None;
            for (i, item) in items.into_iter().enumerate() {
                // Items of a typed list (PodList) may omit their own kind.
                let mut item = item;
                if item.get("kind").is_none()
                    && let (Some(k), Some(map)) = (kind.strip_suffix("List"), item.as_object_mut())
                    && !k.is_empty()
                {
                    map.insert("kind".into(), Value::String(k.to_string()));
                    if let Some(v) = obj.get("apiVersion").cloned() {
                        map.entry("apiVersion").or_insert(v);
                    }
                }
                if let Err(e) = self.push(item)
                    && first_error.is_none()
                {
                    first_error = Some(FieldError::new(format!("items[{i}].{}", e.path), e.message));
                }
            }
            return first_error.map_or(Ok(()), Err);
        }
        self.push_as(ObjectRef::of(&obj), obj)
    }

    /// Files one object (not a `List`) under its identity, read once by the caller.
    fn push_as(&mut self, r: ObjectRef, obj: Value) -> Result<(), FieldError> {
        if r.name.is_empty() {
            return Err(FieldError::new("metadata.name", format!("missing on {}", r.kind)));
        }
        match r.filed() {
            Filed::Node => {
                self.nodes.insert(r.name, obj);
            }
            Filed::Pod => {
                self.pods.insert((r.pod_namespace().to_string(), r.name), obj);
            }
            Filed::Namespace => {
                self.namespaces.insert(r.name, obj);
            }
            Filed::PriorityClass => {
                self.priority_classes.insert(r.name, obj);
            }
            Filed::Budget => {
                self.budgets.insert((r.pod_namespace().to_string(), r.name), obj);
            }
            Filed::Other if dialect::read_object(&obj).is_some() => {
                let key = (r.group, r.kind, r.namespace, r.name);
                // The same object served at two versions arrives twice: the preferred one stays.
                if self.gang_objects.get(&key).is_some_and(|held| preference(held) < preference(&obj)) {
                    return Ok(());
                }
                self.gang_objects.insert(key, obj);
            }
            Filed::Other => self.others.push(obj),
        }
        Ok(())
    }

    /// Removes an object (a watch `Deleted` event).
    pub fn remove(&mut self, obj: &Value) {
        self.remove_ref(&ObjectRef::of(obj));
    }

    /// Removes the object of this API version, kind, namespace and name, if held.
    pub fn remove_named(&mut self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        self.remove_ref(&ObjectRef::new(api_version, kind, namespace, name));
    }

    /// Removes the object with this identity, if held.
    pub fn remove_ref(&mut self, r: &ObjectRef) {
        match r.filed() {
            Filed::Node => {
                self.nodes.remove(&r.name);
            }
            Filed::Pod => {
                self.pods.remove(&(r.pod_namespace().to_string(), r.name.clone()));
            }
            Filed::Namespace => {
                self.namespaces.remove(&r.name);
            }
            Filed::PriorityClass => {
                self.priority_classes.remove(&r.name);
            }
            Filed::Budget => {
                self.budgets.remove(&(r.pod_namespace().to_string(), r.name.clone()));
            }
            Filed::Other => {
                self.gang_objects.remove(&(
                    r.group.clone(),
                    r.kind.clone(),
                    r.namespace.clone(),
                    r.name.clone(),
                ));
            }
        }
    }

    /// The labels of namespace `ns`, if the cluster holds it.
    pub fn namespace_labels(&self, ns: &str) -> Option<BTreeMap<String, String>> {
        let labels = self.namespaces.get(ns)?.pointer("/metadata/labels")?.as_object()?;
        Some(labels.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string()))).collect())
    }

    /// The raw pod `namespace/name`, if the cluster holds it.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Value> {
        self.pods.get(&(namespace.to_string(), name.to_string()))
    }

    /// Every raw pod, in key order.
    pub fn pods(&self) -> impl Iterator<Item = &Value> {
        self.pods.values()
    }

    /// Every raw gang-defining object (any dialect), in key order.
    pub fn gang_objects(&self) -> impl Iterator<Item = &Value> {
        self.gang_objects.values()
    }

    /// The raw object of this API version, kind, namespace and name, if the cluster holds it.
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<&Value> {
        self.get_ref(&ObjectRef::new(api_version, kind, namespace, name))
    }

    /// The raw object with this identity, if the cluster holds it.
    pub fn get_ref(&self, r: &ObjectRef) -> Option<&Value> {
        match r.filed() {
            Filed::Node => self.nodes.get(&r.name),
            Filed::Pod => self.pods.get(&(r.pod_namespace().to_string(), r.name.clone())),
            Filed::Namespace => self.namespaces.get(&r.name),
            Filed::PriorityClass => self.priority_classes.get(&r.name),
            Filed::Budget => self.budgets.get(&(r.pod_namespace().to_string(), r.name.clone())),
            Filed::Other => {
                self.gang_objects.get(&(r.group.clone(), r.kind.clone(), r.namespace.clone(), r.name.clone()))
            }
        }
    }

    /// The snapshot the cycle sees, assembled in one pass (pods are converted on all cores).
    pub fn snapshot(&self) -> Assembled {
        Assembly::build(self, false).into_assembled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn podgroup(version: &str, min: i32) -> Value {
        json!({"apiVersion": format!("scheduling.k8s.io/{version}"), "kind": "PodGroup",
               "metadata": {"name": "pg", "namespace": "ml"},
               "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}})
    }

    #[test]
    fn every_podgroup_version_is_read_and_one_served_twice_is_read_once_at_the_preferred_version() {
        let versions: Vec<&str> = READ
            .iter()
            .filter(|k| k.group == "scheduling.k8s.io" && k.kind == "PodGroup")
            .map(|k| k.version)
            .collect();
        assert_eq!(versions, ["v1beta1", "v1alpha3", "v1alpha2"]);
        let gangs = |c: &Cluster| {
            let s = c.snapshot().snapshot;
            s.gangs.iter().map(|g| (g.key.to_string(), g.min_member)).collect::<Vec<_>>()
        };
        // A cluster serving only v1alpha3.
        let mut only = Cluster::new();
        only.push(podgroup("v1alpha3", 3)).unwrap();
        assert_eq!(gangs(&only), [("ml/pg".to_string(), 3)]);
        // Served at v1beta1 and v1alpha3, watched at both: one gang, from the preferred copy,
        // whichever copy arrives last.
        let mut both = Cluster::new();
        both.push(podgroup("v1beta1", 4)).unwrap();
        both.push(podgroup("v1alpha3", 3)).unwrap();
        assert_eq!(gangs(&both), [("ml/pg".to_string(), 4)]);
        let mut other_order = Cluster::new();
        other_order.push(podgroup("v1alpha3", 3)).unwrap();
        other_order.push(podgroup("v1beta1", 4)).unwrap();
        assert_eq!(gangs(&other_order), [("ml/pg".to_string(), 4)]);
    }
}
