//! The volume filters of the cycle, with kube-scheduler's semantics: `VolumeBinding` (a bound
//! PVC's PV node affinity; an unbound WaitForFirstConsumer claim's static PVs and its class's
//! `allowedTopologies`; an unbound Immediate claim waits), `VolumeZone` (zone and region labels
//! of a PVC's PV), `VolumeRestrictions` (ReadWriteOncePod claims; GCE PD, AWS EBS, RBD and iSCSI
//! disks mounted twice on a node), `NodeVolumeLimits` (CSINode attach limits) and, of
//! `DynamicResources`, what a claim already allocated allows (its `nodeSelector`) — a claim that
//! still needs devices waits.
//!
//! A pod's volumes are read once per cycle into its [`Needs`]: a reason it cannot go anywhere now
//! (a PVC missing, being deleted, unbound and Immediate, …), rules that allow or refuse a node
//! whatever else is placed (folded into the pod's feasible nodes by [`super::cache`], one node
//! list per set of rules), and what depends on other placements — a static PV matched once, a
//! ReadWriteOncePod claim used by one pod, disks and attach limits per node. Those are checked
//! against what pods placed earlier took ([`super::booked::Booked`], carried by the ledger and
//! its transactions), one pod at a time ([`Volumes::dynamic`]); [`Volumes::take`] records what a
//! placement takes. What a gang's members need done before they are bound — a static PV bound to
//! a claim, or a claim provisioned for a node — is [`Volumes::work`].
//!
//! Only what a cycle may place is read: the pending pods' needs (each once, on first ask), and the
//! volumes of the pods on nodes only when a pending pod's needs depend on them (one pass).

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;

use super::booked::{Attached, Choice};
use super::devices::{Allocated, Avoid, DeviceIx, Devices, Refusal, Taken};
use super::filter::term_matches;
use super::ledger::{Ledger, Txn};
use super::{Fx, PodSlots};
use crate::decide::plan::DeviceAllocation;
use crate::read::model::volume::{
    AccessMode, Attachable, BindingMode, ClaimName, CsiNode, Disk, PodVolume, Pv, Pvc, RESERVED_FOR_MAX,
    Storage, csi_driver_of,
};
use crate::read::model::{Node, NodeSelectorOperator, NodeSelectorTerm, ObjectKey, PodKey, Snapshot};
use std::hash::Hasher as _;

/// The zone and region labels `VolumeZone` reads, legacy and GA.
const ZONE_LABELS: [&str; 4] = [
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// The GA label a legacy zone or region label stands for (`translateToGALabel`).
fn ga_label(key: &str) -> &str {
    match key {
        "failure-domain.beta.kubernetes.io/zone" => "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region" => "topology.kubernetes.io/region",
        other => other,
    }
}

/// A rule that allows or refuses a node whatever else is placed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Rule {
    /// A bound PVC's PV: its `nodeAffinity`.
    PvAffinity { pv: String },
    /// `VolumeZone`: a PVC's PV carries zone or region label `key`; a node that has any of those
    /// labels must carry one of `values` there.
    Zone { pv: String, key: String, values: Vec<String> },
    /// Provisioning was asked for this node (`volume.kubernetes.io/selected-node`).
    SelectedNode { claim: ObjectKey, node: String },
    /// An unbound WaitForFirstConsumer claim with static PVs to choose from: one of them can be
    /// bound on the node, or its class provisions there.
    Bindable { claim: ObjectKey },
    /// An unbound WaitForFirstConsumer claim no static PV fits: its class provisions there.
    Provisionable { class: String },
    /// An allocated ResourceClaim: its allocation's `nodeSelector`.
    Allocation { claim: ObjectKey },
}

/// What one pod asks of volumes.
#[derive(Debug, Default)]
pub(super) struct Needs {
    /// Why it cannot go anywhere now.
    wait: Option<String>,
    rules: Vec<Rule>,
    /// Unbound WaitForFirstConsumer claims, smallest request first (then by name), as
    /// `findMatchingVolumes` takes them. One that no static PV fits and no other pending pod
    /// uses is provisioned wherever the pod goes: it does not make the pod [`Needs::dynamic`].
    unbound: Vec<ObjectKey>,
    /// ReadWriteOncePod claims.
    rwop: Vec<ObjectKey>,
    disks: Vec<Disk>,
    /// What a node attaches for it (in-tree ones counted where migrated).
    attach: Vec<Attachable>,
    /// ResourceClaims that need devices allocated (wherever the pod goes).
    allocate: Vec<ObjectKey>,
    /// ResourceClaims allocated already and not reserved for the pod: it is added to their
    /// `reservedFor` before it is bound, as kube-scheduler's `PreBind` does.
    reserve: Vec<ObjectKey>,
    /// Its ResourceClaims that the pending pods using them could fill past
    /// [`RESERVED_FOR_MAX`] consumers: who is reserved in the cycle is counted for them.
    crowded: Vec<ObjectKey>,
    /// Whether placing it depends on other placements.
    dynamic: bool,
    /// The nodes its rules allow ([`Volumes::allowed`]), once asked.
    allowed: OnceCell<Option<Rc<[usize]>>>,
}

/// The static PVs an unbound claim may be bound to (`FindMatchingVolume` less node affinity and
/// the PVs taken this cycle, which depend on the node and on other placements).
#[derive(Debug, Default)]
struct Candidates {
    /// A PV pre-bound to the claim (`claimRef`): the only one it may take.
    prebound: Option<String>,
    /// PVs it may take, smallest first (then by name).
    pvs: Vec<String>,
    /// Node → the indices in `pvs` of those whose affinity lists nodes, the node among them.
    by_node: HashMap<usize, Vec<usize>>,
    /// Indices in `pvs` of those allowed on every node.
    anywhere: Vec<usize>,
}

/// The PVs unbound claims may take, found in one pass over the PVs (kube-scheduler's PV cache
/// indexes them by class): Available unclaimed ones by class, and Available ones whose `claimRef`
/// names a pending pod's claim by that claim; each list in name order.
#[derive(Debug, Default)]
struct PvIndex {
    by_class: HashMap<Option<String>, Vec<String>>,
    by_claim: HashMap<ObjectKey, Vec<String>>,
}

/// The volumes of the pods on nodes, for the filters that count them.
#[derive(Debug, Default)]
struct OnNodes {
    /// ReadWriteOncePod claims in use → the pod using them.
    rwop: HashMap<ObjectKey, PodKey>,
    disks: HashMap<usize, Vec<Disk>>,
    attached: HashMap<usize, BTreeSet<Attached>>,
}

/// Why a node cannot take a pod for a reason that depends on other placements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Block {
    /// No static PV is left for the claim there, and its class does not provision there.
    NoVolume(ObjectKey),
    /// The claim was given a volume for another pod placed in this cycle, which the node cannot use.
    Chosen(ObjectKey, usize),
    /// The ReadWriteOncePod claim is used by another pod placed in this cycle.
    Rwop(ObjectKey, usize),
    /// An inline disk conflicts with one mounted there (by a pod placed in this cycle, or not).
    Disk(Option<usize>),
    /// The node's attach limit for a CSI driver would be exceeded.
    Limit(String, i64),
    /// A ResourceClaim's devices cannot be allocated there, and why.
    Devices(ObjectKey, String),
    /// The ResourceClaim was allocated in this cycle for another pod, whose devices the node
    /// cannot reach.
    Allocated(ObjectKey, usize),
}

/// What a placement takes of volumes.
#[derive(Debug)]
enum Booking {
    Choose(ObjectKey, Choice),
    Rwop(ObjectKey),
    Mount(Disk),
    Attach(Attached),
    Allocate(ObjectKey, Allocated),
    /// The pod added to a crowded claim's `reservedFor`.
    Reserve(ObjectKey),
}

/// A claim to bind (a PVC) or to allocate and reserve (a ResourceClaim) before a pod is bound
/// ([`Volumes::work`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Work {
    pub pod: usize,
    pub node: usize,
    pub claim: ObjectKey,
    pub todo: Todo,
}

/// What a [`Work`] does to its claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Todo {
    /// A PVC: bound to the static PV chosen; `None`: provisioned for the node.
    Volume(Option<String>),
    /// A ResourceClaim: its devices allocated (`None`: allocated already), and the pod added to
    /// its `reservedFor`.
    Devices(Option<DeviceAllocation>),
}

