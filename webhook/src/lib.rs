//! gang-webhook: kube-gang's admission webhook. `POST /validate` and `POST /mutate` (and
//! `/mutate/namespace`, `/validate/namespace` for the hooks selected by namespace label) take
//! `admission.k8s.io/v1` AdmissionReviews over TLS; probes and metrics are plain HTTP on
//! `--probe-listen`. The rules are the core's: this crate adds none. The serving certificate comes
//! from files ([`tls`]) or, with `--serving-cert=managed`, from the webhook's own CA, kept in a
//! Secret and rotated ([`rotation`] decides, [`managed`] reads and writes).
//!
//! Hostile clients are bounded here: connections, handshakes, headers, bodies and idle time have
//! limits on both ports, shared between clients, and handshakes are worked on a few at a time
//! (the listeners both servers share, `kube_gang_serve::server`); bodies are read at a client's
//! pace and hold what they received ([`lanes`]); decisions run off the async workers, in two
//! bounded lanes by body size ([`lanes`]) so maximum-size objects never hold up small requests,
//! small ones given in turn between clients, the big lane on threads of lower CPU priority; probes
//! are served by a thread and runtime of their own (`kube_gang_serve::probe`), so `/healthz`
//! answers while every decision slot is busy; every response is counted, rejected ones and those
//! hyper writes itself included.

pub mod admission;
pub mod certs;
pub mod gangs;
pub mod lanes;
pub mod managed;
pub mod pruned;
pub mod rotation;
pub mod tls;

pub use kube_gang_serve::log::LogFormat;
/// The listeners (shared with gang-scheduler's probe port).
pub use kube_gang_serve::server;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use clap::{Parser, Subcommand, ValueEnum};
use kube_gang_serve::Source;
use kube_gang_serve::probe::{ClosedConnections, Readiness};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use admission::Hook;

/// The API server refuses requests over 3 MiB; an AdmissionReview wraps the object (and, on update,
/// the old one), so leave room for both.
pub const BODY_LIMIT: usize = 7 * 1024 * 1024;

/// The big lane's byte budget: the bodies of the decisions on objects over
/// [`lanes::SMALL_BODY`] in flight at once, together. Two maximum-size bodies fit.
pub const BIG_LANE_BUDGET: usize = 2 * BODY_LIMIT;

/// Big bodies being read and waiting for a decision, together: four maximum-size ones (small
/// bodies have a budget of their own, [`lanes::SMALL_READING_BUDGET`]). See [`lanes`].
pub const READING_BUDGET: usize = 4 * BODY_LIMIT;

