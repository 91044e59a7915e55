//! The synchronous index the watches feed: the watched objects in the core's [`Live`] view (a
//! snapshot patched object by object, so a cycle costs what changed, not what the cluster holds),
//! plus what this scheduler knows that the watch does not say yet, kept as a core
//! [`Overlay`] that `Live` lays over its snapshot at each refresh (the index never edits the
//! core's converted objects, and so never has to undo an edit):
//!
//! - bindings sent but not yet seen in the watch (so the next cycle cannot double-book a node);
//! - the gang state the last applied plan left each gang (when it started waiting, when it fell
//!   below its minimum, its timeouts and backoff) and its `NonStrict` reservations, handed to the
//!   next cycle. A `Gang` object carries its state in its status too, which is what a new leader
//!   starts from; gangs of the other dialects start afresh after a restart or a change of leader
//!   (their timeout and grace period count from then).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use scheduler_core::cluster::{Live, Overlay, Problem};
use scheduler_core::model::{PodKey, Snapshot};
use scheduler_core::object::at;
use scheduler_core::plan::{Binding, Plan};

use crate::apply::{StatusWrite, Target};
use serde_json::Value;

/// The gate a pod whose binding the API server refused is shown with (see [`Index::refuse`]).
pub const REFUSED_GATE: &str = "kube-gang.io/binding-refused";
/// The gate a pod whose binding the API server throttled is shown with (see [`Index::hold`]).
pub const THROTTLED_GATE: &str = "kube-gang.io/binding-throttled";
/// From this many objects, a list is loaded in bulk (see [`Index::replace`]).
const BULK: usize = 1_024;
const REFUSED_FIRST: Duration = Duration::from_secs(5);
const REFUSED_MAX: Duration = Duration::from_secs(300);

/// Cluster state as the scheduler knows it.
#[derive(Debug, Default)]
pub struct Index {
    live: Live,
    /// Resource (e.g. `v1/Pod`) → the (namespace, name) of each object held. A hash set: a bulk
    /// load of 140,000 pods into an ordered set was string comparisons by the million.
    keys: BTreeMap<String, HashSet<(String, String)>>,
    /// What the watch does not say yet — bindings sent, gang state carried, reservations — laid
    /// over the core's snapshot at each refresh (the core's objects are never edited).
    overlay: Overlay,
    /// When each assumed binding was sent (for [`Index::expire`]).
    sent: BTreeMap<PodKey, Instant>,
    /// Pods whose binding the API server refused: (refusals so far, held back until).
    refusals: BTreeMap<PodKey, (u32, Instant)>,
    /// Objects with a status write applied ahead of the watch ([`Index::wrote`]): the version
    /// the API last reported, to go back to if the write does not happen.
    before: HashMap<(String, String, String), Value>,
}

fn key_of(obj: &Value) -> (String, String) {
    let s = |p: &str| at(obj, p).and_then(Value::as_str).unwrap_or("").to_string();
    (s("/metadata/namespace"), s("/metadata/name"))
}

