//! Gang-aware preemption: a gang that cannot fit may displace strictly lower-priority work.
//!
//! A gang that runs to completion once placed (a KAI PodGroup that is non-preemptible, or states
//! no preemptibility at priority 100 or above, as KAI reads it) is never a victim.
//!
//! Victims are units that leave no gang below its minimum: a gang's bound members together, one
//! pod outside any gang, or — for a running gang with members beyond its minimum (an elastic
//! gang), unless it is disrupted only whole — its newest such members (see [`surplus`]). Units
//! are taken in the order [`candidates`] gives: first every unit whose eviction violates no
//! PodDisruptionBudget, then the others (kube-scheduler's DefaultPreemption reprieves
//! budget-violating victims first and picks the node with the fewest violations: a violation is a
//! last resort, not a bar); within each, lowest priority first; at one priority, members beyond a
//! minimum (their gang keeps running), then pods outside any gang, then gangs, smallest first,
//! then the most recently started, then by key (upstream's workload-aware preemption ranks units
//! of one priority the same way: pods before groups, smaller groups before larger, later started
//! before earlier). The shortest prefix of that order with which the preemptor fits
//! completely is found by galloping and binary search; a chosen unit of members beyond a minimum
//! is cut to the fewest of its newest members with which the preemptor still fits (binary search
//! over the sizes it may be cut to); then every unit the preemptor can do without is dropped again
//! (the last taken first), so the fewest and lowest are evicted. If the preemptor cannot fit even
//! with every candidate gone, nothing is evicted. A gang's whole unit holds its surplus unit's
//! pods too, so the pods a set of units evicts are their union: whatever set is chosen, a gang
//! keeps its minimum or loses every bound member.
//!
//! A gang held to one domain of a required topology key (and none of whose members is on a node
//! yet) is searched again within each domain whose pods could make room (of the first
//! [`MAX_DOMAINS`] domains its candidates' victims are in, cheapest first; the global choice's own
//! domain is not searched twice unless members beyond a minimum are about, which each domain
//! finds again among its own pods): the one global order would otherwise take its victims from
//! whichever domain comes first, though another needs fewer or lower ones. A domain's units are
//! judged against the budgets among themselves. Of the sets found, the one kube-scheduler's
//! `pickOneNodeForPreemption` would pick wins, a domain standing for its node: fewest budget
//! violations, then the lowest highest-priority victim, then the smallest sum of priorities, then
//! the fewest victims, then the first found (kube-scheduler's next criterion, the latest start
//! time among the highest-priority victims, is not applied).
//!
//! Budgets are counted as kube-scheduler's `filterPodsWithPDBViolation` counts them: a budget
//! selects the pods of its namespace its (non-empty) selector matches; each pod it selects takes
//! one of its `disruptionsAllowed`, unless the budget lists the pod as already disrupted; a pod
//! with none left violates it. Pods already evicted this cycle have taken theirs.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use super::Places;
use super::cache::Topology;
use super::ledger::Txn;
use super::members::Members;
use super::place::{Feasible, Placement};
use crate::read::model::{Budget, Disruption, ObjectKey, Pod, PreemptionPolicy, Snapshot};
use crate::read::tree;

/// How many victim units one preemptor may consider; bounds a cycle's cost on huge clusters.
const MAX_CANDIDATES: usize = 512;

/// How many domains of a gang's required key one preemption searches on its own; bounds the
/// trials to this many times one global search's.
const MAX_DOMAINS: usize = 8;

/// How many of a gang's members beyond its minimum one preemption considers, newest first.
const MAX_SURPLUS: usize = 4096;

/// How much work one preemption spends finding members beyond minimums, over every gang it looks
/// at (a member looked at is one, a subgroup tree's walk its size squared per floor): past it,
/// gangs offer only their whole unit.
const SURPLUS_WORK: usize = 1 << 16;

