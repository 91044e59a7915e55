//! The PV controller's and a CSI provisioner's part of binding, as the scheduler relies on it,
//! when a test runs them ([`pv_controller`]); what they write is checked by [`crate::volumes`]'
//! rules like any other write.

use serde_json::{Value, json};

use crate::equality::set;
use crate::store::{Resource, Store};

const CLAIMS: &str = "persistentvolumeclaims";
const VOLUMES: &str = "persistentvolumes";

fn core(plural: &str) -> Resource {
    ("/api/v1".to_string(), plural.to_string())
}

/// The PV controller's and a CSI provisioner's part of binding, as the scheduler relies on it:
/// a PVC whose `volumeName` names a PV whose `claimRef` is it (or unset) gets bound —
/// annotation `pv.kubernetes.io/bind-completed`, both `Bound`; a PVC some PV is pre-bound to
/// gets that PV's name; a PVC whose provisioning was asked for a node (annotation
/// `volume.kubernetes.io/selected-node`) and whose class provisions gets a new PV there (node
/// affinity on `kubernetes.io/hostname`, its size, class and access modes) and is bound to it.
/// Run on every change of a PVC or PV once a test calls [`crate::FakeApi::run_pv_controller`].
pub fn pv_controller(s: &mut Store) {
    let claims: Vec<((String, String), Value)> = s
        .objects
        .get(&core(CLAIMS))
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    for (key, c) in claims {
        if c.pointer("/metadata/annotations/pv.kubernetes.io~1bind-completed").is_some() {
            continue;
        }
        let uid = c.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string();
        let points_here = |pv: &Value| {
            pv.pointer("/spec/claimRef/namespace").and_then(Value::as_str) == Some(key.0.as_str())
                && pv.pointer("/spec/claimRef/name").and_then(Value::as_str) == Some(key.1.as_str())
                && pv
                    .pointer("/spec/claimRef/uid")
                    .and_then(Value::as_str)
                    .is_none_or(|u| u.is_empty() || u == uid)
        };
        let mut volume =
            c.pointer("/spec/volumeName").and_then(Value::as_str).filter(|v| !v.is_empty()).map(String::from);
        if volume.is_none() {
            // A PV pre-bound to the claim: the controller completes the claim's side.
            volume = s
                .objects
                .get(&core(VOLUMES))
                .and_then(|m| m.iter().find(|(_, pv)| points_here(pv)).map(|((_, n), _)| n.clone()));
        }
        if volume.is_none()
            && let Some(node) =
                c.pointer("/metadata/annotations/volume.kubernetes.io~1selected-node").and_then(Value::as_str)
        {
            volume = provision(s, &key, &c, node);
        }
        let Some(name) = volume else { continue };
        let Some(mut pv) = s.get(&core(VOLUMES), &(String::new(), name.clone())).cloned() else { continue };
        if !set(pv.pointer("/spec/claimRef")) {
            pv["spec"]["claimRef"] = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                            "namespace": key.0, "name": key.1, "uid": uid});
        } else if !points_here(&pv) {
            continue;
        }
        pv["status"] = json!({"phase": "Bound"});
        s.commit(&core(VOLUMES), (String::new(), name.clone()), pv, "MODIFIED");
        let mut bound = c.clone();
        bound["spec"]["volumeName"] = json!(name);
        if !bound.pointer("/metadata/annotations").is_some_and(Value::is_object) {
            bound["metadata"]["annotations"] = json!({});
        }
        bound["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = json!("yes");
        bound["status"] = json!({"phase": "Bound"});
        s.commit(&core(CLAIMS), key, bound, "MODIFIED");
    }
}

/// A PV provisioned for claim `c` on `node`, if its class provisions (`None` otherwise).
fn provision(s: &mut Store, key: &(String, String), c: &Value, node: &str) -> Option<String> {
    let class = c.pointer("/spec/storageClassName").and_then(Value::as_str)?;
    let classes = ("/apis/storage.k8s.io/v1".to_string(), "storageclasses".to_string());
    let sc = s.get(&classes, &(String::new(), class.to_string()))?;
    let provisioner = sc.get("provisioner").and_then(Value::as_str).unwrap_or("");
    if provisioner.is_empty() || provisioner == "kubernetes.io/no-provisioner" {
        return None;
    }
    let uid = c.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or(&key.1);
    let name = format!("pvc-{uid}");
    let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "uid": format!("pv-{uid}"), "creationTimestamp": crate::times::format_time(s.now()),
                     "annotations": {"pv.kubernetes.io/provisioned-by": provisioner}},
        "spec": {"storageClassName": class, "capacity": {"storage": c.pointer("/spec/resources/requests/storage")},
                 "accessModes": c.pointer("/spec/accessModes"), "csi": {"driver": provisioner, "volumeHandle": name},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}},
        "status": {"phase": "Pending"}});
    s.commit(&core(VOLUMES), (String::new(), name.clone()), pv, "ADDED");
    Some(name)
}
