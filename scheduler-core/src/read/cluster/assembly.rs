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

use super::resolve::{Claimant, resolve};
use super::{Assembled, Cluster, Problem, describe, str_at};
use crate::convert::{self, PriorityClasses};
use crate::dialect::{self, Claim, GangObject};
use crate::error::FieldError;
use crate::model::{GangKey, GangState, Membership, Pod, PodKey, Reservation, Snapshot, Time, Usage};
use crate::object::{Filed, ObjectRef, at};

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
    budget_problems: Vec<Problem>,
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
        a.snapshot.usage = Some(Usage::default());
        a.read_priorities(cluster);
        for name in cluster.nodes.keys() {
            a.node(cluster, name);
        }
        a.all_pods(cluster);
        a.read_budgets(cluster);
        for key in cluster.gang_objects.keys() {
            a.gang_object(cluster, key);
        }
        a.refresh(cluster);
        // Converted in one pass, in order: laid out already (see [`Assembly::compact`]).
        a.scattered = 0;
        a
    }

    pub(super) fn into_assembled(self) -> Assembled {
        let problems = self.problems();
        Assembled { snapshot: self.snapshot, problems }
    }

    /// Every problem met, in a stable order: priority classes, budgets, nodes, gang objects,
    /// pods, claims.
    fn problems(&self) -> Vec<Problem> {
        let mut out = self.class_problems.clone();
        out.extend(self.budget_problems.iter().cloned());
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

    /// Reads the PodDisruptionBudgets again: they are few (one per protected workload), so any
    /// change reads them all, in key order.
    fn read_budgets(&mut self, cluster: &Cluster) {
        self.budget_problems.clear();
        self.snapshot.budgets.clear();
        for v in cluster.budgets.values() {
            match convert::budget_from_value(v) {
                Ok(b) => self.snapshot.budgets.push(b),
                Err(errors) => self.budget_problems.push(Problem { object: describe(v), errors }),
            }
        }
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
        self.snapshot.usage = Some(Usage::default());
        self.pod_at.clear();
        self.claims.clear();
        self.pod_problems.clear();
        let raw: Vec<&Value> = cluster.pods.values().collect();
        self.snapshot.pods.reserve(raw.len());
        self.claims.reserve(raw.len());
        if self.indexed {
            self.pod_at.reserve(raw.len());
        }
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
            self.set_gang(i, gang);
            self.stale = was_stale;
        }
    }

    fn unfile_pod(&mut self, key: &PodAt) {
        self.pod_problems.remove(key);
        let Some(i) = self.pod_at.remove(key) else { return };
        let pod = self.snapshot.pods.swap_remove(i);
        if let Some(usage) = &mut self.snapshot.usage {
            usage.remove(i, &pod);
            usage.moved(self.snapshot.pods.len(), i);
        }
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
        if let Some(usage) = &mut self.snapshot.usage {
            usage.add(self.snapshot.pods.len(), &pod);
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

        let objects =
            self.gang_objects.iter().filter_map(|(key, read)| Some((cluster.gang_objects.get(key)?, read)));
        let claimed: Vec<Claimant<'_>> = self
            .claimed(cluster)
            .into_iter()
            .map(|(at, raw)| Claimant { at, raw, pod: &self.snapshot.pods[at], claims: &self.claims[at] })
            .collect();
        let resolved = resolve(objects, &claimed);
        for (i, m) in resolved.memberships {
            self.set_gang(i, m);
        }
        self.snapshot.gangs = resolved.gangs;
        self.object_problems = resolved.object_problems;
        self.claim_problems = resolved.claim_problems;
    }
}

impl Assembly {
    /// Sets the gang of the pod at `i`, keeping the carried usage's open pods current.
    fn set_gang(&mut self, i: usize, gang: Option<Membership>) {
        let Some(p) = self.snapshot.pods.get_mut(i) else { return };
        p.gang = gang;
        if let Some(usage) = &mut self.snapshot.usage {
            usage.reread(i, p);
        }
    }

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
    (at(v, "/metadata/labels").cloned(), at(v, "/metadata/annotations").cloned())
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
    /// What the last [`Live::refresh_with`] laid over the snapshot, to undo it.
    laid: Laid,
}

/// What a scheduler knows that the watched objects do not say yet, laid over [`Live`]'s snapshot
/// by [`Live::refresh_with`]. A plain value: the scheduler keeps it, the core applies it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overlay {
    /// Bindings sent but not yet seen in the watch: pod → node. A pod without a node of its own
    /// is shown on this one, so the next cycle cannot book the node twice.
    pub assumed: BTreeMap<PodKey, String>,
    /// Gang → (its creation time, the state the last applied plan left it). A gang object's
    /// state is handed only to a gang of the same creation time (not to a later one of the same
    /// name); a CRD-less gang's follows its name.
    pub carried: HashMap<GangKey, (Time, GangState)>,
    /// `NonStrict` reservations the next cycle receives.
    pub reservations: Vec<Reservation>,
    /// Pods held back as if gated, pod → the gate shown (a binding the API server refused: the
    /// member cannot be placed for now, which fails its gang's all-or-nothing step like any
    /// other member that does not fit).
    pub held_back: BTreeMap<PodKey, String>,
}

