//! AdmissionReview in, AdmissionReview out: the webhook's decisions, with no I/O. The decision is
//! the core's [`scheduler_core::admit()`] (inject, then validate), the same call `kubectl gang
//! validate` makes; this module only speaks the `admission.k8s.io/v1` wire format, with kube-core's
//! types ([`AdmissionReview`], [`AdmissionRequest`], [`AdmissionResponse`]).
//!
//! Where kube-core's types alone would lose something, this module handles it:
//!
//! - **The object.** `AdmissionRequest<DynamicObject>` decodes `object` into an `ObjectMeta`: an
//!   object whose metadata it cannot read (a label that is a number) would fail the whole review,
//!   uid and all, and the object would be held twice (typed, and as JSON for the core). So the body
//!   is decoded once into a JSON tree (without the container lists, volumes and managed fields
//!   admission never reads: [`crate::pruned`]), `object` and `oldObject` are moved out of it (not
//!   copied), and only the rest goes through kube-core's types. An unreadable object is then the core's to judge:
//!   denied by the validating hook, let through with a warning by the mutating one.
//! - **The envelope's identity.** kube-core accepts any `apiVersion`/`kind`; a review that is not
//!   `admission.k8s.io/v1` `AdmissionReview` is refused here with 400, naming the field, as is a
//!   missing `request` or an empty `request.uid`. Other decode errors name their field path
//!   (`request.operation: unknown variant …`; serde alone would say only "unknown variant").
//!   kube-core requires `request.kind`, `request.resource` and `request.userInfo`, which the
//!   decision never reads: when absent they are taken as empty rather than refusing the review.
//! - **The patch.** kube-core 5.0 serializes `AdmissionResponse::patch` as an array of numbers
//!   (kube-rs issue 1781); the API defines it as base64 text, so [`Answer`] writes it that way.

use std::collections::BTreeMap;

use base64::Engine as _;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use kube_core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube_core::response::{StatusCause, StatusDetails};
use kube_core::{DynamicObject, Status, TypeMeta};
use scheduler_core::FieldError;
use scheduler_core::labels::LABEL_ENABLED;
use scheduler_core::workload::Change;
use serde::Serialize;
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

/// The AdmissionReview the webhook answers with: kube-core's envelope and response, the patch (when
/// there is one) as base64 text.
#[derive(Clone, Debug, Serialize)]
pub struct Answer {
    #[serde(flatten)]
    pub types: TypeMeta,
    pub response: Response,
}

/// kube-core's [`AdmissionResponse`] with the patch written as the API server reads it.
#[derive(Clone, Debug, Serialize)]
pub struct Response {
    #[serde(flatten)]
    pub admission: AdmissionResponse,
    /// The JSON Patch, base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(rename = "patchType", skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
}

/// Answers one AdmissionReview body. `namespace_opted_in`: the request came through the hook whose
/// namespaceSelector matched `kube-gang.io/enabled=true` (the API server does not send namespace
/// labels, so the configuration says it with the path).
pub fn review(hook: Hook, body: &[u8], namespace_opted_in: bool) -> Result<(Answer, Summary), BadRequest> {
    review_with(hook, body, namespace_opted_in, &scheduler_core::NoGangs)
}

/// [`review`], knowing `gangs` (the webhook's gang lookup, [`crate::gangs`]): a pod naming an inner
/// or unknown subgroup of a known gang is denied ([`scheduler_core::admit_with`]).
pub fn review_with(
    hook: Hook,
    body: &[u8],
    namespace_opted_in: bool,
    gangs: &dyn scheduler_core::Gangs,
) -> Result<(Answer, Summary), BadRequest> {
    let (request, object, old) = decode(body)?;
    let mut summary = Summary {
        uid: request.uid.clone(),
        kind: request.kind.kind.clone(),
        namespace: request.namespace.clone().unwrap_or_default(),
        name: request.name.clone(),
        operation: operation(&request.operation).to_string(),
        allowed: true,
        patched: 0,
    };
    let mut response =
        Response { admission: AdmissionResponse::from(&request), patch: None, patch_type: None };
    match (&request.operation, object) {
        // Deleting is always allowed; so is anything without an object to look at.
        (Operation::Delete | Operation::Connect, _) | (_, None) => {}
        (_, Some(mut object)) => {
            with_request_defaults(&mut object, &request);
            let labels =
                namespace_opted_in.then(|| BTreeMap::from([(LABEL_ENABLED.to_string(), "true".to_string())]));
            let verdict = scheduler_core::admit_with(&mut object, old.as_ref(), labels.as_ref(), gangs);
            // The admitted object is not needed past the verdict: free it before answering.
            drop(object);
            drop(old);
            match hook {
                Hook::Validate => {
                    if !verdict.allowed() {
                        response.admission = deny(response.admission, &verdict.errors);
                    }
                    if !verdict.warnings.is_empty() {
                        response.admission.warnings = Some(verdict.warnings);
                    }
                }
                Hook::Mutate => {
                    // Mutation never denies: the validating hook (same rules) does, and this
                    // only explains.
                    if !verdict.allowed() {
                        let warnings = verdict.errors.iter().map(|e| format!("kube-gang: {}", text(e)));
                        response.admission.warnings = Some(warnings.collect());
                    }
                    match patch(verdict.changes) {
                        Ok(Some((encoded, ops))) => {
                            response.patch = Some(encoded);
                            response.patch_type = Some("JSONPatch");
                            summary.patched = ops;
                        }
                        Ok(None) => {}
                        Err(e) => {
                            let w = format!("kube-gang: not mutated: {e}");
                            response.admission.warnings.get_or_insert_with(Vec::new).push(w);
                        }
                    }
                }
            }
        }
    }
    summary.allowed = response.admission.allowed;
    let types = TypeMeta { api_version: "admission.k8s.io/v1".into(), kind: "AdmissionReview".into() };
    Ok((Answer { types, response }, summary))
}

