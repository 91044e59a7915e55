//! What one scheduling cycle decides: the [`Plan`].
//!
//! A plan is data. The scheduler binary applies it (bind, evict, write status), `kubectl gang
//! simulate` prints it, and tests assert on it. Every list in a plan is sorted, so the same snapshot
//! always gives the same plan, byte for byte.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::read::crd;
use crate::read::model::device::AllocatedDevice;
use crate::read::model::{
    GangKey, GangState, NodeSelectorTerm, ObjectKey, PodKey, Reservation, SmolStr, Time, Toleration,
};
use crate::read::resources::Resources;

/// Bind `pod` (with `uid`) to `node`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Binding {
    pub pod: PodKey,
    pub uid: SmolStr,
    pub node: SmolStr,
}

/// Why a pod is evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EvictionReason {
    /// Displaced by a higher-priority gang (`preemptor` in the eviction).
    Preempted,
    /// Its gang fell below its minimum for longer than the grace period.
    StaleGang,
    /// Its gang timed out with the `Fail` action and releases what it holds.
    TimedOut,
}

/// Evict `pod` from `node` through the Eviction API.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Eviction {
    pub pod: PodKey,
    pub uid: SmolStr,
    pub node: SmolStr,
    pub reason: EvictionReason,
    /// The victim's gang (`None` for a pod outside any gang).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangKey>,
    /// The gang this eviction makes room for (preemption only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptor: Option<GangKey>,
    /// The PodDisruptionBudget this preemption violates (none had a disruption left for the
    /// pod): a last resort, taken only when no set of victims within the budgets makes room. The
    /// Eviction API refuses it until the budget allows it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<ObjectKey>,
}

/// Before `pod` is bound to `node`, its PVC `claim` (unbound, WaitForFirstConsumer) is bound: to
/// the static PV `volume` (the PV's `spec.claimRef`, then the claim's `spec.volumeName`, as the
/// PV controller expects), or — `volume` absent — provisioned for the node (the claim's
/// `volume.kubernetes.io/selected-node` annotation). The pod, and every other member of its gang
/// placed with it, is bound in a later cycle, once each of their claims is bound.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VolumeBinding {
    pub pod: PodKey,
    pub node: SmolStr,
    pub claim: ObjectKey,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
}

/// `pod` will go to `node` once the victims are gone (written as `status.nominatedNodeName`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Nomination {
    pub pod: PodKey,
    pub node: SmolStr,
}

