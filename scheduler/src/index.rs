//! The synchronous index the watches feed: the watched objects in the core's [`Cluster`], plus the
//! bindings this scheduler sent that the watch has not confirmed yet (so the next cycle cannot
//! double-book a node). A cycle assembles a snapshot from it through the core's one assembly
//! path; a [`Memo`] keeps the conversions of objects that did not change since the last cycle, so
//! a cycle costs what changed, not what the cluster holds.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use scheduler_core::cluster::{Assembled, Cluster, Memo};
use scheduler_core::model::PodKey;
use scheduler_core::plan::Binding;
use serde_json::Value;

/// Cluster state as the scheduler knows it.
#[derive(Debug, Default)]
pub struct Index {
    cluster: Cluster,
    memo: Memo,
    /// Resource (e.g. `v1/Pod`) → the (namespace, name) of each object held.
    keys: BTreeMap<String, BTreeSet<(String, String)>>,
    /// Bindings sent and not yet seen in the watch: pod → (node, when sent).
    assumed: BTreeMap<PodKey, (String, Instant)>,
}

fn key_of(obj: &Value) -> (String, String) {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    (s("/metadata/namespace"), s("/metadata/name"))
}

/// `v1/Pod` → (`v1`, `Pod`); `kube-gang.io/v1alpha1/Gang` → (`kube-gang.io/v1alpha1`, `Gang`).
fn split(resource: &str) -> (&str, &str) {
    resource.rsplit_once('/').unwrap_or(("", resource))
}

impl Index {
    pub fn new() -> Self {
        Index::default()
    }

    /// A watch `Apply` event for `resource`.
    pub fn apply(&mut self, resource: &str, obj: Value) {
        if let Some(pod) = pod_key(&obj)
            && obj.pointer("/spec/nodeName").and_then(Value::as_str).is_some()
        {
            self.assumed.remove(&pod);
        }
        let key = key_of(&obj);
        // Objects the core cannot file are reported when a snapshot is assembled, not here.
        if self.cluster.push(obj).is_ok() {
            self.keys.entry(resource.to_string()).or_default().insert(key);
        }
        // Kinds the cluster view does not use are not kept (a watch would grow them forever).
        self.cluster.others.clear();
    }

    /// A watch `Delete` event for `resource`.
    pub fn delete(&mut self, resource: &str, obj: &Value) {
        if let Some(pod) = pod_key(obj) {
            self.assumed.remove(&pod);
        }
        self.forget_object(resource, &key_of(obj));
    }

    fn forget_object(&mut self, resource: &str, (ns, name): &(String, String)) {
        let (api_version, kind) = split(resource);
        self.cluster.remove_named(api_version, kind, ns, name);
        if let Some(keys) = self.keys.get_mut(resource) {
            keys.remove(&(ns.clone(), name.clone()));
        }
    }

    /// A completed (re-)list of `resource` replaces what the index held for it: objects deleted
    /// while the watch was down (410 Gone, a dropped connection) disappear here.
    pub fn replace(&mut self, resource: &str, objects: Vec<Value>) {
        let fresh: BTreeSet<(String, String)> = objects.iter().map(key_of).collect();
        let gone: Vec<(String, String)> =
            self.keys.get(resource).map(|k| k.difference(&fresh).cloned().collect()).unwrap_or_default();
        for key in &gone {
            self.forget_object(resource, key);
        }
        for o in objects {
            self.apply(resource, o);
        }
    }

    /// How many objects of `resource` are held.
    pub fn count(&self, resource: &str) -> usize {
        self.keys.get(resource).map_or(0, BTreeSet::len)
    }

    /// The raw object, if held.
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<&Value> {
        let (api_version, kind) = split(resource);
        self.cluster.get(api_version, kind, namespace, name)
    }

    /// Records a binding sent to the API.
    pub fn assume(&mut self, b: &Binding) {
        self.assumed.insert(b.pod.clone(), (b.node.clone(), Instant::now()));
    }

    /// Drops assumptions older than `ttl` that the watch never confirmed (a binding whose outcome
    /// could not be learned and that did not happen): their pods are placed again.
    pub fn expire(&mut self, ttl: Duration) -> usize {
        let before = self.assumed.len();
        self.assumed.retain(|_, (_, at)| at.elapsed() < ttl);
        before - self.assumed.len()
    }

    /// Forgets an assumed binding (the API refused it).
    pub fn forget(&mut self, pod: &PodKey) {
        self.assumed.remove(pod);
    }

    /// Bindings sent and not yet confirmed by the watch.
    pub fn assumed(&self) -> usize {
        self.assumed.len()
    }

    /// What the cycle sees: the watched state with assumed bindings applied.
    pub fn snapshot(&mut self) -> Assembled {
        let mut a = self.cluster.snapshot_with(&mut self.memo);
        for p in &mut a.snapshot.pods {
            if p.node_name.is_none()
                && let Some((node, _)) = self.assumed.get(&p.key)
            {
                p.node_name = Some(node.clone());
            }
        }
        a
    }
}

fn pod_key(obj: &Value) -> Option<PodKey> {
    (obj.get("kind").and_then(Value::as_str) == Some("Pod")).then(|| {
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("default");
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        PodKey::new(ns, name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
               "status": {"allocatable": {"cpu": "4", "pods": "10"}}})
    }

    fn pod(name: &str, node: Option<&str>) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml", "uid": name},
               "spec": {"schedulerName": "gang-scheduler", "nodeName": node, "containers": [{"name": "c"}]},
               "status": {"phase": "Pending"}})
    }

    #[test]
    fn assumed_bindings_hold_until_the_watch_confirms_them() {
        let mut index = Index::new();
        index.apply("v1/Node", node("n1"));
        index.apply("v1/Pod", pod("p", None));
        index.assume(&Binding { pod: PodKey::new("ml", "p"), uid: "p".into(), node: "n1".into() });
        let snap = index.snapshot().snapshot;
        assert_eq!(snap.pods[0].node_name.as_deref(), Some("n1"), "the next cycle sees the node as used");
        index.apply("v1/Pod", pod("p", Some("n1")));
        assert_eq!(index.assumed(), 0);
    }

    #[test]
    fn a_relist_drops_what_was_deleted_meanwhile() {
        let mut index = Index::new();
        index.apply("v1/Pod", pod("a", None));
        index.apply("v1/Pod", pod("b", None));
        index.replace("v1/Pod", vec![pod("b", None)]);
        assert_eq!(index.count("v1/Pod"), 1);
        assert!(index.get("v1/Pod", "ml", "a").is_none());
        index.delete("v1/Pod", &pod("b", None));
        assert_eq!(index.count("v1/Pod"), 0);
    }
}
