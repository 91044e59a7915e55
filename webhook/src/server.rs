//! Connections: the accept loop and what one connection may cost, on both ports.
//!
//! Every connection holds a slot of a bounded pool ([`Limits::max_connections`]); when the pool is
//! empty the loop stops accepting, and the kernel's backlog holds the rest. A connection must finish
//! its TLS handshake, its first request's headers, each request's headers and each request's body
//! within their timeouts; an idle one (no request in flight) is closed after
//! [`Limits::idle_timeout`], and after
//! [`Limits::max_requests_per_connection`] requests it is asked to close (HTTP/1.1 `Connection:
//! close`, HTTP/2 `GOAWAY`) so clients spread over replicas again. An accept error that is about the
//! process (no file descriptors left, no memory) is retried with a growing pause and logged once per
//! second with a count, never in a busy loop. On shutdown the listener is closed at once (new
//! connections are refused by the kernel), open connections are asked to finish, and whatever is
//! still open after the drain period is dropped.
//!
//! **Handshakes** are CPU work on the async workers (key exchange, signature). At most
//! [`Limits::max_handshakes`] are worked on at once ([`throttled`]): a handshake holds a permit only
//! while it computes, never while it waits for its client, so a wave of reconnecting clients queues
//! up behind the permits instead of in front of every established connection's I/O, and a client
//! that stalls mid-handshake holds nothing but its connection slot.
//!
//! **HTTP/2** connections advertise 64 KiB flow-control windows (per stream and per connection), so
//! a connection holds at most 64 KiB its handlers have not read, and at most
//! [`Limits::max_streams`] requests at once; each request's body is then bounded by the lanes'
//! reading budgets ([`crate::lanes`]) however many streams carry one.
//!
//! **What hyper answers itself** (a 400 for bad HTTP, a 431 or 414 for headers or a URI too large)
//! and connections closed for slow headers are reported to [`ConnectionEvents`] like every other
//! close, so the metrics count them.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;
use tower::ServiceExt;

/// What a connection may cost. The defaults suit the API server as a client: it keeps a few
/// connections per replica alive and sends requests of at most 3 MiB within its webhook timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once (in handshake or established); more wait in the kernel backlog.
    pub max_connections: usize,
    /// Time to complete the TLS handshake.
    pub handshake_timeout: Duration,
    /// Handshakes worked on at once (a handshake waiting for its client holds no permit).
    pub max_handshakes: usize,
    /// Time to send a request's headers, and, after the handshake, to send the first one. HTTP/1.1
    /// also waits for the next request's headers under this timeout, so it bounds how long an idle
    /// HTTP/1.1 connection stays open too.
    pub header_timeout: Duration,
    /// Time to send a request's body.
    pub body_timeout: Duration,
    /// A connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// Requests one connection may carry before it is asked to close.
    pub max_requests_per_connection: usize,
    /// HTTP/2 streams one connection may have open at once.
    pub max_streams: u32,
    /// After shutdown starts, how long in-flight requests have to finish.
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        Limits {
            max_connections: 1024,
            handshake_timeout: Duration::from_secs(5),
            max_handshakes: 2 * cpus,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(90),
            max_requests_per_connection: 10_000,
            max_streams: 16,
            drain_timeout: Duration::from_secs(20),
        }
    }
}

/// The probe port's header and body timeout: the kubelet and Prometheus send a few hundred bytes
/// at once, so a slow client there is cut off sooner than on the admission port.
pub const PROBE_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

impl Limits {
    /// The probe port's limits: the kubelet and Prometheus are its only clients.
    pub fn probes(&self) -> Limits {
        Limits {
            max_connections: 64,
            max_streams: 8,
            header_timeout: self.header_timeout.min(PROBE_REQUEST_TIMEOUT),
            body_timeout: self.body_timeout.min(PROBE_REQUEST_TIMEOUT),
            ..self.clone()
        }
    }
}

