//! Placing one gang: walk its subgroup tree, choose a topology domain where one is required, and
//! pick a node per member by score — all on a tentative [`Txn`].
//!
//! Minimums first, extras second: the first pass places each leaf only up to its minimum, so the
//! extra members of one leaf can never starve another leaf's minimum; once the tree is satisfied
//! the second pass places every remaining member that fits.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::hash::{Hash, Hasher};
use std::rc::Rc;

use super::Members;
use super::state::{Demand, State, Txn, soft_taints, static_fit};
use crate::config::Scoring;
use crate::model::{Gang, GangMode, Pod};
use crate::tree::{self, LeafCounts};
use crate::{Config, Snapshot};

/// The nodes in each domain of one topology key.
#[derive(Debug)]
pub(crate) struct Topology {
    /// Node index → domain index (`u32::MAX`: the node lacks the label).
    pub node_domain: Vec<u32>,
    /// Domain value and its nodes, by value.
    pub domains: Vec<(String, Vec<usize>)>,
}

/// Static feasibility of one constraint signature (selector, affinity, tolerations).
#[derive(Debug)]
pub(crate) struct Feasible {
    pub list: Vec<usize>,
    pub mask: Vec<bool>,
}

/// Signature hash → (representative pod, its feasible nodes); equal hashes are compared exactly.
type FeasibleCache = HashMap<u64, Vec<(usize, Rc<Feasible>)>>;

/// How many requested resources a node key orders by (the scarcest first; the last slot is pod
/// slots). Pods requesting more distinct resources than this are ordered by the first ones only.
const KEY_WIDTH: usize = 8;

/// (untolerated PreferNoSchedule taints, free room per requested resource, name rank): smaller is better.
type NodeKey = (usize, [i64; KEY_WIDTH], usize);

/// A restriction to one domain of one topology key.
type Filter = Vec<(Rc<Topology>, u32)>;

/// Pods alike for placement: one feasible set (by identity), restricted to one topology domain or
/// not, and a hash of their demand. Classes that share it are told apart by their full demand.
type ClassKey = (usize, Option<(usize, u32)>, u64);

/// How many node entries the per-class orders may hold in all, per cycle (~100 bytes each):
/// beyond it, further classes are served by a scan of their nodes, as on first use.
const MAX_INDEXED: usize = 1 << 19;

/// One equivalence class of pods: members of a gang or role, or pods of the same shape anywhere.
#[derive(Debug)]
struct Class {
    demand: Demand,
    uses: u32,
    index: Option<ClassIndex>,
}

/// The nodes in a class's scope that fit its demand in the committed state, best first. Built on
/// a class's second use (filter and score once per class, not a node scan per member) and kept
/// in step by replaying the state's change log, so a commit costs a re-key of the nodes it
/// touched, not a rebuild.
#[derive(Debug)]
struct ClassIndex {
    order: BTreeSet<(NodeKey, usize)>,
    keys: HashMap<usize, NodeKey>,
    /// How much of the state's change log is reflected.
    synced: usize,
}

/// Free capacity of one resource (`None`: pod slots) summed per domain of one topology key, in
/// the committed state; kept in step with the change log like [`ClassIndex`].
#[derive(Debug)]
struct DomainTotals {
    seen: Vec<i64>,
    totals: Vec<i64>,
    synced: usize,
}

pub(crate) struct Placer<'a> {
    snap: &'a Snapshot,
    node_index: HashMap<&'a str, usize>,
    /// Node index → position in name order: the final tie-break, so node order in the snapshot
    /// never changes a plan.
    rank: Vec<usize>,
    scoring: Scoring,
    feasible: RefCell<FeasibleCache>,
    /// Pod index → its feasible set, once looked up.
    by_pod: RefCell<Vec<Option<Rc<Feasible>>>>,
    topologies: RefCell<HashMap<String, Rc<Topology>>>,
    classes: RefCell<HashMap<ClassKey, Vec<Class>>>,
    /// Node entries held by all class indices (bounded by [`MAX_INDEXED`]).
    indexed: Cell<usize>,
    totals: RefCell<HashMap<(usize, Option<usize>), DomainTotals>>,
    /// Take the shortcuts (class indices, domain pruning). Off only for the reference cycle the
    /// property tests hold them to.
    fast: bool,
}

impl std::fmt::Debug for Placer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placer").field("scoring", &self.scoring).finish_non_exhaustive()
    }
}

