//! Decision lanes: who may decide now, by the size of what they sent.
//!
//! A decision is CPU and memory on a blocking thread, proportional to the body. Requests at or
//! under [`SMALL_BODY`] — every Pod, and every ordinary Job, Gang or JobSet the API server sends —
//! take a slot of the **small lane**; larger ones take a slot of the **big lane** and, from a byte
//! budget, as many KiB as their body holds. The lanes share nothing, so however many
//! maximum-size objects are in flight or queued, a small request waits only for other small ones.
//! Memory stays bounded: the small lane holds at most `slots × SMALL_BODY` of bodies, the big lane
//! at most its byte budget, and a decision's working memory is a small multiple of its body.
//!
//! The big lane's decisions run on threads of their own ([`BigPool`]), as many as its slots, which
//! move themselves to Linux's `SCHED_IDLE` class when they start ([`idle_this_thread`]; nice
//! +[`BIG_LANE_NICE`] where that fails): they run on what small decisions, connection I/O and the
//! probe thread leave, and any of those waking up takes the CPU from them at once — where a merely
//! niced thread keeps it until its time slice ends (EEVDF's run-to-parity), ~3 ms a wakeup. A
//! maximum-size object is decided more slowly rather than a small one waiting for a CPU. Small
//! decisions run on tokio's blocking threads, at the process's own priority.
//!
//! The small lane's slots are given **in turn between clients** ([`kube_gang_serve::fair`]: a
//! client is its peer address): a client sending 200 requests at once waits for its own, and another
//! client's request waits for at most one decision per client ahead of it (200 connections of
//! 62 KiB reviews used to push another client's p99 from 1 ms to 300 ms). Turns are weighted by
//! body size (deficit round robin, [`kube_gang_serve::fair::Fair::acquire_weighted`]): a client of
//! 62 KiB reviews gets a decision every four rounds of another's Pod reviews, so what is shared is
//! the decisions' CPU, not their count. The big lane's two
//! semaphores are first come, first served, and a big request takes its slot before its bytes,
//! always in that order, so two big requests never hold a part each of what the other needs.
//!
//! Bodies being **read** are bounded too: each holds, from a reading budget, what it has received so
//! far ([`Reading::grow`]), not what it declared, and only while it keeps up the listener's pace
//! (`kube_gang_serve::body`): a client declaring 64 KiB and sending one byte holds one KiB for half
//! a second, not 64 KiB for the whole request timeout (520 such clients used to hold the whole
//! small budget and keep a Pod's review waiting 8.9 s; five chunked uploads that never finished,
//! every big request for 9.5 s). A body declaring (by `Content-Length`) at most [`SMALL_BODY`]
//! reads from the small budget, any other from the big one, so small requests never wait for big
//! ones; both are shared in turn between clients, and no client holds more than a quarter of the
//! small budget or half of the big one. The budget is held until the decision is done; a body
//! waiting for room is paused, not timed out for it, and the oldest body being read always
//! proceeds, so half-read bodies never wait on each other for ever. Counting connections is not
//! enough, since one HTTP/2 connection carries many requests at once. A client trickling a body
//! holds reading budget, never a decision slot.
//! Measured (`cargo bench -p gang-webhook --bench rss`, 32 clients sending 3–6 MiB reviews back to
//! back): without a reading budget the webhook's RSS peaked at 262 MiB, every client's body in
//! memory at once.

use std::sync::{Arc, Mutex, PoisonError, mpsc};

use kube_gang_serve::Source;
use kube_gang_serve::fair::{Fair, Share};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

/// The largest body the small lane takes. A Pod's AdmissionReview is 2–6 KiB, the largest example
/// or fixture in this repository (a JobSet with its templates) under 16 KiB. Measured with
/// `cargo bench -p gang-webhook --bench admit -- by_size` (release, on the costliest bytes: a
/// template's annotations, built into the tree): a decision costs 8–12 µs per KiB — 4 KiB
/// 41 µs, 16 KiB 0.12 ms, 64 KiB 0.53 ms, 256 KiB 2.2–2.3 ms, 1 MiB 11–12 ms. At 64 KiB a small
/// slot is held about half a millisecond; anything larger shares the big lane's CPUs and budget.
pub const SMALL_BODY: usize = 64 * 1024;

