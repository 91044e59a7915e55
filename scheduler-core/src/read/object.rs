//! Which object this is: an object's identity (API group and version, kind, namespace, name),
//! computed once where it enters — from a watch event's typed metadata and the resource watched
//! ([`ObjectRef::of_kind`]), or from a file's JSON ([`ObjectRef::of`]) — and carried from there
//! through the scheduler's index, [`crate::read::cluster::Live`] and [`crate::read::cluster::Cluster`]
//! instead of being read again. Also the kinds the cluster view reads besides the gang objects
//! ([`BASE`]; `cluster::READ` adds the rows of the dialects' table of gang kinds).

use std::borrow::Cow;

use serde_json::Value;

/// A kind the cluster view reads from the API (`cluster::READ`: every front door that lists or
/// watches the cluster reads exactly those).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    /// A built-in Kubernetes kind (always served); the others are CRDs that may be absent.
    pub builtin: bool,
}

const fn api_kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
) -> ApiKind {
    ApiKind { group, version, kind, plural, builtin: false }
}

const fn builtin(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
) -> ApiKind {
    ApiKind { group, version, kind, plural, builtin: true }
}

/// Nodes (`v1`).
pub const NODE: ApiKind = builtin("", "v1", "Node", "nodes");
/// Pods (`v1`).
pub const POD: ApiKind = builtin("", "v1", "Pod", "pods");
/// PersistentVolumeClaims (`v1`).
pub const PVC: ApiKind = builtin("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims");
/// PersistentVolumes (`v1`).
pub const PV: ApiKind = builtin("", "v1", "PersistentVolume", "persistentvolumes");
/// kube-gang's own `Gang` (`kube-gang.io/v1alpha1`: `crate::read::labels::GROUP`, `crate::read::labels::VERSION`; a test
/// holds them equal).
pub const GANG: ApiKind = api_kind("kube-gang.io", "v1alpha1", "Gang", "gangs");

/// What [`crate::read::cluster::Cluster`] understands besides gang objects: nodes, pods, namespaces,
/// priority classes, PodDisruptionBudgets, what the volume filters read (PVCs, PVs,
/// StorageClasses, CSINodes, DRA ResourceClaims), Volcano's HyperNodes and the Topology objects
/// that order levels. `cluster::READ` is this and a row per version of every kind in the
/// dialects' table (`dialect::GANG_KINDS`).
pub const BASE: [ApiKind; 25] = [
    NODE,
    POD,
    builtin("", "v1", "Namespace", "namespaces"),
    builtin("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses"),
    builtin("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    PVC,
    PV,
    builtin("storage.k8s.io", "v1", "StorageClass", "storageclasses"),
    builtin("storage.k8s.io", "v1", "CSINode", "csinodes"),
    // DRA claims, preferred version first (GA `v1` from 1.34; `v1beta2` 1.33, `v1beta1` 1.32): a
    // cluster without DRA serves none, and one served twice is kept once, as PodGroups are.
    api_kind("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims"),
    api_kind("resource.k8s.io", "v1beta2", "ResourceClaim", "resourceclaims"),
    api_kind("resource.k8s.io", "v1beta1", "ResourceClaim", "resourceclaims"),
    // The devices drivers publish and the classes claims select them through (cluster-scoped).
    api_kind("resource.k8s.io", "v1", "ResourceSlice", "resourceslices"),
    api_kind("resource.k8s.io", "v1beta2", "ResourceSlice", "resourceslices"),
    api_kind("resource.k8s.io", "v1beta1", "ResourceSlice", "resourceslices"),
    api_kind("resource.k8s.io", "v1", "DeviceClass", "deviceclasses"),
    api_kind("resource.k8s.io", "v1beta2", "DeviceClass", "deviceclasses"),
    api_kind("resource.k8s.io", "v1beta1", "DeviceClass", "deviceclasses"),
    // Volcano's network tiers, which its PodGroups' `networkTopology` names.
    api_kind("topology.volcano.sh", "v1alpha1", "HyperNode", "hypernodes"),
    // Level orders: KAI's Topology (`v1`; `v1alpha1` before it) and Kueue's (`v1beta2` from
    // 0.15, `v1beta1`, `v1alpha1` before 0.14), preferred version first, each kept once.
    api_kind(KAI_TOPOLOGY_GROUP, "v1", "Topology", "topologies"),
    api_kind(KAI_TOPOLOGY_GROUP, "v1alpha1", "Topology", "topologies"),
    api_kind(KUEUE_TOPOLOGY_GROUP, "v1beta2", "Topology", "topologies"),
    api_kind(KUEUE_TOPOLOGY_GROUP, "v1beta1", "Topology", "topologies"),
    api_kind(KUEUE_TOPOLOGY_GROUP, "v1alpha1", "Topology", "topologies"),
    // Koordinator's network layers, which its gangs' `network-topology-spec` names.
    api_kind(KOORDINATOR_NETWORK_GROUP, "v1alpha1", "ClusterNetworkTopology", "clusternetworktopologies"),
];

/// KAI-Scheduler's API group of its `Topology` (level orders its PodGroups name).
pub const KAI_TOPOLOGY_GROUP: &str = "kai.scheduler";
/// Kueue's API group (its `Topology` orders the levels of topology-aware scheduling).
pub const KUEUE_TOPOLOGY_GROUP: &str = "kueue.x-k8s.io";
/// Koordinator's API group of its `ClusterNetworkTopology` (network layers).
pub const KOORDINATOR_NETWORK_GROUP: &str = "scheduling.koordinator.sh";

/// The identity of one Kubernetes object. The type part of a kind in [`BASE`] is borrowed from
/// it, so an identity costs its namespace and name only.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// The API group (`""` for the core group).
    pub group: Cow<'static, str>,
    pub version: Cow<'static, str>,
    pub kind: Cow<'static, str>,
    /// `""` for cluster-scoped objects (and for namespaced ones that do not say).
    pub namespace: String,
    pub name: String,
}

