//! Cluster assembly: raw Kubernetes objects (nodes, pods, priority classes, namespaces, every
//! dialect's gang objects) in, a [`Snapshot`] out — with every object that could not be understood
//! listed as a [`Problem`] instead of being dropped silently.
//!
//! Membership is resolved here, once every object is known: a pod's claims (one per dialect that
//! names a gang) resolve to the gang object that exists; CRD-less gangs (kube-gang and Koordinator
//! annotations) are built from the oldest pod that claims them; upstream PodGroups resolve to the
//! root of their CompositePodGroup tree.
//!
//! [`Cluster::snapshot`] assembles in one pass (files, dumps, the CLI); [`Live`] keeps a snapshot
//! assembled while a watch delivers changes one object at a time (the scheduler).
//!
//! A cluster holds its raw objects decoded ([`Value`]: the scheduler reads them back at every
//! binding) or as compact JSON ([`Compact`]: what a one-shot reader such as the CLI holds, since a
//! decoded `Value` costs ten to fifty times the JSON of small objects). Either way every object is
//! decoded for its conversion; compact ones once more each time they are read.

mod assembly;
mod resolve;

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;

use crate::read::dialect;
use crate::read::error::FieldError;
use crate::read::model::{ObjectKey, PodKey, Snapshot};
pub use crate::read::object::{ApiKind, GANG, NODE, POD, PV, PVC};
use crate::read::object::{Filed, ObjectRef, StoredKind, describe_named};
use assembly::Assembly;
pub use assembly::{Live, Overlay, Stats};

/// How many rows the gang kinds add to [`READ`]: one per version of each.
const fn gang_rows() -> usize {
    let (mut n, mut i) = (0, 0);
    while i < dialect::GANG_KINDS.len() {
        n += dialect::GANG_KINDS[i].versions.len();
        i += 1;
    }
    n
}

/// [`READ`], built when compiling: the kinds besides gang objects ([`crate::read::object::BASE`]), then
/// a row per version of every kind in the dialects' table ([`dialect::GANG_KINDS`]), preferred
/// version first.
const READ_ROWS: [ApiKind; crate::read::object::BASE.len() + gang_rows()] = {
    let base = crate::read::object::BASE;
    let mut out = [base[0]; crate::read::object::BASE.len() + gang_rows()];
    let mut at = 0;
    while at < base.len() {
        out[at] = base[at];
        at += 1;
    }
    let mut k = 0;
    while k < dialect::GANG_KINDS.len() {
        let g = &dialect::GANG_KINDS[k];
        let mut v = 0;
        while v < g.versions.len() {
            out[at] = ApiKind {
                group: g.group,
                version: g.versions[v],
                kind: g.kind,
                plural: g.plural,
                builtin: false,
            };
            at += 1;
            v += 1;
        }
        k += 1;
    }
    out
};

/// Everything the cluster view reads from the API: every front door that lists or watches the
/// cluster reads exactly these, so a dialect added to [`dialect::GANG_KINDS`] reaches the
/// scheduler, the plugin and the scheduler's RBAC (a test holds it) alike.
pub const READ: &[ApiKind] = &READ_ROWS;

/// Where an object's API version comes in [`READ`] among the versions of its kind: lower is
/// preferred; a version not listed comes last.
fn preference(obj: &Value) -> usize {
    let api_version = str_at(obj, "/apiVersion");
    let kind = str_at(obj, "/kind");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    READ.iter().position(|k| k.group == group && k.version == version && k.kind == kind).unwrap_or(usize::MAX)
}

/// Whether the cluster view reads objects of `r`'s kind: nodes, pods, namespaces, priority
/// classes, budgets, what the volume filters read and every dialect's gang objects. A front door
/// handed other objects (a dump of a whole namespace) says it skipped them.
pub fn reads(r: &ObjectRef) -> bool {
    !matches!(r.filed(), Filed::Other) || dialect::is_gang_kind(&r.group, &r.kind)
}

/// One object that could not be read, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// `Kind namespace/name` (or `Kind name` for cluster-scoped objects).
    pub object: String,
    pub errors: Vec<FieldError>,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let errors: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
        write!(f, "{}: {}", self.object, errors.join("; "))
    }
}

/// A snapshot and the problems met building it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assembled {
    pub snapshot: Snapshot,
    pub problems: Vec<Problem>,
}

