//! The scheduling cycle: `schedule(snapshot, config, now) -> plan`. Pure and deterministic.
//!
//! One cycle is a chain of values, each step a function of what the steps before it returned:
//! 1. **Index** the snapshot: resource names; in one pass over the open pods ([`scan_pods`]:
//!    pending or naming a gang, as the snapshot's [`Usage`] lists them) the demand of every
//!    pending pod (replicas alike share one), each pod's gang and the pods of ours outside any
//!    gang; and the capacity
//!    [`ledger`] — free capacity per node (every pod that uses a node counts, whoever bound it:
//!    the snapshot's [`Usage`] carries the sum) and `NonStrict` reservations carried over.
//! 2. **Count** each gang's [`members`] and its priority.
//! 3. **Order** the work ([`order`]): gangs (and pods of ours outside any gang, as gangs of one)
//!    by priority, then gangs already partly running, then creation time, then key — a total
//!    order — and the gang groups decided together.
//! 4. **Decide each gang in one step** ([`lifecycle`]): invalid, completed, failed,
//!    degraded/stale, waiting for members, backing off — or a placement of the whole gang (its
//!    gang group included, see [`place`]) on a tentative [`ledger::Txn`], committed only if the
//!    tree is satisfied. With backfill on, a gang's first placement is its minimum, and members
//!    beyond a satisfied gang's minimum are placed last, after every gang's minimum. A failed attempt may preempt ([`preempt`]), reserve (`NonStrict`), or
//!    time out, and is explained ([`explain`]) down to nodes and domains. Each step returns a
//!    [`decision::Decision`]; the cycle commits it to the ledger before the next.
//! 5. **Assemble** the [`Plan`] from the decisions ([`decision::assemble`]).
//! 6. **Ask** the cluster autoscaler, when the policy says so, for the members of unplaceable
//!    gangs that have no room ([`crate::decide::provision::asks`]).

mod backfill;
mod booked;
mod cache;
mod decision;
mod devices;
mod exclusive;
mod explain;
mod filter;
mod joint;
mod ledger;
mod lifecycle;
mod members;
mod order;
mod place;
mod preempt;
mod volumes;

use std::cell::OnceCell;
use std::collections::HashMap;

use crate::decide::config::Config;
use crate::decide::plan::Plan;
use crate::read::model::{GangKey, GangMode, Pod, Usage};
use crate::read::model::{Snapshot, Time};
use ledger::{Demands, Ledger, ResourceIndex};
use members::Members;

/// One scheduling cycle. Pure and deterministic: the same snapshot, config and `now` always give
/// the same plan.
pub fn schedule(snapshot: &Snapshot, config: &Config, now: Time) -> Plan {
    cycle(snapshot, config, now, true).0
}

/// What a cycle counted beside its plan, for benchmarks and tests that bound its cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// DRA selector expressions run through the CEL interpreter (each at most once per selector
    /// and device).
    pub selector_evaluations: u64,
}

/// [`schedule`], with what the cycle counted.
pub fn schedule_with_stats(snapshot: &Snapshot, config: &Config, now: Time) -> (Plan, Stats) {
    cycle(snapshot, config, now, true)
}

/// The same cycle without its shortcuts: every member's nodes scanned afresh (no per-class node
/// order), every topology domain placed (no bound-based pruning), every pod read and its usage
/// added up one by one (the snapshot's [`Usage`] ignored), and pods outside any gang placed one at
/// a time. Slow; it exists so tests can hold [`schedule`]
/// to it — the shortcuts must never change a plan.
#[doc(hidden)]
pub fn schedule_reference(snapshot: &Snapshot, config: &Config, now: Time) -> Plan {
    cycle(snapshot, config, now, false).0
}

/// What the cycle reads before deciding anything (steps 1 and 2), in three parts a step takes
/// as it needs them: what it was given, what it derived about the pods and nodes, and what it
/// counted of each gang. None of it changes while gangs are decided; what does (the ledger, the
/// pods evicted) travels beside it.
#[derive(Debug)]
struct Facts<'a> {
    input: Input<'a>,
    pods: PodFacts<'a>,
    gangs: GangFacts<'a>,
}

/// What the cycle was given.
#[derive(Debug)]
struct Input<'a> {
    snap: &'a Snapshot,
    config: &'a Config,
    now: Time,
}

