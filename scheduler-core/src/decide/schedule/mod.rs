//! The scheduling cycle: `schedule(snapshot, config, now) -> plan`. Pure and deterministic.
//!
//! One cycle, in order:
//! 1. **Index** the snapshot: free capacity per node (every pod that uses a node counts, whoever
//!    bound it), `NonStrict` reservations carried over, members per gang.
//! 2. **Order** the work: gangs (and pods of ours outside any gang, as gangs of one) by priority,
//!    then gangs already partly running, then creation time, then key — a total order.
//! 3. **Decide each gang in one step** ([`Cycle::gang_group`]): invalid, completed, failed,
//!    degraded/stale, waiting for members, backing off — or attempt a placement of the whole gang
//!    (its gang group included) on a tentative [`state::Txn`], committed only if the tree is
//!    satisfied. A failed attempt may preempt ([`preempt`]), reserve (`NonStrict`), or time out.
//! 4. **Explain**: every gang gets an [`Outcome`] with a reason and a message naming nodes and domains.

mod explain;
mod place;
mod preempt;
pub(crate) mod state;

use crate::config::TimeoutAction;
use crate::model::{Gang, GangKey, GangMode, GangState, PodPhase, Reservation, Usage};
use crate::plan::{Binding, Counts, Eviction, EvictionReason, Outcome, Phase};
use crate::tree::{self, LeafCounts};
use crate::{Config, Plan, Reason, Snapshot, Time};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use place::Placement;
use state::{Demand, ResourceIndex, State, Txn};

/// A deadline as messages state it: an absolute time, to the second (rounded up). Unlike "in 37s",
/// it reads the same in every cycle, so what is written to the API from it does not change
/// until the situation does.
fn at(t: Time) -> Time {
    Time(t.0.saturating_add(999).div_euclid(1000).saturating_mul(1000))
}

/// One scheduling cycle. Pure and deterministic: the same snapshot, config and `now` always give
/// the same plan.
pub fn schedule(snapshot: &Snapshot, config: &Config, now: Time) -> Plan {
    Cycle::new(snapshot, config, now, true).run()
}

/// The same cycle without its shortcuts: every member's nodes scanned afresh (no per-class node
/// order) and every topology domain placed (no bound-based pruning). Slow; it exists so tests can
/// hold [`schedule`] to it — the shortcuts must never change a plan.
#[doc(hidden)]
pub fn schedule_reference(snapshot: &Snapshot, config: &Config, now: Time) -> Plan {
    Cycle::new(snapshot, config, now, false).run()
}

/// A unit of work in the cycle's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Gang(usize),
    /// A pod of ours that belongs to no gang: a gang of one.
    Single(usize),
}

/// A gang's members as the cycle found them.
#[derive(Clone, Debug, Default)]
struct Members {
    /// Every pod that claims the gang, in pod-key order.
    all: Vec<usize>,
    /// Pods with a node that are not finished, per leaf.
    bound: LeafCounts,
    /// Running or succeeded, per leaf (what "the minimum is running" counts).
    running: LeafCounts,
    /// Active (pending, bound, running) or succeeded, per leaf: what exists toward the quorum.
    exist: LeafCounts,
    /// Bound or succeeded, per leaf: what already counts toward satisfaction.
    held: LeafCounts,
    /// Pending pods we may place, by leaf.
    pending: BTreeMap<String, Vec<usize>>,
    /// Pending members held back by `spec.schedulingGates`, per leaf: they exist (toward the
    /// quorum) but are never placed.
    gated: LeafCounts,
    /// Gate name → how many pending members it holds back.
    gates: BTreeMap<String, u32>,
    /// Pending members that name another scheduler.
    foreign: usize,
    /// Members whose subgroup is missing or not a leaf of the gang.
    orphans: usize,
    counts: Counts,
}

