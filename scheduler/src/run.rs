//! The loop: watches → [`Index`] → snapshot → `schedule` → apply (leader only).
//!
//! One task owns the index; watch tasks send it events over a channel, so the index needs no lock.
//! A cycle runs after changes (debounced) and at least every `--period`. Optional resources (every
//! dialect's CRDs, our own `Gang`) are discovered every 30 s: a missing CRD is not an error, and one
//! installed later is picked up.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use scheduler_core::model::{GangKey, Time};
use scheduler_core::{Config, Plan};
use serde_json::Value;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::apply::{self, EventLimiter, Request};
use crate::index::Index;
use crate::metrics::{Metrics, ResultLabel};
use crate::ratelimit::RateLimiter;

/// A watched resource.
#[derive(Clone, Debug)]
pub struct Watched {
    pub resource: ApiResource,
    /// Must exist (core kinds); optional ones are discovered.
    pub required: bool,
}

/// Every resource the scheduler reads: the core's list; built-in kinds must be served.
pub fn resources() -> Vec<Watched> {
    scheduler_core::cluster::READ
        .iter()
        .map(|k| Watched {
            resource: ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk(k.group, k.version, k.kind),
                k.plural,
            ),
            required: k.builtin,
        })
        .collect()
}

/// How long a binding whose outcome is unknown keeps its node booked without the watch
/// confirming it.
const ASSUME_TTL: Duration = Duration::from_secs(30);

fn resource_key(r: &ApiResource) -> String {
    format!("{}/{}", r.api_version, r.kind)
}

enum Msg {
    Apply(String, Value),
    Delete(String, Value),
    Replace(String, Vec<Value>),
}

/// Turns a watched object into the raw JSON the core reads, with `apiVersion`/`kind` restored
/// (list items omit them).
fn to_value(obj: DynamicObject, r: &ApiResource) -> Option<Value> {
    let mut v = serde_json::to_value(obj).ok()?;
    let m = v.as_object_mut()?;
    m.insert("apiVersion".into(), Value::String(r.api_version.clone()));
    m.insert("kind".into(), Value::String(r.kind.clone()));
    Some(v)
}

/// Pumps one resource's watch into the channel until cancelled. The watcher re-lists on 410 Gone
/// and reconnects with backoff on errors; each completed list replaces the resource in the index.
async fn pump(client: kube::Client, w: ApiResource, tx: mpsc::UnboundedSender<Msg>, stop: CancellationToken) {
    let api: Api<DynamicObject> = Api::all_with(client, &w);
    let key = resource_key(&w);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut buffer: Vec<Value> = Vec::new();
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => return,
            n = stream.next() => n,
        };
        let Some(event) = next else { return };
        let msg = match event {
            Ok(watcher::Event::Apply(o)) => to_value(o, &w).map(|v| Msg::Apply(key.clone(), v)),
            Ok(watcher::Event::Delete(o)) => to_value(o, &w).map(|v| Msg::Delete(key.clone(), v)),
            Ok(watcher::Event::Init) => {
                buffer.clear();
                None
            }
            Ok(watcher::Event::InitApply(o)) => {
                buffer.extend(to_value(o, &w));
                None
            }
            Ok(watcher::Event::InitDone) => Some(Msg::Replace(key.clone(), std::mem::take(&mut buffer))),
            Err(e) => {
                tracing::warn!(resource = %key, error = %e, "watch error; retrying");
                None
            }
        };
        if let Some(m) = msg
            && tx.send(m).is_err()
        {
            return;
        }
    }
}

/// Whether an optional resource is served (its CRD installed).
async fn served(client: &kube::Client, r: &ApiResource) -> bool {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), r);
    api.list_metadata(&ListParams::default().limit(1)).await.is_ok()
}

/// Everything the loop needs.
#[derive(Debug)]
pub struct Settings {
    pub config: Config,
    pub period: Duration,
    pub leader_elect: bool,
    pub lease_name: String,
    pub lease_namespace: String,
    pub identity: String,
    /// How long the Lease is valid without renewal.
    pub lease_duration: Duration,
    /// How often to try to acquire or renew the Lease.
    pub retry_period: Duration,
    pub bind_concurrency: usize,
    pub qps: f64,
    pub burst: u32,
}

