//! Step 2 of the cycle: each gang's members counted — which exist, which hold a node, which run,
//! which wait for one of ours — per leaf subgroup, each gang's priority, and the state it starts
//! the cycle in.

use std::collections::{BTreeMap, BTreeSet};

use crate::decide::plan::Counts;
use crate::read::model::{Gang, GangState, PodPhase, Snapshot};
use crate::read::tree::{self, LeafCounts};

/// A gang's members as the cycle found them.
#[derive(Clone, Debug, Default)]
pub(super) struct Members {
    /// Every pod that claims the gang, in pod-key order.
    pub all: Vec<usize>,
    /// Pods with a node that are not finished, per leaf.
    pub bound: LeafCounts,
    /// Running or succeeded, per leaf (what "the minimum is running" counts).
    pub running: LeafCounts,
    /// Active (pending, bound, running) or succeeded, per leaf: what exists toward the quorum.
    pub exist: LeafCounts,
    /// Bound or succeeded, per leaf: what already counts toward satisfaction.
    pub held: LeafCounts,
    /// Pending pods we may place, by leaf.
    pub pending: BTreeMap<String, Vec<usize>>,
    /// Pending members held back by `spec.schedulingGates`, per leaf: they exist (toward the
    /// quorum) but are never placed.
    pub gated: LeafCounts,
    /// Gate name → how many pending members it holds back.
    pub gates: BTreeMap<String, u32>,
    /// Pending members that ask for a scheduling feature the cycle does not evaluate, per leaf:
    /// they exist (toward the quorum) but are never placed ([`crate::read::model::Pod::unevaluated`]).
    pub unevaluated: LeafCounts,
    /// The first such member, in pod-key order, for the message.
    pub first_unevaluated: Option<usize>,
    /// Pending members that name another scheduler.
    pub foreign: usize,
    /// Members whose subgroup is missing or not a leaf of the gang (an inner subgroup, say).
    pub orphans: usize,
    /// The first such member, in pod-key order, for the message.
    pub first_orphan: Option<usize>,
    pub counts: Counts,
}

/// Every gang's members (indexed like `snap.gangs`), from `claimed`: (pod, gang) for every pod
/// that claims a gang of the snapshot, in pod order. Pods of ours are those that name
/// `scheduler_name`.
pub(super) fn count(snap: &Snapshot, scheduler_name: &str, mut claimed: Vec<(usize, usize)>) -> Vec<Members> {
    let mut members = vec![Members::default(); snap.gangs.len()];
    // Members in pod-key order; only pods that claim a gang are sorted (most pods of a big
    // cluster belong to none), and not at all when the snapshot already lists them in order.
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
                entry.first_orphan.get_or_insert(i);
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
        } else if p.is_pending() && !p.unevaluated().is_empty() {
            bump(&mut entry.unevaluated);
            entry.first_unevaluated.get_or_insert(i);
        } else if p.is_pending() {
            if p.scheduler_name == scheduler_name {
                entry.pending.entry(leaf.to_string()).or_default().push(i);
            } else {
                entry.foreign += 1;
            }
        }
    }
    members
}

/// Each gang's priority: its own, else its highest member's (indexed like `snap.gangs`).
pub(super) fn priorities(snap: &Snapshot, members: &[Members]) -> Vec<i32> {
    snap.gangs
        .iter()
        .zip(members)
        .map(|(gang, m)| {
            gang.priority.or_else(|| m.all.iter().map(|&p| snap.pods[p].priority).max()).unwrap_or(0)
        })
        .collect()
}

