//! The synchronous index the watches feed: the watched objects in the core's [`Live`] view (a
//! snapshot patched object by object, so a cycle costs what changed, not what the cluster holds),
//! each filed under the [`ObjectRef`] computed where it entered (a watch event's metadata and the
//! kind watched), plus what this scheduler knows that the watch does not say yet, kept as a core
//! [`Overlay`] that `Live` lays over its snapshot at each refresh (the index never edits the
//! objects the watch delivered, and so never has to undo an edit):
//!
//! - bindings sent but not yet seen in the watch (so the next cycle cannot double-book a node);
//! - the gang state the last applied plan left each gang (when it started waiting, when it fell
//!   below its minimum, its timeouts and backoff) and its `NonStrict` reservations, handed to the
//!   next cycle. A `Gang` object carries its state in its status too, which is what a new leader
//!   starts from; gangs of the other dialects start afresh after a restart or a change of leader
//!   (their timeout and grace period count from then);
//! - status writes sent and not yet seen in the watch (nominations, pod conditions, `Gang`
//!   statuses): the writes of the next cycle are compared with the objects as they will be
//!   ([`crate::apply::Current`]), so no write is sent twice, and a nomination is shown on its pod.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PodCondition;
use scheduler_core::cluster::{ApiKind, GANG, Live, Overlay, POD, Problem};
use scheduler_core::crd::GangStatus;
use scheduler_core::model::{GangKey, Persisted, PodKey, Snapshot};
use scheduler_core::object::{Filed, ObjectRef, at};
use scheduler_core::plan::{Binding, Keep, Plan};
use serde_json::Value;

use crate::apply::{ConditionNow, Current, GangNow, PodNow, StatusChange, StatusWrite, Target};

/// The gate a pod whose binding the API server refused is shown with (see [`Index::refuse`]).
pub const REFUSED_GATE: &str = "kube-gang.io/binding-refused";
/// The gate a pod whose binding the API server throttled is shown with (see [`Index::hold`]).
pub const THROTTLED_GATE: &str = "kube-gang.io/binding-throttled";
const REFUSED_FIRST: Duration = Duration::from_secs(5);
const REFUSED_MAX: Duration = Duration::from_secs(300);

/// Cluster state as the scheduler knows it.
#[derive(Debug, Default)]
pub struct Index {
    live: Live,
    /// What the watch does not say yet — bindings sent, gang state carried, reservations,
    /// nominations written — laid over the core's snapshot at each refresh (the core's objects
    /// are never edited).
    overlay: Overlay,
    /// When each assumed binding was first sent (for [`Index::expire`]), while its outcome is not
    /// known: the API server has not said it made it.
    sent: BTreeMap<PodKey, Instant>,
    /// Bindings sent whose outcome is unknown (no answer, a server error, and the pod not yet
    /// bound): sent again to the same node, which is safe — a pod is bound once, and a second
    /// binding to the node it is on is answered 409 — until one is made or refused, the watch
    /// shows the pod bound or gone, or [`Index::expire`] gives up on it.
    unknown: BTreeMap<PodKey, Binding>,
    /// Pods whose binding the API server refused: (refusals so far, held back until).
    refusals: BTreeMap<PodKey, (u32, Instant)>,
    /// Status writes sent and not yet seen in the watch, by pod and by `Gang`.
    ahead_pods: HashMap<PodKey, Ahead>,
    ahead_gangs: HashMap<GangKey, Ahead>,
    /// Writes to other projects' gang objects ([`Target::Enqueue`], [`Target::Report`]) sent and
    /// not yet seen.
    ahead_foreign: HashMap<Target, Ahead>,
    /// Such writes that failed: (failures in a row, not sent again before). A write the API
    /// server refuses (a ClusterRole without the `patch`, say) is retried with a growing delay,
    /// not every cycle.
    foreign_failures: HashMap<Target, (u32, Instant)>,
    /// Gang states written on member pods and not yet seen in the watch (see [`Index::kept`]).
    keeping: BTreeMap<PodKey, Keeping>,
}

/// A gang state written on a member pod, until the watch shows the pod carrying it (or a newer
/// one), or the pod is gone.
#[derive(Debug)]
struct Keeping {
    keep: Keep,
    fate: Fate,
}

/// What became of a write so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Sent,
    Made,
    /// Refused or failed: sent again ([`Index::keeps_to_retry`]).
    Failed,
}

/// The first delay before a failed write to another project's gang object is sent again; it
/// doubles per failure in a row, up to [`FOREIGN_RETRY_MAX`].
const FOREIGN_RETRY_FIRST: Duration = Duration::from_secs(1);
const FOREIGN_RETRY_MAX: Duration = Duration::from_secs(300);