/// What the cycle asks of the placer for one gang.
pub(crate) struct Request<'r> {
    pub gang: &'r Gang,
    pub members: &'r Members,
    pub state: &'r State,
    pub demand: &'r [Demand],
    pub reserved: &'r HashMap<usize, usize>,
    pub txn: Txn,
    /// Place whatever fits (a satisfied or degraded gang), not all or nothing.
    pub extras: bool,
}

/// The result of trying to place one gang.
#[derive(Clone, Debug, Default)]
pub(crate) struct Placement {
    pub txn: Txn,
    /// (pod index, node index)
    pub bindings: Vec<(usize, usize)>,
    /// Members per leaf with this placement (held + placed).
    pub counts: LeafCounts,
    pub satisfied: bool,
    /// `key=value` of the gang-level domain chosen.
    pub domain: Option<String>,
    /// The gang would fit without its topology constraint, but in no single domain.
    pub topology_failed: bool,
    /// Per domain tried at the gang level: (value, members placed), best first.
    pub domain_report: Vec<(String, usize)>,
}

#[derive(Clone, Debug)]
struct Work {
    txn: Txn,
    bindings: Vec<(usize, usize)>,
    counts: LeafCounts,
}

impl<'a> Placer<'a> {
    pub fn new(snap: &'a Snapshot, config: &Config, fast: bool) -> Self {
        Placer {
            snap,
            node_index: snap.nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect(),
            rank: {
                let mut order: Vec<usize> = (0..snap.nodes.len()).collect();
                order.sort_by(|&a, &b| snap.nodes[a].name.cmp(&snap.nodes[b].name));
                let mut rank = vec![0; order.len()];
                for (r, n) in order.into_iter().enumerate() {
                    rank[n] = r;
                }
                rank
            },
            scoring: config.scoring,
            feasible: RefCell::new(HashMap::new()),
            by_pod: RefCell::new(vec![None; snap.pods.len()]),
            topologies: RefCell::new(HashMap::new()),
            classes: RefCell::new(HashMap::new()),
            indexed: Cell::new(0),
            totals: RefCell::new(HashMap::new()),
            fast,
        }
    }

    /// Nodes that pass every capacity-independent check for pod `p`; computed once per distinct
    /// constraint signature per cycle (members of a gang usually share one).
    pub fn feasible(&self, p: usize) -> Rc<Feasible> {
        if let Some(Some(f)) = self.by_pod.borrow().get(p) {
            return f.clone();
        }
        let f = self.feasible_uncached(p);
        if let Some(slot) = self.by_pod.borrow_mut().get_mut(p) {
            *slot = Some(f.clone());
        }
        f
    }

    fn feasible_uncached(&self, p: usize) -> Rc<Feasible> {
        let pod = &self.snap.pods[p];
        let mut h = DefaultHasher::new();
        pod.node_selector.hash(&mut h);
        pod.affinity.hash(&mut h);
        pod.tolerations.hash(&mut h);
        let sig = h.finish();
        let same = |q: &Pod| {
            q.node_selector == pod.node_selector
                && q.affinity == pod.affinity
                && q.tolerations == pod.tolerations
        };
        if let Some(bucket) = self.feasible.borrow().get(&sig)
            && let Some((_, f)) = bucket.iter().find(|(rep, _)| same(&self.snap.pods[*rep]))
        {
            return f.clone();
        }
        let mut mask = vec![false; self.snap.nodes.len()];
        let mut list = Vec::new();
        for (i, n) in self.snap.nodes.iter().enumerate() {
            if static_fit(n, pod).is_ok() {
                mask[i] = true;
                list.push(i);
            }
        }
        let f = Rc::new(Feasible { list, mask });
        self.feasible.borrow_mut().entry(sig).or_default().push((p, f.clone()));
        f
    }