/// Runs `work` holding a permit of `permits` only while it is being polled: each time it is woken,
/// it waits (fairly) for a permit, is polled once, and gives the permit back. So at most as many
/// such futures compute at once as there are permits, and one waiting for I/O holds none.
pub async fn throttled<F: Future>(permits: &Semaphore, work: F) -> F::Output {
    let mut work = pin!(work);
    loop {
        let permit = permits.acquire().await;
        let polled = std::future::poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx))).await;
        drop(permit);
        match polled {
            Poll::Ready(out) => return out,
            // Wait to be woken by what `work` waits for (a spurious wake only costs a permit turn).
            Poll::Pending => {
                let mut yielded = false;
                std::future::poll_fn(|_| {
                    if yielded {
                        Poll::Ready(())
                    } else {
                        yielded = true;
                        Poll::Pending
                    }
                })
                .await;
            }
        }
    }
}

/// A source of connections: a TCP listener, or a test's stand-in that fails on purpose.
pub trait Listener: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept(&mut self) -> impl Future<Output = io::Result<(Self::Io, SocketAddr)>> + Send;
}

impl Listener for tokio::net::TcpListener {
    type Io = tokio::net::TcpStream;
    async fn accept(&mut self) -> io::Result<(Self::Io, SocketAddr)> {
        let (tcp, peer) = tokio::net::TcpListener::accept(self).await?;
        let _ = tcp.set_nodelay(true);
        Ok((tcp, peer))
    }
}

/// The pause after an accept error, and when to log it.
#[derive(Debug)]
pub struct Backoff {
    delay: Duration,
    suppressed: u64,
    last_log: Option<Instant>,
}

/// The first pause after a resource error, and the longest.
pub const BACKOFF_MIN: Duration = Duration::from_millis(5);
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);

impl Default for Backoff {
    fn default() -> Self {
        Backoff { delay: Duration::ZERO, suppressed: 0, last_log: None }
    }
}

impl Backoff {
    /// How long to pause after `e`. Errors about one connection (it was reset before we took it)
    /// need no pause; errors about the process (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`, anything
    /// else) double the pause, from 5 ms up to 1 s. Logs at most once a second, with the count of
    /// errors not logged since.
    pub fn on_error(&mut self, e: &io::Error) -> Duration {
        if matches!(
            e.kind(),
            io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted
        ) {
            tracing::debug!(error = %e, "connection closed before it was accepted");
            return Duration::ZERO;
        }
        self.delay = (self.delay * 2).clamp(BACKOFF_MIN, BACKOFF_MAX);
        let now = Instant::now();
        if self.last_log.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
            tracing::warn!(
                error = %e, pause_ms = self.delay.as_millis() as u64, suppressed = self.suppressed,
                "accept failed; pausing before the next accept"
            );
            self.last_log = Some(now);
            self.suppressed = 0;
        } else {
            self.suppressed += 1;
        }
        self.delay
    }

    /// An accept succeeded: the next error starts from the shortest pause again.
    pub fn on_success(&mut self) {
        self.delay = Duration::ZERO;
    }
}

/// Per-connection bookkeeping shared with the service: requests in flight, requests served, the
/// last time a request ended.
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    served: AtomicUsize,
    last: std::sync::Mutex<Instant>,
    changed: Notify,
}