/// The typed request, and its object and old object as the JSON they came as.
type Decoded = (AdmissionRequest<DynamicObject>, Option<Value>, Option<Value>);

/// Decodes the body once; see the module docs for what is checked here rather than by kube-core.
fn decode(body: &[u8]) -> Result<Decoded, BadRequest> {
    let mut tree =
        crate::pruned::from_slice(body).map_err(|e| BadRequest(format!("request body is not JSON: {e}")))?;
    let text = |field: &str| tree.get(field).and_then(Value::as_str).unwrap_or("").to_string();
    let (kind, api_version) = (text("kind"), text("apiVersion"));
    if kind != "AdmissionReview" {
        return Err(BadRequest(format!("kind: expected AdmissionReview, got {kind:?}")));
    }
    if api_version != "admission.k8s.io/v1" {
        return Err(BadRequest(format!(
            "apiVersion: expected admission.k8s.io/v1, got {api_version:?} (set admissionReviewVersions: [v1])"
        )));
    }
    let Some(request) = tree.get_mut("request").and_then(Value::as_object_mut) else {
        return Err(BadRequest("request: missing".into()));
    };
    if request.get("uid").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Err(BadRequest("request.uid: missing".into()));
    }
    // kube-core requires these three; the API server always sends them and the decision reads none
    // of them (`kind` only names the request in the log), so a review without them is answered.
    for (field, absent) in [
        ("kind", json!({"group": "", "version": "", "kind": ""})),
        ("resource", json!({"group": "", "version": "", "resource": ""})),
        ("userInfo", json!({})),
    ] {
        request.entry(field).or_insert(absent);
    }
    let object = request.remove("object").filter(|o| !o.is_null());
    let old = request.remove("oldObject").filter(|o| !o.is_null());
    let review: AdmissionReview<DynamicObject> = serde_path_to_error::deserialize(tree)
        .map_err(|e| BadRequest(format!("{}: {}", e.path(), e.inner())))?;
    let request: AdmissionRequest<DynamicObject> =
        review.try_into().map_err(|_| BadRequest("request: missing".into()))?;
    Ok((request, object, old))
}

fn operation(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// Writes the namespace and name the request carries into the object when it omits them (a pod
/// created by a controller with `generateName` has no name yet; its namespace comes with the request).
fn with_request_defaults(object: &mut Value, request: &AdmissionRequest<DynamicObject>) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(ns) = request.namespace.as_ref().filter(|ns| !ns.is_empty()) {
            meta.entry("namespace").or_insert_with(|| Value::String(ns.clone()));
        }
        if !request.name.is_empty() {
            meta.entry("name").or_insert_with(|| Value::String(request.name.clone()));
        }
    }
}

