//! Assembly: a [`Cluster`]'s raw objects converted into a [`Snapshot`] that can be patched object
//! by object. [`Cluster::snapshot`] assembles everything in one pass; [`Live`] keeps a snapshot
//! assembled while a watch delivers changes, so a cycle costs what changed, not what the cluster
//! holds.
//!
//! Nodes and pods are converted one at a time (an object's conversion depends only on itself and
//! the priority classes). Gangs and memberships depend on many objects at once; they are resolved
//! again when a gang object or a pod that claims a gang changed — from the claiming pods only, not
//! from every pod of the cluster.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::{Assembled, Cluster, Problem, describe, str_at};
use crate::convert::{self, PriorityClasses};
use crate::dialect::{self, Claim, GangObject};
use crate::error::FieldError;
use crate::model::{Dialect, Gang, GangKey, Membership, Pod, Reservation, Snapshot};

/// Where the cluster files a pod: (namespace, name).
type PodAt = (String, String);
/// Where the cluster files a gang object: (group, kind, namespace, name).
type GangAt = (String, String, String, String);
type Converted = (Result<Pod, Vec<FieldError>>, Result<Vec<Claim>, Vec<FieldError>>);

/// The converted state of a cluster, with what is needed to patch it.
#[derive(Debug, Default)]
pub(super) struct Assembly {
    snapshot: Snapshot,
    /// Keep `node_at` and `pod_at`, to patch objects later (a one-pass assembly needs neither).
    indexed: bool,
    node_at: HashMap<String, usize>,
    pod_at: HashMap<PodAt, usize>,
    /// Parallel to `snapshot.pods`: each pod's gang claims.
    claims: Vec<Vec<Claim>>,
    priorities: PriorityClasses,
    class_problems: Vec<Problem>,
    node_problems: BTreeMap<String, Problem>,
    pod_problems: BTreeMap<PodAt, Problem>,
    /// Every gang-defining object, read.
    gang_objects: BTreeMap<GangAt, Result<GangObject, Vec<FieldError>>>,
    /// What resolving gangs met: problems of gang objects, and of the pods that claim gangs.
    object_problems: Vec<Problem>,
    claim_problems: Vec<Problem>,
    /// Gangs and memberships no longer reflect the objects.
    stale: bool,
    /// Pods converted since the pods were last laid out afresh (see [`Assembly::compact`]).
    scattered: usize,
}

impl Assembly {
    /// Everything in `cluster`, assembled; `indexed` to patch it later.
    pub(super) fn build(cluster: &Cluster, indexed: bool) -> Self {
        let mut a = Assembly { indexed, ..Assembly::default() };
        a.read_priorities(cluster);
        for name in cluster.nodes.keys() {
            a.node(cluster, name);
        }
        a.all_pods(cluster);
        for key in cluster.gang_objects.keys() {
            a.gang_object(cluster, key);
        }
        a.refresh(cluster);
        a
    }

    pub(super) fn into_assembled(self) -> Assembled {
        let problems = self.problems();
        Assembled { snapshot: self.snapshot, problems }
    }

    /// Every problem met, in a stable order: priority classes, nodes, gang objects, pods, claims.
    fn problems(&self) -> Vec<Problem> {
        let mut out = self.class_problems.clone();
        out.extend(self.node_problems.values().cloned());
        out.extend(self.object_problems.iter().cloned());
        out.extend(self.pod_problems.values().cloned());
        out.extend(self.claim_problems.iter().cloned());
        out
    }

    /// Reads the priority classes again; returns whether their values changed.
    fn read_priorities(&mut self, cluster: &Cluster) -> bool {
        let mut problems = Vec::new();
        let mut classes = Vec::new();
        for v in cluster.priority_classes.values() {
            match serde_json::from_value::<k8s_openapi::api::scheduling::v1::PriorityClass>(v.clone()) {
                Ok(pc) => classes.push(pc),
                Err(e) => problems.push(Problem {
                    object: describe(v),
                    errors: vec![FieldError::new("value", e.to_string())],
                }),
            }
        }
        self.class_problems = problems;
        let priorities = PriorityClasses::from_objects(&classes);
        let changed = priorities != self.priorities;
        self.priorities = priorities;
        changed
    }

    /// Brings node `name` in line with the cluster (converted, replaced or gone).
    fn node(&mut self, cluster: &Cluster, name: &str) {
        self.node_problems.remove(name);
        let Some(v) = cluster.nodes.get(name) else {
            self.remove_node(name);
            return;
        };
        match convert::node_from_value(v) {
            Ok(n) => match self.node_at.get(name) {
                Some(&i) => self.snapshot.nodes[i] = n,
                None => {
                    if self.indexed {
                        self.node_at.insert(name.to_string(), self.snapshot.nodes.len());
                    }
                    self.snapshot.nodes.push(n);
                }
            },
            Err(errors) => {
                self.node_problems.insert(name.to_string(), Problem { object: describe(v), errors });
                self.remove_node(name);
            }
        }
    }