/// gang-webhook: validates gangs and injects gang labels, annotations and schedulerName on
/// `kubectl apply`.
#[derive(Debug, Parser)]
#[command(name = "gang-webhook", version)]
pub struct Args {
    /// HTTPS address for AdmissionReviews.
    #[arg(long, default_value = "0.0.0.0:8443", env = "GANG_WEBHOOK_LISTEN")]
    pub listen: SocketAddr,
    /// Where the serving certificate comes from: `files` (--tls-cert-file and --tls-key-file, re-read
    /// when they change; cert-manager's overlay) or `managed`: the webhook keeps a CA and the
    /// certificate in the Secret --cert-secret, writes the CA bundle into every webhook of the
    /// configurations named --webhook-configuration, and rotates both, the CA with overlap.
    #[arg(long, value_enum, default_value_t = ServingCert::Files, env = "GANG_WEBHOOK_SERVING_CERT")]
    pub serving_cert: ServingCert,
    /// The Secret holding the managed CA and serving certificate (--serving-cert=managed).
    #[arg(long, default_value = "gang-webhook-tls", value_name = "NAME")]
    pub cert_secret: String,
    /// The namespace of --cert-secret and of the Service.
    #[arg(
        long,
        default_value = "kube-gang-system",
        value_name = "NAMESPACE",
        env = "GANG_WEBHOOK_NAMESPACE"
    )]
    pub cert_namespace: String,
    /// The webhook Service's name: the managed certificate names it and its DNS forms.
    #[arg(long, default_value = "gang-webhook", value_name = "NAME")]
    pub service: String,
    /// The MutatingWebhookConfiguration and ValidatingWebhookConfiguration (one name for both)
    /// whose caBundle the managed certificate keeps.
    #[arg(long, default_value = "gang-webhook", value_name = "NAME")]
    pub webhook_configuration: String,
    /// Seconds between rounds of the managed certificate: read the Secret, rotate what is due, write
    /// the CA bundle, serve what the Secret holds.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub cert_check_period: u64,
    /// Seconds a new CA is trusted before it signs, and an old CA kept trusted after it stopped
    /// signing (--serving-cert=managed).
    #[arg(long, default_value_t = rotation::Policy::default().overlap.unsigned_abs(), value_name = "SECONDS")]
    pub ca_overlap: u64,
    /// PEM certificate chain served on --listen (--serving-cert=files); re-read when it changes.
    #[arg(long, value_name = "FILE", default_value = "/etc/gang-webhook/tls/tls.crt")]
    pub tls_cert_file: PathBuf,
    /// PEM private key for --tls-cert-file.
    #[arg(long, value_name = "FILE", default_value = "/etc/gang-webhook/tls/tls.key")]
    pub tls_key_file: PathBuf,
    /// How often the certificate files are checked for changes, in seconds.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub tls_reload_period: u64,
    /// Plain-HTTP address for /healthz, /readyz and /metrics (at most 64 connections, 8 per client,
    /// 2 s to send a request).
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub probe_listen: SocketAddr,
    #[command(flatten)]
    pub log: kube_gang_serve::log::LogArgs,
    /// Connections open at once on --listen. When full, an idle connection of the client holding
    /// the most is closed for a new one; only when none is idle do more wait in the kernel's
    /// backlog.
    #[arg(long, default_value_t = 1024, value_name = "N", env = "GANG_WEBHOOK_MAX_CONNECTIONS")]
    pub max_connections: usize,
    /// Connections one client (peer address) may have open on --listen; one beyond it is closed as
    /// soon as it is accepted, as are new connections beyond 200 at once and 100 a second (each is a
    /// TLS handshake the webhook computes).
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_connections_per_client: usize,
    /// Seconds a client has for its TLS handshake, then for its first request's headers, then for
    /// each request's headers and body (a body must also average 256 KiB/s after its first half
    /// second). An HTTP/1.1 connection waiting for its next request's headers is closed after it
    /// too. (The probe port allows at most 2 s for headers and body.)
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub request_timeout: u64,
    /// Seconds a connection with no request in flight stays open.
    #[arg(long, default_value_t = 90, value_name = "SECONDS")]
    pub idle_timeout: u64,
    /// Requests one connection may carry before it is asked to close (spreads clients over replicas).
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_requests_per_connection: usize,
    /// Decisions made at once in each lane, each on a thread of its own; 0: one per CPU for
    /// requests with bodies up to 64 KiB, half as many for larger ones (which also share a budget
    /// of 14 MiB of bodies, and run in the SCHED_IDLE class). Requests beyond wait (within
    /// --request-timeout).
    #[arg(long, default_value_t = 0, value_name = "N", env = "GANG_WEBHOOK_MAX_DECISIONS")]
    pub max_decisions: usize,
    /// Watch the cluster's Gangs (kube-gang.io), KAI PodGroups (scheduling.run.ai) and Grove
    /// PodGangs (scheduler.grove.io) so that a pod naming an inner or unknown subgroup of a known
    /// gang is denied. Needs get/list/watch on
    /// them; the webhook serves without waiting for the watch, and allows pods of gangs it does
    /// not (yet) know.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL", env = "GANG_WEBHOOK_GANG_LOOKUP")]
    pub gang_lookup: bool,
    /// Kubeconfig for the gang lookup and the managed certificate; default: $KUBECONFIG or
    /// ~/.kube/config, else the in-cluster ServiceAccount (without any, the lookup is off and
    /// --serving-cert=managed fails).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// After SIGTERM, seconds in-flight requests have to finish (keep it below the Pod's
    /// terminationGracePeriodSeconds minus its preStop sleep).
    #[arg(long, default_value_t = 20, value_name = "SECONDS")]
    pub shutdown_timeout: u64,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ServingCert {
    Files,
    Managed,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a CA and a serving certificate for the webhook Service into files, for
    /// --serving-cert=files with a CA you manage yourself (the manifests need neither: the webhook
    /// manages its own); prints the caBundle (base64 of the CA) on stdout.
    Certs(certs::CertsArgs),
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    hook: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabel {
    hook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: String,
}

/// Request counters and latencies; labels are bounded (hook × result).
#[derive(Debug, Clone)]
pub struct Metrics {
    requests: Family<HookLabels, Counter>,
    duration: Family<HookLabel, Histogram>,
    closed: ClosedConnections,
    /// Gangs the gang lookup holds, and those it did not for a size limit.
    pub gang_lookup: gangs::LookupMetrics,
    registry: Arc<Registry>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<HookLabels, Counter>::default();
        registry.register(
            "gang_webhook_requests",
            "AdmissionReviews answered, by hook and result",
            requests.clone(),
        );
        let duration = Family::<HookLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
        });
        registry.register(
            "gang_webhook_request_duration_seconds",
            "Time to answer one AdmissionReview (decode, decide, encode)",
            duration.clone(),
        );
        let closed = ClosedConnections::default();
        registry.register(
            "gang_webhook_connections_closed",
            "Connections closed by the server, by port and reason (a limit, a timeout, bad HTTP, a failed handshake, closed for another client's, shutdown)",
            closed.0.clone(),
        );
        let gang_lookup = gangs::LookupMetrics::default();
        registry.register(
            "gang_webhook_gangs_known",
            "Gang objects the gang lookup holds (0 when it is off or has not listed yet)",
            gang_lookup.held.clone(),
        );
        registry.register(
            "gang_webhook_gangs_not_held",
            "Gang objects the gang lookup did not hold for a size limit (their pods are admitted as of an unknown gang)",
            gang_lookup.not_held.clone(),
        );
        let build = Family::<VersionLabel, prometheus_client::metrics::gauge::Gauge>::default();
        build.get_or_create(&VersionLabel { version: env!("CARGO_PKG_VERSION").into() }).set(1);
        registry.register("gang_webhook_build_info", "Build version", build);
        Metrics { requests, duration, closed, gang_lookup, registry: Arc::new(registry) }
    }
}

