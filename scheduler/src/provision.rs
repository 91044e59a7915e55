//! Autoscaler-visible gangs: the plan's provisioning asks (`scheduler_core::provision::asks`)
//! written as cluster-autoscaler `ProvisioningRequest`s (`autoscaling.x-k8s.io/v1`) with their
//! PodTemplates, read back, retried and deleted.
//!
//! **The cluster is the record.** What this module knows of a gang's requests it reads from the
//! requests themselves, followed by a watch of those it manages (label
//! `app.kubernetes.io/managed-by: gang-scheduler`, started once the API is found served; no
//! request is read one by one): each carries the gang it is for (annotation
//! [`ANNOTATION_GANG_NAME`]; label `kube-gang.io/gang` holds the name shortened to a label value),
//! the gang's incarnation ([`ANNOTATION_INCARNATION`]: the uid of its object, else of its members'
//! controller, else its creation time) and its attempt number ([`ANNOTATION_ATTEMPT`], also the
//! name's suffix). Nothing else is kept between cycles that a restart could lose and get wrong: a
//! new leader, or this one after a restart, finds the same requests and carries on — never a
//! second request beside an open one, never an attempt number used twice.
//!
//! Each cycle of the leader brings the requests in line with the plan:
//!
//! - a request no gang asks for any more — the gang placed, deleted, or waiting for something
//!   else, a request provisioned while the scheduler was down included — or asked for by another
//!   incarnation of the gang (a gang deleted and created again under its name) is deleted, with
//!   its PodTemplates;
//! - a gang that asks and has an open request (`Accepted`, `Provisioned`, or nothing said yet)
//!   keeps it, and its members asked for carry the autoscaler's consume annotations
//!   (`autoscaling.x-k8s.io/consume-provisioning-request`, `…/provisioning-class-name`), as each
//!   pod says it does (not as this replica remembers);
//! - a request that ended — `Failed`, `CapacityRevoked` or `BookingExpired` (from the time of
//!   that condition), or open longer than `maxWaitSeconds` (from its creation) — is kept, as the
//!   record of the failure, until the policy's backoff for its attempt has passed; then it is
//!   deleted and the next attempt asked;
//! - a gang that asks and has none gets attempt one more than any request of its name that
//!   exists.
//!
//! A request is written as its PodTemplates first (`{request}-{i}`), then the request
//! (`{gang}-{attempt}`), each owned by the gang's owner (the member pods' controller, else the
//! `Gang` object) so garbage collection removes them with the workload; PodTemplates of a gang
//! with no owner are swept once their request is gone. A name already taken (409) is taken as
//! this request only if the object there is ours, for this gang and incarnation, and (for the
//! request) asks for the same pods; otherwise the attempt after it is used.
//!
//! While a request is open, the gang's message says `waiting for capacity: ProvisioningRequest
//! ns/name (class)` and, unless the policy says `countWaitInTimeout`, its timeout does not run.
//! `Provisioned` needs nothing more: the new nodes enter the snapshot and the cycle places the gang
//! whole. A cluster without the ProvisioningRequest CRD answers 404: the feature reports itself
//! disabled (a log line, `gang_provisioning_enabled 0`, and each asking gang's status message
//! starting with [`DISABLED`]) and tries again after the scheduler's discovery period (30 s), as
//! the gang CRDs are discovered, so a CRD installed later is picked up.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use scheduler_core::Config;
use scheduler_core::config::Provisioning;
use scheduler_core::labels::{ANNOTATION_CONSUME_PROVISIONING_REQUEST, ANNOTATION_PROVISIONING_CLASS};
use scheduler_core::model::{GangKey, Snapshot, Time};
use scheduler_core::plan::{Plan, ProvisioningAsk};
use scheduler_core::provision::{RequestState as State, capacity_line, request_state as state_of};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::apply::{Http, may_send};
use crate::clock::wall_clock;
use crate::index::Index;
use crate::lease::Standing;

/// What an asking gang's message starts with while the ProvisioningRequest API is not served.
pub const DISABLED: &str =
    "capacity requests disabled: the ProvisioningRequest API (autoscaling.x-k8s.io/v1) is not served";

/// The label selector of the requests and PodTemplates this scheduler writes (and watches).
const MANAGED: &str = "app.kubernetes.io/managed-by=gang-scheduler";

/// Annotation on the requests and PodTemplates written: the name of the gang (in the object's
/// namespace) they are for.
pub const ANNOTATION_GANG_NAME: &str = "kube-gang.io/gang-name";
/// Annotation on the requests and PodTemplates written: the incarnation of the gang they are for
/// (see [`incarnation`]).
pub const ANNOTATION_INCARNATION: &str = "kube-gang.io/gang-incarnation";
/// Annotation on the requests written: the attempt number.
pub const ANNOTATION_ATTEMPT: &str = "kube-gang.io/attempt";
/// Annotation on the PodTemplates written: the request they belong to.
pub const ANNOTATION_REQUEST: &str = "kube-gang.io/provisioning-request";

/// How old a PodTemplate of ours must be, with no request of its own, before it is swept: a
/// template is written a moment before its request.
const SWEEP_AFTER: Duration = Duration::from_secs(60);

const GROUP_VERSION: &str = "autoscaling.x-k8s.io/v1";

