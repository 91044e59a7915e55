//! Autoscaler-visible gangs: what a gang the cycle cannot place asks the cluster autoscaler for.
//!
//! Cluster autoscalers look at pending pods one at a time, so for a gang they add nothing or add
//! part of it. cluster-autoscaler's `ProvisioningRequest` (`autoscaling.x-k8s.io/v1`) asks for a
//! group of pods at once, as PodTemplates with counts. [`asks`] decides, purely, which gangs ask
//! and for what: a gang that wants capacity (its outcome is `Unschedulable`,
//! `TopologyUnsatisfiable` or `Reserved`: not placed, and not placed by preemption either — a gang
//! that can preempt is `Preempting`) asks for exactly its pending, ungated members that have no room
//! on the cluster as the plan leaves it, grouped by identical [`Shape`]. The scheduler writes the
//! objects; `kubectl gang simulate` prints them; both from this one function.
//!
//! "No room" is judged member by member on the free capacity the plan leaves (bound pods, this
//! plan's bindings and reservations taken; evictions not yet counted as free), first fit over the
//! nodes that pass the static filters. A gang with a topology key asks for all its pending members:
//! the room must be in one domain, which existing free capacity scattered over domains is not.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::decide::config::Config;
use crate::decide::plan::{MAX_POD_SETS, Plan, PodSet, ProvisioningAsk, Reason, Shape};
use crate::read::model::{GangKey, Node, Pod, PodKey, Snapshot, Usage};
use crate::read::resources::PODS;

/// The outcomes that want capacity the cluster does not have (a gang backfill holds room for, or
/// that waits behind such room, starts sooner on new nodes).
fn wants_capacity(reason: Reason) -> bool {
    matches!(
        reason,
        Reason::Unschedulable
            | Reason::TopologyUnsatisfiable
            | Reason::Reserved
            | Reason::WaitingForResources
            | Reason::WaitingForPriority
    )
}

/// A pod's shape: what it needs of a node.
pub fn shape_of(pod: &Pod) -> Shape {
    Shape {
        requests: pod.requests.clone(),
        node_selector: pod.node_selector.clone(),
        affinity: pod.affinity.clone(),
        tolerations: pod.tolerations.clone(),
    }
}

impl Shape {
    /// Whether `pod` has this shape ([`shape_of`] without the copy).
    fn is_of(&self, pod: &Pod) -> bool {
        self.requests == pod.requests
            && self.node_selector == pod.node_selector
            && self.affinity == pod.affinity
            && self.tolerations == pod.tolerations
    }
}

