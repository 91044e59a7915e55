//! AdmissionReview in, AdmissionReview out: the webhook's decisions, with no I/O. Every rule is the
//! core's ([`scheduler_core::validate`], [`scheduler_core::workload`]); this module only speaks the
//! `admission.k8s.io/v1` wire format.

use std::collections::BTreeMap;

use base64::Engine as _;
use scheduler_core::names::LABEL_ENABLED;
use scheduler_core::{validate, workload};
use serde_json::{Value, json};

/// Which hook a request arrived on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    Validate,
    Mutate,
}

impl Hook {
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::Validate => "validate",
            Hook::Mutate => "mutate",
        }
    }
}

/// A request that is not an AdmissionReview at all: answered with HTTP 400.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct BadRequest(pub String);

/// What one review decided, for logs and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub uid: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub operation: String,
    pub allowed: bool,
    /// Number of JSON Patch operations returned (mutate).
    pub patched: usize,
}

/// Answers one AdmissionReview body. `namespace_opted_in`: the request came through the hook whose
/// namespaceSelector matched `kube-gang.io/enabled=true` (the API server does not send namespace
/// labels, so the configuration says it with the path).
pub fn review(hook: Hook, body: &[u8], namespace_opted_in: bool) -> Result<(Value, Summary), BadRequest> {
    let review: Value =
        serde_json::from_slice(body).map_err(|e| BadRequest(format!("request body is not JSON: {e}")))?;
    let kind = review.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = review.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if kind != "AdmissionReview" {
        return Err(BadRequest(format!("kind: expected AdmissionReview, got {kind:?}")));
    }
    if api_version != "admission.k8s.io/v1" {
        return Err(BadRequest(format!(
            "apiVersion: expected admission.k8s.io/v1, got {api_version:?} (set admissionReviewVersions: [v1])"
        )));
    }
    let Some(request) = review.get("request").filter(|r| r.is_object()) else {
        return Err(BadRequest("request: missing".into()));
    };
    let Some(uid) = request.get("uid").and_then(Value::as_str).filter(|u| !u.is_empty()) else {
        return Err(BadRequest("request.uid: missing".into()));
    };
    let s = |p: &str| request.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    let mut summary = Summary {
        uid: uid.to_string(),
        kind: s("/kind/kind"),
        namespace: s("/namespace"),
        name: s("/name"),
        operation: s("/operation"),
        allowed: true,
        patched: 0,
    };
    let object = request.get("object").filter(|o| !o.is_null());
    let old = request.get("oldObject").filter(|o| !o.is_null());
    let (response, patched) = match (summary.operation.as_str(), object) {
        // Deleting is always allowed; so is anything without an object to look at.
        ("DELETE", _) | ("CONNECT", _) | (_, None) => (json!({"uid": uid, "allowed": true}), 0),
        (_, Some(obj)) => {
            let obj = with_request_defaults(obj, &summary);
            match hook {
                Hook::Validate => (validate_response(uid, &obj, old, namespace_opted_in), 0),
                Hook::Mutate => mutate_response(uid, &obj, namespace_opted_in),
            }
        }
    };
    summary.allowed = response.get("allowed").and_then(Value::as_bool).unwrap_or(false);
    summary.patched = patched;
    Ok((
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
        summary,
    ))
}

/// The object with the namespace and name the request carries when the object omits them (a pod
/// created by a controller with `generateName` has no name yet; its namespace comes with the request).
fn with_request_defaults(obj: &Value, summary: &Summary) -> Value {
    let mut obj = obj.clone();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if !summary.namespace.is_empty() {
            meta.entry("namespace").or_insert_with(|| Value::String(summary.namespace.clone()));
        }
        if !summary.name.is_empty() {
            meta.entry("name").or_insert_with(|| Value::String(summary.name.clone()));
        }
    }
    obj
}

fn namespace_labels(opted_in: bool) -> Option<BTreeMap<String, String>> {
    opted_in.then(|| BTreeMap::from([(LABEL_ENABLED.to_string(), "true".to_string())]))
}

