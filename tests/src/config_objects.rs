//! Secrets and admission webhook configurations, checked as kube-apiserver checks them: what the
//! webhook's own certificate management writes (its Secret, and `caBundle` in both webhook
//! configurations) is refused here whenever the API server would refuse it.
//!
//! - **Secret** (`pkg/apis/core/validation` `ValidateSecret`, `ValidateSecretUpdate`): `data`
//!   values are base64 (else the body does not decode: 400); `stringData` is merged into `data`
//!   and never stored; every key is a config-map key (`[-._a-zA-Z0-9]+`, at most 253 characters,
//!   not `.` or `..`, not starting with `..`); all data together at most 1 MiB; a
//!   `kubernetes.io/tls` Secret holds `tls.crt` and `tls.key`; `type` is immutable, and so is the
//!   data of an `immutable: true` Secret.
//! - **Mutating/ValidatingWebhookConfiguration** (`pkg/apis/admissionregistration/validation`):
//!   webhook names fully qualified (three or more DNS labels) and unique; `clientConfig` exactly one
//!   of `url` and `service`, a service path starting with `/`, a port in 1–65535; `caBundle`
//!   base64 (400 otherwise); `sideEffects`, `admissionReviewVersions` (one of `v1`, `v1beta1`)
//!   required; `failurePolicy`, `matchPolicy`, `reinvocationPolicy` and `sideEffects` among
//!   their values; `timeoutSeconds` 1–30; every rule with operations, groups, versions and
//!   resources; at most 64 `matchConditions` per webhook, names unique, expressions required.

use base64::Engine as _;
use serde_json::Value;

use crate::names::{dns1123_subdomain, qualified_name};
use crate::status::FieldError;

/// `MaxSecretSize`: all of a Secret's data together.
pub const MAX_SECRET_SIZE: usize = 1024 * 1024;

/// `IsConfigMapKey`.
fn config_map_key(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    if key.len() > 253 {
        out.push("must be no more than 253 characters".to_string());
    }
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) {
        out.push("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".into());
    }
    if key == "." {
        out.push("must not be '.'".into());
    } else if key == ".." {
        out.push("must not be '..'".into());
    } else if key.starts_with("..") {
        out.push("must not start with '..'".into());
    }
    out
}

/// Stage 1 for a Secret: every `data` value decodes as base64 (as `[]byte` in Go's JSON).
pub fn decode_secret(obj: &Value) -> Result<(), String> {
    if let Some(data) = obj.get("data").filter(|d| !d.is_null()) {
        let map = data.as_object().ok_or("data: expected an object")?;
        for (k, v) in map {
            let s = v.as_str().ok_or_else(|| format!("data[{k}]: expected a base64 string"))?;
            base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| format!("illegal base64 data in data[{k}]: {e}"))?;
        }
    }
    if let Some(data) = obj.get("stringData").filter(|d| !d.is_null()) {
        let map = data.as_object().ok_or("stringData: expected an object")?;
        if map.values().any(|v| !v.is_string()) {
            return Err("stringData: expected string values".into());
        }
    }
    Ok(())
}

/// What the API server stores: `stringData` merged into `data` (it wins on a shared key).
pub fn normalize_secret(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else { return };
    let Some(Value::Object(strings)) = map.remove("stringData") else { return };
    let data = map.entry("data").or_insert_with(|| Value::Object(Default::default()));
    if !data.is_object() {
        *data = Value::Object(Default::default());
    }
    if let Some(d) = data.as_object_mut() {
        for (k, v) in strings {
            let text = v.as_str().unwrap_or_default();
            d.insert(k, Value::String(base64::engine::general_purpose::STANDARD.encode(text)));
        }
    }
}

fn decoded_len(v: &Value) -> usize {
    v.as_str().and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok()).map_or(0, |b| b.len())
}

/// `ValidateSecret` (after [`normalize_secret`]).
pub fn validate_secret(obj: &Value, errs: &mut Vec<FieldError>) {
    let data = obj.get("data").and_then(Value::as_object);
    let mut total = 0;
    for (k, v) in data.into_iter().flatten() {
        for m in config_map_key(k) {
            errs.push(FieldError::invalid(format!("data[{k}]"), k, m));
        }
        total += decoded_len(v);
    }
    if total > MAX_SECRET_SIZE {
        errs.push(FieldError::too_long("data", MAX_SECRET_SIZE));
    }
    if obj.get("type").and_then(Value::as_str) == Some("kubernetes.io/tls") {
        for key in ["tls.crt", "tls.key"] {
            if !data.is_some_and(|d| d.contains_key(key)) {
                errs.push(FieldError::required(format!("data[{key}]"), ""));
            }
        }
    }
}

/// `ValidateSecretUpdate`: the type, and an immutable Secret's data, never change.
pub fn secret_update(current: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let ty = |v: &Value| v.get("type").and_then(Value::as_str).unwrap_or("Opaque").to_string();
    if ty(current) != ty(new) {
        errs.push(FieldError::invalid("type", &ty(new), "field is immutable"));
    }
    if current.get("immutable").and_then(Value::as_bool) == Some(true) {
        if new.get("immutable").and_then(Value::as_bool) != Some(true) {
            errs.push(FieldError::forbidden("immutable", "field is immutable when `immutable` is set"));
        }
        if current.get("data") != new.get("data") {
            errs.push(FieldError::forbidden("data", "field is immutable when `immutable` is set"));
        }
    }
}