/// A request of ours, as the watch last showed it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    name: String,
    namespace: String,
    /// The gang's name (its namespace is the request's).
    gang: String,
    incarnation: String,
    attempt: u32,
    class: String,
    state: State,
    /// When the ending condition became true (its `lastTransitionTime`), if it did.
    ended_at: Option<Time>,
    created: Time,
    /// How many PodTemplates it names (`{name}-{i}`).
    templates: usize,
    /// Its `podSets` as written: what a 409 on its name compares with.
    pod_sets: Value,
    deleting: bool,
}

impl Seen {
    fn of(o: &Value) -> Option<Seen> {
        let s = |p: &str| o.pointer(p).and_then(Value::as_str);
        let annotation =
            |k: &str| o.pointer("/metadata/annotations").and_then(|a| a.get(k)).and_then(Value::as_str);
        let name = s("/metadata/name")?.to_string();
        let attempt = annotation(ANNOTATION_ATTEMPT)
            .and_then(|a| a.parse().ok())
            .or_else(|| name.rsplit_once('-').and_then(|(_, n)| n.parse().ok()))
            .unwrap_or(0);
        let state = state_of(o);
        let ended_at = match state {
            State::Ended(ty) => o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["type"] == ty))
                .and_then(|c| c["lastTransitionTime"].as_str())
                .and_then(|t| Time::parse_rfc3339(t).ok()),
            _ => None,
        };
        let pod_sets = o.pointer("/spec/podSets").cloned().unwrap_or(Value::Null);
        Some(Seen {
            namespace: s("/metadata/namespace").unwrap_or("default").to_string(),
            gang: annotation(ANNOTATION_GANG_NAME).unwrap_or("").to_string(),
            incarnation: annotation(ANNOTATION_INCARNATION).unwrap_or("").to_string(),
            attempt,
            class: s("/spec/provisioningClassName").unwrap_or("").to_string(),
            state,
            ended_at,
            created: s("/metadata/creationTimestamp")
                .and_then(|t| Time::parse_rfc3339(t).ok())
                .unwrap_or_default(),
            templates: pod_sets.as_array().map_or(0, Vec::len),
            pod_sets,
            deleting: o.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()),
            name,
        })
    }

    fn is_of(&self, gang: &GangKey) -> bool {
        self.namespace == gang.namespace && self.gang == gang.name
    }

    /// When it ended, if it did: its ending condition, or `maxWaitSeconds` after its creation
    /// without being provisioned.
    fn ended(&self, policy: &Provisioning) -> Option<(Time, String)> {
        match self.state {
            State::Ended(why) => Some((self.ended_at.unwrap_or(self.created), why.to_string())),
            State::Waiting => {
                let wait = policy.max_wait?;
                Some((self.created.plus(wait), "not provisioned within maxWaitSeconds".into()))
            }
            State::Provisioned => None,
        }
        .filter(|(at, _)| !matches!(self.state, State::Waiting) || *at <= wall_clock())
    }
}

/// A PodTemplate of ours, as the watch last showed it.
#[derive(Clone, Debug)]
struct Template {
    request: String,
    created: Time,
}

/// What the watches of our requests and PodTemplates show, and whether each has listed once.
#[derive(Debug, Default)]
struct Shown {
    requests: BTreeMap<Key, Seen>,
    templates: BTreeMap<Key, Template>,
    requests_listed: bool,
    templates_listed: bool,
}