impl Metrics {
    fn count(&self, hook: &str, result: &str) {
        self.requests.get_or_create(&HookLabels { hook: hook.into(), result: result.into() }).inc();
    }

    /// Connection events of one port, for [`server::serve`].
    pub fn port(&self, port: &'static str) -> PortEvents {
        PortEvents { metrics: self.clone(), closed: self.closed.port(port), port }
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Counts the connections one port closes, by reason.
#[derive(Debug, Clone)]
pub struct PortEvents {
    metrics: Metrics,
    closed: kube_gang_serve::probe::PortEvents,
    port: &'static str,
}

impl server::ConnectionEvents for PortEvents {
    fn closed(&self, reason: &'static str) {
        self.closed.closed(reason);
    }

    /// On the admission port, a response hyper wrote (400, 431, 414) is counted with the others in
    /// `gang_webhook_requests_total`, under `hook="none"` (its path was never read).
    fn answered_by_hyper(&self, result: &'static str) {
        if self.port == "webhook" {
            self.metrics.count("none", result);
        }
    }
}

/// Shared state of the admission router.
#[derive(Debug, Clone)]
pub struct AppState {
    pub metrics: Metrics,
    /// The permits of decisions running at once, by body size, and the big lane's threads.
    pub lanes: lanes::Lanes,
    /// How long a request may take to arrive, and to wait for a decision slot.
    pub request_timeout: Duration,
    /// How fast a body must arrive (the listener's limits').
    pub pace: kube_gang_serve::body::Pace,
    /// The gangs admission consults besides the object ([`gangs`]); off unless set.
    pub gangs: gangs::GangLookup,
}

impl Default for AppState {
    fn default() -> Self {
        AppState::new(0, Duration::from_secs(10))
    }
}

impl AppState {
    /// `max_decisions` decisions at once in each lane (0: one per CPU, half for the big lane), the big lane within
    /// [`BIG_LANE_BUDGET`]; requests wait for a slot and arrive within `request_timeout`.
    pub fn new(max_decisions: usize, request_timeout: Duration) -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        // By default the big lane runs on half the CPUs: the other half stays free for small
        // decisions and for the I/O of every connection while maximum-size objects arrive.
        let (small, big) =
            if max_decisions == 0 { (cpus, (cpus / 2).max(1)) } else { (max_decisions, max_decisions) };
        AppState {
            metrics: Metrics::default(),
            lanes: lanes::Lanes::with_reading(small, big, BIG_LANE_BUDGET, READING_BUDGET),
            request_timeout,
            pace: server::Limits { body_timeout: request_timeout, ..server::Limits::default() }.pace(),
            gangs: gangs::GangLookup::off(),
        }
    }

    /// The same state, consulting `gangs`.
    pub fn with_gangs(mut self, gangs: gangs::GangLookup) -> Self {
        self.gangs = gangs;
        self
    }
}

/// The result label a handler gives its response; responses without one (404, 405, …) are
/// labelled by their status.
#[derive(Clone, Copy, Debug)]
struct Outcome(&'static str);

fn hook_of(path: &str) -> &'static str {
    if path.starts_with("/validate") {
        "validate"
    } else if path.starts_with("/mutate") {
        "mutate"
    } else {
        "none"
    }
}

/// Counts every response of the admission port in `gang_webhook_requests_total`: decisions by their
/// result, and what was refused before a decision (unknown path, wrong method, too large, too
/// slow, no decision slot, not an AdmissionReview) by why.
async fn count_responses(
    State(state): State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let hook = hook_of(req.uri().path());
    let res = next.run(req).await;
    let result = match res.extensions().get::<Outcome>() {
        Some(Outcome(r)) => r,
        None => match res.status() {
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
            StatusCode::PAYLOAD_TOO_LARGE => "too_large",
            StatusCode::REQUEST_TIMEOUT => "timeout",
            StatusCode::SERVICE_UNAVAILABLE => "overloaded",
            s if s.is_client_error() => "bad_request",
            _ => "error",
        },
    };
    state.metrics.count(hook, result);
    res
}

/// The AdmissionReview router (served over TLS).
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/validate", post(|s, c, h, b| handle(s, c, h, b, Hook::Validate, false)))
        .route("/mutate", post(|s, c, h, b| handle(s, c, h, b, Hook::Mutate, false)))
        .route("/validate/namespace", post(|s, c, h, b| handle(s, c, h, b, Hook::Validate, true)))
        .route("/mutate/namespace", post(|s, c, h, b| handle(s, c, h, b, Hook::Mutate, true)))
        .layer(axum::middleware::from_fn_with_state(state.clone(), count_responses))
        .with_state(state)
}

