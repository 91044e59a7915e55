//! Step 5 of the cycle: decisions become the [`Plan`].
//!
//! A [`Decision`] is what the cycle decided for one gang — its reason, phase, state and message,
//! and the bindings, evictions, nominations and reservations that follow — in the cycle's own
//! terms (pod and node indices). [`assemble`] turns the decisions into the plan's keys and names,
//! in sorted lists.

use super::GangFacts;
use super::ledger::Txn;
use super::preempt::Allowance;
use super::volumes::{Todo, Work};
use crate::decide::plan::{
    Binding, ClaimAllocation, Eviction, EvictionReason, Keep, Nomination, Outcome, Phase, VolumeBinding,
};
use crate::decide::plan::{Plan, Reason};
use crate::read::model::SmolStr;
use crate::read::model::Snapshot;
use crate::read::model::{GangState, Persisted, Reservation};

/// What the cycle decided for one gang.
#[derive(Debug)]
pub(super) struct Decision {
    pub gang: usize,
    pub reason: Reason,
    pub phase: Phase,
    /// What a user reads: why, down to nodes and domains.
    pub message: String,
    /// The gang state to persist and hand back in the next snapshot.
    pub state: GangState,
    /// (pod, node) bound now.
    pub bindings: Vec<(usize, usize)>,
    /// Pods evicted, and why (a preemption makes room for this gang).
    pub evictions: Vec<(usize, EvictionReason)>,
    /// (pod, node) where members go once preempted pods are gone.
    pub nominations: Vec<(usize, usize)>,
    /// (pod, node) held for a `NonStrict` gang until the rest fits.
    pub reservations: Vec<(usize, usize)>,
    /// The capacity the bindings and reservations take, committed to the ledger.
    pub txn: Txn,
    /// Claims bound first: their pods are placed (their capacity taken) but not bound yet.
    pub volumes: Vec<Work>,
    /// Capacity held for the gang from when it is expected to fit (backfill); taken by `txn`.
    /// Boxed: one decision per gang, and few gangs have one.
    pub hold: Option<Box<super::backfill::Hold>>,
    /// Placed on capacity held for gangs ahead in line (backfill).
    pub backfilled: bool,
}

impl Decision {
    /// A decision with an outcome and nothing else.
    pub fn new(gang: usize, reason: Reason, phase: Phase, message: String, state: GangState) -> Self {
        Decision {
            gang,
            reason,
            phase,
            message,
            state,
            bindings: Vec::new(),
            evictions: Vec::new(),
            nominations: Vec::new(),
            reservations: Vec::new(),
            txn: Txn::default(),
            volumes: Vec::new(),
            hold: None,
            backfilled: false,
        }
    }
}

/// Where a gang's members are after a decision, as far as keeping its state goes.
#[derive(Clone, Copy, Debug)]
struct Where {
    /// Some member holds a node.
    holds_nodes: bool,
    /// Some active member is still pending (not bound by the decision either).
    pending: bool,
}

/// What of a gang's state must be kept: when it fell below its minimum (or that it no longer is)
/// and whether it gave up, always; the wait (when it started, timeouts, backoff) while no member
/// holds a node, or some member still waits beside those that do (it would carry the wait into a
/// later one). The rest (whether it was ever satisfied; the wait of a gang whose members all hold
/// nodes) goes along when something is written, never alone: a gang placed whole, or running,
/// costs no write.
type Matters = (
    Option<crate::read::model::Time>,
    Option<crate::read::model::Time>,
    u32,
    Option<crate::read::model::Time>,
    bool,
);

fn what_matters(s: &GangState, w: Where) -> Matters {
    let wait = !w.holds_nodes || w.pending;
    (
        s.degraded_since,
        s.waiting_since.filter(|_| wait),
        if wait { s.timeouts } else { 0 },
        s.backoff_until.filter(|_| wait),
        s.failed,
    )
}

/// `after`, with the revision of `before` — raised by one when what must be kept changed
/// ([`what_matters`]).
fn revised(before: &GangState, mut after: GangState, w: Where) -> GangState {
    after.rev = if what_matters(before, w) == what_matters(&after, w) {
        before.rev
    } else {
        before.rev.saturating_add(1)
    };
    after
}

/// The writes that keep `state` on the active `members` of `gang` that do not carry it. A revision
/// names one content: when some member must be written (it is new to the gang, or behind) and a
/// member already carries this revision with other content (one that did not matter when it was
/// written), the revision is raised and every member written — so no two members ever carry one
/// revision with two contents, and a restarted leader reads back exactly what this one holds.
fn keep(
    gang: &crate::read::model::Gang,
    pods: &[crate::read::model::Pod],
    members: &[usize],
    state: &mut GangState,
) -> Vec<Keep> {
    if !gang.keeps_state_on_pods() || state.rev == 0 {
        return Vec::new();
    }
    fn of_gang<'p>(p: &'p crate::read::model::Pod, gang: &crate::read::model::Gang) -> Option<&'p Persisted> {
        p.persisted.as_deref().filter(|k| super::members::keeps(p, k, gang))
    }
    let behind = |p: &crate::read::model::Pod, rev: u64| {
        p.is_active() && of_gang(p, gang).is_none_or(|k| k.state.rev < rev)
    };
    let active = members.iter().map(|&p| &pods[p]).filter(|p| p.is_active());
    if !active.clone().any(|p| behind(p, state.rev)) {
        return Vec::new();
    }
    if active.clone().filter_map(|p| of_gang(p, gang)).any(|k| k.state.rev == state.rev && k.state != *state)
    {
        state.rev = state.rev.saturating_add(1);
    }
    let text = Persisted { gang: gang.key.clone(), uid: gang.uid.clone(), state: state.clone() }.to_text();
    active
        .filter(|p| behind(p, state.rev))
        .map(|p| Keep { pod: p.key.clone(), uid: p.uid.clone(), rev: state.rev, text: text.clone() })
        .collect()
}

