//! The policy file's keys, as its reader accepts them (`reference.rs`, `help.rs`).

use std::collections::BTreeSet;

/// The keys `Config::from_policy_text` accepts, asked of the reader itself: an unknown key's error
/// lists the expected ones (serde's `deny_unknown_fields`), at the top and under `provisioning`
/// and `backfill`;
/// `timeoutAction`'s keys are the ones a document using them all is read with.
pub fn policy_keys() -> BTreeSet<String> {
    use scheduler_core::Config;
    let expected = |doc: &str| -> Vec<String> {
        let e = Config::from_policy_text(doc).unwrap_err().to_string();
        let list = &e[e.find("expected one of").unwrap_or_else(|| panic!("{e}"))..];
        list.split('`').skip(1).step_by(2).map(String::from).collect()
    };
    let mut keys: BTreeSet<String> = expected("zzz: 1\n").into_iter().collect();
    keys.extend(expected("provisioning: {zzz: 1}\n").into_iter().map(|k| format!("provisioning.{k}")));
    keys.extend(expected("backfill: {zzz: 1}\n").into_iter().map(|k| format!("backfill.{k}")));
    let c = Config::from_policy_text("timeoutAction: {action: retry, initialBackoff: 7, maxBackoff: 70}\n")
        .unwrap();
    assert_eq!(
        c.timeout_action,
        scheduler_core::config::TimeoutAction::Retry {
            initial_backoff: std::time::Duration::from_secs(7),
            max_backoff: std::time::Duration::from_secs(70)
        }
    );
    keys.extend(
        ["timeoutAction.action", "timeoutAction.initialBackoff", "timeoutAction.maxBackoff"]
            .map(String::from),
    );
    keys
}
