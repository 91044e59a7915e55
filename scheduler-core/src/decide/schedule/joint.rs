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
//! a pod already there. Such pods are found through the snapshot's [`crate::model::Usage`], by the
//! namespaces their terms read, so a pod that no term can select costs nothing here.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use super::cache::{Caches, Topology};
use super::filter::{matches_node_affinity, untolerated_taint};
use crate::model::terms::{AffinityTerm, HostPort, Inclusion, SpreadConstraint};
use crate::model::{Labels, NodeSelectorTerm, Pod, Snapshot, Toleration, Usage};

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

/// Counts per domain of one topology key.
#[derive(Debug)]
struct Counts {
    topo: Rc<Topology>,
    n: Vec<i64>,
}

impl Counts {
    fn new(topo: Rc<Topology>) -> Self {
        let n = vec![0; topo.domains.len()];
        Counts { topo, n }
    }

    fn domain(&self, node: usize) -> Option<usize> {
        let d = self.topo.node_domain.get(node).copied().unwrap_or(u32::MAX);
        (d != u32::MAX).then(|| usize::try_from(d).unwrap_or(usize::MAX)).filter(|&d| d < self.n.len())
    }

    /// Adds `sign` to the node's domain; false when the node lacks the key.
    fn add(&mut self, node: usize, sign: i64) -> bool {
        match self.domain(node) {
            Some(d) => {
                self.n[d] += sign;
                true
            }
            None => false,
        }
    }

    fn at(&self, node: usize) -> Option<i64> {
        self.domain(node).map(|d| self.n[d])
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
        let old = self.counts.n[d];
        if let Some(c) = self.levels.get_mut(&old) {
            *c -= 1;
            if *c == 0 {
                self.levels.remove(&old);
            }
        }
        self.counts.n[d] += sign;
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
}

/// The required anti-affinity of pods placed that selects pods of one namespace and labels
/// (`rep` stands for them): counts per domain, by topology key.
#[derive(Debug)]
struct Repel {
    rep: usize,
    by_key: Vec<(String, Counts)>,
    total: i64,
}

/// Host ports in use, per node.
#[derive(Debug, Default)]
struct Ports {
    on: HashMap<usize, Vec<HostPort>>,
}

/// A state kept in step with the placements it has seen: the cycle's committed log up to
/// `synced`, and the tentative placements `applied` on top.
#[derive(Debug)]
struct Synced<S> {
    state: S,
    synced: usize,
    applied: Vec<(usize, usize)>,
}

type Shared<S> = Rc<RefCell<Synced<S>>>;

/// What a pod's class counts: its namespace and terms (and what decides its spread domains).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TermKey {
    namespace: String,
    affinity: Vec<AffinityTerm>,
    anti: Vec<AffinityTerm>,
    spread: Vec<SpreadConstraint>,
    nodes: Option<NodeSide>,
}

/// A pod's node selector, required node affinity and tolerations.
type NodeSide = (BTreeMap<String, String>, Vec<NodeSelectorTerm>, Vec<Toleration>);

/// The inter-pod filters of one cycle: what the pods placed so far mean for the pods to come.
pub(super) struct Joint<'a> {
    snap: &'a Snapshot,
    fast: bool,
    node_index: HashMap<&'a str, usize>,
    none: Labels,
    /// The snapshot's usage, or one added up here when it carries none.
    usage: OnceCell<Option<Usage>>,
    /// Pods committed this cycle, with their nodes, in order.
    committed: RefCell<Vec<(usize, usize)>>,
    /// How many of them have required anti-affinity (a pod's symmetry may matter).
    committed_repelling: RefCell<usize>,
    term_keys: RefCell<HashMap<TermKey, Shared<TermState>>>,
    term_of: RefCell<HashMap<usize, Option<Shared<TermState>>>>,
    repel_keys: RefCell<HashMap<(String, Labels), Shared<Repel>>>,
    ports: RefCell<Option<Shared<Ports>>>,
    eligible: RefCell<HashMap<EligibleKey, Rc<Eligible>>>,
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

impl<'a> Joint<'a> {
    pub fn new(snap: &'a Snapshot, fast: bool, node_index: HashMap<&'a str, usize>) -> Self {
        Joint {
            snap,
            fast,
            node_index,
            none: Labels::default(),
            usage: OnceCell::new(),
            committed: RefCell::new(Vec::new()),
            committed_repelling: RefCell::new(0),
            term_keys: RefCell::new(HashMap::new()),
            term_of: RefCell::new(HashMap::new()),
            repel_keys: RefCell::new(HashMap::new()),
            ports: RefCell::new(None),
            eligible: RefCell::new(HashMap::new()),
        }
    }

