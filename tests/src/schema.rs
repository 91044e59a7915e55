//! A custom resource checked against its CRD's OpenAPI v3 schema, as kube-apiserver checks one
//! (apiextensions-apiserver's `ValidateCustomResource`, kube-openapi's schema validator, its errors
//! turned into field errors by `kubeOpenAPIResultToFieldErrors`): `type` (a value of another type,
//! `null` where not `nullable`: `TypeInvalid`), `required` (`Required`), `enum` (`NotSupported`),
//! `maxLength` in characters (`TooLong`), `minLength`, `minimum` (`Invalid`), `maxItems` and
//! `maxProperties` (`TooMany`), `format: date-time` (`TypeInvalid`), `x-kubernetes-int-or-string`,
//! and the keys of `x-kubernetes-list-type: map` lists unique (`Duplicate`, from the structural
//! schema's list checks). Messages read as kube-openapi writes them (`spec.minMember in body
//! should be greater than or equal to 1`).
//!
//! For kube-gang's `Gang`, the schema is the one `scheduler_core::crd::gang_crd()` generates —
//! the committed `manifests/base/crd-gang.yaml`, which a test keeps equal to it.

use std::sync::OnceLock;

use serde_json::Value;

use crate::status::FieldError;

/// The `Gang` CRD's `openAPIV3Schema`.
pub fn gang() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let crd = serde_json::to_value(scheduler_core::crd::gang_crd()).unwrap_or(Value::Null);
        crd.pointer("/spec/versions/0/schema/openAPIV3Schema").cloned().unwrap_or(Value::Null)
    })
}

/// The parts of Volcano's PodGroup CRD schema (`config/crd/volcano/bases/
/// scheduling.volcano.sh_podgroups.yaml`, 1.12) that kube-gang's writes and fixtures touch: the
/// status' phase enum and counts, the condition times, `spec.minMember`. Written from that CRD's
/// facts; the rest of the object is taken as it comes.
pub fn volcano_podgroup() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let count = serde_json::json!({"type": "integer", "format": "int32", "minimum": 0});
        serde_json::json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"minMember": count}},
            "status": {"type": "object", "properties": {
                "phase": {"type": "string", "enum": ["Pending", "Running", "Unknown", "Inqueue", "Completed"]},
                "running": count, "succeeded": count, "failed": count,
                "conditions": {"type": "array", "items": {"type": "object", "properties": {
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                    "message": {"type": "string"}, "reason": {"type": "string"},
                    "status": {"type": "string"}, "transitionID": {"type": "string"},
                    "type": {"type": "string"}}}}}}}})
    })
}

/// The parts of Grove's PodGang CRD schema (`scheduler/api/core/v1alpha1/crds/
/// scheduler.grove.io_podgangs.yaml`) that kube-gang's writes touch: the status (`phase`
/// required, `placementScore` a number, each condition's required fields, `reason`'s length and
/// pattern, `message`'s length, `status`'s enum), `spec.podgroups` required. Written from that
/// CRD's facts; the rest of the object is taken as it comes.
pub fn grove_podgang() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        serde_json::json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["podgroups"], "properties": {"podgroups": {"type": "array"}}},
            "status": {"type": "object", "required": ["phase"], "properties": {
                "phase": {"type": "string"},
                "placementScore": {"type": "number"},
                "conditions": {"type": "array", "items": {"type": "object",
                    "required": ["lastTransitionTime", "message", "reason", "status", "type"],
                    "properties": {
                        "lastTransitionTime": {"type": "string", "format": "date-time"},
                        "message": {"type": "string", "maxLength": 32768},
                        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
                        "reason": {"type": "string", "maxLength": 1024, "minLength": 1},
                        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                        "type": {"type": "string", "maxLength": 316}}}}}}}})
    })
}

/// The JSON type of a value, as kube-openapi names it in its messages.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        // kube-openapi takes a whole float (`1.0`) as an integer, as Go decodes every number to one.
        Value::Number(n) if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) => {
            "integer"
        }
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_string() } else { format!("{path}.{name}") }
}

