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
use scheduler_core::{Config, Plan};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::apply::{self, Bind, EventLimiter, StatusWrite, Target, may_send};
use crate::clock::wall_clock;
use crate::evict::{self, Blocked};
use crate::index::Index;
use crate::lease::Standing;
use crate::metrics::{Metrics, ResultLabel};
use crate::ratelimit::{self, RateLimiter};
use scheduler_core::cluster::ApiKind;
use scheduler_core::model::{GangKey, PodKey};
use scheduler_core::object::ObjectRef;
use scheduler_core::plan::Eviction;

/// A watched resource.
#[derive(Clone, Debug)]
pub struct Watched {
    /// The kind, as the core reads it: the type part of every object's identity.
    pub kind: &'static ApiKind,
    pub resource: ApiResource,
    /// Must exist (core kinds); optional ones are discovered.
    pub required: bool,
}

/// Every resource the scheduler reads: the core's list; built-in kinds must be served.
pub fn resources() -> Vec<Watched> {
    scheduler_core::cluster::READ
        .iter()
        .map(|k| Watched {
            kind: k,
            resource: ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk(k.group, k.version, k.kind),
                k.plural,
            ),
            required: k.builtin,
        })
        .collect()
}

/// How long a binding whose outcome is unknown keeps its node booked without the watch
/// confirming it: longer than the API server may work on a request (its `--request-timeout`,
/// 60 s by default), so that a binding still in flight is never made after its node was given to
/// another pod.
const ASSUME_TTL: Duration = Duration::from_secs(90);

/// How long shutdown waits for queued status writes.
const DRAIN_WITHIN: Duration = Duration::from_secs(5);

/// How long shutdown waits to release the Lease.
const RELEASE_WITHIN: Duration = Duration::from_secs(5);

/// How often the leader logs the objects it cannot read (they are also in `kubectl gang status`).
const PROBLEMS_EVERY: Duration = Duration::from_secs(300);

/// A watched kind's name in logs and in the loop's sets of watches started and synced:
/// `v1/Pod`, `kube-gang.io/v1alpha1/Gang`.
fn kind_key(k: &ApiKind) -> String {
    match k.group {
        "" => format!("{}/{}", k.version, k.kind),
        g => format!("{g}/{}/{}", k.version, k.kind),
    }
}

