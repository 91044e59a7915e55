//! The filters that do not depend on capacity: readiness, cordons, taints and tolerations, node
//! selectors and required node affinity — Kubernetes' semantics, checked once per node and pod
//! shape. Capacity is the ledger's business ([`super::ledger`]).

use crate::read::model::{
    Node, NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm, Pod, TaintEffect, Toleration,
    TolerationOperator,
};

/// Why a node cannot take a pod regardless of capacity.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Static {
    NotReady,
    Unschedulable,
    Taint(String),
    NodeSelector,
    Affinity,
}

/// Checks everything about `node` and `pod` that does not depend on free capacity.
pub(crate) fn static_fit(node: &Node, pod: &Pod) -> Result<(), Static> {
    if !node.ready {
        return Err(Static::NotReady);
    }
    if node.unschedulable && !tolerates_unschedulable(&pod.tolerations) {
        return Err(Static::Unschedulable);
    }
    for taint in &node.taints {
        if taint.effect == TaintEffect::PreferNoSchedule {
            continue;
        }
        if !pod.tolerations.iter().any(|t| tolerates(t, &taint.key, taint.value.as_deref(), taint.effect)) {
            return Err(Static::Taint(taint.to_string()));
        }
    }
    for (k, v) in &pod.node_selector {
        if node.labels.get(k) != Some(v) {
            return Err(Static::NodeSelector);
        }
    }
    if !pod.affinity.is_empty() && !pod.affinity.iter().any(|t| term_matches(t, node)) {
        return Err(Static::Affinity);
    }
    Ok(())
}

/// Whether `node` matches the pod's `nodeSelector` and required node affinity: kube-scheduler's
/// `GetRequiredNodeAffinity(pod).Match(node)`, which topology spread's `nodeAffinityPolicy: Honor`
/// asks about the nodes whose domains count.
pub(crate) fn matches_node_affinity(node: &Node, pod: &Pod) -> bool {
    pod.node_selector.iter().all(|(k, v)| node.labels.get(k) == Some(v))
        && (pod.affinity.is_empty() || pod.affinity.iter().any(|t| term_matches(t, node)))
}

/// Whether `node` has a `NoSchedule` or `NoExecute` taint the tolerations do not tolerate: what
/// topology spread's `nodeTaintsPolicy: Honor` asks about the nodes whose domains count.
pub(crate) fn untolerated_taint(node: &Node, tolerations: &[Toleration]) -> bool {
    node.taints.iter().filter(|t| t.effect != TaintEffect::PreferNoSchedule).any(|taint| {
        !tolerations.iter().any(|t| tolerates(t, &taint.key, taint.value.as_deref(), taint.effect))
    })
}

/// How many `PreferNoSchedule` taints of `node` the pod does not tolerate (lowers the score).
pub(crate) fn soft_taints(node: &Node, pod: &Pod) -> usize {
    node.taints
        .iter()
        .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
        .filter(|t| !pod.tolerations.iter().any(|tol| tolerates(tol, &t.key, t.value.as_deref(), t.effect)))
        .count()
}

fn tolerates_unschedulable(tolerations: &[Toleration]) -> bool {
    tolerations
        .iter()
        .any(|t| tolerates(t, "node.kubernetes.io/unschedulable", None, TaintEffect::NoSchedule))
}

/// Kubernetes' `Toleration.ToleratesTaint`.
pub(crate) fn tolerates(t: &Toleration, key: &str, value: Option<&str>, effect: TaintEffect) -> bool {
    if let Some(e) = t.effect
        && e != effect
    {
        return false;
    }
    if !t.key.is_empty() && t.key != key {
        return false;
    }
    match t.operator {
        TolerationOperator::Exists => true,
        TolerationOperator::Equal => t.value.as_deref().unwrap_or("") == value.unwrap_or(""),
    }
}

