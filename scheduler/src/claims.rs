//! The device binder: what kube-scheduler's DynamicResources plugin writes before a pod is bound
//! (`PreBind`), for each ResourceClaim a plan allocates or reserves
//! ([`scheduler_core::Plan::claims`]) — the finalizer `resource.kubernetes.io/delete-protection`
//! on a claim it allocates (an update of the claim), then `status.allocation` and the pods in
//! `status.reservedFor` together (an update of its status) — and what it writes when a pod it
//! reserved a claim for is not placed after all ([`scheduler_core::Plan::releases`]): the pod out
//! of `reservedFor`, and the allocation cleared when no consumer is left (`Unreserve`,
//! `PostFilter`).
//!
//! As for volumes ([`crate::volumes`]), the pods are not among the plan's bindings: the core
//! withholds every member of their gang until each of their claims is allocated and reserved for
//! them, and binds them in a later cycle; a gang that cannot be completed releases what was
//! written for it. So a gang is never half-allocated for longer than a cycle, and a write that
//! fails costs a retry: the next cycle decides again from what the watch shows. Each write carries
//! the `resourceVersion` of the claim it was computed from (a 409 when another scheduler or
//! controller changed it first), one write per claim and cycle: the status after the finalizer is
//! computed from the version the finalizer made, in the next cycle.

use std::collections::BTreeMap;

use scheduler_core::model::ObjectKey;
use scheduler_core::model::device::CLAIM_FINALIZER;
use scheduler_core::model::volume::RESERVED_FOR_MAX;
use scheduler_core::object::{ObjectRef, at};
use scheduler_core::plan::{ClaimAllocation, ClaimRelease, DeviceAllocation};
use serde_json::{Value, json};

use crate::apply::Http;
use crate::index::Index;
use crate::volumes::{Binder, Steps, VolumeWrite};

const MERGE: &str = "application/merge-patch+json";

fn str_of<'a>(v: &'a Value, pointer: &str) -> &'a str {
    at(v, pointer).and_then(Value::as_str).unwrap_or("")
}

/// The claim's identity, at any version the cluster serves (the cluster files it once).
fn claim_ref(key: &ObjectKey) -> ObjectRef {
    ObjectRef {
        group: "resource.k8s.io".into(),
        version: "v1".into(),
        kind: "ResourceClaim".into(),
        namespace: key.namespace.to_string(),
        name: key.name.to_string(),
    }
}

/// `status.allocation` as the API writes it.
fn allocation_value(a: &DeviceAllocation) -> Value {
    let mut devices = json!({"results": a.devices});
    if !a.config.is_empty() {
        devices["config"] = json!(a.config);
    }
    let mut out = json!({"devices": devices});
    if let Some(selector) = &a.node_selector {
        out["nodeSelector"] = selector.clone();
    }
    out
}

/// Whether the claim's allocation holds exactly the devices `a` allocates.
fn same_devices(current: &Value, a: &DeviceAllocation) -> bool {
    let results = at(current, "/status/allocation/devices/results").and_then(Value::as_array);
    let mut have: Vec<(String, String, String)> = results
        .into_iter()
        .flatten()
        .map(|r| (str_of(r, "/driver").into(), str_of(r, "/pool").into(), str_of(r, "/device").into()))
        .collect();
    let mut want: Vec<(String, String, String)> =
        a.devices.iter().map(|d| (d.id.driver.clone(), d.id.pool.clone(), d.id.device.clone())).collect();
    have.sort();
    want.sort();
    have == want
}

