//! Messages a user can act on: why a gang does not fit, down to nodes and domains.
//!
//! "needs 4 pods × (nvidia.com/gpu 8, cpu 8); 3 of 12 nodes fit (gpu-1, gpu-2, gpu-5); 7 lack
//! nvidia.com/gpu; 2 have taint gpu=reserved:NoSchedule"

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use super::filter::{Static, static_fit};
use super::joint::Block;
use super::ledger::{Demand, Ledger, ResourceIndex, Txn};
use super::members::Members;
use super::place::{Feasible, Placement};
use super::volumes::{Block as VolumeBlock, Volumes};
use crate::read::model::{Gang, Node, Pod};
use crate::read::resources::Resources;
use crate::read::tree;

/// How many node names a message lists before "…".
const MAX_NAMES: usize = 5;

/// Why gang `gang` (its members `m`) could not be placed as `a` tried: what it needs, and why
/// nodes cannot take it — `fit(p)` says that for its member `p` ([`FitSummaries::get`]).
pub(super) fn unplaced(
    gang: &Gang,
    m: &Members,
    pods: &[Pod],
    a: &Placement,
    fit: impl Fn(usize) -> String,
) -> String {
    let held: u32 = m.held.values().sum();
    let total_min = gang.min_pods().unwrap_or(u64::from(gang.min_member));
    let need = total_min.saturating_sub(u64::from(held));

    // The first leaf still short of its minimum, and one of its unplaced members.
    let minimums = tree::leaf_minimums(gang);
    let placed: Vec<usize> = a.bindings.iter().map(|&(p, _)| p).collect();
    let short_leaf = minimums
        .iter()
        .filter(|(leaf, min)| a.counts.get(*leaf).copied().unwrap_or(0) < **min)
        .find_map(|(leaf, _)| {
            m.pending.get(leaf).and_then(|ps| ps.iter().find(|p| !placed.contains(p))).map(|&p| (leaf, p))
        })
        .or_else(|| {
            m.pending
                .iter()
                .find_map(|(leaf, ps)| ps.iter().find(|p| !placed.contains(p)).map(|&p| (leaf, p)))
        });

    let mut parts: Vec<String> = Vec::new();
    if let Some((leaf, p)) = short_leaf {
        let shape_of = |p: usize| {
            let r = &pods[p].requests;
            if r.is_empty() { "no requests".to_string() } else { scarce_first(r) }
        };
        // Members that differ (a launcher asking for nothing, workers asking for GPUs) are listed
        // per shape, each with how many waiting members have it; alike members in one line.
        let mut shapes: BTreeMap<String, usize> = BTreeMap::new();
        for &q in m.pending.get(leaf).into_iter().flatten() {
            *shapes.entry(shape_of(q)).or_default() += 1;
        }
        let shape = if shapes.len() > 1 {
            let each: Vec<String> = shapes.iter().map(|(s, n)| format!("{n} × ({s})")).collect();
            format!(" of these shapes: {}", each.join(", "))
        } else {
            format!(" × ({})", shape_of(p))
        };
        let leaf_need =
            minimums.get(leaf).copied().unwrap_or(0).saturating_sub(m.held.get(leaf).copied().unwrap_or(0));
        if leaf.is_empty() {
            parts.push(format!("needs {need} pods{shape}"));
        } else {
            // A subgroup's own bound (the gang's is said below when it is what blocks).
            let within = subgroup_key(gang, leaf).map_or(String::new(), |key| {
                match crate::read::hypernode::tier_of(key) {
                    Some(t) => format!(", all within one tier-{t} Volcano HyperNode ({key})"),
                    None => format!(", all within one {key} domain"),
                }
            });
            parts.push(format!("subgroup {leaf} needs {leaf_need} pods{shape}{within}"));
        }
        if let Some(note) = a.blocked.as_ref().or(a.exclusive_note.as_ref()) {
            parts.push(note.clone());
        } else if a.topology_failed {
            parts.push(topology(gang.topology_key.as_deref().unwrap_or(""), a));
        } else {
            parts.push(fit(p));
            parts.push(format!(
                "room for {} of the {need} members needed",
                a.bindings.len().min(usize::try_from(need).unwrap_or(usize::MAX))
            ));
        }
    } else if let Some(key) = gang.topology_key.as_deref().filter(|_| a.topology_failed) {
        parts.push(topology(key, a));
    }
    if m.foreign > 0 {
        parts.push(format!("{} member(s) name another scheduler in spec.schedulerName", m.foreign));
    }
    if let Some(first) = m.first_unevaluated.and_then(|p| pods.get(p)) {
        let waiting: u32 = m.unevaluated.values().sum();
        parts.push(format!("{waiting} member(s) {}", super::members::unevaluated_note(first)));
    }
    if parts.is_empty() {
        parts.push(format!("cannot place the minimum of {total_min} member(s)"));
    }
    parts.join("; ")
}