/// What the loop hears: watch events, each object with the identity it entered with, and the
/// fate of status writes.
enum Msg {
    Apply(ObjectRef, Value),
    Delete(ObjectRef),
    /// A completed (re-)list of one kind.
    Replace(&'static ApiKind, Vec<(ObjectRef, Value)>),
    /// A status write recorded ahead of the watch was made (the object now at this
    /// `resourceVersion`, if the answer said), or not (see [`Index::wrote`]).
    Written(Target, Option<String>),
    Unwritten(Target),
}

/// What the background reporter sends: status writes and events.
struct Report {
    statuses: Vec<StatusWrite>,
    events: Vec<k8s_openapi::api::events::v1::Event>,
}

/// A watched object as it enters: its identity, from its typed metadata and the kind watched
/// (computed here, once), and the raw JSON the core reads — the object's own fields moved, not
/// serialized again, with its metadata and `apiVersion`/`kind` (list items omit them) restored.
fn entering(obj: DynamicObject, w: &Watched) -> Option<(ObjectRef, Value)> {
    let DynamicObject { metadata, data, .. } = obj;
    let r = ObjectRef::of_kind(
        w.kind,
        metadata.namespace.as_deref().unwrap_or(""),
        metadata.name.as_deref().unwrap_or(""),
    );
    let mut fields = match data {
        Value::Object(m) => m,
        Value::Null => serde_json::Map::new(),
        _ => return None,
    };
    fields.insert("metadata".into(), serde_json::to_value(&metadata).ok()?);
    fields.insert("apiVersion".into(), Value::String(w.resource.api_version.clone()));
    fields.insert("kind".into(), Value::String(w.resource.kind.clone()));
    Some((r, Value::Object(fields)))
}

/// Pumps one resource's watch into the channel until cancelled. The watcher re-lists on 410 Gone
/// and reconnects with backoff on errors; each completed list replaces the resource in the index.
async fn pump(client: kube::Client, w: Watched, tx: mpsc::UnboundedSender<Msg>, stop: CancellationToken) {
    let api: Api<DynamicObject> = Api::all_with(client, &w.resource);
    let key = kind_key(w.kind);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut buffer: Vec<(ObjectRef, Value)> = Vec::new();
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => return,
            n = stream.next() => n,
        };
        let Some(event) = next else { return };
        let msg = match event {
            Ok(watcher::Event::Apply(o)) => entering(o, &w).map(|(r, v)| Msg::Apply(r, v)),
            Ok(watcher::Event::Delete(o)) => entering(o, &w).map(|(r, _)| Msg::Delete(r)),
            Ok(watcher::Event::Init) => {
                buffer.clear();
                None
            }
            Ok(watcher::Event::InitApply(o)) => {
                buffer.extend(entering(o, &w));
                None
            }
            Ok(watcher::Event::InitDone) => Some(Msg::Replace(w.kind, std::mem::take(&mut buffer))),
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
/// `config` connects to the API server. Every request waits for the `--kube-api-qps` token
/// bucket. What the loop awaits — bindings and the reads that check them, discovery, the
/// provisioner's requests — and evictions go through a client without kube's built-in retries,
/// which would wait out a 429 (up to 15 times, honouring `Retry-After`) inside the loop; the
/// watches and the background reporter keep them. The Lease has a client and a bucket of its own
/// (as kube-scheduler's leader election has), so a burst of bindings never delays a renewal.
///
/// Setup, then a loop — discover what is served, wait for something to happen, and (the leader)
/// one [`Loop::cycle`] — then shutdown.
pub async fn run(
    config: kube::Config,
    settings: Settings,
    metrics: Metrics,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let mut l = Loop::start(config, settings, metrics, stop)?;
    loop {
        l.discover().await;
        if !l.wait().await {
            break;
        }
        if l.leading() {
            l.cycle().await;
        }
    }
    l.shutdown().await;
    Ok(())
}

/// The tasks beside the loop and the channels to them.
struct Wiring {
    /// Watches and status writes (the reporter's), with kube's built-in retries.
    client: kube::Client,
    /// What the loop awaits, and evictions: no built-in retries.
    loop_client: kube::Client,
    leases: Api<Lease>,
    tx: mpsc::UnboundedSender<Msg>,
    rx: mpsc::UnboundedReceiver<Msg>,
    /// The watches, one per kind served.
    pumps: tokio::task::JoinSet<()>,
    elector: Option<tokio::task::JoinHandle<()>>,
    standing: watch::Receiver<Standing>,
    report_tx: mpsc::UnboundedSender<Report>,
    reporter: tokio::task::JoinHandle<()>,
    evict_tx: watch::Sender<Vec<Eviction>>,
    evictor: tokio::task::JoinHandle<()>,
    blocked_rx: mpsc::UnboundedReceiver<Blocked>,
    tick: tokio::time::Interval,
    stop: CancellationToken,
}

impl std::fmt::Debug for Wiring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wiring").field("standing", &*self.standing.borrow()).finish_non_exhaustive()
    }
}

/// The loop: its settings, the tasks beside it, and what it keeps between cycles — the index (the
/// cluster as watched, and what the watch does not say yet), and what is only for messages and
/// pacing (events sent, evictions blocked, capacity requests followed, when problems were logged).
#[derive(Debug)]
struct Loop {
    settings: Settings,
    metrics: Metrics,
    wiring: Wiring,
    all: Vec<Watched>,
    required: BTreeSet<String>,
    started: BTreeSet<String>,
    synced: BTreeSet<String>,
    last_discovery: Option<Instant>,
    was_leading: bool,
    index: Index,
    limiter: EventLimiter,
    /// Victims whose eviction the API server refuses for now, and why.
    blocked: BTreeMap<PodKey, String>,
    provisioner: crate::provision::Provisioner,
    /// Claims the plans bind before their pods.
    volumes: crate::volumes::Binder,
    log_problems: Option<Instant>,
}

