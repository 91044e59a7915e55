//! The canonical gang model: every dialect is read into these types, and the scheduling cycle reads
//! only these types.
//!
//! The model is deliberately plain data: owned strings, sorted maps, no references into Kubernetes
//! objects. A [`Snapshot`] is what the cycle sees; building one is the adapters' job (see
//! [`crate::read::convert`] and [`crate::read::dialect`]). What a pod asks of the pods around it (host ports,
//! pod affinity, topology spread) is in [`terms`]; the storage and device objects the volume
//! filters read are in [`volume`].

pub mod device;
pub mod terms;
pub mod volume;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
pub use smol_str::SmolStr;

use crate::read::resources::Resources;
pub use terms::PodTerms;

/// A point in time, in milliseconds since the Unix epoch. The core never reads a clock: `now` is
/// always a parameter, and every timestamp in a snapshot comes from the API.
///
/// Serialises as an RFC 3339 string (`2026-01-01T00:00:00Z`), which is how Kubernetes writes times;
/// deserialises from that or from an integer number of milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub i64);

impl Time {
    /// Milliseconds since the Unix epoch.
    pub const fn millis(self) -> i64 {
        self.0
    }

    /// From whole seconds since the Unix epoch.
    pub const fn from_secs(secs: i64) -> Self {
        Time(secs.saturating_mul(1000))
    }

    /// This time plus a duration (saturating).
    pub fn plus(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Time(self.0.saturating_add(ms))
    }

    /// How long after `earlier` this time is; zero if it is not after it.
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }

    /// Parses an RFC 3339 timestamp as Kubernetes writes it.
    pub fn parse_rfc3339(s: &str) -> Result<Self, String> {
        s.parse::<k8s_openapi::jiff::Timestamp>()
            .map(|t| Time(t.as_millisecond()))
            .map_err(|e| format!("invalid timestamp {s:?}: {e}"))
    }

    /// From a Kubernetes `metav1.Time`.
    pub fn from_k8s(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Self {
        Time(t.0.as_millisecond())
    }

    /// To a Kubernetes `metav1.Time` (out-of-range values clamp to the epoch).
    pub fn to_k8s(self) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
        let ts = k8s_openapi::jiff::Timestamp::from_millisecond(self.0).unwrap_or_default();
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match k8s_openapi::jiff::Timestamp::from_millisecond(self.0) {
            Ok(ts) => write!(f, "{ts}"),
            Err(_) => write!(f, "{}ms", self.0),
        }
    }
}

impl Serialize for Time {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Millis(i64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Millis(ms) => Ok(Time(ms)),
            Raw::Text(s) => Time::parse_rfc3339(&s).map_err(serde::de::Error::custom),
        }
    }
}

/// `namespace/name` of a namespaced object. Ordered by namespace, then name.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectKey {
    pub namespace: SmolStr,
    pub name: SmolStr,
}

impl ObjectKey {
    pub fn new(namespace: impl AsRef<str>, name: impl AsRef<str>) -> Self {
        ObjectKey { namespace: SmolStr::new(namespace), name: SmolStr::new(name) }
    }

    /// Parses `namespace/name`; a bare `name` takes `default_namespace`.
    pub fn parse(s: &str, default_namespace: &str) -> Option<Self> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Some(ObjectKey::new(ns, name))
            }
            None if !s.is_empty() => Some(ObjectKey::new(default_namespace, s)),
            _ => None,
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A pod's key.
pub type PodKey = ObjectKey;
/// A gang's key: the namespace and name of the gang object (or of the CRD-less gang label).
pub type GangKey = ObjectKey;

/// A node taint.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: TaintEffect,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{}={}:{:?}", self.key, v, self.effect),
            None => write!(f, "{}:{:?}", self.key, self.effect),
        }
    }
}

/// A pod toleration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Toleration {
    /// Empty with `Exists` tolerates every taint.
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: TolerationOperator,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `None` tolerates every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TolerationOperator {
    #[default]
    Equal,
    Exists,
}

/// A node's readiness and schedulability as the scheduler sees them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: SmolStr,
    /// Allocatable resources, including `pods` (the pod-count limit).
    pub allocatable: Resources,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub taints: Vec<Taint>,
    #[serde(default)]
    pub unschedulable: bool,
    #[serde(default = "yes")]
    pub ready: bool,
}

fn yes() -> bool {
    true
}

/// One required node-selector requirement (`matchExpressions` / `matchFields`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeSelectorRequirement {
    pub key: String,
    pub operator: NodeSelectorOperator,
    #[serde(default)]
    pub values: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeSelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

impl NodeSelectorOperator {
    /// The operator named `s`, as the API spells it.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "In" => Some(NodeSelectorOperator::In),
            "NotIn" => Some(NodeSelectorOperator::NotIn),
            "Exists" => Some(NodeSelectorOperator::Exists),
            "DoesNotExist" => Some(NodeSelectorOperator::DoesNotExist),
            "Gt" => Some(NodeSelectorOperator::Gt),
            "Lt" => Some(NodeSelectorOperator::Lt),
            _ => None,
        }
    }
}

/// One `nodeSelectorTerm`: all its requirements must hold. Terms are ORed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeSelectorTerm {
    #[serde(default)]
    pub match_expressions: Vec<NodeSelectorRequirement>,
    /// Only `metadata.name` is a valid field key, as in Kubernetes.
    #[serde(default)]
    pub match_fields: Vec<NodeSelectorRequirement>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PodPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PreemptionPolicy {
    #[default]
    PreemptLowerPriority,
    Never,
}

/// How preemption may take a running gang's members.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Disruption {
    /// Members beyond the gang's minimum one at a time, newest first; the minimum only all
    /// together (an upstream PodGroup's `disruptionMode: Single`, the default).
    #[default]
    Members,
    /// Every member together (an upstream PodGroup's or CompositePodGroup's `disruptionMode:
    /// All`, 1.36's `PodGroup`).
    Whole,
    /// Never: it runs to completion once placed (a KAI PodGroup's `preemptibility:
    /// non-preemptible`).
    Never,
    /// Members beyond the gang's minimum one at a time, newest first; the minimum never (KAI's
    /// `semi-preemptible`: the minimum is the gang's core, what runs beyond it is elastic).
    Surplus,
    /// As `Members` while the gang's priority is below this, else `Never` (a KAI PodGroup with no
    /// `preemptibility`: KAI calls priorities of 100 and above non-preemptible).
    Below(i32),
}