impl Activity {
    fn new() -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            served: AtomicUsize::new(0),
            last: std::sync::Mutex::new(Instant::now()),
            changed: Notify::new(),
        }
    }

    fn last(&self) -> Instant {
        *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Counts connections refused or dropped by a limit, for the metrics.
pub trait ConnectionEvents: Clone + Send + Sync + 'static {
    /// The server closed a connection, for `reason`.
    fn closed(&self, reason: &'static str);
    /// hyper answered a request itself, before any handler saw it (`result`: `bad_request` for a
    /// 400, `headers_too_large` for a 431 or 414).
    fn answered_by_hyper(&self, _result: &'static str) {}
}

/// Why a connection ended with an error, as the metrics name it: `None` when the client went away
/// (a reset, an unexpected end) rather than the server closing it. The second value is the response
/// hyper wrote, if any.
fn classify(e: &(dyn std::error::Error + 'static)) -> Option<(&'static str, Option<&'static str>)> {
    let hyper = e.downcast_ref::<hyper::Error>()?;
    if hyper.is_timeout() {
        Some(("header_timeout", None))
    } else if hyper.is_parse_too_large() {
        Some(("headers_too_large", Some("headers_too_large")))
    } else if hyper.is_parse() {
        Some(("bad_http", Some("bad_request")))
    } else {
        None
    }
}

/// Serves `listener` until `shutdown` resolves. `handshake` turns a raw connection into the stream
/// HTTP is spoken on (TLS, or nothing for the probe port); `app` answers requests.
pub async fn serve<L, H, F, S>(
    mut listener: L,
    handshake: H,
    app: Router,
    limits: Limits,
    events: impl ConnectionEvents,
    shutdown: impl Future<Output = ()>,
) where
    L: Listener,
    H: Fn(L::Io) -> F + Clone + Send + 'static,
    F: Future<Output = io::Result<S>> + Send,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let handshakes = Arc::new(Semaphore::new(limits.max_handshakes.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut backoff = Backoff::default();
    tokio::pin!(shutdown);
    loop {
        // A free slot first: a full pool stops accepting rather than accepting and dropping.
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(s) => s,
                Err(_) => break,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (io, peer) = match accepted {
            Ok(a) => {
                backoff.on_success();
                a
            }
            Err(e) => {
                drop(slot);
                let pause = backoff.on_error(&e);
                if !pause.is_zero() {
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(pause) => {}
                    }
                }
                continue;
            }
        };
        let (handshake, app, limits, events, handshakes) =
            (handshake.clone(), app.clone(), limits.clone(), events.clone(), handshakes.clone());
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            let _slot = slot;
            let shaking = throttled(&handshakes, handshake(io));
            let stream = tokio::select! {
                done = tokio::time::timeout(limits.handshake_timeout, shaking) => match done {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "handshake failed");
                        events.closed("handshake_failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "handshake timed out");
                        events.closed("handshake_timeout");
                        return;
                    }
                },
                _ = stop.changed() => return,
            };
            connection(stream, app, &limits, &events, stop).await;
        });
    }
    // Stop accepting at once: the listening socket closes here, so new connections are refused.
    drop(listener);
    tracing::info!(open = connections.len(), "shutting down: finishing in-flight requests");
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(limits.drain_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(open = connections.len(), "drain period over; closing the remaining connections");
        connections.abort_all();
    }
}

/// The HTTP/2 flow-control windows a connection advertises, per stream and for the connection.
pub const H2_WINDOW: u32 = 64 * 1024;

