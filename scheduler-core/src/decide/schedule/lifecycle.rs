//! Step 4 of the cycle: each gang's lifecycle — invalid, failed, completed, satisfied (extras),
//! degraded or stale, waiting for members, backing off, or placed whole; unplaced gangs preempt,
//! reserve, time out or wait — as functions that look at what the cycle knows ([`View`]) and
//! return a [`Decision`]. [`Progress`] applies each decision to the ledger before the next is
//! made, so a later gang sees what an earlier one took: through the ledger, the pods evicted and
//! the list of pods placed so far, which `Progress` keeps as it applies decisions — no step looks
//! into the decisions another step returned.

use std::cell::OnceCell;
use std::collections::BTreeSet;
use std::time::Duration;

use super::backfill::{self, Ending, Hold, Timeline};
use super::decision::Decision;
use super::explain::{self, FitSummaries};
use super::ledger::{Ledger, Txn};
use super::place::{Placement, PlacementRequest, Placer};
use super::preempt;
use super::volumes::{Todo, Work};
use super::{Facts, PodFacts};
use crate::decide::config::TimeoutAction;
use crate::decide::plan::Reason;
use crate::decide::plan::{EvictionReason, Phase};
use crate::read::model::Time;
use crate::read::model::{GangMode, GangState, Pod, PodPhase};
use crate::read::tree;

/// A deadline as messages state it: an absolute time, to the second (rounded up). Unlike "in 37s",
/// it reads the same in every cycle, so what is written to the API from it does not change
/// until the situation does.
fn at(t: Time) -> Time {
    Time(t.0.saturating_add(999).div_euclid(1000).saturating_mul(1000))
}

/// What a gang needs from this cycle's placement step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    /// Not yet satisfied: all or nothing.
    Whole,
    /// Satisfied, or degraded and trying to recover: place whatever fits.
    Extras,
}

/// What the cycle has decided so far: the ledger with every decision committed, the pods evicted
/// (never twice, never a victim again), the members placed, and the decisions in the order made.
#[derive(Debug)]
pub(super) struct Progress {
    ledger: Ledger,
    evicted: BTreeSet<usize>,
    /// Gang members bound by the decisions so far: (pod, node), in the order placed.
    placed: Vec<(usize, usize)>,
    summaries: FitSummaries,
    decisions: Vec<Decision>,
    /// Pods outside any gang bound: (pod, node).
    singles: Vec<(usize, usize)>,
    /// Pods outside any gang placed, whose claims are bound first (see [`Decision::volumes`]).
    single_volumes: Vec<Work>,
    /// Capacity held for gangs waiting in line (backfill), in the order made; their capacity is
    /// taken in the ledger.
    holds: Vec<Hold>,
    /// When the pods on nodes are expected to end (backfill), read on the cycle's first hold.
    endings: OnceCell<Vec<Ending>>,
    /// Gangs examined for backfill so far ([`clock_budget`]).
    tested: std::cell::Cell<u32>,
    /// Satisfied gangs whose members beyond the minimum wait for room, in the cycle's order:
    /// placed once every gang's minimum has been decided ([`Progress::surplus`]).
    surplus: Vec<usize>,
}

impl Progress {
    pub fn new(ledger: Ledger) -> Self {
        Progress {
            ledger,
            evicted: BTreeSet::new(),
            placed: Vec::new(),
            summaries: FitSummaries::default(),
            decisions: Vec::new(),
            singles: Vec::new(),
            single_volumes: Vec::new(),
            holds: Vec::new(),
            endings: OnceCell::new(),
            tested: std::cell::Cell::new(0),
            surplus: Vec::new(),
        }
    }

    /// The decisions made, the pods outside any gang bound, and those placed whose claims are
    /// bound first.
    pub fn into_decisions(self) -> (Vec<Decision>, Vec<(usize, usize)>, Vec<Work>) {
        (self.decisions, self.singles, self.single_volumes)
    }

    fn view<'v, 'a>(&'v self, facts: &'v Facts<'a>, placer: &'v Placer<'a>) -> View<'v, 'a> {
        View {
            facts,
            placer,
            ledger: &self.ledger,
            evicted: &self.evicted,
            summaries: &self.summaries,
            placed: &self.placed,
            holds: &self.holds,
            endings: &self.endings,
            tested: &self.tested,
        }
    }

    /// Commits a decision: its capacity to the ledger, its bindings to the members placed, its
    /// evictions to the evicted (a pod already evicted or deleting is left out), and keeps it.
    /// Returns its reason.
    fn apply(&mut self, pods: &[Pod], mut d: Decision) -> Reason {
        self.ledger.commit(std::mem::take(&mut d.txn));
        self.placed.extend_from_slice(&d.bindings);
        let evicted = &mut self.evicted;
        d.evictions.retain(|&(p, _)| !pods[p].deleting && evicted.insert(p));
        if let Some(h) = &d.hold {
            self.holds.push(Hold::clone(h));
        }
        let reason = d.reason;
        self.decisions.push(d);
        reason
    }

    /// Pods of ours outside any gang, shaped alike ([`PodFacts::alike`], `true`) with perhaps
    /// pods of other shapes between them (`false`): each on the best node it fits, if any, in
    /// order ([`Placer::singles`], [`Placer::singles_resumed`]).
    pub fn singles(&mut self, index: &PodFacts<'_>, placer: &Placer<'_>, run: &[(usize, bool)]) {
        let (placed, work) = if run.iter().all(|&(_, alike)| alike) {
            let pods: Vec<usize> = run.iter().map(|&(p, _)| p).collect();
            placer.singles(&mut self.ledger, &index.demand, &index.reserved, &pods)
        } else {
            placer.singles_resumed(&mut self.ledger, &index.demand, &index.reserved, run)
        };
        self.singles.extend(placed);
        self.single_volumes.extend(work);
    }

    /// The members beyond the minimum of the satisfied gangs, in the cycle's order, once every
    /// gang's minimum has been decided: a gang that grows never takes the room a waiting gang's
    /// minimum needs (nor what is held for one).
    pub fn surplus(&mut self, facts: &Facts<'_>, placer: &Placer<'_>) {
        for g in std::mem::take(&mut self.surplus) {
            let before = self.placed.len();
            let d = self.view(facts, placer).extras(g);
            self.apply(&facts.input.snap.pods, d);
            placer.committed(&self.placed[before..]);
        }
    }

