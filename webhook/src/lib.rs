//! gang-webhook: kube-gang's admission webhook. `POST /validate` and `POST /mutate` (and
//! `/mutate/namespace`, `/validate/namespace` for the hooks selected by namespace label) take
//! `admission.k8s.io/v1` AdmissionReviews over TLS; probes and metrics are plain HTTP on
//! `--probe-listen`. The rules are the core's: this crate adds none.

pub mod admission;
pub mod certs;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use clap::{Parser, Subcommand, ValueEnum};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use admission::Hook;

/// The API server refuses requests over 3 MiB; an AdmissionReview wraps the object (and, on update,
/// the old one), so leave room for both.
pub const BODY_LIMIT: usize = 7 * 1024 * 1024;

/// gang-webhook: validates gangs and injects gang labels, annotations and schedulerName on
/// `kubectl apply`.
#[derive(Debug, Parser)]
#[command(name = "gang-webhook", version)]
pub struct Args {
    /// HTTPS address for AdmissionReviews.
    #[arg(long, default_value = "0.0.0.0:8443", env = "GANG_WEBHOOK_LISTEN")]
    pub listen: SocketAddr,
    /// PEM certificate chain served on --listen; re-read when it changes.
    #[arg(long, value_name = "FILE", default_value = "/etc/gang-webhook/tls/tls.crt")]
    pub tls_cert_file: PathBuf,
    /// PEM private key for --tls-cert-file.
    #[arg(long, value_name = "FILE", default_value = "/etc/gang-webhook/tls/tls.key")]
    pub tls_key_file: PathBuf,
    /// How often the certificate files are checked for changes, in seconds.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub tls_reload_period: u64,
    /// Plain-HTTP address for /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub probe_listen: SocketAddr,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Json,
    Plain,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a CA and a serving certificate for the webhook Service (installs without cert-manager);
    /// prints the caBundle (base64 of the CA) on stdout.
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
        let build = Family::<VersionLabel, prometheus_client::metrics::gauge::Gauge>::default();
        build.get_or_create(&VersionLabel { version: env!("CARGO_PKG_VERSION").into() }).set(1);
        registry.register("gang_webhook_build_info", "Build version", build);
        Metrics { requests, duration, registry: Arc::new(registry) }
    }
}

impl Metrics {
    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Shared state of the admission router.
#[derive(Debug, Clone, Default)]
pub struct AppState {
    pub metrics: Metrics,
}

/// The AdmissionReview router (served over TLS).
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/validate", post(|s, b| handle(s, b, Hook::Validate, false)))
        .route("/mutate", post(|s, b| handle(s, b, Hook::Mutate, false)))
        .route("/validate/namespace", post(|s, b| handle(s, b, Hook::Validate, true)))
        .route("/mutate/namespace", post(|s, b| handle(s, b, Hook::Mutate, true)))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

async fn handle(
    State(state): State<AppState>,
    body: Bytes,
    hook: Hook,
    namespace_opted_in: bool,
) -> Response {
    let started = Instant::now();
    // The decision is CPU work on a bounded input; a panic in it must not take the process down.
    let result = std::panic::catch_unwind(|| admission::review(hook, &body, namespace_opted_in));
    let elapsed = started.elapsed();
    state
        .metrics
        .duration
        .get_or_create(&HookLabel { hook: hook.as_str().into() })
        .observe(elapsed.as_secs_f64());
    let count = |result: &str| {
        state
            .metrics
            .requests
            .get_or_create(&HookLabels { hook: hook.as_str().into(), result: result.into() })
            .inc();
    };
    match result {
        Ok(Ok((review, s))) => {
            count(if s.allowed { "allowed" } else { "denied" });
            tracing::info!(
                uid = %s.uid, kind = %s.kind, namespace = %s.namespace, name = %s.name,
                operation = %s.operation, hook = hook.as_str(), allowed = s.allowed, patch_ops = s.patched,
                duration_us = elapsed.as_micros() as u64, "admission"
            );
            ([(header::CONTENT_TYPE, "application/json")], serde_json::to_vec(&review).unwrap_or_default())
                .into_response()
        }
        Ok(Err(bad)) => {
            count("bad_request");
            tracing::warn!(hook = hook.as_str(), error = %bad, "malformed AdmissionReview");
            (StatusCode::BAD_REQUEST, format!("{bad}\n")).into_response()
        }
        Err(_) => {
            count("error");
            tracing::error!(hook = hook.as_str(), "internal error deciding an AdmissionReview");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error\n").into_response()
        }
    }
}

/// The probe router: `/healthz` (the process is up), `/readyz` (serving TLS), `/metrics`.
pub fn probe_router(metrics: Metrics, ready: Arc<AtomicBool>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.load(Ordering::Relaxed);
                async move {
                    if ready {
                        (StatusCode::OK, "ok\n")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not serving yet\n")
                    }
                }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let text = metrics.encode();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        text,
                    )
                }
            }),
        )
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Plain => builder.try_init(),
    };
}

/// Runs the command line.
pub fn main_with(args: Args) -> anyhow::Result<()> {
    if let Some(Command::Certs(c)) = &args.command {
        return certs::run(c);
    }
    init_tracing(args.log_format);
    let rt =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    rt.block_on(serve(args, shutdown_signal()))
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Serves until `shutdown` resolves, then lets in-flight requests finish (up to 10 s).
pub async fn serve(
    args: Args,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let certs = tls::Reloading::new(&args.tls_cert_file, &args.tls_key_file)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(certs.server_config()?));
    tokio::spawn(certs.clone().watch(Duration::from_secs(args.tls_reload_period.max(1))));

    let state = AppState::default();
    let ready = Arc::new(AtomicBool::new(false));
    let probes = tokio::net::TcpListener::bind(args.probe_listen)
        .await
        .with_context(|| format!("--probe-listen {}", args.probe_listen))?;
    let probe_app = probe_router(state.metrics.clone(), ready.clone());
    tokio::spawn(async move {
        let _ = axum::serve(probes, probe_app).await;
    });

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("--listen {}", args.listen))?;
    tracing::info!(listen = %listener.local_addr()?, probe = %args.probe_listen, "gang-webhook serving");
    ready.store(true, Ordering::Relaxed);
    let app = router(state);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let (tcp, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                let acceptor = acceptor.clone();
                let app = app.clone();
                let mut stop = stop_rx.clone();
                connections.spawn(async move {
                    let tls = match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    };
                    let service = hyper_util::service::TowerToHyperService::new(app);
                    let builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
                    let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(tls), service);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = stop.changed() => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    tracing::info!("shutting down: finishing in-flight requests");
    ready.store(false, Ordering::Relaxed);
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}
