//! Step 5 of the cycle: decisions become the [`Plan`].
//!
//! A [`Decision`] is what the cycle decided for one gang — its reason, phase, state and message,
//! and the bindings, evictions, nominations and reservations that follow — in the cycle's own
//! terms (pod and node indices). [`assemble`] turns the decisions into the plan's keys and names,
//! in sorted lists.

use super::ledger::Txn;
use super::members::Members;
use super::preempt::Allowance;
use super::volumes::Work;
use crate::model::{GangState, Reservation};
use crate::plan::{Binding, Eviction, EvictionReason, Nomination, Outcome, Phase, VolumeBinding};
use crate::{Plan, Reason, Snapshot};

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
        }
    }
}

/// The plan of a cycle, from the snapshot, each gang's `members` (indexed like `snap.gangs`),
/// every decision (in the order made), the pods outside any gang bound as `singles` (pod, node)
/// and those whose claims are bound first (`single_volumes`). Lists are sorted; outcomes are in
/// gang-key order.
pub(super) fn assemble(
    snap: &Snapshot,
    members: &[Members],
    decisions: Vec<Decision>,
    singles: &[(usize, usize)],
    single_volumes: &[Work],
) -> Plan {
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
    let volume = |w: &Work| VolumeBinding {
        pod: pods[w.pod].key.clone(),
        node: nodes[w.node].name.clone(),
        claim: w.claim.clone(),
        volume: w.volume.clone(),
    };
    plan.volumes.extend(single_volumes.iter().map(volume));
    for d in decisions {
        let gang = &gangs[d.gang];
        tracing::debug!(gang = %gang.key, reason = %d.reason, "gang decided");
        plan.bindings.extend(d.bindings.iter().map(|&(p, n)| binding(p, n)));
        plan.volumes.extend(d.volumes.iter().map(volume));
        for &(p, reason) in &d.evictions {
            let pod = &pods[p];
            let Some(node) = pod.node_name.clone() else { continue };
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
        plan.outcomes.push(Outcome {
            gang: gang.key.clone(),
            reason: d.reason,
            phase: d.phase,
            message: d.message,
            counts,
            state: d.state,
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
    plan
}
