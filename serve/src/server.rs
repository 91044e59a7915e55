//! Listeners: the accept loop and what one connection may cost, for every port of both servers
//! (the webhook's admission port, and each server's probe and metrics port).
//!
//! **Connections.** Every connection holds a slot of a bounded pool ([`Limits::max_connections`]),
//! and one client — one peer address, a [`Source`] — at most [`Limits::max_connections_per_source`]
//! of them: a connection beyond that is closed as soon as it is accepted. When the pool is full,
//! the idlest connection of the client holding the most is closed: one
//! that has not finished a request yet first (oldest first), else the one idle longest
//! ([`Pool`]). Only when every connection is in the middle of a request does the loop stop
//! accepting and leave the rest to the kernel's backlog. So a flood of idle connections from one
//! client (1,100 opened in 0.07 s used to keep a new API-server connection waiting 4.4 s) costs
//! that client its own connections, never another's, and a new client gets a slot at once.
//!
//! **Time.** A connection must finish its TLS handshake, its first request's headers, each
//! request's headers and each request's body within their timeouts; a body must also keep up a
//! minimum rate after a grace period ([`Limits::pace`], [`crate::body`]); an idle one (no request
//! in flight) is closed after [`Limits::idle_timeout`], and after
//! [`Limits::max_requests_per_connection`] requests it is asked to close (HTTP/1.1 `Connection:
//! close`, HTTP/2 `GOAWAY`) so clients spread over replicas again. An accept error that is about the
//! process (no file descriptors left, no memory) is retried with a growing pause and logged once per
//! second with a count, never in a busy loop. On shutdown the listener is closed at once (new
//! connections are refused by the kernel), open connections are asked to finish, and whatever is
//! still open after the drain period is dropped.
//!
//! **Handshakes** are CPU work on the async workers (key exchange, signature), and cost a client
//! next to nothing (a message it can replay): a client may open [`Limits::handshake_burst`] new
//! connections at once and [`Limits::handshakes_per_second`] after that, more are closed as they
//! are accepted. At most [`Limits::max_handshakes`] are worked on at once, given in turn between
//! clients
//! ([`throttled`], [`crate::fair`]): a handshake holds a permit only while it computes, never while
//! it waits for its client, so a wave of reconnecting clients queues up behind the permits instead
//! of in front of every established connection's I/O, a client that stalls mid-handshake holds
//! nothing but its connection slot, and a client starting hundreds of handshakes waits for its own.
//!
//! **Memory.** Request headers are bounded ([`Limits::max_header_bytes`]: hyper's HTTP/1.1 read
//! buffer and HTTP/2's header list), HTTP/2 connections advertise 64 KiB flow-control windows (per
//! stream and per connection), so a connection holds at most 64 KiB its handlers have not read, and
//! at most [`Limits::max_streams`] requests at once. A connection therefore costs a bounded amount,
//! and the pool bounds the connections: an unfinished header cannot grow (1,000 connections of
//! ~370 KB unfinished headers used to add 378 MB to the scheduler).
//!
//! **What hyper answers itself** (a 400 for bad HTTP, a 431 or 414 for headers or a URI too large)
//! and connections closed for slow headers are reported to [`ConnectionEvents`] like every other
//! close, so the metrics count them.
//!
//! Each request carries its connection's [`Source`] in its extensions, so handlers can share what
//! they hold between clients ([`crate::fair`]).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;
use tower::ServiceExt;

use crate::body::Pace;
use crate::fair::{Fair, Source};