pub(super) fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    // An empty term matches nothing, as in Kubernetes.
    if term.match_expressions.is_empty() && term.match_fields.is_empty() {
        return false;
    }
    term.match_expressions.iter().all(|r| requirement_matches(r, node.labels.get(&r.key).map(String::as_str)))
        && term.match_fields.iter().all(|r| {
            let value = if r.key == "metadata.name" { Some(node.name.as_str()) } else { None };
            requirement_matches(r, value)
        })
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    match r.operator {
        NodeSelectorOperator::In => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
        NodeSelectorOperator::NotIn => value.is_none_or(|v| !r.values.iter().any(|x| x == v)),
        NodeSelectorOperator::Exists => value.is_some(),
        NodeSelectorOperator::DoesNotExist => value.is_none(),
        NodeSelectorOperator::Gt | NodeSelectorOperator::Lt => {
            let (Some(v), Some(bound)) = (value.and_then(|v| v.parse::<i64>().ok()), r.values.first()) else {
                return false;
            };
            let Ok(bound) = bound.parse::<i64>() else { return false };
            if r.operator == NodeSelectorOperator::Gt { v > bound } else { v < bound }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::model::Taint;
    use crate::read::resources::Resources;

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

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({"key": {"namespace": "ns", "name": "p"}})).unwrap()
    }

    #[test]
    fn affinity_operators() {
        let n = node("gpu-1");
        let req = |key: &str, op, values: &[&str]| NodeSelectorRequirement {
            key: key.into(),
            operator: op,
            values: values.iter().map(|s| s.to_string()).collect(),
        };
        use NodeSelectorOperator::*;
        let cases = [
            (req("zone", In, &["a", "b"]), true),
            (req("zone", NotIn, &["a"]), false),
            (req("missing", NotIn, &["a"]), true),
            (req("zone", Exists, &[]), true),
            (req("zone", DoesNotExist, &[]), false),
            (req("gen", Gt, &["4"]), true),
            (req("gen", Lt, &["5"]), false),
            (req("zone", Gt, &["1"]), false),
        ];
        for (r, want) in cases {
            let mut p = pod();
            p.affinity = vec![NodeSelectorTerm { match_expressions: vec![r.clone()], match_fields: vec![] }];
            assert_eq!(static_fit(&n, &p).is_ok(), want, "{r:?}");
        }
        let mut p = pod();
        p.affinity = vec![NodeSelectorTerm {
            match_expressions: vec![],
            match_fields: vec![req("metadata.name", In, &["gpu-1"])],
        }];
        assert!(static_fit(&n, &p).is_ok());
        p.affinity[0].match_fields[0].values = vec!["gpu-2".into()];
        assert_eq!(static_fit(&n, &p), Err(Static::Affinity));
    }

    #[test]
    fn taints_and_tolerations() {
        let mut n = node("a");
        n.taints = vec![Taint {
            key: "gpu".into(),
            value: Some("reserved".into()),
            effect: TaintEffect::NoSchedule,
        }];
        let mut p = pod();
        assert_eq!(static_fit(&n, &p), Err(Static::Taint("gpu=reserved:NoSchedule".into())));
        p.tolerations = vec![Toleration {
            key: "gpu".into(),
            operator: TolerationOperator::Equal,
            value: Some("other".into()),
            effect: None,
        }];
        assert!(static_fit(&n, &p).is_err(), "wrong value does not tolerate");
        p.tolerations[0].operator = TolerationOperator::Exists;
        assert!(static_fit(&n, &p).is_ok());
        n.taints[0].effect = TaintEffect::PreferNoSchedule;
        let q = pod();
        assert!(static_fit(&n, &q).is_ok(), "PreferNoSchedule never filters");
        assert_eq!(soft_taints(&n, &q), 1);
        n.unschedulable = true;
        assert_eq!(static_fit(&n, &q), Err(Static::Unschedulable));
        n.unschedulable = false;
        n.ready = false;
        assert_eq!(static_fit(&n, &q), Err(Static::NotReady));
    }
}