/// Where the cluster view files an object, by its API version and kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Filed {
    Node,
    Pod,
    Namespace,
    PriorityClass,
    /// A `policy/v1` PodDisruptionBudget.
    Budget,
    /// What the volume filters read.
    Storage(StoredKind),
    /// Anything else: a gang object of some dialect, or a kind the cluster view does not use.
    Other,
}

/// The storage and device kinds the cluster view files (see [`crate::read::model::volume`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StoredKind {
    Pvc,
    Pv,
    StorageClass,
    CsiNode,
    /// A DRA ResourceClaim, at any version of `resource.k8s.io`.
    ResourceClaim,
    /// A DRA ResourceSlice, at any version.
    ResourceSlice,
    /// A DRA DeviceClass, at any version.
    DeviceClass,
    /// A Volcano HyperNode (read with the storage kinds: cluster-scoped objects the cycle reads).
    HyperNode,
    /// KAI-Scheduler's `Topology`, at any version of `kai.scheduler`.
    KaiTopology,
    /// Kueue's `Topology`, at any version of `kueue.x-k8s.io`.
    KueueTopology,
    /// Koordinator's `ClusterNetworkTopology`.
    NetworkTopology,
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    at(v, ptr).and_then(Value::as_str).unwrap_or("")
}

/// An array index, read as serde_json reads one in a pointer: digits, no sign, no leading zero.
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
        return None;
    }
    token.parse().ok()
}

/// [`Value::pointer`] without its allocations: serde_json unescapes every token into a new
/// `String`, two per token — on the load path, several per object, 140,000 objects at a time. A
/// pointer with an escape (`~0`, `~1`) is left to serde_json.
pub fn at<'a>(v: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() || pointer.contains('~') {
        return v.pointer(pointer);
    }
    let rest = pointer.strip_prefix('/')?;
    rest.split('/').try_fold(v, |target, token| match target {
        Value::Object(map) => map.get(token),
        Value::Array(list) => index(token).and_then(|i| list.get(i)),
        _ => None,
    })
}

