//! The probe and metrics port both servers serve: `/healthz`, `/readyz` and `/metrics`, on a
//! thread and runtime of their own ([`Probes`]), within [`Limits::probes`]. Whatever the server's
//! own workers are doing — a scheduling cycle of 140,000 pods, every decision slot of the webhook
//! taken — the kubelet's probe is answered, and no client of the port can hold it: it has the
//! connection, header and idle limits of every listener ([`crate::server`]), a header buffer of
//! 16 KiB and 2 s to send a request.

use std::net::SocketAddr;

use anyhow::Context as _;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::server::{self, ConnectionEvents, Limits};

/// The content type of `/metrics`: the OpenMetrics text `prometheus-client` writes.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What `/readyz` answers: ready or not, and the line that says why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    pub detail: &'static str,
}

/// The probe routes: `/healthz` (200 `ok` while the process serves), `/readyz` (200 or 503 with
/// `readiness`'s line), `/metrics` (`metrics`' text). Every body ends with a newline.
pub fn routes<R, M>(readiness: R, metrics: M) -> Router
where
    R: Fn() -> Readiness + Clone + Send + Sync + 'static,
    M: Fn() -> String + Clone + Send + Sync + 'static,
{
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let r = readiness();
                async move {
                    let status = if r.ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
                    (status, format!("{}\n", r.detail))
                }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let text = metrics();
                async move { ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], text) }
            }),
        )
}

/// The labels of a connections-closed counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CloseLabels {
    pub port: String,
    pub reason: String,
}

/// Connections a server closed, by port and reason (a limit, a timeout, bad HTTP, a failed
/// handshake, one closed for another client's, shutdown); each server registers it under its own
/// name.
#[derive(Clone, Debug, Default)]
pub struct ClosedConnections(pub Family<CloseLabels, Counter>);

impl ClosedConnections {
    /// The events of one port, counted here.
    pub fn port(&self, port: &'static str) -> PortEvents {
        PortEvents { closed: self.clone(), port }
    }
}

/// Counts the connections one port closes, by reason.
#[derive(Clone, Debug)]
pub struct PortEvents {
    closed: ClosedConnections,
    port: &'static str,
}

impl ConnectionEvents for PortEvents {
    fn closed(&self, reason: &'static str) {
        self.closed.0.get_or_create(&CloseLabels { port: self.port.into(), reason: reason.into() }).inc();
    }
}

/// A probe port served by a thread with a runtime of its own; stopped by [`Probes::stop`] (or
/// when dropped).
#[derive(Debug)]
pub struct Probes {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Probes {
    /// Binds `addr` (an error names it; the kernel's queue [`server::BACKLOG`] deep) and serves
    /// `app` there within `limits`.
    pub fn bind(
        addr: SocketAddr,
        app: Router,
        limits: Limits,
        events: impl ConnectionEvents,
    ) -> anyhow::Result<Probes> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the probe runtime")?;
        // Registered with the probe runtime (not the caller's, if it has one).
        let listener = {
            let _in_probe_runtime = rt.enter();
            server::bind(addr).with_context(|| format!("--probe-listen {addr}"))?
        };
        let addr = listener.local_addr().context("the probe port's address")?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("probes".into())
            .spawn(move || {
                rt.block_on(async move {
                    let plain = |tcp| async move { std::io::Result::Ok(tcp) };
                    let stopped = async move {
                        let _ = stopped.await;
                    };
                    server::serve(listener, plain, app, limits, events, stopped).await;
                });
            })
            .context("starting the probe thread")?;
        Ok(Probes { addr, stop: Some(stop), thread: Some(thread) })
    }

    /// The address served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving (the listener closes at once; open connections drain within the limits'
    /// drain period) and waits for the thread.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        self.shut();
    }
}