impl Disruption {
    /// How preemption may take the gang's members at its `priority`.
    pub fn at(self, priority: i32) -> Disruption {
        match self {
            Disruption::Below(p) if priority >= p => Disruption::Never,
            Disruption::Below(_) => Disruption::Members,
            d => d,
        }
    }

    /// The default.
    pub fn is_members(&self) -> bool {
        *self == Disruption::Members
    }

    /// Whether members beyond the minimum may go one at a time (at a priority: see [`Self::at`]).
    pub fn takes_members(self) -> bool {
        matches!(self, Disruption::Members | Disruption::Surplus)
    }
}

/// Which gang a pod belongs to, and to which leaf subgroup.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Membership {
    pub gang: GangKey,
    /// The leaf subgroup, if the gang has subgroups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subgroup: Option<String>,
}

/// How an elastic gang grows beyond its minimum (`kube-gang.io/elastic-step`): the member counts it
/// may run with. It never runs with fewer than its minimum, whatever the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElasticStep {
    /// Any count (`One`).
    One,
    /// A power of two (`PowerOfTwo`): 1, 2, 4, 8…
    PowerOfTwo,
    /// A multiple of N (`MultipleOf:N`, N ≥ 1).
    MultipleOf(u32),
}

impl ElasticStep {
    /// Reads `One`, `PowerOfTwo` or `MultipleOf:N`.
    pub fn parse(s: &str) -> Result<ElasticStep, String> {
        match s {
            "One" => Ok(ElasticStep::One),
            "PowerOfTwo" => Ok(ElasticStep::PowerOfTwo),
            _ => match s.strip_prefix("MultipleOf:").map(str::parse::<u32>) {
                Some(Ok(n)) if n >= 1 => Ok(ElasticStep::MultipleOf(n)),
                _ => Err(format!(
                    "{s:?} is not One, PowerOfTwo or MultipleOf:N (N a whole number of at least 1)"
                )),
            },
        }
    }

    /// Whether a gang may run with `count` members.
    pub fn allows(self, count: u64) -> bool {
        match self {
            ElasticStep::One => true,
            ElasticStep::PowerOfTwo => count.is_power_of_two(),
            ElasticStep::MultipleOf(n) => count.is_multiple_of(u64::from(n)),
        }
    }

    /// The most members, at most `up_to`, a gang of minimum `min` may run with: the largest count
    /// the step allows, and never below the minimum.
    pub fn most(self, min: u64, up_to: u64) -> u64 {
        let mut t = up_to;
        while t > min && !self.allows(t) {
            t -= 1;
        }
        t.max(min.min(up_to))
    }
}

/// A pod as the scheduler sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pod {
    pub key: PodKey,
    #[serde(default)]
    pub uid: SmolStr,
    /// Effective requests as kube-scheduler computes them (see [`crate::read::resources::effective_requests`]).
    /// The `pods` resource is not included: every pod takes one pod slot.
    #[serde(default)]
    pub requests: Resources,
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity terms (ORed). Empty means no constraint.
    #[serde(default)]
    pub affinity: Vec<NodeSelectorTerm>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    #[serde(default)]
    pub priority: i32,
    #[serde(default)]
    pub preemption_policy: PreemptionPolicy,
    #[serde(default)]
    pub phase: PodPhase,
    /// `spec.nodeName`: set once bound, whoever bound it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// A node nominated for this pod by an earlier preemption (`status.nominatedNodeName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominated_node: Option<String>,
    #[serde(default)]
    pub created: Time,
    /// `metadata.deletionTimestamp` is set: the pod is going away.
    #[serde(default)]
    pub deleting: bool,
    #[serde(default)]
    pub scheduler_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<Membership>,
    /// Why a pod that had a node failed there (`status.reason: status.message`), e.g. the
    /// kubelet refusing it at admission (`OutOfnvidia.com/gpu: …`) because another scheduler raced
    /// us to the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// `spec.schedulingGates` names, in order: while any remains the pod exists but must not be
    /// placed (kube-scheduler leaves gated pods alone; Kueue and others gate pods until they
    /// admit them). The API server only lets gates be removed after creation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scheduling_gates: Vec<String>,
    /// `metadata.labels`: what PodDisruptionBudget selectors match (see [`Budget`]).
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    /// JobSet's exclusive placement (annotation `alpha.jobset.sigs.k8s.io/exclusive-topology`,
    /// a node label key), whichever dialect gives the pod its gang: each of the gang's child Jobs
    /// lands whole in a domain of this label that holds no other child Job's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_topology: Option<String>,
    /// The gang state kept on this pod (annotation [`crate::read::labels::ANNOTATION_STATE`]), if it
    /// carries a readable one. Boxed: most pods carry none.
    #[serde(skip)]
    pub persisted: Option<Box<Persisted>>,
    /// Host ports, required pod affinity and anti-affinity, topology spread constraints, and the
    /// scheduling fields the cycle does not evaluate ([`PodTerms`]); `None` for a pod that asks
    /// none of these (most pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terms: Option<Box<PodTerms>>,
    /// `spec.volumes` the volume filters read: PVCs (ephemeral ones by the name their controller
    /// gives them) and inline disks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<volume::PodVolume>,
    /// `spec.resourceClaims` (DRA), each with the ResourceClaim it names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<volume::PodResourceClaim>,
    /// `status.startTime`: when the kubelet took the pod. With its time limit, when it is
    /// expected to end (backfill, [`crate::decide::config::Backfill`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<Time>,
    /// How long the pod may run: its `kube-gang.io/time-limit` annotation, else
    /// `spec.activeDeadlineSeconds` (the kubelet ends the pod then). `None`: no limit known.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_secs")]
    pub time_limit: Option<Duration>,
}

/// A pod's labels, shared: a snapshot is cloned whole (compaction, the CLI), and at 140,000 pods
/// a clone of every label map would cost more than the rest of the pod. Plain data otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Labels(Arc<BTreeMap<String, String>>);

impl Labels {
    pub fn new(map: BTreeMap<String, String>) -> Self {
        Labels(Arc::new(map))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn map(&self) -> &BTreeMap<String, String> {
        &self.0
    }
}

impl From<BTreeMap<String, String>> for Labels {
    fn from(map: BTreeMap<String, String>) -> Self {
        Labels::new(map)
    }
}

impl Serialize for Labels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BTreeMap::deserialize(d).map(Labels::new)
    }
}

