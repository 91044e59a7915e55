//! Layer 2, rules: validation of objects against the rule book, every problem with its field path,
//! and admission (inject, then validate), the one entry point of the webhook and `kubectl gang validate`.
//!
//! Uses the reading layer ([`crate::read`]) only; the deciding layer may use it.

pub mod admit;
pub mod validate;