fn refuse(status: StatusCode, result: &'static str, message: String) -> Response {
    let mut res = (status, message).into_response();
    res.extensions_mut().insert(Outcome(result));
    res
}

async fn handle(
    State(state): State<AppState>,
    source: Option<axum::Extension<Source>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Body,
    hook: Hook,
    namespace_opted_in: bool,
) -> Response {
    let source = source.map_or(Source::LOCAL, |axum::Extension(s)| s);
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > BODY_LIMIT) {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("request body over {BODY_LIMIT} bytes\n"),
        );
    }
    // Room to start reading, in this client's turn; then the body holds what it has received, no
    // more, and must keep the listener's pace ([`lanes`]).
    let Ok(mut reading) =
        tokio::time::timeout(state.request_timeout, state.lanes.reserve_body(source, declared)).await
    else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "no room to read the request body in time\n".into(),
        );
    };
    let read = kube_gang_serve::body::read_body(body, BODY_LIMIT, state.pace, &mut reading).await;
    reading.done();
    let body = match read {
        Ok(b) => b,
        Err(kube_gang_serve::body::BodyError::TooLarge) => {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("request body over {BODY_LIMIT} bytes\n"),
            );
        }
        Err(kube_gang_serve::body::BodyError::TooSlow) => {
            return refuse(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                "request body not received in time\n".into(),
            );
        }
        Err(e) => return refuse(StatusCode::BAD_REQUEST, "bad_request", format!("{e}\n")),
    };
    let Ok(Some(permit)) =
        tokio::time::timeout(state.request_timeout, state.lanes.acquire(source, body.len())).await
    else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "no decision slot free in time\n".into(),
        );
    };
    let started = Instant::now();
    // The decision is CPU work: off the async workers, so they keep serving connections; a big
    // one on a thread of lower priority ([`lanes`]). A panic in it is caught and becomes a 500.
    let gangs = state.gangs.clone();
    let lane = lanes::Lane::of(body.len());
    let decided = state
        .lanes
        .decide(lane, move || {
            let _permit = permit;
            let _reading = reading;
            let result = admission::review_with(hook, &body, namespace_opted_in, &gangs);
            let encoded = result.map(|(review, s)| (serde_json::to_vec(&review).unwrap_or_default(), s));
            // The request's memory is freed here, on the deciding thread, not on an async worker.
            drop(body);
            encoded
        })
        .await;
    let elapsed = started.elapsed();
    state
        .metrics
        .duration
        .get_or_create(&HookLabel { hook: hook.as_str().into() })
        .observe(elapsed.as_secs_f64());
    match decided {
        Ok(Ok((encoded, s))) => {
            tracing::info!(
                uid = %s.uid, kind = %s.kind, namespace = %s.namespace, name = %s.name,
                operation = %s.operation, hook = hook.as_str(), allowed = s.allowed, patch_ops = s.patched,
                duration_us = elapsed.as_micros() as u64, "admission"
            );
            let mut res = ([(header::CONTENT_TYPE, "application/json")], encoded).into_response();
            res.extensions_mut().insert(Outcome(if s.allowed { "allowed" } else { "denied" }));
            res
        }
        Ok(Err(bad)) => {
            tracing::warn!(hook = hook.as_str(), error = %bad, "malformed AdmissionReview");
            refuse(StatusCode::BAD_REQUEST, "bad_request", format!("{bad}\n"))
        }
        Err(_) => {
            tracing::error!(hook = hook.as_str(), "internal error deciding an AdmissionReview");
            refuse(StatusCode::INTERNAL_SERVER_ERROR, "error", "internal error\n".into())
        }
    }
}

