//! `metav1.Status` answers, shaped as kube-apiserver sends them: `kind: Status`, `apiVersion: v1`,
//! `status: Failure`, a `reason`, the HTTP `code`, and for validation failures
//! `details.causes[{reason, message, field}]`.
//!
//! Messages follow apimachinery's `k8s.io/apimachinery/pkg/api/errors` constructors (`NewInvalid`,
//! `NewConflict`, `NewNotFound`, `NewAlreadyExists`, `NewTooManyRequests`, `NewBadRequest`), so
//! a client that matches on them behaves as it would against a real cluster.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One field error, as apimachinery's `field.Error`: the path, the kind of problem, the offending
/// value and a detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// `metadata.name`, `status.conditions[0].reason`, …
    pub field: String,
    pub kind: ErrorKind,
    /// The offending value, rendered as Go's `%q` would for strings (absent for `Required`).
    pub value: String,
    pub detail: String,
}

/// apimachinery's `field.ErrorType`s the fake produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ErrorKind {
    Required,
    Invalid,
    NotSupported,
    TooLong,
    Forbidden,
    Duplicate,
    /// A value of the wrong type (`field.TypeInvalid`: the CRD schema's type and format).
    TypeInvalid,
    /// More items than allowed (`field.TooMany`: `maxItems`, `maxProperties`).
    TooMany,
}

impl ErrorKind {
    /// The cause reason (`metav1.CauseType`).
    fn cause(self) -> &'static str {
        match self {
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::Invalid => "FieldValueInvalid",
            ErrorKind::NotSupported => "FieldValueNotSupported",
            ErrorKind::TooLong => "FieldValueTooLong",
            ErrorKind::Forbidden => "FieldValueForbidden",
            ErrorKind::Duplicate => "FieldValueDuplicate",
            ErrorKind::TypeInvalid => "FieldValueTypeInvalid",
            ErrorKind::TooMany => "FieldValueTooMany",
        }
    }
}

impl FieldError {
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: ErrorKind::Required,
            value: String::new(),
            detail: detail.into(),
        }
    }

    pub fn invalid(field: impl Into<String>, value: &str, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: ErrorKind::Invalid,
            value: quote(value),
            detail: detail.into(),
        }
    }

    pub fn not_supported(field: impl Into<String>, value: &str, allowed: &[&str]) -> Self {
        let list: Vec<String> = allowed.iter().map(|a| quote(a)).collect();
        FieldError {
            field: field.into(),
            kind: ErrorKind::NotSupported,
            value: quote(value),
            detail: format!("supported values: {}", list.join(", ")),
        }
    }

    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        FieldError {
            field: field.into(),
            kind: ErrorKind::TooLong,
            value: String::new(),
            detail: format!("may not be more than {max} bytes"),
        }
    }

    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: ErrorKind::Forbidden,
            value: String::new(),
            detail: detail.into(),
        }
    }

    /// `field.Duplicate`: `value` seen before in the same list.
    pub fn duplicate(field: impl Into<String>, value: &str) -> Self {
        FieldError {
            field: field.into(),
            kind: ErrorKind::Duplicate,
            value: quote(value),
            detail: String::new(),
        }
    }

    /// `field.TypeInvalid`: `value` already rendered.
    pub fn type_invalid(field: impl Into<String>, value: String, detail: impl Into<String>) -> Self {
        FieldError { field: field.into(), kind: ErrorKind::TypeInvalid, value, detail: detail.into() }
    }

    /// `field.TooMany`: `actual` items where at most `max` are allowed.
    pub fn too_many(field: impl Into<String>, actual: usize, max: u64) -> Self {
        FieldError {
            field: field.into(),
            kind: ErrorKind::TooMany,
            value: actual.to_string(),
            detail: format!("must have at most {max} items"),
        }
    }

    /// What follows the field path in `field.Error.Error()` (`ErrorBody`).
    pub fn body(&self) -> String {
        let head = match self.kind {
            ErrorKind::Required => "Required value".to_string(),
            ErrorKind::Invalid => format!("Invalid value: {}", self.value),
            ErrorKind::NotSupported => format!("Unsupported value: {}", self.value),
            ErrorKind::TooLong => "Too long".to_string(),
            ErrorKind::Forbidden => "Forbidden".to_string(),
            ErrorKind::Duplicate => format!("Duplicate value: {}", self.value),
            ErrorKind::TypeInvalid => format!("Invalid value: {}", self.value),
            ErrorKind::TooMany => format!("Too many: {}", self.value),
        };
        if self.detail.is_empty() { head } else { format!("{head}: {}", self.detail) }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Go's `%q` for a string, near enough (JSON string escaping).
fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// An API error: the `Status` body, its HTTP code, and an optional `Retry-After`.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    pub retry_after: Option<u32>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError { code, reason, message: message.into(), details: None, retry_after: None }
    }

    /// 404 `NotFound`: `pods "x" not found`.
    pub fn not_found(resource: &str, name: &str) -> Self {
        let mut e = Self::new(404, "NotFound", format!("{resource} {} not found", quote(name)));
        e.details = Some(json!({"name": name, "kind": resource}));
        e
    }

    /// 409 `AlreadyExists`: `pods "x" already exists`.
    pub fn already_exists(resource: &str, name: &str) -> Self {
        let mut e = Self::new(409, "AlreadyExists", format!("{resource} {} already exists", quote(name)));
        e.details = Some(json!({"name": name, "kind": resource}));
        e
    }

    /// 409 `Conflict`: `Operation cannot be fulfilled on pods "x": <why>`.
    pub fn conflict(resource: &str, name: &str, why: &str) -> Self {
        let mut e = Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} {}: {why}", quote(name)),
        );
        e.details = Some(json!({"name": name, "kind": resource}));
        e
    }

    /// 409 `Conflict` for a stale `resourceVersion`.
    pub fn stale(resource: &str, name: &str) -> Self {
        Self::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 `Invalid` with every field error as a cause: `Kind.group "name" is invalid: [...]`.
    pub fn invalid(qualified_kind: &str, name: &str, errors: &[FieldError]) -> Self {
        let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let joined = if list.len() == 1 { list[0].clone() } else { format!("[{}]", list.join(", ")) };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.kind.cause(), "message": e.body(), "field": e.field}))
            .collect();
        let (kind, group) = qualified_kind.split_once('.').unwrap_or((qualified_kind, ""));
        let mut e =
            Self::new(422, "Invalid", format!("{qualified_kind} {} is invalid: {joined}", quote(name)));
        e.details = Some(json!({"name": name, "group": group, "kind": kind, "causes": causes}));
        e
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 429 `TooManyRequests`; `retry_after` > 0 also sets the `Retry-After` header.
    pub fn too_many_requests(message: impl Into<String>, retry_after: u32) -> Self {
        let mut e = Self::new(429, "TooManyRequests", message);
        if retry_after > 0 {
            e.details = Some(json!({"retryAfterSeconds": retry_after}));
            e.retry_after = Some(retry_after);
        }
        e
    }

    /// 410 `Expired` (`Gone`): a resourceVersion or continue token older than the compaction.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 415 `UnsupportedMediaType`.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {content_type:?})"
            ),
        )
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed(what: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({what})"),
        )
    }

    /// 500 `InternalError`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", format!("Internal error occurred: {}", message.into()))
    }

    /// An injected failure with this HTTP code: the reason and message the API server uses for it.
    pub fn injected(code: u16) -> Self {
        let (reason, message) = match code {
            400 => ("BadRequest", "injected bad request"),
            401 => ("Unauthorized", "Unauthorized"),
            403 => ("Forbidden", "forbidden: injected"),
            404 => ("NotFound", "the server could not find the requested resource (injected)"),
            409 => ("Conflict", "Operation cannot be fulfilled: injected conflict"),
            410 => ("Expired", "too old resource version (injected)"),
            422 => ("Invalid", "injected invalid"),
            429 => (
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
            ),
            503 => ("ServiceUnavailable", "the server is currently unable to handle the request"),
            504 => ("Timeout", "the server was unable to return a response in the time allotted"),
            _ => ("InternalError", "Internal error occurred: injected fault"),
        };
        let mut e = Self::new(code, reason, message);
        if code == 429 {
            e.details = Some(json!({"retryAfterSeconds": 1}));
            e.retry_after = Some(1);
        }
        e
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut v = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": self.message, "reason": self.reason, "code": self.code});
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp =
            (code, [("content-type", "application/json")], self.to_status().to_string()).into_response();
        if let Some(s) = self.retry_after {
            resp.headers_mut().insert("retry-after", HeaderValue::from(s));
        }
        resp
    }
}

