//! Autoscaler-visible gangs: the plan's provisioning asks (`scheduler_core::provision::asks`)
//! written as cluster-autoscaler `ProvisioningRequest`s (`autoscaling.x-k8s.io/v1`) with their
//! PodTemplates, read back, retried and deleted.
//!
//! One request per gang, named `{gang}-{attempt}`, its PodTemplates `{request}-{i}` — each owned
//! by the gang's owner (the member pods' controller, else the `Gang` object) so garbage collection
//! removes them with the workload. The members asked for carry the autoscaler's consume
//! annotations (`autoscaling.x-k8s.io/consume-provisioning-request`, `…/provisioning-class-name`).
//! While a request is open, the gang's message says `waiting for capacity: ProvisioningRequest
//! ns/name (class)` and, unless the policy says `countWaitInTimeout`, its timeout does not run.
//! `Provisioned` needs nothing more: the new nodes enter the snapshot and the cycle places the gang
//! whole. `Failed`, `CapacityRevoked`, `BookingExpired`, or a request open longer than
//! `maxWaitSeconds`: deleted, and asked again after the policy's backoff. A gang that no longer
//! asks (placed, deleted, or waiting for something else) has its request deleted.
//!
//! The requests' conditions are followed by a watch of their own (the requests this scheduler
//! manages, by label), started once the API is found served; the loop reads the states it
//! keeps and makes no request for them. A cluster
//! without the ProvisioningRequest CRD answers 404: the feature reports itself disabled (a log
//! line, `gang_provisioning_enabled 0`, and each asking gang's status message starting with
//! [`DISABLED`]) and tries again after the scheduler's discovery period
//! (30 s), as the gang CRDs are discovered, so a CRD
//! installed later is picked up.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use scheduler_core::Config;
use scheduler_core::config::Provisioning;
use scheduler_core::model::{GangKey, PodKey, Snapshot, Time};
use scheduler_core::names::{ANNOTATION_CONSUME_PROVISIONING_REQUEST, ANNOTATION_PROVISIONING_CLASS};
use scheduler_core::plan::{Plan, ProvisioningAsk};
use scheduler_core::provision::{RequestState as State, capacity_line, request_state as state_of};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::apply::{Http, may_send};
use crate::index::Index;
use crate::lease::Standing;

/// What an asking gang's message starts with while the ProvisioningRequest API is not served.
pub const DISABLED: &str =
    "capacity requests disabled: the ProvisioningRequest API (autoscaling.x-k8s.io/v1) is not served";

/// The label selector of the requests this scheduler writes (and watches).
const MANAGED: &str = "app.kubernetes.io/managed-by=gang-scheduler";

/// Each watched request's state, by (namespace, name); a deleted request leaves it.
type States = std::sync::Arc<std::sync::Mutex<BTreeMap<(String, String), State>>>;

/// Follows the requests this scheduler manages until dropped: one watch, off the loop.
#[derive(Debug)]
struct Follow {
    states: States,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Follow {
    fn start(client: &kube::Client) -> Self {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let gvk = kube::api::GroupVersionKind::gvk("autoscaling.x-k8s.io", "v1", "ProvisioningRequest");
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "provisioningrequests");
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client.clone(), &resource);
        let states = States::default();
        let shared = states.clone();
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default().labels(MANAGED)).default_backoff();
            futures::pin_mut!(stream);
            let mut listed: BTreeMap<(String, String), State> = BTreeMap::new();
            while let Some(event) = stream.next().await {
                let key = |o: &kube::api::DynamicObject| {
                    (
                        o.metadata.namespace.clone().unwrap_or_default(),
                        o.metadata.name.clone().unwrap_or_default(),
                    )
                };
                let state =
                    |o: &kube::api::DynamicObject| state_of(&serde_json::to_value(o).unwrap_or_default());
                let Ok(mut held) = shared.lock() else { return };
                match event {
                    Ok(watcher::Event::Apply(o)) => {
                        held.insert(key(&o), state(&o));
                    }
                    Ok(watcher::Event::Delete(o)) => {
                        held.remove(&key(&o));
                    }
                    Ok(watcher::Event::Init) => listed.clear(),
                    Ok(watcher::Event::InitApply(o)) => {
                        listed.insert(key(&o), state(&o));
                    }
                    Ok(watcher::Event::InitDone) => *held = std::mem::take(&mut listed),
                    Err(e) => tracing::debug!(error = %e, "ProvisioningRequest watch error; retrying"),
                }
            }
        });
        Follow { states, task }
    }

    /// The request's state, if the watch has seen it.
    fn state(&self, namespace: &str, name: &str) -> Option<State> {
        self.states.lock().ok()?.get(&(namespace.to_string(), name.to_string())).copied()
    }
}

