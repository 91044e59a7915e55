//! The capacity ledger: free capacity per node in a dense form, and cheap tentative changes
//! ([`Txn`]). What does not depend on capacity (readiness, taints, selectors, affinity) is in
//! [`super::filter`].
//!
//! Resource names are interned once per cycle, so a node's free capacity is a short `Vec<i64>` and a
//! fit check is a loop over a handful of integers. Tentative placements never copy the cluster: a
//! [`Txn`] records only the nodes it touched and is either committed or dropped.

use std::collections::{BTreeMap, HashMap};

use super::booked::{self, Booked};
use crate::read::model::{Node, NodeUsage, Pod};
use crate::read::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources};

/// The resource a node's free DRA devices are counted as, and a pod's at-least need of them: a
/// name no real resource can have, read in messages ("have too little free DRA devices").
pub(crate) const DEVICES: &str = "DRA devices";

/// Interned resource names for one cycle.
#[derive(Debug, Default)]
pub(crate) struct ResourceIndex {
    pub names: Vec<String>,
    index: HashMap<String, usize>,
}

impl ResourceIndex {
    pub fn intern(&mut self, name: &str) -> usize {
        // A cluster has a handful of resource names: comparing them beats hashing every request.
        if self.names.len() <= 16 {
            if let Some(i) = self.names.iter().position(|n| n == name) {
                return i;
            }
        } else if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), self.names.len() - 1);
        self.names.len() - 1
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// The index of `name`, if interned.
    pub fn find(&self, name: &str) -> Option<usize> {
        if self.names.len() <= 16 {
            self.names.iter().position(|n| n == name)
        } else {
            self.index.get(name).copied()
        }
    }

    /// A pod's positive requests as a [`Demand`], interning their names.
    pub fn demand(&mut self, requests: &Resources) -> Demand {
        let mut d: Vec<(usize, i64)> =
            requests.iter().filter(|(_, a)| *a > 0).map(|(n, a)| (self.intern(n), a)).collect();
        d.sort_by(|a, b| self.scarcity(a.0).cmp(&self.scarcity(b.0)));
        Demand(d)
    }

    /// A pod's positive requests as a [`Demand`], leaving out names never interned: what a pod
    /// already on a node gives back when it leaves (no node offers the others, so no node's free
    /// capacity counts them).
    pub fn known_demand(&self, requests: &Resources) -> Demand {
        let mut d: Vec<(usize, i64)> = requests
            .iter()
            .filter(|(_, a)| *a > 0)
            .filter_map(|(n, a)| self.find(n).map(|r| (r, a)))
            .collect();
        d.sort_by(|a, b| self.scarcity(a.0).cmp(&self.scarcity(b.0)));
        Demand(d)
    }

    /// Scarcity rank used by bin-packing: extended resources (GPUs, RDMA, …) first, then cpu,
    /// memory, ephemeral storage. Lower is scarcer.
    pub fn scarcity(&self, i: usize) -> (u8, &str) {
        let name = self.names[i].as_str();
        let rank = match name {
            CPU => 1,
            MEMORY => 2,
            EPHEMERAL_STORAGE => 3,
            n if n.starts_with("hugepages-") => 3,
            _ => 0,
        };
        (rank, name)
    }
}

/// A request as a sparse list of (resource index, amount), sorted scarcest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Demand(pub Vec<(usize, i64)>);

/// Every pod's [`Demand`], by pod index (`demands[p]`): pending pods demand what they request,
/// the others nothing (only pending pods are placed). Pods that follow one another with the same
/// requests (a workload's replicas) share one entry, so a cycle reads each shape once. Pods never
/// read ([`Demands::read`]) demand nothing, and cost nothing: a cycle reads the pending pods, not
/// every pod of the cluster.
#[derive(Debug)]
pub(crate) struct Demands {
    /// The distinct demands; the first is the empty one.
    table: Vec<Demand>,
    /// Pod index → its entry in `table` (zeroed memory: untouched entries cost no page).
    of: Vec<u32>,
    /// The last pending pod read, its DRA devices, and its entry.
    last: Option<(usize, i64, u32)>,
}

impl Demands {
    /// No pod's demand read yet, for `pods` pods.
    pub fn new(pods: usize) -> Self {
        Demands { table: vec![Demand::default()], of: vec![0; pods], last: None }
    }