/// A machine-readable reason for a gang's outcome. Stable: it appears in conditions, events,
/// metrics labels and `kubectl gang -o json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Reason {
    /// Placed this cycle (bindings in the plan).
    Scheduled,
    /// Already satisfied: its minimum is bound or running, nothing (more) to place.
    Running,
    /// Fewer members exist than the gang needs.
    WaitingForMembers,
    /// Members exist but do not fit, now.
    Unschedulable,
    /// Would fit in total but not within one domain of the topology key.
    TopologyUnsatisfiable,
    /// Victims are being evicted to make room (evictions and nominations in the plan).
    Preempting,
    /// Waited longer than its timeout.
    TimedOut,
    /// In backoff after a timeout; retried later.
    BackingOff,
    /// A NonStrict gang that holds reservations and waits for more room.
    Reserved,
    /// Does not fit now; with backfill on, capacity is held for it from when it is expected to
    /// fit (`expected_start`, `held_nodes`), as running pods end by their time limits.
    WaitingForResources,
    /// Would fit now, but on capacity held for gangs ahead of it in line (backfill), and its
    /// time limit does not end it before they start (or it states none).
    WaitingForPriority,
    /// Part of a gang group whose other gangs are not satisfiable this cycle.
    WaitingForGangGroup,
    /// Placed, but its members' PVCs are bound or provisioned first (volume bindings in the
    /// plan); they are bound once every one is.
    WaitingForVolumes,
    /// Placed, but its members' ResourceClaims are allocated and reserved for them first (claim
    /// allocations in the plan); they are bound once every one is.
    WaitingForDevices,
    /// Active members fell below the minimum; evicted after the grace period.
    Degraded,
    /// Degraded past its grace period: remaining members evicted.
    Stale,
    /// The gang's spec is invalid; the message says why.
    InvalidSpec,
    /// Every member finished.
    Completed,
    /// Gave up after a timeout with the `Fail` action.
    Failed,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Scheduled => "Scheduled",
            Reason::Running => "Running",
            Reason::WaitingForMembers => "WaitingForMembers",
            Reason::Unschedulable => "Unschedulable",
            Reason::TopologyUnsatisfiable => "TopologyUnsatisfiable",
            Reason::Preempting => "Preempting",
            Reason::TimedOut => "TimedOut",
            Reason::BackingOff => "BackingOff",
            Reason::Reserved => "Reserved",
            Reason::WaitingForResources => "WaitingForResources",
            Reason::WaitingForPriority => "WaitingForPriority",
            Reason::WaitingForGangGroup => "WaitingForGangGroup",
            Reason::WaitingForVolumes => "WaitingForVolumes",
            Reason::WaitingForDevices => "WaitingForDevices",
            Reason::Degraded => "Degraded",
            Reason::Stale => "Stale",
            Reason::InvalidSpec => "InvalidSpec",
            Reason::Completed => "Completed",
            Reason::Failed => "Failed",
        }
    }

    /// True when the gang is (now) placed or running.
    pub fn is_satisfied(self) -> bool {
        matches!(self, Reason::Scheduled | Reason::Running | Reason::Completed)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The coarse phase shown in `kubectl get gangs` and the Gang status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Phase {
    /// Waiting for members or room.
    Pending,
    /// Placed: the minimum is bound, not yet all running.
    Scheduled,
    /// The minimum is running.
    Running,
    /// Below its minimum after having run.
    Degraded,
    /// Every member finished successfully.
    Completed,
    /// Gave up (timeout with `Fail`, or stale).
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Scheduled => "Scheduled",
            Phase::Running => "Running",
            Phase::Degraded => "Degraded",
            Phase::Completed => "Completed",
            Phase::Failed => "Failed",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Member counts for a gang at the end of the cycle (bindings in this plan counted as bound).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Counts {
    /// Active members that exist (pending, bound or running).
    pub members: u32,
    /// Members with a node (including bindings in this plan).
    pub bound: u32,
    /// Of `bound`, the members this plan binds (`bound - binding` have a node already).
    #[serde(default)]
    pub binding: u32,
    /// Members in phase Running.
    pub running: u32,
    pub succeeded: u32,
    pub failed: u32,
}

/// The longest `message` a `metav1.Condition` may carry (apimachinery validates 32 KiB).
pub const CONDITION_MESSAGE_MAX: usize = 32 * 1024;

/// `s` cut to at most `max` bytes on a character boundary, ending in `…` when cut: what the API
/// server's size limits on messages and notes (in bytes) accept.
pub fn within(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    const MORE: &str = "…";
    let mut end = max.saturating_sub(MORE.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MORE}", &s[..end])
}

impl Outcome {
    /// The status a `Gang` object gets for this outcome: phase, counts, the `Scheduled`
    /// condition (reason and message) and the state that must survive a restart (written as
    /// [`crate::read::dialect::kubegang::state_of`] reads it). `previous` is the object's status:
    /// the condition's `lastTransitionTime` moves only when its status changes. `generation` is
    /// the object's `metadata.generation`.
    pub fn gang_status(
        &self,
        generation: Option<i64>,
        previous: Option<&crd::GangStatus>,
        now: Time,
    ) -> crd::GangStatus {
        let status = if self.reason.is_satisfied() { "True" } else { "False" };
        let transition = previous
            .and_then(|p| p.conditions.iter().find(|c| c.type_ == "Scheduled"))
            .filter(|c| c.status == status)
            .map_or_else(|| Time(now.0.div_euclid(1000) * 1000).to_k8s(), |c| c.last_transition_time.clone());
        let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
        let c = self.counts;
        let mut out = crd::GangStatus {
            phase: Some(self.phase.as_str().to_string()),
            members: count(c.members),
            bound: count(c.bound),
            running: count(c.running),
            succeeded: count(c.succeeded),
            failed: count(c.failed),
            conditions: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "Scheduled".into(),
                status: status.into(),
                reason: self.reason.as_str().into(),
                message: within(&self.message, CONDITION_MESSAGE_MAX),
                last_transition_time: transition,
                observed_generation: generation,
            }],
            observed_generation: generation,
            ..crd::GangStatus::default()
        };
        crate::read::dialect::kubegang::write_state(&self.state, &mut out);
        out.expected_start_time = self.expected_start.map(Time::to_k8s);
        if !self.held_nodes.is_empty() {
            out.reservation = Some(crd::GangReservation {
                node_count: count(u32::try_from(self.held_nodes.len()).unwrap_or(u32::MAX)),
                nodes: self
                    .held_nodes
                    .iter()
                    .take(crd::RESERVATION_NODES_LISTED)
                    .map(ToString::to_string)
                    .collect(),
            });
        }
        out
    }
}

/// The per-gang result of a cycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub gang: GangKey,
    pub reason: Reason,
    pub phase: Phase,
    /// What a user reads: why the gang waits and what would unblock it, down to nodes and domains.
    pub message: String,
    pub counts: Counts,
    /// The gang state to persist (in the Gang status) and hand back in the next snapshot.
    pub state: GangState,
    /// For a gang placed for the first time (nothing of it on a node before): since when it
    /// waited — its quorum — as its state said before the cycle. What the scheduler's
    /// `gang_wait_duration_seconds` observes once the bindings are made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_since: Option<Time>,
    /// Backfill: when the gang is expected to start, the time from which capacity is held for it
    /// (`held_nodes`). Found again every cycle from what runs and its time limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_start: Option<Time>,
    /// Backfill: the nodes on which capacity is held for the gang, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_nodes: Vec<SmolStr>,
    /// Backfill: the gang was placed this cycle on capacity held for gangs ahead of it, because
    /// its time limit ends it before they start.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub backfilled: bool,
}