/// The one write that moves claim `claim` (as the watch shows it) toward what the plan says:
/// allocated as `allocs` say and reserved for their pods, or released for `releases`' pods.
/// `None` when it says so already, when it is not known yet or is being deleted, or when it was
/// allocated otherwise meanwhile (the next cycle decides again).
pub fn step(allocs: &[&ClaimAllocation], releases: &[&ClaimRelease], claim: &Value) -> Option<VolumeWrite> {
    let name = str_of(claim, "/metadata/name");
    let namespace = str_of(claim, "/metadata/namespace");
    let version = str_of(claim, "/metadata/resourceVersion").to_string();
    let api_version = str_of(claim, "/apiVersion");
    let path = format!("/apis/{api_version}/namespaces/{namespace}/resourceclaims/{name}");
    let object = claim_ref(&ObjectKey::new(namespace, name));
    let deleting = at(claim, "/metadata/deletionTimestamp").is_some_and(|v| !v.is_null());
    let allocated = at(claim, "/status/allocation").is_some_and(|v| !v.is_null());
    let reserved: Vec<Value> =
        at(claim, "/status/reservedFor").and_then(Value::as_array).cloned().unwrap_or_default();
    let reserved_for = |uid: &str| reserved.iter().any(|r| str_of(r, "/uid") == uid);
    let write = |path: String, body: Value| VolumeWrite {
        object: object.clone(),
        resource_version: version.clone(),
        http: Http { method: "PATCH", path, content_type: MERGE, body },
    };
    if !allocs.is_empty() {
        if deleting {
            return None;
        }
        let planned = allocs.iter().find_map(|c| c.allocation.as_ref());
        let mut status = serde_json::Map::new();
        match (planned, allocated) {
            (Some(a), true) if !same_devices(claim, a) => return None,
            (Some(_), true) | (None, true) => {}
            (None, false) => return None,
            (Some(a), false) => {
                let finalizers: Vec<Value> =
                    at(claim, "/metadata/finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
                if !finalizers.iter().any(|f| f == CLAIM_FINALIZER) {
                    let mut with = finalizers;
                    with.push(json!(CLAIM_FINALIZER));
                    return Some(write(
                        path,
                        json!({"metadata": {"resourceVersion": version, "finalizers": with}}),
                    ));
                }
                status.insert("allocation".into(), allocation_value(a));
            }
        }
        let mut list = reserved.clone();
        for c in allocs {
            // The API server refuses more than 256 consumers: those past it stay unreserved,
            // and their gang waits (it is never bound with a member unreserved).
            if list.len() >= RESERVED_FOR_MAX {
                break;
            }
            if !reserved_for(&c.uid) && !list.iter().any(|r| str_of(r, "/uid") == c.uid.as_str()) {
                list.push(json!({"resource": "pods", "name": c.pod.name, "uid": c.uid}));
            }
        }
        if status.is_empty() && list.len() == reserved.len() {
            return None;
        }
        status.insert("reservedFor".into(), Value::Array(list));
        return Some(write(
            format!("{path}/status"),
            json!({"metadata": {"resourceVersion": version}, "status": status}),
        ));
    }
    if releases.is_empty() || !allocated {
        return None;
    }
    let remaining: Vec<Value> = reserved
        .iter()
        .filter(|r| !releases.iter().any(|x| x.uid.as_str() == str_of(r, "/uid")))
        .cloned()
        .collect();
    let deallocate = remaining.is_empty() && releases.iter().any(|r| r.deallocate);
    if remaining.len() == reserved.len() && !deallocate {
        return None;
    }
    let mut status =
        json!({"reservedFor": if remaining.is_empty() { Value::Null } else { Value::Array(remaining) }});
    if deallocate {
        status["allocation"] = Value::Null;
        status["devices"] = Value::Null;
    }
    Some(write(format!("{path}/status"), json!({"metadata": {"resourceVersion": version}, "status": status})))
}

impl Binder {
    /// Each claim's write (see [`step`]), less what was sent from a version the watch still
    /// shows. Called after [`Binder::plan`] in the same cycle, which forgets what the watch has
    /// moved past.
    pub fn plan_claims(
        &mut self,
        claims: &[ClaimAllocation],
        releases: &[ClaimRelease],
        index: &Index,
    ) -> Vec<Steps> {
        let mut by_claim: BTreeMap<&ObjectKey, (Vec<&ClaimAllocation>, Vec<&ClaimRelease>)> = BTreeMap::new();
        for c in claims {
            by_claim.entry(&c.claim).or_default().0.push(c);
        }
        for r in releases {
            by_claim.entry(&r.claim).or_default().1.push(r);
        }
        by_claim
            .into_iter()
            .filter_map(|(key, (allocs, releases))| {
                let current = index.get(&claim_ref(key))?;
                step(&allocs, &releases, current)
            })
            .filter(|w| !self.sent_from(w))
            .map(|w| vec![w])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use scheduler_core::model::device::{AllocatedDevice, DeviceId};

    use super::*;

    fn claim(status: Value, finalizers: &[&str]) -> Value {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": "w-0-gpu", "namespace": "ml", "uid": "c1", "resourceVersion": "7", "finalizers": finalizers},
               "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
               "status": status})
    }

    fn allocation() -> DeviceAllocation {
        DeviceAllocation {
            devices: vec![AllocatedDevice {
                request: "gpu".into(),
                id: DeviceId { driver: "gpu.example.com".into(), pool: "n1".into(), device: "gpu-0".into() },
                admin_access: false,
            }],
            node_selector: Some(
                json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}),
            ),
            config: vec![
                json!({"source": "FromClass", "requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {}}}),
            ],
        }
    }

    fn alloc(pod: &str, allocation: Option<DeviceAllocation>) -> ClaimAllocation {
        ClaimAllocation {
            pod: ObjectKey::new("ml", pod),
            uid: format!("uid-{pod}").into(),
            node: "n1".into(),
            claim: ObjectKey::new("ml", "w-0-gpu"),
            allocation,
        }
    }

    #[test]
    fn an_allocation_is_written_finalizer_first_then_status_and_reservation_together() {
        let a = alloc("w-0", Some(allocation()));
        let w = step(&[&a], &[], &claim(json!({}), &[])).unwrap();
        assert_eq!(w.http.path, "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/w-0-gpu");
        assert_eq!(w.http.body["metadata"]["finalizers"], json!([CLAIM_FINALIZER]));
        assert_eq!(w.http.body["metadata"]["resourceVersion"], "7");
        assert!(w.http.body.get("status").is_none());
        // The finalizer there: the status, allocation and reservation in one write.
        let w = step(&[&a], &[], &claim(json!({}), &[CLAIM_FINALIZER])).unwrap();
        assert_eq!(w.http.path, "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/w-0-gpu/status");
        let st = &w.http.body["status"];
        assert_eq!(st["allocation"]["devices"]["results"][0]["device"], "gpu-0");
        assert_eq!(st["allocation"]["devices"]["results"][0]["pool"], "n1");
        assert_eq!(st["allocation"]["devices"]["config"][0]["source"], "FromClass");
        assert_eq!(
            st["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0],
            "n1"
        );
        assert_eq!(st["reservedFor"], json!([{"resource": "pods", "name": "w-0", "uid": "uid-w-0"}]));
        // Done: nothing more.
        let done = claim(
            json!({"allocation": allocation_value(&allocation()), "reservedFor": st["reservedFor"]}),
            &[CLAIM_FINALIZER],
        );
        assert!(step(&[&a], &[], &done).is_none());
        // Allocated otherwise meanwhile: nothing (the next cycle decides again).
        let mut other = allocation();
        other.devices[0].id.device = "gpu-1".into();
        let elsewhere = claim(json!({"allocation": allocation_value(&other)}), &[CLAIM_FINALIZER]);
        assert!(step(&[&a], &[], &elsewhere).is_none());
        // Being deleted: nothing.
        let mut going = claim(json!({}), &[CLAIM_FINALIZER]);
        going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(step(&[&a], &[], &going).is_none());
    }

    #[test]
    fn a_shared_claim_is_reserved_for_each_pod_once_keeping_its_consumers() {
        let allocated = claim(
            json!({"allocation": allocation_value(&allocation()),
                   "reservedFor": [{"resource": "pods", "name": "runner", "uid": "uid-runner"}]}),
            &[CLAIM_FINALIZER],
        );
        let (a, b) = (alloc("w-0", None), alloc("w-1", None));
        let w = step(&[&a, &b], &[], &allocated).unwrap();
        let list = &w.http.body["status"]["reservedFor"];
        assert_eq!(list.as_array().unwrap().len(), 3);
        assert_eq!(list[0]["uid"], "uid-runner");
        assert!(w.http.body["status"].get("allocation").is_none(), "an allocation is never rewritten");
        // Not allocated (yet): a reservation alone is not written (the API refuses it).
        assert!(step(&[&a], &[], &claim(json!({}), &[])).is_none());
    }

    #[test]
    fn a_release_unreserves_and_deallocates_only_when_no_consumer_is_left() {
        let release = |pod: &str, deallocate| ClaimRelease {
            claim: ObjectKey::new("ml", "w-0-gpu"),
            pod: ObjectKey::new("ml", pod),
            uid: format!("uid-{pod}").into(),
            deallocate,
        };
        let only = claim(
            json!({"allocation": allocation_value(&allocation()),
                   "reservedFor": [{"resource": "pods", "name": "w-0", "uid": "uid-w-0"}]}),
            &[CLAIM_FINALIZER],
        );
        let r = release("w-0", true);
        let w = step(&[], &[&r], &only).unwrap();
        assert_eq!(w.http.path, "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/w-0-gpu/status");
        assert_eq!(w.http.body["status"], json!({"reservedFor": null, "allocation": null, "devices": null}));
        // Another consumer reserved it meanwhile: only the pod is taken out.
        let shared = claim(
            json!({"allocation": allocation_value(&allocation()),
                   "reservedFor": [{"resource": "pods", "name": "w-0", "uid": "uid-w-0"},
                                   {"resource": "pods", "name": "runner", "uid": "uid-runner"}]}),
            &[CLAIM_FINALIZER],
        );
        let w = step(&[], &[&r], &shared).unwrap();
        assert_eq!(
            w.http.body["status"],
            json!({"reservedFor": [{"resource": "pods", "name": "runner", "uid": "uid-runner"}]})
        );
        // Nothing of the pod's left: nothing to write.
        let gone = claim(json!({"allocation": allocation_value(&allocation())}), &[CLAIM_FINALIZER]);
        assert!(step(&[], &[&release("w-0", false)], &gone).is_none());
    }
}
