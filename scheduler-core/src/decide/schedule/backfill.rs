//! Backfill (policy `backfill`, Slurm's semantics): capacity held for the gangs first in line
//! that cannot start now, and the rule that lets later gangs use it.
//!
//! - **When running work ends**: each pod on a node is expected to end at its start plus its time
//!   limit (its own `kube-gang.io/time-limit` or `activeDeadlineSeconds`, else its gang's, else
//!   the policy's default); a pod being deleted ends now, one past its limit at the next step;
//!   one with no limit never ends within the window. Ends are rounded up to the policy's
//!   `resolution`, so the start times tried are at most `window / resolution` ([`Timeline`]).
//! - **A hold** ([`Hold`]): for a gang that cannot be placed now, the earliest of those times at
//!   which its placement succeeds with what ended by then given back (found by bisection: a
//!   handful of placements of the gang, not one per step), and the capacity that placement uses,
//!   taken from the ledger for the rest of the cycle — so a gang behind it sees that capacity as
//!   taken, unless it may backfill.
//! - **Backfill**: a gang may use a hold's capacity when its time limit (the longest of its
//!   members') ends it a step before the hold's start ([`may_use`]: its pods' start times come
//!   after the binding); a gang with no limit never does. A hold ends a step after its gang's
//!   limit: later holds may count on that capacity after it.
//!
//! Nothing here is kept between cycles: the holds are found again from the snapshot every cycle,
//! in the same order, so a restarted or new leader holds the same capacity for the same gangs.

use std::time::Duration;

use super::ledger::{Demand, Ledger, Txn};
use crate::decide::config::Backfill;
use crate::read::model::{Gang, GangKey, Pod, Snapshot, Time};

/// Capacity held for a gang that waits: where its placement at `start` puts its members.
#[derive(Clone, Debug)]
pub(super) struct Hold {
    pub gang: usize,
    /// When the gang is expected to start (a step of the timeline).
    pub start: Time,
    /// When it is expected to end (`start` plus its time limit); `None`: no limit, never.
    pub end: Option<Time>,
    /// (pod, node) of its placement at `start`: each pod's demand is held on its node.
    pub bindings: Vec<(usize, usize)>,
}

/// Work expected to end, giving back `demand` on `node` at `at`.
#[derive(Clone, Debug)]
pub(super) struct Ending {
    pub at: Time,
    pub node: usize,
    pub demand: Demand,
}

/// The cycle's clock for backfill: `now`, the policy, and the steps ends are rounded up to.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timeline<'a> {
    pub now: Time,
    pub policy: &'a Backfill,
}

impl Timeline<'_> {
    /// The last time a start is looked for.
    pub fn horizon(&self) -> Time {
        self.now.plus(self.policy.window)
    }

    /// `t` rounded up to a multiple of the resolution (since the epoch, so the steps are the
    /// same in every cycle, and what is written from them does not change from one to the next),
    /// and after `now` (a time already past is the first step after it).
    pub fn step(&self, t: Time) -> Time {
        let res = i64::try_from(self.policy.resolution.as_millis()).unwrap_or(i64::MAX).max(1);
        let t = t.0.max(self.now.0.saturating_add(1));
        Time(t.saturating_add(res - 1).div_euclid(res).saturating_mul(res))
    }

    /// The time limit of a pod: its own, else its gang's, else the policy's default.
    pub fn pod_limit(&self, pod: &Pod, gang: Option<&Gang>) -> Option<Duration> {
        pod.time_limit.or(gang.and_then(|g| g.time_limit)).or(self.policy.default_time_limit)
    }

    /// The time limit of a gang about to start with `members` pending: the longest of theirs
    /// ([`Timeline::pod_limit`], the same rule that says when they end once they run), `None`
    /// when one has none; with no member pending, the gang's own or the default.
    pub fn gang_limit(
        &self,
        gang: &Gang,
        pods: &[Pod],
        members: impl Iterator<Item = usize>,
    ) -> Option<Duration> {
        let mut longest: Option<Duration> = None;
        let mut any = false;
        for p in members {
            any = true;
            let l = self.pod_limit(&pods[p], Some(gang))?;
            longest = Some(longest.map_or(l, |m| m.max(l)));
        }
        if any { longest } else { gang.time_limit.or(self.policy.default_time_limit) }
    }

    /// When a pod on a node is expected to end, as a step of the timeline; `None` when it has no
    /// limit or ends past the window.
    pub fn pod_end(&self, pod: &Pod, gang: Option<&Gang>) -> Option<Time> {
        let at = if pod.deleting {
            self.now
        } else {
            let limit = self.pod_limit(pod, gang)?;
            pod.started.unwrap_or(self.now).plus(limit)
        };
        Some(self.step(at)).filter(|&t| t <= self.horizon())
    }
}

