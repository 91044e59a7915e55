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
    /// Timeout for gangs that set none. `None`: wait forever. Like a gang's own, more than 0 and
    /// at most 30 days (`validate::timeout_error`).
    #[serde(with = "opt_secs")]
    pub default_timeout: Option<Duration>,
    pub timeout_action: TimeoutAction,
    /// Grace period for degraded gangs that set none.
    #[serde(with = "secs")]
    pub stale_grace_period: Duration,
    /// Whether gangs may preempt lower-priority work.
    pub preemption: bool,
    /// Asking the cluster autoscaler for whole gangs through `ProvisioningRequest`s. `None` (the
    /// default): off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<Provisioning>,
    /// The cluster's default spread constraints, as kube-scheduler's `PodTopologySpreadArgs`
    /// holds them. `None`: kube-scheduler's default (`defaultingType: System`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_topology_spread: Option<PodTopologySpread>,
    /// The cluster's topology levels, as node label keys, broadest first (`[zone, block, rack,
    /// kubernetes.io/hostname]`): a gang or subgroup that prefers one level and finds no domain
    /// of it that takes it whole tries each broader level in turn, up to its required one (never
    /// above it). Empty: the preferred level, then the required one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub topology_levels: Vec<String>,
    /// Holding capacity for the gangs that wait longest in line, and starting lower gangs on it
    /// only when they end before it is needed (Slurm's backfill). `None` (the default): off, and
    /// the cycle is what it was without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backfill: Option<Backfill>,
}

/// The backfill policy (`backfill` in the policy file; durations in seconds).
///
/// The first `maxReservations` gangs (in the cycle's order) that cannot be placed now get the
/// earliest time within `window` at which their whole minimum fits, found from when the pods
/// running now are expected to end (each pod's start plus its time limit, rounded up to
/// `resolution`), and the capacity they would use then is held for them: a lower gang may start
/// on held capacity only if its own time limit ends it a step (`resolution`) before then; a gang
/// with no limit never does.
/// Nothing of it is stored: every cycle finds the same holds again from what the cluster shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Backfill {
    /// Whether holds are made (`false`: the section is kept but does nothing).
    pub enabled: bool,
    /// How many waiting gangs get a hold in one cycle, at most [`MAX_RESERVATIONS`].
    pub max_reservations: u32,
    /// How far ahead a start is looked for: a gang whose minimum fits no sooner gets no hold.
    #[serde(with = "secs")]
    pub window: Duration,
    /// Expected ends are rounded up to a multiple of this: the start times tried are at most
    /// `window / resolution`.
    #[serde(with = "secs")]
    pub resolution: Duration,
    /// The time limit of a pod or gang that states none (`kube-gang.io/time-limit`,
    /// `activeDeadlineSeconds`). `None`: such work has no expected end and never backfills.
    #[serde(with = "opt_secs", skip_serializing_if = "Option::is_none")]
    pub default_time_limit: Option<Duration>,
}

/// The most gangs [`Backfill::max_reservations`] may allow: each costs the cycle a few
/// placements of its gang.
pub const MAX_RESERVATIONS: u32 = 100;

/// The most start times one hold may try: `window / resolution` is held to it.
pub const MAX_BACKFILL_STEPS: u64 = 100_000;

impl Default for Backfill {
    fn default() -> Self {
        Backfill {
            enabled: true,
            max_reservations: 10,
            window: Duration::from_secs(24 * 3600),
            resolution: Duration::from_secs(60),
            default_time_limit: None,
        }
    }
}

