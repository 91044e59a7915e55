//! Assembly: a [`Cluster`]'s raw objects converted into a [`Snapshot`] that can be patched object
//! by object. [`Cluster::snapshot`] assembles everything in one pass; [`Live`] keeps a snapshot
//! assembled while a watch delivers changes, so a cycle costs what changed, not what the cluster
//! holds.
//!
//! Nodes and pods are converted one at a time (an object's conversion depends only on itself and
//! the priority classes). Gangs and memberships depend on many objects at once; they are resolved
//! again when a gang object or a pod that claims a gang changed — from the claiming pods only, not
//! from every pod of the cluster.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Deserialize as _;
use serde_json::Value;

use super::resolve::{Claimant, resolve};
use super::{Assembled, Cluster, GangAt, Held, Problem, StoredAt, describe, pod_key, str_at};
use crate::read::convert::{self, PriorityClasses};
use crate::read::dialect::{self, Claim, GangObject};
use crate::read::error::FieldError;
use crate::read::model::SmolStr;
use crate::read::model::volume::NETWORK_TOPOLOGY_NAME;
use crate::read::model::{
    GangKey, GangState, Membership, ObjectKey, Persisted, Pod, PodKey, Reservation, Snapshot, Usage,
};
use crate::read::object::{ApiKind, Filed, ObjectRef, StoredKind, at};
use crate::read::volume::{self, Stored};

/// Where the cluster files a pod.
type PodAt = PodKey;
type Converted = (Result<Pod, Vec<FieldError>>, Result<Vec<Claim>, Vec<FieldError>>);

/// The converted state of a cluster, with what is needed to patch it.
#[derive(Debug, Default)]
pub(super) struct Assembly {
    snapshot: Snapshot,
    /// Keep `node_at` and `pod_at`, to patch objects later (a one-pass assembly needs neither).
    indexed: bool,
    node_at: HashMap<SmolStr, usize>,
    pod_at: HashMap<PodAt, usize>,
    /// Parallel to `snapshot.pods`: each pod's gang claims.
    claims: Vec<Vec<Claim>>,
    priorities: PriorityClasses,
    class_problems: Vec<Problem>,
    budget_problems: Vec<Problem>,
    /// Storage and device objects that could not be read.
    storage_problems: BTreeMap<StoredAt, Problem>,
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
    stats: Stats,
}

/// What [`Live`] has done since it was made: how many objects it converted and how often it
/// resolved gangs — what a change should cost, made visible to tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub nodes_converted: u64,
    pub pods_converted: u64,
    /// Gang resolutions (each reads every gang object and claiming pod).
    pub resolutions: u64,
}

