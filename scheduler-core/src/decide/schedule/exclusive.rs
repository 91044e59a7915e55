//! JobSet's exclusive placement as kube-scheduler enforces it, both ways.
//!
//! JobSet's pod webhook gives the leader pod of each exclusive child Job a required pod
//! anti-affinity (`namespaceSelector: {}`, topology key the exclusive annotation's value): no pod
//! with a `jobset.sigs.k8s.io/job-key` other than its own and the same
//! `jobset.sigs.k8s.io/priority` label may share its domain. kube-scheduler applies such a term
//! to the pod that carries it (the forward direction: [`super::place`]'s exclusive placement keeps
//! a child Job out of domains other JobSets' pods hold) and to every incoming pod it matches (the
//! reverse: a pod of another child Job, exclusive or not, may not land in a domain an exclusive
//! child Job holds). [`Blocks`] keeps the reverse side: the domains held by exclusive pods, bound
//! or committed this cycle, per priority, which [`super::cache::Caches::feasible`] folds into the
//! feasible nodes of every JobSet pod.
//!
//! Under JobSet's node-selector strategy the webhook adds no affinity (nodes are labelled and
//! tainted per child Job instead); such pods carry no exclusive topology in the model.

use std::collections::BTreeMap;

use crate::read::labels::{JOB_NAME, JOBSET_JOB_KEY, JOBSET_NAME, JOBSET_PRIORITY};
use crate::read::model::{Node, Pod};

/// Whether `pod` belongs to a JobSet's child Job: what the anti-affinity's `job-key Exists`
/// matches (pods simulate expands carry the JobSet name and the Job name instead of the hash).
pub(super) fn is_jobset_pod(pod: &Pod) -> bool {
    pod.labels.get(JOBSET_JOB_KEY).is_some() || pod.labels.get(JOBSET_NAME).is_some()
}

/// A pod's child Job for exclusive placement: JobSet's `jobset.sigs.k8s.io/job-key` (a hash of
/// `namespace/job`), else the Job controller's `batch.kubernetes.io/job-name` within the pod's
/// namespace, else the subgroup it names (a gang built by hand).
pub(super) fn job_of(pod: &Pod) -> String {
    if let Some(k) = pod.labels.get(JOBSET_JOB_KEY) {
        return format!("key:{k}");
    }
    if let Some(job) = pod.labels.get(JOB_NAME) {
        return format!("job:{}/{job}", pod.key.namespace);
    }
    pod.gang.as_ref().and_then(|m| m.subgroup.clone()).unwrap_or_default()
}

/// The priority JobSet's exclusive anti-affinity compares: the `jobset.sigs.k8s.io/priority`
/// label JobSet's pod webhook sets from `spec.priority` (negative values written `n<abs>` by
/// later releases), else the pod's own priority — what the webhook would write (pods simulate
/// expands never passed it). Normalized, so `n5` and `-5` compare equal.
pub(super) fn priority_of(pod: &Pod) -> String {
    match pod.labels.get(JOBSET_PRIORITY) {
        Some(v) => match v.strip_prefix('n').and_then(|abs| abs.parse::<i64>().ok()) {
            Some(abs) => (-abs).to_string(),
            None => v.parse::<i64>().map_or_else(|_| v.to_string(), |n| n.to_string()),
        },
        None => pod.priority.to_string(),
    }
}

/// Who holds one domain exclusively.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Holders {
    /// One child Job: its own pods are not kept out.
    One(String),
    /// More than one: every JobSet pod of that priority is kept out.
    Many,
}

/// Domains held by exclusive child Jobs, by (priority, topology key, domain value); see the
/// module docs.
#[derive(Debug, Default)]
pub(super) struct Blocks {
    held: BTreeMap<(String, String, String), Holders>,
    /// Bumped whenever a domain is newly held (or by a second Job): feasible sets folded from an
    /// older generation are stale.
    pub generation: u32,
}

impl Blocks {
    /// Counts `pod`, on `node`, if it is an exclusive JobSet pod on a node that has its
    /// topology label (kube-scheduler ignores a term whose key the node lacks).
    pub fn add(&mut self, pod: &Pod, node: &Node) {
        let Some(key) = pod.exclusive_topology.as_deref() else { return };
        if !is_jobset_pod(pod) {
            return;
        }
        let Some(value) = node.labels.get(key) else { return };
        let job = job_of(pod);
        let slot = (priority_of(pod), key.to_string(), value.clone());
        match self.held.get_mut(&slot) {
            None => {
                self.held.insert(slot, Holders::One(job));
            }
            Some(Holders::One(j)) if *j != job => {
                self.held.insert(slot, Holders::Many);
            }
            Some(_) => return,
        }
        self.generation = self.generation.wrapping_add(1);
    }