/// Follows the requests and PodTemplates this scheduler manages until dropped: two watches, off
/// the loop.
#[derive(Debug)]
struct Follow {
    shown: Arc<Mutex<Shown>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Follow {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// An object's namespace and name.
type Key = (String, String);

/// What one watch event says of the objects it follows.
enum Change<T> {
    /// A (re-)list: everything there is.
    Listed(BTreeMap<Key, T>),
    Put(Key, T),
    Gone(Key),
}

impl<T> Change<T> {
    /// Applies the change to `held`; whether it was a list.
    fn apply(self, held: &mut BTreeMap<Key, T>) -> bool {
        match self {
            Change::Listed(all) => {
                *held = all;
                return true;
            }
            Change::Put(k, v) => {
                held.insert(k, v);
            }
            Change::Gone(k) => {
                held.remove(&k);
            }
        }
        false
    }
}

/// Pumps one watch of objects of ours into `shown` through `file`, replacing what it holds at
/// each (re-)list.
fn follow<T: Send + 'static>(
    client: &kube::Client,
    resource: ApiResource,
    shown: Arc<Mutex<Shown>>,
    read: fn(&Value) -> Option<T>,
    file: fn(&mut Shown, Change<T>),
) -> tokio::task::JoinHandle<()> {
    let api: kube::Api<DynamicObject> = kube::Api::all_with(client.clone(), &resource);
    tokio::spawn(async move {
        let stream = watcher(api, watcher::Config::default().labels(MANAGED)).default_backoff();
        futures::pin_mut!(stream);
        let mut listing: BTreeMap<(String, String), T> = BTreeMap::new();
        while let Some(event) = stream.next().await {
            let key = |o: &DynamicObject| {
                (
                    o.metadata.namespace.clone().unwrap_or_default(),
                    o.metadata.name.clone().unwrap_or_default(),
                )
            };
            let value = |o: &DynamicObject| serde_json::to_value(o).ok().and_then(|v| read(&v));
            let change = match event {
                Ok(watcher::Event::Apply(o)) => match value(&o) {
                    Some(v) => Change::Put(key(&o), v),
                    None => Change::Gone(key(&o)),
                },
                Ok(watcher::Event::Delete(o)) => Change::Gone(key(&o)),
                Ok(watcher::Event::Init) => {
                    listing.clear();
                    continue;
                }
                Ok(watcher::Event::InitApply(o)) => {
                    if let Some(v) = value(&o) {
                        listing.insert(key(&o), v);
                    }
                    continue;
                }
                Ok(watcher::Event::InitDone) => Change::Listed(std::mem::take(&mut listing)),
                Err(e) => {
                    tracing::debug!(error = %e, "watch of capacity requests failed; retrying");
                    continue;
                }
            };
            let Ok(mut s) = shown.lock() else { return };
            file(&mut s, change);
        }
    })
}

impl Follow {
    fn start(client: &kube::Client) -> Self {
        let shown = Arc::new(Mutex::new(Shown::default()));
        let requests = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("autoscaling.x-k8s.io", "v1", "ProvisioningRequest"),
            "provisioningrequests",
        );
        let templates = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("", "v1", "PodTemplate"),
            "podtemplates",
        );
        let tasks = vec![
            follow(client, requests, shown.clone(), Seen::of, |s, change| {
                s.requests_listed |= change.apply(&mut s.requests);
            }),
            follow(
                client,
                templates,
                shown.clone(),
                |o| {
                    let name = o.pointer("/metadata/name").and_then(Value::as_str)?;
                    let request = o
                        .pointer("/metadata/annotations")
                        .and_then(|a| a.get(ANNOTATION_REQUEST))
                        .and_then(Value::as_str)
                        .map(String::from)
                        .or_else(|| name.rsplit_once('-').map(|(r, _)| r.to_string()))?;
                    let created = o
                        .pointer("/metadata/creationTimestamp")
                        .and_then(Value::as_str)
                        .and_then(|t| Time::parse_rfc3339(t).ok())
                        .unwrap_or_default();
                    Some(Template { request, created })
                },
                |s, change| {
                    s.templates_listed |= change.apply(&mut s.templates);
                },
            ),
        ];
        Follow { shown, tasks }
    }

    /// The requests of ours as the watch shows them, once it has listed them (`None` before).
    fn requests(&self) -> Option<Vec<Seen>> {
        let s = self.shown.lock().ok()?;
        s.requests_listed.then(|| s.requests.values().cloned().collect())
    }

    /// Our PodTemplates whose request does not exist and that are older than [`SWEEP_AFTER`]
    /// (`namespace`, `name`), once both watches have listed.
    fn orphans(&self, now: Time) -> Vec<Key> {
        let Ok(s) = self.shown.lock() else { return Vec::new() };
        if !(s.requests_listed && s.templates_listed) {
            return Vec::new();
        }
        s.templates
            .iter()
            .filter(|((ns, _), t)| {
                !s.requests.contains_key(&(ns.clone(), t.request.clone()))
                    && now.since(t.created) >= SWEEP_AFTER
            })
            .map(|(k, _)| k.clone())
            .collect()
    }
}

/// The request's name for a gang's `attempt`-th ask: a DNS-1123 subdomain that leaves room for
/// the templates' `-{i}` suffix.
pub fn request_name(gang: &GangKey, attempt: u32) -> String {
    let mut base: String = gang.name.chars().take(200).collect();
    while base.ends_with(['-', '.']) {
        base.pop();
    }
    format!("{base}-{attempt}")
}

/// The controller of the first asked member (a Job, JobSet, …), as an owner reference.
fn controller(index: &Index, ask: &ProvisioningAsk) -> Option<Value> {
    let pod = ask.pod_sets.first()?.pods.first()?;
    let raw = index.pod(pod)?;
    raw.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| refs.iter().find(|r| r["controller"] == true))
        .map(
            |r| json!({"apiVersion": r["apiVersion"], "kind": r["kind"], "name": r["name"], "uid": r["uid"]}),
        )
}

/// The owner the gang's objects are garbage-collected with: the first asked member's controller,
/// else the `Gang` object, else none.
fn owner(index: &Index, ask: &ProvisioningAsk) -> Option<Value> {
    if let Some(c) = controller(index, ask) {
        return Some(c);
    }
    let gang = index.gang(&ask.gang)?;
    let uid = gang.pointer("/metadata/uid")?.as_str()?;
    Some(json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "name": ask.gang.name, "uid": uid}))
}

/// Which incarnation of a gang asks: the uid of the object that defines it, else of its members'
/// controller (a Job created again under its name is another), else the gang's creation time (a
/// gang of bare pods: its oldest member's). A request of another incarnation is not this one's.
fn incarnation(index: &Index, snapshot: &Snapshot, ask: &ProvisioningAsk) -> String {
    let gang = snapshot.gangs.binary_search_by(|g| g.key.cmp(&ask.gang)).ok().map(|i| &snapshot.gangs[i]);
    if let Some(uid) = gang.and_then(|g| g.uid.clone()) {
        return uid;
    }
    if let Some(uid) = controller(index, ask).and_then(|c| c["uid"].as_str().map(String::from)) {
        return uid;
    }
    format!("created-{}", gang.map_or(0, |g| g.created.millis()))
}