const GROUP_VERSION: &str = "autoscaling.x-k8s.io/v1";

/// The request's name for a gang's `attempt`-th ask: a DNS-1123 subdomain that leaves room for
/// the templates' `-{i}` suffix.
pub fn request_name(gang: &GangKey, attempt: u32) -> String {
    let mut base: String = gang.name.chars().take(200).collect();
    while base.ends_with(['-', '.']) {
        base.pop();
    }
    format!("{base}-{attempt}")
}

/// The owner the gang's objects are garbage-collected with: the first asked member's controller
/// (a Job, JobSet, …), else the `Gang` object, else none.
fn owner(index: &Index, ask: &ProvisioningAsk) -> Option<Value> {
    let pod = ask.pod_sets.first()?.pods.first()?;
    let raw = index.pod(pod)?;
    let controller = raw
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| refs.iter().find(|r| r["controller"] == true));
    if let Some(r) = controller {
        return Some(
            json!({"apiVersion": r["apiVersion"], "kind": r["kind"], "name": r["name"], "uid": r["uid"]}),
        );
    }
    let gang = index.gang(&ask.gang)?;
    let uid = gang.pointer("/metadata/uid")?.as_str()?;
    Some(json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "name": ask.gang.name, "uid": uid}))
}

/// A PodTemplate shaped as a member: its spec as the autoscaler must see it (requests, selectors,
/// affinity, tolerations), without what only a running pod has.
fn template(name: &str, namespace: &str, member: &Value, owner: Option<&Value>) -> Value {
    let mut spec = member.get("spec").cloned().unwrap_or_else(|| json!({}));
    if let Some(s) = spec.as_object_mut() {
        for gone in ["nodeName", "schedulingGates"] {
            s.remove(gone);
        }
    }
    let labels = member.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}));
    let mut meta = json!({"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "gang-scheduler"}});
    if let Some(o) = owner {
        meta["ownerReferences"] = json!([o]);
    }
    json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta,
           "template": {"metadata": {"labels": labels}, "spec": spec}})
}

/// The objects one ask is written as: its PodTemplates, then the ProvisioningRequest. `None` when
/// a member to model a template on is not in the index.
pub fn objects(
    index: &Index,
    ask: &ProvisioningAsk,
    policy: &Provisioning,
    name: &str,
) -> Option<(Vec<Value>, Value)> {
    let owner = owner(index, ask);
    let ns = &ask.gang.namespace;
    let mut templates = Vec::new();
    let mut pod_sets = Vec::new();
    for (i, set) in ask.pod_sets.iter().enumerate() {
        let model = set.pods.first()?;
        let member = index.pod(model)?;
        let tname = format!("{name}-{i}");
        templates.push(template(&tname, ns, member, owner.as_ref()));
        pod_sets.push(json!({"podTemplateRef": {"name": tname}, "count": set.count}));
    }
    let mut meta = json!({"name": name, "namespace": ns,
        "labels": {"app.kubernetes.io/managed-by": "gang-scheduler", "kube-gang.io/gang": scheduler_core::workload::label_value_for(&ask.gang.name)}});
    if let Some(o) = &owner {
        meta["ownerReferences"] = json!([o]);
    }
    let mut spec = json!({"provisioningClassName": ask.class, "podSets": pod_sets});
    if !policy.parameters.is_empty() {
        spec["parameters"] = json!(policy.parameters);
    }
    Some((
        templates,
        json!({"apiVersion": GROUP_VERSION, "kind": "ProvisioningRequest", "metadata": meta, "spec": spec}),
    ))
}

/// One gang's request, as this replica knows it.
#[derive(Clone, Debug)]
struct Open {
    name: String,
    class: String,
    templates: usize,
    created: Instant,
    /// The watch has seen it (so its absence from the watch means it was deleted).
    seen: bool,
    state: State,
}

/// A gang's history of asks.
#[derive(Clone, Debug, Default)]
struct Asks {
    attempt: u32,
    failures: u32,
    retry_at: Option<Instant>,
    /// What the last ended request said, for the message while backing off.
    last_end: Option<String>,
    open: Option<Open>,
}