/// What a preemption found.
pub(super) enum Found {
    /// Evict these pods; the preemptor then goes where `placement` says. `violating`: the
    /// victims whose eviction violates a budget (pod, budget), a last resort. `shrunk`: the
    /// gangs that only lose members beyond their minimum (gang, how many), in gang order.
    Evict {
        victims: Vec<usize>,
        placement: Box<Placement>,
        violating: Vec<(usize, usize)>,
        shrunk: Vec<(usize, usize)>,
    },
    /// Victims of an earlier preemption are still terminating on the nominated nodes.
    Waiting(usize),
    /// Preemption cannot help (or is not allowed).
    Nothing,
}

/// What preemption looks at besides the preemptor: the pods and gangs that could make room, and
/// the pods already evicted this cycle (never chosen twice).
pub(super) struct Room<'r, 'a> {
    pub snap: &'a Snapshot,
    pub members: &'r [Members],
    /// Gang index → its priority.
    pub priorities: &'r [i32],
    /// Where every pod is, and the candidates by priority.
    pub places: &'r Places,
    pub evicted: &'r BTreeSet<usize>,
}

impl Room<'_, '_> {
    /// The node pod `p` names, if the snapshot has it.
    pub fn node_of(&self, p: usize) -> Option<usize> {
        self.places.at[p].0
    }

    /// The gangs, then the pods outside any gang that name a node, of priority below `priority`.
    fn below(&self, priority: i32) -> (&[usize], &[usize]) {
        let gangs = &self.places.gangs;
        let singles = &self.places.singles;
        let g = gangs.partition_point(|&j| self.priorities[j] < priority);
        let s = singles.partition_point(|&p| self.snap.pods[p].priority < priority);
        (&gangs[..g], &singles[..s])
    }
}

/// A unit of victims: a gang's bound members, its newest members beyond its minimum, or one pod
/// outside any gang.
#[derive(Clone, Debug)]
struct Victim<'a> {
    /// Its eviction would violate a budget, given the units before it in the order.
    violates: bool,
    /// Members beyond the gang's minimum only, newest first: the gang keeps running without
    /// them, or without any first `cuts[i]` of them.
    surplus: bool,
    /// The sizes, ascending, a surplus unit may be cut to (its last is all of it; empty for
    /// other units).
    cuts: Vec<usize>,
    /// The gang whose members these are (`None`: a pod outside any gang).
    gang: Option<usize>,
    priority: i32,
    /// When the unit started: its pods' earliest `status.startTime` (`None`: none has started).
    started: Option<crate::read::model::Time>,
    pods: Vec<usize>,
    key: &'a ObjectKey,
}

