//! The wall clock, read at the edge — as the API server keeps it. The core takes time as a
//! parameter; the loop, the election and the provisioner read it here.
//!
//! Times the scheduler writes into the cluster (when a gang started waiting, when it fell below its
//! minimum, kept on its members or in its `Gang`'s status) are read back by whichever replica
//! leads next. Were each replica to read its own clock, one running 36 s slow would see a gang's
//! grace period as 36 s longer than the replica that started it — and a gang would stay half-bound
//! that much longer — or, the other way round, release it 36 s early. So every replica reads the
//! API server's clock: each answer of the API server says what time it is there (the HTTP `Date`
//! header, to the second), and this replica's offset from it is the largest lower bound the
//! answers give (`date − time received`; the server's time lies within the second after `date`,
//! and before the answer arrived), over the last [`SAMPLES`] answers. A machine whose clock the
//! answers cannot tell from the server's (every answer within its second, allowing a second for the
//! answer to travel) keeps its own clock, so that time never jumps by the `Date` header's rounding
//! (the first answers alone would put it up to a second behind, and the next ones forward again).
//! Until an answer came, the offset is zero: the machine's own clock.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use scheduler_core::model::Time;

/// How many answers the offset is taken over: enough for one to have come right at the start of
/// the server's second.
const SAMPLES: usize = 64;

/// How long an answer may take to arrive, for the upper bound on the offset.
const TRAVEL_MS: i64 = 1_000;

/// The offset in use, in milliseconds (API server's clock − this machine's).
static OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// What the answers so far say of the offset.
static ANSWERS: Mutex<Answers> = Mutex::new(Answers(Vec::new()));

/// The last answers' lower bounds on the offset, oldest first.
#[derive(Debug)]
struct Answers(Vec<i64>);

impl Answers {
    /// Takes a `Date` header (`Thu, 26 Nov 2026 08:22:14 GMT`) received at `received` (this
    /// machine's clock, ms); returns the offset they now give. An unreadable one is ignored.
    fn observe(&mut self, date: &str, received: i64) -> Option<i64> {
        let at = jiff::fmt::rfc2822::parse(date).ok()?;
        if self.0.len() == SAMPLES {
            self.0.remove(0);
        }
        self.0.push(at.timestamp().as_millisecond().saturating_sub(received));
        let lower = self.0.iter().max().copied()?;
        // The answers' upper bound on the offset: the server's second had not ended when it
        // answered, and the answer travelled for less than TRAVEL_MS.
        let upper = self.0.iter().min().copied()?.saturating_add(1_000 + TRAVEL_MS);
        Some(if lower <= 0 && upper >= 0 { 0 } else { lower })
    }
}

/// This machine's wall clock, in milliseconds since the epoch.
fn local_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The API server's wall clock, as the core reads time.
pub(crate) fn wall_clock() -> Time {
    Time(local_ms().saturating_add(OFFSET_MS.load(Ordering::Relaxed)))
}

/// Learns from one answer of the API server: its `Date` header, received now.
pub(crate) fn seen<B>(answer: http::Response<B>) -> http::Response<B> {
    if let Some(date) = answer.headers().get(http::header::DATE).and_then(|d| d.to_str().ok()) {
        observe(date, local_ms());
    }
    answer
}

/// Takes a `Date` header received at `received` into the offset in use.
fn observe(date: &str, received: i64) {
    let Ok(mut answers) = ANSWERS.lock() else { return };
    if let Some(offset) = answers.observe(date, received) {
        let before = OFFSET_MS.swap(offset, Ordering::Relaxed);
        if (offset - before).abs() >= 1_000 {
            tracing::info!(
                offset_ms = offset,
                "this machine's clock is off the API server's; times follow the API server's"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_the_largest_lower_bound_the_answers_give() {
        // This machine runs 36.4 s slow: the server's 08:22:14.000–.999 is 08:21:37.6–38.6 here.
        let here = |s: &str| Time::parse_rfc3339(s).unwrap().millis();
        let mut a = Answers(Vec::new());
        assert_eq!(
            a.observe("Thu, 26 Nov 2026 08:22:14 GMT", here("2026-11-26T08:21:38.350Z")),
            Some(35_650)
        );
        // An answer that came right as the server's second began: within a few ms of the truth.
        assert_eq!(
            a.observe("Thu, 26 Nov 2026 08:22:15 GMT", here("2026-11-26T08:21:38.610Z")),
            Some(36_390)
        );
        assert_eq!(
            a.observe("Thu, 26 Nov 2026 08:22:15 GMT", here("2026-11-26T08:21:39.500Z")),
            Some(36_390),
            "a later one in the same second says less, and does not count"
        );
        assert_eq!(a.observe("not a date", here("2026-11-26T08:21:40.000Z")), None);
        // A clock in step with the server's is kept as it is, whatever the rounding: the first
        // answer, 900 ms into the server's second, does not set it back 900 ms.
        let mut synced = Answers(Vec::new());
        assert_eq!(
            synced.observe("Thu, 26 Nov 2026 08:22:14 GMT", here("2026-11-26T08:22:14.900Z")),
            Some(0)
        );
        assert_eq!(
            synced.observe("Thu, 26 Nov 2026 08:22:15 GMT", here("2026-11-26T08:22:15.020Z")),
            Some(0)
        );
        // 1.5 s slow: no answer can be explained by rounding and travel any more.
        let mut slow = Answers(Vec::new());
        assert_eq!(
            slow.observe("Thu, 26 Nov 2026 08:22:14 GMT", here("2026-11-26T08:22:12.600Z")),
            Some(1_400)
        );
        // Forgotten after SAMPLES newer answers: a clock put right is followed.
        let mut last = None;
        for _ in 0..SAMPLES {
            last = a.observe("Thu, 26 Nov 2026 08:22:20 GMT", here("2026-11-26T08:22:20.100Z"));
        }
        assert_eq!(last, Some(0), "in step again: its own clock");
    }
}
