//! A client-side token bucket (`--kube-api-qps`, `--kube-api-burst`) in front of every request a
//! client sends, as client-go's rate limiter is in front of kube-scheduler's: lists, watches,
//! gets, bindings, evictions, status patches and events alike, so neither a large plan nor a
//! storm of re-lists exceeds the rate the operator allowed. A watch is one request (its stream,
//! however long, is not charged again). The limiter is a tower layer on the kube client
//! ([`client`]); requests of a client that shares a [`RateLimiter`] share its tokens.
//!
//! A write carries a [`Guard`]: checked after the limiter's wait, right before the request goes
//! out, so a replica that lost its Lease while waiting for a token sends nothing ([`NotSent`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;
use tower::BoxError;

/// Tokens refill at `qps` per second up to `burst`.
#[derive(Debug)]
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        RateLimiter { qps: qps.max(0.001), burst, state: Mutex::new((burst, Instant::now())) }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        loop {
            let wait = {
                let mut s = self.state.lock().await;
                let now = Instant::now();
                let refill = now.duration_since(s.1).as_secs_f64() * self.qps;
                s.0 = (s.0 + refill).min(self.burst);
                s.1 = now;
                if s.0 >= 1.0 {
                    s.0 -= 1.0;
                    return;
                }
                Duration::from_secs_f64((1.0 - s.0) / self.qps)
            };
            tokio::time::sleep(wait).await;
        }
    }
}

/// Checked right before a request is sent, after the limiter's wait: `false` and the request is
/// not sent (the caller gets [`NotSent`]). Carried in the request's extensions.
#[derive(Clone)]
pub struct Guard(Arc<dyn Fn() -> bool + Send + Sync>);

impl Guard {
    pub fn new(check: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Guard(Arc::new(check))
    }
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Guard")
    }
}

/// A request its [`Guard`] stopped after the limiter's wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not sent: this replica may no longer act")]
pub struct NotSent;

/// Whether `e` is a request its [`Guard`] stopped.
pub fn not_sent(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Service(b) if b.is::<NotSent>())
}

/// The tower layer: every request waits for a token of `rate`.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    rate: Arc<RateLimiter>,
}

impl RateLimitLayer {
    pub fn new(rate: Arc<RateLimiter>) -> Self {
        RateLimitLayer { rate }
    }
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;
    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited { inner, rate: self.rate.clone(), wait: None, ready: false }
    }
}

type Wait = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A service behind the limiter: it is ready once a token is taken (kube's client calls it from
/// one buffer task, in the order requests came).
pub struct RateLimited<S> {
    inner: S,
    rate: Arc<RateLimiter>,
    wait: Option<Wait>,
    /// A token is held for the next call.
    ready: bool,
}

impl<S> std::fmt::Debug for RateLimited<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimited").field("rate", &self.rate).field("ready", &self.ready).finish()
    }
}

impl<S, B> tower::Service<http::Request<B>> for RateLimited<S>
where
    S: tower::Service<http::Request<B>>,
    S::Response: Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        if !self.ready {
            let rate = self.rate.clone();
            let wait = self.wait.get_or_insert_with(|| Box::pin(async move { rate.acquire().await }));
            if wait.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.wait = None;
            self.ready = true;
        }
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        self.ready = false;
        if req.extensions().get::<Guard>().is_some_and(|g| !(g.0)()) {
            return Box::pin(std::future::ready(Err(Box::new(NotSent) as BoxError)));
        }
        let sent = self.inner.call(req);
        Box::pin(async move { sent.await.map_err(Into::into) })
    }
}

/// A kube client for `config` whose every request waits for a token of `rate`, and whose every
/// answer tells the clock what time it is at the API server ([`crate::clock`]).
pub fn client(config: kube::Config, rate: Arc<RateLimiter>) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&RateLimitLayer::new(rate))
        .with_layer(&tower::util::MapResponseLayer::new(crate::clock::seen))
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_then_qps() {
        let r = RateLimiter::new(10.0, 5);
        let start = Instant::now();
        for _ in 0..5 {
            r.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst is free");
        for _ in 0..10 {
            r.acquire().await;
        }
        let spent = start.elapsed();
        assert!(spent >= Duration::from_millis(990) && spent <= Duration::from_millis(1100), "{spent:?}");
    }

    /// A service that counts what reaches it.
    #[allow(clippy::type_complexity)]
    fn counting() -> (
        Arc<std::sync::atomic::AtomicUsize>,
        impl tower::Service<
            http::Request<()>,
            Response = (),
            Error = BoxError,
            Future = std::future::Ready<Result<(), BoxError>>,
        >,
    ) {
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = seen.clone();
        let svc = tower::service_fn(move |_req: http::Request<()>| {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::future::ready(Ok::<(), BoxError>(()))
        });
        (seen, svc)
    }

    #[tokio::test(start_paused = true)]
    async fn every_request_through_the_layer_waits_for_a_token() {
        use tower::{Layer, Service, ServiceExt};
        let rate = Arc::new(RateLimiter::new(2.0, 3));
        let (seen, inner) = counting();
        let mut svc = RateLimitLayer::new(rate).layer(inner);
        let start = Instant::now();
        for _ in 0..7 {
            svc.ready().await.unwrap().call(http::Request::new(())).await.unwrap();
        }
        // Three at once (the burst), then one every half second.
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 7);
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_guard_stops_a_request_after_the_wait() {
        use tower::{Layer, Service, ServiceExt};
        let rate = Arc::new(RateLimiter::new(1.0, 1));
        let (seen, inner) = counting();
        let mut svc = RateLimitLayer::new(rate).layer(inner);
        svc.ready().await.unwrap().call(http::Request::new(())).await.unwrap();
        // Leadership is lost while the next request waits for its token.
        let leading = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = leading.clone();
        let mut req = http::Request::new(());
        req.extensions_mut().insert(Guard::new(move || flag.load(std::sync::atomic::Ordering::SeqCst)));
        let lose = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            leading.store(false, std::sync::atomic::Ordering::SeqCst);
        });
        let err = svc.ready().await.unwrap().call(req).await.unwrap_err();
        lose.await.unwrap();
        assert!(err.is::<NotSent>(), "{err}");
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1, "not sent");
        let kube_err = kube::Error::Service(err);
        assert!(not_sent(&kube_err));
    }
}
