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
//! Both semaphores are fair (first come, first served), and a big request takes its slot before its
//! bytes, always in that order, so two big requests never hold a part each of what the other needs.
//!
//! Bodies being **read** are bounded too, before a byte arrives: a request declaring (by
//! `Content-Length`) more than [`SMALL_BODY`], or not declaring its length, first reserves what it
//! may send from a reading budget ([`Lanes::reserve_body`]), held until its decision is done. A small
//! body reserves what it declares from a budget of its own, so small requests never wait for big
//! ones: counting connections is not enough, since one HTTP/2 connection carries many requests at
//! once. A client trickling a body holds reading budget, never a decision slot.
//! Measured (`cargo bench -p gang-webhook --bench rss`, 32 clients sending 3–6 MiB reviews back to
//! back): without it the webhook's RSS peaked at 262 MiB, every client's body in memory at once.

use std::sync::{Arc, Mutex, PoisonError, mpsc};

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
/// (a Pod's review is 2–6 KiB, so thousands of ordinary ones).
pub const SMALL_READING_BUDGET: usize = 32 * 1024 * 1024;

/// The permits of the two lanes, and the threads of the big one.
#[derive(Debug, Clone)]
pub struct Lanes {
    small: Arc<Semaphore>,
    big: Arc<Semaphore>,
    /// The big lane's byte budget, in KiB.
    big_kib: Arc<Semaphore>,
    budget_kib: u32,
    /// The budget of big bodies being read (and held until decided), in KiB.
    reading_kib: Arc<Semaphore>,
    reading_budget_kib: u32,
    /// The budget of small bodies being read (and held until decided), in KiB.
    small_reading_kib: Arc<Semaphore>,
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

/// Reading budget a body holds until its decision is done; released when dropped.
#[derive(Debug)]
pub struct Reading {
    _bytes: Option<OwnedSemaphorePermit>,
}

/// What a decision holds while it runs; released when dropped.
#[derive(Debug)]
pub struct Permit {
    _slot: OwnedSemaphorePermit,
    _bytes: Option<OwnedSemaphorePermit>,
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
        let (budget_kib, reading_budget_kib) = (kib(budget_bytes), kib(reading_bytes));
        Lanes {
            small: Arc::new(Semaphore::new(small.max(1))),
            big: Arc::new(Semaphore::new(big.max(1))),
            big_kib: Arc::new(Semaphore::new(budget_kib as usize)),
            budget_kib,
            reading_kib: Arc::new(Semaphore::new(reading_budget_kib as usize)),
            reading_budget_kib,
            small_reading_kib: Arc::new(Semaphore::new(kib(SMALL_READING_BUDGET) as usize)),
            pool: BigPool::start(big.max(1)),
        }
    }

    /// The same lanes, small bodies being read bounded by `bytes` together (at least one
    /// [`SMALL_BODY`]).
    pub fn with_small_reading(mut self, bytes: usize) -> Lanes {
        let kib = u32::try_from(bytes.max(SMALL_BODY).div_ceil(1024)).unwrap_or(u32::MAX);
        self.small_reading_kib = Arc::new(Semaphore::new(kib as usize));
        self
    }

    /// Waits until a body that declared `declared` bytes (`None`: no `Content-Length`, so up to
    /// `limit`) may be read: a small one from the small bodies' budget, any other from the big
    /// bodies'.
    pub async fn reserve_body(&self, declared: Option<usize>, limit: usize) -> Option<Reading> {
        let len = declared.unwrap_or(limit).min(limit);
        let kib = u32::try_from(len.div_ceil(1024)).unwrap_or(u32::MAX);
        let bytes = if declared.is_some() && Lane::of(len) == Lane::Small {
            self.small_reading_kib.clone().acquire_many_owned(kib).await.ok()?
        } else {
            self.reading_kib.clone().acquire_many_owned(kib.min(self.reading_budget_kib)).await.ok()?
        };
        Some(Reading { _bytes: Some(bytes) })
    }

    /// Free bytes of the big bodies' reading budget, in KiB.
    pub fn available_reading_kib(&self) -> usize {
        self.reading_kib.available_permits()
    }

