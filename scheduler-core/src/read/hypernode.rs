//! Volcano's HyperNodes as topology levels.
//!
//! A HyperNode (`topology.volcano.sh/v1alpha1`) is a network domain of some tier: its members are
//! nodes (by exact name, by a pattern over names, or by labels) or HyperNodes of lower tiers (by
//! name or pattern). Volcano bounds a job by a tier (`networkTopology.highestTierAllowed`); here a
//! tier is a level like a node label's: the key `volcano.sh/hypernode-tier-<t>`
//! ([`HYPERNODE_TIER_PREFIX`]) has, for each node, the name of the tier-`t` HyperNode it belongs to
//! ([`domains`]), and the cycle's topology machinery (required and preferred levels, explanations)
//! reads it as it reads any label.
//!
//! A node in two HyperNodes of one tier (Volcano expects a tree) belongs to the first by name. A
//! HyperNode's HyperNode members count only when their tier is lower than its own, so a cycle in
//! the member graph ends.
//!
//! Cost: per tier asked, once per cycle, each HyperNode's members are resolved once: an exact
//! name by look-up, a label selector from an index of its first `matchLabels` pair, and every
//! pattern together in one pass over the node (or HyperNode) names (`benches/hypernode.rs`).

use std::collections::{BTreeMap, HashMap};

use crate::read::model::Node;
use crate::read::model::volume::{HYPERNODE_TIER_PREFIX, HyperNode, MAX_PATTERN_SIZE, MemberSelector};

/// The tier a topology key names, when it is a HyperNode tier's key.
pub fn tier_of(key: &str) -> Option<u32> {
    key.strip_prefix(HYPERNODE_TIER_PREFIX)?.parse().ok()
}

/// The tier each `tierName` of the HyperNodes names, and the other tiers other HyperNodes give
/// the same name (Volcano keeps whichever its map iteration meets last and logs the conflict; we
/// keep the first by HyperNode name, and say so).
pub fn tier_names(hypernodes: &BTreeMap<String, HyperNode>) -> BTreeMap<&str, (u32, Vec<u32>)> {
    let mut out: BTreeMap<&str, (u32, Vec<u32>)> = BTreeMap::new();
    for h in hypernodes.values() {
        let Some(name) = h.tier_name.as_deref() else { continue };
        match out.get_mut(name) {
            Some((tier, others)) => {
                if *tier != h.tier && !others.contains(&h.tier) {
                    others.push(h.tier);
                }
            }
            None => {
                out.insert(name, (h.tier, Vec::new()));
            }
        }
    }
    out
}

/// The topology key of HyperNode tier `tier`.
pub fn key_of(tier: u32) -> String {
    format!("{HYPERNODE_TIER_PREFIX}{tier}")
}

/// For each node (by index in `nodes`), the name of the tier-`tier` HyperNode it belongs to.
pub fn domains(nodes: &[Node], hypernodes: &BTreeMap<String, HyperNode>, tier: u32) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = vec![None; nodes.len()];
    if hypernodes.is_empty() {
        return out;
    }
    let by_name: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
    let mut resolver = Resolver {
        nodes,
        hypernodes,
        by_name,
        memo: HashMap::new(),
        node_patterns: None,
        hypernode_patterns: None,
        label_index: HashMap::new(),
    };
    for (name, h) in hypernodes.iter().filter(|(_, h)| h.tier == tier) {
        for n in resolver.nodes_of(name, h) {
            out[n].get_or_insert_with(|| name.clone());
        }
    }
    out
}

struct Resolver<'a> {
    nodes: &'a [Node],
    hypernodes: &'a BTreeMap<String, HyperNode>,
    by_name: HashMap<&'a str, usize>,
    /// HyperNode → its nodes, once resolved.
    memo: HashMap<&'a str, Vec<usize>>,
    /// Every `Node` member's pattern → the nodes it matches: every pattern of every HyperNode
    /// matched in one pass over the node names (a [`regex::RegexSet`]), on the first asked.
    node_patterns: Option<HashMap<&'a str, Vec<usize>>>,
    /// The same for `HyperNode` members' patterns over HyperNode names.
    hypernode_patterns: Option<HashMap<&'a str, Vec<&'a str>>>,
    /// Label key → value → nodes, for the keys `matchLabels` names (one pass per key).
    label_index: HashMap<&'a str, HashMap<&'a str, Vec<usize>>>,
}