/// A `policy/v1` PodDisruptionBudget as preemption reads it (kube-scheduler's DefaultPreemption):
/// which pods it protects and how many of them may go now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    pub key: ObjectKey,
    /// `spec.selector`. `None` (absent or empty) selects nothing, as kube-scheduler reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// `status.disruptionsAllowed`, as the disruption controller last computed it.
    #[serde(default)]
    pub disruptions_allowed: i32,
    /// `status.disruptedPods`: pods whose eviction the API server already granted; they consume
    /// nothing again.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub disrupted_pods: BTreeSet<String>,
}

impl Budget {
    /// Whether this budget protects `pod`: same namespace, and the selector matches its labels.
    pub fn selects(&self, pod: &Pod) -> bool {
        pod.key.namespace == self.key.namespace
            && !pod.labels.is_empty()
            && self.selector.as_ref().is_some_and(|s| s.matches(&pod.labels))
    }
}

/// A `metav1.LabelSelector` (`matchLabels` and `matchExpressions`, ANDed). Never empty: an
/// empty selector is read as `None` where it means "nothing" (see [`Budget::selector`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelRequirement>,
}

/// One `matchExpressions` entry: `In`, `NotIn`, `Exists` or `DoesNotExist`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LabelRequirement {
    pub key: String,
    pub operator: LabelOperator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LabelOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl LabelSelector {
    /// No requirement at all: it selects everything (apimachinery's `Selector.Empty()`).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// [`LabelSelector::matches`] on a node's labels.
    pub fn matches_map(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_by(|k| labels.get(k).map(String::as_str))
    }

    /// apimachinery's rules: every `matchLabels` pair present, every requirement met (`NotIn`
    /// and `DoesNotExist` hold when the key is absent).
    pub fn matches(&self, labels: &Labels) -> bool {
        self.matches_by(|k| labels.get(k))
    }

    fn matches_by<'l>(&self, get: impl Fn(&str) -> Option<&'l str>) -> bool {
        let labels = get;
        self.match_labels.iter().all(|(k, v)| labels(k) == Some(v.as_str()))
            && self.match_expressions.iter().all(|r| {
                let value = labels(&r.key);
                match r.operator {
                    LabelOperator::In => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                    LabelOperator::NotIn => value.is_none_or(|v| r.values.iter().all(|x| x != v)),
                    LabelOperator::Exists => value.is_some(),
                    LabelOperator::DoesNotExist => value.is_none(),
                }
            })
    }
}

impl Pod {
    /// Bound to a node (or running there) and not finished: it uses the node's resources.
    pub fn uses_node(&self) -> bool {
        self.node_name.is_some() && !matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    /// Held back by `spec.schedulingGates`: it exists, but no scheduler may place it yet.
    pub fn is_gated(&self) -> bool {
        !self.scheduling_gates.is_empty()
    }

    /// Waiting for a node.
    pub fn is_pending(&self) -> bool {
        self.node_name.is_none() && self.phase == PodPhase::Pending && !self.deleting
    }

    /// Refused by the kubelet at admission (as opposed to failing while it ran).
    pub fn rejected_at_admission(&self) -> bool {
        self.failure.as_deref().is_some_and(|f| {
            let reason = f.split(':').next().unwrap_or("");
            reason.starts_with("OutOf")
                || matches!(
                    reason,
                    "UnexpectedAdmissionError"
                        | "NodeAffinity"
                        | "NodeSelectorMismatching"
                        | "PodOSNotSupported"
                )
        })
    }

    /// Counts toward its gang's quorum: pending, bound or running, and not being deleted.
    pub fn is_active(&self) -> bool {
        !self.deleting && matches!(self.phase, PodPhase::Pending | PodPhase::Running | PodPhase::Unknown)
    }

    /// What it asks of the pods around it, and what of it the cycle does not evaluate.
    pub fn terms(&self) -> Option<&PodTerms> {
        self.terms.as_deref()
    }

    /// The field paths of what it asks that the cycle does not evaluate: while there is any, the
    /// pod is not placed ([`PodTerms::unevaluated`]).
    pub fn unevaluated(&self) -> &[String] {
        self.terms.as_deref().map_or(&[], |t| &t.unevaluated)
    }

    /// Required pod anti-affinity terms: they keep the pods they select out of its domains.
    pub fn anti_affinity(&self) -> &[terms::AffinityTerm] {
        self.terms.as_deref().map_or(&[], |t| &t.anti_affinity)
    }

    /// Host ports it binds.
    pub fn host_ports(&self) -> &[terms::HostPort] {
        self.terms.as_deref().map_or(&[], |t| &t.host_ports)
    }
}

/// All-or-nothing strictness.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum GangMode {
    /// Nothing is held across cycles: a gang that does not fit whole releases everything.
    #[default]
    Strict,
    /// Partial placements are reserved across cycles until the gang's timeout.
    NonStrict,
}

/// Where a gang was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Dialect {
    /// `kube-gang.io/v1alpha1` `Gang`.
    KubeGang,
    /// `kube-gang.io/*` pod annotations, no CRD.
    KubeGangAnnotations,
    /// Upstream `scheduling.k8s.io` Workload / PodGroup / CompositePodGroup.
    Upstream,
    /// scheduler-plugins coscheduling `scheduling.x-k8s.io/v1alpha1` PodGroup.
    Coscheduling,
    /// Volcano `scheduling.volcano.sh/v1beta1` PodGroup.
    Volcano,
    /// Koordinator `gang.scheduling.koordinator.sh/*` annotations.
    Koordinator,
    /// KAI-Scheduler `scheduling.run.ai/v2alpha2` PodGroup.
    Kai,
    /// NVIDIA Grove `scheduler.grove.io/v1alpha1` PodGang.
    Grove,
}

impl Dialect {
    /// True for dialects whose gangs live only in pod annotations (no gang object): their state
    /// lives on their members ([`Persisted`]), and their gang is as old as its oldest claiming pod.
    pub fn is_crd_less(self) -> bool {
        match self {
            Dialect::KubeGangAnnotations | Dialect::Koordinator => true,
            Dialect::KubeGang
            | Dialect::Upstream
            | Dialect::Coscheduling
            | Dialect::Volcano
            | Dialect::Kai
            | Dialect::Grove => false,
        }
    }