/// What the plan's gangs that cannot be placed ask the autoscaler for, in gang-key order. Empty
/// unless the policy turns `provisioning` on. `fits` is the static filter (readiness, taints,
/// selectors, affinity) the cycle uses, so "no room" means what it means to the cycle. A gang
/// whose members come in more than [`MAX_POD_SETS`] shapes asks for nothing (a request cannot
/// carry them); its message already says why it waits.
pub fn asks(
    snap: &Snapshot,
    config: &Config,
    plan: &Plan,
    fits: impl Fn(&Node, &Pod) -> bool,
) -> Vec<ProvisioningAsk> {
    let Some(policy) = &config.provisioning else { return Vec::new() };
    let wanting: HashMap<&GangKey, bool> = snap
        .gangs
        .iter()
        .filter(|g| policy.applies(g.provisioning))
        .filter(|g| plan.outcome(&g.key).is_some_and(|o| wants_capacity(o.reason)))
        .map(|g| (&g.key, g.topology_key.is_some()))
        .collect();
    if wanting.is_empty() {
        return Vec::new();
    }
    let reserved: HashSet<&PodKey> = plan.reservations.iter().map(|r| &r.pod).collect();
    let mut members: BTreeMap<&GangKey, Vec<&Pod>> = BTreeMap::new();
    for pod in &snap.pods {
        let Some(m) = &pod.gang else { continue };
        if wanting.contains_key(&m.gang)
            && pod.is_pending()
            && !pod.is_gated()
            && pod.scheduler_name == config.scheduler_name
            && !reserved.contains(&pod.key)
        {
            members.entry(&m.gang).or_default().push(pod);
        }
    }
    let mut room = Room::new(snap, plan);
    let mut out = Vec::new();
    for (gang, mut pods) in members {
        pods.sort_by(|a, b| a.key.cmp(&b.key));
        // At most MAX_POD_SETS shapes are kept, each compared in place (a pod's shape is cloned
        // only when it is new): a gang of n pods costs O(n × MAX_POD_SETS), whatever its shapes.
        let mut sets: Vec<(Shape, Vec<&Pod>)> = Vec::new();
        let mut too_many = false;
        for pod in pods {
            match sets.iter().position(|(s, _)| s.is_of(pod)) {
                Some(i) => sets[i].1.push(pod),
                None if sets.len() == MAX_POD_SETS => {
                    too_many = true;
                    break;
                }
                None => sets.push((shape_of(pod), vec![pod])),
            }
        }
        if too_many {
            continue;
        }
        let topology = wanting.get(gang).copied().unwrap_or(false);
        let mut pod_sets: Vec<PodSet> = sets
            .into_iter()
            .filter_map(|(shape, list)| {
                let fitted = if topology { 0 } else { room.take(snap, list[0], list.len(), &fits) };
                let pods: Vec<PodKey> = list[fitted..].iter().map(|p| p.key.clone()).collect();
                let count = u32::try_from(pods.len()).ok().filter(|&n| n > 0)?;
                Some(PodSet { shape, pods, count })
            })
            .collect();
        pod_sets.sort_by(|a, b| a.pods.cmp(&b.pods));
        if !pod_sets.is_empty() {
            out.push(ProvisioningAsk { gang: gang.clone(), class: policy.class.clone(), pod_sets });
        }
    }
    out
}

/// Free capacity per node as the plan leaves it, taken as asking gangs' members find room.
struct Room {
    /// Node index → free amount per resource, and free pod slots.
    free: Vec<(HashMap<String, i128>, i128)>,
    /// Node indices by name: the order first fit tries them in, whatever order the snapshot has.
    order: Vec<usize>,
}

impl Room {
    fn new(snap: &Snapshot, plan: &Plan) -> Self {
        let added;
        let usage = match &snap.usage {
            Some(u) => u,
            None => {
                added = Usage::of(&snap.pods);
                &added
            }
        };
        let index: HashMap<&str, usize> =
            snap.nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
        let mut free: Vec<(HashMap<String, i128>, i128)> = snap
            .nodes
            .iter()
            .map(|n| {
                let mut res: HashMap<String, i128> = n
                    .allocatable
                    .iter()
                    .filter(|(k, _)| *k != PODS)
                    .map(|(k, v)| (k.to_string(), i128::from(v)))
                    .collect();
                let mut pods = i128::from(n.allocatable.get(PODS));
                if let Some(u) = usage.node(&n.name) {
                    pods -= u.pods;
                    for (k, v) in &u.requests {
                        *res.entry(k.clone()).or_default() -= v;
                    }
                }
                (res, pods)
            })
            .collect();
        let pods: HashMap<&PodKey, &Pod> = snap.pods.iter().map(|p| (&p.key, p)).collect();
        let held = plan.bindings.iter().map(|b| (&b.pod, b.node.as_str()));
        let held = held.chain(plan.reservations.iter().map(|r| (&r.pod, r.node.as_str())));
        for (pod, node) in held {
            if let (Some(p), Some(&n)) = (pods.get(pod), index.get(node)) {
                let (res, slots) = &mut free[n];
                *slots -= 1;
                for (k, v) in p.requests.iter().filter(|(_, v)| *v > 0) {
                    *res.entry(k.to_string()).or_default() -= i128::from(v);
                }
            }
        }
        let mut order: Vec<usize> = (0..snap.nodes.len()).collect();
        order.sort_by(|&a, &b| snap.nodes[a].name.cmp(&snap.nodes[b].name));
        Room { free, order }
    }

