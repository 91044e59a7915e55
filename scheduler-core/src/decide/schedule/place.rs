//! Placing one gang: walk its subgroup tree, choose a topology domain where one is required, and
//! pick a node per member by score — all on a tentative [`Txn`]. What the walk asks about nodes
//! (feasibility, domains, the best nodes for a pod shape, free capacity per domain) is answered by
//! the placer's caches ([`super::cache`]).
//!
//! Minimums first, extras second: the first pass places each leaf only up to its minimum, so the
//! extra members of one leaf can never starve another leaf's minimum; once the tree's minimums
//! hold the second pass places every remaining member that fits (which is also how a gang reaches
//! a pod floor above its leaves' minimums).
//!
//! A gang with exclusive topology (a JobSet's child jobs) is placed group by group instead: each
//! group of members whole in a domain no other group of the gang holds.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::rc::Rc;

use super::NodeIndex;
pub(super) use super::cache::Ask;
pub(super) use super::cache::Feasible;
use super::cache::{Caches, Filter, NodeKey, Prehashed, Topology};
use super::exclusive::{self, job_of};
pub(super) use super::joint::Tentative;
use super::joint::{Block, Joint, View};
use super::ledger::{Demands, Ledger, Txn};
use super::members::Members;
use super::volumes::{Volumes, Work as VolumeWork};
use crate::decide::config::Config;
use crate::read::model::Snapshot;
use crate::read::model::{Gang, GangMode};
use crate::read::tree::{self, LeafCounts};

/// Places gangs and single pods for one cycle.
#[derive(Debug)]
pub(super) struct Placer<'a> {
    snap: &'a Snapshot,
    caches: Caches<'a>,
    /// The inter-pod filters, with what is placed so far.
    joint: Joint<'a>,
    /// Take the shortcuts (class indices, domain pruning). Off only for the reference cycle the
    /// property tests hold them to.
    fast: bool,
    /// The policy's topology levels, broadest first ([`Config::topology_levels`]).
    levels: Vec<String>,
    /// The device decisions of the gang placement being tried, in order ([`Placer::whole`]),
    /// while `logging`.
    decisions: std::cell::RefCell<Vec<Decision>>,
    logging: std::cell::Cell<bool>,
    /// Members that placements of gangs tried again may place, left for the cycle
    /// ([`CYCLE_DEVICE_REVISITS`]).
    revisits: std::cell::Cell<u32>,
    /// The gang (by address) whose revisit budget this is, and its placements again and members
    /// placed again left ([`MAX_DEVICE_REVISITS`], [`GANG_DEVICE_REVISITS`]): one budget for all
    /// of a gang's placements in the cycle (its first attempt and every preemption probe).
    gang_revisits: std::cell::Cell<(usize, u32, u32)>,
}

/// A device decision of a placement attempt: a member placed with a claim allocated for it on a
/// node (the claim allocated last, with its devices sorted), or a member with claims to allocate
/// that found no node.
#[derive(Clone, Debug)]
enum Decision {
    Placed {
        pod: usize,
        node: usize,
        claim: crate::read::model::ObjectKey,
        devices: Vec<u32>,
        names: Vec<String>,
    },
    Failed(usize),
}

/// The passes of the walk: `cap`, only up to each leaf's minimum; `keep_partial`, keep what was
/// placed in a subtree even when it is not satisfied.
#[derive(Clone, Copy, Debug)]
struct Pass {
    cap: bool,
    keep_partial: bool,
}

/// Why the inter-pod filters keep a pod off each node, and who is in the way per reason (see
/// [`Placer::blocks`]).
pub(super) type Blocks = (Vec<Option<Block>>, HashMap<Block, Vec<usize>>);

/// Where a member may go, besides its feasible nodes: within `filter`'s domains, with `before`
/// placed ahead of it, its `reserved` node preferred.
#[derive(Clone, Copy)]
pub(super) struct Spot<'s> {
    pub filter: Option<&'s Filter>,
    pub reserved: Option<&'s usize>,
    pub before: Tentative<'s>,
}

/// Visits (pod, node) bindings, each with the visitor given.
pub(super) type Earlier<'a> = dyn Fn(&mut dyn FnMut(usize, usize)) + 'a;

/// A placement request: what the cycle asks of the placer for one gang.
pub(super) struct PlacementRequest<'r> {
    pub gang: &'r Gang,
    pub members: &'r Members,
    pub ledger: &'r Ledger,
    pub demand: &'r Demands,
    pub reserved: &'r HashMap<usize, usize>,
    pub txn: Txn,
    /// Place whatever fits (a satisfied or degraded gang), not all or nothing.
    pub extras: bool,
    /// Place the minimum only (what satisfies the gang), not the members beyond it: what a
    /// backfill hold is for, and a gang's first placement while backfill holds room (its
    /// surplus comes after every gang's minimum).
    pub minimum_only: bool,
    /// Visits the (pod, node) bindings decided earlier in this cycle, when a placement needs to
    /// know which pods go where beside the bound ones (exclusive topology); not called otherwise.
    pub earlier: &'r Earlier<'r>,
    /// The (pod, node) bindings of its gang group placed before it in the same step: the
    /// inter-pod filters count them as placed.
    pub siblings: &'r [(usize, usize)],
}

/// The result of trying to place one gang.
#[derive(Clone, Debug, Default)]
pub(super) struct Placement {
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
    /// Why exclusive placement fell short (one domain per member group), when it did.
    pub exclusive_note: Option<String>,
    /// The bindings of its gang group placed before it in the step: they were in its way too.
    pub siblings: Vec<(usize, usize)>,
    /// Why the gang is not in one domain of its preferred level, when it has one and is not.
    pub preferred_note: Option<String>,
    /// How many times the members' device choices were revisited to place it (0: as they first
    /// chose).
    pub revisited: u32,
    /// Backfill: the gangs whose held capacity this placement takes (it may: it ends before they
    /// start), set by the cycle.
    pub backfilled: Vec<usize>,
    /// Why the gang cannot be placed at all whatever the room (the level order it names is not
    /// in the cluster, or lacks its levels), when so.
    pub blocked: Option<String>,
}

#[derive(Clone, Debug)]
struct Work {
    txn: Txn,
    bindings: Vec<(usize, usize)>,
    counts: LeafCounts,
    /// How many times the members' device choices were revisited to reach it.
    revisited: u32,
}

/// Placements of one gang tried again with an earlier member's device choice revisited, when a
/// later member found no devices where that choice took them (kubernetes#138765: two pods that
/// fit on two halves of a partitionable device, the first having taken it whole), in all its
/// trials of the cycle (topology domains, preferred levels).
pub const MAX_DEVICE_REVISITS: u32 = 64;
/// Members placed again in those placements of one gang (a placement again of a gang of `m`
/// members counts `m`).
pub const GANG_DEVICE_REVISITS: u32 = 4_096;
/// Members placed again in such placements in one cycle, all gangs together: gangs that cannot
/// fit however their devices are chosen cost the cycle a bounded time (past it, gangs are placed
/// as their members choose, without revisits).
pub const CYCLE_DEVICE_REVISITS: u32 = 65_536;

/// Failed trial placements of member groups in one [`Placer::anchored`] pass: its cost is
/// bounded by one placement per group plus this many (and sorting the domains of each group's
/// key once), whatever the cluster's size.
pub const MAX_ANCHOR_TRIALS: usize = 256;

/// Failed trial placements in the domains of a preferred level, per gang or subtree: the
/// preferred level is best effort, so past this many domains that had the room by capacity and
/// still did not take it whole, the required level decides. Domains without the room the minimum
/// needs of the scarce resource are passed over without a trial.
pub const MAX_PREFERRED_TRIALS: usize = 16;

impl<'a> Placer<'a> {
    /// A placer for `snap`; `node_index` is the cycle's (node name → index), copied rather than
    /// built again; `inter_pod`: whether the inter-pod filters may keep any pod off a node.
    pub fn new(
        snap: &'a Snapshot,
        config: &Config,
        fast: bool,
        node_index: NodeIndex<'a>,
        inter_pod: bool,
        devices: super::devices::Devices<'a>,
    ) -> Self {
        let joint = Joint::new(snap, fast, node_index.clone(), inter_pod);
        let levels = config.topology_levels.clone();
        Placer {
            snap,
            caches: Caches::new(snap, config, fast, node_index, devices),
            joint,
            fast,
            levels,
            decisions: std::cell::RefCell::new(Vec::new()),
            logging: std::cell::Cell::new(false),
            revisits: std::cell::Cell::new(CYCLE_DEVICE_REVISITS),
            gang_revisits: std::cell::Cell::new((0, MAX_DEVICE_REVISITS, GANG_DEVICE_REVISITS)),
        }
    }

    /// Notes bindings committed this cycle (see [`Caches::committed`]): JobSet's exclusive
    /// domains they hold, and the pods on nodes the inter-pod filters count.
    pub fn committed(&self, bindings: &[(usize, usize)]) {
        self.caches.committed(bindings);
        self.joint.committed(bindings, false);
    }

    /// [`Placer::committed`] for one binding of a run of alike pods, `next` when the pod
    /// committed just before is of the same run.
    fn committed_in_run(&self, binding: (usize, usize), next: bool) {
        self.caches.committed(&[binding]);
        self.joint.committed(&[binding], next);
    }

    /// Whether the inter-pod filters may keep pod `p` off a node, with `tentative` placed before
    /// it (its own host ports, affinity, anti-affinity or spread, or a placed pod's anti-affinity
    /// selecting it): such a pod is placed on its own, never in a run of alike pods.
    pub fn constrained(&self, p: usize, tentative: Tentative<'_>) -> bool {
        self.joint.view(p, tentative).is_some()
    }