/// The revision of the gang state a raw pod keeps (0: none readable).
fn kept_rev(pod: &Value) -> u64 {
    at(pod, &format!("/metadata/annotations/{}", scheduler_core::labels::ANNOTATION_STATE.replace('/', "~1")))
        .and_then(Value::as_str)
        .and_then(Persisted::from_text)
        .map_or(0, |p| p.state.rev)
}

/// The status writes sent about one object and not yet seen in the watch: what it will say.
#[derive(Debug, Default)]
struct Ahead {
    nominated: Option<String>,
    scheduled: Option<PodCondition>,
    gang: Option<GangStatus>,
    /// Writes sent and not answered yet.
    unanswered: usize,
    /// Once every write was answered: the `resourceVersion` the last one made (`None`: not
    /// said). The watch delivering that version shows them all.
    made: Option<Option<String>>,
    /// Versions the watch delivered while writes were unanswered (the watch can be faster than
    /// the answer), the last few.
    delivered: Vec<String>,
}

/// How many versions delivered before an answer are remembered.
const DELIVERED_MAX: usize = 8;

impl Ahead {
    /// The watch delivered `obj`: whether it shows every write.
    fn delivered(&mut self, obj: &Value) -> bool {
        let version = at(obj, "/metadata/resourceVersion").and_then(Value::as_str);
        if self.unanswered > 0 {
            if let Some(v) = version {
                if self.delivered.len() == DELIVERED_MAX {
                    self.delivered.remove(0);
                }
                self.delivered.push(v.to_string());
            }
            return false;
        }
        match &self.made {
            Some(Some(made)) => version == Some(made.as_str()),
            // Made, at a version not said: the next version the watch delivers is taken.
            Some(None) => true,
            None => false,
        }
    }
}

