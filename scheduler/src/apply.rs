//! Applying a plan: the exact API requests (method, path, body) that bind, evict, nominate, and
//! report — built as plain data here, sent by the run loop — so tests assert on what the API
//! server would receive without a cluster.
//!
//! Status writes are left out when the object already says the same ([`Current`]): a write
//! comes back as a watch event, which starts a cycle, which would write again — a loop that
//! would keep the API server busy with every pending pod of every waiting gang.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use scheduler_core::model::{GangKey, Pod, Snapshot, Time};
use scheduler_core::plan::{Binding, Eviction, EvictionReason, Nomination, Outcome};
use scheduler_core::{Plan, Reason};
use serde_json::{Value, json};

/// One API request.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub method: &'static str,
    pub path: String,
    /// `Content-Type` of the body.
    pub content_type: &'static str,
    pub body: Value,
    /// For a status write: the object it patches, as the index files it.
    pub target: Option<Target>,
}

/// An object the index holds: its resource (`v1/Pod`, [`GANG`]), namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub resource: &'static str,
    pub namespace: String,
    pub name: String,
}

/// The index's resource key of pods.
pub const POD: &str = "v1/Pod";
/// The index's resource key of kube-gang's own `Gang`.
pub const GANG: &str = "kube-gang.io/v1alpha1/Gang";

fn target(resource: &'static str, namespace: &str, name: &str) -> Option<Target> {
    Some(Target { resource, namespace: namespace.to_string(), name: name.to_string() })
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// `POST pods/{name}/binding`, carrying the pod's UID so a recreated pod of the same name is not bound.
pub fn binding(b: &Binding) -> Request {
    Request {
        method: "POST",
        path: format!("/api/v1/namespaces/{}/pods/{}/binding", b.pod.namespace, b.pod.name),
        content_type: JSON,
        body: json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": b.pod.name, "namespace": b.pod.namespace, "uid": b.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": b.node},
        }),
        target: None,
    }
}

/// `POST pods/{name}/eviction` through the Eviction API (PodDisruptionBudgets apply), with a UID
/// precondition.
pub fn eviction(e: &Eviction) -> Request {
    Request {
        method: "POST",
        path: format!("/api/v1/namespaces/{}/pods/{}/eviction", e.pod.namespace, e.pod.name),
        content_type: JSON,
        body: json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": e.pod.name, "namespace": e.pod.namespace},
            "deleteOptions": {"preconditions": {"uid": e.uid}},
        }),
        target: None,
    }
}

/// `PATCH pods/{name}/status` with `status.nominatedNodeName`.
pub fn nomination(n: &Nomination) -> Request {
    Request {
        method: "PATCH",
        path: format!("/api/v1/namespaces/{}/pods/{}/status", n.pod.namespace, n.pod.name),
        content_type: MERGE,
        body: json!({"status": {"nominatedNodeName": n.node}}),
        target: target(POD, &n.pod.namespace, &n.pod.name),
    }
}

/// The objects as the watches last reported them, so that writes which would change nothing are
/// left out.
pub trait Current {
    /// The raw pod, if known.
    fn pod(&self, namespace: &str, name: &str) -> Option<&Value>;
    /// The raw `Gang` object, if known.
    fn gang(&self, namespace: &str, name: &str) -> Option<&Value>;
}

/// Nothing known: every write is sent (and no `Gang` status, for want of the object).
impl Current for () {
    fn pod(&self, _: &str, _: &str) -> Option<&Value> {
        None
    }
    fn gang(&self, _: &str, _: &str) -> Option<&Value> {
        None
    }
}

/// The condition of `type_` in an object's `status.conditions`.
fn condition<'a>(obj: Option<&'a Value>, type_: &str) -> Option<&'a Value> {
    obj?.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// `PATCH pods/{name}/status`: `PodScheduled=False` with the gang's reason and message, unless
