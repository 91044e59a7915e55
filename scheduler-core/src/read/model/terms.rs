//! What a pod's placement asks of the pods around it, as plain data: host ports ([`HostPort`],
//! kube-scheduler's `NodePorts`), required pod affinity and anti-affinity ([`AffinityTerm`],
//! `InterPodAffinity`) and topology spread constraints ([`SpreadConstraint`],
//! `PodTopologySpread`) — and the scheduling fields of a pod that the cycle does not evaluate
//! ([`PodTerms::unevaluated`]: such a pod waits, naming them, instead of being placed as though it
//! had not asked). [`crate::read::convert`] reads them from a pod; the cycle's `joint` module
//! evaluates them against the pods on nodes and those placed before in the same cycle.
//!
//! Each type keeps only what kube-scheduler's filter reads, already resolved the way it resolves
//! it: a term's namespaces with the pod's own filled in, a spread constraint's selector with its
//! `matchLabelKeys` merged, the defaults (`minDomains` 1, `nodeAffinityPolicy: Honor`,
//! `nodeTaintsPolicy: Ignore`) applied.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{LabelSelector, Labels};

/// The address `hostIP` means when it is empty: every address of the node.
pub const BIND_ALL: &str = "0.0.0.0";

/// One host port a pod binds: `hostPort` of a container (or of a sidecar, an init container
/// with `restartPolicy: Always`, which runs as long as the pod) with its protocol and address.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HostPort {
    /// `TCP`, `UDP` or `SCTP` (the API server defaults an empty one to `TCP`; so does the reader).
    pub protocol: String,
    /// `hostIP`: [`BIND_ALL`] when the pod leaves it empty.
    pub ip: String,
    pub port: i32,
}

impl HostPort {
    /// Whether the two cannot both be bound on one node: same protocol and port, and an address
    /// in common — [`BIND_ALL`] has them all — as kube-scheduler's `HostPortInfo.CheckConflict`
    /// judges it.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == BIND_ALL || other.ip == BIND_ALL)
    }
}

/// `TCP/8080`, or `TCP/10.0.0.1:8080` for one address.
impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ip == BIND_ALL {
            write!(f, "{}/{}", self.protocol, self.port)
        } else {
            write!(f, "{}/{}:{}", self.protocol, self.ip, self.port)
        }
    }
}

/// One required `podAffinityTerm`, as kube-scheduler's `framework.AffinityTerm` holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AffinityTerm {
    /// `labelSelector`; `None` (absent) selects no pod, an empty one every pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// `namespaces`, or the pod's own namespace when neither they nor `namespaceSelector` are set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// `namespaceSelector`: `None` (absent) adds no namespace, an empty one every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    pub topology_key: String,
}

impl AffinityTerm {
    /// Whether the term selects a pod of `namespace` with `labels`, `namespace_labels` being its
    /// namespace's (empty when the namespace is unknown): kube-scheduler's `AffinityTerm.Matches`.
    pub fn selects(&self, namespace: &str, labels: &Labels, namespace_labels: &Labels) -> bool {
        let in_namespace = self.namespaces.iter().any(|n| n == namespace)
            || self.namespace_selector.as_ref().is_some_and(|s| s.matches(namespace_labels));
        in_namespace && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }

    /// Whether the term may select pods of namespaces it does not name (it has a
    /// `namespaceSelector`).
    pub fn any_namespace(&self) -> bool {
        self.namespace_selector.is_some()
    }
}

/// `whenUnsatisfiable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Unsatisfiable {
    /// A filter: a node that would break `maxSkew` is not a place for the pod.
    DoNotSchedule,
    /// A preference (scoring only): never keeps a pod off a node.
    ScheduleAnyway,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy`: whether the pod's node affinity (or the nodes'
/// taints) decide which nodes' domains count for the skew.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Inclusion {
    Honor,
    Ignore,
}

/// One `topologySpreadConstraints` entry, as kube-scheduler's `topologySpreadConstraint` holds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub when_unsatisfiable: Unsatisfiable,
    /// `labelSelector` with the pod's values of `matchLabelKeys` merged in (what kube-scheduler
    /// merges itself); `None` (absent) selects no pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// `minDomains` (1 when not set).
    pub min_domains: i32,
    /// `nodeAffinityPolicy` (`Honor` when not set).
    pub node_affinity_policy: Inclusion,
    /// `nodeTaintsPolicy` (`Ignore` when not set).
    pub node_taints_policy: Inclusion,
}

impl SpreadConstraint {
    /// Whether a pod with `labels` on a node counts toward the skew: the selector matches it, and
    /// is not empty (kube-scheduler's `countPodsMatchSelector` counts nothing for an empty one).
    pub fn counts(&self, labels: &Labels) -> bool {
        self.selector.as_ref().is_some_and(|s| !s.is_empty() && s.matches(labels))
    }

    /// Whether the pod itself counts once placed (`selfMatchNum`): the selector matches its
    /// labels (an empty one does).
    pub fn counts_self(&self, labels: &Labels) -> bool {
        self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// What a pod asks of the pods around it, and what of its scheduling the cycle does not evaluate.
/// Most pods ask nothing of the kind: the model holds `None` for them ([`super::Pod::terms`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodTerms {
    /// Host ports of its containers and sidecars, in the order written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_ports: Vec<HostPort>,
    /// `spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affinity: Vec<AffinityTerm>,
    /// `spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anti_affinity: Vec<AffinityTerm>,
    /// `spec.topologySpreadConstraints`, both kinds: a pod with any constraint of its own is not
    /// given the cluster's default constraints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spread: Vec<SpreadConstraint>,
    /// Field paths of what the pod asks that the cycle does not evaluate
    /// (`spec.volumes[0].persistentVolumeClaim`): the pod is never placed while it has any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unevaluated: Vec<String>,
}

