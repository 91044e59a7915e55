//! Applying a plan: the typed writes (bindings, evictions, status changes, events) that carry it
//! out — built as plain data here, turned into HTTP only when sent ([`Http`]) — so tests assert on
//! what the API server would receive without a cluster, and the loop dispatches each kind of
//! write by its type.
//!
//! Status writes are left out when the object already says the same ([`Current`]: as the watch
//! last reported it, with the writes sent and not yet seen there laid over it): a write comes
//! back as a watch event, which starts a cycle, which would write again — a loop that would keep
//! the API server busy with every pending pod of every waiting gang.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, PodCondition};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{self as meta, MicroTime, ObjectMeta};
use scheduler_core::cluster::{GANG, POD};
use scheduler_core::crd::GangStatus;
use scheduler_core::model::{Gang, GangKey, Pod, PodKey, Snapshot, Time};
use scheduler_core::object::ObjectRef;
use scheduler_core::plan::{Binding, Eviction, EvictionReason, Keep, Outcome};
use scheduler_core::{Plan, Reason};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ratelimit::Guard;

/// A binding to send, with the gang it completes (`None`: a pod outside any gang).
#[derive(Clone, Debug, PartialEq)]
pub struct Bind {
    pub binding: Binding,
    pub gang: Option<GangKey>,
}

/// A change to an object's status subresource, conditional on the object being as the index last
/// saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusWrite {
    pub target: Target,
    /// The `resourceVersion` the write was computed from: a write computed from an older view —
    /// still queued when the pod was bound, say — is refused with a 409 instead of overwriting
    /// what happened since.
    pub resource_version: Option<String>,
    pub change: StatusChange,
}

/// What a [`StatusWrite`] changes.
#[derive(Clone, Debug, PartialEq)]
pub enum StatusChange {
    /// A pod's `status.nominatedNodeName` (preemption made room on that node).
    Nominate(String),
    /// A pod's condition (`PodScheduled=False` with the gang's reason and message), merged by type.
    Condition(Box<PodCondition>),
    /// A `Gang`'s whole status, replacing `previous` (fields it no longer has are removed).
    Gang { status: Box<GangStatus>, previous: Option<Box<GangStatus>> },
    /// The gang state kept on a member pod (annotation `kube-gang.io/state`), written to the pod
    /// of this UID only.
    Keep(Box<Keep>),
    /// A gang object's `status.phase`, from `Pending` to the one its controllers wait for.
    Phase(&'static str),
    /// A Grove PodGang's status fields as the scheduler reports them (`phase`, the whole
    /// `conditions` list with its `Scheduled` condition, `placementScore`), merged.
    Report(Box<Value>),
}

/// Everything that applies a plan, by kind, each in the order it should be sent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Writes {
    /// Sent first, as gangs (bounded concurrency).
    pub bindings: Vec<Bind>,
    /// Sent off the loop, each victim with its own backoff.
    pub evictions: Vec<Eviction>,
    /// Nominations, pod conditions and Gang statuses, sent in the background.
    pub statuses: Vec<StatusWrite>,
    pub events: Vec<Event>,
}

/// The object a status write changes: a pod's status, one of kube-gang's own `Gang`s, the gang
/// state a pod keeps (its metadata), or a Volcano PodGroup moved out of `Pending` so its
/// controller creates the pods ([`enqueue`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    Pod(PodKey),
    Gang(GangKey),
    Kept(PodKey),
    Enqueue(GangKey),
    /// A Grove PodGang's status, where the scheduler reports scheduling in Grove's terms
    /// ([`podgang_status`]).
    Report(GangKey),
}

impl Target {
    /// Its identity in the index.
    pub fn object_ref(&self) -> ObjectRef {
        match self {
            Target::Pod(k) | Target::Kept(k) => {
                ObjectRef::of_kind(&POD, k.namespace.as_str(), k.name.as_str())
            }
            Target::Gang(k) => ObjectRef::of_kind(&GANG, k.namespace.as_str(), k.name.as_str()),
            Target::Enqueue(k) => {
                ObjectRef::of_kind(volcano_podgroup(), k.namespace.as_str(), k.name.as_str())
            }
            Target::Report(k) => ObjectRef::of_kind(podgang(), k.namespace.as_str(), k.name.as_str()),
        }
    }

    /// The write to another project's gang object that `r` is the object of, if any.
    pub fn foreign(r: &ObjectRef) -> Option<Target> {
        let key = GangKey::new(r.namespace.as_str(), r.name.as_str());
        if r.is(volcano_podgroup()) {
            Some(Target::Enqueue(key))
        } else if r.is(podgang()) {
            Some(Target::Report(key))
        } else {
            None
        }
    }
}

/// The path of the namespaced custom object `key` of `kind`.
fn object_path(kind: &scheduler_core::object::ApiKind, key: &GangKey) -> String {
    format!("/apis/{}/{}/namespaces/{}/{}/{}", kind.group, kind.version, key.namespace, kind.plural, key.name)
}

/// Grove's PodGang as the cluster view reads it (`scheduler.grove.io/v1alpha1`).
pub(crate) fn podgang() -> &'static scheduler_core::object::ApiKind {
    use scheduler_core::dialect::grove;
    static KIND: std::sync::OnceLock<&'static scheduler_core::object::ApiKind> = std::sync::OnceLock::new();
    KIND.get_or_init(|| {
        scheduler_core::cluster::READ
            .iter()
            .find(|k| k.group == grove::GROUP && k.kind == grove::KIND)
            .expect("the cluster view reads Grove PodGangs (dialect::GANG_KINDS)")
    })
}

/// Volcano's PodGroup as the cluster view reads it (`scheduling.volcano.sh/v1beta1`).
pub(crate) fn volcano_podgroup() -> &'static scheduler_core::object::ApiKind {
    use scheduler_core::dialect::volcano;
    static KIND: std::sync::OnceLock<&'static scheduler_core::object::ApiKind> = std::sync::OnceLock::new();
    KIND.get_or_init(|| {
        scheduler_core::cluster::READ
            .iter()
            .find(|k| k.group == volcano::GROUP && k.kind == "PodGroup")
            .expect("the cluster view reads Volcano PodGroups (dialect::GANG_KINDS)")
    })
}

/// Who reports events (`reportingController`); `reportingInstance` is the replica's Lease
/// holder identity.
pub const CONTROLLER: &str = "kube-gang.io/gang-scheduler";

/// `reportingInstance` of an event: at most 128 bytes, as the API server validates it.
pub const INSTANCE_MAX: usize = 128;

/// `note` of an event: at most 1 KiB, as the API server validates it.
pub const NOTE_MAX: usize = 1024;