/// [`at`] as a method, for code that reads many fields of one object (admission reads each
/// workload's templates field by field on every decision).
pub trait At {
    /// [`Value::pointer`] without its allocations (see [`at`]).
    fn at(&self, pointer: &str) -> Option<&Value>;
}

impl At for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        at(self, pointer)
    }
}

/// Where the cluster view files objects of this API group, version and kind.
fn filed(group: &str, version: &str, kind: &str) -> Filed {
    match (group, version, kind) {
        ("", "v1", "Node") => Filed::Node,
        ("", "v1", "Pod") => Filed::Pod,
        ("", "v1", "Namespace") => Filed::Namespace,
        ("scheduling.k8s.io", _, "PriorityClass") => Filed::PriorityClass,
        ("policy", "v1", "PodDisruptionBudget") => Filed::Budget,
        ("", "v1", "PersistentVolumeClaim") => Filed::Storage(StoredKind::Pvc),
        ("", "v1", "PersistentVolume") => Filed::Storage(StoredKind::Pv),
        ("storage.k8s.io", "v1", "StorageClass") => Filed::Storage(StoredKind::StorageClass),
        ("storage.k8s.io", "v1", "CSINode") => Filed::Storage(StoredKind::CsiNode),
        ("resource.k8s.io", "v1" | "v1beta2" | "v1beta1", "ResourceClaim") => {
            Filed::Storage(StoredKind::ResourceClaim)
        }
        ("resource.k8s.io", "v1" | "v1beta2" | "v1beta1", "ResourceSlice") => {
            Filed::Storage(StoredKind::ResourceSlice)
        }
        ("resource.k8s.io", "v1" | "v1beta2" | "v1beta1", "DeviceClass") => {
            Filed::Storage(StoredKind::DeviceClass)
        }
        ("topology.volcano.sh", "v1alpha1", "HyperNode") => Filed::Storage(StoredKind::HyperNode),
        (KAI_TOPOLOGY_GROUP, "v1" | "v1alpha1", "Topology") => Filed::Storage(StoredKind::KaiTopology),
        (KUEUE_TOPOLOGY_GROUP, "v1beta2" | "v1beta1" | "v1alpha1", "Topology") => {
            Filed::Storage(StoredKind::KueueTopology)
        }
        (KOORDINATOR_NETWORK_GROUP, "v1alpha1", "ClusterNetworkTopology") => {
            Filed::Storage(StoredKind::NetworkTopology)
        }
        _ => Filed::Other,
    }
}

impl ApiKind {
    /// Where the cluster view files objects of this kind.
    pub fn filed(&self) -> Filed {
        filed(self.group, self.version, self.kind)
    }
}

/// The type part of an identity, borrowed from [`BASE`] when it names a kind there (a gang
/// object's, rarer, is its own copy).
fn type_of(group: &str, version: &str, kind: &str) -> [Cow<'static, str>; 3] {
    match BASE.iter().find(|k| k.kind == kind && k.version == version && k.group == group) {
        Some(k) => [Cow::Borrowed(k.group), Cow::Borrowed(k.version), Cow::Borrowed(k.kind)],
        None => [group.to_string().into(), version.to_string().into(), kind.to_string().into()],
    }
}

impl ObjectRef {
    /// The identity an object states in its JSON (fields it lacks are empty): for objects read
    /// from files. A watch knows the kind it watches and reads the rest from typed metadata
    /// ([`ObjectRef::of_kind`]).
    pub fn of(obj: &Value) -> Self {
        ObjectRef::new(
            str_at(obj, "/apiVersion"),
            str_at(obj, "/kind"),
            str_at(obj, "/metadata/namespace"),
            str_at(obj, "/metadata/name"),
        )
    }

    /// An identity from its parts.
    pub fn new(api_version: &str, kind: &str, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        let (group, version) = split_api_version(api_version);
        let [group, version, kind] = type_of(group, version, kind);
        ObjectRef { group, version, kind, namespace: namespace.into(), name: name.into() }
    }

