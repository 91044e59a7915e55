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
/// the node's own name when it carries none; for [`NODE_LAYER`], the node's name. `None`: the
/// node is not in the tree (it lacks a broader layer's label), or `layer` is not one of them.
pub fn domains(nodes: &[Node], layers: &NetworkLayers, layer: &str) -> Vec<Option<String>> {
    let all = layers.layers();
    let Some(last) = all.len().checked_sub(1) else { return vec![None; nodes.len()] };
    let at = if layer == NODE_LAYER { None } else { all.iter().position(|l| l.name == layer) };
    if layer != NODE_LAYER && at.is_none() {
        return vec![None; nodes.len()];
    }
    nodes
        .iter()
        .map(|node| {
            let mut mine = None;
            for (i, l) in all.iter().enumerate() {
                let value = l.label_keys.iter().find_map(|k| node.labels.get(k).filter(|v| !v.is_empty()));
                let name = match value {
                    Some(v) => v.clone(),
                    // Koordinator makes the node a domain of its own right above the nodes
                    // (accelerators without a block of their own), and leaves it out of the tree
                    // when a broader layer is missing.
                    None if i == last => node.name.to_string(),
                    None => return None,
                };
                if Some(i) == at {
                    mine = Some(name);
                }
            }
            if at.is_none() { Some(node.name.to_string()) } else { mine }
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
        assert_eq!(names("RackLayer"), [None, None, None, None]);
        assert_eq!(domains(&nodes, &NetworkLayers::default(), "BlockLayer"), [None, None, None, None]);
        assert_eq!(
            l.keys(),
            ["koordinator.sh/network-layer-SpineLayer", "koordinator.sh/network-layer-BlockLayer"]
        );
        assert_eq!(
            (layer_of(&key_of("BlockLayer")), layer_of("rack"), layer_of(NETWORK_LAYER_PREFIX)),
            (Some("BlockLayer"), None, None)
        );
    }
}