/// A request as it goes over the wire: the one place where a typed write becomes a path and a
/// JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct Http {
    pub method: &'static str,
    pub path: String,
    /// `Content-Type` of the body.
    pub content_type: &'static str,
    pub body: Value,
}

/// Sends `r` if this replica may act (`None`: not sent). Leadership is checked before the
/// request waits for the client's rate limiter and again after the wait, right before sending
/// (the wait can be long): a [`Guard`] the limiter checks. Every write the scheduler makes goes
/// through here (the loop's, the reporter's, the provisioner's).
pub(crate) async fn may_send(
    client: &kube::Client,
    standing: &tokio::sync::watch::Receiver<crate::lease::Standing>,
    r: &Http,
) -> Option<Result<Value, kube::Error>> {
    if !standing.borrow().may_act() {
        return None;
    }
    match send(client, r, guard(standing)).await {
        Err(e) if crate::ratelimit::not_sent(&e) => None,
        sent => Some(sent),
    }
}

/// The check a write makes after the limiter's wait: this replica may still act.
pub(crate) fn guard(standing: &tokio::sync::watch::Receiver<crate::lease::Standing>) -> Guard {
    let standing = standing.clone();
    Guard::new(move || standing.borrow().may_act())
}

/// Sends `r` as it is; a `null` body is no body.
async fn send(client: &kube::Client, r: &Http, guard: Guard) -> Result<Value, kube::Error> {
    let body = if r.body.is_null() { Vec::new() } else { serde_json::to_vec(&r.body).unwrap_or_default() };
    let req = http::Request::builder()
        .method(r.method)
        .uri(&r.path)
        .header("content-type", r.content_type)
        .extension(guard)
        .body(body)
        .map_err(kube::Error::HttpError)?;
    client.request::<Value>(req).await
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// `POST pods/{name}/binding`, carrying the pod's UID so a recreated pod of the same name is not bound.
pub fn binding(b: &Binding) -> Http {
    Http {
        method: "POST",
        path: format!("/api/v1/namespaces/{}/pods/{}/binding", b.pod.namespace, b.pod.name),
        content_type: JSON,
        body: json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": b.pod.name, "namespace": b.pod.namespace, "uid": b.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": b.node},
        }),
    }
}

/// `POST pods/{name}/eviction` through the Eviction API (PodDisruptionBudgets apply), with a UID
/// precondition.
pub fn eviction(e: &Eviction) -> Http {
    Http {
        method: "POST",
        path: format!("/api/v1/namespaces/{}/pods/{}/eviction", e.pod.namespace, e.pod.name),
        content_type: JSON,
        body: json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": e.pod.name, "namespace": e.pod.namespace},
            "deleteOptions": {"preconditions": {"uid": e.uid}},
        }),
    }
}

/// `POST events` (events.k8s.io/v1).
pub fn event_request(e: &Event) -> Http {
    let namespace = e.metadata.namespace.as_deref().unwrap_or("default");
    Http {
        method: "POST",
        path: format!("/apis/events.k8s.io/v1/namespaces/{namespace}/events"),
        content_type: JSON,
        body: serde_json::to_value(e).unwrap_or(Value::Null),
    }
}

impl StatusWrite {
    /// The patch this write sends: the status change, plus the `resourceVersion` precondition.
    pub fn patch(&self) -> Value {
        let mut body = match &self.change {
            StatusChange::Nominate(node) => json!({"status": {"nominatedNodeName": node}}),
            StatusChange::Condition(c) => json!({"status": {"conditions": [c]}}),
            StatusChange::Gang { status, previous } => {
                let mut new = serde_json::to_value(status).unwrap_or_else(|_| json!({}));
                // A merge patch keeps what it does not name: name what went, as null.
                if let (Some(old), Some(m)) =
                    (previous.as_ref().and_then(|p| serde_json::to_value(p).ok()), new.as_object_mut())
                {
                    for k in old.as_object().into_iter().flat_map(|o| o.keys()) {
                        m.entry(k.clone()).or_insert(Value::Null);
                    }
                }
                json!({"status": new})
            }
            // The UID is a precondition: a pod created again under the name is not written.
            StatusChange::Keep(k) => json!({"metadata": {"uid": k.uid, "annotations": {
                scheduler_core::labels::ANNOTATION_STATE: k.text,
            }}}),
            StatusChange::Phase(phase) => json!({"status": {"phase": phase}}),
            StatusChange::Report(status) => json!({"status": status}),
        };
        if let Some(rv) = &self.resource_version {
            body["metadata"] = json!({"resourceVersion": rv});
        }
        body
    }

    /// The request: `PATCH …/status`, or the pod itself for the state it keeps.
    pub fn http(&self) -> Http {
        let (path, content_type) = match (&self.target, &self.change) {
            (Target::Kept(k), _) => (format!("/api/v1/namespaces/{}/pods/{}", k.namespace, k.name), MERGE),
            // Conditions merge by their type.
            (Target::Pod(k), StatusChange::Condition(_)) => {
                (format!("/api/v1/namespaces/{}/pods/{}/status", k.namespace, k.name), STRATEGIC)
            }
            (Target::Pod(k), _) => {
                (format!("/api/v1/namespaces/{}/pods/{}/status", k.namespace, k.name), MERGE)
            }
            (Target::Gang(k), _) => (
                format!(
                    "/apis/{}/{}/namespaces/{}/gangs/{}/status",
                    GANG.group, GANG.version, k.namespace, k.name
                ),
                MERGE,
            ),
            (Target::Report(k), _) => (format!("{}/status", object_path(podgang(), k)), MERGE),
            // Volcano's PodGroup CRD has no status subresource: its status is the object's.
            (Target::Enqueue(k), _) => (object_path(volcano_podgroup(), k), MERGE),
        };
        Http { method: "PATCH", path, content_type, body: self.patch() }
    }
}

/// What a pod's status says now, as far as the writes go: as the watch last reported it, with
/// the writes sent and not yet seen there laid over it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodNow<'a> {
    /// Of the version the watch reported.
    pub resource_version: Option<&'a str>,
    pub nominated: Option<&'a str>,
    /// Its `PodScheduled` condition.
    pub scheduled: Option<ConditionNow<'a>>,
}

/// A pod condition, as far as the writes go.
#[derive(Clone, Debug, PartialEq)]
pub struct ConditionNow<'a> {
    pub status: &'a str,
    pub reason: Option<&'a str>,
    pub message: Option<&'a str>,
    pub last_transition_time: Option<meta::Time>,
}

