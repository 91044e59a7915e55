//! The subgroup tree of a gang: when is it satisfied, and what is missing.
//!
//! A leaf's `min_member` counts pods; an inner subgroup's counts satisfied children; the root counts
//! pods when there are no subgroups, else satisfied top-level subgroups (DESIGN.md,
//! "Subgroup semantics"; `../shared/DESIGN.md` from the repository root). On top of the tree, a
//! gang may carry a pod floor ([`Gang::pod_floor`], KAI's root `minMember`), and so may each inner
//! subgroup ([`SubGroup::pod_floor`], KAI's mid-level `minMember`, which counts the subgroup's
//! descendant pods): the pods of all the leaves below must reach it as well, so a subtree needs
//! max(floor, its cheapest satisfying count) pods, and members beyond the leaves' minimums make up
//! the difference. Every walk of the tree lives here: the cycle, the validation, the dialects and
//! `kubectl gang status` use these functions rather than walking it themselves.
//!
//! **Cost.** A tree has at most [`MAX_SUBGROUPS`] subgroups, and the walks here cost at most the
//! square of that; a gang with more (read from objects no limit bounds: upstream PodGroups under
//! one CompositePodGroup, a KAI PodGroup's `subGroups`) is refused as a whole by the rule book, and
//! every walk here treats its tree as malformed at once ([`Gang::oversized`]) rather than walking
//! it, so that counting 40,000 members of a 40,000-subgroup gang costs 40,000 steps, not 40,000³.
//! [`leaf_of`], which the cycle calls for every member, is linear in the subgroups.

use std::collections::BTreeMap;

use crate::read::model::{Gang, SubGroup};

/// How deep a subgroup tree may nest below the root.
pub const MAX_SUBGROUP_DEPTH: usize = 4;

/// How many subgroups one gang may have (the rule book's limit, and the `Gang` CRD's `maxItems`).
pub const MAX_SUBGROUPS: usize = 64;

/// How deep a walk of the tree goes before it gives up: one level beyond the deepest valid tree, so
/// that a walk over a tree not yet validated (a parent cycle, say) still ends.
pub const WALK_DEPTH_LIMIT: usize = MAX_SUBGROUP_DEPTH + 1;

impl Gang {
    /// More subgroups than [`MAX_SUBGROUPS`]: a tree the rule book refuses whole, which no walk
    /// here reads (each would cost the square of its size, or more).
    pub fn oversized(&self) -> bool {
        self.subgroups.len() > MAX_SUBGROUPS
    }

    /// The leaf subgroups (those no other subgroup names as parent), in spec order; none when the
    /// tree is [`Gang::oversized`].
    pub fn leaves(&self) -> impl Iterator<Item = &SubGroup> {
        let all = if self.oversized() { &[][..] } else { &self.subgroups[..] };
        all.iter().filter(move |s| !is_parent(all, &s.name))
    }

    /// The smallest number of pods that can satisfy the gang: each leaf filled to its own minimum,
    /// each inner node picking its cheapest children, and at least the pod floor in all. `None` if
    /// the tree is malformed.
    pub fn min_pods(&self) -> Option<u64> {
        self.tree_min_pods().map(|n| n.max(u64::from(self.pod_floor)))
    }

    /// [`Gang::min_pods`] without the pod floor: what the subgroup minimums alone demand.
    pub fn tree_min_pods(&self) -> Option<u64> {
        if self.oversized() {
            return None;
        }
        fn cost(gang: &Gang, parent: Option<&str>, need: u32, depth: usize) -> Option<u64> {
            if depth > WALK_DEPTH_LIMIT {
                return None;
            }
            let mut children: Vec<u64> = Vec::new();
            for s in gang.subgroups.iter().filter(|s| s.parent.as_deref() == parent) {
                let is_leaf = !gang.subgroups.iter().any(|c| c.parent.as_deref() == Some(s.name.as_str()));
                let c = if is_leaf {
                    u64::from(s.min_member)
                } else {
                    cost(gang, Some(&s.name), s.min_member, depth + 1)?.max(u64::from(s.pod_floor))
                };
                children.push(c);
            }
            if children.len() < need as usize {
                return None;
            }
            children.sort_unstable();
            Some(children.iter().take(need as usize).sum())
        }
        if self.subgroups.is_empty() {
            Some(u64::from(self.min_member))
        } else {
            cost(self, None, self.min_member, 0)
        }
    }
}