/// How much the big lane's threads lower their CPU priority: nice +10 (at most 19). Raising one's
/// own nice value needs no privilege.
pub const BIG_LANE_NICE: i32 = 10;

/// Small bodies being read and waiting for a decision, together, by default: 512 of the largest
/// (a Pod's review is 2–6 KiB, so thousands of ordinary ones). One client holds at most a quarter.
pub const SMALL_READING_BUDGET: usize = 32 * 1024 * 1024;

/// The share of a reading budget one client may hold: a quarter of the small one, half of the big
/// one (two maximum-size bodies of its four).
const SMALL_SHARE: u64 = 4;
const BIG_SHARE: u64 = 2;

/// The permits of the two lanes, and the threads of the big one.
#[derive(Debug, Clone)]
pub struct Lanes {
    /// The small lane's decision slots, in turn between clients.
    small: Fair,
    big: Arc<Semaphore>,
    /// The big lane's byte budget, in KiB.
    big_kib: Arc<Semaphore>,
    budget_kib: u32,
    /// The budget of big bodies being read (and held until decided), in KiB.
    reading_kib: Fair,
    /// The budget of small bodies being read (and held until decided), in KiB.
    small_reading_kib: Fair,
    pool: BigPool,
}

/// A decision that panicked (the pool thread survives it).
#[derive(Debug, thiserror::Error)]
#[error("the decision panicked")]
pub struct Panicked;

type Job = Box<dyn FnOnce() + Send>;

/// The big lane's threads: they lower their own priority ([`idle_this_thread`]) when they start and
/// take jobs from one queue. The lane's semaphore admits no more decisions than there are threads,
/// so a job never waits in the queue. The threads end when the last [`Lanes`] is dropped.
#[derive(Debug, Clone)]
pub struct BigPool {
    jobs: mpsc::Sender<Job>,
}

impl BigPool {
    fn start(threads: usize) -> BigPool {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..threads.max(1) {
            let queue = queue.clone();
            let spawned = std::thread::Builder::new().name(format!("big-lane-{i}")).spawn(move || {
                if let Err(idle) = idle_this_thread()
                    && let Err(e) = lower_this_thread(BIG_LANE_NICE)
                {
                    tracing::warn!(error = %e, %idle, "big lane: could not lower this thread's CPU priority");
                }
                loop {
                    // The lock is held while waiting for a job, never while running one.
                    let job = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                }
            });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "big lane: could not start a thread");
            }
        }
        BigPool { jobs }
    }

    /// Runs `f` on a big-lane thread and waits for its result. Falls back to a blocking thread of
    /// the runtime if no pool thread could be started.
    async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T, Panicked> {
        let (done, result) = oneshot::channel();
        let job: Job = Box::new(move || {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = done.send(out);
        });
        if let Err(mpsc::SendError(job)) = self.jobs.send(job) {
            drop(tokio::task::spawn_blocking(job));
        }
        match result.await {
            Ok(Ok(out)) => Ok(out),
            _ => Err(Panicked),
        }
    }
}

/// Moves the calling thread (alone) to the `SCHED_IDLE` scheduling class: it gets the CPU only
/// when no thread of a normal class wants it, and a waking normal thread preempts it at once.
/// Needs no privilege on Linux (a thread may always lower its own class).
pub fn idle_this_thread() -> std::io::Result<()> {
    use thread_priority::{NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy};
    thread_priority::set_thread_priority_and_policy(
        thread_priority::thread_native_id(),
        ThreadPriority::Min,
        ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle),
    )
    .map_err(|e| std::io::Error::other(format!("SCHED_IDLE: {e:?}")))
}

/// Raises the calling thread's nice value by `by` (up to 19), the thread alone: on Linux
/// `setpriority(PRIO_PROCESS, tid)` is per thread. Returns the new value.
pub fn lower_this_thread(by: i32) -> std::io::Result<i32> {
    let me = Some(rustix::thread::gettid());
    let now = rustix::process::getpriority_process(me)?;
    let nice = now.saturating_add(by).min(19);
    rustix::process::setpriority_process(me, nice)?;
    Ok(nice)
}

fn kib(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX).max(1)
}

/// Reading budget a body holds (what it has received, in KiB) until its decision is done;
/// released when dropped.
#[derive(Debug)]
pub struct Reading {
    share: Share,
}