impl Assembly {
    /// Everything in `cluster`, assembled; `indexed` to patch it later.
    pub(super) fn build<H: Held>(cluster: &Cluster<H>, indexed: bool) -> Self {
        let mut a = Assembly { indexed, ..Assembly::default() };
        a.snapshot.usage = Some(Usage::default());
        a.read_priorities(cluster);
        for name in cluster.nodes.keys() {
            a.node(cluster, name);
        }
        a.all_pods(cluster);
        a.read_budgets(cluster);
        a.read_namespaces(cluster);
        for key in cluster.storage.keys() {
            a.stored(cluster, key);
        }
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

    /// Every problem met, in a stable order: priority classes, budgets, nodes, storage objects,
    /// gang objects, pods, claims.
    fn problems(&self) -> Vec<Problem> {
        let mut out = self.class_problems.clone();
        out.extend(self.budget_problems.iter().cloned());
        out.extend(self.node_problems.values().cloned());
        out.extend(self.storage_problems.values().cloned());
        out.extend(self.object_problems.iter().cloned());
        out.extend(self.pod_problems.values().cloned());
        out.extend(self.claim_problems.iter().cloned());
        out
    }

    /// Reads the priority classes again; returns whether their values changed.
    fn read_priorities<H: Held>(&mut self, cluster: &Cluster<H>) -> bool {
        let mut problems = Vec::new();
        let mut classes = Vec::new();
        for held in cluster.priority_classes.values() {
            let v = held.value();
            match k8s_openapi::api::scheduling::v1::PriorityClass::deserialize(v.as_ref()) {
                Ok(pc) => classes.push(pc),
                Err(e) => problems.push(Problem {
                    object: describe(&v),
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
    fn read_budgets<H: Held>(&mut self, cluster: &Cluster<H>) {
        self.budget_problems.clear();
        self.snapshot.budgets.clear();
        for held in cluster.budgets.values() {
            let v = held.value();
            match convert::budget_from_value(&v) {
                Ok(b) => self.snapshot.budgets.push(b),
                Err(errors) => self.budget_problems.push(Problem { object: describe(&v), errors }),
            }
        }
    }

    /// Reads the namespaces' labels again (what pod affinity terms' `namespaceSelector` match):
    /// they are few, so any change reads them all. A namespace whose labels cannot be read has
    /// none (namespaces are read for their labels only; the webhook reads the same labels).
    fn read_namespaces<H: Held>(&mut self, cluster: &Cluster<H>) {
        self.snapshot.namespaces = cluster
            .namespaces
            .iter()
            .map(|(name, held)| {
                let v = held.value();
                let labels: BTreeMap<String, String> = at(&v, "/metadata/labels")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect()
                    })
                    .unwrap_or_default();
                (name.clone(), labels.into())
            })
            .collect();
    }

    /// Brings the storage or device object at `key` in line with the cluster (read, replaced or
    /// gone): one entry of the snapshot's [`crate::read::model::volume::Storage`] changes.
    fn stored<H: Held>(&mut self, cluster: &Cluster<H>, key: &StoredAt) {
        self.storage_problems.remove(key);
        let storage = &mut self.snapshot.storage;
        // A HyperNode's tier and tier name as they were: a change re-resolves the gangs that
        // name tiers by name (Volcano's controller rewrites HyperNodes' status often; that alone
        // changes nothing).
        let mut named_tier_was: Option<(u32, Option<String>)> = None;
        let object = ObjectKey::new(key.namespace.as_str(), key.name.as_str());
        match key.kind {
            StoredKind::Pvc => drop(storage.claims.remove(&object)),
            StoredKind::Pv => drop(storage.volumes.remove(&key.name)),
            StoredKind::StorageClass => drop(storage.classes.remove(&key.name)),
            StoredKind::CsiNode => drop(storage.csi_nodes.remove(&key.name)),
            StoredKind::ResourceClaim => drop(storage.resource_claims.remove(&object)),
            StoredKind::ResourceSlice => drop(storage.resource_slices.remove(&key.name)),
            StoredKind::DeviceClass => drop(storage.device_classes.remove(&key.name)),
            StoredKind::HyperNode => {
                named_tier_was = storage.hypernodes.remove(&key.name).map(|h| (h.tier, h.tier_name));
            }
            StoredKind::KaiTopology => drop(storage.kai_topologies.remove(&key.name)),
            StoredKind::KueueTopology => drop(storage.kueue_topologies.remove(&key.name)),
            // Replaced below, or kept when the new version cannot be read (as Koordinator keeps
            // the tree it has when a rebuild fails).
            StoredKind::NetworkTopology => {
                if key.name == NETWORK_TOPOLOGY_NAME
                    && !storage.network_layers.is_empty()
                    && !cluster.storage.contains_key(key)
                {
                    // Koordinator's gangs take their levels from it: resolved again.
                    storage.network_layers = Default::default();
                    self.stale = true;
                }
            }
        }
        let had_name = named_tier_was.as_ref().is_some_and(|(_, n)| n.is_some());
        let Some(held) = cluster.storage.get(key) else {
            self.stale |= had_name;
            return;
        };
        let v = held.value();
        match volume::from_value(&v) {
            Some(Ok(Stored::Pvc(c))) => drop(storage.claims.insert(object, c)),
            Some(Ok(Stored::Pv(p))) => drop(storage.volumes.insert(key.name.clone(), p)),
            Some(Ok(Stored::Class(c))) => drop(storage.classes.insert(key.name.clone(), c)),
            Some(Ok(Stored::CsiNode(n))) => drop(storage.csi_nodes.insert(key.name.clone(), n)),
            Some(Ok(Stored::ResourceClaim(c))) => drop(storage.resource_claims.insert(object, c)),
            Some(Ok(Stored::ResourceSlice(s))) => drop(storage.resource_slices.insert(key.name.clone(), s)),
            Some(Ok(Stored::DeviceClass(c))) => drop(storage.device_classes.insert(key.name.clone(), c)),
            Some(Ok(Stored::HyperNode(h))) => {
                if (h.tier_name.is_some() || had_name)
                    && named_tier_was != Some((h.tier, h.tier_name.clone()))
                {
                    self.stale = true;
                }
                storage.hypernodes.insert(key.name.clone(), h);
            }
            Some(Ok(Stored::KaiTopology(levels))) => {
                drop(storage.kai_topologies.insert(key.name.clone(), levels))
            }
            Some(Ok(Stored::KueueTopology(levels))) => {
                drop(storage.kueue_topologies.insert(key.name.clone(), levels))
            }
            // Resolved again only when its layers change (Koordinator rewrites its status as
            // nodes come and go).
            Some(Ok(Stored::NetworkTopology(name, layers)))
                if name == NETWORK_TOPOLOGY_NAME && storage.network_layers.layers() != layers.as_slice() =>
            {
                storage.network_layers = layers.into();
                self.stale = true;
            }
            // Koordinator's scheduler reads only the one named `default`.
            Some(Ok(Stored::NetworkTopology(..))) => {}
            Some(Err(errors)) => {
                self.stale |= had_name;
                self.storage_problems.insert(key.clone(), Problem { object: describe(&v), errors });
            }
            // Filed by its kind, so read by it: not reached.
            None => {}
        }
    }

    /// Brings node `name` in line with the cluster (converted, replaced or gone).
    fn node<H: Held>(&mut self, cluster: &Cluster<H>, name: &str) {
        self.node_problems.remove(name);
        let Some(held) = cluster.nodes.get(name) else {
            self.remove_node(name);
            return;
        };
        self.stats.nodes_converted += 1;
        let v = held.value();
        match convert::node_from_value(&v) {
            Ok(n) => match self.node_at.get(name) {
                Some(&i) => self.snapshot.nodes[i] = n,
                None => {
                    if self.indexed {
                        self.node_at.insert(SmolStr::new(name), self.snapshot.nodes.len());
                    }
                    self.snapshot.nodes.push(n);
                }
            },
            Err(errors) => {
                self.node_problems.insert(name.to_string(), Problem { object: describe(&v), errors });
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
    fn all_pods<H: Held>(&mut self, cluster: &Cluster<H>) {
        self.snapshot.pods.clear();
        self.snapshot.usage = Some(Usage::default());
        self.pod_at.clear();
        self.claims.clear();
        self.pod_problems.clear();
        let raw: Vec<&H> = cluster.pods.values().collect();
        self.snapshot.pods.reserve(raw.len());
        self.claims.reserve(raw.len());
        if self.indexed {
            self.pod_at.reserve(raw.len());
        }
        self.stats.pods_converted += raw.len() as u64;
        let priorities = self.priorities.clone();
        for ((key, v), converted) in cluster.pods.iter().zip(convert_pods(&raw, &priorities)) {
            self.file_pod(key, v, converted);
        }
        self.stale = true;
    }

    /// Brings the pods at `keys` in line with the cluster (converted, replaced or gone), the
    /// conversions on all cores: many pods of a re-list, not all of them.
    fn some_pods<H: Held>(&mut self, cluster: &Cluster<H>, keys: &[PodAt]) {
        let raw: Vec<&H> = keys.iter().filter_map(|k| cluster.pods.get(k)).collect();
        self.stats.pods_converted += raw.len() as u64;
        let priorities = self.priorities.clone();
        let mut converted = convert_pods(&raw, &priorities);
        for key in keys {
            self.unfile_pod(key);
            // Converted in the order of the keys held.
            if let Some(v) = cluster.pods.get(key)
                && let Some(c) = converted.next()
            {
                self.file_pod(key, v, c);
            }
        }
    }

    /// Brings the pod at `key` in line with the cluster. `before`: the labels and annotations
    /// of the version it replaces, when known. A pod that claims a gang and changed nothing gangs
    /// depend on (its claims, its age, its labels and annotations) keeps its membership without
    /// every gang being resolved again: status updates of running members are the bulk of a
    /// busy cluster's pod events.
    fn pod<H: Held>(&mut self, cluster: &Cluster<H>, key: &PodAt, before: Option<Fingerprint>) {
        let kept = self.pod_at.get(key).filter(|&&i| !self.claims[i].is_empty()).map(|&i| {
            let p = &self.snapshot.pods[i];
            (self.claims[i].clone(), p.created, p.gang.clone())
        });
        let was_stale = self.stale;
        self.unfile_pod(key);
        let Some(v) = cluster.pods.get(key) else { return };
        self.stats.pods_converted += 1;
        let converted = convert_pod(v, &self.priorities);
        let unchanged = match (&kept, &converted, &before) {
            (Some((claims, created, _)), (Ok(p), Ok(now)), Some(b)) => {
                now == claims && p.created == *created && *b == fingerprint(&v.value())
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
            if let Some(moved) = self.snapshot.pods.get(i) {
                usage.moved(self.snapshot.pods.len(), i, moved);
            }
        }
        if !self.claims.swap_remove(i).is_empty() {
            self.stale = true;
        }
        if let Some(moved) = self.snapshot.pods.get(i) {
            self.pod_at.insert(moved.key.clone(), i);
        }
    }

    fn file_pod<H: Held>(&mut self, key: &PodAt, v: &H, (converted, claims): Converted) {
        let mut pod = match converted {
            Ok(p) => p,
            Err(errors) => {
                self.pod_problems.insert(key.clone(), Problem { object: describe(&v.value()), errors });
                return;
            }
        };
        let claims = match claims {
            Ok(c) => c,
            Err(errors) => {
                self.pod_problems.insert(key.clone(), Problem { object: describe(&v.value()), errors });
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
    fn gang_object<H: Held>(&mut self, cluster: &Cluster<H>, key: &GangAt) {
        let read = cluster.gang_objects.get(key).and_then(|v| key.read(&v.value()));
        let changed = match read {
            Some(r) => self.gang_objects.insert(key.clone(), r.clone()).as_ref() != Some(&r),
            None => self.gang_objects.remove(key).is_some(),
        };
        self.stale |= changed;
    }

    /// Resolves gangs and memberships again if anything they depend on changed: gang objects of
    /// every dialect, CRD-less gangs from the oldest pod that claims them, upstream hierarchies,
    /// and the gang each claiming pod belongs to.
    fn refresh<H: Held>(&mut self, cluster: &Cluster<H>) {
        if !self.stale {
            return;
        }
        self.stale = false;
        self.stats.resolutions += 1;

        let objects = self.gang_objects.iter().filter(|(key, _)| cluster.gang_objects.contains_key(*key));
        let claimed: Vec<Claimant<'_, H>> = self
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
        // Koordinator's gather rules name layers of the cluster's ClusterNetworkTopology: levels
        // once it is known.
        for g in &mut self.snapshot.gangs {
            let Some(gather) = g.network_gather.take() else { continue };
            let (required, preferred, said) =
                dialect::koordinator::gather_levels(&gather, &self.snapshot.storage.network_layers);
            if required.is_some() {
                (g.topology_key, g.topology_preferred) = (required, preferred);
            }
            if !said.is_empty() {
                self.object_problems
                    .push(Problem { object: format!("{} {}", g.source.kind, g.key), errors: said });
            }
        }
        // Volcano's named tiers name HyperNodes' `tierName`s: a tier once they are known.
        if self.snapshot.gangs.iter().any(|g| g.tier_name.is_some()) {
            let names = crate::read::hypernode::tier_names(&self.snapshot.storage.hypernodes);
            for g in &mut self.snapshot.gangs {
                let Some(named) = g.tier_name.take() else { continue };
                match names.get(named.name.as_str()) {
                    Some((tier, others)) => {
                        let key = crate::read::hypernode::key_of(*tier);
                        if named.soft {
                            g.topology_preferred = Some(key);
                        } else {
                            g.topology_key = Some(key);
                        }
                        if !others.is_empty() {
                            self.object_problems.push(Problem {
                                object: format!("{} {}", g.source.kind, g.key),
                                errors: vec![FieldError::new(
                                    "spec.networkTopology.highestTierName",
                                    format!(
                                        "HyperNodes give tier name {:?} more than one tier ({tier}, and {}): tier {tier} is used, that of the first by name",
                                        named.name,
                                        others.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                                    ),
                                )],
                            });
                        }
                    }
                    None => self.object_problems.push(Problem {
                        object: format!("{} {}", g.source.kind, g.key),
                        errors: vec![FieldError::new(
                            "spec.networkTopology.highestTierName",
                            format!(
                                "no HyperNode has tierName {:?}: Volcano then places the job without a tier bound, and so does kube-gang",
                                named.name
                            ),
                        )],
                    }),
                }
            }
        }
        // A gang object's own priority class: its value is the gang's priority.
        for g in &mut self.snapshot.gangs {
            let Some(class) = g.priority_class_name.as_deref().filter(|c| !c.is_empty()) else { continue };
            match self.priorities.value_of(class) {
                Some(v) => g.priority = Some(v),
                None => self.object_problems.push(Problem {
                    object: format!("{} {}", g.source.kind, g.key),
                    errors: vec![FieldError::new(
                        "spec.priorityClassName",
                        format!("priority class {class:?} not found: the gang's priority is its members' until it exists"),
                    )],
                }),
            }
        }
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
    fn claimed<'c, H: Held>(&self, cluster: &'c Cluster<H>) -> Vec<(usize, &'c H)> {
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
                    Some((i, cluster.pods.get(k)?))
                })
                .collect();
        }
        let mut raw = cluster.pods.iter().peekable();
        at.into_iter()
            .filter_map(|i| {
                let k = &pods[i].key;
                while raw.next_if(|(key, _)| *key < k).is_some() {}
                let (key, v) = raw.peek()?;
                (*key == k).then_some((i, *v))
            })
            .collect()
    }
}

/// What gang resolution reads of a pod besides its claims and age: its labels and annotations
/// (but the gang state gang-scheduler keeps on it, which resolution does not read: writing it
/// resolves no gang again).
type Fingerprint = (Option<Value>, Option<Value>);

fn fingerprint(v: &Value) -> Fingerprint {
    let mut annotations = at(v, "/metadata/annotations").cloned();
    if let Some(Value::Object(a)) = &mut annotations {
        a.remove(crate::read::labels::ANNOTATION_STATE);
    }
    (at(v, "/metadata/labels").cloned(), annotations)
}

/// A pod as the snapshot holds it, with its claims. Read straight from its JSON
/// ([`convert::pod_from_raw`]): the same pod as a typed decode, without decoding what the model
/// does not use.
fn convert_pod<H: Held>(held: &H, priorities: &PriorityClasses) -> Converted {
    let v = held.value();
    (convert::pod_from_raw(&v, priorities), dialect::pod_claims(&v))
}

/// Converts raw pods and reads their gang claims, in order. Each pod is independent of the others,
/// so large clusters are split over the machine's cores (the result is the same either way), and
/// so is decoding compact ones. The pods are converted a round at a time, as the caller takes
/// them: each core's part of a round comes back as that core made it, and what is converted but
/// not yet filed stays within a round (some 8,000 pods a core), not the whole cluster beside its
/// snapshot.
fn convert_pods<'a, H: Held>(
    raw: &'a [&'a H],
    priorities: &'a PriorityClasses,
) -> impl Iterator<Item = Converted> + 'a {
    const PER_THREAD: usize = 8_192;
    let threads =
        std::thread::available_parallelism().map_or(1, usize::from).min(raw.len() / PER_THREAD).max(1);
    raw.chunks(threads * PER_THREAD).flat_map(move |round| convert_round(round, priorities, threads))
}

/// One round of [`convert_pods`], on `threads` cores.
fn convert_round<H: Held>(
    raw: &[&H],
    priorities: &PriorityClasses,
    threads: usize,
) -> impl Iterator<Item = Converted> + use<H> {
    let parts: Vec<Vec<Converted>> = if threads == 1 {
        vec![raw.iter().map(|v| convert_pod(*v, priorities)).collect()]
    } else {
        let chunk = raw.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let workers: Vec<_> = raw
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || part.iter().map(|v| convert_pod(*v, priorities)).collect::<Vec<_>>())
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
        })
    };
    parts.into_iter().flatten()
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
    /// Gang → (the `uid` of its object, the state the last applied plan left it): handed only to
    /// the gang of that object, not to a later one of the same name. A gang of pod annotations
    /// has no object and carries nothing here: its members keep its state ([`Overlay::kept`]).
    pub carried: HashMap<GangKey, (String, GangState)>,
    /// Gang states written on member pods (`kube-gang.io/state`) and not yet seen in the watch:
    /// pod → (its `uid`, the state). Shown on that pod (not on another of the same name) unless
    /// the pod already carries a state at least as new.
    pub kept: BTreeMap<PodKey, (String, Box<Persisted>)>,
    /// `NonStrict` reservations the next cycle receives.
    pub reservations: Vec<Reservation>,
    /// Pods held back as if gated, pod → the gate shown (a binding the API server refused: the
    /// member cannot be placed for now, which fails its gang's all-or-nothing step like any
    /// other member that does not fit).
    pub held_back: BTreeMap<PodKey, String>,
    /// Nominations written (`status.nominatedNodeName`) and not yet seen in the watch: pod →
    /// node. The pod is shown nominated there, as it will be once the write is seen.
    pub nominated: BTreeMap<PodKey, String>,
}

/// What one object's change touches in the assembly.
enum Touched {
    Node(String),
    Pod(PodAt),
    Namespace,
    Budget,
    PriorityClass,
    Gang(GangAt),
    Stored(StoredAt),
    Other,
}

impl Touched {
    fn of(r: &ObjectRef) -> Self {
        match r.filed() {
            Filed::Node => Touched::Node(r.name.clone()),
            Filed::Pod => Touched::Pod(pod_key(r)),
            Filed::Namespace => Touched::Namespace,
            Filed::Budget => Touched::Budget,
            Filed::PriorityClass => Touched::PriorityClass,
            Filed::Storage(kind) => Touched::Stored(StoredAt::of(kind, r)),
            Filed::Other if dialect::is_gang_kind(&r.group, &r.kind) => Touched::Gang(GangAt::of(r)),
            Filed::Other => Touched::Other,
        }
    }
}

/// What many objects' changes touch, kind by kind (see [`Live::load`]).
#[derive(Debug, Default)]
struct Batch {
    nodes: Vec<String>,
    /// Pods changed or gone, unless every pod is converted anyway (`all_pods`).
    pods: Vec<PodAt>,
    pods_changed: usize,
    all_pods: bool,
    budgets: bool,
    namespaces: bool,
    classes: bool,
    gangs: Vec<GangAt>,
    stored: Vec<StoredAt>,
}

impl Batch {
    fn note(&mut self, r: &ObjectRef, gone: bool) {
        match r.filed() {
            Filed::Node => self.nodes.push(r.name.clone()),
            Filed::Pod => {
                self.pods_changed += 1;
                if gone || !self.all_pods {
                    self.pods.push(pod_key(r));
                }
            }
            Filed::Namespace => self.namespaces = true,
            Filed::Budget => self.budgets = true,
            Filed::Storage(kind) => self.stored.push(StoredAt::of(kind, r)),
            Filed::PriorityClass => self.classes = true,
            Filed::Other => {
                if dialect::is_gang_kind(&r.group, &r.kind) {
                    self.gangs.push(GangAt::of(r));
                }
            }
        }
    }
}

/// Whether `new` is the version of an object already `held`: both state the same
/// `resourceVersion` (a re-list after a dropped watch lists mostly these).
fn unchanged(held: Option<&Value>, new: &Value) -> bool {
    fn version(v: &Value) -> Option<&str> {
        at(v, "/metadata/resourceVersion").and_then(Value::as_str).filter(|s| !s.is_empty())
    }
    held.and_then(version).is_some_and(|h| Some(h) == version(new))
}

/// Adjustments in effect, with what they replaced.
#[derive(Debug, Default)]
struct Laid {
    /// Pod → the node shown for it.
    pods: BTreeMap<PodKey, String>,
    /// Pod → the gate added to it.
    gated: BTreeMap<PodKey, String>,
    /// Pod → the node it is shown nominated on.
    nominated: BTreeMap<PodKey, String>,
    /// Pod → the uid it was shown for and the revision of the gang state it is shown keeping.
    kept: BTreeMap<PodKey, (String, u64)>,
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

    /// Files one object and brings the snapshot up to date with it. A `List` is flattened and
    /// loaded as [`Live::load`] loads objects.
    pub fn push(&mut self, obj: Value) -> Result<(), FieldError> {
        let kind = str_at(&obj, "/kind");
        if kind.ends_with("List") && obj.get("items").is_some() {
            let mut items = Vec::new();
            let mut first_error = None;
            for (i, v) in super::list_items(obj)?.into_iter().enumerate() {
                match super::entering(&v) {
                    Ok(()) => items.push((ObjectRef::of(&v), v)),
                    Err(e) => {
                        first_error
                            .get_or_insert(FieldError::new(format!("items[{i}].{}", e.path), e.message));
                    }
                }
            }
            let loaded = self.load(items);
            return first_error.map_or(loaded, Err);
        }
        super::entering(&obj)?;
        self.apply(ObjectRef::of(&obj), obj)
    }

    /// Files one object under its identity, computed once where it entered (a watch event's
    /// metadata), and brings the snapshot up to date with it: that object is converted again,
    /// nothing else.
    pub fn apply(&mut self, r: ObjectRef, obj: Value) -> Result<(), FieldError> {
        let before = (r.filed() == Filed::Pod).then(|| self.cluster.held(&r).map(fingerprint)).flatten();
        let touched = Touched::of(&r);
        let result = self.cluster.insert(r, obj);
        self.cluster.others.clear();
        if result.is_ok() {
            self.touch(touched, before);
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
        self.touch(Touched::of(r), None);
    }

    fn touch(&mut self, t: Touched, before: Option<Fingerprint>) {
        let (cluster, a) = (&self.cluster, &mut self.assembly);
        match t {
            Touched::Node(name) => a.node(cluster, &name),
            Touched::Pod(key) => a.pod(cluster, &key, before),
            Touched::Namespace => a.read_namespaces(cluster),
            Touched::Budget => a.read_budgets(cluster),
            Touched::PriorityClass => {
                // Every pod converted again, and gangs resolved again (a gang object's class too).
                if a.read_priorities(cluster) {
                    a.all_pods(cluster);
                }
            }
            Touched::Gang(key) => a.gang_object(cluster, &key),
            Touched::Stored(key) => a.stored(cluster, &key),
            Touched::Other => {}
        }
    }

    /// A completed (re-)list of one kind: what it lists replaces every object of that kind held
    /// (those it does not list are gone), loaded as [`Live::load`] loads objects. Only that kind
    /// is assembled again: a list of nodes converts nodes, never a pod.
    pub fn replace(
        &mut self,
        kind: &'static ApiKind,
        items: Vec<(ObjectRef, Value)>,
    ) -> Result<(), FieldError> {
        let gone = self.absent(kind, &items);
        let mut batch = Batch::default();
        for r in gone {
            self.cluster.remove_ref(&r);
            batch.note(&r, true);
        }
        self.load_into(items, batch)
    }

    /// Files many objects at once and brings the snapshot up to date with them kind by kind:
    /// nodes converted one by one, pods on all cores (every pod again when most of them changed,
    /// laid out afresh), each budget, priority class and gang object read once, gangs resolved
    /// once at the next refresh. An object listed at the `resourceVersion` already held is
    /// unchanged and not converted again. The first error is returned, with its item's index.
    pub fn load(&mut self, items: Vec<(ObjectRef, Value)>) -> Result<(), FieldError> {
        self.load_into(items, Batch::default())
    }

    fn load_into(&mut self, items: Vec<(ObjectRef, Value)>, mut batch: Batch) -> Result<(), FieldError> {
        let mut first_error = None;
        // With no pod held yet (the initial list), every pod is converted: no key is noted, and
        // the pods are filed in one go.
        batch.all_pods = self.cluster.pods.is_empty();
        let mut all_pods: Vec<(PodKey, Value)> = Vec::new();
        for (i, (r, v)) in items.into_iter().enumerate() {
            if r.name.is_empty() {
                let e = FieldError::new("metadata.name", format!("missing on {}", r.kind));
                first_error.get_or_insert(FieldError::new(format!("items[{i}].{}", e.path), e.message));
                continue;
            }
            let filed = r.filed();
            if self.cluster.holds(filed) && unchanged(self.cluster.held(&r), &v) {
                continue;
            }
            batch.note(&r, false);
            if batch.all_pods && filed == Filed::Pod {
                all_pods.push((super::into_pod_key(r), v));
            } else {
                let _ = self.cluster.insert(r, v);
            }
        }
        if !all_pods.is_empty() {
            // Built whole (in key order, later duplicates winning, as inserts would leave it):
            // not 140,000 inserts into an ordered map.
            self.cluster.pods = all_pods.into_iter().collect();
        }
        self.cluster.others.clear();
        let (cluster, a) = (&self.cluster, &mut self.assembly);
        for name in &batch.nodes {
            a.node(cluster, name);
        }
        let every_pod = batch.all_pods && batch.pods_changed > 0
            || batch.pods.len().saturating_mul(2) >= cluster.pods.len().max(1) && !batch.pods.is_empty();
        if batch.classes && a.read_priorities(cluster) || every_pod {
            a.all_pods(cluster);
            // Converted in one pass, in order: laid out already (see [`Assembly::compact`]).
            a.scattered = 0;
        } else if !batch.pods.is_empty() {
            a.some_pods(cluster, &batch.pods);
        }
        if batch.budgets {
            a.read_budgets(cluster);
        }
        if batch.namespaces {
            a.read_namespaces(cluster);
        }
        for key in &batch.stored {
            a.stored(cluster, key);
        }
        for key in &batch.gangs {
            a.gang_object(cluster, key);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The objects of `kind` held and not in `items`.
    fn absent(&self, kind: &'static ApiKind, items: &[(ObjectRef, Value)]) -> Vec<ObjectRef> {
        let c = &self.cluster;
        let of = ObjectRef::of_kind(kind, "", "");
        let filed = kind.filed();
        let held = match filed {
            Filed::Node => c.nodes.len(),
            Filed::Pod => c.pods.len(),
            Filed::Namespace => c.namespaces.len(),
            Filed::PriorityClass => c.priority_classes.len(),
            Filed::Budget => c.budgets.len(),
            Filed::Storage(kind) => c.stored(kind).count(),
            Filed::Other => c.gang_objects.len(),
        };
        if held == 0 {
            return Vec::new();
        }
        // Where each listed object is filed: (namespace as filed, name).
        let listed: HashSet<(&str, &str)> = items
            .iter()
            .map(|(r, _)| match filed {
                Filed::Pod | Filed::Budget => (r.pod_namespace(), r.name.as_str()),
                Filed::Storage(StoredKind::Pvc | StoredKind::ResourceClaim) => {
                    (r.pod_namespace(), r.name.as_str())
                }
                Filed::Other => (r.namespace.as_str(), r.name.as_str()),
                _ => ("", r.name.as_str()),
            })
            .collect();
        let named = |map: &BTreeMap<String, Value>| -> Vec<ObjectRef> {
            map.keys()
                .filter(|n| !listed.contains(&("", n.as_str())))
                .map(|n| ObjectRef::of_kind(kind, "", n.as_str()))
                .collect()
        };
        let keyed = |map: &BTreeMap<PodKey, Value>| -> Vec<ObjectRef> {
            map.keys()
                .filter(|k| !listed.contains(&(k.namespace.as_str(), k.name.as_str())))
                .map(|k| ObjectRef::of_kind(kind, k.namespace.as_str(), k.name.as_str()))
                .collect()
        };
        match filed {
            Filed::Node => named(&c.nodes),
            Filed::Namespace => named(&c.namespaces),
            Filed::PriorityClass => named(&c.priority_classes),
            Filed::Pod => keyed(&c.pods),
            Filed::Budget => keyed(&c.budgets),
            Filed::Storage(k) => c
                .stored(k)
                .filter(|(at, _)| !listed.contains(&(at.namespace.as_str(), at.name.as_str())))
                .map(|(at, _)| ObjectRef::of_kind(kind, at.namespace.as_str(), at.name.as_str()))
                .collect(),
            Filed::Other => c
                .gang_objects
                .keys()
                .filter(|g| g.is(&of) && !listed.contains(&(g.namespace.as_str(), g.name.as_str())))
                .map(|g| ObjectRef::of_kind(kind, g.namespace.as_str(), g.name.as_str()))
                .collect(),
        }
    }

    /// How many objects of `kind` are held.
    pub fn count(&self, kind: &ApiKind) -> usize {
        self.cluster.count(kind)
    }

    /// The raw pod with this key, if held.
    pub fn pod(&self, key: &PodKey) -> Option<&Value> {
        self.cluster.pods.get(key)
    }

    /// The raw object with this identity, if held.
    pub fn get_ref(&self, r: &ObjectRef) -> Option<&Value> {
        self.cluster.held(r)
    }

    /// What the assembly did so far.
    pub fn stats(&self) -> Stats {
        self.assembly.stats
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
        self.cluster.held(&ObjectRef::new(api_version, kind, namespace, name))
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
        dropped.extend(
            laid.nominated
                .iter()
                .filter(|(pod, node)| overlay.nominated.get(*pod) != Some(*node))
                .map(|(p, _)| p.clone()),
        );
        dropped.extend(
            laid.kept
                .iter()
                .filter(|(pod, (uid, rev))| {
                    overlay.kept.get(*pod).map(|(u, k)| (u, k.state.rev)) != Some((uid, *rev))
                })
                .map(|(p, _)| p.clone()),
        );
        for pod in dropped {
            laid.pods.remove(&pod);
            laid.gated.remove(&pod);
            laid.nominated.remove(&pod);
            laid.kept.remove(&pod);
            let before = cluster.pods.get(&pod).map(fingerprint);
            a.pod(cluster, &pod, before);
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
            // A gang object's uid tells it from a later one of the same name.
            if let Some((uid, state)) = overlay.carried.get(&g.key)
                && g.uid.as_ref() == Some(uid)
                && g.state != *state
            {
                let own = std::mem::replace(&mut g.state, state.clone());
                laid.gangs.insert(g.key.clone(), own);
            }
        }
        a.snapshot.reservations.clone_from(&overlay.reservations);
        for (pod, node) in &overlay.assumed {
            if let Some(&i) = a.pod_at.get(pod)
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
            if let Some(&i) = a.pod_at.get(pod)
                && let Some(p) = a.snapshot.pods.get_mut(i)
                && !p.scheduling_gates.contains(gate)
            {
                p.scheduling_gates.push(gate.clone());
                laid.gated.insert(pod.clone(), gate.clone());
            }
        }
        for (pod, node) in &overlay.nominated {
            if let Some(&i) = a.pod_at.get(pod)
                && let Some(p) = a.snapshot.pods.get_mut(i)
                && p.nominated_node.as_ref() != Some(node)
            {
                p.nominated_node = Some(node.clone());
                laid.nominated.insert(pod.clone(), node.clone());
            }
        }
        for (pod, (uid, kept)) in &overlay.kept {
            if let Some(&i) = a.pod_at.get(pod)
                && let Some(p) = a.snapshot.pods.get_mut(i)
                && p.uid == *uid
                && p.persisted.as_ref().is_none_or(|k| k.gang != kept.gang || k.state.rev < kept.state.rev)
            {
                p.persisted = Some(kept.clone());
                laid.kept.insert(pod.clone(), (uid.clone(), kept.state.rev));
            }
        }
    }
}