/// Where the cluster files a gang object: its API group and kind (any version: one object
/// served at two versions is one object), namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct GangAt {
    group: Cow<'static, str>,
    kind: Cow<'static, str>,
    namespace: String,
    name: String,
}

impl GangAt {
    fn of(r: &ObjectRef) -> Self {
        GangAt {
            group: r.group.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        }
    }

    /// Whether it files an object of `r`'s group and kind.
    fn is(&self, r: &ObjectRef) -> bool {
        self.group == r.group && self.kind == r.kind
    }

    /// Reads the object filed here, if its kind defines gangs.
    fn read(&self, obj: &Value) -> Option<Result<dialect::GangObject, Vec<FieldError>>> {
        dialect::read_as(&self.group, &self.kind, obj)
    }

    /// `Kind namespace/name`, as [`describe`] names the object filed here.
    fn describe(&self) -> String {
        describe_named(&self.kind, &self.namespace, &self.name)
    }
}

/// Where the cluster files a storage or device object (what the volume filters read): its kind
/// (any version: a ResourceClaim served at two versions is one object), namespace (`""` for
/// cluster-scoped kinds) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct StoredAt {
    kind: StoredKind,
    namespace: String,
    name: String,
}

impl StoredAt {
    fn of(kind: StoredKind, r: &ObjectRef) -> Self {
        let namespace = match kind {
            StoredKind::Pvc | StoredKind::ResourceClaim => r.pod_namespace().to_string(),
            StoredKind::Pv
            | StoredKind::StorageClass
            | StoredKind::CsiNode
            | StoredKind::ResourceSlice
            | StoredKind::DeviceClass
            | StoredKind::HyperNode
            | StoredKind::KaiTopology
            | StoredKind::KueueTopology
            | StoredKind::NetworkTopology => String::new(),
        };
        StoredAt { kind, namespace, name: r.name.clone() }
    }
}

/// How a [`Cluster`] holds each raw object.
pub trait Held: Clone + std::fmt::Debug + Send + Sync {
    /// Takes an object in.
    fn hold(obj: Value) -> Self;
    /// The object, decoded (borrowed when held decoded).
    fn value(&self) -> Cow<'_, Value>;
}

impl Held for Value {
    fn hold(obj: Value) -> Self {
        obj
    }

    fn value(&self) -> Cow<'_, Value> {
        Cow::Borrowed(self)
    }
}

/// An object held as compact JSON: about the size of the text it was read from, where a decoded
/// [`Value`] of small maps costs ten to fifty times that (a B-tree node per map). Decoded each
/// time it is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compact(Box<str>);

impl Compact {
    /// `obj` as compact JSON.
    pub fn new(obj: &Value) -> Self {
        // A `Value`'s map keys are strings: writing one cannot fail.
        Compact(serde_json::to_string(obj).unwrap_or_default().into_boxed_str())
    }

    /// Whether its JSON text holds `needle` (a cheap test before decoding it).
    pub fn mentions(&self, needle: &str) -> bool {
        self.0.contains(needle)
    }

    /// The object, decoded.
    pub fn decode(&self) -> Value {
        // Written by serde_json from a `Value`: it reads back (`Null` only past serde_json's
        // nesting limit of 128, which no object read through serde_json can reach).
        serde_json::from_str(&self.0).unwrap_or_default()
    }
}

impl Held for Compact {
    fn hold(obj: Value) -> Self {
        Compact::new(&obj)
    }

    fn value(&self) -> Cow<'_, Value> {
        Cow::Owned(self.decode())
    }
}

/// Raw API objects, as listed from the API or read from a dump, each filed under the identity it
/// entered with ([`ObjectRef`]) and held as `H` ([`Value`] or [`Compact`]). Later pushes of the
/// same object replace earlier ones.
#[derive(Clone, Debug)]
pub struct Cluster<H = Value> {
    nodes: BTreeMap<String, H>,
    pods: BTreeMap<PodKey, H>,
    priority_classes: BTreeMap<String, H>,
    namespaces: BTreeMap<String, H>,
    /// PodDisruptionBudgets by (namespace, name).
    budgets: BTreeMap<ObjectKey, H>,
    gang_objects: BTreeMap<GangAt, H>,
    /// PVCs, PVs, StorageClasses, CSINodes and ResourceClaims.
    storage: BTreeMap<StoredAt, H>,
    /// Objects of kinds the cluster view does not use (Jobs, Services, …), kept for callers.
    pub others: Vec<H>,
}

