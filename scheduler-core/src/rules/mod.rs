//! Layer 2, rules: validation of objects against the rule book, every problem with its field path,
//! and admission (inject, then validate), the one entry point of the webhook and `kubectl gang validate`.
//! `podspec` holds the API server's rules on a pod spec's inter-pod scheduling fields, which
//! `validate` applies to pods and workload templates. `prepare` takes submitted objects through
//! the steps the API server and admission take them through, for `simulate`, `validate` and tests.
//!
//! Uses the reading layer ([`crate::read`]) only; the deciding layer may use it.

pub mod admit;
pub mod podspec;
pub mod prepare;
pub mod validate;