struct Cycle<'a> {
    snap: &'a Snapshot,
    config: &'a Config,
    now: Time,
    res: ResourceIndex,
    state: State,
    demand: Vec<Demand>,
    /// Node name → node index.
    node_index: HashMap<&'a str, usize>,
    /// Gang index → its priority (see [`Cycle::gang_priority`]).
    priorities: Vec<i32>,
    gang_index: HashMap<&'a GangKey, usize>,
    members: Vec<Members>,
    /// Pod index → reserved node, for NonStrict reservations in effect.
    reserved: HashMap<usize, usize>,
    /// Pods evicted earlier in this cycle (not victims twice).
    evicted: BTreeSet<usize>,
    place: place::Placer<'a>,
    /// Explanations per pod shape, valid for one state version (see `explain::census`).
    census: std::cell::RefCell<HashMap<(usize, Demand), (u64, String)>>,
    plan: Plan,
}

/// What a gang needs from this cycle's placement step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    /// Not yet satisfied: all or nothing.
    Whole,
    /// Satisfied, or degraded and trying to recover: place whatever fits.
    Extras,
}

/// `2 of 8 members gated by kueue.x-k8s.io/admission` when the gang cannot be satisfied without
/// members that `spec.schedulingGates` hold back: it waits, as it waits for members that do not
/// exist yet, and its timeout does not run. A gang with members already on nodes is not held
/// here: it goes on to placement, where a half-bound gang is completed or released.
fn gated_wait(gang: &Gang, m: &Members) -> Option<String> {
    if m.gated.is_empty() || m.held.values().any(|&n| n > 0) {
        return None;
    }
    let mut placeable = m.exist.clone();
    for (leaf, n) in &m.gated {
        if let Some(c) = placeable.get_mut(leaf) {
            *c = c.saturating_sub(*n);
        }
    }
    if tree::satisfied(gang, &placeable) {
        return None;
    }
    let gated: u32 = m.gated.values().sum();
    let need = gang.min_pods().unwrap_or(u64::from(gang.min_member));
    let by = if m.gates.len() == 1 {
        m.gates.keys().map(String::as_str).collect::<String>()
    } else {
        m.gates.iter().map(|(gate, n)| format!("{gate} ({n})")).collect::<Vec<_>>().join(", ")
    };
    Some(format!("{gated} of {need} members gated by {by}"))
}

impl<'a> Cycle<'a> {
    fn new(snap: &'a Snapshot, config: &'a Config, now: Time, fast: bool) -> Self {
        let mut res = ResourceIndex::default();
        let mut state = State::new(&snap.nodes, &mut res);
        let node_index: HashMap<&str, usize> =
            snap.nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
        let gang_index: HashMap<&GangKey, usize> =
            snap.gangs.iter().enumerate().map(|(i, g)| (&g.key, i)).collect();

        // Demands of the pods the cycle may place (only pending pods are placed or reserved).
        let demand: Vec<Demand> = snap
            .pods
            .iter()
            .map(|p| if p.is_pending() { res.demand(&p.requests) } else { Demand::default() })
            .collect();

        // What the pods on each node use: carried in the snapshot, so a cycle costs what is
        // pending, not what is bound. The reference cycle adds up every pod, one by one, as the
        // cycle once did: the property tests hold the two equal.
        if fast {
            let added;
            let usage = match &snap.usage {
                Some(u) => {
                    debug_assert!(*u == Usage::of(&snap.pods), "the snapshot's usage is out of date");
                    u
                }
                None => {
                    added = Usage::of(&snap.pods);
                    &added
                }
            };
            for (name, used) in usage.iter() {
                if let Some(&n) = node_index.get(name) {
                    state.take_usage(n, used, &res);
                }
            }
        } else {
            for p in snap.pods.iter().filter(|p| p.uses_node()) {
                if let Some(&n) = p.node_name.as_deref().and_then(|name| node_index.get(name)) {
                    let d = res.demand(&p.requests);
                    state.apply(n, &d, 1);
                }
            }
        }

        let mut members = vec![Members::default(); snap.gangs.len()];
        // Members in pod-key order; only pods that claim a gang are sorted (most pods of a big
        // cluster belong to none), and not at all when the snapshot already lists them in order.
        let mut claimed: Vec<(usize, usize)> = snap
            .pods
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.gang.as_ref().and_then(|m| gang_index.get(&m.gang)).map(|&g| (i, g)))
            .collect();
        if !claimed.is_sorted_by(|a, b| snap.pods[a.0].key <= snap.pods[b.0].key) {
            claimed.sort_by(|a, b| snap.pods[a.0].key.cmp(&snap.pods[b.0].key));
        }
        for (i, g) in claimed {
            let p = &snap.pods[i];
            let gang = &snap.gangs[g];
            let entry = &mut members[g];
            entry.all.push(i);
            match p.phase {
                PodPhase::Succeeded => entry.counts.succeeded += 1,
                PodPhase::Failed => entry.counts.failed += 1,
                _ if !p.deleting => entry.counts.members += 1,
                _ => {}
            }
            if p.uses_node() && !p.deleting {
                entry.counts.bound += 1;
            }
            if p.phase == PodPhase::Running && !p.deleting {
                entry.counts.running += 1;
            }
            let Some(leaf) = tree::leaf_of(gang, p.gang.as_ref().and_then(|m| m.subgroup.as_deref())) else {
                if p.is_active() {
                    entry.orphans += 1;
                }
                continue;
            };
            let bump = |c: &mut LeafCounts| *c.entry(leaf.to_string()).or_default() += 1;
            let succeeded = p.phase == PodPhase::Succeeded;
            if p.is_active() || succeeded {
                bump(&mut entry.exist);
            }
            if (p.uses_node() && !p.deleting) || succeeded {
                bump(&mut entry.held);
            }
            if p.uses_node() && !p.deleting {
                bump(&mut entry.bound);
            }
            if (p.phase == PodPhase::Running && !p.deleting) || succeeded {
                bump(&mut entry.running);
            }
            if p.is_pending() && p.is_gated() {
                bump(&mut entry.gated);
                for gate in p.scheduling_gates.iter().collect::<BTreeSet<_>>() {
                    *entry.gates.entry(gate.clone()).or_default() += 1;
                }
            } else if p.is_pending() {
                if p.scheduler_name == config.scheduler_name {
                    entry.pending.entry(leaf.to_string()).or_default().push(i);
                } else {
                    entry.foreign += 1;
                }
            }
        }