impl kube_gang_serve::body::Room for Reading {
    async fn hold(&mut self, received: usize) {
        self.grow(received).await;
    }
}

impl Reading {
    /// Holds room for `bytes` received in all, waiting (in turn) for what is not held yet.
    pub async fn grow(&mut self, bytes: usize) {
        let want = u64::from(kib(bytes));
        let held = self.share.units();
        if want > held {
            self.share.grow(want - held).await;
        }
    }

    /// The body is read: it stops growing, and the next oldest body being read may go over the
    /// budget if it must.
    pub fn done(&self) {
        self.share.stop_growing();
    }

    /// KiB held.
    pub fn kib(&self) -> u64 {
        self.share.units()
    }
}

/// What a decision holds while it runs; released when dropped.
#[derive(Debug)]
pub struct Permit {
    _slot: Slot,
    _bytes: Option<OwnedSemaphorePermit>,
}

#[derive(Debug)]
enum Slot {
    Small(#[allow(dead_code)] Share),
    Big(#[allow(dead_code)] OwnedSemaphorePermit),
}

/// Which lane a body goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    Small,
    Big,
}

impl Lane {
    pub fn of(body_len: usize) -> Lane {
        if body_len <= SMALL_BODY { Lane::Small } else { Lane::Big }
    }
}

impl Lanes {
    /// `small` and `big` decisions at once in each lane (at least one each), the big lane's bodies
    /// within `budget_bytes` together (at least one maximum-size body always fits: a request over
    /// the budget takes all of it).
    pub fn new(small: usize, big: usize, budget_bytes: usize) -> Lanes {
        Lanes::with_reading(small, big, budget_bytes, 2 * budget_bytes)
    }

    /// [`Lanes::new`], with big bodies being read bounded by `reading_bytes` together (at least one
    /// maximum-size body always fits: a reservation over the budget takes all of it).
    pub fn with_reading(small: usize, big: usize, budget_bytes: usize, reading_bytes: usize) -> Lanes {
        let budget_kib = kib(budget_bytes);
        let reading = u64::from(kib(reading_bytes));
        let small_reading = u64::from(kib(SMALL_READING_BUDGET));
        let small = small.max(1) as u64;
        Lanes {
            small: Fair::new(small, small),
            big: Arc::new(Semaphore::new(big.max(1))),
            big_kib: Arc::new(Semaphore::new(budget_kib as usize)),
            budget_kib,
            reading_kib: Fair::new(reading, reading / BIG_SHARE),
            small_reading_kib: Fair::new(small_reading, small_reading / SMALL_SHARE),
            pool: BigPool::start(big.max(1)),
        }
    }

    /// The same lanes, small bodies being read bounded by `bytes` together (at least one
    /// [`SMALL_BODY`]), one client holding at most a quarter of them (at least one small body).
    pub fn with_small_reading(mut self, bytes: usize) -> Lanes {
        let total = u64::from(kib(bytes.max(SMALL_BODY)));
        self.small_reading_kib = Fair::new(total, (total / SMALL_SHARE).max(u64::from(kib(SMALL_BODY))));
        self
    }

    /// Waits (in `source`'s turn) for room to start reading a body that declared `declared` bytes
    /// (`None`: no `Content-Length`): a declared small one from the small bodies' budget, any other
    /// from the big bodies'. It holds 1 KiB to start with, and grows as the body arrives
    /// ([`Reading::grow`]).
    pub async fn reserve_body(&self, source: Source, declared: Option<usize>) -> Reading {
        let budget = if declared.is_some_and(|d| Lane::of(d) == Lane::Small) {
            &self.small_reading_kib
        } else {
            &self.reading_kib
        };
        let share = budget.acquire(source, 1).await;
        share.start_growing();
        Reading { share }
    }

    /// Free bytes of the big bodies' reading budget, in KiB.
    pub fn available_reading_kib(&self) -> usize {
        self.reading_kib.available() as usize
    }

    /// Free bytes of the small bodies' reading budget, in KiB.
    pub fn available_small_reading_kib(&self) -> usize {
        self.small_reading_kib.available() as usize
    }