impl<H> Default for Cluster<H> {
    fn default() -> Self {
        Cluster {
            nodes: BTreeMap::new(),
            pods: BTreeMap::new(),
            priority_classes: BTreeMap::new(),
            namespaces: BTreeMap::new(),
            budgets: BTreeMap::new(),
            gang_objects: BTreeMap::new(),
            storage: BTreeMap::new(),
            others: Vec::new(),
        }
    }
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    crate::read::object::at(v, ptr).and_then(Value::as_str).unwrap_or("")
}

/// `Kind namespace/name` for messages.
pub fn describe(obj: &Value) -> String {
    describe_named(str_at(obj, "/kind"), str_at(obj, "/metadata/namespace"), str_at(obj, "/metadata/name"))
}

/// What every object pushed must be: an object stating its kind.
fn entering(obj: &Value) -> Result<(), FieldError> {
    if !obj.is_object() {
        return Err(FieldError::new("", "not an object"));
    }
    if str_at(obj, "/kind").is_empty() {
        return Err(FieldError::new("kind", "missing"));
    }
    Ok(())
}

/// The items of a `List` (`v1 List`, `PodList`, …), taken out of it (a dump's list holds the
/// whole cluster: not copied). Items of a typed list (PodList) may omit their own kind and
/// apiVersion: they get the list's.
fn list_items(mut list: Value) -> Result<Vec<Value>, FieldError> {
    let kind = str_at(&list, "/kind").to_string();
    let api_version = list.get("apiVersion").cloned();
    let Some(Value::Array(mut items)) = list.get_mut("items").map(Value::take) else {
        return Err(FieldError::new("items", "must be a list"));
    };
    if let Some(k) = kind.strip_suffix("List").filter(|k| !k.is_empty()) {
        for item in &mut items {
            if item.get("kind").is_none()
                && let Some(map) = item.as_object_mut()
            {
                map.insert("kind".into(), Value::String(k.to_string()));
                if let Some(v) = &api_version {
                    map.entry("apiVersion").or_insert_with(|| v.clone());
                }
            }
        }
    }
    Ok(items)
}

/// A pod's key in the cluster: its namespace as the API server defaults it, and its name.
fn pod_key(r: &ObjectRef) -> PodKey {
    PodKey::new(r.pod_namespace(), r.name.as_str())
}

/// [`pod_key`], taking the identity's strings rather than copying them.
fn into_pod_key(r: ObjectRef) -> PodKey {
    let namespace = if r.namespace.is_empty() { "default".to_string() } else { r.namespace };
    PodKey::new(namespace, r.name)
}

impl Cluster<Value> {
    /// A cluster holding its objects decoded.
    pub fn new() -> Self {
        Cluster::default()
    }
}

impl Cluster<Compact> {
    /// A cluster holding its objects as compact JSON.
    pub fn compact() -> Self {
        Cluster::default()
    }
}

impl<H: Held> Cluster<H> {
    /// Adds one object; a `List` (`v1 List`, `PodList`, …) is flattened.
    pub fn push(&mut self, obj: Value) -> Result<(), FieldError> {
        entering(&obj)?;
        if str_at(&obj, "/kind").ends_with("List") && obj.get("items").is_some() {
            let mut first_error = None;
            for (i, item) in list_items(obj)?.into_iter().enumerate() {
                if let Err(e) = self.push(item)
                    && first_error.is_none()
                {
                    first_error = Some(FieldError::new(format!("items[{i}].{}", e.path), e.message));
                }
            }
            return first_error.map_or(Ok(()), Err);
        }
        self.insert(ObjectRef::of(&obj), obj)
    }