/// Writes and follows the plan's provisioning asks. Owned by the loop; the leader calls
/// [`Provisioner::annotate`] before a plan's writes are made and [`Provisioner::reconcile`] after.
#[derive(Debug, Default)]
pub struct Provisioner {
    /// How long after a 404 (no ProvisioningRequest CRD) the API is tried again.
    retry_disabled: Duration,
    gangs: BTreeMap<GangKey, Asks>,
    disabled_until: Option<Instant>,
    /// Pods already annotated for a request (pod → request name).
    annotated: BTreeMap<PodKey, String>,
    /// The watch of the requests, once their API was found served.
    follow: Option<Follow>,
}

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
        for o in &mut plan.outcomes {
            let Some(asks) = self.gangs.get(&o.gang) else { continue };
            if o.reason.is_satisfied() {
                continue;
            }
            let line = match (&asks.open, &asks.last_end) {
                (Some(open), _) => {
                    // An ended request is deleted at once (reconcile): until then it is still open.
                    let state =
                        if matches!(open.state, State::Ended(_)) { State::Waiting } else { open.state };
                    capacity_line(&o.gang.namespace, &open.name, &open.class, state).unwrap_or_default()
                }
                (None, Some(end)) => format!("capacity request {end}; asking again after backoff"),
                (None, None) => continue,
            };
            o.message = format!("{line}; {}", o.message);
            let timeout = snapshot
                .gangs
                .iter()
                .find(|g| g.key == o.gang)
                .and_then(|g| g.timeout)
                .or(config.default_timeout);
            if asks.open.is_some()
                && !policy.count_wait_in_timeout
                && let (Some(since), Some(t)) = (o.state.waiting_since, timeout)
                && now.since(since) >= t / 2
            {
                o.state.waiting_since = Some(now);
            }
        }
    }

    /// Brings the API in line with the plan's asks: creates what is new (after any backoff),
    /// reads open requests' conditions, deletes what ended or is no longer asked for.
    pub async fn reconcile(
        &mut self,
        client: &kube::Client,
        standing: &watch::Receiver<Standing>,
        index: &Index,
        plan: &Plan,
        policy: Option<&Provisioning>,
    ) {
        let Some(policy) = policy else { return };
        let now = Instant::now();
        if self.disabled_until.is_some_and(|t| now < t) {
            return;
        }
        let api = Api { client, standing };
        let wanted: BTreeMap<&GangKey, &ProvisioningAsk> =
            plan.provisioning.iter().map(|a| (&a.gang, a)).collect();
        // Requests no longer asked for.
        let gone: Vec<GangKey> = self.gangs.keys().filter(|g| !wanted.contains_key(g)).cloned().collect();
        for gang in gone {
            if let Some(asks) = self.gangs.get_mut(&gang)
                && let Some(open) = asks.open.take()
            {
                api.delete_request(&gang.namespace, &open).await;
                tracing::info!(gang = %gang, request = %open.name, "capacity request deleted: the gang no longer asks");
            }
            self.gangs.remove(&gang);
        }
        for (gang, ask) in wanted {
            let asks = self.gangs.entry(gang.clone()).or_default();
            if let Some(open) = &mut asks.open {
                let expired = policy.max_wait.is_some_and(|w| now.duration_since(open.created) >= w);
                match self.follow.as_ref().and_then(|f| f.state(&gang.namespace, &open.name)) {
                    Some(state) => {
                        open.seen = true;
                        open.state = state;
                    }
                    None if open.seen => open.state = State::Ended("deleted"),
                    None => {}
                }
                let end = match open.state {
                    State::Ended(why) => Some(why.to_string()),
                    State::Waiting if expired => Some("not provisioned within maxWaitSeconds".to_string()),
                    _ => None,
                };
                if let Some(why) = end {
                    let open = asks.open.take().expect("checked above");
                    api.delete_request(&gang.namespace, &open).await;
                    asks.failures += 1;
                    let wait = policy.backoff(asks.failures);
                    asks.retry_at = Some(now + wait);
                    tracing::warn!(gang = %gang, request = %open.name, reason = %why, retry_in_s = wait.as_secs(), "capacity request ended");
                    asks.last_end = Some(format!("{} ended: {why}", open.name));
                }
                continue;
            }
            if asks.retry_at.is_some_and(|t| now < t) {
                continue;
            }
            asks.attempt += 1;
            let name = request_name(gang, asks.attempt);
            let Some((templates, request)) = objects(index, ask, policy, &name) else { continue };
            match api.create(&gang.namespace, &templates, &request).await {
                Created::Yes => {
                    tracing::info!(gang = %gang, request = %name, pods = ask.count(), class = %ask.class, "capacity requested");
                    asks.open = Some(Open {
                        name: name.clone(),
                        class: ask.class.clone(),
                        templates: templates.len(),
                        created: now,
                        seen: false,
                        state: State::Waiting,
                    });
                    if self.follow.is_none() {
                        self.follow = Some(Follow::start(client));
                    }
                    for pod in ask.pod_sets.iter().flat_map(|s| &s.pods) {
                        if self.annotated.get(pod) != Some(&name)
                            && api.annotate_pod(pod, &name, &ask.class).await
                        {
                            self.annotated.insert(pod.clone(), name.clone());
                        }
                    }
                }
                Created::NotServed => {
                    asks.attempt -= 1;
                    tracing::warn!(
                        "ProvisioningRequest API not served (autoscaling.x-k8s.io/v1): autoscaler-visible gangs are disabled until it is"
                    );
                    self.disabled_until = Some(now + self.retry_disabled);
                    return;
                }
                Created::No => asks.attempt -= 1,
            }
        }
        self.disabled_until = None;
        let live: BTreeSet<&PodKey> =
            plan.provisioning.iter().flat_map(|a| a.pod_sets.iter().flat_map(|s| &s.pods)).collect();
        self.annotated.retain(|p, _| live.contains(p));
    }
}