/// The volume filters of one cycle (see the module documentation).
pub(super) struct Volumes<'a> {
    snap: &'a Snapshot,
    /// Node indices in name order (no reference into the snapshot is kept in a cell: the placer
    /// stays covariant in its lifetime).
    by_name: OnceCell<Vec<usize>>,
    /// Pod index → its needs, once read (sized on first use).
    needs: RefCell<PodSlots<Rc<Needs>>>,
    none: Rc<Needs>,
    /// A rule → the nodes it allows (`None`: every node).
    rule_nodes: RefCell<HashMap<Rule, Option<Rc<[usize]>>>>,
    /// Nothing allowed: pods that wait.
    nowhere: Rc<[usize]>,
    /// Label key → value → nodes.
    labels: RefCell<HashMap<String, Rc<LabelIndex>>>,
    /// PV → the nodes its affinity allows (`None`: every node).
    pv_nodes: RefCell<HashMap<String, Option<Rc<[usize]>>>>,
    pv_index: OnceCell<PvIndex>,
    /// The pending pods with volumes, as the cycle's pass over the pods found them.
    pending: OnceCell<Vec<usize>>,
    /// [`quick_hash`]es of the claims the pending pods use, and of those more than one of them
    /// uses (each sorted).
    claims: OnceCell<(Vec<u64>, Vec<u64>)>,
    /// ResourceClaim → how many pending pods use it (read once, when first asked).
    claim_users: OnceCell<HashMap<ObjectKey, usize>>,
    /// The pending pods with ResourceClaims, as the cycle's pass over the pods found them.
    pending_with_devices: OnceCell<Vec<usize>>,
    /// Node lists by content: pods whose rules allow the same nodes share one list.
    lists: RefCell<HashSet<Rc<[usize]>>>,
    candidates: RefCell<HashMap<ObjectKey, Rc<Candidates>>>,
    on_nodes: OnceCell<OnNodes>,
    /// Whether any node states an attach limit.
    limits: bool,
    /// Pod → why it was last refused every node for a reason that depends on other placements.
    notes: RefCell<HashMap<usize, Block>>,
    devices: Devices<'a>,
    /// Device choices a gang being placed does not make again (see [`Nogood`]).
    nogoods: RefCell<Vec<Nogood>>,
    /// Pods refused a node for devices that a placement of the same step took (another choice
    /// there might have left room): since [`Volumes::clear_contended`].
    contended: RefCell<HashSet<usize>>,
}

/// A device choice not to make again while a gang is placed: pod, node, claim, and what its
/// allocation took there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Nogood {
    pub pod: usize,
    pub node: usize,
    pub claim: ObjectKey,
    pub avoid: Avoid,
}

impl std::fmt::Debug for Volumes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Volumes").finish_non_exhaustive()
    }
}

/// A node label's values → the nodes carrying each: (hash of the value, node) pairs sorted, so
/// building it copies no value (a hostname label has a value per node) and a look-up is a
/// binary search whose hits are checked against the node's label.
struct LabelIndex(Vec<(u64, usize)>);

impl LabelIndex {
    fn new(nodes: &[Node], key: &str) -> Self {
        let mut pairs: Vec<(u64, usize)> = (nodes.iter().enumerate())
            .filter_map(|(n, node)| Some((value_hash(node.labels.get(key)?), n)))
            .collect();
        pairs.sort_unstable();
        LabelIndex(pairs)
    }

    /// The nodes whose label `key` is `value`, in node order.
    fn nodes<'s>(
        &'s self,
        nodes: &'s [Node],
        key: &'s str,
        value: &'s str,
    ) -> impl Iterator<Item = usize> + 's {
        let h = value_hash(value);
        let from = self.0.partition_point(|&(x, _)| x < h);
        self.0[from..]
            .iter()
            .take_while(move |&&(x, _)| x == h)
            .map(|&(_, n)| n)
            .filter(move |&n| nodes[n].labels.get(key).is_some_and(|v| v == value))
    }
}

/// [`Fx`] of a label value (a false match is filtered by the caller).
fn value_hash(value: &str) -> u64 {
    let mut h = Fx::default();
    h.write(value.as_bytes());
    h.finish()
}

/// Intersection of two sorted node lists.
fn intersect(a: &[usize], b: &[usize]) -> Vec<usize> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// A cheap hash of a namespaced name ([`Fx`], a word at a time), for sets where a false match
/// only costs work: one pass over many PVs or pods stays a few nanoseconds per object.
fn quick_hash(namespace: &str, name: &str) -> u64 {
    let mut h = Fx::default();
    for s in [namespace, name] {
        h.write_usize(s.len());
        h.write(s.as_bytes());
    }
    h.finish()
}

/// The PVs `names` names, with their names.
fn named<'s>(
    storage: &'s Storage,
    names: Option<&'s Vec<String>>,
) -> impl Iterator<Item = (&'s String, &'s Pv)> {
    names.into_iter().flatten().filter_map(|n| storage.volumes.get(n).map(|pv| (n, pv)))
}

/// The handle of a volume not provisioned yet, for counting it against an attach limit: unique
/// per claim, never a real handle (kube-scheduler's is a random prefix and the claim's name).
fn pending_handle(claim: &ObjectKey) -> String {
    format!("\u{0}pvc/{}/{}", claim.namespace, claim.name)
}

impl<'a> Volumes<'a> {
    pub fn new(snap: &'a Snapshot, devices: Devices<'a>) -> Self {
        let limits = snap.storage.csi_nodes.values().any(|c| !c.limits.is_empty())
            || snap.nodes.iter().any(|n| n.allocatable.iter().any(|(r, _)| r.starts_with(ATTACH_PREFIX)));
        Volumes {
            snap,
            by_name: OnceCell::new(),
            needs: RefCell::new(PodSlots::new()),
            none: Rc::new(Needs::default()),
            rule_nodes: RefCell::new(HashMap::new()),
            nowhere: Rc::from(Vec::new()),
            labels: RefCell::new(HashMap::new()),
            pv_nodes: RefCell::new(HashMap::new()),
            pv_index: OnceCell::new(),
            pending: OnceCell::new(),
            claims: OnceCell::new(),
            claim_users: OnceCell::new(),
            pending_with_devices: OnceCell::new(),
            lists: RefCell::new(HashSet::new()),
            candidates: RefCell::new(HashMap::new()),
            on_nodes: OnceCell::new(),
            limits,
            notes: RefCell::new(HashMap::new()),
            devices,
            nogoods: RefCell::new(Vec::new()),
            contended: RefCell::new(HashSet::new()),
        }
    }

    fn node_of(&self, name: &str) -> Option<usize> {
        let nodes = &self.snap.nodes;
        let by_name = self.by_name.get_or_init(|| {
            let mut order: Vec<usize> = (0..nodes.len()).collect();
            order.sort_by(|&a, &b| nodes[a].name.cmp(&nodes[b].name));
            order
        });
        by_name.binary_search_by(|&i| nodes[i].name.as_str().cmp(name)).ok().map(|at| by_name[at])
    }

    /// What pod `p` asks of volumes (read once per cycle).
    pub fn needs(&self, p: usize) -> Rc<Needs> {
        let pod = &self.snap.pods[p];
        if pod.volumes.is_empty() && pod.resource_claims.is_empty() {
            return self.none.clone();
        }
        if let Some(n) = self.needs.borrow().get(p) {
            return n.clone();
        }
        let n = Rc::new(self.read_needs(p));
        self.needs.borrow_mut().set(p, self.snap.pods.len(), n.clone());
        n
    }

    /// Whether pod `p` has claims whose devices the cycle allocates.
    pub fn allocates(&self, p: usize) -> bool {
        !self.needs(p).allocate.is_empty()
    }

    /// Whether another choice of devices for pod `pods[0]`'s claims could leave a different
    /// room for the others': some claim of theirs has several requests or alternatives, a
    /// `matchAttribute` constraint, or devices drawing on shared counters, or their claims do not
    /// all ask the same. When none of these holds, every choice on a node is like every other
    /// (the same count of alike devices) and revisiting one is waste.
    pub fn revisable(&self, pods: &[usize]) -> bool {
        if self.devices.partitionable() {
            return true;
        }
        let storage = &self.snap.storage;
        let mut first: Option<&crate::read::model::device::DeviceAsk> = None;
        for &p in pods {
            for key in &self.needs(p).allocate {
                let Some(claim) = storage.resource_claims.get(key) else { continue };
                let ask = &claim.ask;
                if ask.requests.len() > 1
                    || !ask.constraints.is_empty()
                    || ask.requests.iter().any(|r| r.alternatives.len() > 1)
                {
                    return true;
                }
                match first {
                    None => first = Some(ask),
                    Some(f) if f.requests != ask.requests => return true,
                    Some(_) => {}
                }
            }
        }
        false
    }