    /// Short, stable name used in CLI output (`SOURCE` column) and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::KubeGang => "kube-gang",
            Dialect::KubeGangAnnotations => "kube-gang/annotations",
            Dialect::Upstream => "scheduling.k8s.io",
            Dialect::Coscheduling => "coscheduling",
            Dialect::Volcano => "volcano",
            Dialect::Koordinator => "koordinator",
            Dialect::Kai => "kai",
            Dialect::Grove => "grove",
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The origin of a gang: dialect and object kind (`Gang`, `PodGroup`, `Pod` for annotation gangs).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Source {
    pub dialect: Dialect,
    pub kind: String,
}

/// One subgroup of a hierarchical gang. A leaf's `min_member` counts pods; an inner subgroup's counts
/// satisfied children, and its `pod_floor` (KAI's mid-level `minMember`) pods of all its leaves.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SubGroup {
    pub name: String,
    /// `None` for a top-level subgroup (child of the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    pub min_member: u32,
    /// Pods the leaves under this inner subgroup need together, on top of the children its
    /// `min_member` counts (KAI's mid-level `minMember` counts descendant pods). 0: no floor
    /// beyond the children's; a leaf's is always 0. See [`crate::read::tree::subgroup_satisfied`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pod_floor: u32,
    /// Every member under this subgroup lands in one domain of this node label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_key: Option<String>,
    /// A narrower node label whose domains are tried first for this subgroup's members: all of
    /// them in one of its domains if any takes them, else as `topology_key` allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_preferred: Option<String>,
}

/// The state of a gang that only the API holds between cycles (read from the gang's status; written
/// back from [`crate::decide::plan::Outcome`]). The scheduler keeps nothing else in memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GangState {
    /// When the gang first became schedulable-in-principle (quorum present) and started waiting for
    /// placement; the timeout runs from here. `None`: not started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<Time>,
    /// When active members first fell below the minimum after the gang had been satisfied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_since: Option<Time>,
    /// Number of timeouts so far (drives retry backoff).
    #[serde(default)]
    pub timeouts: u32,
    /// While set and after `now`, the gang is not attempted (backoff after a timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_until: Option<Time>,
    /// The gang was satisfied at some point (its minimum was running or bound).
    #[serde(default)]
    pub was_satisfied: bool,
    /// A terminal failure after a timeout with the `Fail` action.
    #[serde(default)]
    pub failed: bool,
    /// The revision of this state where it is kept on the gang's member pods (see
    /// [`Persisted`]): raised by the cycle each time what it must keep changes, so that of the
    /// copies found (on members, carried in memory) the newest is known without a clock. 0: never
    /// kept there.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub rev: u64,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// A gang's state as gang-scheduler keeps it on each of the gang's active member pods
/// (annotation [`crate::read::labels::ANNOTATION_STATE`]) when no object of ours holds it — every gang
/// but kube-gang's own `Gang`, whose status holds it. Read from whichever member carries the
/// highest revision, so it survives a restart, a change of leader and the loss of any member; a
/// member of another gang, or of an earlier object of the same name (another `uid`), carries none
/// for this one, and a gang created anew (new pods) starts with none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Persisted {
    /// The gang the state is of.
    pub gang: GangKey,
    /// The `metadata.uid` of the object that defines the gang (a PodGroup, a Workload); `None`
    /// for a gang of pod annotations.
    pub uid: Option<String>,
    /// The state, with its revision ([`GangState::rev`]).
    pub state: GangState,
}

/// The gang state as it is written on a member pod ([`crate::read::labels::ANNOTATION_STATE`]): the
/// fields of a `Gang`'s status that hold it, with their names, plus the gang it is of, the uid of
/// the object that defines it, and the revision.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StateText {
    rev: u64,
    gang: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    waiting_since: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    degraded_since: Option<Time>,
    #[serde(default, skip_serializing_if = "is_zero")]
    timeouts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    backoff_until: Option<Time>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    was_satisfied: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    gave_up: bool,
}

impl Persisted {
    /// The annotation text that keeps this state on a member pod: compact JSON, times in RFC
    /// 3339 (`{"rev":2,"gang":"ml/train","degradedSince":"2026-11-26T07:00:00.250Z","wasSatisfied":true}`).
    pub fn to_text(&self) -> String {
        let (p, st) = (self, &self.state);
        let text = StateText {
            rev: st.rev,
            gang: p.gang.to_string(),
            uid: p.uid.clone(),
            waiting_since: st.waiting_since,
            degraded_since: st.degraded_since,
            timeouts: st.timeouts,
            backoff_until: st.backoff_until,
            was_satisfied: st.was_satisfied,
            gave_up: st.failed,
        };
        serde_json::to_string(&text).unwrap_or_default()
    }

    /// Reads the annotation text back (the reverse of [`Persisted::to_text`]). `None` for text
    /// that is not one: gang-scheduler writes the annotation again at the gang's next change of
    /// state, and until then the gang is judged as if the pod carried none.
    pub fn from_text(text: &str) -> Option<Persisted> {
        // Bounded: the text is at most what the API server lets an annotation be, and a state is
        // some 300 bytes; anything much longer is not ours.
        if text.len() > 4096 {
            return None;
        }
        let t: StateText = serde_json::from_str(text).ok()?;
        let gang = GangKey::parse(&t.gang, "")?;
        Some(Persisted {
            gang,
            uid: t.uid,
            state: GangState {
                waiting_since: t.waiting_since,
                degraded_since: t.degraded_since,
                timeouts: t.timeouts,
                backoff_until: t.backoff_until,
                was_satisfied: t.was_satisfied,
                failed: t.gave_up,
                rev: t.rev,
            },
        })
    }
}