/// Serves HTTP/1.1 or HTTP/2 on one established connection, within `limits`.
async fn connection<S>(
    stream: S,
    app: Router,
    limits: &Limits,
    events: &impl ConnectionEvents,
    mut stop: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let seen = activity.clone();
    let max_requests = limits.max_requests_per_connection.max(1);
    let service = tower::service_fn(move |req: axum::extract::Request<hyper::body::Incoming>| {
        let app = app.clone();
        let seen = seen.clone();
        seen.in_flight.fetch_add(1, Ordering::SeqCst);
        let n = seen.served.fetch_add(1, Ordering::SeqCst) + 1;
        // HTTP/2 has no `Connection` header; its connections are closed with GOAWAY below.
        let http1 = req.version() < http::Version::HTTP_2;
        async move {
            let mut res = app.oneshot(req.map(axum::body::Body::new)).await;
            if n >= max_requests
                && http1
                && let Ok(r) = &mut res
            {
                r.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
            }
            *seen.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
            seen.in_flight.fetch_sub(1, Ordering::SeqCst);
            seen.changed.notify_one();
            res
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(64 * 1024);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_streams)
        // hyper's default windows are 1 MiB: that much of a body would sit in memory before its
        // handler reserved room to read it ([`crate::lanes`]).
        .initial_stream_window_size(H2_WINDOW)
        .initial_connection_window_size(H2_WINDOW)
        .max_header_list_size(16 * 1024)
        .keep_alive_interval(Some(limits.idle_timeout / 3))
        .keep_alive_timeout(limits.header_timeout);
    let conn = builder
        .serve_connection(TokioIo::new(stream), hyper_util::service::TowerToHyperService::new(service));
    tokio::pin!(conn);
    let opened = Instant::now();
    let closing = loop {
        // Until its first request, a connection has the header timeout (a client that sends less
        // than HTTP/2's preface, or nothing, after its handshake); then the idle timeout.
        let idle_at = if activity.served.load(Ordering::SeqCst) == 0 {
            opened + limits.header_timeout
        } else {
            activity.last() + limits.idle_timeout
        };
        tokio::select! {
            ended = conn.as_mut() => {
                if let Err(e) = ended
                    && let Some((reason, answer)) = classify(e.as_ref())
                {
                    if let Some(result) = answer {
                        events.answered_by_hyper(result);
                    }
                    events.closed(reason);
                }
                return;
            }
            _ = stop.changed() => break "shutdown",
            () = activity.changed.notified() => {
                if activity.served.load(Ordering::SeqCst) >= max_requests
                    && activity.in_flight.load(Ordering::SeqCst) == 0
                {
                    break "request_cap";
                }
            }
            () = tokio::time::sleep_until(idle_at) => {
                if activity.in_flight.load(Ordering::SeqCst) == 0 {
                    if activity.served.load(Ordering::SeqCst) == 0 {
                        // Nothing to finish: dropped at once.
                        events.closed("header_timeout");
                        return;
                    }
                    if activity.last() + limits.idle_timeout <= Instant::now() {
                        break "idle";
                    }
                }
            }
        }
    };
    events.closed(closing);
    conn.as_mut().graceful_shutdown();
    // A client that does not let go is dropped once the drain period is over.
    let _ = tokio::time::timeout(limits.drain_timeout, conn).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_throttled_future_holds_a_permit_only_while_it_is_polled() {
        let permits = Semaphore::new(1);
        let (wake, woken) = tokio::sync::oneshot::channel::<()>();
        // Each time it runs, the work checks that it holds the only permit.
        let work = async {
            assert_eq!(permits.available_permits(), 0, "polled without the permit");
            let _ = woken.await;
            assert_eq!(permits.available_permits(), 0, "polled without the permit");
            7
        };
        let mut shaking = std::pin::pin!(throttled(&permits, work));
        assert!(futures::poll!(shaking.as_mut()).is_pending());
        assert_eq!(permits.available_permits(), 1, "waiting for its peer, it holds no permit");
        // Another one computes meanwhile.
        assert_eq!(throttled(&permits, async { 1 }).await, 1);
        // Woken while every permit is taken, it waits for one.
        let taken = permits.acquire().await.unwrap();
        let _ = wake.send(());
        assert!(futures::poll!(shaking.as_mut()).is_pending());
        drop(taken);
        assert_eq!(shaking.await, 7);
    }

    #[test]
    fn resource_errors_back_off_and_per_connection_errors_do_not() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            let mut b = Backoff::default();
            let emfile = io::Error::from_raw_os_error(24);
            let pauses: Vec<Duration> = (0..10).map(|_| b.on_error(&emfile)).collect();
            assert_eq!(pauses[0], BACKOFF_MIN);
            assert_eq!(pauses[1], BACKOFF_MIN * 2);
            assert_eq!(pauses[9], BACKOFF_MAX);
            assert_eq!(b.on_error(&io::Error::from(io::ErrorKind::ConnectionAborted)), Duration::ZERO);
            b.on_success();
            assert_eq!(b.on_error(&emfile), BACKOFF_MIN);
        });
    }
}
