//! Field-path errors: the one error shape that validation, conversion and every dialect return, and
//! that the webhook, the CLI and the scheduler print the same way.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One problem with an object, located by its field path (`spec.subGroups[2].parent`,
/// `metadata.annotations[kube-gang.io/min-member]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError { path: path.into(), message: message.into() }
    }

    /// The same error about a field of the object at `prefix` (`spec.template`): its path joined
    /// under the prefix (`spec.template.spec.volumes[0]`; the prefix alone when it had none).
    pub fn under(self, prefix: &str) -> Self {
        FieldError { path: join_path(prefix, &self.path), message: self.message }
    }
}

/// `prefix` and `inner` as one field path: `a.b` + `c[0]` → `a.b.c[0]`, `a.b` + `[0]` → `a.b[0]`,
/// either alone when the other is empty.
pub fn join_path(prefix: &str, inner: &str) -> String {
    match (prefix.is_empty(), inner.is_empty()) {
        (_, true) => prefix.to_string(),
        (true, false) => inner.to_string(),
        (false, false) if inner.starts_with('[') => format!("{prefix}{inner}"),
        (false, false) => format!("{prefix}.{inner}"),
    }
}

/// Every problem found in one object. Displays one per line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub struct FieldErrors(pub Vec<FieldError>);

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl From<Vec<FieldError>> for FieldErrors {
    fn from(v: Vec<FieldError>) -> Self {
        FieldErrors(v)
    }
}

/// How a decode error is worded: as the API server words it for the kind of object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wording {
    /// A built-in kind (Pod, Node, a pod template, `scheduling.k8s.io`): the decoder's message.
    BuiltIn,
    /// A custom resource, checked against its structural schema:
    /// `Invalid value: "string": spec.minMember in body must be of type integer: "string"`.
    Crd,
}

/// Deserialises `v` into `T` in place (no copy), or one error naming the exact field that could
/// not be read (`spec.volumes[0].configMap.defaultMode`), under `prefix` (`spec.template`, or
/// empty for the object itself), worded as `wording` says.
pub fn decode<'de, T: Deserialize<'de>>(
    v: &'de serde_json::Value,
    prefix: &str,
    wording: Wording,
) -> Result<T, Vec<FieldError>> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let inner = e.path().to_string();
        let path = join_path(prefix, if inner == "." { "" } else { &inner });
        let message = e.inner().to_string();
        let message = match wording {
            Wording::Crd => crd_type_error(&path, &message).unwrap_or(message),
            Wording::BuiltIn => format!("cannot decode: {message}"),
        };
        vec![FieldError::new(path, message)]
    })
}

/// serde's `invalid type: string "x", expected i32` as the API server's schema check words it,
/// when it is a type error.
fn crd_type_error(path: &str, message: &str) -> Option<String> {
    let rest = message.strip_prefix("invalid type: ")?;
    let (actual, expected) = rest.split_once(", expected ")?;
    let actual = match actual.split([' ', '`']).next()? {
        "string" => "string",
        "boolean" => "boolean",
        "integer" => "integer",
        "floating" => "number",
        "map" => "object",
        "sequence" => "array",
        "null" => "null",
        _ => return None,
    };
    let expected = expected.trim();
    let want = if ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"].contains(&expected) {
        "integer"
    } else if expected.starts_with("f32") || expected.starts_with("f64") {
        "number"
    } else if expected.contains("string") {
        "string"
    } else if expected.contains("boolean") {
        "boolean"
    } else if expected.contains("sequence") {
        "array"
    } else if expected.contains("map") || expected.starts_with("struct") {
        "object"
    } else {
        return None;
    };
    Some(format!("Invalid value: \"{actual}\": {path} in body must be of type {want}: \"{actual}\""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Spec {
        min_member: Option<i32>,
        sub_groups: Option<Vec<Sub>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Sub {
        min_member: i32,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Obj {
        spec: Spec,
    }

    #[test]
    fn a_decode_error_names_the_exact_field_in_the_api_servers_words() {
        let bad = json!({"spec": {"subGroups": [{"minMember": 1}, {"minMember": "x"}]}});
        let e = decode::<Obj>(&bad, "", Wording::Crd).unwrap_err();
        assert_eq!(e[0].path, "spec.subGroups[1].minMember");
        assert_eq!(
            e[0].message,
            "Invalid value: \"string\": spec.subGroups[1].minMember in body must be of type integer: \"string\""
        );
        let e =
            decode::<Spec>(&json!({"minMember": true}), "spec.template.spec", Wording::BuiltIn).unwrap_err();
        assert_eq!(e[0].path, "spec.template.spec.minMember");
        assert_eq!(e[0].message, "cannot decode: invalid type: boolean `true`, expected i32");
        let e = decode::<Vec<Sub>>(&json!([{"minMember": []}]), "spec.subGroups", Wording::Crd).unwrap_err();
        assert_eq!(e[0].path, "spec.subGroups[0].minMember");
        assert!(e[0].message.contains("must be of type integer: \"array\""), "{}", e[0].message);
    }
}