/// the pod (`current`) already says exactly that. `lastTransitionTime` stays while the status
/// stays `False`.
pub fn pod_scheduled_false(
    namespace: &str,
    name: &str,
    outcome: &Outcome,
    current: Option<&Value>,
    now: Time,
) -> Option<Request> {
    let reason = if outcome.reason == Reason::Unschedulable {
        "Unschedulable".to_string()
    } else {
        format!("Gang{}", outcome.reason)
    };
    let message = format!("gang {}: {}", outcome.gang, outcome.message);
    let was = condition(current, "PodScheduled").filter(|c| c["status"] == "False");
    if was.is_some_and(|c| c["reason"] == reason.as_str() && c["message"] == message.as_str()) {
        return None;
    }
    let transition =
        was.and_then(|c| c.get("lastTransitionTime").cloned()).unwrap_or_else(|| json!(now.to_string()));
    Some(Request {
        method: "PATCH",
        path: format!("/api/v1/namespaces/{namespace}/pods/{name}/status"),
        content_type: STRATEGIC,
        body: json!({"status": {"conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": transition,
        }]}}),
        target: target(POD, namespace, name),
    })
}

/// `PATCH gangs/{name}/status` (merge patch): phase, counts, the `Scheduled` condition, and the
/// scheduler state that must survive a restart. `previous` is the object's current status.
pub fn gang_status(
    outcome: &Outcome,
    generation: Option<i64>,
    previous: Option<&Value>,
    now: Time,
) -> Request {
    let ready = outcome.reason.is_satisfied();
    let status = if ready { "True" } else { "False" };
    // lastTransitionTime moves only when the condition's status changes.
    let transition = previous
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Scheduled")))
        .filter(|c| c.get("status").and_then(Value::as_str) == Some(status))
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| Value::String(now.to_string()));
    let st = &outcome.state;
    let time = |t: Option<Time>| t.map_or(Value::Null, |t| Value::String(t.to_string()));
    let c = outcome.counts;
    Request {
        method: "PATCH",
        path: format!(
            "/apis/{}/{}/namespaces/{}/gangs/{}/status",
            scheduler_core::GROUP,
            scheduler_core::VERSION,
            outcome.gang.namespace,
            outcome.gang.name
        ),
        content_type: MERGE,
        body: json!({"status": {
            "phase": outcome.phase.as_str(),
            "members": c.members,
            "bound": c.bound,
            "running": c.running,
            "succeeded": c.succeeded,
            "failed": c.failed,
            "observedGeneration": generation,
            "conditions": [{
                "type": "Scheduled",
                "status": status,
                "reason": outcome.reason.as_str(),
                "message": outcome.message,
                "lastTransitionTime": transition,
                "observedGeneration": generation,
            }],
            "waitingSince": time(st.waiting_since),
            "degradedSince": time(st.degraded_since),
            "timeouts": st.timeouts,
            "backoffUntil": time(st.backoff_until),
            "wasSatisfied": st.was_satisfied,
            "gaveUp": st.failed,
        }}),
        target: target(GANG, &outcome.gang.namespace, &outcome.gang.name),
    }
}

/// `POST events` (events.k8s.io/v1) about a pod or gang.
#[allow(clippy::too_many_arguments)]
pub fn event(
    namespace: &str,
    kind: &str,
    api_version: &str,
    name: &str,
    uid: &str,
    type_: &str,
    reason: &str,
    note: &str,
    now: Time,
    controller: &str,
) -> Request {
    let micro = now.to_string();
    Request {
        method: "POST",
        path: format!("/apis/events.k8s.io/v1/namespaces/{namespace}/events"),
        content_type: JSON,
        body: json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"generateName": format!("{name}."), "namespace": namespace},
            "eventTime": micro,
            "reportingController": controller,
            "reportingInstance": controller,
            "action": "Scheduling",
            "reason": reason,
            "type": type_,
            "note": truncate(note, 1024),
            "regarding": {"apiVersion": api_version, "kind": kind, "name": name, "namespace": namespace, "uid": uid},
        }),
        target: None,
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Remembers which events were sent, so a gang stuck for an hour produces one event per reason and
/// message change (or per `every`), not one per cycle.
#[derive(Debug, Default)]
pub struct EventLimiter {
    last: BTreeMap<(GangKey, String), (String, Time)>,
}

