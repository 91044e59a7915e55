//! Leader election on a `coordination.k8s.io/v1` Lease: acquire when free or expired, renew while
//! held, release on shutdown. Every write carries the Lease's `resourceVersion`, so two replicas
//! racing for it cannot both win: the API server rejects the stale write with a 409.
//!
//! Expiry is judged by observation, as client-go's leader elector does: a replica records, on its
//! own monotonic clock, when it last saw the Lease record change ([`Observed`]), and takes the
//! Lease over only once it has seen no change for a whole lease duration. The holder's
//! `renewTime` is written for people to read but never compared with the local wall clock, so a
//! replica whose clock is minutes off neither steals a live Lease nor keeps one it lost.
//!
//! The election runs in a task of its own ([`elect`]), so a long cycle or a slow burst of
//! bindings never delays a renewal; it publishes a [`Standing`] that the loop consults before
//! every write.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use scheduler_core::model::Time;

/// How long after its last successful renewal a leader may still act: two thirds of the lease
/// duration, so it stops well before a successor may take over (kube-scheduler's renew deadline
/// sits at the same fraction by default).
pub fn renew_deadline(lease_duration: Duration) -> Duration {
    lease_duration.saturating_mul(2) / 3
}

/// Where this replica stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Standing {
    /// It holds the Lease (or runs without leader election).
    pub held: bool,
    /// Until when it may act on that: its last renewal plus the renew deadline (`None`: no
    /// election, no deadline).
    pub until: Option<Instant>,
}

impl Standing {
    /// A replica running without leader election: it always acts.
    pub const ALONE: Standing = Standing { held: true, until: None };
    /// Not (yet) the leader.
    pub const FOLLOWER: Standing = Standing { held: false, until: None };

    /// Whether it may write to the cluster now.
    pub fn may_act(&self) -> bool {
        self.held && self.until.is_none_or(|u| Instant::now() < u)
    }
}

/// Runs election rounds every `retry` until `stop`, publishing the result. A round that fails or
/// hangs never extends the standing: the renew deadline runs from the start of the last round
/// that succeeded.
pub async fn elect(
    api: Api<Lease>,
    name: String,
    me: String,
    duration: Duration,
    retry: Duration,
    standing: watch::Sender<Standing>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(retry);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut observed: Option<Observed> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let attempt = Instant::now();
        let round = tokio::select! {
            () = stop.cancelled() => return,
            r = round(&api, &name, &me, crate::clock::wall_clock(), attempt, duration, &mut observed) => r,
        };
        let held = match round {
            Ok(held) => held,
            Err(e) => {
                tracing::warn!(error = %e, "lease round failed; not leading until one succeeds");
                false
            }
        };
        let next = if held {
            Standing { held, until: Some(attempt + renew_deadline(duration)) }
        } else {
            Standing::FOLLOWER
        };
        if next.held != standing.borrow().held {
            tracing::info!(leader = held, identity = %me, "leadership changed");
        }
        standing.send_replace(next);
    }
}

/// What to do with a Lease as found, for `me` at `now`. Pure, so the rules are tested without a
/// cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No Lease yet: create it holding it.
    Create,
    /// Ours: renew it.
    Renew,
    /// Someone else's and expired (or released): take it over.
    TakeOver,
    /// Someone else holds it.
    Follow { holder: String },
}

/// The Lease record as this replica last saw it, and when it saw it change (its own monotonic
/// clock): what expiry is judged from.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    pub record: LeaseSpec,
    pub at: Instant,
}

/// Decides from the Lease's current spec, as observed at `now` (monotonic). `observed` is updated
/// when the record differs from the last one seen.
pub fn decide(
    lease: Option<&LeaseSpec>,
    me: &str,
    now: Instant,
    observed: &mut Option<Observed>,
) -> Decision {
    let Some(spec) = lease else {
        *observed = None;
        return Decision::Create;
    };
    if observed.as_ref().is_none_or(|o| o.record != *spec) {
        *observed = Some(Observed { record: spec.clone(), at: now });
    }
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder == me {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::TakeOver;
    }
    let duration =
        Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(15)).unwrap_or(15));
    let seen = observed.as_ref().map_or(now, |o| o.at);
    if now.saturating_duration_since(seen) > duration {
        Decision::TakeOver
    } else {
        Decision::Follow { holder }
    }
}

fn micro(now: Time) -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::from_millisecond(now.0).unwrap_or_default())
}