    /// Whether the cycle has any device to allocate.
    pub fn has_devices(&self) -> bool {
        self.devices.any()
    }

    /// The device choices placements avoid from now on.
    pub fn set_nogoods(&self, nogoods: Vec<Nogood>) {
        *self.nogoods.borrow_mut() = nogoods;
    }

    /// Forgets which pods were refused for devices the step took.
    pub fn clear_contended(&self) {
        if !self.contended.borrow().is_empty() {
            self.contended.borrow_mut().clear();
        }
    }

    /// Whether pod `p` was refused a node for devices its step's placements took.
    pub fn contended(&self, p: usize) -> bool {
        self.contended.borrow().contains(&p)
    }

    /// The notes of pods `pods`, to put back ([`Volumes::restore_notes`]) after attempts that
    /// are given up.
    pub fn notes_of(&self, pods: &[usize]) -> Vec<(usize, Option<Block>)> {
        let notes = self.notes.borrow();
        pods.iter().map(|p| (*p, notes.get(p).cloned())).collect()
    }

    pub fn restore_notes(&self, saved: Vec<(usize, Option<Block>)>) {
        let mut notes = self.notes.borrow_mut();
        for (p, note) in saved {
            match note {
                Some(b) => drop(notes.insert(p, b)),
                None => drop(notes.remove(&p)),
            }
        }
    }

    /// The last claim (in the pod's order) `txn` allocated for pod `p`, with its devices and
    /// its results' names (each sorted): the choice a gang revisits first.
    pub fn last_allocation(&self, p: usize, txn: &Txn) -> Option<(ObjectKey, Vec<DeviceIx>, Vec<String>)> {
        let needs = self.needs(p);
        needs.allocate.iter().rev().find_map(|claim| {
            let (a, q) = txn.volumes().allocation(claim)?;
            (*q == p).then(|| {
                let mut devices: Vec<DeviceIx> = a.devices.iter().filter(|d| !d.2).map(|d| d.1).collect();
                devices.sort_unstable();
                let mut names: Vec<String> = a.devices.iter().map(|d| d.0.clone()).collect();
                names.sort_unstable();
                (claim.clone(), devices, names)
            })
        })
    }

    /// Whether ResourceClaim `claim` has a request with `firstAvailable` alternatives.
    pub fn has_alternatives(&self, claim: &ObjectKey) -> bool {
        let claims = &self.snap.storage.resource_claims;
        claims.get(claim).is_some_and(|c| c.ask.requests.iter().any(|r| r.alternatives.len() > 1))
    }

    /// Whether pods `p` and `q` have claims to allocate that ask alike (the same requests and
    /// constraints, in order): claims made from one template.
    pub fn asks_alike(&self, p: usize, q: usize) -> bool {
        let claims = &self.snap.storage.resource_claims;
        let shape = |p: usize| {
            let needs = self.needs(p);
            needs
                .allocate
                .iter()
                .map(|k| claims.get(k).map(|c| (c.ask.requests.clone(), c.ask.constraints.clone())))
                .collect::<Vec<_>>()
        };
        shape(p) == shape(q)
    }

    /// DRA selector expressions this cycle ran through the interpreter.
    pub fn selector_evaluations(&self) -> u64 {
        self.devices.evaluations()
    }

    /// Whether placing pod `p` depends on other placements (it is placed one at a time, and what
    /// it takes is booked).
    pub fn dynamic(&self, p: usize) -> bool {
        self.needs(p).dynamic
    }

    /// Why pod `p` cannot go anywhere now, if it cannot.
    pub fn wait(&self, p: usize) -> Option<String> {
        self.needs(p).wait.clone()
    }

    /// The nodes pod `p`'s volumes allow whatever else is placed (sorted; `None`: every node).
    /// Pods whose rules are alike share one list.
    pub fn allowed(&self, p: usize) -> Option<Rc<[usize]>> {
        let needs = self.needs(p);
        needs.allowed.get_or_init(|| self.read_allowed(&needs)).clone()
    }

    fn read_allowed(&self, needs: &Needs) -> Option<Rc<[usize]>> {
        if needs.wait.is_some() {
            return Some(self.nowhere.clone());
        }
        if needs.rules.is_empty() {
            return None;
        }
        let mut out: Option<Rc<[usize]>> = None;
        for rule in &needs.rules {
            let Some(nodes) = self.rule_nodes(rule) else { continue };
            out = Some(match out {
                None => nodes,
                Some(so_far) => Rc::from(intersect(&so_far, &nodes)),
            });
        }
        // Rules that each allow every node leave the pod's nodes as they are.
        let list = out?;
        let mut lists = self.lists.borrow_mut();
        Some(match lists.get(&*list) {
            Some(l) => l.clone(),
            None => {
                lists.insert(list.clone());
                list
            }
        })
    }

    /// Why pod `p`'s volumes refuse node `n` whatever else is placed, as a message's
    /// `{count} {why}` (`have a volume node affinity conflict`); `None` when they allow it.
    pub fn why(&self, p: usize, n: usize) -> Option<String> {
        let needs = self.needs(p);
        for rule in &needs.rules {
            let allowed = self.rule_nodes(rule).is_none_or(|nodes| nodes.binary_search(&n).is_ok());
            if allowed {
                continue;
            }
            return Some(match rule {
                Rule::PvAffinity { .. } => "have a volume node affinity conflict".to_string(),
                Rule::Zone { .. } => "have no available volume zone".to_string(),
                Rule::SelectedNode { claim, node } => {
                    format!("are not node {node}, where PVC {claim} is being provisioned")
                }
                Rule::Bindable { .. } | Rule::Provisionable { .. } => {
                    "did not find available persistent volumes to bind".to_string()
                }
                Rule::Allocation { claim, .. } => {
                    format!("are not where ResourceClaim {claim} is allocated")
                }
            });
        }
        None
    }

    /// The nodes `rule` allows (sorted; `None`: every node), once per cycle.
    fn rule_nodes(&self, rule: &Rule) -> Option<Rc<[usize]>> {
        if let Some(n) = self.rule_nodes.borrow().get(rule) {
            return n.clone();
        }
        let nodes = &self.snap.nodes;
        let storage = &self.snap.storage;
        let list: Option<Vec<usize>> = match rule {
            Rule::PvAffinity { pv } => return self.pv_nodes(pv),
            Rule::Allocation { claim } => storage
                .resource_claims
                .get(claim)
                .and_then(|c| c.allocation.as_ref())
                .and_then(|a| a.node_selector.as_deref())
                .and_then(|terms| self.matching(terms)),
            Rule::Zone { key, values, .. } => Some(
                (0..nodes.len())
                    .filter(|&n| {
                        let labels = &nodes[n].labels;
                        if !ZONE_LABELS.iter().any(|l| labels.contains_key(*l)) {
                            return true;
                        }
                        let value = labels.get(key.as_str()).or_else(|| labels.get(ga_label(key)));
                        value.is_some_and(|v| values.contains(v))
                    })
                    .collect(),
            ),
            Rule::SelectedNode { node, .. } => Some(self.node_of(node).into_iter().collect()),
            Rule::Provisionable { class } => self.provisionable_nodes(class),
            Rule::Bindable { claim } => {
                let c = self.candidates(claim);
                let class = storage.claims.get(claim).and_then(|c| c.class.clone()).unwrap_or_default();
                // A pre-bound PV is the only one it may take; where no PV fits (a pre-bound one's
                // affinity included), its class's provisioning decides.
                let lists: Vec<Option<Rc<[usize]>>> = match &c.prebound {
                    Some(pv) => vec![self.pv_nodes(pv)],
                    None => c.pvs.iter().map(|pv| self.pv_nodes(pv)).collect(),
                };
                let mut set: BTreeSet<usize> = BTreeSet::new();
                let mut everywhere = false;
                for nodes in lists {
                    match nodes {
                        None => everywhere = true,
                        Some(list) => set.extend(list.iter().copied()),
                    }
                }
                if everywhere {
                    None
                } else {
                    match self.provisionable_nodes(&class) {
                        None => None,
                        Some(p) => {
                            set.extend(p.iter().copied());
                            Some(set.into_iter().collect())
                        }
                    }
                }
            }
        };
        let list = list.map(|mut v| {
            v.sort_unstable();
            v.dedup();
            Rc::<[usize]>::from(v)
        });
        self.rule_nodes.borrow_mut().insert(rule.clone(), list.clone());
        list
    }