impl<'a> Resolver<'a> {
    /// The nodes of HyperNode `name`, its lower-tier HyperNode members' included (sorted, once).
    fn nodes_of(&mut self, name: &'a str, h: &'a HyperNode) -> Vec<usize> {
        if let Some(n) = self.memo.get(name) {
            return n.clone();
        }
        // Marked while it is resolved: a member naming it again adds nothing.
        self.memo.insert(name, Vec::new());
        let mut out = Vec::new();
        for m in &h.members {
            if !m.hypernode {
                match &m.selector {
                    MemberSelector::Exact(n) => out.extend(self.by_name.get(n.as_str()).copied()),
                    MemberSelector::Regex(p) => out.extend(self.node_pattern(p)),
                    MemberSelector::Labels(s) => out.extend(self.labelled(s)),
                }
                continue;
            }
            let children: Vec<&'a str> = match &m.selector {
                MemberSelector::Exact(n) => {
                    self.hypernodes.get_key_value(n).map(|(k, _)| k.as_str()).into_iter().collect()
                }
                MemberSelector::Regex(p) => self.hypernode_pattern(p),
                // Refused when read (Volcano ignores labels on HyperNode members).
                MemberSelector::Labels(_) => Vec::new(),
            };
            for child in children {
                let Some((child, c)) = self.hypernodes.get_key_value(child) else { continue };
                if c.tier < h.tier {
                    out.extend(self.nodes_of(child, c));
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        self.memo.insert(name, out.clone());
        out
    }

    /// The nodes whose names `p` matches.
    fn node_pattern(&mut self, p: &'a str) -> Vec<usize> {
        if self.node_patterns.is_none() {
            let patterns: Vec<&'a str> = self.patterns(false);
            let names: Vec<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
            let matched = match_all(&patterns, &names);
            self.node_patterns = Some(patterns.into_iter().zip(matched).collect());
        }
        self.node_patterns.as_ref().and_then(|m| m.get(p)).cloned().unwrap_or_default()
    }

    /// The HyperNodes whose names `p` matches.
    fn hypernode_pattern(&mut self, p: &'a str) -> Vec<&'a str> {
        if self.hypernode_patterns.is_none() {
            let patterns: Vec<&'a str> = self.patterns(true);
            let names: Vec<&'a str> = self.hypernodes.keys().map(String::as_str).collect();
            let matched = match_all(&patterns, &names);
            let by = patterns
                .into_iter()
                .zip(matched.into_iter().map(|m| m.into_iter().map(|i| names[i]).collect()));
            self.hypernode_patterns = Some(by.collect());
        }
        self.hypernode_patterns.as_ref().and_then(|m| m.get(p)).cloned().unwrap_or_default()
    }

    /// Every distinct pattern of the members of one type.
    fn patterns(&self, hypernode: bool) -> Vec<&'a str> {
        let mut out: Vec<&'a str> = (self.hypernodes.values())
            .flat_map(|h| &h.members)
            .filter(|m| m.hypernode == hypernode)
            .filter_map(|m| match &m.selector {
                MemberSelector::Regex(p) => Some(p.as_str()),
                _ => None,
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The nodes a label selector chooses: those carrying its first `matchLabels` pair, looked up,
    /// then checked whole; a selector of expressions only reads every node.
    fn labelled(&mut self, s: &'a crate::read::model::LabelSelector) -> Vec<usize> {
        let nodes = self.nodes;
        let Some((key, value)) = s.match_labels.iter().next() else {
            return (0..nodes.len()).filter(|&i| s.matches_map(&nodes[i].labels)).collect();
        };
        let index = self.label_index.entry(key.as_str()).or_insert_with(|| {
            let mut by: HashMap<&'a str, Vec<usize>> = HashMap::new();
            for (i, n) in nodes.iter().enumerate() {
                if let Some(v) = n.labels.get(key.as_str()) {
                    by.entry(v.as_str()).or_default().push(i);
                }
            }
            by
        });
        let candidates = index.get(value.as_str()).map_or(&[][..], Vec::as_slice);
        candidates.iter().copied().filter(|&i| s.matches_map(&nodes[i].labels)).collect()
    }
}

/// For each pattern, the indices of the `names` it matches: all patterns in one set, each name
/// matched once against the set (one pattern at a time when the set would pass the size bound).
fn match_all(patterns: &[&str], names: &[&str]) -> Vec<Vec<usize>> {
    // What a set may take when compiled, and its lazy DFA's cache: bounded whatever the patterns.
    const SET_SIZE: usize = 32 << 20;
    const SET_CACHE: usize = 16 << 20;
    let mut out = vec![Vec::new(); patterns.len()];
    match regex::RegexSetBuilder::new(patterns).size_limit(SET_SIZE).dfa_size_limit(SET_CACHE).build() {
        Ok(set) => {
            for (i, name) in names.iter().enumerate() {
                for j in set.matches(name).iter() {
                    out[j].push(i);
                }
            }
        }
        Err(_) => {
            for (j, p) in patterns.iter().enumerate() {
                if let Some(re) = pattern(p) {
                    out[j] = (0..names.len()).filter(|&i| re.is_match(names[i])).collect();
                }
            }
        }
    }
    out
}

/// A member's pattern, unanchored as Go's `regexp.MatchString` is (a match anywhere in the name
/// counts, as in Volcano); `None` if it does not compile within the bound the reader checks.
fn pattern(p: &str) -> Option<regex::Regex> {
    regex::RegexBuilder::new(p).size_limit(MAX_PATTERN_SIZE).build().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::model::LabelSelector;
    use crate::read::model::volume::HyperNodeMember;
    use crate::read::resources::Resources;

    fn node(name: &str, rack: &str) -> Node {
        Node {
            name: name.into(),
            allocatable: Resources::new(),
            labels: [("rack".to_string(), rack.to_string())].into(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        }
    }

    fn member(hypernode: bool, selector: MemberSelector) -> HyperNodeMember {
        HyperNodeMember { hypernode, selector }
    }

    #[test]
    fn tiers_resolve_nodes_by_name_pattern_and_labels_and_through_lower_tiers() {
        let nodes =
            vec![node("n0", "a"), node("n1", "a"), node("gpu-2", "b"), node("gpu-3", "b"), node("x", "c")];
        let labels = LabelSelector {
            match_labels: [("rack".to_string(), "b".to_string())].into(),
            ..Default::default()
        };
        let hn = |name: &str, tier: u32, members: Vec<HyperNodeMember>| {
            (name.to_string(), HyperNode { name: name.into(), tier, tier_name: None, members })
        };
        let hypernodes: BTreeMap<String, HyperNode> = [
            hn(
                "s0",
                1,
                vec![
                    member(false, MemberSelector::Exact("n0".into())),
                    member(false, MemberSelector::Regex("^n1$".into())),
                ],
            ),
            hn("s1", 1, vec![member(false, MemberSelector::Labels(labels))]),
            hn("s2", 1, vec![member(false, MemberSelector::Exact("missing".into()))]),
            hn("spine", 2, vec![member(true, MemberSelector::Regex("^s[01]$".into()))]),
            // A member of its own tier does not count (and a cycle ends).
            hn(
                "loop",
                2,
                vec![
                    member(true, MemberSelector::Exact("spine".into())),
                    member(true, MemberSelector::Exact("loop".into())),
                ],
            ),
        ]
        .into();
        let t1 = domains(&nodes, &hypernodes, 1);
        assert_eq!(t1, [Some("s0"), Some("s0"), Some("s1"), Some("s1"), None].map(|d| d.map(String::from)));
        let t2 = domains(&nodes, &hypernodes, 2);
        assert_eq!(
            t2,
            [Some("spine"), Some("spine"), Some("spine"), Some("spine"), None].map(|d| d.map(String::from))
        );
        assert!(domains(&nodes, &hypernodes, 3).iter().all(Option::is_none));
        assert_eq!(
            (tier_of(&key_of(2)), tier_of("rack"), tier_of("volcano.sh/hypernode-tier-x")),
            (Some(2), None, None)
        );
    }
}
