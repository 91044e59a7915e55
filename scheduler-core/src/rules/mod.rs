//! Layer 2, rules: validation of objects against the rule book, every problem with its field path.
//!
//! Uses the reading layer ([`crate::read`]) only; the deciding layer may use it.

pub mod validate;
