//! The placer's caches, kept apart from the subgroup-tree walk ([`super::place`]) that uses them:
//! each node's feasibility per constraint signature, the domains of each topology key, a node
//! order per class of alike pods, and free capacity per topology domain. All are derived from the
//! snapshot and the [`Ledger`], and kept in step with the ledger's change log; a cache never
//! changes an answer, only its cost (the reference cycle runs without the node orders and domain
//! pruning, and a property test holds the two equal).

use std::cell::{Cell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::hash::{Hash, Hasher};
use std::rc::Rc;

use super::exclusive::{self, Blocks};
use super::filter::{soft_taints, static_fit};
use super::ledger::{Demand, Ledger, Txn};
use super::volumes::Volumes;
use super::{NodeIndex, PodSlots};
use crate::decide::config::Config;
use crate::decide::config::Scoring;
use crate::read::model::Pod;
use crate::read::model::Snapshot;

/// The nodes in each domain of one topology key.
#[derive(Debug)]
pub(super) struct Topology {
    /// Node index → domain index (`u32::MAX`: the node lacks the label).
    pub node_domain: Vec<u32>,
    /// Domain value and its nodes, by value.
    pub domains: Vec<(String, Vec<usize>)>,
}

/// Static feasibility of one constraint signature (selector, affinity, tolerations), less the
/// domains JobSet's exclusive placement keeps the pod out of.
#[derive(Debug)]
pub(super) struct Feasible {
    /// The nodes, in index order.
    pub list: Vec<usize>,
    /// Node index → in the set; empty for a set of a few nodes ([`SPARSE`]), which
    /// [`Feasible::has`] looks up in `list` instead (a pod held to its local volume's node does
    /// not cost a mask of the whole cluster).
    mask: Vec<bool>,
    /// Why nodes that pass the static checks are left out, when some are: the domains other
    /// JobSets' exclusive child Jobs hold.
    pub excluded: Option<String>,
}

/// The most nodes a [`Feasible`] set holds without a mask.
const SPARSE: usize = 32;

impl Feasible {
    /// Whether node `n` is in the set.
    pub fn has(&self, n: usize) -> bool {
        if self.mask.is_empty() {
            self.list.binary_search(&n).is_ok()
        } else {
            self.mask.get(n).copied().unwrap_or(false)
        }
    }

    /// The set as a mask over `nodes` nodes.
    fn mask_of(&self, nodes: usize) -> Vec<bool> {
        if !self.mask.is_empty() {
            return self.mask.clone();
        }
        let mut mask = vec![false; nodes];
        for &n in &self.list {
            mask[n] = true;
        }
        mask
    }
}

/// Signature hash → (representative pod, its feasible nodes); equal hashes are compared exactly.
type FeasibleCache = HashMap<u64, Vec<(usize, Rc<Feasible>)>>;

/// A JobSet pod's feasible set, and the generation of the exclusive [`Blocks`] it was folded
/// with.
type JobSetFeasible = (Rc<Feasible>, u32);

/// (static feasible set, topology domains left out) → the feasible set without them.
type FoldedCache = HashMap<(usize, Vec<(usize, u32)>), Rc<Feasible>>;

/// A JobSet pod on a node (see [`Caches::jobset_pods`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct JobSetPod {
    pub pod: usize,
    pub node: usize,
    /// Its priority's id ([`Caches::priority_id`]).
    pub priority: u32,
}

/// See [`Caches::fold_blocks`].
type FoldMemo = HashMap<(usize, u32, String, Option<String>), (u32, Rc<Feasible>)>;

/// How many slots of room a node key orders by: the three scarcest requested resources, then pod
/// slots. A pod requesting more resources is ordered by its three scarcest only (every one of them
/// is still checked for room): a key compared and moved this often costs by its width — going from
/// 8 slots to 4 took 8% off a cycle (S1) — and a fourth resource decides only between nodes equal
/// in the first three.
const KEY_WIDTH: usize = 4;

/// (untolerated PreferNoSchedule taints, free room per requested resource, name rank): smaller is better.
pub(super) type NodeKey = (usize, [i64; KEY_WIDTH], usize);