    /// Free bytes of the small bodies' reading budget, in KiB.
    pub fn available_small_reading_kib(&self) -> usize {
        self.small_reading_kib.available_permits()
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

    /// Waits for the permit a body of `body_len` bytes needs (`None` only if the lanes were closed,
    /// which nothing does).
    pub async fn acquire(&self, body_len: usize) -> Option<Permit> {
        Some(match Lane::of(body_len) {
            Lane::Small => Permit { _slot: self.small.clone().acquire_owned().await.ok()?, _bytes: None },
            Lane::Big => {
                let slot = self.big.clone().acquire_owned().await.ok()?;
                let kib = u32::try_from(body_len.div_ceil(1024)).unwrap_or(u32::MAX).min(self.budget_kib);
                let bytes = self.big_kib.clone().acquire_many_owned(kib).await.ok()?;
                Permit { _slot: slot, _bytes: Some(bytes) }
            }
        })
    }

    /// Free slots of a lane, for tests and diagnostics.
    pub fn available(&self, lane: Lane) -> usize {
        match lane {
            Lane::Small => self.small.available_permits(),
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
        Some(Permit { _slot: self.big.clone().acquire_many_owned(n).await.ok()?, _bytes: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_big_body_takes_its_bytes_and_a_small_one_none() {
        let lanes = Lanes::new(1, 4, 100 * 1024);
        let big = lanes.acquire(70 * 1024 + 1).await.unwrap();
        assert_eq!(lanes.available_kib(), 100 - 71);
        assert_eq!(lanes.available(Lane::Big), 3);
        let small = lanes.acquire(SMALL_BODY).await.unwrap();
        assert_eq!((lanes.available(Lane::Small), lanes.available_kib()), (0, 29));
        drop((big, small));
        assert_eq!((lanes.available(Lane::Small), lanes.available_kib()), (1, 100));
    }

    #[tokio::test]
    async fn big_bodies_reserve_what_they_declare_before_they_are_read() {
        let lanes = Lanes::with_reading(1, 1, 100 * 1024, 300 * 1024);
        // Small and declared: from the small bodies' budget, not the big ones'.
        let small_budget = lanes.available_small_reading_kib();
        let small = lanes.reserve_body(Some(SMALL_BODY), 7 << 20).await.unwrap();
        assert_eq!(lanes.available_reading_kib(), 300);
        assert_eq!(lanes.available_small_reading_kib(), small_budget - 64);
        // Big: its declared size; undeclared: the limit.
        let big = lanes.reserve_body(Some(200 * 1024), 7 << 20).await.unwrap();
        assert_eq!(lanes.available_reading_kib(), 100);
        let waits = lanes.reserve_body(Some(150 * 1024), 7 << 20);
        tokio::pin!(waits);
        assert!(futures::poll!(waits.as_mut()).is_pending(), "150 KiB more do not fit in 100");
        drop(big);
        let fifty = waits.await.unwrap();
        let undeclared = lanes.reserve_body(None, 80 * 1024).await.unwrap();
        assert_eq!(lanes.available_reading_kib(), 70);
        // More than the whole budget takes all of it rather than waiting forever.
        drop((fifty, undeclared, small));
        let _all = lanes.reserve_body(Some(1 << 30), 2 << 30).await.unwrap();
        assert_eq!(lanes.available_reading_kib(), 0);
    }

    #[tokio::test]
    async fn small_bodies_have_a_budget_of_their_own_however_many_requests_share_a_connection() {
        let lanes = Lanes::new(1, 1, 1 << 20).with_small_reading(2 * SMALL_BODY);
        let a = lanes.reserve_body(Some(SMALL_BODY), 7 << 20).await.unwrap();
        let _b = lanes.reserve_body(Some(10), 7 << 20).await.unwrap();
        let c = lanes.reserve_body(Some(SMALL_BODY), 7 << 20);
        tokio::pin!(c);
        assert!(futures::poll!(c.as_mut()).is_pending(), "the budget bounds small bodies too");
        // Big bodies do not wait for small ones.
        let _big = lanes.reserve_body(Some(SMALL_BODY + 1), 7 << 20).await.unwrap();
        drop(a);
        let _c = c.await.unwrap();
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
        let a = lanes.acquire(70 * 1024).await.unwrap();
        // A slot is free, the bytes are not: the second waits.
        let second = lanes.acquire(70 * 1024);
        tokio::pin!(second);
        assert!(futures::poll!(second.as_mut()).is_pending());
        drop(a);
        let b = second.await.unwrap();
        // A body over the whole budget takes all of it rather than waiting forever.
        drop(b);
        let _all = lanes.acquire(1_000 * 1024).await.unwrap();
        assert_eq!(lanes.available_kib(), 0);
    }
}