/// Runs until `stop` is cancelled; then releases the Lease after in-flight requests finish.
pub async fn run(
    client: kube::Client,
    settings: Settings,
    metrics: Metrics,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    let mut started: BTreeSet<String> = BTreeSet::new();
    let mut synced: BTreeSet<String> = BTreeSet::new();
    let all = resources();
    let required: BTreeSet<String> =
        all.iter().filter(|w| w.required).map(|w| resource_key(&w.resource)).collect();
    let mut tasks = tokio::task::JoinSet::new();
    let mut last_discovery: Option<Instant> = None;
    let mut index = Index::new();
    let mut limiter = EventLimiter::default();
    let rate = Arc::new(RateLimiter::new(settings.qps, settings.burst));
    let leases: Api<Lease> = Api::namespaced(client.clone(), &settings.lease_namespace);
    let mut leader = !settings.leader_elect;
    let mut last_lease: Option<Instant> = None;
    // When the Lease was last written by us: a leader acts only within the renew deadline of it.
    let mut renewed: Option<Instant> = None;
    let mut dirty = true;
    let mut tick = tokio::time::interval(settings.period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    loop {
        // Discovery: start watches for resources that exist now.
        if last_discovery.is_none_or(|t| t.elapsed() > Duration::from_secs(30)) {
            for w in &all {
                let key = resource_key(&w.resource);
                if started.contains(&key) {
                    continue;
                }
                if w.required || served(&client, &w.resource).await {
                    tracing::info!(resource = %key, "watching");
                    started.insert(key);
                    tasks.spawn(pump(client.clone(), w.resource.clone(), tx.clone(), stop.child_token()));
                }
            }
            last_discovery = Some(Instant::now());
        }
        // Leader election.
        if settings.leader_elect && last_lease.is_none_or(|t| t.elapsed() >= settings.retry_period) {
            let attempt = Instant::now();
            let round = crate::lease::round(
                &leases,
                &settings.lease_name,
                &settings.identity,
                now(),
                settings.lease_duration,
            );
            match round.await {
                Ok(l) => {
                    if l != leader {
                        tracing::info!(leader = l, identity = %settings.identity, "leadership changed");
                    }
                    leader = l;
                    renewed = l.then_some(attempt);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "lease round failed; not leading until it succeeds");
                    leader = false;
                    renewed = None;
                }
            }
            metrics.leader.set(i64::from(leader));
            last_lease = Some(Instant::now());
        }

        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
            msg = rx.recv() => {
                let Some(msg) = msg else { break };
                handle(&mut index, &mut synced, msg);
                dirty = true;
                // Debounce: take whatever else arrives within 100 ms before deciding.
                let until = tokio::time::Instant::now() + Duration::from_millis(100);
                while let Ok(Some(m)) = tokio::time::timeout_at(until, rx.recv()).await {
                    handle(&mut index, &mut synced, m);
                }
            }
        }
        let ready = required.is_subset(&synced);
        metrics.ready.store(ready, Ordering::Relaxed);
        if !ready || !(dirty || leader) {
            continue;
        }
        dirty = false;
        let started_at = Instant::now();
        let expired = index.expire(ASSUME_TTL);
        if expired > 0 {
            tracing::warn!(pods = expired, "bindings never confirmed by the watch; placing those pods again");
        }
        let now = now();
        let assembled = index.snapshot();
        for p in &assembled.problems {
            tracing::debug!(object = %p.object, problem = %p, "cannot read object");
        }
        let plan = scheduler_core::schedule(&assembled.snapshot, &settings.config, now);
        metrics.cycle_duration.observe(started_at.elapsed().as_secs_f64());
        record(&metrics, &plan);
        // A leader whose last renewal is older than the renew deadline (a stalled API, a slow
        // cycle) no longer acts: a successor may take over once the Lease expires.
        let deadline = crate::lease::renew_deadline(settings.lease_duration);
        let leading = leader && (!settings.leader_elect || renewed.is_some_and(|t| t.elapsed() < deadline));
        if !leading {
            continue;
        }
        let gangs = gang_meta(&index, &assembled.snapshot.gangs);
        let requests = apply::requests(&plan, &assembled.snapshot, &gangs, &mut limiter, now);
        for b in &plan.bindings {
            index.assume(b);
        }
        let failed = send_all(&client, &rate, requests, settings.bind_concurrency, &stop).await;
        for pod in failed {
            index.forget(&pod);
        }
    }
    stop.cancel();
    while tasks.join_next().await.is_some() {}
    if settings.leader_elect && leader {
        if let Err(e) = crate::lease::release(&leases, &settings.lease_name, &settings.identity).await {
            tracing::warn!(error = %e, "could not release the lease");
        } else {
            tracing::info!("lease released");
        }
    }
    Ok(())
}