    /// Files one object (not a `List`) under its identity, computed once by the caller where the
    /// object entered (a watch event's metadata, a file).
    pub fn insert(&mut self, r: ObjectRef, obj: Value) -> Result<(), FieldError> {
        if r.name.is_empty() {
            return Err(FieldError::new("metadata.name", format!("missing on {}", r.kind)));
        }
        match r.filed() {
            Filed::Node => {
                self.nodes.insert(r.name, H::hold(obj));
            }
            Filed::Pod => {
                self.pods.insert(into_pod_key(r), H::hold(obj));
            }
            Filed::Namespace => {
                self.namespaces.insert(r.name, H::hold(obj));
            }
            Filed::PriorityClass => {
                self.priority_classes.insert(r.name, H::hold(obj));
            }
            Filed::Budget => {
                self.budgets.insert(into_pod_key(r), H::hold(obj));
            }
            Filed::Storage(kind) => {
                let key = StoredAt::of(kind, &r);
                // A ResourceClaim served at two versions arrives twice: the preferred one stays.
                if self.storage.get(&key).is_some_and(|held| preference(&held.value()) < preference(&obj)) {
                    return Ok(());
                }
                self.storage.insert(key, H::hold(obj));
            }
            Filed::Other if dialect::is_gang_kind(&r.group, &r.kind) => {
                let ObjectRef { group, kind, namespace, name, .. } = r;
                let key = GangAt { group, kind, namespace, name };
                // The same object served at two versions arrives twice: the preferred one stays.
                if self
                    .gang_objects
                    .get(&key)
                    .is_some_and(|held| preference(&held.value()) < preference(&obj))
                {
                    return Ok(());
                }
                self.gang_objects.insert(key, H::hold(obj));
            }
            Filed::Other => self.others.push(H::hold(obj)),
        }
        Ok(())
    }

    /// Removes an object (a watch `Deleted` event).
    pub fn remove(&mut self, obj: &Value) {
        self.remove_ref(&ObjectRef::of(obj));
    }

    /// Removes the object of this API version, kind, namespace and name, if held.
    pub fn remove_named(&mut self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        self.remove_ref(&ObjectRef::new(api_version, kind, namespace, name));
    }

    /// Removes the object with this identity, if held.
    pub fn remove_ref(&mut self, r: &ObjectRef) {
        match r.filed() {
            Filed::Node => {
                self.nodes.remove(&r.name);
            }
            Filed::Pod => {
                self.pods.remove(&pod_key(r));
            }
            Filed::Namespace => {
                self.namespaces.remove(&r.name);
            }
            Filed::PriorityClass => {
                self.priority_classes.remove(&r.name);
            }
            Filed::Budget => {
                self.budgets.remove(&pod_key(r));
            }
            Filed::Storage(kind) => {
                self.storage.remove(&StoredAt::of(kind, r));
            }
            Filed::Other => {
                self.gang_objects.remove(&GangAt::of(r));
            }
        }
    }