/// Every pod on a node with an expected end within the window, with what it gives back there,
/// sorted by end: read once a cycle, on its first hold (one pass over the pods).
pub(super) fn endings(
    snap: &Snapshot,
    clock: Timeline<'_>,
    node_of: impl Fn(&str) -> Option<usize>,
    gang_of: impl Fn(&GangKey) -> Option<usize>,
    demand: impl Fn(&Pod) -> Demand,
) -> Vec<Ending> {
    let mut out: Vec<Ending> = snap
        .pods
        .iter()
        .filter(|p| p.uses_node())
        .filter_map(|p| {
            let node = node_of(p.node_name.as_deref()?)?;
            let gang = p.gang.as_ref().and_then(|m| gang_of(&m.gang)).map(|g| &snap.gangs[g]);
            let at = clock.pod_end(p, gang)?;
            Some(Ending { at, node, demand: demand(p) })
        })
        .collect();
    out.sort_by_key(|e| e.at);
    out
}

/// Whether a gang that starts now with time limit `limit` may use `hold`'s capacity: it ends by
/// the hold's start, with a step to spare — its pods' `status.startTime` comes a little after
/// the binding, and a later cycle counts their ends from it.
pub(super) fn may_use(clock: Timeline<'_>, limit: Option<Duration>, hold: &Hold) -> bool {
    limit.is_some_and(|l| clock.now.plus(l).plus(clock.policy.resolution) <= hold.start)
}

/// What a gang needs at the least, for a cheap bound on when it can fit: `count` more pods, each
/// asking at least `demand` (every resource at the least any of them asks).
#[derive(Clone, Debug)]
pub(super) struct AtLeast {
    pub demand: Demand,
    pub count: u64,
}

/// The earliest step at which `fits` holds, among the distinct times of `ends` and `more` (each
/// sorted by time). Steps at which the nodes could not hold `at_least` (each node counted for
/// as many of its pods as its room allows) are never tried; of the others, the first is tried
/// first, then the last (none fits: `None`), then they are bisected. `fits` is handed a
/// transaction giving back everything that ends by the step. Returns the step and what `fits`
/// returned there.
pub(super) fn earliest<T>(
    ledger: &Ledger,
    nodes: usize,
    ends: &[Ending],
    more: &[Ending],
    at_least: Option<&AtLeast>,
    mut fits: impl FnMut(Txn) -> Option<T>,
) -> Option<(Time, T)> {
    let mut steps: Vec<Time> = ends.iter().chain(more).map(|e| e.at).collect();
    steps.sort_unstable();
    steps.dedup();
    let base_at = |t: Time| {
        let mut txn = Txn::default();
        for list in [ends, more] {
            for e in &list[..list.partition_point(|e| e.at <= t)] {
                ledger.give(&mut txn, e.node, &e.demand);
            }
        }
        txn
    };
    let first = match at_least {
        Some(need) => first_room(ledger, nodes, ends, more, &steps, need)?,
        None => 0,
    };
    // The first step with room is the answer more often than not: tried before the last.
    if let Some(v) = fits(base_at(*steps.get(first)?)) {
        return Some((steps[first], v));
    }
    let &last = steps.last()?;
    if first + 1 == steps.len() {
        return None;
    }
    let mut found = (last, fits(base_at(last))?);
    // The step at `hi` fits; those before `lo` were found not to, or cannot.
    let (mut lo, mut hi) = (first + 1, steps.len() - 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match fits(base_at(steps[mid])) {
            Some(v) => {
                found = (steps[mid], v);
                hi = mid;
            }
            None => lo = mid + 1,
        }
    }
    Some(found)
}

/// How many pods of `demand` fit in `free` (by resource index) and `pods` slots.
fn room(free: &[i64], pods: i64, demand: &Demand) -> u64 {
    let mut k = u64::try_from(pods).unwrap_or(0);
    for &(r, a) in &demand.0 {
        if a > 0 {
            let have = free.get(r).copied().unwrap_or(0);
            k = k.min(u64::try_from(have.div_euclid(a)).unwrap_or(0));
        }
    }
    k
}

/// Whether the `nodes` nodes, as `txn` leaves them, have room for `need` between them: a
/// necessary condition for a gang to fit, cheaper than trying.
pub(super) fn has_room(ledger: &Ledger, txn: &Txn, nodes: usize, need: &AtLeast) -> bool {
    let mut total = 0u64;
    for n in 0..nodes {
        let (free, pods) = ledger.left(txn, n);
        total = total.saturating_add(room(free, pods, &need.demand));
        if total >= need.count {
            return true;
        }
    }
    false
}

