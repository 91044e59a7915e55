//! A client-side token bucket (`--kube-api-qps`, `--kube-api-burst`): the scheduler's writes never
//! exceed the rate the operator allowed, however large a plan is.

use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

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
}