    /// The domains of a topology key.
    pub fn topology(&self, key: &str) -> Rc<Topology> {
        if let Some(t) = self.topologies.borrow().get(key) {
            return t.clone();
        }
        let mut by_value: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, n) in self.snap.nodes.iter().enumerate() {
            if let Some(v) = n.labels.get(key) {
                by_value.entry(v.as_str()).or_default().push(i);
            }
        }
        let mut node_domain = vec![u32::MAX; self.snap.nodes.len()];
        let mut domains = Vec::new();
        for (d, (value, nodes)) in by_value.into_iter().enumerate() {
            let id = u32::try_from(d).unwrap_or(u32::MAX);
            for &n in &nodes {
                node_domain[n] = id;
            }
            domains.push((value.to_string(), nodes));
        }
        let t = Rc::new(Topology { node_domain, domains });
        self.topologies.borrow_mut().insert(key.to_string(), t.clone());
        t
    }

    /// The best node for pod `p` under `filter`, preferring its reserved or nominated node.
    pub fn best_node(
        &self,
        state: &State,
        txn: &Txn,
        demand: &[Demand],
        p: usize,
        filter: Option<&Filter>,
        reserved: Option<&usize>,
    ) -> Option<usize> {
        let feasible = self.feasible(p);
        let d = &demand[p];
        let allowed = |n: usize| {
            feasible.mask[n] && filter.is_none_or(|f| f.iter().all(|(t, dom)| t.node_domain[n] == *dom))
        };
        let pod = &self.snap.pods[p];
        let nominated = pod.nominated_node.as_deref().and_then(|name| self.node_index.get(name).copied());
        for n in reserved.copied().into_iter().chain(nominated) {
            if allowed(n) && state.fits(txn, n, d).is_ok() {
                return Some(n);
            }
        }
        self.candidates(state, txn, d, pod, &feasible, filter, 1).first().map(|&(_, n)| n)
    }

    /// How good `node` is for a pod of demand `d` as seen through `txn`; smaller is better:
    /// untolerated `PreferNoSchedule` taints, then the room left per requested resource, scarcest
    /// first (bin-packing prefers less room, spreading more), then pod slots, then name order.
    fn node_key(&self, state: &State, txn: &Txn, d: &Demand, pod: &Pod, n: usize) -> NodeKey {
        let sign = if self.scoring == Scoring::Spread { -1 } else { 1 };
        let mut room = [0i64; KEY_WIDTH];
        for (slot, &(res, _)) in room.iter_mut().zip(d.0.iter().take(KEY_WIDTH - 1)) {
            *slot = sign * state.free(txn, n, res);
        }
        room[d.0.len().min(KEY_WIDTH - 1)] = sign * state.free_pods(txn, n);
        (soft_taints(&self.snap.nodes[n], pod), room, self.rank[n])
    }

    /// The `k` best nodes (best first) for a pod of demand `d` whose feasible nodes are
    /// `feasible`, as seen through `txn`, under `filter`.
    ///
    /// A class of alike pods used more than once is served from its [`ClassIndex`]: the first `k`
    /// untouched nodes of its committed order, merged with the nodes `txn` touched (re-keyed), are
    /// exactly the `k` best — without visiting the rest of the cluster.
    #[allow(clippy::too_many_arguments)]
    fn candidates(
        &self,
        state: &State,
        txn: &Txn,
        d: &Demand,
        pod: &Pod,
        feasible: &Rc<Feasible>,
        filter: Option<&Filter>,
        k: usize,
    ) -> Vec<(NodeKey, usize)> {
        if k == 0 {
            return Vec::new();
        }
        let scope = filter.and_then(|f| f.last());
        let allowed = |n: usize| {
            feasible.mask[n] && filter.is_none_or(|f| f.iter().all(|(t, dom)| t.node_domain[n] == *dom))
        };
        let scope_nodes = || -> Box<dyn Iterator<Item = usize> + '_> {
            match scope {
                Some((t, dom)) => match t.domains.get(usize::try_from(*dom).unwrap_or(usize::MAX)) {
                    Some((_, ns)) => Box::new(ns.iter().copied().filter(|&n| feasible.mask[n])),
                    None => Box::new(std::iter::empty()),
                },
                None => Box::new(feasible.list.iter().copied()),
            }
        };
        let key = {
            let mut h = DefaultHasher::new();
            d.hash(&mut h);
            let scope_id = scope.map(|(t, dom)| (Rc::as_ptr(t) as usize, *dom));
            (Rc::as_ptr(feasible) as usize, scope_id, h.finish())
        };
        let mut classes = self.classes.borrow_mut();
        let bucket = classes.entry(key).or_default();
        let class = match bucket.iter().position(|c| c.demand == *d) {
            Some(i) => &mut bucket[i],
            None => {
                bucket.push(Class { demand: d.clone(), uses: 0, index: None });
                let last = bucket.len() - 1;
                &mut bucket[last]
            }
        };
        class.uses = class.uses.saturating_add(1);
        let committed = Txn::default();
        if self.fast && class.index.is_none() && class.uses >= 2 {
            let size = match scope {
                Some((t, dom)) => {
                    t.domains.get(usize::try_from(*dom).unwrap_or(usize::MAX)).map_or(0, |x| x.1.len())
                }
                None => feasible.list.len(),
            };
            if self.indexed.get().saturating_add(size) <= MAX_INDEXED {
                self.indexed.set(self.indexed.get() + size);
                let mut order = BTreeSet::new();
                let mut keys = HashMap::with_capacity(size);
                for n in scope_nodes() {
                    if state.fits(&committed, n, d).is_ok() {
                        let kn = self.node_key(state, &committed, d, pod, n);
                        order.insert((kn, n));
                        keys.insert(n, kn);
                    }
                }
                class.index = Some(ClassIndex { order, keys, synced: state.log().len() });
            }
        }

        let mut out: Vec<(NodeKey, usize)> = Vec::with_capacity(k.min(feasible.list.len()) + 1);
        if let Some(index) = class.index.as_mut() {
            let in_scope =
                |n: usize| feasible.mask[n] && scope.is_none_or(|(t, dom)| t.node_domain[n] == *dom);
            for &n in &state.log()[index.synced..] {
                if !in_scope(n) {
                    continue;
                }
                if let Some(old) = index.keys.remove(&n) {
                    index.order.remove(&(old, n));
                }
                if state.fits(&committed, n, d).is_ok() {
                    let kn = self.node_key(state, &committed, d, pod, n);
                    index.order.insert((kn, n));
                    index.keys.insert(n, kn);
                }
            }
            index.synced = state.log().len();
            out.extend(index.order.iter().filter(|&&(_, n)| !txn.touches(n) && allowed(n)).take(k).copied());
            for n in txn.touched() {
                if allowed(n) && state.fits(txn, n, d).is_ok() {
                    out.push((self.node_key(state, txn, d, pod, n), n));
                }
            }
            out.sort_unstable();
            out.truncate(k);
            return out;
        }
        drop(classes);

        // The k best in one pass, worst on top so it can be evicted.
        let mut best: BinaryHeap<(NodeKey, usize)> =
            BinaryHeap::with_capacity(k.min(feasible.list.len()) + 1);
        for n in scope_nodes() {
            if !allowed(n) || state.fits(txn, n, d).is_err() {
                continue;
            }
            let kn = self.node_key(state, txn, d, pod, n);
            if best.len() < k {
                best.push((kn, n));
            } else if best.peek().is_some_and(|(worst, _)| kn < *worst) {
                best.pop();
                best.push((kn, n));
            }
        }
        best.into_sorted_vec()
    }

    /// Tries to place gang `r.gang`.
    pub fn gang(&self, r: &Request<'_>) -> Placement {
        let gang = r.gang;
        let start = Work { txn: r.txn.clone(), bindings: Vec::new(), counts: r.members.held.clone() };
        let keep_partial = r.extras || gang.mode == GangMode::NonStrict;
        let Some(key) = gang.topology_key.as_deref() else {
            let w = self.whole(r, start, &Vec::new(), keep_partial);
            return self.finish(r, w, None, Vec::new());
        };

        let topo = self.topology(key);
        let mut report = Vec::new();
        let mut best: Option<(i64, usize, Work)> = None;
        let mut best_partial: Option<(usize, Work)> = None;
        let most = self.most_taken(r, None);
        for (free, d) in self.by_free(r, &topo, self.candidate_domains(r, &topo, None, &start), &start) {
            // Domains come least free first, and one can strand no less than its free capacity
            // less everything the gang could take: past that bound none can beat the best.
            if self.fast && best.as_ref().is_some_and(|(l, _, _)| free.saturating_sub(most) > *l) {
                break;
            }
            let filter: Filter = vec![(topo.clone(), u32::try_from(d).unwrap_or(u32::MAX))];
            let w = self.whole(r, start.clone(), &filter, keep_partial);
            report.push((topo.domains[d].0.clone(), w.bindings.len()));
            if tree::satisfied(gang, &w.counts) {
                let left = self.leftover(r, &topo, d, &w);
                if best.as_ref().is_none_or(|(l, bd, _)| (left, d) < (*l, *bd)) {
                    best = Some((left, d, w));
                }
            } else if best_partial
                .as_ref()
                .is_none_or(|(bd, b)| (Reverse(w.bindings.len()), d) < (Reverse(b.bindings.len()), *bd))
            {
                best_partial = Some((d, w));
            }
        }
        report.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        match best {
            Some((_, d, w)) => {
                let domain = format!("{key}={}", topo.domains[d].0);
                self.finish(r, w, Some(domain), report)
            }
            None => {
                let w = match best_partial {
                    Some((_, w)) if keep_partial => w,
                    _ => start.clone(),
                };
                let mut p = self.finish(r, w, None, report);
                // Would it fit with the constraint lifted? Then the topology is what blocks it.
                let free = self.whole(r, start, &Vec::new(), false);
                p.topology_failed = tree::satisfied(gang, &free.counts);
                p
            }
        }
    }

    fn finish(
        &self,
        r: &Request<'_>,
        w: Work,
        domain: Option<String>,
        report: Vec<(String, usize)>,
    ) -> Placement {
        let satisfied = tree::satisfied(r.gang, &w.counts);
        Placement {
            txn: w.txn,
            bindings: w.bindings,
            counts: w.counts,
            satisfied,
            domain,
            topology_failed: false,
            domain_report: report,
        }
    }

    /// Minimums first; extras once the tree is satisfied (or right away when placing extras).
    fn whole(&self, r: &Request<'_>, start: Work, filter: &Filter, keep_partial: bool) -> Work {
        if r.extras {
            let mut w = start;
            self.subtree(r, None, filter, &mut w, false, true, 0);
            return w;
        }
        let mut w = start;
        self.subtree(r, None, filter, &mut w, true, keep_partial, 0);
        if tree::satisfied(r.gang, &w.counts) {
            self.subtree(r, None, filter, &mut w, false, false, 0);
        }
        w
    }

    /// The resource domains are compared by: the scarcest one the gang's first pending member
    /// requests (`None`: pod slots).
    fn scarce(r: &Request<'_>) -> Option<usize> {
        let first = r.members.pending.values().flatten().next();
        first.and_then(|&p| r.demand[p].0.first()).map(|&(res, _)| res)
    }

    /// The most of the scarce resource (see [`Placer::leftover`]) the pending members under
    /// subgroup `under` (`None`: the whole gang) could take between them.
    fn most_taken(&self, r: &Request<'_>, under: Option<&str>) -> i64 {
        let scarce = Self::scarce(r);
        let leaves = under.map(|s| tree::leaves_under(r.gang, s));
        r.members
            .pending
            .iter()
            .filter(|(leaf, _)| leaves.as_ref().is_none_or(|ls| ls.iter().any(|l| l == *leaf)))
            .flat_map(|(_, pods)| pods)
            .map(|&p| match scarce {
                Some(res) => r.demand[p].0.iter().find(|(x, _)| *x == res).map_or(0, |&(_, a)| a),
                None => 1,
            })
            .fold(0i64, i64::saturating_add)
    }

    /// `domains` with their free scarce capacity as `w` sees it, least free first (then by
    /// domain order): the order in which the best fit is found soonest.
    fn by_free(
        &self,
        r: &Request<'_>,
        topo: &Rc<Topology>,
        domains: Vec<usize>,
        w: &Work,
    ) -> Vec<(i64, usize)> {
        let mut out: Vec<(i64, usize)> =
            domains.into_iter().map(|d| (self.leftover(r, topo, d, w), d)).collect();
        out.sort_unstable();
        out
    }

    /// Free capacity of the gang's scarcest requested resource left in domain `d` of `topo`
    /// after `w`: the capacity a domain choice strands. Lower is better. The committed total per
    /// domain is kept up to date from the state's change log; only the nodes `w` touched are
    /// visited per call.
    fn leftover(&self, r: &Request<'_>, topo: &Rc<Topology>, d: usize, w: &Work) -> i64 {
        let scarce = Self::scarce(r);
        let value = |txn: &Txn, n: usize| match scarce {
            Some(res) => r.state.free(txn, n, res),
            None => r.state.free_pods(txn, n),
        };
        let committed = Txn::default();
        let mut all = self.totals.borrow_mut();
        let t = all.entry((Rc::as_ptr(topo) as usize, scarce)).or_insert_with(|| {
            let mut seen = vec![0; topo.node_domain.len()];
            let mut totals = vec![0i64; topo.domains.len()];
            for (dom, (_, nodes)) in topo.domains.iter().enumerate() {
                for &n in nodes {
                    seen[n] = value(&committed, n);
                    totals[dom] = totals[dom].saturating_add(seen[n]);
                }
            }
            DomainTotals { seen, totals, synced: r.state.log().len() }
        });
        for &n in &r.state.log()[t.synced..] {
            let Some(dom) = usize::try_from(topo.node_domain[n]).ok().filter(|&x| x < t.totals.len()) else {
                continue;
            };
            let now = value(&committed, n);
            t.totals[dom] = t.totals[dom].saturating_add(now.saturating_sub(t.seen[n]));
            t.seen[n] = now;
        }
        t.synced = r.state.log().len();
        let target = u32::try_from(d).unwrap_or(u32::MAX);
        w.txn
            .touched()
            .filter(|&n| topo.node_domain[n] == target)
            .map(|n| value(&w.txn, n).saturating_sub(value(&committed, n)))
            .fold(t.totals.get(d).copied().unwrap_or(0), i64::saturating_add)
    }

    /// Domains worth trying for a subtree: the one its members already occupy, if any, else all.
    fn candidate_domains(
        &self,
        r: &Request<'_>,
        topo: &Topology,
        under: Option<&str>,
        w: &Work,
    ) -> Vec<usize> {
        let leaves = under.map(|s| tree::leaves_under(r.gang, s));
        let in_scope = |p: usize| {
            leaves.as_ref().is_none_or(|ls| {
                let leaf = self.snap.pods[p].gang.as_ref().and_then(|m| m.subgroup.as_deref()).unwrap_or("");
                ls.iter().any(|l| l == leaf)
            })
        };
        let placed = w.bindings.iter().filter(|(p, _)| in_scope(*p)).map(|&(_, n)| n);
        let bound = r
            .members
            .all
            .iter()
            .copied()
            .filter(|&p| self.snap.pods[p].uses_node() && in_scope(p))
            .filter_map(|p| {
                self.snap.pods[p].node_name.as_deref().and_then(|name| self.node_index.get(name).copied())
            });
        if let Some(n) = placed.chain(bound).next() {
            let d = topo.node_domain[n];
            return if d == u32::MAX { Vec::new() } else { vec![usize::try_from(d).unwrap_or(usize::MAX)] };
        }
        (0..topo.domains.len()).collect()
    }

    /// Places the subtree under `name` (`None`: the root). `cap`: only up to each leaf's minimum.
    #[allow(clippy::too_many_arguments)]
    fn subtree(
        &self,
        r: &Request<'_>,
        name: Option<&str>,
        filter: &Filter,
        w: &mut Work,
        cap: bool,
        keep_partial: bool,
        depth: usize,
    ) {
        if depth > tree::WALK_DEPTH_LIMIT {
            return;
        }
        let gang = r.gang;
        let children: Vec<_> = gang.subgroups.iter().filter(|s| s.parent.as_deref() == name).collect();
        if children.is_empty() {
            self.leaf(r, name.unwrap_or(""), filter, w, cap);
            return;
        }
        for child in children {
            let satisfied = |w: &Work| tree::subgroup_satisfied(gang, &child.name, &w.counts, depth);
            match &child.topology_key {
                Some(key) => {
                    let topo = self.topology(key);
                    let mut best: Option<(i64, usize, Work)> = None;
                    let mut partial: Option<(usize, Work)> = None;
                    let most = self.most_taken(r, Some(&child.name));
                    let domains = self.candidate_domains(r, &topo, Some(&child.name), w);
                    for (free, d) in self.by_free(r, &topo, domains, w) {
                        if self.fast && best.as_ref().is_some_and(|(l, _, _)| free.saturating_sub(most) > *l)
                        {
                            break;
                        }
                        let mut f = filter.clone();
                        f.push((topo.clone(), u32::try_from(d).unwrap_or(u32::MAX)));
                        let mut trial = w.clone();
                        self.subtree(r, Some(&child.name), &f, &mut trial, cap, keep_partial, depth + 1);
                        if satisfied(&trial) {
                            let left = self.leftover(r, &topo, d, &trial);
                            if best.as_ref().is_none_or(|(l, bd, _)| (left, d) < (*l, *bd)) {
                                best = Some((left, d, trial));
                            }
                        } else if keep_partial
                            && partial.as_ref().is_none_or(|(pd, p)| {
                                (Reverse(trial.bindings.len()), d) < (Reverse(p.bindings.len()), *pd)
                            })
                        {
                            partial = Some((d, trial));
                        }
                    }
                    if let Some(chosen) = best.map(|(_, _, t)| t).or(partial.map(|(_, t)| t)) {
                        *w = chosen;
                    }
                }
                None => {
                    let mut trial = w.clone();
                    self.subtree(r, Some(&child.name), filter, &mut trial, cap, keep_partial, depth + 1);
                    if keep_partial || satisfied(&trial) {
                        *w = trial;
                    }
                }
            }
        }
    }

    fn leaf(&self, r: &Request<'_>, leaf: &str, filter: &Filter, w: &mut Work, cap: bool) {
        let Some(pods) = r.members.pending.get(leaf) else { return };
        let min = if r.gang.subgroups.is_empty() {
            r.gang.min_member
        } else {
            r.gang.subgroups.iter().find(|s| s.name == leaf).map_or(0, |s| s.min_member)
        };
        let filter = if filter.is_empty() { None } else { Some(filter) };
        let todo: Vec<usize> =
            pods.iter().copied().filter(|p| !w.bindings.iter().any(|&(q, _)| q == *p)).collect();
        let mut i = 0;
        while i < todo.len() {
            let room =
                if cap { min.saturating_sub(w.counts.get(leaf).copied().unwrap_or(0)) } else { u32::MAX };
            if room == 0 {
                break;
            }
            let p = todo[i];
            let pinned = self.snap.pods[p].nominated_node.is_some() || r.reserved.contains_key(&p);
            if pinned {
                if let Some(n) = self.best_node(r.state, &w.txn, r.demand, p, filter, r.reserved.get(&p)) {
                    self.place(r, w, leaf, p, n);
                }
                i += 1;
                continue;
            }
            // A run of members shaped alike (same requests, same constraints) is placed from one
            // scan of the nodes: O(nodes + members · log nodes) instead of O(nodes · members).
            let feasible = self.feasible(p);
            let mut end = i + 1;
            while end < todo.len() {
                let q = todo[end];
                let alike = r.demand[q] == r.demand[p]
                    && Rc::ptr_eq(&self.feasible(q), &feasible)
                    && self.snap.pods[q].nominated_node.is_none()
                    && !r.reserved.contains_key(&q);
                if !alike {
                    break;
                }
                end += 1;
            }
            let run = &todo[i..end.min(i.saturating_add(usize::try_from(room).unwrap_or(usize::MAX)))];
            self.place_run(r, w, leaf, run, &feasible, filter);
            i = end;
        }
    }

    fn place(&self, r: &Request<'_>, w: &mut Work, leaf: &str, p: usize, n: usize) {
        r.state.take(&mut w.txn, n, &r.demand[p]);
        w.bindings.push((p, n));
        *w.counts.entry(leaf.to_string()).or_default() += 1;
    }

    /// Places identical members one by one on the best node each time, exactly as calling
    /// [`Placer::best_node`] per member would, in one pass over the nodes.
    ///
    /// Why one pass suffices: a node's key only changes when a member lands on it, so the nodes a
    /// run of `k` members uses are among the `k` best before the run starts (bin-packing makes a
    /// used node better, spreading makes it worse; either way untouched nodes are taken in their
    /// initial order). The pass keeps those `k` in a bounded heap, then places from them.
    fn place_run(
        &self,
        r: &Request<'_>,
        w: &mut Work,
        leaf: &str,
        run: &[usize],
        feasible: &Rc<Feasible>,
        filter: Option<&Filter>,
    ) {
        let Some(&first) = run.first() else { return };
        let d = &r.demand[first];
        let pod = &self.snap.pods[first];
        let best = self.candidates(r.state, &w.txn, d, pod, feasible, filter, run.len());
        let mut heap: BinaryHeap<Reverse<(NodeKey, usize)>> = best.into_iter().map(Reverse).collect();
        for &p in run {
            let Some(Reverse((_, n))) = heap.pop() else { break };
            self.place(r, w, leaf, p, n);
            if r.state.fits(&w.txn, n, d).is_ok() {
                heap.push(Reverse((self.node_key(r.state, &w.txn, d, pod, n), n)));
            }
        }
    }
}