impl Loop {
    /// Setup: clients, the election, the reporter and the evictor.
    fn start(
        config: kube::Config,
        settings: Settings,
        metrics: Metrics,
        stop: CancellationToken,
    ) -> anyhow::Result<Loop> {
        let rate = Arc::new(RateLimiter::new(settings.qps, settings.burst));
        let client = ratelimit::client(config.clone(), rate.clone())?;
        let mut no_retry = config.clone();
        no_retry.default_retry = false;
        let loop_client = ratelimit::client(no_retry, rate.clone())?;
        let lease_client =
            ratelimit::client(config, Arc::new(RateLimiter::new(settings.qps, settings.burst)))?;
        let (tx, rx) = mpsc::unbounded_channel::<Msg>();
        let all = resources();
        let required = all.iter().filter(|w| w.required).map(|w| kind_key(w.kind)).collect();
        let concurrency = settings.bind_concurrency.max(1);

        // Leadership, decided by a task of its own.
        let leases: Api<Lease> = Api::namespaced(lease_client, &settings.lease_namespace);
        let initial = if settings.leader_elect { Standing::FOLLOWER } else { Standing::ALONE };
        let (standing_tx, standing) = watch::channel(initial);
        let elector = settings.leader_elect.then(|| {
            tokio::spawn(crate::lease::elect(
                leases.clone(),
                settings.lease_name.clone(),
                settings.identity.clone(),
                settings.lease_duration,
                settings.retry_period,
                standing_tx,
                stop.child_token(),
            ))
        });

        // Status writes and events go out in the background: the loop never waits for them.
        let (report_tx, report_rx) = mpsc::unbounded_channel::<Report>();
        let reporter = tokio::spawn(report(
            client.clone(),
            report_rx,
            tx.clone(),
            concurrency,
            standing.clone(),
            metrics.clone(),
        ));
        // Evictions too: each victim backs off on its own (a PodDisruptionBudget's 429), and the
        // loop learns which ones are blocked, and by what.
        let (evict_tx, evict_rx) = watch::channel::<Vec<Eviction>>(Vec::new());
        let (blocked_tx, blocked_rx) = mpsc::unbounded_channel::<Blocked>();
        let evictor = tokio::spawn(evict::run(
            loop_client.clone(),
            evict_rx,
            blocked_tx,
            standing.clone(),
            concurrency,
            stop.child_token(),
        ));
        let mut tick = tokio::time::interval(settings.period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let provisioner = crate::provision::Provisioner::new(settings.discovery_period);
        Ok(Loop {
            wiring: Wiring {
                client,
                loop_client,
                leases,
                tx,
                rx,
                pumps: tokio::task::JoinSet::new(),
                elector,
                standing,
                report_tx,
                reporter,
                evict_tx,
                evictor,
                blocked_rx,
                tick,
                stop,
            },
            settings,
            metrics,
            all,
            required,
            started: BTreeSet::new(),
            synced: BTreeSet::new(),
            last_discovery: None,
            was_leading: false,
            index: Index::new(),
            limiter: EventLimiter::default(),
            blocked: BTreeMap::new(),
            provisioner,
            volumes: crate::volumes::Binder::new(),
            log_problems: None,
        })
    }

    /// Starts watches for the resources served now (every discovery period).
    async fn discover(&mut self) {
        if self.last_discovery.is_some_and(|t| t.elapsed() < self.settings.discovery_period) {
            return;
        }
        let w = &mut self.wiring;
        for kind in &self.all {
            let key = kind_key(kind.kind);
            if self.started.contains(&key) {
                continue;
            }
            if kind.required || served(&w.loop_client, &kind.resource).await {
                tracing::info!(resource = %key, "watching");
                self.started.insert(key);
                w.pumps.spawn(pump(w.client.clone(), kind.clone(), w.tx.clone(), w.stop.child_token()));
            }
        }
        self.last_discovery = Some(Instant::now());
    }

    /// Waits for a tick, a change of leadership, a blocked eviction or watch events (taking what
    /// else arrives within 100 ms); false once stopped.
    async fn wait(&mut self) -> bool {
        let w = &mut self.wiring;
        tokio::select! {
            () = w.stop.cancelled() => return false,
            _ = w.tick.tick() => {}
            // A new leader acts at once, not at the next tick.
            Ok(()) = w.standing.changed() => {}
            Some(b) = w.blocked_rx.recv() => match b {
                Blocked::By(pod, why) => { self.blocked.insert(pod, why); }
                Blocked::No(pod) => { self.blocked.remove(&pod); }
            },
            msg = w.rx.recv() => {
                let Some(msg) = msg else { return false };
                handle(&mut self.index, &mut self.synced, msg);
                // Debounce: take whatever else arrives within 100 ms before deciding.
                let until = tokio::time::Instant::now() + Duration::from_millis(100);
                while let Ok(Some(m)) = tokio::time::timeout_at(until, w.rx.recv()).await {
                    handle(&mut self.index, &mut self.synced, m);
                }
            }
        }
        true
    }

    /// Whether this replica decides now: it leads (within its renew deadline) and its caches are
    /// synced. A follower only keeps its index warm. A change of leadership drops what this
    /// replica decided that the watch does not show: the API's word counts again.
    fn leading(&mut self) -> bool {
        let leading = self.wiring.standing.borrow().may_act();
        self.metrics.leader.set(i64::from(leading));
        if leading != self.was_leading {
            self.index.drop_carried();
            self.limiter = EventLimiter::default();
            self.was_leading = leading;
        }
        let ready = self.required.is_subset(&self.synced);
        self.metrics.ready.store(ready, Ordering::Relaxed);
        leading && ready
    }

    /// One cycle of the leader (every tick: timeouts and grace periods expire without any event):
    ///
    /// 1. **Expire**: bindings whose outcome stayed unknown past [`ASSUME_TTL`] free their node.
    /// 2. **Refresh**: the snapshot, with what the watch does not say yet laid over it.
    /// 3. **Schedule**: the core's plan.
    /// 4. **Provision**: each gang waiting for capacity says what its request does.
    /// 5. **Write**: status writes, gang states kept on pods and events to the reporter,
    ///    evictions to the evictor.
    /// 6. **Bind**: the plan's claims first (their gangs' pods are bound in a later cycle, once
    ///    they are), then its bindings, gang by gang, and again those of unknown outcome.
    /// 7. **Book**: what the bindings came to, into the index, and each gang's state carried.
    /// 8. **Reconcile**: capacity requests brought in line with the plan.
    async fn cycle(&mut self) {
        let started_at = Instant::now();
        let w = &self.wiring;
        let (index, metrics) = (&mut self.index, &self.metrics);

        // 1. Expire.
        let expired = index.expire(ASSUME_TTL);
        if expired > 0 {
            tracing::warn!(pods = expired, "bindings never confirmed by the watch; placing those pods again");
        }

        // 2. Refresh.
        let now = wall_clock();
        index.refresh();
        let snapshot = index.snapshot();

        // 3. Schedule.
        let mut plan = scheduler_core::schedule(snapshot, &self.settings.config, now);
        metrics.cycle_duration.observe(started_at.elapsed().as_secs_f64());
        record(metrics, &plan);
        if self.log_problems.is_none_or(|t| t.elapsed() >= PROBLEMS_EVERY) {
            for p in index.problems() {
                tracing::warn!(object = %p.object, problem = %p, "cannot read object");
            }
            self.log_problems = Some(Instant::now());
        }

        // 4. Provision.
        self.provisioner.annotate(&mut plan, snapshot, &self.settings.config, now);

        // 5. Write.
        self.blocked.retain(|pod, _| plan.evictions.iter().any(|e| &e.pod == pod));
        let mut writes = apply::writes(
            &plan,
            snapshot,
            &*index,
            &mut self.limiter,
            &self.blocked,
            &self.settings.identity,
            &self.settings.config.scheduler_name,
            now,
        );
        let starting = starting(&plan, now);
        let again = again(index.unknown_bindings(), snapshot);
        writes.statuses.extend(index.keeps_to_retry().iter().map(apply::keep));
        for b in &writes.bindings {
            index.assume(&b.binding);
        }
        if !writes.statuses.is_empty() || !writes.events.is_empty() {
            for s in &writes.statuses {
                index.wrote(s);
            }
            let _ = w.report_tx.send(Report { statuses: writes.statuses, events: writes.events });
        }
        // Every cycle says which evictions it wants now; the evictor drops the rest.
        w.evict_tx.send_replace(writes.evictions);

        // 6. Bind.
        let concurrency = self.settings.bind_concurrency.max(1);
        let mut claims = self.volumes.plan(&plan.volumes, index);
        claims.extend(self.volumes.plan_claims(&plan.claims, &plan.releases, index));
        let written = self.volumes.send(&w.loop_client, &w.standing, claims, concurrency).await;
        // What was written is what the next cycle sees, before the watch says so (as
        // kube-scheduler's assume cache holds its claim writes): a device allocated now is taken
        // then, a claim released now is no longer reserved.
        for (r, obj) in written.objects {
            index.apply(r, obj);
        }
        let mut binds = writes.bindings;
        binds.extend(again);
        let bound = bind_all(&w.loop_client, binds, concurrency, &w.standing).await;

        // 7. Book.
        metrics.pods_bound.inc_by(bound.made.len() as u64);
        for pod in &bound.made {
            index.made(pod);
        }
        // A gang placed whole has waited: how long, once every binding was made. (One whose
        // bindings were not all made is half-bound now: the next cycle completes or releases it.)
        for (gang, waited, size, backfilled) in starting {
            if !bound.failed_gangs.contains(&gang) {
                metrics.wait_duration.get_or_create(&crate::metrics::SizeLabel::of(size)).observe(waited);
                if backfilled {
                    metrics.backfill_starts.inc();
                }
            }
        }
        index.carry(&plan);
        for b in &bound.unknown {
            index.unknown(b);
        }
        for pod in bound.failed {
            index.forget(&pod);
        }
        for pod in bound.refused {
            index.refuse(&pod);
        }
        for (pod, wait) in bound.throttled {
            index.hold(&pod, wait);
        }

        // 8. Reconcile.
        let provisioning = self.settings.config.provisioning.as_ref();
        let snapshot = index.snapshot();
        self.provisioner.reconcile(&w.loop_client, &w.standing, &*index, snapshot, &plan, provisioning).await;
        metrics.provisioning_enabled.set(i64::from(provisioning.is_some() && self.provisioner.enabled()));
    }

    /// Shutdown: what the last cycles reported (gang state a successor starts from among it) goes
    /// out before the Lease is released, within a bound; then the Lease is released — unless a
    /// binding's outcome is still unknown (it may yet be made): then it is left to expire.
    async fn shutdown(self) {
        let Loop { settings, wiring: w, index, .. } = self;
        w.stop.cancel();
        drop(w.report_tx);
        let drain = w.reporter.abort_handle();
        if tokio::time::timeout(DRAIN_WITHIN, w.reporter).await.is_err() {
            drain.abort();
            tracing::warn!("status writes still queued at shutdown were dropped");
        }
        let _ = w.evictor.await;
        let mut pumps = w.pumps;
        while pumps.join_next().await.is_some() {}
        if let Some(elector) = w.elector {
            let _ = elector.await;
            let unknown = index.unknown_bindings().len();
            if w.standing.borrow().held && unknown > 0 {
                // A successor that took over at once could give those nodes away while one of these
                // bindings is still made: it waits for the Lease to run out instead.
                tracing::warn!(
                    bindings = unknown,
                    "bindings of unknown outcome: the lease is left to expire"
                );
            } else if w.standing.borrow().held {
                // Bounded: a stalled API server must not hold up shutdown (the Lease then expires).
                let release = crate::lease::release(&w.leases, &settings.lease_name, &settings.identity);
                match tokio::time::timeout(RELEASE_WITHIN, release).await {
                    Ok(Ok(())) => tracing::info!("lease released"),
                    Ok(Err(e)) => tracing::warn!(error = %e, "could not release the lease"),
                    Err(_) => tracing::warn!("releasing the lease timed out; it expires on its own"),
                }
            }
        }
    }
}

/// The bindings of unknown outcome to send again, each with the gang it belongs to.
fn again(bindings: Vec<scheduler_core::plan::Binding>, snapshot: &scheduler_core::Snapshot) -> Vec<Bind> {
    if bindings.is_empty() {
        return Vec::new();
    }
    let gangs: std::collections::HashMap<&PodKey, &GangKey> =
        snapshot.pods.iter().filter_map(|p| Some((&p.key, &p.gang.as_ref()?.gang))).collect();
    bindings
        .into_iter()
        .map(|b| {
            let gang = gangs.get(&b.pod).map(|g| (*g).clone());
            Bind { binding: b, gang }
        })
        .collect()
}

/// Sends status writes and events as they come, `concurrency` at a time, while this replica may
/// act, and tells the loop which status writes were made (and the version they made) and which
/// were not (refused, failed, or not sent): those are forgotten by the index (see
/// [`Index::unwrite`]), so the next cycle writes them again. Returns when the loop closes the
/// queue and everything queued was handled.
///
/// Writes to one object go out one at a time, in the order they were made (a newer state never
/// overtaken by an older one still being retried); writes to different objects never wait for
/// one another. A write the API server keeps refusing with 429 or 503 is retried by the client
/// for seconds: queued behind it, a gang's state (when it fell short) once waited 8 s unwritten,
/// and a leader killed meanwhile took it along, so its successor started the grace period again
/// (the chaos suite's seed 1795702929154432673). Events go out beside them, after the writes
/// waiting to start.
async fn report(
    client: kube::Client,
    mut batches: mpsc::UnboundedReceiver<Report>,
    tx: mpsc::UnboundedSender<Msg>,
    concurrency: usize,
    standing: watch::Receiver<Standing>,
    metrics: Metrics,
) {
    use std::collections::{HashSet, VecDeque};
    use std::future::Future;
    use std::pin::Pin;

    type Sending<'a> = Pin<Box<dyn Future<Output = Option<Target>> + Send + 'a>>;
    let concurrency = concurrency.max(1);
    let (client, tx, standing, metrics) = (&client, &tx, &standing, &metrics);
    let status = |w: StatusWrite| -> Sending<'_> {
        Box::pin(async move {
            let msg = match may_send(client, standing, &w.http()).await {
                Some(Ok(answer)) => {
                    let version = answer.pointer("/metadata/resourceVersion").and_then(Value::as_str);
                    Msg::Written(w.target.clone(), version.map(String::from))
                }
                Some(Err(e)) => {
                    if matches!(w.target, Target::Enqueue(_)) {
                        // Its Volcano Job gets no pods until this is made: worth seeing.
                        tracing::warn!(object = ?w.target, error = %e, "moving a PodGroup to Inqueue failed; retried with a growing delay");
                    } else {
                        tracing::debug!(object = ?w.target, error = %e, "status write failed; the next cycle retries");
                    }
                    Msg::Unwritten(w.target.clone())
                }
                None => Msg::Unwritten(w.target.clone()),
            };
            let _ = tx.send(msg);
            Some(w.target)
        })
    };
    let event = |e: k8s_openapi::api::events::v1::Event| -> Sending<'_> {
        Box::pin(async move {
            let result = match may_send(client, standing, &apply::event_request(&e)).await {
                Some(Ok(_)) => "sent",
                Some(Err(err)) => {
                    // Events are best effort, but a refused one is a defect worth seeing.
                    tracing::warn!(reason = ?e.reason, error = %err, "event refused");
                    "refused"
                }
                None => return None,
            };
            metrics.events.get_or_create(&ResultLabel { result: result.into() }).inc();
            None
        })
    };
    let mut writes: VecDeque<StatusWrite> = VecDeque::new();
    let mut events = VecDeque::new();
    // Objects with a write being sent.
    let mut busy: HashSet<Target> = HashSet::new();
    let mut sending = futures::stream::FuturesUnordered::new();
    let mut open = true;
    loop {
        // Start what may start: the oldest write of each object not being written, then events.
        let mut at = 0;
        while sending.len() < concurrency && at < writes.len() {
            if busy.contains(&writes[at].target) {
                at += 1;
                continue;
            }
            if let Some(w) = writes.remove(at) {
                busy.insert(w.target.clone());
                sending.push(status(w));
            }
        }
        while sending.len() < concurrency
            && let Some(e) = events.pop_front()
        {
            sending.push(event(e));
        }
        if !open && sending.is_empty() {
            break;
        }
        tokio::select! {
            batch = batches.recv(), if open => match batch {
                Some(b) => {
                    writes.extend(b.statuses);
                    events.extend(b.events);
                }
                None => open = false,
            },
            Some(done) = sending.next(), if !sending.is_empty() => {
                if let Some(target) = done {
                    busy.remove(&target);
                }
            }
        }
    }
}