/// Pods per leaf subgroup (`""` for a gang without subgroups).
pub type LeafCounts = BTreeMap<String, u32>;

/// Whether some subgroup of `all` names `name` as its parent.
fn is_parent(all: &[SubGroup], name: &str) -> bool {
    all.iter().any(|c| c.parent.as_deref() == Some(name))
}

/// The leaf a pod counts toward: its subgroup when the gang has subgroups and names it as a leaf,
/// `""` when the gang has none, `None` when the pod cannot count (unknown or missing subgroup, or
/// a tree too big to be valid: [`Gang::oversized`]). Linear in the subgroups: the cycle calls it
/// for every member.
pub fn leaf_of<'a>(gang: &Gang, subgroup: Option<&'a str>) -> Option<&'a str> {
    if gang.subgroups.is_empty() {
        return Some("");
    }
    let name = subgroup?;
    let known = !gang.oversized() && gang.subgroups.iter().any(|s| s.name == name);
    (known && !is_parent(&gang.subgroups, name)).then_some(name)
}

/// Whether the gang's root is satisfied with `counts` pods per leaf: every minimum of the tree
/// ([`minimums_met`]) and the pod floor.
pub fn satisfied(gang: &Gang, counts: &LeafCounts) -> bool {
    minimums_met(gang, counts) && pods_in(counts) >= u64::from(gang.pod_floor)
}

/// Pods counted over every leaf.
pub fn pods_in(counts: &LeafCounts) -> u64 {
    counts.values().map(|&n| u64::from(n)).sum()
}

/// Whether the tree's minimums (the root's and every subgroup's, subgroups' pod floors included)
/// hold with `counts`, the gang's own pod floor aside: once they do, members beyond the leaves'
/// minimums may be placed to reach it.
pub fn minimums_met(gang: &Gang, counts: &LeafCounts) -> bool {
    if gang.subgroups.is_empty() {
        return counts.get("").copied().unwrap_or(0) >= gang.min_member;
    }
    if gang.oversized() {
        return false;
    }
    children_satisfied(gang, None, counts, 0) >= gang.min_member
}

/// Whether subgroup `name` is satisfied: a leaf holds its minimum of pods; an inner subgroup has
/// its minimum of satisfied children and its pod floor of pods below it.
pub fn subgroup_satisfied(gang: &Gang, name: &str, counts: &LeafCounts, depth: usize) -> bool {
    subgroup_minimums_met(gang, name, counts, depth) && subgroup_floor_met(gang, name, counts)
}

/// Whether subgroup `name`'s minimums hold (every satisfied child it needs), its own pod floor
/// aside: once they do, members beyond the leaves' minimums below it may be placed to reach the
/// floor.
pub fn subgroup_minimums_met(gang: &Gang, name: &str, counts: &LeafCounts, depth: usize) -> bool {
    if depth > WALK_DEPTH_LIMIT || gang.oversized() {
        return false;
    }
    let Some(s) = gang.subgroups.iter().find(|s| s.name == name) else { return false };
    let is_leaf = !is_parent(&gang.subgroups, name);
    if is_leaf {
        counts.get(name).copied().unwrap_or(0) >= s.min_member
    } else {
        children_satisfied(gang, Some(name), counts, depth + 1) >= s.min_member
    }
}

/// Whether the leaves under subgroup `name` hold its pod floor (true when it has none).
pub fn subgroup_floor_met(gang: &Gang, name: &str, counts: &LeafCounts) -> bool {
    let floor = gang.subgroups.iter().find(|s| s.name == name).map_or(0, |s| s.pod_floor);
    floor == 0 || pods_under(gang, name, counts) >= u64::from(floor)
}