impl<'a> ConditionNow<'a> {
    /// A condition the scheduler wrote.
    pub fn of(c: &'a PodCondition) -> Self {
        ConditionNow {
            status: &c.status,
            reason: c.reason.as_deref(),
            message: c.message.as_deref(),
            last_transition_time: c.last_transition_time.clone(),
        }
    }
}

impl<'a> PodNow<'a> {
    /// What a raw pod says.
    pub fn of(pod: &'a Value) -> Self {
        let status = pod.get("status");
        let s = |v: Option<&'a Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_str);
        let scheduled = status
            .and_then(|st| st.get("conditions"))
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled")))
            .map(|c| ConditionNow {
                status: s(Some(c), "status").unwrap_or(""),
                reason: s(Some(c), "reason"),
                message: s(Some(c), "message"),
                last_transition_time: c
                    .get("lastTransitionTime")
                    .and_then(|t| meta::Time::deserialize(t).ok()),
            });
        PodNow {
            resource_version: s(pod.get("metadata"), "resourceVersion"),
            nominated: s(status, "nominatedNodeName"),
            scheduled,
        }
    }
}

/// What a `Gang`'s status says now (as [`PodNow`] for pods).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GangNow<'a> {
    pub resource_version: Option<&'a str>,
    pub generation: Option<i64>,
    pub status: Option<GangStatus>,
}

impl<'a> GangNow<'a> {
    /// What a raw `Gang` says (a status it cannot read is none).
    pub fn of(gang: &'a Value) -> Self {
        let meta = gang.get("metadata");
        GangNow {
            resource_version: meta.and_then(|m| m.get("resourceVersion")).and_then(Value::as_str),
            generation: meta.and_then(|m| m.get("generation")).and_then(Value::as_i64),
            status: gang.get("status").and_then(|s| GangStatus::deserialize(s).ok()),
        }
    }
}

/// The objects as the scheduler knows them, so that writes which would change nothing are left
/// out.
pub trait Current {
    /// What pod `key` says.
    fn pod(&self, key: &PodKey) -> PodNow<'_>;
    /// What the `Gang` object `key` says, if known.
    fn gang(&self, key: &GangKey) -> Option<GangNow<'_>>;
    /// Any raw object (a gang object of some dialect), if known.
    fn object(&self, r: &ObjectRef) -> Option<&Value>;
    /// Whether a write to another project's gang object ([`Target::Enqueue`],
    /// [`Target::Report`]) was sent and is not yet seen in the watch, or failed and is held back.
    fn writing(&self, _target: &Target) -> bool {
        false
    }
}

/// Nothing known: every write is sent (and no `Gang` status, for want of the object).
impl Current for () {
    fn pod(&self, _: &PodKey) -> PodNow<'_> {
        PodNow::default()
    }
    fn gang(&self, _: &GangKey) -> Option<GangNow<'_>> {
        None
    }
    fn object(&self, _: &ObjectRef) -> Option<&Value> {
        None
    }
}

/// A time as the API server stores a `metav1.Time`: to the second.
fn seconds(t: Time) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    Time(t.0.div_euclid(1000).saturating_mul(1000)).to_k8s()
}

/// `PodScheduled=False` with the gang's reason and message for `pod`, unless the pod (`current`)
/// already says exactly that. `lastTransitionTime` stays while the status stays `False`.
pub fn pod_scheduled_false(
    pod: &PodKey,
    outcome: &Outcome,
    current: &PodNow<'_>,
    now: Time,
) -> Option<StatusWrite> {
    let reason = if outcome.reason == Reason::Unschedulable {
        "Unschedulable".to_string()
    } else {
        format!("Gang{}", outcome.reason)
    };
    let message = format!("gang {}: {}", outcome.gang, outcome.message);
    let was = current.scheduled.as_ref().filter(|c| c.status == "False");
    if was.is_some_and(|c| c.reason == Some(reason.as_str()) && c.message == Some(message.as_str())) {
        return None;
    }
    let transition = was.and_then(|c| c.last_transition_time.clone()).unwrap_or_else(|| seconds(now));
    Some(StatusWrite {
        target: Target::Pod(pod.clone()),
        resource_version: current.resource_version.map(String::from),
        change: StatusChange::Condition(Box::new(PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some(reason),
            message: Some(message),
            last_transition_time: Some(transition),
            ..PodCondition::default()
        })),
    })
}

/// The `Gang` status for `outcome` (built by the core, the same type it is read with), unless
/// the object (`current`) already has it.
pub fn gang_status(outcome: &Outcome, current: &GangNow<'_>, now: Time) -> Option<StatusWrite> {
    let previous = current.status.as_ref();
    let status = outcome.gang_status(current.generation, previous, now);
    if previous == Some(&status) {
        return None;
    }
    Some(StatusWrite {
        target: Target::Gang(outcome.gang.clone()),
        resource_version: current.resource_version.map(String::from),
        change: StatusChange::Gang { status: Box::new(status), previous: previous.cloned().map(Box::new) },
    })
}

/// The moves of opted-in gang objects out of `Pending` (Volcano PodGroups to `Inqueue`), for
/// every gang of `snapshot` read from a kind whose controllers wait for it
/// ([`scheduler_core::dialect::enqueue_phase`]) and that the object says waits
/// ([`scheduler_core::dialect::volcano::awaits_enqueue`]); none that was sent and not yet seen.
/// Conditional on the object's `resourceVersion`: a PodGroup its controller or Volcano's scheduler
/// changed meanwhile is looked at again next cycle. One look-up per such gang.
pub fn enqueue(snapshot: &Snapshot, current: &impl Current) -> Vec<StatusWrite> {
    let mut out = Vec::new();
    for g in &snapshot.gangs {
        let Some(phase) = scheduler_core::dialect::enqueue_phase(g.source.dialect, &g.source.kind) else {
            continue;
        };
        let target = Target::Enqueue(g.key.clone());
        let Some(obj) = current.object(&target.object_ref()) else { continue };
        let namespace = snapshot.namespaces.get(g.key.namespace.as_str());
        let enabled = namespace.and_then(|l| l.get(scheduler_core::labels::LABEL_ENABLED));
        if !scheduler_core::dialect::volcano::awaits_enqueue(obj, enabled) || current.writing(&target) {
            continue;
        }
        out.push(StatusWrite {
            target,
            resource_version: obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(String::from),
            change: StatusChange::Phase(phase),
        });
    }
    out
}