    /// Runs the decision `f` in `lane`: a small one on a blocking thread of the runtime, a big one
    /// on a big-lane thread ([`BigPool`]). The caller holds the lane's [`Permit`].
    pub async fn decide<T: Send + 'static>(
        &self,
        lane: Lane,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Panicked> {
        match lane {
            Lane::Small => tokio::task::spawn_blocking(f).await.map_err(|_| Panicked),
            Lane::Big => self.pool.run(f).await,
        }
    }

    /// Waits for the permit a body of `body_len` bytes needs (a small one in `source`'s turn;
    /// `None` only if the lanes were closed, which nothing does).
    pub async fn acquire(&self, source: Source, body_len: usize) -> Option<Permit> {
        Some(match Lane::of(body_len) {
            // Turns weighted by body size: a decision's CPU grows with it.
            Lane::Small => {
                let slot = self.small.acquire_weighted(source, 1, body_len as u64).await;
                Permit { _slot: Slot::Small(slot), _bytes: None }
            }
            Lane::Big => {
                let slot = self.big.clone().acquire_owned().await.ok()?;
                let kib = u32::try_from(body_len.div_ceil(1024)).unwrap_or(u32::MAX).min(self.budget_kib);
                let bytes = self.big_kib.clone().acquire_many_owned(kib).await.ok()?;
                Permit { _slot: Slot::Big(slot), _bytes: Some(bytes) }
            }
        })
    }

    /// Free slots of a lane, for tests and diagnostics.
    pub fn available(&self, lane: Lane) -> usize {
        match lane {
            Lane::Small => self.small.available() as usize,
            Lane::Big => self.big.available_permits(),
        }
    }

    /// Free bytes of the big lane's budget, in KiB.
    pub fn available_kib(&self) -> usize {
        self.big_kib.available_permits()
    }

