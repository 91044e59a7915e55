//! Reading a request's body at the pace a real client sends it.
//!
//! A body must arrive within [`Pace::max`], and, after a grace period, keep up an average of
//! [`Pace::min_rate`] bytes a second: by any moment `t` after its first poll, it has sent at least
//! `(t − grace) × min_rate` bytes, or it is cut off ([`BodyError::TooSlow`]). The API server writes
//! a review at once, so only a client holding the server's memory on purpose falls behind. Time
//! the server spends waiting on its own account — for room to keep what arrived ([`read_body`]'s
//! `arrived` callback) — is not the client's and does not count.
//!
//! What arrives is reported as it arrives, so the caller reserves what a body has sent, not what
//! it declared: a client that declares 64 KiB and sends one byte holds one byte's worth, for at
//! most the grace period.

use std::future::Future;
use std::time::Duration;

use http_body_util::BodyExt as _;
use hyper::body::Bytes;
use tokio::time::Instant;

/// How fast a body must arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pace {
    /// Before this, any pace.
    pub grace: Duration,
    /// Then, at least this many bytes a second on average.
    pub min_rate: u64,
    /// And the whole body within this.
    pub max: Duration,
}

impl Pace {
    /// When a body that started at `start`, has `received` bytes and was paused (by the server)
    /// for `paused` must have sent its next byte.
    pub fn deadline(&self, start: Instant, received: u64, paused: Duration) -> Instant {
        let earned = Duration::from_secs_f64(received as f64 / self.min_rate.max(1) as f64);
        start + paused + (self.grace.saturating_add(earned)).min(self.max)
    }
}

/// Why a body was not read.
#[derive(Debug)]
pub enum BodyError {
    /// It is longer than the limit.
    TooLarge,
    /// It fell behind the pace, or took longer than the maximum.
    TooSlow,
    /// The connection failed while it was read.
    Read(String),
}

impl std::error::Error for BodyError {}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge => f.write_str("request body too large"),
            BodyError::TooSlow => f.write_str("request body not received in time"),
            BodyError::Read(e) => write!(f, "reading the request body: {e}"),
        }
    }
}

/// What keeps room for a body as it arrives: told the bytes received so far after each piece,
/// it returns once there is room for them (waiting, if it must, on the server's account).
pub trait Room {
    fn hold(&mut self, received: usize) -> impl Future<Output = ()>;
}

/// No room to keep: nothing waits.
impl Room for () {
    async fn hold(&mut self, _: usize) {}
}

/// Reads `body` whole (at most `limit` bytes) at `pace`, telling `room` after each piece how much
/// has arrived; time spent waiting for `room` does not count against the client.
pub async fn read_body<B>(body: B, limit: usize, pace: Pace, room: &mut impl Room) -> Result<Bytes, BodyError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: std::fmt::Display,
{
    let start = Instant::now();
    let mut paused = Duration::ZERO;
    let mut out: Vec<u8> = Vec::new();
    let mut first: Option<Bytes> = None;
    let mut body = std::pin::pin!(body);
    loop {
        let received = first.as_ref().map_or(0, Bytes::len) + out.len();
        let deadline = pace.deadline(start, received as u64, paused);
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(BodyError::TooSlow),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(BodyError::Read(e.to_string())),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else { continue };
        if data.is_empty() {
            continue;
        }
        let total = received + data.len();
        if total > limit {
            return Err(BodyError::TooLarge);
        }
        // One piece stays as it came (no copy); more are gathered.
        match first.take() {
            None if out.is_empty() => first = Some(data),
            Some(f) => {
                out.reserve(total);
                out.extend_from_slice(&f);
                out.extend_from_slice(&data);
            }
            None => out.extend_from_slice(&data),
        }
        let waiting = Instant::now();
        room.hold(total).await;
        paused += waiting.elapsed();
    }
    Ok(match first {
        Some(f) => f,
        None => Bytes::from(out),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::StreamBody;
    use hyper::body::Frame;

    /// Remembers what arrived.
    #[derive(Default)]
    struct Reports {
        seen: Vec<usize>,
    }

    impl Room for Reports {
        async fn hold(&mut self, received: usize) {
            self.seen.push(received);
        }
    }

    /// Waits 2 s for room each time.
    struct Slow;

    impl Room for Slow {
        async fn hold(&mut self, _: usize) {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    fn pace() -> Pace {
        Pace { grace: Duration::from_millis(500), min_rate: 1000, max: Duration::from_secs(10) }
    }

    #[test]
    fn the_deadline_moves_with_what_arrived_and_what_the_server_paused() {
        let start = Instant::now();
        let p = pace();
        assert_eq!(p.deadline(start, 0, Duration::ZERO), start + Duration::from_millis(500));
        assert_eq!(p.deadline(start, 1000, Duration::ZERO), start + Duration::from_millis(1500));
        assert_eq!(p.deadline(start, 1000, Duration::from_secs(2)), start + Duration::from_millis(3500));
        assert_eq!(
            p.deadline(start, 1 << 30, Duration::ZERO),
            start + Duration::from_secs(10),
            "the maximum holds"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_falls_behind_the_pace_is_cut_off_and_one_that_keeps_up_is_read() {
        // 100 bytes every 50 ms is 2,000 bytes a second: kept up.
        let chunks = futures::stream::unfold(0, |i| async move {
            if i == 20 {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            Some((Ok::<_, std::io::Error>(Frame::data(Bytes::from(vec![b'x'; 100]))), i + 1))
        });
        let mut reports = Reports::default();
        let body = read_body(StreamBody::new(chunks), 10_000, pace(), &mut reports).await.unwrap();
        assert_eq!(body.len(), 2000);
        assert_eq!(reports.seen.first(), Some(&100));
        assert_eq!(reports.seen.last(), Some(&2000));
        // One byte a second: behind after the grace period and the byte's own millisecond.
        let trickle = futures::stream::unfold(0, |i| async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Some((Ok::<_, std::io::Error>(Frame::data(Bytes::from_static(b"x"))), i + 1))
        });
        let started = Instant::now();
        let err = read_body(StreamBody::new(trickle), 10_000, pace(), &mut ()).await.unwrap_err();
        assert!(matches!(err, BodyError::TooSlow), "{err}");
        assert_eq!(started.elapsed(), Duration::from_millis(500), "cut off when the grace period ended");
    }

    #[tokio::test(start_paused = true)]
    async fn time_the_server_waits_is_not_the_clients_and_a_body_over_the_limit_stops() {
        let chunks = futures::stream::iter(
            (0..3).map(|_| Ok::<_, std::io::Error>(Frame::data(Bytes::from(vec![b'x'; 10])))),
        );
        // The server waits 2 s for room after each piece: far past the grace period, yet read.
        let body = read_body(StreamBody::new(chunks), 100, pace(), &mut Slow).await.unwrap();
        assert_eq!(body.len(), 30);
        let big = futures::stream::iter(
            (0..3).map(|_| Ok::<_, std::io::Error>(Frame::data(Bytes::from(vec![b'x'; 10])))),
        );
        let err = read_body(StreamBody::new(big), 25, pace(), &mut ()).await.unwrap_err();
        assert!(matches!(err, BodyError::TooLarge));
    }
}