    /// The nodes where `class` can provision a volume (`None`: every node).
    fn provisionable_nodes(&self, class: &str) -> Option<Vec<usize>> {
        let Some(c) = self.snap.storage.classes.get(class).filter(|c| c.provisions()) else {
            return Some(Vec::new());
        };
        if c.allowed_topologies.is_empty() {
            return None;
        }
        Some((0..self.snap.nodes.len()).filter(|&n| self.topology_allows(class, n)).collect())
    }

    /// Whether `class` provisions, and its `allowedTopologies` allow node `n`.
    fn provisions_on(&self, class: Option<&str>, n: usize) -> bool {
        let Some(c) = class.and_then(|c| self.snap.storage.classes.get(c)).filter(|c| c.provisions()) else {
            return false;
        };
        c.allowed_topologies.is_empty() || self.topology_allows(&c.name, n)
    }

    /// `MatchTopologySelectorTerms`: some term whose every label expression the node meets.
    fn topology_allows(&self, class: &str, n: usize) -> bool {
        let Some(c) = self.snap.storage.classes.get(class) else { return false };
        let labels = &self.snap.nodes[n].labels;
        c.allowed_topologies.is_empty()
            || c.allowed_topologies.iter().any(|t| {
                t.match_label_expressions.iter().all(|(k, vs)| labels.get(k).is_some_and(|v| vs.contains(v)))
            })
    }

    /// The nodes some of `terms` match (`None`: every node): a single `key In [values]`
    /// requirement (a local PV's `kubernetes.io/hostname`, a claim allocated on `metadata.name`)
    /// is looked up; anything else reads every node.
    fn matching(&self, terms: &[NodeSelectorTerm]) -> Option<Vec<usize>> {
        if let [term] = terms {
            match (term.match_expressions.as_slice(), term.match_fields.as_slice()) {
                ([r], []) if r.operator == NodeSelectorOperator::In => {
                    let index = self.label_index(&r.key);
                    return Some(
                        r.values.iter().flat_map(|v| index.nodes(&self.snap.nodes, &r.key, v)).collect(),
                    );
                }
                ([], [r]) if r.operator == NodeSelectorOperator::In && r.key == "metadata.name" => {
                    return Some(r.values.iter().filter_map(|v| self.node_of(v)).collect());
                }
                _ => {}
            }
        }
        let nodes = &self.snap.nodes;
        Some((0..nodes.len()).filter(|&n| terms.iter().any(|t| term_matches(t, &nodes[n]))).collect())
    }

    /// Value → nodes, of node label `key` (built on its first lookup: one pass over the nodes).
    fn label_index(&self, key: &str) -> Rc<LabelIndex> {
        if let Some(i) = self.labels.borrow().get(key) {
            return i.clone();
        }
        let index = Rc::new(LabelIndex::new(&self.snap.nodes, key));
        self.labels.borrow_mut().insert(key.to_string(), index.clone());
        index
    }

    /// The nodes PV `pv`'s affinity allows (sorted; `None`: every node), once per cycle.
    fn pv_nodes(&self, pv: &str) -> Option<Rc<[usize]>> {
        if let Some(n) = self.pv_nodes.borrow().get(pv) {
            return n.clone();
        }
        let terms = self.snap.storage.volumes.get(pv).and_then(|v| v.node_affinity.as_deref());
        let list = terms.and_then(|t| self.matching(t)).map(|mut v| {
            v.sort_unstable();
            v.dedup();
            Rc::<[usize]>::from(v)
        });
        self.pv_nodes.borrow_mut().insert(pv.to_string(), list.clone());
        list
    }

    fn pv_allows(&self, pv: &str, n: usize) -> bool {
        self.pv_nodes(pv).is_none_or(|nodes| nodes.binary_search(&n).is_ok())
    }

    /// The static PVs unbound claim `claim` may be bound to.
    fn candidates(&self, claim: &ObjectKey) -> Rc<Candidates> {
        if let Some(c) = self.candidates.borrow().get(claim) {
            return c.clone();
        }
        let storage = &self.snap.storage;
        let mut out = Candidates::default();
        if let Some(c) = storage.claims.get(claim) {
            let index = self.pv_index();
            let fits = |pv: &Pv| {
                pv.class == c.class
                    && pv.capacity >= c.storage
                    && pv.volume_mode == c.volume_mode
                    && !pv.deleting
            };
            out.prebound = named(storage, index.by_claim.get(claim))
                .find(|(_, pv)| pv.bound_to(c) && fits(pv))
                .map(|(n, _)| n.clone());
            let mut pvs: Vec<(i64, &str)> = Vec::new();
            for (name, pv) in named(storage, index.by_class.get(&c.class)) {
                let selected = c.selector.as_ref().is_none_or(|s| s.matches(&pv.labels.clone().into()));
                let modes = c.access_modes.iter().all(|m| pv.access_modes.contains(m));
                if fits(pv) && pv.available && selected && modes {
                    pvs.push((pv.capacity, name));
                }
            }
            pvs.sort_unstable();
            out.pvs = pvs.into_iter().map(|(_, n)| n.to_string()).collect();
            for (i, pv) in out.pvs.iter().enumerate() {
                match self.pv_nodes(pv) {
                    None => out.anywhere.push(i),
                    Some(nodes) => {
                        for &n in nodes.iter() {
                            out.by_node.entry(n).or_default().push(i);
                        }
                    }
                }
            }
        }
        let out = Rc::new(out);
        self.candidates.borrow_mut().insert(claim.clone(), out.clone());
        out
    }

    /// Whether unbound claim `c` (`key`) has any PV to look at: one pre-bound to it, or an
    /// Available unclaimed one of its class. When not, its [`Candidates`] are empty and are not
    /// built (two look-ups instead of the claim's entry).
    fn may_bind_static(&self, key: &ObjectKey, c: &Pvc) -> bool {
        let index = self.pv_index();
        index.by_claim.contains_key(key) || index.by_class.contains_key(&c.class)
    }

    /// The PVs unbound claims may take ([`PvIndex`]; one pass over the PVs, the first time a
    /// claim asks).
    fn pv_index(&self) -> &PvIndex {
        self.pv_index.get_or_init(|| {
            let storage = &self.snap.storage;
            // Only the pending pods' claims ask (a bound one's entries go unread).
            let asking = &self.claims().0;
            let mut out = PvIndex::default();
            for (name, pv) in &storage.volumes {
                // Only an Available PV is free or pre-bound: the PV controller keeps a PV whose
                // claimRef names a claim not bound yet Available (bound-by-controller ones too,
                // until it binds the claim). Skipping the rest reads one flag of each, not its
                // claimRef; what it misses is the instant between the controller marking a PV
                // Bound and binding its claim, after which the claim reads bound.
                if !pv.available {
                    continue;
                }
                match &pv.claim_ref {
                    None if !pv.deleting => {
                        out.by_class.entry(pv.class.clone()).or_default().push(name.clone());
                    }
                    // A false match only adds a PV the claim's own check refuses.
                    Some(r) if asking.binary_search(&quick_hash(&r.namespace, &r.name)).is_ok() => {
                        let key = ObjectKey::new(r.namespace.as_str(), r.name.as_str());
                        out.by_claim.entry(key).or_default().push(name.clone());
                    }
                    None | Some(_) => {}
                }
            }
            out
        })
    }

    /// Tells the pending pods with volumes (see [`Volumes::shared`]); once per cycle.
    pub fn pending(&self, pods: Vec<usize>) {
        let _ = self.pending.set(pods);
    }

    /// Whether claim `key` is used by more than one pending pod (a false match only places a pod
    /// one at a time).
    fn shared(&self, key: &ObjectKey) -> bool {
        self.claims().1.binary_search(&quick_hash(&key.namespace, &key.name)).is_ok()
    }