fn handle(index: &mut Index, synced: &mut BTreeSet<String>, msg: Msg) {
    match msg {
        Msg::Apply(r, v) => index.apply(&r, v),
        Msg::Delete(r, v) => index.delete(&r, &v),
        Msg::Replace(r, vs) => {
            index.replace(&r, vs);
            synced.insert(r);
        }
    }
}

fn now() -> Time {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    Time(ms)
}

fn record(metrics: &Metrics, plan: &Plan) {
    let mut pending = 0;
    for o in &plan.outcomes {
        metrics.attempts.get_or_create(&ResultLabel { result: o.reason.as_str().to_string() }).inc();
        if !o.reason.is_satisfied() {
            pending += 1;
        }
    }
    metrics.pending_gangs.set(pending);
    metrics.pods_bound.inc_by(plan.bindings.len() as u64);
}

/// Generation and current status of every `Gang`, for status patches.
fn gang_meta(
    index: &Index,
    gangs: &[scheduler_core::model::Gang],
) -> BTreeMap<GangKey, (Option<i64>, Option<Value>)> {
    let key = format!("{}/{}/Gang", scheduler_core::GROUP, scheduler_core::VERSION);
    let mut out = BTreeMap::new();
    if index.count(&key) == 0 {
        return out;
    }
    for g in gangs {
        if let Some(obj) = index.get(&key, &g.key.namespace, &g.key.name) {
            let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64);
            out.insert(g.key.clone(), (generation, obj.get("status").cloned()));
        }
    }
    out
}

/// Sends every request: bindings with bounded concurrency, the rest in order. Returns the pods
/// whose binding failed (their assumption is dropped). Errors are logged and retried by later
/// cycles, which recompute from the API's state; the loop never crashes on them.
async fn send_all(
    client: &kube::Client,
    rate: &RateLimiter,
    requests: Vec<Request>,
    concurrency: usize,
    stop: &CancellationToken,
) -> Vec<scheduler_core::model::PodKey> {
    let (binds, rest): (Vec<_>, Vec<_>) = requests.into_iter().partition(|r| r.path.ends_with("/binding"));
    let permits = Arc::new(Semaphore::new(concurrency.max(1)));
    let results: Vec<Option<scheduler_core::model::PodKey>> = futures::stream::iter(binds)
        .map(|r| {
            let permits = permits.clone();
            async move {
                let _permit = permits.acquire().await.ok()?;
                rate.acquire().await;
                let e = match send(client, &r).await {
                    Ok(_) => return None,
                    Err(e) => e,
                };
                let ns = r.body.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
                let name = r.body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
                let refused = matches!(&e, kube::Error::Api(s) if s.code != 409);
                if !refused {
                    // A 409, or no answer at all (a dropped connection): the binding may have
                    // happened. The pod says whether it is on the node we chose.
                    match on_our_node(client, &r).await {
                        Some(true) => return None,
                        Some(false) => {}
                        None => {
                            // Unknown: keep the node booked until the watch tells, or the
                            // assumption expires.
                            tracing::warn!(path = %r.path, error = %e, "binding outcome unknown");
                            return None;
                        }
                    }
                }
                tracing::warn!(path = %r.path, error = %e, "binding failed");
                Some(scheduler_core::model::PodKey::new(ns, name))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    // Shutdown lets in-flight binds finish (above) but starts nothing new.
    if !stop.is_cancelled() {
        for r in rest {
            rate.acquire().await;
            if let Err(e) = send(client, &r).await {
                tracing::debug!(path = %r.path, error = %e, "request failed; the next cycle retries");
            }
        }
    }
    results.into_iter().flatten().collect()
}

async fn send(client: &kube::Client, r: &Request) -> Result<Value, kube::Error> {
    let body = serde_json::to_vec(&r.body).unwrap_or_default();
    let req = http::Request::builder()
        .method(r.method)
        .uri(&r.path)
        .header("content-type", r.content_type)
        .body(body)
        .map_err(kube::Error::HttpError)?;
    client.request::<Value>(req).await
}

/// Whether the pod of a binding request is on the node the request chose (`None`: could not
/// tell). After a 409 or a lost response, "yes" means the binding is done: a retry after a lost
/// response, or a racing replica that chose the same node.
async fn on_our_node(client: &kube::Client, r: &Request) -> Option<bool> {
    let ns = r.body.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
    let name = r.body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let want = r.body.pointer("/target/name").and_then(Value::as_str).unwrap_or("");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    match pods.get_opt(name).await {
        Ok(Some(p)) => Some(p.spec.and_then(|s| s.node_name).as_deref() == Some(want)),
        Ok(None) => Some(false),
        Err(_) => None,
    }
}