impl Backfill {
    fn check(&self) -> Result<(), PolicyError> {
        if self.max_reservations > MAX_RESERVATIONS {
            return Err(PolicyError(format!(
                "backfill.maxReservations: {} exceeds the maximum ({MAX_RESERVATIONS})",
                self.max_reservations
            )));
        }
        if self.resolution.is_zero() {
            return Err(PolicyError("backfill.resolution: must be at least 1 second".into()));
        }
        if self.window < self.resolution {
            return Err(PolicyError(format!(
                "backfill.window: {} s is shorter than backfill.resolution ({} s)",
                self.window.as_secs(),
                self.resolution.as_secs()
            )));
        }
        if self.window > crate::read::duration::MAX_TIME_LIMIT {
            return Err(PolicyError(format!(
                "backfill.window: {} s exceeds the one-year maximum ({} s)",
                self.window.as_secs(),
                crate::read::duration::MAX_TIME_LIMIT.as_secs()
            )));
        }
        let steps = self.window.as_secs() / self.resolution.as_secs();
        if steps > MAX_BACKFILL_STEPS {
            return Err(PolicyError(format!(
                "backfill.resolution: {} s divides the {} s window into {steps} steps; at most \
                 {MAX_BACKFILL_STEPS} (raise the resolution or shorten the window)",
                self.resolution.as_secs(),
                self.window.as_secs()
            )));
        }
        if let Some(d) = self.default_time_limit
            && (d.is_zero() || d > crate::read::duration::MAX_TIME_LIMIT)
        {
            return Err(PolicyError(format!(
                "backfill.defaultTimeLimit: {} s is not between 1 s and one year",
                d.as_secs()
            )));
        }
        Ok(())
    }
}

/// Topology levels a policy may list: more than any real hierarchy has.
pub const MAX_TOPOLOGY_LEVELS: usize = 16;

/// kube-scheduler's `PodTopologySpreadArgs`: the spread constraints a pod that sets none of its
/// own is given. kube-scheduler takes their selector from the Services, ReplicaSets,
/// StatefulSets and ReplicationControllers that select the pod; the scheduler reads none of
/// those, so a `DoNotSchedule` default (a filter) is refused by name. `ScheduleAnyway` defaults,
/// `System`'s included, only score in kube-scheduler and never keep a pod off a node: they are
/// accepted, and the cycle (which does not score by spread) is what they leave it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct PodTopologySpread {
    pub defaulting_type: Defaulting,
    pub default_constraints: Vec<DefaultConstraint>,
}

/// `defaultingType`: kube-scheduler's built-in defaults, or `defaultConstraints`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Defaulting {
    /// Spread by hostname (maxSkew 3) and zone (maxSkew 5), `ScheduleAnyway`.
    #[default]
    System,
    List,
}

/// One of `defaultConstraints`: a `TopologySpreadConstraint`, its fields as the pod's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct DefaultConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub when_unsatisfiable: String,
    /// Forbidden (kube-scheduler deduces it per pod); kept to be refused by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_domains: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_affinity_policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_taints_policy: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub match_label_keys: Vec<String>,
}

impl PodTopologySpread {
    /// kube-scheduler's `ValidatePodTopologySpreadArgs`, then what the scheduler cannot do: each
    /// error names its field under `podTopologySpread`.
    fn check(&self) -> Result<(), PolicyError> {
        let at = "podTopologySpread";
        if self.defaulting_type == Defaulting::System && !self.default_constraints.is_empty() {
            return Err(PolicyError(format!(
                "{at}.defaultingType: Invalid value: \"System\": when .defaultConstraints are not empty"
            )));
        }
        for (i, c) in self.default_constraints.iter().enumerate() {
            let at = format!("{at}.defaultConstraints[{i}]");
            if c.max_skew <= 0 {
                return Err(PolicyError(format!(
                    "{at}.maxSkew: Invalid value: {}: not in valid range (0, inf)",
                    c.max_skew
                )));
            }
            if c.topology_key.is_empty() {
                return Err(PolicyError(format!("{at}.topologyKey: Required value: can not be empty")));
            }
            if let Err(e) = crate::read::labels::check_label_key(&c.topology_key) {
                return Err(PolicyError(format!("{at}.topologyKey: {e}")));
            }
            match c.when_unsatisfiable.as_str() {
                "" => {
                    return Err(PolicyError(format!(
                        "{at}.whenUnsatisfiable: Required value: can not be empty"
                    )));
                }
                "ScheduleAnyway" => {}
                "DoNotSchedule" => {
                    return Err(PolicyError(format!(
                        "{at}.whenUnsatisfiable: DoNotSchedule is not supported: kube-scheduler \
                         selects the pods such a default counts by the Services, ReplicaSets, \
                         StatefulSets and ReplicationControllers selecting each pod, which the \
                         scheduler does not read (ScheduleAnyway defaults are accepted; they \
                         never keep a pod off a node)"
                    )));
                }
                other => {
                    return Err(PolicyError(format!(
                        "{at}.whenUnsatisfiable: Unsupported value: {other:?}: supported values: \
                         \"DoNotSchedule\", \"ScheduleAnyway\""
                    )));
                }
            }
            if c.label_selector.is_some() {
                return Err(PolicyError(format!(
                    "{at}.labelSelector: Forbidden: constraint must not define a selector, as they \
                     deduced for each pod"
                )));
            }
            let repeated = self.default_constraints[..i]
                .iter()
                .any(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable);
            if repeated {
                return Err(PolicyError(format!(
                    "podTopologySpread.defaultConstraints[{i}]: Duplicate value: \"{{{}, {}}}\"",
                    c.topology_key, c.when_unsatisfiable
                )));
            }
        }
        Ok(())
    }
}