    fn remove_node(&mut self, name: &str) {
        let Some(i) = self.node_at.remove(name) else { return };
        self.snapshot.nodes.swap_remove(i);
        if let Some(moved) = self.snapshot.nodes.get(i) {
            self.node_at.insert(moved.name.clone(), i);
        }
    }

    /// Converts every pod again (first build, or the priority classes changed), on all cores.
    fn all_pods(&mut self, cluster: &Cluster) {
        self.snapshot.pods.clear();
        self.pod_at.clear();
        self.claims.clear();
        self.pod_problems.clear();
        let raw: Vec<&Value> = cluster.pods.values().collect();
        for ((key, v), converted) in cluster.pods.iter().zip(convert_pods(&raw, &self.priorities)) {
            self.file_pod(key, v, converted);
        }
        self.stale = true;
    }

    /// Brings the pod at `key` in line with the cluster. `before`: the labels and annotations
    /// of the version it replaces, when known. A pod that claims a gang and changed nothing gangs
    /// depend on (its claims, its age, its labels and annotations) keeps its membership without
    /// every gang being resolved again: status updates of running members are the bulk of a
    /// busy cluster's pod events.
    fn pod(&mut self, cluster: &Cluster, key: &PodAt, before: Option<Fingerprint>) {
        let kept = self.pod_at.get(key).filter(|&&i| !self.claims[i].is_empty()).map(|&i| {
            let p = &self.snapshot.pods[i];
            (self.claims[i].clone(), p.created, p.gang.clone())
        });
        let was_stale = self.stale;
        self.unfile_pod(key);
        let Some(v) = cluster.pods.get(key) else { return };
        let converted = convert_pod(v, &self.priorities);
        let unchanged = match (&kept, &converted, &before) {
            (Some((claims, created, _)), (Ok(p), Ok(now)), Some(b)) => {
                now == claims && p.created == *created && *b == fingerprint(v)
            }
            _ => false,
        };
        self.file_pod(key, v, converted);
        if unchanged && let (Some(&i), Some((_, _, gang))) = (self.pod_at.get(key), kept) {
            self.snapshot.pods[i].gang = gang;
            self.stale = was_stale;
        }
    }

    /// Resolves gangs and memberships again at the next refresh, whatever changed.
    fn invalidate(&mut self) {
        self.stale = true;
    }

    fn unfile_pod(&mut self, key: &PodAt) {
        self.pod_problems.remove(key);
        let Some(i) = self.pod_at.remove(key) else { return };
        self.snapshot.pods.swap_remove(i);
        if !self.claims.swap_remove(i).is_empty() {
            self.stale = true;
        }
        if let Some(moved) = self.snapshot.pods.get(i) {
            self.pod_at.insert((moved.key.namespace.clone(), moved.key.name.clone()), i);
        }
    }

    fn file_pod(&mut self, key: &PodAt, v: &Value, (converted, claims): Converted) {
        let mut pod = match converted {
            Ok(p) => p,
            Err(errors) => {
                self.pod_problems.insert(key.clone(), Problem { object: describe(v), errors });
                return;
            }
        };
        let claims = match claims {
            Ok(c) => c,
            Err(errors) => {
                self.pod_problems.insert(key.clone(), Problem { object: describe(v), errors });
                // A pod claimed twice is never placed; if it already runs, it still uses its node.
                if pod.node_name.is_none() {
                    return;
                }
                pod.scheduler_name = String::new();
                Vec::new()
            }
        };
        self.stale |= !claims.is_empty();
        self.scattered += 1;
        if self.indexed {
            self.pod_at.insert(key.clone(), self.snapshot.pods.len());
        }
        self.snapshot.pods.push(pod);
        self.claims.push(claims);
    }

    /// Lays the snapshot out afresh once many pods were converted one at a time: each such pod's
    /// strings and maps sit wherever the allocator had room between the watch's JSON, and a cycle
    /// walking scattered pods is slower (at 140,000 pods: 60 ms against 50 ms, median). A copy
    /// puts them side by side again, for one pass over the pods every eighth of them converted.
    fn compact(&mut self) {
        if self.scattered < (self.snapshot.pods.len() / 8).max(1_024) {
            return;
        }
        self.scattered = 0;
        self.snapshot = self.snapshot.clone();
    }