    /// Reads the demand of `pods[p]`; pods are read in increasing index order, each at most once.
    /// `devices`: how many DRA devices local to its node it needs at least, counted as the
    /// resource [`DEVICES`] (see [`super::devices::Capacity`]).
    pub fn read(&mut self, pods: &[Pod], p: usize, res: &mut ResourceIndex, devices: i64) {
        let pod = &pods[p];
        let entry = match self.last {
            _ if !pod.is_pending() => 0,
            Some((q, d, entry)) if d == devices && pods[q].requests == pod.requests => entry,
            _ => {
                let mut demand = res.demand(&pod.requests);
                if devices > 0 {
                    demand.0.insert(0, (res.intern(DEVICES), devices));
                }
                self.table.push(demand);
                u32::try_from(self.table.len() - 1).unwrap_or(u32::MAX)
            }
        };
        if entry != 0 {
            self.last = Some((p, devices, entry));
        }
        if let Some(slot) = self.of.get_mut(p) {
            *slot = entry;
        }
    }

    /// Whether pods `p` and `q` demand the same.
    pub fn same(&self, p: usize, q: usize) -> bool {
        self.of[p] == self.of[q] || self[p] == self[q]
    }
}

impl std::ops::Index<usize> for Demands {
    type Output = Demand;

    fn index(&self, p: usize) -> &Demand {
        &self.table[self.of[p] as usize]
    }
}

/// Free capacity of every node, and its pod slots: the cycle's capacity ledger.
#[derive(Clone, Debug)]
pub(crate) struct Ledger {
    /// Bumped by every commit: what was computed from this state is valid while it is unchanged.
    pub version: u64,
    width: usize,
    free: Vec<i64>,
    pods: Vec<i64>,
    /// Every node changed since the state was built, in order: what is derived from the state
    /// (the placer's per-class node orders) catches up by replaying the part it has not seen.
    log: Vec<usize>,
    /// What the placements committed took of volumes (see [`Booked`]).
    volumes: Booked,
}

impl Ledger {
    #[cfg(test)]
    pub fn new(nodes: &[Node], res: &mut ResourceIndex) -> Self {
        Self::with_devices(nodes, res, &[])
    }

    /// [`Ledger::new`], with each node's free DRA devices as the resource [`DEVICES`] (`devices`
    /// indexed like `nodes`; empty: no node has any).
    pub fn with_devices(nodes: &[Node], res: &mut ResourceIndex, devices: &[i64]) -> Self {
        let dra = (!devices.is_empty()).then(|| res.intern(DEVICES));
        for n in nodes {
            for (name, _) in n.allocatable.iter() {
                if name != PODS {
                    res.intern(name);
                }
            }
        }
        let width = res.len();
        let mut free = vec![0; nodes.len() * width];
        let mut pods = vec![0; nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            for (name, amount) in n.allocatable.iter() {
                if name == PODS {
                    pods[i] = amount;
                } else {
                    let r = res.intern(name);
                    free[i * width + r] = amount;
                }
            }
        }
        if let Some(r) = dra {
            for (i, &d) in devices.iter().enumerate().take(nodes.len()) {
                free[i * width + r] = d;
            }
        }
        Ledger { version: 0, width, free, pods, log: Vec::new(), volumes: Booked::default() }
    }

    fn amount(&self, node: usize, r: usize) -> i64 {
        if r < self.width { self.free[node * self.width + r] } else { 0 }
    }

    /// Takes (or, with `sign = -1`, returns) a pod's demand on a node. May go negative: pods bound
    /// by others can overcommit a node, and the cycle must see that as "no room", not panic.
    pub fn apply(&mut self, node: usize, d: &Demand, sign: i64) {
        for &(r, a) in &d.0 {
            if r < self.width {
                let slot = &mut self.free[node * self.width + r];
                *slot = slot.saturating_sub(a.saturating_mul(sign));
            }
        }
        self.pods[node] = self.pods[node].saturating_sub(sign);
        self.log.push(node);
    }

    /// Takes what the pods on `node` use between them ([`NodeUsage`]): the same free capacity as
    /// taking each pod's demand in turn (amounts are positive, so saturating one by one ends
    /// where the exact sum, clamped, does). Not logged: nothing is derived from the state yet.
    pub fn take_usage(&mut self, node: usize, used: &NodeUsage, res: &ResourceIndex) {
        let less = |have: i64, used: i128| i64::try_from(i128::from(have) - used).unwrap_or(i64::MIN);
        for (name, amount) in &used.requests {
            if let Some(r) = res.find(name).filter(|&r| r < self.width) {
                let slot = &mut self.free[node * self.width + r];
                *slot = less(*slot, *amount);
            }
        }
        self.pods[node] = less(self.pods[node], used.pods);
    }

