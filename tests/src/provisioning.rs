//! cluster-autoscaler's `ProvisioningRequest` (`autoscaling.x-k8s.io/v1`), as its CRD's schema
//! makes the API server check it (kubernetes/autoscaler
//! `cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go`, kubebuilder
//! markers): `spec` required; `spec.podSets` 1 to 32 items, each with a `podTemplateRef.name`
//! matching the DNS-1123 subdomain pattern (≤ 253) and an int32 `count` ≥ 1;
//! `spec.provisioningClassName` required, same pattern; `spec.parameters` ≤ 100 string values of
//! ≤ 255 characters; `spec` immutable (`self == oldSelf`, checked on update by [`immutable`]).

use serde_json::Value;

use crate::status::FieldError;

/// The CRD's `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`, at most 253.
fn subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !p.starts_with('-')
                && !p.ends_with('-')
        })
}

/// Stage 1: the structural schema's types (a 400 when a field has the wrong type).
pub fn decode(obj: &Value) -> Result<(), String> {
    let spec = obj.get("spec").ok_or("spec: Required value")?;
    if !spec.is_object() {
        return Err("spec: expected an object".into());
    }
    if let Some(sets) = spec.get("podSets")
        && !sets.is_array()
    {
        return Err("spec.podSets: expected an array".into());
    }
    for (i, set) in spec.get("podSets").and_then(Value::as_array).into_iter().flatten().enumerate() {
        if let Some(c) = set.get("count")
            && !c.is_i64()
        {
            return Err(format!("spec.podSets[{i}].count: expected an integer"));
        }
    }
    Ok(())
}

/// Stages 2 and 3: every schema rule broken, with its field path.
pub fn validate(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = &obj["spec"];
    match spec.get("provisioningClassName").and_then(Value::as_str) {
        None => errs.push(FieldError::required("spec.provisioningClassName", "")),
        Some(c) if !subdomain(c) => errs.push(FieldError::invalid(
            "spec.provisioningClassName",
            c,
            "should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'",
        )),
        Some(_) => {}
    }
    let sets = spec.get("podSets").and_then(Value::as_array);
    match sets {
        None => errs.push(FieldError::required("spec.podSets", "")),
        Some(s) if s.is_empty() => {
            errs.push(FieldError::invalid("spec.podSets", "[]", "should have at least 1 items"))
        }
        Some(s) if s.len() > 32 => errs.push(FieldError::too_long("spec.podSets", 32)),
        Some(_) => {}
    }
    for (i, set) in sets.into_iter().flatten().enumerate() {
        match set.pointer("/podTemplateRef/name").and_then(Value::as_str) {
            None => errs.push(FieldError::required(format!("spec.podSets[{i}].podTemplateRef"), "")),
            Some(n) if !subdomain(n) => errs.push(FieldError::invalid(
                format!("spec.podSets[{i}].podTemplateRef.name"),
                n,
                "should match the DNS-1123 subdomain pattern",
            )),
            Some(_) => {}
        }
        match set.get("count").and_then(Value::as_i64) {
            Some(c) if (1..=i64::from(i32::MAX)).contains(&c) => {}
            Some(c) => errs.push(FieldError::invalid(
                format!("spec.podSets[{i}].count"),
                &c.to_string(),
                "should be greater than or equal to 1",
            )),
            None => errs.push(FieldError::required(format!("spec.podSets[{i}].count"), "")),
        }
    }
    if let Some(params) = spec.get("parameters").and_then(Value::as_object) {
        if params.len() > 100 {
            errs.push(FieldError::too_long("spec.parameters", 100));
        }
        for (k, v) in params {
            match v.as_str() {
                Some(s) if s.chars().count() <= 255 => {}
                Some(_) => errs.push(FieldError::too_long(format!("spec.parameters.{k}"), 255)),
                None => errs.push(FieldError::invalid(
                    format!("spec.parameters.{k}"),
                    &v.to_string(),
                    "must be a string",
                )),
            }
        }
    }
}

/// The CRD's `self == oldSelf` rules: `spec` never changes once created.
pub fn immutable(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    for f in ["podSets", "provisioningClassName", "parameters"] {
        if old["spec"].get(f) != new["spec"].get(f) {
            errs.push(FieldError::invalid(format!("spec.{f}"), "", "Value is immutable"));
        }
    }
}