impl EventLimiter {
    /// Forgets the gangs `still` says are gone, so the limiter does not grow with every gang
    /// ever seen.
    pub fn keep(&mut self, still: impl Fn(&GangKey) -> bool) {
        self.last.retain(|(g, _), _| still(g));
    }

    /// True when an event with `reason` and `message` for `gang` should be sent now.
    pub fn allow(&mut self, gang: &GangKey, reason: &str, message: &str, now: Time, every: Duration) -> bool {
        let key = (gang.clone(), reason.to_string());
        match self.last.get(&key) {
            Some((m, at)) if m == message && now.since(*at) < every => false,
            _ => {
                self.last.insert(key, (message.to_string(), now));
                true
            }
        }
    }
}

/// A status write made conditional on the object being as the index last saw it (its
/// `resourceVersion`): a write computed from an older view — still queued when the pod was bound,
/// say — is refused with a 409 instead of overwriting what happened since.
fn precondition(mut r: Request, current: Option<&Value>) -> Request {
    if let Some(rv) = current.and_then(|o| o.pointer("/metadata/resourceVersion")).filter(|v| v.is_string())
        && let Some(body) = r.body.as_object_mut()
    {
        body.insert("metadata".into(), json!({"resourceVersion": rv}));
    }
    r
}

/// Whether the status a merge patch would write is already there: every field of the patch
/// equals the current one (a `null` in the patch equals an absent field).
fn already(status: &Value, current: Option<&Value>) -> bool {
    let (Some(patch), Some(current)) = (status.as_object(), current) else { return false };
    patch.iter().all(|(k, v)| current.get(k).unwrap_or(&Value::Null) == v)
}