/// Every error of `value` at `path` against `schema`. The root (`path` empty) skips `metadata`,
/// which ObjectMeta's own validation checks.
pub fn check(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let get = |k: &str| schema.get(k);
    let at = if path.is_empty() { "<root>" } else { path };
    if value.is_null() {
        if get("nullable") != Some(&Value::Bool(true)) {
            let ty = get("type").and_then(Value::as_str).unwrap_or("object");
            errs.push(FieldError::type_invalid(
                path,
                quote("null"),
                format!("{at} in body must be of type {ty}: \"null\""),
            ));
        }
        return;
    }
    let int_or_string = get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let ty = if int_or_string { None } else { get("type").and_then(Value::as_str) };
    let actual = type_of(value);
    let fits = match ty {
        None => !int_or_string || matches!(actual, "integer" | "string"),
        Some("number") => matches!(actual, "integer" | "number"),
        Some(t) => t == actual,
    };
    if !fits {
        let want = ty.unwrap_or("integer,string");
        errs.push(FieldError::type_invalid(
            path,
            quote(actual),
            format!("{at} in body must be of type {want}: {}", quote(actual)),
        ));
        return;
    }
    if let Some(allowed) = get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let names: Vec<String> =
            allowed.iter().map(|a| a.as_str().map_or_else(|| a.to_string(), String::from)).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let shown = value.as_str().map_or_else(|| value.to_string(), String::from);
        errs.push(FieldError::not_supported(path, &shown, &names));
    }
    match value {
        Value::String(s) => {
            let chars = s.chars().count() as u64;
            if let Some(max) = get("maxLength").and_then(Value::as_u64)
                && chars > max
            {
                errs.push(FieldError::too_long(path, usize::try_from(max).unwrap_or(usize::MAX)));
            }
            if let Some(min) = get("minLength").and_then(Value::as_u64)
                && chars < min
            {
                errs.push(FieldError::invalid(
                    path,
                    s,
                    format!("{at} in body should be at least {min} chars long"),
                ));
            }
            if get("format").and_then(Value::as_str) == Some("date-time")
                && crate::times::check_time(s, false).is_err()
            {
                errs.push(FieldError::type_invalid(
                    path,
                    quote(s),
                    format!("{at} in body must be of type date-time: {}", quote(s)),
                ));
            }
        }
        Value::Number(n) => {
            if let (Some(min), Some(v)) = (get("minimum").and_then(Value::as_f64), n.as_f64())
                && v < min
            {
                errs.push(FieldError::invalid(
                    path,
                    &n.to_string(),
                    format!("{at} in body should be greater than or equal to {min}"),
                ));
            }
        }
        Value::Array(items) => {
            if let Some(max) = get("maxItems").and_then(Value::as_u64)
                && items.len() as u64 > max
            {
                errs.push(FieldError::too_many(path, items.len(), max));
            }
            if let Some(item) = get("items") {
                for (i, v) in items.iter().enumerate() {
                    check(item, v, &format!("{path}[{i}]"), errs);
                }
            }
            if get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
                let keys: Vec<&str> = get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|k| k.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut seen = std::collections::BTreeSet::new();
                for (i, v) in items.iter().enumerate() {
                    let key: Vec<Value> =
                        keys.iter().map(|k| v.get(*k).cloned().unwrap_or(Value::Null)).collect();
                    if !seen.insert(Value::Array(key.clone()).to_string()) {
                        let shown: serde_json::Map<String, Value> =
                            keys.iter().zip(key).map(|(k, v)| (k.to_string(), v)).collect();
                        errs.push(FieldError {
                            field: format!("{path}[{i}]"),
                            kind: crate::status::ErrorKind::Duplicate,
                            value: Value::Object(shown).to_string(),
                            detail: String::new(),
                        });
                    }
                }
            }
        }
        Value::Object(fields) => {
            if let Some(max) = get("maxProperties").and_then(Value::as_u64)
                && fields.len() as u64 > max
            {
                errs.push(FieldError::too_many(path, fields.len(), max));
            }
            for r in get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
            {
                if !fields.contains_key(r) {
                    errs.push(FieldError::required(child(path, r), ""));
                }
            }
            let properties = get("properties").and_then(Value::as_object);
            let additional = get("additionalProperties").filter(|a| a.is_object());
            for (name, v) in fields {
                if path.is_empty() && name == "metadata" {
                    continue;
                }
                if let Some(s) = properties.and_then(|p| p.get(name)) {
                    check(s, v, &child(path, name), errs);
                } else if let Some(s) = additional {
                    check(s, v, &child(path, name), errs);
                }
                // Other fields are pruned by the API server, not refused.
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
}