/// A gang in the canonical model: a tree with a root and named subgroups.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gang {
    pub key: GangKey,
    /// The root's minimum: pods when there are no subgroups, else satisfied top-level subgroups.
    pub min_member: u32,
    #[serde(default)]
    pub subgroups: Vec<SubGroup>,
    /// Pods the whole gang needs at minimum, on top of every subgroup's own minimum (KAI's root
    /// `minMember` over `subGroups` counts pods). 0: no floor beyond the tree's. See
    /// [`Gang::min_pods`] and [`crate::read::tree::satisfied`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pod_floor: u32,
    #[serde(default)]
    pub mode: GangMode,
    /// How long the gang may wait once its quorum exists. `None`: the configured default.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_secs")]
    pub timeout: Option<Duration>,
    /// How long the gang runs at most once started (`kube-gang.io/time-limit` on the gang's
    /// object or, for a gang of annotations, its pods): what backfill plans with. `None`: its
    /// members' own limits, else the policy's default.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_secs")]
    pub time_limit: Option<Duration>,
    /// Every member lands in one domain of this node label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_key: Option<String>,
    /// A narrower node label whose domains are tried first: the whole gang in one of its domains
    /// (within the required one) if any takes it, else as `topology_key` allows. Never a reason
    /// not to place the gang.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_preferred: Option<String>,
    /// The KAI `Topology` object (KAI's `topologyConstraint.topology`) whose levels order this
    /// gang's: its required and preferred levels must be levels of it, and a preferred level is
    /// relaxed through it. The gang waits while the cluster has no Topology of this name, as in
    /// KAI. `None`: levels are ordered by the policy's `topologyLevels`, else by the cluster's
    /// Kueue or KAI Topology that has the preferred level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_object: Option<Box<str>>,
    /// Koordinator's network-topology gather rules (`gang.scheduling.koordinator.sh/
    /// network-topology-spec`), until the cluster is assembled: they name layers of its
    /// `ClusterNetworkTopology`, whose order decides the required and preferred levels
    /// ([`crate::read::dialect::koordinator::gather_levels`]), so they are turned into
    /// `topology_key` and `topology_preferred` once that is known.
    /// Boxed: few gangs have one, and every gang of a cluster is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_gather: Option<Box<NetworkGather>>,
    /// A Volcano PodGroup's `networkTopology.highestTierName`, until the cluster is assembled:
    /// the HyperNodes' `tierName`s turn it into a tier ([`crate::read::hypernode::key_of`]),
    /// the required level (`hard`) or the preferred one (`soft`). Boxed: few gangs have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier_name: Option<Box<TierName>>,
    /// Volcano's `subGroupPolicy`: subgroups made of the gang's pods by their labels, once its
    /// pods are known ([`Partitioning`]). `None` for every other gang.
    /// Boxed: few gangs have one (and every gang pays for the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitioning: Option<Box<Vec<Partitioning>>>,
    /// A gang object whose project's controllers create the gang's pods only once a scheduler has
    /// moved it out of `Pending` (Volcano's PodGroup: `Inqueue`), as read: what the scheduler does
    /// and what a waiting gang's message says. Boxed: few gangs have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Box<Admission>>,
    /// Exclusive placement (JobSet's `alpha.jobset.sigs.k8s.io/exclusive-topology`): members are
    /// grouped by the subgroup they name (a JobSet's child job); each group lands whole in one
    /// domain of this node label, and no two groups share a domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_topology: Option<String>,
    /// Other gangs that must be satisfied in the same cycle as this one (this gang not included).
    #[serde(default)]
    pub gang_group: Vec<GangKey>,
    /// Grace period before a degraded gang is evicted. `None`: the configured default (60 s).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_secs")]
    pub stale_grace: Option<Duration>,
    /// Resources the whole gang needs at minimum (informational quorum check, as in coscheduling).
    #[serde(default)]
    pub min_resources: Resources,
    /// The expected number of members, when the spec says (total-member, replicas, parallelism).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_member: Option<u32>,
    /// A priority for the gang itself; when `None`, the highest priority among its members is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// The PriorityClass its object names (a Volcano PodGroup's or a Grove PodGang's
    /// `spec.priorityClassName`), resolved into [`Gang::priority`] when the cluster is assembled
    /// (a class that does not exist is a problem, and the members' priority stands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// `kube-gang.io/provisioning`: whether the gang asks the cluster autoscaler for capacity
    /// (`None`: as the policy says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<bool>,
    /// `kube-gang.io/elastic-step`: the member counts a gang grows to beyond its minimum
    /// (`None`: any, as `One`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_step: Option<ElasticStep>,
    /// How preemption may take its members once it runs.
    #[serde(default, skip_serializing_if = "Disruption::is_members")]
    pub disruption: Disruption,
    /// The gang's own preemption policy (an upstream PodGroup's `spec.preemptionPolicy`): `Never`
    /// keeps it from preempting whatever its pods say. `None`: its pods'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption_policy: Option<PreemptionPolicy>,
    pub source: Source,
    #[serde(default)]
    pub created: Time,
    /// The `metadata.uid` of the object that defines the gang (`None` for a gang of pod
    /// annotations): what tells it from an earlier object of the same name, for the state kept on
    /// its members ([`Persisted::uid`]) or carried between cycles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default)]
    pub state: GangState,
}

impl Gang {
    /// Whether the gang's state is kept on its member pods ([`Persisted`]): every gang but
    /// kube-gang's own `Gang`, whose status keeps it.
    pub fn keeps_state_on_pods(&self) -> bool {
        self.source.dialect != Dialect::KubeGang
    }

    /// Its Volcano `subGroupPolicy` entries ([`Gang::partitioning`]); none for most gangs.
    pub fn partitions(&self) -> &[Partitioning] {
        self.partitioning.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Whether its subgroups may need no pod or group: a Volcano gang's may (a `minTaskMember` of
    /// 0, and what its `subGroupPolicy` makes of its pods — `minSubGroups` 0, pods no policy or
    /// task groups: [`Gang::partitions`]); every other dialect's subgroup needs at least one.
    pub fn subgroups_may_need_none(&self) -> bool {
        self.source.dialect == Dialect::Volcano
    }

    /// A gang with no subgroups, for tests and builders.
    pub fn new(key: GangKey, min_member: u32, source: Source) -> Self {
        Gang {
            key,
            min_member,
            subgroups: Vec::new(),
            pod_floor: 0,
            mode: GangMode::Strict,
            timeout: None,
            time_limit: None,
            topology_key: None,
            topology_preferred: None,
            topology_object: None,
            network_gather: None,
            tier_name: None,
            partitioning: None,
            admission: None,
            exclusive_topology: None,
            gang_group: Vec::new(),
            stale_grace: None,
            min_resources: Resources::default(),
            total_member: None,
            priority: None,
            priority_class_name: None,
            provisioning: None,
            elastic_step: None,
            disruption: Disruption::Members,
            preemption_policy: None,
            source,
            created: Time::default(),
            uid: None,
            state: GangState::default(),
        }
    }
}

/// One of a Volcano PodGroup's `subGroupPolicy` entries: the gang's pods its `selector` selects
/// (all when `None`) and that carry every label of `keys` with a non-empty value are grouped by
/// those values, each group a leaf subgroup of `size` pods (Volcano's subJob: ready with `size`
/// pods), under an inner subgroup named `name` that needs `min` of them; each group's pods land
/// in one domain of `topology_key`, and try one of `topology_preferred`. The leaves are made when
/// the gang meets its pods ([`crate::read::cluster`]), as Volcano's scheduler makes its subJobs
/// from the pods it sees (`getOrCreateSubJob`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Partitioning {
    pub name: String,
    /// The task subgroup (a leaf of the PodGroup's `minTaskMember`) these groups take the place
    /// of: that task's minimum becomes the inner subgroup's pod floor. `None`: a subgroup of its
    /// own under the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    pub size: u32,
    pub min: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    pub keys: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_preferred: Option<String>,
}