/// `ProvisioningRequest` class names defined by cluster-autoscaler
/// (`autoscaling.x-k8s.io/v1`, `ProvisioningClassBestEffortAtomicScaleUp`).
pub const CLASS_ATOMIC_SCALE_UP: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
/// Checks (and books) capacity that exists, adds none (`ProvisioningClassCheckCapacity`).
pub const CLASS_CHECK_CAPACITY: &str = "check-capacity.autoscaling.x-k8s.io";

/// The policy for autoscaler-visible gangs: a gang the cycle cannot place, even by preemption,
/// asks for the members that have no room with one `autoscaling.x-k8s.io/v1` ProvisioningRequest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Provisioning {
    /// `spec.provisioningClassName` of the requests written.
    pub class: String,
    /// Whether gangs ask without opting in (`kube-gang.io/provisioning: "true"`); a gang may
    /// always opt out with `"false"`.
    pub all_gangs: bool,
    /// Written as the request's `parameters` (e.g. `ValidUntilSeconds` for the atomic class).
    pub parameters: std::collections::BTreeMap<String, String>,
    /// How long one request may stay unprovisioned before it is deleted and asked again.
    /// `None`: as long as the autoscaler keeps it open.
    #[serde(rename = "maxWaitSeconds", with = "opt_secs")]
    pub max_wait: Option<Duration>,
    /// The wait after a `Failed`, `CapacityRevoked` or `BookingExpired` request before the next
    /// one, doubling each time up to `maxRetryBackoffSeconds`.
    #[serde(rename = "retryBackoffSeconds", with = "secs")]
    pub retry_backoff: Duration,
    #[serde(rename = "maxRetryBackoffSeconds", with = "secs")]
    pub max_retry_backoff: Duration,
    /// Whether the time a gang waits for capacity counts against its timeout (default: it does not).
    pub count_wait_in_timeout: bool,
}

impl Default for Provisioning {
    fn default() -> Self {
        Provisioning {
            class: CLASS_ATOMIC_SCALE_UP.to_string(),
            all_gangs: true,
            parameters: Default::default(),
            max_wait: None,
            retry_backoff: Duration::from_secs(60),
            max_retry_backoff: Duration::from_secs(900),
            count_wait_in_timeout: false,
        }
    }
}

impl Provisioning {
    /// Whether a gang with this opt-in (`kube-gang.io/provisioning`) asks for capacity.
    pub fn applies(&self, gang_opt_in: Option<bool>) -> bool {
        gang_opt_in.unwrap_or(self.all_gangs)
    }

    /// The wait before ask number `failures + 1`, after `failures` failed requests.
    pub fn backoff(&self, failures: u32) -> Duration {
        let doubled = self
            .retry_backoff
            .saturating_mul(1u32.checked_shl(failures.saturating_sub(1)).unwrap_or(u32::MAX));
        doubled.min(self.max_retry_backoff.max(self.retry_backoff))
    }