    /// The pending pods of ours with ResourceClaims (the cycle's pass over the pods finds them).
    pub fn pending_with_devices(&self, pods: Vec<usize>) {
        let _ = self.pending_with_devices.set(pods);
    }

    /// How many pending pods use ResourceClaim `key` (those [`Volumes::pending_with_devices`]
    /// told, else every pending pod; one pass the first time asked).
    fn claim_users(&self, key: &ObjectKey) -> usize {
        let users = self.claim_users.get_or_init(|| {
            let pods = &self.snap.pods;
            let every: Vec<usize>;
            let list = match self.pending_with_devices.get() {
                Some(l) => l,
                None => {
                    every = (0..pods.len()).filter(|&p| pods[p].is_pending()).collect();
                    &every
                }
            };
            let mut users: HashMap<ObjectKey, usize> = HashMap::new();
            for &p in list {
                let pod = &pods[p];
                for rc in &pod.resource_claims {
                    if let ClaimName::Named(n) | ClaimName::Generated(n) = &rc.claim {
                        *users.entry(ObjectKey::new(pod.key.namespace.as_str(), n.as_str())).or_default() +=
                            1;
                    }
                }
            }
            users
        });
        users.get(key).copied().unwrap_or(0)
    }

    /// The claims the pending pods use, and those more than one of them uses, as [`quick_hash`]es
    /// (one pass over those pods, the first time a claim asks). The pods are those
    /// [`Volumes::pending`] told, else every pod is read.
    fn claims(&self) -> &(Vec<u64>, Vec<u64>) {
        self.claims.get_or_init(|| {
            let pods = &self.snap.pods;
            let told = self.pending.get();
            let every: Vec<usize>;
            let list = match told {
                Some(l) => l,
                None => {
                    every = (0..pods.len()).filter(|&p| pods[p].is_pending()).collect();
                    &every
                }
            };
            let (mut all, mut named) = (Vec::new(), Vec::new());
            for &p in list {
                let pod = &pods[p];
                for v in &pod.volumes {
                    if let PodVolume::Claim { claim, ephemeral } = v {
                        let h = quick_hash(&pod.key.namespace, claim);
                        all.push(h);
                        // An ephemeral claim is its pod's alone.
                        if !ephemeral {
                            named.push(h);
                        }
                    }
                }
            }
            all.sort_unstable();
            all.dedup();
            named.sort_unstable();
            let mut shared: Vec<u64> = named.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
            shared.dedup();
            (all, shared)
        })
    }

    /// What the pods of a run headed by pod `p` share as far as their volumes go (see
    /// [`Volumes::in_run`]): the nodes their volumes allow (`Some(None)`: every node); `None`
    /// when `p`'s depend on other placements (it is placed alone). Found once per run, not once
    /// per pod compared with its head.
    pub fn run_shape(&self, p: usize) -> Option<Option<Rc<[usize]>>> {
        if self.none(p) {
            return Some(None);
        }
        if self.dynamic(p) {
            return None;
        }
        Some(self.allowed(p))
    }

    /// Whether pod `q` may be placed in the run whose head's volumes are `shape`
    /// ([`Volumes::run_shape`]): neither depends on other placements, and their volumes allow
    /// the same nodes (one list, shared).
    pub fn in_run(&self, shape: &Option<Option<Rc<[usize]>>>, q: usize) -> bool {
        let Some(allowed) = shape else { return false };
        if self.none(q) {
            return allowed.is_none();
        }
        if self.dynamic(q) {
            return false;
        }
        match (allowed, self.allowed(q)) {
            (None, None) => true,
            (Some(a), Some(b)) => Rc::ptr_eq(a, &b),
            _ => false,
        }
    }

    /// Whether pod `p` asks nothing of volumes or devices.
    fn none(&self, p: usize) -> bool {
        let pod = &self.snap.pods[p];
        pod.volumes.is_empty() && pod.resource_claims.is_empty()
    }

    /// The volumes of the pods on nodes (one pass over the pods, the first time one is needed).
    fn on_nodes(&self) -> &OnNodes {
        self.on_nodes.get_or_init(|| {
            let mut out = OnNodes::default();
            for pod in &self.snap.pods {
                if pod.volumes.is_empty() || !pod.uses_node() {
                    continue;
                }
                let Some(n) = pod.node_name.as_deref().and_then(|name| self.node_of(name)) else { continue };
                for v in &pod.volumes {
                    match v {
                        PodVolume::Claim { claim, ephemeral } => {
                            let key = ObjectKey::new(pod.key.namespace.as_str(), claim.as_str());
                            let Some(c) = self.snap.storage.claims.get(&key) else { continue };
                            if !ephemeral && c.access_modes.contains(&AccessMode::ReadWriteOncePod) {
                                out.rwop.insert(key.clone(), pod.key.clone());
                            }
                            if let Some(a) = self.claim_attachable(&key, c).and_then(|a| self.resolve(&a, n))
                            {
                                out.attached.entry(n).or_default().insert(a);
                            }
                        }
                        PodVolume::Disk(d) => {
                            out.disks.entry(n).or_default().push(d.clone());
                            if let Some(a) = d.attachable().and_then(|a| self.resolve(&a, n)) {
                                out.attached.entry(n).or_default().insert(a);
                            }
                        }
                    }
                }
            }
            out
        })
    }

    /// What a node attaches for claim `c` (`getCSIDriverInfo`): its PV's volume, else (unbound,
    /// or its PV not found) a volume its class's provisioner would create.
    fn claim_attachable(&self, key: &ObjectKey, c: &Pvc) -> Option<Attachable> {
        let storage = &self.snap.storage;
        if let Some(pv) = c.volume_name.as_deref().and_then(|v| storage.volumes.get(v)) {
            return pv.attach.clone();
        }
        let class = storage.classes.get(c.class.as_deref()?)?;
        let handle = pending_handle(key);
        match csi_driver_of(&class.provisioner) {
            Some(driver) => {
                Some(Attachable { driver: driver.into(), handle, in_tree: Some(class.provisioner.clone()) })
            }
            None => Some(Attachable { driver: class.provisioner.clone(), handle, in_tree: None }),
        }
    }

    /// What node `n` attaches for `a`: an in-tree volume only where its plugin is migrated.
    fn resolve(&self, a: &Attachable, n: usize) -> Option<Attached> {
        if let Some(plugin) = &a.in_tree {
            let csi = self.csi_node(n)?;
            if !csi.migrated.contains(plugin) {
                return None;
            }
        }
        Some((a.driver.clone(), a.handle.clone()))
    }

    fn csi_node(&self, n: usize) -> Option<&CsiNode> {
        self.snap.storage.csi_nodes.get(self.snap.nodes[n].name.as_str())
    }

    /// Node `n`'s attach limit for `driver`: its CSINode's `allocatable.count`, else the node's
    /// `attachable-volumes-csi-<driver>` allocatable.
    fn limit(&self, n: usize, driver: &str) -> Option<i64> {
        if let Some(c) = self.csi_node(n).and_then(|c| c.limits.get(driver)) {
            return Some(*c);
        }
        let a = self.snap.nodes[n].allocatable.get(&format!("{ATTACH_PREFIX}{driver}"));
        (a > 0).then_some(a)
    }