/// Stage 1 for a webhook configuration: `caBundle` is `[]byte`, so base64.
pub fn decode_webhook_configuration(obj: &Value) -> Result<(), String> {
    for (i, w) in obj.get("webhooks").and_then(Value::as_array).into_iter().flatten().enumerate() {
        if let Some(b) = w.pointer("/clientConfig/caBundle").filter(|b| !b.is_null()) {
            let s = b
                .as_str()
                .ok_or_else(|| format!("webhooks[{i}].clientConfig.caBundle: expected a string"))?;
            base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| format!("illegal base64 data in webhooks[{i}].clientConfig.caBundle: {e}"))?;
        }
    }
    Ok(())
}

fn one_of(errs: &mut Vec<FieldError>, w: &Value, field: &str, path: &str, allowed: &[&str], required: bool) {
    match w.get(field).and_then(Value::as_str) {
        Some(v) if !allowed.contains(&v) => errs.push(FieldError::not_supported(path, v, allowed)),
        None if required => errs.push(FieldError::required(path, "")),
        _ => {}
    }
}

/// `ValidateMutatingWebhookConfiguration` / `ValidateValidatingWebhookConfiguration` (v1).
pub fn validate_webhook_configuration(obj: &Value, mutating: bool, errs: &mut Vec<FieldError>) {
    let mut names = std::collections::BTreeSet::new();
    for (i, w) in obj.get("webhooks").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let p = format!("webhooks[{i}]");
        let name = w.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        } else {
            let mut bad = dns1123_subdomain(name);
            if name.split('.').count() < 3 {
                bad.push("should be a domain with at least three segments separated by dots".into());
            }
            for m in bad {
                errs.push(FieldError::invalid(format!("{p}.name"), name, m));
            }
            if !names.insert(name) {
                errs.push(FieldError::duplicate(format!("{p}.name"), name));
            }
        }
        let versions: Vec<&str> = w
            .get("admissionReviewVersions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !versions.iter().any(|v| matches!(*v, "v1" | "v1beta1")) {
            errs.push(FieldError::required(
                format!("{p}.admissionReviewVersions"),
                "must specify one of v1, v1beta1",
            ));
        }
        one_of(errs, w, "sideEffects", &format!("{p}.sideEffects"), &["None", "NoneOnDryRun"], true);
        one_of(errs, w, "failurePolicy", &format!("{p}.failurePolicy"), &["Fail", "Ignore"], false);
        one_of(errs, w, "matchPolicy", &format!("{p}.matchPolicy"), &["Equivalent", "Exact"], false);
        if mutating {
            one_of(
                errs,
                w,
                "reinvocationPolicy",
                &format!("{p}.reinvocationPolicy"),
                &["IfNeeded", "Never"],
                false,
            );
        }
        if let Some(t) = w.get("timeoutSeconds").and_then(Value::as_i64)
            && !(1..=30).contains(&t)
        {
            errs.push(FieldError::invalid(
                format!("{p}.timeoutSeconds"),
                &t.to_string(),
                "the timeout value must be between 1 and 30 seconds",
            ));
        }
        client_config(w.get("clientConfig").unwrap_or(&Value::Null), &format!("{p}.clientConfig"), errs);
        for (j, r) in w.get("rules").and_then(Value::as_array).into_iter().flatten().enumerate() {
            for f in ["operations", "apiGroups", "apiVersions", "resources"] {
                if r.get(f).and_then(Value::as_array).is_none_or(Vec::is_empty) {
                    errs.push(FieldError::required(format!("{p}.rules[{j}].{f}"), ""));
                }
            }
        }
        let conditions = w.get("matchConditions").and_then(Value::as_array);
        if let Some(list) = conditions {
            if list.len() > 64 {
                errs.push(FieldError::too_many(format!("{p}.matchConditions"), list.len(), 64));
            }
            let mut seen = std::collections::BTreeSet::new();
            for (j, c) in list.iter().enumerate() {
                let n = c.get("name").and_then(Value::as_str).unwrap_or("");
                if n.is_empty() {
                    errs.push(FieldError::required(format!("{p}.matchConditions[{j}].name"), ""));
                } else {
                    for m in qualified_name(n) {
                        errs.push(FieldError::invalid(format!("{p}.matchConditions[{j}].name"), n, m));
                    }
                    if !seen.insert(n) {
                        errs.push(FieldError::duplicate(format!("{p}.matchConditions[{j}].name"), n));
                    }
                }
                if c.get("expression").and_then(Value::as_str).is_none_or(str::is_empty) {
                    errs.push(FieldError::required(format!("{p}.matchConditions[{j}].expression"), ""));
                }
            }
        }
    }
}

fn client_config(c: &Value, p: &str, errs: &mut Vec<FieldError>) {
    let url = c.get("url").filter(|v| !v.is_null());
    let service = c.get("service").filter(|v| !v.is_null());
    match (url, service) {
        (Some(_), Some(_)) | (None, None) => {
            errs.push(FieldError::required(p, "exactly one of url or service is required"));
        }
        (None, Some(s)) => {
            for f in ["name", "namespace"] {
                if s.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                    errs.push(FieldError::required(format!("{p}.service.{f}"), ""));
                }
            }
            if let Some(path) = s.get("path").and_then(Value::as_str)
                && !path.starts_with('/')
            {
                errs.push(FieldError::invalid(format!("{p}.service.path"), path, "must start with a '/'"));
            }
            if let Some(port) = s.get("port").and_then(Value::as_i64)
                && !(1..=65535).contains(&port)
            {
                errs.push(FieldError::invalid(
                    format!("{p}.service.port"),
                    &port.to_string(),
                    "port is not valid: must be between 1 and 65535, inclusive",
                ));
            }
        }
        (Some(_), None) => {}
    }
}