/// The pods a set of units evicts: their union (a gang's units overlap), in pod order.
fn union(chosen: &[&Victim<'_>]) -> Vec<usize> {
    let mut pods: Vec<usize> = chosen.iter().flat_map(|u| u.pods.iter().copied()).collect();
    pods.sort_unstable();
    pods.dedup();
    pods
}

/// The preemption, if any, that lets gang `g` (its `pending` members) fit: `place` places it on
/// top of a transaction, `give_back` frees a victim's pod in one. `domains`: the domains of the
/// gang's required topology key, when it has one (the gang then fits within one of them).
#[allow(clippy::too_many_arguments)]
pub(super) fn try_preempt(
    room: &Room<'_, '_>,
    g: usize,
    pending: &[usize],
    domains: Option<&Topology>,
    feasible: impl Fn(usize) -> Rc<Feasible>,
    place: impl Fn(&Txn) -> Placement,
    give_back: impl Fn(&mut Txn, usize),
) -> Found {
    let snap = room.snap;
    // The gang's own policy (an upstream PodGroup's) decides for it; else any pod that never
    // preempts keeps the gang from it.
    let never = match snap.gangs[g].preemption_policy {
        Some(policy) => policy == PreemptionPolicy::Never,
        None => pending.iter().any(|&p| snap.pods[p].preemption_policy == PreemptionPolicy::Never),
    };
    if pending.is_empty() || never {
        return Found::Nothing;
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
            return Found::Waiting(terminating);
        }
    }

    // Only lower priorities can be preempted: most attempts (every gang of one priority class)
    // end here, at the cost of two binary searches.
    let (gangs, singles) = room.below(room.priorities[g]);
    if gangs.is_empty() && singles.is_empty() {
        return Found::Nothing;
    }
    // Only units with a pod on a node some member could use can help.
    let mut useful = vec![false; snap.nodes.len()];
    let mut seen: Vec<*const Feasible> = Vec::new();
    for &p in pending {
        let f = feasible(p);
        if seen.contains(&Rc::as_ptr(&f)) {
            continue;
        }
        seen.push(Rc::as_ptr(&f));
        for &n in &f.list {
            useful[n] = true;
        }
    }
    let work = std::cell::Cell::new(SURPLUS_WORK);
    let units = candidates(room, g, &useful, &work);
    if units.is_empty() {
        return Found::Nothing;
    }

    let fits = |chosen: &[&Victim<'_>]| {
        let mut txn = Txn::default();
        for p in union(chosen) {
            give_back(&mut txn, p);
        }
        place(&txn)
    };
    let all: Vec<&Victim<'_>> = units.iter().collect();
    let Some(global) = cheapest(&all, |c| fits(c).satisfied) else {
        return Found::Nothing;
    };
    let refs: Vec<&Victim<'_>> = global.iter().collect();
    let placement = fits(&refs);
    let score = Score::of(snap, room, &refs);
    let mut best: (Score, Vec<Victim<'_>>, Placement) = (score, global, placement);
    // Held to one domain: the global order's choice lies in whichever domain its first victims
    // are in; each other domain that could make room is searched on its own.
    if let Some(topo) = domains {
        // The global choice's own domain holds nothing new, unless members beyond a minimum
        // are found again within it (the global order's may lie in several domains).
        let own = best.2.bindings.first().map(|&(_, n)| topo.node_domain[n]);
        let again = units.iter().any(|u| u.surplus);
        for d in domains_in_order(topo, &units, room, &useful) {
            if Some(d) == own && !again {
                continue;
            }
            // The domain's units, judged against the budgets among themselves (a unit that
            // violates one after units of other domains took its allowance may not here).
            let within_d = |p: usize| room.node_of(p).is_some_and(|n| useful[n] && topo.node_domain[n] == d);
            let mut here: Vec<Victim<'_>> =
                units.iter().filter(|u| !u.surplus && u.pods.iter().any(|&p| within_d(p))).cloned().collect();
            // Members beyond a minimum found again among the domain's own (the newest may be
            // elsewhere, where their eviction would make no room here).
            for j in units.iter().filter(|u| u.surplus).filter_map(|u| u.gang) {
                let mine: Vec<usize> = room.members[j]
                    .all
                    .iter()
                    .copied()
                    .filter(|&p| evictable(room, p) && within_d(p))
                    .collect();
                if !mine.is_empty() {
                    surplus(room, j, mine, &mut here, &work);
                }
            }
            in_order(room, &mut here);
            // When the best set violates no budget, only units that could be in a set ranked
            // above it: none violating, none above its highest priority. (With violations, fewer
            // of them wins whatever the priorities: every unit stays.)
            if best.0.violations == 0 {
                here.retain(|u| !u.violates && u.priority <= best.0.highest);
            }
            let within: Vec<&Victim<'_>> = here.iter().collect();
            if let Some(c) = cheapest(&within, |c| fits(c).satisfied) {
                let refs: Vec<&Victim<'_>> = c.iter().collect();
                let score = Score::of(snap, room, &refs);
                if score < best.0 {
                    let placement = fits(&refs);
                    best = (score, c, placement);
                }
            }
        }
    }
    let (_, chosen, placement) = best;
    let chosen: Vec<&Victim<'_>> = chosen.iter().collect();
    let victims = union(&chosen);
    let mut allowance = Allowance::new(snap, room.evicted.iter().copied());
    let violating = victims.iter().filter_map(|&p| Some((p, allowance.take(&snap.pods[p])?))).collect();
    // A gang whose whole unit is not chosen loses only members beyond its minimum: those its
    // surplus unit holds, cut.
    let mut shrunk: Vec<(usize, usize)> = chosen
        .iter()
        .filter(|u| u.surplus && !chosen.iter().any(|w| !w.surplus && w.gang == u.gang))
        .filter_map(|u| Some((u.gang?, u.pods.len())))
        .collect();
    shrunk.sort_unstable();
    Found::Evict { victims, placement: Box::new(placement), violating, shrunk }
}

/// The cheapest prefix of `units` with which the preemptor `fits` (more victims, more room):
/// gallop 1, 2, 4, … to the first prefix that fits, then binary search below it; then its units
/// of members beyond a minimum are [`cut`], and every unit it can do without is dropped again,
/// highest priority (last added) first. Victims are usually few, so the trials — whose cost grows
/// with the victims freed — stay small: O(log victims) of them, O(log cuts) per cut unit, and one
/// per unit kept. `None`: it does not fit even with all of them gone.
fn cheapest<'a>(units: &[&Victim<'a>], fits: impl Fn(&[&Victim<'a>]) -> bool) -> Option<Vec<Victim<'a>>> {
    if units.is_empty() {
        return None;
    }
    let (mut lo, mut hi) = (1, 1);
    loop {
        if fits(&units[..hi]) {
            break;
        }
        if hi == units.len() {
            return None;
        }
        lo = hi + 1;
        hi = hi.saturating_mul(2).min(units.len());
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(&units[..mid]) { hi = mid } else { lo = mid + 1 }
    }
    // Members beyond a minimum cut first, so a unit they then make needless is dropped.
    let mut chosen = cut(units[..lo].to_vec(), &fits);
    let mut whole_dropped = false;
    let mut i = chosen.len();
    while i > 0 {
        i -= 1;
        let without: Vec<&Victim<'_>> =
            chosen.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, u)| u).collect();
        if fits(&without) {
            whole_dropped |= !chosen[i].surplus && chosen[i].gang.is_some();
            chosen.remove(i);
        }
    }
    // A gang's surplus unit was not cut while its whole unit was chosen: cut it now.
    if whole_dropped {
        chosen = cut(chosen.iter().collect(), &fits);
    }
    Some(chosen)
}

