//! A pod's spec after creation, as `ValidatePodUpdate` in kube-apiserver's
//! `pkg/apis/core/validation/validation.go` allows it to change: containers may not be added or
//! removed, though their `image` may change; `activeDeadlineSeconds` may be set or lowered, never
//! raised or unset; tolerations may only be added (an existing one may change its
//! `tolerationSeconds`); scheduling gates may only be removed; `terminationGracePeriodSeconds`
//! may go from a negative value to 1; a gated pod may add to its `nodeSelector` and change its
//! node affinity. Anything else is `spec: Forbidden: pod updates may not change fields other
//! than …`, here followed by the fields that changed (the API server prints a diff).
//!
//! Compared as the API server compares (`apiequality.Semantic`): an absent field, `null` and an
//! empty list or map are the same.

use serde_json::{Map, Value};

use crate::status::FieldError;

/// `updatablePodSpecFields`, as the API server lists them in its message.
const UPDATABLE: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn list<'a>(spec: &'a Value, field: &str) -> &'a [Value] {
    spec.get(field).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// `null`, `[]` and `{}` removed at every depth: what `Semantic.DeepEqual` does not tell apart.
fn semantic(v: &Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Array(a) if a.is_empty() => None,
        Value::Array(a) => Some(Value::Array(a.iter().map(|x| semantic(x).unwrap_or(Value::Null)).collect())),
        Value::Object(m) => {
            let kept: Map<String, Value> =
                m.iter().filter_map(|(k, x)| semantic(x).map(|x| (k.clone(), x))).collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        other => Some(other.clone()),
    }
}

fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    a.and_then(semantic) == b.and_then(semantic)
}

/// The errors of replacing `old`'s spec with `new`'s (both whole pods).
pub fn errors(old: &Value, new: &Value) -> Vec<FieldError> {
    let empty = Value::Object(Map::new());
    let old = old.get("spec").unwrap_or(&empty);
    let new = new.get("spec").unwrap_or(&empty);
    let mut errs = Vec::new();
    // `ValidateContainerUpdates`: the same containers, each with an image.
    for field in ["containers", "initContainers"] {
        let (was, now) = (list(old, field), list(new, field));
        if was.len() != now.len() {
            errs.push(FieldError::forbidden(
                format!("spec.{field}"),
                "pod updates may not add or remove containers",
            ));
            return errs;
        }
        for (i, c) in now.iter().enumerate() {
            if c.get("image").and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.push(FieldError::required(format!("spec.{field}[{i}].image"), ""));
            }
        }
    }
    // `activeDeadlineSeconds`: set from nothing, or lowered.
    let deadline = |s: &Value| s.get("activeDeadlineSeconds").and_then(Value::as_i64);
    match (deadline(old), deadline(new)) {
        (_, Some(n)) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            errs.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                &n.to_string(),
                format!("must be between 0 and {}, inclusive", i32::MAX),
            ));
            return errs;
        }
        (Some(o), Some(n)) if o < n => {
            errs.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                &n.to_string(),
                "must be less than or equal to previous value",
            ));
            return errs;
        }
        (Some(_), None) => errs.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            "null",
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    // `validateOnlyAddedTolerations`: every old toleration is still there, but for its seconds.
    let without_seconds = |t: &Value| {
        let mut t = t.clone();
        if let Some(m) = t.as_object_mut() {
            m.remove("tolerationSeconds");
        }
        semantic(&t)
    };
    let kept = list(old, "tolerations")
        .iter()
        .all(|o| list(new, "tolerations").iter().any(|n| without_seconds(n) == without_seconds(o)));
    if !kept {
        errs.push(FieldError::forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    }
    // `validateOnlyDeletedSchedulingGates`.
    let gate = |g: &Value| g.get("name").and_then(Value::as_str).unwrap_or("").to_string();
    let before: Vec<String> = list(old, "schedulingGates").iter().map(gate).collect();
    for (i, g) in list(new, "schedulingGates").iter().enumerate() {
        let name = gate(g);
        if !before.contains(&name) {
            errs.push(FieldError::forbidden(
                format!("spec.schedulingGates[{i}].name"),
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }
    // What may change is taken from the old spec; what is left must be equal.
    let mut munged = new.as_object().cloned().unwrap_or_default();
    for field in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = munged.get_mut(field) {
            for (c, o) in cs.iter_mut().zip(list(old, field)) {
                if let Some(m) = c.as_object_mut() {
                    match o.get("image") {
                        Some(image) => m.insert("image".into(), image.clone()),
                        None => m.remove("image"),
                    };
                }
            }
        }
    }
    let mut take_old = |field: &str| match old.get(field) {
        Some(v) => munged.insert(field.to_string(), v.clone()),
        None => munged.remove(field),
    };
    take_old("activeDeadlineSeconds");
    take_old("schedulingGates");
    take_old("tolerations");
    let grace = |s: &Value| s.get("terminationGracePeriodSeconds").and_then(Value::as_i64);
    if grace(old).is_some_and(|g| g < 0) && grace(new) == Some(1) {
        take_old("terminationGracePeriodSeconds");
    }
    if !before.is_empty() {
        // A gated pod may add to its node selector (no mutation, no deletion) and change its node
        // affinity (checked no further here).
        let selector =
            |s: &Value| s.get("nodeSelector").and_then(Value::as_object).cloned().unwrap_or_default();
        let (was, now) = (selector(old), selector(new));
        if was.iter().any(|(k, v)| now.get(k) != Some(v)) {
            errs.push(FieldError::invalid(
                "spec.nodeSelector",
                &Value::Object(now).to_string(),
                "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
            ));
        }
        take_old("nodeSelector");
        let affinity = old.pointer("/affinity/nodeAffinity").cloned();
        let mut a = munged.get("affinity").and_then(Value::as_object).cloned().unwrap_or_default();
        match affinity {
            Some(n) => a.insert("nodeAffinity".into(), n),
            None => a.remove("nodeAffinity"),
        };
        munged.insert("affinity".into(), Value::Object(a));
    }
    let munged = Value::Object(munged);
    let mut changed: Vec<String> = old
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .chain(munged.as_object().into_iter().flat_map(|m| m.keys()))
        .filter(|k| !same(old.get(k.as_str()), munged.get(k.as_str())))
        .map(|k| format!("spec.{k}"))
        .collect();
    changed.sort();
    changed.dedup();
    if !changed.is_empty() {
        errs.push(FieldError::forbidden(
            "spec",
            format!(
                "pod updates may not change fields other than {UPDATABLE}\nchanged: {}",
                changed.join(", ")
            ),
        ));
    }
    errs
}