    /// For each node, why the inter-pod filters keep pod `p` off it with `tentative` placed before
    /// it (`None`: they let it on), and for each reason up to 3 of the placed pods in the way (the
    /// first by key among those in the way on the first 3 of its nodes by name); `None` when they cannot keep it off any node. For
    /// messages.
    pub fn blocks(&self, p: usize, tentative: Tentative<'_>) -> Option<Blocks> {
        let view = self.joint.view(p, tentative)?;
        let per_node: Vec<Option<Block>> = (0..self.snap.nodes.len()).map(|n| view.allows(n).err()).collect();
        drop(view);
        let mut who: HashMap<Block, (usize, Vec<usize>)> = HashMap::new();
        // Nodes in name order, the pods in the way in key order: the same snapshot in any order
        // names the same pods.
        let mut order: Vec<usize> = (0..per_node.len()).collect();
        order.sort_by(|&a, &b| self.snap.nodes[a].name.cmp(&self.snap.nodes[b].name));
        let pods = &self.snap.pods;
        for n in order {
            let Some(block) = &per_node[n] else { continue };
            if !matches!(block, Block::AntiAffinity(_) | Block::Repelled(_) | Block::Port(_)) {
                continue;
            }
            let (looked, names) = who.entry(block.clone()).or_default();
            if *looked >= 3 {
                continue;
            }
            *looked += 1;
            for q in self.joint.blockers(p, n, block, tentative) {
                if !names.contains(&q) {
                    names.push(q);
                }
            }
        }
        let who = who
            .into_iter()
            .map(|(b, (_, mut names))| {
                names.sort_by(|&x, &y| pods[x].key.cmp(&pods[y].key));
                names.truncate(3);
                (b, names)
            })
            .collect();
        Some((per_node, who))
    }

    /// Places a run of pods of ours outside any gang, alike for placement ([`super::PodFacts::alike`]),
    /// each on the best node it fits, if any, in order, and commits each to `ledger` (and to the
    /// cycle's placements, [`Placer::committed`]): returns the (pod, node) bindings, and the claims
    /// to bind first for pods placed whose claims are not bound yet (those pods are bound in a
    /// later cycle, once the claims are). A run whose pods
    /// the inter-pod filters concern, or with a node of its own to prefer, is placed and committed
    /// pod by pod (each is a gang of one: committed, it costs the next no more than any placement
    /// before it); any other from one look at the nodes.
    pub fn singles(
        &self,
        ledger: &mut Ledger,
        demand: &Demands,
        reserved: &HashMap<usize, usize>,
        run: &[usize],
    ) -> (Vec<(usize, usize)>, Vec<VolumeWork>) {
        let Some(&p) = run.first() else { return (Vec::new(), Vec::new()) };
        let pod = &self.snap.pods[p];
        let view = self.joint.view(p, Tentative::NONE);
        let own_node = pod.nominated_node.is_some() || reserved.contains_key(&p);
        // Volumes that depend on other placements: placed alone (such a pod is never in a run).
        let dynamic = self.volume_dynamic(p);
        let constrained = view.is_some();
        let placed = if let Some(view) = view.filter(|_| self.fast && !own_node && !dynamic) {
            self.constrained_run(ledger, demand, run, &view)
        } else if own_node || constrained || dynamic {
            let (mut placed, mut work) = (Vec::new(), Vec::new());
            for &q in run {
                let mut txn = Txn::default();
                let at = Spot { filter: None, reserved: reserved.get(&q), before: Tentative::NONE };
                if let Some(n) = self.best_node(ledger, &txn, demand, q, at) {
                    self.take(ledger, &mut txn, demand, q, n);
                    let claims = self.volumes().work(&[(q, n)], ledger, &txn);
                    ledger.commit(txn);
                    self.committed(&[(q, n)]);
                    if claims.is_empty() {
                        placed.push((q, n));
                    } else {
                        work.extend(claims);
                    }
                }
            }
            return (placed, work);
        } else {
            let feasible = self.caches.feasible(p);
            let ask = Ask { demand: &demand[p], pod, feasible: &feasible, filter: None };
            let mut txn = Txn::default();
            let placed = self.alike(ledger, &mut txn, ask, run);
            ledger.commit(txn);
            if let Some((&first, rest)) = placed.split_first() {
                self.caches.committed(&placed);
                self.joint.committed(&[first], false);
                self.joint.committed(rest, true);
            }
            placed
        };
        let (mut bound, mut work) = (Vec::with_capacity(placed.len()), Vec::new());
        self.claims_first(ledger, placed, &mut bound, &mut work);
        (bound, work)
    }

    /// Sorts placements committed to `ledger` into those bound now (`bound`) and the claims to
    /// bind first (`work`): claims provisioned wherever a pod goes are bound first, the pod in a
    /// later cycle.
    fn claims_first(
        &self,
        ledger: &Ledger,
        placed: impl IntoIterator<Item = (usize, usize)>,
        bound: &mut Vec<(usize, usize)>,
        work: &mut Vec<VolumeWork>,
    ) {
        for (q, n) in placed {
            if self.snap.pods[q].volumes.is_empty() && self.snap.pods[q].resource_claims.is_empty() {
                bound.push((q, n));
                continue;
            }
            let claims = self.volumes().work(&[(q, n)], ledger, &Txn::default());
            if claims.is_empty() {
                bound.push((q, n));
            } else {
                work.extend(claims);
            }
        }
    }

    /// Whether a run of pods alike to `p` may go on past pods of other shapes placed between
    /// its pods ([`Placer::singles_resumed`]): it is one placed from one look at the nodes — no
    /// inter-pod filter concerns `p`, it has no node of its own to prefer, and its volumes depend
    /// on no other placement.
    pub fn resumable(&self, p: usize, reserved: &HashMap<usize, usize>) -> bool {
        self.fast
            && self.snap.pods[p].nominated_node.is_none()
            && !reserved.contains_key(&p)
            && !self.volume_dynamic(p)
            && self.joint.view(p, Tentative::NONE).is_none()
    }

    /// Whether placing pod `q` changes nothing a resumable run reads but the room on the node it
    /// takes: no inter-pod filter concerns it (so its placement repels no one), and it books no
    /// volume another placement depends on. JobSet pods are the caller's to keep out (the
    /// domains their exclusive jobs hold change other pods' nodes).
    pub fn interloper(&self, q: usize) -> bool {
        !self.volume_dynamic(q) && self.joint.view(q, Tentative::NONE).is_none()
    }

    /// [`Placer::singles`] for a run of pods alike to its head (`true`) with pods of other shapes
    /// between them (`false`, each an [`Placer::interloper`]; the head [`Placer::resumable`]):
    /// the alike pods are placed from one look at the nodes, as [`Placer::alike`] places them,
    /// and each pod between them as [`Placer::singles`] places it on its own, in order — the same
    /// placements as one pod after another, without a new look at the nodes after each pod
    /// between (a StatefulSet's replicas each with a local volume of its own, amid a
    /// Deployment's).
    ///
    /// Why one look still suffices: a node's key changes only when a pod lands on it, so the
    /// alike pods take the nodes nobody has touched in their order before the run; each pod
    /// between touches one node. So the `alike + between` best nodes before the run, and the
    /// nodes the pods between took, re-keyed once taken, hold every node an alike pod can get.
    pub fn singles_resumed(
        &self,
        ledger: &mut Ledger,
        demand: &Demands,
        reserved: &HashMap<usize, usize>,
        run: &[(usize, bool)],
    ) -> (Vec<(usize, usize)>, Vec<VolumeWork>) {
        let (mut bound, mut work) = (Vec::with_capacity(run.len()), Vec::new());
        let Some(&(head, _)) = run.first() else { return (bound, work) };
        let pod = &self.snap.pods[head];
        let d = &demand[head];
        let width = d.0.len();
        let feasible = self.caches.feasible(head);
        let ask = Ask { demand: d, pod, feasible: &feasible, filter: None };
        let mut slots = self.caches.candidates(ledger, &Txn::default(), ask, run.len());
        // Per slot: what its node has left of each demanded resource, then its pod slots (as in
        // `alike`); its key now (`None`: full for the run); how many of the run it took since
        // the last commit.
        let mut left: Vec<i64> = Vec::with_capacity(slots.len() * (width + 1));
        let room = |ledger: &Ledger, n: usize, left: &mut Vec<i64>| {
            left.extend(d.0.iter().map(|&(r, _)| ledger.free(&Txn::default(), n, r)));
            left.push(ledger.free_pods(&Txn::default(), n));
        };
        for &(_, n) in &slots {
            room(ledger, n, &mut left);
        }
        let mut current: Vec<Option<NodeKey>> = slots.iter().map(|&(key, _)| Some(key)).collect();
        let mut slot_of: HashMap<usize, usize, BuildHasherDefault<Prehashed>> =
            slots.iter().enumerate().map(|(i, &(_, n))| (n, i)).collect();
        let mut taken = vec![0i64; slots.len()];
        let mut heap: BinaryHeap<Reverse<(NodeKey, usize)>> =
            slots.iter().enumerate().map(|(i, &(key, _))| Reverse((key, i))).collect();
        // The alike pods placed since the last commit.
        let mut segment: Vec<(usize, usize)> = Vec::new();
        // The slots the run took since the last commit.
        let mut dirty: Vec<usize> = Vec::new();
        let commit = |ledger: &mut Ledger,
                      slots: &[(NodeKey, usize)],
                      taken: &mut [i64],
                      dirty: &mut Vec<usize>,
                      segment: &mut Vec<(usize, usize)>,
                      bound: &mut Vec<(usize, usize)>,
                      work: &mut Vec<VolumeWork>| {
            let mut txn = Txn::default();
            for i in dirty.drain(..) {
                ledger.take_times(&mut txn, slots[i].1, d, taken[i]);
                taken[i] = 0;
            }
            ledger.commit(txn);
            if let Some((&first, rest)) = segment.split_first() {
                self.caches.committed(segment);
                self.joint.committed(&[first], false);
                self.joint.committed(rest, true);
            }
            self.claims_first(ledger, segment.drain(..), bound, work);
        };
        for &(q, alike) in run {
            if !alike {
                commit(ledger, &slots, &mut taken, &mut dirty, &mut segment, &mut bound, &mut work);
                let mark = ledger.log().len();
                let (b, w) = self.singles(ledger, demand, reserved, &[q]);
                bound.extend(b);
                work.extend(w);
                let touched: Vec<usize> = ledger.log()[mark..].to_vec();
                for n in touched {
                    let i = match slot_of.get(&n) {
                        Some(&i) => {
                            let at = i * (width + 1);
                            for (slot, &(r, _)) in left[at..at + width].iter_mut().zip(&d.0) {
                                *slot = ledger.free(&Txn::default(), n, r);
                            }
                            left[at + width] = ledger.free_pods(&Txn::default(), n);
                            i
                        }
                        None if feasible.has(n) => {
                            slots.push((self.caches.node_key(ledger, &Txn::default(), d, pod, n), n));
                            room(ledger, n, &mut left);
                            current.push(None);
                            taken.push(0);
                            slot_of.insert(n, slots.len() - 1);
                            slots.len() - 1
                        }
                        None => continue,
                    };
                    current[i] = None;
                    if ledger.fits(&Txn::default(), n, d).is_ok() {
                        let key = self.caches.node_key(ledger, &Txn::default(), d, pod, n);
                        current[i] = Some(key);
                        heap.push(Reverse((key, i)));
                    }
                }
                continue;
            }
            // The best node whose entry is current (a node an interloper took is pushed again
            // with its new key; the old entry is left behind).
            let top = loop {
                let Some(top) = heap.peek_mut() else { break None };
                let Reverse((key, i)) = *top;
                if current[i] == Some(key) {
                    break Some(top);
                }
                PeekMut::pop(top);
            };
            let Some(mut top) = top else { continue };
            let Reverse((key, i)) = *top;
            segment.push((q, slots[i].1));
            if taken[i] == 0 {
                dirty.push(i);
            }
            taken[i] += 1;
            match self.take_room(&mut left[i * (width + 1)..(i + 1) * (width + 1)], d, key) {
                Some(key) => {
                    current[i] = Some(key);
                    *top = Reverse((key, i));
                }
                None => {
                    current[i] = None;
                    PeekMut::pop(top);
                }
            }
        }
        commit(ledger, &slots, &mut taken, &mut dirty, &mut segment, &mut bound, &mut work);
        (bound, work)
    }