impl Partitioning {
    /// The values of `keys` on a pod with `labels`, if it is one of this policy's: selected, and
    /// every key present with a non-empty value (Volcano's `getSubJobMatchValues`; with no keys no
    /// pod is grouped, as there).
    pub fn values<'l>(&self, labels: &'l Labels) -> Option<Vec<&'l str>> {
        if self.keys.is_empty() || self.selector.as_ref().is_some_and(|s| !s.matches(labels)) {
            return None;
        }
        self.keys.iter().map(|k| labels.get(k).filter(|v| !v.is_empty())).collect()
    }

    /// The inner subgroup its groups are under: the task's, else one named after the policy.
    pub fn node(&self) -> String {
        match &self.task {
            Some(t) => t.clone(),
            None => dns_name(&[&self.name]),
        }
    }

    /// The leaf subgroup of the group of `values`: `<policy>-<v1>-<v2>` (`worker-0` for partition
    /// 0 of task `worker`), made a DNS label if it is not one ([`dns_name`]).
    pub fn leaf(&self, values: &[&str]) -> String {
        let mut parts = vec![self.task.as_deref().unwrap_or(&self.name)];
        parts.extend_from_slice(values);
        dns_name(&parts)
    }

    /// The `k`-th placeholder leaf, for a group not among the pods yet: the inner subgroup needs
    /// `min` groups, and a group without pods is one not ready.
    pub fn missing(&self, k: usize) -> String {
        dns_name(&[self.task.as_deref().unwrap_or(&self.name), "missing", &k.to_string()])
    }
}

/// The subgroup made of a Volcano PodGroup's pods no `subGroupPolicy` groups, when it has no
/// `minTaskMember` subgroups (Volcano's default subJob: it needs none of them).
pub const UNGROUPED: &str = "ungrouped";

/// Whether `v` is a DNS-1123 label: 1 to 63 lowercase alphanumerics or `-`, starting and ending
/// with an alphanumeric.
pub fn is_dns_label(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 63
        && v.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !v.starts_with('-')
        && !v.ends_with('-')
}

/// A DNS label for `parts` joined by `-`: the join itself when it is one; else it lowercased,
/// every other character as `-`, cut to 54 characters and followed by `-` and 8 hex digits of a
/// hash of the join (so distinct joins stay distinct).
pub fn dns_name(parts: &[&str]) -> String {
    let joined = parts.join("-");
    if is_dns_label(&joined) {
        return joined;
    }
    // FNV-1a: stable across runs and builds.
    let hash = joined.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    let clean: String = joined
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .take(54)
        .collect();
    let clean = clean.trim_matches('-');
    if clean.is_empty() { format!("g-{hash:08x}") } else { format!("{clean}-{hash:08x}") }
}

/// A tier named by the HyperNodes' `tierName` ([`Gang::tier_name`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TierName {
    pub name: String,
    /// `soft` mode: a preferred level, not a bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub soft: bool,
}

/// A gang object's admission by a scheduler, which its controllers wait for before they create
/// the gang's pods ([`Gang::admission`]): the phase of a Volcano PodGroup a Volcano Job or a
/// Kubeflow training job controls, as its object says it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// `status.phase` (`""` when unset).
    #[serde(default)]
    pub phase: String,
    /// Its own `kube-gang.io/enabled` label (Volcano's job controller copies the Job's labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<String>,
    /// Being deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
    /// The Kubeflow training job kind that controls it (its operator copies the job's
    /// annotations, not its labels: only a namespace opts it in); `None`: a Volcano Job's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeflow: Option<String>,
}

impl Admission {
    /// Still waiting to be admitted: `Pending` (or no phase yet), and not being deleted.
    pub fn waiting(&self) -> bool {
        (self.phase.is_empty() || self.phase == "Pending") && !self.deleting
    }

    /// Opted in to kube-gang as the Volcano Job it came from is: by its own label, else by its
    /// namespace's (`namespace_enabled`, that label's value there).
    pub fn opted_in(&self, namespace_enabled: Option<&str>) -> bool {
        match self.enabled.as_deref() {
            Some(v) => v == "true",
            None => namespace_enabled == Some("true"),
        }
    }
}

/// A Koordinator gang's `network-topology-spec`, as read: its rules, or why it could not be read
/// (Koordinator then schedules the gang without it, and so do we, saying why).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkGather {
    #[serde(default)]
    pub rules: Vec<GatherRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

/// One rule of Koordinator's `gatherStrategy`: a network layer, and whether the gang must be in
/// one of its domains (`MustGather`) or only prefers it (`PreferGather`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatherRule {
    pub layer: String,
    pub must: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Serde helper: an optional duration as whole seconds.
pub(crate) mod opt_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_u64(d.as_secs()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_secs))
    }
}

/// A node held for a member of a `NonStrict` gang across cycles; returned in the plan and handed
/// back in the next snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Reservation {
    pub pod: PodKey,
    pub node: SmolStr,
    pub gang: GangKey,
}

