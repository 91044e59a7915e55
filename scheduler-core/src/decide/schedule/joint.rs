//! The inter-pod filters — kube-scheduler's `NodePorts`, `InterPodAffinity` and
//! `PodTopologySpread` (`DoNotSchedule`) — evaluated jointly: a pod is judged against the pods on
//! nodes, those committed earlier in the cycle and those placed earlier in the same step (its
//! gang's members before it, its gang group's siblings), as kube-scheduler judges each pod against
//! the pods it assumed before it.
//!
//! As kube-scheduler's PreFilter does, what a pod's terms count is computed once per *class* of
//! pods (one namespace and one set of terms) into counts per topology domain, so that a node's
//! check is a few array reads ([`View::allows`]). The counts are kept in step as pods are placed:
//! the pods committed in the cycle are a log each class catches up with, and a step's tentative
//! placements are applied on top and taken back when the step tries another way (the part a query
//! shares with the previous one stays applied). The reference cycle builds every count afresh for
//! every query instead, from every pod; a property test holds the two equal.
//!
//! Symmetry: a pod that asks nothing may still be kept off a node by the required anti-affinity of
//! a pod already there. Such pods are found through the snapshot's [`crate::read::model::Usage`], by the
//! namespaces their terms read, so a pod that no term can select costs nothing here.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use super::cache::Prehashed;
use super::filter::{matches_node_affinity, untolerated_taint};
use super::{Fx, NodeIndex};
use crate::read::model::SmolStr;
use crate::read::model::terms::{AffinityTerm, HostPort, Inclusion, SpreadConstraint};
use crate::read::model::{
    LabelOperator, LabelSelector, Labels, NodeSelectorTerm, Pod, Snapshot, Toleration, Usage,
};

/// Placements a query sees on top of the committed ones: a step's, in the order made (its gang
/// group's siblings', then its own).
#[derive(Clone, Copy, Debug)]
pub(super) struct Tentative<'t> {
    parts: [&'t [(usize, usize)]; 2],
}

impl<'t> Tentative<'t> {
    /// None.
    pub const NONE: Tentative<'static> = Tentative { parts: [&[], &[]] };

    /// `before`, then `mine`.
    pub fn of(before: &'t [(usize, usize)], mine: &'t [(usize, usize)]) -> Self {
        Tentative { parts: [before, mine] }
    }

    pub fn iter(&self) -> impl Iterator<Item = (usize, usize)> + 't {
        let [a, b] = self.parts;
        a.iter().chain(b).copied()
    }

    fn len(&self) -> usize {
        self.parts[0].len() + self.parts[1].len()
    }
}

/// Why a node cannot take a pod, by the inter-pod filters (in kube-scheduler's filter order).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Block {
    /// `NodePorts`: this host port of the pod is in use there.
    Port(HostPort),
    /// `PodTopologySpread`: the node lacks the topology key of `spec.topologySpreadConstraints[i]`.
    SpreadLabel(usize),
    /// `PodTopologySpread`: there the pod would make the skew of constraint `i` exceed its maxSkew.
    Skew(usize),
    /// `InterPodAffinity`: the node lacks the topology key of required affinity term `i`.
    AffinityLabel(usize),
    /// `InterPodAffinity`: no pod that required affinity term `i` selects is in the node's domain.
    Affinity(usize),
    /// `InterPodAffinity`: a pod that required anti-affinity term `i` selects is in the node's domain.
    AntiAffinity(usize),
    /// `InterPodAffinity`: the required anti-affinity of a pod in the node's domain of this
    /// topology key selects this pod.
    Repelled(String),
}

/// The domains of one topology key as these filters need them: each node's (a dense id;
/// `u32::MAX` for a node without the key) and how many there are. Neither named nor ordered, unlike
/// the placer's [`super::cache::Topology`]: a hostname makes one per node, and the filters only
/// count by them.
#[derive(Debug)]
struct Domains {
    node_domain: Vec<u32>,
    count: usize,
}

/// Counts per domain of one topology key.
#[derive(Debug)]
struct Counts {
    topo: Rc<Domains>,
    n: Tally,
}

/// Counts by domain: a vector for keys of few domains, a map (of the domains that hold any) for
/// keys of many (a hostname has one per node, and a class of pods touches a handful of them).
#[derive(Debug)]
enum Tally {
    Dense(Vec<i64>),
    Sparse(HashMap<u32, i64, std::hash::BuildHasherDefault<Prehashed>>),
}

/// Domains of a key up to which counts are kept in a vector.
const DENSE: usize = 64;

impl Counts {
    fn new(topo: Rc<Domains>) -> Self {
        let n = if topo.count <= DENSE {
            Tally::Dense(vec![0; topo.count])
        } else {
            Tally::Sparse(HashMap::default())
        };
        Counts { topo, n }
    }

    fn domain(&self, node: usize) -> Option<u32> {
        let d = self.topo.node_domain.get(node).copied().unwrap_or(u32::MAX);
        (d != u32::MAX).then_some(d)
    }

    /// Adds `sign` to the node's domain; false when the node lacks the key.
    fn add(&mut self, node: usize, sign: i64) -> bool {
        let Some(d) = self.domain(node) else { return false };
        match &mut self.n {
            Tally::Dense(v) => match v.get_mut(usize::try_from(d).unwrap_or(usize::MAX)) {
                Some(c) => *c += sign,
                None => return false,
            },
            Tally::Sparse(m) => {
                let c = m.entry(d).or_default();
                *c += sign;
                if *c == 0 {
                    m.remove(&d);
                }
            }
        }
        true
    }

    /// The count of domain `d`.
    fn of(&self, d: u32) -> i64 {
        match &self.n {
            Tally::Dense(v) => v.get(usize::try_from(d).unwrap_or(usize::MAX)).copied().unwrap_or(0),
            Tally::Sparse(m) => m.get(&d).copied().unwrap_or(0),
        }
    }

    fn at(&self, node: usize) -> Option<i64> {
        self.domain(node).map(|d| self.of(d))
    }
}

/// Which nodes count for one spread constraint, and which domains they make.
#[derive(Debug)]
struct Eligible {
    node: Vec<bool>,
    domains: usize,
}

/// What decides which nodes count for a spread constraint: every `DoNotSchedule` topology key of
/// the pod (a node must have them all), the constraint's, and the pod's node affinity and
/// tolerations where its policies honor them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct EligibleKey {
    keys: Vec<String>,
    key: String,
    affinity: Option<(BTreeMap<String, String>, Vec<NodeSelectorTerm>)>,
    taints: Option<Vec<Toleration>>,
}

/// One `DoNotSchedule` spread constraint's counts: matching pods per eligible domain, and how many
/// eligible domains hold each count (the first is the global minimum).
#[derive(Debug)]
struct Spread {
    counts: Counts,
    eligible: Rc<Eligible>,
    levels: BTreeMap<i64, u32>,
}

impl Spread {
    fn add(&mut self, node: usize, sign: i64) {
        if !self.eligible.node.get(node).copied().unwrap_or(false) {
            return;
        }
        let Some(d) = self.counts.domain(node) else { return };
        let old = self.counts.of(d);
        if let Some(c) = self.levels.get_mut(&old) {
            *c -= 1;
            if *c == 0 {
                self.levels.remove(&old);
            }
        }
        self.counts.add(node, sign);
        *self.levels.entry(old + sign).or_default() += 1;
    }

