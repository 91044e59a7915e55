//! PATCH bodies, applied as kube-apiserver applies them: JSON Patch (RFC 6902,
//! `application/json-patch+json`), JSON merge patch (RFC 7386, `application/merge-patch+json`) and
//! strategic merge patch (`application/strategic-merge-patch+json`, built-in kinds only), where a
//! list with a merge key (`status.conditions` by `type`, `spec.containers` by `name`, …) is merged
//! element by element, `$patch: delete|replace` and `$deleteFromPrimitiveList/…`,
//! `$retainKeys` directives are honoured and `$setElementOrder/…` is accepted.
//!
//! Merge keys are those of the Kubernetes Go types' `patchMergeKey` tags for the fields the
//! scheduler and its users patch.

use serde_json::{Map, Value};

use crate::status::{ApiError, FieldError};

/// The three patch types the API server takes as JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
}

impl PatchType {
    /// From a `Content-Type`; anything else is a 415.
    pub fn from_content_type(ct: &str) -> Result<PatchType, ApiError> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            _ => Err(ApiError::unsupported_media_type(ct)),
        }
    }
}

/// `patchMergeKey` of a list at `path` (field names joined by `.`, list indices left out).
pub fn merge_key(path: &str) -> Option<&'static str> {
    let containers = ["spec.containers", "spec.initContainers", "spec.ephemeralContainers"];
    let sub =
        |suffix: &str| containers.iter().any(|c| path.strip_prefix(c).is_some_and(|rest| rest == suffix));
    Some(match path {
        "metadata.ownerReferences" => "uid",
        "spec.containers" | "spec.initContainers" | "spec.ephemeralContainers" => "name",
        "spec.volumes" | "spec.imagePullSecrets" | "spec.schedulingGates" | "spec.resourceClaims" => "name",
        "spec.hostAliases" => "ip",
        "spec.topologySpreadConstraints" => "topologyKey",
        "status.conditions" | "status.addresses" => "type",
        "status.podIPs" => "ip",
        // A ResourceClaim's consumers.
        "status.reservedFor" => "uid",
        _ if sub(".ports") => "containerPort",
        _ if sub(".env") => "name",
        _ if sub(".volumeMounts") => "mountPath",
        _ if sub(".volumeDevices") => "devicePath",
        _ => return None,
    })
}