/// Everything one scheduling cycle sees. Built by adapters; never mutated by the cycle.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// Every pod in the cluster that may use a node or wait for one, whoever schedules it.
    #[serde(default)]
    pub pods: Vec<Pod>,
    #[serde(default)]
    pub gangs: Vec<Gang>,
    /// `NonStrict` reservations carried over from the previous cycle's plan.
    #[serde(default)]
    pub reservations: Vec<Reservation>,
    /// What the pods that use each node request, summed, and which pods are open (pending or
    /// naming a gang): derived from `pods` and carried so a cycle does not read every pod again.
    /// `None`: the cycle reads every pod and adds it up itself. The one-pass assembly and
    /// [`crate::read::cluster::Live`] fill it in; whoever edits `pods` afterwards (reordering them
    /// included) recomputes it ([`Usage::of`]) or sets it to `None`.
    #[serde(skip)]
    pub usage: Option<Usage>,
    /// PodDisruptionBudgets: preemption prefers victims whose eviction violates none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<Budget>,
    /// Namespace name → its labels: what a pod affinity term's `namespaceSelector` matches.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub namespaces: BTreeMap<String, Labels>,
    /// PVCs, PVs, StorageClasses, CSINodes and ResourceClaims, for the volume filters.
    #[serde(default, skip_serializing_if = "volume::Storage::is_empty")]
    pub storage: volume::Storage,
}

/// What the pods that use each node request, summed per node name, and which pods a cycle must
/// read one by one: derived from [`Snapshot::pods`] and carried with the snapshot, so that a cycle
/// need not read every pod of the cluster again — its cost follows the pending work, not the
/// cluster's size.
///
/// A pod counts when it uses a node ([`Pod::uses_node`]); each of its positive requests is added
/// to its node's sum, exactly (no saturation), so adding and removing pods in any order gives the
/// same value as [`Usage::of`] the final pods. A pod is *open* when it is pending or names a gang
/// ([`Usage::is_open`]): the only pods whose demand, membership or wait a cycle reads; the others
/// only use their node, which the sums say. The pods that use a node are also indexed where the
/// inter-pod filters look for them: by namespace (what pod affinity, anti-affinity and spread
/// terms count), the ones whose required anti-affinity keeps pods away (by the namespaces their
/// terms name), and the ones that bind host ports. Pods are held by their index in
/// [`Snapshot::pods`], so whoever moves a pod says so ([`Usage::moved`]). Plain data:
/// [`crate::read::cluster`] keeps it current as objects change, and whoever edits a snapshot's pods by
/// hand recomputes it or sets it to `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    nodes: HashMap<String, NodeUsage>,
    /// Indices in [`Snapshot::pods`] of the open pods.
    open: BTreeSet<usize>,
    /// Indices of the pods that use a node, by namespace.
    namespaced: HashMap<String, BTreeSet<usize>>,
    /// Indices of the pods that use a node and have required pod anti-affinity, under each
    /// namespace one of their terms names (`""`: a term with a `namespaceSelector`, which may
    /// select pods of any namespace).
    repelling: HashMap<String, BTreeSet<usize>>,
    /// Indices of the pods that use a node and bind host ports.
    ports: BTreeSet<usize>,
}

/// The sum over the pods that use one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeUsage {
    /// How many pods use the node.
    pub pods: i128,
    /// Their positive requests summed, by resource name (sorted; no zero sums).
    pub requests: Vec<(String, i128)>,
}

impl Usage {
    /// The usage of `pods`, added up.
    pub fn of(pods: &[Pod]) -> Self {
        let mut usage = Usage::default();
        for (at, p) in pods.iter().enumerate() {
            usage.add(at, p);
        }
        usage
    }

    /// Whether a cycle reads `pod` one by one: it is pending (it may be placed) or names a gang
    /// (it counts toward one).
    pub fn is_open(pod: &Pod) -> bool {
        pod.is_pending() || pod.gang.is_some()
    }

    /// Counts `pod`, at index `at` of the snapshot's pods.
    pub fn add(&mut self, at: usize, pod: &Pod) {
        self.change(pod, 1);
        self.index(at, pod, true);
        self.reread(at, pod);
    }

    /// Stops counting `pod` at index `at` (as [`Usage::add`] counted it); the index is free.
    pub fn remove(&mut self, at: usize, pod: &Pod) {
        self.change(pod, -1);
        self.index(at, pod, false);
        self.open.remove(&at);
    }

    /// `pod`, which was at index `from`, is now at `to` (a `swap_remove` moved it into a freed
    /// index).
    pub fn moved(&mut self, from: usize, to: usize, pod: &Pod) {
        if self.open.remove(&from) {
            self.open.insert(to);
        }
        self.index(from, pod, false);
        self.index(to, pod, true);
    }

    /// `pod`, at index `at`, changed in a way that leaves its node, requests, namespace, labels
    /// and terms alone (its gang, say): whether it is open is judged again.
    pub fn reread(&mut self, at: usize, pod: &Pod) {
        if Usage::is_open(pod) {
            self.open.insert(at);
        } else {
            self.open.remove(&at);
        }
    }