/// The probe router: `/healthz` (the process is up), `/readyz` (serving TLS), `/metrics`.
pub fn probe_router(metrics: Metrics, ready: Arc<AtomicBool>) -> Router {
    kube_gang_serve::probe::routes(
        move || {
            if ready.load(Ordering::Relaxed) {
                Readiness { ready: true, detail: "ok" }
            } else {
                Readiness { ready: false, detail: "not serving yet" }
            }
        },
        move || metrics.encode(),
    )
}

/// Runs the command line.
pub fn main_with(args: Args) -> anyhow::Result<()> {
    if let Some(Command::Certs(c)) = &args.command {
        return certs::run(c);
    }
    kube_gang_serve::log::init(args.log.log_format);
    let rt =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    rt.block_on(async move {
        let stop = kube_gang_serve::shutdown::install()?;
        serve(args, stop.cancelled_owned()).await
    })
}

impl Args {
    /// The connection limits the flags set.
    pub fn limits(&self) -> server::Limits {
        let request = Duration::from_secs(self.request_timeout.max(1));
        server::Limits {
            max_connections: self.max_connections.max(1),
            max_connections_per_source: self.max_connections_per_client.max(1),
            handshake_timeout: request,
            header_timeout: request,
            body_timeout: request,
            idle_timeout: Duration::from_secs(self.idle_timeout.max(1)),
            max_requests_per_connection: self.max_requests_per_connection.max(1),
            drain_timeout: Duration::from_secs(self.shutdown_timeout),
            ..server::Limits::default()
        }
    }
}