/// What a connection may cost. The defaults suit the API server as a client: it keeps a few
/// connections per replica alive and sends requests of at most 3 MiB within its webhook timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once (in handshake or established). When full, an idle one of the
    /// client holding the most is closed for a new one; only when none is idle do more wait in the
    /// kernel backlog.
    pub max_connections: usize,
    /// Connections one client (peer address) may have open at once; one beyond it is closed as
    /// soon as it is accepted.
    pub max_connections_per_source: usize,
    /// Time to complete the TLS handshake.
    pub handshake_timeout: Duration,
    /// Handshakes worked on at once (a handshake waiting for its client holds no permit).
    pub max_handshakes: usize,
    /// New connections (each a TLS handshake to compute) one client may open per second, beyond
    /// [`Limits::handshake_burst`]; more are closed as soon as they are accepted. 0: no limit (a
    /// port without TLS, where a connection costs the server no more than the client).
    pub handshakes_per_second: u32,
    /// New connections one client may open at once before [`Limits::handshakes_per_second`]
    /// holds it back.
    pub handshake_burst: u32,
    /// Time to send a request's headers, and, after the handshake, to send the first one. HTTP/1.1
    /// also waits for the next request's headers under this timeout, so it bounds how long an idle
    /// HTTP/1.1 connection stays open too.
    pub header_timeout: Duration,
    /// Time to send a request's body, at most.
    pub body_timeout: Duration,
    /// Before [`Limits::body_timeout`]: after this grace period, a body must keep up
    /// [`Limits::body_min_rate`] on average, or it is cut off.
    pub body_grace: Duration,
    /// Bytes per second a body must average after its grace period.
    pub body_min_rate: u64,
    /// The most a request's headers may take (hyper's HTTP/1.1 read buffer, at least 8 KiB; the
    /// HTTP/2 header list).
    pub max_header_bytes: usize,
    /// A connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// Requests one connection may carry before it is asked to close.
    pub max_requests_per_connection: usize,
    /// HTTP/2 streams one connection may have open at once.
    pub max_streams: u32,
    /// After shutdown starts, how long in-flight requests have to finish.
    pub drain_timeout: Duration,
}

/// A body's grace period before it must keep up [`BODY_MIN_RATE`]. The API server writes a review
/// at once; even across a slow link (TCP's slow start over tens of milliseconds of round trip) the
/// first 64 KiB arrive well within it.
pub const BODY_GRACE: Duration = Duration::from_millis(500);

/// The rate a body must average after [`BODY_GRACE`]: 256 KiB/s, some thousand times below any
/// cluster network's, which the API server sends at. A client trickling a body is cut off once it
/// falls behind it, so the budget it holds ([`crate::fair`]) it holds briefly.
pub const BODY_MIN_RATE: u64 = 256 * 1024;

/// New TLS connections one client may open per second after its burst. A TLS handshake costs the
/// server a key exchange and a signature (~0.2 ms of CPU), and the client a message it can replay
/// for nothing: without a rate a client could spend all of the server's CPU at no cost to itself;
/// at this one, a client spends at most a fiftieth of a CPU on them. The API server keeps its
/// connections alive, but an HTTP/1.1 client under a burst opens one per request in flight and
/// closes those it cannot keep idle (Go's transport keeps 2), so the rate leaves it room.
pub const HANDSHAKES_PER_SECOND: u32 = 100;

/// New TLS connections one client may open at once: every API server replica reconnecting after a
/// restart, or a burst of requests in flight.
pub const HANDSHAKE_BURST: u32 = 200;

/// Clients whose connection rate is remembered, at most; beyond, those back to a full burst are
/// forgotten (they would be admitted as new anyway).
const RATES_REMEMBERED: usize = 4096;

/// Each client's new-connection allowance: a token bucket.
#[derive(Debug, Default)]
struct Rates {
    buckets: HashMap<Source, (f64, Instant)>,
}