/// Adjustments in effect, with what they replaced.
#[derive(Debug, Default)]
struct Laid {
    /// Pod → the node shown for it.
    pods: BTreeMap<PodKey, String>,
    /// Pod → the gate added to it.
    gated: BTreeMap<PodKey, String>,
    /// Gang → the state its objects gave it, before the overlay's.
    gangs: HashMap<GangKey, GangState>,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            cluster: Cluster::default(),
            assembly: {
                let mut assembly = Assembly { indexed: true, ..Assembly::default() };
                assembly.snapshot.usage = Some(Usage::default());
                assembly
            },
            laid: Laid::default(),
        }
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
            self.laid = Laid::default();
            return result;
        }
        // The identity is read here, once, and carried to filing and patching.
        let r = ObjectRef::of(&obj);
        let before = (r.filed() == Filed::Pod).then(|| self.cluster.get_ref(&r).map(fingerprint)).flatten();
        let result = self.cluster.push_as(r.clone(), obj);
        self.cluster.others.clear();
        if result.is_ok() {
            self.touch(&r, before);
        }
        result
    }

    /// Removes the object of this API version, kind, namespace and name (a watch `Deleted`).
    pub fn remove(&mut self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        self.remove_ref(&ObjectRef::new(api_version, kind, namespace, name));
    }

    /// Removes the object with this identity (a watch `Deleted`).
    pub fn remove_ref(&mut self, r: &ObjectRef) {
        self.cluster.remove_ref(r);
        self.touch(r, None);
    }

    fn touch(&mut self, r: &ObjectRef, before: Option<Fingerprint>) {
        let (cluster, a) = (&self.cluster, &mut self.assembly);
        match r.filed() {
            Filed::Node => a.node(cluster, &r.name),
            Filed::Pod => a.pod(cluster, &(r.pod_namespace().to_string(), r.name.clone()), before),
            Filed::Namespace => {}
            Filed::Budget => a.read_budgets(cluster),
            Filed::PriorityClass => {
                if a.read_priorities(cluster) {
                    a.all_pods(cluster);
                }
            }
            Filed::Other => a.gang_object(
                cluster,
                &(r.group.clone(), r.kind.clone(), r.namespace.clone(), r.name.clone()),
            ),
        }
    }

    /// Resolves gangs and memberships again if a change since the last call needs it, with no
    /// overlay (see [`Live::refresh_with`]). Call it before reading [`Live::snapshot`].
    pub fn refresh(&mut self) {
        self.refresh_with(&Overlay::default());
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

    /// Brings the snapshot up to date (as [`Live::refresh`]) and lays `overlay` over it: what a
    /// scheduler knows that the watched objects do not say yet. The overlay replaces the one of
    /// the previous call: pods and gangs it no longer adjusts are as their objects say again.
    /// Only the snapshot changes; the raw objects stay as the watch delivered them.
    pub fn refresh_with(&mut self, overlay: &Overlay) {
        let Live { cluster, assembly: a, laid } = self;
        // Undo what the previous overlay did and this one does not (a pod converted again since
        // lost its adjustment already).
        let mut dropped: BTreeSet<PodKey> = laid
            .pods
            .iter()
            .filter(|(pod, node)| overlay.assumed.get(*pod) != Some(*node))
            .map(|(pod, _)| pod.clone())
            .collect();
        dropped.extend(
            laid.gated
                .iter()
                .filter(|(pod, gate)| overlay.held_back.get(*pod) != Some(*gate))
                .map(|(p, _)| p.clone()),
        );
        for pod in dropped {
            laid.pods.remove(&pod);
            laid.gated.remove(&pod);
            let key = (pod.namespace, pod.name);
            let before = cluster.pods.get(&key).map(fingerprint);
            a.pod(cluster, &key, before);
        }
        let resolving = a.stale;
        a.refresh(cluster);
        a.compact();
        let gangs = &mut a.snapshot.gangs;
        if resolving {
            // Resolved afresh: every gang holds what its objects say.
            laid.gangs.clear();
        } else {
            for (key, state) in laid.gangs.drain() {
                if let Ok(i) = gangs.binary_search_by(|g| g.key.cmp(&key)) {
                    gangs[i].state = state;
                }
            }
        }
        for g in gangs.iter_mut() {
            // A gang object's creation time tells it from a later one of the same name; a
            // CRD-less gang's is its oldest member's, which changes as members come and go.
            let crd_less = g.source.dialect.is_crd_less();
            if let Some((created, state)) = overlay.carried.get(&g.key)
                && (crd_less || *created == g.created)
                && g.state != *state
            {
                let own = std::mem::replace(&mut g.state, state.clone());
                laid.gangs.insert(g.key.clone(), own);
            }
        }
        a.snapshot.reservations.clone_from(&overlay.reservations);
        for (pod, node) in &overlay.assumed {
            let at = (pod.namespace.clone(), pod.name.clone());
            if let Some(&i) = a.pod_at.get(&at)
                && let Some(p) = a.snapshot.pods.get_mut(i)
                && p.node_name.is_none()
            {
                // The carried usage follows the pod onto the node it is assumed on.
                if let Some(usage) = &mut a.snapshot.usage {
                    usage.remove(i, p);
                    p.node_name = Some(node.clone());
                    usage.add(i, p);
                } else {
                    p.node_name = Some(node.clone());
                }
                laid.pods.insert(pod.clone(), node.clone());
            }
        }
        for (pod, gate) in &overlay.held_back {
            let at = (pod.namespace.clone(), pod.name.clone());
            if let Some(&i) = a.pod_at.get(&at)
                && let Some(p) = a.snapshot.pods.get_mut(i)
                && !p.scheduling_gates.contains(gate)
            {
                p.scheduling_gates.push(gate.clone());
                laid.gated.insert(pod.clone(), gate.clone());
            }
        }
    }
}