    /// The global minimum, as kube-scheduler's `minMatchNum`: 0 while fewer domains than
    /// `minDomains` are eligible.
    fn min(&self, min_domains: i32) -> i64 {
        if i64::try_from(self.eligible.domains).unwrap_or(i64::MAX) < i64::from(min_domains) {
            return 0;
        }
        self.levels.first_key_value().map_or(0, |(k, _)| *k)
    }
}

/// What the terms of one class of pods count (the pod `rep` stands for the class).
#[derive(Debug)]
struct TermState {
    rep: usize,
    affinity: Vec<Counts>,
    /// Entries the affinity counts hold in all: kube-scheduler's `len(affinityCounts) > 0`.
    affinity_any: i64,
    anti: Vec<Counts>,
    /// Per `DoNotSchedule` constraint (in the pod's order among those).
    spread: Vec<Spread>,
    /// The last pod counted, and what counted it.
    seen: Option<(usize, Counted)>,
}

/// Which of a class's terms count one pod: all its affinity terms (together), each anti-affinity
/// term, each `DoNotSchedule` spread constraint.
#[derive(Debug, Default)]
struct Counted {
    affinity: bool,
    anti: Vec<bool>,
    spread: Vec<bool>,
}

/// The required anti-affinity of pods placed that selects pods of one namespace and labels
/// (`rep` stands for them): counts per domain, by topology key.
#[derive(Debug)]
struct Repel {
    rep: usize,
    by_key: Vec<(String, Counts)>,
    total: i64,
    /// The last pod counted, and the keys (positions in `by_key`) it counted under.
    seen: Option<(usize, Vec<usize>)>,
}

/// Host ports in use, per node.
#[derive(Debug, Default)]
struct Ports {
    on: HashMap<usize, Vec<HostPort>>,
}

/// A state and the tentative placements applied on top of what the cycle committed.
#[derive(Debug)]
struct Entry<S> {
    state: S,
    applied: Vec<(usize, usize)>,
}

type Shared<S> = Rc<RefCell<Entry<S>>>;

/// What a pod's class counts: its namespace and terms (and what decides its spread domains).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TermKey {
    namespace: SmolStr,
    affinity: Vec<AffinityTerm>,
    anti: Vec<AffinityTerm>,
    spread: Vec<SpreadConstraint>,
    nodes: Option<NodeSide>,
}

/// A pod's node selector, required node affinity and tolerations.
type NodeSide = (BTreeMap<String, String>, Vec<NodeSelectorTerm>, Vec<Toleration>);

/// The namespace part of an anchor that stands for every namespace (no namespace is named `*`).
const ANY: &str = "*";

/// An anchor: a hash of (namespace, label key, label value) — pods of a namespace, or those of
/// them with a label, or with a label of a value. A term can only select pods that have its
/// anchor, so a placement is offered only to the states whose anchors it has (a hash collision
/// costs a look, never an answer: every state checks the term itself).
fn anchor(namespace: &str, key: Option<&str>, value: Option<&str>) -> u64 {
    // FNV-1a over the parts, each closed by a byte no label or namespace has: cheap enough to
    // take for every label of every pod committed.
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [Some(namespace), key, value] {
        for b in part.unwrap_or("").bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(PRIME);
        }
        h = (h ^ if part.is_some() { 0xff } else { 0xfe }).wrapping_mul(PRIME);
    }
    h
}

type ByAnchor = HashMap<u64, Vec<usize>, std::hash::BuildHasherDefault<Prehashed>>;

/// A hash of `x` (for keys whose equality is checked apart).
fn hash_of(x: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(x)
}

/// Pod index → a state's id.
type ByPod = HashMap<usize, usize, std::hash::BuildHasherDefault<Prehashed>>;

/// Where a term looks: the anchors every pod it selects has. `None`: it selects no pod.
fn term_anchors(
    namespaces: &[String],
    any_namespace: bool,
    selector: Option<&LabelSelector>,
) -> Option<Vec<u64>> {
    let selector = selector?;
    let spaces: Vec<&str> =
        if any_namespace { vec![ANY] } else { namespaces.iter().map(String::as_str).collect() };
    let by = |ns: &str| -> Vec<u64> {
        if let Some((k, v)) = selector.match_labels.iter().next() {
            return vec![anchor(ns, Some(k), Some(v))];
        }
        if let Some(r) = selector.match_expressions.iter().find(|r| r.operator == LabelOperator::In) {
            return r.values.iter().map(|v| anchor(ns, Some(&r.key), Some(v))).collect();
        }
        if let Some(r) = selector.match_expressions.iter().find(|r| r.operator == LabelOperator::Exists) {
            return vec![anchor(ns, Some(&r.key), None)];
        }
        vec![anchor(ns, None, None)]
    };
    Some(spaces.into_iter().flat_map(by).collect())
}

/// The anchors a pod of `namespace` with `labels` has.
fn pod_anchors(namespace: &str, labels: &Labels) -> Vec<u64> {
    let mut out = Vec::with_capacity(2 + 4 * labels.map().len());
    pod_anchors_into(namespace, labels, &mut out);
    out
}

/// [`pod_anchors`], into `out` (cleared first).
fn pod_anchors_into(namespace: &str, labels: &Labels, out: &mut Vec<u64>) {
    out.clear();
    for ns in [namespace, ANY] {
        out.push(anchor(ns, None, None));
        for (k, v) in labels.map() {
            out.push(anchor(ns, Some(k), None));
            out.push(anchor(ns, Some(k), Some(v)));
        }
    }
}

/// States by the anchors they listen on, and the placements committed by the anchors they have.
///
/// Committed placements are indexed in groups of pods with one set of anchors (a run of replicas
/// is one group): a placement costs a push to its group, and the anchors are taken once a group.
#[derive(Debug, Default)]
struct Index {
    /// Anchor → ids of the states listening.
    listening: ByAnchor,
    /// Per group, the positions in the committed log of its placements.
    groups: Vec<Vec<usize>>,
    /// Anchor → the groups whose pods have it.
    grouped: ByAnchor,
    /// The pod of the last placement indexed, and its group: the next is often alike.
    last: Option<(usize, usize)>,
    /// How much of the committed log `groups` indexes.
    indexed: usize,
    /// Bumped whenever a state starts listening: who listens to what has changed.
    generation: u64,
}

impl Index {
    fn listen(&mut self, anchors: &[u64], id: usize) {
        self.generation += 1;
        for &a in anchors {
            let ids = self.listening.entry(a).or_default();
            if ids.last() != Some(&id) {
                ids.push(id);
            }
        }
    }