/// Whether the object names a node (`spec.nodeName`): a bound pod.
fn has_node(obj: &Value) -> bool {
    at(obj, "/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty())
}

/// `v1/Pod` → (`v1`, `Pod`); `kube-gang.io/v1alpha1/Gang` → (`kube-gang.io/v1alpha1`, `Gang`).
fn split(resource: &str) -> (&str, &str) {
    resource.rsplit_once('/').unwrap_or(("", resource))
}

impl Index {
    pub fn new() -> Self {
        Index::default()
    }

    /// A watch `Apply` event (added or modified) for `resource`.
    pub fn apply(&mut self, resource: &str, obj: Value) {
        let (ns, name) = key_of(&obj);
        self.before.remove(&(resource.to_string(), ns, name));
        self.put(resource, obj);
    }

    fn put(&mut self, resource: &str, obj: Value) {
        if has_node(&obj)
            && let Some(p) = pod_key(&obj)
        {
            self.settled(&p);
        }
        let key = key_of(&obj);
        // Objects the core cannot file are reported with the snapshot's problems, not here.
        if self.live.push(obj).is_ok() {
            self.keys.entry(resource.to_string()).or_default().insert(key);
        }
    }

    /// A pod bound or gone: it owes nothing to earlier refusals.
    fn settled(&mut self, pod: &PodKey) {
        self.unassume(pod);
        self.refusals.remove(pod);
        self.overlay.held_back.remove(pod);
    }

    fn unassume(&mut self, pod: &PodKey) {
        self.overlay.assumed.remove(pod);
        self.sent.remove(pod);
    }

    /// A watch `Delete` event for `resource`.
    pub fn delete(&mut self, resource: &str, obj: &Value) {
        if let Some(pod) = pod_key(obj) {
            self.settled(&pod);
        }
        let (ns, name) = key_of(obj);
        self.before.remove(&(resource.to_string(), ns.clone(), name.clone()));
        self.forget_object(resource, &(ns, name));
    }

    fn forget_object(&mut self, resource: &str, (ns, name): &(String, String)) {
        let (api_version, kind) = split(resource);
        self.live.remove(api_version, kind, ns, name);
        if let Some(keys) = self.keys.get_mut(resource) {
            keys.remove(&(ns.clone(), name.clone()));
        }
    }

    /// A completed (re-)list of `resource` replaces what the index held for it: objects deleted
    /// while the watch was down (410 Gone, a dropped connection) disappear here. A large list
    /// (the initial one of a big cluster) is loaded in bulk: the core assembles its snapshot once,
    /// converting pods on all cores, instead of patching it object by object.
    pub fn replace(&mut self, resource: &str, objects: Vec<Value>) {
        let fresh: Vec<(String, String)> = objects.iter().map(key_of).collect();
        let held = self.keys.get(resource).filter(|k| !k.is_empty());
        let mut gone: Vec<(String, String)> = held
            .map(|k| {
                let fresh: HashSet<&(String, String)> = fresh.iter().collect();
                k.iter().filter(|key| !fresh.contains(key)).cloned().collect()
            })
            .unwrap_or_default();
        // Forgotten in name order, whatever the set's order.
        gone.sort_unstable();
        for key in &gone {
            if split(resource).1 == "Pod" {
                self.settled(&PodKey::new(&key.0, &key.1));
            }
            self.forget_object(resource, key);
        }
        if objects.len() < BULK {
            for o in objects {
                self.apply(resource, o);
            }
            return;
        }
        // What the scheduler knows ahead of the watch is dropped for the objects listed; with
        // nothing held ahead (the initial list), nothing is looked up per object.
        if !self.before.is_empty() {
            for (ns, name) in &fresh {
                self.before.remove(&(resource.to_string(), ns.clone(), name.clone()));
            }
        }
        if !(self.sent.is_empty() && self.refusals.is_empty() && self.overlay.held_back.is_empty()) {
            for o in &objects {
                if has_node(o)
                    && let Some(p) = pod_key(o)
                {
                    self.settled(&p);
                }
            }
        }
        self.keys.entry(resource.to_string()).or_default().extend(fresh);
        // Handed over whole (not copied), and objects the core cannot file are reported with the
        // snapshot's problems.
        let mut list = serde_json::Map::new();
        list.insert("apiVersion".into(), Value::String("v1".into()));
        list.insert("kind".into(), Value::String("List".into()));
        list.insert("items".into(), Value::Array(objects));
        let _ = self.live.push(Value::Object(list));
    }

    /// How many objects of `resource` are held.
    pub fn count(&self, resource: &str) -> usize {
        self.keys.get(resource).map_or(0, HashSet::len)
    }

    /// The raw object, if held.
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<&Value> {
        let (api_version, kind) = split(resource);
        self.live.get(api_version, kind, namespace, name)
    }

    /// Records a binding sent to the API: the next cycle sees the node as used.
    pub fn assume(&mut self, b: &Binding) {
        self.overlay.assumed.insert(b.pod.clone(), b.node.clone());
        self.sent.insert(b.pod.clone(), Instant::now());
    }

    /// The API server answered the binding of `pod` with success: the assumption holds until the
    /// watch shows the pod bound or gone, however late (kube-scheduler's assumed pods never
    /// expire either once bound — `durationToExpireAssumedPod = 0`, kubernetes#106361: expiring
    /// them raced with slow watches). Only bindings whose outcome is unknown expire.
    pub fn made(&mut self, pod: &PodKey) {
        self.sent.remove(pod);
    }

    /// Drops assumptions older than `ttl` that the watch never confirmed (a binding whose outcome
    /// could not be learned and that did not happen): their pods are placed again.
    pub fn expire(&mut self, ttl: Duration) -> usize {
        let old: Vec<PodKey> =
            self.sent.iter().filter(|(_, at)| at.elapsed() >= ttl).map(|(p, _)| p.clone()).collect();
        for pod in &old {
            self.unassume(pod);
        }
        old.len()
    }

    /// Forgets an assumed binding (it failed, or was not sent).
    pub fn forget(&mut self, pod: &PodKey) {
        self.unassume(pod);
    }

    /// The API server refused to bind `pod`: it is held back from placement as if gated by
    /// [`REFUSED_GATE`] — 5 s after the first refusal, twice as long after each next, up to
    /// 5 minutes — so its gang's all-or-nothing step fails as when a member does not fit: a gang
    /// with no member bound waits; a half-bound one is completed or, after its grace period,
    /// released. Never a retry storm against a pod the API server will not bind.
    pub fn refuse(&mut self, pod: &PodKey) {
        self.unassume(pod);
        let now = Instant::now();
        let (n, until) = self.refusals.entry(pod.clone()).or_insert((0, now));
        *n = n.saturating_add(1);
        let factor = 1u32.checked_shl(n.saturating_sub(1).min(10)).unwrap_or(u32::MAX);
        *until = now + REFUSED_FIRST.saturating_mul(factor).min(REFUSED_MAX);
        self.overlay.held_back.insert(pod.clone(), REFUSED_GATE.to_string());
    }

    /// The API server throttled the binding of `pod` (429): it is held back as if gated by
    /// [`THROTTLED_GATE`] for `wait` (the server's `Retry-After`) and no longer — not a refusal,
    /// and not counted as one.
    pub fn hold(&mut self, pod: &PodKey, wait: Duration) {
        self.unassume(pod);
        let until = Instant::now() + wait;
        let (_, at) = self.refusals.entry(pod.clone()).or_insert((0, until));
        *at = (*at).max(until);
        self.overlay.held_back.entry(pod.clone()).or_insert_with(|| THROTTLED_GATE.to_string());
    }

    /// Records a status write about to be sent, as if the watch had already reported it: the
    /// next cycle sees it written and does not write it again. The watch's version replaces it
    /// when it comes; if the write is not made, [`Index::unwrite`] goes back.
    pub fn wrote(&mut self, w: &StatusWrite) {
        let t = &w.target;
        let Some(mut obj) = self.get(t.resource, &t.namespace, &t.name).cloned() else { return };
        self.before
            .entry((t.resource.to_string(), t.namespace.clone(), t.name.clone()))
            .or_insert_with(|| obj.clone());
        w.apply_to(&mut obj);
        self.put(t.resource, obj);
    }

    /// A status write was made: the API's version now includes it.
    pub fn written(&mut self, t: &Target) {
        self.before.remove(&(t.resource.to_string(), t.namespace.clone(), t.name.clone()));
    }

    /// A status write was not made (refused, failed, or not sent): the object goes back to what
    /// the API last reported — unless the watch reported a newer version meanwhile — so the next
    /// cycle writes it again.
    pub fn unwrite(&mut self, t: &Target) {
        let key = (t.resource.to_string(), t.namespace.clone(), t.name.clone());
        if let Some(before) = self.before.remove(&key) {
            self.put(t.resource, before);
        }
    }

    /// How many bindings are assumed.
    pub fn assumed(&self) -> usize {
        self.overlay.assumed.len()
    }

    /// Keeps what `plan` (about to be applied) leaves each gang, for the next cycle.
    pub fn carry(&mut self, plan: &Plan) {
        let gangs = &self.live.snapshot().gangs;
        self.overlay.carried = plan
            .outcomes
            .iter()
            .filter_map(|o| {
                let i = gangs.binary_search_by(|g| g.key.cmp(&o.gang)).ok()?;
                Some((o.gang.clone(), (gangs[i].created, o.state.clone())))
            })
            .collect();
        self.overlay.reservations = plan.reservations.clone();
    }

    /// Forgets carried state (leadership lost or gained: the API's word counts again).
    pub fn drop_carried(&mut self) {
        self.overlay.carried.clear();
        self.overlay.reservations.clear();
    }

    /// Brings the view up to date for a cycle: the watched state with the overlay laid over it.
    pub fn refresh(&mut self) {
        let now = Instant::now();
        for (pod, (_, until)) in &self.refusals {
            if *until <= now {
                self.overlay.held_back.remove(pod);
            }
        }
        self.live.refresh_with(&self.overlay);
    }

    /// What the cycle sees, as of the last [`Index::refresh`]: the watched state with assumed
    /// bindings and carried state applied.
    pub fn snapshot(&self) -> &Snapshot {
        self.live.snapshot()
    }

    /// Every watched object the core could not read.
    pub fn problems(&self) -> Vec<Problem> {
        self.live.problems()
    }
}

impl crate::apply::Current for Index {
    fn pod(&self, namespace: &str, name: &str) -> Option<&Value> {
        self.live.get("v1", "Pod", namespace, name)
    }

    fn gang(&self, namespace: &str, name: &str) -> Option<&Value> {
        let api_version = format!("{}/{}", scheduler_core::GROUP, scheduler_core::VERSION);
        self.live.get(&api_version, "Gang", namespace, name)
    }

    fn object(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<&Value> {
        self.live.get(api_version, kind, namespace, name)
    }
}

fn pod_key(obj: &Value) -> Option<PodKey> {
    (obj.get("kind").and_then(Value::as_str) == Some("Pod")).then(|| {
        let ns = at(obj, "/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("default");
        let name = at(obj, "/metadata/name").and_then(Value::as_str).unwrap_or("");
        PodKey::new(ns, name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::GANG;
    use scheduler_core::model::Time;
    use serde_json::json;

    fn node(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
               "status": {"allocatable": {"cpu": "4", "pods": "10"}}})
    }

    fn pod(name: &str, node: Option<&str>) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml", "uid": name},
               "spec": {"schedulerName": "gang-scheduler", "nodeName": node, "containers": [{"name": "c"}]},
               "status": {"phase": "Pending"}})
    }

    #[test]
    fn assumed_bindings_hold_until_the_watch_confirms_them() {
        let mut index = Index::new();
        index.apply("v1/Node", node("n1"));
        index.apply("v1/Pod", pod("p", None));
        index.assume(&Binding { pod: PodKey::new("ml", "p"), uid: "p".into(), node: "n1".into() });
        index.refresh();
        assert_eq!(
            index.snapshot().pods[0].node_name.as_deref(),
            Some("n1"),
            "the next cycle sees the node as used"
        );
        // A status update of the still-unbound pod does not undo the assumption.
        index.apply("v1/Pod", pod("p", None));
        index.refresh();
        assert_eq!(index.snapshot().pods[0].node_name.as_deref(), Some("n1"));
        index.apply("v1/Pod", pod("p", Some("n1")));
        assert_eq!(index.assumed(), 0);
    }

    #[test]
    fn a_binding_the_api_server_made_never_expires_one_of_unknown_outcome_does() {
        let mut index = Index::new();
        index.apply("v1/Node", node("n1"));
        index.apply("v1/Pod", pod("made", None));
        index.apply("v1/Pod", pod("unknown", None));
        for p in ["made", "unknown"] {
            index.assume(&Binding { pod: PodKey::new("ml", p), uid: p.into(), node: "n1".into() });
        }
        index.made(&PodKey::new("ml", "made"));
        // However late the watch is, the pod bound with a 201 is not placed a second time.
        assert_eq!(index.expire(Duration::ZERO), 1, "only the binding of unknown outcome expires");
        assert_eq!(index.assumed(), 1);
        index.refresh();
        let on: Vec<_> =
            index.snapshot().pods.iter().map(|p| (p.key.name.as_str(), p.node_name.as_deref())).collect();
        assert!(on.contains(&("made", Some("n1"))) && on.contains(&("unknown", None)), "{on:?}");
        // The watch catching up settles it.
        index.apply("v1/Pod", pod("made", Some("n1")));
        assert_eq!(index.assumed(), 0);
    }

    #[test]
    fn a_status_write_is_seen_before_the_watch_reports_it() {
        use scheduler_core::model::ObjectKey;
        use scheduler_core::plan::{Counts, Outcome, Phase};
        use scheduler_core::{Reason, model::GangState};
        let mut index = Index::new();
        let mut p = pod("p", None);
        p["status"]["conditions"] = json!([{"type": "Initialized", "status": "True"}]);
        index.apply("v1/Pod", p);
        let outcome = Outcome {
            gang: ObjectKey::new("ml", "g"),
            reason: Reason::Unschedulable,
            phase: Phase::Pending,
            message: "needs 2 pods".into(),
            counts: Counts::default(),
            state: GangState::default(),
        };
        let now = Time::from_secs(100);
        let current = |index: &Index| index.get("v1/Pod", "ml", "p").cloned();
        let key = PodKey::new("ml", "p");
        let mut write =
            crate::apply::pod_scheduled_false(&key, &outcome, current(&index).as_ref(), now).unwrap();
        write.resource_version = Some("7".into());
        index.wrote(&write);
        let conditions = current(&index).unwrap()["status"]["conditions"].clone();
        assert_eq!(conditions.as_array().map(Vec::len), Some(2), "merged by type: {conditions}");
        assert!(
            current(&index).unwrap()["metadata"].get("resourceVersion").is_none(),
            "a precondition is not a change"
        );
        // Not made (refused, failed, not sent): back to what the API said, to be written again.
        let target = write.target.clone();
        index.unwrite(&target);
        assert_eq!(current(&index).unwrap()["status"]["conditions"].as_array().map(Vec::len), Some(1));
        assert!(crate::apply::pod_scheduled_false(&key, &outcome, current(&index).as_ref(), now).is_some());
        // Made, or overtaken by the watch: nothing to go back to.
        index.wrote(&write);
        let mut newer = current(&index).unwrap();
        newer["status"]["phase"] = json!("Running");
        index.apply("v1/Pod", newer);
        index.unwrite(&target);
        assert_eq!(current(&index).unwrap()["status"]["phase"], "Running");
        index.wrote(&write);
        index.written(&target);
        index.unwrite(&target);
        assert_eq!(current(&index).unwrap()["status"]["conditions"].as_array().map(Vec::len), Some(2));
        assert_eq!(conditions[1]["reason"], "Unschedulable");
        // The next cycle has nothing to write; a new message is written again, keeping the
        // transition time.
        assert_eq!(crate::apply::pod_scheduled_false(&key, &outcome, current(&index).as_ref(), now), None);
        let changed = Outcome { message: "needs 3 pods".into(), ..outcome };
        let later = Time::from_secs(200);
        let again = crate::apply::pod_scheduled_false(&key, &changed, current(&index).as_ref(), later);
        let again = again.expect("a new message is written");
        assert_eq!(
            again.http().body["status"]["conditions"][0]["lastTransitionTime"],
            "1970-01-01T00:01:40Z"
        );
        // A Gang's status replaces the one the object had.
        let gang = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
                   "metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 2},
                   "status": {"degradedSince": "1970-01-01T00:00:10Z"}});
        index.apply(GANG, gang.clone());
        let status = crate::apply::gang_status(&changed, &gang, now).expect("a new status");
        index.wrote(&status);
        let g = index.get(GANG, "ml", "g").unwrap();
        assert_eq!(g["status"]["phase"], "Pending");
        assert_eq!(g["spec"]["minMember"], 2);
        assert!(g["status"].get("degradedSince").is_none(), "gone: {g}");
    }

    #[test]
    fn a_refused_binding_frees_the_node_again() {
        let mut index = Index::new();
        index.apply("v1/Node", node("n1"));
        index.apply("v1/Pod", pod("p", None));
        index.assume(&Binding { pod: PodKey::new("ml", "p"), uid: "p".into(), node: "n1".into() });
        index.forget(&PodKey::new("ml", "p"));
        index.refresh();
        assert_eq!(index.snapshot().pods[0].node_name, None);
        index.assume(&Binding { pod: PodKey::new("ml", "p"), uid: "p".into(), node: "n1".into() });
        assert_eq!(index.expire(Duration::ZERO), 1, "never confirmed");
        index.refresh();
        assert_eq!(index.snapshot().pods[0].node_name, None);
    }

    #[test]
    fn gang_state_is_carried_to_the_next_cycle_of_the_same_gang_only() {
        use scheduler_core::Config;
        let member = |name: &str, created: &str, annotated: bool| {
            let mut p = json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": "ml", "uid": name, "creationTimestamp": created,
                                "labels": {"kube-gang.io/gang": "g"}},
                   "spec": {"schedulerName": "gang-scheduler", "containers": [{"name": "c"}]},
                   "status": {"phase": "Pending"}});
            if annotated {
                p["metadata"]["annotations"] = json!({"kube-gang.io/min-member": "2"});
            }
            p
        };
        let cycle = |index: &mut Index, at: i64| {
            index.refresh();
            let plan = scheduler_core::schedule(index.snapshot(), &Config::default(), Time::from_secs(at));
            index.carry(&plan);
            index.refresh();
            plan
        };
        // A CRD-less gang: its state follows its name, even when its oldest member goes.
        let mut index = Index::new();
        index.apply("v1/Pod", member("a", "2026-01-01T00:00:00Z", true));
        index.apply("v1/Pod", member("b", "2026-01-01T00:00:05Z", true));
        let plan = cycle(&mut index, 1_000);
        assert_eq!(plan.outcomes[0].state.waiting_since, Some(Time::from_secs(1_000)), "{plan:#?}");
        assert_eq!(index.snapshot().gangs[0].state.waiting_since, Some(Time::from_secs(1_000)));
        index.delete("v1/Pod", &member("a", "", true));
        index.apply("v1/Pod", member("c", "2026-01-01T00:00:09Z", true));
        index.refresh();
        assert_eq!(index.snapshot().gangs[0].state.waiting_since, Some(Time::from_secs(1_000)));
        // Leadership changes hands: the state a gang was handed is dropped with the rest.
        index.drop_carried();
        index.refresh();
        assert_eq!(index.snapshot().gangs[0].state.waiting_since, None);
        assert!(index.snapshot().reservations.is_empty());

        // A Gang object: a new one of the same name starts afresh.
        let gang_object = |created: &str| {
            json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
                   "metadata": {"name": "g", "namespace": "ml", "creationTimestamp": created},
                   "spec": {"minMember": 2}})
        };
        let mut index = Index::new();
        index.apply(GANG, gang_object("2026-01-01T00:00:00Z"));
        index.apply("v1/Pod", member("a", "2026-01-01T00:00:00Z", false));
        index.apply("v1/Pod", member("b", "2026-01-01T00:00:00Z", false));
        cycle(&mut index, 1_000);
        assert_eq!(index.snapshot().gangs[0].state.waiting_since, Some(Time::from_secs(1_000)));
        index.apply(GANG, gang_object("2026-02-01T00:00:00Z"));
        index.refresh();
        assert_eq!(index.snapshot().gangs[0].state.waiting_since, None);
    }

    #[test]
    fn a_large_list_loads_in_bulk_into_the_same_view() {
        let pods: Vec<Value> = (0..BULK + 5).map(|i| pod(&format!("p{i:05}"), None)).collect();
        let mut bulk = Index::new();
        bulk.apply("v1/Node", node("n1"));
        bulk.apply("v1/Pod", pod("old", None));
        bulk.replace("v1/Pod", pods.clone());
        let mut one_by_one = Index::new();
        one_by_one.apply("v1/Node", node("n1"));
        for p in pods {
            one_by_one.apply("v1/Pod", p);
        }
        bulk.refresh();
        one_by_one.refresh();
        assert_eq!(bulk.count("v1/Pod"), BULK + 5);
        assert!(bulk.get("v1/Pod", "ml", "old").is_none(), "gone from the list");
        let sorted = |i: &Index| {
            let mut s = i.snapshot().clone();
            s.pods.sort_by(|a, b| a.key.cmp(&b.key));
            s
        };
        assert_eq!(sorted(&bulk), sorted(&one_by_one));
    }

    #[test]
    fn a_relist_drops_what_was_deleted_meanwhile() {
        let mut index = Index::new();
        index.apply("v1/Pod", pod("a", None));
        index.apply("v1/Pod", pod("b", None));
        index.replace("v1/Pod", vec![pod("b", None)]);
        assert_eq!(index.count("v1/Pod"), 1);
        assert!(index.get("v1/Pod", "ml", "a").is_none());
        index.delete("v1/Pod", &pod("b", None));
        assert_eq!(index.count("v1/Pod"), 0);
    }
}