/// `chosen`, owned, with each unit of members beyond a minimum cut to the fewest of its newest
/// members (a size in its `cuts`) with which the preemptor still `fits`, the last chosen first:
/// O(log cuts) trials per such unit.
fn cut<'a>(chosen: Vec<&Victim<'a>>, fits: &impl Fn(&[&Victim<'a>]) -> bool) -> Vec<Victim<'a>> {
    let mut chosen: Vec<Victim<'a>> = chosen.into_iter().cloned().collect();
    for i in (0..chosen.len()).rev() {
        let gang = chosen[i].gang;
        if !chosen[i].surplus
            || chosen[i].cuts.len() < 2
            || chosen.iter().any(|w| !w.surplus && w.gang == gang)
        {
            continue;
        }
        let all = std::mem::take(&mut chosen[i].pods);
        let cuts = std::mem::take(&mut chosen[i].cuts);
        // The last cut (all of it) fits: the smallest that does, by bisection.
        let (mut lo, mut hi) = (0, cuts.len() - 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            chosen[i].pods = all[..cuts[mid]].to_vec();
            let refs: Vec<&Victim<'a>> = chosen.iter().collect();
            if fits(&refs) { hi = mid } else { lo = mid + 1 }
        }
        chosen[i].pods = all[..cuts[hi]].to_vec();
        chosen[i].cuts = cuts[..=hi].to_vec();
    }
    chosen
}

/// The domains of `topo` whose pods could make room, in the order their first victim comes in
/// `units` (the cheapest first), at most [`MAX_DOMAINS`].
fn domains_in_order(topo: &Topology, units: &[Victim<'_>], room: &Room<'_, '_>, useful: &[bool]) -> Vec<u32> {
    let mut order: Vec<u32> = Vec::new();
    for u in units {
        for &p in &u.pods {
            let Some(n) = room.node_of(p).filter(|&n| useful[n]) else { continue };
            let d = topo.node_domain[n];
            if d != u32::MAX && !order.contains(&d) {
                order.push(d);
                if order.len() == MAX_DOMAINS {
                    return order;
                }
            }
        }
    }
    order
}

/// How a set of victims ranks against another, lowest best: kube-scheduler's
/// `pickOneNodeForPreemption` criteria, in its order.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Score {
    violations: usize,
    highest: i32,
    sum: i64,
    victims: usize,
}

impl Score {
    fn of(snap: &Snapshot, room: &Room<'_, '_>, chosen: &[&Victim<'_>]) -> Score {
        let mut allowance = Allowance::new(snap, room.evicted.iter().copied());
        let victims = union(chosen);
        let pods = || victims.iter().map(|&p| &snap.pods[p]);
        Score {
            violations: pods().filter(|pod| allowance.take(pod).is_some()).count(),
            highest: pods().map(|pod| pod.priority).max().unwrap_or(i32::MIN),
            // Offset as kube-scheduler offsets it, so a negative priority still adds a victim's
            // worth and fewer victims weigh less.
            sum: pods().map(|pod| i64::from(pod.priority) + i64::from(i32::MAX) + 1).sum(),
            victims: pods().count(),
        }
    }
}

/// `; 1 of them violates PodDisruptionBudget ml/web` for the outcome's message, or nothing.
pub(super) fn violations_note(snap: &Snapshot, violating: &[(usize, usize)]) -> String {
    if violating.is_empty() {
        return String::new();
    }
    let budgets: BTreeSet<String> = violating.iter().map(|&(_, b)| snap.budgets[b].key.to_string()).collect();
    let list: Vec<String> = budgets.into_iter().collect();
    format!(
        "; {} of them violate{} PodDisruptionBudget {} (no set within the budgets makes room)",
        violating.len(),
        if violating.len() == 1 { "s" } else { "" },
        list.join(", ")
    )
}

/// What is left of each PodDisruptionBudget's `disruptionsAllowed` as victims are taken.
pub(super) struct Allowance<'s> {
    budgets: &'s [Budget],
    left: Vec<i64>,
}

impl<'s> Allowance<'s> {
    /// The snapshot's budgets, after the pods `gone` (evicted earlier this cycle) took theirs.
    pub fn new(snap: &'s Snapshot, gone: impl IntoIterator<Item = usize>) -> Self {
        let budgets = snap.budgets.as_slice();
        let mut a =
            Allowance { budgets, left: budgets.iter().map(|b| i64::from(b.disruptions_allowed)).collect() };
        if !budgets.is_empty() {
            for p in gone {
                a.take(&snap.pods[p]);
            }
        }
        a
    }

    /// The budgets that count `pod`'s eviction.
    fn counting<'p>(&'p self, pod: &'p Pod) -> impl Iterator<Item = usize> + 'p {
        self.budgets
            .iter()
            .enumerate()
            .filter(|(_, b)| b.selects(pod) && !b.disrupted_pods.contains(pod.key.name.as_str()))
            .map(|(i, _)| i)
    }

    /// Takes `pod`'s disruption from every budget that counts it; the first of them left below
    /// zero is the one it violates (kube-scheduler's `filterPodsWithPDBViolation`, one pod at a
    /// time: every matching budget is decremented, violated or not).
    pub fn take(&mut self, pod: &Pod) -> Option<usize> {
        if self.budgets.is_empty() {
            return None;
        }
        let counting: Vec<usize> = self.counting(pod).collect();
        let mut violated = None;
        for b in counting {
            self.left[b] -= 1;
            if self.left[b] < 0 {
                violated.get_or_insert(b);
            }
        }
        violated
    }

    /// Whether all of `pods` can go without violating any budget; if so, takes their
    /// disruptions (a unit that cannot takes nothing, so the units after it are judged on what
    /// the budgets really have left).
    fn take_all(&mut self, pods: impl Iterator<Item = &'s Pod>) -> bool {
        if self.budgets.is_empty() {
            return true;
        }
        let mut need = vec![0i64; self.budgets.len()];
        for pod in pods {
            for b in self.counting(pod).collect::<Vec<_>>() {
                need[b] += 1;
            }
        }
        if need.iter().zip(&self.left).any(|(n, l)| n > l) {
            return false;
        }
        for (l, n) in self.left.iter_mut().zip(need) {
            *l -= n;
        }
        true
    }
}

/// Whether pod `p` may be a victim: on a node of the snapshot, not finished, not going already.
fn evictable(room: &Room<'_, '_>, p: usize) -> bool {
    let pod = &room.snap.pods[p];
    pod.uses_node() && !pod.deleting && !room.evicted.contains(&p) && room.node_of(p).is_some()
}

/// The victim choice: every unit strictly below gang `g`'s priority with a pod on a `useful`
/// node, in the order they are taken ([`in_order`]), at most [`MAX_CANDIDATES`] of them. Whether a
/// unit violates is judged in that order with what the units before it left of the budgets, so
/// every prefix of the non-violating units violates nothing together. Finding members beyond a
/// minimum draws on `work` ([`surplus`]).
fn candidates<'a>(
    room: &Room<'_, 'a>,
    g: usize,
    useful: &[bool],
    work: &std::cell::Cell<usize>,
) -> Vec<Victim<'a>> {
    let snap = room.snap;
    let priority = room.priorities[g];
    let evictable = |p: usize| evictable(room, p);
    let helps = |p: usize| room.node_of(p).is_some_and(|n| useful[n]);
    let mut units: Vec<Victim<'a>> = Vec::new();
    let (gangs, singles) = room.below(priority);
    for &j in gangs {
        // A gang that runs to completion once placed is no one's victim.
        if j == g || snap.gangs[j].disruption.at(room.priorities[j]) == Disruption::Never {
            continue;
        }
        let pods: Vec<usize> = room.members[j].all.iter().copied().filter(|&p| evictable(p)).collect();
        if pods.iter().any(|&p| helps(p)) {
            if may_shrink(room, j) {
                let helpful: Vec<usize> = pods.iter().copied().filter(|&p| helps(p)).collect();
                surplus(room, j, helpful, &mut units, work);
            }
            // A gang whose minimum is never disrupted offers only its members beyond it.
            if snap.gangs[j].disruption.at(room.priorities[j]) == Disruption::Surplus {
                continue;
            }
            units.push(Victim {
                violates: false,
                surplus: false,
                cuts: Vec::new(),
                gang: Some(j),
                priority: room.priorities[j],
                started: first_started(snap, &pods),
                pods,
                key: &snap.gangs[j].key,
            });
        }
    }
    for &i in singles {
        if evictable(i) && helps(i) {
            let pod = &snap.pods[i];
            units.push(Victim {
                violates: false,
                surplus: false,
                cuts: Vec::new(),
                gang: None,
                priority: pod.priority,
                started: pod.started,
                pods: vec![i],
                key: &pod.key,
            });
        }
    }
    in_order(room, &mut units);
    units.truncate(MAX_CANDIDATES);
    units
}