/// A `Status` of success with this code (what `pods/binding` and `pods/eviction` answer).
pub fn success(code: u16) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    let body =
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code});
    (status, [("content-type", "application/json")], body.to_string()).into_response()
}

/// An object answer.
pub fn object(code: u16, v: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    (status, [("content-type", "application/json")], v.to_string()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_lists_every_cause_with_its_field() {
        let e = ApiError::invalid(
            "Event.events.k8s.io",
            "p.1",
            &[
                FieldError::required("reportingController", ""),
                FieldError::invalid("type", "Bad", "has invalid value: Bad"),
            ],
        );
        let s = e.to_status();
        assert_eq!(
            (s["kind"].as_str(), s["apiVersion"].as_str(), s["status"].as_str()),
            (Some("Status"), Some("v1"), Some("Failure"))
        );
        assert_eq!((s["reason"].as_str(), s["code"].as_u64()), (Some("Invalid"), Some(422)));
        assert_eq!(
            s["message"],
            "Event.events.k8s.io \"p.1\" is invalid: [reportingController: Required value, type: Invalid value: \"Bad\": has invalid value: Bad]"
        );
        assert_eq!(s["details"]["group"], "events.k8s.io");
        assert_eq!(s["details"]["kind"], "Event");
        assert_eq!(
            s["details"]["causes"][0],
            json!({"reason": "FieldValueRequired", "message": "Required value", "field": "reportingController"})
        );
        assert_eq!(s["details"]["causes"][1]["reason"], "FieldValueInvalid");
    }

    #[test]
    fn conflict_and_not_found_read_as_apimachinery_writes_them() {
        let c = ApiError::conflict("pods/binding", "w-0", "pod w-0 is already assigned to node \"n1\"")
            .to_status();
        assert_eq!(
            c["message"],
            "Operation cannot be fulfilled on pods/binding \"w-0\": pod w-0 is already assigned to node \"n1\""
        );
        assert_eq!((c["reason"].as_str(), c["code"].as_u64()), (Some("Conflict"), Some(409)));
        let n = ApiError::not_found("pods", "w-0").to_status();
        assert_eq!(n["message"], "pods \"w-0\" not found");
    }

    #[test]
    fn too_many_requests_sets_retry_after_only_when_asked() {
        assert_eq!(ApiError::too_many_requests("x", 0).retry_after, None);
        let e = ApiError::too_many_requests("x", 10);
        assert_eq!(e.retry_after, Some(10));
        assert_eq!(e.to_status()["details"]["retryAfterSeconds"], 10);
    }
}