    /// The indices of the open pods, in increasing order.
    pub fn open(&self) -> impl Iterator<Item = usize> + '_ {
        self.open.iter().copied()
    }

    fn change(&mut self, pod: &Pod, sign: i128) {
        let Some(node) = pod.node_name.as_deref().filter(|_| pod.uses_node()) else { return };
        let entry = match self.nodes.get_mut(node) {
            Some(e) => e,
            None => self.nodes.entry(node.to_string()).or_default(),
        };
        entry.pods += sign;
        for (name, amount) in pod.requests.iter().filter(|(_, a)| *a > 0) {
            let amount = i128::from(amount) * sign;
            match entry.requests.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
                Ok(i) => {
                    entry.requests[i].1 += amount;
                    if entry.requests[i].1 == 0 {
                        entry.requests.remove(i);
                    }
                }
                Err(i) => entry.requests.insert(i, (name.to_string(), amount)),
            }
        }
        if entry.pods == 0 && entry.requests.is_empty() {
            self.nodes.remove(node);
        }
    }

    /// Files (or, with `insert` false, unfiles) the pod at `at` where the inter-pod filters look.
    fn index(&mut self, at: usize, pod: &Pod, insert: bool) {
        if !pod.uses_node() {
            return;
        }
        fn file(map: &mut HashMap<String, BTreeSet<usize>>, key: &str, at: usize, insert: bool) {
            if insert {
                match map.get_mut(key) {
                    Some(set) => {
                        set.insert(at);
                    }
                    None => {
                        map.insert(key.to_string(), BTreeSet::from([at]));
                    }
                }
            } else if let Some(set) = map.get_mut(key) {
                set.remove(&at);
                if set.is_empty() {
                    map.remove(key);
                }
            }
        }
        file(&mut self.namespaced, &pod.key.namespace, at, insert);
        for term in pod.anti_affinity() {
            for ns in &term.namespaces {
                file(&mut self.repelling, ns, at, insert);
            }
            if term.any_namespace() {
                file(&mut self.repelling, "", at, insert);
            }
        }
        if !pod.host_ports().is_empty() {
            if insert {
                self.ports.insert(at);
            } else {
                self.ports.remove(&at);
            }
        }
    }

    /// The usage of the node named `name` (`None`: no pod uses it).
    pub fn node(&self, name: &str) -> Option<&NodeUsage> {
        self.nodes.get(name)
    }

    /// Every node some pod uses, with its usage (in no particular order).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &NodeUsage)> {
        self.nodes.iter().map(|(n, u)| (n.as_str(), u))
    }

    /// The indices of the pods of `namespace` that use a node, in increasing order.
    pub fn in_namespace(&self, namespace: &str) -> impl Iterator<Item = usize> + '_ {
        self.namespaced.get(namespace).into_iter().flatten().copied()
    }

    /// The indices of the pods that use a node and whose required anti-affinity may select pods
    /// of `namespace` (a term names it, or has a `namespaceSelector`), in no particular order and
    /// possibly twice.
    pub fn repelling(&self, namespace: &str) -> impl Iterator<Item = usize> + '_ {
        let named = self.repelling.get(namespace).filter(|_| !namespace.is_empty());
        named.into_iter().chain(self.repelling.get("")).flatten().copied()
    }

    /// Whether any pod that uses a node has required pod anti-affinity.
    pub fn any_repelling(&self) -> bool {
        self.repelling.values().any(|pods| !pods.is_empty())
    }

    /// The indices of the pods that use a node and bind host ports, in increasing order.
    pub fn with_ports(&self) -> impl Iterator<Item = usize> + '_ {
        self.ports.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>, gang: bool) -> Pod {
        Pod {
            key: ObjectKey::new("ns", name),
            uid: name.into(),
            requests: Resources::new().with("cpu", 100),
            node_selector: BTreeMap::new(),
            affinity: vec![],
            tolerations: vec![],
            priority: 0,
            preemption_policy: PreemptionPolicy::PreemptLowerPriority,
            phase: if node.is_some() { PodPhase::Running } else { PodPhase::Pending },
            scheduler_name: "gang-scheduler".into(),
            node_name: node.map(str::to_string),
            nominated_node: None,
            created: Time::default(),
            deleting: false,
            gang: gang.then(|| Membership { gang: ObjectKey::new("ns", "g"), subgroup: None }),
            failure: None,
            scheduling_gates: Vec::new(),
            labels: Labels::default(),
            exclusive_topology: None,
            persisted: None,
            terms: None,
            volumes: Vec::new(),
            resource_claims: Vec::new(),
            started: None,
            time_limit: None,
        }
    }

    /// Pods removed as `Live` removes them (`swap_remove`), added, and given a gang: the carried
    /// usage, kept current step by step, equals the one added up afresh — open pods by index.
    #[test]
    fn usage_kept_through_swap_removes_equals_usage_added_up() {
        let mut pods = vec![
            pod("a", Some("n1"), false),
            pod("b", None, false),
            pod("c", Some("n1"), true),
            pod("d", Some("n2"), false),
            pod("e", None, true),
        ];
        let mut usage = Usage::of(&pods);
        assert_eq!(usage.open().collect::<Vec<_>>(), [1, 2, 4], "pending or naming a gang");
        for at in [1, 0, 1] {
            let gone = pods.swap_remove(at);
            usage.remove(at, &gone);
            if let Some(moved) = pods.get(at) {
                usage.moved(pods.len(), at, moved);
            }
            assert_eq!(usage, Usage::of(&pods), "after removing index {at}");
        }
        pods.push(pod("f", None, false));
        usage.add(pods.len() - 1, &pods[pods.len() - 1]);
        pods[0].gang = Some(Membership { gang: ObjectKey::new("ns", "h"), subgroup: None });
        usage.reread(0, &pods[0]);
        assert_eq!(usage, Usage::of(&pods));
        assert_eq!(usage.open().collect::<Vec<_>>(), [0, 1, 2], "d now names a gang, f is pending");
        assert_eq!(usage.node("n1").map(|u| u.pods), Some(1), "a left n1, c is still on it");
    }

    /// The pods on nodes are found by namespace, by the namespaces their anti-affinity reads, and
    /// by their host ports — and stay found as pods move about.
    #[test]
    fn pods_on_nodes_are_indexed_where_the_inter_pod_filters_look() {
        use terms::{AffinityTerm, HostPort};
        let anti = |namespaces: Vec<&str>, any: bool| {
            Some(Box::new(PodTerms {
                anti_affinity: vec![AffinityTerm {
                    selector: Some(LabelSelector::default()),
                    namespaces: namespaces.into_iter().map(String::from).collect(),
                    namespace_selector: any.then(LabelSelector::default),
                    topology_key: "zone".into(),
                }],
                ..PodTerms::default()
            }))
        };
        let mut pods = vec![pod("a", Some("n1"), false), pod("b", Some("n1"), false), pod("c", None, false)];
        pods[0].terms = anti(vec!["ns", "data"], false);
        pods[1].key.namespace = "other".into();
        pods[1].terms = Some(Box::new(PodTerms {
            host_ports: vec![HostPort { protocol: "TCP".into(), ip: terms::BIND_ALL.into(), port: 80 }],
            ..PodTerms::default()
        }));
        pods[2].terms = anti(vec![], true);
        let mut usage = Usage::of(&pods);
        assert_eq!(usage.in_namespace("ns").collect::<Vec<_>>(), [0], "c is pending: not on a node");
        assert_eq!(usage.repelling("data").collect::<Vec<_>>(), [0]);
        assert_eq!(usage.with_ports().collect::<Vec<_>>(), [1]);
        pods[2].node_name = Some("n2".into());
        pods[2].phase = PodPhase::Running;
        usage.add(2, &pods[2]);
        let mut anywhere: Vec<usize> = usage.repelling("elsewhere").collect();
        anywhere.sort_unstable();
        assert_eq!(anywhere, [2], "a namespace selector may select any namespace");
        let gone = pods.swap_remove(0);
        usage.remove(0, &gone);
        usage.moved(pods.len(), 0, &pods[0]);
        assert_eq!(usage, Usage::of(&pods));
        assert_eq!(usage.repelling("data").count(), 1, "only c's selector is left");
    }
}
