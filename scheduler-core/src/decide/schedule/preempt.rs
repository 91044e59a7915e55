//! Gang-aware preemption: a gang that cannot fit may displace strictly lower-priority work.
//!
//! Victims are whole units — a gang's bound members together (so no victim gang is left below its
//! minimum), or one pod outside any gang — taken lowest priority first, then smallest, then by key.
//! The shortest prefix of that order with which the preemptor fits completely is found by binary
//! search; then every unit the preemptor can do without is dropped again (highest priority first), so the fewest and lowest are evicted. If the
//! preemptor cannot fit even with every candidate gone, nothing is evicted.

use std::collections::BTreeSet;

use super::Cycle;
use super::place::Placement;
use super::state::Txn;
use crate::model::PreemptionPolicy;

/// How many victim units one preemptor may consider; bounds a cycle's cost on huge clusters.
const MAX_CANDIDATES: usize = 512;

pub(super) enum Result {
    /// Evict these pods; the preemptor then goes where `placement` says.
    Evict { victims: Vec<usize>, placement: Placement },
    /// Victims of an earlier preemption are still terminating on the nominated nodes.
    Waiting(usize),
    /// Preemption cannot help (or is not allowed).
    No,
}

struct Unit<'a> {
    priority: i32,
    pods: Vec<usize>,
    key: &'a crate::model::ObjectKey,
}

pub(super) fn try_preempt(c: &Cycle<'_>, g: usize) -> Result {
    let snap = c.snap;
    let pending: Vec<usize> = c.members[g].pending.values().flatten().copied().collect();
    if pending.is_empty()
        || pending.iter().any(|&p| snap.pods[p].preemption_policy == PreemptionPolicy::Never)
    {
        return Result::No;
    }
    let nominated: BTreeSet<&str> =
        pending.iter().filter_map(|&p| snap.pods[p].nominated_node.as_deref()).collect();
    if !nominated.is_empty() {
        let terminating = snap
            .pods
            .iter()
            .filter(|p| {
                p.deleting && p.uses_node() && p.node_name.as_deref().is_some_and(|n| nominated.contains(n))
            })
            .count();
        if terminating > 0 {
            return Result::Waiting(terminating);
        }
    }

    let priority = c.gang_priority(g);
    // Only units with a pod on a node some member could use can help.
    let mut useful = vec![false; snap.nodes.len()];
    let mut seen: Vec<*const super::place::Feasible> = Vec::new();
    for &p in &pending {
        let f = c.place.feasible(p);
        if seen.contains(&std::rc::Rc::as_ptr(&f)) {
            continue;
        }
        seen.push(std::rc::Rc::as_ptr(&f));
        for &n in &f.list {
            useful[n] = true;
        }
    }
    let node_of = |p: usize| snap.pods[p].node_name.as_deref().and_then(|n| c.node_index.get(n).copied());
    let evictable = |p: usize| {
        let pod = &snap.pods[p];
        pod.uses_node() && !pod.deleting && !c.evicted.contains(&p) && node_of(p).is_some()
    };
    let mut units: Vec<Unit<'_>> = Vec::new();
    for (j, gang) in snap.gangs.iter().enumerate() {
        if j == g || c.gang_priority(j) >= priority {
            continue;
        }
        let pods: Vec<usize> = c.members[j].all.iter().copied().filter(|&p| evictable(p)).collect();
        if pods.iter().any(|&p| node_of(p).is_some_and(|n| useful[n])) {
            units.push(Unit { priority: c.gang_priority(j), pods, key: &gang.key });
        }
    }
    for (i, pod) in snap.pods.iter().enumerate() {
        let in_gang = pod.gang.as_ref().is_some_and(|m| c.gang_index.contains_key(&m.gang));
        if !in_gang && pod.priority < priority && evictable(i) && node_of(i).is_some_and(|n| useful[n]) {
            units.push(Unit { priority: pod.priority, pods: vec![i], key: &pod.key });
        }
    }
    units.sort_by(|a, b| (a.priority, a.pods.len(), a.key).cmp(&(b.priority, b.pods.len(), b.key)));
    units.truncate(MAX_CANDIDATES);

    let freed = |chosen: &[&Unit<'_>]| {
        let mut txn = Txn::default();
        for u in chosen {
            for &p in &u.pods {
                if let Some(n) = node_of(p) {
                    c.state.give(&mut txn, n, &c.res.known_demand(&snap.pods[p].requests));
                }
            }
        }
        txn
    };
    // Cheapest prefix of candidates that makes room (more victims, more room): gallop 1, 2, 4, …
    // to the first prefix that fits, then binary search below it. Victims are usually few, so the
    // trials — whose cost grows with the victims freed — stay small: O(log victims) of them.
    let fits_with = |n: usize| {
        let prefix: Vec<&Unit<'_>> = units.iter().take(n).collect();
        c.place_gang(g, &freed(&prefix), false).satisfied
    };
    if units.is_empty() {
        return Result::No;
    }
    let (mut lo, mut hi) = (1, 1);
    loop {
        if fits_with(hi) {
            break;
        }
        if hi == units.len() {
            return Result::No;
        }
        lo = hi + 1;
        hi = hi.saturating_mul(2).min(units.len());
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits_with(mid) { hi = mid } else { lo = mid + 1 }
    }
    let mut chosen: Vec<&Unit<'_>> = units.iter().take(lo).collect();
    // Drop every victim the preemptor can do without, highest priority (last added) first.
    let mut i = chosen.len();
    while i > 0 {
        i -= 1;
        let mut without = chosen.clone();
        without.remove(i);
        if c.place_gang(g, &freed(&without), false).satisfied {
            chosen = without;
        }
    }
    let placement = c.place_gang(g, &freed(&chosen), false);
    let victims = chosen.iter().flat_map(|u| u.pods.iter().copied()).collect();
    Result::Evict { victims, placement }
}