/// The plan of a cycle, from the snapshot, each gang's members and starting state (`gangs`,
/// indexed like `snap.gangs`), every decision (in the order made), the pods outside any gang
/// bound as `singles` (pod, node), those whose claims are bound first (`single_volumes`), and the
/// cycle's `now`. Lists are sorted; outcomes are in gang-key order.
pub(super) fn assemble(
    snap: &Snapshot,
    gangs_facts: &GangFacts<'_>,
    decisions: Vec<Decision>,
    singles: &[(usize, usize)],
    single_volumes: &[Work],
    now: crate::read::model::Time,
) -> Plan {
    let members = &gangs_facts.members;
    let (pods, nodes, gangs) = (&snap.pods, &snap.nodes, &snap.gangs);
    let binding = |p: usize, n: usize| Binding {
        pod: pods[p].key.clone(),
        uid: pods[p].uid.clone(),
        node: nodes[n].name.clone(),
    };
    let mut plan = Plan::default();
    // Evictions take from the PodDisruptionBudgets in the order they were decided (as the
    // victim choice counted them); a preemption's violation is reported.
    let mut allowance = Allowance::new(snap, std::iter::empty());
    plan.bindings.reserve_exact(singles.len() + decisions.iter().map(|d| d.bindings.len()).sum::<usize>());
    plan.bindings.extend(singles.iter().map(|&(p, n)| binding(p, n)));
    let work = |plan: &mut Plan, w: &Work| match &w.todo {
        Todo::Volume(volume) => plan.volumes.push(VolumeBinding {
            pod: pods[w.pod].key.clone(),
            node: nodes[w.node].name.clone(),
            claim: w.claim.clone(),
            volume: volume.clone(),
        }),
        Todo::Devices(allocation) => plan.claims.push(ClaimAllocation {
            pod: pods[w.pod].key.clone(),
            uid: pods[w.pod].uid.clone(),
            node: nodes[w.node].name.clone(),
            claim: w.claim.clone(),
            allocation: allocation.clone(),
        }),
    };
    for w in single_volumes {
        work(&mut plan, w);
    }
    for d in decisions {
        let gang = &gangs[d.gang];
        tracing::debug!(gang = %gang.key, reason = %d.reason, "gang decided");
        plan.bindings.extend(d.bindings.iter().map(|&(p, n)| binding(p, n)));
        for w in &d.volumes {
            work(&mut plan, w);
        }
        for &(p, reason) in &d.evictions {
            let pod = &pods[p];
            let Some(node) = pod.node_name.as_deref().map(SmolStr::new) else { continue };
            let violated = allowance.take(pod);
            let budget =
                violated.filter(|_| reason == EvictionReason::Preempted).map(|b| snap.budgets[b].key.clone());
            plan.evictions.push(Eviction {
                pod: pod.key.clone(),
                uid: pod.uid.clone(),
                node,
                reason,
                gang: pod.gang.as_ref().map(|m| m.gang.clone()),
                preemptor: (reason == EvictionReason::Preempted).then(|| gang.key.clone()),
                budget,
            });
        }
        plan.nominations.extend(
            d.nominations
                .iter()
                .map(|&(p, n)| Nomination { pod: pods[p].key.clone(), node: nodes[n].name.clone() }),
        );
        plan.reservations.extend(d.reservations.iter().map(|&(p, n)| Reservation {
            pod: pods[p].key.clone(),
            node: nodes[n].name.clone(),
            gang: gang.key.clone(),
        }));
        let mut counts = members[d.gang].counts;
        let binding = u32::try_from(d.bindings.len()).unwrap_or(u32::MAX);
        counts.bound += binding;
        counts.binding = binding;
        let waiting = members[d.gang].all.iter().filter(|&&p| pods[p].is_pending()).count();
        let at = Where { holds_nodes: counts.bound > 0, pending: waiting > d.bindings.len() };
        let before = &gangs_facts.states[d.gang];
        let first = d.reason == Reason::Scheduled && counts.bound == counts.binding;
        let waited_since = first.then(|| before.waiting_since.unwrap_or(now));
        let state = revised(before, d.state, at);
        let mut state = state;
        plan.keep.extend(keep(gang, pods, &members[d.gang].all, &mut state));
        plan.outcomes.push(Outcome {
            gang: gang.key.clone(),
            reason: d.reason,
            phase: d.phase,
            message: d.message,
            counts,
            state,
            waited_since,
            expected_start: d.hold.as_ref().map(|h| h.start),
            held_nodes: d
                .hold
                .iter()
                .flat_map(|h| h.bindings.iter().map(|&(_, n)| nodes[n].name.clone()))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect(),
            backfilled: d.backfilled,
        });
    }
    plan.bindings.sort();
    plan.bindings.dedup();
    plan.evictions.sort();
    plan.evictions.dedup();
    plan.nominations.sort();
    plan.nominations.dedup();
    plan.reservations.sort();
    plan.reservations.dedup();
    plan.volumes.sort();
    plan.volumes.dedup();
    plan.outcomes.sort_by(|a, b| a.gang.cmp(&b.gang));
    plan.keep.sort();
    plan
}
