//! Placing one gang: walk its subgroup tree, choose a topology domain where one is required, and
//! pick a node per member by score — all on a tentative [`Txn`].
//!
//! Minimums first, extras second: the first pass places each leaf only up to its minimum, so the
//! extra members of one leaf can never starve another leaf's minimum; once the tree is satisfied
//! the second pass places every remaining member that fits.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::rc::Rc;

use super::Members;
use super::state::{Demand, State, Txn, soft_taints, static_fit};
use super::tree::{self, LeafCounts};
use crate::config::Scoring;
use crate::model::{Gang, GangMode, Pod};
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

/// A restriction to one domain of one topology key.
type Filter = Vec<(Rc<Topology>, u32)>;

pub(crate) struct Placer<'a> {
    snap: &'a Snapshot,
    node_index: HashMap<&'a str, usize>,
    scoring: Scoring,
    feasible: RefCell<FeasibleCache>,
    topologies: RefCell<HashMap<String, Rc<Topology>>>,
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
    pub fn new(snap: &'a Snapshot, config: &Config) -> Self {
        Placer {
            snap,
            node_index: snap.nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect(),
            scoring: config.scoring,
            feasible: RefCell::new(HashMap::new()),
            topologies: RefCell::new(HashMap::new()),
        }
    }

    /// Nodes that pass every capacity-independent check for pod `p`; computed once per distinct
    /// constraint signature per cycle (members of a gang usually share one).
    pub fn feasible(&self, p: usize) -> Rc<Feasible> {
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
        let mut best: Option<usize> = None;
        let mut consider = |n: usize| {
            if !allowed(n) || state.fits(txn, n, d).is_err() {
                return;
            }
            best = match best {
                Some(b) if self.compare(state, txn, d, pod, b, n) != Ordering::Greater => Some(b),
                _ => Some(n),
            };
        };
        match filter.and_then(|f| f.last()) {
            Some((t, dom)) => {
                let idx = usize::try_from(*dom).unwrap_or(usize::MAX);
                if let Some((_, nodes)) = t.domains.get(idx) {
                    nodes.iter().copied().for_each(&mut consider);
                }
            }
            None => feasible.list.iter().copied().for_each(&mut consider),
        }
        best
    }

    /// Orders two candidate nodes for a pod: `Less` means `a` is better.
    fn compare(&self, state: &State, txn: &Txn, d: &Demand, pod: &Pod, a: usize, b: usize) -> Ordering {
        let (na, nb) = (&self.snap.nodes[a], &self.snap.nodes[b]);
        let soft = soft_taints(na, pod).cmp(&soft_taints(nb, pod));
        if soft != Ordering::Equal {
            return soft;
        }
        // Remaining capacity after placement, scarcest requested resource first.
        let remaining =
            d.0.iter()
                .map(|&(r, _)| (r, state.free(txn, a, r).cmp(&state.free(txn, b, r))))
                .find(|(_, o)| *o != Ordering::Equal)
                .map(|(_, o)| o)
                .unwrap_or_else(|| state.free_pods(txn, a).cmp(&state.free_pods(txn, b)));
        let by_room = match self.scoring {
            Scoring::BinPack => remaining,
            Scoring::Spread => remaining.reverse(),
        };
        by_room.then_with(|| na.name.cmp(&nb.name))
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
        let mut best_partial: Option<Work> = None;
        for d in self.candidate_domains(r, &topo, None, &start) {
            let filter: Filter = vec![(topo.clone(), u32::try_from(d).unwrap_or(u32::MAX))];
            let w = self.whole(r, start.clone(), &filter, keep_partial);
            report.push((topo.domains[d].0.clone(), w.bindings.len()));
            if tree::satisfied(gang, &w.counts) {
                let left = self.leftover(r, &topo.domains[d].1, &w);
                if best.as_ref().is_none_or(|(l, _, _)| left < *l) {
                    best = Some((left, d, w));
                }
            } else if best_partial.as_ref().is_none_or(|b| w.bindings.len() > b.bindings.len()) {
                best_partial = Some(w);
            }
        }
        report.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        match best {
            Some((_, d, w)) => {
                let domain = format!("{key}={}", topo.domains[d].0);
                self.finish(r, w, Some(domain), report)
            }
            None => {
                let w = if keep_partial { best_partial.unwrap_or(start.clone()) } else { start.clone() };
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

    /// Free capacity of the gang's scarcest requested resource left in `nodes` after `w`: the
    /// capacity a domain choice strands. Lower is better.
    fn leftover(&self, r: &Request<'_>, nodes: &[usize], w: &Work) -> i64 {
        let first = r.members.pending.values().flatten().next();
        let scarce = first.and_then(|&p| r.demand[p].0.first()).map(|&(res, _)| res);
        nodes
            .iter()
            .map(|&n| match scarce {
                Some(res) => r.state.free(&w.txn, n, res),
                None => r.state.free_pods(&w.txn, n),
            })
            .fold(0i64, i64::saturating_add)
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
        if depth > crate::validate::MAX_SUBGROUP_DEPTH + 1 {
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
                    let mut best: Option<(i64, Work)> = None;
                    let mut partial: Option<Work> = None;
                    for d in self.candidate_domains(r, &topo, Some(&child.name), w) {
                        let mut f = filter.clone();
                        f.push((topo.clone(), u32::try_from(d).unwrap_or(u32::MAX)));
                        let mut trial = w.clone();
                        self.subtree(r, Some(&child.name), &f, &mut trial, cap, keep_partial, depth + 1);
                        if satisfied(&trial) {
                            let left = self.leftover(r, &topo.domains[d].1, &trial);
                            if best.as_ref().is_none_or(|(l, _)| left < *l) {
                                best = Some((left, trial));
                            }
                        } else if keep_partial
                            && partial.as_ref().is_none_or(|p| trial.bindings.len() > p.bindings.len())
                        {
                            partial = Some(trial);
                        }
                    }
                    if let Some(chosen) = best.map(|(_, t)| t).or(partial) {
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
        let mut failed: Option<usize> = None;
        let filter = if filter.is_empty() { None } else { Some(filter) };
        for &p in pods {
            if cap && w.counts.get(leaf).copied().unwrap_or(0) >= min {
                break;
            }
            if w.bindings.iter().any(|&(q, _)| q == p) {
                continue;
            }
            // A member shaped like one that just failed fails too: skip the scan.
            if let Some(f) = failed
                && r.demand[f] == r.demand[p]
                && Rc::ptr_eq(&self.feasible(f), &self.feasible(p))
                && self.snap.pods[p].nominated_node.is_none()
                && !r.reserved.contains_key(&p)
            {
                continue;
            }
            match self.best_node(r.state, &w.txn, r.demand, p, filter, r.reserved.get(&p)) {
                Some(n) => {
                    r.state.take(&mut w.txn, n, &r.demand[p]);
                    w.bindings.push((p, n));
                    *w.counts.entry(leaf.to_string()).or_default() += 1;
                }
                None => failed = Some(p),
            }
        }
    }
}