/// Everything one cycle decided. Lists are sorted; outcomes are in gang-key order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub bindings: Vec<Binding>,
    pub evictions: Vec<Eviction>,
    pub nominations: Vec<Nomination>,
    /// NonStrict reservations to carry into the next cycle's snapshot.
    pub reservations: Vec<Reservation>,
    pub outcomes: Vec<Outcome>,
    /// Capacity to ask the cluster autoscaler for (policy `provisioning`), in gang-key order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provisioning: Vec<ProvisioningAsk>,
    /// Gang states to write on member pods that do not carry them yet, in pod-key order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep: Vec<Keep>,
    /// PVCs to bind or provision before the pods placed on them are bound (in a later cycle).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeBinding>,
    /// ResourceClaims to allocate and reserve before the pods placed with them are bound (in a
    /// later cycle), in claim then pod order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ClaimAllocation>,
    /// ResourceClaims reserved for pending pods of ours that this plan does not place: each pod
    /// taken out of `reservedFor`, and the claim deallocated when no other consumer is left (as
    /// kube-scheduler's `Unreserve` and `PostFilter` do), so devices allocated for a gang that
    /// could not be completed are not held while it waits. In claim then pod order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<ClaimRelease>,
}

/// Take pod `uid` out of ResourceClaim `claim`'s `reservedFor`; with `deallocate`, clear its
/// allocation too (the pod was its only consumer).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimRelease {
    pub claim: ObjectKey,
    pub pod: PodKey,
    pub uid: SmolStr,
    pub deallocate: bool,
}

/// Before `pod` is bound to `node`: ResourceClaim `claim` gets `allocation` (absent: it has one
/// already) and `pod` is added to its `reservedFor` — written as kube-scheduler's `PreBind`
/// writes them (the finalizer `resource.kubernetes.io/delete-protection`, then the status). The
/// pod, and every other member of its gang placed with it, is bound in a later cycle, once each
/// of their claims is allocated and reserved for them. One claim shared by several pods appears
/// once per pod, with the same allocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimAllocation {
    pub pod: PodKey,
    /// The pod's UID (the `reservedFor` entry names it).
    pub uid: SmolStr,
    pub node: SmolStr,
    pub claim: ObjectKey,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<DeviceAllocation>,
}

/// A ResourceClaim's `status.allocation`, as the cycle chose it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAllocation {
    /// `devices.results`.
    pub devices: Vec<AllocatedDevice>,
    /// `nodeSelector`, as the API writes it (`{"nodeSelectorTerms": [...]}`); `None`: the
    /// devices are reachable from every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<serde_json::Value>,
    /// `devices.config`: the classes' (`FromClass`) then the claim's (`FromClaim`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<serde_json::Value>,
}

/// A gang's state to keep on one of its active member pods (annotation `kube-gang.io/state`,
/// [`crate::read::model::Persisted`]): the plan leaves the gang in a state of a revision this pod does
/// not carry. Only for gangs without a `Gang` of their own, and only when what must be kept
/// changed (or the pod is new to the gang), so a gang that waits or runs costs no write per cycle.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Keep {
    pub pod: PodKey,
    /// The pod's UID: written only to this pod, not to another of the same name.
    pub uid: SmolStr,
    /// The state's revision.
    pub rev: u64,
    /// The annotation's value.
    pub text: String,
}

/// What a pod needs of a node, as far as placing it goes: members with equal shapes are
/// interchangeable for the autoscaler, so they share one PodTemplate with a count.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape {
    /// Effective requests (as the cycle counts them).
    pub requests: Resources,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity terms (ORed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affinity: Vec<NodeSelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

/// One `podSets[]` entry of a ProvisioningRequest: `count` members of one shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodSet {
    pub shape: Shape,
    /// The members asked for, sorted; `count` is their number. The first is the template's model.
    pub pods: Vec<PodKey>,
    pub count: u32,
}

/// A gang the cycle could not place, even by preemption: the capacity its members with no room
/// need, as one ProvisioningRequest of `class` (`autoscaling.x-k8s.io/v1`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvisioningAsk {
    pub gang: GangKey,
    pub class: String,
    /// Sorted by first pod; at most [`MAX_POD_SETS`].
    pub pod_sets: Vec<PodSet>,
}

/// The most `podSets` a ProvisioningRequest may have (the CRD's `maxItems`).
pub const MAX_POD_SETS: usize = 32;

impl ProvisioningAsk {
    /// Members asked for, over every pod set.
    pub fn count(&self) -> u32 {
        self.pod_sets.iter().map(|s| s.count).sum()
    }
}

impl Plan {
    /// The outcome for `gang`, if the plan has one.
    pub fn outcome(&self, gang: &GangKey) -> Option<&Outcome> {
        self.outcomes.binary_search_by(|o| o.gang.cmp(gang)).ok().map(|i| &self.outcomes[i])
    }

    /// The capacity `gang` asks for, if the plan has an ask for it.
    pub fn provisioning_for(&self, gang: &GangKey) -> Option<&ProvisioningAsk> {
        self.provisioning.binary_search_by(|a| a.gang.cmp(gang)).ok().map(|i| &self.provisioning[i])
    }
}