/// A restriction to one domain of one topology key.
pub(super) type Filter = Vec<(Rc<Topology>, u32)>;

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

/// A hasher for keys that are hashes already, or indices (of nodes, of pods): cheaper than
/// SipHash, and no one chooses them.
#[derive(Default)]
pub(super) struct Prehashed(u64);

impl std::hash::Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    fn write_u32(&mut self, n: u32) {
        self.write_usize(n as usize);
    }
    fn write_usize(&mut self, n: usize) {
        // An index: spread over the bits (hash tables read the top ones too).
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by node index.
type ByNode<V> = HashMap<usize, V, std::hash::BuildHasherDefault<Prehashed>>;

/// The nodes in a class's scope that fit its demand in the committed state, best first. Built on
/// a class's second use (filter and score once per class, not a node scan per member) and kept
/// in step by replaying the state's change log, so a commit costs a re-key of the nodes it
/// touched, not a rebuild.
#[derive(Debug)]
struct ClassIndex {
    order: BTreeSet<(NodeKey, usize)>,
    keys: ByNode<NodeKey>,
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

/// A pod shape the placer is asked about: its demand, a pod to read constraints from, its
/// feasible nodes, and the topology domains it is restricted to.
#[derive(Clone, Copy)]
pub(super) struct Ask<'q> {
    pub demand: &'q Demand,
    pub pod: &'q Pod,
    pub feasible: &'q Rc<Feasible>,
    pub filter: Option<&'q Filter>,
}

/// Every cache of one cycle's placer.
pub(super) struct Caches<'a> {
    snap: &'a Snapshot,
    /// Node index → position in name order: the final tie-break, so node order in the snapshot
    /// never changes a plan.
    rank: Vec<usize>,
    scoring: Scoring,
    /// Node name → index.
    node_index: NodeIndex<'a>,
    feasible: RefCell<FeasibleCache>,
    /// Pod index → its feasible set, once looked up (pods outside JobSets).
    by_pod: RefCell<PodSlots<Rc<Feasible>>>,
    /// The same for JobSet pods, whose sets change as exclusive child Jobs are committed.
    by_jobset_pod: RefCell<HashMap<usize, JobSetFeasible>>,
    /// Domains exclusive child Jobs hold (bound, or committed this cycle), built when the first
    /// JobSet pod asks.
    blocks: RefCell<Option<Blocks>>,
    /// Exclusive pods committed this cycle, with their nodes.
    committed: RefCell<Vec<(usize, usize)>>,
    /// (static feasible set, domains left out) → the feasible set without them.
    folded: RefCell<FoldedCache>,
    /// (static feasible set, priority id, child Job, own exclusive key) → the generation of the
    /// [`Blocks`] and the folded set then.
    fold_memo: RefCell<FoldMemo>,
    /// The reference cycle's folded sets, each kept for the cycle though never reused: callers
    /// key their own caches by a set's address (explanations, preemption), which a freed set's
    /// successor could otherwise take.
    kept: RefCell<Vec<Rc<Feasible>>>,
    topologies: RefCell<HashMap<String, Rc<Topology>>>,
    classes: RefCell<HashMap<ClassKey, Vec<Class>>>,
    /// Node entries held by all class indices (bounded by [`MAX_INDEXED`]).
    indexed: Cell<usize>,
    totals: RefCell<HashMap<(usize, Option<usize>), DomainTotals>>,
    /// Pods on nodes that belong to some JobSet's child job, once an exclusive gang asks.
    jobset_pods: std::cell::OnceCell<Rc<[JobSetPod]>>,
    /// JobSet priorities (see [`exclusive::priority_of`]) → a small id.
    priority_ids: RefCell<HashMap<String, u32>>,
    /// The volume filters: each pod's feasible nodes are less those its volumes refuse.
    volumes: Volumes<'a>,
    /// (static feasible set, nodes a pod's volumes allow) → the feasible set of both.
    restricted: RefCell<HashMap<(usize, usize), Rc<Feasible>>>,
    /// Keep per-class node orders. Off only for the reference cycle.
    fast: bool,
}