    /// Places a run of alike pods the inter-pod filters concern (`view`: the first's), each on the
    /// best node it fits and they allow — as [`Placer::best_node`] would place them one after
    /// another, each committed, without walking again, pod after pod, past the nodes the run
    /// itself filled or closed (a Deployment's replicas kept apart pass over one more node each).
    /// Each placement is committed to the inter-pod filters as it is made, to `ledger` at the end.
    ///
    /// The run draws nodes best first from its class's order, in batches that double, into a
    /// heap of its own, and keeps them re-keyed as it fills them; every node not drawn yet is
    /// worse than the last drawn. A node the filters refuse is dropped for the rest of the run
    /// when no placement of the run can lift the refusal (what the placed pods' anti-affinity,
    /// host ports or spread the run does not count asks only grows), else set aside until the
    /// next placement. One view serves the whole run: the states it reads are shared with the
    /// cycle's and kept in step as each pod is committed; the pods' own anti-affinity covers
    /// whatever symmetry they bring (the same terms, both ways).
    fn constrained_run(
        &self,
        ledger: &mut Ledger,
        demand: &Demands,
        run: &[usize],
        view: &View<'_>,
    ) -> Vec<(usize, usize)> {
        let Some(&p) = run.first() else { return Vec::new() };
        let pod = &self.snap.pods[p];
        let d = &demand[p];
        let feasible = self.caches.feasible(p);
        // The run's placements, committed to `ledger` at its end.
        let mut txn = Txn::default();
        let mut drawn: HashSet<usize, BuildHasherDefault<Prehashed>> = HashSet::default();
        let mut heap: BinaryHeap<Reverse<(NodeKey, usize)>> = BinaryHeap::new();
        let mut set_aside: Vec<(NodeKey, usize)> = Vec::new();
        // The worst node drawn so far, and whether any node is left to draw.
        let mut last: Option<NodeKey> = None;
        let mut more = true;
        let mut placed = Vec::new();
        for &q in run {
            let found = loop {
                let behind = match heap.peek() {
                    None => true,
                    Some(Reverse((key, _))) => last.is_none_or(|l| *key > l),
                };
                if more && behind {
                    let want = drawn.len().max(8);
                    let ask = Ask { demand: d, pod, feasible: &feasible, filter: None };
                    let fresh = |n: usize| !drawn.contains(&n);
                    let batch = self.caches.candidates_where(ledger, &txn, ask, want, Some(&fresh));
                    more = batch.len() == want;
                    if let Some(&(key, _)) = batch.last() {
                        last = Some(key);
                    }
                    drawn.extend(batch.iter().map(|&(_, n)| n));
                    heap.extend(batch.into_iter().map(Reverse));
                    continue;
                }
                let Some(Reverse((key, n))) = heap.pop() else { break None };
                match view.allows(n) {
                    Ok(()) => break Some(n),
                    Err(block) if view.may_lift(&block) => set_aside.push((key, n)),
                    Err(_) => {}
                }
            };
            // The next pods are alike and nothing changed: they find no node either.
            let Some(n) = found else { break };
            ledger.take(&mut txn, n, d);
            self.committed_in_run((q, n), !placed.is_empty());
            placed.push((q, n));
            heap.extend(set_aside.drain(..).map(Reverse));
            // The node itself, as the placement leaves it (kept apart, it is closed for good).
            if ledger.fits(&txn, n, d).is_ok() {
                let key = self.caches.node_key(ledger, &txn, d, pod, n);
                match view.allows(n) {
                    Ok(()) => heap.push(Reverse((key, n))),
                    Err(block) if view.may_lift(&block) => set_aside.push((key, n)),
                    Err(_) => {}
                }
            }
        }
        ledger.commit(txn);
        placed
    }

    /// Nodes that pass every capacity-independent check for pod `p` (see [`Caches::feasible`]).
    pub fn feasible(&self, p: usize) -> Rc<Feasible> {
        self.caches.feasible(p)
    }

    /// The domains of topology key `key` (see [`Caches::topology`]).
    pub fn topology(&self, key: &str) -> Rc<super::cache::Topology> {
        self.caches.topology(key)
    }

