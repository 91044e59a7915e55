//! Dynamic resource allocation (`resource.k8s.io`) as kube-apiserver validates what a scheduler
//! writes: a ResourceClaim's updates (`pkg/registry/resource/resourceclaim/strategy.go`,
//! `ValidateResourceClaimUpdate` and `ValidateResourceClaimStatusUpdate` in
//! `pkg/apis/resource/validation/validation.go`). ResourceSlices and DeviceClasses are decoded
//! as their version's type and otherwise taken as they come ([`crate::validation`]).
//!
//! - The main resource: `.status` is kept as stored (the `/status` split) and `spec` is immutable
//!   (`spec: Invalid value: …: field is immutable`).
//! - `/status`: `spec` and metadata are kept as stored (`ResetObjectMetaForStatus`: labels,
//!   annotations, finalizers and owner references too), then the status is checked:
//!   - `status.reservedFor`: at most 256 entries (`TooMany`, and then no entry is looked at), each
//!     with `resource`, `name` and `uid` (`Required`), no `uid` twice (`Duplicate` at the later
//!     index); none while `status.allocation` is unset, and none added while the claim has a
//!     `deletionTimestamp` (`Forbidden`);
//!   - `status.allocation`: once set, immutable (`Invalid`: `field is immutable`) until cleared;
//!     a new one is checked: at most 32 `devices.results`, each naming a request of the claim
//!     (`name` or `name/subrequest` of a `firstAvailable` request), a driver (a CSI driver name),
//!     a pool and a device (a DNS-1123 label: an empty one is `Invalid`, not `Required`, as the
//!     API server's hand-written rule has it); at most 64 `devices.config` entries with a source,
//!     known requests and an opaque configuration of a driver with a JSON object for parameters;
//!     the node selector as a pod's required node affinity is checked.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::equality::{same, set};
use crate::names::{dns1123_label, dns1123_subdomain, label_value, qualified_name};
use crate::status::FieldError;

/// `ResourceClaimReservedForMaxSize`.
pub const RESERVED_FOR_MAX: usize = 256;
/// `AllocationResultsMaxSize`.
pub const ALLOCATION_RESULTS_MAX: usize = 32;
/// `DeviceRequestsMaxSize`: requests a configuration names.
const DEVICE_REQUESTS_MAX: usize = 32;
/// `2 * DeviceConfigMaxSize`: the class's configurations and the claim's.
const ALLOCATION_CONFIG_MAX: usize = 64;
/// `PoolNameMaxLength`.
const POOL_NAME_MAX: usize = 253;
/// `OpaqueParametersMaxLength`.
const OPAQUE_PARAMETERS_MAX: usize = 10 * 1024;
/// A CSI driver name's limit (`ValidateCSIDriverName`).
const DRIVER_NAME_MAX: usize = 63;

const NOT_A_REQUEST: &str =
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn list<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// `ValidateResourceClaimUpdate`: the spec is immutable (the status was kept by the split).
pub fn claim_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    if !same(old.get("spec"), new.get("spec")) {
        let value = new.get("spec").map_or_else(|| "null".to_string(), Value::to_string);
        errs.push(FieldError::invalid("spec", &value, "field is immutable"));
    }
}

/// `ValidateResourceClaimStatusUpdate`: `new` is the claim as the `/status` split left it (its
/// spec and metadata `old`'s).
pub fn claim_status_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let reserved = list(new, "/status/reservedFor");
    if reserved.len() > RESERVED_FOR_MAX {
        errs.push(FieldError::too_many("status.reservedFor", reserved.len(), RESERVED_FOR_MAX as u64));
    } else {
        for (i, r) in reserved.iter().enumerate() {
            for f in ["resource", "name", "uid"] {
                if str_at(r, &format!("/{f}")).is_empty() {
                    errs.push(FieldError::required(format!("status.reservedFor[{i}].{f}"), ""));
                }
            }
        }
        let mut uids = BTreeSet::new();
        for (i, r) in reserved.iter().enumerate() {
            let uid = str_at(r, "/uid");
            if !uids.insert(uid) {
                errs.push(FieldError::duplicate(format!("status.reservedFor[{i}]"), uid));
            }
        }
    }
    let allocation = new.pointer("/status/allocation").filter(|a| !a.is_null());
    if !reserved.is_empty() {
        if allocation.is_none() {
            errs.push(FieldError::forbidden(
                "status.reservedFor",
                "may not be specified when `allocated` is not set",
            ));
        } else if set(old.pointer("/metadata/deletionTimestamp")) {
            // Entries may leave while the claim is being deleted, none may join.
            let consumer = |r: &Value| {
                ["apiGroup", "resource", "name", "uid"].map(|f| str_at(r, &format!("/{f}")).to_string())
            };
            let before: BTreeSet<[String; 4]> =
                list(old, "/status/reservedFor").iter().map(consumer).collect();
            if reserved.iter().any(|r| !before.contains(&consumer(r))) {
                errs.push(FieldError::forbidden(
                    "status.reservedFor",
                    "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set",
                ));
            }
        }
    }
    match (old.pointer("/status/allocation").filter(|a| !a.is_null()), allocation) {
        (Some(was), Some(now)) => {
            if !same(Some(was), Some(now)) {
                errs.push(FieldError::invalid("status.allocation", &now.to_string(), "field is immutable"));
            }
        }
        (None, Some(now)) => allocation_result(now, &RequestNames::of(new), errs),
        (_, None) => {}
    }
}