impl std::fmt::Debug for Caches<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches").field("scoring", &self.scoring).finish_non_exhaustive()
    }
}

impl<'a> Caches<'a> {
    pub fn new(
        snap: &'a Snapshot,
        config: &Config,
        fast: bool,
        node_index: NodeIndex<'a>,
        devices: super::devices::Devices<'a>,
    ) -> Self {
        Caches {
            snap,
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
            node_index,
            feasible: RefCell::new(HashMap::new()),
            by_pod: RefCell::new(PodSlots::new()),
            by_jobset_pod: RefCell::new(HashMap::new()),
            blocks: RefCell::new(None),
            committed: RefCell::new(Vec::new()),
            folded: RefCell::new(HashMap::new()),
            fold_memo: RefCell::new(HashMap::new()),
            kept: RefCell::new(Vec::new()),
            topologies: RefCell::new(HashMap::new()),
            classes: RefCell::new(HashMap::new()),
            indexed: Cell::new(0),
            totals: RefCell::new(HashMap::new()),
            jobset_pods: std::cell::OnceCell::new(),
            priority_ids: RefCell::new(HashMap::new()),
            volumes: Volumes::new(snap, devices),
            restricted: RefCell::new(HashMap::new()),
            fast,
        }
    }

    /// The volume filters of this cycle.
    pub fn volumes(&self) -> &Volumes<'a> {
        &self.volumes
    }

    /// The pods on nodes (bound, or being bound) labelled as some JobSet's child job
    /// (`jobset.sigs.k8s.io/job-key` or `jobset-name`), each with its node's index (`node_of`
    /// resolves a name): the domains exclusive placement must keep clear of. One pass over the
    /// snapshot's pods per cycle, when the first exclusive gang asks (the reference cycle scans
    /// again on every ask), instead of one per placement attempt.
    pub fn jobset_pods(&self) -> Rc<[JobSetPod]> {
        let scan = || -> Rc<[JobSetPod]> {
            self.snap
                .pods
                .iter()
                .enumerate()
                .filter(|(_, pod)| pod.uses_node() && exclusive::is_jobset_pod(pod))
                .filter_map(|(p, pod)| {
                    let node = self.node_of(pod.node_name.as_deref()?)?;
                    Some(JobSetPod { pod: p, node, priority: self.priority_id(pod) })
                })
                .collect()
        };
        if !self.fast {
            return scan();
        }
        self.jobset_pods.get_or_init(scan).clone()
    }

    /// A small id for `pod`'s JobSet priority ([`exclusive::priority_of`]): equal ids, equal
    /// priorities, for the cycle.
    pub fn priority_id(&self, pod: &Pod) -> u32 {
        let key = exclusive::priority_of(pod);
        let mut ids = self.priority_ids.borrow_mut();
        let next = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        *ids.entry(key).or_insert(next)
    }

    /// The index of the node named `name`.
    pub fn node_of(&self, name: &str) -> Option<usize> {
        self.node_index.get(name).copied()
    }

    /// Notes pods committed to nodes this cycle: the exclusive ones among them hold their
    /// domains against other child Jobs from now on.
    pub fn committed(&self, bindings: &[(usize, usize)]) {
        let pods = &self.snap.pods;
        let exclusive: Vec<(usize, usize)> =
            bindings.iter().copied().filter(|&(p, _)| pods[p].exclusive_topology.is_some()).collect();
        if exclusive.is_empty() {
            return;
        }
        if let Some(b) = self.blocks.borrow_mut().as_mut() {
            for &(p, n) in &exclusive {
                b.add(&pods[p], &self.snap.nodes[n]);
            }
        }
        self.committed.borrow_mut().extend(exclusive);
    }

    /// The exclusive domains as they stand: built from the snapshot's bound pods and the pods
    /// committed so far, kept up to date from then on (the reference cycle builds them anew on
    /// every ask).
    fn with_blocks<R>(&self, f: impl FnOnce(&Blocks) -> R) -> R {
        let build = || {
            let mut b = Blocks::default();
            for pod in self.snap.pods.iter().filter(|p| p.exclusive_topology.is_some() && p.uses_node()) {
                if let Some(n) = pod.node_name.as_deref().and_then(|name| self.node_of(name)) {
                    b.add(pod, &self.snap.nodes[n]);
                }
            }
            for &(p, n) in self.committed.borrow().iter() {
                b.add(&self.snap.pods[p], &self.snap.nodes[n]);
            }
            b
        };
        if !self.fast {
            return f(&build());
        }
        let mut slot = self.blocks.borrow_mut();
        f(slot.get_or_insert_with(build))
    }

    /// Nodes that pass every capacity-independent check for pod `p`, less the domains other
    /// JobSets' exclusive child Jobs hold against it; computed once per distinct constraint
    /// signature (and set of such domains) per cycle — members of a gang usually share one.
    ///
    /// A member of an exclusive gang is folded only with domains of other topology keys than its
    /// own: its gang's placement keeps it out of every domain of its key that another child Job
    /// of its priority holds, exclusive or not ([`super::place`]), a superset of what folding
    /// would take out.
    pub fn feasible(&self, p: usize) -> Rc<Feasible> {
        if let Some(f) = self.by_pod.borrow().get(p) {
            return f.clone();
        }
        let pod = &self.snap.pods[p];
        if !exclusive::is_jobset_pod(pod) {
            let f = self.feasible_uncached(p);
            self.by_pod.borrow_mut().set(p, self.snap.pods.len(), f.clone());
            return f;
        }
        let generation = self.with_blocks(|b| b.generation);
        if self.fast
            && let Some((f, g)) = self.by_jobset_pod.borrow().get(&p)
            && *g == generation
        {
            return f.clone();
        }
        let f = self.fold_blocks(pod, self.feasible_uncached(p), generation);
        if self.fast {
            self.by_jobset_pod.borrow_mut().insert(p, (f.clone(), generation));
        }
        f
    }

    /// `base` (a JobSet pod's static feasible set) without the domains exclusive child Jobs of
    /// other Jobs hold at its priority (`generation` of the [`Blocks`]); `base` itself when there
    /// are none. Pods of one child Job and constraint signature share the result.
    fn fold_blocks(&self, pod: &Pod, base: Rc<Feasible>, generation: u32) -> Rc<Feasible> {
        let own = pod.exclusive_topology.as_deref().filter(|_| pod.gang.is_some());
        let memo_key = (
            Rc::as_ptr(&base) as usize,
            self.priority_id(pod),
            exclusive::job_of(pod),
            own.map(str::to_string),
        );
        if self.fast
            && let Some((g, f)) = self.fold_memo.borrow().get(&memo_key)
            && *g == generation
        {
            return f.clone();
        }
        // The held domains, resolved to topology domains; the first few named for the message.
        const NAMED: usize = 3;
        let mut named: Vec<String> = Vec::new();
        let out: Vec<(Rc<Topology>, u32)> = self.with_blocks(|b| {
            let mut last: Option<(&str, Rc<Topology>)> = None;
            let mut out = Vec::new();
            for (key, value) in b.against(pod) {
                if Some(key) == own {
                    continue;
                }
                let topo = match &last {
                    Some((k, t)) if *k == key => t.clone(),
                    _ => {
                        let t = self.topology(key);
                        last = Some((key, t.clone()));
                        t
                    }
                };
                let Some(d) = topo.domains.binary_search_by(|(v, _)| v.as_str().cmp(value)).ok() else {
                    continue;
                };
                if named.len() < NAMED {
                    named.push(format!("{key}={value}"));
                }
                out.push((topo, u32::try_from(d).unwrap_or(u32::MAX)));
            }
            out
        });
        let f = if out.is_empty() {
            base
        } else {
            let sig =
                (Rc::as_ptr(&base) as usize, out.iter().map(|(t, d)| (Rc::as_ptr(t) as usize, *d)).collect());
            let cached = if self.fast { self.folded.borrow().get(&sig).cloned() } else { None };
            match cached {
                Some(f) => f,
                None => {
                    let mut mask = base.mask_of(self.snap.nodes.len());
                    for (topo, d) in &out {
                        for &n in topo
                            .domains
                            .get(usize::try_from(*d).unwrap_or(usize::MAX))
                            .map_or(&[][..], |x| &x.1[..])
                        {
                            mask[n] = false;
                        }
                    }
                    let list = base.list.iter().copied().filter(|&n| mask[n]).collect();
                    let more = out.len().saturating_sub(named.len());
                    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
                    let excluded = Some(format!(
                        "are in a domain another JobSet's child job holds exclusively ({}{more})",
                        named.join(", ")
                    ));
                    let f = Rc::new(Feasible { list, mask, excluded });
                    if self.fast {
                        self.folded.borrow_mut().insert(sig, f.clone());
                    } else {
                        self.kept.borrow_mut().push(f.clone());
                    }
                    f
                }
            }
        };
        if self.fast {
            self.fold_memo.borrow_mut().insert(memo_key, (generation, f.clone()));
        }
        f
    }

    /// The nodes that pass the static checks for pod `p` and its volumes' rules.
    fn feasible_uncached(&self, p: usize) -> Rc<Feasible> {
        let base = self.feasible_static(p);
        match self.volumes.allowed(p) {
            None => base,
            Some(allowed) => self.restrict(base, &allowed),
        }
    }

    /// `base` less the nodes not in `allowed` (sorted), once per pair (both outlive the cycle in
    /// their caches, so their addresses name them).
    fn restrict(&self, base: Rc<Feasible>, allowed: &Rc<[usize]>) -> Rc<Feasible> {
        let key = (Rc::as_ptr(&base) as usize, Rc::as_ptr(allowed).cast::<usize>() as usize);
        if let Some(f) = self.restricted.borrow().get(&key) {
            return f.clone();
        }
        let list: Vec<usize> = allowed.iter().copied().filter(|&n| base.has(n)).collect();
        let mut mask = Vec::new();
        if list.len() > SPARSE {
            mask = vec![false; self.snap.nodes.len()];
            for &n in &list {
                mask[n] = true;
            }
        }
        let f = Rc::new(Feasible { list, mask, excluded: base.excluded.clone() });
        self.restricted.borrow_mut().insert(key, f.clone());
        f
    }

    /// The nodes that pass the static checks (readiness, taints, selectors, affinity) for pod `p`.
    fn feasible_static(&self, p: usize) -> Rc<Feasible> {
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
        let f = Rc::new(Feasible { list, mask, excluded: None });
        self.feasible.borrow_mut().entry(sig).or_default().push((p, f.clone()));
        f
    }

    /// The domains of a topology key.
    pub fn topology(&self, key: &str) -> Rc<Topology> {
        if let Some(t) = self.topologies.borrow().get(key) {
            return t.clone();
        }
        // Domains in value order, each's nodes in node order: sorted once, not a tree of vectors
        // (a hostname makes a domain per node).
        // A Volcano HyperNode tier is a level no node carries as a label: its domains are the
        // tier's HyperNodes ([`crate::read::hypernode`]).
        // Nor is a Koordinator network layer: its domains come from the ClusterNetworkTopology
        // ([`crate::read::network_layer`]).
        let derived = crate::read::hypernode::tier_of(key)
            .map(|t| crate::read::hypernode::domains(&self.snap.nodes, &self.snap.storage.hypernodes, t))
            .or_else(|| {
                crate::read::network_layer::layer_of(key).map(|l| {
                    crate::read::network_layer::domains(
                        &self.snap.nodes,
                        &self.snap.storage.network_layers,
                        l,
                    )
                })
            });
        let mut labelled: Vec<(&str, usize)> = match &derived {
            Some(d) => d.iter().enumerate().filter_map(|(i, v)| Some((v.as_deref()?, i))).collect(),
            None => (self.snap.nodes.iter().enumerate())
                .filter_map(|(i, n)| Some((n.labels.get(key)?.as_str(), i)))
                .collect(),
        };
        labelled.sort_unstable();
        let mut node_domain = vec![u32::MAX; self.snap.nodes.len()];
        let mut domains: Vec<(String, Vec<usize>)> = Vec::new();
        for (value, n) in labelled {
            match domains.last_mut() {
                Some((last, nodes)) if last == value => nodes.push(n),
                _ => domains.push((value.to_string(), vec![n])),
            }
            node_domain[n] = u32::try_from(domains.len() - 1).unwrap_or(u32::MAX);
        }
        let t = Rc::new(Topology { node_domain, domains });
        self.topologies.borrow_mut().insert(key.to_string(), t.clone());
        t
    }

    /// How good `node` is for a pod of demand `d` as seen through `txn`; smaller is better:
    /// untolerated `PreferNoSchedule` taints, then the room left per requested resource, scarcest
    /// first (bin-packing prefers less room, spreading more), then pod slots, then name order.
    pub fn node_key(&self, state: &Ledger, txn: &Txn, d: &Demand, pod: &Pod, n: usize) -> NodeKey {
        let base = (soft_taints(&self.snap.nodes[n], pod), [0; KEY_WIDTH], self.rank[n]);
        let (left, pods) = state.left(txn, n);
        let free = d.0.iter().map(|&(res, _)| left.get(res).copied().unwrap_or(0));
        self.rekey(base, d.0.len(), free, pods)
    }

    /// `key` (a node's key for a demand of `width` resources) with its room set anew from `free`
    /// (what the node has left of each demanded resource, in the demand's order) and `pods` free
    /// slots: what the key becomes once pods land on the node.
    pub fn rekey(
        &self,
        key: NodeKey,
        width: usize,
        free: impl IntoIterator<Item = i64>,
        pods: i64,
    ) -> NodeKey {
        let sign = if self.scoring == Scoring::Spread { -1 } else { 1 };
        let mut room = [0i64; KEY_WIDTH];
        for (slot, f) in room.iter_mut().zip(free.into_iter().take(KEY_WIDTH - 1)) {
            *slot = sign * f;
        }
        room[width.min(KEY_WIDTH - 1)] = sign * pods;
        (key.0, room, key.2)
    }

    /// The `k` best nodes (best first) for `ask`, as seen through `txn`.
    ///
    /// A class of alike pods used more than once is served from its [`ClassIndex`]: the first `k`
    /// untouched nodes of its committed order, merged with the nodes `txn` touched (re-keyed), are
    /// exactly the `k` best — without visiting the rest of the cluster.
    pub fn candidates(&self, state: &Ledger, txn: &Txn, ask: Ask<'_>, k: usize) -> Vec<(NodeKey, usize)> {
        self.candidates_where(state, txn, ask, k, None)
    }

    /// [`Caches::candidates`] among the nodes `also` allows too (the inter-pod filters, whose
    /// answer depends on what is placed): the class's order is walked from its best node until
    /// `k` are allowed, so a query costs the nodes it passes over, not the cluster.
    pub fn candidates_where(
        &self,
        state: &Ledger,
        txn: &Txn,
        ask: Ask<'_>,
        k: usize,
        also: Option<&dyn Fn(usize) -> bool>,
    ) -> Vec<(NodeKey, usize)> {
        let Ask { demand: d, pod, feasible, filter } = ask;
        if k == 0 {
            return Vec::new();
        }
        let scope = filter.and_then(|f| f.last());
        let allowed = |n: usize| {
            feasible.has(n)
                && filter.is_none_or(|f| f.iter().all(|(t, dom)| t.node_domain[n] == *dom))
                && also.is_none_or(|a| a(n))
        };
        let scope_nodes = || -> Box<dyn Iterator<Item = usize> + '_> {
            match scope {
                Some((t, dom)) => match t.domains.get(usize::try_from(*dom).unwrap_or(usize::MAX)) {
                    Some((_, ns)) => Box::new(ns.iter().copied().filter(|&n| feasible.has(n))),
                    None => Box::new(std::iter::empty()),
                },
                None => Box::new(feasible.list.iter().copied()),
            }
        };
        // A few nodes (a pod held to its local volume's node) are read in one pass below: a class
        // and its index would cost more than they save.
        let sparse = feasible.mask.is_empty();
        if !sparse {
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
                    let mut keys = ByNode::with_capacity_and_hasher(size, Default::default());
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
                    |n: usize| feasible.has(n) && scope.is_none_or(|(t, dom)| t.node_domain[n] == *dom);
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
                out.extend(
                    index.order.iter().filter(|&&(_, n)| !txn.touches(n) && allowed(n)).take(k).copied(),
                );
                for n in txn.touched() {
                    if allowed(n) && state.fits(txn, n, d).is_ok() {
                        out.push((self.node_key(state, txn, d, pod, n), n));
                    }
                }
                // A transaction may touch thousands of nodes (what backfill gives back to try a
                // later start): the `k` best are selected before they are sorted. Keys are
                // unique, so the result is the same.
                if out.len() > k {
                    out.select_nth_unstable(k - 1);
                    out.truncate(k);
                }
                out.sort_unstable();
                return out;
            }
            drop(classes);
        }

        // The k best in one pass, worst on top so it can be evicted.
        let mut best: BinaryHeap<(NodeKey, usize)> =
            BinaryHeap::with_capacity(k.min(feasible.list.len()) + 1);
        for n in scope_nodes() {
            if state.fits(txn, n, d).is_err() || !allowed(n) {
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

    /// Free capacity of resource `scarce` (`None`: pod slots) in domain `d` of `topo`, in the
    /// committed state: summed once per key and resource, then kept up to date from the ledger's
    /// change log.
    pub fn domain_free(&self, state: &Ledger, topo: &Rc<Topology>, scarce: Option<usize>, d: usize) -> i64 {
        self.with_domain_free(state, topo, scarce, |totals| totals.get(d).copied().unwrap_or(0))
    }

    /// [`Caches::domain_free`] of every domain of `topo` at once, handed to `f` (one look-up and
    /// one sync for all of them, not one per domain).
    pub fn with_domain_free<T>(
        &self,
        state: &Ledger,
        topo: &Rc<Topology>,
        scarce: Option<usize>,
        f: impl FnOnce(&[i64]) -> T,
    ) -> T {
        let committed = Txn::default();
        // An overcommitted node (allocatable shrunk under its pods) has no room, not less than
        // none: it takes nothing from its domain's others.
        let value = |n: usize| {
            match scarce {
                Some(res) => state.free(&committed, n, res),
                None => state.free_pods(&committed, n),
            }
            .max(0)
        };
        let mut all = self.totals.borrow_mut();
        let t = all.entry((Rc::as_ptr(topo) as usize, scarce)).or_insert_with(|| {
            let mut seen = vec![0; topo.node_domain.len()];
            let mut totals = vec![0i64; topo.domains.len()];
            for (dom, (_, nodes)) in topo.domains.iter().enumerate() {
                for &n in nodes {
                    seen[n] = value(n);
                    totals[dom] = totals[dom].saturating_add(seen[n]);
                }
            }
            DomainTotals { seen, totals, synced: state.log().len() }
        });
        for &n in &state.log()[t.synced..] {
            let Some(dom) = usize::try_from(topo.node_domain[n]).ok().filter(|&x| x < t.totals.len()) else {
                continue;
            };
            let now = value(n);
            t.totals[dom] = t.totals[dom].saturating_add(now.saturating_sub(t.seen[n]));
            t.seen[n] = now;
        }
        t.synced = state.log().len();
        f(&t.totals)
    }
}

#[cfg(test)]
mod feasible_tests {
    use super::*;

    #[test]
    fn a_set_without_a_mask_answers_as_one_with_it() {
        let nodes = 100;
        for list in [vec![], vec![0], vec![3, 17, 99], (0..SPARSE).map(|n| n * 3).collect::<Vec<_>>()] {
            let sparse = Feasible { list: list.clone(), mask: Vec::new(), excluded: None };
            let full = Feasible { list: list.clone(), mask: sparse.mask_of(nodes), excluded: None };
            assert_eq!(full.mask.iter().filter(|&&b| b).count(), list.len());
            for n in 0..nodes + 2 {
                assert_eq!(sparse.has(n), list.contains(&n), "node {n} of {list:?}");
                assert_eq!(full.has(n), list.contains(&n), "node {n} of {list:?} (mask)");
            }
        }
    }
}
