//! Cluster assembly: raw Kubernetes objects (nodes, pods, priority classes, namespaces, every
//! dialect's gang objects) in, a [`Snapshot`] out — with every object that could not be understood
//! listed as a [`Problem`] instead of being dropped silently.
//!
//! Membership is resolved here, once every object is known: a pod's claims (one per dialect that
//! names a gang) resolve to the gang object that exists; CRD-less gangs (kube-gang and Koordinator
//! annotations) are built from the oldest pod that claims them; upstream PodGroups resolve to the
//! root of their CompositePodGroup tree.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::convert::{self, PriorityClasses};
use crate::dialect::{self, Claim, GangObject};
use crate::error::FieldError;
use crate::model::{Dialect, Gang, GangKey, Membership, Node, Pod, Snapshot};

/// A kind the cluster view reads from the API: every front door that lists or watches the cluster
/// reads exactly these, so a dialect added here reaches the scheduler and the plugin alike.
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

/// Everything [`Cluster`] understands: nodes, pods, namespaces, priority classes and every gang
/// dialect's objects.
pub const READ: &[ApiKind] = &[
    builtin("", "v1", "Node", "nodes"),
    builtin("", "v1", "Pod", "pods"),
    builtin("", "v1", "Namespace", "namespaces"),
    builtin("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses"),
    api_kind(crate::GROUP, crate::VERSION, "Gang", "gangs"),
    api_kind("scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups"),
    api_kind("scheduling.k8s.io", "v1alpha3", "CompositePodGroup", "compositepodgroups"),
    api_kind("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups"),
    api_kind("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups"),
    api_kind("scheduling.run.ai", "v2alpha2", "PodGroup", "podgroups"),
];

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

/// Conversions kept between snapshots of one [`Cluster`] that changes a little at a time (a
/// watch-fed index): an object whose `resourceVersion` is unchanged is not converted again.
/// Pods are converted afresh when the priority classes change (their priority depends on them).
/// Objects without a `resourceVersion` (files) are always converted.
#[derive(Debug, Default)]
pub struct Memo {
    nodes: HashMap<String, (String, Result<Node, Vec<FieldError>>)>,
    pods: HashMap<(String, String), (String, Converted)>,
    priorities: Option<PriorityClasses>,
}

impl Memo {
    pub fn new() -> Self {
        Memo::default()
    }

    fn nodes(&mut self, raw: &BTreeMap<String, Value>) -> Vec<Result<Node, Vec<FieldError>>> {
        self.nodes.retain(|k, _| raw.contains_key(k));
        raw.iter()
            .map(|(name, v)| {
                let rv = str_at(v, "/metadata/resourceVersion");
                match self.nodes.get(name) {
                    Some((seen, n)) if !rv.is_empty() && seen == rv => n.clone(),
                    _ => {
                        let n = convert::node_from_value(v);
                        if !rv.is_empty() {
                            self.nodes.insert(name.clone(), (rv.to_string(), n.clone()));
                        }
                        n
                    }
                }
            })
            .collect()
    }

    fn pods(
        &mut self,
        raw: &BTreeMap<(String, String), Value>,
        priorities: &PriorityClasses,
    ) -> Vec<Converted> {
        if self.priorities.as_ref() != Some(priorities) {
            self.pods.clear();
            self.priorities = Some(priorities.clone());
        }
        self.pods.retain(|k, _| raw.contains_key(k));
        let mut out: Vec<Option<Converted>> = Vec::with_capacity(raw.len());
        let mut misses: Vec<(usize, &(String, String), &Value)> = Vec::new();
        for (i, (key, v)) in raw.iter().enumerate() {
            let rv = str_at(v, "/metadata/resourceVersion");
            match self.pods.get(key) {
                Some((seen, c)) if !rv.is_empty() && seen == rv => out.push(Some(c.clone())),
                _ => {
                    out.push(None);
                    misses.push((i, key, v));
                }
            }
        }
        let fresh: Vec<&Value> = misses.iter().map(|&(_, _, v)| v).collect();
        for ((i, key, v), c) in misses.into_iter().zip(convert_pods(&fresh, priorities)) {
            let rv = str_at(v, "/metadata/resourceVersion");
            if !rv.is_empty() {
                self.pods.insert(key.clone(), (rv.to_string(), c.clone()));
            }
            out[i] = Some(c);
        }
        out.into_iter().flatten().collect()
    }
}