    /// The (topology key, domain value) pairs `pod` may not use: those held, at its priority, by
    /// an exclusive child Job other than its own. Empty for pods outside any JobSet.
    pub fn against(&self, pod: &Pod) -> Vec<(&str, &str)> {
        if self.held.is_empty() || !is_jobset_pod(pod) {
            return Vec::new();
        }
        let prio = priority_of(pod);
        let job = job_of(pod);
        let from = (prio.clone(), String::new(), String::new());
        self.held
            .range(from..)
            .take_while(|((p, _, _), _)| *p == prio)
            .filter(|(_, h)| match h {
                Holders::Many => true,
                Holders::One(j) => *j != job,
            })
            .map(|((_, k, v), _)| (k.as_str(), v.as_str()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::model::Labels;

    fn pod(labels: &[(&str, &str)], exclusive: Option<&str>, priority: i32) -> Pod {
        let mut p: Pod =
            serde_json::from_value(serde_json::json!({"key": {"namespace": "ns", "name": "p"}})).unwrap();
        p.labels = Labels::new(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        p.exclusive_topology = exclusive.map(str::to_string);
        p.priority = priority;
        p
    }

    fn node(rack: Option<&str>) -> Node {
        Node {
            name: "n".into(),
            allocatable: crate::read::resources::Resources::new(),
            labels: rack.map(|r| ("rack".to_string(), r.to_string())).into_iter().collect(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        }
    }

    #[test]
    fn priority_label_wins_and_negative_forms_compare_equal() {
        assert_eq!(priority_of(&pod(&[(JOBSET_PRIORITY, "n5")], None, 7)), "-5");
        assert_eq!(priority_of(&pod(&[(JOBSET_PRIORITY, "-5")], None, 7)), "-5");
        assert_eq!(priority_of(&pod(&[(JOBSET_PRIORITY, "100")], None, 7)), "100");
        assert_eq!(priority_of(&pod(&[], None, 7)), "7");
        assert_eq!(priority_of(&pod(&[(JOBSET_PRIORITY, "odd")], None, 7)), "odd");
    }

    #[test]
    fn an_exclusive_pod_keeps_other_jobs_of_its_priority_out_but_not_its_own() {
        let mut b = Blocks::default();
        b.add(&pod(&[(JOBSET_JOB_KEY, "a")], Some("rack"), 0), &node(Some("r1")));
        assert_eq!(b.generation, 1);
        // The same job again changes nothing.
        b.add(&pod(&[(JOBSET_JOB_KEY, "a")], Some("rack"), 0), &node(Some("r1")));
        assert_eq!(b.generation, 1);
        assert_eq!(b.against(&pod(&[(JOBSET_JOB_KEY, "b")], None, 0)), vec![("rack", "r1")]);
        assert!(b.against(&pod(&[(JOBSET_JOB_KEY, "a")], None, 0)).is_empty());
        // Another priority, or no JobSet at all, is not matched by the anti-affinity.
        assert!(b.against(&pod(&[(JOBSET_JOB_KEY, "b")], None, 10)).is_empty());
        assert!(b.against(&pod(&[], None, 0)).is_empty());
        // A second job in the same domain blocks the first one's pods too.
        b.add(&pod(&[(JOBSET_JOB_KEY, "c")], Some("rack"), 0), &node(Some("r1")));
        assert_eq!(b.against(&pod(&[(JOBSET_JOB_KEY, "a")], None, 0)), vec![("rack", "r1")]);
    }

    #[test]
    fn only_exclusive_jobset_pods_on_labelled_nodes_hold_a_domain() {
        let mut b = Blocks::default();
        b.add(&pod(&[(JOBSET_JOB_KEY, "a")], None, 0), &node(Some("r1")));
        b.add(&pod(&[(JOBSET_JOB_KEY, "a")], Some("rack"), 0), &node(None));
        b.add(&pod(&[], Some("rack"), 0), &node(Some("r1")));
        assert_eq!(b.generation, 0);
        assert!(b.against(&pod(&[(JOBSET_JOB_KEY, "b")], None, 0)).is_empty());
    }
}