    /// Brings the gang object at `key` in line with the cluster.
    fn gang_object(&mut self, cluster: &Cluster, key: &GangAt) {
        let read = cluster.gang_objects.get(key).and_then(dialect::read_object);
        let changed = match read {
            Some(r) => self.gang_objects.insert(key.clone(), r.clone()).as_ref() != Some(&r),
            None => self.gang_objects.remove(key).is_some(),
        };
        self.stale |= changed;
    }

    /// Resolves gangs and memberships again if anything they depend on changed: gang objects of
    /// every dialect, CRD-less gangs from the oldest pod that claims them, upstream hierarchies,
    /// and the gang each claiming pod belongs to.
    fn refresh(&mut self, cluster: &Cluster) {
        if !self.stale {
            return;
        }
        self.stale = false;

        // Gang objects of every dialect.
        // Hashed, not ordered: every claiming pod looks its gang up here (sorted once at the end).
        let mut defined: HashMap<GangKey, Gang> = HashMap::new();
        let mut upstream_groups = Vec::new();
        let mut workloads: HashMap<GangKey, dialect::upstream::Workload> = HashMap::new();
        let mut object_problems = Vec::new();
        let define =
            |defined: &mut HashMap<GangKey, Gang>, gang: Gang, obj: &Value, problems: &mut Vec<Problem>| {
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
        for (key, read) in &self.gang_objects {
            let Some(obj) = cluster.gang_objects.get(key) else { continue };
            match read {
                Ok(GangObject::Gang(g)) => define(&mut defined, g.clone(), obj, &mut object_problems),
                Ok(GangObject::UpstreamGroup(g)) => upstream_groups.push(g.clone()),
                Ok(GangObject::Workload(w)) => {
                    workloads.insert(w.key.clone(), w.clone());
                }
                Err(e) => object_problems.push(Problem { object: describe(obj), errors: e.clone() }),
            }
        }
        let (upstream_gangs, resolution, upstream_problems) = dialect::upstream::assemble(&upstream_groups);
        for (key, e) in upstream_problems {
            object_problems.push(Problem { object: format!("PodGroup {key}"), errors: vec![e] });
        }
        for g in upstream_gangs {
            define(&mut defined, g, &Value::Null, &mut object_problems);
        }

        let claimed = self.claimed(cluster);
        let pods = &self.snapshot.pods;
        let claims_of = |j: usize| &self.claims[claimed[j].0];
        let mut problems = Vec::new();

        // CRD-less gangs: built from the oldest pod that claims them, when no object defines them.
        let mut order: Vec<usize> = (0..claimed.len()).collect();
        order.sort_by(|&a, &b| {
            let (pa, pb) = (&pods[claimed[a].0], &pods[claimed[b].0]);
            (pa.created, &pa.key).cmp(&(pb.created, &pb.key))
        });
        let mut annotation_source: HashMap<GangKey, usize> = HashMap::new();
        for &j in &order {
            for c in claims_of(j) {
                if defined.contains_key(&c.gang) || annotation_source.contains_key(&c.gang) {
                    continue;
                }
                if c.path == dialect::upstream::WORKLOAD_REF_PATH {
                    // 1.35: the gang is one pod group (and replica key) of the named Workload.
                    let pod = claimed[j].1;
                    if let Some((w, _, _)) = dialect::upstream::workload_ref(pod)
                        && let Some(workload) = workloads.get(&GangKey::new(&c.gang.namespace, w))
                        && let Some(g) = dialect::upstream::workload_gang(workload, pod)
                    {
                        defined.insert(g.key.clone(), g);
                    }
                    continue;
                }
                match dialect::annotation_gang(c, claimed[j].1) {
                    Some(Ok(g)) if g.min_member > 0 => {
                        annotation_source.insert(c.gang.clone(), j);
                        defined.insert(g.key.clone(), g);
                    }
                    Some(Err(e)) => problems.push(Problem { object: describe(claimed[j].1), errors: e }),
                    _ => {}
                }
            }
        }
        // Pods whose annotations disagree with the gang's source pod are reported, not guessed at.
        for &j in &order {
            for c in claims_of(j) {
                let Some(&src) = annotation_source.get(&c.gang) else { continue };
                // Pods stamped from one template carry the same annotations: nothing to compare.
                if src == j
                    || claimed[j].1.pointer("/metadata/annotations")
                        == claimed[src].1.pointer("/metadata/annotations")
                {
                    continue;
                }
                if let (Some(Ok(mine)), Some(gang)) =
                    (dialect::annotation_gang(c, claimed[j].1), defined.get(&c.gang))
                    && mine.min_member > 0
                    && mine.min_member != gang.min_member
                {
                    problems.push(Problem {
                        object: describe(claimed[j].1),
                        errors: vec![FieldError::new(
                            "metadata.annotations",
                            format!(
                                "gang {} minimum {} disagrees with {} on pod {}; using {}",
                                c.gang,
                                mine.min_member,
                                gang.min_member,
                                pods[claimed[src].0].key,
                                gang.min_member
                            ),
                        )],
                    });
                }
            }
        }

        // Each claiming pod's gang: the claim whose gang exists, else its first.
        let mut missing: BTreeSet<GangKey> = BTreeSet::new();
        let mut memberships = Vec::with_capacity(claimed.len());
        for (j, &(i, raw)) in claimed.iter().enumerate() {
            let resolved: Vec<Membership> = claims_of(j)
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
                    object: describe(raw),
                    errors: vec![FieldError::new(
                        claims_of(j).first().map(|c| c.path.clone()).unwrap_or_default(),
                        format!("gang {} does not exist (yet): its members wait for it", m.gang),
                    )],
                });
            }
            memberships.push((i, chosen));
        }
        for (i, m) in memberships {
            self.snapshot.pods[i].gang = m;
        }
        let mut gangs: Vec<Gang> = defined.into_values().collect();
        gangs.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        self.snapshot.gangs = gangs;
        self.object_problems = object_problems;
        self.claim_problems = problems;
    }
}