/// Each gang's state as the cycle starts from it (indexed like `snap.gangs`): the gang's own —
/// its `Gang`'s status, or what the scheduler carried since its last cycle — unless one of its
/// active members keeps a newer one (a higher revision) for this gang and this object
/// ([`crate::read::model::Persisted`]): after a restart or a change of leader, that is where the state
/// of every gang without a `Gang` of its own is found. For such a gang, what was carried counts
/// only while the cluster holds it: a revision that no active member keeps any longer (the
/// members it was written on are gone) is dropped for the newest one they do keep, or none — what
/// a restarted scheduler would find.
pub(super) fn states(snap: &Snapshot, members: &[Members]) -> Vec<GangState> {
    snap.gangs
        .iter()
        .zip(members)
        .map(|(gang, m)| {
            if !gang.keeps_state_on_pods() {
                return gang.state.clone();
            }
            let mut kept: Option<&GangState> = None;
            for p in m.all.iter().map(|&p| &snap.pods[p]) {
                if let Some(k) = p.persisted.as_deref().filter(|k| keeps(p, k, gang))
                    && kept.is_none_or(|n| k.state.rev > n.rev)
                {
                    kept = Some(&k.state);
                }
            }
            match kept {
                // Carried and kept alike (the carried copy also holds what goes along only when
                // something is written), or never kept at all.
                Some(k) if k.rev == gang.state.rev => gang.state.clone(),
                None if gang.state.rev == 0 => gang.state.clone(),
                Some(k) => k.clone(),
                None => GangState::default(),
            }
        })
        .collect()
}

/// Whether `pod` keeps a state of `gang` (not of another gang, nor of an earlier object of the
/// same name) that counts: only an active member does — the state is written on those; a pod that
/// finished holds it as it was then, and one being deleted may be of the gang's previous
/// incarnation (a gang deleted and created again at once).
pub(super) fn keeps(
    pod: &crate::read::model::Pod,
    kept: &crate::read::model::Persisted,
    gang: &Gang,
) -> bool {
    pod.is_active() && kept.gang == gang.key && kept.uid == gang.uid
}

/// `2 of 8 members gated by kueue.x-k8s.io/admission` when the gang cannot be satisfied without
/// members that `spec.schedulingGates` hold back, or that ask for a scheduling feature the cycle
/// does not evaluate (`… ask for spec.volumes[0].persistentVolumeClaim (ml/w-0), which the
/// scheduler does not evaluate yet (VolumeBinding, …)`): it waits, as it waits for members that do
/// not exist yet, and its timeout does not run. A gang with members already on nodes is not held
/// here: it goes on to placement, where a half-bound gang is completed or released.
pub(super) fn gated_wait(
    gang: &crate::read::model::Gang,
    m: &Members,
    pods: &[crate::read::model::Pod],
) -> Option<String> {
    if (m.gated.is_empty() && m.unevaluated.is_empty()) || m.held.values().any(|&n| n > 0) {
        return None;
    }
    let mut placeable = m.exist.clone();
    for (leaf, n) in m.gated.iter().chain(&m.unevaluated) {
        if let Some(c) = placeable.get_mut(leaf) {
            *c = c.saturating_sub(*n);
        }
    }
    if tree::satisfied(gang, &placeable) {
        return None;
    }
    let need = gang.min_pods().unwrap_or(u64::from(gang.min_member));
    let mut parts = Vec::new();
    let gated: u32 = m.gated.values().sum();
    if gated > 0 {
        let by = if m.gates.len() == 1 {
            m.gates.keys().map(String::as_str).collect::<String>()
        } else {
            m.gates.iter().map(|(gate, n)| format!("{gate} ({n})")).collect::<Vec<_>>().join(", ")
        };
        parts.push(format!("{gated} of {need} members gated by {by}"));
    }
    if let Some(first) = m.first_unevaluated.and_then(|p| pods.get(p)) {
        let waiting: u32 = m.unevaluated.values().sum();
        parts.push(format!("{waiting} of {need} members {}", unevaluated_note(first)));
    }
    Some(parts.join("; "))
}

/// `ask for spec.volumes[0].persistentVolumeClaim (pod ml/w-0), which the scheduler does not
/// evaluate yet (VolumeBinding, …): they wait` — said of members like `pod`.
pub(super) fn unevaluated_note(pod: &crate::read::model::Pod) -> String {
    let fields = pod.unevaluated();
    let first = fields.first().map(String::as_str).unwrap_or_default();
    let more =
        if fields.len() > 1 { format!(" and {} more field(s)", fields.len() - 1) } else { String::new() };
    let needs = crate::read::coverage::needs(first).map(|p| format!(" ({p})")).unwrap_or_default();
    format!(
        "ask for {first}{more} (pod {}), which the scheduler does not evaluate yet{needs}: they wait",
        pod.key
    )
}