    /// The volume filters of this cycle.
    pub fn volumes(&self) -> &Volumes<'a> {
        self.caches.volumes()
    }

    /// Whether pod `p`'s volumes depend on other placements: it is placed alone, never in a run.
    pub fn volume_dynamic(&self, p: usize) -> bool {
        self.caches.volumes().dynamic(p)
    }

    /// Takes what pod `p` needs on node `n` inside `txn`: its demand, and its volumes.
    pub fn take(&self, ledger: &Ledger, txn: &mut Txn, demand: &Demands, p: usize, n: usize) {
        ledger.take(txn, n, &demand[p]);
        self.caches.volumes().take(p, n, ledger, txn);
    }

    /// The best node for pod `p` within `at`, preferring its reserved or nominated node.
    pub fn best_node(
        &self,
        state: &Ledger,
        txn: &Txn,
        demand: &Demands,
        p: usize,
        at: Spot<'_>,
    ) -> Option<usize> {
        let Spot { filter, reserved, before: tentative } = at;
        let feasible = self.caches.feasible(p);
        let d = &demand[p];
        let view = self.joint.view(p, tentative);
        let joint = |n: usize| view.as_ref().is_none_or(|v| v.allows(n).is_ok());
        let allowed = |n: usize| {
            feasible.has(n)
                && filter.is_none_or(|f| f.iter().all(|(t, dom)| t.node_domain[n] == *dom))
                && joint(n)
        };
        let pod = &self.snap.pods[p];
        let volumes = self.caches.volumes();
        let dynamic = volumes.dynamic(p);
        let fits =
            |n: usize| state.fits(txn, n, d).is_ok() && (!dynamic || volumes.fits(p, n, state, txn).is_ok());
        let nominated = pod.nominated_node.as_deref().and_then(|name| self.caches.node_of(name));
        for n in reserved.copied().into_iter().chain(nominated) {
            if allowed(n) && fits(n) {
                return Some(n);
            }
        }
        let ask = Ask { demand: d, pod, feasible: &feasible, filter };
        let also: Option<&dyn Fn(usize) -> bool> = if view.is_some() { Some(&joint) } else { None };
        if !dynamic {
            return self.caches.candidates_where(state, txn, ask, 1, also).first().map(|&(_, n)| n);
        }
        // Its volumes depend on what others took: the best node whose volumes also fit, looking
        // at more of the best each time (most often the first fits).
        let mut k = 1;
        let mut seen = 0;
        let mut first_block = None;
        loop {
            let best = self.caches.candidates_where(state, txn, ask, k, also);
            // The best `seen` were tried in the round before (the order is the same).
            for &(_, n) in best.iter().skip(seen) {
                match volumes.fits(p, n, state, txn) {
                    Ok(()) => return Some(n),
                    Err(b) => {
                        first_block.get_or_insert(b);
                    }
                }
            }
            if best.len() < k {
                if let Some(b) = first_block {
                    volumes.note(p, b);
                }
                return None;
            }
            seen = best.len();
            k = k.saturating_mul(4);
        }
    }

    /// Tries to place gang `r.gang` as the request says.
    pub fn gang(&self, r: &PlacementRequest<'_>) -> Placement {
        let gang = r.gang;
        let at = std::ptr::from_ref(gang) as usize;
        if self.gang_revisits.get().0 != at {
            self.gang_revisits.set((at, MAX_DEVICE_REVISITS, GANG_DEVICE_REVISITS));
        }
        let start =
            Work { txn: r.txn.clone(), bindings: Vec::new(), counts: r.members.held.clone(), revisited: 0 };
        let keep_partial = r.extras || gang.mode == GangMode::NonStrict;
        // JobSet's exclusive placement, from the gang (an annotation gang) or from its members'
        // annotation, whichever dialect gives the JobSet its gang.
        let exclusive = gang
            .exclusive_topology
            .as_deref()
            .or_else(|| r.members.all.iter().find_map(|&p| self.snap.pods[p].exclusive_topology.as_deref()));
        if let Some(key) = exclusive {
            return self.exclusive(r, key, start);
        }
        if let Some(why) = self.order_missing(gang) {
            let mut p = self.finish(r, start, None, Vec::new());
            p.blocked = Some(why);
            return p;
        }
        // The preferred level first: the whole gang in one of its domains (within one domain of
        // the required key), best fit; else as the required key alone allows. Extras of a placed
        // gang go where the required key allows (the preferred level never keeps a pod out).
        let mut preferred_note = None;
        if let Some(pkey) =
            gang.topology_preferred.as_deref().filter(|p| Some(*p) != gang.topology_key.as_deref())
            && !r.extras
        {
            let rkey = gang.topology_key.as_deref();
            for (i, level) in self.preferred_levels(gang, pkey, rkey).into_iter().enumerate() {
                let tag =
                    if i == 0 { "(preferred)".to_string() } else { format!("(no {pkey} domain had room)") };
                match self.preferred(r, level, rkey, &start, &tag) {
                    Ok((domain, w)) => return self.finish(r, w, Some(domain), Vec::new()),
                    Err(note) if i == 0 => preferred_note = Some(note),
                    Err(_) => {}
                }
            }
        }
        let with_note = |mut p: Placement| {
            p.preferred_note = preferred_note.clone();
            p
        };
        let Some(key) = gang.topology_key.as_deref() else {
            if let Some(grouped) = self.anchored(r, start.clone(), keep_partial) {
                return with_note(self.finish(r, grouped, None, Vec::new()));
            }
            let w = self.whole(r, start, &Vec::new(), keep_partial);
            return with_note(self.finish(r, w, None, Vec::new()));
        };

        let topo = self.caches.topology(key);
        let mut report = Vec::new();
        let mut best: Option<(i64, usize, Work)> = None;
        let mut best_partial: Option<(usize, Work)> = None;
        let most = self.most_taken(r, None);
        let (need, _) = self.least_needed(r);
        for (free, d) in self.by_free(r, &topo, self.candidate_domains(r, &topo, None, &start), &start) {
            // Domains come least free first, and one can strand no less than its free capacity
            // less everything the gang could take: past that bound none can beat the best.
            if self.fast && best.as_ref().is_some_and(|(l, _, _)| free.saturating_sub(most) > *l) {
                break;
            }
            let filter: Filter = vec![(topo.clone(), u32::try_from(d).unwrap_or(u32::MAX))];
            // Device choices are revisited until a domain takes the gang; past it, domains are
            // only compared as their members choose (the budgets go to gangs still without one).
            // Nor in a domain without the room the gang's minimum needs of its scarce resource:
            // no choice of devices makes that room.
            let w = if best.is_some() || free < need {
                self.whole_once(r, start.clone(), &filter, keep_partial)
            } else {
                self.whole(r, start.clone(), &filter, keep_partial)
            };
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
        with_note(match best {
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
                let free = self.whole_once(r, start, &Vec::new(), false);
                p.topology_failed = tree::satisfied(gang, &free.counts);
                p
            }
        })
    }

    /// Why `gang` cannot be placed whatever the room: the KAI Topology it names is not in the
    /// cluster, or lacks one of its levels — KAI's topology plugin refuses such a PodGroup with
    /// these reasons — or a subgroup's required level is broader than its parent's
    /// ([`Self::broader_child`]). `None`: none of these.
    fn order_missing(&self, gang: &Gang) -> Option<String> {
        let Some(name) = gang.topology_object.as_deref() else { return self.broader_child(gang) };
        let field = match gang.source.dialect {
            crate::read::model::Dialect::Kai => "spec.topologyConstraint.topology".to_string(),
            _ => format!("annotation {}", crate::read::labels::KAI_TOPOLOGY),
        };
        let Some(levels) = self.snap.storage.kai_topologies.get(name) else {
            return Some(format!(
                "waits for KAI Topology {name:?} ({field}), which the cluster does not have"
            ));
        };
        let asked = std::iter::once((gang.topology_key.as_deref(), gang.topology_preferred.as_deref()))
            .chain(
                gang.subgroups.iter().map(|s| (s.topology_key.as_deref(), s.topology_preferred.as_deref())),
            );
        for (required, preferred) in asked {
            for (what, level) in [("required", required), ("preferred", preferred)] {
                if let Some(level) = level.filter(|l| !levels.iter().any(|x| x == l)) {
                    return Some(format!(
                        "KAI Topology {name:?} has no level {level:?} (the {what} level); its levels: {}",
                        levels.join(", ")
                    ));
                }
            }
        }
        self.broader_child(gang)
    }

    /// A subgroup whose required level is broader than its parent's (the gang's, for a top-level
    /// one), by the level order both belong to: Grove refuses such a constraint ("the same as or
    /// narrower than its parent's"), and a child cannot be bound more loosely than what holds
    /// it. `None` when every child's level is the same or narrower, or no order lists both.
    fn broader_child(&self, gang: &Gang) -> Option<String> {
        if !gang.subgroups.iter().any(|s| s.topology_key.is_some()) {
            return None;
        }
        // Each subgroup's parent and required level by name: one pass, so a tree of many
        // subgroups costs a walk up per constrained subgroup, not a search per step.
        let by_name: std::collections::HashMap<&str, (Option<&str>, Option<&str>)> = gang
            .subgroups
            .iter()
            .map(|s| (s.name.as_str(), (s.parent.as_deref(), s.topology_key.as_deref())))
            .collect();
        for sub in &gang.subgroups {
            let Some(child) = sub.topology_key.as_deref() else { continue };
            // The nearest ancestor with a required level (the gang, past the top), and its name.
            let (mut parent, mut whose) = (None, None);
            let mut up = sub.parent.as_deref();
            for _ in 0..gang.subgroups.len() {
                let Some(name) = up else { break };
                let Some(&(next, key)) = by_name.get(name) else { break };
                if key.is_some() {
                    (parent, whose) = (key, Some(name));
                    break;
                }
                up = next;
            }
            if whose.is_none() {
                parent = gang.topology_key.as_deref();
            }
            let Some(parent) = parent else { continue };
            let levels = self.snap.storage.level_order(gang, &self.levels, child);
            let at = |l: &str| levels.iter().position(|x| x == l);
            if let (Some(c), Some(p)) = (at(child), at(parent))
                && c < p
            {
                let whose = whose.map_or_else(|| "the gang".to_string(), |p| format!("subgroup {p:?}"));
                return Some(format!(
                    "subgroup {:?} requires level {child:?}, broader than {whose}'s {parent:?} (levels, broadest first: {}): a subgroup's level must be the same as or narrower than its parent's",
                    sub.name,
                    levels.join(", ")
                ));
            }
        }
        None
    }

    /// The levels a gang or subgroup preferring `pkey` tries, in order: `pkey`, then each level
    /// of its order ([`crate::read::model::volume::Storage::level_order`]) broader than it and narrower than its required key
    /// `rkey` (all broader ones when it has none), narrowest first. Only `pkey` when the order
    /// does not list it, or lists `rkey` no broader than it.
    fn preferred_levels<'k>(&'k self, gang: &'k Gang, pkey: &'k str, rkey: Option<&str>) -> Vec<&'k str> {
        let mut out = vec![pkey];
        let levels = self.snap.storage.level_order(gang, &self.levels, pkey);
        let Some(at) = levels.iter().position(|l| l == pkey) else { return out };
        let top = match rkey {
            Some(k) => match levels.iter().position(|l| l == k) {
                Some(j) if j < at => j + 1,
                _ => return out,
            },
            None => 0,
        };
        out.extend(levels[top..at].iter().rev().map(String::as_str));
        out
    }

    /// The whole gang in one domain of its preferred key `pkey` — within one domain of the
    /// required key `rkey`, when it has one: the domain of it the preferred domain's first node is
    /// in — the one that strands the least (as the required key's domains are chosen, with the
    /// same bound on the domains tried). `Ok`: the placement and `key=value` of its domains;
    /// `Err`: why none took it, with the best counts, for the gang's message.
    fn preferred(
        &self,
        r: &PlacementRequest<'_>,
        pkey: &str,
        rkey: Option<&str>,
        start: &Work,
        tag: &str,
    ) -> Result<(String, Work), String> {
        let ptopo = self.caches.topology(pkey);
        let rtopo = rkey.map(|k| self.caches.topology(k));
        let mut best: Option<(i64, usize, u32, Work)> = None;
        let mut report: Vec<(String, usize)> = Vec::new();
        let most = self.most_taken(r, None);
        let (need, least) = self.least_needed(r);
        let mut failed = 0;
        // Least free first, drawn from a heap as tried: most searches end after a few domains.
        let mut order: BinaryHeap<Reverse<(i64, usize)>> = self
            .free_of(r, &ptopo, self.candidate_domains(r, &ptopo, None, start), start)
            .into_iter()
            .map(Reverse)
            .collect();
        let mut small: Vec<(i64, usize)> = Vec::new();
        while let Some(Reverse((free, d))) = order.pop() {
            if free < need {
                // Too little room by capacity: reported (the roomiest few) with the members its
                // room holds at most.
                small.push((free, d));
                continue;
            }
            // Least free first: past a domain whose room less all the gang could take is no less
            // than the best's leftover, none strands less (an equal one loses on order).
            if best.as_ref().is_some_and(|(l, _, _, _)| free.saturating_sub(most) >= *l)
                || failed >= MAX_PREFERRED_TRIALS
            {
                break;
            }
            let mut filter: Filter = vec![(ptopo.clone(), u32::try_from(d).unwrap_or(u32::MAX))];
            let mut within = u32::MAX;
            if let Some(rt) = &rtopo {
                let Some(&first) = ptopo.domains[d].1.first() else { continue };
                within = rt.node_domain[first];
                if within == u32::MAX {
                    continue;
                }
                filter.insert(0, (rt.clone(), within));
            }
            let w = if best.is_some() {
                self.whole_once(r, start.clone(), &filter, false)
            } else {
                self.whole(r, start.clone(), &filter, false)
            };
            report.push((ptopo.domains[d].0.clone(), w.bindings.len()));
            if tree::satisfied(r.gang, &w.counts) {
                let left = self.leftover(r, &ptopo, d, &w);
                if best.as_ref().is_none_or(|(l, bd, _, _)| (left, d) < (*l, *bd)) {
                    best = Some((left, d, within, w));
                }
            } else {
                failed += 1;
            }
        }
        if let Some((_, d, within, w)) = best {
            let mut domain = format!("{pkey}={} {tag}", ptopo.domains[d].0);
            if let (Some(rkey), Some(rt)) = (rkey, &rtopo)
                && let Some((value, _)) = rt.domains.get(usize::try_from(within).unwrap_or(usize::MAX))
            {
                domain = format!("{rkey}={value}, {domain}");
            }
            return Ok((domain, w));
        }
        let roomiest = |&(free, d): &(i64, usize)| (Reverse(free), d);
        if small.len() > 3 {
            small.select_nth_unstable_by_key(2, roomiest);
            small.truncate(3);
        }
        small.sort_unstable_by_key(roomiest);
        for &(free, d) in &small {
            let room = if least > 0 { free / least } else { 0 };
            report.push((ptopo.domains[d].0.clone(), usize::try_from(room).unwrap_or(0)));
        }
        report.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut note = format!("no single {pkey} domain (its preferred level) has room for all of them");
        if !report.is_empty() {
            let each: Vec<String> =
                report.iter().take(3).map(|(v, n)| format!("{pkey}={v} has room for {n}")).collect();
            note.push_str(&format!(" (best: {})", each.join(", ")));
        }
        Err(note)
    }

    /// The placement of a gang some of whose members must share a domain: members with one
    /// required pod affinity term that selects themselves (LeaderWorkerSet's group and subgroup
    /// keys, any "all of these in one rack"), tried before the member-by-member pass. Member by
    /// member, the first of such a group goes wherever the best node is, and its domain may have
    /// no room for the rest (kube-scheduler places it the same way, one pod at a time); and
    /// each later member walks every node its group's full domain refuses. Here each group, in
    /// member order, goes whole into the least free domain of the term's key (least free as the
    /// cycle began) that takes all of it: at most one trial placement per group that lands and
    /// [`MAX_ANCHOR_TRIALS`] that fail in all, domains without the room for its scarcest resource
    /// skipped without a trial, none after a group that fits nowhere; the domains of each key
    /// sorted once (O(groups × domains) comparisons). The other members then go as before.
    /// The members' own terms (anti-affinity to other groups included) hold throughout: every
    /// node is chosen by [`Placer::best_node`]. `None` when no member is in such a group or the
    /// gang is not satisfied so (the member-by-member pass then has its try).
    fn anchored(&self, r: &PlacementRequest<'_>, start: Work, keep_partial: bool) -> Option<Work> {
        let pods = &self.snap.pods;
        let none = crate::read::model::Labels::default();
        let selects = |t: &crate::read::model::terms::AffinityTerm, q: usize| {
            let pod = &pods[q];
            let ns = &pod.key.namespace;
            let ns_labels = if t.any_namespace() {
                self.snap.namespaces.get(ns.as_str()).unwrap_or(&none)
            } else {
                &none
            };
            t.selects(ns, &pod.labels, ns_labels)
        };
        // Groups (term, members) in member order; a member joins the first group whose term it
        // carries and that selects it.
        let mut groups: Vec<(&crate::read::model::terms::AffinityTerm, Vec<usize>)> = Vec::new();
        let mut index: HashMap<&crate::read::model::terms::AffinityTerm, usize> = HashMap::new();
        for &p in r.members.pending.values().flatten() {
            let Some(terms) = pods[p].terms() else { continue };
            let Some(t) = terms.affinity.iter().find(|t| selects(t, p)) else { continue };
            match index.get(t) {
                Some(&i) => groups[i].1.push(p),
                None => {
                    index.insert(t, groups.len());
                    groups.push((t, vec![p]));
                }
            }
        }
        groups.retain(|(_, members)| members.len() > 1);
        if groups.is_empty() {
            return None;
        }
        let scarce = Self::scarce(r);
        let mut w = start;
        let mut budget = MAX_ANCHOR_TRIALS;
        let mut orders: Vec<(&str, Vec<(i64, usize)>)> = Vec::new();
        // What is left in the domains this pass placed a group in (order, domain): the rest are
        // as committed, or less free through another key's placements (then a trial finds it).
        let mut known: HashMap<(usize, usize), i64> = HashMap::new();
        for (term, members) in &groups {
            let topo = self.caches.topology(&term.topology_key);
            let need = members
                .iter()
                .map(|&p| match scarce {
                    Some(res) => r.demand[p].0.iter().find(|(x, _)| *x == res).map_or(0, |&(_, a)| a),
                    None => 1,
                })
                .fold(0i64, i64::saturating_add);
            // Least free first as the cycle's committed state has them, sorted once per key:
            // what this pass placed only lowers the free capacity of the domains it touched,
            // so a domain short of `need` committed is short now; a domain a group went to is
            // judged by what that group left in it.
            let at = match orders.iter().position(|(k, _)| *k == term.topology_key.as_str()) {
                Some(i) => i,
                None => {
                    let mut order: Vec<(i64, usize)> = (0..topo.domains.len())
                        .map(|d| (self.caches.domain_free(r.ledger, &topo, scarce, d), d))
                        .collect();
                    order.sort_unstable();
                    orders.push((term.topology_key.as_str(), order));
                    orders.len() - 1
                }
            };
            let mut placed = false;
            for &(committed, d) in &orders[at].1 {
                if known.get(&(at, d)).copied().unwrap_or(committed) < need {
                    continue;
                }
                let filter: Filter = vec![(topo.clone(), u32::try_from(d).unwrap_or(u32::MAX))];
                let mut trial = w.clone();
                let whole = members.iter().all(|&p| {
                    let leaf =
                        tree::leaf_of(r.gang, pods[p].gang.as_ref().and_then(|m| m.subgroup.as_deref()))
                            .unwrap_or("")
                            .to_string();
                    let before = Tentative::of(r.siblings, &trial.bindings);
                    let at = Spot { filter: Some(&filter), reserved: r.reserved.get(&p), before };
                    match self.best_node(r.ledger, &trial.txn, r.demand, p, at) {
                        Some(n) => {
                            self.place(r, &mut trial, &leaf, p, n);
                            true
                        }
                        None => false,
                    }
                });
                if whole {
                    w = trial;
                    known.insert((at, d), self.leftover(r, &topo, d, &w));
                    placed = true;
                    break;
                }
                if budget == 0 {
                    return None;
                }
                budget -= 1;
            }
            // A group that fits no domain whole: the gang's minimum is all of it more often than
            // not; what is left of the budget is not spent on the groups after it.
            if !placed {
                return None;
            }
        }
        let w = self.whole(r, w, &Vec::new(), keep_partial);
        tree::satisfied(r.gang, &w.counts).then_some(w)
    }

    fn finish(
        &self,
        r: &PlacementRequest<'_>,
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
            exclusive_note: None,
            siblings: r.siblings.to_vec(),
            preferred_note: None,
            blocked: None,
            revisited: w.revisited,
            backfilled: Vec::new(),
        }
    }

    /// Exclusive placement as JobSet's pod affinity and anti-affinity on
    /// `jobset.sigs.k8s.io/job-key` make it (`namespaceSelector: {}`): the members are grouped by
    /// their child Job ([`job_of`]), and each group is placed whole in a domain of `key` that
    /// holds no other child Job of this gang, and no pod of another JobSet's child Jobs at the
    /// group's priority (JobSet's anti-affinity compares `jobset.sigs.k8s.io/priority`), in any
    /// namespace — or its own domain when some of its members are bound already. Domains
    /// other exclusive child Jobs hold are out of its members' feasible nodes already
    /// ([`super::exclusive`]). Groups go in name order,
    /// each to the least free domain that takes all of it.
    fn exclusive(&self, r: &PlacementRequest<'_>, key: &str, start: Work) -> Placement {
        let gang = r.gang;
        let topo = self.caches.topology(key);
        let group_of = |p: usize| job_of(&self.snap.pods[p]);
        let domain_of = |p: usize| {
            let node = self.snap.pods[p].node_name.as_deref()?;
            let d = topo.node_domain[self.caches.node_of(node)?];
            (d != u32::MAX).then_some(d)
        };
        // Domain → the group holding it, from the members already on nodes.
        let mut held: std::collections::BTreeMap<u32, String> = std::collections::BTreeMap::new();
        for &p in &r.members.all {
            if self.snap.pods[p].uses_node()
                && let Some(d) = domain_of(p)
            {
                held.entry(d).or_insert_with(|| group_of(p));
            }
        }
        // Other JobSets' child Jobs on nodes, bound or placed earlier in this cycle: the
        // priorities (ids of [`exclusive::priority_of`]) of their pods per domain. A group is
        // kept out of a domain that holds one of its own priority, as its leader's anti-affinity
        // says. A few priorities per domain at most: a short list each, no hashing per pod.
        let mut foreign: Vec<Vec<u32>> = vec![Vec::new(); topo.domains.len()];
        let mut count = |d: u32, pod: &crate::read::model::Pod, priority: u32| {
            if let Some(seen) = foreign.get_mut(usize::try_from(d).unwrap_or(usize::MAX))
                && !seen.contains(&priority)
                && pod.gang.as_ref().is_none_or(|m| m.gang != gang.key)
            {
                seen.push(priority);
            }
        };
        for j in self.caches.jobset_pods().iter() {
            count(topo.node_domain[j.node], &self.snap.pods[j.pod], j.priority);
        }
        (r.earlier)(&mut |p, n| {
            let pod = &self.snap.pods[p];
            if exclusive::is_jobset_pod(pod) {
                count(topo.node_domain[n], pod, self.caches.priority_id(pod));
            }
        });
        let mut groups: std::collections::BTreeMap<String, Vec<usize>> = std::collections::BTreeMap::new();
        for &p in r.members.pending.values().flatten() {
            groups.entry(group_of(p)).or_default().push(p);
        }
        let priorities: Vec<u32> = groups
            .values()
            .filter_map(|pods| pods.first())
            .map(|&p| self.caches.priority_id(&self.snap.pods[p]))
            .collect();
        let others = foreign.iter().filter(|ps| ps.iter().any(|p| priorities.contains(p))).count();
        let mut w = start;
        let mut placed_groups = 0usize;
        for (group, pods) in &groups {
            let priority = pods.first().map_or(u32::MAX, |&p| self.caches.priority_id(&self.snap.pods[p]));
            let own = held.iter().find(|(_, g)| *g == group).map(|(&d, _)| d);
            let candidates: Vec<usize> = match own {
                Some(d) => vec![usize::try_from(d).unwrap_or(usize::MAX)],
                None => (0..topo.domains.len())
                    .filter(|&d| {
                        !held.contains_key(&u32::try_from(d).unwrap_or(u32::MAX))
                            && !foreign[d].contains(&priority)
                    })
                    .collect(),
            };
            for (_, d) in self.by_free(r, &topo, candidates, &w) {
                let target = u32::try_from(d).unwrap_or(u32::MAX);
                let filter: Filter = vec![(topo.clone(), target)];
                let mut trial = w.clone();
                let mut whole = true;
                for &p in pods {
                    let leaf = tree::leaf_of(
                        gang,
                        self.snap.pods[p].gang.as_ref().and_then(|m| m.subgroup.as_deref()),
                    )
                    .unwrap_or("")
                    .to_string();
                    let before = Tentative::of(r.siblings, &trial.bindings);
                    match self.best_node(
                        r.ledger,
                        &trial.txn,
                        r.demand,
                        p,
                        Spot { filter: Some(&filter), reserved: r.reserved.get(&p), before },
                    ) {
                        Some(n) => self.place(r, &mut trial, &leaf, p, n),
                        None => {
                            whole = false;
                            break;
                        }
                    }
                }
                if whole {
                    w = trial;
                    held.insert(target, group.clone());
                    placed_groups += 1;
                    break;
                }
            }
        }
        let mut p = self.finish(r, w, None, Vec::new());
        if !p.satisfied && !r.extras {
            let free = self.whole_once(
                r,
                Work {
                    txn: r.txn.clone(),
                    bindings: Vec::new(),
                    counts: r.members.held.clone(),
                    revisited: 0,
                },
                &Vec::new(),
                false,
            );
            p.topology_failed = tree::satisfied(gang, &free.counts);
            p.exclusive_note = Some(format!(
                "each of its {} member group(s) (child jobs) needs a {key} domain of its own (exclusive topology): {placed_groups} found one; the cluster has {} {key} domain(s), {} held by its other groups, {others} by other JobSets' child jobs",
                groups.len(),
                topo.domains.len(),
                held.len().saturating_sub(placed_groups),
            ));
        }
        p
    }

    /// Minimums first; extras once the tree is satisfied (or right away when placing extras).
    /// When the minimums are not met and a member found no devices where the gang's own earlier
    /// members took them, earlier device choices are revisited ([`Placer::revisit`]).
    fn whole(&self, r: &PlacementRequest<'_>, start: Work, filter: &Filter, keep_partial: bool) -> Work {
        let volumes = self.caches.volumes();
        if r.extras || !volumes.has_devices() {
            return self.whole_once(r, start, filter, keep_partial);
        }
        volumes.clear_contended();
        self.decisions.borrow_mut().clear();
        self.logging.set(true);
        let first = self.whole_once(r, start.clone(), filter, keep_partial);
        let out = if tree::satisfied(r.gang, &first.counts) || !volumes.revisable(&r.members.all) {
            first
        } else {
            self.revisit(r, start, filter, keep_partial).unwrap_or(first)
        };
        self.logging.set(false);
        self.decisions.borrow_mut().clear();
        out
    }

    /// Chronological backtracking over the device choices of the attempt just made: the first
    /// member that found no devices where the step's own placements took them (or whose choices
    /// were all revisited), and the member placed with devices last before it: that member's
    /// choice (node and devices of its last claim) is not made again, the choices made after it
    /// are free again, and the gang is placed anew — at most [`MAX_DEVICE_REVISITS`] times and
    /// [`GANG_DEVICE_REVISITS`] members for the gang, [`CYCLE_DEVICE_REVISITS`] members in the
    /// cycle; only when another choice could matter ([`Volumes::revisable`]). Between members
    /// whose claims ask alike with `firstAvailable`, a choice revisited is its subrequests, not
    /// its devices. The first placement that satisfies the gang is kept; `None` when none did
    /// (the first attempt's notes are put back).
    fn revisit(
        &self,
        r: &PlacementRequest<'_>,
        start: Work,
        filter: &Filter,
        keep_partial: bool,
    ) -> Option<Work> {
        let volumes = self.caches.volumes();
        let notes = volumes.notes_of(&r.members.all);
        let mut nogoods: Vec<super::volumes::Nogood> = Vec::new();
        let mut found = None;
        let mut tries = 0;
        loop {
            let decisions = std::mem::take(&mut *self.decisions.borrow_mut());
            let stuck = decisions.iter().position(|d| match d {
                Decision::Failed(p) => volumes.contended(*p) || nogoods.iter().any(|g| g.pod == *p),
                Decision::Placed { .. } => false,
            });
            let Some(stuck) = stuck else { break };
            let Some(back) = decisions[..stuck].iter().rposition(|d| matches!(d, Decision::Placed { .. }))
            else {
                break;
            };
            let cost = u32::try_from(r.members.all.len()).unwrap_or(u32::MAX).max(1);
            let (at, times, members) = self.gang_revisits.get();
            let (Some(times), Some(members), Some(cycle)) =
                (times.checked_sub(1), members.checked_sub(cost), self.revisits.get().checked_sub(cost))
            else {
                break;
            };
            self.gang_revisits.set((at, times, members));
            self.revisits.set(cycle);
            // Choices made after the one revisited were made beside it: free again.
            let later: HashSet<usize> = decisions[back + 1..]
                .iter()
                .map(|d| match d {
                    Decision::Placed { pod, .. } | Decision::Failed(pod) => *pod,
                })
                .collect();
            nogoods.retain(|g| !later.contains(&g.pod));
            let Decision::Placed { pod, node, claim, devices, names } = decisions[back].clone() else {
                break;
            };
            let Decision::Failed(failed) = decisions[stuck] else { break };
            // Between members whose claims ask alike, another device for the same subrequests only
            // swaps theirs: the next choice is another subrequest (when the claim has any: a
            // request without `firstAvailable` has one name whatever it takes).
            let avoid = if volumes.asks_alike(pod, failed) && volumes.has_alternatives(&claim) {
                super::devices::Avoid::Names(names)
            } else {
                super::devices::Avoid::Devices(devices)
            };
            nogoods.push(super::volumes::Nogood { pod, node, claim, avoid });
            volumes.set_nogoods(nogoods.clone());
            volumes.clear_contended();
            let mut w = self.whole_once(r, start.clone(), filter, keep_partial);
            tries += 1;
            if tree::satisfied(r.gang, &w.counts) {
                w.revisited = tries;
                found = Some(w);
                break;
            }
        }
        volumes.set_nogoods(Vec::new());
        self.decisions.borrow_mut().clear();
        if found.is_none() {
            volumes.restore_notes(notes);
        }
        found
    }

    fn whole_once(&self, r: &PlacementRequest<'_>, start: Work, filter: &Filter, keep_partial: bool) -> Work {
        if r.extras {
            let mut w = start;
            self.subtree(r, None, filter, &mut w, Pass { cap: false, keep_partial: true }, 0);
            return w;
        }
        let mut w = start;
        self.subtree(r, None, filter, &mut w, Pass { cap: true, keep_partial }, 0);
        // Once every minimum holds, members beyond them go too: they are extras, or the pods that
        // lift the gang to its pod floor (which the tree's minimums alone do not reach) — only
        // the latter when the minimum alone is asked for.
        if tree::minimums_met(r.gang, &w.counts) && !(r.minimum_only && tree::satisfied(r.gang, &w.counts)) {
            self.subtree(r, None, filter, &mut w, Pass { cap: false, keep_partial: false }, 0);
        }
        w
    }

    /// A lower bound of the scarce resource (see [`Placer::leftover`]) one domain must have free
    /// to take the gang's minimum — the pods it still needs beyond those it holds, each at the
    /// least any pending member asks (0 when the minimum is no pod count) — and that least.
    fn least_needed(&self, r: &PlacementRequest<'_>) -> (i64, i64) {
        let scarce = Self::scarce(r);
        let held: u64 = r.members.held.values().map(|&n| u64::from(n)).sum();
        let least = r
            .members
            .pending
            .values()
            .flatten()
            .map(|&p| match scarce {
                Some(res) => r.demand[p].0.iter().find(|(x, _)| *x == res).map_or(0, |&(_, a)| a),
                None => 1,
            })
            .min()
            .unwrap_or(0);
        let Some(pods) = r.gang.min_pods().map(|m| m.saturating_sub(held)) else { return (0, least) };
        (i64::try_from(pods).unwrap_or(i64::MAX).saturating_mul(least), least)
    }

    /// The resource domains are compared by: the scarcest one the gang's first pending member
    /// requests (`None`: pod slots).
    fn scarce(r: &PlacementRequest<'_>) -> Option<usize> {
        let first = r.members.pending.values().flatten().next();
        first.and_then(|&p| r.demand[p].0.first()).map(|&(res, _)| res)
    }

    /// The most of the scarce resource (see [`Placer::leftover`]) the pending members under
    /// subgroup `under` (`None`: the whole gang) could take between them.
    fn most_taken(&self, r: &PlacementRequest<'_>, under: Option<&str>) -> i64 {
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
        r: &PlacementRequest<'_>,
        topo: &Rc<Topology>,
        domains: Vec<usize>,
        w: &Work,
    ) -> Vec<(i64, usize)> {
        let mut out = self.free_of(r, topo, domains, w);
        out.sort_unstable();
        out
    }

    /// [`Placer::leftover`] of each of `domains`, as `(free, domain)`: the committed totals read
    /// once, and what `w` took added by one pass over the nodes it touched — O(domains + touched),
    /// not a look-up and a pass per domain (a rack level has hundreds of domains).
    fn free_of(
        &self,
        r: &PlacementRequest<'_>,
        topo: &Rc<Topology>,
        domains: Vec<usize>,
        w: &Work,
    ) -> Vec<(i64, usize)> {
        let scarce = Self::scarce(r);
        let value = |txn: &Txn, n: usize| {
            match scarce {
                Some(res) => r.ledger.free(txn, n, res),
                None => r.ledger.free_pods(txn, n),
            }
            .max(0)
        };
        let committed = Txn::default();
        let mut taken: HashMap<u32, i64> = HashMap::new();
        for n in w.txn.touched() {
            let d = topo.node_domain[n];
            if d != u32::MAX {
                let e = taken.entry(d).or_default();
                *e = e.saturating_add(value(&w.txn, n).saturating_sub(value(&committed, n)));
            }
        }
        self.caches.with_domain_free(r.ledger, topo, scarce, |totals| {
            domains
                .into_iter()
                .map(|d| {
                    let base = totals.get(d).copied().unwrap_or(0);
                    let extra = u32::try_from(d).ok().and_then(|k| taken.get(&k)).copied().unwrap_or(0);
                    (base.saturating_add(extra), d)
                })
                .collect()
        })
    }

    /// Free capacity of the gang's scarcest requested resource left in domain `d` of `topo`
    /// after `w`: the capacity a domain choice strands. Lower is better. The committed total per
    /// domain is kept up to date from the state's change log; only the nodes `w` touched are
    /// visited per call.
    fn leftover(&self, r: &PlacementRequest<'_>, topo: &Rc<Topology>, d: usize, w: &Work) -> i64 {
        self.free_of(r, topo, vec![d], w).first().map_or(0, |&(free, _)| free)
    }

    /// Domains worth trying for a subtree: the one its members already occupy, if any, else all.
    fn candidate_domains(
        &self,
        r: &PlacementRequest<'_>,
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
                self.snap.pods[p].node_name.as_deref().and_then(|name| self.caches.node_of(name))
            });
        if let Some(n) = placed.chain(bound).next() {
            let d = topo.node_domain[n];
            return if d == u32::MAX { Vec::new() } else { vec![usize::try_from(d).unwrap_or(usize::MAX)] };
        }
        (0..topo.domains.len()).collect()
    }

    /// Places the subtree under `name` (`None`: the root). `cap`: only up to each leaf's minimum.
    fn subtree(
        &self,
        r: &PlacementRequest<'_>,
        name: Option<&str>,
        filter: &Filter,
        w: &mut Work,
        pass: Pass,
        depth: usize,
    ) {
        let Pass { cap, keep_partial } = pass;
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
            // Its preferred level first: the subtree whole in one of its domains (within one
            // domain of its required key), best fit; else as its required key alone allows.
            if let Some(pkey) =
                child.topology_preferred.as_deref().filter(|p| Some(*p) != child.topology_key.as_deref())
                && !r.extras
                && let Some(chosen) = self
                    .preferred_levels(gang, pkey, child.topology_key.as_deref())
                    .into_iter()
                    .find_map(|level| self.child_preferred(r, child, level, filter, w, pass, depth))
            {
                *w = chosen;
                continue;
            }
            match &child.topology_key {
                Some(key) => {
                    let topo = self.caches.topology(key);
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
                        self.child(r, child, &f, &mut trial, pass, depth);
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
                    self.child(r, child, filter, &mut trial, pass, depth);
                    if keep_partial || satisfied(&trial) {
                        *w = trial;
                    }
                }
            }
        }
    }

    /// The subtree under `child` whole in one domain of its preferred key `pkey` (within one
    /// domain of its required key, when it has one), the one that strands the least; `None` when
    /// no such domain satisfies it.
    #[allow(clippy::too_many_arguments)]
    fn child_preferred(
        &self,
        r: &PlacementRequest<'_>,
        child: &crate::read::model::SubGroup,
        pkey: &str,
        filter: &Filter,
        w: &Work,
        pass: Pass,
        depth: usize,
    ) -> Option<Work> {
        let ptopo = self.caches.topology(pkey);
        let rtopo = child.topology_key.as_deref().map(|k| self.caches.topology(k));
        let mut best: Option<(i64, usize, Work)> = None;
        let most = self.most_taken(r, Some(&child.name));
        let domains = self.candidate_domains(r, &ptopo, Some(&child.name), w);
        let mut failed = 0;
        for (free, d) in self.by_free(r, &ptopo, domains, w) {
            if best.as_ref().is_some_and(|(l, _, _)| free.saturating_sub(most) >= *l)
                || failed >= MAX_PREFERRED_TRIALS
            {
                break;
            }
            let mut f = filter.clone();
            if let Some(rt) = &rtopo {
                let first = ptopo.domains[d].1.first()?;
                let within = rt.node_domain[*first];
                if within == u32::MAX {
                    continue;
                }
                f.push((rt.clone(), within));
            }
            f.push((ptopo.clone(), u32::try_from(d).unwrap_or(u32::MAX)));
            let mut trial = w.clone();
            self.child(r, child, &f, &mut trial, pass, depth);
            if tree::subgroup_satisfied(r.gang, &child.name, &trial.counts, depth) {
                let left = self.leftover(r, &ptopo, d, &trial);
                if best.as_ref().is_none_or(|(l, bd, _)| (left, d) < (*l, *bd)) {
                    best = Some((left, d, trial));
                }
            } else {
                failed += 1;
            }
        }
        best.map(|(_, _, t)| t)
    }

    /// Places the subtree under `child`; when its minimums hold but not its pod floor (KAI's
    /// mid-level `minMember`), members beyond the leaves' minimums below it go too, leaf by leaf
    /// in name order, up to the floor only: more would take room a later sibling's minimum needs
    /// (extras come once the whole tree holds, in [`Placer::whole`]).
    fn child(
        &self,
        r: &PlacementRequest<'_>,
        child: &crate::read::model::SubGroup,
        filter: &Filter,
        w: &mut Work,
        pass: Pass,
        depth: usize,
    ) {
        self.subtree(r, Some(&child.name), filter, w, pass, depth + 1);
        if !pass.cap
            || child.pod_floor == 0
            || !tree::subgroup_minimums_met(r.gang, &child.name, &w.counts, depth)
        {
            return;
        }
        let mut short =
            u64::from(child.pod_floor).saturating_sub(tree::pods_under(r.gang, &child.name, &w.counts));
        // A set, not a scan of the bindings per pod: a floor over thousands of pods stays linear.
        let placed: std::collections::HashSet<usize> = w.bindings.iter().map(|&(q, _)| q).collect();
        for leaf in tree::leaves_under(r.gang, &child.name) {
            if short == 0 {
                return;
            }
            // A leaf bound to one domain of its own key (a Volcano partition's tier) keeps its
            // members there: the domain of those placed or bound; else, of the domains (tightest
            // first, a few), the one that takes the most of what is short.
            let topo = r
                .gang
                .subgroups
                .iter()
                .find(|s| s.name == leaf)
                .and_then(|s| s.topology_key.as_deref())
                .map(|k| self.caches.topology(k));
            let Some(t) = topo else {
                short -= self.fill(r, filter, None, &leaf, &placed, short, w);
                continue;
            };
            let domains = self.candidate_domains(r, &t, Some(&leaf), w);
            match domains.as_slice() {
                // A member on a node in no domain of the key: none can join it.
                [] => {}
                &[d] => {
                    let d = u32::try_from(d).unwrap_or(u32::MAX);
                    short -= self.fill(r, filter, Some((&t, d)), &leaf, &placed, short, w);
                }
                _ => {
                    let mut best: Option<(u64, Work)> = None;
                    for (_, d) in self.by_free(r, &t, domains, w).into_iter().take(MAX_PREFERRED_TRIALS) {
                        let mut trial = w.clone();
                        let d = u32::try_from(d).unwrap_or(u32::MAX);
                        let n = self.fill(r, filter, Some((&t, d)), &leaf, &placed, short, &mut trial);
                        if best.as_ref().is_none_or(|(b, _)| n > *b) {
                            best = Some((n, trial));
                        }
                        if n == short {
                            break;
                        }
                    }
                    if let Some((n, trial)) = best {
                        *w = trial;
                        short -= n;
                    }
                }
            }
        }
    }

    /// Places up to `most` pending members of `leaf` not in `placed`, each on the best node within
    /// `filter` and, with `within`, within that domain of its topology; how many it placed.
    #[allow(clippy::too_many_arguments)]
    fn fill(
        &self,
        r: &PlacementRequest<'_>,
        filter: &Filter,
        within: Option<(&Rc<Topology>, u32)>,
        leaf: &str,
        placed: &std::collections::HashSet<usize>,
        most: u64,
        w: &mut Work,
    ) -> u64 {
        let mut lf = filter.clone();
        if let Some((t, d)) = within {
            lf.push((t.clone(), d));
        }
        let f = if lf.is_empty() { None } else { Some(&lf) };
        let mut n = 0;
        for &p in r.members.pending.get(leaf).into_iter().flatten() {
            if n == most {
                break;
            }
            if placed.contains(&p) {
                continue;
            }
            let before = Tentative::of(r.siblings, &w.bindings);
            if let Some(node) = self.best_node(
                r.ledger,
                &w.txn,
                r.demand,
                p,
                Spot { filter: f, reserved: r.reserved.get(&p), before },
            ) {
                self.place(r, w, leaf, p, node);
                n += 1;
            }
        }
        n
    }

    fn leaf(&self, r: &PlacementRequest<'_>, leaf: &str, filter: &Filter, w: &mut Work, cap: bool) {
        let Some(pods) = r.members.pending.get(leaf) else { return };
        let min = if r.gang.subgroups.is_empty() {
            r.gang.min_member
        } else {
            r.gang.subgroups.iter().find(|s| s.name == leaf).map_or(0, |s| s.min_member)
        };
        let filter = if filter.is_empty() { None } else { Some(filter) };
        // Past a few bindings, a set rather than a scan of them per pod: an extras pass over a
        // leaf of thousands of members, after its minimum was placed, stays linear.
        let todo: Vec<usize> = if w.bindings.len() <= 16 {
            pods.iter().copied().filter(|p| !w.bindings.iter().any(|&(q, _)| q == *p)).collect()
        } else {
            let placed: std::collections::HashSet<usize> = w.bindings.iter().map(|&(q, _)| q).collect();
            pods.iter().copied().filter(|p| !placed.contains(p)).collect()
        };
        let mut i = 0;
        while i < todo.len() {
            let room =
                if cap { min.saturating_sub(w.counts.get(leaf).copied().unwrap_or(0)) } else { u32::MAX };
            if room == 0 {
                break;
            }
            let p = todo[i];
            let pinned = self.snap.pods[p].nominated_node.is_some()
                || r.reserved.contains_key(&p)
                || self.volume_dynamic(p);
            if pinned || self.constrained(p, Tentative::of(r.siblings, &w.bindings)) {
                let before = Tentative::of(r.siblings, &w.bindings);
                let found = self.best_node(
                    r.ledger,
                    &w.txn,
                    r.demand,
                    p,
                    Spot { filter, reserved: r.reserved.get(&p), before },
                );
                if let Some(n) = found {
                    self.place(r, w, leaf, p, n);
                }
                self.decided(p, found, &w.txn);
                i += 1;
                continue;
            }
            // A run of members shaped alike (same requests, same constraints) is placed from one
            // scan of the nodes: O(nodes + members · log nodes) instead of O(nodes · members).
            let feasible = self.caches.feasible(p);
            let mut end = i + 1;
            while end < todo.len() {
                let q = todo[end];
                let alike = r.demand.same(q, p)
                    && Rc::ptr_eq(&self.caches.feasible(q), &feasible)
                    && self.snap.pods[q].nominated_node.is_none()
                    && !r.reserved.contains_key(&q)
                    && !self.volume_dynamic(q)
                    && !self.constrained(q, Tentative::of(r.siblings, &w.bindings));
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

    /// Logs pod `p`'s device decision (placed on `node`, or not) for [`Placer::revisit`].
    fn decided(&self, p: usize, node: Option<usize>, txn: &Txn) {
        let volumes = self.caches.volumes();
        if !self.logging.get() || !volumes.has_devices() || !volumes.allocates(p) {
            return;
        }
        let d = match node {
            None => Decision::Failed(p),
            Some(node) => match volumes.last_allocation(p, txn) {
                Some((claim, devices, names)) => Decision::Placed { pod: p, node, claim, devices, names },
                None => return,
            },
        };
        self.decisions.borrow_mut().push(d);
    }

    fn place(&self, r: &PlacementRequest<'_>, w: &mut Work, leaf: &str, p: usize, n: usize) {
        self.take(r.ledger, &mut w.txn, r.demand, p, n);
        w.bindings.push((p, n));
        *w.counts.entry(leaf.to_string()).or_default() += 1;
    }

    /// Places identical members (a run of [`Placer::alike`] pods) one by one, as
    /// [`Placer::alike`] does.
    fn place_run(
        &self,
        r: &PlacementRequest<'_>,
        w: &mut Work,
        leaf: &str,
        run: &[usize],
        feasible: &Rc<Feasible>,
        filter: Option<&Filter>,
    ) {
        let Some(&first) = run.first() else { return };
        let ask = Ask { demand: &r.demand[first], pod: &self.snap.pods[first], feasible, filter };
        for (p, n) in self.alike(r.ledger, &mut w.txn, ask, run) {
            w.bindings.push((p, n));
            *w.counts.entry(leaf.to_string()).or_default() += 1;
        }
    }

    /// One pod of demand `d` taken from a node whose `room` (what it has left of each demanded
    /// resource, in the demand's order, then its free pod slots) a run keeps: the node's key
    /// `key` re-keyed for what is left, or `None` when the next such pod no longer fits.
    #[inline]
    fn take_room(&self, room: &mut [i64], d: &super::ledger::Demand, key: NodeKey) -> Option<NodeKey> {
        let width = d.0.len();
        for (slot, &(_, a)) in room.iter_mut().zip(&d.0) {
            *slot = slot.saturating_sub(a);
        }
        room[width] = room[width].saturating_sub(1);
        let fits = room[width] >= 1 && room.iter().zip(&d.0).all(|(&f, &(_, a))| a <= 0 || f >= a);
        fits.then(|| self.caches.rekey(key, width, room[..width].iter().copied(), room[width]))
    }

    /// Places pods alike (`ask`'s demand and feasible nodes, no node of their own to prefer) one
    /// by one on the best node each time, exactly as calling [`Placer::best_node`] per pod would,
    /// in one pass over the nodes; returns (pod, node) for those that fit, in `run`'s order.
    ///
    /// Why one pass suffices: a node's key only changes when a pod lands on it, so the nodes a
    /// run of `k` pods uses are among the `k` best before the run starts (bin-packing makes a
    /// used node better, spreading makes it worse; either way untouched nodes are taken in their
    /// initial order). The pass keeps those `k` in a bounded heap, then places from them.
    ///
    /// The run keeps what each of those nodes has left of the demand in a dense table of its own
    /// and writes it to `txn` once per node at the end: a long run (a Deployment's thousands of
    /// replicas) costs a heap operation per pod, not lookups in `txn` per pod.
    pub fn alike(&self, ledger: &Ledger, txn: &mut Txn, ask: Ask<'_>, run: &[usize]) -> Vec<(usize, usize)> {
        let d = ask.demand;
        let best = self.caches.candidates(ledger, txn, ask, run.len());
        let width = d.0.len();
        // Per candidate (by position in `best`): what it has left of each demanded resource, in
        // the demand's order, then its free pod slots; and how many of the run it took.
        let mut left: Vec<i64> = Vec::with_capacity(best.len() * (width + 1));
        for &(_, n) in &best {
            left.extend(d.0.iter().map(|&(r, _)| ledger.free(txn, n, r)));
            left.push(ledger.free_pods(txn, n));
        }
        let mut taken = vec![0i64; best.len()];
        // Keys are unique (they end in the node's name rank), so positions never break a tie.
        let mut heap: BinaryHeap<Reverse<(NodeKey, usize)>> =
            best.iter().enumerate().map(|(i, &(key, _))| Reverse((key, i))).collect();
        let mut placed = Vec::with_capacity(run.len().min(heap.len()));
        for &p in run {
            // The best node takes the pod and is re-keyed where it stands: with bin-packing its key
            // only gets better, so it stays on top at no cost (a pop and a push would walk the
            // heap twice per pod).
            let Some(mut top) = heap.peek_mut() else { break };
            let Reverse((key, i)) = *top;
            placed.push((p, best[i].1));
            taken[i] += 1;
            match self.take_room(&mut left[i * (width + 1)..(i + 1) * (width + 1)], d, key) {
                Some(key) => *top = Reverse((key, i)),
                None => {
                    PeekMut::pop(top);
                }
            }
        }
        for (i, &times) in taken.iter().enumerate() {
            if times > 0 {
                ledger.take_times(txn, best[i].1, d, times);
            }
        }
        placed
    }
}
