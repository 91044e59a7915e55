//! Equality as kube-apiserver's update rules see it (`apiequality.Semantic.DeepEqual` on the
//! decoded Go types): a field that is `null`, `[]` or `{}` is as good as absent. Shared by the
//! kinds whose updates compare old and new ([`crate::volumes`], [`crate::dra`]).

use serde_json::Value;

/// Whether a field is there and not `null`.
pub fn set(v: Option<&Value>) -> bool {
    v.is_some_and(|x| !x.is_null())
}

/// `null`, `[]` and `{}` removed at every depth: what `Semantic.DeepEqual` does not tell apart.
fn semantic(v: &Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Array(a) if a.is_empty() => None,
        Value::Array(a) => Some(Value::Array(a.iter().map(|x| semantic(x).unwrap_or(Value::Null)).collect())),
        Value::Object(m) if m.is_empty() => None,
        Value::Object(m) => {
            let kept: serde_json::Map<String, Value> =
                m.iter().filter_map(|(k, x)| semantic(x).map(|x| (k.clone(), x))).collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        other => Some(other.clone()),
    }
}

/// Whether `a` and `b` are equal as `Semantic.DeepEqual` sees them.
pub fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    a.and_then(semantic) == b.and_then(semantic)
}