/// Whether the object names a node (`spec.nodeName`): a bound pod.
fn has_node(obj: &Value) -> bool {
    at(obj, "/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty())
}

/// The key of a pod, from its identity (the API server puts a pod that names no namespace in
/// `default`).
fn pod_key(r: &ObjectRef) -> PodKey {
    PodKey::new(r.pod_namespace(), r.name.as_str())
}

impl Index {
    pub fn new() -> Self {
        Index::default()
    }

    /// A watch `Apply` event (added or modified) of the object `r`.
    pub fn apply(&mut self, r: ObjectRef, obj: Value) {
        match r.filed() {
            Filed::Pod => {
                let owed = !(self.ahead_pods.is_empty() && self.owes_nothing());
                if owed {
                    let key = pod_key(&r);
                    if self.ahead_pods.get_mut(&key).is_some_and(|a| a.delivered(&obj)) {
                        self.forget_ahead(&Target::Pod(key.clone()));
                    }
                    if has_node(&obj) {
                        self.settled(&key);
                    }
                    self.seen_kept(&key, Some(&obj));
                }
            }
            Filed::Other if r.is(&GANG) && !self.ahead_gangs.is_empty() => {
                let key = GangKey::new(r.namespace.as_str(), r.name.as_str());
                if self.ahead_gangs.get_mut(&key).is_some_and(|a| a.delivered(&obj)) {
                    self.ahead_gangs.remove(&key);
                }
            }
            Filed::Other if !self.ahead_foreign.is_empty() && Target::foreign(&r).is_some() => {
                if let Some(t) = Target::foreign(&r)
                    && self.ahead_foreign.get_mut(&t).is_some_and(|a| a.delivered(&obj))
                {
                    self.ahead_foreign.remove(&t);
                }
            }
            // A claim or volume the scheduler wrote is held as the API server answered the write;
            // a watch event older than that (delivered after the answer) does not undo it. The
            // versions are compared as numbers, as kube-scheduler's assume cache compares them.
            Filed::Storage(_) => {
                let version = |v: &Value| {
                    v.pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .and_then(|s| s.parse::<u64>().ok())
                };
                if let (Some(held), Some(new)) = (self.live.get_ref(&r).and_then(version), version(&obj))
                    && new < held
                {
                    return;
                }
            }
            _ => {}
        }
        // Objects the core cannot file are reported with the snapshot's problems, not here.
        let _ = self.live.apply(r, obj);
    }

    /// Nothing is owed to bindings sent or refused, nor to gang states written.
    fn owes_nothing(&self) -> bool {
        self.overlay.assumed.is_empty()
            && self.refusals.is_empty()
            && self.overlay.held_back.is_empty()
            && self.keeping.is_empty()
    }

    /// The watch shows pod `key` as `obj` (`None`: gone): a gang state written on it is settled
    /// once the pod carries it (or a newer one), or is another pod of the name, or is gone.
    fn seen_kept(&mut self, key: &PodKey, obj: Option<&Value>) {
        let Some(k) = self.keeping.get(key) else { return };
        let settled = obj.is_none_or(|o| {
            at(o, "/metadata/uid").and_then(Value::as_str) != Some(k.keep.uid.as_str())
                || kept_rev(o) >= k.keep.rev
        });
        if settled {
            self.keeping.remove(key);
            self.overlay.kept.remove(key);
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
        self.unknown.remove(pod);
    }

    /// A watch `Delete` event of the object `r`.
    pub fn delete(&mut self, r: &ObjectRef) {
        match r.filed() {
            Filed::Pod => {
                let key = pod_key(r);
                self.settled(&key);
                self.seen_kept(&key, None);
                self.forget_ahead(&Target::Pod(key));
            }
            Filed::Other if r.is(&GANG) => {
                self.ahead_gangs.remove(&GangKey::new(r.namespace.as_str(), r.name.as_str()));
            }
            Filed::Other if Target::foreign(r).is_some() => {
                if let Some(t) = Target::foreign(r) {
                    self.ahead_foreign.remove(&t);
                    self.foreign_failures.remove(&t);
                }
            }
            _ => {}
        }
        self.live.remove_ref(r);
    }

    /// A completed (re-)list of `kind` replaces what the index held of it: objects deleted
    /// while the watch was down (410 Gone, a dropped connection) disappear here. The core loads
    /// the list in bulk and assembles that kind only (a list of nodes never converts a pod),
    /// converting pods on all cores, and skips objects listed at the version it holds.
    pub fn replace(&mut self, kind: &'static ApiKind, objects: Vec<(ObjectRef, Value)>) {
        if *kind == POD {
            // What is owed to pods listed bound, or not listed at all (gone), is settled; with
            // nothing owed (the initial list), nothing is looked up per object.
            if !self.owes_nothing() {
                let listed: HashSet<(&str, &str)> =
                    objects.iter().map(|(r, _)| (r.pod_namespace(), r.name.as_str())).collect();
                let mut settled: Vec<PodKey> =
                    objects.iter().filter(|(_, o)| has_node(o)).map(|(r, _)| pod_key(r)).collect();
                let owed = self
                    .overlay
                    .assumed
                    .keys()
                    .chain(self.refusals.keys())
                    .chain(self.overlay.held_back.keys());
                settled.extend(
                    owed.filter(|p| !listed.contains(&(p.namespace.as_str(), p.name.as_str()))).cloned(),
                );
                for p in settled {
                    self.settled(&p);
                }
                let keeping: Vec<PodKey> = self.keeping.keys().cloned().collect();
                if !keeping.is_empty() {
                    let listed: HashMap<(&str, &str), &Value> =
                        objects.iter().map(|(r, o)| ((r.pod_namespace(), r.name.as_str()), o)).collect();
                    for key in keeping {
                        let obj = listed.get(&(key.namespace.as_str(), key.name.as_str())).copied();
                        self.seen_kept(&key, obj);
                    }
                }
            }
            // Writes answered are in the list (or their object is gone); those still unanswered
            // may not be yet.
            let answered: Vec<PodKey> =
                self.ahead_pods.iter().filter(|(_, a)| a.unanswered == 0).map(|(k, _)| k.clone()).collect();
            for k in answered {
                self.forget_ahead(&Target::Pod(k));
            }
        } else if *kind == GANG {
            self.ahead_gangs.retain(|_, a| a.unanswered > 0);
        } else if Target::foreign(&ObjectRef::of_kind(kind, "", "")).is_some() {
            let listed: HashSet<Target> = objects.iter().filter_map(|(r, _)| Target::foreign(r)).collect();
            let of_kind = |t: &Target| t.object_ref().is(kind);
            self.ahead_foreign.retain(|t, a| !of_kind(t) || a.unanswered > 0);
            self.foreign_failures.retain(|t, _| !of_kind(t) || listed.contains(t));
        }
        // Objects the core cannot file are reported with the snapshot's problems.
        let _ = self.live.replace(kind, objects);
    }

    /// How many objects of `kind` are held.
    pub fn count(&self, kind: &ApiKind) -> usize {
        self.live.count(kind)
    }

    /// The raw object, if held.
    pub fn get(&self, r: &ObjectRef) -> Option<&Value> {
        self.live.get_ref(r)
    }

    /// The raw pod, if held.
    pub fn pod(&self, key: &PodKey) -> Option<&Value> {
        self.live.pod(key)
    }

    /// The raw `Gang` object, if held.
    pub fn gang(&self, key: &GangKey) -> Option<&Value> {
        self.live.get_ref(&ObjectRef::of_kind(&GANG, key.namespace.as_str(), key.name.as_str()))
    }

    /// Records a binding sent to the API: the next cycle sees the node as used.
    pub fn assume(&mut self, b: &Binding) {
        self.overlay.assumed.insert(b.pod.clone(), b.node.to_string());
        self.sent.entry(b.pod.clone()).or_insert_with(Instant::now);
    }

    /// The API server did not say whether it made the binding `b` (no answer, a server error, and
    /// the pod not on a node yet): its node stays booked, and it is sent again
    /// ([`Index::unknown_bindings`]) rather than the pod placed anew — a binding still in flight
    /// may be made later, and another pod on its node would then overcommit it.
    pub fn unknown(&mut self, b: &Binding) {
        if self.overlay.assumed.contains_key(&b.pod) {
            self.unknown.insert(b.pod.clone(), b.clone());
        }
    }

    /// The bindings of unknown outcome, to send again now (to the node they chose).
    pub fn unknown_bindings(&self) -> Vec<Binding> {
        self.unknown.values().cloned().collect()
    }

    /// The API server answered the binding of `pod` with success: the assumption holds until the
    /// watch shows the pod bound or gone, however late (kube-scheduler's assumed pods never
    /// expire either once bound — `durationToExpireAssumedPod = 0`, kubernetes#106361: expiring
    /// them raced with slow watches). Only bindings whose outcome is unknown expire.
    pub fn made(&mut self, pod: &PodKey) {
        self.sent.remove(pod);
        // Made, so no longer unknown: not sent again (it would be answered 409).
        self.unknown.remove(pod);
    }

    /// Drops assumptions older than `ttl` that the watch never confirmed (a binding whose outcome
    /// could not be learned and that did not happen): their pods are placed again. `ttl` outlasts
    /// the time the API server may still be working on a request (its request timeout), so a
    /// binding dropped here can no longer be made.
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

    /// Records a status write about to be sent: until the watch shows it, the next cycle's writes
    /// are compared with the object as it will be (and not sent again), and a nomination is shown
    /// on its pod. Nothing the watch delivered is edited.
    pub fn wrote(&mut self, w: &StatusWrite) {
        let ahead = match &w.target {
            Target::Pod(k) => self.ahead_pods.entry(k.clone()).or_default(),
            Target::Gang(k) => self.ahead_gangs.entry(k.clone()).or_default(),
            Target::Enqueue(_) | Target::Report(_) => self.ahead_foreign.entry(w.target.clone()).or_default(),
            Target::Kept(k) => {
                if let StatusChange::Keep(keep) = &w.change
                    && let Some(p) = Persisted::from_text(&keep.text)
                {
                    self.overlay.kept.insert(k.clone(), (keep.uid.to_string(), Box::new(p)));
                    self.keeping.insert(k.clone(), Keeping { keep: (**keep).clone(), fate: Fate::Sent });
                }
                return;
            }
        };
        ahead.unanswered += 1;
        ahead.made = None;
        match &w.change {
            StatusChange::Nominate(node) => {
                ahead.nominated = Some(node.clone());
                if let Target::Pod(k) = &w.target {
                    self.overlay.nominated.insert(k.clone(), node.clone());
                }
            }
            StatusChange::Condition(c) => ahead.scheduled = Some((**c).clone()),
            StatusChange::Gang { status, .. } => ahead.gang = Some((**status).clone()),
            StatusChange::Keep(_) | StatusChange::Phase(_) | StatusChange::Report(_) => {}
        }
    }

    /// A status write was made, the object now at `version` (if the answer said): the writes to
    /// it are held until the watch delivers that version.
    pub fn written(&mut self, t: &Target, version: Option<String>) {
        if matches!(t, Target::Enqueue(_) | Target::Report(_)) {
            self.foreign_failures.remove(t);
        }
        let ahead = match t {
            Target::Pod(k) => self.ahead_pods.get_mut(k),
            Target::Gang(k) => self.ahead_gangs.get_mut(k),
            Target::Enqueue(_) | Target::Report(_) => self.ahead_foreign.get_mut(t),
            Target::Kept(k) => {
                if let Some(kept) = self.keeping.get_mut(k) {
                    kept.fate = Fate::Made;
                }
                return;
            }
        };
        let Some(ahead) = ahead else { return };
        ahead.unanswered = ahead.unanswered.saturating_sub(1);
        // The watch was faster than the answer: it delivered that version already.
        let seen = version.as_ref().is_some_and(|v| ahead.delivered.contains(v));
        ahead.made = Some(version);
        if ahead.unanswered == 0 {
            ahead.delivered.clear();
            if seen {
                self.forget_ahead(t);
            }
        }
    }

    /// A status write was not made (refused, failed, or not sent): the object is again as the
    /// watch reports it, so the next cycle writes it again. A gang state written on a pod stays
    /// shown there — it is what the scheduler decided — and is sent again
    /// ([`Index::keeps_to_retry`]).
    pub fn unwrite(&mut self, t: &Target) {
        if matches!(t, Target::Enqueue(_) | Target::Report(_)) {
            let failures = self.foreign_failures.get(t).map_or(0, |(n, _)| *n).saturating_add(1);
            let delay =
                FOREIGN_RETRY_FIRST.saturating_mul(1 << (failures - 1).min(16)).min(FOREIGN_RETRY_MAX);
            self.foreign_failures.insert(t.clone(), (failures, Instant::now() + delay));
        }
        if let Target::Kept(k) = t {
            if let Some(kept) = self.keeping.get_mut(k) {
                kept.fate = Fate::Failed;
            }
            return;
        }
        self.forget_ahead(t);
    }

    /// The gang states written on pods that were not made, to send again now; the core does not
    /// ask for them again, since the snapshot shows them kept.
    pub fn keeps_to_retry(&mut self) -> Vec<Keep> {
        self.keeping
            .values_mut()
            .filter(|k| k.fate == Fate::Failed)
            .map(|k| {
                k.fate = Fate::Sent;
                k.keep.clone()
            })
            .collect()
    }

    fn forget_ahead(&mut self, t: &Target) {
        match t {
            Target::Pod(k) => {
                if self.ahead_pods.remove(k).is_some_and(|a| a.nominated.is_some()) {
                    self.overlay.nominated.remove(k);
                }
            }
            Target::Gang(k) => {
                self.ahead_gangs.remove(k);
            }
            Target::Enqueue(_) | Target::Report(_) => {
                self.ahead_foreign.remove(t);
            }
            Target::Kept(k) => {
                self.keeping.remove(k);
                self.overlay.kept.remove(k);
            }
        }
    }

    /// How many bindings are assumed.
    pub fn assumed(&self) -> usize {
        self.overlay.assumed.len()
    }

    /// Keeps what `plan` (about to be applied) leaves each gang defined by an object, for the next
    /// cycle, under the object's uid (a gang of pod annotations keeps its state on its members).
    pub fn carry(&mut self, plan: &Plan) {
        let gangs = &self.live.snapshot().gangs;
        self.overlay.carried = plan
            .outcomes
            .iter()
            .filter_map(|o| {
                let i = gangs.binary_search_by(|g| g.key.cmp(&o.gang)).ok()?;
                Some((o.gang.clone(), (gangs[i].uid.clone()?, o.state.clone())))
            })
            .collect();
        self.overlay.reservations = plan.reservations.clone();
    }

    /// Forgets what this replica decided and the watch does not show (leadership lost or gained:
    /// the API's word counts again): carried gang state, reservations, gang states written on
    /// pods and not yet seen.
    pub fn drop_carried(&mut self) {
        self.overlay.carried.clear();
        self.overlay.reservations.clear();
        self.overlay.kept.clear();
        self.keeping.clear();
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

/// The objects as the watch reported them, with the status writes not yet seen there laid over.
impl Current for Index {
    fn pod(&self, key: &PodKey) -> PodNow<'_> {
        let mut now = self.live.pod(key).map(PodNow::of).unwrap_or_default();
        if let Some(a) = self.ahead_pods.get(key) {
            if let Some(n) = &a.nominated {
                now.nominated = Some(n);
            }
            if let Some(c) = &a.scheduled {
                now.scheduled = Some(ConditionNow::of(c));
            }
        }
        now
    }

    fn gang(&self, key: &GangKey) -> Option<GangNow<'_>> {
        let mut now = GangNow::of(Index::gang(self, key)?);
        if let Some(status) = self.ahead_gangs.get(key).and_then(|a| a.gang.as_ref()) {
            now.status = Some(status.clone());
        }
        Some(now)
    }

    fn object(&self, r: &ObjectRef) -> Option<&Value> {
        self.live.get_ref(r)
    }

    fn writing(&self, target: &Target) -> bool {
        self.ahead_foreign.contains_key(target)
            || self.foreign_failures.get(target).is_some_and(|(_, until)| *until > Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_core::model::Time;
    use serde_json::json;

    /// A watch `Apply` event of `obj`.
    fn put(index: &mut Index, obj: Value) {
        index.apply(ObjectRef::of(&obj), obj);
    }

    fn gone(index: &mut Index, obj: &Value) {
        index.delete(&ObjectRef::of(obj));
    }

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
        put(&mut index, node("n1"));
        put(&mut index, pod("p", None));
        index.assume(&Binding { pod: PodKey::new("ml", "p"), uid: "p".into(), node: "n1".into() });
        index.refresh();
        assert_eq!(
            index.snapshot().pods[0].node_name.as_deref(),
            Some("n1"),
            "the next cycle sees the node as used"
        );
        // A status update of the still-unbound pod does not undo the assumption.
        put(&mut index, pod("p", None));
        index.refresh();
        assert_eq!(index.snapshot().pods[0].node_name.as_deref(), Some("n1"));
        put(&mut index, pod("p", Some("n1")));
        assert_eq!(index.assumed(), 0);
    }

    #[test]
    fn a_binding_the_api_server_made_never_expires_one_of_unknown_outcome_does() {
        let mut index = Index::new();
        put(&mut index, node("n1"));
        put(&mut index, pod("made", None));
        put(&mut index, pod("unknown", None));
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
        put(&mut index, pod("made", Some("n1")));
        assert_eq!(index.assumed(), 0);
    }

    #[test]
    fn a_binding_of_unknown_outcome_sent_again_and_made_is_not_sent_a_third_time() {
        let mut index = Index::new();
        put(&mut index, node("n1"));
        put(&mut index, pod("p", None));
        let b = Binding { pod: PodKey::new("ml", "p"), uid: "p".into(), node: "n1".into() };
        index.assume(&b);
        index.unknown(&b);
        assert_eq!(index.unknown_bindings(), vec![b.clone()], "answered 500: sent again");
        // Sent again and answered 201, before the watch shows the pod bound.
        index.made(&b.pod);
        assert!(index.unknown_bindings().is_empty(), "made: not sent again (409)");
        assert_eq!(index.expire(Duration::ZERO), 0, "and its node stays booked");
    }

    /// A Volcano PodGroup moved to `Inqueue` ([`Target::Enqueue`]) is not moved again until the
    /// watch shows the version the move made; a failed move is held back with a growing delay; a
    /// re-list or a deletion forgets both.
    #[test]
    fn a_podgroup_moved_to_inqueue_is_not_moved_again_until_seen_and_failures_back_off() {
        let mut index = Index::new();
        let pg = |version: &str, phase: Option<&str>| {
            let mut pg = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "pg", "namespace": "ml", "resourceVersion": version,
                    "labels": {"kube-gang.io/enabled": "true"}, "ownerReferences": [
                    {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "pg", "uid": "j", "controller": true}]},
                "spec": {"minMember": 2}});
            if let Some(p) = phase {
                pg["status"] = json!({"phase": p});
            }
            pg
        };
        put(&mut index, pg("5", None));
        index.refresh();
        let target = Target::Enqueue(GangKey::new("ml", "pg"));
        let moves = |index: &Index| crate::apply::enqueue(index.snapshot(), index);
        let first = moves(&index);
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(first[0].resource_version.as_deref(), Some("5"));
        assert_eq!(first[0].http().path, "/apis/scheduling.volcano.sh/v1beta1/namespaces/ml/podgroups/pg");
        index.wrote(&first[0]);
        assert!(moves(&index).is_empty(), "sent, not again");
        index.written(&first[0].target, Some("7".into()));
        put(&mut index, pg("6", None));
        assert!(Current::writing(&index, &target), "an older version does not show the move");
        put(&mut index, pg("7", Some("Inqueue")));
        assert!(!Current::writing(&index, &target), "seen");
        index.refresh();
        assert!(moves(&index).is_empty(), "Inqueue: nothing to move");
        // Back to Pending (Volcano's scheduler may do that): moved again.
        put(&mut index, pg("8", Some("Pending")));
        index.refresh();
        let again = moves(&index);
        assert_eq!(again.len(), 1);
        // Refused twice: held back 1 s, then 2 s; a success or the object's deletion clears it.
        index.wrote(&again[0]);
        index.unwrite(&again[0].target);
        assert!(moves(&index).is_empty(), "held back after a failure");
        assert_eq!(index.foreign_failures.get(&target).map(|f| f.0), Some(1));
        index.wrote(&again[0]);
        index.unwrite(&again[0].target);
        let (n, until) = index.foreign_failures[&target];
        assert!(n == 2 && until > Instant::now() + Duration::from_millis(1500), "doubled");
        index.replace(crate::apply::volcano_podgroup(), vec![(ObjectRef::of(&pg("9", None)), pg("9", None))]);
        assert!(index.foreign_failures.contains_key(&target), "still listed: still held back");
        index.delete(&ObjectRef::of(&pg("9", None)));
        assert!(index.foreign_failures.is_empty() && index.ahead_foreign.is_empty());
    }

    #[test]
    fn a_status_write_is_seen_before_the_watch_reports_it_and_sent_once() {
        use crate::apply::{gang_status, pod_scheduled_false};
        use scheduler_core::model::ObjectKey;
        use scheduler_core::plan::{Counts, Outcome, Phase};
        use scheduler_core::{Reason, model::GangState};
        let mut index = Index::new();
        let mut p = pod("p", None);
        p["metadata"]["resourceVersion"] = json!("7");
        p["status"]["conditions"] = json!([{"type": "Initialized", "status": "True"}]);
        put(&mut index, p.clone());
        let outcome = Outcome {
            gang: ObjectKey::new("ml", "g"),
            reason: Reason::Unschedulable,
            phase: Phase::Pending,
            message: "needs 2 pods".into(),
            counts: Counts::default(),
            state: GangState::default(),
            waited_since: None,
            expected_start: None,
            held_nodes: Vec::new(),
            backfilled: false,
        };
        let now = Time::from_secs(100);
        let key = PodKey::new("ml", "p");
        let to_write = |index: &Index, o: &Outcome, at: Time| {
            pod_scheduled_false(&key, o, &Current::pod(index, &key), at)
        };
        let write = to_write(&index, &outcome, now).expect("a first condition");
        assert_eq!(write.resource_version.as_deref(), Some("7"), "a precondition");
        index.wrote(&write);
        assert_eq!(
            to_write(&index, &outcome, now),
            None,
            "written once, not again before the watch shows it"
        );
        let raw = index.pod(&key).unwrap();
        assert_eq!(
            raw["status"]["conditions"].as_array().map(Vec::len),
            Some(1),
            "the watched object is not edited"
        );
        // Not made (refused, failed, not sent): the object is as the watch says, to be written again.
        index.unwrite(&write.target);
        assert_eq!(to_write(&index, &outcome, now).as_ref(), Some(&write));
        // Made at version 9: an older version the watch still delivers does not show it; 9 does.
        index.wrote(&write);
        index.written(&write.target, Some("9".into()));
        let mut older = p.clone();
        older["metadata"]["resourceVersion"] = json!("8");
        put(&mut index, older);
        assert_eq!(to_write(&index, &outcome, now), None, "still ahead of the watch");
        let mut echo = p.clone();
        echo["metadata"]["resourceVersion"] = json!("9");
        echo["status"]["conditions"] = write.http().body["status"]["conditions"].clone();
        put(&mut index, echo);
        assert!(index.ahead_pods.is_empty(), "seen in the watch");
        assert_eq!(to_write(&index, &outcome, now), None, "the object says it now");
        // A new message is written again, keeping the transition time.
        let changed = Outcome { message: "needs 3 pods".into(), ..outcome };
        let again = to_write(&index, &changed, Time::from_secs(200)).expect("a new message is written");
        assert_eq!(
            again.http().body["status"]["conditions"][0]["lastTransitionTime"],
            "1970-01-01T00:01:40Z"
        );
        assert_eq!(again.resource_version.as_deref(), Some("9"));
        // The watch faster than the answer, and a later version delivered too (the kubelet's):
        // the answer finds the version it made delivered already.
        index.wrote(&again);
        for version in ["10", "11"] {
            let mut echo = p.clone();
            echo["metadata"]["resourceVersion"] = json!(version);
            put(&mut index, echo);
        }
        assert!(!index.ahead_pods.is_empty(), "not answered yet");
        index.written(&again.target, Some("10".into()));
        assert!(index.ahead_pods.is_empty());

        // A nomination written is shown on the pod until the watch shows it.
        let nominate = StatusWrite {
            target: Target::Pod(key.clone()),
            resource_version: None,
            change: StatusChange::Nominate("n1".into()),
        };
        index.wrote(&nominate);
        index.refresh();
        assert_eq!(index.snapshot().pods[0].nominated_node.as_deref(), Some("n1"));
        assert_eq!(Current::pod(&index, &key).nominated, Some("n1"));
        index.unwrite(&nominate.target);
        index.refresh();
        assert_eq!(index.snapshot().pods[0].nominated_node, None);

        // A Gang's status written replaces the one the object had, as far as the next write goes.
        let gang = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
                   "metadata": {"name": "g", "namespace": "ml", "resourceVersion": "3"}, "spec": {"minMember": 2},
                   "status": {"degradedSince": "1970-01-01T00:00:10Z"}});
        put(&mut index, gang.clone());
        let g = GangKey::new("ml", "g");
        let status = gang_status(&changed, &Current::gang(&index, &g).unwrap(), now).expect("a new status");
        index.wrote(&status);
        assert_eq!(gang_status(&changed, &Current::gang(&index, &g).unwrap(), now), None, "not sent twice");
        assert_eq!(index.gang(&g).unwrap()["status"]["degradedSince"], "1970-01-01T00:00:10Z", "not edited");
        // Answered without a version: the next version the watch delivers is taken as showing it.
        index.written(&status.target, None);
        let mut echo = gang.clone();
        echo["metadata"]["resourceVersion"] = json!("4");
        put(&mut index, echo);
        assert!(index.ahead_gangs.is_empty());
    }

    #[test]
    fn a_refused_binding_frees_the_node_again() {
        let mut index = Index::new();
        put(&mut index, node("n1"));
        put(&mut index, pod("p", None));
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
    fn gang_state_lives_on_the_members_or_the_gang_object_of_the_same_uid_only() {
        use crate::apply::keep;
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
        // A cycle whose writes are sent (and not yet seen in the watch).
        let cycle = |index: &mut Index, at: i64| {
            index.refresh();
            let plan = scheduler_core::schedule(index.snapshot(), &Config::default(), Time::from_secs(at));
            for k in &plan.keep {
                index.wrote(&keep(k));
            }
            index.carry(&plan);
            plan
        };
        let waiting = |plan: &Plan| plan.outcomes[0].state.waiting_since;
        let kept = |plan: &Plan| plan.keep.iter().map(|k| k.pod.name.clone()).collect::<Vec<_>>();
        // A CRD-less gang: its state is written on its members, and read from them.
        let mut index = Index::new();
        put(&mut index, member("a", "2026-01-01T00:00:00Z", true));
        put(&mut index, member("b", "2026-01-01T00:00:05Z", true));
        let plan = cycle(&mut index, 1_000);
        assert_eq!(waiting(&plan), Some(Time::from_secs(1_000)), "{plan:#?}");
        assert_eq!(kept(&plan), ["a", "b"]);
        let plan = cycle(&mut index, 1_010);
        assert_eq!(
            waiting(&plan),
            Some(Time::from_secs(1_000)),
            "the writes sent are what the next cycle sees"
        );
        assert!(plan.keep.is_empty(), "written once: {plan:#?}");
        // Its oldest member goes, a new one comes: the state is still the gang's, and the
        // newcomer is given it.
        gone(&mut index, &member("a", "", true));
        put(&mut index, member("c", "2026-01-01T00:00:09Z", true));
        let plan = cycle(&mut index, 1_020);
        assert_eq!(waiting(&plan), Some(Time::from_secs(1_000)));
        assert_eq!(kept(&plan), ["c"]);
        // Leadership changes hands before the watch showed the writes: what this replica wrote
        // and did not see is dropped, and the gang starts from what the cluster says.
        index.drop_carried();
        let plan = cycle(&mut index, 1_030);
        assert_eq!(waiting(&plan), Some(Time::from_secs(1_030)));
        // The cluster says it: the watch delivers a member with the state written.
        let mut b = member("b", "2026-01-01T00:00:05Z", true);
        let text = scheduler_core::model::Persisted {
            gang: GangKey::new("ml", "g"),
            uid: None,
            state: scheduler_core::model::GangState {
                waiting_since: Some(Time::from_secs(1_000)),
                rev: 7,
                ..Default::default()
            },
        }
        .to_text();
        b["metadata"]["annotations"]["kube-gang.io/state"] = json!(text);
        put(&mut index, b);
        index.drop_carried();
        let plan = cycle(&mut index, 1_040);
        assert_eq!(waiting(&plan), Some(Time::from_secs(1_000)), "a restarted leader reads it back");

        // A Gang object: its state is carried under its uid; a new one of the same name (another
        // uid) starts afresh, even within the same second.
        let gang_object = |uid: &str| {
            json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
                   "metadata": {"name": "g", "namespace": "ml", "uid": uid, "creationTimestamp": "2026-01-01T00:00:00Z"},
                   "spec": {"minMember": 2}})
        };
        let mut index = Index::new();
        put(&mut index, gang_object("u1"));
        put(&mut index, member("a", "2026-01-01T00:00:00Z", false));
        put(&mut index, member("b", "2026-01-01T00:00:00Z", false));
        cycle(&mut index, 1_000);
        index.refresh();
        assert_eq!(index.snapshot().gangs[0].state.waiting_since, Some(Time::from_secs(1_000)));
        put(&mut index, gang_object("u2"));
        index.refresh();
        assert_eq!(index.snapshot().gangs[0].state.waiting_since, None);
    }

    #[test]
    fn a_large_list_loads_in_bulk_into_the_same_view() {
        let pods: Vec<Value> = (0..1_029).map(|i| pod(&format!("p{i:05}"), None)).collect();
        let mut bulk = Index::new();
        put(&mut bulk, node("n1"));
        put(&mut bulk, pod("old", None));
        bulk.replace(&POD, pods.iter().map(|p| (ObjectRef::of(p), p.clone())).collect());
        let mut one_by_one = Index::new();
        put(&mut one_by_one, node("n1"));
        for p in pods {
            put(&mut one_by_one, p);
        }
        bulk.refresh();
        one_by_one.refresh();
        assert_eq!(bulk.count(&POD), 1_029);
        assert!(bulk.pod(&PodKey::new("ml", "old")).is_none(), "gone from the list");
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
        put(&mut index, pod("a", None));
        put(&mut index, pod("b", None));
        index.replace(&POD, vec![(ObjectRef::of(&pod("b", None)), pod("b", None))]);
        assert_eq!(index.count(&POD), 1);
        assert!(index.pod(&PodKey::new("ml", "a")).is_none());
        gone(&mut index, &pod("b", None));
        assert_eq!(index.count(&POD), 0);
    }
}