/// Raw API objects, as listed from the API or read from a dump. Later pushes of the same object
/// replace earlier ones.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    nodes: BTreeMap<String, Value>,
    pods: BTreeMap<(String, String), Value>,
    priority_classes: BTreeMap<String, Value>,
    namespaces: BTreeMap<String, Value>,
    gang_objects: BTreeMap<(String, String, String, String), Value>,
    /// Objects of kinds the cluster view does not use (Jobs, Services, …), kept for callers.
    pub others: Vec<Value>,
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// `Kind namespace/name` for messages.
pub fn describe(obj: &Value) -> String {
    let kind = str_at(obj, "/kind");
    let ns = str_at(obj, "/metadata/namespace");
    let name = str_at(obj, "/metadata/name");
    let kind = if kind.is_empty() { "object" } else { kind };
    if ns.is_empty() { format!("{kind} {name}") } else { format!("{kind} {ns}/{name}") }
}

impl Cluster {
    pub fn new() -> Self {
        Cluster::default()
    }

    /// Adds one object; a `List` (`v1 List`, `PodList`, …) is flattened.
    pub fn push(&mut self, obj: Value) -> Result<(), FieldError> {
        if !obj.is_object() {
            return Err(FieldError::new("", "not an object"));
        }
        let kind = str_at(&obj, "/kind").to_string();
        if kind.is_empty() {
            return Err(FieldError::new("kind", "missing"));
        }
        if kind.ends_with("List") && obj.get("items").is_some() {
            let mut obj = obj;
            // Taken, not cloned: a dump's list holds the whole cluster.
            let Some(Value::Array(items)) = obj.get_mut("items").map(Value::take) else {
                return Err(FieldError::new("items", "must be a list"));
            };
            let mut first_error = None;
            for (i, item) in items.into_iter().enumerate() {
                // Items of a typed list (PodList) may omit their own kind.
                let mut item = item;
                if item.get("kind").is_none()
                    && let (Some(k), Some(map)) = (kind.strip_suffix("List"), item.as_object_mut())
                    && !k.is_empty()
                {
                    map.insert("kind".into(), Value::String(k.to_string()));
                    if let Some(v) = obj.get("apiVersion").cloned() {
                        map.entry("apiVersion").or_insert(v);
                    }
                }
                if let Err(e) = self.push(item)
                    && first_error.is_none()
                {
                    first_error = Some(FieldError::new(format!("items[{i}].{}", e.path), e.message));
                }
            }
            return first_error.map_or(Ok(()), Err);
        }
        let name = str_at(&obj, "/metadata/name").to_string();
        if name.is_empty() {
            return Err(FieldError::new("metadata.name", format!("missing on {kind}")));
        }
        let ns = str_at(&obj, "/metadata/namespace").to_string();
        let api_version = str_at(&obj, "/apiVersion").to_string();
        match (api_version.as_str(), kind.as_str()) {
            ("v1", "Node") => {
                self.nodes.insert(name, obj);
            }
            ("v1", "Pod") => {
                let ns = if ns.is_empty() { "default".to_string() } else { ns };
                self.pods.insert((ns, name), obj);
            }
            ("v1", "Namespace") => {
                self.namespaces.insert(name, obj);
            }
            (v, "PriorityClass") if v.starts_with("scheduling.k8s.io/") => {
                self.priority_classes.insert(name, obj);
            }
            _ if dialect::read_object(&obj).is_some() => {
                let group = api_version.rsplit_once('/').map_or("", |(g, _)| g).to_string();
                self.gang_objects.insert((group, kind, ns, name), obj);
            }
            _ => self.others.push(obj),
        }
        Ok(())
    }

    /// Removes an object (a watch `Deleted` event).
    pub fn remove(&mut self, obj: &Value) {
        self.remove_named(
            str_at(obj, "/apiVersion"),
            str_at(obj, "/kind"),
            str_at(obj, "/metadata/namespace"),
            str_at(obj, "/metadata/name"),
        );
    }

    /// Removes the object of this API version, kind, namespace and name, if held.
    pub fn remove_named(&mut self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        let name = name.to_string();
        match kind {
            "Node" => {
                self.nodes.remove(&name);
            }
            "Pod" => {
                let ns = if namespace.is_empty() { "default" } else { namespace };
                self.pods.remove(&(ns.to_string(), name));
            }
            "Namespace" => {
                self.namespaces.remove(&name);
            }
            "PriorityClass" => {
                self.priority_classes.remove(&name);
            }
            _ => {
                let group = api_version.rsplit_once('/').map_or("", |(g, _)| g).to_string();
                self.gang_objects.remove(&(group, kind.to_string(), namespace.to_string(), name));
            }
        }
    }