/// Every request that applies `plan`, in the order they should be sent: bindings first (the
/// expensive part, bounded concurrency), then evictions, nominations, status, events. Writes
/// that would change nothing, as `current` tells, are left out.
pub fn requests(
    plan: &Plan,
    snapshot: &Snapshot,
    current: &impl Current,
    limiter: &mut EventLimiter,
    now: Time,
) -> Vec<Request> {
    const CONTROLLER: &str = "kube-gang.io/gang-scheduler";
    let mut out: Vec<Request> = plan.bindings.iter().map(binding).collect();
    out.extend(plan.evictions.iter().map(eviction));
    for n in &plan.nominations {
        let nominated =
            current.pod(&n.pod.namespace, &n.pod.name).and_then(|p| p.pointer("/status/nominatedNodeName"));
        if nominated.and_then(Value::as_str) != Some(n.node.as_str()) {
            out.push(precondition(nomination(n), current.pod(&n.pod.namespace, &n.pod.name)));
        }
    }
    // Each gang's members, in one pass over the pods (not one per gang).
    let mut members: HashMap<&GangKey, Vec<&Pod>> = HashMap::new();
    for p in &snapshot.pods {
        if let Some(m) = &p.gang {
            members.entry(&m.gang).or_default().push(p);
        }
    }
    let binding_now: HashSet<&scheduler_core::model::PodKey> = plan.bindings.iter().map(|b| &b.pod).collect();
    for o in &plan.outcomes {
        let gang = snapshot.gangs.binary_search_by(|g| g.key.cmp(&o.gang)).ok().map(|i| &snapshot.gangs[i]);
        let of_gang = members.get(&o.gang).map_or(&[][..], Vec::as_slice);
        // Only our own Gang objects get a status; other dialects' objects belong to their controllers.
        if gang.is_some_and(|g| g.source.dialect == scheduler_core::model::Dialect::KubeGang)
            && let Some(obj) = current.gang(&o.gang.namespace, &o.gang.name)
        {
            let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64);
            let previous = obj.get("status");
            let r = gang_status(o, generation, previous, now);
            if !already(&r.body["status"], previous) {
                out.push(precondition(r, Some(obj)));
            }
        }
        if !o.reason.is_satisfied() {
            for p in of_gang.iter().filter(|p| p.is_pending() && !binding_now.contains(&p.key)) {
                let pod = current.pod(&p.key.namespace, &p.key.name);
                let write = pod_scheduled_false(&p.key.namespace, &p.key.name, o, pod, now);
                out.extend(write.map(|w| precondition(w, pod)));
            }
        }
        let (type_, reason) = match o.reason {
            Reason::Scheduled => ("Normal", "Scheduled"),
            Reason::Unschedulable | Reason::TopologyUnsatisfiable => ("Warning", "FailedScheduling"),
            Reason::Preempting => ("Normal", "Preempting"),
            Reason::TimedOut => ("Warning", "GangTimedOut"),
            Reason::Stale => ("Warning", "StaleGangEvicted"),
            _ => continue,
        };
        if !limiter.allow(&o.gang, reason, &o.message, now, Duration::from_secs(300)) {
            continue;
        }
        // Events are about the pods users look at: the first member (by name) carries them.
        if let Some(p) = of_gang.iter().min_by(|a, b| a.key.cmp(&b.key)) {
            out.push(event(
                &p.key.namespace,
                "Pod",
                "v1",
                &p.key.name,
                &p.uid,
                type_,
                reason,
                &o.message,
                now,
                CONTROLLER,
            ));
        }
    }
    limiter.keep(|g| plan.outcome(g).is_some());
    for e in &plan.evictions {
        if e.reason == EvictionReason::Preempted {
            let note = format!(
                "preempted by gang {}",
                e.preemptor.as_ref().map_or_else(|| "?".to_string(), ToString::to_string)
            );
            out.push(event(
                &e.pod.namespace,
                "Pod",
                "v1",
                &e.pod.name,
                &e.uid,
                "Normal",
                "Preempted",
                &note,
                now,
                CONTROLLER,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_core::model::{GangState, ObjectKey};
    use scheduler_core::plan::{Counts, Phase};

    #[test]
    fn resource_keys_match_the_watched_kinds() {
        // `run::resources()` watches exactly the core's `READ` list.
        let keys: Vec<String> = scheduler_core::cluster::READ
            .iter()
            .map(|k| match k.group {
                "" => format!("{}/{}", k.version, k.kind),
                g => format!("{g}/{}/{}", k.version, k.kind),
            })
            .collect();
        assert!(keys.iter().any(|k| k == POD) && keys.iter().any(|k| k == GANG), "{keys:?}");
    }

    #[test]
    fn binding_carries_the_uid_and_the_node() {
        let r =
            binding(&Binding { pod: ObjectKey::new("ml", "w-0"), uid: "u1".into(), node: "gpu-3".into() });
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/api/v1/namespaces/ml/pods/w-0/binding");
        assert_eq!(r.body["metadata"]["uid"], "u1");
        assert_eq!(r.body["target"]["name"], "gpu-3");
    }

    #[test]
    fn gang_status_keeps_transition_time_while_status_is_unchanged() {
        let o = Outcome {
            gang: ObjectKey::new("ml", "g"),
            reason: Reason::Unschedulable,
            phase: Phase::Pending,
            message: "needs 4 pods".into(),
            counts: Counts { members: 4, ..Counts::default() },
            state: GangState { waiting_since: Some(Time::from_secs(100)), ..GangState::default() },
        };
        let first = gang_status(&o, Some(3), None, Time::from_secs(100));
        assert_eq!(first.path, "/apis/kube-gang.io/v1alpha1/namespaces/ml/gangs/g/status");
        assert_eq!(first.body["status"]["observedGeneration"], 3);
        assert_eq!(first.body["status"]["waitingSince"], "1970-01-01T00:01:40Z");
        let later = gang_status(&o, Some(3), Some(&first.body["status"]), Time::from_secs(500));
        assert_eq!(later.body["status"]["conditions"][0]["lastTransitionTime"], "1970-01-01T00:01:40Z");
    }

    #[test]
    fn events_are_rate_limited_per_reason_and_message() {
        let mut l = EventLimiter::default();
        let g = ObjectKey::new("ml", "g");
        let every = Duration::from_secs(300);
        assert!(l.allow(&g, "FailedScheduling", "a", Time::from_secs(0), every));
        assert!(!l.allow(&g, "FailedScheduling", "a", Time::from_secs(10), every));
        assert!(l.allow(&g, "FailedScheduling", "b", Time::from_secs(20), every), "a new message is news");
        assert!(l.allow(&g, "FailedScheduling", "b", Time::from_secs(400), every));
    }
}