/// The pods and nodes, indexed for the cycle.
#[derive(Debug)]
struct PodFacts<'a> {
    pods: &'a [Pod],
    res: ResourceIndex,
    /// Pod index → its demand (empty for pods that are not pending: only those are placed).
    demand: Demands,
    node_index: NodeIndex<'a>,
    /// Pod index → reserved node, for `NonStrict` reservations in effect.
    reserved: HashMap<usize, usize>,
    /// Whether the inter-pod filters may keep any pod off a node (see `PodScan::inter_pod`).
    inter_pod: bool,
    /// What preemption asks of every pod, built on a cycle's first preemption only (a cycle that
    /// preempts nothing costs what is pending).
    places: OnceCell<Places>,
}

/// Every pod's place, for preemption.
#[derive(Debug)]
struct Places {
    /// Pod index → the node it names (if the snapshot has it) and whether it is a member of a
    /// gang in the snapshot.
    at: Vec<(Option<usize>, bool)>,
    /// The pods outside any gang that name a node, lowest priority first: a preemptor of priority
    /// `q` looks only at the prefix below `q`, not at every pod (when nothing ranks below it, at
    /// none).
    singles: Vec<usize>,
    /// Gang indices, lowest priority first (the same for gangs).
    gangs: Vec<usize>,
}

/// Each gang of the snapshot, counted (indexed like `snap.gangs`).
#[derive(Debug)]
struct GangFacts<'a> {
    gang_index: HashMap<&'a GangKey, usize>,
    /// Gang index → its members.
    members: Vec<Members>,
    /// Gang index → its priority: its own, else its highest member's.
    priorities: Vec<i32>,
    /// Gang index → the state it starts the cycle in ([`members::states`]).
    states: Vec<crate::read::model::GangState>,
}

impl PodFacts<'_> {
    /// See [`PodFacts::places`]; `members` says which pods belong to a gang, `priorities` each
    /// gang's priority.
    fn places(&self, members: &[Members], priorities: &[i32]) -> &Places {
        self.places.get_or_init(|| {
            let mut at: Vec<(Option<usize>, bool)> = self
                .pods
                .iter()
                .map(|p| (p.node_name.as_deref().and_then(|n| self.node_index.get(n).copied()), false))
                .collect();
            for m in members {
                for &p in &m.all {
                    at[p].1 = true;
                }
            }
            let mut singles: Vec<usize> =
                (0..self.pods.len()).filter(|&p| !at[p].1 && at[p].0.is_some()).collect();
            singles.sort_by_key(|&p| self.pods[p].priority);
            let mut gangs: Vec<usize> = (0..priorities.len()).collect();
            gangs.sort_by_key(|&g| priorities[g]);
            Places { at, singles, gangs }
        })
    }

    /// Whether pods `p` and `q` are placed alike: `q` is `p`, or neither has a node of its own
    /// to prefer (nominated or reserved) and both have one demand and one set of constraints —
    /// one namespace and labels too, when the inter-pod filters are about (the anti-affinity of
    /// pods placed may select them). Their volumes are the placer's to compare
    /// ([`volumes::Volumes::in_run`]).
    /// `p_jobset`: whether `p` is a JobSet pod ([`exclusive::is_jobset_pod`]), found once for the
    /// run `p` heads rather than once per pod compared with it.
    fn alike(&self, p: usize, p_jobset: bool, q: usize) -> bool {
        let (a, b) = (&self.pods[p], &self.pods[q]);
        p == q
            || (a.nominated_node.is_none()
                && b.nominated_node.is_none()
                && !self.reserved.contains_key(&p)
                && !self.reserved.contains_key(&q)
                && self.demand.same(p, q)
                && a.node_selector == b.node_selector
                && a.affinity == b.affinity
                && a.tolerations == b.tolerations
                && a.terms == b.terms
                && (!self.inter_pod || (a.key.namespace == b.key.namespace && a.labels == b.labels))
                && same_jobset_side(a, p_jobset, b))
    }
}

/// Pods of other shapes in a row a run of alike pods goes on past (see [`place::Placer::singles_resumed`]):
/// beyond them the run ends, so forming runs costs at most this many looks ahead per run.
const MAX_BETWEEN: usize = 8;

