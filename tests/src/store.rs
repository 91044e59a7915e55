//! The fake's state: objects by resource, a resourceVersion counter, the history of changes that
//! watches resume from (until compacted), what was asked of it, and its clock.
//!
//! Every change goes through [`Store::commit`], which stamps the resourceVersion, records the
//! change (with the object as it was, so a watch with a selector can tell an object that stopped
//! matching) and broadcasts it to open watches.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::faults::Fault;
use crate::validation::Kind;

/// Where objects live: `(prefix, plural)`, the prefix `/api/v1` or `/apis/{group}/{version}`.
pub type Resource = (String, String);
/// `(namespace, name)`; the namespace is empty for cluster-scoped objects.
pub type Key = (String, String);

/// One request the fake received.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: String,
    /// The body as JSON (`Null` when empty or not JSON).
    pub body: Value,
    /// When the request arrived.
    pub at: std::time::Instant,
    /// The client's `User-Agent` header (empty when absent).
    pub user_agent: String,
    /// The status it was answered with (0: not answered yet, or the connection was dropped).
    pub status: u16,
}

/// A change, as watches see it.
#[derive(Clone, Debug)]
pub struct Change {
    pub rv: u64,
    pub res: Resource,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub ty: &'static str,
    pub obj: Value,
    /// The object before a `MODIFIED` change.
    pub prev: Option<Value>,
}

/// Resources whose change makes the disruption controller compute the budgets of the namespace
/// again: pods and the controllers whose scale it reads.
pub const DISRUPTION_WATCHED: &[&str] =
    &["pods", "replicationcontrollers", "replicasets", "deployments", "statefulsets"];

#[derive(Debug)]
pub struct Store {
    pub objects: BTreeMap<Resource, BTreeMap<Key, Value>>,
    pub version: u64,
    pub history: VecDeque<Arc<Change>>,
    /// Oldest resourceVersion a watch or a continue token may resume from; older is 410 Gone.
    pub compacted: u64,
    pub requests: Vec<Recorded>,
    pub faults: Vec<Fault>,
    /// (method, path suffix, delay) applied to every matching request before it is served.
    pub delays: Vec<(String, String, Duration)>,
    /// How far the fake's clock is ahead of the wall clock ([`crate::FakeApi::advance`]).
    pub clock_offset: Duration,
    /// Counter behind generated names.
    pub generated: u64,
    /// Called with the namespace of a pod or workload controller after it changed
    /// ([`DISRUPTION_WATCHED`]): the disruption controller, when a test runs it
    /// ([`crate::FakeApi::run_disruption_controller`]).
    pub on_pod_change: Option<fn(&mut Store, &str)>,
    /// Called after a PVC or PV changed: the PV controller, when a test runs it
    /// ([`crate::FakeApi::run_pv_controller`]).
    pub on_storage_change: Option<fn(&mut Store)>,
    /// Pods with a `deletionTimestamp`, kept by [`Store::commit`]: what the kubelet's part of
    /// graceful deletion ([`crate::subresources::reap`]) looks at, so it never walks every pod.
    pub terminating: BTreeSet<Key>,
    /// How many objects each resource holds, by namespace (`""`: cluster-scoped), kept by
    /// [`Store::commit`]: a paginated list's `remainingItemCount` without walking the rest.
    pub counts: BTreeMap<Resource, BTreeMap<String, usize>>,
    changes: broadcast::Sender<Arc<Change>>,
}

pub use crate::times::{format_micro, format_time};

impl Store {
    pub fn new(changes: broadcast::Sender<Arc<Change>>) -> Store {
        Store {
            objects: BTreeMap::new(),
            version: 1,
            history: VecDeque::new(),
            compacted: 0,
            requests: Vec::new(),
            faults: Vec::new(),
            delays: Vec::new(),
            clock_offset: Duration::ZERO,
            generated: 0,
            on_pod_change: None,
            on_storage_change: None,
            terminating: BTreeSet::new(),
            counts: BTreeMap::new(),
            changes,
        }
    }

