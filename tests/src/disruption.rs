//! The disruption controller, as far as evictions and preemption depend on it
//! (kube-controller-manager `pkg/controller/disruption`): after any change to a pod, every
//! PodDisruptionBudget of its namespace gets its status computed again from the pods it selects —
//!
//! - `expectedPods`: for an integer `minAvailable`, the pods it selects; for a percentage
//!   `minAvailable` and for any `maxUnavailable`, the scale of the controllers owning them
//!   (`getExpectedScale`): the sum of `spec.replicas` over the distinct controllers of the selected
//!   pods — a ReplicationController, a ReplicaSet's Deployment (or the ReplicaSet, when no
//!   Deployment controls it), a StatefulSet. Pods no controller owns are left out of the count; a
//!   pod whose controller cannot be found fails the sync, and the budget is set to allow nothing
//!   (`failSafe`: `disruptionsAllowed` 0, condition `DisruptionAllowed` False `SyncFailed`);
//! - `desiredHealthy`: `minAvailable` (a percentage of `expectedPods`, rounded up), or
//!   `expectedPods − maxUnavailable` (the same rounding), at least 0;
//! - `disruptedPods`: the evictions granted whose pods still exist, are not terminating and were
//!   granted less than 2 minutes ago (`DeletionTimeout`);
//! - `currentHealthy`: selected pods that are Ready, not terminating and not in `disruptedPods`;
//! - `disruptionsAllowed`: `currentHealthy − desiredHealthy`, at least 0 (0 when `expectedPods`
//!   is 0); the condition `DisruptionAllowed` is True (`SufficientPods`) when it is above 0, else
//!   False (`InsufficientPods`).
//!
//! The budgets of a namespace are computed again when one of its pods or of the controllers above
//! changes. So a budget an eviction used up allows a disruption again once the victim's replacement is
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

/// The owner reference marked `controller: true`: (apiVersion, kind, name, uid).
fn controller_of(obj: &Value) -> Option<(&str, &str, &str, &str)> {
    let owners = obj.pointer("/metadata/ownerReferences")?.as_array()?;
    let r = owners.iter().find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
    Some((str_at(r, "/apiVersion"), str_at(r, "/kind"), str_at(r, "/name"), str_at(r, "/uid")))
}

/// The stored object a controller reference names, if its UID matches (as the finders check).
fn referenced<'s>(
    s: &'s Store,
    namespace: &str,
    res: (&str, &str),
    name: &str,
    uid: &str,
) -> Option<&'s Value> {
    let obj = s.get(&(res.0.to_string(), res.1.to_string()), &(namespace.to_string(), name.to_string()))?;
    (str_at(obj, "/metadata/uid") == uid).then_some(obj)
}

/// `spec.replicas` (the API server defaults it to 1).
fn replicas(obj: &Value) -> i64 {
    obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)
}

/// The controller a pod's controller reference leads to and its scale: (the controller's UID,
/// `spec.replicas`), as the finders look them up in turn — a ReplicationController; a ReplicaSet's
/// controlling Deployment; a ReplicaSet no Deployment controls; a StatefulSet. `None`: no
/// finder knows it.
fn scale_of(s: &Store, namespace: &str, r: (&str, &str, &str, &str)) -> Option<(String, i64)> {
    let (api_version, kind, name, uid) = r;
    let found = match (api_version, kind) {
        ("v1", "ReplicationController") => {
            referenced(s, namespace, ("/api/v1", "replicationcontrollers"), name, uid)?
        }
        ("apps/v1", "ReplicaSet") => {
            let rs = referenced(s, namespace, ("/apis/apps/v1", "replicasets"), name, uid)?;
            match controller_of(rs) {
                Some(("apps/v1", "Deployment", d, d_uid)) => {
                    referenced(s, namespace, ("/apis/apps/v1", "deployments"), d, d_uid)?
                }
                // Controlled by a Deployment of another version: no finder takes it.
                Some((_, "Deployment", _, _)) => return None,
                _ => rs,
            }
        }
        ("apps/v1", "StatefulSet") => referenced(s, namespace, ("/apis/apps/v1", "statefulsets"), name, uid)?,
        _ => return None,
    };
    Some((str_at(found, "/metadata/uid").to_string(), replicas(found)))
}