impl Assembly {
    /// The pods that claim a gang, in key order: (position in the snapshot, raw object).
    fn claimed<'c>(&self, cluster: &'c Cluster) -> Vec<(usize, &'c Value)> {
        let pods = &self.snapshot.pods;
        let mut at: Vec<usize> = (0..pods.len()).filter(|&i| !self.claims[i].is_empty()).collect();
        if !at.is_sorted_by(|&a, &b| pods[a].key <= pods[b].key) {
            at.sort_unstable_by(|&a, &b| pods[a].key.cmp(&pods[b].key));
        }
        // The raw objects: one ordered walk of every pod when most claim a gang, else a lookup each.
        if at.len().saturating_mul(16) < cluster.pods.len() {
            return at
                .into_iter()
                .filter_map(|i| {
                    let k = &pods[i].key;
                    Some((i, cluster.pods.get(&(k.namespace.clone(), k.name.clone()))?))
                })
                .collect();
        }
        let mut raw = cluster.pods.iter().peekable();
        at.into_iter()
            .filter_map(|i| {
                let k = &pods[i].key;
                while raw
                    .next_if(|((ns, name), _)| (ns.as_str(), name.as_str()) < (&k.namespace, &k.name))
                    .is_some()
                {}
                let ((ns, name), v) = raw.peek()?;
                (ns == &k.namespace && name == &k.name).then_some((i, *v))
            })
            .collect()
    }
}

/// What gang resolution reads of a pod besides its claims and age: its labels and annotations.
type Fingerprint = (Option<Value>, Option<Value>);

fn fingerprint(v: &Value) -> Fingerprint {
    (v.pointer("/metadata/labels").cloned(), v.pointer("/metadata/annotations").cloned())
}

fn convert_pod(v: &Value, priorities: &PriorityClasses) -> Converted {
    (convert::pod_from_value(v, priorities), dialect::pod_claims(v))
}

/// Converts raw pods and reads their gang claims, in order. Each pod is independent of the others,
/// so large clusters are split over the machine's cores (the result is the same either way).
fn convert_pods(raw: &[&Value], priorities: &PriorityClasses) -> Vec<Converted> {
    const PER_THREAD: usize = 8_192;
    let threads =
        std::thread::available_parallelism().map_or(1, usize::from).min(raw.len() / PER_THREAD).max(1);
    if threads == 1 {
        return raw.iter().map(|v| convert_pod(v, priorities)).collect();
    }
    let chunk = raw.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = raw
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || part.iter().map(|v| convert_pod(v, priorities)).collect::<Vec<_>>())
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}

/// A [`Cluster`] whose snapshot is kept assembled as objects arrive one at a time — what a
/// watch-fed index needs. A change converts only the object it touches; gangs and memberships are
/// resolved again, from the pods that claim a gang, when a gang object or such a pod changed
/// ([`Live::refresh`]). The snapshot equals [`Cluster::snapshot`] of the same objects, up to the
/// order of nodes and pods.
///
/// Kinds the cluster view does not use are not kept (a watch would grow them forever).
#[derive(Debug)]
pub struct Live {
    cluster: Cluster,
    assembly: Assembly,
}