    /// Notes placements committed this cycle.
    pub fn committed(&self, bindings: &[(usize, usize)]) {
        let repelling =
            bindings.iter().filter(|&&(p, _)| !self.snap.pods[p].anti_affinity().is_empty()).count();
        *self.committed_repelling.borrow_mut() += repelling;
        self.committed.borrow_mut().extend_from_slice(bindings);
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

    /// Whether term `t` selects pod `q`.
    fn selects(&self, t: &AffinityTerm, q: &Pod) -> bool {
        t.selects(&q.key.namespace, &q.labels, self.namespace_labels(&q.key.namespace))
    }

    /// The inter-pod filters for pod `p` with `tentative` placed before it; `None` when none can
    /// keep it off a node (it asks nothing of the kind and no placed pod's anti-affinity selects
    /// it): then its placement is the inter-pod filters' no business.
    pub fn view(&self, caches: &Caches<'_>, p: usize, tentative: Tentative<'_>) -> Option<View<'_>> {
        let pod = &self.snap.pods[p];
        let own = pod.terms().filter(|t| t.depends_on_others());
        let terms = own
            .filter(|t| {
                !t.affinity.is_empty() || !t.anti_affinity.is_empty() || t.hard_spread().next().is_some()
            })
            .map(|_| self.term_state(caches, p, tentative));
        let ports = own.filter(|t| !t.host_ports.is_empty()).map(|_| self.port_state(tentative));
        let repel = self.repel_state(caches, p, tentative);
        if terms.is_none() && ports.is_none() && repel.is_none() {
            return None;
        }
        let self_affine =
            own.is_some_and(|t| !t.affinity.is_empty() && t.affinity.iter().all(|a| self.selects(a, pod)));
        let spread = own.map_or_else(Vec::new, |t| {
            t.spread
                .iter()
                .enumerate()
                .filter(|(_, c)| c.when_unsatisfiable == crate::model::terms::Unsatisfiable::DoNotSchedule)
                .map(|(i, c)| (i, c.counts_self(&pod.labels)))
                .collect()
        });
        Some(View { joint: self, pod: p, terms, repel, ports, self_affine, spread })
    }

    /// Brings `s` in step with the committed log and `tentative`.
    fn sync<S>(
        &self,
        s: &mut Synced<S>,
        tentative: Tentative<'_>,
        mut apply: impl FnMut(&mut S, usize, usize, i64),
    ) {
        let committed = self.committed.borrow();
        if s.synced < committed.len() {
            for &(q, n) in s.applied.iter().rev() {
                apply(&mut s.state, q, n, -1);
            }
            s.applied.clear();
            for &(q, n) in &committed[s.synced..] {
                apply(&mut s.state, q, n, 1);
            }
            s.synced = committed.len();
        }
        let common = s.applied.iter().zip(tentative.iter()).take_while(|(a, b)| **a == *b).count();
        for &(q, n) in s.applied[common..].iter().rev() {
            apply(&mut s.state, q, n, -1);
        }
        s.applied.truncate(common);
        s.applied.reserve(tentative.len().saturating_sub(common));
        for (q, n) in tentative.iter().skip(common) {
            apply(&mut s.state, q, n, 1);
            s.applied.push((q, n));
        }
    }

