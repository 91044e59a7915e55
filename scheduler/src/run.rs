//! The loop: watches → [`Index`] → snapshot → `schedule` → apply (leader only).
//!
//! One task owns the index; watch tasks send it events over a channel, so the index needs no lock.
//! A cycle runs after changes (debounced) and at least every `--period`. Optional resources (every
//! dialect's CRDs, our own `Gang`) are discovered every 30 s: a missing CRD is not an error, and one
//! installed later is picked up.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use scheduler_core::{Config, Plan};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::apply::{self, EventLimiter, Request, Target};
use crate::clock::wall_clock;
use crate::index::Index;
use crate::lease::Standing;
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

/// How long shutdown waits for queued status writes.
const DRAIN_WITHIN: Duration = Duration::from_secs(5);

/// How long shutdown waits to release the Lease.
const RELEASE_WITHIN: Duration = Duration::from_secs(5);

/// How often the leader logs the objects it cannot read (they are also in `kubectl gang status`).
const PROBLEMS_EVERY: Duration = Duration::from_secs(300);

fn resource_key(r: &ApiResource) -> String {
    format!("{}/{}", r.api_version, r.kind)
}

enum Msg {
    Apply(String, Value),
    Delete(String, Value),
    Replace(String, Vec<Value>),
    /// A status write applied ahead of the watch was made, or not (see [`Index::wrote`]).
    Written(Target),
    Unwritten(Target),
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
    /// How often to look for gang CRDs installed since (30 s in the binary).
    pub discovery_period: Duration,
}

/// Runs until `stop` is cancelled; then releases the Lease after in-flight bindings finish.
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
    let concurrency = settings.bind_concurrency.max(1);

    // Leadership, decided by a task of its own.
    let leases: Api<Lease> = Api::namespaced(client.clone(), &settings.lease_namespace);
    let initial = if settings.leader_elect { Standing::FOLLOWER } else { Standing::ALONE };
    let (standing_tx, mut standing) = watch::channel(initial);
    let elector_stop = stop.child_token();
    let elector = settings.leader_elect.then(|| {
        tokio::spawn(crate::lease::elect(
            leases.clone(),
            settings.lease_name.clone(),
            settings.identity.clone(),
            settings.lease_duration,
            settings.retry_period,
            standing_tx,
            elector_stop.clone(),
        ))
    });
    let mut was_leading = false;

    // Status writes and events go out in the background: the loop never waits for them.
    let (report_tx, report_rx) = mpsc::unbounded_channel::<Vec<Request>>();
    let reporter = tokio::spawn(report(
        client.clone(),
        rate.clone(),
        report_rx,
        tx.clone(),
        concurrency,
        standing.clone(),
    ));

    let mut log_problems: Option<Instant> = None;
    let mut tick = tokio::time::interval(settings.period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    loop {
        // Discovery: start watches for resources that exist now.
        if last_discovery.is_none_or(|t| t.elapsed() >= settings.discovery_period) {
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

        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
            // A new leader acts at once, not at the next tick.
            Ok(()) = standing.changed() => {}
            msg = rx.recv() => {
                let Some(msg) = msg else { break };
                handle(&mut index, &mut synced, msg);
                // Debounce: take whatever else arrives within 100 ms before deciding.
                let until = tokio::time::Instant::now() + Duration::from_millis(100);
                while let Ok(Some(m)) = tokio::time::timeout_at(until, rx.recv()).await {
                    handle(&mut index, &mut synced, m);
                }
            }
        }
        let leading = standing.borrow().may_act();
        metrics.leader.set(i64::from(leading));
        if leading != was_leading {
            // Leadership gained or lost: the API's word on gang state counts again.
            index.drop_carried();
            limiter = EventLimiter::default();
            was_leading = leading;
        }
        let ready = required.is_subset(&synced);
        metrics.ready.store(ready, Ordering::Relaxed);
        // A follower only keeps its index warm; the leader decides on every tick (timeouts and
        // grace periods expire without any event).
        if !ready || !leading {
            continue;
        }
        let started_at = Instant::now();
        let expired = index.expire(ASSUME_TTL);
        if expired > 0 {
            tracing::warn!(pods = expired, "bindings never confirmed by the watch; placing those pods again");
        }
        let now = wall_clock();
        index.refresh();
        let snapshot = index.snapshot();
        let plan = scheduler_core::schedule(snapshot, &settings.config, now);
        metrics.cycle_duration.observe(started_at.elapsed().as_secs_f64());
        record(&metrics, &plan);
        if log_problems.is_none_or(|t| t.elapsed() >= PROBLEMS_EVERY) {
            for p in index.problems() {
                tracing::warn!(object = %p.object, problem = %p, "cannot read object");
            }
            log_problems = Some(Instant::now());
        }
        let requests = apply::requests(&plan, snapshot, &index, &mut limiter, now);
        index.carry(&plan);
        for b in &plan.bindings {
            index.assume(b);
        }
        let (writes, reports): (Vec<Request>, Vec<Request>) =
            requests.into_iter().partition(|r| r.method == "POST" && r.target.is_none() && !is_event(r));
        if !reports.is_empty() {
            for r in &reports {
                index.wrote(r);
            }
            let _ = report_tx.send(reports);
        }
        let failed = send_all(&client, &rate, writes, concurrency, &standing).await;
        for pod in failed {
            index.forget(&pod);
        }
    }
    stop.cancel();
    // What the last cycles reported (gang state a successor starts from among it) goes out
    // before the Lease is released, within a bound.
    drop(report_tx);
    let drain = reporter.abort_handle();
    if tokio::time::timeout(DRAIN_WITHIN, reporter).await.is_err() {
        drain.abort();
        tracing::warn!("status writes still queued at shutdown were dropped");
    }
    while tasks.join_next().await.is_some() {}
    if let Some(elector) = elector {
        let _ = elector.await;
        if standing.borrow().held {
            // Bounded: a stalled API server must not hold up shutdown (the Lease then expires).
            let release = crate::lease::release(&leases, &settings.lease_name, &settings.identity);
            match tokio::time::timeout(RELEASE_WITHIN, release).await {
                Ok(Ok(())) => tracing::info!("lease released"),
                Ok(Err(e)) => tracing::warn!(error = %e, "could not release the lease"),
                Err(_) => tracing::warn!("releasing the lease timed out; it expires on its own"),
            }
        }
    }
    Ok(())
}