    /// The rules the ProvisioningRequest CRD's schema holds these fields to (cluster-autoscaler
    /// `apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go`): the class a DNS-1123
    /// subdomain of at most 253 characters, at most 100 parameters of at most 255 characters.
    fn check(&self) -> Result<(), PolicyError> {
        if !crate::read::labels::is_dns_subdomain(&self.class) {
            return Err(PolicyError(format!(
                "provisioning.class: {:?} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)",
                self.class
            )));
        }
        if self.parameters.len() > 100 {
            return Err(PolicyError(format!(
                "provisioning.parameters: at most 100 parameters, got {}",
                self.parameters.len()
            )));
        }
        for (k, v) in &self.parameters {
            if v.chars().count() > 255 {
                return Err(PolicyError(format!("provisioning.parameters.{k}: longer than 255 characters")));
            }
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            scheduler_name: crate::read::labels::SCHEDULER_NAME.to_string(),
            scoring: Scoring::BinPack,
            default_timeout: None,
            timeout_action: TimeoutAction::default(),
            stale_grace_period: Duration::from_secs(60),
            preemption: true,
            provisioning: None,
            pod_topology_spread: None,
            topology_levels: Vec::new(),
            backfill: None,
        }
    }
}

/// A policy document that is not a valid [`Config`]; the message names the field at fault
/// (`timeoutAction: invalid type: string "soon", expected u64`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid scheduling policy: {0}")]
pub struct PolicyError(String);