    /// The nodes changed so far, oldest first (see `log`).
    pub fn log(&self) -> &[usize] {
        &self.log
    }

    /// What the placements committed took of volumes.
    pub fn volumes(&self) -> &Booked {
        &self.volumes
    }

    pub fn commit(&mut self, txn: Txn) {
        if !txn.changes.is_empty() || txn.volumes.is_some() {
            self.version += 1;
        }
        if let Some(taken) = txn.volumes {
            self.volumes.absorb(*taken);
        }
        for (node, (free, pods)) in txn.changes {
            for (r, a) in free.into_iter().enumerate() {
                if r < self.width {
                    self.free[node * self.width + r] = a;
                }
            }
            self.pods[node] = pods;
            self.log.push(node);
        }
    }

    /// Free amount of resource `r` on `node` (as seen through `txn`).
    /// What `node` has left through `txn`: free amount by resource index (an index past the end
    /// has none) and free pod slots, found with one look at `txn`.
    pub fn left<'s>(&'s self, txn: &'s Txn, node: usize) -> (&'s [i64], i64) {
        match txn.changes.get(&node) {
            Some((free, pods)) => (free, *pods),
            None => {
                (self.free.get(node * self.width..(node + 1) * self.width).unwrap_or(&[]), self.pods[node])
            }
        }
    }

    pub fn free(&self, txn: &Txn, node: usize, r: usize) -> i64 {
        match txn.changes.get(&node) {
            Some((free, _)) => free.get(r).copied().unwrap_or(0),
            None => self.amount(node, r),
        }
    }

    pub fn free_pods(&self, txn: &Txn, node: usize) -> i64 {
        match txn.changes.get(&node) {
            Some((_, pods)) => *pods,
            None => self.pods[node],
        }
    }

    /// Whether `d` fits on `node` now; else the first resource short (`None` index = pod slots).
    pub fn fits(&self, txn: &Txn, node: usize, d: &Demand) -> Result<(), Option<usize>> {
        let (free, pods) = self.left(txn, node);
        if pods < 1 {
            return Err(None);
        }
        for &(r, a) in &d.0 {
            if a > 0 && free.get(r).copied().unwrap_or(0) < a {
                return Err(Some(r));
            }
        }
        Ok(())
    }

    /// Places `d` on `node` inside `txn`.
    pub fn take(&self, txn: &mut Txn, node: usize, d: &Demand) {
        self.change(txn, node, d, 1);
    }

    /// Places `d` on `node` `times` times inside `txn`, each of which fits: the same as `times`
    /// calls of [`Ledger::take`] (no amount reaches a bound, so none saturates), in one change.
    pub fn take_times(&self, txn: &mut Txn, node: usize, d: &Demand, times: i64) {
        self.change(txn, node, d, times);
    }

    /// Gives `d` back on `node` inside `txn` (a victim leaving, a reservation released).
    pub fn give(&self, txn: &mut Txn, node: usize, d: &Demand) {
        self.change(txn, node, d, -1);
    }

    /// Takes `d` from `node`, `sign` times (negative: gives it back).
    fn change(&self, txn: &mut Txn, node: usize, d: &Demand, sign: i64) {
        let width = self.width;
        let entry = txn.changes.entry(node).or_insert_with(|| {
            let free = (0..width).map(|r| self.free[node * width + r]).collect();
            (free, self.pods[node])
        });
        for &(r, a) in &d.0 {
            if let Some(slot) = entry.0.get_mut(r) {
                *slot = slot.saturating_sub(a.saturating_mul(sign));
            }
        }
        entry.1 = entry.1.saturating_sub(sign);
    }
}

/// Tentative changes to a [`Ledger`]: only the nodes touched, so trying a gang costs what the gang
/// touches, not what the cluster holds.
#[derive(Clone, Debug, Default)]
pub(crate) struct Txn {
    changes: BTreeMap<usize, (Vec<i64>, i64)>,
    /// What the placements in it took of volumes; none until one takes some (most never do, and
    /// transactions are cloned for every trial).
    volumes: Option<Box<Booked>>,
}

impl Txn {
    /// Applies `other` on top of this one (a nested attempt that succeeded).
    pub fn absorb(&mut self, other: Txn) {
        self.changes.extend(other.changes);
        if let Some(taken) = other.volumes {
            self.volumes_mut().absorb(*taken);
        }
    }