    /// Places up to `n` pods shaped like `pod`, first fit over the nodes by name;
    /// returns how many found room.
    fn take(&mut self, snap: &Snapshot, pod: &Pod, n: usize, fits: &impl Fn(&Node, &Pod) -> bool) -> usize {
        let wants: Vec<(&str, i128)> =
            pod.requests.iter().filter(|(_, v)| *v > 0).map(|(k, v)| (k, i128::from(v))).collect();
        let mut placed = 0;
        for &i in &self.order {
            let (node, (res, slots)) = (&snap.nodes[i], &mut self.free[i]);
            if placed == n {
                break;
            }
            if *slots < 1 || !fits(node, pod) {
                continue;
            }
            let mut here = (*slots).min(i128::try_from(n - placed).unwrap_or(i128::MAX));
            for (k, v) in &wants {
                here = here.min(res.get(*k).copied().unwrap_or(0).max(0) / v);
            }
            if here <= 0 {
                continue;
            }
            *slots -= here;
            for (k, v) in &wants {
                *res.entry((*k).to_string()).or_default() -= v * here;
            }
            placed += usize::try_from(here).unwrap_or(0);
        }
        placed
    }
}

/// What became of a ProvisioningRequest, read from its conditions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestState {
    /// Created; the autoscaler has said nothing yet, or `Accepted`.
    Waiting,
    /// `Provisioned=True`: the capacity exists; the cycle places the gang.
    Provisioned,
    /// `Failed`, `CapacityRevoked` or `BookingExpired` is `True` (the condition's type).
    Ended(&'static str),
}

/// A request's state from its `status.conditions` (metav1.Condition: `type`, `status`), as
/// cluster-autoscaler writes them (kubernetes/autoscaler `provisioningrequest/.../v1/types.go`).
/// An ending condition wins over `Provisioned` (a booking that expired was provisioned first).
pub fn request_state(request: &serde_json::Value) -> RequestState {
    let conditions = request.pointer("/status/conditions").and_then(serde_json::Value::as_array);
    let is_true =
        |t: &str| conditions.is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"));
    for ended in ["Failed", "CapacityRevoked", "BookingExpired"] {
        if is_true(ended) {
            return RequestState::Ended(ended);
        }
    }
    if is_true("Provisioned") { RequestState::Provisioned } else { RequestState::Waiting }
}

/// What a gang's status says while its request `namespace/name` of `class` is open: the one
/// line the scheduler writes and `kubectl gang status` prints. `None` for a request that ended.
pub fn capacity_line(namespace: &str, name: &str, class: &str, state: RequestState) -> Option<String> {
    let what = match state {
        RequestState::Waiting => "waiting for capacity",
        RequestState::Provisioned => "capacity provisioned",
        RequestState::Ended(_) => return None,
    };
    Some(format!("{what}: ProvisioningRequest {namespace}/{name} ({class})"))
}

/// The request the scheduler wrote for `gang` among `requests` (raw ProvisioningRequests): in the
/// gang's namespace, labelled `kube-gang.io/gang` with the gang's label value and
/// `app.kubernetes.io/managed-by: gang-scheduler`; the newest (`creationTimestamp`, then the
/// attempt in its `{gang}-{attempt}` name) when there are several.
pub fn gang_request<'a>(
    requests: impl IntoIterator<Item = &'a serde_json::Value>,
    gang: &GangKey,
) -> Option<&'a serde_json::Value> {
    let label = crate::read::workload::label_value_for(&gang.name);
    let s =
        |r: &'a serde_json::Value, p: &str| r.pointer(p).and_then(serde_json::Value::as_str).unwrap_or("");
    requests
        .into_iter()
        // Each request's identity, read once.
        .map(|r| (crate::read::object::ObjectRef::of(r), r))
        .filter(|(id, r)| {
            id.kind == "ProvisioningRequest"
                && id.namespace == gang.namespace
                && s(r, "/metadata/labels/kube-gang.io~1gang") == label
                && s(r, "/metadata/labels/app.kubernetes.io~1managed-by") == "gang-scheduler"
        })
        .max_by_key(|(id, r)| {
            let attempt = id.name.rsplit_once('-').and_then(|(_, n)| n.parse::<u32>().ok()).unwrap_or(0);
            (s(r, "/metadata/creationTimestamp").to_string(), attempt)
        })
        .map(|(_, r)| r)
}