    /// An object of a kind the cluster view reads: no copy of its type.
    pub fn of_kind(k: &'static ApiKind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectRef {
            group: Cow::Borrowed(k.group),
            version: Cow::Borrowed(k.version),
            kind: Cow::Borrowed(k.kind),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// `v1`, `scheduling.volcano.sh/v1beta1`, …
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether the object is of kind `k` (any namespace and name).
    pub fn is(&self, k: &ApiKind) -> bool {
        self.kind == k.kind && self.version == k.version && self.group == k.group
    }

    /// Where the cluster view files it.
    pub fn filed(&self) -> Filed {
        filed(&self.group, &self.version, &self.kind)
    }

    /// The namespace a pod lives in: the API server puts a pod that names none in `default`.
    pub fn pod_namespace(&self) -> &str {
        if self.namespace.is_empty() { "default" } else { &self.namespace }
    }

    /// `Kind namespace/name` (or `Kind name` for cluster-scoped objects), for messages.
    pub fn describe(&self) -> String {
        describe_named(&self.kind, &self.namespace, &self.name)
    }
}

/// `Kind namespace/name` (or `Kind name` when there is no namespace; `object` when there is no
/// kind), for messages: how every front door names an object.
pub fn describe_named(kind: &str, namespace: &str, name: &str) -> String {
    let kind = if kind.is_empty() { "object" } else { kind };
    if namespace.is_empty() { format!("{kind} {name}") } else { format!("{kind} {namespace}/{name}") }
}

/// `scheduling.volcano.sh/v1beta1` → (`scheduling.volcano.sh`, `v1beta1`); `v1` → (`""`, `v1`).
fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// The API group of an `apiVersion` (`scheduling.volcano.sh/v1beta1` → `scheduling.volcano.sh`;
/// `v1` → the core group, `""`).
pub fn group_of(api_version: &str) -> &str {
    split_api_version(api_version).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn at_finds_what_pointer_finds() {
        let v = json!({"metadata": {"name": "p", "a/b": 1, "m~n": 2, "": 3},
                       "items": [{"x": 1}, {"x": 2}], "n": null});
        for p in [
            "",
            "/",
            "/metadata",
            "/metadata/name",
            "/metadata/a~1b",
            "/metadata/m~0n",
            "/metadata/",
            "/items/1/x",
            "/items/01",
            "/items/+1",
            "/items/2",
            "/items/-1",
            "/n/x",
            "/missing",
            "metadata",
            "/metadata/name/x",
        ] {
            assert_eq!(at(&v, p), v.pointer(p), "{p:?}");
        }
    }

    #[test]
    fn identity_is_read_once_from_the_object() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "w-0", "uid": "u1"}});
        let r = ObjectRef::of(&pod);
        assert_eq!((r.group.as_ref(), r.name.as_str(), r.api_version()), ("", "w-0", "v1".to_string()));
        assert_eq!((r.filed(), r.pod_namespace()), (Filed::Pod, "default"));
        assert!(matches!(r.kind, Cow::Borrowed(_)), "a kind the cluster reads is not copied");
        let pg = ObjectRef::of(&json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"namespace": "ml", "name": "g"}}));
        assert_eq!((pg.group.as_ref(), pg.filed()), ("scheduling.volcano.sh", Filed::Other));
        assert_eq!(pg.describe(), "PodGroup ml/g");
        assert_eq!(pg.api_version(), "scheduling.volcano.sh/v1beta1");
        let pc = ObjectRef::new("scheduling.k8s.io/v1", "PriorityClass", "", "high");
        assert_eq!(pc.filed(), Filed::PriorityClass);
        assert_eq!(ObjectRef::new("example.com/v1", "PriorityClass", "", "x").filed(), Filed::Other);
        assert_eq!(ObjectRef::of(&json!("not an object")), ObjectRef::default());
        assert_eq!(ObjectRef::of_kind(&BASE[1], "ml", "w-0"), ObjectRef::new("v1", "Pod", "ml", "w-0"));
        assert!(ObjectRef::new("v1", "Pod", "ml", "w-0").is(&BASE[1]));
    }
}