    /// The fake's clock: the wall clock plus what tests advanced it by.
    pub fn now(&self) -> Timestamp {
        let since_epoch =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default()
                + self.clock_offset;
        let secs = i64::try_from(since_epoch.as_secs()).unwrap_or(0);
        let nanos = i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0);
        Timestamp::new(secs, nanos).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    /// How many objects of `res` are held in `namespace` (every namespace when empty).
    pub fn count(&self, res: &Resource, namespace: &str) -> usize {
        let Some(by_ns) = self.counts.get(res) else { return 0 };
        if namespace.is_empty() { by_ns.values().sum() } else { by_ns.get(namespace).copied().unwrap_or(0) }
    }

    pub fn get(&self, res: &Resource, key: &Key) -> Option<&Value> {
        self.objects.get(res)?.get(key)
    }

    /// Stores `obj` under `key` (or deletes it, for `DELETED`), stamps its resourceVersion,
    /// records and broadcasts the change; returns the object as stored.
    pub fn commit(&mut self, res: &Resource, key: Key, mut obj: Value, ty: &'static str) -> Value {
        self.version += 1;
        let rv = self.version;
        if let Some(meta) = obj
            .as_object_mut()
            .map(|m| m.entry("metadata").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
        {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        if res.1 == "pods" {
            let terminating = ty != "DELETED"
                && obj.get("metadata").and_then(|m| m.get("deletionTimestamp")).is_some_and(|t| !t.is_null());
            if terminating {
                self.terminating.insert(key.clone());
            } else {
                self.terminating.remove(&key);
            }
        }
        let objects = self.objects.entry(res.clone()).or_default();
        let namespace = key.0.clone();
        let prev = if ty == "DELETED" { objects.remove(&key) } else { objects.insert(key, obj.clone()) };
        let held = self.counts.entry(res.clone()).or_default().entry(namespace).or_default();
        match (ty == "DELETED", prev.is_some()) {
            (true, true) => *held = held.saturating_sub(1),
            (false, false) => *held += 1,
            _ => {}
        }
        let change = Arc::new(Change {
            rv,
            res: res.clone(),
            ty,
            obj: obj.clone(),
            prev: if ty == "MODIFIED" { prev } else { None },
        });
        self.history.push_back(change.clone());
        let _ = self.changes.send(change);
        if DISRUPTION_WATCHED.contains(&res.1.as_str())
            && let Some(hook) = self.on_pod_change
        {
            let namespace =
                obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("").to_string();
            hook(self, &namespace);
        }
        // Taken while it runs: its own writes do not call it again.
        if pv_controller_watches(res)
            && let Some(hook) = self.on_storage_change.take()
        {
            hook(self);
            self.on_storage_change = Some(hook);
        }
        obj
    }

    /// Changes of `res` after `rv`, oldest first.
    pub fn since(&self, res: &Resource, rv: u64) -> Vec<Arc<Change>> {
        let start = self.history.partition_point(|c| c.rv <= rv);
        self.history.range(start..).filter(|c| c.res == *res).cloned().collect()
    }

    /// A fresh suffix for `generateName`, from the alphabet the API server uses.
    pub fn suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        self.generated += 1;
        let mut n = self.generated.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20;
        (0..5)
            .map(|_| {
                let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
                n /= ALPHABET.len() as u64;
                c
            })
            .collect()
    }
}

/// The kind served at a resource.
pub fn kind(res: &Resource) -> Kind {
    Kind::of(&res.0, &res.1)
}

/// `(resource, key)` of an object as a test hands it over (`apiVersion`, `kind`, metadata).
pub fn locate(obj: &Value) -> (Resource, Key) {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("v1");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    (resource_of(api_version, kind), (ns.to_string(), name.to_string()))
}

/// `(prefix, plural)` of a kind.
pub fn resource_of(api_version: &str, kind: &str) -> Resource {
    let prefix = if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    };
    let lower = kind.to_lowercase();
    let plural = if lower.ends_with("class") || lower.ends_with("ss") {
        format!("{lower}es")
    } else if lower.ends_with('y') {
        format!("{}ies", &lower[..lower.len() - 1])
    } else {
        format!("{lower}s")
    };
    (prefix, plural)
}