impl Default for Live {
    fn default() -> Self {
        Live { cluster: Cluster::default(), assembly: Assembly { indexed: true, ..Assembly::default() } }
    }
}

impl Live {
    pub fn new() -> Self {
        Live::default()
    }

    /// Files one object and brings the snapshot up to date with it (a `List` is flattened, and
    /// everything is assembled again).
    pub fn push(&mut self, obj: Value) -> Result<(), FieldError> {
        let kind = str_at(&obj, "/kind");
        if kind.ends_with("List") && obj.get("items").is_some() {
            let result = self.cluster.push(obj);
            self.cluster.others.clear();
            self.assembly = Assembly::build(&self.cluster, true);
            return result;
        }
        let api_version = str_at(&obj, "/apiVersion").to_string();
        let kind = kind.to_string();
        let namespace = str_at(&obj, "/metadata/namespace").to_string();
        let name = str_at(&obj, "/metadata/name").to_string();
        let before = (api_version == "v1" && kind == "Pod")
            .then(|| self.cluster.get("v1", "Pod", &namespace, &name).map(fingerprint))
            .flatten();
        let result = self.cluster.push(obj);
        self.cluster.others.clear();
        if result.is_ok() {
            self.touch(&api_version, &kind, &namespace, &name, before);
        }
        result
    }

    /// Removes the object of this API version, kind, namespace and name (a watch `Deleted`).
    pub fn remove(&mut self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        self.cluster.remove_named(api_version, kind, namespace, name);
        self.touch(api_version, kind, namespace, name, None);
    }

    fn touch(
        &mut self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        before: Option<Fingerprint>,
    ) {
        let (cluster, a) = (&self.cluster, &mut self.assembly);
        match (api_version, kind) {
            ("v1", "Node") => a.node(cluster, name),
            ("v1", "Pod") => {
                let ns = if namespace.is_empty() { "default" } else { namespace };
                a.pod(cluster, &(ns.to_string(), name.to_string()), before);
            }
            ("v1", "Namespace") => {}
            (_, "PriorityClass") => {
                if a.read_priorities(cluster) {
                    a.all_pods(cluster);
                }
            }
            _ => {
                let group = crate::dialect::group_of(api_version).to_string();
                a.gang_object(cluster, &(group, kind.to_string(), namespace.to_string(), name.to_string()));
            }
        }
    }

    /// Resolves gangs and memberships again if a change since the last call needs it. Call it
    /// before reading [`Live::snapshot`].
    pub fn refresh(&mut self) {
        self.assembly.refresh(&self.cluster);
        self.assembly.compact();
    }

    /// The snapshot as of the last [`Live::refresh`] (nodes and pods are always current).
    pub fn snapshot(&self) -> &Snapshot {
        &self.assembly.snapshot
    }

    /// Every object that could not be read, as [`Cluster::snapshot`] lists them.
    pub fn problems(&self) -> Vec<Problem> {
        self.assembly.problems()
    }

    /// The raw objects.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The raw object of this API version, kind, namespace and name, if held.
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<&Value> {
        self.cluster.get(api_version, kind, namespace, name)
    }

    /// The converted pod, to adjust what the next cycle sees of it (a binding sent but not yet
    /// seen in the watch). The adjustment lasts until the pod changes or [`Live::reread_pod`].
    pub fn pod_mut(&mut self, namespace: &str, name: &str) -> Option<&mut Pod> {
        let i = *self.assembly.pod_at.get(&(namespace.to_string(), name.to_string()))?;
        self.assembly.snapshot.pods.get_mut(i)
    }

    /// Converts the pod again from its raw object, undoing [`Live::pod_mut`].
    pub fn reread_pod(&mut self, namespace: &str, name: &str) {
        let before = self.cluster.get("v1", "Pod", namespace, name).map(fingerprint);
        self.assembly.pod(&self.cluster, &(namespace.to_string(), name.to_string()), before);
    }

    /// Resolves gangs and memberships afresh at the next [`Live::refresh`], undoing what
    /// [`Live::gangs_mut`] handed them.
    pub fn resolve_again(&mut self) {
        self.assembly.invalidate();
    }

    /// The gangs, to hand them the state a previous cycle left them (see
    /// [`crate::model::GangState`]). Lasts until gangs are resolved again.
    pub fn gangs_mut(&mut self) -> &mut [Gang] {
        &mut self.assembly.snapshot.gangs
    }

    /// The `NonStrict` reservations the next cycle receives.
    pub fn set_reservations(&mut self, reservations: Vec<Reservation>) {
        self.assembly.snapshot.reservations = reservations;
    }
}