impl Rates {
    /// Whether `source` may open one more connection now (taking it from its allowance).
    fn admit(&mut self, source: Source, per_second: u32, burst: u32) -> bool {
        if per_second == 0 {
            return true;
        }
        let now = Instant::now();
        let (rate, burst) = (f64::from(per_second), f64::from(burst.max(1)));
        if self.buckets.len() >= RATES_REMEMBERED {
            self.buckets
                .retain(|_, (tokens, at)| *tokens + now.duration_since(*at).as_secs_f64() * rate < burst);
        }
        let (tokens, at) = self.buckets.entry(source).or_insert((burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * rate).min(burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        Limits {
            max_connections: 1024,
            max_connections_per_source: 256,
            handshake_timeout: Duration::from_secs(5),
            max_handshakes: 2 * cpus,
            handshakes_per_second: HANDSHAKES_PER_SECOND,
            handshake_burst: HANDSHAKE_BURST,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            body_grace: BODY_GRACE,
            body_min_rate: BODY_MIN_RATE,
            max_header_bytes: 64 * 1024,
            idle_timeout: Duration::from_secs(90),
            max_requests_per_connection: 10_000,
            max_streams: 16,
            drain_timeout: Duration::from_secs(20),
        }
    }
}

/// The probe port's header and body timeout: the kubelet and Prometheus send a few hundred bytes
/// at once, so a slow client there is cut off sooner than on the admission port; within the
/// kubelet's own 1 s probe timeout a probe has long been answered or failed.
pub const PROBE_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

impl Limits {
    /// A probe and metrics port's limits: the kubelet (from the node's address, one connection
    /// per probe) and Prometheus (one or two kept alive) are its only clients, and send requests
    /// of a few hundred bytes without bodies.
    pub fn probes(&self) -> Limits {
        Limits {
            max_connections: 64,
            max_connections_per_source: 8,
            max_streams: 8,
            header_timeout: self.header_timeout.min(PROBE_REQUEST_TIMEOUT),
            body_timeout: self.body_timeout.min(PROBE_REQUEST_TIMEOUT),
            idle_timeout: self.idle_timeout.min(Duration::from_secs(60)),
            max_header_bytes: 16 * 1024,
            // Plain HTTP: a connection costs the server no more than it costs the client.
            handshakes_per_second: 0,
            ..self.clone()
        }
    }

    /// How fast a request's body must arrive.
    pub fn pace(&self) -> Pace {
        Pace { grace: self.body_grace, min_rate: self.body_min_rate, max: self.body_timeout }
    }
}

/// Runs `work` holding a permit of `permits` only while it is being polled: each time it is woken,
/// it waits for a permit in `source`'s turn, is polled once, and gives the permit back. So at most
/// as many such futures compute at once as there are permits, one waiting for I/O holds none, and
/// clients take turns.
pub async fn throttled<F: Future>(permits: &Fair, source: Source, work: F) -> F::Output {
    let mut work = pin!(work);
    loop {
        let permit = permits.acquire(source, 1).await;
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

/// The kernel's queue of connections accepted but not yet taken (`listen(2)`'s backlog; Linux
/// caps it at `net.core.somaxconn`, 4096 by default). A flood fills the queue faster than it is
/// drained for a moment at a time; a short one drops a legitimate client's SYN, which it then
/// resends only after a second (std's default is 128, tokio's 1,024).
pub const BACKLOG: u32 = 4096;

/// Binds a TCP listener on `addr` with [`BACKLOG`] (inside a tokio runtime).
pub fn bind(addr: SocketAddr) -> io::Result<tokio::net::TcpListener> {
    let socket =
        if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
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

/// Per-connection bookkeeping shared with the service and the [`Pool`]: requests in flight,
/// requests served, the last time a request ended, and the order to close.
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    served: AtomicUsize,
    opened: Instant,
    last: Mutex<Instant>,
    changed: Notify,
    /// Set (and `evict` notified) when the pool closes this connection for another.
    evicting: AtomicBool,
    evict: Notify,
    /// The pool's: told when a request ends, so a new connection waiting for a slot may have an
    /// idle one closed for it.
    pool_idle: Arc<Notify>,
}

impl Activity {
    fn new(pool_idle: Arc<Notify>) -> Self {
        let now = Instant::now();
        Activity {
            in_flight: AtomicUsize::new(0),
            served: AtomicUsize::new(0),
            opened: now,
            last: Mutex::new(now),
            changed: Notify::new(),
            evicting: AtomicBool::new(false),
            evict: Notify::new(),
            pool_idle,
        }
    }

    fn last(&self) -> Instant {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether it may be closed for another: no request in flight, not being closed already.
    fn idle(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0 && !self.evicting.load(Ordering::SeqCst)
    }

    /// The order in which idle connections are closed for others (lowest first): those that have
    /// not finished a request, oldest first, then those idle longest.
    fn eviction_rank(&self) -> (bool, Instant) {
        if self.served.load(Ordering::SeqCst) == 0 { (false, self.opened) } else { (true, self.last()) }
    }

    fn close_for_another(&self) {
        self.evicting.store(true, Ordering::SeqCst);
        self.evict.notify_one();
    }
}

/// One client's open connections, by id.
type Connections = Vec<(u64, Arc<Activity>)>;

/// The open connections by client, to choose which to close when a limit is reached.
#[derive(Debug, Default)]
struct Pool {
    open: Mutex<HashMap<Source, Connections>>,
    next: AtomicUsize,
    /// Notified when a request ends somewhere.
    idle: Arc<Notify>,
}

/// A connection's place in the [`Pool`]; leaves it when dropped.
#[derive(Debug)]
struct Registered {
    pool: Arc<Pool>,
    source: Source,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut open = self.pool.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(list) = open.get_mut(&self.source) {
            list.retain(|(id, _)| *id != self.id);
            if list.is_empty() {
                open.remove(&self.source);
            }
        }
    }
}

impl Pool {
    fn register(self: &Arc<Self>, source: Source) -> (Arc<Activity>, Registered) {
        let activity = Arc::new(Activity::new(self.idle.clone()));
        let id = self.next.fetch_add(1, Ordering::SeqCst) as u64;
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.entry(source).or_default().push((id, activity.clone()));
        (activity, Registered { pool: self.clone(), source, id })
    }

    fn count(&self, source: Source) -> usize {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).get(&source).map_or(0, Vec::len)
    }

    /// Whether a connection closed for another has not given its slot back yet.
    fn closing(&self) -> bool {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.values().flatten().any(|(_, a)| a.evicting.load(Ordering::SeqCst))
    }

    /// Closes one idle connection of the client holding the most connections that has one idle.
    /// False when there is none to close.
    fn close_one_for_another(&self) -> bool {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let pick = |list: &Connections| {
            list.iter()
                .filter(|(_, a)| a.idle())
                .min_by_key(|(_, a)| a.eviction_rank())
                .map(|(_, a)| a.clone())
        };
        let mut by_size: Vec<&Connections> = open.values().collect();
        by_size.sort_by_key(|l| std::cmp::Reverse(l.len()));
        let victim = by_size.into_iter().find_map(pick);
        match victim {
            Some(v) => {
                v.close_for_another();
                true
            }
            None => false,
        }
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
/// HTTP is spoken on (TLS, or nothing for a probe port); `app` answers requests.
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
    let handshakes = Fair::new(limits.max_handshakes.max(1) as u64, limits.max_handshakes.max(1) as u64);
    let pool = Arc::new(Pool::default());
    let per_source = limits.max_connections_per_source.max(1);
    let mut rates = Rates::default();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut backoff = Backoff::default();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (io, peer) = match accepted {
            Ok(a) => {
                backoff.on_success();
                a
            }
            Err(e) => {
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
        let source = Source(peer.ip());
        // One client's own limit: a new connection beyond it is closed at once, the cheapest
        // answer (no task, no handshake): a client reconnecting in a loop costs this loop an
        // accept and a close per connect, and holds no more than its share.
        if pool.count(source) >= per_source {
            tracing::debug!(%peer, "connection refused: its client has every connection it may have");
            events.closed("source_limit");
            continue;
        }
        // And its rate of new connections (each a handshake to compute), likewise.
        if !rates.admit(source, limits.handshakes_per_second, limits.handshake_burst) {
            tracing::debug!(%peer, "connection refused: its client opens connections faster than it may");
            events.closed("handshake_rate");
            continue;
        }
        // A slot: free, or freed by closing the idlest connection of the client holding the
        // most; when every connection is busy, wait (the kernel's backlog holds the rest).
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                let mut slot = None;
                while slot.is_none() {
                    // Closed connections give their slot back; a request that ends makes its
                    // connection one that may be closed. One at a time: a connection being closed
                    // gives its slot back in a moment.
                    if !pool.closing() {
                        pool.close_one_for_another();
                    }
                    tokio::select! {
                        () = &mut shutdown => break,
                        s = slots.clone().acquire_owned() => match s {
                            Ok(s) => slot = Some(s),
                            Err(_) => break,
                        },
                        () = pool.idle.notified() => {}
                    }
                }
                match slot {
                    Some(s) => s,
                    None => break,
                }
            }
        };
        let (activity, registered) = pool.register(source);
        let (handshake, app, limits, events, handshakes) =
            (handshake.clone(), app.clone(), limits.clone(), events.clone(), handshakes.clone());
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            let _slot = slot;
            let _registered = registered;
            let shaking = throttled(&handshakes, source, handshake(io));
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
                () = activity.evict.notified() => {
                    events.closed("evicted");
                    return;
                }
                _ = stop.changed() => return,
            };
            connection(stream, app, &limits, &events, stop, source, activity).await;
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

/// How long an idle connection closed for another may take to go (a request that arrived just
/// before is finished first).
const EVICTION_DRAIN: Duration = Duration::from_secs(1);

/// Serves HTTP/1.1 or HTTP/2 on one established connection, within `limits`.
async fn connection<S>(
    stream: S,
    app: Router,
    limits: &Limits,
    events: &impl ConnectionEvents,
    mut stop: watch::Receiver<bool>,
    source: Source,
    activity: Arc<Activity>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let seen = activity.clone();
    let max_requests = limits.max_requests_per_connection.max(1);
    let service = tower::service_fn(move |mut req: axum::extract::Request<hyper::body::Incoming>| {
        let app = app.clone();
        let seen = seen.clone();
        req.extensions_mut().insert(source);
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
            *seen.last.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
            if seen.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
                seen.pool_idle.notify_one();
            }
            seen.changed.notify_one();
            res
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes.max(8 * 1024));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_streams)
        // hyper's default windows are 1 MiB: that much of a body would sit in memory before its
        // handler reserved room to read it ([`crate::lanes`]).
        .initial_stream_window_size(H2_WINDOW)
        .initial_connection_window_size(H2_WINDOW)
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX).min(16 * 1024))
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
            () = activity.evict.notified() => {
                events.closed("evicted");
                if activity.served.load(Ordering::SeqCst) == 0 {
                    return;
                }
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(EVICTION_DRAIN.min(limits.drain_timeout), conn).await;
                return;
            }
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
        let permits = Fair::new(1, 1);
        let me = Source::LOCAL;
        let (wake, woken) = tokio::sync::oneshot::channel::<()>();
        // Each time it runs, the work checks that it holds the only permit.
        let work = async {
            assert_eq!(permits.available(), 0, "polled without the permit");
            let _ = woken.await;
            assert_eq!(permits.available(), 0, "polled without the permit");
            7
        };
        let mut shaking = std::pin::pin!(throttled(&permits, me, work));
        assert!(futures::poll!(shaking.as_mut()).is_pending());
        assert_eq!(permits.available(), 1, "waiting for its peer, it holds no permit");
        // Another one computes meanwhile.
        assert_eq!(throttled(&permits, me, async { 1 }).await, 1);
        // Woken while every permit is taken, it waits for one.
        let taken = permits.acquire(me, 1).await;
        let _ = wake.send(());
        assert!(futures::poll!(shaking.as_mut()).is_pending());
        drop(taken);
        assert_eq!(shaking.await, 7);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_opens_its_burst_at_once_then_its_rate_and_others_are_not_held_back() {
        let (a, b) = (Source("10.0.0.1".parse().unwrap()), Source("10.0.0.2".parse().unwrap()));
        let mut rates = Rates::default();
        let admitted = (0..10).filter(|_| rates.admit(a, 2, 5)).count();
        assert_eq!(admitted, 5, "the burst");
        assert!(rates.admit(b, 2, 5), "another client has its own");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!((0..10).filter(|_| rates.admit(a, 2, 5)).count(), 2, "then the rate");
        assert!((0..1000).all(|_| rates.admit(a, 0, 0)), "0: no limit");
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