        // NonStrict reservations hold capacity for pods still pending, until their gang decides.
        let pod_index: HashMap<&crate::model::PodKey, usize> = if snap.reservations.is_empty() {
            HashMap::new()
        } else {
            snap.pods.iter().enumerate().map(|(i, p)| (&p.key, i)).collect()
        };
        let mut reserved = HashMap::new();
        for r in &snap.reservations {
            let (Some(&p), Some(&n), Some(&g)) =
                (pod_index.get(&r.pod), node_index.get(r.node.as_str()), gang_index.get(&r.gang))
            else {
                continue;
            };
            let pod = &snap.pods[p];
            let holds = pod.is_pending()
                && snap.gangs[g].mode == GangMode::NonStrict
                && pod.gang.as_ref().is_some_and(|m| m.gang == r.gang);
            if holds && reserved.insert(p, n).is_none() {
                state.apply(n, &demand[p], 1);
            }
        }

        let priorities: Vec<i32> = snap
            .gangs
            .iter()
            .zip(&members)
            .map(|(gang, m)| {
                gang.priority.or_else(|| m.all.iter().map(|&p| snap.pods[p].priority).max()).unwrap_or(0)
            })
            .collect();
        let place = place::Placer::new(snap, config, fast);
        Cycle {
            snap,
            config,
            now,
            res,
            state,
            demand,
            node_index,
            priorities,
            gang_index,
            members,
            reserved,
            evicted: BTreeSet::new(),
            place,
            census: std::cell::RefCell::new(HashMap::new()),
            plan: Plan::default(),
        }
    }

    /// A gang's priority: its own, else its highest member's.
    fn gang_priority(&self, g: usize) -> i32 {
        self.priorities[g]
    }

    fn run(mut self) -> Plan {
        let mut units: Vec<(Reverse<i32>, bool, Time, &GangKey, Unit)> = Vec::new();
        for (g, gang) in self.snap.gangs.iter().enumerate() {
            let partly = self.members[g].counts.bound > 0;
            units.push((Reverse(self.gang_priority(g)), !partly, gang.created, &gang.key, Unit::Gang(g)));
        }
        for (i, p) in self.snap.pods.iter().enumerate() {
            let ungrouped = p.gang.as_ref().is_none_or(|m| !self.gang_index.contains_key(&m.gang));
            if ungrouped
                && p.gang.is_none()
                && p.is_pending()
                && !p.is_gated()
                && p.scheduler_name == self.config.scheduler_name
            {
                units.push((Reverse(p.priority), true, p.created, &p.key, Unit::Single(i)));
            }
        }
        units.sort_by(|a, b| (a.0, a.1, a.2, a.3).cmp(&(b.0, b.1, b.2, b.3)));

        let groups = self.gang_groups();
        let mut done = vec![false; self.snap.gangs.len()];
        for (.., unit) in units {
            match unit {
                Unit::Single(p) => self.single(p),
                Unit::Gang(g) if !done[g] => {
                    let group = &groups[g];
                    for &m in group {
                        done[m] = true;
                    }
                    self.gang_group(group);
                }
                Unit::Gang(_) => {}
            }
        }
        self.finish()
    }

    /// For each gang, the gangs that must be satisfied in the same cycle (itself included), in
    /// the cycle's order. Links are symmetric: naming a gang in `gangGroup` binds both.
    fn gang_groups(&self) -> Vec<Vec<usize>> {
        let n = self.snap.gangs.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        for (g, gang) in self.snap.gangs.iter().enumerate() {
            for other in &gang.gang_group {
                if let Some(&o) = self.gang_index.get(other) {
                    let (a, b) = (find(&mut parent, g), find(&mut parent, o));
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
        let mut by_root: HashMap<usize, Vec<usize>> = HashMap::new();
        for g in 0..n {
            let r = find(&mut parent, g);
            by_root.entry(r).or_default().push(g);
        }
        let mut out = vec![Vec::new(); n];
        for (_, mut group) in by_root {
            group.sort_by(|&a, &b| {
                (Reverse(self.gang_priority(a)), self.snap.gangs[a].created, &self.snap.gangs[a].key).cmp(&(
                    Reverse(self.gang_priority(b)),
                    self.snap.gangs[b].created,
                    &self.snap.gangs[b].key,
                ))
            });
            for &g in &group {
                out[g] = group.clone();
            }
        }
        out
    }

    fn single(&mut self, p: usize) {
        let mut txn = Txn::default();
        if let Some(node) =
            self.place.best_node(&self.state, &txn, &self.demand, p, None, self.reserved.get(&p))
        {
            self.state.take(&mut txn, node, &self.demand[p]);
            self.state.commit(txn);
            self.bind(p, node);
        }
    }

    fn bind(&mut self, p: usize, node: usize) {
        let pod = &self.snap.pods[p];
        self.plan.bindings.push(Binding {
            pod: pod.key.clone(),
            uid: pod.uid.clone(),
            node: self.snap.nodes[node].name.clone(),
        });
    }

    fn evict(&mut self, p: usize, reason: EvictionReason, preemptor: Option<&GangKey>) {
        let pod = &self.snap.pods[p];
        if pod.deleting || !self.evicted.insert(p) {
            return;
        }
        let Some(node) = pod.node_name.clone() else { return };
        self.plan.evictions.push(Eviction {
            pod: pod.key.clone(),
            uid: pod.uid.clone(),
            node,
            reason,
            gang: pod.gang.as_ref().map(|m| m.gang.clone()),
            preemptor: preemptor.cloned(),
        });
    }

    fn outcome(
        &mut self,
        g: usize,
        reason: Reason,
        phase: Phase,
        message: String,
        state: GangState,
        extra_bound: u32,
    ) {
        let mut counts = self.members[g].counts;
        counts.bound += extra_bound;
        counts.binding = extra_bound;
        tracing::debug!(gang = %self.snap.gangs[g].key, reason = %reason, "gang decided");
        self.plan.outcomes.push(Outcome {
            gang: self.snap.gangs[g].key.clone(),
            reason,
            phase,
            message,
            counts,
            state,
        });
    }

    /// `; 1 member(s) refused by the kubelet at admission (ml/w-3 on gpu-2: OutOfnvidia.com/gpu)`
    /// when members failed on their node: the gang is not running, whatever was bound.
    fn failures_note(&self, g: usize) -> String {
        let failed: Vec<&crate::model::Pod> = self.members[g]
            .all
            .iter()
            .map(|&p| &self.snap.pods[p])
            .filter(|p| p.phase == PodPhase::Failed && p.failure.is_some())
            .collect();
        let Some(first) = failed.first() else { return String::new() };
        let what = if failed.iter().all(|p| p.rejected_at_admission()) {
            "refused by the kubelet at admission"
        } else {
            "failed on their node"
        };
        format!(
            "; {} member(s) {what} ({} on {}: {}{})",
            failed.len(),
            first.key,
            first.node_name.as_deref().unwrap_or("?"),
            first.failure.as_deref().unwrap_or(""),
            if failed.len() > 1 { ", …" } else { "" }
        )
    }

    /// The phase of a gang that is placed: `Running` once its minimum runs.
    fn placed_phase(&self, g: usize) -> Phase {
        if tree::satisfied(&self.snap.gangs[g], &self.members[g].running) {
            Phase::Running
        } else {
            Phase::Scheduled
        }
    }

    /// Decides what a gang needs before placement. `Err` carries a final outcome.
    fn precheck(&mut self, g: usize) -> Result<Attempt, ()> {
        let gang: &Gang = &self.snap.gangs[g];
        let m = &self.members[g];
        let mut st = gang.state.clone();
        let tree_errors = crate::validate::gang_tree_errors(gang);
        if !tree_errors.is_empty() {
            let msg = tree_errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            self.outcome(g, Reason::InvalidSpec, Phase::Pending, msg, st, 0);
            return Err(());
        }
        if st.failed {
            let bound: Vec<usize> =
                m.all.iter().copied().filter(|&p| self.snap.pods[p].uses_node()).collect();
            for p in bound {
                self.evict(p, EvictionReason::TimedOut, None);
            }
            let msg = "gave up after timing out; delete and recreate the gang to try again".to_string();
            self.outcome(g, Reason::Failed, Phase::Failed, msg, st, 0);
            return Err(());
        }
        if m.counts.members == 0 && m.counts.succeeded > 0 {
            let msg = format!("all {} members finished", m.counts.succeeded);
            self.outcome(g, Reason::Completed, Phase::Completed, msg, st, 0);
            return Err(());
        }
        if tree::satisfied(gang, &m.held) {
            return Ok(Attempt::Extras);
        }
        if st.was_satisfied {
            return Ok(Attempt::Extras);
        }
        if !tree::satisfied(gang, &m.exist) {
            let exist: u32 = m.exist.values().sum();
            let need = gang.min_pods().unwrap_or(u64::from(gang.min_member));
            let mut msg = format!("waiting for members: {exist} of {need} exist");
            let short = tree::shortfall(gang, &m.exist);
            if !short.is_empty() {
                msg.push_str(&format!(" ({short})"));
            }
            msg.push_str(&self.failures_note(g));
            if m.orphans > 0 {
                msg.push_str(&format!(
                    "; {} members name no leaf subgroup of this gang (label {})",
                    m.orphans,
                    crate::names::LABEL_SUBGROUP
                ));
            }
            st.waiting_since = None;
            self.outcome(g, Reason::WaitingForMembers, Phase::Pending, msg, st, 0);
            return Err(());
        }
        if let Some(msg) = gated_wait(gang, m) {
            st.waiting_since = None;
            self.outcome(g, Reason::WaitingForMembers, Phase::Pending, msg, st, 0);
            return Err(());
        }
        if let Some(until) = st.backoff_until
            && until > self.now
        {
            let msg = format!("backing off after {} timeout(s); next attempt at {}", st.timeouts, at(until));
            self.outcome(g, Reason::BackingOff, Phase::Pending, msg, st, 0);
            return Err(());
        }
        Ok(Attempt::Whole)
    }

    /// Decides a gang group (usually one gang): all of its gangs are placed in this cycle, or none.
    fn gang_group(&mut self, group: &[usize]) {
        let mut attempts: Vec<(usize, Attempt)> = Vec::new();
        let mut blocked: Vec<String> = Vec::new();
        for &g in group {
            match self.precheck(g) {
                Ok(a) => attempts.push((g, a)),
                Err(()) => {
                    if let Some(o) = self.plan.outcomes.last()
                        && !o.reason.is_satisfied()
                    {
                        blocked.push(format!("{} is {}", o.gang, o.reason));
                    }
                }
            }
        }
        for &g in group {
            for other in &self.snap.gangs[g].gang_group {
                if !self.gang_index.contains_key(other) {
                    blocked.push(format!("{other} does not exist"));
                }
            }
        }
        blocked.sort();
        blocked.dedup();

        // Gangs already satisfied only place extras; they never wait for their group.
        let (extras, whole): (Vec<_>, Vec<_>) =
            attempts.into_iter().partition(|(_, a)| *a == Attempt::Extras);
        for (g, _) in extras {
            self.extras(g);
        }
        if whole.is_empty() {
            return;
        }
        if !blocked.is_empty() {
            for (g, _) in whole {
                let msg = format!("gang group not ready: {}", blocked.join(", "));
                let st = self.snap.gangs[g].state.clone();
                self.outcome(g, Reason::WaitingForGangGroup, Phase::Pending, msg, st, 0);
            }
            return;
        }

        let mut txn = Txn::default();
        let mut placed: Vec<(usize, Placement)> = Vec::new();
        let mut failed: Vec<(usize, Placement)> = Vec::new();
        for &(g, _) in &whole {
            let attempt = self.place_gang(g, &txn, false);
            if attempt.satisfied {
                txn.absorb(attempt.txn.clone());
                placed.push((g, attempt));
            } else {
                failed.push((g, attempt));
            }
        }
        if failed.is_empty() {
            self.state.commit(txn);
            for (g, p) in placed {
                self.commit_placement(g, p);
            }
            return;
        }
        let names: Vec<String> = failed.iter().map(|(g, _)| self.snap.gangs[*g].key.to_string()).collect();
        for (g, _) in placed {
            let msg = format!("would fit, but its gang group cannot be placed with it: {}", names.join(", "));
            let mut st = self.snap.gangs[g].state.clone();
            st.waiting_since = st.waiting_since.or(Some(self.now));
            self.outcome(g, Reason::WaitingForGangGroup, Phase::Pending, msg, st, 0);
        }
        let alone = whole.len() == 1;
        for (g, attempt) in failed {
            self.unplaced(g, attempt, alone);
        }
    }

    /// Places members beyond what is needed (satisfied gangs), or replacements (degraded gangs).
    fn extras(&mut self, g: usize) {
        let attempt = self.place_gang(g, &Txn::default(), true);
        let n = u32::try_from(attempt.bindings.len()).unwrap_or(u32::MAX);
        self.state.commit(attempt.txn);
        for &(p, node) in &attempt.bindings {
            self.bind(p, node);
        }
        let gang = &self.snap.gangs[g];
        let m = &self.members[g];
        let mut held = m.held.clone();
        for &(p, _) in &attempt.bindings {
            if let Some(leaf) =
                tree::leaf_of(gang, self.snap.pods[p].gang.as_ref().and_then(|m| m.subgroup.as_deref()))
            {
                *held.entry(leaf.to_string()).or_default() += 1;
            }
        }
        let mut st = gang.state.clone();
        st.waiting_since = None;
        if tree::satisfied(gang, &held) {
            st.was_satisfied = true;
            st.degraded_since = None;
            let (reason, msg) = if n > 0 {
                (
                    Reason::Scheduled,
                    format!("placed {n} more member(s); minimum {} satisfied", gang.min_member),
                )
            } else {
                let pending: usize = m.pending.values().map(Vec::len).sum();
                let msg = if pending > 0 {
                    format!("minimum satisfied; {pending} member(s) beyond the minimum wait for room")
                } else {
                    "minimum satisfied".to_string()
                };
                (Reason::Running, msg)
            };
            let phase = self.placed_phase(g);
            self.outcome(g, reason, phase, msg, st, n);
            return;
        }
        // Degraded: fewer active members than the minimum after having been satisfied.
        let since = *st.degraded_since.get_or_insert(self.now);
        let grace = gang.stale_grace.unwrap_or(self.config.stale_grace_period);
        let active: u32 = held.values().sum();
        let need = gang.min_pods().unwrap_or(u64::from(gang.min_member));
        if self.now.since(since) >= grace {
            let victims: Vec<usize> =
                m.all.iter().copied().filter(|&p| self.snap.pods[p].uses_node()).collect();
            let count = victims.len();
            for p in victims {
                self.evict(p, EvictionReason::StaleGang, None);
            }
            st.was_satisfied = false;
            st.degraded_since = None;
            let msg = format!(
                "only {active} of {need} members active for {}s (grace {}s): evicting the remaining {count}{}",
                self.now.since(since).as_secs(),
                grace.as_secs(),
                self.failures_note(g)
            );
            self.outcome(g, Reason::Stale, Phase::Degraded, msg, st, n);
        } else {
            let msg = format!(
                "only {active} of {need} members active{}; the remaining members are evicted at {} unless replacements are placed",
                self.failures_note(g),
                at(since.plus(grace))
            );
            self.outcome(g, Reason::Degraded, Phase::Degraded, msg, st, n);
        }
    }

    /// Tries to place a gang on top of `base`. With `extras`, every pending member that fits is
    /// placed; otherwise the tree's minimums first, then extras if the tree is satisfied.
    fn place_gang(&self, g: usize, base: &Txn, extras: bool) -> Placement {
        let mut txn = base.clone();
        // The gang's own reservations are its to use: give them back before placing.
        for &p in self.members[g].pending.values().flatten() {
            if let Some(&n) = self.reserved.get(&p) {
                self.state.give(&mut txn, n, &self.demand[p]);
            }
        }
        self.place.gang(&place::Request {
            gang: &self.snap.gangs[g],
            members: &self.members[g],
            state: &self.state,
            demand: &self.demand,
            reserved: &self.reserved,
            txn,
            extras,
        })
    }

    fn commit_placement(&mut self, g: usize, p: Placement) {
        let n = u32::try_from(p.bindings.len()).unwrap_or(u32::MAX);
        for &(pod, node) in &p.bindings {
            self.bind(pod, node);
        }
        let gang = &self.snap.gangs[g];
        let mut st = gang.state.clone();
        st.waiting_since = None;
        st.was_satisfied = true;
        st.degraded_since = None;
        let mut msg = format!("placed {n} member(s)");
        if let Some(d) = &p.domain {
            msg.push_str(&format!(" in {d}"));
        }
        msg.push_str(&format!("; minimum {} satisfied", gang.min_member));
        self.outcome(g, Reason::Scheduled, Phase::Scheduled, msg, st, n);
    }

    /// A gang that could not be placed: preempt, reserve, time out, or explain.
    fn unplaced(&mut self, g: usize, attempt: Placement, alone: bool) {
        let gang = &self.snap.gangs[g];
        let mut st = gang.state.clone();
        let since = *st.waiting_since.get_or_insert(self.now);
        let timeout = gang.timeout.or(self.config.default_timeout);
        let why = explain::unplaced(self, g, &attempt);

        // Half-bound: members hold nodes (a crash mid-binding, or a race) but the gang cannot be
        // completed. Released after the grace period rather than held forever.
        let bound: Vec<usize> =
            self.members[g].all.iter().copied().filter(|&p| self.snap.pods[p].uses_node()).collect();
        if !bound.is_empty() {
            let since = *st.degraded_since.get_or_insert(self.now);
            let grace = gang.stale_grace.unwrap_or(self.config.stale_grace_period);
            let n = bound.len();
            if self.now.since(since) >= grace {
                for p in bound {
                    self.evict(p, EvictionReason::StaleGang, None);
                }
                st.degraded_since = None;
                let msg = format!(
                    "{n} member(s) were bound but the gang could not be completed within {}s: releasing them. {why}",
                    grace.as_secs()
                );
                self.outcome(g, Reason::Stale, Phase::Degraded, msg, st, 0);
            } else {
                let msg = format!(
                    "{n} member(s) bound but the gang cannot be completed; they are released at {} unless the rest fit. {why}",
                    at(since.plus(grace))
                );
                self.outcome(g, Reason::Degraded, Phase::Degraded, msg, st, 0);
            }
            return;
        }

        if let Some(t) = timeout
            && self.now.since(since) >= t
        {
            let waited = self.now.since(since).as_secs();
            match self.config.timeout_action {
                TimeoutAction::Retry { initial_backoff, max_backoff } => {
                    st.timeouts = st.timeouts.saturating_add(1);
                    let factor = 1u32.checked_shl(st.timeouts.saturating_sub(1)).unwrap_or(u32::MAX);
                    let backoff = initial_backoff.saturating_mul(factor).min(max_backoff);
                    st.backoff_until = Some(self.now.plus(backoff));
                    st.waiting_since = None;
                    let msg = format!(
                        "timed out after {waited}s (timeout {}s); retrying in {}s. {why}",
                        t.as_secs(),
                        backoff.as_secs()
                    );
                    self.outcome(g, Reason::TimedOut, Phase::Pending, msg, st, 0);
                }
                TimeoutAction::Fail => {
                    st.failed = true;
                    let bound: Vec<usize> = self.members[g]
                        .all
                        .iter()
                        .copied()
                        .filter(|&p| self.snap.pods[p].uses_node())
                        .collect();
                    for p in bound {
                        self.evict(p, EvictionReason::TimedOut, None);
                    }
                    let msg =
                        format!("timed out after {waited}s (timeout {}s); giving up. {why}", t.as_secs());
                    self.outcome(g, Reason::TimedOut, Phase::Failed, msg, st, 0);
                }
            }
            return;
        }

        if alone && self.config.preemption {
            match preempt::try_preempt(self, g) {
                preempt::Result::Evict { victims, placement } => {
                    let key = gang.key.clone();
                    let victim_gangs: BTreeSet<String> = victims
                        .iter()
                        .map(|&p| {
                            let pod = &self.snap.pods[p];
                            pod.gang
                                .as_ref()
                                .map_or_else(|| format!("pod {}", pod.key), |m| m.gang.to_string())
                        })
                        .collect();
                    let count = victims.len();
                    for p in victims {
                        self.evict(p, EvictionReason::Preempted, Some(&key));
                    }
                    for &(p, node) in &placement.bindings {
                        self.plan.nominations.push(crate::plan::Nomination {
                            pod: self.snap.pods[p].key.clone(),
                            node: self.snap.nodes[node].name.clone(),
                        });
                    }
                    let list: Vec<String> = victim_gangs.into_iter().collect();
                    let msg = format!(
                        "preempting {count} lower-priority pod(s) ({}) to make room; {why}",
                        list.join(", ")
                    );
                    self.outcome(g, Reason::Preempting, Phase::Pending, msg, st, 0);
                    return;
                }
                preempt::Result::Waiting(n) => {
                    let msg = format!("waiting for {n} preempted pod(s) to terminate");
                    self.outcome(g, Reason::Preempting, Phase::Pending, msg, st, 0);
                    return;
                }
                preempt::Result::No => {}
            }
        }

        if gang.mode == GangMode::NonStrict && !attempt.bindings.is_empty() {
            let count = attempt.bindings.len();
            for &(p, node) in &attempt.bindings {
                self.plan.reservations.push(Reservation {
                    pod: self.snap.pods[p].key.clone(),
                    node: self.snap.nodes[node].name.clone(),
                    gang: gang.key.clone(),
                });
            }
            self.state.commit(attempt.txn);
            let msg = format!("holding nodes for {count} member(s) until the rest fit. {why}");
            self.outcome(g, Reason::Reserved, Phase::Pending, msg, st, 0);
            return;
        }
        let reason =
            if attempt.topology_failed { Reason::TopologyUnsatisfiable } else { Reason::Unschedulable };
        self.outcome(g, reason, Phase::Pending, why, st, 0);
    }

    fn finish(mut self) -> Plan {
        let p = &mut self.plan;
        p.bindings.sort();
        p.bindings.dedup();
        p.evictions.sort();
        p.evictions.dedup();
        p.nominations.sort();
        p.nominations.dedup();
        p.reservations.sort();
        p.reservations.dedup();
        p.outcomes.sort_by(|a, b| a.gang.cmp(&b.gang));
        self.plan
    }
}