/// A PodTemplate shaped as a member: its spec as the autoscaler must see it (requests, selectors,
/// affinity, tolerations), without what only a running pod has.
fn template(
    name: &str,
    namespace: &str,
    member: &Value,
    owner: Option<&Value>,
    annotations: &Value,
) -> Value {
    let mut spec = member.get("spec").cloned().unwrap_or_else(|| json!({}));
    if let Some(s) = spec.as_object_mut() {
        for gone in ["nodeName", "schedulingGates"] {
            s.remove(gone);
        }
    }
    let labels = member.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}));
    let mut meta = json!({"name": name, "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "gang-scheduler"}, "annotations": annotations});
    if let Some(o) = owner {
        meta["ownerReferences"] = json!([o]);
    }
    json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta,
           "template": {"metadata": {"labels": labels}, "spec": spec}})
}

/// One request to write: its name, PodTemplates and body.
#[derive(Debug)]
pub struct Written {
    pub name: String,
    pub templates: Vec<Value>,
    pub request: Value,
}

/// The objects one ask is written as (`attempt`, of gang incarnation `incarnation`): its
/// PodTemplates, then the ProvisioningRequest. `None` when a member to model a template on is not
/// in the index.
pub fn objects(
    index: &Index,
    ask: &ProvisioningAsk,
    policy: &Provisioning,
    attempt: u32,
    incarnation: &str,
) -> Option<Written> {
    let name = request_name(&ask.gang, attempt);
    let owner = owner(index, ask);
    let ns = &ask.gang.namespace;
    let mut templates = Vec::new();
    let mut pod_sets = Vec::new();
    for (i, set) in ask.pod_sets.iter().enumerate() {
        let model = set.pods.first()?;
        let member = index.pod(model)?;
        let tname = format!("{name}-{i}");
        let annotations = json!({ANNOTATION_GANG_NAME: ask.gang.name, ANNOTATION_INCARNATION: incarnation,
            ANNOTATION_REQUEST: name});
        templates.push(template(&tname, ns, member, owner.as_ref(), &annotations));
        pod_sets.push(json!({"podTemplateRef": {"name": tname}, "count": set.count}));
    }
    let mut meta = json!({"name": name, "namespace": ns,
        "labels": {"app.kubernetes.io/managed-by": "gang-scheduler",
                   "kube-gang.io/gang": scheduler_core::workload::label_value_for(&ask.gang.name)},
        "annotations": {ANNOTATION_GANG_NAME: ask.gang.name, ANNOTATION_INCARNATION: incarnation,
                        ANNOTATION_ATTEMPT: attempt.to_string()}});
    if let Some(o) = &owner {
        meta["ownerReferences"] = json!([o]);
    }
    let mut spec = json!({"provisioningClassName": ask.class, "podSets": pod_sets});
    if !policy.parameters.is_empty() {
        spec["parameters"] = json!(policy.parameters);
    }
    Some(Written {
        name,
        templates,
        request: json!({"apiVersion": GROUP_VERSION, "kind": "ProvisioningRequest", "metadata": meta, "spec": spec}),
    })
}

/// Writes and follows the plan's provisioning asks. Owned by the loop; the leader calls
/// [`Provisioner::annotate`] before a plan's writes are made and [`Provisioner::reconcile`] after.
/// It keeps nothing a restart could get wrong: what the requests say is read from them.
#[derive(Debug, Default)]
pub struct Provisioner {
    /// How long after a 404 (no ProvisioningRequest CRD) the API is tried again.
    retry_disabled: Duration,
    disabled_until: Option<Instant>,
    /// The watches of our requests and PodTemplates, once their API was found served.
    follow: Option<Follow>,
    /// Gang → an attempt whose name another object holds (a 409 not ours): the next ask is past
    /// it. Lost on a restart, which only costs that 409 again.
    taken: BTreeMap<GangKey, u32>,
    /// Gang → the request just written (its name, the gang's incarnation, when), until the watch
    /// shows it: the next cycle must not take its absence for no request. A hint only — after a
    /// restart the watch lists what exists.
    written: BTreeMap<GangKey, (String, String, Instant)>,
}

/// How long a request just written is waited for in the watch before its absence counts.
const WRITTEN_WAIT: Duration = Duration::from_secs(30);

impl Provisioner {
    /// A provisioner that looks for the ProvisioningRequest API again `retry_disabled` after
    /// finding it missing.
    pub fn new(retry_disabled: Duration) -> Self {
        Provisioner { retry_disabled, ..Provisioner::default() }
    }

    /// Whether the ProvisioningRequest API was found (false after a 404, until retried).
    pub fn enabled(&self) -> bool {
        self.disabled_until.is_none()
    }