/// The kind name of a plural (for list and bookmark objects): the core's for every kind it reads
/// (`cluster::READ`, the gang kinds' table included), else a table of workload kinds, else the
/// plural made singular and capitalised.
pub fn kind_name(plural: &str) -> String {
    if let Some(k) = scheduler_core::cluster::READ.iter().find(|k| k.plural == plural) {
        return k.kind.to_string();
    }
    match plural {
        "appwrappers" => "AppWrapper".into(),
        "rayjobs" => "RayJob".into(),
        "podcliquesets" => "PodCliqueSet".into(),
        "trainjobs" => "TrainJob".into(),
        "priorityclasses" => "PriorityClass".into(),
        "poddisruptionbudgets" => "PodDisruptionBudget".into(),
        "podgroups" => "PodGroup".into(),
        "compositepodgroups" => "CompositePodGroup".into(),
        "leaderworkersets" => "LeaderWorkerSet".into(),
        "jobsets" => "JobSet".into(),
        "pytorchjobs" => "PyTorchJob".into(),
        "mpijobs" => "MPIJob".into(),
        "tfjobs" => "TFJob".into(),
        "rayclusters" => "RayCluster".into(),
        "statefulsets" => "StatefulSet".into(),
        "persistentvolumeclaims" => "PersistentVolumeClaim".into(),
        "persistentvolumes" => "PersistentVolume".into(),
        "storageclasses" => "StorageClass".into(),
        "csinodes" => "CSINode".into(),
        "resourceclaims" => "ResourceClaim".into(),
        "resourceslices" => "ResourceSlice".into(),
        "deviceclasses" => "DeviceClass".into(),
        "hypernodes" => "HyperNode".into(),
        other => {
            let singular = other.strip_suffix("ies").map(|s| format!("{s}y")).unwrap_or_else(|| {
                other
                    .strip_suffix("sses")
                    .map(|s| format!("{s}ss"))
                    .unwrap_or_else(|| other.strip_suffix('s').unwrap_or(other).to_string())
            });
            let mut c = singular.chars();
            c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
        }
    }
}

/// `apiVersion` of a resource prefix.
pub fn api_version(prefix: &str) -> String {
    prefix.trim_start_matches("/apis/").trim_start_matches("/api/").to_string()
}

/// Whether a change to `res` is one the PV controller reacts to (PVCs and PVs).
fn pv_controller_watches(res: &Resource) -> bool {
    res.0 == "/api/v1" && (res.1 == "persistentvolumeclaims" || res.1 == "persistentvolumes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_and_kinds_round_trip() {
        for (kind, plural) in [
            ("Pod", "pods"),
            ("PriorityClass", "priorityclasses"),
            ("PodDisruptionBudget", "poddisruptionbudgets"),
            ("Gang", "gangs"),
            ("Lease", "leases"),
            ("PersistentVolumeClaim", "persistentvolumeclaims"),
            ("StorageClass", "storageclasses"),
            ("CSINode", "csinodes"),
            ("ResourceClaim", "resourceclaims"),
            ("ResourceSlice", "resourceslices"),
            ("DeviceClass", "deviceclasses"),
            ("HyperNode", "hypernodes"),
        ] {
            assert_eq!(resource_of("v1", kind).1, plural);
            assert_eq!(kind_name(plural), kind);
        }
        // Kinds whose capitals a plural does not show: every kind the core reads, and the
        // workloads the webhook sees.
        for k in scheduler_core::cluster::READ {
            assert_eq!(kind_name(k.plural), k.kind);
        }
        for (kind, plural) in [("PodGang", "podgangs"), ("AppWrapper", "appwrappers"), ("RayJob", "rayjobs")]
        {
            assert_eq!(kind_name(plural), kind);
        }
    }

    #[test]
    fn generated_suffixes_differ_and_use_the_api_servers_alphabet() {
        let (tx, _) = broadcast::channel(1);
        let mut s = Store::new(tx);
        let a: Vec<String> = (0..100).map(|_| s.suffix()).collect();
        let unique: std::collections::BTreeSet<&String> = a.iter().collect();
        assert_eq!(unique.len(), 100);
        assert!(
            a.iter().all(|x| x.len() == 5 && x.bytes().all(|c| b"bcdfghjklmnpqrstvwxz2456789".contains(&c)))
        );
    }
}