/// What a Grove PodGang's status (`podgang`, as the API serves it) should say of `outcome`, in
/// Grove's terms (`scheduler/api/core/v1alpha1/podgang.go`), when it says something else:
/// - `phase`: `Running` once the gang's minimum runs, `Starting` once members are bound (or
///   being bound) short of that, else `Pending`; a completed or failed gang's phase is left;
/// - the `Scheduled` condition: `True` (reason `Scheduled`) once the minimum is placed, else
///   `False` with the gang's reason and message; its `lastTransitionTime` kept while its status
///   stays; the other conditions (Grove's operator writes `Initialized`) carried as they are,
///   since a merge patch replaces the list whole;
/// - `placementScore` (1.0 for the best placement): `score`, when given.
///
/// `None` when the object already says so. The write is conditional on its `resourceVersion`,
/// so a status Grove's operator changed meanwhile is read again first.
pub fn podgang_status(outcome: &Outcome, podgang: &Value, score: Option<f64>, now: Time) -> Option<Value> {
    use scheduler_core::plan::Phase;
    let current = podgang.get("status");
    let phase = match outcome.phase {
        Phase::Completed | Phase::Failed => current.and_then(|s| s.get("phase")).and_then(Value::as_str),
        Phase::Running => Some("Running"),
        Phase::Scheduled => Some("Starting"),
        _ if outcome.counts.bound > 0 => Some("Starting"),
        _ => Some("Pending"),
    }
    .unwrap_or("Pending");
    let (status, reason) = if outcome.reason.is_satisfied() {
        ("True", "Scheduled")
    } else {
        ("False", outcome.reason.as_str())
    };
    let message = scheduler_core::plan::within(&outcome.message, scheduler_core::plan::CONDITION_MESSAGE_MAX);
    let conditions = current.and_then(|s| s.get("conditions")).and_then(Value::as_array);
    let was =
        conditions.into_iter().flatten().find(|c| c.get("type").and_then(Value::as_str) == Some("Scheduled"));
    let generation = podgang.pointer("/metadata/generation").and_then(Value::as_i64);
    let same_condition = was.is_some_and(|c| {
        c.get("status").and_then(Value::as_str) == Some(status)
            && c.get("reason").and_then(Value::as_str) == Some(reason)
            && c.get("message").and_then(Value::as_str) == Some(message.as_str())
            && c.get("observedGeneration").and_then(Value::as_i64) == generation
    });
    let same_score =
        score.is_none() || current.and_then(|s| s.get("placementScore")).and_then(Value::as_f64) == score;
    if same_condition
        && same_score
        && current.and_then(|s| s.get("phase")).and_then(Value::as_str) == Some(phase)
    {
        return None;
    }
    let transition = was
        .filter(|c| c.get("status").and_then(Value::as_str) == Some(status))
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(seconds(now)));
    let mut scheduled = json!({"type": "Scheduled", "status": status, "reason": reason, "message": message,
                               "lastTransitionTime": transition});
    if let Some(g) = generation {
        scheduled["observedGeneration"] = json!(g);
    }
    let mut list: Vec<Value> = conditions
        .into_iter()
        .flatten()
        .filter(|c| c.get("type").and_then(Value::as_str) != Some("Scheduled"))
        .cloned()
        .collect();
    list.push(scheduled);
    let mut out = json!({"phase": phase, "conditions": list});
    if let Some(score) = score {
        out["placementScore"] = json!(score);
    }
    Some(out)
}

/// A placed gang's placement score as Grove's PodGang reports it (1.0 the best): one over the
/// domains of its preferred level (else its required one) that its members' nodes span — 1.0
/// when the whole gang is packed into one. `None` for a gang with neither level, or no member on
/// a node.
fn placement_score<'a>(
    gang: &Gang,
    nodes: impl Iterator<Item = &'a scheduler_core::model::Node>,
) -> Option<f64> {
    let key = gang.topology_preferred.as_deref().or(gang.topology_key.as_deref())?;
    // A node without the label is a domain of its own.
    let domains: HashSet<&str> =
        nodes.map(|n| n.labels.get(key).map_or(n.name.as_str(), String::as_str)).collect();
    (!domains.is_empty()).then(|| 1.0 / domains.len() as f64)
}

/// The write that keeps a gang's state on a member pod (the core chose which pods lack it).
pub fn keep(k: &Keep) -> StatusWrite {
    StatusWrite {
        target: Target::Kept(k.pod.clone()),
        resource_version: None,
        change: StatusChange::Keep(Box::new(k.clone())),
    }
}

/// An Event's name as client-go's recorder makes it, `{regarding}.{unix nanoseconds in hex}`,
/// the object's name cut so the whole stays a valid DNS-1123 subdomain (253 characters). A
/// `generateName` of `{pod}.` would be refused: the API server validates it as a name prefix,
/// which may end in `-` but not in `.`.
///
/// `time` is a cycle's clock, in milliseconds; the nanoseconds below it number the events this
/// process made, so that two events about one pod in one millisecond (two outcomes of one cycle,
/// or two cycles a millisecond apart) get distinct names, as client-go's nanosecond clock gives
/// them. The same name twice is refused by the API server (409 `AlreadyExists`): an event lost.
fn event_name(regarding: &str, time: Time) -> String {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let sequence = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 1_000_000;
    let suffix = format!(".{:x}", i128::from(time.0) * 1_000_000 + i128::from(sequence));
    let room = 253usize.saturating_sub(suffix.len());
    let mut end = regarding.len().min(room);
    while !regarding.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{suffix}", regarding[..end].trim_end_matches(['-', '.']))
}

/// An event (events.k8s.io/v1) about a pod, as the API server validates one: `eventTime` a
/// MicroTime (six fractional digits), `note` within 1 KiB, `regarding` naming the pod, `related`
/// the gang's object when it has one, `reportingInstance` this replica (`instance`, its Lease
/// holder identity, cut to 128 bytes).
pub fn event(
    pod: &Pod,
    related: Option<&ObjectReference>,
    instance: &str,
    type_: &str,
    reason: &str,
    note: &str,
    now: Time,
) -> Event {
    let micro = k8s_openapi::jiff::Timestamp::from_millisecond(now.0).unwrap_or_default();
    let mut end = instance.len().min(INSTANCE_MAX);
    while !instance.is_char_boundary(end) {
        end -= 1;
    }
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(&pod.key.name, now)),
            namespace: Some(pod.key.namespace.to_string()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(micro)),
        reporting_controller: Some(CONTROLLER.into()),
        reporting_instance: Some(instance[..end].to_string()),
        action: Some("Scheduling".into()),
        reason: Some(reason.into()),
        type_: Some(type_.into()),
        note: Some(scheduler_core::plan::within(note, NOTE_MAX)),
        regarding: Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.key.name.to_string()),
            namespace: Some(pod.key.namespace.to_string()),
            uid: Some(pod.uid.to_string()).filter(|u| !u.is_empty()),
            ..ObjectReference::default()
        }),
        related: related.cloned(),
        ..Event::default()
    }
}