/// The Lease spec a holder writes.
pub fn held_spec(
    me: &str,
    now: Time,
    previous: Option<&LeaseSpec>,
    taking_over: bool,
    duration: Duration,
) -> LeaseSpec {
    let transitions = previous.and_then(|p| p.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(me.to_string()),
        lease_duration_seconds: Some(i32::try_from(duration.as_secs().max(1)).unwrap_or(15)),
        acquire_time: if taking_over || previous.is_none() {
            Some(micro(now))
        } else {
            previous.and_then(|p| p.acquire_time.clone())
        },
        renew_time: Some(micro(now)),
        lease_transitions: Some(if taking_over { transitions + 1 } else { transitions }),
        ..LeaseSpec::default()
    }
}

/// One election round against the API: returns whether `me` holds the Lease afterwards. `now`
/// (wall clock) is only written into the record; `seen` (monotonic) and `observed` judge expiry.
pub async fn round(
    api: &Api<Lease>,
    name: &str,
    me: &str,
    now: Time,
    seen: Instant,
    duration: Duration,
    observed: &mut Option<Observed>,
) -> kube::Result<bool> {
    let current = api.get_opt(name).await?;
    let spec = current.as_ref().and_then(|l| l.spec.clone());
    match decide(spec.as_ref(), me, seen, observed) {
        Decision::Follow { holder } => {
            tracing::debug!(%holder, "following");
            Ok(false)
        }
        Decision::Create => {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(name.to_string()), ..ObjectMeta::default() },
                spec: Some(held_spec(me, now, None, true, duration)),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
        d @ (Decision::Renew | Decision::TakeOver) => {
            let Some(mut lease) = current else { return Ok(false) };
            lease.spec = Some(held_spec(me, now, spec.as_ref(), d == Decision::TakeOver, duration));
            match api.replace(name, &PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                // Someone else wrote first: follow them.
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
    }
}

/// Releases the Lease if `me` holds it, so a successor need not wait for it to expire.
pub async fn release(api: &Api<Lease>, name: &str, me: &str) -> kube::Result<()> {
    let Some(mut lease) = api.get_opt(name).await? else { return Ok(()) };
    if lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) != Some(me) {
        return Ok(());
    }
    if let Some(spec) = lease.spec.as_mut() {
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
    }
    match api.replace(name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--leader-elect-lease-duration`'s default.
    const LEASE_DURATION: Duration = Duration::from_secs(15);

    fn spec(holder: Option<&str>, renewed_secs: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(Into::into),
            lease_duration_seconds: Some(15),
            renew_time: Some(micro(Time::from_secs(renewed_secs))),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn election_rules_judge_expiry_by_observed_change_not_by_renew_time() {
        let t0 = Instant::now();
        let mut seen = None;
        assert_eq!(decide(None, "a", t0, &mut seen), Decision::Create);
        assert_eq!(decide(Some(&spec(Some("a"), 99)), "a", t0, &mut seen), Decision::Renew);
        assert_eq!(decide(Some(&spec(None, 99)), "a", t0, &mut seen), Decision::TakeOver, "released");
        // A renewTime far in the past (or the future) says nothing on its own: the holder renews
        // by changing the record, and it is the change this replica sees that counts.
        let mut seen = None;
        let held = spec(Some("b"), -100_000);
        assert_eq!(decide(Some(&held), "a", t0, &mut seen), Decision::Follow { holder: "b".into() });
        let later = t0 + Duration::from_secs(14);
        assert_eq!(decide(Some(&held), "a", later, &mut seen), Decision::Follow { holder: "b".into() });
        let renewed = spec(Some("b"), -99_990);
        assert_eq!(decide(Some(&renewed), "a", later, &mut seen), Decision::Follow { holder: "b".into() });
        let after = later + Duration::from_secs(14);
        assert_eq!(decide(Some(&renewed), "a", after, &mut seen), Decision::Follow { holder: "b".into() });
        // No change for longer than the lease duration: expired.
        let expired = later + Duration::from_secs(16);
        assert_eq!(decide(Some(&renewed), "a", expired, &mut seen), Decision::TakeOver);
    }

    #[test]
    fn takeover_counts_a_transition() {
        let prev = spec(Some("b"), 0);
        let s = held_spec("a", Time::from_secs(100), Some(&prev), true, LEASE_DURATION);
        assert_eq!(s.lease_transitions, Some(1));
        assert_eq!(s.holder_identity.as_deref(), Some("a"));
        let renewed = held_spec("a", Time::from_secs(105), Some(&s), false, LEASE_DURATION);
        assert_eq!(renewed.lease_duration_seconds, Some(15));
        assert!(renew_deadline(LEASE_DURATION) < LEASE_DURATION);
        assert_eq!(renewed.lease_transitions, Some(1));
        assert_eq!(renewed.acquire_time, s.acquire_time);
    }
}
