//! Koordinator's network layers as topology levels.
//!
//! Koordinator's `ClusterNetworkTopology` named `default` (`scheduling.koordinator.sh/v1alpha1`)
//! lists layers (`SpineLayer`, `BlockLayer`, …) chained by `parentTopologyLayer` from
//! `NodeTopologyLayer` up, each naming the node labels whose value is a node's domain in it (the
//! first of them the node carries). Its scheduler builds one tree from them: a domain is a
//! (layer, value) pair, a node missing the label of the layer right above the nodes stands as a
//! domain of its own there, and a node missing any other layer's is left out of the tree. Here a
//! layer is a level like a node label's: the key `koordinator.sh/network-layer-<layer>`
//! ([`NETWORK_LAYER_PREFIX`]) has, for each node, its domain in that layer ([`domains`]), and the
//! cycle's topology machinery (required and preferred levels, their relaxation, explanations)
//! reads it as it reads any label.
//!
//! Cost: per layer asked, once per cycle, one pass over the nodes reading at most every layer's
//! label keys (the layers and their keys are bounded when the object is read).

use crate::read::model::Node;
pub use crate::read::model::volume::{CLUSTER_LAYER, NODE_LAYER};
use crate::read::model::volume::{NETWORK_LAYER_PREFIX, NetworkLayers};

/// The layer a topology key names, when it is a network layer's key.
pub fn layer_of(key: &str) -> Option<&str> {
    key.strip_prefix(NETWORK_LAYER_PREFIX).filter(|l| !l.is_empty())
}

/// The topology key of network layer `layer`.
pub fn key_of(layer: &str) -> String {
    format!("{NETWORK_LAYER_PREFIX}{layer}")
}

/// For each node (by index in `nodes`), its domain in network layer `layer` of `layers`: the
/// value of the first of the layer's label keys it carries; for the layer right above the nodes,
/// the node's own name when it carries none; for [`NODE_LAYER`], the node's name; for
/// [`CLUSTER_LAYER`], one domain of every node in the tree. `None`: the node is not in the tree
/// (it lacks a broader layer's label), or `layer` is not one of them.
pub fn domains(nodes: &[Node], layers: &NetworkLayers, layer: &str) -> Vec<Option<String>> {
    let all = layers.layers();
    // The layers above the nodes, broadest first (`NodeTopologyLayer` is last when read).
    let above = match all.last() {
        Some(l) if l.name == NODE_LAYER => &all[..all.len() - 1],
        _ => all,
    };
    let at = above.iter().position(|l| l.name == layer);
    if all.is_empty() || (at.is_none() && layer != NODE_LAYER && layer != CLUSTER_LAYER) {
        return vec![None; nodes.len()];
    }
    let parent = above.len().checked_sub(1);
    nodes
        .iter()
        .map(|node| {
            let mut mine = None;
            for (i, l) in above.iter().enumerate() {
                let value = l.label_keys.iter().find_map(|k| node.labels.get(k).filter(|v| !v.is_empty()));
                // Koordinator makes the node a domain of its own right above the nodes
                // (accelerators without a block of their own), and leaves it out of the tree
                // when a broader layer is missing.
                if value.is_none() && Some(i) != parent {
                    return None;
                }
                if Some(i) == at {
                    mine = Some(value.map_or_else(|| node.name.to_string(), String::clone));
                }
            }
            match layer {
                NODE_LAYER => Some(node.name.to_string()),
                CLUSTER_LAYER => Some("cluster".to_string()),
                _ => mine,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::model::volume::NetworkLayer;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            name: name.into(),
            allocatable: crate::read::resources::Resources::new(),
            labels: labels.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        }
    }

    fn layers() -> NetworkLayers {
        vec![
            NetworkLayer { name: "SpineLayer".into(), label_keys: vec!["spine".into()] },
            NetworkLayer { name: "BlockLayer".into(), label_keys: vec!["block".into(), "block-alt".into()] },
            NetworkLayer { name: NODE_LAYER.into(), label_keys: vec![] },
        ]
        .into()
    }

    #[test]
    fn a_node_s_domains_follow_koordinator_s_tree() {
        let nodes = [
            node("n1", &[("spine", "s1"), ("block", "b1")]),
            // The second label key stands in for the first.
            node("n2", &[("spine", "s1"), ("block-alt", "b2")]),
            // No block: a domain of its own right above the nodes.
            node("n3", &[("spine", "s2")]),
            // No spine: out of the tree at every layer.
            node("n4", &[("block", "b1")]),
        ];
        let l = layers();
        let names = |layer: &str| domains(&nodes, &l, layer);
        assert_eq!(names("SpineLayer"), [Some("s1".into()), Some("s1".into()), Some("s2".into()), None]);
        assert_eq!(names("BlockLayer"), [Some("b1".into()), Some("b2".into()), Some("n3".into()), None]);
        assert_eq!(names(NODE_LAYER), [Some("n1".into()), Some("n2".into()), Some("n3".into()), None]);
        let tree = Some("cluster".to_string());
        assert_eq!(names(CLUSTER_LAYER), [tree.clone(), tree.clone(), tree, None]);
        assert_eq!(names("RackLayer"), [None, None, None, None]);
        assert_eq!(domains(&nodes, &NetworkLayers::default(), "BlockLayer"), [None, None, None, None]);
        assert_eq!(
            l.keys(),
            [
                "koordinator.sh/network-layer-ClusterTopologyLayer",
                "koordinator.sh/network-layer-SpineLayer",
                "koordinator.sh/network-layer-BlockLayer",
                "koordinator.sh/network-layer-NodeTopologyLayer"
            ]
        );
        // A ClusterNetworkTopology of the nodes alone still has its tree: every node.
        let only_nodes: NetworkLayers =
            vec![NetworkLayer { name: NODE_LAYER.into(), label_keys: vec![] }].into();
        assert_eq!(domains(&nodes[..1], &only_nodes, CLUSTER_LAYER), [Some("cluster".to_string())]);
        assert_eq!(
            (layer_of(&key_of("BlockLayer")), layer_of("rack"), layer_of(NETWORK_LAYER_PREFIX)),
            (Some("BlockLayer"), None, None)
        );
    }
}