/// A reference to the object a gang was read from (its `Gang` or PodGroup), as the watch last
/// reported it: an event's `related`. `None` for gangs of pod annotations, and for an object not
/// (or no longer) known.
pub fn gang_object(gang: &Gang, current: &impl Current) -> Option<ObjectReference> {
    let (key, kind) = (&gang.key, gang.source.kind.as_str());
    let group = scheduler_core::dialect::object_group(gang.source.dialect, kind)?;
    scheduler_core::cluster::READ.iter().filter(|k| k.group == group && k.kind == kind).find_map(|k| {
        let obj = current.object(&ObjectRef::of_kind(k, key.namespace.as_str(), key.name.as_str()))?;
        // The version of the copy held (one object may be served at two).
        let api_version = obj.get("apiVersion").and_then(Value::as_str).map(String::from);
        Some(ObjectReference {
            api_version: api_version.or_else(|| Some(format!("{}/{}", k.group, k.version))),
            kind: Some(kind.to_string()),
            name: Some(key.name.to_string()),
            namespace: Some(key.namespace.to_string()),
            uid: obj.pointer("/metadata/uid").and_then(Value::as_str).map(String::from),
            ..ObjectReference::default()
        })
    })
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

/// A preempting gang's outcome with what blocks its victims' evictions (`blocked`: victim → the
/// API server's reason, naming the PodDisruptionBudget): it waits in `Preempting` and says why.
fn with_blocked<'a>(o: &'a Outcome, plan: &Plan, blocked: &BTreeMap<PodKey, String>) -> Cow<'a, Outcome> {
    if o.reason != Reason::Preempting || blocked.is_empty() {
        return Cow::Borrowed(o);
    }
    let mut notes = plan
        .evictions
        .iter()
        .filter(|e| e.preemptor.as_ref() == Some(&o.gang))
        .filter_map(|e| blocked.get(&e.pod).map(|why| (e, why)));
    let Some((first, why)) = notes.next() else { return Cow::Borrowed(o) };
    let more = notes.count();
    let mut o = o.clone();
    o.message.push_str(&format!("; eviction of {} refused for now: {why}", first.pod));
    if more > 0 {
        o.message.push_str(&format!(" (and {more} more victim(s))"));
    }
    Cow::Owned(o)
}

