//! Scheduling policy: the knobs of the cycle, as one plain struct.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How members are spread over nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Scoring {
    /// Pack onto the fullest nodes that fit, scarcest requested resource (GPUs) first: leaves whole
    /// nodes free for the next big gang.
    #[default]
    BinPack,
    /// Prefer the emptiest nodes.
    Spread,
}

/// What happens when a gang's timeout expires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase", tag = "action")]
pub enum TimeoutAction {
    /// Release what the gang holds, wait `initial * 2^n` (capped at `max`), then try again.
    Retry {
        #[serde(with = "secs")]
        initial_backoff: Duration,
        #[serde(with = "secs")]
        max_backoff: Duration,
    },
    /// Give up: the gang is marked failed and its members are evicted.
    Fail,
}

impl Default for TimeoutAction {
    fn default() -> Self {
        TimeoutAction::Retry {
            initial_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(600),
        }
    }
}

/// The cycle's configuration. `Default` is what the scheduler runs with when no `--config` is given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Config {
    /// Only pods with this `spec.schedulerName` are placed.
    pub scheduler_name: String,
    pub scoring: Scoring,
    /// Timeout for gangs that set none. `None`: wait forever.
    #[serde(with = "opt_secs")]
    pub default_timeout: Option<Duration>,
    pub timeout_action: TimeoutAction,
    /// Grace period for degraded gangs that set none.
    #[serde(with = "secs")]
    pub stale_grace_period: Duration,
    /// Whether gangs may preempt lower-priority work.
    pub preemption: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            scheduler_name: crate::SCHEDULER_NAME.to_string(),
            scoring: Scoring::BinPack,
            default_timeout: None,
            timeout_action: TimeoutAction::default(),
            stale_grace_period: Duration::from_secs(60),
            preemption: true,
        }
    }
}

mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_secs())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_secs(u64::deserialize(d)?))
    }
}

mod opt_secs {
    pub use crate::model::opt_secs::*;
}