/// The requests of a claim's spec, each with the names of its `firstAvailable` subrequests.
struct RequestNames(BTreeMap<String, Option<BTreeSet<String>>>);

impl RequestNames {
    fn of(claim: &Value) -> RequestNames {
        let names = list(claim, "/spec/devices/requests")
            .iter()
            .map(|r| {
                let subs = list(r, "/firstAvailable");
                let subs =
                    (!subs.is_empty()).then(|| subs.iter().map(|s| str_at(s, "/name").to_string()).collect());
                (str_at(r, "/name").to_string(), subs)
            })
            .collect();
        RequestNames(names)
    }

    /// `requestNames.Has`: `request` or `request/subrequest`.
    fn has(&self, name: &str) -> bool {
        let mut segments = name.split('/');
        let (Some(first), second, None) = (segments.next(), segments.next(), segments.next()) else {
            return false;
        };
        match (self.0.get(first), second) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(subs), Some(sub)) => subs.as_ref().is_some_and(|s| s.contains(sub)),
        }
    }
}

/// `validateRequestNameRef`.
fn request_ref(name: &str, path: &str, requests: &RequestNames, errs: &mut Vec<FieldError>) {
    let segments: Vec<&str> = name.split('/').collect();
    if segments.len() > 2 {
        errs.push(FieldError::invalid(path, name, NOT_A_REQUEST));
        return;
    }
    for s in segments {
        errs.extend(dns1123_label(s).into_iter().map(|m| FieldError::invalid(path, s, m)));
    }
    if !requests.has(name) {
        errs.push(FieldError::invalid(path, name, NOT_A_REQUEST));
    }
}

/// `ValidateCSIDriverName`, which a DRA driver's name follows.
fn driver_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    if name.len() > DRIVER_NAME_MAX {
        errs.push(FieldError::too_long(path, DRIVER_NAME_MAX));
    }
    errs.extend(
        dns1123_subdomain(&name.to_lowercase()).into_iter().map(|m| FieldError::invalid(path, name, m)),
    );
}

/// `validatePoolName`: DNS-1123 subdomains joined by `/`.
fn pool_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    if name.len() > POOL_NAME_MAX {
        errs.push(FieldError::too_long(path, POOL_NAME_MAX));
    }
    for part in name.split('/') {
        errs.extend(dns1123_subdomain(part).into_iter().map(|m| FieldError::invalid(path, part, m)));
    }
}

/// `validateAllocationResult` for a new allocation (stricter than for one stored earlier, which
/// is never checked again).
fn allocation_result(allocation: &Value, requests: &RequestNames, errs: &mut Vec<FieldError>) {
    let results = list(allocation, "/devices/results");
    if results.len() > ALLOCATION_RESULTS_MAX {
        errs.push(FieldError::too_many(
            "status.allocation.devices.results",
            results.len(),
            ALLOCATION_RESULTS_MAX as u64,
        ));
    } else {
        for (i, r) in results.iter().enumerate() {
            let p = format!("status.allocation.devices.results[{i}]");
            request_ref(str_at(r, "/request"), &format!("{p}.request"), requests, errs);
            driver_name(str_at(r, "/driver"), &format!("{p}.driver"), errs);
            pool_name(str_at(r, "/pool"), &format!("{p}.pool"), errs);
            let device = str_at(r, "/device");
            errs.extend(
                dns1123_label(device)
                    .into_iter()
                    .map(|m| FieldError::invalid(format!("{p}.device"), device, m)),
            );
        }
    }
    let config = list(allocation, "/devices/config");
    if config.len() > ALLOCATION_CONFIG_MAX {
        errs.push(FieldError::too_many(
            "status.allocation.devices.config",
            config.len(),
            ALLOCATION_CONFIG_MAX as u64,
        ));
    } else {
        for (i, c) in config.iter().enumerate() {
            allocation_config(c, &format!("status.allocation.devices.config[{i}]"), requests, errs);
        }
    }
    if let Some(selector) = allocation.get("nodeSelector").filter(|s| !s.is_null()) {
        node_selector(selector, "status.allocation.nodeSelector", errs);
    }
}