/// Every write that applies `plan`, by kind. Writes that would change nothing, as `current`
/// tells, are left out. `blocked`: victims whose eviction the API server refuses for now, and why;
/// `instance`: this replica's identity, which its events report; `scheduler`: the scheduler name
/// this replica places pods for (another project's gang object is reported to only when one of
/// its members names it).
#[allow(clippy::too_many_arguments)]
pub fn writes(
    plan: &Plan,
    snapshot: &Snapshot,
    current: &impl Current,
    limiter: &mut EventLimiter,
    blocked: &BTreeMap<PodKey, String>,
    instance: &str,
    scheduler: &str,
    now: Time,
) -> Writes {
    // Each gang's members, in one pass over the pods (not one per gang).
    let mut members: HashMap<&GangKey, Vec<&Pod>> = HashMap::new();
    let mut gang_of: HashMap<&PodKey, &GangKey> = HashMap::new();
    for p in &snapshot.pods {
        if let Some(m) = &p.gang {
            members.entry(&m.gang).or_default().push(p);
            gang_of.insert(&p.key, &m.gang);
        }
    }
    let mut out = Writes {
        bindings: plan
            .bindings
            .iter()
            .map(|b| Bind { binding: b.clone(), gang: gang_of.get(&b.pod).map(|g| (*g).clone()) })
            .collect(),
        evictions: plan.evictions.clone(),
        ..Writes::default()
    };
    for n in &plan.nominations {
        let pod = current.pod(&n.pod);
        if pod.nominated != Some(n.node.as_str()) {
            out.statuses.push(StatusWrite {
                target: Target::Pod(n.pod.clone()),
                resource_version: pod.resource_version.map(String::from),
                change: StatusChange::Nominate(n.node.to_string()),
            });
        }
    }
    out.statuses.extend(plan.keep.iter().map(keep));
    out.statuses.extend(enqueue(snapshot, current));
    let binding_now: HashSet<&PodKey> = plan.bindings.iter().map(|b| &b.pod).collect();
    // This plan's nodes by gang, and the nodes by name, for the placement scores reported.
    let mut bound_now: HashMap<&GangKey, Vec<&str>> = HashMap::new();
    for b in &plan.bindings {
        if let Some(g) = gang_of.get(&b.pod) {
            bound_now.entry(*g).or_default().push(b.node.as_str());
        }
    }
    let mut node_index: Option<HashMap<&str, &scheduler_core::model::Node>> = None;
    for o in &plan.outcomes {
        let o = &*with_blocked(o, plan, blocked);
        let gang = snapshot.gangs.binary_search_by(|g| g.key.cmp(&o.gang)).ok().map(|i| &snapshot.gangs[i]);
        let of_gang = members.get(&o.gang).map_or(&[][..], Vec::as_slice);
        // Only kinds whose status the table says we write get one (our own Gang); other
        // dialects' objects belong to their controllers, and their state goes on the pods.
        if gang.is_some_and(|g| scheduler_core::dialect::writes_status(g.source.dialect, &g.source.kind))
            && let Some(obj) = current.gang(&o.gang)
        {
            out.statuses.extend(gang_status(o, &obj, now));
        }
        // Only a gang this scheduler places (Grove may hand its PodGangs to KAI instead).
        let ours = of_gang.iter().any(|p| p.scheduler_name == scheduler);
        if let Some(g) =
            gang.filter(|g| ours && scheduler_core::dialect::reports_status(g.source.dialect, &g.source.kind))
        {
            let target = Target::Report(g.key.clone());
            if let Some(obj) = current.object(&target.object_ref()).filter(|_| !current.writing(&target)) {
                let score = if o.reason.is_satisfied() {
                    let nodes = node_index.get_or_insert_with(|| {
                        snapshot.nodes.iter().map(|n| (n.name.as_str(), n)).collect::<HashMap<_, _>>()
                    });
                    let on = of_gang
                        .iter()
                        .filter_map(|p| p.node_name.as_deref().filter(|_| p.uses_node()))
                        .chain(bound_now.get(&o.gang).into_iter().flatten().copied());
                    placement_score(g, on.filter_map(|n| nodes.get(n).copied()))
                } else {
                    None
                };
                if let Some(status) = podgang_status(o, obj, score, now) {
                    out.statuses.push(StatusWrite {
                        target,
                        resource_version: obj
                            .pointer("/metadata/resourceVersion")
                            .and_then(Value::as_str)
                            .map(String::from),
                        change: StatusChange::Report(Box::new(status)),
                    });
                }
            }
        }
        if !o.reason.is_satisfied() {
            for p in of_gang.iter().filter(|p| p.is_pending() && !binding_now.contains(&p.key)) {
                out.statuses.extend(pod_scheduled_false(&p.key, o, &current.pod(&p.key), now));
            }
        }
        let (type_, reason) = match o.reason {
            Reason::Scheduled => ("Normal", "Scheduled"),
            Reason::Unschedulable
            | Reason::TopologyUnsatisfiable
            | Reason::WaitingForResources
            | Reason::WaitingForPriority => ("Warning", "FailedScheduling"),
            Reason::Preempting => ("Normal", "Preempting"),
            Reason::TimedOut => ("Warning", "GangTimedOut"),
            Reason::Stale => ("Warning", "StaleGangEvicted"),
            _ => continue,
        };
        if !limiter.allow(&o.gang, reason, &o.message, now, Duration::from_secs(300)) {
            continue;
        }
        // Events are about the pods users look at: the first member (by name) carries them,
        // related to the gang's object.
        if let Some(p) = of_gang.iter().min_by(|a, b| a.key.cmp(&b.key)) {
            let related = gang.and_then(|g| gang_object(g, current));
            out.events.push(event(p, related.as_ref(), instance, type_, reason, &o.message, now));
        }
    }
    limiter.keep(|g| plan.outcome(g).is_some());
    let pods: HashMap<&PodKey, &Pod> = if plan.evictions.is_empty() {
        HashMap::new()
    } else {
        snapshot.pods.iter().map(|p| (&p.key, p)).collect()
    };
    for e in plan.evictions.iter().filter(|e| e.reason == EvictionReason::Preempted) {
        let note = format!(
            "preempted by gang {}",
            e.preemptor.as_ref().map_or_else(|| "?".to_string(), ToString::to_string)
        );
        // Regarding the victim, related to the gang that preempts it (kube-scheduler's Preempted
        // event is regarding the victim, related to the preemptor).
        if let Some(p) = pods.get(&e.pod) {
            let related = e.preemptor.as_ref().and_then(|g| {
                let i = snapshot.gangs.binary_search_by(|x| x.key.cmp(g)).ok()?;
                gang_object(&snapshot.gangs[i], current)
            });
            out.events.push(event(p, related.as_ref(), instance, "Normal", "Preempted", &note, now));
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
    fn events_about_one_pod_in_one_millisecond_have_distinct_names() {
        let now = Time(1_700_000_000_123);
        let (a, b) = (event_name("worker-0", now), event_name("worker-0", now));
        assert_ne!(a, b, "the API server refuses a second event of one name (409)");
        // Still the millisecond's nanoseconds, as client-go's recorder names them.
        let nanos = |n: &str| i128::from_str_radix(n.rsplit_once('.').unwrap().1, 16).unwrap();
        assert_eq!(nanos(&a) / 1_000_000, i128::from(now.0));
        assert_eq!(nanos(&b) / 1_000_000, i128::from(now.0));
        assert!(a.starts_with("worker-0.") && b.starts_with("worker-0."));
    }

    #[test]
    fn the_objects_written_are_the_kinds_watched() {
        // `run::resources()` watches exactly the core's `READ` list.
        let pod = Target::Pod(ObjectKey::new("ml", "p")).object_ref();
        let gang = Target::Gang(ObjectKey::new("ml", "g")).object_ref();
        let read = scheduler_core::cluster::READ;
        assert!(read.iter().any(|k| pod.is(k)) && read.iter().any(|k| gang.is(k)));
        // Other projects' objects written to are watched too (and so found for the paths).
        for t in [Target::Enqueue(ObjectKey::new("ml", "pg")), Target::Report(ObjectKey::new("ml", "pg"))] {
            let r = t.object_ref();
            assert!(read.iter().any(|k| r.is(k)), "{r:?}");
            assert_eq!(Target::foreign(&r), Some(t));
        }
        assert_eq!(
            (gang.api_version(), gang.namespace.as_str()),
            ("kube-gang.io/v1alpha1".to_string(), "ml")
        );
    }

    /// What the API server holds after `write` (a merge patch of a Gang's whole status).
    fn stored(gang: &Value, write: &StatusWrite) -> Value {
        let mut stored = gang.clone();
        if let StatusChange::Gang { status, .. } = &write.change {
            stored["status"] = serde_json::to_value(status).unwrap();
        }
        stored
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

    fn waiting(message: &str) -> Outcome {
        Outcome {
            gang: ObjectKey::new("ml", "g"),
            reason: Reason::Unschedulable,
            phase: Phase::Pending,
            message: message.into(),
            counts: Counts { members: 4, ..Counts::default() },
            state: GangState {
                waiting_since: Some(Time(100_250)),
                degraded_since: Some(Time::from_secs(50)),
                ..GangState::default()
            },
            waited_since: None,
            expected_start: None,
            held_nodes: Vec::new(),
            backfilled: false,
        }
    }

    #[test]
    fn gang_status_is_written_through_the_type_it_is_read_with() {
        let gang = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
            "metadata": {"name": "g", "namespace": "ml", "generation": 3, "resourceVersion": "17"},
            "spec": {"minMember": 4}});
        let o = waiting("needs 4 pods");
        let first = gang_status(&o, &GangNow::of(&gang), Time::from_secs(100)).expect("no status yet");
        let http = first.http();
        assert_eq!(http.path, "/apis/kube-gang.io/v1alpha1/namespaces/ml/gangs/g/status");
        assert_eq!(http.content_type, MERGE);
        assert_eq!(http.body["metadata"]["resourceVersion"], "17", "a precondition");
        let status = &http.body["status"];
        assert_eq!(status["observedGeneration"], 3);
        assert_eq!(status["waitingSince"], "1970-01-01T00:01:40Z", "to the second, as the API stores it");
        assert_eq!(status["conditions"][0]["reason"], "Unschedulable");
        // What the API then holds reads back as the same state, and asks for no new write.
        let stored = stored(&gang, &first);
        let read: GangStatus = serde_json::from_value(stored["status"].clone()).unwrap();
        let state = scheduler_core::dialect::kubegang::state_of(&read);
        assert_eq!(state.waiting_since, Some(Time::from_secs(100)));
        assert_eq!(state.degraded_since, Some(Time::from_secs(50)));
        let now = GangNow::of(&stored);
        assert_eq!(gang_status(&o, &now, Time::from_secs(500)), None, "nothing changed");
        // A new message keeps the transition time; a field that went is removed by the patch.
        let mut later = waiting("needs 5 pods");
        later.state.degraded_since = None;
        let again = gang_status(&later, &now, Time::from_secs(500)).expect("changed");
        let body = again.http().body;
        assert_eq!(body["status"]["conditions"][0]["lastTransitionTime"], "1970-01-01T00:01:40Z");
        assert_eq!(body["status"]["degradedSince"], Value::Null);
        assert!(body["status"].as_object().unwrap().contains_key("degradedSince"));
        // Placed: the condition turns True and its transition time moves.
        let placed = Outcome { reason: Reason::Scheduled, phase: Phase::Scheduled, ..later };
        let done = gang_status(&placed, &now, Time::from_secs(600)).expect("changed").http().body;
        assert_eq!(done["status"]["conditions"][0]["status"], "True");
        assert_eq!(done["status"]["conditions"][0]["lastTransitionTime"], "1970-01-01T00:10:00Z");
        // A condition's message stays within what the API server accepts (32 KiB).
        let long = Outcome { message: "é".repeat(20_000), ..placed };
        let body = gang_status(&long, &now, Time::from_secs(600)).expect("changed").http().body;
        let message = body["status"]["conditions"][0]["message"].as_str().unwrap();
        let max = scheduler_core::plan::CONDITION_MESSAGE_MAX;
        assert!(message.len() <= max && message.len() > max - 8 && message.ends_with('…'));
    }

    #[test]
    fn events_carry_a_micro_time_and_a_note_within_a_kibibyte() {
        let pod: Pod =
            serde_json::from_value(json!({"key": {"namespace": "ml", "name": "w-0"}, "uid": "u1"})).unwrap();
        // apimachinery's MicroTime: RFC 3339 with exactly six fractional digits.
        for (ms, want) in [(49_123, "1970-01-01T00:00:49.123000Z"), (49_000, "1970-01-01T00:00:49.000000Z")] {
            let e = event(&pod, None, "replica-a", "Warning", "FailedScheduling", "x", Time(ms));
            assert_eq!(event_request(&e).body["eventTime"], want);
        }
        let long = "é".repeat(2_000);
        let e = event(&pod, None, "replica-a", "Warning", "FailedScheduling", &long, Time(0));
        let http = event_request(&e);
        let note = http.body["note"].as_str().unwrap();
        assert!(note.len() <= NOTE_MAX && note.len() > NOTE_MAX - 8, "{} bytes", note.len());
        assert!(note.ends_with('…'));
        assert_eq!(http.path, "/apis/events.k8s.io/v1/namespaces/ml/events");
        assert_eq!(http.body["regarding"]["uid"], "u1");
        // `{regarding}.{unix nanoseconds in hex}`: at time 0, the nanoseconds below the first
        // millisecond number the events made.
        let name = http.body["metadata"]["name"].as_str().unwrap();
        let nanos = name.strip_prefix("w-0.").map(|n| i64::from_str_radix(n, 16));
        assert!(nanos.is_some_and(|n| n.is_ok_and(|n| (0..1_000_000).contains(&n))), "{name}");
        for field in ["reportingController", "reportingInstance", "action", "reason", "type"] {
            assert!(http.body[field].as_str().is_some_and(|v| !v.is_empty() && v.len() <= 128), "{field}");
        }
    }

    /// What the watches reported, for [`writes`]: a cluster of raw objects.
    struct Seen(scheduler_core::cluster::Cluster);

    impl Current for Seen {
        fn pod(&self, key: &PodKey) -> PodNow<'_> {
            self.0
                .held(&ObjectRef::of_kind(&POD, key.namespace.as_str(), key.name.as_str()))
                .map(PodNow::of)
                .unwrap_or_default()
        }
        fn gang(&self, key: &GangKey) -> Option<GangNow<'_>> {
            self.0
                .held(&ObjectRef::of_kind(&GANG, key.namespace.as_str(), key.name.as_str()))
                .map(GangNow::of)
        }
        fn object(&self, r: &ObjectRef) -> Option<&Value> {
            self.0.held(r)
        }
    }

    #[test]
    fn events_are_related_to_the_gang_object_and_report_the_replica() {
        use kube_gang_tests::{gang, gang_pod, node};
        let mut cluster = scheduler_core::cluster::Cluster::new();
        let mut objects = vec![node("n1", "64", 8, &[]), gang("ml", "big", 2)];
        objects[1]["metadata"]["uid"] = json!("uid-big");
        // A kube-gang Gang that cannot fit, a Volcano PodGroup and an annotation gang that do.
        objects.extend([gang_pod("ml", "big-0", "big", 8), gang_pod("ml", "big-1", "big", 8)]);
        objects.push(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "vc", "namespace": "ml", "uid": "uid-vc"}, "spec": {"minMember": 1}}));
        let mut vc = gang_pod("ml", "vc-0", "unused", 1);
        vc["metadata"]["labels"] = json!({});
        vc["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": "vc"});
        let mut annotated = gang_pod("ml", "ann-0", "ann", 1);
        annotated["metadata"]["annotations"] = json!({"kube-gang.io/min-member": "1"});
        objects.extend([vc, annotated]);
        for o in objects {
            cluster.push(o).unwrap();
        }
        let snapshot = cluster.snapshot().snapshot;
        let now = Time::from_secs(1_800_000_000);
        let plan = scheduler_core::schedule(&snapshot, &scheduler_core::Config::default(), now);
        let seen = Seen(cluster);
        let mut limiter = EventLimiter::default();
        let w = writes(
            &plan,
            &snapshot,
            &seen,
            &mut limiter,
            &BTreeMap::new(),
            "gang-scheduler-7d9f-x2",
            "gang-scheduler",
            now,
        );
        let by_pod = |name: &str| {
            let e =
                w.events.iter().find(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name));
            e.unwrap_or_else(|| panic!("no event about {name}: {:#?}", w.events))
        };
        let big = serde_json::to_value(by_pod("big-0")).unwrap();
        assert_eq!(big["reason"], "FailedScheduling");
        assert_eq!(
            big["related"],
            json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "name": "big", "namespace": "ml",
                   "uid": "uid-big"})
        );
        assert_eq!(big["reportingInstance"], "gang-scheduler-7d9f-x2");
        assert_eq!(big["reportingController"], CONTROLLER);
        let vc = serde_json::to_value(by_pod("vc-0")).unwrap();
        assert_eq!(vc["reason"], "Scheduled");
        assert_eq!(
            vc["related"],
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "name": "vc",
                   "namespace": "ml", "uid": "uid-vc"})
        );
        // A gang of pod annotations has no object to relate to.
        assert_eq!(by_pod("ann-0").related, None);
        for e in &w.events {
            accepted(kube_gang_tests::validation::Kind::Event, "v1", &serde_json::to_value(e).unwrap(), "ml");
        }
    }

    /// A Grove PodGang is reported to only when this scheduler places its pods: with Grove's KAI
    /// backend its pods name `kai-scheduler`, and the PodGang's status is KAI's to write.
    #[test]
    fn a_podgang_is_reported_to_only_when_its_pods_are_ours() {
        use kube_gang_tests::{gang_pod, node};
        let report_writes = |scheduler: &str| {
            let mut cluster = scheduler_core::cluster::Cluster::new();
            cluster.push(node("n1", "64", 8, &[])).unwrap();
            cluster
                .push(json!({"apiVersion": "scheduler.grove.io/v1alpha1", "kind": "PodGang",
                    "metadata": {"name": "pg", "namespace": "ml", "resourceVersion": "4"},
                    "spec": {"podgroups": [{"name": "pg-w", "minReplicas": 1, "podReferences": []}]}}))
                .unwrap();
            let mut p = gang_pod("ml", "w-0", "unused", 1);
            p["metadata"]["labels"] = json!({"grove.io/podgang": "pg", "grove.io/podclique": "pg-w"});
            p["spec"]["schedulerName"] = json!(scheduler);
            cluster.push(p).unwrap();
            let snapshot = cluster.snapshot().snapshot;
            let now = Time::from_secs(1_800_000_000);
            let plan = scheduler_core::schedule(&snapshot, &scheduler_core::Config::default(), now);
            let seen = Seen(cluster);
            let w = writes(
                &plan,
                &snapshot,
                &seen,
                &mut EventLimiter::default(),
                &BTreeMap::new(),
                "r",
                "gang-scheduler",
                now,
            );
            w.statuses.into_iter().filter(|s| matches!(s.target, Target::Report(_))).collect::<Vec<_>>()
        };
        let ours = report_writes("gang-scheduler");
        assert_eq!(ours.len(), 1, "{ours:?}");
        assert_eq!(ours[0].resource_version.as_deref(), Some("4"));
        assert_eq!(ours[0].http().path, "/apis/scheduler.grove.io/v1alpha1/namespaces/ml/podgangs/pg/status");
        assert!(report_writes("kai-scheduler").is_empty(), "KAI's PodGang is KAI's to report");
    }

    /// The body as the strict fake API server (kube-apiserver's rules) would take it.
    fn accepted(kind: kube_gang_tests::validation::Kind, version: &str, obj: &Value, namespace: &str) {
        use kube_gang_tests::validation::{decode, validate};
        decode(kind, version, obj).unwrap_or_else(|e| panic!("{}: {obj:#}", e.message));
        validate(kind, "", obj, namespace).unwrap_or_else(|e| panic!("{}: {obj:#}", e.message));
    }

    #[test]
    fn events_are_what_the_api_server_accepts() {
        use kube_gang_tests::validation::{EVENT_NOTE_MAX, Kind, check_time};
        let long_name = "w".repeat(253);
        // Multi-byte characters around the cut: the note must stay within 1 KiB in bytes.
        let note = "é".repeat(3000);
        for (name, note, millis) in
            [("w-0", "short", 1_700_000_000_000), (long_name.as_str(), note.as_str(), 1_700_000_000_123)]
        {
            let pod: Pod =
                serde_json::from_value(json!({"key": {"namespace": "ml", "name": name}, "uid": "u1"}))
                    .unwrap();
            let instance = "r".repeat(200);
            let e = event(&pod, None, &instance, "Warning", "FailedScheduling", note, Time(millis));
            let body = event_request(&e).body;
            accepted(Kind::Event, "v1", &body, "ml");
            check_time(body["eventTime"].as_str().unwrap(), true).unwrap();
            let sent = body["note"].as_str().unwrap();
            assert!(sent.len() <= EVENT_NOTE_MAX, "{} bytes", sent.len());
            assert!(note.len() <= EVENT_NOTE_MAX || sent.ends_with('…'));
            assert_eq!(body["regarding"]["name"], name);
            assert_eq!(body["regarding"]["uid"], "u1");
            assert_eq!(body["reportingInstance"], "r".repeat(INSTANCE_MAX), "cut to what the API takes");
        }
    }

    #[test]
    fn status_writes_are_what_the_api_server_accepts() {
        use kube_gang_tests::validation::Kind;
        let o = Outcome {
            gang: ObjectKey::new("ml", "g"),
            reason: Reason::WaitingForGangGroup,
            phase: Phase::Pending,
            message: "x".repeat(40_000),
            counts: Counts { members: 4, ..Counts::default() },
            state: GangState { waiting_since: Some(Time(1_700_000_000_123)), ..GangState::default() },
            waited_since: None,
            expected_start: None,
            held_nodes: Vec::new(),
            backfilled: false,
        };
        let gang = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
                          "metadata": {"name": "g", "namespace": "ml", "generation": 3},
                          "spec": {"minMember": 1}});
        let write = gang_status(&o, &GangNow::of(&gang), Time(1_700_000_000_456)).expect("a first status");
        accepted(Kind::Gang, "v1alpha1", &stored(&gang, &write), "ml");
        let p = pod_scheduled_false(
            &ObjectKey::new("ml", "w-0"),
            &o,
            &PodNow::default(),
            Time(1_700_000_000_456),
        )
        .unwrap();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w-0", "namespace": "ml"},
                         "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": p.http().body["status"]});
        accepted(Kind::Pod, "v1", &pod, "ml");
        // A Grove PodGang's report: the 40,000-byte message cut to what a condition takes.
        let podgang = json!({"apiVersion": "scheduler.grove.io/v1alpha1", "kind": "PodGang",
                             "metadata": {"name": "g", "namespace": "ml", "generation": 2},
                             "spec": {"podgroups": []}});
        let report = podgang_status(&o, &podgang, None, Time(1_700_000_000_456)).expect("a first report");
        let mut stored = podgang.clone();
        stored["status"] = report.clone();
        accepted(Kind::GrovePodGang, "v1alpha1", &stored, "ml");
        assert_eq!(report["phase"], "Pending");
        assert_eq!(report["conditions"][0]["reason"], "WaitingForGangGroup");
        assert_eq!(
            podgang_status(&o, &stored, None, Time(1_700_000_100_000)),
            None,
            "said already: not again"
        );
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