    /// Decides a gang group (usually one gang): all of its gangs are placed in this cycle, or none.
    /// What it places is noted to the placer (JobSet's exclusive domains it now holds).
    pub fn gang_group(&mut self, facts: &Facts<'_>, placer: &Placer<'_>, group: &[usize]) {
        let before = self.placed.len();
        self.decide_group(facts, placer, group);
        placer.committed(&self.placed[before..]);
    }

    fn decide_group(&mut self, facts: &Facts<'_>, placer: &Placer<'_>, group: &[usize]) {
        let mut attempts: Vec<(usize, Attempt)> = Vec::new();
        let mut blocked: Vec<String> = Vec::new();
        for &g in group {
            let checked = self.view(facts, placer).precheck(g);
            match checked {
                Ok(a) => attempts.push((g, a)),
                Err(d) => {
                    let reason = self.apply(&facts.input.snap.pods, *d);
                    if !reason.is_satisfied() {
                        blocked.push(format!("{} is {reason}", facts.input.snap.gangs[g].key));
                    }
                }
            }
        }
        for &g in group {
            for other in &facts.input.snap.gangs[g].gang_group {
                if !facts.gangs.gang_index.contains_key(other) {
                    blocked.push(format!("{other} does not exist"));
                }
            }
        }
        blocked.sort();
        blocked.dedup();

        // Gangs already satisfied only place extras — with backfill on, after every gang's
        // minimum (`surplus`), so that growing never takes what a waiting gang's minimum (or its
        // hold) needs; they never wait for their group.
        let (extras, whole): (Vec<_>, Vec<_>) =
            attempts.into_iter().partition(|(_, a)| *a == Attempt::Extras);
        if self.view(facts, placer).clock().is_some() {
            self.surplus.extend(extras.into_iter().map(|(g, _)| g));
        } else {
            for (g, _) in extras {
                let d = self.view(facts, placer).extras(g);
                self.apply(&facts.input.snap.pods, d);
            }
        }
        if whole.is_empty() {
            return;
        }
        if !blocked.is_empty() {
            for (g, _) in whole {
                let msg = format!("gang group not ready: {}", blocked.join(", "));
                let view = self.view(facts, placer);
                let st = facts.gangs.states[g].clone();
                let d = view.incomplete(g, st.clone(), &msg).unwrap_or_else(|| {
                    Decision::new(g, Reason::WaitingForGangGroup, Phase::Pending, msg, st)
                });
                self.apply(&facts.input.snap.pods, d);
            }
            return;
        }

        let mut txn = Txn::default();
        let mut placed: Vec<(usize, Placement)> = Vec::new();
        let mut failed: Vec<(usize, Placement)> = Vec::new();
        for &(g, _) in &whole {
            // Its siblings placed in this step are not decisions yet: hand their bindings over, so
            // that what they hold (a JobSet's exclusive domains) counts for it.
            let siblings: Vec<(usize, usize)> =
                placed.iter().flat_map(|(_, p)| p.bindings.iter().copied()).collect();
            let attempt = self.view(facts, placer).place_gang(g, &txn, false, &siblings);
            if attempt.satisfied {
                txn.absorb(attempt.txn.clone());
                placed.push((g, attempt));
            } else {
                failed.push((g, attempt));
            }
        }
        if failed.is_empty() {
            // One transaction holds the whole group's placements: committed once.
            self.ledger.commit(txn);
            for (g, p) in placed {
                let d = self.view(facts, placer).placed(g, p);
                self.apply(&facts.input.snap.pods, d);
            }
            return;
        }
        let names: Vec<String> =
            failed.iter().map(|(g, _)| facts.input.snap.gangs[*g].key.to_string()).collect();
        for (g, _) in placed {
            let msg = format!("would fit, but its gang group cannot be placed with it: {}", names.join(", "));
            let view = self.view(facts, placer);
            let mut st = facts.gangs.states[g].clone();
            let d = match view.incomplete(g, st.clone(), &msg) {
                Some(d) => d,
                None => {
                    st.waiting_since = st.waiting_since.or(Some(facts.input.now));
                    Decision::new(g, Reason::WaitingForGangGroup, Phase::Pending, msg, st)
                }
            };
            self.apply(&facts.input.snap.pods, d);
        }
        let alone = whole.len() == 1;
        for (g, attempt) in failed {
            let d = self.view(facts, placer).unplaced(g, attempt, alone);
            self.apply(&facts.input.snap.pods, d);
        }
    }
}

/// What one decision looks at: the facts, the placer, and the cycle's progress so far (read only).
struct View<'v, 'a> {
    facts: &'v Facts<'a>,
    placer: &'v Placer<'a>,
    ledger: &'v Ledger,
    evicted: &'v BTreeSet<usize>,
    summaries: &'v FitSummaries,
    /// Gang members placed earlier in this cycle: (pod, node); they hold nodes as bound pods do.
    placed: &'v [(usize, usize)],
    /// Capacity held for gangs ahead in line (backfill).
    holds: &'v [Hold],
    /// Gangs examined for backfill this cycle.
    tested: &'v std::cell::Cell<u32>,
    endings: &'v OnceCell<Vec<Ending>>,
}

