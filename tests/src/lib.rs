//! Shared test support for kube-gang: an HTTP-level fake of the Kubernetes API, as strict as
//! kube-apiserver wherever the scheduler and the plugin depend on it.
//!
//! [`FakeApi`] serves the subset of the API they use over real HTTP on loopback, by concern:
//!
//! - [`store`](mod@store): objects, resourceVersions, the history watches resume from, the clock;
//! - [`validation`]: request bodies decoded and checked as apimachinery checks them (timestamps,
//!   names, labels, Events, conditions), answered with a real `metav1.Status` ([`status`]);
//! - [`schema`]: a custom resource (the `Gang`) checked against its CRD's OpenAPI schema;
//! - [`patch`]: JSON Patch, merge patch, strategic merge patch with list merge keys;
//! - [`pod_update`]: a pod's spec immutable after creation but for the fields the API server lets
//!   change (`ValidatePodUpdate`);
//! - [`watch`]: list and watch with selectors, pagination, bookmarks, timeouts and 410 Gone;
//! - [`subresources`]: `pods/binding`, `pods/eviction` through PodDisruptionBudgets, graceful
//!   deletion;
//! - [`disruption`]: the disruption controller's PodDisruptionBudget status, when a test runs it;
//! - [`provisioning`]: cluster-autoscaler's ProvisioningRequest and PodTemplates, checked as
//!   the CRD's schema and the API server check them;
//! - [`admission_match`]: which webhooks the API server calls for a request (selectors, rules,
//!   `matchConditions` in a CEL subset), to hold the webhook configurations to what opted in;
//! - [`names`]: name and label syntax (DNS-1123, qualified names, label values);
//! - [`config_objects`]: Secrets and admission webhook configurations, as the API server
//!   validates them (what the webhook's certificate management writes);
//! - [`volumes`]: PVCs, PVs and StorageClasses as the API server validates their updates (a
//!   PVC's spec immutable but for `volumeName` set once, a PV's source);
//! - [`dra`]: ResourceClaims, ResourceSlices and DeviceClasses (`resource.k8s.io`), a claim's
//!   updates checked as the API server checks kube-scheduler's (spec immutable, allocation set
//!   once, `reservedFor` only on an allocated claim);
//! - [`equality`]: old and new compared as the API server's update rules compare them;
//! - [`pv_controller`]: the PV controller's and a provisioner's part of binding, when a test runs
//!   them;
//! - [`faults`]: injected statuses, lost responses, bindings lost to another scheduler, delays.
//!
//! Every request is recorded (method, path, query, body, when, `User-Agent`, the status it got)
//! so tests assert on exactly what a real API server would have received.

pub mod admission_match;
mod api;
pub mod config_objects;
pub mod disruption;
pub mod dra;
pub mod equality;
pub mod faults;
pub mod names;
pub mod patch;
pub mod pod_update;
pub mod provisioning;
pub mod pv_controller;
pub mod route;
pub mod schema;
pub mod server;
pub mod status;
pub mod store;
pub mod subresources;
pub mod times;
pub mod tools;
pub mod validation;
pub mod volumes;
pub mod watch;

pub use api::{Answer, FakeApi};
pub use faults::{Fault, FaultKind};
pub use store::Recorded;

use serde_json::{Value, json};

/// A node object as the API serves it.
pub fn node(name: &str, cpu: &str, gpus: u32, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> =
        labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
           "status": {"allocatable": {"cpu": cpu, "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// A pending pod of gang `gang` (label form) asking for `gpus`.
pub fn gang_pod(namespace: &str, name: &str, gang: &str, gpus: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"), "labels": {"kube-gang.io/gang": gang}},
           "spec": {"schedulerName": "gang-scheduler", "containers": [{"name": "c", "image": "x",
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus.to_string()}, "limits": {"nvidia.com/gpu": gpus.to_string()}}}]},
           "status": {"phase": "Pending"}})
}

/// A `Gang` object.
pub fn gang(namespace: &str, name: &str, min_member: u32) -> Value {
    json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
           "metadata": {"name": name, "namespace": namespace, "generation": 1},
           "spec": {"minMember": min_member}})
}

/// A PodDisruptionBudget selecting `match_labels`, its status as the disruption controller
/// last wrote it: `allowed` disruptions, `healthy` of `desired` pods healthy.
pub fn pdb(
    namespace: &str,
    name: &str,
    match_labels: &[(&str, &str)],
    allowed: i32,
    healthy: i32,
    desired: i32,
) -> Value {
    let labels: serde_json::Map<String, Value> =
        match_labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": name, "namespace": namespace, "generation": 1},
           "spec": {"minAvailable": desired, "selector": {"matchLabels": labels}},
           "status": {"observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": healthy,
                      "desiredHealthy": desired, "expectedPods": healthy}})
}