/// The capacity line for `gang` from the requests there are (see [`gang_request`],
/// [`capacity_line`]).
pub fn capacity_line_for<'a>(
    requests: impl IntoIterator<Item = &'a serde_json::Value>,
    gang: &GangKey,
) -> Option<String> {
    let r = gang_request(requests, gang)?;
    let name = r.pointer("/metadata/name").and_then(serde_json::Value::as_str)?;
    let class = r.pointer("/spec/provisioningClassName").and_then(serde_json::Value::as_str).unwrap_or("");
    capacity_line(&gang.namespace, name, class, request_state(r))
}

#[cfg(test)]
mod request_tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn conditions_read_as_the_autoscaler_writes_them() {
        let with = |conds: Value| json!({"status": {"conditions": conds}});
        assert_eq!(request_state(&json!({})), RequestState::Waiting);
        assert_eq!(
            request_state(&with(json!([{"type": "Accepted", "status": "True"}]))),
            RequestState::Waiting
        );
        assert_eq!(
            request_state(&with(
                json!([{"type": "Provisioned", "status": "False", "reason": "CapacityIsNotFound"}])
            )),
            RequestState::Waiting
        );
        assert_eq!(
            request_state(&with(json!([{"type": "Provisioned", "status": "True"}]))),
            RequestState::Provisioned
        );
        assert_eq!(
            request_state(&with(
                json!([{"type": "Provisioned", "status": "True"}, {"type": "BookingExpired", "status": "True"}])
            )),
            RequestState::Ended("BookingExpired")
        );
        assert_eq!(
            request_state(&with(json!([{"type": "Failed", "status": "True"}]))),
            RequestState::Ended("Failed")
        );
        assert_eq!(
            request_state(&with(json!([{"type": "CapacityRevoked", "status": "True"}]))),
            RequestState::Ended("CapacityRevoked")
        );
    }

    fn request(ns: &str, name: &str, gang: &str, created: &str) -> Value {
        json!({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created,
                "labels": {"kube-gang.io/gang": gang, "app.kubernetes.io/managed-by": "gang-scheduler"}},
            "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", "podSets": []}})
    }

    #[test]
    fn the_gangs_newest_request_of_ours_is_the_one_reported() {
        let key = GangKey::new("ml", "bert");
        let mut foreign = request("ml", "bert-9", "bert", "2026-11-22T09:00:00Z");
        foreign["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("kueue");
        let requests = [
            request("ml", "bert-1", "bert", "2026-11-22T08:00:00Z"),
            request("ml", "bert-2", "bert", "2026-11-22T08:30:00Z"),
            request("other", "bert-3", "bert", "2026-11-22T09:00:00Z"),
            request("ml", "gpt-4", "gpt", "2026-11-22T09:00:00Z"),
            foreign,
        ];
        assert_eq!(
            capacity_line_for(&requests, &key).as_deref(),
            Some("waiting for capacity: ProvisioningRequest ml/bert-2 (check-capacity.autoscaling.x-k8s.io)")
        );
        let mut ended = requests.clone();
        ended[1]["status"] = json!({"conditions": [{"type": "Failed", "status": "True"}]});
        assert_eq!(capacity_line_for(&ended, &key), None, "an ended request is not waited for");
        assert_eq!(capacity_line_for(&requests, &GangKey::new("ml", "t5")), None);
    }
}