/// The earliest `status.startTime` of `pods` (`None`: none has started).
fn first_started(snap: &Snapshot, pods: &[usize]) -> Option<crate::read::model::Time> {
    pods.iter().filter_map(|&p| snap.pods[p].started).min()
}

/// Puts `units` in the order they are taken: lowest priority first; at one priority, members
/// beyond a minimum, then pods outside any gang, then gangs; then fewest pods, most recently
/// started (not started yet first), key. Each is judged against the budgets with what the units
/// before it left of them, those that violate none first (stable: each part keeps the order).
fn in_order(room: &Room<'_, '_>, units: &mut [Victim<'_>]) {
    let snap = room.snap;
    let rank = |u: &Victim<'_>| {
        (
            u.priority,
            !u.surplus,
            u.gang.is_some(),
            u.pods.len(),
            u.started.is_some(),
            std::cmp::Reverse(u.started),
        )
    };
    units.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.key.cmp(b.key)));
    if !snap.budgets.is_empty() {
        let mut allowance = Allowance::new(snap, room.evicted.iter().copied());
        // A gang's units overlap (its whole unit holds its surplus unit's pods): each is judged
        // on the pods the units of its gang taken before it do not already hold (so a budget
        // counts a pod once).
        let mut taken: std::collections::HashMap<usize, BTreeSet<usize>> = std::collections::HashMap::new();
        for u in units.iter_mut() {
            let before = u.gang.and_then(|j| taken.get(&j));
            let new: Vec<usize> =
                u.pods.iter().copied().filter(|p| !before.is_some_and(|t| t.contains(p))).collect();
            u.violates = !allowance.take_all(new.iter().map(|&p| &snap.pods[p]));
            if let (false, Some(j)) = (u.violates, u.gang) {
                taken.entry(j).or_default().extend(new);
            }
        }
        units.sort_by_key(|u| u.violates);
    }
}