/// Whether JobSet's exclusive placement sees `a` (a JobSet pod when `a_jobset`) and `b` alike:
/// neither a JobSet pod, or both of one child Job and priority (the domains exclusive child Jobs
/// hold keep out other Jobs' pods). Both sides count: a JobSet pod after a plain one is not alike.
fn same_jobset_side(a: &Pod, a_jobset: bool, b: &Pod) -> bool {
    match (a_jobset, exclusive::is_jobset_pod(b)) {
        (false, false) => true,
        (true, true) => {
            exclusive::job_of(a) == exclusive::job_of(b)
                && exclusive::priority_of(a) == exclusive::priority_of(b)
        }
        _ => false,
    }
}

/// A word-at-a-time hash (rustc's Fx: rotate, xor, multiply) for label values and node names:
/// several times cheaper than SipHash on short strings, and the cycle's own tables are no one's
/// to attack (their keys are the nodes' names and labels, the cluster admin's).
#[derive(Default)]
pub(super) struct Fx(u64);

impl Fx {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(c);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }
    fn write_u8(&mut self, b: u8) {
        self.add(u64::from(b));
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

/// Pod index → a value of the cycle's (the nodes a pod may use, what it asks of volumes), for
/// the few pods a cycle asks about among all the snapshot's: a zeroed index (untouched entries
/// cost no page, dropping it visits none) into the values set.
#[derive(Debug)]
pub(super) struct PodSlots<T> {
    of: Vec<u32>,
    values: Vec<T>,
}

impl<T> PodSlots<T> {
    pub fn new() -> Self {
        PodSlots { of: Vec::new(), values: Vec::new() }
    }

    pub fn get(&self, p: usize) -> Option<&T> {
        let at = *self.of.get(p)?;
        at.checked_sub(1).and_then(|at| self.values.get(at as usize))
    }

    /// Sets pod `p`'s value (`pods`: how many the snapshot has; `p` beyond them is not kept).
    pub fn set(&mut self, p: usize, pods: usize, value: T) {
        if self.of.is_empty() {
            self.of = vec![0; pods];
        }
        let Some(slot) = self.of.get_mut(p) else { return };
        match slot.checked_sub(1) {
            Some(at) => self.values[at as usize] = value,
            None => {
                self.values.push(value);
                *slot = u32::try_from(self.values.len()).unwrap_or(u32::MAX);
            }
        }
    }
}

/// Node name → index in [`Snapshot::nodes`], made once a cycle and shared by its parts.
pub(super) type NodeIndex<'a> = std::rc::Rc<HashMap<&'a str, usize, std::hash::BuildHasherDefault<Fx>>>;

fn cycle(snap: &Snapshot, config: &Config, now: Time, fast: bool) -> (Plan, Stats) {
    // 1. Index.
    let mut res = ResourceIndex::default();
    let node_index: NodeIndex<'_> =
        std::rc::Rc::new(snap.nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect());
    // The DRA device table, built once: the free devices each node counts, then the allocator's.
    let device_table = devices::Devices::new(snap);
    let devices = devices::Capacity::of(&device_table, &node_index);
    let mut ledger = Ledger::with_devices(&snap.nodes, &mut res, &devices.nodes);
    let gang_index: HashMap<&GangKey, usize> =
        snap.gangs.iter().enumerate().map(|(i, g)| (&g.key, i)).collect();
    let scan = scan_pods(snap, &config.scheduler_name, &gang_index, &mut res, &devices, fast);
    let demand = scan.demand;
    if fast {
        take_usage(snap, &node_index, &mut ledger, &res);
    } else {
        take_pod_by_pod(snap, &node_index, &mut ledger, &mut res);
    }

    // 2. Count.
    let members = members::count(snap, &config.scheduler_name, scan.claimed);
    let priorities = members::priorities(snap, &members);
    let states = members::states(snap, &members);
    let reserved = take_reservations(snap, &node_index, &gang_index, &demand, &mut ledger);
    let facts = Facts {
        input: Input { snap, config, now },
        pods: PodFacts {
            pods: &snap.pods,
            res,
            demand,
            node_index,
            reserved,
            inter_pod: scan.inter_pod,
            places: OnceCell::new(),
        },
        gangs: GangFacts { gang_index, members, priorities, states },
    };

    // 3. Order.
    let units = order::units(snap, &facts.gangs.members, &facts.gangs.priorities, &scan.singles);
    let groups = order::gang_groups(snap, &facts.gangs.priorities, &facts.gangs.gang_index);

    // 4. Decide.
    let placer =
        place::Placer::new(snap, config, fast, facts.pods.node_index.clone(), scan.inter_pod, device_table);
    placer.volumes().pending(scan.with_claims);
    placer.volumes().pending_with_devices(scan.with_devices.clone());
    let with_devices = scan.with_devices;
    let mut progress = lifecycle::Progress::new(ledger);
    let mut done = vec![false; snap.gangs.len()];
    let mut rest = units.as_slice();
    while let Some(&unit) = rest.first() {
        match unit {
            order::Unit::Single(p) => {
                // Pods of ours outside any gang come in runs alike (a Deployment's replicas):
                // a run is placed from one look at the nodes (the reference places them one by one).
                // Pods whose volumes depend on other placements go one at a time.
                // A run placed from one look at the nodes goes on past a few pods of other shapes
                // between its pods (placed on their own, in order), when they change nothing it
                // reads but the room on the nodes they take.
                let jobset = exclusive::is_jobset_pod(&snap.pods[p]);
                let resumable = !jobset && placer.resumable(p, &facts.pods.reserved);
                let volumes = placer.volumes().run_shape(p);
                let mut run: Vec<(usize, bool)> = Vec::new();
                let (mut end, mut between) = (0, 0);
                for u in rest {
                    let order::Unit::Single(q) = *u else { break };
                    if q == p
                        || fast && facts.pods.alike(p, jobset, q) && placer.volumes().in_run(&volumes, q)
                    {
                        run.push((q, true));
                        (end, between) = (run.len(), 0);
                    } else if resumable
                        && between < MAX_BETWEEN
                        && !exclusive::is_jobset_pod(&snap.pods[q])
                        && placer.interloper(q)
                    {
                        run.push((q, false));
                        between += 1;
                    } else {
                        break;
                    }
                }
                run.truncate(end.max(1));
                rest = &rest[run.len()..];
                progress.singles(&facts.pods, &placer, &run);
                continue;
            }
            order::Unit::Gang(g) if !done[g] => {
                let group = &groups[g];
                for &m in group {
                    done[m] = true;
                }
                progress.gang_group(&facts, &placer, group);
            }
            order::Unit::Gang(_) => {}
        }
        rest = &rest[1..];
    }

    // Then what satisfied gangs place beyond their minimum.
    progress.surplus(&facts, &placer);

    // 5. Assemble.
    let (decisions, singles, single_volumes) = progress.into_decisions();
    let mut plan = decision::assemble(snap, &facts.gangs, decisions, &singles, &single_volumes, now);
    plan.releases = devices::releases(snap, &plan, &with_devices);
    // 6. Ask the autoscaler for what has no room (policy `provisioning`; off by default).
    plan.provisioning = crate::decide::provision::asks(snap, config, &plan, |node, pod| {
        filter::static_fit(node, pod).is_ok()
    });
    let stats = Stats { selector_evaluations: placer.volumes().selector_evaluations() };
    (plan, stats)
}

/// What the cycle learns of the pods in its one pass over them.
struct PodScan {
    demand: Demands,
    /// (pod, gang) for every pod that claims a gang of the snapshot, in pod order.
    claimed: Vec<(usize, usize)>,
    /// Pods of ours outside any gang, pending and not gated: each is a gang of one.
    singles: Vec<usize>,
    /// Whether the inter-pod filters may keep any pod off a node: a pod read asks for host
    /// ports, required pod affinity or anti-affinity or a `DoNotSchedule` spread, or a pod on a
    /// node has required anti-affinity (see [`joint`]).
    inter_pod: bool,
    /// Pending pods with volumes (any scheduler's), for the claims several of them share.
    with_claims: Vec<usize>,
    /// Pending pods of ours with ResourceClaims: those the plan does not place release theirs.
    with_devices: Vec<usize>,
}

/// One pass over the pods: their demands, their gangs and the pods of ours outside any gang. When
/// the snapshot carries its [`Usage`] (and `fast`), only the pods it lists as open are read —
/// pending or naming a gang; every other pod only uses its node, which the usage sums say — so
/// a cycle beside 140,000 running pods reads the handful it may place. Otherwise every pod is
/// read, once.
fn scan_pods(
    snap: &Snapshot,
    scheduler_name: &str,
    gang_index: &HashMap<&GangKey, usize>,
    res: &mut ResourceIndex,
    devices: &devices::Capacity,
    fast: bool,
) -> PodScan {
    let mut scan = PodScan {
        demand: Demands::new(snap.pods.len()),
        claimed: Vec::new(),
        singles: Vec::new(),
        inter_pod: snap.usage.as_ref().is_some_and(|u| fast && u.any_repelling()),
        with_claims: Vec::new(),
        with_devices: Vec::new(),
    };
    // `take_usage` checks (in debug builds) that the carried open pods are current.
    let open: &mut dyn Iterator<Item = usize> = match &snap.usage {
        Some(u) if fast => &mut u.open(),
        _ => &mut (0..snap.pods.len()),
    };
    for i in open {
        let Some(p) = snap.pods.get(i) else { continue };
        scan.demand.read(&snap.pods, i, res, devices.demand(snap, p));
        scan.inter_pod |= p.terms().is_some_and(|t| t.depends_on_others());
        if !p.volumes.is_empty() && p.is_pending() {
            scan.with_claims.push(i);
        }
        if !p.resource_claims.is_empty() && p.is_pending() && p.scheduler_name == scheduler_name {
            scan.with_devices.push(i);
        }
        match &p.gang {
            Some(m) => {
                if let Some(&g) = gang_index.get(&m.gang) {
                    scan.claimed.push((i, g));
                }
            }
            // A pod asking for what the cycle does not evaluate is not placed (it waits).
            None if p.is_pending()
                && !p.is_gated()
                && p.scheduler_name == scheduler_name
                && p.unevaluated().is_empty() =>
            {
                scan.singles.push(i);
            }
            None => {}
        }
    }
    scan
}

/// Takes what the pods on each node use, from the snapshot's [`Usage`] (added up here when the
/// snapshot carries none): the cost follows the nodes in use, not the pods on them.
fn take_usage(snap: &Snapshot, node_index: &NodeIndex<'_>, ledger: &mut Ledger, res: &ResourceIndex) {
    let added;
    let usage = match &snap.usage {
        Some(u) => {
            debug_assert!(*u == Usage::of(&snap.pods), "the snapshot's usage is out of date");
            u
        }
        None => {
            added = Usage::of(&snap.pods);
            &added
        }
    };
    for (name, used) in usage.iter() {
        if let Some(&n) = node_index.get(name) {
            ledger.take_usage(n, used, res);
        }
    }
}

/// Takes every pod's demand on its node, one by one: what [`take_usage`] must always equal.
fn take_pod_by_pod(
    snap: &Snapshot,
    node_index: &NodeIndex<'_>,
    ledger: &mut Ledger,
    res: &mut ResourceIndex,
) {
    for p in snap.pods.iter().filter(|p| p.uses_node()) {
        if let Some(&n) = p.node_name.as_deref().and_then(|name| node_index.get(name)) {
            let d = res.demand(&p.requests);
            ledger.apply(n, &d, 1);
        }
    }
}

/// `NonStrict` reservations hold capacity for pods still pending, until their gang decides.
/// Returns pod index → reserved node.
fn take_reservations(
    snap: &Snapshot,
    node_index: &NodeIndex<'_>,
    gang_index: &HashMap<&GangKey, usize>,
    demand: &Demands,
    ledger: &mut Ledger,
) -> HashMap<usize, usize> {
    let mut reserved = HashMap::new();
    if snap.reservations.is_empty() {
        return reserved;
    }
    let pod_index: HashMap<&crate::read::model::PodKey, usize> =
        snap.pods.iter().enumerate().map(|(i, p)| (&p.key, i)).collect();
    for r in &snap.reservations {
        let (Some(&p), Some(&n), Some(&g)) =
            (pod_index.get(&r.pod), node_index.get(r.node.as_str()), gang_index.get(&r.gang))
        else {
            continue;
        };
        let pod = &snap.pods[p];
        let holds = pod.is_pending()
            && snap.gangs[g].mode == GangMode::NonStrict
            && pod.gang.as_ref().is_some_and(|m| m.gang == r.gang);
        if holds && reserved.insert(p, n).is_none() {
            ledger.apply(n, &demand[p], 1);
        }
    }
    reserved
}