/// The JSON Patch of admission's changes (base64) and its number of operations; `None` when there
/// is nothing to change. The changes are moved into the patch, not copied.
fn patch(changes: Vec<Change>) -> Result<Option<(String, usize)>, String> {
    if changes.is_empty() {
        return Ok(None);
    }
    let count = changes.len();
    let ops = changes
        .into_iter()
        .map(|c| {
            let path = PointerBuf::parse(c.path).map_err(|e| e.to_string())?;
            Ok(PatchOperation::Add(AddOperation { path, value: c.value }))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let bytes = serde_json::to_vec(&Patch(ops)).map_err(|e| e.to_string())?;
    Ok(Some((base64::engine::general_purpose::STANDARD.encode(bytes), count)))
}

/// One problem as the user reads it (an error about the whole object has no path to name).
fn text(e: &FieldError) -> String {
    if e.path.is_empty() { e.message.clone() } else { e.to_string() }
}

/// Denies with every error in the message (what `kubectl` prints) and, one by one with its field,
/// in `status.details.causes` (as the API server's own 422 Invalid lists them).
fn deny(response: AdmissionResponse, errors: &[FieldError]) -> AdmissionResponse {
    let list: Vec<String> = errors.iter().map(text).collect();
    let message = format!("kube-gang: {}", list.join("; "));
    let mut response = response.deny(&message);
    let mut status = Status::failure(&message, "Invalid").with_code(422);
    status.details = Some(StatusDetails {
        name: String::new(),
        group: String::new(),
        kind: String::new(),
        uid: String::new(),
        causes: errors
            .iter()
            .map(|e| StatusCause {
                reason: "FieldValueInvalid".into(),
                message: e.message.clone(),
                field: e.path.clone(),
            })
            .collect(),
        retry_after_seconds: 0,
    });
    response.result = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review_of(operation: &str, object: Value, old: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "userInfo": {"username": "admin"},
                        "namespace": "ml", "name": "p", "operation": operation, "object": object,
                        "oldObject": old, "dryRun": false}
        }))
        .unwrap()
    }

    fn answer(hook: Hook, body: &[u8]) -> (Value, Summary) {
        let (a, s) = review(hook, body, false).unwrap();
        (serde_json::to_value(a).unwrap(), s)
    }

    #[test]
    fn delete_is_always_allowed() {
        for hook in [Hook::Validate, Hook::Mutate] {
            let (out, s) = answer(hook, &review_of("DELETE", Value::Null, json!({"kind": "Gang"})));
            assert_eq!(out["response"]["allowed"], true);
            assert_eq!(out["response"]["uid"], "u-1");
            assert!(s.allowed);
        }
    }

    #[test]
    fn not_a_review_is_a_bad_request_naming_the_field() {
        let err = |body: &[u8]| review(Hook::Validate, body, false).unwrap_err().0;
        assert!(err(b"{").contains("not JSON"));
        assert!(err(br#"{"kind":"Pod"}"#).starts_with("kind:"));
        let e = err(br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1"}"#);
        assert!(e.starts_with("apiVersion:"), "{e}");
        let e = err(br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{}}"#);
        assert_eq!(e, "request.uid: missing");
        // What kube-core's types require is named by its path.
        let mut body: Value = serde_json::from_slice(&review_of("CREATE", json!({}), Value::Null)).unwrap();
        body["request"]["operation"] = json!("PATCH");
        let e = err(&serde_json::to_vec(&body).unwrap());
        assert!(e.starts_with("request.operation: unknown variant `PATCH`"), "{e}");
        body["request"]["operation"] = json!("CREATE");
        body["request"]["kind"] = json!(5);
        let e = err(&serde_json::to_vec(&body).unwrap());
        assert!(e.starts_with("request.kind: invalid type"), "{e}");
        // Absent, the fields kube-core requires but the decision never reads are taken as empty.
        for field in ["kind", "resource", "userInfo"] {
            body["request"].as_object_mut().unwrap().remove(field);
        }
        let (a, _) = review(Hook::Validate, &serde_json::to_vec(&body).unwrap(), false).unwrap();
        assert_eq!(a.response.admission.uid, "u-1");
    }

    #[test]
    fn undecodable_object_denies_on_validate_but_never_blocks_on_mutate() {
        let body = review_of("CREATE", json!("a string"), Value::Null);
        let (v, _) = answer(Hook::Validate, &body);
        assert_eq!(v["response"]["allowed"], false, "{v}");
        let (m, _) = answer(Hook::Mutate, &body);
        assert_eq!(m["response"]["allowed"], true);
        assert!(m["response"]["warnings"][0].as_str().unwrap().contains("not a Kubernetes object"), "{m}");
        // Metadata kube-core's ObjectMeta cannot read still gets an answer with the uid, not a 400.
        let odd = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"labels": 7}});
        for hook in [Hook::Validate, Hook::Mutate] {
            let (r, _) = answer(hook, &review_of("CREATE", odd.clone(), Value::Null));
            assert_eq!(r["response"]["uid"], "u-1");
        }
    }

    #[test]
    fn a_denial_carries_422_invalid_and_every_path() {
        let gang = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "g"},
            "spec": {"minMember": 0, "subGroups": [{"name": "a", "minMember": 0}]}});
        let (v, s) = answer(Hook::Validate, &review_of("CREATE", gang, Value::Null));
        let status = &v["response"]["status"];
        assert_eq!((status["code"].as_u64(), status["reason"].as_str()), (Some(422), Some("Invalid")));
        let msg = status["message"].as_str().unwrap();
        assert!(msg.starts_with("kube-gang: ") && msg.contains("spec.subGroups[0].minMember"), "{msg}");
        assert!(!s.allowed);
    }
}
