//! What the volume filters read, as kube-apiserver validates it where the scheduler writes it
//! (`pkg/apis/core/validation`: `ValidatePersistentVolumeClaim{,Update}`,
//! `ValidatePersistentVolume{,Update}`; `pkg/apis/storage/validation`:
//! `ValidateStorageClassUpdate`). The PV controller's and a CSI provisioner's part of binding,
//! when a test runs them, is [`crate::pv_controller`].
//!
//! - A PVC needs an access mode (`ReadWriteOncePod` alone) and a positive storage request. After
//!   creation its spec is immutable but for `volumeName`, which may be set once (from empty), and
//!   `resources.requests` of a bound claim, which may grow; the beta storage-class annotation is
//!   immutable too. Anything else is `spec: Forbidden: spec is immutable after creation except
//!   resources.requests and volumeAttributesClassName for bound claims`.
//! - A PV needs an access mode, a storage capacity and exactly one volume source (a local one a
//!   node affinity). After creation its source and `volumeMode` are immutable, and its node
//!   affinity once set; its `claimRef` is free to change (binding writes it; races between
//!   binders are settled by `resourceVersion`).
//! - A StorageClass's provisioner, parameters, reclaim policy and binding mode are immutable.

use serde_json::{Value, json};

use crate::equality::{same, set};
use crate::status::FieldError;

const SUPPORTED_ACCESS_MODES: [&str; 4] =
    ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];

/// The volume sources of a PV (`spec` fields, one and only one of which is set).
const PV_SOURCES: [&str; 22] = [
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

fn access_modes(path: &str, modes: Option<&Value>, errs: &mut Vec<FieldError>) {
    let list: Vec<&str> =
        modes.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    if list.is_empty() {
        errs.push(FieldError::required(path, "at least 1 access mode is required"));
    }
    for m in &list {
        if !SUPPORTED_ACCESS_MODES.contains(m) {
            errs.push(FieldError::not_supported(path, m, &SUPPORTED_ACCESS_MODES));
        }
    }
    if list.contains(&"ReadWriteOncePod") && list.iter().any(|m| *m != "ReadWriteOncePod") {
        errs.push(FieldError::forbidden(path, "may not use ReadWriteOncePod with other access modes"));
    }
}

/// A storage quantity in bytes (`None`: not one).
fn bytes(q: &Value) -> Option<i64> {
    scheduler_core::resources::amount("storage", q.as_str()?).ok()
}

/// `ValidatePersistentVolumeClaim` (the spec's rules; metadata is checked for every kind).
pub fn claim(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec");
    access_modes("spec.accessModes", spec.and_then(|s| s.get("accessModes")), errs);
    let storage = obj.pointer("/spec/resources/requests/storage");
    match storage {
        None | Some(Value::Null) => errs.push(FieldError::required("spec.resources[storage]", "")),
        Some(q) => match bytes(q) {
            Some(n) if n > 0 => {}
            _ => errs.push(FieldError::invalid(
                "spec.resources[storage]",
                &q.as_str().map_or_else(|| q.to_string(), String::from),
                "must be greater than zero",
            )),
        },
    }
}

/// `ValidatePersistentVolumeClaimUpdate`: what may change of `old`'s spec in `new`.
pub fn claim_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let mut was = old.get("spec").cloned().unwrap_or(json!({}));
    let mut now = new.get("spec").cloned().unwrap_or(json!({}));
    let old_volume = was.get("volumeName").and_then(Value::as_str).unwrap_or("");
    if old_volume.is_empty() {
        // The PV controller (or a binder) sets volumeName once.
        was["volumeName"] = now.get("volumeName").cloned().unwrap_or(Value::Null);
    }
    let bound = old.pointer("/status/phase").and_then(Value::as_str) == Some("Bound");
    let (old_size, new_size) = (
        old.pointer("/spec/resources/requests/storage").and_then(bytes),
        new.pointer("/spec/resources/requests/storage").and_then(bytes),
    );
    if bound {
        // A bound claim's request may change (expansion); shrinking is refused below.
        for spec in [&mut was, &mut now] {
            if let Some(r) = spec.pointer_mut("/resources/requests") {
                r["storage"] = Value::Null;
            }
        }
    }
    if !same(Some(&was), Some(&now)) {
        errs.push(FieldError::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ));
    }
    if let (Some(o), Some(n)) = (old_size, new_size)
        && n < o
    {
        errs.push(FieldError::forbidden(
            "spec.resources.requests.storage",
            "field can not be less than previous value",
        ));
    }
    let beta = "/metadata/annotations/volume.beta.kubernetes.io~1storage-class";
    if !same(old.pointer(beta), new.pointer(beta)) {
        errs.push(FieldError::invalid(
            "metadata.annotations[volume.beta.kubernetes.io/storage-class]",
            new.pointer(beta).and_then(Value::as_str).unwrap_or(""),
            "field is immutable",
        ));
    }
}

/// `ValidatePersistentVolume`'s spec rules.
pub fn volume(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec");
    access_modes("spec.accessModes", spec.and_then(|s| s.get("accessModes")), errs);
    if !set(obj.pointer("/spec/capacity/storage")) {
        errs.push(FieldError::required("spec.capacity", ""));
    }
    let sources: Vec<&str> =
        PV_SOURCES.iter().copied().filter(|s| set(spec.and_then(|x| x.get(*s)))).collect();
    match sources.len() {
        0 => errs.push(FieldError::required("spec", "must specify a volume type")),
        1 => {}
        _ => errs.push(FieldError::forbidden(
            format!("spec.{}", sources[1]),
            "may not specify more than 1 volume type",
        )),
    }
    if sources.contains(&"local") && !set(obj.pointer("/spec/nodeAffinity")) {
        errs.push(FieldError::required("spec.nodeAffinity", "Local volume requires node affinity"));
    }
}

/// `ValidatePersistentVolumeUpdate`: the source and volume mode immutable, the node affinity once
/// set; the claim reference free.
pub fn volume_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    for s in PV_SOURCES {
        if !same(old.pointer(&format!("/spec/{s}")), new.pointer(&format!("/spec/{s}"))) {
            errs.push(FieldError::forbidden(
                "spec.persistentvolumesource",
                "spec.persistentvolumesource is immutable after creation",
            ));
            break;
        }
    }
    if !same(old.pointer("/spec/volumeMode"), new.pointer("/spec/volumeMode")) {
        errs.push(FieldError::invalid("volumeMode", "", "field is immutable"));
    }
    if set(old.pointer("/spec/nodeAffinity"))
        && !same(old.pointer("/spec/nodeAffinity"), new.pointer("/spec/nodeAffinity"))
    {
        errs.push(FieldError::invalid("nodeAffinity", "", "field is immutable"));
    }
}

/// `ValidateStorageClassUpdate`.
pub fn class_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    for (field, what) in [
        ("parameters", "updates to parameters are forbidden."),
        ("provisioner", "updates to provisioner are forbidden."),
        ("reclaimPolicy", "updates to reclaimPolicy are forbidden."),
        ("volumeBindingMode", "field is immutable"),
    ] {
        if !same(old.get(field), new.get(field)) {
            errs.push(FieldError::forbidden(field, what));
        }
    }
}