/// Serves until `shutdown` resolves; then closes the listener at once and lets in-flight requests
/// finish (up to `--shutdown-timeout`).
pub async fn serve(
    args: Args,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut shutdown = Box::pin(shutdown);
    // Files are read first: a bad one is the first thing said.
    let files = match args.serving_cert {
        ServingCert::Files => Some(tls::Reloading::new(&args.tls_cert_file, &args.tls_key_file)?),
        ServingCert::Managed => None,
    };
    let limits = args.limits();

    let mut state = AppState::new(args.max_decisions, limits.body_timeout);
    state.pace = limits.pace();
    let lookup = if args.gang_lookup { gang_lookup(&args, &state.metrics).await? } else { None };
    if let Some((gangs, _)) = &lookup {
        state = state.with_gangs(gangs.clone());
    }
    let ready = Arc::new(AtomicBool::new(false));
    let probes = kube_gang_serve::probe::Probes::bind(
        args.probe_listen,
        probe_router(state.metrics.clone(), ready.clone()),
        limits.probes(),
        state.metrics.port("probe"),
    )?;
    let probe_addr = probes.addr();
    // The probe port serves before the serving certificate exists: with --serving-cert=managed the
    // first one may wait for the API server, and the kubelet's liveness probe must not kill the pod
    // for it (readiness stays false until the webhook listens).
    let (served, reload) = match files {
        Some(certs) => {
            let reload =
                tokio::spawn(certs.clone().watch(Duration::from_secs(args.tls_reload_period.max(1))));
            (certs.served(), reload)
        }
        None => {
            let Some(client) = kube_client(&args).await? else {
                anyhow::bail!(
                    "--serving-cert=managed needs the Kubernetes API: no kubeconfig and not in a cluster"
                );
            };
            let manager = managed::Manager::new(client, args.managed_target(), args.rotation_policy());
            let served = tokio::select! {
                served = manager.first() => served,
                () = &mut shutdown => {
                    probes.stop();
                    tracing::info!("gang-webhook stopped before its first serving certificate");
                    return Ok(());
                }
            };
            let period = Duration::from_secs(args.cert_check_period.max(1));
            (served.clone(), tokio::spawn(manager.run(served, period)))
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(served.server_config()?));

    let listener = server::bind(args.listen).with_context(|| format!("--listen {}", args.listen))?;
    tracing::info!(listen = %listener.local_addr()?, probe = %probe_addr, "gang-webhook serving");
    ready.store(true, Ordering::Relaxed);
    let not_ready = ready.clone();
    let shutdown = async move {
        shutdown.await;
        not_ready.store(false, Ordering::Relaxed);
    };
    let handshake = move |tcp| {
        let acceptor = acceptor.clone();
        async move { acceptor.accept(tcp).await }
    };
    server::serve(
        listener,
        handshake,
        router(state.clone()),
        limits,
        state.metrics.port("webhook"),
        shutdown,
    )
    .await;
    reload.abort();
    for watch in lookup.into_iter().flat_map(|(_, watches)| watches) {
        watch.abort();
    }
    probes.stop();
    tracing::info!("gang-webhook stopped");
    Ok(())
}

/// Starts the gang lookup's watches ([`gangs`]). `--kubeconfig` must be readable; without it, no
/// client configuration at all (no kubeconfig, no ServiceAccount) turns the lookup off with a
/// warning rather than stopping the webhook.
async fn gang_lookup(
    args: &Args,
    metrics: &Metrics,
) -> anyhow::Result<Option<(gangs::GangLookup, Vec<tokio::task::JoinHandle<()>>)>> {
    let Some(client) = kube_client(args).await? else {
        tracing::warn!("gang lookup off: no Kubernetes client configuration");
        return Ok(None);
    };
    Ok(Some(gangs::GangLookup::watch(client, metrics.gang_lookup.clone())))
}

impl Args {
    /// The objects `--serving-cert=managed` keeps.
    pub fn managed_target(&self) -> managed::Target {
        managed::Target {
            namespace: self.cert_namespace.clone(),
            secret: self.cert_secret.clone(),
            configuration: self.webhook_configuration.clone(),
            names: certs::dns_names(&self.service, &self.cert_namespace, &[]),
        }
    }

    /// The rotation's pace: the defaults, with `--ca-overlap`.
    pub fn rotation_policy(&self) -> rotation::Policy {
        rotation::Policy {
            overlap: i64::try_from(self.ca_overlap).unwrap_or(i64::MAX),
            ..rotation::Policy::default()
        }
    }
}

/// A client from `--kubeconfig` (which must be readable), else `$KUBECONFIG`, `~/.kube/config` or
/// the in-cluster ServiceAccount; `None` when there is none of them.
async fn kube_client(args: &Args) -> anyhow::Result<Option<kube::Client>> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("--kubeconfig {}", path.display()))?
        }
        None => match kube::Config::infer().await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "no Kubernetes client configuration");
                return Ok(None);
            }
        },
    };
    Ok(Some(kube::Client::try_from(config).context("the Kubernetes client")?))
}