impl Config {
    /// Reads a policy file's text, the one format `gang-scheduler --config` and
    /// `kubectl gang simulate|status --config` take: YAML (or JSON) holding a mapping with the
    /// fields of [`Config`] in camelCase, durations in seconds. Fields left out keep their
    /// defaults; an empty document is [`Config::default`]. Unknown fields and bad values are
    /// errors naming the field.
    ///
    /// The core reads no files: each binary reads the file and hands over its text; everything
    /// about its content (its syntax included) is here, so the two can never read it apart.
    pub fn from_policy_text(text: &str) -> Result<Config, PolicyError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let doc: Value = serde_norway::from_str(text).map_err(|e| PolicyError(e.to_string()))?;
        Config::from_policy(doc)
    }

    /// Reads a policy document already decoded (see [`Config::from_policy_text`]).
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
        let config: Config =
            serde_json::from_value(Value::Object(fields)).map_err(|e| PolicyError(e.to_string()))?;
        // A gang's own timeout has these bounds; a default of 0 would time every gang that sets
        // none out the moment it starts waiting (leave the field out to wait without a limit).
        if let Some(e) = config.default_timeout.and_then(crate::rules::validate::timeout_error) {
            return Err(PolicyError(format!("defaultTimeout: {e}")));
        }
        if let Some(p) = &config.provisioning {
            p.check()?;
        }
        if config.topology_levels.len() > MAX_TOPOLOGY_LEVELS {
            return Err(PolicyError(format!(
                "topologyLevels: {} levels; at most {MAX_TOPOLOGY_LEVELS}",
                config.topology_levels.len()
            )));
        }
        for (i, level) in config.topology_levels.iter().enumerate() {
            if let Err(e) = crate::read::labels::check_label_key(level) {
                return Err(PolicyError(format!("topologyLevels[{i}]: {e}")));
            }
            if config.topology_levels[..i].contains(level) {
                return Err(PolicyError(format!("topologyLevels[{i}]: Duplicate value: {level:?}")));
            }
        }
        if let Some(p) = &config.pod_topology_spread {
            p.check()?;
        }
        if let Some(b) = &config.backfill {
            b.check()?;
        }
        Ok(config)
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
    pub use crate::read::model::opt_secs::*;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_policy_file_reads_the_same_as_yaml_or_json_and_empty_is_the_default() {
        let yaml = Config::from_policy_text("scoring: spread\ndefaultTimeout: 900\n").unwrap();
        let json = Config::from_policy_text(r#"{"scoring": "spread", "defaultTimeout": 900}"#).unwrap();
        assert_eq!(yaml.scoring, Scoring::Spread);
        assert_eq!(yaml.default_timeout, Some(Duration::from_secs(900)));
        assert_eq!(serde_json::to_value(&yaml).unwrap(), serde_json::to_value(&json).unwrap());
        let empty = Config::from_policy_text(" \n").unwrap();
        assert_eq!(serde_json::to_value(&empty).unwrap(), serde_json::to_value(Config::default()).unwrap());
        let bad = Config::from_policy_text("scoring: [").unwrap_err().to_string();
        assert!(bad.starts_with("invalid scheduling policy: ") && bad.contains(" at line "), "{bad}");
        let field = Config::from_policy_text("scoring: sideways\n").unwrap_err().to_string();
        assert!(field.starts_with("invalid scheduling policy: scoring: unknown variant"), "{field}");
    }

    #[test]
    fn backfill_reads_with_defaults_and_refuses_what_cannot_be_planned_with() {
        let on = Config::from_policy_text("backfill: {}\n").unwrap().backfill.unwrap();
        assert_eq!(on, Backfill::default());
        assert!(on.enabled && on.max_reservations == 10 && on.resolution == Duration::from_secs(60));
        let set = Config::from_policy_text(
            "backfill: {maxReservations: 3, window: 7200, resolution: 300, defaultTimeLimit: 3600}\n",
        )
        .unwrap()
        .backfill
        .unwrap();
        assert_eq!(set.window, Duration::from_secs(7200));
        assert_eq!(set.default_time_limit, Some(Duration::from_secs(3600)));
        for (doc, names) in [
            ("backfill: {maxReservations: 101}", "backfill.maxReservations"),
            ("backfill: {resolution: 0}", "backfill.resolution"),
            ("backfill: {window: 30, resolution: 60}", "backfill.window"),
            ("backfill: {window: 40000000}", "backfill.window"),
            ("backfill: {window: 1000000, resolution: 1}", "backfill.resolution"),
            ("backfill: {defaultTimeLimit: 0}", "backfill.defaultTimeLimit"),
            ("backfill: {windw: 60}", "backfill: unknown field `windw`"),
            ("backfill: {window: soon}", "backfill: invalid type"),
        ] {
            let e = Config::from_policy_text(doc).unwrap_err().to_string();
            assert!(e.contains(names), "{doc}: {e}");
        }
    }

    #[test]
    fn topology_levels_are_label_keys_once_each_and_few() {
        let c = Config::from_policy_text("topologyLevels: [topology.kubernetes.io/zone, example.com/rack]")
            .unwrap();
        assert_eq!(c.topology_levels, ["topology.kubernetes.io/zone", "example.com/rack"]);
        let e = Config::from_policy_text("topologyLevels: [zone, 'bad key/']").unwrap_err().to_string();
        assert!(e.contains("topologyLevels[1]:"), "{e}");
        let e = Config::from_policy_text("topologyLevels: [zone, rack, zone]").unwrap_err().to_string();
        assert!(e.contains("topologyLevels[2]: Duplicate value: \"zone\""), "{e}");
        let many: Vec<String> = (0..17).map(|i| format!("l{i}")).collect();
        let e = Config::from_policy_text(&format!("topologyLevels: [{}]", many.join(", ")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 16"), "{e}");
    }

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

    #[test]
    fn a_zero_or_overlong_default_timeout_is_refused_naming_the_field() {
        // 0 would time out every gang that sets no timeout of its own the moment it waits.
        let zero = Config::from_policy_text("defaultTimeout: 0\n").unwrap_err().to_string();
        assert!(
            zero.starts_with("invalid scheduling policy: defaultTimeout: must be greater than 0"),
            "{zero}"
        );
        let long = Config::from_policy(json!({"defaultTimeout": 31 * 24 * 3600})).unwrap_err().to_string();
        assert!(long.contains("defaultTimeout: ") && long.contains("30-day maximum"), "{long}");
        let one = Config::from_policy(json!({"defaultTimeout": 1})).unwrap();
        assert_eq!(one.default_timeout, Some(Duration::from_secs(1)));
        assert_eq!(Config::from_policy(json!({"defaultTimeout": null})).unwrap().default_timeout, None);
    }

    #[test]
    fn default_spread_constraints_are_held_to_kube_schedulers_rules_and_filters_are_refused() {
        let system = Config::from_policy(json!({"podTopologySpread": {}})).unwrap();
        assert_eq!(system.pod_topology_spread.unwrap().defaulting_type, Defaulting::System);
        let list = Config::from_policy(json!({"podTopologySpread": {"defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"},
                {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
                 "minDomains": 2, "nodeTaintsPolicy": "Honor"}]}}))
        .unwrap()
        .pod_topology_spread
        .unwrap();
        assert_eq!(list.default_constraints.len(), 2);
        assert_eq!(list.default_constraints[1].min_domains, Some(2));
        let err = |doc: Value| Config::from_policy(doc).unwrap_err().to_string();
        let zone = |extra: Value| {
            let mut c = json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"});
            for (k, v) in extra.as_object().unwrap() {
                c[k] = v.clone();
            }
            json!({"podTopologySpread": {"defaultingType": "List", "defaultConstraints": [c]}})
        };
        for (doc, want) in [
            (
                json!({"podTopologySpread": {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                    "whenUnsatisfiable": "ScheduleAnyway"}]}}),
                "podTopologySpread.defaultingType: Invalid value: \"System\": when .defaultConstraints are not empty",
            ),
            (
                zone(json!({"maxSkew": 0})),
                "defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)",
            ),
            (zone(json!({"topologyKey": ""})), "defaultConstraints[0].topologyKey: Required value"),
            (
                zone(json!({"topologyKey": "a/b/c"})),
                "defaultConstraints[0].topologyKey: \"a/b/c\" is not a valid label key",
            ),
            (
                zone(json!({"whenUnsatisfiable": ""})),
                "defaultConstraints[0].whenUnsatisfiable: Required value",
            ),
            (zone(json!({"whenUnsatisfiable": "Never"})), "whenUnsatisfiable: Unsupported value: \"Never\""),
            (
                zone(json!({"whenUnsatisfiable": "DoNotSchedule"})),
                "whenUnsatisfiable: DoNotSchedule is not supported",
            ),
            (
                zone(json!({"labelSelector": {"matchLabels": {"app": "x"}}})),
                "defaultConstraints[0].labelSelector: Forbidden",
            ),
            (
                json!({"podTopologySpread": {"defaultingType": "Sometimes"}}),
                "podTopologySpread: unknown variant `Sometimes`",
            ),
            (
                json!({"podTopologySpread": {"defaultConstraint": []}}),
                "podTopologySpread: unknown field `defaultConstraint`",
            ),
        ] {
            let got = err(doc);
            assert!(got.contains(want), "{got}\nwant: {want}");
        }
        let twice = json!({"podTopologySpread": {"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
            {"maxSkew": 3, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}});
        assert!(err(twice).contains("defaultConstraints[1]: Duplicate value: \"{zone, ScheduleAnyway}\""));
    }

    #[test]
    fn provisioning_is_off_by_default_and_one_field_turns_it_on() {
        assert_eq!(Config::default().provisioning, None);
        let on = Config::from_policy(json!({"provisioning": {}})).unwrap().provisioning.unwrap();
        assert_eq!(on.class, CLASS_ATOMIC_SCALE_UP);
        assert!(on.all_gangs && !on.count_wait_in_timeout);
        let c = Config::from_policy(json!({"provisioning": {"class": CLASS_CHECK_CAPACITY,
            "maxWaitSeconds": 600, "retryBackoffSeconds": 10, "maxRetryBackoffSeconds": 70,
            "allGangs": false, "countWaitInTimeout": true, "parameters": {"ValidUntilSeconds": "3600"}}}))
        .unwrap()
        .provisioning
        .unwrap();
        assert_eq!(c.class, CLASS_CHECK_CAPACITY);
        assert_eq!(c.max_wait, Some(Duration::from_secs(600)));
        assert!(!c.applies(None) && c.applies(Some(true)) && c.count_wait_in_timeout);
        assert_eq!(c.parameters["ValidUntilSeconds"], "3600");
        // 10 s, doubling, capped at 70 s.
        let waits: Vec<u64> = (1..6).map(|n| c.backoff(n).as_secs()).collect();
        assert_eq!(waits, [10, 20, 40, 70, 70]);
        assert_eq!(c.backoff(u32::MAX).as_secs(), 70);
        let bad = Config::from_policy(json!({"provisioning": {"class": "Atomic!"}})).unwrap_err().to_string();
        assert!(bad.contains("provisioning.class: \"Atomic!\" is not a DNS-1123 subdomain"), "{bad}");
        let typo = Config::from_policy(json!({"provisioning": {"maxWait": 5}})).unwrap_err().to_string();
        assert!(typo.contains("provisioning: unknown field `maxWait`"), "{typo}");
        let long = Config::from_policy(json!({"provisioning": {"parameters": {"x": "y".repeat(256)}}}))
            .unwrap_err()
            .to_string();
        assert!(long.contains("provisioning.parameters.x: longer than 255"), "{long}");
    }
}