    /// Reads pod `p`'s needs, in `spec.volumes` then `spec.resourceClaims` order; the first
    /// reason it must wait wins, as kube-scheduler's PreFilters return the first.
    fn read_needs(&self, p: usize) -> Needs {
        let pod = &self.snap.pods[p];
        let storage = &self.snap.storage;
        let ns = pod.key.namespace.as_str();
        let mut needs = Needs::default();
        let mut unbound: Vec<(i64, ObjectKey)> = Vec::new();
        // Whether an unbound claim's volume depends on other placements.
        let mut choices = false;
        let wait = |needs: &mut Needs, why: String| {
            needs.wait.get_or_insert(why);
        };
        for v in &pod.volumes {
            let (claim, ephemeral) = match v {
                PodVolume::Disk(d) => {
                    needs.disks.push(d.clone());
                    if self.limits {
                        needs.attach.extend(d.attachable());
                    }
                    continue;
                }
                PodVolume::Claim { claim, ephemeral } => (claim, *ephemeral),
            };
            let key = ObjectKey::new(ns, claim.as_str());
            let Some(c) = storage.claims.get(&key) else {
                if ephemeral {
                    wait(
                        &mut needs,
                        format!("waiting for the ephemeral volume controller to create PVC {key}"),
                    );
                } else {
                    wait(&mut needs, format!("PVC {key} does not exist"));
                }
                continue;
            };
            if c.lost {
                let pv = c.volume_name.as_deref().unwrap_or("");
                wait(&mut needs, format!("PVC {key} is Lost: its PV {pv} no longer exists"));
            }
            if c.deleting {
                wait(&mut needs, format!("PVC {key} is being deleted"));
            }
            if ephemeral && c.owner.as_deref() != Some(pod.uid.as_str()) {
                wait(
                    &mut needs,
                    format!("PVC {key} was not created for pod {} (the pod is not its owner)", pod.key),
                );
            }
            if !ephemeral && c.access_modes.contains(&AccessMode::ReadWriteOncePod) {
                match self.on_nodes().rwop.get(&key) {
                    Some(user) if user != &pod.key => {
                        wait(&mut needs, format!("PVC {key} is ReadWriteOncePod and pod {user} uses it"));
                    }
                    _ => needs.rwop.push(key.clone()),
                }
            }
            if self.limits {
                needs.attach.extend(self.claim_attachable(&key, c));
            }
            // Its PV, looked up once.
            let pv = c.volume_name.as_deref().and_then(|n| storage.volumes.get(n));
            if !ephemeral && let Some(pv) = pv {
                for zone in ZONE_LABELS {
                    if let Some(value) = pv.labels.get(zone) {
                        // `LabelZonesToSet`: several zones joined by `__`.
                        let values: BTreeSet<String> = value
                            .split("__")
                            .map(str::trim)
                            .filter(|z| !z.is_empty())
                            .map(String::from)
                            .collect();
                        needs.rules.push(Rule::Zone {
                            pv: pv.name.clone(),
                            key: zone.to_string(),
                            values: values.into_iter().collect(),
                        });
                    }
                }
            }
            if c.bound() {
                let name = c.volume_name.as_deref().unwrap_or_default();
                match pv {
                    None => {
                        wait(&mut needs, format!("PVC {key} is bound to PV {name}, which does not exist"))
                    }
                    Some(pv) => {
                        if pv.node_affinity.is_some() {
                            needs.rules.push(Rule::PvAffinity { pv: pv.name.clone() });
                        }
                    }
                }
                continue;
            }
            let class_name = c.class.as_deref();
            let class = class_name.and_then(|n| storage.classes.get(n));
            let delayed = class.is_some_and(|cl| cl.binding_mode == BindingMode::WaitForFirstConsumer);
            if !delayed || c.volume_name.is_some() {
                let why = match (c.volume_name.as_deref(), class_name, class) {
                    (Some(pv), _, _) => {
                        format!(
                            "PVC {key} is being bound to PV {pv} (waiting for the PV controller to finish)"
                        )
                    }
                    (None, None, _) => format!("PVC {key} is not bound and names no StorageClass"),
                    (None, Some(n), None) => {
                        format!("PVC {key} is not bound and its StorageClass {n} does not exist")
                    }
                    (None, Some(n), Some(_)) => {
                        format!("PVC {key} is not bound and its StorageClass {n} is Immediate")
                    }
                };
                wait(&mut needs, why);
                continue;
            }
            let rule = match c.selected_node.as_deref() {
                Some(node) => Rule::SelectedNode { claim: key.clone(), node: node.to_string() },
                None => {
                    // Most claims of a provisioning class have no static PV to look at.
                    if !self.may_bind_static(&key, c) || {
                        let cands = self.candidates(&key);
                        cands.prebound.is_none() && cands.pvs.is_empty()
                    } {
                        Rule::Provisionable { class: class_name.unwrap_or_default().to_string() }
                    } else {
                        // Which static PV it gets depends on what others took.
                        choices = true;
                        Rule::Bindable { claim: key.clone() }
                    }
                }
            };
            // A claim other pending pods use goes where the first of them is placed.
            choices |= !ephemeral && self.shared(&key);
            unbound.push((c.storage, key));
            needs.rules.push(rule);
        }
        for rc in &pod.resource_claims {
            let (name, owned) = match &rc.claim {
                ClaimName::NotNeeded => continue,
                ClaimName::NotCreated => {
                    wait(
                        &mut needs,
                        format!(
                            "the ResourceClaim of spec.resourceClaims[{}] is not created from its template yet",
                            rc.name
                        ),
                    );
                    continue;
                }
                ClaimName::Named(n) => (n, false),
                ClaimName::Generated(n) => (n, true),
            };
            let key = ObjectKey::new(ns, name.as_str());
            let Some(claim) = storage.resource_claims.get(&key) else {
                wait(&mut needs, format!("ResourceClaim {key} does not exist"));
                continue;
            };
            if claim.deleting {
                wait(&mut needs, format!("ResourceClaim {key} is being deleted"));
            }
            if owned && claim.owner.as_deref() != Some(pod.uid.as_str()) {
                wait(
                    &mut needs,
                    format!(
                        "ResourceClaim {key} was not created for pod {} (the pod is not its owner)",
                        pod.key
                    ),
                );
            }
            match &claim.allocation {
                None => {
                    if let Some(field) = &claim.ask.unsupported {
                        wait(
                            &mut needs,
                            format!(
                                "ResourceClaim {key} uses {field}, which gang-scheduler does not allocate"
                            ),
                        );
                    }
                    let classes = claim.ask.requests.iter().flat_map(|r| &r.alternatives).map(|a| &a.class);
                    for class in classes {
                        if !storage.device_classes.contains_key(class) {
                            wait(
                                &mut needs,
                                format!("DeviceClass {class} of ResourceClaim {key} does not exist"),
                            );
                        }
                    }
                    if !needs.allocate.contains(&key) {
                        needs.allocate.push(key.clone());
                    }
                    if self.claim_users(&key) > RESERVED_FOR_MAX && !needs.crowded.contains(&key) {
                        needs.crowded.push(key.clone());
                    }
                }
                Some(a) => {
                    let reserved = claim.reserved_for.iter().any(|u| u == pod.uid);
                    if !reserved
                        && claim.reserved_for.len().saturating_add(self.claim_users(&key)) > RESERVED_FOR_MAX
                        && !needs.crowded.contains(&key)
                    {
                        needs.crowded.push(key.clone());
                    }
                    if !reserved && claim.reserved_for.len() >= RESERVED_FOR_MAX {
                        wait(
                            &mut needs,
                            format!(
                                "ResourceClaim {key} is in use: reserved for {} consumers, the most it allows",
                                claim.reserved_for.len()
                            ),
                        );
                    }
                    if a.node_selector.is_some() {
                        needs.rules.push(Rule::Allocation { claim: key.clone() });
                    }
                    if !reserved && !needs.reserve.contains(&key) {
                        needs.reserve.push(key.clone());
                    }
                }
            }
        }
        unbound.sort();
        needs.unbound = unbound.into_iter().map(|(_, k)| k).collect();
        needs.dynamic = choices
            || !needs.allocate.is_empty()
            || !needs.crowded.is_empty()
            || !needs.rwop.is_empty()
            || !needs.disks.is_empty()
            || (self.limits && !needs.attach.is_empty());
        needs
    }

    /// Whether pod `p` may go to node `n` as far as what other placements took of volumes goes:
    /// what `txn` took, and what the cycle committed (`ledger`).
    pub fn fits(&self, p: usize, n: usize, ledger: &Ledger, txn: &Txn) -> Result<(), Block> {
        self.evaluate(p, n, ledger, txn).map(drop)
    }

    /// Records in `txn` what placing pod `p` on node `n` takes of volumes (it fits: see
    /// [`Volumes::fits`]).
    pub fn take(&self, p: usize, n: usize, ledger: &Ledger, txn: &mut Txn) {
        let Ok(bookings) = self.evaluate(p, n, ledger, txn) else {
            debug_assert!(false, "pod {p} taken on node {n} without fitting there");
            return;
        };
        if !self.notes.borrow().is_empty() {
            self.notes.borrow_mut().remove(&p);
        }
        for b in bookings {
            match b {
                Booking::Choose(claim, choice) => txn.volumes_mut().choose(claim, choice, p),
                Booking::Rwop(claim) => txn.volumes_mut().use_rwop(claim, p),
                Booking::Mount(disk) => txn.volumes_mut().mount(n, disk, p),
                Booking::Attach(a) => txn.volumes_mut().attach(n, a),
                Booking::Allocate(claim, a) => txn.volumes_mut().allocate(claim, a, p),
                Booking::Reserve(claim) => txn.volumes_mut().reserve(claim, p),
            }
        }
    }

