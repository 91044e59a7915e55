//! Scheduling policy: the knobs of the cycle, as one plain struct.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// A policy document that is not a valid [`Config`]; the message names the field at fault
/// (`timeoutAction: invalid type: string "soon", expected u64`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid scheduling policy: {0}")]
pub struct PolicyError(String);

impl Config {
    /// Reads a policy document, the one format `gang-scheduler --config` and
    /// `kubectl gang simulate|status --config` take: a mapping with the fields of [`Config`] in
    /// camelCase, durations in seconds. Fields left out keep their defaults; an empty document
    /// (`null`) is [`Config::default`]. Unknown fields and bad values are errors naming the field.
    ///
    /// The core reads no files and parses no YAML: each binary reads the file and hands over the
    /// document (YAML and JSON both decode to a [`Value`]); every rule about its content is here.
    pub fn from_policy(doc: Value) -> Result<Config, PolicyError> {
        let fields = match doc {
            Value::Null => return Ok(Config::default()),
            Value::Object(fields) => fields,
            other => {
                return Err(PolicyError(format!("expected a mapping of policy fields, got {other}")));
            }
        };
        // serde names no path for a bad value, so each field is read on its own first: the first
        // that fails is the one the error names. Policy documents are a handful of fields.
        for (key, value) in &fields {
            let one = Value::Object(std::iter::once((key.clone(), value.clone())).collect());
            if let Err(e) = serde_json::from_value::<Config>(one) {
                return Err(PolicyError(format!("{key}: {e}")));
            }
        }
        serde_json::from_value(Value::Object(fields)).map_err(|e| PolicyError(e.to_string()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_policy_reads_every_field_and_names_the_bad_one() {
        let c = Config::from_policy(json!({"scoring": "spread", "defaultTimeout": 900,
            "timeoutAction": {"action": "retry", "initialBackoff": 5, "maxBackoff": 50},
            "staleGracePeriod": 30, "preemption": false}))
        .unwrap();
        assert_eq!(c.scoring, Scoring::Spread);
        assert_eq!(c.default_timeout, Some(Duration::from_secs(900)));
        assert_eq!(
            c.timeout_action,
            TimeoutAction::Retry {
                initial_backoff: Duration::from_secs(5),
                max_backoff: Duration::from_secs(50)
            }
        );
        assert_eq!(c.stale_grace_period, Duration::from_secs(30));
        assert!(!c.preemption);
        assert_eq!(Config::from_policy(Value::Null).unwrap(), Config::default());
        let unknown = Config::from_policy(json!({"scorng": "spread"})).unwrap_err().to_string();
        assert!(unknown.starts_with("invalid scheduling policy: scorng: unknown field"), "{unknown}");
        let nested = Config::from_policy(json!({"preemption": true,
            "timeoutAction": {"action": "retry", "initialBackoff": "soon", "maxBackoff": 5}}))
        .unwrap_err()
        .to_string();
        assert!(nested.starts_with("invalid scheduling policy: timeoutAction: "), "{nested}");
        let bad = Config::from_policy(json!({"scoring": "sideways"})).unwrap_err().to_string();
        assert!(bad.contains("scoring: unknown variant `sideways`"), "{bad}");
        assert!(Config::from_policy(json!(["a list"])).unwrap_err().to_string().contains("mapping"));
    }
}