/// Whether gang `j` may have members beyond its minimum at all (before this cycle's evictions
/// are counted): not disrupted only whole, and more members held than its minimum. Most gangs
/// have none: this keeps [`surplus`]'s work from them.
fn may_shrink(room: &Room<'_, '_>, j: usize) -> bool {
    let gang = &room.snap.gangs[j];
    gang.disruption.at(room.priorities[j]).takes_members()
        && tree::pods_in(&room.members[j].held) > gang.min_pods().unwrap_or(u64::from(gang.min_member))
}

/// Gang `j`'s members beyond its minimum as one victim unit, pushed onto `units`: of `helpful`
/// (its members that can go and are on nodes the preemptor could use), newest first (not started
/// yet, then the latest `status.startTime`, then the last by name), each one whose loss leaves
/// its leaf subgroup its own minimum, every subgroup with a pod floor its floor, and the gang its
/// minimum in pods (counting what this cycle already evicted as gone) — at most [`MAX_SURPLUS`].
/// So no subgroup's state changes (satisfied stays satisfied; none is emptied: a subgroup the
/// gang could do without still goes only with the whole gang), and any first k of them may go as
/// well (the unit's `cuts`); with `kube-gang.io/elastic-step`, only counts that leave the gang at
/// a size its step allows (or at its minimum). A gang not satisfied now, or disrupted only whole
/// ([`Disruption::Whole`]), has none: only its whole unit can go; nor has
/// one whose cost (the members looked at, and a subgroup tree's size squared per pod floor) the
/// preemption's `work` left cannot pay ([`SURPLUS_WORK`]).
fn surplus<'a>(
    room: &Room<'_, 'a>,
    j: usize,
    mut helpful: Vec<usize>,
    units: &mut Vec<Victim<'a>>,
    work: &std::cell::Cell<usize>,
) {
    let snap = room.snap;
    let gang = &snap.gangs[j];
    if !gang.disruption.at(room.priorities[j]).takes_members() {
        return;
    }
    // What it costs, drawn from the preemption's work before it is done.
    let size = gang.subgroups.len();
    let floored = gang.subgroups.iter().filter(|s| s.pod_floor > 0).count();
    let cost = helpful.len().saturating_add(size.saturating_mul(size).saturating_mul(1 + floored));
    if cost > work.get() {
        return;
    }
    work.set(work.get() - cost);
    let members = &room.members[j];
    let min = gang.min_pods().unwrap_or(u64::from(gang.min_member));
    let leaf = |p: usize| tree::leaf_of(gang, snap.pods[p].gang.as_ref().and_then(|m| m.subgroup.as_deref()));
    let newest_first = |helpful: &mut Vec<usize>| {
        helpful.sort_by(|&a, &b| {
            let (pa, pb) = (&snap.pods[a], &snap.pods[b]);
            (pa.started.is_some(), std::cmp::Reverse(pa.started))
                .cmp(&(pb.started.is_some(), std::cmp::Reverse(pb.started)))
                .then_with(|| pb.key.cmp(&pa.key))
        });
    };
    // What this cycle already evicted of it is gone.
    let gone = |p: &usize| {
        let pod = &snap.pods[*p];
        room.evicted.contains(p) && pod.uses_node() && !pod.deleting
    };
    if gang.subgroups.is_empty() {
        // One leaf: the members beyond the minimum in pods, newest first.
        let held = u64::from(members.held.get("").copied().unwrap_or(0));
        let total = held.saturating_sub(members.all.iter().filter(|p| gone(p)).count() as u64);
        if total <= min {
            return;
        }
        newest_first(&mut helpful);
        helpful.truncate(usize::try_from(total - min).unwrap_or(usize::MAX).min(MAX_SURPLUS));
        push_surplus(room, j, total, min, helpful, units);
        return;
    }
    let mut held = members.held.clone();
    for &p in members.all.iter().filter(|p| gone(p)) {
        if let Some(n) = leaf(p).and_then(|l| held.get_mut(l)) {
            *n = n.saturating_sub(1);
        }
    }
    let total = tree::pods_in(&held);
    if total <= min || !tree::satisfied(gang, &held) {
        return;
    }
    let leaf_min = tree::leaf_minimums(gang);
    // Subgroups with a pod floor: (floor, the pods of the leaves under it); and for each leaf,
    // the floors above it.
    let mut floors: Vec<(u64, u64)> = Vec::new();
    let mut above: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for s in gang.subgroups.iter().filter(|s| s.pod_floor > 0) {
        let leaves = tree::leaves_under(gang, &s.name);
        let pods = leaves.iter().map(|l| u64::from(held.get(l).copied().unwrap_or(0))).sum();
        for l in leaves {
            above.entry(l).or_default().push(floors.len());
        }
        floors.push((u64::from(s.pod_floor), pods));
    }
    newest_first(&mut helpful);
    let mut order: Vec<usize> = Vec::new();
    let mut left = total;
    for p in helpful {
        if order.len() == MAX_SURPLUS || left <= min {
            break;
        }
        let Some(l) = leaf(p) else { continue };
        let need = leaf_min.get(l).copied().unwrap_or(u32::MAX);
        let Some(n) = held.get_mut(l).filter(|n| **n > need) else { continue };
        let mine = above.get(l).map_or(&[][..], Vec::as_slice);
        if mine.iter().any(|&f| floors[f].1 <= floors[f].0) {
            continue;
        }
        *n -= 1;
        left -= 1;
        for &f in mine {
            floors[f].1 -= 1;
        }
        order.push(p);
    }
    push_surplus(room, j, total, min, order, units);
}

/// Pushes gang `j`'s unit of members beyond its minimum — `order`, newest first, any first k of
/// which may go — with the sizes it may be cut to: those that leave the gang (of `total` members
/// held, minimum `min`) at a count its elastic step allows, or at its minimum.
fn push_surplus<'a>(
    room: &Room<'_, 'a>,
    j: usize,
    total: u64,
    min: u64,
    mut order: Vec<usize>,
    units: &mut Vec<Victim<'a>>,
) {
    let gang = &room.snap.gangs[j];
    let allowed = |k: usize| {
        let left = total.saturating_sub(u64::try_from(k).unwrap_or(u64::MAX));
        gang.elastic_step.is_none_or(|s| s.allows(left) || left == min)
    };
    let cuts: Vec<usize> = (1..=order.len()).filter(|&k| allowed(k)).collect();
    let Some(&most) = cuts.last() else { return };
    order.truncate(most);
    units.push(Victim {
        violates: false,
        surplus: true,
        cuts,
        gang: Some(j),
        priority: room.priorities[j],
        started: first_started(room.snap, &order),
        pods: order,
        key: &gang.key,
    });
}