    /// The pods on nodes that may count for `p`'s class: those of the namespaces its terms read
    /// (every pod, when a term has a `namespaceSelector`, or in the reference cycle).
    fn candidates_for(&self, p: usize) -> Vec<usize> {
        let pod = &self.snap.pods[p];
        let all = || (0..self.snap.pods.len()).collect::<Vec<_>>();
        let Some(usage) = self.usage() else { return all() };
        let Some(terms) = pod.terms() else { return Vec::new() };
        let mut namespaces: BTreeSet<&str> = BTreeSet::new();
        for t in terms.affinity.iter().chain(&terms.anti_affinity) {
            if t.any_namespace() {
                return all();
            }
            namespaces.extend(t.namespaces.iter().map(String::as_str));
        }
        if terms.hard_spread().next().is_some() {
            namespaces.insert(&pod.key.namespace);
        }
        let mut out: Vec<usize> = namespaces.into_iter().flat_map(|ns| usage.in_namespace(ns)).collect();
        out.sort_unstable();
        out
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

    /// Pod `p`'s class state, in step with the cycle and `tentative`.
    fn term_state(&self, caches: &Caches<'_>, p: usize, tentative: Tentative<'_>) -> Shared<TermState> {
        let cached = if self.fast { self.term_of.borrow().get(&p).cloned() } else { None };
        let shared = match cached {
            Some(Some(s)) => s,
            _ => {
                let key = self.term_key(p);
                let found = if self.fast { self.term_keys.borrow().get(&key).cloned() } else { None };
                let s = match found {
                    Some(s) => s,
                    None => {
                        let s = Rc::new(RefCell::new(self.new_term_state(caches, p)));
                        if self.fast {
                            self.term_keys.borrow_mut().insert(key, s.clone());
                        }
                        s
                    }
                };
                if self.fast {
                    self.term_of.borrow_mut().insert(p, Some(s.clone()));
                }
                s
            }
        };
        {
            let mut s = shared.borrow_mut();
            self.sync(&mut s, tentative, |st, q, n, sign| self.count_term(st, q, n, sign));
        }
        shared
    }

    fn new_term_state(&self, caches: &Caches<'_>, p: usize) -> Synced<TermState> {
        let pod = &self.snap.pods[p];
        let terms = pod.terms().cloned().unwrap_or_default();
        let hard: Vec<&SpreadConstraint> = terms.hard_spread().collect();
        let keys: Vec<String> = hard.iter().map(|c| c.topology_key.clone()).collect();
        let spread = hard
            .iter()
            .map(|c| {
                let topo = caches.topology(&c.topology_key);
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
            affinity: terms.affinity.iter().map(|t| Counts::new(caches.topology(&t.topology_key))).collect(),
            affinity_any: 0,
            anti: terms.anti_affinity.iter().map(|t| Counts::new(caches.topology(&t.topology_key))).collect(),
            spread,
        };
        for q in self.candidates_for(p) {
            if let Some(n) = self.on_node(q) {
                self.count_term(&mut state, q, n, 1);
            }
        }
        Synced { state, synced: 0, applied: Vec::new() }
    }

    /// The nodes that count for spread constraint `c` of `pod` (`keys`: all its `DoNotSchedule`
    /// topology keys), and the domains they make.
    fn eligible(&self, pod: &Pod, keys: &[String], c: &SpreadConstraint, topo: &Topology) -> Rc<Eligible> {
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
        let mut domain = vec![false; topo.domains.len()];
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
        let rep = &self.snap.pods[st.rep];
        let Some(terms) = rep.terms() else { return };
        let pod = &self.snap.pods[q];
        if !terms.affinity.is_empty() && terms.affinity.iter().all(|t| self.selects(t, pod)) {
            for c in &mut st.affinity {
                if c.add(n, sign) {
                    st.affinity_any += sign;
                }
            }
        }
        for (t, c) in terms.anti_affinity.iter().zip(&mut st.anti) {
            if self.selects(t, pod) {
                c.add(n, sign);
            }
        }
        if pod.key.namespace == rep.key.namespace && !pod.deleting {
            for (c, s) in terms.hard_spread().zip(&mut st.spread) {
                if c.counts(&pod.labels) {
                    s.add(n, sign);
                }
            }
        }
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
    fn repel_state(&self, caches: &Caches<'_>, p: usize, tentative: Tentative<'_>) -> Option<Shared<Repel>> {
        let pod = &self.snap.pods[p];
        if !self.any_repelling(&pod.key.namespace, tentative) {
            return None;
        }
        let key = (pod.key.namespace.clone(), pod.labels.clone());
        let found = if self.fast { self.repel_keys.borrow().get(&key).cloned() } else { None };
        let shared = match found {
            Some(s) => s,
            None => {
                let mut state = Repel { rep: p, by_key: Vec::new(), total: 0 };
                let mut from: Vec<usize> = match self.usage() {
                    Some(u) => u.repelling(&pod.key.namespace).collect(),
                    None => (0..self.snap.pods.len()).collect(),
                };
                from.sort_unstable();
                from.dedup();
                for q in from {
                    if let Some(n) = self.on_node(q) {
                        self.count_repel(caches, &mut state, q, n, 1);
                    }
                }
                let s = Rc::new(RefCell::new(Synced { state, synced: 0, applied: Vec::new() }));
                if self.fast {
                    self.repel_keys.borrow_mut().insert(key, s.clone());
                }
                s
            }
        };
        let total = {
            let mut s = shared.borrow_mut();
            self.sync(&mut s, tentative, |st, q, n, sign| self.count_repel(caches, st, q, n, sign));
            s.state.total
        };
        (total > 0).then_some(shared)
    }

    fn count_repel(&self, caches: &Caches<'_>, st: &mut Repel, q: usize, n: usize, sign: i64) {
        let target = &self.snap.pods[st.rep];
        for t in self.snap.pods[q].anti_affinity() {
            if !self.selects(t, target) {
                continue;
            }
            let at = match st.by_key.iter().position(|(k, _)| *k == t.topology_key) {
                Some(i) => i,
                None => {
                    st.by_key.push((t.topology_key.clone(), Counts::new(caches.topology(&t.topology_key))));
                    st.by_key.len() - 1
                }
            };
            if st.by_key[at].1.add(n, sign) {
                st.total += sign;
            }
        }
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
            let s = Rc::new(RefCell::new(Synced { state, synced: 0, applied: Vec::new() }));
            if self.fast {
                *self.ports.borrow_mut() = Some(s.clone());
            }
            s
        });
        {
            let mut s = shared.borrow_mut();
            self.sync(&mut s, tentative, |st, q, n, sign| self.count_ports(st, q, n, sign));
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
    pub fn blockers(
        &self,
        p: usize,
        n: usize,
        block: &Block,
        tentative: Tentative<'_>,
        caches: &Caches<'_>,
    ) -> Vec<usize> {
        let pod = &self.snap.pods[p];
        let same_domain = |key: &str, m: usize| {
            let topo = caches.topology(key);
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