    /// The labels of namespace `ns`, if the cluster holds it.
    pub fn namespace_labels(&self, ns: &str) -> Option<BTreeMap<String, String>> {
        let labels = self.namespaces.get(ns)?.pointer("/metadata/labels")?.as_object()?;
        Some(labels.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string()))).collect())
    }

    /// The raw pod `namespace/name`, if the cluster holds it.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Value> {
        self.pods.get(&(namespace.to_string(), name.to_string()))
    }

    /// Every raw pod, in key order.
    pub fn pods(&self) -> impl Iterator<Item = &Value> {
        self.pods.values()
    }

    /// Every raw gang-defining object (any dialect), in key order.
    pub fn gang_objects(&self) -> impl Iterator<Item = &Value> {
        self.gang_objects.values()
    }

    /// The raw object of this API version, kind, namespace and name, if the cluster holds it.
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<&Value> {
        match (api_version, kind) {
            ("v1", "Node") => self.nodes.get(name),
            ("v1", "Pod") => {
                let ns = if namespace.is_empty() { "default" } else { namespace };
                self.pods.get(&(ns.to_string(), name.to_string()))
            }
            ("v1", "Namespace") => self.namespaces.get(name),
            (_, "PriorityClass") => self.priority_classes.get(name),
            _ => {
                let group = api_version.rsplit_once('/').map_or("", |(g, _)| g).to_string();
                self.gang_objects.get(&(group, kind.to_string(), namespace.to_string(), name.to_string()))
            }
        }
    }

    /// The snapshot the cycle sees.
    pub fn snapshot(&self) -> Assembled {
        self.assemble(None)
    }

    /// The snapshot the cycle sees, converting only what changed since the last call with the
    /// same `memo` (see [`Memo`]).
    pub fn snapshot_with(&self, memo: &mut Memo) -> Assembled {
        self.assemble(Some(memo))
    }

    fn assemble(&self, mut memo: Option<&mut Memo>) -> Assembled {
        let mut problems = Vec::new();
        let mut problem =
            |obj: &Value, errors: Vec<FieldError>| problems.push(Problem { object: describe(obj), errors });

        let mut classes = Vec::new();
        for v in self.priority_classes.values() {
            match serde_json::from_value::<k8s_openapi::api::scheduling::v1::PriorityClass>(v.clone()) {
                Ok(pc) => classes.push(pc),
                Err(e) => problem(v, vec![FieldError::new("value", e.to_string())]),
            }
        }
        let priorities = PriorityClasses::from_objects(&classes);

        let mut nodes = Vec::new();
        let converted_nodes: Vec<Result<Node, Vec<FieldError>>> = match memo.as_deref_mut() {
            Some(m) => m.nodes(&self.nodes),
            None => self.nodes.values().map(convert::node_from_value).collect(),
        };
        for (v, converted) in self.nodes.values().zip(converted_nodes) {
            match converted {
                Ok(n) => nodes.push(n),
                Err(e) => problem(v, e),
            }
        }

        // Gang objects of every dialect.
        let mut defined: BTreeMap<GangKey, Gang> = BTreeMap::new();
        let mut upstream_groups = Vec::new();
        let mut define = |gang: Gang, obj: &Value, problems: &mut Vec<Problem>| {
            if let Some(existing) = defined.get(&gang.key) {
                let (keep, drop) = if existing.source.dialect <= gang.source.dialect {
                    (existing.source.clone(), gang.source.clone())
                } else {
                    (gang.source.clone(), existing.source.clone())
                };
                problems.push(Problem {
                    object: describe(obj),
                    errors: vec![FieldError::new(
                        "metadata.name",
                        format!(
                            "gang {} is defined by both a {} {} and a {} {}; using the {}",
                            gang.key, keep.dialect, keep.kind, drop.dialect, drop.kind, keep.dialect
                        ),
                    )],
                });
                if existing.source.dialect <= gang.source.dialect {
                    return;
                }
            }
            defined.insert(gang.key.clone(), gang);
        };
        let mut object_problems = Vec::new();
        for v in self.gang_objects.values() {
            match dialect::read_object(v) {
                Some(Ok(GangObject::Gang(g))) => define(g, v, &mut object_problems),
                Some(Ok(GangObject::UpstreamGroup(g))) => upstream_groups.push(g),
                Some(Err(e)) => object_problems.push(Problem { object: describe(v), errors: e }),
                None => {}
            }
        }
        let (upstream_gangs, resolution, upstream_problems) = dialect::upstream::assemble(&upstream_groups);
        for (key, e) in upstream_problems {
            object_problems.push(Problem { object: format!("PodGroup {key}"), errors: vec![e] });
        }
        for g in upstream_gangs {
            define(g, &Value::Null, &mut object_problems);
        }
        problems.extend(object_problems);

        // Pods, and the gang each belongs to.
        let mut pods: Vec<Pod> = Vec::new();
        let mut claims_of: Vec<Vec<Claim>> = Vec::new();
        let mut raw_of: Vec<&Value> = Vec::new();
        let raw: Vec<&Value> = self.pods.values().collect();
        let converted_pods = match memo {
            Some(m) => m.pods(&self.pods, &priorities),
            None => convert_pods(&raw, &priorities),
        };
        for (v, (converted, claims)) in raw.iter().copied().zip(converted_pods) {
            let mut pod = match converted {
                Ok(p) => p,
                Err(e) => {
                    problems.push(Problem { object: describe(v), errors: e });
                    continue;
                }
            };
            let claims = match claims {
                Ok(c) => c,
                Err(e) => {
                    problems.push(Problem { object: describe(v), errors: e });
                    // A pod claimed twice is never placed; if it already runs, it still uses its node.
                    if pod.node_name.is_none() {
                        continue;
                    }
                    pod.scheduler_name = String::new();
                    Vec::new()
                }
            };
            pods.push(pod);
            claims_of.push(claims);
            raw_of.push(v);
        }

        // CRD-less gangs: built from the oldest pod that claims them, when no object defines them.
        let mut order: Vec<usize> = (0..pods.len()).collect();
        order.sort_by(|&a, &b| (pods[a].created, &pods[a].key).cmp(&(pods[b].created, &pods[b].key)));
        let mut annotation_source: BTreeMap<GangKey, (usize, Dialect)> = BTreeMap::new();
        for &i in &order {
            for c in &claims_of[i] {
                if defined.contains_key(&c.gang) || annotation_source.contains_key(&c.gang) {
                    continue;
                }
                match dialect::annotation_gang(c, raw_of[i]) {
                    Some(Ok(g)) if g.min_member > 0 => {
                        annotation_source.insert(c.gang.clone(), (i, c.dialect));
                        defined.insert(g.key.clone(), g);
                    }
                    Some(Err(e)) => problems.push(Problem { object: describe(raw_of[i]), errors: e }),
                    _ => {}
                }
            }
        }
        // Pods whose annotations disagree with the gang's source pod are reported, not guessed at.
        for &i in &order {
            for c in &claims_of[i] {
                let Some(&(src, _)) = annotation_source.get(&c.gang) else { continue };
                // Pods stamped from one template carry the same annotations: nothing to compare.
                if src == i
                    || raw_of[i].pointer("/metadata/annotations")
                        == raw_of[src].pointer("/metadata/annotations")
                {
                    continue;
                }
                if let (Some(Ok(mine)), Some(gang)) =
                    (dialect::annotation_gang(c, raw_of[i]), defined.get(&c.gang))
                    && mine.min_member > 0
                    && mine.min_member != gang.min_member
                {
                    problems.push(Problem {
                        object: describe(raw_of[i]),
                        errors: vec![FieldError::new(
                            "metadata.annotations",
                            format!(
                                "gang {} minimum {} disagrees with {} on pod {}; using {}",
                                c.gang, mine.min_member, gang.min_member, pods[src].key, gang.min_member
                            ),
                        )],
                    });
                }
            }
        }

        let mut missing: BTreeSet<GangKey> = BTreeSet::new();
        for (i, pod) in pods.iter_mut().enumerate() {
            let resolved: Vec<Membership> = claims_of[i]
                .iter()
                .map(|c| match (c.dialect, resolution.get(&c.gang)) {
                    (Dialect::Upstream, Some((root, leaf))) => {
                        Membership { gang: root.clone(), subgroup: leaf.clone() }
                    }
                    _ => Membership { gang: c.gang.clone(), subgroup: c.subgroup.clone() },
                })
                .collect();
            let chosen =
                resolved.iter().find(|m| defined.contains_key(&m.gang)).or(resolved.first()).cloned();
            if let Some(m) = &chosen
                && !defined.contains_key(&m.gang)
                && missing.insert(m.gang.clone())
            {
                problems.push(Problem {
                    object: describe(raw_of[i]),
                    errors: vec![FieldError::new(
                        claims_of[i].first().map(|c| c.path.clone()).unwrap_or_default(),
                        format!("gang {} does not exist (yet): its members wait for it", m.gang),
                    )],
                });
            }
            pod.gang = chosen;
        }

        let snapshot =
            Snapshot { nodes, pods, gangs: defined.into_values().collect(), reservations: Vec::new() };
        Assembled { snapshot, problems }
    }
}

type Converted = (Result<Pod, Vec<FieldError>>, Result<Vec<Claim>, Vec<FieldError>>);

/// Converts raw pods and reads their gang claims, in order. Each pod is independent of the others,
/// so large clusters are split over the machine's cores (the result is the same either way).
fn convert_pods(raw: &[&Value], priorities: &PriorityClasses) -> Vec<Converted> {
    let one = |v: &Value| (convert::pod_from_value(v, priorities), dialect::pod_claims(v));
    const PER_THREAD: usize = 8_192;
    let threads =
        std::thread::available_parallelism().map_or(1, usize::from).min(raw.len() / PER_THREAD).max(1);
    if threads == 1 {
        return raw.iter().map(|v| one(v)).collect();
    }
    let chunk = raw.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = raw
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(|v| one(v)).collect::<Vec<_>>()))
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}