    /// What the placements in it took of volumes.
    pub fn volumes(&self) -> &Booked {
        self.volumes.as_deref().unwrap_or(&booked::NOTHING)
    }

    /// What the placements in it took of volumes, to add to.
    pub fn volumes_mut(&mut self) -> &mut Booked {
        self.volumes.get_or_insert_with(Box::default)
    }

    /// Whether the transaction changed `node`.
    pub fn touches(&self, node: usize) -> bool {
        self.changes.contains_key(&node)
    }

    /// The nodes the transaction changed.
    pub fn touched(&self) -> impl Iterator<Item = usize> + '_ {
        self.changes.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> Node {
        Node {
            name: name.into(),
            allocatable: Resources::new().with("cpu", 4000).with("pods", 2),
            labels: [("zone".to_string(), "a".to_string()), ("gen".to_string(), "5".to_string())].into(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        }
    }

    #[test]
    fn txn_changes_only_what_it_touches_until_committed() {
        let mut res = ResourceIndex::default();
        let mut state = Ledger::new(&[node("a"), node("b")], &mut res);
        let cpu = res.intern("cpu");
        let d = Demand(vec![(cpu, 3000)]);
        let mut txn = Txn::default();
        assert_eq!(state.fits(&txn, 0, &d), Ok(()));
        state.take(&mut txn, 0, &d);
        assert_eq!(state.fits(&txn, 0, &d), Err(Some(cpu)));
        assert_eq!(state.free(&Txn::default(), 0, cpu), 4000, "base untouched before commit");
        state.commit(txn);
        assert_eq!(state.free(&Txn::default(), 0, cpu), 1000);
        assert_eq!(state.free_pods(&Txn::default(), 0), 1);
    }

    #[test]
    fn taking_a_demand_n_times_at_once_is_taking_it_n_times() {
        let mut res = ResourceIndex::default();
        let state = Ledger::new(&[node("a")], &mut res);
        let d = Demand(vec![(res.intern("cpu"), 1500)]);
        let (mut once, mut each) = (Txn::default(), Txn::default());
        state.take_times(&mut once, 0, &d, 2);
        state.take(&mut each, 0, &d);
        state.take(&mut each, 0, &d);
        assert_eq!(state.free(&once, 0, 0), 1000);
        assert_eq!(state.free(&once, 0, 0), state.free(&each, 0, 0));
        assert_eq!(state.free_pods(&once, 0), 0);
        assert_eq!(state.fits(&once, 0, &d), state.fits(&each, 0, &d));
    }

    fn pod(name: &str, cpu: i64, node: Option<&str>) -> Pod {
        use crate::read::model::{ObjectKey, PodPhase, PreemptionPolicy, Time};
        Pod {
            key: ObjectKey::new("ns", name),
            uid: name.into(),
            requests: Resources::new().with("cpu", cpu),
            node_selector: Default::default(),
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
            gang: None,
            failure: None,
            scheduling_gates: Vec::new(),
            labels: Default::default(),
            exclusive_topology: None,
            persisted: None,
            terms: None,
            volumes: Vec::new(),
            resource_claims: Vec::new(),
            started: None,
            time_limit: None,
        }
    }

    #[test]
    fn pending_pods_alike_share_one_demand_and_others_demand_nothing() {
        let pods = [
            pod("a", 100, None),
            pod("b", 100, None),
            pod("c", 100, Some("n")),
            pod("d", 100, None),
            pod("e", 200, None),
        ];
        let mut res = ResourceIndex::default();
        let mut demands = Demands::new(pods.len());
        for p in 0..pods.len() {
            demands.read(&pods, p, &mut res, 0);
        }
        let cpu = res.find("cpu").unwrap_or(usize::MAX);
        assert_eq!(demands[0], Demand(vec![(cpu, 100)]));
        assert_eq!(demands[2], Demand::default(), "a bound pod demands nothing");
        assert!(demands.same(0, 1) && demands.same(1, 3), "alike across a bound pod");
        assert_eq!(demands.of[3], demands.of[0], "one entry for the run");
        assert!(!demands.same(3, 4));
        assert_eq!(demands[4], Demand(vec![(cpu, 200)]));
    }

    #[test]
    fn pod_slots_run_out() {
        let mut res = ResourceIndex::default();
        let state = Ledger::new(&[node("a")], &mut res);
        let d = Demand::default();
        let mut txn = Txn::default();
        state.take(&mut txn, 0, &d);
        state.take(&mut txn, 0, &d);
        assert_eq!(state.fits(&txn, 0, &d), Err(None));
    }
}