    /// Says, in each gang's outcome, what its request is doing; and keeps the timeout from
    /// counting the wait for capacity unless the policy counts it: while a request is open, the
    /// gang's `waitingSince` is moved up to `now` whenever half its timeout has run (not every
    /// cycle: each move is a status write).
    pub fn annotate(&self, plan: &mut Plan, snapshot: &Snapshot, config: &Config, now: Time) {
        let Some(policy) = &config.provisioning else { return };
        if !self.enabled() {
            // The policy asks, the API is not there: each asking gang says so.
            for o in &mut plan.outcomes {
                if !o.reason.is_satisfied()
                    && plan.provisioning.binary_search_by(|a| a.gang.cmp(&o.gang)).is_ok()
                {
                    o.message = format!("{DISABLED}; {}", o.message);
                }
            }
            return;
        }
        let Some(requests) = self.follow.as_ref().and_then(Follow::requests) else { return };
        for o in &mut plan.outcomes {
            if o.reason.is_satisfied() {
                continue;
            }
            let Some(latest) =
                requests.iter().filter(|r| r.is_of(&o.gang) && !r.deleting).max_by_key(|r| r.attempt)
            else {
                continue;
            };
            let open = latest.ended(policy).is_none();
            let line = match latest.ended(policy) {
                None => capacity_line(&o.gang.namespace, &latest.name, &latest.class, latest.state)
                    .unwrap_or_default(),
                Some((_, why)) => {
                    format!("capacity request {} ended: {why}; asking again after backoff", latest.name)
                }
            };
            o.message = format!("{line}; {}", o.message);
            let timeout = snapshot
                .gangs
                .iter()
                .find(|g| g.key == o.gang)
                .and_then(|g| g.timeout)
                .or(config.default_timeout);
            if open
                && !policy.count_wait_in_timeout
                && let (Some(since), Some(t)) = (o.state.waiting_since, timeout)
                && now.since(since) >= t / 2
            {
                o.state.waiting_since = Some(now);
            }
        }
    }

    /// Brings the API in line with the plan's asks (see the module's documentation): deletes
    /// what no gang asks for, keeps what is open, asks again after an ended request's backoff,
    /// asks anew; and sweeps PodTemplates whose request is gone.
    pub async fn reconcile(
        &mut self,
        client: &kube::Client,
        standing: &watch::Receiver<Standing>,
        index: &Index,
        snapshot: &Snapshot,
        plan: &Plan,
        policy: Option<&Provisioning>,
    ) {
        let Some(policy) = policy else { return };
        let started = Instant::now();
        if self.disabled_until.is_some_and(|t| started < t) {
            return;
        }
        let api = Api { client, standing };
        if self.follow.is_none() {
            match api.served().await {
                Some(true) => self.follow = Some(Follow::start(client)),
                Some(false) => {
                    tracing::warn!(
                        "ProvisioningRequest API not served (autoscaling.x-k8s.io/v1): autoscaler-visible gangs are disabled until it is"
                    );
                    self.disabled_until = Some(started + self.retry_disabled);
                    return;
                }
                None => return,
            }
        }
        self.disabled_until = None;
        let Some(follow) = &self.follow else { return };
        // Until the watch has listed them, what exists is not known: nothing is written.
        let Some(requests) = follow.requests() else { return };
        let now = wall_clock();
        let wanted: BTreeMap<&GangKey, (&ProvisioningAsk, String)> =
            plan.provisioning.iter().map(|a| (&a.gang, (a, incarnation(index, snapshot, a)))).collect();

        // Requests no gang (no incarnation) asks for.
        for r in requests.iter().filter(|r| !r.deleting) {
            let key = GangKey::new(r.namespace.as_str(), r.gang.as_str());
            let asked = wanted.get(&key).is_some_and(|(_, inc)| *inc == r.incarnation);
            if !asked {
                api.delete_request(r).await;
                tracing::info!(request = %r.name, namespace = %r.namespace, gang = %key, "capacity request deleted: no gang asks for it");
            }
        }

        self.written.retain(|g, (name, inc, at)| {
            wanted.get(g).is_some_and(|(_, i)| i == inc)
                && at.elapsed() < WRITTEN_WAIT
                && !requests.iter().any(|r| r.is_of(g) && r.name == *name)
        });
        for (gang, (ask, inc)) in &wanted {
            let mine: Vec<&Seen> =
                requests.iter().filter(|r| r.is_of(gang) && r.incarnation == *inc && !r.deleting).collect();
            if mine.is_empty() && self.written.contains_key(*gang) {
                continue;
            }
            let next = match mine.iter().max_by_key(|r| r.attempt) {
                Some(latest) => match latest.ended(policy) {
                    None => {
                        api.consume(index, ask, &latest.name).await;
                        continue;
                    }
                    Some((at, why)) => {
                        let retry_at = at.plus(policy.backoff(latest.attempt));
                        if now < retry_at {
                            continue;
                        }
                        for r in &mine {
                            api.delete_request(r).await;
                        }
                        tracing::warn!(gang = %gang, request = %latest.name, reason = %why, "capacity request ended; asking again");
                        latest.attempt + 1
                    }
                },
                None => requests.iter().filter(|r| r.is_of(gang)).map(|r| r.attempt).max().unwrap_or(0) + 1,
            };
            let attempt = next.max(self.taken.get(*gang).map_or(0, |t| t + 1));
            let Some(written) = objects(index, ask, policy, attempt, inc) else { continue };
            match api.create(&gang.namespace, &written, &gang.name, inc).await {
                Created::Yes => {
                    tracing::info!(gang = %gang, request = %written.name, pods = ask.count(), class = %ask.class, "capacity requested");
                    self.taken.remove(*gang);
                    self.written.insert((*gang).clone(), (written.name.clone(), inc.clone(), Instant::now()));
                    api.consume(index, ask, &written.name).await;
                }
                Created::Taken => {
                    tracing::info!(gang = %gang, request = %written.name, "name taken by an object not ours for this gang; the next attempt asks");
                    self.taken.insert((*gang).clone(), attempt);
                }
                Created::NotServed => {
                    self.follow = None;
                    self.disabled_until = Some(started + self.retry_disabled);
                    return;
                }
                Created::No => {}
            }
        }
        self.taken.retain(|g, _| wanted.contains_key(g));
        for (ns, name) in follow.orphans(now) {
            let path = format!("/api/v1/namespaces/{ns}/podtemplates/{name}");
            let _ = api.send("DELETE", &path, JSON, None).await;
            tracing::info!(template = %name, namespace = %ns, "PodTemplate of a capacity request that is gone deleted");
        }
    }
}