/// The first of `steps` at which the nodes, with everything that ends by then given back, have
/// room for `need.count` pods of `need.demand` between them (a node counted for as many as fit
/// on it): a necessary condition for the gang to fit, found in one pass over the ends.
fn first_room(
    ledger: &Ledger,
    nodes: usize,
    ends: &[Ending],
    more: &[Ending],
    steps: &[Time],
    need: &AtLeast,
) -> Option<usize> {
    let none = Txn::default();
    let mut free: Vec<(Vec<i64>, i64)> = (0..nodes)
        .map(|n| {
            let (f, pods) = ledger.left(&none, n);
            (f.to_vec(), pods)
        })
        .collect();
    let room = |(f, pods): &(Vec<i64>, i64)| room(f, *pods, &need.demand);
    let mut total: u64 = free.iter().map(room).sum();
    let (mut i, mut j) = (0, 0);
    for (s, &t) in steps.iter().enumerate() {
        while let Some(e) = ends.get(i).filter(|e| e.at <= t).or_else(|| more.get(j).filter(|e| e.at <= t)) {
            if ends.get(i).is_some_and(|x| std::ptr::eq(x, e)) {
                i += 1;
            } else {
                j += 1;
            }
            let Some(slot) = free.get_mut(e.node) else { continue };
            total -= room(slot);
            for &(r, a) in &e.demand.0 {
                if let Some(x) = slot.0.get_mut(r) {
                    *x = x.saturating_add(a);
                }
            }
            slot.1 = slot.1.saturating_add(1);
            total += room(slot);
        }
        if total >= need.count {
            return Some(s);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::schedule::ledger::ResourceIndex;
    use crate::read::model::Node;
    use crate::read::resources::Resources;

    fn policy(res: u64) -> Backfill {
        Backfill { resolution: Duration::from_secs(res), ..Backfill::default() }
    }

    #[test]
    fn ends_round_up_to_steps_fixed_in_time_and_past_ones_come_first() {
        let p = policy(60);
        let clock = Timeline { now: Time::from_secs(1000), policy: &p };
        assert_eq!(clock.step(Time::from_secs(1001)), Time::from_secs(1020));
        assert_eq!(clock.step(Time::from_secs(1020)), Time::from_secs(1020));
        assert_eq!(clock.step(Time::from_secs(1021)), Time::from_secs(1080));
        assert_eq!(clock.step(Time::from_secs(10)), Time::from_secs(1020));
        assert_eq!(clock.step(Time::from_secs(1000)), Time::from_secs(1020), "now is past");
        // The same step a few seconds later: the grid does not move with the clock.
        let later = Timeline { now: Time::from_secs(1007), policy: &p };
        assert_eq!(later.step(Time::from_secs(1050)), clock.step(Time::from_secs(1050)));
    }

    #[test]
    fn the_earliest_step_that_fits_is_found_by_bisection() {
        let nodes: Vec<Node> = (0..8)
            .map(|i| Node {
                name: format!("n{i}").into(),
                allocatable: Resources::new().with("cpu", 1).with("pods", 110),
                labels: Default::default(),
                taints: vec![],
                unschedulable: false,
                ready: true,
            })
            .collect();
        let mut res = ResourceIndex::default();
        let ledger = Ledger::new(&nodes, &mut res);
        let cpu = res.find("cpu").unwrap();
        let ends: Vec<Ending> = (0..8)
            .map(|i| Ending {
                at: Time::from_secs(60 * (1 + i / 2)),
                node: i as usize,
                demand: Demand(vec![(cpu, 1)]),
            })
            .collect();
        // Fits once 5 nodes' worth came back: the step at which the fifth ends (the third).
        let mut tries = 0;
        let got = earliest(&ledger, 8, &ends[..5], &ends[5..], None, |txn| {
            tries += 1;
            let back: i64 = (0..8).map(|n| ledger.free(&txn, n, cpu) - 1).sum();
            (back >= 5).then_some(back)
        });
        assert_eq!(got, Some((Time::from_secs(180), 6)));
        assert!(tries <= 4, "{tries} tries for 4 steps");
        assert_eq!(earliest(&ledger, 8, &ends, &[], None, |_| None::<()>), None);
        assert_eq!(earliest(&ledger, 8, &[], &[], None, |_| Some(())), None);
        // Pods of 2 CPUs need 3 nodes emptied (each has 1 of 2 free until its pod ends): no
        // step before the third is tried, and the third is tried right after the last.
        let at_least = AtLeast { demand: Demand(vec![(cpu, 2)]), count: 3 };
        let mut tried = Vec::new();
        let got = earliest(&ledger, 8, &ends, &[], Some(&at_least), |txn| {
            let whole = (0..8).filter(|&n| ledger.free(&txn, n, cpu) >= 2).count();
            tried.push(whole);
            (whole >= 3).then_some(whole)
        });
        assert_eq!(got, Some((Time::from_secs(120), 4)));
        assert_eq!(tried, [4], "the first step with room, which fits");
        // Never room enough: nothing is tried.
        let never = AtLeast { demand: Demand(vec![(cpu, 2)]), count: 9 };
        assert_eq!(earliest(&ledger, 8, &ends, &[], Some(&never), |_| Some(())), None);
    }
}