/// `validateDeviceAllocationConfiguration`.
fn allocation_config(c: &Value, p: &str, requests: &RequestNames, errs: &mut Vec<FieldError>) {
    match str_at(c, "/source") {
        "" => errs.push(FieldError::required(format!("{p}.source"), "")),
        "FromClaim" | "FromClass" => {}
        other => {
            errs.push(FieldError::not_supported(format!("{p}.source"), other, &["FromClaim", "FromClass"]))
        }
    }
    let names = list(c, "/requests");
    if names.len() > DEVICE_REQUESTS_MAX {
        errs.push(FieldError::too_many(format!("{p}.requests"), names.len(), DEVICE_REQUESTS_MAX as u64));
    } else {
        let mut seen = BTreeSet::new();
        for (j, n) in names.iter().enumerate() {
            let n = n.as_str().unwrap_or("");
            request_ref(n, &format!("{p}.requests[{j}]"), requests, errs);
            if !seen.insert(n) {
                errs.push(FieldError::duplicate(format!("{p}.requests[{j}]"), n));
            }
        }
    }
    let Some(opaque) = c.get("opaque").filter(|o| !o.is_null()) else {
        errs.push(FieldError::required(format!("{p}.opaque"), ""));
        return;
    };
    driver_name(str_at(opaque, "/driver"), &format!("{p}.opaque.driver"), errs);
    let path = format!("{p}.opaque.parameters");
    match opaque.get("parameters") {
        None | Some(Value::Null) => errs.push(FieldError::required(path, "")),
        Some(v) if v.to_string().len() > OPAQUE_PARAMETERS_MAX => {
            errs.push(FieldError::too_long(path, OPAQUE_PARAMETERS_MAX))
        }
        Some(Value::Object(_)) => {}
        Some(_) => {
            errs.push(FieldError::invalid(path, "<value omitted>", "parameters must be a valid JSON object"))
        }
    }
}