    /// The states listening on any of `anchors`, each once.
    fn listeners(&self, anchors: &[u64]) -> Vec<usize> {
        if self.listening.is_empty() {
            return Vec::new();
        }
        let mut ids: Vec<usize> =
            anchors.iter().filter_map(|a| self.listening.get(a)).flatten().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The committed placements having any of `anchors`, by position, each once.
    fn placed(&self, anchors: &[u64]) -> Vec<usize> {
        let mut groups: Vec<usize> =
            anchors.iter().filter_map(|a| self.grouped.get(a)).flatten().copied().collect();
        groups.sort_unstable();
        groups.dedup();
        let mut at: Vec<usize> = groups.into_iter().flat_map(|g| self.groups[g].iter().copied()).collect();
        at.sort_unstable();
        at.dedup();
        at
    }

    /// Files the placement at position `at` (of pod `q`) in group `g`, or in a new group with
    /// `anchors` when `g` is `None`.
    fn file(&mut self, at: usize, q: usize, g: Option<usize>, anchors: impl FnOnce() -> Vec<u64>) -> usize {
        let g = g.unwrap_or_else(|| {
            let g = self.groups.len();
            self.groups.push(Vec::new());
            for a in anchors() {
                let gs = self.grouped.entry(a).or_default();
                if gs.last() != Some(&g) {
                    gs.push(g);
                }
            }
            g
        });
        self.groups[g].push(at);
        self.last = Some((q, g));
        g
    }
}

/// The inter-pod filters of one cycle: what the pods placed so far mean for the pods to come.
pub(super) struct Joint<'a> {
    snap: &'a Snapshot,
    fast: bool,
    /// Whether any pod asks what these filters evaluate, or a pod on a node repels others.
    active: bool,
    node_index: NodeIndex<'a>,
    none: Labels,
    /// The snapshot's usage, or one added up here when it carries none.
    usage: OnceCell<Option<Usage>>,
    /// Pods committed this cycle, with their nodes, in order.
    committed: RefCell<Vec<(usize, usize)>>,
    /// Per placement committed: whether its pod is alike to the one before it (see
    /// [`Joint::committed`]).
    committed_alike: RefCell<Vec<bool>>,
    /// How many of them have required anti-affinity (a pod's symmetry may matter).
    committed_repelling: RefCell<usize>,
    /// The last pod committed, the term states listening for it, and the index generation then:
    /// pods committed one after another are often alike (a run of replicas).
    last_commit: RefCell<Option<(usize, u64, Vec<usize>)>>,
    /// The same for the symmetry states, by the anti-affinity of the pod committed.
    last_repel_commit: RefCell<Option<(usize, u64, Vec<usize>)>>,
    terms: RefCell<Vec<Shared<TermState>>>,
    term_keys: RefCell<HashMap<TermKey, usize>>,
    term_of: RefCell<ByPod>,
    /// The last pod whose class was looked up, and its class: the next is often alike.
    last_term: RefCell<Option<(usize, usize)>>,
    /// Term states by the anchors their terms look at; committed pods by theirs.
    term_index: RefCell<Index>,
    repels: RefCell<Vec<Shared<Repel>>>,
    repel_keys: RefCell<HashMap<(SmolStr, Labels), usize>>,
    repel_of: RefCell<ByPod>,
    last_repel: RefCell<Option<(usize, usize)>>,
    /// Symmetry states by the anchors of the pods they stand for; committed pods with
    /// anti-affinity by their terms' anchors.
    repel_index: RefCell<Index>,
    ports: RefCell<Option<Shared<Ports>>>,
    eligible: RefCell<HashMap<EligibleKey, Rc<Eligible>>>,
    /// The domains of each topology key asked about.
    domains: RefCell<HashMap<String, Rc<Domains>>>,
    /// The groups of [`Joint::term_index`] by a hash of the namespace and labels their pods
    /// have: (a pod of the group, the group).
    label_groups: RefCell<HashMap<u64, Vec<(usize, usize)>>>,
    /// The groups of [`Joint::repel_index`] by a hash of the anti-affinity their pods have.
    repel_groups: RefCell<HashMap<u64, Vec<(usize, usize)>>>,
    /// The pods on nodes of a namespace by the [`anchor`] of their value of a label key, made
    /// the first time a term's selector asks for that key there.
    bound_by_label: RefCell<HashMap<(String, String), Rc<ByAnchor>>>,
}

impl std::fmt::Debug for Joint<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Joint").field("committed", &self.committed.borrow().len()).finish_non_exhaustive()
    }
}

/// A pod's view of the inter-pod filters, for one query: [`View::allows`] per node.
pub(super) struct View<'j> {
    joint: &'j Joint<'j>,
    pod: usize,
    terms: Option<Shared<TermState>>,
    repel: Option<Shared<Repel>>,
    ports: Option<Shared<Ports>>,
    /// The pod matches all its own affinity terms (the first of a group may go anywhere).
    self_affine: bool,
    /// Per `DoNotSchedule` constraint: the pod's index in `spec.topologySpreadConstraints`, and
    /// whether it counts itself.
    spread: Vec<(usize, bool)>,
}

/// Takes back the tentative placements applied to `e`.
fn undo<S>(e: &mut Entry<S>, mut apply: impl FnMut(&mut S, usize, usize, i64)) {
    for &(q, n) in e.applied.iter().rev() {
        apply(&mut e.state, q, n, -1);
    }
    e.applied.clear();
}

/// Brings `e`'s tentative placements in line with `tentative`: what it shares with the last
/// query's stays applied, the rest is taken back and the new applied.
fn sync<S>(e: &mut Entry<S>, tentative: Tentative<'_>, mut apply: impl FnMut(&mut S, usize, usize, i64)) {
    let common = e.applied.iter().zip(tentative.iter()).take_while(|(a, b)| **a == *b).count();
    for &(q, n) in e.applied[common..].iter().rev() {
        apply(&mut e.state, q, n, -1);
    }
    e.applied.truncate(common);
    e.applied.reserve(tentative.len().saturating_sub(common));
    for (q, n) in tentative.iter().skip(common) {
        apply(&mut e.state, q, n, 1);
        e.applied.push((q, n));
    }
}

impl<'a> Joint<'a> {
    /// The inter-pod filters of a cycle on `snap`; `active`: whether they may keep any pod off a
    /// node at all (when not, they cost nothing).
    pub fn new(snap: &'a Snapshot, fast: bool, node_index: NodeIndex<'a>, active: bool) -> Self {
        Joint {
            snap,
            fast,
            active,
            node_index,
            none: Labels::default(),
            usage: OnceCell::new(),
            committed: RefCell::new(Vec::new()),
            committed_alike: RefCell::new(Vec::new()),
            committed_repelling: RefCell::new(0),
            last_commit: RefCell::new(None),
            last_repel_commit: RefCell::new(None),
            terms: RefCell::new(Vec::new()),
            term_keys: RefCell::new(HashMap::new()),
            term_of: RefCell::new(ByPod::default()),
            last_term: RefCell::new(None),
            term_index: RefCell::new(Index::default()),
            repels: RefCell::new(Vec::new()),
            repel_keys: RefCell::new(HashMap::new()),
            repel_of: RefCell::new(ByPod::default()),
            last_repel: RefCell::new(None),
            repel_index: RefCell::new(Index::default()),
            ports: RefCell::new(None),
            eligible: RefCell::new(HashMap::new()),
            domains: RefCell::new(HashMap::new()),
            label_groups: RefCell::new(HashMap::new()),
            repel_groups: RefCell::new(HashMap::new()),
            bound_by_label: RefCell::new(HashMap::new()),
        }
    }

