//! Layer 3, deciding: the scheduling cycle, its policy, its output and replay over time.
//!
//! Uses the layers below ([`crate::read`], [`crate::rules`]); nothing below may use it.

pub mod config;
pub mod plan;
pub mod provision;
pub mod replay;
pub mod schedule;