fn is_event(r: &Request) -> bool {
    r.path.ends_with("/events")
}

/// Sends status writes and events as they come, `concurrency` at a time, while this replica may
/// act, and tells the loop which status writes were made and which were not (refused, failed,
/// or not sent): those are undone in the index (see [`Index::unwrite`]), so the next cycle writes
/// them again. Returns when the loop closes the queue and everything queued was handled.
async fn report(
    client: kube::Client,
    rate: Arc<RateLimiter>,
    mut batches: mpsc::UnboundedReceiver<Vec<Request>>,
    tx: mpsc::UnboundedSender<Msg>,
    concurrency: usize,
    standing: watch::Receiver<Standing>,
) {
    while let Some(batch) = batches.recv().await {
        futures::stream::iter(batch)
            .for_each_concurrent(concurrency, |r| {
                let (client, rate, tx, standing) = (&client, &rate, &tx, &standing);
                async move {
                    let made = may_send(client, rate, standing, &r).await.is_some_and(|sent| match sent {
                        Ok(_) => true,
                        Err(e) => {
                            tracing::debug!(path = %r.path, error = %e, "write failed; the next cycle retries");
                            false
                        }
                    });
                    if let Some(t) = r.target {
                        let _ = tx.send(if made { Msg::Written(t) } else { Msg::Unwritten(t) });
                    }
                }
            })
            .await;
    }
}

/// Sends `r` if this replica may act once the rate limiter lets it (`None`: not sent). Leadership
/// is checked after the wait, right before sending: the wait can be long.
async fn may_send(
    client: &kube::Client,
    rate: &RateLimiter,
    standing: &watch::Receiver<Standing>,
    r: &Request,
) -> Option<Result<Value, kube::Error>> {
    if !standing.borrow().may_act() {
        return None;
    }
    rate.acquire().await;
    if !standing.borrow().may_act() {
        return None;
    }
    Some(send(client, r).await)
}

fn handle(index: &mut Index, synced: &mut BTreeSet<String>, msg: Msg) {
    match msg {
        Msg::Apply(r, v) => index.apply(&r, v),
        Msg::Delete(r, v) => index.delete(&r, &v),
        Msg::Replace(r, vs) => {
            index.replace(&r, vs);
            synced.insert(r);
        }
        Msg::Written(t) => index.written(&t),
        Msg::Unwritten(t) => index.unwrite(&t),
    }
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

/// Sends bindings (`concurrency` at a time) and then evictions, while this replica may act.
/// Returns the pods whose binding failed or was not sent (their assumption is dropped). Errors are
/// logged and retried by later cycles, which recompute from the API's state; the loop never
/// crashes on them. Shutdown lets the bindings of the cycle finish: a gang is not cut in half.
async fn send_all(
    client: &kube::Client,
    rate: &RateLimiter,
    requests: Vec<Request>,
    concurrency: usize,
    standing: &watch::Receiver<Standing>,
) -> Vec<scheduler_core::model::PodKey> {
    let (binds, rest): (Vec<_>, Vec<_>) = requests.into_iter().partition(|r| r.path.ends_with("/binding"));
    let results: Vec<Option<scheduler_core::model::PodKey>> = futures::stream::iter(binds)
        .map(|r| async move {
            let ns = r.body.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
            let name = r.body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
            let pod = scheduler_core::model::PodKey::new(ns, name);
            // Leadership lost (or its renewal overdue) mid-plan: a successor takes over from here.
            let e = match may_send(client, rate, standing, &r).await {
                None => return Some(pod),
                Some(Ok(_)) => return None,
                Some(Err(e)) => e,
            };
            // A 409, a server error (the binding may have been stored before it failed), or no
            // answer at all: only a 4xx other than 409 says for sure it did not happen.
            let refused = matches!(&e, kube::Error::Api(s) if s.code != 409 && s.code < 500);
            if !refused {
                // The binding may have happened: the pod says whether it is on the node we chose.
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
            Some(pod)
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    for r in rest {
        match may_send(client, rate, standing, &r).await {
            None => break,
            Some(Err(e)) => {
                tracing::warn!(path = %r.path, error = %e, "request failed; the next cycle retries")
            }
            Some(Ok(_)) => {}
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