enum Created {
    Yes,
    /// A name is held by an object that is not this request (or its template).
    Taken,
    /// 404 for the collection: the CRD is not installed.
    NotServed,
    No,
}

const JSON: &str = "application/json";

/// The few requests this module makes, each after the client's rate limiter and only while this
/// replica may act.
struct Api<'a> {
    client: &'a kube::Client,
    standing: &'a watch::Receiver<Standing>,
}

impl Api<'_> {
    async fn send(
        &self,
        method: &'static str,
        path: &str,
        content_type: &'static str,
        body: Option<&Value>,
    ) -> Option<Result<Value, kube::Error>> {
        let r =
            Http { method, path: path.to_string(), content_type, body: body.cloned().unwrap_or(Value::Null) };
        may_send(self.client, self.standing, &r).await
    }

    /// Whether the ProvisioningRequest API is served (`None`: could not tell).
    async fn served(&self) -> Option<bool> {
        let path = format!("/apis/{GROUP_VERSION}/provisioningrequests?limit=1");
        match self.send("GET", &path, JSON, None).await? {
            Ok(_) => Some(true),
            Err(kube::Error::Api(e)) if e.code == 404 => Some(false),
            Err(_) => None,
        }
    }

    /// Whether `existing` (an object found where ours was to be written) is ours for this gang
    /// incarnation, annotation `key` saying `value`.
    fn ours(existing: &Value, gang: &str, incarnation: &str, key: &str, value: &str) -> bool {
        let label =
            existing.pointer("/metadata/labels/app.kubernetes.io~1managed-by").and_then(Value::as_str);
        let annotation = |k: &str| {
            existing.pointer("/metadata/annotations").and_then(|a| a.get(k)).and_then(Value::as_str)
        };
        label == Some("gang-scheduler")
            && annotation(ANNOTATION_GANG_NAME) == Some(gang)
            && annotation(ANNOTATION_INCARNATION) == Some(incarnation)
            && annotation(key) == Some(value)
            && existing.pointer("/metadata/deletionTimestamp").is_none_or(Value::is_null)
    }

    /// Writes the PodTemplates, then the request. A 409 is success only for an object that is
    /// this very one (ours, this gang and incarnation, and for the request the same pods and not
    /// ended); any other is [`Created::Taken`].
    async fn create(&self, ns: &str, w: &Written, gang: &str, incarnation: &str) -> Created {
        let requests = format!("/apis/{GROUP_VERSION}/namespaces/{ns}/provisioningrequests");
        let templates = format!("/api/v1/namespaces/{ns}/podtemplates");
        for t in &w.templates {
            match self.send("POST", &templates, JSON, Some(t)).await {
                Some(Ok(_)) => {}
                Some(Err(kube::Error::Api(e))) if e.code == 409 => {
                    let name = t.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
                    match self.send("GET", &format!("{templates}/{name}"), JSON, None).await {
                        Some(Ok(existing))
                            if Self::ours(&existing, gang, incarnation, ANNOTATION_REQUEST, &w.name) => {}
                        Some(Ok(_)) => return Created::Taken,
                        _ => return Created::No,
                    }
                }
                other => {
                    tracing::warn!(error = ?other.and_then(Result::err), "could not write a PodTemplate for a capacity request");
                    return Created::No;
                }
            }
        }
        match self.send("POST", &requests, JSON, Some(&w.request)).await {
            Some(Ok(_)) => Created::Yes,
            Some(Err(kube::Error::Api(e))) if e.code == 409 => {
                let attempt =
                    w.request.pointer("/metadata/annotations").and_then(|a| a.get(ANNOTATION_ATTEMPT));
                let attempt = attempt.and_then(Value::as_str).unwrap_or("");
                match self.send("GET", &format!("{requests}/{}", w.name), JSON, None).await {
                    Some(Ok(existing))
                        if Self::ours(&existing, gang, incarnation, ANNOTATION_ATTEMPT, attempt)
                            && existing.pointer("/spec/podSets") == w.request.pointer("/spec/podSets")
                            && !matches!(state_of(&existing), State::Ended(_)) =>
                    {
                        Created::Yes
                    }
                    Some(Ok(_)) => {
                        // The templates just written are for no request: gone with the name.
                        for t in &w.templates {
                            let name = t.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
                            let _ = self.send("DELETE", &format!("{templates}/{name}"), JSON, None).await;
                        }
                        Created::Taken
                    }
                    _ => Created::No,
                }
            }
            Some(Err(kube::Error::Api(e))) if e.code == 404 => Created::NotServed,
            other => {
                tracing::warn!(error = ?other.and_then(Result::err), "could not write a capacity request");
                Created::No
            }
        }
    }

    /// Deletes a request of ours and its PodTemplates (a 404 is fine: gone already).
    async fn delete_request(&self, r: &Seen) {
        let path =
            format!("/apis/{GROUP_VERSION}/namespaces/{}/provisioningrequests/{}", r.namespace, r.name);
        let _ = self.send("DELETE", &path, JSON, None).await;
        for i in 0..r.templates {
            let path = format!("/api/v1/namespaces/{}/podtemplates/{}-{i}", r.namespace, r.name);
            let _ = self.send("DELETE", &path, JSON, None).await;
        }
    }

    /// Marks the members `ask` asks for as consumers of `request`, as cluster-autoscaler reads
    /// it — those whose annotations (as the watch shows them) do not say so already.
    async fn consume(&self, index: &Index, ask: &ProvisioningAsk, request: &str) {
        for pod in ask.pod_sets.iter().flat_map(|s| &s.pods) {
            let says = |k: &str| {
                index
                    .pod(pod)
                    .and_then(|p| p.pointer("/metadata/annotations"))
                    .and_then(|a| a.get(k))
                    .and_then(Value::as_str)
            };
            if says(ANNOTATION_CONSUME_PROVISIONING_REQUEST) == Some(request)
                && says(ANNOTATION_PROVISIONING_CLASS) == Some(ask.class.as_str())
            {
                continue;
            }
            let patch = json!({"metadata": {"annotations": {
                ANNOTATION_CONSUME_PROVISIONING_REQUEST: request,
                ANNOTATION_PROVISIONING_CLASS: ask.class,
            }}});
            let path = format!("/api/v1/namespaces/{}/pods/{}", pod.namespace, pod.name);
            let _ = self.send("PATCH", &path, "application/merge-patch+json", Some(&patch)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_names_are_subdomains_with_room_for_templates() {
        assert_eq!(request_name(&GangKey::new("ml", "bert"), 3), "bert-3");
        let long = request_name(&GangKey::new("ml", format!("{}-x", "a".repeat(199))), 12);
        assert!(long.len() <= 253 - 4 && scheduler_core::labels::is_dns_subdomain(&long), "{long}");
        assert!(scheduler_core::labels::is_dns_subdomain(&format!("{long}-31")));
    }

    fn seen(name: &str, attempt: u32, state: State, ended_at: Option<Time>, created: Time) -> Seen {
        Seen {
            name: name.into(),
            namespace: "ml".into(),
            gang: "bert".into(),
            incarnation: "u1".into(),
            attempt,
            class: "best-effort-atomic-scale-up.autoscaling.x-k8s.io".into(),
            state,
            ended_at,
            created,
            templates: 1,
            pod_sets: Value::Null,
            deleting: false,
        }
    }

    #[test]
    fn a_request_ends_at_its_condition_or_after_the_longest_wait_from_its_creation() {
        let policy = Provisioning { max_wait: Some(Duration::from_secs(600)), ..Provisioning::default() };
        let long_ago = Time::from_secs(1_000);
        let failed = seen("bert-2", 2, State::Ended("Failed"), Some(Time::from_secs(1_500)), long_ago);
        assert_eq!(failed.ended(&policy), Some((Time::from_secs(1_500), "Failed".to_string())));
        let waited = seen("bert-3", 3, State::Waiting, None, long_ago);
        assert_eq!(
            waited.ended(&policy),
            Some((Time::from_secs(1_600), "not provisioned within maxWaitSeconds".to_string()))
        );
        let fresh = seen("bert-4", 4, State::Waiting, None, wall_clock());
        assert_eq!(fresh.ended(&policy), None, "open");
        let provisioned = seen("bert-5", 5, State::Provisioned, None, long_ago);
        assert_eq!(provisioned.ended(&policy), None, "provisioned: the gang places itself");
        let no_limit = Provisioning { max_wait: None, ..policy };
        assert_eq!(waited.ended(&no_limit), None);
    }

    #[test]
    fn a_request_is_read_back_from_what_it_says() {
        let r = json!({"apiVersion": GROUP_VERSION, "kind": "ProvisioningRequest",
            "metadata": {"name": "bert-7", "namespace": "ml", "creationTimestamp": "2026-11-22T09:00:00Z",
                "labels": {"app.kubernetes.io/managed-by": "gang-scheduler", "kube-gang.io/gang": "bert"},
                "annotations": {ANNOTATION_GANG_NAME: "bert", ANNOTATION_INCARNATION: "u1", ANNOTATION_ATTEMPT: "7"}},
            "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                     "podSets": [{"podTemplateRef": {"name": "bert-7-0"}, "count": 2},
                                 {"podTemplateRef": {"name": "bert-7-1"}, "count": 1}]},
            "status": {"conditions": [{"type": "BookingExpired", "status": "True", "lastTransitionTime": "2026-11-22T09:10:00Z"}]}});
        let s = Seen::of(&r).unwrap();
        assert_eq!((s.gang.as_str(), s.incarnation.as_str(), s.attempt, s.templates), ("bert", "u1", 7, 2));
        assert_eq!(s.state, State::Ended("BookingExpired"));
        assert_eq!(s.ended_at, Time::parse_rfc3339("2026-11-22T09:10:00Z").ok());
        assert!(s.is_of(&GangKey::new("ml", "bert")) && !s.is_of(&GangKey::new("other", "bert")));
    }

    #[test]
    fn templates_whose_request_is_gone_are_swept_once_old_enough() {
        let now = wall_clock();
        let long_ago = Time::from_secs(1_000);
        let template = |request: &str, created| Template { request: request.into(), created };
        let mut shown = Shown::default();
        shown
            .requests
            .insert(("ml".into(), "bert-1".into()), seen("bert-1", 1, State::Waiting, None, long_ago));
        shown.templates.insert(("ml".into(), "bert-1-0".into()), template("bert-1", long_ago));
        shown.templates.insert(("ml".into(), "bert-2-0".into()), template("bert-2", long_ago));
        shown.templates.insert(("ml".into(), "bert-3-0".into()), template("bert-3", now));
        shown.templates.insert(("other".into(), "bert-1-0".into()), template("bert-1", long_ago));
        let follow = Follow { shown: Arc::new(Mutex::new(shown)), tasks: Vec::new() };
        assert_eq!(follow.orphans(now), [], "nothing before both watches listed");
        follow.shown.lock().unwrap().requests_listed = true;
        follow.shown.lock().unwrap().templates_listed = true;
        assert_eq!(
            follow.orphans(now),
            [("ml".to_string(), "bert-2-0".to_string()), ("other".to_string(), "bert-1-0".to_string())],
            "a template whose request is gone (in its own namespace); not one just written"
        );
    }

    #[test]
    fn an_open_request_is_named_in_the_message_and_its_wait_is_not_counted_unless_the_policy_says() {
        use scheduler_core::model::{Dialect, Gang, GangState, Source};
        use scheduler_core::plan::{Counts, Outcome, Phase, Reason};
        let key = GangKey::new("ml", "bert");
        let mut gang = Gang::new(key.clone(), 2, Source { dialect: Dialect::KubeGang, kind: "Gang".into() });
        gang.timeout = Some(Duration::from_secs(60));
        let snapshot = Snapshot { gangs: vec![gang], ..Snapshot::default() };
        let now = Time::from_secs(1_000);
        let plan = |since: i64| Plan {
            outcomes: vec![Outcome {
                gang: key.clone(),
                reason: Reason::Unschedulable,
                phase: Phase::Pending,
                message: "room for 1 of the 2 members needed".into(),
                counts: Counts::default(),
                state: GangState { waiting_since: Some(Time::from_secs(since)), ..GangState::default() },
                waited_since: None,
                expected_start: None,
                held_nodes: Vec::new(),
                backfilled: false,
            }],
            ..Plan::default()
        };
        let shown = Arc::new(Mutex::new(Shown::default()));
        {
            let mut s = shown.lock().unwrap();
            s.requests.insert(
                ("ml".into(), "bert-1".into()),
                seen("bert-1", 1, State::Waiting, None, wall_clock()),
            );
            s.requests_listed = true;
        }
        let p = Provisioner {
            retry_disabled: Duration::from_secs(30),
            follow: Some(Follow { shown: shown.clone(), tasks: Vec::new() }),
            ..Provisioner::default()
        };
        let mut config = Config { provisioning: Some(Provisioning::default()), ..Config::default() };

        let mut early = plan(990);
        p.annotate(&mut early, &snapshot, &config, now);
        assert_eq!(
            early.outcomes[0].message,
            "waiting for capacity: ProvisioningRequest ml/bert-1 (best-effort-atomic-scale-up.autoscaling.x-k8s.io); room for 1 of the 2 members needed"
        );
        assert_eq!(
            early.outcomes[0].state.waiting_since,
            Some(Time::from_secs(990)),
            "moved only at half the timeout"
        );
        let mut late = plan(960);
        p.annotate(&mut late, &snapshot, &config, now);
        assert_eq!(late.outcomes[0].state.waiting_since, Some(now), "the wait for capacity is not counted");
        config.provisioning.as_mut().unwrap().count_wait_in_timeout = true;
        let mut counted = plan(960);
        p.annotate(&mut counted, &snapshot, &config, now);
        assert_eq!(counted.outcomes[0].state.waiting_since, Some(Time::from_secs(960)));
        // Ended: the message says so, and the wait counts again.
        shown.lock().unwrap().requests.insert(
            ("ml".into(), "bert-2".into()),
            seen("bert-2", 2, State::Ended("Failed"), Some(now), wall_clock()),
        );
        let mut ended = plan(960);
        p.annotate(&mut ended, &snapshot, &config, now);
        assert!(
            ended.outcomes[0]
                .message
                .starts_with("capacity request bert-2 ended: Failed; asking again after backoff")
        );
        // Off: nothing said, nothing moved.
        let mut off = plan(960);
        p.annotate(&mut off, &snapshot, &Config::default(), now);
        assert_eq!(off, plan(960));
    }
}