impl PodTerms {
    pub fn is_empty(&self) -> bool {
        self.host_ports.is_empty()
            && self.affinity.is_empty()
            && self.anti_affinity.is_empty()
            && self.spread.is_empty()
            && self.unevaluated.is_empty()
    }

    /// The `DoNotSchedule` spread constraints: those that filter.
    pub fn hard_spread(&self) -> impl Iterator<Item = &SpreadConstraint> {
        self.spread.iter().filter(|c| c.when_unsatisfiable == Unsatisfiable::DoNotSchedule)
    }

    /// Whether where the pod may go depends on the pods around it: host ports, required
    /// affinity or anti-affinity, or a `DoNotSchedule` spread constraint.
    pub fn depends_on_others(&self) -> bool {
        !self.host_ports.is_empty()
            || !self.affinity.is_empty()
            || !self.anti_affinity.is_empty()
            || self.hard_spread().next().is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::read::model::{LabelOperator, LabelRequirement};

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        Labels::new(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    fn port(protocol: &str, ip: &str, port: i32) -> HostPort {
        HostPort { protocol: protocol.into(), ip: ip.into(), port }
    }

    /// kube-scheduler's `HostPortInfo` cases: the all-addresses address conflicts with every
    /// address, two addresses only with themselves, and protocols apart.
    #[test]
    fn host_ports_conflict_by_protocol_address_and_port() {
        let any = port("TCP", BIND_ALL, 8080);
        assert!(any.conflicts(&port("TCP", "10.0.0.1", 8080)));
        assert!(port("TCP", "10.0.0.1", 8080).conflicts(&any));
        assert!(!port("TCP", "10.0.0.1", 8080).conflicts(&port("TCP", "10.0.0.2", 8080)));
        assert!(port("TCP", "10.0.0.1", 8080).conflicts(&port("TCP", "10.0.0.1", 8080)));
        assert!(!any.conflicts(&port("UDP", BIND_ALL, 8080)));
        assert!(!any.conflicts(&port("TCP", BIND_ALL, 8081)));
        assert_eq!(any.to_string(), "TCP/8080");
        assert_eq!(port("UDP", "::1", 53).to_string(), "UDP/::1:53");
    }

    #[test]
    fn a_term_selects_by_namespace_then_labels() {
        let app = |v: &str| LabelSelector {
            match_labels: BTreeMap::from([("app".to_string(), v.to_string())]),
            match_expressions: vec![],
        };
        let term = AffinityTerm {
            selector: Some(app("db")),
            namespaces: vec!["ml".into()],
            namespace_selector: None,
            topology_key: "zone".into(),
        };
        let db = labels(&[("app", "db")]);
        let none = Labels::default();
        assert!(term.selects("ml", &db, &none));
        assert!(!term.selects("web", &db, &none), "another namespace");
        assert!(!term.selects("ml", &labels(&[("app", "web")]), &none));
        // A namespace selector adds the namespaces it matches; an empty one, every namespace.
        let team = LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![LabelRequirement {
                key: "team".into(),
                operator: LabelOperator::Exists,
                values: vec![],
            }],
        };
        let by_team = AffinityTerm { namespace_selector: Some(team), ..term.clone() };
        assert!(by_team.selects("web", &db, &labels(&[("team", "a")])));
        assert!(!by_team.selects("web", &db, &none));
        let every = AffinityTerm { namespace_selector: Some(LabelSelector::default()), ..term.clone() };
        assert!(every.selects("anywhere", &db, &none) && every.any_namespace());
        // No selector selects nothing; an empty one everything.
        assert!(!AffinityTerm { selector: None, ..term.clone() }.selects("ml", &db, &none));
        assert!(
            AffinityTerm { selector: Some(LabelSelector::default()), ..term }.selects("ml", &none, &none)
        );
    }

    #[test]
    fn an_empty_spread_selector_counts_no_pod_but_matches_the_pod_itself() {
        let c = SpreadConstraint {
            max_skew: 1,
            topology_key: "zone".into(),
            when_unsatisfiable: Unsatisfiable::DoNotSchedule,
            selector: Some(LabelSelector::default()),
            min_domains: 1,
            node_affinity_policy: Inclusion::Honor,
            node_taints_policy: Inclusion::Ignore,
        };
        let any = labels(&[("app", "x")]);
        assert!(!c.counts(&any) && c.counts_self(&any));
        let none = SpreadConstraint { selector: None, ..c };
        assert!(!none.counts(&any) && !none.counts_self(&any));
    }
}