/// The required key that bounds subgroup `leaf`'s members: its own, else its nearest ancestor's
/// (not the gang's). Walks at most the tree's depth.
fn subgroup_key<'g>(gang: &'g Gang, leaf: &str) -> Option<&'g str> {
    let mut name = Some(leaf);
    for _ in 0..=tree::WALK_DEPTH_LIMIT {
        let s = gang.subgroups.iter().find(|s| Some(s.name.as_str()) == name)?;
        if let Some(key) = s.topology_key.as_deref() {
            return Some(key);
        }
        name = s.parent.as_deref();
    }
    None
}

/// `nvidia.com/gpu 8, cpu 8, memory 64Gi`: extended resources first, as a user scans for them.
fn scarce_first(r: &Resources) -> String {
    let mut items: Vec<(&str, i64)> = r.iter().filter(|(_, a)| *a > 0).collect();
    items.sort_by_key(|(name, _)| {
        let rank = match *name {
            "cpu" => 1,
            "memory" => 2,
            _ if name.contains('/') => 0,
            _ => 3,
        };
        (rank, name.to_string())
    });
    items
        .iter()
        .map(|(n, a)| format!("{n} {}", Resources::format_amount(n, *a)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn names(list: &[&str]) -> String {
    let mut s = list.iter().take(MAX_NAMES).copied().collect::<Vec<_>>().join(", ");
    if list.len() > MAX_NAMES {
        s.push_str(", …");
    }
    s
}

/// What a summary is remembered by: the feasible set (by address), the demand, and the pod when
/// it has volumes (its summary is its own).
type Shape = (usize, Demand, Option<usize>);

/// Why each node can or cannot take a pod, as a message ("3 of 12 nodes fit (…); 7 lack
/// nvidia.com/gpu"), remembered per pod shape (feasible set and demand) while the ledger is
/// unchanged: once a cluster is full, every waiting gang of the same shape gets the same summary
/// without another pass over the nodes. A pod with volumes has a summary of its own.
#[derive(Debug, Default)]
pub(super) struct FitSummaries {
    /// (feasible set, demand, the pod when it has volumes) → (ledger version, summary).
    by_shape: RefCell<HashMap<Shape, (u64, String)>>,
}

impl FitSummaries {
    /// The summary for pod `p` (its `demand`, its `feasible` nodes) as `ledger` stands; `blocks`
    /// says, per node, why the inter-pod filters keep it off (with the pods in the way), when they
    /// can (then the summary is the pod's own, not its shape's); `volumes`, why its volumes do.
    #[allow(clippy::too_many_arguments)]
    pub fn get(
        &self,
        nodes: &[Node],
        pods: &[Pod],
        (p, pod): (usize, &Pod),
        demand: &Demand,
        feasible: &Feasible,
        ledger: &Ledger,
        res: &ResourceIndex,
        blocks: Option<super::place::Blocks>,
        volumes: &Volumes<'_>,
    ) -> String {
        if let Some(wait) = volumes.wait(p) {
            return wait;
        }
        if let Some((per_node, who)) = blocks {
            let blocks = Some((pods, per_node.as_slice(), &who));
            return summary(nodes, (p, pod), demand, feasible, ledger, res, Refusals { blocks, volumes });
        }
        let own = !(pod.volumes.is_empty() && pod.resource_claims.is_empty());
        let shape = (std::ptr::from_ref(feasible) as usize, demand.clone(), own.then_some(p));
        if let Some((version, text)) = self.by_shape.borrow().get(&shape)
            && *version == ledger.version
        {
            return text.clone();
        }
        let text =
            summary(nodes, (p, pod), demand, feasible, ledger, res, Refusals { blocks: None, volumes });
        self.by_shape.borrow_mut().insert(shape, (ledger.version, text.clone()));
        text
    }
}

/// Every pod (to name them), per node the inter-pod filters' reason, and per reason the pods in
/// its way.
type Blocks<'b> = (&'b [Pod], &'b [Option<Block>], &'b HashMap<Block, Vec<usize>>);

/// What else keeps a pod off a node that has room: the inter-pod filters (`blocks`) and its
/// volumes.
struct Refusals<'b, 'v> {
    blocks: Option<Blocks<'b>>,
    volumes: &'b Volumes<'v>,
}

/// Why a node that has room refuses the pod's volumes, given what other placements took.
fn refused(block: &VolumeBlock) -> String {
    match block {
        VolumeBlock::NoVolume(_) => "did not find available persistent volumes to bind".into(),
        VolumeBlock::Chosen(claim, _) => format!("cannot use the volume chosen for PVC {claim}"),
        VolumeBlock::Rwop(claim, _) => format!("cannot take ReadWriteOncePod PVC {claim}, in use"),
        VolumeBlock::Disk(_) => "have no available disk".into(),
        VolumeBlock::Limit(driver, limit) => format!("exceed max volume count ({limit} {driver})"),
        VolumeBlock::Devices(claim, why) => format!("cannot allocate ResourceClaim {claim}: {why}"),
        VolumeBlock::Allocated(claim, _) => {
            format!("cannot reach the devices allocated in this cycle for ResourceClaim {claim}")
        }
    }
}

fn summary(
    nodes: &[Node],
    (p, pod): (usize, &Pod),
    demand: &Demand,
    feasible: &Feasible,
    ledger: &Ledger,
    res: &ResourceIndex,
    Refusals { blocks, volumes }: Refusals<'_, '_>,
) -> String {
    let txn = Txn::default();
    let mut fit: Vec<&str> = Vec::new();
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    for (i, node) in nodes.iter().enumerate() {
        let why = match static_fit(node, pod) {
            Err(Static::NotReady) => "are not Ready".to_string(),
            Err(Static::Unschedulable) => "are cordoned (unschedulable)".to_string(),
            Err(Static::Taint(t)) => format!("have taint {t}"),
            Err(Static::NodeSelector) => "do not match the nodeSelector".to_string(),
            Err(Static::Affinity) => "do not match the required node affinity".to_string(),
            Ok(()) if !feasible.has(i) => volumes
                .why(p, i)
                .or_else(|| feasible.excluded.clone())
                .unwrap_or_else(|| "are left out".to_string()),
            Ok(()) => match ledger.fits(&txn, i, demand) {
                Ok(()) => match blocks.and_then(|(pods, b, who)| Some((pods, b.get(i)?.as_ref()?, who))) {
                    Some((pods, block, who)) => {
                        blocked(pod, pods, block, who.get(block).map_or(&[], Vec::as_slice))
                    }
                    None => match volumes.fits(p, i, ledger, &txn) {
                        Ok(()) => {
                            fit.push(&node.name);
                            continue;
                        }
                        Err(block) => refused(&block),
                    },
                },
                Err(None) => "have no free pod slots".to_string(),
                Err(Some(r)) => {
                    let name = &res.names[r];
                    // DRA devices: a count, not an allocatable (the allocator's reasons are given
                    // where the count allows the node).
                    if name != super::ledger::DEVICES && node.allocatable.get(name) < pod.requests.get(name) {
                        format!("lack {name}")
                    } else {
                        format!("have too little free {name}")
                    }
                }
            },
        };
        *groups.entry(why).or_default() += 1;
    }
    fit.sort_unstable();
    let total = nodes.len();
    let mut out = if fit.is_empty() {
        format!("0 of {total} nodes fit")
    } else {
        format!("{} of {total} nodes fit ({})", fit.len(), names(&fit))
    };
    let mut groups: Vec<(String, usize)> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for (why, n) in groups {
        out.push_str(&format!("; {n} {why}"));
    }
    out
}

/// Why the inter-pod filters keep `pod` off a node, naming the pods in the way (`who`): members of
/// its own gang by name, other pods by key.
fn blocked(pod: &Pod, pods: &[Pod], block: &Block, who: &[usize]) -> String {
    let names: Vec<String> = who
        .iter()
        .filter_map(|&q| pods.get(q))
        .map(|q| {
            let same_gang =
                q.gang.is_some() && q.gang.as_ref().map(|m| &m.gang) == pod.gang.as_ref().map(|m| &m.gang);
            if same_gang { format!("member {}", q.key.name) } else { format!("pod {}", q.key) }
        })
        .collect();
    let with = if names.is_empty() { String::new() } else { format!(" with {}", names.join(", ")) };
    let terms = pod.terms();
    let spread = |i: usize| terms.and_then(|t| t.spread.get(i));
    let key = |list: Option<&Vec<crate::read::model::terms::AffinityTerm>>, i: usize| {
        list.and_then(|l| l.get(i)).map_or("", |t| t.topology_key.as_str()).to_string()
    };
    match block {
        Block::Port(hp) => format!("have host port {hp} in use{}", with.replacen(" with", " by", 1)),
        Block::SpreadLabel(i) => format!(
            "lack label {} (topologySpreadConstraints[{i}])",
            spread(*i).map_or("", |c| c.topology_key.as_str())
        ),
        Block::Skew(i) => match spread(*i) {
            Some(c) => format!(
                "would exceed maxSkew {} of topologySpreadConstraints[{i}] ({})",
                c.max_skew, c.topology_key
            ),
            None => format!("would exceed the maxSkew of topologySpreadConstraints[{i}]"),
        },
        Block::AffinityLabel(i) => {
            format!("lack label {} (required pod affinity term [{i}])", key(terms.map(|t| &t.affinity), *i))
        }
        Block::Affinity(i) => format!(
            "have no pod its required pod affinity term [{i}] selects in their {} domain",
            key(terms.map(|t| &t.affinity), *i)
        ),
        Block::AntiAffinity(i) => {
            format!("are taken by pod anti-affinity ({}){with}", key(terms.map(|t| &t.anti_affinity), *i))
        }
        Block::Repelled(k) => {
            let by = if names.is_empty() { "a pod there".to_string() } else { names.join(", ") };
            format!("are refused by the required anti-affinity ({k}) of {by}")
        }
    }
}

fn topology(key: &str, a: &Placement) -> String {
    let mut s =
        format!("no single {key} domain has room for all of them, though the cluster as a whole does");
    if !a.domain_report.is_empty() {
        let best: Vec<String> =
            a.domain_report.iter().take(3).map(|(d, n)| format!("{key}={d} has room for {n}")).collect();
        s.push_str(&format!(" (best: {})", best.join(", ")));
    } else if let Some(t) = crate::read::hypernode::tier_of(key) {
        // A HyperNode tier is no label to look up on a node: say where its domains come from.
        s.push_str(&format!(
            " (no tier-{t} Volcano HyperNode has room for any: a node counts only as a member of one)"
        ));
    } else if let Some(l) = crate::read::network_layer::layer_of(key) {
        s.push_str(&format!(
            " (no {l} domain of the ClusterNetworkTopology has room for any: a node counts only when it carries a label of every layer above it)"
        ));
    }
    s
}