fn handle(index: &mut Index, synced: &mut BTreeSet<String>, msg: Msg) {
    match msg {
        Msg::Apply(r, v) => index.apply(r, v),
        Msg::Delete(r) => index.delete(&r),
        Msg::Replace(kind, objects) => {
            index.replace(kind, objects);
            synced.insert(kind_key(kind));
        }
        Msg::Written(t, version) => index.written(&t, version),
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
    metrics.record_phases(plan.outcomes.iter().map(|o| o.phase));
    let held = plan.outcomes.iter().filter(|o| !o.held_nodes.is_empty());
    metrics.reservations.set(held.clone().count() as i64);
    let nodes: BTreeSet<&str> = held.flat_map(|o| o.held_nodes.iter().map(|n| n.as_str())).collect();
    metrics.reserved_nodes.set(nodes.len() as i64);
}

/// Gangs this plan starts (placed for the first time), with how long each waited since it could
/// first be placed (its quorum): what `gang_wait_duration_seconds` observes once the bindings are
/// made.
fn starting(plan: &Plan, now: scheduler_core::Time) -> Vec<(GangKey, f64, u32, bool)> {
    plan.outcomes
        .iter()
        .filter_map(|o| {
            Some((o.gang.clone(), now.since(o.waited_since?).as_secs_f64(), o.counts.bound, o.backfilled))
        })
        .collect()
}

/// What sending a plan's bindings came to.
#[derive(Debug, Default)]
struct Bound {
    /// Bindings the API server took (or that were already so).
    made: Vec<PodKey>,
    /// Bindings whose outcome is unknown (no answer or a server error, and the pod on no node yet):
    /// their node stays booked and they are sent again (see [`Index::unknown`]).
    unknown: Vec<scheduler_core::plan::Binding>,
    /// Pods whose binding failed or was not sent: their assumption is dropped.
    failed: Vec<PodKey>,
    /// Pods whose binding the API server refused: held back for a while (see [`Index::refuse`]).
    refused: Vec<PodKey>,
    /// Pods whose binding the API server throttled (429), with how long it asked us to wait:
    /// held back for that long only (see [`Index::hold`]).
    throttled: Vec<(PodKey, Duration)>,
    /// Gangs one of whose bindings was not made.
    failed_gangs: BTreeSet<GangKey>,
}

/// Shortest and longest wait after a throttled binding, whatever `Retry-After` says.
const THROTTLED_MIN: Duration = Duration::from_secs(1);
const THROTTLED_MAX: Duration = Duration::from_secs(60);

/// Sends bindings (`concurrency` at a time) while this replica may act, through a client without
/// kube's built-in retries: a 429 or a server error is answered at once, never waited out inside
/// the loop. Errors are logged and retried by later cycles, which recompute from the API's state;
/// the loop never crashes on them. Shutdown lets the bindings of the cycle finish: a gang is not
/// cut in half.
///
/// A binding that is not made fails its gang's all-or-nothing step: the gang's bindings not yet
/// sent are withheld (a failure learned before they go out stops them), so the gang is left
/// with as few members bound as possible. A refusal (a 4xx other than 409 and 429) holds the pod
/// back for a while, doubling; a 429 holds it back for the server's `Retry-After` only (1 s to
/// 60 s), as the API server asks; a server error holds nothing back (the next cycle tries again).
/// Bindings already made cannot be taken back by the Binding API; the next cycle sees a
/// half-bound gang, which the core completes if the member can be placed after all, and
/// otherwise releases (evicts) after the gang's grace period — the promise a crash mid-binding
/// gets too. Members are never evicted at once: a refusal may be transient, and an eviction is
/// not.
async fn bind_all(
    client: &kube::Client,
    binds: Vec<Bind>,
    concurrency: usize,
    standing: &watch::Receiver<Standing>,
) -> Bound {
    let stopped: std::sync::Mutex<BTreeSet<GangKey>> = std::sync::Mutex::new(BTreeSet::new());
    let results: Vec<(scheduler_core::plan::Binding, Option<GangKey>, Sent)> = futures::stream::iter(binds)
        .map(|b| {
            let stopped = &stopped;
            async move {
                let made = bind_one(client, standing, &b, stopped).await;
                (b.binding, b.gang, made)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let mut out = Bound::default();
    for (binding, gang, made) in results {
        if made != Sent::Made {
            out.failed_gangs.extend(gang);
        }
        let pod = binding.pod.clone();
        match made {
            Sent::Made => out.made.push(pod),
            Sent::Unknown => out.unknown.push(binding),
            Sent::Failed => out.failed.push(pod),
            Sent::Refused => out.refused.push(pod),
            Sent::Throttled(wait) => out.throttled.push((pod, wait)),
        }
    }
    out
}

/// What became of one binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sent {
    Made,
    /// Unknown: the node stays booked, and the binding is sent again, until it is made or
    /// refused, the watch tells, or the assumption expires.
    Unknown,
    /// Not sent, or failed without a definite refusal.
    Failed,
    /// The API server refused it (a 4xx other than 409 and 429).
    Refused,
    /// The API server asked us to come back later (429), after this long.
    Throttled(Duration),
}

/// How long a 429 asks us to wait: its `retryAfterSeconds`, within bounds.
fn retry_after(s: &kube::core::Status) -> Duration {
    let secs = s.details.as_ref().map_or(0, |d| d.retry_after_seconds);
    Duration::from_secs(u64::from(secs)).clamp(THROTTLED_MIN, THROTTLED_MAX)
}

/// Sends one binding, unless its gang's step already failed in this round (`stopped`).
async fn bind_one(
    client: &kube::Client,
    standing: &watch::Receiver<Standing>,
    b: &Bind,
    stopped: &std::sync::Mutex<BTreeSet<GangKey>>,
) -> Sent {
    let pod = &b.binding.pod;
    let stop_gang = || {
        if let (Some(g), Ok(mut s)) = (&b.gang, stopped.lock()) {
            s.insert(g.clone());
        }
    };
    let gang_stopped =
        b.gang.as_ref().is_some_and(|g| stopped.lock().map(|s| s.contains(g)).unwrap_or(false));
    if gang_stopped {
        tracing::info!(pod = %pod, "binding withheld: another member of its gang was not bound");
        return Sent::Failed;
    }
    let r = apply::binding(&b.binding);
    // Leadership lost (or its renewal overdue) mid-plan: a successor takes over from here.
    let e = match may_send(client, standing, &r).await {
        None => return Sent::Failed,
        Some(Ok(_)) => return Sent::Made,
        Some(Err(e)) => e,
    };
    // Throttled: nothing happened, and the server says when to come back.
    if let kube::Error::Api(s) = &e
        && s.code == 429
    {
        let wait = retry_after(s);
        tracing::info!(pod = %pod, retry_in = ?wait, "binding throttled by the API server");
        stop_gang();
        return Sent::Throttled(wait);
    }
    // A 409, a server error (the binding may have been stored before it failed, or may still
    // be), or no answer at all: only a 4xx other than 409 says for sure it did not happen.
    let definite = matches!(&e, kube::Error::Api(s) if s.code != 409 && s.code < 500);
    if definite {
        tracing::warn!(pod = %pod, error = %e, "binding refused");
        stop_gang();
        return Sent::Refused;
    }
    // The binding may have happened, or may yet: the pod says where it is.
    let sent = match place_of(client, &b.binding).await {
        Place::Ours => return Sent::Made,
        // Bound by someone else, or gone: this binding will never be made.
        Place::Elsewhere | Place::Gone => Sent::Failed,
        // Not bound (yet), or no answer: a binding still in flight may be made later, so the
        // node stays booked and the binding is sent again, to the same node.
        Place::Unbound | Place::Unknown => Sent::Unknown,
    };
    tracing::warn!(pod = %pod, error = %e, outcome = ?sent, "binding not confirmed");
    stop_gang();
    sent
}

/// Where the pod of a binding is, after a binding whose answer said nothing for sure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// On the node the binding chose: it was made (a retry after a lost answer, or a racing
    /// replica that chose the same node).
    Ours,
    Elsewhere,
    Unbound,
    /// The pod is gone, or another of its name (another UID) stands there.
    Gone,
    /// The API server could not tell us.
    Unknown,
}

/// Where the pod of a binding is now.
async fn place_of(client: &kube::Client, b: &scheduler_core::plan::Binding) -> Place {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &b.pod.namespace);
    match pods.get_opt(&b.pod.name).await {
        Ok(Some(p)) if p.metadata.uid.as_deref().is_some_and(|u| !b.uid.is_empty() && u != b.uid) => {
            Place::Gone
        }
        Ok(Some(p)) => match p.spec.and_then(|s| s.node_name).filter(|n| !n.is_empty()) {
            Some(n) if n == b.node => Place::Ours,
            Some(_) => Place::Elsewhere,
            None => Place::Unbound,
        },
        Ok(None) => Place::Gone,
        Err(_) => Place::Unknown,
    }
}
