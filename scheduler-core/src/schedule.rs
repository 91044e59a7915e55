//! (being written)

use crate::{Config, Plan, Snapshot, Time};

/// One scheduling cycle. Pure and deterministic.
pub fn schedule(_snapshot: &Snapshot, _config: &Config, _now: Time) -> Plan {
    Plan::default()
}