    /// Remembers why pod `p` was refused every node it would otherwise fit, for its gang's message.
    pub fn note(&self, p: usize, block: Block) {
        self.notes.borrow_mut().insert(p, block);
    }

    /// Why pod `p` was last refused every node for a reason that depends on other placements.
    pub fn noted(&self, p: usize) -> Option<String> {
        let block = self.notes.borrow().get(&p).cloned()?;
        Some(self.describe(p, &block))
    }

    /// `block` in words, about pod `p`.
    pub fn describe(&self, p: usize, block: &Block) -> String {
        let pods = &self.snap.pods;
        let pod = &pods[p].key;
        match block {
            Block::NoVolume(claim) => format!(
                "PVC {claim} of pod {pod} finds no static PV left to bind on the nodes with room, and its class does not provision there"
            ),
            Block::Chosen(claim, q) => format!(
                "PVC {claim} of pod {pod} is shared with pod {}, placed in this cycle, whose node its volume is bound or provisioned for",
                pods[*q].key
            ),
            Block::Rwop(claim, q) => {
                format!(
                    "PVC {claim} is ReadWriteOncePod and pod {}, placed in this cycle, uses it",
                    pods[*q].key
                )
            }
            Block::Disk(Some(q)) => format!(
                "an inline disk of pod {pod} conflicts with one of pod {}, placed in this cycle on the node with room",
                pods[*q].key
            ),
            Block::Disk(None) => {
                format!("an inline disk of pod {pod} is mounted by other pods on the nodes with room")
            }
            Block::Limit(driver, limit) => format!(
                "the nodes with room for pod {pod} would exceed their limit of {limit} {driver} volume(s)"
            ),
            Block::Devices(claim, why) => format!("ResourceClaim {claim} of pod {pod}: {why}"),
            Block::Allocated(claim, q) => format!(
                "ResourceClaim {claim} of pod {pod} is shared with pod {}, placed in this cycle, whose devices the nodes with room cannot reach",
                pods[*q].key
            ),
        }
    }

    fn evaluate(&self, p: usize, n: usize, ledger: &Ledger, txn: &Txn) -> Result<Vec<Booking>, Block> {
        let needs = self.needs(p);
        if !needs.dynamic {
            return Ok(Vec::new());
        }
        let (here, committed) = (txn.volumes(), ledger.volumes());
        let storage = &self.snap.storage;
        let mut out = Vec::new();
        let mut chosen: Vec<String> = Vec::new();
        for claim in &needs.unbound {
            if let Some((choice, q)) = here.claim(claim).or_else(|| committed.claim(claim)) {
                let usable = match choice {
                    Choice::Pv(pv) => self.pv_allows(pv, n),
                    Choice::Provision(m) => *m == n,
                };
                if !usable {
                    return Err(Block::Chosen(claim.clone(), *q));
                }
                continue;
            }
            let Some(c) = storage.claims.get(claim) else { return Err(Block::NoVolume(claim.clone())) };
            if let Some(node) = c.selected_node.as_deref() {
                if self.snap.nodes[n].name != node {
                    return Err(Block::NoVolume(claim.clone()));
                }
                out.push(Booking::Choose(claim.clone(), Choice::Provision(n)));
                continue;
            }
            let cands = self.candidates(claim);
            let taken =
                |pv: &str| here.pv_taken(pv) || committed.pv_taken(pv) || chosen.iter().any(|c| c == pv);
            let pick: Option<&str> = match &cands.prebound {
                Some(pv) => Some(pv.as_str()).filter(|pv| self.pv_allows(pv, n) && !taken(pv)),
                None => {
                    let mut on: Vec<usize> = cands.by_node.get(&n).cloned().unwrap_or_default();
                    on.extend(cands.anywhere.iter().copied());
                    on.sort_unstable();
                    on.into_iter().map(|i| cands.pvs[i].as_str()).find(|pv| !taken(pv))
                }
            };
            match pick.map(str::to_string) {
                Some(pv) => {
                    chosen.push(pv.clone());
                    out.push(Booking::Choose(claim.clone(), Choice::Pv(pv)));
                }
                None if self.provisions_on(c.class.as_deref(), n) => {
                    out.push(Booking::Choose(claim.clone(), Choice::Provision(n)));
                }
                None => return Err(Block::NoVolume(claim.clone())),
            }
        }
        let mut devices: Vec<DeviceIx> = Vec::new();
        for claim in &needs.allocate {
            let node = &self.snap.nodes[n];
            if let Some((a, q)) = here.allocation(claim).or_else(|| committed.allocation(claim)) {
                if !Devices::serves(&a.node_selector, node) {
                    return Err(Block::Allocated(claim.clone(), *q));
                }
                continue;
            }
            let Some(c) = storage.resource_claims.get(claim) else {
                return Err(Block::Devices(claim.clone(), "it does not exist".into()));
            };
            let taken = |ix: DeviceIx| {
                if devices.contains(&ix) {
                    Taken::Own
                } else if here.device_taken(ix) {
                    Taken::Step
                } else if committed.device_taken(ix) {
                    Taken::Earlier
                } else {
                    Taken::Free
                }
            };
            let avoid: Vec<Avoid> = self
                .nogoods
                .borrow()
                .iter()
                .filter(|g| g.pod == p && g.node == n && g.claim == *claim)
                .map(|g| g.avoid.clone())
                .collect();
            match self.devices.allocate(c, node, &taken, &avoid) {
                Ok(a) => {
                    devices.extend(a.devices.iter().filter(|d| !d.2).map(|d| d.1));
                    out.push(Booking::Allocate(claim.clone(), a));
                }
                Err(Refusal::NoFit(why, contended)) => {
                    if contended {
                        self.contended.borrow_mut().insert(p);
                    }
                    return Err(Block::Devices(claim.clone(), why));
                }
                Err(Refusal::Error(why)) => return Err(Block::Devices(claim.clone(), why)),
            }
        }
        // A claim may be reserved for 256 consumers: with those the cycle added, counted.
        for claim in &needs.crowded {
            let Some(c) = storage.resource_claims.get(claim) else { continue };
            let mine = out.iter().any(|b| matches!(b, Booking::Allocate(k, _) if k == claim));
            // What the cycle committed and what this step added (a step's transaction may hold
            // some of what was committed: each pod once).
            let added = match (here.reserved(claim), committed.reserved(claim)) {
                (Some(a), Some(b)) => a.union(b).count(),
                (Some(a), None) | (None, Some(a)) => a.len(),
                (None, None) => 0,
            };
            if !mine && c.reserved_for.len().saturating_add(added) >= RESERVED_FOR_MAX {
                return Err(Block::Devices(
                    claim.clone(),
                    format!(
                        "it would be reserved for more than {RESERVED_FOR_MAX} consumers with the pods placed before it in this cycle, the most it allows"
                    ),
                ));
            }
            if !mine {
                out.push(Booking::Reserve(claim.clone()));
            }
        }
        for claim in &needs.rwop {
            if let Some(q) = here.rwop(claim).or_else(|| committed.rwop(claim)).filter(|&q| q != p) {
                return Err(Block::Rwop(claim.clone(), q));
            }
            out.push(Booking::Rwop(claim.clone()));
        }
        for disk in &needs.disks {
            if self.on_nodes().disks.get(&n).is_some_and(|ds| ds.iter().any(|d| disk.conflicts(d))) {
                return Err(Block::Disk(None));
            }
            for (d, q) in here.disks(n).iter().chain(committed.disks(n)) {
                if *q != p && disk.conflicts(d) {
                    return Err(Block::Disk(Some(*q)));
                }
            }
            out.push(Booking::Mount(disk.clone()));
        }
        if self.limits && !needs.attach.is_empty() {
            let new: BTreeSet<Attached> = needs.attach.iter().filter_map(|a| self.resolve(a, n)).collect();
            let drivers: BTreeSet<&str> = new.iter().map(|(d, _)| d.as_str()).collect();
            for driver in drivers {
                let Some(limit) = self.limit(n, driver) else { continue };
                let mut on: BTreeSet<&Attached> = BTreeSet::new();
                on.extend(
                    self.on_nodes().attached.get(&n).into_iter().flatten().filter(|(d, _)| d == driver),
                );
                on.extend(here.attached_on(n).chain(committed.attached_on(n)).filter(|(d, _)| d == driver));
                let adding = new.iter().filter(|a| a.0 == driver && !on.contains(a)).count();
                let count = i64::try_from(on.len() + adding).unwrap_or(i64::MAX);
                if count > limit {
                    return Err(Block::Limit(driver.to_string(), limit));
                }
            }
            out.extend(new.into_iter().map(Booking::Attach));
        }
        Ok(out)
    }

