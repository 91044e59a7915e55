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
