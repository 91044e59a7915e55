//! Messages a user can act on: why a gang does not fit, down to nodes and domains.
//!
//! "needs 4 pods × (nvidia.com/gpu 8, cpu 8); 3 of 12 nodes fit (gpu-1, gpu-2, gpu-5); 7 lack
//! nvidia.com/gpu; 2 have taint gpu=reserved:NoSchedule"

use std::collections::BTreeMap;

use super::Cycle;
use super::place::Placement;
use super::state::{Static, Txn, static_fit};
use crate::resources::Resources;
use crate::tree;

/// How many node names a message lists before "…".
const MAX_NAMES: usize = 5;

pub(super) fn unplaced(c: &Cycle<'_>, g: usize, a: &Placement) -> String {
    let gang = &c.snap.gangs[g];
    let m = &c.members[g];
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
        let pod = &c.snap.pods[p];
        let shape =
            if pod.requests.is_empty() { "no requests".to_string() } else { scarce_first(&pod.requests) };
        let leaf_need =
            minimums.get(leaf).copied().unwrap_or(0).saturating_sub(m.held.get(leaf).copied().unwrap_or(0));
        if leaf.is_empty() {
            parts.push(format!("needs {need} pods × ({shape})"));
        } else {
            parts.push(format!("subgroup {leaf} needs {leaf_need} pods × ({shape})"));
        }
        if a.topology_failed {
            parts.push(topology(gang.topology_key.as_deref().unwrap_or(""), a));
        } else {
            parts.push(census(c, p));
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
    if parts.is_empty() {
        parts.push(format!("cannot place the minimum of {total_min} member(s)"));
    }
    parts.join("; ")
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

/// Why each node can or cannot take pod `p` right now, grouped. Cached per pod shape while the
/// cluster state is unchanged: once a cluster is full, every waiting gang of the same shape gets the
/// same census without another pass over the nodes.
fn census(c: &Cycle<'_>, p: usize) -> String {
    let shape = (std::rc::Rc::as_ptr(&c.place.feasible(p)) as usize, c.demand[p].clone());
    if let Some((version, text)) = c.census.borrow().get(&shape)
        && *version == c.state.version
    {
        return text.clone();
    }
    let text = census_uncached(c, p);
    c.census.borrow_mut().insert(shape, (c.state.version, text.clone()));
    text
}

fn census_uncached(c: &Cycle<'_>, p: usize) -> String {
    let pod = &c.snap.pods[p];
    let txn = Txn::default();
    let mut fit: Vec<&str> = Vec::new();
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    for (i, node) in c.snap.nodes.iter().enumerate() {
        let why = match static_fit(node, pod) {
            Err(Static::NotReady) => "are not Ready".to_string(),
            Err(Static::Unschedulable) => "are cordoned (unschedulable)".to_string(),
            Err(Static::Taint(t)) => format!("have taint {t}"),
            Err(Static::NodeSelector) => "do not match the nodeSelector".to_string(),
            Err(Static::Affinity) => "do not match the required node affinity".to_string(),
            Ok(()) => match c.state.fits(&txn, i, &c.demand[p]) {
                Ok(()) => {
                    fit.push(&node.name);
                    continue;
                }
                Err(None) => "have no free pod slots".to_string(),
                Err(Some(r)) => {
                    let name = &c.res.names[r];
                    if node.allocatable.get(name) < pod.requests.get(name) {
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
    let total = c.snap.nodes.len();
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

fn topology(key: &str, a: &Placement) -> String {
    let mut s =
        format!("no single {key} domain has room for all of them, though the cluster as a whole does");
    if !a.domain_report.is_empty() {
        let best: Vec<String> =
            a.domain_report.iter().take(3).map(|(d, n)| format!("{key}={d} has room for {n}")).collect();
        s.push_str(&format!(" (best: {})", best.join(", ")));
    }
    s
}
