//! The scheduling policy file (`--config`): YAML with the fields of `scheduler_core::Config`.
//! Its text is read by the core (`Config::from_policy_text`, which `kubectl gang simulate` and
//! `kubectl gang status` call too); this module reads the file.

use std::path::Path;

use anyhow::Context;
use scheduler_core::Config;

/// Reads the policy from `path` (defaults when `None`); `--scheduler-name` wins over the file.
pub fn load(path: Option<&Path>, scheduler_name: &str) -> anyhow::Result<Config> {
    let mut config = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            parse(&text).with_context(|| format!("in {}", p.display()))?
        }
        None => Config::default(),
    };
    config.scheduler_name = scheduler_name.to_string();
    Ok(config)
}

/// Parses a policy document (the core's reader, which `kubectl gang` uses too).
pub fn parse(text: &str) -> anyhow::Result<Config> {
    Ok(Config::from_policy_text(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_core::config::{Scoring, TimeoutAction};
    use std::time::Duration;

    #[test]
    fn reads_every_field_and_rejects_unknown_ones() {
        let c = parse(
            "scoring: spread\ndefaultTimeout: 900\ntimeoutAction: {action: fail}\nstaleGracePeriod: 30\npreemption: false\n",
        )
        .unwrap();
        assert_eq!(c.scoring, Scoring::Spread);
        assert_eq!(c.default_timeout, Some(Duration::from_secs(900)));
        assert_eq!(c.timeout_action, TimeoutAction::Fail);
        assert_eq!(c.stale_grace_period, Duration::from_secs(30));
        assert!(!c.preemption);
        let err = parse("scorng: spread\n").unwrap_err().to_string();
        assert!(err.contains("scorng"), "{err}");
        assert!(parse("scoring: sideways\n").is_err());
        assert!(parse("scoring: [\n").unwrap_err().to_string().contains("invalid scheduling policy"));
        assert_eq!(parse("").unwrap(), Config::default());
    }
}