    /// The claims the pods of `bindings` need bound before they are bound: each unbound claim of
    /// theirs with the volume chosen for it (what `txn` took, or the cycle committed).
    pub fn work(&self, bindings: &[(usize, usize)], ledger: &Ledger, txn: &Txn) -> Vec<Work> {
        let mut out = Vec::new();
        for &(p, n) in bindings {
            let needs = self.needs(p);
            for claim in &needs.unbound {
                let choice = txn.volumes().claim(claim).or_else(|| ledger.volumes().claim(claim));
                let volume = match choice {
                    Some((Choice::Pv(pv), _)) => Some(pv.clone()),
                    _ => None,
                };
                out.push(Work { pod: p, node: n, claim: claim.clone(), todo: Todo::Volume(volume) });
            }
            for claim in &needs.allocate {
                let allocated =
                    txn.volumes().allocation(claim).or_else(|| ledger.volumes().allocation(claim));
                let Some((a, _)) = allocated else {
                    debug_assert!(false, "pod {p} placed without its claim {claim} allocated");
                    continue;
                };
                let allocation = self.allocation_of(claim, a);
                out.push(Work {
                    pod: p,
                    node: n,
                    claim: claim.clone(),
                    todo: Todo::Devices(Some(allocation)),
                });
            }
            for claim in &needs.reserve {
                out.push(Work { pod: p, node: n, claim: claim.clone(), todo: Todo::Devices(None) });
            }
        }
        out
    }

    /// The allocation result the claim's status is written with: the devices, the node selector,
    /// and the configuration for the driver — each class's (`FromClass`, for the requests that
    /// used it) then the claim's own (`FromClaim`), as upstream's allocator copies them.
    fn allocation_of(&self, key: &ObjectKey, a: &Allocated) -> DeviceAllocation {
        let storage = &self.snap.storage;
        let mut config = Vec::new();
        if let Some(claim) = storage.resource_claims.get(key) {
            for (class, requests) in Devices::classes_used(claim, a) {
                for c in storage.device_classes.get(&class).map_or(&[][..], |c| c.config.as_slice()) {
                    let mut entry = c.clone();
                    if let Some(m) = entry.as_object_mut() {
                        m.insert("source".into(), "FromClass".into());
                        m.insert("requests".into(), requests.iter().cloned().collect::<Vec<_>>().into());
                    }
                    config.push(entry);
                }
            }
            for c in &claim.ask.config {
                let mut entry = c.clone();
                if let Some(m) = entry.as_object_mut() {
                    m.insert("source".into(), "FromClaim".into());
                }
                config.push(entry);
            }
        }
        DeviceAllocation {
            devices: self.devices.results(a),
            node_selector: a.node_selector.as_deref().map(wire_selector),
            config,
        }
    }

    /// Whether the claim of `w` is being provisioned for its node already (the annotation is set).
    pub fn asked(&self, w: &Work) -> bool {
        let node = &self.snap.nodes[w.node].name;
        matches!(w.todo, Todo::Volume(None))
            && self.snap.storage.claims.get(&w.claim).and_then(|c| c.selected_node.as_deref())
                == Some(node.as_str())
    }

    /// `PVC ml/data-0 to PV local-3, PVC ml/scratch-1 provisioned for node n2 (asked), …`: what
    /// `work` binds, the first few claims named.
    pub fn describe_work(&self, work: &[Work]) -> String {
        const NAMED: usize = 4;
        // One claim shared by members is bound once, and named once.
        let mut seen: BTreeSet<&ObjectKey> = BTreeSet::new();
        let distinct: Vec<&Work> = work.iter().filter(|w| seen.insert(&w.claim)).collect();
        let mut each: Vec<String> = distinct
            .iter()
            .take(NAMED)
            .map(|w| match &w.todo {
                Todo::Devices(Some(a)) => format!(
                    "ResourceClaim {} allocated {} device(s) for node {}",
                    w.claim,
                    a.devices.len(),
                    self.snap.nodes[w.node].name
                ),
                Todo::Devices(None) => format!("ResourceClaim {} reserved", w.claim),
                Todo::Volume(Some(pv)) => format!("PVC {} to PV {pv}", w.claim),
                Todo::Volume(None) if self.asked(w) => {
                    format!("PVC {} being provisioned for node {}", w.claim, self.snap.nodes[w.node].name)
                }
                Todo::Volume(None) => {
                    format!("PVC {} to be provisioned for node {}", w.claim, self.snap.nodes[w.node].name)
                }
            })
            .collect();
        if distinct.len() > NAMED {
            each.push(format!("and {} more", distinct.len() - NAMED));
        }
        each.join(", ")
    }
}

/// A node selector as the API writes it.
fn wire_selector(terms: &[NodeSelectorTerm]) -> serde_json::Value {
    let requirements = |rs: &[crate::read::model::NodeSelectorRequirement]| -> Vec<serde_json::Value> {
        rs.iter()
            .map(|r| {
                let operator = match r.operator {
                    NodeSelectorOperator::In => "In",
                    NodeSelectorOperator::NotIn => "NotIn",
                    NodeSelectorOperator::Exists => "Exists",
                    NodeSelectorOperator::DoesNotExist => "DoesNotExist",
                    NodeSelectorOperator::Gt => "Gt",
                    NodeSelectorOperator::Lt => "Lt",
                };
                let mut out = serde_json::json!({"key": r.key, "operator": operator});
                if !r.values.is_empty() {
                    out["values"] = r.values.clone().into();
                }
                out
            })
            .collect()
    };
    let terms: Vec<serde_json::Value> = terms
        .iter()
        .map(|t| {
            let mut out = serde_json::Map::new();
            if !t.match_expressions.is_empty() {
                out.insert("matchExpressions".into(), requirements(&t.match_expressions).into());
            }
            if !t.match_fields.is_empty() {
                out.insert("matchFields".into(), requirements(&t.match_fields).into());
            }
            serde_json::Value::Object(out)
        })
        .collect();
    serde_json::json!({ "nodeSelectorTerms": terms })
}

/// The allocatable a node once stated its attach limit per CSI driver in (kube-scheduler still
/// reads it where the CSINode states none).
const ATTACH_PREFIX: &str = "attachable-volumes-csi-";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::resources::Resources;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            name: name.into(),
            allocatable: Resources::new(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        }
    }

    #[test]
    fn the_label_index_finds_every_node_of_a_value_and_only_those() {
        let nodes = vec![
            node("a", &[("rack", "r1")]),
            node("b", &[("rack", "r2")]),
            node("c", &[]),
            node("d", &[("rack", "r1")]),
            node("e", &[("zone", "r1")]),
        ];
        let index = LabelIndex::new(&nodes, "rack");
        assert_eq!(index.nodes(&nodes, "rack", "r1").collect::<Vec<_>>(), [0, 3]);
        assert_eq!(index.nodes(&nodes, "rack", "r2").collect::<Vec<_>>(), [1]);
        assert_eq!(index.nodes(&nodes, "rack", "r3").count(), 0);
        assert_eq!(index.nodes(&nodes, "rack", "").count(), 0);
    }

    #[test]
    fn a_hash_shared_by_two_values_returns_only_the_asked_ones_nodes() {
        let nodes = vec![node("a", &[("k", "x")]), node("b", &[("k", "y")])];
        // Both values under one hash, as a collision would put them.
        let index = LabelIndex(vec![(7, 0), (7, 1)]);
        let found = |v: &str| {
            let h = value_hash(v);
            let index = LabelIndex(index.0.iter().map(|&(_, n)| (h, n)).collect());
            index.nodes(&nodes, "k", v).collect::<Vec<_>>()
        };
        assert_eq!(found("x"), [0]);
        assert_eq!(found("y"), [1]);
    }
}
