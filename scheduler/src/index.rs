//! The synchronous index the watches feed: raw objects per watched resource, plus the bindings this
//! scheduler sent that the watch has not confirmed yet (so the next cycle cannot double-book a
//! node). A cycle assembles a snapshot from it through the core's one assembly path.

use std::collections::BTreeMap;

use scheduler_core::cluster::{Assembled, Cluster};
use scheduler_core::model::PodKey;
use scheduler_core::plan::Binding;
use serde_json::Value;

/// Cluster state as the scheduler knows it.
#[derive(Debug, Default)]
pub struct Index {
    /// Resource (e.g. `v1/Pod`) → (namespace, name) → object.
    objects: BTreeMap<String, BTreeMap<(String, String), Value>>,
    /// Pod → node for bindings sent but not yet seen in a watch event.
    assumed: BTreeMap<PodKey, String>,
}

fn key_of(obj: &Value) -> (String, String) {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    (s("/metadata/namespace"), s("/metadata/name"))
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
        self.objects.entry(resource.to_string()).or_default().insert(key_of(&obj), obj);
    }

    /// A watch `Delete` event for `resource`.
    pub fn delete(&mut self, resource: &str, obj: &Value) {
        if let Some(pod) = pod_key(obj) {
            self.assumed.remove(&pod);
        }
        if let Some(m) = self.objects.get_mut(resource) {
            m.remove(&key_of(obj));
        }
    }

    /// A completed (re-)list of `resource` replaces what the index held for it: objects deleted
    /// while the watch was down (410 Gone, a dropped connection) disappear here.
    pub fn replace(&mut self, resource: &str, objects: Vec<Value>) {
        let fresh: BTreeMap<(String, String), Value> = objects.into_iter().map(|o| (key_of(&o), o)).collect();
        for o in fresh.values() {
            if let Some(pod) = pod_key(o)
                && o.pointer("/spec/nodeName").and_then(Value::as_str).is_some()
            {
                self.assumed.remove(&pod);
            }
        }
        self.objects.insert(resource.to_string(), fresh);
    }

    /// How many objects of `resource` are held.
    pub fn count(&self, resource: &str) -> usize {
        self.objects.get(resource).map_or(0, BTreeMap::len)
    }

    /// The raw object, if held.
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<&Value> {
        self.objects.get(resource)?.get(&(namespace.to_string(), name.to_string()))
    }

    /// Records a binding this scheduler sent.
    pub fn assume(&mut self, b: &Binding) {
        self.assumed.insert(b.pod.clone(), b.node.clone());
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
    pub fn snapshot(&self) -> Assembled {
        let mut cluster = Cluster::new();
        for objects in self.objects.values() {
            for o in objects.values() {
                // Objects the core cannot read are reported through the assembly's problems.
                let _ = cluster.push(o.clone());
            }
        }
        let mut a = cluster.snapshot();
        for p in &mut a.snapshot.pods {
            if p.node_name.is_none()
                && let Some(node) = self.assumed.get(&p.key)
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