    /// The labels of namespace `ns`, if the cluster holds it.
    pub fn namespace_labels(&self, ns: &str) -> Option<BTreeMap<String, String>> {
        let namespace = self.namespaces.get(ns)?.value();
        let labels = namespace.pointer("/metadata/labels")?.as_object()?;
        Some(labels.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string()))).collect())
    }

    /// The raw pod `namespace/name`, if the cluster holds it.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Cow<'_, Value>> {
        self.pods.get(&PodKey::new(namespace, name)).map(H::value)
    }

    /// Every raw pod, in key order (compact ones decoded one at a time).
    pub fn pods(&self) -> impl Iterator<Item = Cow<'_, Value>> {
        self.pods.values().map(H::value)
    }

    /// Every raw gang-defining object (any dialect), in key order (compact ones decoded one at a
    /// time).
    pub fn gang_objects(&self) -> impl Iterator<Item = Cow<'_, Value>> {
        self.gang_objects.values().map(H::value)
    }

    /// The raw object of this API version, kind, namespace and name, if the cluster holds it.
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Cow<'_, Value>> {
        self.get_ref(&ObjectRef::new(api_version, kind, namespace, name))
    }

    /// The raw object with this identity, if the cluster holds it.
    pub fn get_ref(&self, r: &ObjectRef) -> Option<Cow<'_, Value>> {
        self.held(r).map(H::value)
    }

    /// The object with this identity as held (no copy, no decoding), if the cluster holds it.
    pub fn held(&self, r: &ObjectRef) -> Option<&H> {
        match r.filed() {
            Filed::Node => self.nodes.get(&r.name),
            Filed::Pod => self.pods.get(&pod_key(r)),
            Filed::Namespace => self.namespaces.get(&r.name),
            Filed::PriorityClass => self.priority_classes.get(&r.name),
            Filed::Budget => self.budgets.get(&pod_key(r)),
            Filed::Storage(kind) => self.storage.get(&StoredAt::of(kind, r)),
            Filed::Other => self.gang_objects.get(&GangAt::of(r)),
        }
    }

    /// Whether any object filed as `filed` is held.
    fn holds(&self, filed: Filed) -> bool {
        match filed {
            Filed::Node => !self.nodes.is_empty(),
            Filed::Pod => !self.pods.is_empty(),
            Filed::Namespace => !self.namespaces.is_empty(),
            Filed::PriorityClass => !self.priority_classes.is_empty(),
            Filed::Budget => !self.budgets.is_empty(),
            Filed::Storage(kind) => self.stored(kind).next().is_some(),
            Filed::Other => !self.gang_objects.is_empty(),
        }
    }

    /// The storage objects of `kind` held, in key order.
    fn stored(&self, kind: StoredKind) -> impl Iterator<Item = (&StoredAt, &H)> {
        let from = StoredAt { kind, namespace: String::new(), name: String::new() };
        self.storage.range(from..).take_while(move |(k, _)| k.kind == kind)
    }

    /// How many objects of `kind` are held.
    pub fn count(&self, kind: &ApiKind) -> usize {
        match kind.filed() {
            Filed::Node => self.nodes.len(),
            Filed::Pod => self.pods.len(),
            Filed::Namespace => self.namespaces.len(),
            Filed::PriorityClass => self.priority_classes.len(),
            Filed::Budget => self.budgets.len(),
            Filed::Storage(k) => self.stored(k).count(),
            Filed::Other => {
                self.gang_objects.keys().filter(|g| g.group == kind.group && g.kind == kind.kind).count()
            }
        }
    }

    /// The snapshot the cycle sees, assembled in one pass (pods are converted on all cores).
    pub fn snapshot(&self) -> Assembled {
        Assembly::build(self, false).into_assembled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn podgroup(version: &str, min: i32) -> Value {
        serde_json::json!({"apiVersion": format!("scheduling.k8s.io/{version}"), "kind": "PodGroup",
               "metadata": {"name": "pg", "namespace": "ml"},
               "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}})
    }

    #[test]
    fn every_podgroup_version_is_read_and_one_served_twice_is_read_once_at_the_preferred_version() {
        let versions: Vec<&str> = READ
            .iter()
            .filter(|k| k.group == "scheduling.k8s.io" && k.kind == "PodGroup")
            .map(|k| k.version)
            .collect();
        assert_eq!(versions, ["v1beta1", "v1alpha3", "v1alpha2"]);
        let gangs = |c: &Cluster| {
            let s = c.snapshot().snapshot;
            s.gangs.iter().map(|g| (g.key.to_string(), g.min_member)).collect::<Vec<_>>()
        };
        // A cluster serving only v1alpha3.
        let mut only = Cluster::new();
        only.push(podgroup("v1alpha3", 3)).unwrap();
        assert_eq!(gangs(&only), [("ml/pg".to_string(), 3)]);
        // Served at v1beta1 and v1alpha3, watched at both: one gang, from the preferred copy,
        // whichever copy arrives last.
        let mut both = Cluster::new();
        both.push(podgroup("v1beta1", 4)).unwrap();
        both.push(podgroup("v1alpha3", 3)).unwrap();
        assert_eq!(gangs(&both), [("ml/pg".to_string(), 4)]);
        let mut other_order = Cluster::new();
        other_order.push(podgroup("v1alpha3", 3)).unwrap();
        other_order.push(podgroup("v1beta1", 4)).unwrap();
        assert_eq!(gangs(&other_order), [("ml/pg".to_string(), 4)]);
    }

    #[test]
    fn every_version_of_every_gang_kind_is_read_once_preferred_first() {
        for k in dialect::GANG_KINDS {
            let rows: Vec<&str> =
                READ.iter().filter(|r| (r.group, r.kind) == (k.group, k.kind)).map(|r| r.version).collect();
            assert_eq!(rows, k.versions, "{}/{}", k.group, k.kind);
            assert!(
                READ.iter().filter(|r| (r.group, r.kind) == (k.group, k.kind)).all(|r| r.plural == k.plural)
            );
        }
        // And nothing else: every other row is a kind the table does not have.
        let mut seen = std::collections::BTreeSet::new();
        for r in READ {
            assert!(seen.insert((r.group, r.version, r.kind)), "{r:?} twice");
            let gang = dialect::is_gang_kind(r.group, r.kind);
            assert_eq!(gang, !crate::read::object::BASE.contains(r), "{r:?}");
        }
    }

    #[test]
    fn our_own_kind_is_read() {
        assert!(READ.contains(&GANG) && READ.contains(&POD) && READ.contains(&NODE));
        assert_eq!(
            (GANG.group, GANG.version, GANG.kind),
            (crate::read::labels::GROUP, crate::read::labels::VERSION, "Gang")
        );
    }
}