/// Lists of scalars merged as sets (`patchStrategy:"merge"` without a key).
fn merged_as_set(path: &str) -> bool {
    path == "metadata.finalizers"
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

/// Applies a strategic merge patch to `target` at `path`.
pub fn strategic(target: &mut Value, patch: &Value, path: &str) -> Result<(), String> {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut rest = p.clone();
            rest.remove("$patch");
            *target = Value::Object(rest);
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        Some(other) => return Err(format!("unknown patch type: {other:?} at {path}")),
        None => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else { return Ok(()) };
    if let Some(keep) = p.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in p {
        if k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let gone: Vec<&Value> = v.as_array().map(|a| a.iter().collect()).unwrap_or_default();
            if let Some(list) = t.get_mut(field).and_then(Value::as_array_mut) {
                list.retain(|x| !gone.contains(&x));
            }
            continue;
        }
        if k.starts_with('$') {
            return Err(format!("unknown directive {k:?} at {path}"));
        }
        let here = join(path, k);
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match v {
            Value::Object(_) => {
                let slot = t.entry(k.clone()).or_insert(Value::Null);
                strategic(slot, v, &here)?;
                if slot.is_null() {
                    t.remove(k);
                }
            }
            Value::Array(items) => {
                let slot = t.entry(k.clone()).or_insert_with(|| Value::Array(Vec::new()));
                merge_list(slot, items, &here)?;
            }
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(())
}

fn merge_list(target: &mut Value, items: &[Value], path: &str) -> Result<(), String> {
    let replace = items.iter().any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"));
    let key = merge_key(path);
    if replace || (key.is_none() && !merged_as_set(path)) {
        let kept: Vec<Value> = items.iter().filter(|i| i.get("$patch").is_none()).cloned().collect();
        *target = Value::Array(kept);
        return Ok(());
    }
    if !target.is_array() {
        *target = Value::Array(Vec::new());
    }
    let Value::Array(list) = target else { return Ok(()) };
    let Some(key) = key else {
        for i in items {
            if !list.contains(i) {
                list.push(i.clone());
            }
        }
        return Ok(());
    };
    for item in items {
        let Some(id) = item.get(key) else {
            return Err(format!("map: {item} does not contain declared merge key: {key}"));
        };
        let pos = list.iter().position(|e| e.get(key) == Some(id));
        if item.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(i) = pos {
                list.remove(i);
            }
            continue;
        }
        match pos {
            Some(i) => strategic(&mut list[i], item, path)?,
            None => {
                let mut fresh = Value::Object(Map::new());
                strategic(&mut fresh, item, path)?;
                list.push(fresh);
            }
        }
    }
    Ok(())
}

/// Applies `body` (already parsed as JSON) to `current` with `ty`.
pub fn apply(ty: PatchType, current: &Value, body: &Value) -> Result<Value, ApiError> {
    match ty {
        PatchType::Json => {
            let ops: json_patch::Patch =
                serde_json::from_value(body.clone()).map_err(|e| ApiError::bad_request(e.to_string()))?;
            let mut out = current.clone();
            json_patch::patch(&mut out, &ops).map_err(|e| {
                ApiError::invalid("", "", &[FieldError::invalid("patch", &body.to_string(), e.to_string())])
            })?;
            Ok(out)
        }
        PatchType::Merge => {
            if !body.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            let mut out = current.clone();
            json_patch::merge(&mut out, body);
            Ok(out)
        }
        PatchType::Strategic => {
            if !body.is_object() {
                return Err(ApiError::bad_request("a strategic merge patch must be a JSON object"));
            }
            let mut out = current.clone();
            strategic(&mut out, body, "").map_err(ApiError::bad_request)?;
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "finalizers": ["a"]},
               "spec": {"containers": [{"name": "main", "image": "x:1", "env": [{"name": "A", "value": "1"}]},
                                       {"name": "side", "image": "y:1"}],
                        "tolerations": [{"key": "a"}], "schedulingGates": [{"name": "g1"}, {"name": "g2"}]},
               "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
    }

    #[test]
    fn conditions_merge_by_type() {
        let patch = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "True", "reason": null}, {"type": "Custom", "status": "True"}]}});
        let out = apply(PatchType::Strategic, &pod(), &patch).unwrap();
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}, {"type": "Custom", "status": "True"}])
        );
        // The same body as a merge patch replaces the whole list.
        let merged = apply(PatchType::Merge, &pod(), &patch).unwrap();
        assert_eq!(merged["status"]["conditions"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn containers_merge_by_name_and_env_inside_them() {
        let patch = json!({"spec": {"containers": [{"name": "main", "image": "x:2", "env": [{"name": "B", "value": "2"}]}]}});
        let out = apply(PatchType::Strategic, &pod(), &patch).unwrap();
        let cs = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs.len(), 2, "side container kept");
        assert_eq!(cs[0]["image"], "x:2");
        assert_eq!(cs[0]["env"], json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]));
    }

    #[test]
    fn lists_without_a_merge_key_are_replaced() {
        let patch = json!({"spec": {"tolerations": [{"key": "b"}]}});
        let out = apply(PatchType::Strategic, &pod(), &patch).unwrap();
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "b"}]));
    }

    #[test]
    fn directives_delete_replace_and_primitive_lists() {
        let patch = json!({"spec": {"schedulingGates": [{"name": "g1", "$patch": "delete"}]},
                           "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
        let out = apply(PatchType::Strategic, &pod(), &patch).unwrap();
        assert_eq!(out["spec"]["schedulingGates"], json!([{"name": "g2"}]));
        assert_eq!(out["metadata"]["finalizers"], json!([]));
        let replace =
            json!({"spec": {"containers": [{"name": "only", "image": "z"}, {"$patch": "replace"}]}});
        let out = apply(PatchType::Strategic, &pod(), &replace).unwrap();
        assert_eq!(out["spec"]["containers"], json!([{"name": "only", "image": "z"}]));
        let add = json!({"metadata": {"finalizers": ["b", "a"]}});
        let out = apply(PatchType::Strategic, &pod(), &add).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
        let missing_key = json!({"status": {"conditions": [{"status": "True"}]}});
        assert_eq!(apply(PatchType::Strategic, &pod(), &missing_key).unwrap_err().code, 400);
    }

    #[test]
    fn json_patch_ops_and_failures() {
        let ops = json!([{"op": "test", "path": "/spec/containers/0/name", "value": "main"},
                         {"op": "remove", "path": "/spec/schedulingGates/0"},
                         {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]);
        let out = apply(PatchType::Json, &pod(), &ops).unwrap();
        assert_eq!(out["spec"]["schedulingGates"], json!([{"name": "g2"}]));
        assert_eq!(out["metadata"]["labels"]["a"], "b");
        let failing = json!([{"op": "test", "path": "/spec/containers/0/name", "value": "other"}]);
        let e = apply(PatchType::Json, &pod(), &failing).unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        let malformed = json!([{"op": "frobnicate", "path": "/x"}]);
        assert_eq!(apply(PatchType::Json, &pod(), &malformed).unwrap_err().code, 400);
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8").unwrap(),
            PatchType::Merge
        );
        assert_eq!(PatchType::from_content_type("application/json").unwrap_err().code, 415);
    }
}