    /// Takes every slot of the big lane (a test's stand-in for a lane saturated by maximum-size
    /// bodies); they are released when the permit is dropped.
    pub async fn saturate_big(&self) -> Option<Permit> {
        let n = u32::try_from(self.big.available_permits()).unwrap_or(u32::MAX);
        Some(Permit { _slot: Slot::Big(self.big.clone().acquire_many_owned(n).await.ok()?), _bytes: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: Source = Source::LOCAL;

    #[tokio::test]
    async fn a_big_body_takes_its_bytes_and_a_small_one_none() {
        let lanes = Lanes::new(1, 4, 100 * 1024);
        let big = lanes.acquire(ME, 70 * 1024 + 1).await.unwrap();
        assert_eq!(lanes.available_kib(), 100 - 71);
        assert_eq!(lanes.available(Lane::Big), 3);
        let small = lanes.acquire(ME, SMALL_BODY).await.unwrap();
        assert_eq!((lanes.available(Lane::Small), lanes.available_kib()), (0, 29));
        drop((big, small));
        assert_eq!((lanes.available(Lane::Small), lanes.available_kib()), (1, 100));
    }

    #[tokio::test]
    async fn bodies_hold_what_they_received_from_the_budget_of_their_declared_size() {
        let lanes = Lanes::with_reading(1, 1, 100 * 1024, 300 * 1024);
        // Small and declared: from the small bodies' budget, 1 KiB to start, then what arrived.
        let small_budget = lanes.available_small_reading_kib();
        let mut small = lanes.reserve_body(ME, Some(SMALL_BODY)).await;
        assert_eq!(
            (lanes.available_reading_kib(), lanes.available_small_reading_kib()),
            (300, small_budget - 1)
        );
        small.grow(10 * 1024 + 1).await;
        assert_eq!(lanes.available_small_reading_kib(), small_budget - 11);
        small.grow(5).await;
        assert_eq!(small.kib(), 11, "never less than it held");
        // Big, or undeclared: the big bodies' budget.
        let mut big = lanes.reserve_body(ME, Some(200 * 1024)).await;
        let undeclared = lanes.reserve_body(ME, None).await;
        big.grow(100 * 1024).await;
        assert_eq!(lanes.available_reading_kib(), 300 - 100 - 1);
        drop((small, big, undeclared));
        assert_eq!((lanes.available_reading_kib(), lanes.available_small_reading_kib()), (300, small_budget));
    }

    #[tokio::test]
    async fn one_client_holds_at_most_a_share_of_a_reading_budget_and_others_read_meanwhile() {
        let lanes = Lanes::new(1, 1, 1 << 20).with_small_reading(8 * SMALL_BODY);
        let (a, b) = (Source("10.0.0.1".parse().unwrap()), Source("10.0.0.2".parse().unwrap()));
        // Client a: two small bodies fully received, its quarter (2 × 64 KiB of 8) is held.
        let mut first = lanes.reserve_body(a, Some(SMALL_BODY)).await;
        first.grow(SMALL_BODY).await;
        first.done();
        let mut second = lanes.reserve_body(a, Some(SMALL_BODY)).await;
        second.grow(SMALL_BODY).await;
        second.done();
        let third = lanes.reserve_body(a, Some(SMALL_BODY));
        tokio::pin!(third);
        assert!(futures::poll!(third.as_mut()).is_pending(), "a third waits for the client's own");
        // Client b is not kept waiting by it.
        let mut other = lanes.reserve_body(b, Some(SMALL_BODY)).await;
        other.grow(SMALL_BODY).await;
        // Big bodies do not wait for small ones.
        let _big = lanes.reserve_body(a, Some(SMALL_BODY + 1)).await;
        drop(first);
        let _third = third.await;
    }

    /// Fields 19 (nice) and 41 (scheduling policy) of `/proc/thread-self/stat`, for the calling
    /// thread.
    fn this_threads_priority() -> (i32, u32) {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let after_name: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
        (after_name[19 - 3].parse().unwrap(), after_name[41 - 3].parse().unwrap())
    }

    /// Linux's `SCHED_IDLE`.
    const SCHED_IDLE: u32 = 5;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn big_decisions_run_on_threads_that_lowered_their_priority_and_small_ones_do_not() {
        let (base, policy) = this_threads_priority();
        assert_ne!(policy, SCHED_IDLE);
        let lanes = Lanes::new(1, 2, 1 << 20);
        let (nice, policy) = lanes.decide(Lane::Big, this_threads_priority).await.unwrap();
        assert!(
            policy == SCHED_IDLE || nice == (base + BIG_LANE_NICE).min(19),
            "the big lane's thread: policy {policy}, nice {nice}"
        );
        assert_eq!(policy, SCHED_IDLE, "where Linux allows it (always, unprivileged)");
        let small = lanes.decide(Lane::Small, this_threads_priority).await.unwrap();
        assert_eq!(small, (base, 0), "a small decision's thread keeps the process's priority");
        // A panicking decision is an error, and the lane's thread lives on.
        assert!(lanes.decide(Lane::Big, || panic!("a bug")).await.is_err());
        assert!(lanes.decide(Lane::Big, || 1).await.is_ok());
    }

    #[tokio::test]
    async fn the_byte_budget_bounds_the_big_lane_not_only_the_count() {
        let lanes = Lanes::new(1, 4, 100 * 1024);
        let a = lanes.acquire(ME, 70 * 1024).await.unwrap();
        // A slot is free, the bytes are not: the second waits.
        let second = lanes.acquire(ME, 70 * 1024);
        tokio::pin!(second);
        assert!(futures::poll!(second.as_mut()).is_pending());
        drop(a);
        let b = second.await.unwrap();
        // A body over the whole budget takes all of it rather than waiting forever.
        drop(b);
        let _all = lanes.acquire(ME, 1_000 * 1024).await.unwrap();
        assert_eq!(lanes.available_kib(), 0);
    }

    #[tokio::test]
    async fn small_decision_slots_go_to_waiting_clients_in_turn() {
        let lanes = Lanes::new(1, 1, 1 << 20);
        let (a, b) = (Source("10.0.0.1".parse().unwrap()), Source("10.0.0.2".parse().unwrap()));
        let held = lanes.acquire(a, 10).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for (who, name) in [(a, "a1"), (a, "a2"), (a, "a3"), (b, "b1")] {
            let (lanes, order) = (lanes.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let p = lanes.acquire(who, 10).await;
                order.lock().unwrap().push(name);
                tokio::task::yield_now().await;
                drop(p);
            }));
            tokio::task::yield_now().await;
        }
        drop(held);
        for w in waiting {
            w.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert!(order.iter().position(|n| *n == "b1").unwrap() <= 1, "{order:?}");
    }
}