/// Pods counted over the leaves under subgroup `name`.
pub fn pods_under(gang: &Gang, name: &str, counts: &LeafCounts) -> u64 {
    leaves_under(gang, name).iter().map(|l| u64::from(counts.get(l).copied().unwrap_or(0))).sum()
}

fn children_satisfied(gang: &Gang, parent: Option<&str>, counts: &LeafCounts, depth: usize) -> u32 {
    let n = gang
        .subgroups
        .iter()
        .filter(|s| s.parent.as_deref() == parent)
        .filter(|s| subgroup_satisfied(gang, &s.name, counts, depth + 1))
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The minimum pods each leaf needs (`""` for a gang without subgroups).
pub fn leaf_minimums(gang: &Gang) -> LeafCounts {
    if gang.subgroups.is_empty() {
        return [(String::new(), gang.min_member)].into();
    }
    gang.leaves().map(|l| (l.name.clone(), l.min_member)).collect()
}

/// The leaves under subgroup `name` (itself if it is a leaf).
pub fn leaves_under(gang: &Gang, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    if gang.oversized() {
        return out;
    }
    let mut stack = vec![(name.to_string(), 0usize)];
    while let Some((n, depth)) = stack.pop() {
        if depth > WALK_DEPTH_LIMIT {
            continue;
        }
        let children: Vec<_> =
            gang.subgroups.iter().filter(|c| c.parent.as_deref() == Some(n.as_str())).collect();
        if children.is_empty() {
            out.push(n);
        } else {
            stack.extend(children.into_iter().map(|c| (c.name.clone(), depth + 1)));
        }
    }
    out.sort();
    out
}

/// "decode 1 of 4, prefill 2 of 2" for leaves below their minimum, "replica-0 5 of 8 pods" for
/// inner subgroups below their pod floor, then "6 of 10 pods in all" when the gang's pod floor is
/// not reached.
pub fn shortfall(gang: &Gang, counts: &LeafCounts) -> String {
    let mut parts: Vec<String> = leaf_minimums(gang)
        .iter()
        .filter(|(leaf, min)| counts.get(*leaf).copied().unwrap_or(0) < **min && !leaf.is_empty())
        .map(|(leaf, min)| format!("{leaf} {} of {min}", counts.get(leaf).copied().unwrap_or(0)))
        .collect();
    for s in gang.subgroups.iter().filter(|s| s.pod_floor > 0 && !gang.oversized()) {
        let pods = pods_under(gang, &s.name, counts);
        if pods < u64::from(s.pod_floor) {
            parts.push(format!("{} {pods} of {} pods", s.name, s.pod_floor));
        }
    }
    let pods = pods_in(counts);
    if !gang.subgroups.is_empty() && pods < u64::from(gang.pod_floor) {
        parts.push(format!("{pods} of {} pods in all", gang.pod_floor));
    }
    parts.join(", ")
}

/// Why a member naming `subgroup` counts toward no leaf of `gang` (`None`: it counts): the
/// subgroup is missing, unknown, or an inner subgroup (pods attach to leaves only).
pub fn attachment_error(gang: &Gang, subgroup: Option<&str>) -> Option<String> {
    if leaf_of(gang, subgroup).is_some() {
        return None;
    }
    if gang.oversized() {
        return Some(format!(
            "the gang has {} subgroups, more than the {MAX_SUBGROUPS} allowed: no member counts until it has fewer",
            gang.subgroups.len()
        ));
    }
    let leaves = || gang.leaves().map(|l| l.name.as_str()).collect::<Vec<_>>().join(", ");
    Some(match subgroup {
        None => format!("the gang has subgroups; name one of its leaf subgroups ({})", leaves()),
        Some(name) if gang.subgroups.iter().any(|s| s.name == name) => format!(
            "{name:?} is an inner subgroup (it has child subgroups); pods attach to leaf subgroups only ({})",
            leaves_under(gang, name).join(", ")
        ),
        Some(name) => format!("{name:?} is not a subgroup of this gang; its leaves are {}", leaves()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::model::{Dialect, GangKey, Source, SubGroup};

    fn sg(name: &str, parent: Option<&str>, min: u32) -> SubGroup {
        SubGroup {
            name: name.into(),
            parent: parent.map(Into::into),
            min_member: min,
            pod_floor: 0,
            topology_preferred: None,
            topology_key: None,
        }
    }

    fn disagg() -> Gang {
        // Two replicas of (prefill 2 + decode 4); any one replica satisfies the root.
        let mut g = Gang::new(
            GangKey::new("ns", "llm"),
            1,
            Source { dialect: Dialect::KubeGang, kind: "Gang".into() },
        );
        g.subgroups = vec![
            sg("r0", None, 2),
            sg("r0-prefill", Some("r0"), 2),
            sg("r0-decode", Some("r0"), 4),
            sg("r1", None, 2),
            sg("r1-prefill", Some("r1"), 2),
            sg("r1-decode", Some("r1"), 4),
        ];
        g
    }

    fn counts(v: &[(&str, u32)]) -> LeafCounts {
        v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    #[test]
    fn inner_subgroups_count_satisfied_children() {
        let g = disagg();
        assert!(!satisfied(&g, &counts(&[("r0-prefill", 2), ("r0-decode", 3), ("r1-prefill", 2)])));
        assert!(satisfied(
            &g,
            &counts(&[("r0-prefill", 2), ("r0-decode", 3), ("r1-prefill", 2), ("r1-decode", 4)])
        ));
        let mut both = g.clone();
        both.min_member = 2;
        assert!(!satisfied(&both, &counts(&[("r1-prefill", 2), ("r1-decode", 4)])));
        assert_eq!(g.min_pods(), Some(6));
        assert_eq!(both.min_pods(), Some(12));
    }

    #[test]
    fn flat_gang_counts_pods() {
        let g =
            Gang::new(GangKey::new("ns", "g"), 3, Source { dialect: Dialect::KubeGang, kind: "Gang".into() });
        assert!(!satisfied(&g, &counts(&[("", 2)])));
        assert!(satisfied(&g, &counts(&[("", 3)])));
        assert_eq!(leaf_of(&g, Some("whatever")), Some(""));
    }

    #[test]
    fn leaves_and_shortfall() {
        let g = disagg();
        assert_eq!(leaves_under(&g, "r1"), vec!["r1-decode", "r1-prefill"]);
        assert_eq!(leaf_of(&g, Some("r0")), None, "pods attach to leaves only");
        assert_eq!(leaf_of(&g, None), None);
        assert_eq!(shortfall(&g, &counts(&[("r0-decode", 1)])).split(", ").count(), 4);
    }

    #[test]
    fn pod_floor_holds_on_top_of_the_tree() {
        // KAI: a root of 10 pods over leaves of 2 and 4.
        let mut g = Gang::new(
            GangKey::new("ns", "big"),
            2,
            Source { dialect: Dialect::Kai, kind: "PodGroup".into() },
        );
        g.subgroups = vec![sg("leaders", None, 2), sg("workers", None, 4)];
        g.pod_floor = 10;
        assert_eq!(g.min_pods(), Some(10));
        assert_eq!(g.tree_min_pods(), Some(6));
        let six = counts(&[("leaders", 2), ("workers", 4)]);
        assert!(minimums_met(&g, &six));
        assert!(!satisfied(&g, &six), "6 pods meet the leaves but not the root's 10");
        assert_eq!(shortfall(&g, &six), "6 of 10 pods in all");
        assert!(satisfied(&g, &counts(&[("leaders", 2), ("workers", 8)])));
        assert!(!satisfied(&g, &counts(&[("leaders", 1), ("workers", 9)])), "every leaf keeps its minimum");
        g.pod_floor = 3;
        assert_eq!(g.min_pods(), Some(6), "a floor below the tree's count changes nothing");
    }

    #[test]
    fn an_inner_pod_floor_holds_on_top_of_its_children() {
        // KAI: a mid-level subgroup of 8 descendant pods over leaves of 1 and 4.
        let mut g = Gang::new(
            GangKey::new("ns", "mid"),
            1,
            Source { dialect: Dialect::Kai, kind: "PodGroup".into() },
        );
        g.subgroups =
            vec![sg("decode", None, 2), sg("leaders", Some("decode"), 1), sg("workers", Some("decode"), 4)];
        g.subgroups[0].pod_floor = 8;
        assert_eq!(g.min_pods(), Some(8));
        assert_eq!(g.tree_min_pods(), Some(8), "the subgroup's floor is part of the tree");
        let five = counts(&[("leaders", 1), ("workers", 4)]);
        assert!(subgroup_minimums_met(&g, "decode", &five, 0));
        assert!(!subgroup_satisfied(&g, "decode", &five, 0));
        assert!(!satisfied(&g, &five), "5 pods meet both leaves but not decode's 8");
        assert!(!minimums_met(&g, &five), "a subgroup's floor is one of the tree's minimums");
        assert_eq!(shortfall(&g, &five), "decode 5 of 8 pods");
        assert!(satisfied(&g, &counts(&[("leaders", 1), ("workers", 7)])));
        assert!(!satisfied(&g, &counts(&[("leaders", 0), ("workers", 8)])), "every leaf keeps its minimum");
        g.subgroups[0].pod_floor = 3;
        assert_eq!(g.min_pods(), Some(5), "a floor below the children's count changes nothing");
    }

    #[test]
    fn attachment_names_inner_and_unknown_subgroups() {
        let g = disagg();
        assert_eq!(attachment_error(&g, Some("r0-decode")), None);
        let inner = attachment_error(&g, Some("r0")).unwrap();
        assert!(inner.contains("inner subgroup") && inner.contains("r0-decode, r0-prefill"), "{inner}");
        assert!(attachment_error(&g, Some("nope")).unwrap().contains("not a subgroup"));
        assert!(attachment_error(&g, None).unwrap().contains("leaf subgroups"));
    }

    #[test]
    fn a_tree_over_the_subgroup_limit_is_malformed_for_every_walk() {
        // 40,000 PodGroups under one CompositePodGroup read as one gang of 40,000 leaves: the rule
        // book refuses it whole, and nothing here walks it (the cycle counted its members through
        // `leaf_of`, each call scanning every subgroup for every subgroup).
        let mut g = Gang::new(
            GangKey::new("ns", "wide"),
            2,
            Source { dialect: Dialect::Upstream, kind: "CompositePodGroup".into() },
        );
        g.subgroups = (0..=MAX_SUBGROUPS).map(|i| sg(&format!("pg-{i}"), None, 1)).collect();
        assert!(g.oversized());
        assert_eq!(leaf_of(&g, Some("pg-0")), None);
        assert_eq!(g.leaves().count(), 0);
        assert_eq!((g.min_pods(), g.tree_min_pods()), (None, None));
        let all: LeafCounts = g.subgroups.iter().map(|s| (s.name.clone(), 1)).collect();
        assert!(!minimums_met(&g, &all) && !satisfied(&g, &all));
        assert!(!subgroup_satisfied(&g, "pg-0", &all, 0));
        assert!(leaves_under(&g, "pg-0").is_empty());
        let why = attachment_error(&g, Some("pg-0")).unwrap();
        assert!(why.contains("65 subgroups, more than the 64 allowed"), "{why}");
        // One fewer is an ordinary tree.
        g.subgroups.pop();
        assert!(!g.oversized());
        assert_eq!(leaf_of(&g, Some("pg-0")), Some("pg-0"));
        assert_eq!(g.leaves().count(), MAX_SUBGROUPS);
        assert!(satisfied(&g, &all));
    }
}