    /// Notes placements committed this cycle, and hands each to the states it may count for
    /// (their tentative placements taken back first: they may be these very ones). The log is
    /// indexed by anchor only when a state is made ([`Joint::index_committed`]), so a cycle whose
    /// pods ask nothing of the kind pays for a push per placement and no more.
    ///
    /// `alike`: the pods are alike, each to the one committed just before it (one namespace,
    /// labels and terms: the next of a run of replicas), so what was found for that one holds
    /// without a look.
    pub fn committed(&self, bindings: &[(usize, usize)], alike: bool) {
        if !self.active {
            return;
        }
        if alike && self.fast {
            return self.committed_alike(bindings);
        }
        let mut anchors = Vec::new();
        for &(q, n) in bindings {
            let pod = &self.snap.pods[q];
            // The pod committed just before, when this one is known to be alike.
            let before = self.committed.borrow().last().map(|&(r, _)| r).filter(|_| alike);
            self.committed.borrow_mut().push((q, n));
            self.committed_alike.borrow_mut().push(alike);
            if !pod.anti_affinity().is_empty() {
                *self.committed_repelling.borrow_mut() += 1;
            }
            if !self.fast {
                // The reference cycle builds every state afresh for every query.
                continue;
            }
            if !self.term_index.borrow().listening.is_empty() {
                let (generation, ids) = self.term_listeners(q, alike, &mut anchors);
                for &id in &ids {
                    let shared = self.terms.borrow()[id].clone();
                    let mut e = shared.borrow_mut();
                    undo(&mut e, |st, q, n, sign| self.count_term(st, q, n, sign));
                    self.count_term_like(&mut e.state, q, before, n, 1);
                }
                *self.last_commit.borrow_mut() = Some((q, generation, ids));
            }
            if !pod.anti_affinity().is_empty() && !self.repel_index.borrow().listening.is_empty() {
                let (generation, ids) = self.repel_listeners(q, alike);
                for &id in &ids {
                    let shared = self.repels.borrow()[id].clone();
                    let mut e = shared.borrow_mut();
                    undo(&mut e, |st, q, n, sign| self.count_repel(st, q, n, sign));
                    self.count_repel_like(&mut e.state, q, before, n, 1);
                }
                *self.last_repel_commit.borrow_mut() = Some((q, generation, ids));
            }
            if !pod.host_ports().is_empty()
                && let Some(ports) = self.ports.borrow().as_ref()
            {
                let mut e = ports.borrow_mut();
                undo(&mut e, |st, q, n, sign| self.count_ports(st, q, n, sign));
                self.count_ports(&mut e.state, q, n, 1);
            }
        }
    }

    /// [`Joint::committed`] for pods alike to the one committed just before them (a run of
    /// replicas): what a placement concerns is found once for the whole slice, so a run of pods
    /// no state listens for costs a copy of the slice and no more.
    fn committed_alike(&self, bindings: &[(usize, usize)]) {
        let Some(&(head, _)) = bindings.first() else { return };
        let Some(&(last, _)) = bindings.last() else { return };
        let pod = &self.snap.pods[head];
        let mut before = self.committed.borrow().last().map(|&(r, _)| r);
        self.committed.borrow_mut().extend_from_slice(bindings);
        self.committed_alike.borrow_mut().extend(std::iter::repeat_n(true, bindings.len()));
        let repelling = !pod.anti_affinity().is_empty();
        if repelling {
            *self.committed_repelling.borrow_mut() += bindings.len();
        }
        // Each pod's `like` is the one committed just before it.
        let likes = || {
            bindings.iter().map(move |&(q, n)| {
                let like = before;
                before = Some(q);
                (q, like, n)
            })
        };
        if !self.term_index.borrow().listening.is_empty() {
            let (generation, ids) = self.term_listeners(head, true, &mut Vec::new());
            for &id in &ids {
                let shared = self.terms.borrow()[id].clone();
                let mut e = shared.borrow_mut();
                undo(&mut e, |st, q, n, sign| self.count_term(st, q, n, sign));
                for (q, like, n) in likes() {
                    self.count_term_like(&mut e.state, q, like, n, 1);
                }
            }
            *self.last_commit.borrow_mut() = Some((last, generation, ids));
        }
        if repelling && !self.repel_index.borrow().listening.is_empty() {
            let (generation, ids) = self.repel_listeners(head, true);
            for &id in &ids {
                let shared = self.repels.borrow()[id].clone();
                let mut e = shared.borrow_mut();
                undo(&mut e, |st, q, n, sign| self.count_repel(st, q, n, sign));
                for (q, like, n) in likes() {
                    self.count_repel_like(&mut e.state, q, like, n, 1);
                }
            }
            *self.last_repel_commit.borrow_mut() = Some((last, generation, ids));
        }
        if !pod.host_ports().is_empty()
            && let Some(ports) = self.ports.borrow().as_ref()
        {
            let mut e = ports.borrow_mut();
            undo(&mut e, |st, q, n, sign| self.count_ports(st, q, n, sign));
            for &(q, n) in bindings {
                self.count_ports(&mut e.state, q, n, 1);
            }
        }
    }

    /// The term states listening for pod `q`, being committed, and the index generation: the
    /// memo of the pod committed just before when `q` is alike to it (`alike`, or one namespace
    /// and labels) and nobody started listening since, else a look-up by `q`'s anchors (`anchors`
    /// is scratch space).
    fn term_listeners(&self, q: usize, alike: bool, anchors: &mut Vec<u64>) -> (u64, Vec<usize>) {
        let pod = &self.snap.pods[q];
        let generation = self.term_index.borrow().generation;
        let memo = self.last_commit.borrow_mut().take().filter(|(last, g, _)| {
            let other = &self.snap.pods[*last];
            *g == generation
                && (alike || (other.key.namespace == pod.key.namespace && other.labels == pod.labels))
        });
        let ids = match memo {
            Some((_, _, ids)) => ids,
            None => {
                pod_anchors_into(&pod.key.namespace, &pod.labels, anchors);
                self.term_index.borrow().listeners(anchors)
            }
        };
        (generation, ids)
    }

    /// [`Joint::term_listeners`] for the symmetry states pod `q`'s anti-affinity may select.
    fn repel_listeners(&self, q: usize, alike: bool) -> (u64, Vec<usize>) {
        let pod = &self.snap.pods[q];
        let generation = self.repel_index.borrow().generation;
        let memo = self.last_repel_commit.borrow_mut().take().filter(|(last, g, _)| {
            *g == generation && (alike || self.snap.pods[*last].anti_affinity() == pod.anti_affinity())
        });
        let ids = match memo {
            Some((_, _, ids)) => ids,
            None => {
                let anchors: Vec<u64> = (pod.anti_affinity().iter())
                    .filter_map(|t| term_anchors(&t.namespaces, t.any_namespace(), t.selector.as_ref()))
                    .flatten()
                    .collect();
                self.repel_index.borrow().listeners(&anchors)
            }
        };
        (generation, ids)
    }