/// `ValidateNodeSelector` (label values checked, as for a required node affinity).
fn node_selector(selector: &Value, p: &str, errs: &mut Vec<FieldError>) {
    let terms = list(selector, "/nodeSelectorTerms");
    if terms.is_empty() {
        errs.push(FieldError::required(
            format!("{p}.nodeSelectorTerms"),
            "must have at least one node selector term",
        ));
        return;
    }
    for (i, term) in terms.iter().enumerate() {
        let t = format!("{p}.nodeSelectorTerms[{i}]");
        for (j, rq) in list(term, "/matchExpressions").iter().enumerate() {
            let r = format!("{t}.matchExpressions[{j}]");
            let values = list(rq, "/values");
            match str_at(rq, "/operator") {
                "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                    format!("{r}.values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                )),
                "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                    format!("{r}.values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )),
                "Gt" | "Lt" if values.len() != 1 => errs.push(FieldError::required(
                    format!("{r}.values"),
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                )),
                "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
                other => errs.push(FieldError::invalid(
                    format!("{r}.operator"),
                    other,
                    "not a valid selector operator",
                )),
            }
            let key = str_at(rq, "/key");
            errs.extend(
                qualified_name(key).into_iter().map(|m| FieldError::invalid(format!("{r}.key"), key, m)),
            );
            for (k, v) in values.iter().enumerate() {
                let v = v.as_str().unwrap_or("");
                errs.extend(
                    label_value(v).into_iter().map(|m| FieldError::invalid(format!("{r}.values[{k}]"), v, m)),
                );
            }
        }
        for (j, rq) in list(term, "/matchFields").iter().enumerate() {
            let r = format!("{t}.matchFields[{j}]");
            let values = list(rq, "/values");
            match str_at(rq, "/operator") {
                "In" | "NotIn" if values.len() != 1 => errs.push(FieldError::required(
                    format!("{r}.values"),
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                )),
                "In" | "NotIn" => {}
                other => errs.push(FieldError::invalid(
                    format!("{r}.operator"),
                    other,
                    "not a valid selector operator",
                )),
            }
            let key = str_at(rq, "/key");
            if key != "metadata.name" {
                errs.push(FieldError::invalid(format!("{r}.key"), key, "not a valid field selector key"));
            } else {
                for (k, v) in values.iter().enumerate() {
                    let v = v.as_str().unwrap_or("");
                    errs.extend(
                        dns1123_subdomain(v)
                            .into_iter()
                            .map(|m| FieldError::invalid(format!("{r}.values[{k}]"), v, m)),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn claim(status: Value) -> Value {
        json!({"metadata": {"name": "c", "namespace": "ml"},
               "spec": {"devices": {"requests": [
                   {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}},
                   {"name": "nic", "firstAvailable": [{"name": "fast", "deviceClassName": "nic.example.com"}]}]}},
               "status": status})
    }

    fn fields(errs: &[FieldError]) -> Vec<(String, crate::status::ErrorKind)> {
        errs.iter().map(|e| (e.field.clone(), e.kind)).collect()
    }

    #[test]
    fn request_references_name_a_request_or_one_of_its_subrequests() {
        let names = RequestNames::of(&claim(Value::Null));
        assert!(names.has("gpu"));
        assert!(names.has("nic"));
        assert!(names.has("nic/fast"));
        assert!(!names.has("gpu/fast"), "an exact request has no subrequests");
        assert!(!names.has("nic/slow"));
        assert!(!names.has("nic/fast/x"));
        assert!(!names.has("tpu"));
    }

    #[test]
    fn a_node_selector_is_checked_as_a_required_node_affinity() {
        let mut errs = Vec::new();
        let good = json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]});
        node_selector(&good, "s", &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        let bad = json!({"nodeSelectorTerms": [{"matchFields": [{"key": "spec.x", "operator": "In", "values": ["a", "b"]}],
                                                "matchExpressions": [{"key": "zone", "operator": "Near"}]}]});
        node_selector(&bad, "s", &mut errs);
        use crate::status::ErrorKind::*;
        assert_eq!(
            fields(&errs),
            [
                ("s.nodeSelectorTerms[0].matchExpressions[0].operator".to_string(), Invalid),
                ("s.nodeSelectorTerms[0].matchFields[0].values".to_string(), Required),
                ("s.nodeSelectorTerms[0].matchFields[0].key".to_string(), Invalid),
            ]
        );
        let mut errs = Vec::new();
        node_selector(&json!({"nodeSelectorTerms": []}), "s", &mut errs);
        assert_eq!(fields(&errs), [("s.nodeSelectorTerms".to_string(), Required)]);
    }

    #[test]
    fn an_allocation_config_needs_a_source_known_requests_and_opaque_parameters() {
        let names = RequestNames::of(&claim(Value::Null));
        let mut errs = Vec::new();
        let good = json!({"source": "FromClass", "requests": ["gpu", "nic/fast"], "opaque": {"driver": "gpu.example.com", "parameters": {}}});
        allocation_config(&good, "c", &names, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        let bad = json!({"source": "FromPod", "requests": ["gpu", "gpu"], "opaque": {"driver": "gpu.example.com", "parameters": [1]}});
        allocation_config(&bad, "c", &names, &mut errs);
        use crate::status::ErrorKind::*;
        assert_eq!(
            fields(&errs),
            [
                ("c.source".to_string(), NotSupported),
                ("c.requests[1]".to_string(), Duplicate),
                ("c.opaque.parameters".to_string(), Invalid),
            ]
        );
        let mut errs = Vec::new();
        allocation_config(&json!({"source": "FromClaim"}), "c", &names, &mut errs);
        assert_eq!(fields(&errs), [("c.opaque".to_string(), Required)]);
    }

    #[test]
    fn an_unchanged_status_of_a_stored_claim_passes() {
        let status = json!({"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}},
                            "reservedFor": [{"resource": "pods", "name": "w-0", "uid": "u0"}]});
        let c = claim(status);
        let mut errs = Vec::new();
        claim_status_update(&c, &c, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
    }
}