fn validate_response(uid: &str, obj: &Value, old: Option<&Value>, namespace_opted_in: bool) -> Value {
    if !obj.is_object() {
        return deny(uid, "object: not a Kubernetes object".into());
    }
    // A workload is ours to check only when it asked for a gang: opted in itself, through its
    // namespace, or carrying gang labels. Checking the injected form catches what injection derives.
    let subject = if workload::is_workload(obj)
        && workload::is_opted_in(obj, namespace_labels(namespace_opted_in).as_ref())
    {
        match workload::inject(obj) {
            Ok(mut injected) => {
                mark_opted_in(&mut injected);
                injected
            }
            Err(errors) => return deny(uid, messages(&errors)),
        }
    } else {
        obj.clone()
    };
    let verdict = validate::validate(&subject, old);
    let mut response = if verdict.errors.is_empty() {
        json!({"uid": uid, "allowed": true})
    } else {
        deny(uid, messages(&verdict.errors))
    };
    if !verdict.warnings.is_empty() {
        response["warnings"] = json!(verdict.warnings);
    }
    response
}

/// Marks an object opted in (for validation only: never written back).
fn mark_opted_in(obj: &mut Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.entry(LABEL_ENABLED).or_insert_with(|| json!("true"));
        }
    }
}

/// The mutating response and the number of patch operations in it.
fn mutate_response(uid: &str, obj: &Value, namespace_opted_in: bool) -> (Value, usize) {
    let allow = json!({"uid": uid, "allowed": true});
    if !obj.is_object() {
        // Our failure to read an object must never block its creation.
        let warning = "kube-gang: object is not a Kubernetes object; not mutated";
        return (json!({"uid": uid, "allowed": true, "warnings": [warning]}), 0);
    }
    let is_pod = obj.get("kind").and_then(Value::as_str) == Some("Pod");
    let ours = is_pod
        || (workload::is_workload(obj)
            && workload::is_opted_in(obj, namespace_labels(namespace_opted_in).as_ref()));
    if !ours {
        return (allow, 0);
    }
    match workload::inject(obj) {
        Ok(injected) => {
            let patch = json_patch::diff(obj, &injected);
            if patch.0.is_empty() {
                return (allow, 0);
            }
            let bytes = serde_json::to_vec(&patch).unwrap_or_default();
            let response = json!({
                "uid": uid,
                "allowed": true,
                "patchType": "JSONPatch",
                "patch": base64::engine::general_purpose::STANDARD.encode(bytes),
            });
            (response, patch.0.len())
        }
        Err(errors) => {
            // The validating hook denies it with the same messages; mutate only explains.
            let warnings: Vec<String> =
                errors.iter().map(|e| format!("kube-gang: not injected: {e}")).collect();
            (json!({"uid": uid, "allowed": true, "warnings": warnings}), 0)
        }
    }
}

fn messages(errors: &[scheduler_core::FieldError]) -> String {
    let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
    format!("kube-gang: {}", list.join("; "))
}

fn deny(uid: &str, message: String) -> Value {
    json!({
        "uid": uid,
        "allowed": false,
        "status": {"code": 422, "reason": "Invalid", "message": message},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review_of(operation: &str, object: Value, old: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "namespace": "ml", "name": "p", "operation": operation, "object": object,
                        "oldObject": old, "dryRun": false}
        }))
        .unwrap()
    }

    #[test]
    fn delete_is_always_allowed() {
        for hook in [Hook::Validate, Hook::Mutate] {
            let (out, s) =
                review(hook, &review_of("DELETE", Value::Null, json!({"kind": "Gang"})), false).unwrap();
            assert_eq!(out["response"]["allowed"], true);
            assert_eq!(out["response"]["uid"], "u-1");
            assert!(s.allowed);
        }
    }

    #[test]
    fn not_a_review_is_a_bad_request_naming_the_field() {
        assert!(review(Hook::Validate, b"{", false).unwrap_err().0.contains("not JSON"));
        let e = review(Hook::Validate, br#"{"kind":"Pod"}"#, false).unwrap_err();
        assert!(e.0.starts_with("kind:"), "{e}");
        let e = review(
            Hook::Validate,
            br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1"}"#,
            false,
        )
        .unwrap_err();
        assert!(e.0.starts_with("apiVersion:"), "{e}");
        let e = review(
            Hook::Validate,
            br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{}}"#,
            false,
        )
        .unwrap_err();
        assert_eq!(e.0, "request.uid: missing");
    }

    #[test]
    fn undecodable_object_denies_on_validate_but_never_blocks_on_mutate() {
        let body = review_of("CREATE", json!("a string"), Value::Null);
        let (v, _) = review(Hook::Validate, &body, false).unwrap();
        assert_eq!(v["response"]["allowed"], false);
        let (m, _) = review(Hook::Mutate, &body, false).unwrap();
        assert_eq!(m["response"]["allowed"], true);
        assert!(m["response"]["warnings"][0].as_str().unwrap().contains("not mutated"));
    }
}