/// `expectedPods` from the selected pods' controllers (`getExpectedScale`): the sum of each
/// distinct controller's scale; pods without a controller are not counted.
fn expected_scale(s: &Store, namespace: &str, pods: &[&Value]) -> Result<i64, String> {
    let mut scales: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
    for pod in pods {
        let Some(r) = controller_of(pod) else { continue };
        if scales.contains_key(r.3) {
            continue;
        }
        let Some((uid, scale)) = scale_of(s, namespace, r) else {
            return Err(format!("found no controllers for pod {:?}", str_at(pod, "/metadata/name")));
        };
        scales.insert(uid, scale);
    }
    Ok(scales.values().sum())
}

/// (`expectedPods`, `desiredHealthy`) of a budget over the pods it selects.
fn expected_and_desired(
    s: &Store,
    namespace: &str,
    spec: &Value,
    pods: &[&Value],
) -> Result<(i64, i64), String> {
    match (spec.get("minAvailable"), spec.get("maxUnavailable")) {
        (_, Some(max)) => {
            let expected = expected_scale(s, namespace, pods)?;
            let max = amount(max, expected).ok_or_else(|| format!("invalid maxUnavailable {max}"))?;
            Ok((expected, (expected - max).max(0)))
        }
        (Some(Value::String(_)), None) => {
            let expected = expected_scale(s, namespace, pods)?;
            let min = spec.get("minAvailable").unwrap_or(&Value::Null);
            Ok((expected, amount(min, expected).ok_or_else(|| format!("invalid minAvailable {min}"))?))
        }
        (Some(min), None) => Ok((pods.len() as i64, amount(min, 0).unwrap_or(0))),
        (None, None) => Ok((pods.len() as i64, 0)),
    }
}

/// Sets the `DisruptionAllowed` condition, keeping its transition time when its status stays.
fn set_condition(
    status: &mut Value,
    allowed: bool,
    reason: &str,
    message: &str,
    generation: &Value,
    now: &str,
) {
    let mut conditions: Vec<Value> =
        status.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let state = if allowed { "True" } else { "False" };
    let at = conditions.iter().position(|c| str_at(c, "/type") == "DisruptionAllowed");
    let since = at
        .map(|i| &conditions[i])
        .filter(|c| str_at(c, "/status") == state)
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(now));
    let condition = json!({"type": "DisruptionAllowed", "status": state, "reason": reason, "message": message,
                           "observedGeneration": generation, "lastTransitionTime": since});
    match at {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    status["conditions"] = Value::Array(conditions);
}

/// Computes the status of every budget in `namespace` again; commits those that changed.
pub fn reconcile(s: &mut Store, namespace: &str) {
    let budgets_res = ("/apis/policy/v1".to_string(), "poddisruptionbudgets".to_string());
    let pods_res = ("/api/v1".to_string(), "pods".to_string());
    let now = s.now();
    let now_text = crate::times::format_time(now);
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
        let spec = pdb.get("spec").cloned().unwrap_or(Value::Null);
        let generation = pdb.pointer("/metadata/generation").cloned().unwrap_or(json!(1));
        let before = pdb.get("status").cloned().unwrap_or(Value::Null);
        let mut status = before.clone();
        if !status.is_object() {
            status = json!({});
        }
        let (expected, desired) = match expected_and_desired(s, namespace, &spec, &pods) {
            Ok(counts) => counts,
            Err(message) => {
                // failSafe: nothing allowed until the controller can compute the budget again.
                status["disruptionsAllowed"] = json!(0);
                let observed = status.get("observedGeneration").cloned().unwrap_or(json!(0));
                set_condition(&mut status, false, "SyncFailed", &message, &observed, &now_text);
                if status != before {
                    pdb["status"] = status;
                    s.commit(&budgets_res, key, pdb, "MODIFIED");
                }
                continue;
            }
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
        let allowed = if expected <= 0 { 0 } else { (healthy - desired).max(0) };
        status["observedGeneration"] = generation.clone();
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
        let reason = if allowed > 0 { "SufficientPods" } else { "InsufficientPods" };
        set_condition(&mut status, allowed > 0, reason, "", &generation, &now_text);
        if status != before {
            pdb["status"] = status;
            s.commit(&budgets_res, key, pdb, "MODIFIED");
        }
    }
}