impl<'v> View<'v, '_> {
    /// The bound members of gang `g` (as the snapshot has them) that are not already going away:
    /// what holding or releasing the gang is about (a member being deleted releases itself).
    fn bound(&self, g: usize) -> Vec<usize> {
        let pods = &self.facts.input.snap.pods;
        self.facts.gangs.members[g]
            .all
            .iter()
            .copied()
            .filter(|&p| pods[p].uses_node() && !pods[p].deleting)
            .collect()
    }

    /// What a gang needs before placement; `Err` is a decision already final.
    ///
    /// A gang with members on nodes but fewer than its minimum — half-bound by a binding that
    /// failed or a crash mid-binding, or degraded by members lost — is never held here (not by its
    /// quorum, its gates or its backoff): it goes on to placement, which completes it or starts
    /// the grace period after which its bound members are released ([`View::incomplete`]).
    fn precheck(&self, g: usize) -> Result<Attempt, Box<Decision>> {
        let f = self.facts;
        let gang = &f.input.snap.gangs[g];
        let m = &f.gangs.members[g];
        let mut st = f.gangs.states[g].clone();
        let holds_nodes = !self.bound(g).is_empty();
        if !holds_nodes {
            // Nothing on a node: no shortfall to time (a release done, or members all gone).
            st.degraded_since = None;
        }
        let tree_errors = crate::rules::validate::gang_tree_errors(gang);
        if !tree_errors.is_empty() {
            let msg = tree_errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            if let Some(d) = self.incomplete(g, st.clone(), &msg) {
                return Err(Box::new(d));
            }
            return Err(Box::new(Decision::new(g, Reason::InvalidSpec, Phase::Pending, msg, st)));
        }
        if st.failed {
            let msg = "gave up after timing out; delete and recreate the gang to try again".to_string();
            let mut d = Decision::new(g, Reason::Failed, Phase::Failed, msg, st);
            d.evictions = self.bound(g).into_iter().map(|p| (p, EvictionReason::TimedOut)).collect();
            return Err(Box::new(d));
        }
        if m.counts.members == 0 && m.counts.succeeded > 0 {
            let msg = format!("all {} members finished", m.counts.succeeded);
            return Err(Box::new(Decision::new(g, Reason::Completed, Phase::Completed, msg, st)));
        }
        if tree::satisfied(gang, &m.held) {
            return Ok(Attempt::Extras);
        }
        if holds_nodes {
            return Ok(Attempt::Whole);
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
            // No member yet: the controller may be waiting for the object's admission.
            if let Some(a) = gang.admission.as_deref().filter(|a| a.waiting() && exist == 0) {
                msg.push_str(&admission_note(a, &f.input.snap.namespaces, gang.key.namespace.as_str()));
            }
            if let Some(first) = m.first_orphan {
                let pod = &f.input.snap.pods[first];
                let why = tree::attachment_error(gang, pod.gang.as_ref().and_then(|m| m.subgroup.as_deref()))
                    .unwrap_or_default();
                msg.push_str(&format!(
                    "; {} member(s) count toward no leaf subgroup of this gang (label {}), e.g. pod {}: {why}",
                    m.orphans,
                    crate::read::labels::LABEL_SUBGROUP,
                    pod.key
                ));
            }
            st.waiting_since = None;
            return Err(Box::new(Decision::new(g, Reason::WaitingForMembers, Phase::Pending, msg, st)));
        }
        if let Some(msg) = super::members::gated_wait(gang, m, &f.input.snap.pods) {
            st.waiting_since = None;
            return Err(Box::new(Decision::new(g, Reason::WaitingForMembers, Phase::Pending, msg, st)));
        }
        if let Some(until) = st.backoff_until
            && until > f.input.now
        {
            let msg = format!("backing off after {} timeout(s); next attempt at {}", st.timeouts, at(until));
            return Err(Box::new(Decision::new(g, Reason::BackingOff, Phase::Pending, msg, st)));
        }
        Ok(Attempt::Whole)
    }

    /// Places members beyond the minimum of a satisfied gang: whatever fits. Members whose claims
    /// are bound first are placed (their room is kept this cycle) but bound in a later one.
    fn extras(&self, g: usize) -> Decision {
        let f = self.facts;
        let attempt = self.place_gang(g, &Txn::default(), true, &[]);
        let work = self.placer.volumes().work(&attempt.bindings, self.ledger, &attempt.txn);
        let waiting: BTreeSet<usize> = work.iter().map(|w| w.pod).collect();
        let bindings: Vec<(usize, usize)> =
            attempt.bindings.iter().copied().filter(|(p, _)| !waiting.contains(p)).collect();
        let n = u32::try_from(bindings.len()).unwrap_or(u32::MAX);
        let gang = &f.input.snap.gangs[g];
        let m = &f.gangs.members[g];
        let mut st = f.gangs.states[g].clone();
        st.waiting_since = None;
        st.was_satisfied = true;
        st.degraded_since = None;
        let (reason, msg) = if n > 0 {
            (Reason::Scheduled, format!("placed {n} more member(s); {} satisfied", minimum(gang)))
        } else {
            let pending: usize =
                m.pending.values().map(Vec::len).sum::<usize>().saturating_sub(waiting.len());
            let msg = if pending > 0
                && let Some(step) = gang.elastic_step
            {
                format!(
                    "minimum satisfied; {pending} member(s) beyond the minimum wait for room to grow to a count its {} allows ({step:?})",
                    crate::read::labels::ANNOTATION_ELASTIC_STEP
                )
            } else if pending > 0 {
                format!("minimum satisfied; {pending} member(s) beyond the minimum wait for room")
            } else {
                "minimum satisfied".to_string()
            };
            (Reason::Running, msg)
        };
        let note = if waiting.is_empty() {
            String::new()
        } else {
            format!(
                "; {} more member(s) wait while their claims are bound or allocated first: {}",
                waiting.len(),
                self.placer.volumes().describe_work(&work)
            )
        };
        let mut d = Decision::new(g, reason, self.placed_phase(g), format!("{msg}{note}"), st);
        d.bindings = bindings;
        d.volumes = work;
        d.txn = attempt.txn;
        d
    }

    /// The decision for a gang with members on nodes but fewer than its minimum held, which this
    /// cycle does not complete (`why`: what keeps it from completing): the invariant a gang
    /// scheduler exists to keep. Within the gang's grace period (from when it first fell short,
    /// kept in its state — on its members or its `Gang` — so a restart does not start it again)
    /// it waits `Degraded` for the rest to be placed; after it, its bound members are released
    /// (evicted, `Stale`) — and every cycle after says so again until they are gone (an eviction
    /// the API server refuses is tried again, never dropped for a new grace period). `None` when
    /// no member holds a node: nothing to release.
    fn incomplete(&self, g: usize, mut st: GangState, why: &str) -> Option<Decision> {
        let f = self.facts;
        let bound = self.bound(g);
        if bound.is_empty() {
            return None;
        }
        let gang = &f.input.snap.gangs[g];
        let m = &f.gangs.members[g];
        let since = *st.degraded_since.get_or_insert(f.input.now);
        let grace = gang.stale_grace.unwrap_or(f.input.config.stale_grace_period);
        let count = bound.len();
        let active: u32 = m.held.values().sum();
        let need = gang.min_pods().unwrap_or(u64::from(gang.min_member));
        let failures = self.failures_note(g);
        let why = if why.is_empty() { String::new() } else { format!(" {why}") };
        if f.input.now.since(since) >= grace {
            let waited = f.input.now.since(since).as_secs();
            let msg = if st.was_satisfied {
                format!(
                    "only {active} of {need} members active for {waited}s (grace {}s): evicting the remaining {count}{failures}.{why}",
                    grace.as_secs(),
                )
            } else {
                format!(
                    "{count} member(s) were bound but the gang could not be completed within {}s: releasing them{failures}.{why}",
                    grace.as_secs()
                )
            };
            let mut d = Decision::new(g, Reason::Stale, Phase::Degraded, msg, st);
            d.evictions = bound.into_iter().map(|p| (p, EvictionReason::StaleGang)).collect();
            return Some(d);
        }
        let msg = if st.was_satisfied {
            format!(
                "only {active} of {need} members active{failures}; the remaining {count} are evicted at {} unless replacements are placed.{why}",
                at(since.plus(grace))
            )
        } else {
            format!(
                "{count} member(s) bound but the gang cannot be completed{failures}; they are released at {} unless the rest fit.{why}",
                at(since.plus(grace))
            )
        };
        Some(Decision::new(g, Reason::Degraded, Phase::Degraded, msg, st))
    }

    /// Tries to place a gang on top of `base`. With `extras`, every pending member that fits is
    /// placed; otherwise the tree's minimums first, then extras if the tree is satisfied.
    /// `siblings`: (pod, node) bindings of its gang group placed in the same step, not yet
    /// decisions; they count as placed earlier in this cycle.
    fn place_gang(&self, g: usize, base: &Txn, extras: bool, siblings: &[(usize, usize)]) -> Placement {
        let mut txn = base.clone();
        // Capacity held for gangs ahead in line is its to use when it ends before they start:
        // given back to place it, and taken again after, so what is committed is what it takes
        // (a node it backfills is over-held until it ends, which is before the hold starts).
        let usable: Vec<&Hold> = match self.clock() {
            Some(clock) => {
                let limit = self.limit(g);
                self.holds.iter().filter(|h| h.gang != g && backfill::may_use(clock, limit, h)).collect()
            }
            None => Vec::new(),
        };
        let held =
            || usable.iter().flat_map(|h| h.bindings.iter().map(|&(p, n)| (n, &self.facts.pods.demand[p])));
        for (n, d) in held() {
            self.ledger.give(&mut txn, n, d);
        }
        let mut placement = self.place_gang_on(g, txn, extras, siblings);
        // What it took of held capacity: on a node it is placed on, a resource (or pod slots) it
        // takes there is left below what the holds leave free — below nothing, or below what was
        // free before they were given back when that was already short (a held node still runs
        // the work its hold waits for).
        if !usable.is_empty() && !placement.bindings.is_empty() {
            let mut takes: std::collections::BTreeMap<usize, BTreeSet<usize>> = Default::default();
            for &(p, n) in &placement.bindings {
                takes.entry(n).or_default().extend(self.facts.pods.demand[p].0.iter().map(|&(r, _)| r));
            }
            // Per node: the held amount of each resource, then of pod slots.
            let mut given: std::collections::BTreeMap<usize, (Vec<(usize, i64)>, i64)> = Default::default();
            for (n, d) in held().filter(|(n, _)| takes.contains_key(n)) {
                let (sum, pods) = given.entry(n).or_default();
                *pods += 1;
                for &(r, a) in &d.0 {
                    match sum.iter_mut().find(|(q, _)| *q == r) {
                        Some(x) => x.1 += a,
                        None => sum.push((r, a)),
                    }
                }
            }
            let short = |after: i64, held: i64, before: i64| after - held < before.min(0);
            let over: BTreeSet<usize> = given
                .iter()
                .filter(|(n, (sum, pods))| {
                    let n = **n;
                    let taken = &takes[&n];
                    short(self.ledger.free_pods(&placement.txn, n), *pods, self.ledger.free_pods(base, n))
                        || sum.iter().any(|&(r, a)| {
                            taken.contains(&r)
                                && short(
                                    self.ledger.free(&placement.txn, n, r),
                                    a,
                                    self.ledger.free(base, n, r),
                                )
                        })
                })
                .map(|(&n, _)| n)
                .collect();
            placement.backfilled = usable
                .iter()
                .filter(|h| h.bindings.iter().any(|(_, n)| over.contains(n)))
                .map(|h| h.gang)
                .collect();
        }
        for (n, d) in held() {
            self.ledger.take(&mut placement.txn, n, d);
        }
        placement
    }

    /// [`View::place_gang`] on `txn` as it is: no held capacity given back.
    fn place_gang_on(&self, g: usize, mut txn: Txn, extras: bool, siblings: &[(usize, usize)]) -> Placement {
        let f = self.facts;
        // The gang's own reservations are its to use: give them back before placing.
        for &p in f.gangs.members[g].pending.values().flatten() {
            if let Some(&n) = f.pods.reserved.get(&p) {
                self.ledger.give(&mut txn, n, &f.pods.demand[p]);
            }
        }
        let mut placement = self.placer.gang(&PlacementRequest {
            gang: &f.input.snap.gangs[g],
            members: &f.gangs.members[g],
            ledger: self.ledger,
            demand: &f.pods.demand,
            reserved: &f.pods.reserved,
            txn,
            extras,
            // While backfill holds room, a gang's first placement is its minimum: what it places
            // beyond it comes after every gang's minimum (`Progress::surplus`, a later cycle).
            minimum_only: !extras && self.clock().is_some(),
            siblings,
            earlier: &|visit: &mut dyn FnMut(usize, usize)| {
                for &(p, n) in self.placed.iter().chain(siblings) {
                    visit(p, n);
                }
            },
        });
        self.elastic_step(g, &mut placement);
        placement
    }

    /// An elastic gang (`kube-gang.io/elastic-step`) grows only to a count its step allows: of a
    /// placement that would make it run with more, the members placed last (beyond the minimum)
    /// are left out, and their room given back. Never below the minimum.
    fn elastic_step(&self, g: usize, placement: &mut Placement) {
        let f = self.facts;
        let gang = &f.input.snap.gangs[g];
        let Some(step) = gang.elastic_step else { return };
        if !placement.satisfied && !self.is_satisfied_now(g) {
            return;
        }
        let held: u64 = f.gangs.members[g].held.values().map(|&n| u64::from(n)).sum();
        let placed = u64::try_from(placement.bindings.len()).unwrap_or(u64::MAX);
        let min = gang.min_pods().unwrap_or(u64::from(gang.min_member));
        let keep = step.most(min.max(held), held.saturating_add(placed)).saturating_sub(held);
        let keep = usize::try_from(keep).unwrap_or(usize::MAX);
        for (p, n) in placement.bindings.drain(keep.min(placement.bindings.len())..) {
            self.ledger.give(&mut placement.txn, n, &f.pods.demand[p]);
        }
    }

    /// Whether gang `g`'s minimum holds already (members bound, running or done).
    fn is_satisfied_now(&self, g: usize) -> bool {
        tree::satisfied(&self.facts.input.snap.gangs[g], &self.facts.gangs.members[g].held)
    }

    /// A gang placed whole (its capacity is committed by the caller, with its group's): bound, or
    /// — when members have unbound claims — waiting while those are bound, none of it bound yet.
    fn placed(&self, g: usize, p: Placement) -> Decision {
        let gang = &self.facts.input.snap.gangs[g];
        let n = p.bindings.len();
        let volumes = self.placer.volumes();
        let work = volumes.work(&p.bindings, self.ledger, &Txn::default());
        if !work.is_empty() {
            let mut st = self.facts.gangs.states[g].clone();
            if self.bound(g).is_empty() {
                st.waiting_since.get_or_insert(self.facts.input.now);
            } else {
                // Members on nodes while the rest wait for their claims: still held to the grace
                // period, never half-bound for longer.
                let why = "the rest wait for their claims to be bound or allocated";
                if let Some(d) = self.incomplete(g, st.clone(), why)
                    && d.reason == Reason::Stale
                {
                    return d;
                }
                st.degraded_since.get_or_insert(self.facts.input.now);
            }
            let claims: BTreeSet<&crate::read::model::ObjectKey> = work.iter().map(|w| &w.claim).collect();
            let pvcs = work.iter().any(|w| matches!(w.todo, Todo::Volume(_)));
            let (reason, what) = if pvcs {
                (Reason::WaitingForVolumes, "binding {} of their PVC(s)")
            } else {
                (Reason::WaitingForDevices, "allocating and reserving {} of their ResourceClaim(s)")
            };
            let what = what.replace("{}", &claims.len().to_string());
            let mut msg = format!(
                "placed {n} member(s); {what} first: {}; the members are bound once every one is",
                volumes.describe_work(&work)
            );
            if p.revisited > 0 {
                msg.push_str(&format!(
                    " (devices chosen again {} time(s): the members' first choices left one without)",
                    p.revisited
                ));
            }
            let mut d = Decision::new(g, reason, Phase::Pending, msg, st);
            d.volumes = work;
            return d;
        }
        let mut st = self.facts.gangs.states[g].clone();
        // The wait ends once the bindings are seen made (the next cycle finds the gang satisfied,
        // `extras`), not when they are sent: a binding lost leaves the gang waiting since it
        // began, as a restarted scheduler reading the state kept on its members sees it (that
        // copy is not written again for a placement: the members hold nodes, so their wait no
        // longer matters).
        st.was_satisfied = true;
        st.degraded_since = None;
        let mut msg = format!("placed {n} member(s)");
        if let Some(d) = &p.domain {
            msg.push_str(&format!(" in {d}"));
        }
        msg.push_str(&format!("; {} satisfied", minimum(gang)));
        if let Some(note) = &p.preferred_note {
            msg.push_str(&format!("; {note}"));
        }
        let backfilled: Vec<&Hold> = self.holds.iter().filter(|h| p.backfilled.contains(&h.gang)).collect();
        if !backfilled.is_empty() {
            msg.push_str(&format!(
                "; started on capacity held for {}: its time limit ends it by then",
                self.hold_names(&backfilled)
            ));
        }
        let mut d = Decision::new(g, Reason::Scheduled, Phase::Scheduled, msg, st);
        d.backfilled = !backfilled.is_empty();
        d.bindings = p.bindings;
        d
    }

    /// A gang that could not be placed: release, time out, preempt, reserve, or explain.
    fn unplaced(&self, g: usize, attempt: Placement, alone: bool) -> Decision {
        let f = self.facts;
        let gang = &f.input.snap.gangs[g];
        let mut st = f.gangs.states[g].clone();
        let timeout = gang.timeout.or(f.input.config.default_timeout);
        let why = explain::unplaced(gang, &f.gangs.members[g], &f.input.snap.pods, &attempt, |p| {
            let volumes = self.placer.volumes();
            let fit = self.summaries.get(
                &f.input.snap.nodes,
                &f.input.snap.pods,
                (p, &f.input.snap.pods[p]),
                &f.pods.demand[p],
                self.placer.feasible(p).as_ref(),
                self.ledger,
                &f.pods.res,
                self.placer.blocks(p, super::place::Tentative::of(&attempt.siblings, &attempt.bindings)),
                volumes,
            );
            match volumes.noted(p) {
                Some(note) => format!("{fit}; {note}"),
                None => fit,
            }
        });

        // Members hold nodes (a binding that failed, a crash mid-binding, members lost) but the
        // gang cannot be completed: released after its grace period rather than held forever.
        let m = &f.gangs.members[g];
        let why = if tree::satisfied(gang, &m.exist) {
            why
        } else {
            let exist: u32 = m.exist.values().sum();
            let need = gang.min_pods().unwrap_or(u64::from(gang.min_member));
            format!("waiting for members: {exist} of {need} exist")
        };
        if let Some(d) = self.incomplete(g, st.clone(), &why) {
            return d;
        }
        let since = *st.waiting_since.get_or_insert(f.input.now);

        if let Some(t) = timeout
            && f.input.now.since(since) >= t
        {
            let waited = f.input.now.since(since).as_secs();
            return match f.input.config.timeout_action {
                TimeoutAction::Retry { initial_backoff, max_backoff } => {
                    st.timeouts = st.timeouts.saturating_add(1);
                    let factor = 1u32.checked_shl(st.timeouts.saturating_sub(1)).unwrap_or(u32::MAX);
                    let backoff = initial_backoff.saturating_mul(factor).min(max_backoff);
                    st.backoff_until = Some(f.input.now.plus(backoff));
                    st.waiting_since = None;
                    let msg = format!(
                        "timed out after {waited}s (timeout {}s); retrying in {}s. {why}",
                        t.as_secs(),
                        backoff.as_secs()
                    );
                    Decision::new(g, Reason::TimedOut, Phase::Pending, msg, st)
                }
                TimeoutAction::Fail => {
                    st.failed = true;
                    let msg =
                        format!("timed out after {waited}s (timeout {}s); giving up. {why}", t.as_secs());
                    let mut d = Decision::new(g, Reason::TimedOut, Phase::Failed, msg, st);
                    d.evictions = self.bound(g).into_iter().map(|p| (p, EvictionReason::TimedOut)).collect();
                    d
                }
            };
        }

        let mut preemption_note = String::new();
        if alone && f.input.config.preemption {
            let pending: Vec<usize> = f.gangs.members[g].pending.values().flatten().copied().collect();
            let room = preempt::Room {
                snap: f.input.snap,
                members: &f.gangs.members,
                priorities: &f.gangs.priorities,
                places: f.pods.places(&f.gangs.members, &f.gangs.priorities),
                evicted: self.evicted,
            };
            // A gang held to one domain of its required key makes room within one — searched
            // domain by domain unless members already on nodes fix the domain, or JobSet's
            // exclusive placement (of the gang or its members) decides domains of its own.
            let held = f.gangs.members[g].held.values().any(|&n| n > 0);
            let exclusive = gang.exclusive_topology.is_some()
                || f.gangs.members[g].all.iter().any(|&p| f.input.snap.pods[p].exclusive_topology.is_some());
            let domains = gang
                .topology_key
                .as_deref()
                .filter(|_| !held && !exclusive)
                .map(|key| self.placer.topology(key));
            let found = preempt::try_preempt(
                &room,
                g,
                &pending,
                domains.as_deref(),
                |p| self.placer.feasible(p),
                // Not on held capacity: what preemption places starts only once its victims are
                // gone, not now.
                |base| self.place_gang_on(g, base.clone(), false, &[]),
                |txn, p| {
                    if let Some(n) = room.node_of(p) {
                        self.ledger.give(txn, n, &f.pods.res.known_demand(&f.input.snap.pods[p].requests));
                    }
                },
            );
            match found {
                preempt::Found::Evict { victims, placement, violating, shrunk } => {
                    let victim_gangs: BTreeSet<String> = victims
                        .iter()
                        .map(|&p| {
                            let pod = &f.input.snap.pods[p];
                            let Some(m) = &pod.gang else { return format!("pod {}", pod.key) };
                            match shrunk.iter().find(|&&(j, _)| f.input.snap.gangs[j].key == m.gang) {
                                Some(&(_, n)) => format!("{}: {n} member(s) beyond its minimum", m.gang),
                                None => m.gang.to_string(),
                            }
                        })
                        .collect();
                    let count = victims.len();
                    let list: Vec<String> = victim_gangs.into_iter().collect();
                    let msg = format!(
                        "preempting {count} lower-priority pod(s) ({}) to make room{}; before they go: {why}",
                        list.join(", "),
                        preempt::violations_note(f.input.snap, &violating)
                    );
                    let mut d = Decision::new(g, Reason::Preempting, Phase::Pending, msg, st);
                    d.evictions = victims.into_iter().map(|p| (p, EvictionReason::Preempted)).collect();
                    d.nominations = placement.bindings;
                    return d;
                }
                preempt::Found::Waiting(n) => {
                    let msg = format!("waiting for {n} preempted pod(s) to terminate");
                    return Decision::new(g, Reason::Preempting, Phase::Pending, msg, st);
                }
                preempt::Found::Nothing => {
                    // A class on the gang's object sets the priority preemption works at: said,
                    // since its pods alone may have a higher one.
                    if let (Some(class), Some(p)) = (&gang.priority_class_name, gang.priority) {
                        preemption_note = format!(
                            "; no pods of priority below {p} (the {}'s spec.priorityClassName {class:?}) would make room",
                            gang.source.kind
                        );
                    }
                }
            }
        }
        let why = format!("{why}{preemption_note}");

        // A NonStrict gang's reservations last until it is placed, not a time limit: never on
        // capacity held for another gang. In a gang group the attempt was made on its siblings'
        // placements, which are not made: what it reserves is placed on the cycle's state alone
        // (else their capacity would be committed with it).
        let attempt = if gang.mode == GangMode::NonStrict && (!attempt.backfilled.is_empty() || !alone) {
            self.place_gang_on(g, Txn::default(), false, &[])
        } else {
            attempt
        };
        if gang.mode == GangMode::NonStrict && !attempt.bindings.is_empty() {
            let count = attempt.bindings.len();
            let msg = format!("holding nodes for {count} member(s) until the rest fit. {why}");
            let mut d = Decision::new(g, Reason::Reserved, Phase::Pending, msg, st);
            d.reservations = attempt.bindings;
            d.txn = attempt.txn;
            return d;
        }
        // At most `BACKFILL_TESTS_PER_HOLD` gangs per hold allowed are examined a cycle (each
        // costs a few placements of the gang), as Slurm's `bf_max_job_test` bounds its pass.
        // Charged once a hold exists: before it, a gang that cannot be held costs the bound on
        // its earliest start (one pass over what ends) and at most one placement.
        let tests = (clock_budget(self.clock())).saturating_sub(self.tested.get());
        if let Some(clock) = self.clock().filter(|_| alone && tests > 0) {
            if !self.holds.is_empty() {
                self.tested.set(self.tested.get() + 1);
            }
            let blocked = self.blocked_by(g);
            let room = self.holds.len() < clock.policy.max_reservations as usize;
            let hold = if room { self.find_hold(g, clock) } else { None };
            if !blocked.is_empty() || hold.is_some() {
                let mut msg = String::new();
                if let Some(first) = blocked.iter().map(|h| h.start).min() {
                    msg.push_str(&format!(
                        "would fit now, but on capacity held for {}; a gang may start there only if its time limit ends it a step (backfill.resolution) before then, and {}. ",
                        self.hold_names(&blocked),
                        self.limit_note(g, first)
                    ));
                }
                let reason =
                    if blocked.is_empty() { Reason::WaitingForResources } else { Reason::WaitingForPriority };
                let d = match hold {
                    Some(h) => {
                        let nodes: BTreeSet<usize> = h.bindings.iter().map(|&(_, n)| n).collect();
                        let names: Vec<&str> =
                            nodes.iter().take(5).map(|&n| f.input.snap.nodes[n].name.as_str()).collect();
                        let more = if nodes.len() > names.len() { ", …" } else { "" };
                        msg.push_str(&format!(
                            "Expected to start by {} (as running pods end by their time limits); capacity on {} node(s) is held for it: {}{more}. Now: {why}",
                            h.start,
                            nodes.len(),
                            names.join(", ")
                        ));
                        let mut d = Decision::new(g, reason, Phase::Pending, msg, st);
                        let mut txn = Txn::default();
                        for &(p, n) in &h.bindings {
                            self.ledger.take(&mut txn, n, &f.pods.demand[p]);
                        }
                        d.txn = txn;
                        d.hold = Some(Box::new(h));
                        d
                    }
                    None => {
                        msg.push_str(&format!("Now: {why}"));
                        Decision::new(g, reason, Phase::Pending, msg, st)
                    }
                };
                return d;
            }
            if room {
                let why = format!(
                    "{why}; not expected to start within the backfill window ({}s): what runs, and what is held for gangs ahead of it, does not end in time by the time limits known",
                    clock.policy.window.as_secs()
                );
                let reason = if attempt.topology_failed {
                    Reason::TopologyUnsatisfiable
                } else {
                    Reason::Unschedulable
                };
                return Decision::new(g, reason, Phase::Pending, why, st);
            }
        }
        let reason =
            if attempt.topology_failed { Reason::TopologyUnsatisfiable } else { Reason::Unschedulable };
        Decision::new(g, reason, Phase::Pending, why, st)
    }

    /// `; 1 member(s) refused by the kubelet at admission (ml/w-3 on gpu-2: OutOfnvidia.com/gpu)`
    /// when members failed on their node: the gang is not running, whatever was bound.
    fn failures_note(&self, g: usize) -> String {
        let pods = &self.facts.input.snap.pods;
        let failed: Vec<&crate::read::model::Pod> = self.facts.gangs.members[g]
            .all
            .iter()
            .map(|&p| &pods[p])
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

    /// The backfill clock, when the policy turns backfill on.
    fn clock(&self) -> Option<Timeline<'v>> {
        let policy = self.facts.input.config.backfill.as_ref().filter(|b| b.enabled)?;
        Some(Timeline { now: self.facts.input.now, policy })
    }

    /// Gang `g`'s time limit, were it to start now (backfill on only).
    fn limit(&self, g: usize) -> Option<Duration> {
        let f = self.facts;
        self.clock()?.gang_limit(
            &f.input.snap.gangs[g],
            &f.input.snap.pods,
            f.gangs.members[g].pending.values().flatten().copied(),
        )
    }

    /// The earliest step of the backfill window at which gang `g` fits whole, with what runs
    /// now (and what this cycle placed or held) given back as it is expected to end, and where
    /// it is placed then: the capacity to hold for it. `None`: not within the window.
    fn find_hold(&self, g: usize, clock: Timeline<'_>) -> Option<Hold> {
        let f = self.facts;
        let snap = f.input.snap;
        let ends = self.endings.get_or_init(|| {
            backfill::endings(
                snap,
                clock,
                |n| f.pods.node_index.get(n).copied(),
                |k| f.gangs.gang_index.get(k).copied(),
                |p| f.pods.res.known_demand(&p.requests),
            )
        });
        // What this cycle placed ends by its limits too, and what it held once its gang ends.
        let gang_of = |p: usize| {
            snap.pods[p].gang.as_ref().and_then(|m| f.gangs.gang_index.get(&m.gang)).map(|&g| &snap.gangs[g])
        };
        let mut more: Vec<Ending> = Vec::new();
        for &(p, n) in self.placed {
            if let Some(l) = clock.pod_limit(&snap.pods[p], gang_of(p)) {
                // Counted from a start a step from now at the latest, as a later cycle counts it.
                let at = clock.step(clock.now.plus(l).plus(clock.policy.resolution));
                if at <= clock.horizon() {
                    more.push(Ending { at, node: n, demand: f.pods.demand[p].clone() });
                }
            }
        }
        for h in self.holds {
            // Its pods start a little after its start: counted a step later, as placed pods are.
            let ends = h.end.map(|e| clock.step(e.plus(clock.policy.resolution)));
            let Some(at) = ends.filter(|&t| t <= clock.horizon()) else { continue };
            for &(p, n) in &h.bindings {
                more.push(Ending { at, node: n, demand: f.pods.demand[p].clone() });
            }
        }
        more.sort_by_key(|e| e.at);
        let at_least = self.at_least(g);
        let nodes = snap.nodes.len();
        let (start, placement) =
            backfill::earliest(self.ledger, nodes, ends, &more, at_least.as_ref(), |base| {
                let p = self.place_gang_on(g, base, false, &[]);
                p.satisfied.then_some(p)
            })?;
        Some(Hold { gang: g, start, end: self.limit(g).map(|l| start.plus(l)), bindings: placement.bindings })
    }

    /// What gang `g` needs at the least to fit: the pods its minimum still lacks, each asking at
    /// least what every pending member asks (the least of each resource among them).
    fn at_least(&self, g: usize) -> Option<backfill::AtLeast> {
        let f = self.facts;
        let m = &f.gangs.members[g];
        let gang = &f.input.snap.gangs[g];
        let held: u64 = m.held.values().map(|&n| u64::from(n)).sum();
        let count = gang.min_pods()?.saturating_sub(held);
        let mut least: Option<Vec<(usize, i64)>> = None;
        for &p in m.pending.values().flatten() {
            // Room held for its own members (NonStrict) is its to use, and not in the ledger's
            // free counts: no bound then.
            if f.pods.reserved.contains_key(&p) {
                return None;
            }
            let d = &f.pods.demand[p].0;
            least = Some(match least {
                None => d.clone(),
                Some(l) => l
                    .into_iter()
                    .filter_map(|(r, a)| d.iter().find(|(q, _)| *q == r).map(|&(_, b)| (r, a.min(b))))
                    .collect(),
            });
        }
        Some(backfill::AtLeast { demand: super::ledger::Demand(least?), count })
    }

    /// The holds of gangs ahead in line that keep gang `g` from fitting now: those on the nodes
    /// it would be placed on were nothing held for them (none: it does not fit either way).
    fn blocked_by(&self, g: usize) -> Vec<&'v Hold> {
        if self.holds.iter().all(|h| h.gang == g) {
            return Vec::new();
        }
        let mut txn = Txn::default();
        for h in self.holds.iter().filter(|h| h.gang != g) {
            for &(p, n) in &h.bindings {
                self.ledger.give(&mut txn, n, &self.facts.pods.demand[p]);
            }
        }
        // Not even room for its least demand with every hold given back: no need to try.
        let nodes = self.facts.input.snap.nodes.len();
        if self.at_least(g).is_some_and(|need| !backfill::has_room(self.ledger, &txn, nodes, &need)) {
            return Vec::new();
        }
        let free = self.place_gang_on(g, txn, false, &[]);
        if !free.satisfied {
            return Vec::new();
        }
        let nodes: BTreeSet<usize> = free.bindings.iter().map(|&(_, n)| n).collect();
        self.holds
            .iter()
            .filter(|h| h.gang != g && h.bindings.iter().any(|(_, n)| nodes.contains(n)))
            .collect()
    }

    /// `ns/a (expected to start at T), ns/b (…)`: the gangs of `holds`, once each.
    fn hold_names(&self, holds: &[&Hold]) -> String {
        let mut seen = BTreeSet::new();
        holds
            .iter()
            .filter(|h| seen.insert(h.gang))
            .map(|h| {
                format!("{} (expected to start at {})", self.facts.input.snap.gangs[h.gang].key, h.start)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// What gang `g`'s time limit says about backfilling: why it may not use held capacity.
    fn limit_note(&self, g: usize, first_start: Time) -> String {
        match self.limit(g) {
            None => format!(
                "it states no time limit ({}, activeDeadlineSeconds, or the policy's backfill.defaultTimeLimit), so it never starts on held capacity",
                crate::read::labels::ANNOTATION_TIME_LIMIT
            ),
            Some(l) => {
                let end = at(self.facts.input.now.plus(l));
                let res = self.clock().map_or(0, |c| c.policy.resolution.as_secs());
                if end > first_start {
                    format!("its time limit of {}s would end it at {end}, after {first_start}", l.as_secs())
                } else {
                    format!(
                        "its time limit of {}s would end it at {end}, less than a step ({res}s, backfill.resolution) before {first_start}: its pods start a little after they are bound",
                        l.as_secs()
                    )
                }
            }
        }
    }

    /// The phase of a gang that is placed: `Running` once its minimum runs.
    fn placed_phase(&self, g: usize) -> Phase {
        if tree::satisfied(&self.facts.input.snap.gangs[g], &self.facts.gangs.members[g].running) {
            Phase::Running
        } else {
            Phase::Scheduled
        }
    }
}

/// Gangs a cycle examines for backfill per hold it may make: each costs a few placements of the
/// gang (the hold's search, and whether held capacity is what keeps it out).
const BACKFILL_TESTS_PER_HOLD: u32 = 4;

/// How many gangs a cycle examines for backfill (none when backfill is off).
fn clock_budget(clock: Option<Timeline<'_>>) -> u32 {
    clock.map_or(0, |c| c.policy.max_reservations.max(1).saturating_mul(BACKFILL_TESTS_PER_HOLD))
}

/// The gang's minimum as its message says it: `minimum 4`, or for a gang of subgroups, whose
/// minimum counts subgroups, `minimum 2 of 3 subgroups`.
fn minimum(gang: &crate::read::model::Gang) -> String {
    if gang.subgroups.is_empty() {
        format!("minimum {}", gang.min_member)
    } else {
        let top = gang.subgroups.iter().filter(|s| s.parent.is_none()).count();
        format!("minimum {} of {top} subgroup(s)", gang.min_member)
    }
}

/// Why a gang object that waits to be admitted ([`crate::read::model::Admission`]: a Volcano
/// PodGroup still `Pending`) has no pods yet: Volcano's job controller creates them only once it
/// is `Inqueue`, which the scheduler writes for opted-in PodGroups.
fn admission_note(
    a: &crate::read::model::Admission,
    namespaces: &std::collections::BTreeMap<String, crate::read::model::Labels>,
    namespace: &str,
) -> String {
    let label = crate::read::labels::LABEL_ENABLED;
    let enabled = namespaces.get(namespace).and_then(|l| l.get(label));
    let phase = if a.phase.is_empty() { "has no phase yet" } else { "is Pending" };
    let inqueue = crate::read::dialect::volcano::PHASE_INQUEUE;
    if let Some(kind) = &a.kubeflow {
        return if a.opted_in(enabled) {
            format!(
                "; its Volcano PodGroup {phase}: the Kubeflow training operator creates the {kind}'s pods once it is {inqueue}, to which the scheduler moves it"
            )
        } else {
            format!(
                "; its Volcano PodGroup {phase} and namespace {namespace} is not opted in ({label}=true): the Kubeflow training operator creates the {kind}'s pods only once a scheduler moves it to {inqueue}, and gang-scheduler moves it only in an opted-in namespace (the operator does not copy the job's labels to it)"
            )
        };
    }
    if a.opted_in(enabled) {
        format!(
            "; its PodGroup {phase}: Volcano's job controller creates the pods once it is {}, to \
             which the scheduler moves it",
            crate::read::dialect::volcano::PHASE_INQUEUE
        )
    } else {
        format!(
            "; its PodGroup {phase} and, as far as what was read shows, is not opted in \
             ({label}=true on it, copied from its Volcano Job, or on namespace {namespace}): \
             Volcano's job controller creates no pods until a scheduler moves it to {}, and \
             gang-scheduler moves only opted-in PodGroups",
            crate::read::dialect::volcano::PHASE_INQUEUE
        )
    }
}