    /// Indexes the committed placements not indexed yet by their anchors (for classes made from
    /// now on: a placement already committed reaches them through the index, later ones by push).
    fn index_committed(&self) {
        let pods = &self.snap.pods;
        let committed = self.committed.borrow();
        let alike = self.committed_alike.borrow();
        let (mut terms, mut repels) = (self.term_index.borrow_mut(), self.repel_index.borrow_mut());
        let (mut by_labels, mut by_anti) = (self.label_groups.borrow_mut(), self.repel_groups.borrow_mut());
        let same_labels = |a: &Pod, b: &Pod| a.key.namespace == b.key.namespace && a.labels == b.labels;
        for at in terms.indexed..committed.len() {
            let q = committed[at].0;
            let pod = &pods[q];
            // The last filed is the placement just before: alike, it is of the same group.
            let known = terms.last.filter(|&(r, _)| alike[at] || same_labels(&pods[r], pod)).map(|(_, g)| g);
            if known.is_some() {
                terms.file(at, q, known, Vec::new);
            } else {
                let alike = by_labels.entry(hash_of(&(&pod.key.namespace, &pod.labels))).or_default();
                let found = alike.iter().find(|&&(r, _)| same_labels(&pods[r], pod)).map(|&(_, g)| g);
                let g = terms.file(at, q, found, || pod_anchors(&pod.key.namespace, &pod.labels));
                if found.is_none() {
                    alike.push((q, g));
                }
            }
            let anti = pod.anti_affinity();
            if anti.is_empty() {
                continue;
            }
            let known =
                repels.last.filter(|&(r, _)| alike[at] || pods[r].anti_affinity() == anti).map(|(_, g)| g);
            if known.is_some() {
                repels.file(at, q, known, Vec::new);
                continue;
            }
            let alike = by_anti.entry(hash_of(&anti)).or_default();
            let found = alike.iter().find(|&&(r, _)| pods[r].anti_affinity() == anti).map(|&(_, g)| g);
            let g = repels.file(at, q, found, || {
                anti.iter()
                    .filter_map(|t| term_anchors(&t.namespaces, t.any_namespace(), t.selector.as_ref()))
                    .flatten()
                    .collect()
            });
            if found.is_none() {
                alike.push((q, g));
            }
        }
        terms.indexed = committed.len();
        repels.indexed = committed.len();
    }

    /// The domains of topology key `key`, made once a cycle: ids in the order nodes first have a
    /// value, found by a hash of the value (no sort, no name kept).
    fn domains(&self, key: &str) -> Rc<Domains> {
        if let Some(d) = self.domains.borrow().get(key) {
            return d.clone();
        }
        // A key every node carries with its own name as the value (`kubernetes.io/hostname`, as
        // the kubelet sets it) makes a domain per node, the node's index its id: a comparison per
        // node instead of a hash. Names are unique when the name index has one entry per node.
        let n = self.snap.nodes.len();
        if self.node_index.len() == n
            && self.snap.nodes.iter().all(|node| node.labels.get(key).is_some_and(|v| *v == *node.name))
        {
            let node_domain = (0..n).map(|i| u32::try_from(i).unwrap_or(u32::MAX)).collect();
            let d = Rc::new(Domains { node_domain, count: n });
            self.domains.borrow_mut().insert(key.to_string(), d.clone());
            return d;
        }
        let mut ids: HashMap<&str, u32, std::hash::BuildHasherDefault<Fx>> =
            HashMap::with_capacity_and_hasher(self.snap.nodes.len(), Default::default());
        let node_domain = (self.snap.nodes.iter())
            .map(|n| match n.labels.get(key) {
                Some(v) => {
                    let next = u32::try_from(ids.len()).unwrap_or(u32::MAX);
                    *ids.entry(v.as_str()).or_insert(next)
                }
                None => u32::MAX,
            })
            .collect();
        let d = Rc::new(Domains { node_domain, count: ids.len() });
        self.domains.borrow_mut().insert(key.to_string(), d.clone());
        d
    }

    /// The snapshot's usage (added up once when it carries none); `None` in the reference cycle,
    /// which reads every pod.
    fn usage(&self) -> Option<&Usage> {
        if !self.fast {
            return None;
        }
        self.usage
            .get_or_init(|| if self.snap.usage.is_some() { None } else { Some(Usage::of(&self.snap.pods)) })
            .as_ref()
            .or(self.snap.usage.as_ref())
    }

    /// The node pod `p` is on, if it uses one the snapshot has.
    fn on_node(&self, p: usize) -> Option<usize> {
        let pod = &self.snap.pods[p];
        if !pod.uses_node() {
            return None;
        }
        self.node_index.get(pod.node_name.as_deref()?).copied()
    }

    fn namespace_labels(&self, namespace: &str) -> &Labels {
        self.snap.namespaces.get(namespace).unwrap_or(&self.none)
    }

    /// Whether term `t` selects pod `q` (its namespace's labels looked up only for a term with a
    /// `namespaceSelector`).
    fn selects(&self, t: &AffinityTerm, q: &Pod) -> bool {
        let namespace = &q.key.namespace;
        let labels = if t.any_namespace() { self.namespace_labels(namespace) } else { &self.none };
        t.selects(namespace, &q.labels, labels)
    }

