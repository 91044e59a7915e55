//! The disruption controller, as far as evictions and preemption depend on it
//! (kube-controller-manager `pkg/controller/disruption`): after any change to a pod, every
//! PodDisruptionBudget of its namespace gets its status computed again from the pods it selects —
//!
//! - `expectedPods`: the pods it selects (integer `minAvailable`/`maxUnavailable`; percentages
//!   are taken of the same count, rounded up, where the real controller reads the owners' scale);
//! - `desiredHealthy`: `minAvailable`, or `expectedPods − maxUnavailable`;
//! - `disruptedPods`: the evictions granted whose pods still exist, are not terminating and were
//!   granted less than 2 minutes ago (`DeletionTimeout`);
//! - `currentHealthy`: selected pods that are Ready, not terminating and not in `disruptedPods`;
//! - `disruptionsAllowed`: `currentHealthy − desiredHealthy`, at least 0 (0 with no pods).
//!
//! So a budget an eviction used up allows a disruption again once the victim's replacement is
//! Ready. Off unless a test turns it on ([`crate::FakeApi::run_disruption_controller`]): tests
//! that write a budget's status by hand keep it.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::store::Store;
use crate::subresources::selects;

/// How long a granted eviction counts its pod as disrupted (the controller's `DeletionTimeout`).
const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| str_at(c, "/type") == "Ready" && str_at(c, "/status") == "True")
}

/// An `IntOrString` of a PDB spec against `expected` pods (percentages rounded up).
fn amount(v: &Value, expected: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            Some((pct * expected + 99) / 100)
        }
        _ => None,
    }
}

/// Computes the status of every budget in `namespace` again; commits those that changed.
pub fn reconcile(s: &mut Store, namespace: &str) {
    let budgets_res = ("/apis/policy/v1".to_string(), "poddisruptionbudgets".to_string());
    let pods_res = ("/api/v1".to_string(), "pods".to_string());
    let now = s.now();
    let budgets: Vec<((String, String), Value)> = s
        .objects
        .get(&budgets_res)
        .into_iter()
        .flat_map(|m| m.iter())
        .filter(|((ns, _), _)| ns == namespace)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, mut pdb) in budgets {
        let pods: Vec<&Value> = s
            .objects
            .get(&pods_res)
            .into_iter()
            .flat_map(|m| m.iter())
            .filter(|((ns, _), p)| {
                ns == namespace && selects(&pdb, p.pointer("/metadata/labels").unwrap_or(&Value::Null))
            })
            .map(|(_, p)| p)
            .collect();
        let expected = pods.len() as i64;
        let spec = pdb.get("spec").cloned().unwrap_or(Value::Null);
        let desired = match (spec.get("minAvailable"), spec.get("maxUnavailable")) {
            (Some(min), _) => amount(min, expected).unwrap_or(0),
            (None, Some(max)) => (expected - amount(max, expected).unwrap_or(0)).max(0),
            (None, None) => expected,
        };
        let granted =
            pdb.pointer("/status/disruptedPods").and_then(Value::as_object).cloned().unwrap_or_default();
        let disrupted: serde_json::Map<String, Value> = granted
            .into_iter()
            .filter(|(name, at)| {
                let live = pods.iter().any(|p| {
                    str_at(p, "/metadata/name") == name && str_at(p, "/metadata/deletionTimestamp").is_empty()
                });
                let recent = at
                    .as_str()
                    .and_then(|t| t.parse::<Timestamp>().ok())
                    .is_some_and(|t| t + DELETION_TIMEOUT > now);
                live && recent
            })
            .collect();
        let healthy = pods
            .iter()
            .filter(|p| {
                str_at(p, "/metadata/deletionTimestamp").is_empty()
                    && !disrupted.contains_key(str_at(p, "/metadata/name"))
                    && ready(p)
            })
            .count() as i64;
        let allowed = if expected == 0 { 0 } else { (healthy - desired).max(0) };
        let generation = pdb.pointer("/metadata/generation").cloned().unwrap_or(json!(1));
        let before = pdb.get("status").cloned().unwrap_or(Value::Null);
        let mut status = before.clone();
        if !status.is_object() {
            status = json!({});
        }
        status["observedGeneration"] = generation;
        status["expectedPods"] = json!(expected);
        status["desiredHealthy"] = json!(desired);
        status["currentHealthy"] = json!(healthy);
        status["disruptionsAllowed"] = json!(allowed);
        if disrupted.is_empty() {
            if let Some(m) = status.as_object_mut() {
                m.remove("disruptedPods");
            }
        } else {
            status["disruptedPods"] = Value::Object(disrupted);
        }
        if status != before {
            pdb["status"] = status;
            s.commit(&budgets_res, key, pdb, "MODIFIED");
        }
    }
}