enum Created {
    Yes,
    /// 404 for the collection: the CRD is not installed.
    NotServed,
    No,
}

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

    async fn create(&self, ns: &str, templates: &[Value], request: &Value) -> Created {
        let requests = format!("/apis/{GROUP_VERSION}/namespaces/{ns}/provisioningrequests");
        // The request's API first: without the CRD nothing else is written.
        match self.send("GET", &format!("{requests}?limit=1"), "application/json", None).await {
            Some(Ok(_)) => {}
            Some(Err(kube::Error::Api(e))) if e.code == 404 => return Created::NotServed,
            _ => return Created::No,
        }
        for t in templates {
            match self
                .send("POST", &format!("/api/v1/namespaces/{ns}/podtemplates"), "application/json", Some(t))
                .await
            {
                Some(Ok(_)) => {}
                Some(Err(kube::Error::Api(e))) if e.code == 409 => {}
                other => {
                    tracing::warn!(error = ?other.and_then(Result::err), "could not write a PodTemplate for a capacity request");
                    return Created::No;
                }
            }
        }
        match self.send("POST", &requests, "application/json", Some(request)).await {
            Some(Ok(_)) => Created::Yes,
            Some(Err(kube::Error::Api(e))) if e.code == 409 => Created::Yes,
            Some(Err(kube::Error::Api(e))) if e.code == 404 => Created::NotServed,
            other => {
                tracing::warn!(error = ?other.and_then(Result::err), "could not write a capacity request");
                Created::No
            }
        }
    }

    async fn delete_request(&self, ns: &str, open: &Open) {
        let path = format!("/apis/{GROUP_VERSION}/namespaces/{ns}/provisioningrequests/{}", open.name);
        let _ = self.send("DELETE", &path, "application/json", None).await;
        for i in 0..open.templates {
            let path = format!("/api/v1/namespaces/{ns}/podtemplates/{}-{i}", open.name);
            let _ = self.send("DELETE", &path, "application/json", None).await;
        }
    }

    /// Marks `pod` as the request's consumer, as cluster-autoscaler reads it.
    async fn annotate_pod(&self, pod: &PodKey, request: &str, class: &str) -> bool {
        let patch = json!({"metadata": {"annotations": {
            ANNOTATION_CONSUME_PROVISIONING_REQUEST: request,
            ANNOTATION_PROVISIONING_CLASS: class,
        }}});
        let path = format!("/api/v1/namespaces/{}/pods/{}", pod.namespace, pod.name);
        matches!(self.send("PATCH", &path, "application/merge-patch+json", Some(&patch)).await, Some(Ok(_)))
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

    #[test]
    fn an_open_request_is_named_in_the_message_and_its_wait_is_not_counted_unless_the_policy_says() {
        use scheduler_core::model::{Dialect, Gang, GangState, Source};
        use scheduler_core::plan::{Counts, Outcome, Phase, Reason};
        let key = GangKey::new("ml", "bert-x");
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
            }],
            ..Plan::default()
        };
        let mut p = Provisioner::new(Duration::from_secs(30));
        let open = Open {
            name: "bert-x-1".into(),
            class: "best-effort-atomic-scale-up.autoscaling.x-k8s.io".into(),
            templates: 1,
            created: Instant::now(),
            seen: false,
            state: State::Waiting,
        };
        p.gangs.insert(key.clone(), Asks { attempt: 1, open: Some(open), ..Asks::default() });
        let mut config = Config { provisioning: Some(Provisioning::default()), ..Config::default() };

        let mut early = plan(990);
        p.annotate(&mut early, &snapshot, &config, now);
        assert_eq!(
            early.outcomes[0].message,
            "waiting for capacity: ProvisioningRequest ml/bert-x-1 (best-effort-atomic-scale-up.autoscaling.x-k8s.io); room for 1 of the 2 members needed"
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
        // Off: nothing said, nothing moved.
        let mut off = plan(960);
        p.annotate(&mut off, &snapshot, &Config::default(), now);
        assert_eq!(off, plan(960));
    }
}