    /// The inter-pod filters for pod `p` with `tentative` placed before it; `None` when none can
    /// keep it off a node (it asks nothing of the kind and no placed pod's anti-affinity selects
    /// it): then its placement is the inter-pod filters' no business.
    pub fn view(&self, p: usize, tentative: Tentative<'_>) -> Option<View<'_>> {
        if !self.active {
            return None;
        }
        let pod = &self.snap.pods[p];
        let own = pod.terms().filter(|t| t.depends_on_others());
        let terms = own
            .filter(|t| {
                !t.affinity.is_empty() || !t.anti_affinity.is_empty() || t.hard_spread().next().is_some()
            })
            .map(|_| self.term_state(p, tentative));
        let ports = own.filter(|t| !t.host_ports.is_empty()).map(|_| self.port_state(tentative));
        let repel = self.repel_state(p, tentative);
        if terms.is_none() && ports.is_none() && repel.is_none() {
            return None;
        }
        let self_affine =
            own.is_some_and(|t| !t.affinity.is_empty() && t.affinity.iter().all(|a| self.selects(a, pod)));
        let spread = own.map_or_else(Vec::new, |t| {
            t.spread
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    c.when_unsatisfiable == crate::read::model::terms::Unsatisfiable::DoNotSchedule
                })
                .map(|(i, c)| (i, c.counts_self(&pod.labels)))
                .collect()
        });
        Some(View { joint: self, pod: p, terms, repel, ports, self_affine, spread })
    }

    /// The pods on nodes that may count for `p`'s class: those of the namespaces its terms read
    /// (every pod, when a term has a `namespaceSelector`, or in the reference cycle).
    ///
    /// A selector is looked up by the label it needs (its first `matchLabels` entry, an `In`
    /// or `Exists` requirement) among the pods on nodes of the namespace by that label, so a
    /// class costs the pods it may count, not the namespace.
    fn candidates_for(&self, p: usize) -> Vec<usize> {
        let pod = &self.snap.pods[p];
        let all = || (0..self.snap.pods.len()).collect::<Vec<_>>();
        let Some(usage) = self.usage() else { return all() };
        let Some(terms) = pod.terms() else { return Vec::new() };
        let own = [pod.key.namespace.to_string()];
        let own = &own[..];
        let looks = terms
            .affinity
            .iter()
            .chain(&terms.anti_affinity)
            .map(|t| (t.any_namespace(), &t.namespaces[..], t.selector.as_ref()))
            // An empty spread selector counts no pod (see `SpreadConstraint::counts`).
            .chain(terms.hard_spread().map(|c| (false, own, c.selector.as_ref().filter(|s| !s.is_empty()))));
        let mut out = Vec::new();
        for (any, namespaces, selector) in looks {
            let Some(selector) = selector else { continue };
            if any {
                return all();
            }
            for ns in namespaces {
                self.bound_selected_into(usage, ns, selector, &mut out);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Adds the pods on nodes of `namespace` that `selector` may select to `out` (a superset:
    /// every count checks the selector itself).
    fn bound_selected_into(
        &self,
        usage: &Usage,
        namespace: &str,
        selector: &LabelSelector,
        out: &mut Vec<usize>,
    ) {
        let by = |key: &str| self.bound_by_label(usage, namespace, key);
        let value = |k: &str, v: &str| anchor(namespace, Some(k), Some(v));
        if let Some((k, v)) = selector.match_labels.iter().next() {
            out.extend(by(k).get(&value(k, v)).into_iter().flatten());
        } else if let Some(r) = selector.match_expressions.iter().find(|r| r.operator == LabelOperator::In) {
            let index = by(&r.key);
            out.extend(r.values.iter().filter_map(|v| index.get(&value(&r.key, v))).flatten());
        } else if let Some(r) =
            selector.match_expressions.iter().find(|r| r.operator == LabelOperator::Exists)
        {
            out.extend(by(&r.key).values().flatten());
        } else {
            out.extend(usage.in_namespace(namespace));
        }
    }

    /// The pods on nodes of `namespace` by the [`anchor`] of their value of label `key`.
    fn bound_by_label(&self, usage: &Usage, namespace: &str, key: &str) -> Rc<ByAnchor> {
        let names = (namespace.to_string(), key.to_string());
        if let Some(index) = self.bound_by_label.borrow().get(&names) {
            return index.clone();
        }
        let mut index = ByAnchor::default();
        for q in usage.in_namespace(namespace) {
            if let Some(v) = self.snap.pods[q].labels.get(key) {
                index.entry(anchor(namespace, Some(key), Some(v))).or_default().push(q);
            }
        }
        let index = Rc::new(index);
        self.bound_by_label.borrow_mut().insert(names, index.clone());
        index
    }

    fn term_key(&self, p: usize) -> TermKey {
        let pod = &self.snap.pods[p];
        let terms = pod.terms().cloned().unwrap_or_default();
        let spread: Vec<SpreadConstraint> = terms.hard_spread().cloned().collect();
        let nodes = (!spread.is_empty())
            .then(|| (pod.node_selector.clone(), pod.affinity.clone(), pod.tolerations.clone()));
        TermKey {
            namespace: pod.key.namespace.clone(),
            affinity: terms.affinity,
            anti: terms.anti_affinity,
            spread,
            nodes,
        }
    }

    /// The class of the last pod looked up in `last`, when `p` is of the same: one namespace and,
    /// for symmetry (`labels`), one set of labels, else one set of terms and node side.
    fn like_last(&self, last: &RefCell<Option<(usize, usize)>>, p: usize, labels: bool) -> Option<usize> {
        let (q, id) = (*last.borrow())?;
        let (a, b) = (&self.snap.pods[p], &self.snap.pods[q]);
        let same = a.key.namespace == b.key.namespace
            && if labels {
                a.labels == b.labels
            } else {
                a.terms == b.terms
                    && a.node_selector == b.node_selector
                    && a.affinity == b.affinity
                    && a.tolerations == b.tolerations
            };
        same.then_some(id)
    }

    /// The anchors the terms of `p`'s class look at (see [`anchor`]).
    fn class_anchors(&self, p: usize) -> Vec<u64> {
        let pod = &self.snap.pods[p];
        let Some(terms) = pod.terms() else { return Vec::new() };
        let own = [pod.key.namespace.to_string()];
        let own = &own[..];
        terms
            .affinity
            .iter()
            .chain(&terms.anti_affinity)
            .filter_map(|t| term_anchors(&t.namespaces, t.any_namespace(), t.selector.as_ref()))
            .chain(
                terms
                    .hard_spread()
                    .filter_map(|c| term_anchors(own, false, c.selector.as_ref().filter(|s| !s.is_empty()))),
            )
            .flatten()
            .collect()
    }

    /// Pod `p`'s class state, in step with the cycle and `tentative`.
    fn term_state(&self, p: usize, tentative: Tentative<'_>) -> Shared<TermState> {
        let shared = if self.fast {
            let known =
                self.term_of.borrow().get(&p).copied().or_else(|| self.like_last(&self.last_term, p, false));
            let id = match known {
                Some(id) => id,
                None => {
                    let key = self.term_key(p);
                    let found = self.term_keys.borrow().get(&key).copied();
                    let id = match found {
                        Some(id) => id,
                        None => {
                            let state = self.new_term_state(p);
                            let mut terms = self.terms.borrow_mut();
                            terms.push(Rc::new(RefCell::new(Entry { state, applied: Vec::new() })));
                            let id = terms.len() - 1;
                            self.term_index.borrow_mut().listen(&self.class_anchors(p), id);
                            self.term_keys.borrow_mut().insert(key, id);
                            id
                        }
                    };
                    self.term_of.borrow_mut().insert(p, id);
                    id
                }
            };
            *self.last_term.borrow_mut() = Some((p, id));
            self.terms.borrow()[id].clone()
        } else {
            Rc::new(RefCell::new(Entry { state: self.new_term_state(p), applied: Vec::new() }))
        };
        {
            let mut e = shared.borrow_mut();
            sync(&mut e, tentative, |st, q, n, sign| self.count_term(st, q, n, sign));
        }
        shared
    }

    /// A class state counting the pods on nodes and those committed so far.
    fn new_term_state(&self, p: usize) -> TermState {
        let pod = &self.snap.pods[p];
        let terms = pod.terms().cloned().unwrap_or_default();
        let hard: Vec<&SpreadConstraint> = terms.hard_spread().collect();
        let keys: Vec<String> = hard.iter().map(|c| c.topology_key.clone()).collect();
        let spread = hard
            .iter()
            .map(|c| {
                let topo = self.domains(&c.topology_key);
                let eligible = self.eligible(pod, &keys, c, &topo);
                let mut levels = BTreeMap::new();
                if eligible.domains > 0 {
                    levels.insert(0, u32::try_from(eligible.domains).unwrap_or(u32::MAX));
                }
                Spread { counts: Counts::new(topo), eligible, levels }
            })
            .collect();
        let mut state = TermState {
            rep: p,
            affinity: terms.affinity.iter().map(|t| Counts::new(self.domains(&t.topology_key))).collect(),
            affinity_any: 0,
            anti: terms.anti_affinity.iter().map(|t| Counts::new(self.domains(&t.topology_key))).collect(),
            spread,
            seen: None,
        };
        for q in self.candidates_for(p) {
            if let Some(n) = self.on_node(q) {
                self.count_term(&mut state, q, n, 1);
            }
        }
        if self.fast {
            self.index_committed();
        }
        let committed = self.committed.borrow();
        let placed: Vec<usize> = if self.fast {
            self.term_index.borrow().placed(&self.class_anchors(p))
        } else {
            (0..committed.len()).collect()
        };
        for at in placed {
            let (q, n) = committed[at];
            self.count_term(&mut state, q, n, 1);
        }
        state
    }

    /// The nodes that count for spread constraint `c` of `pod` (`keys`: all its `DoNotSchedule`
    /// topology keys), and the domains they make.
    fn eligible(&self, pod: &Pod, keys: &[String], c: &SpreadConstraint, topo: &Domains) -> Rc<Eligible> {
        let key = EligibleKey {
            keys: keys.to_vec(),
            key: c.topology_key.clone(),
            affinity: (c.node_affinity_policy == Inclusion::Honor)
                .then(|| (pod.node_selector.clone(), pod.affinity.clone())),
            taints: (c.node_taints_policy == Inclusion::Honor).then(|| pod.tolerations.clone()),
        };
        if self.fast
            && let Some(e) = self.eligible.borrow().get(&key)
        {
            return e.clone();
        }
        let mut node = vec![false; self.snap.nodes.len()];
        let mut domain = vec![false; topo.count];
        for (n, nd) in self.snap.nodes.iter().enumerate() {
            let counts = keys.iter().all(|k| nd.labels.contains_key(k))
                && (c.node_affinity_policy == Inclusion::Ignore || matches_node_affinity(nd, pod))
                && (c.node_taints_policy == Inclusion::Ignore || !untolerated_taint(nd, &pod.tolerations));
            if !counts {
                continue;
            }
            node[n] = true;
            if let Some(d) =
                topo.node_domain.get(n).and_then(|&d| usize::try_from(d).ok()).filter(|&d| d < domain.len())
            {
                domain[d] = true;
            }
        }
        let domains = domain.iter().filter(|&&d| d).count();
        let e = Rc::new(Eligible { node, domains });
        if self.fast {
            self.eligible.borrow_mut().insert(key, e.clone());
        }
        e
    }

    /// Counts pod `q` on node `n` (`sign` -1: takes it back) for the class of `st.rep`.
    fn count_term(&self, st: &mut TermState, q: usize, n: usize, sign: i64) {
        self.count_term_like(st, q, None, n, sign);
    }

    /// [`Joint::count_term`], `like` being a pod known to be alike to `q` (one namespace and
    /// labels): what counts it is what counted that one, when that one was the last counted.
    fn count_term_like(&self, st: &mut TermState, q: usize, like: Option<usize>, n: usize, sign: i64) {
        let known = st.seen.take().filter(|(r, _)| *r == q || like == Some(*r)).map(|(_, c)| c);
        let counted = known.unwrap_or_else(|| {
            let rep = &self.snap.pods[st.rep];
            let pod = &self.snap.pods[q];
            let Some(terms) = rep.terms() else { return Counted::default() };
            let spread = pod.key.namespace == rep.key.namespace && !pod.deleting;
            Counted {
                affinity: !terms.affinity.is_empty() && terms.affinity.iter().all(|t| self.selects(t, pod)),
                anti: terms.anti_affinity.iter().map(|t| self.selects(t, pod)).collect(),
                spread: terms.hard_spread().map(|c| spread && c.counts(&pod.labels)).collect(),
            }
        });
        if counted.affinity {
            for c in &mut st.affinity {
                if c.add(n, sign) {
                    st.affinity_any += sign;
                }
            }
        }
        for (&yes, c) in counted.anti.iter().zip(&mut st.anti) {
            if yes {
                c.add(n, sign);
            }
        }
        for (&yes, s) in counted.spread.iter().zip(&mut st.spread) {
            if yes {
                s.add(n, sign);
            }
        }
        st.seen = Some((q, counted));
    }

    /// Whether a pod with required anti-affinity may be on a node by now: on nodes (for pods of
    /// `namespace`), committed this cycle, or in `tentative`.
    fn any_repelling(&self, namespace: &str, tentative: Tentative<'_>) -> bool {
        let bound = match self.usage() {
            Some(u) => u.repelling(namespace).next().is_some(),
            None => self.snap.pods.iter().any(|q| q.uses_node() && !q.anti_affinity().is_empty()),
        };
        bound
            || *self.committed_repelling.borrow() > 0
            || tentative.iter().any(|(q, _)| !self.snap.pods[q].anti_affinity().is_empty())
    }

    /// The anti-affinity of placed pods that selects pod `p`, in step; `None` when none does.
    fn repel_state(&self, p: usize, tentative: Tentative<'_>) -> Option<Shared<Repel>> {
        let pod = &self.snap.pods[p];
        if !self.any_repelling(&pod.key.namespace, tentative) {
            return None;
        }
        let shared = if self.fast {
            let known =
                self.repel_of.borrow().get(&p).copied().or_else(|| self.like_last(&self.last_repel, p, true));
            let found = known.or_else(|| {
                self.repel_keys.borrow().get(&(pod.key.namespace.clone(), pod.labels.clone())).copied()
            });
            let id = match found {
                Some(id) => id,
                None => {
                    let state = self.new_repel(p);
                    let mut repels = self.repels.borrow_mut();
                    repels.push(Rc::new(RefCell::new(Entry { state, applied: Vec::new() })));
                    let id = repels.len() - 1;
                    self.repel_index.borrow_mut().listen(&pod_anchors(&pod.key.namespace, &pod.labels), id);
                    self.repel_keys.borrow_mut().insert((pod.key.namespace.clone(), pod.labels.clone()), id);
                    id
                }
            };
            self.repel_of.borrow_mut().insert(p, id);
            *self.last_repel.borrow_mut() = Some((p, id));
            self.repels.borrow()[id].clone()
        } else {
            Rc::new(RefCell::new(Entry { state: self.new_repel(p), applied: Vec::new() }))
        };
        let total = {
            let mut e = shared.borrow_mut();
            sync(&mut e, tentative, |st, q, n, sign| self.count_repel(st, q, n, sign));
            e.state.total
        };
        (total > 0).then_some(shared)
    }

    /// The anti-affinity selecting `p`'s namespace and labels, of the pods on nodes and those
    /// committed so far.
    fn new_repel(&self, p: usize) -> Repel {
        let pod = &self.snap.pods[p];
        let mut state = Repel { rep: p, by_key: Vec::new(), total: 0, seen: None };
        let mut from: Vec<usize> = match self.usage() {
            Some(u) => u.repelling(&pod.key.namespace).collect(),
            None => (0..self.snap.pods.len()).collect(),
        };
        from.sort_unstable();
        from.dedup();
        for q in from {
            if let Some(n) = self.on_node(q) {
                self.count_repel(&mut state, q, n, 1);
            }
        }
        if self.fast {
            self.index_committed();
        }
        let committed = self.committed.borrow();
        let placed: Vec<usize> = if self.fast {
            self.repel_index.borrow().placed(&pod_anchors(&pod.key.namespace, &pod.labels))
        } else {
            (0..committed.len()).collect()
        };
        for at in placed {
            let (q, n) = committed[at];
            self.count_repel(&mut state, q, n, 1);
        }
        state
    }

    fn count_repel(&self, st: &mut Repel, q: usize, n: usize, sign: i64) {
        self.count_repel_like(st, q, None, n, sign);
    }

    /// [`Joint::count_repel`], `like` being a pod known to have the anti-affinity of `q`.
    fn count_repel_like(&self, st: &mut Repel, q: usize, like: Option<usize>, n: usize, sign: i64) {
        let known = st.seen.take().filter(|(r, _)| *r == q || like == Some(*r)).map(|(_, at)| at);
        let keys = known.unwrap_or_else(|| {
            let target = &self.snap.pods[st.rep];
            let mut keys = Vec::new();
            for t in self.snap.pods[q].anti_affinity() {
                if !self.selects(t, target) {
                    continue;
                }
                let at = match st.by_key.iter().position(|(k, _)| *k == t.topology_key) {
                    Some(i) => i,
                    None => {
                        let counts = Counts::new(self.domains(&t.topology_key));
                        st.by_key.push((t.topology_key.clone(), counts));
                        st.by_key.len() - 1
                    }
                };
                keys.push(at);
            }
            keys
        });
        for &at in &keys {
            if st.by_key[at].1.add(n, sign) {
                st.total += sign;
            }
        }
        st.seen = Some((q, keys));
    }

    /// The host ports in use, in step.
    fn port_state(&self, tentative: Tentative<'_>) -> Shared<Ports> {
        let existing = if self.fast { self.ports.borrow().clone() } else { None };
        let shared = existing.unwrap_or_else(|| {
            let mut state = Ports::default();
            let from: Vec<usize> = match self.usage() {
                Some(u) => u.with_ports().collect(),
                None => (0..self.snap.pods.len()).collect(),
            };
            for q in from {
                if let Some(n) = self.on_node(q) {
                    self.count_ports(&mut state, q, n, 1);
                }
            }
            for &(q, n) in self.committed.borrow().iter() {
                self.count_ports(&mut state, q, n, 1);
            }
            let s = Rc::new(RefCell::new(Entry { state, applied: Vec::new() }));
            if self.fast {
                *self.ports.borrow_mut() = Some(s.clone());
            }
            s
        });
        {
            let mut e = shared.borrow_mut();
            sync(&mut e, tentative, |st, q, n, sign| self.count_ports(st, q, n, sign));
        }
        shared
    }

    fn count_ports(&self, st: &mut Ports, q: usize, n: usize, sign: i64) {
        let ports = self.snap.pods[q].host_ports();
        if ports.is_empty() {
            return;
        }
        let on = st.on.entry(n).or_default();
        for hp in ports {
            if sign > 0 {
                on.push(hp.clone());
            } else if let Some(i) = on.iter().position(|x| x == hp) {
                on.swap_remove(i);
            }
        }
    }

    /// The placed pods (on nodes, committed, `tentative`) that make `block` of pod `p` at node
    /// `n`: for messages that name who is in the way.
    pub fn blockers(&self, p: usize, n: usize, block: &Block, tentative: Tentative<'_>) -> Vec<usize> {
        let pod = &self.snap.pods[p];
        let same_domain = |key: &str, m: usize| {
            let topo = self.domains(key);
            let (a, b) = (topo.node_domain[n], topo.node_domain[m]);
            a != u32::MAX && a == b
        };
        let committed = self.committed.borrow().clone();
        let bound = (0..self.snap.pods.len()).filter_map(|q| Some((q, self.on_node(q)?)));
        let placed = tentative.iter().chain(committed).chain(bound);
        let terms = pod.terms();
        let hit = |q: usize, m: usize| -> bool {
            let other = &self.snap.pods[q];
            match block {
                Block::Port(hp) => m == n && other.host_ports().iter().any(|x| x.conflicts(hp)),
                Block::AntiAffinity(i) => terms
                    .and_then(|t| t.anti_affinity.get(*i))
                    .is_some_and(|t| same_domain(&t.topology_key, m) && self.selects(t, other)),
                Block::Repelled(key) => {
                    same_domain(key, m)
                        && other
                            .anti_affinity()
                            .iter()
                            .any(|t| t.topology_key == *key && self.selects(t, pod))
                }
                _ => false,
            }
        };
        let mut out: Vec<usize> = placed.filter(|&(q, m)| q != p && hit(q, m)).map(|(q, _)| q).collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

impl View<'_> {
    /// Whether `block` (an answer of [`View::allows`]) may lift as more pods alike to this one
    /// are placed: only a skew their placements count may fall. Anything else only grows
    /// (anti-affinity either way, host ports) or never changes (labels, what they do not count).
    /// So does a missing affinity: once any pod meets the terms, the pods go only where the
    /// counts are already above 0, so a domain at 0 stays there.
    pub fn may_lift(&self, block: &Block) -> bool {
        match block {
            Block::Skew(i) => self.spread.iter().any(|&(j, counts_self)| j == *i && counts_self),
            _ => false,
        }
    }

    /// Whether the inter-pod filters let the pod onto node `n`; else the first reason, in
    /// kube-scheduler's order (`NodePorts`, `PodTopologySpread`, `InterPodAffinity`: affinity,
    /// anti-affinity, the placed pods' anti-affinity).
    pub fn allows(&self, n: usize) -> Result<(), Block> {
        let pod = &self.joint.snap.pods[self.pod];
        if let Some(ports) = &self.ports {
            let ports = ports.borrow();
            if let Some(used) = ports.state.on.get(&n) {
                for hp in pod.host_ports() {
                    if used.iter().any(|u| u.conflicts(hp)) {
                        return Err(Block::Port(hp.clone()));
                    }
                }
            }
        }
        if let (Some(terms), Some(own)) = (&self.terms, pod.terms()) {
            let s = terms.borrow();
            let st = &s.state;
            for ((i, self_match), (c, spread)) in self.spread.iter().zip(own.hard_spread().zip(&st.spread)) {
                // Only pods on eligible nodes were counted: a domain no eligible node makes holds 0.
                let Some(count) = spread.counts.at(n) else { return Err(Block::SpreadLabel(*i)) };
                let skew = count + i64::from(*self_match) - spread.min(c.min_domains);
                if skew > i64::from(c.max_skew) {
                    return Err(Block::Skew(*i));
                }
            }
            let mut missing = None;
            for (i, c) in st.affinity.iter().enumerate() {
                match c.at(n) {
                    None => return Err(Block::AffinityLabel(i)),
                    Some(0) => {
                        missing.get_or_insert(i);
                    }
                    Some(_) => {}
                }
            }
            if let Some(i) = missing
                && !(st.affinity_any == 0 && self.self_affine)
            {
                return Err(Block::Affinity(i));
            }
            for (i, c) in st.anti.iter().enumerate() {
                if c.at(n).is_some_and(|k| k > 0) {
                    return Err(Block::AntiAffinity(i));
                }
            }
        }
        if let Some(repel) = &self.repel {
            let r = repel.borrow();
            for (key, c) in &r.state.by_key {
                if c.at(n).is_some_and(|k| k > 0) {
                    return Err(Block::Repelled(key.clone()));
                }
            }
        }
        Ok(())
    }
}
