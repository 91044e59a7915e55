//! The gang lookup: the gang objects of the cluster whose pods name a subgroup — kube-gang's `Gang`
//! (`kube-gang.io`), KAI-Scheduler's `PodGroup` (`scheduling.run.ai/v2alpha2`) and Grove's
//! `PodGang` (`scheduler.grove.io`), the kinds the core's table marks `lookup` — watched
//! read-only, so that admission can tell whether a pod's subgroup label names a leaf of its gang
//! ([`scheduler_core::admit_with`]). `kubectl gang validate` passes the gangs of its input files
//! instead; given the same gangs, the two doors decide the same. (The other dialects' pods name no
//! subgroup, or — Volcano's task annotation — one that need not be in the gang's tree: a task
//! without `minTaskMember` has no minimum.)
//!
//! The lookup never stands in the way of serving:
//!
//! - it starts empty, and `/readyz` does not wait for it: until the first list arrives (or when the
//!   API server cannot be reached, or a CRD is not installed), a gang is unknown, and a pod naming
//!   an unknown gang is allowed, as it is without the lookup (the gang may be created later);
//! - each watch runs on the async runtime, reconnecting with backoff; a decision takes the gangs
//!   its pod names out of the maps under a read lock, held only to share them (an `Arc` each), and
//!   copies them for the core after letting go;
//! - `--gang-lookup=false` turns it off (no watch, no RBAC needed).
//!
//! Memory: one [`Gang`] per gang object in the cluster (its key, minimums and subgroup tree), never
//! the object itself: each watched object is read into the model and dropped. What is held is
//! bounded, since the API server does not bound it for us — the Gang CRD caps subgroups at 64, but a
//! KAI PodGroup's `subGroups` has no `maxItems` (KAI-Scheduler
//! `pkg/apis/scheduling/v2alpha2/podgroup_types.go`) and a cluster may hold any number of gangs:
//! a gang with more than [`MAX_SUBGROUPS_HELD`] subgroups or weighing more than
//! [`MAX_GANG_WEIGHT`] ([`weight`]) is not held, and each watch holds at most [`MAX_HELD_WEIGHT`]
//! (about 25,000 ordinary gangs).
//!
//! That total is **shared between namespaces** (tenants), max-min fairly: when a gang does not fit,
//! gangs of the namespace holding the most are let go to make room, unless the newcomer's own
//! namespace would then hold the most itself — then the newcomer is not held. So one tenant's
//! Gangs can fill what no one else needs, never crowd another tenant's out (first come, first
//! served, they could). A gang not held is counted in `gang_webhook_gangs_not_held_total`, and its
//! namespace is marked as not wholly held until the next full list: a pod there naming a gang the
//! lookup does not hold is allowed *with a warning* that its subgroup was not checked, and by whom
//! it will be ([`scheduler_core::Gangs::not_held`]), rather than as quietly as a gang not created
//! yet.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt as _, watcher};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use scheduler_core::dialect::{self, GangKind, GangObject};
use scheduler_core::{Gang, GangKey, Gangs};
use serde_json::Value;

/// Subgroups a held gang may have: the rule book's limit (`validate::MAX_SUBGROUPS`, also the Gang
/// CRD's `maxItems`).
pub const MAX_SUBGROUPS_HELD: usize = scheduler_core::validate::MAX_SUBGROUPS;

/// The largest [`weight`] of one held gang: 64 subgroups with the longest valid names and
/// topology keys weigh about 40 KiB.
pub const MAX_GANG_WEIGHT: usize = 64 * 1024;

/// The [`weight`] of the gangs one watch holds together.
pub const MAX_HELD_WEIGHT: usize = 16 * 1024 * 1024;

/// About the bytes a held gang takes: a fixed part for the `Gang` itself and its map entry, plus
/// each subgroup, gang-group entry and resource, plus every string it holds.
pub fn weight(g: &Gang) -> usize {
    let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let subgroups: usize =
        g.subgroups.iter().map(|sg| 128 + sg.name.len() + opt(&sg.parent) + opt(&sg.topology_key)).sum();
    let group: usize = g.gang_group.iter().map(|k| 64 + k.namespace.len() + k.name.len()).sum();
    let resources = 64 * g.min_resources.iter().count();
    512 + g.key.namespace.len()
        + g.key.name.len()
        + opt(&g.topology_key)
        + opt(&g.exclusive_topology)
        + g.source.kind.len()
        + subgroups
        + group
        + resources
}

/// Why a gang is not held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotHeld {
    #[error("more than {MAX_SUBGROUPS_HELD} subgroups")]
    Subgroups,
    #[error("weighs more than {MAX_GANG_WEIGHT} bytes")]
    Weight,
    #[error("the lookup holds {MAX_HELD_WEIGHT} bytes of gangs already")]
    Full,
}

/// One namespace's part of a [`Map`].
#[derive(Debug, Default, Clone)]
struct Namespace {
    weight: usize,
    keys: BTreeSet<GangKey>,
}

/// The gangs of one watched kind, with their weights, and what each namespace holds.
#[derive(Debug, Default, Clone)]
struct Map {
    gangs: HashMap<GangKey, (Arc<Gang>, usize)>,
    weight: usize,
    namespaces: HashMap<String, Namespace>,
    /// Namespaces some gang of which is not held (since this map was listed), and how many.
    not_held: HashMap<String, u64>,
    /// The held weight this map may reach (tests set a small one).
    limit: Option<usize>,
}

impl Map {
    fn len(&self) -> usize {
        self.gangs.len()
    }

    fn get(&self, key: &GangKey) -> Option<&Arc<Gang>> {
        self.gangs.get(key).map(|(g, _)| g)
    }

    fn take(&mut self, key: &GangKey) -> bool {
        let Some((_, w)) = self.gangs.remove(key) else { return false };
        self.weight -= w;
        if let Some(ns) = self.namespaces.get_mut(key.namespace.as_str()) {
            ns.weight -= w;
            ns.keys.remove(key);
            if ns.keys.is_empty() {
                self.namespaces.remove(key.namespace.as_str());
            }
        }
        true
    }

    /// The namespace holding the most, and how much.
    fn largest(&self) -> Option<(&str, usize)> {
        self.namespaces
            .iter()
            .map(|(n, ns)| (n.as_str(), ns.weight))
            .max_by_key(|(n, w)| (*w, std::cmp::Reverse(*n)))
    }

    /// Holds `gang` under `key`, or forgets the key (`None`, or a gang over a limit: what was held
    /// before no longer describes the object). At the total limit, gangs of the namespace holding
    /// the most make room, unless `key`'s namespace would then hold the most itself. Returns the
    /// gangs let go for it (each already counted as not held).
    fn put(&mut self, key: GangKey, gang: Option<Gang>) -> Result<Vec<GangKey>, NotHeld> {
        self.take(&key);
        let Some(gang) = gang else { return Ok(Vec::new()) };
        let refused = |map: &mut Map, why: NotHeld| {
            *map.not_held.entry(key.namespace.to_string()).or_default() += 1;
            Err(why)
        };
        if gang.subgroups.len() > MAX_SUBGROUPS_HELD {
            return refused(self, NotHeld::Subgroups);
        }
        let w = weight(&gang);
        if w > MAX_GANG_WEIGHT {
            return refused(self, NotHeld::Weight);
        }
        let limit = self.limit.unwrap_or(MAX_HELD_WEIGHT);
        let mut let_go = Vec::new();
        while self.weight + w > limit {
            let own = self.namespaces.get(key.namespace.as_str()).map_or(0, |ns| ns.weight);
            let Some((largest, most)) = self.largest().map(|(n, w)| (n.to_string(), w)) else {
                return refused(self, NotHeld::Full);
            };
            if largest == key.namespace || own + w >= most {
                return refused(self, NotHeld::Full);
            }
            let Some(victim) = self.namespaces.get(&largest).and_then(|ns| ns.keys.last().cloned()) else {
                return refused(self, NotHeld::Full);
            };
            self.take(&victim);
            *self.not_held.entry(largest).or_default() += 1;
            let_go.push(victim);
        }
        let ns = self.namespaces.entry(key.namespace.to_string()).or_default();
        ns.weight += w;
        ns.keys.insert(key.clone());
        self.gangs.insert(key, (Arc::new(gang), w));
        self.weight += w;
        Ok(let_go)
    }

    fn remove(&mut self, key: &GangKey) {
        self.take(key);
    }
}

/// What the lookup reports: the gangs it holds, and those it did not for a limit.
#[derive(Clone, Debug, Default)]
pub struct LookupMetrics {
    pub held: Gauge,
    pub not_held: Counter,
}

/// What is watched: the gang kinds whose pods name a subgroup (`lookup` in the core's table of
/// gang kinds, `dialect::GANG_KINDS`: kube-gang's Gang, KAI's PodGroup, Grove's PodGang), each at
/// its preferred version and in a map of its own (objects of two kinds may share a name; the core
/// tells their pods apart by label), so that admission can refuse a pod on an inner subgroup.
pub fn watched() -> impl Iterator<Item = &'static GangKind> {
    scheduler_core::dialect::GANG_KINDS.iter().filter(|k| k.lookup)
}

/// The gangs admission may consult: none when the lookup is off.
#[derive(Clone, Debug, Default)]
pub struct GangLookup {
    known: Option<Arc<RwLock<Vec<Map>>>>,
}

impl Gangs for GangLookup {
    /// The gangs with `key`: shared under the read lock (an `Arc` each, nothing copied), copied
    /// after it is let go (the core takes them owned; each is bounded by [`MAX_GANG_WEIGHT`]).
    /// Admitting an object never holds the lock, so a watch event never waits for a decision, nor
    /// a decision for a watch event.
    fn find(&self, key: &GangKey) -> Vec<Cow<'_, Gang>> {
        let Some(known) = &self.known else { return Vec::new() };
        let shared: Vec<Arc<Gang>> = {
            let maps = known.read().unwrap_or_else(PoisonError::into_inner);
            maps.iter().filter_map(|m| m.get(key)).cloned().collect()
        };
        shared.into_iter().map(|g| Cow::Owned(Arc::unwrap_or_clone(g))).collect()
    }

    /// Some gang of `key`'s namespace is not held (a size limit, or its share of the lookup).
    fn not_held(&self, key: &GangKey) -> Option<String> {
        let known = self.known.as_ref()?;
        let maps = known.read().unwrap_or_else(PoisonError::into_inner);
        let n: u64 = maps.iter().filter_map(|m| m.not_held.get(key.namespace.as_str())).sum();
        (n > 0).then(|| {
            format!(
                "the webhook's gang lookup does not hold {n} gang(s) of namespace {} (over a size limit, or past the namespace's share of the lookup), and may not hold this one",
                key.namespace
            )
        })
    }
}

impl GangLookup {
    /// No lookup: every gang is unknown to admission.
    pub fn off() -> Self {
        GangLookup::default()
    }

    /// Whether gangs are looked up.
    pub fn is_on(&self) -> bool {
        self.known.is_some()
    }

    /// Starts watching every namespace's gang objects ([`watched`]) with `client`, on the current
    /// runtime; `metrics.held` is set to the number of gangs known after each change. The tasks end
    /// when the runtime does, or when the handles are aborted.
    pub fn watch(client: kube::Client, metrics: LookupMetrics) -> (Self, Vec<tokio::task::JoinHandle<()>>) {
        let known = Arc::new(RwLock::new(vec![Map::default(); watched().count()]));
        let tasks = (0..watched().count())
            .map(|at| tokio::spawn(pump(client.clone(), at, known.clone(), metrics.clone())))
            .collect();
        (GangLookup { known: Some(known) }, tasks)
    }

    /// The gangs known now (for tests and logs).
    pub fn len(&self) -> usize {
        self.known.as_ref().map_or(0, |k| total(&k.read().unwrap_or_else(PoisonError::into_inner)))
    }

    /// Whether no gang is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn total(maps: &[Map]) -> usize {
    maps.iter().map(Map::len).sum()
}

/// One of [`watched`], as the API server serves it (at its preferred version).
fn resource(at: usize) -> Option<ApiResource> {
    let k = watched().nth(at)?;
    let version = k.versions.first()?;
    Some(ApiResource {
        group: k.group.into(),
        version: (*version).into(),
        api_version: format!("{}/{version}", k.group),
        kind: k.kind.into(),
        plural: k.plural.into(),
    })
}

/// The object's key, and the gang it defines (`None` when it does not read as one: then admission
/// treats its gang as unknown; a Gang was refused at its own admission by our validating hook, a
/// peer's object is its project's to validate).
fn project(object: DynamicObject, r: &ApiResource) -> Option<(GangKey, Option<Gang>)> {
    let key = GangKey::new(object.metadata.namespace.clone()?, object.metadata.name.clone()?);
    let mut value = serde_json::to_value(object).ok()?;
    let map = value.as_object_mut()?;
    // List items come without their type; managed fields are never read.
    map.insert("apiVersion".into(), Value::String(r.api_version.clone()));
    map.insert("kind".into(), Value::String(r.kind.clone()));
    if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    let gang = match dialect::read_object(&value) {
        Some(Ok(GangObject::Gang(g))) if g.key == key => Some(g),
        _ => None,
    };
    Some((key, gang))
}

/// [`Map::put`], counting and logging the gangs not held.
fn put(map: &mut Map, key: GangKey, gang: Option<Gang>, not_held: &Counter) {
    let note = |key: &GangKey, why: &dyn std::fmt::Display| {
        if not_held.inc() == 0 {
            tracing::warn!(gang = %key, reason = %why, "gang lookup: a gang not held (its pods are admitted with a warning that they were not checked against it); more are counted in gang_webhook_gangs_not_held_total");
        } else {
            tracing::debug!(gang = %key, reason = %why, "gang lookup: a gang not held");
        }
    };
    match map.put(key.clone(), gang) {
        Ok(let_go) => {
            for k in &let_go {
                note(k, &"let go for another namespace's gang: its namespace held the most");
            }
        }
        Err(why) => note(&key, &why),
    }
}

async fn pump(client: kube::Client, at: usize, known: Arc<RwLock<Vec<Map>>>, metrics: LookupMetrics) {
    let (held, not_held) = (metrics.held, metrics.not_held);
    let Some(r) = resource(at) else { return };
    let api: Api<DynamicObject> = Api::all_with(client, &r);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    // A (re-)list builds a map of its own, swapped in whole when it completes: until then the old
    // one answers, and objects deleted while the watch was down go with the swap.
    let mut listing = Map::default();
    let mut errors = 0u64;
    let write = |f: &mut dyn FnMut(&mut Map)| {
        let mut maps = known.write().unwrap_or_else(PoisonError::into_inner);
        f(&mut maps[at]);
        held.set(i64::try_from(total(&maps)).unwrap_or(i64::MAX));
    };
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => listing = Map::default(),
            Ok(watcher::Event::InitApply(o)) => {
                if let Some((key, gang)) = project(o, &r) {
                    put(&mut listing, key, gang, &not_held);
                }
            }
            Ok(watcher::Event::InitDone) => {
                let mut listed = std::mem::take(&mut listing);
                let count = listed.len();
                write(&mut |map| std::mem::swap(map, &mut listed));
                tracing::info!(resource = %r.api_version, kind = %r.kind, count, "gang lookup: listed");
                errors = 0;
            }
            Ok(watcher::Event::Apply(o)) => {
                if let Some(entry) = project(o, &r) {
                    let mut entry = Some(entry);
                    write(&mut |map| {
                        if let Some((key, gang)) = entry.take() {
                            put(map, key, gang, &not_held);
                        }
                    });
                }
            }
            Ok(watcher::Event::Delete(o)) => {
                if let Some((key, _)) = project(o, &r) {
                    write(&mut |map| map.remove(&key));
                }
            }
            Err(e) => {
                // The backoff spaces these out; log the first of a run, then every 10th. A CRD
                // that is not installed is one such run (404).
                if errors.is_multiple_of(10) {
                    tracing::warn!(resource = %r.api_version, kind = %r.kind, error = %e, "gang lookup: watch failed; retrying (its gangs are unknown, so allowed, meanwhile)");
                }
                errors += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gang_object(name: &str, subgroups: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
            "metadata": {"name": name, "namespace": "ml", "managedFields": [{"manager": "kubectl"}]},
            "spec": {"minMember": 1, "subGroups": subgroups}
        }))
        .unwrap()
    }

    #[test]
    fn a_gang_object_is_kept_as_its_model_and_an_unreadable_one_as_unknown() {
        let tree = json!([{"name": "workers", "minMember": 1},
                          {"name": "a", "parent": "workers", "minMember": 2}]);
        let (key, gang) = project(gang_object("train", tree), &resource(0).unwrap()).unwrap();
        assert_eq!(key, GangKey::new("ml", "train"));
        let gang = gang.expect("a Gang reads as a gang");
        assert_eq!(gang.subgroups.len(), 2);

        // A minMember that is no number does not read: not a gang admission can lean on.
        let mut bad = gang_object("bad", json!([]));
        bad.data["spec"]["minMember"] = json!("two");
        let (key, gang) = project(bad, &resource(0).unwrap()).unwrap();
        assert_eq!(key, GangKey::new("ml", "bad"));
        assert!(gang.is_none());

        let (_, good) = project(gang_object("bad", json!([])), &resource(0).unwrap()).unwrap();
        let mut map = Map::default();
        let not_held = Counter::default();
        put(&mut map, GangKey::new("ml", "bad"), good, &not_held);
        assert_eq!(map.len(), 1);
        put(&mut map, key, None, &not_held);
        assert_eq!((map.len(), map.weight), (0, 0), "an unreadable update forgets the gang it replaced");
        assert_eq!(not_held.get(), 0);
    }

    /// A KAI PodGroup with `n` subgroups under one root subgroup, as the watch lists it.
    fn kai_podgroup(name: &str, n: usize) -> DynamicObject {
        let mut subgroups = vec![json!({"name": "root", "minMember": 1})];
        subgroups.extend(
            (0..n.saturating_sub(1))
                .map(|i| json!({"name": format!("leaf-{i}"), "parent": "root", "minMember": 1})),
        );
        serde_json::from_value(json!({
            "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"minMember": 1, "subGroups": subgroups}
        }))
        .unwrap()
    }

    #[test]
    fn what_the_lookup_holds_is_bounded_per_gang_and_in_total() {
        let not_held = Counter::default();
        let mut map = Map::default();
        // KAI's CRD does not bound subGroups; past the rule book's limit the gang is not held,
        // and a version over it forgets the one held before.
        let (key, within) = project(kai_podgroup("wide", MAX_SUBGROUPS_HELD), &resource(1).unwrap()).unwrap();
        assert_eq!(within.as_ref().map(|g| g.subgroups.len()), Some(MAX_SUBGROUPS_HELD));
        put(&mut map, key.clone(), within, &not_held);
        assert_eq!(map.len(), 1);
        let (_, over) = project(kai_podgroup("wide", MAX_SUBGROUPS_HELD + 1), &resource(1).unwrap()).unwrap();
        assert!(over.is_some(), "the core reads it (and its own rules deny it at admission)");
        put(&mut map, key, over, &not_held);
        assert_eq!((map.len(), map.weight, not_held.get()), (0, 0, 1));
        // One gang's weight: a 64-subgroup tree with long names fits.
        let (_, big) =
            project(kai_podgroup(&"n".repeat(253), MAX_SUBGROUPS_HELD), &resource(1).unwrap()).unwrap();
        assert!(weight(&big.unwrap()) < MAX_GANG_WEIGHT);
        // In total: gangs beyond the map's limit are not held; forgetting one makes room.
        let gang =
            |i: usize| project(gang_object(&format!("g{i}"), json!([])), &resource(0).unwrap()).unwrap();
        let one = weight(gang(0).1.as_ref().unwrap());
        let mut map = Map { limit: Some(3 * one), ..Map::default() };
        for i in 0..5 {
            let (key, g) = gang(i);
            put(&mut map, key, g, &not_held);
        }
        assert_eq!((map.len(), map.weight, not_held.get()), (3, 3 * one, 3));
        map.remove(&GangKey::new("ml", "g0"));
        let (key, g) = gang(4);
        put(&mut map, key, g, &not_held);
        assert_eq!((map.len(), not_held.get()), (3, 3));
        assert!(map.get(&GangKey::new("ml", "g4")).is_some());
    }

    /// A gang of `ns` with no subgroups, as the watch lists it.
    fn gang_in(ns: &str, name: &str) -> (GangKey, Option<Gang>) {
        let mut o = gang_object(name, json!([]));
        o.metadata.namespace = Some(ns.into());
        project(o, &resource(0).unwrap()).unwrap()
    }

    /// Issue 32: the lookup kept 16 MiB first come, first served, so one tenant's Gangs could
    /// crowd out another's. Now the namespace holding the most makes room, until the newcomer's
    /// would hold the most itself; what is let go is known as not held.
    #[test]
    fn the_lookup_is_shared_between_namespaces_and_knows_what_it_let_go() {
        let not_held = Counter::default();
        let one = weight(gang_in("a", "g0").1.as_ref().unwrap());
        let mut map = Map { limit: Some(4 * one), ..Map::default() };
        // Tenant a fills the lookup.
        for i in 0..6 {
            let (key, g) = gang_in("a", &format!("g{i}"));
            put(&mut map, key, g, &not_held);
        }
        assert_eq!((map.len(), not_held.get()), (4, 2), "first come, while no one else asks");
        // Tenant b's gangs are held, a's letting go, until both hold the same.
        for i in 0..3 {
            let (key, g) = gang_in("b", &format!("g{i}"));
            put(&mut map, key, g, &not_held);
        }
        let held = |ns: &str| map.namespaces.get(ns).map_or(0, |n| n.keys.len());
        assert_eq!((held("a"), held("b")), (2, 2));
        assert_eq!(not_held.get(), 2 + 2 + 1, "two of a's let go, b's third refused");
        assert!(map.get(&GangKey::new("b", "g0")).is_some() && map.get(&GangKey::new("b", "g1")).is_some());
        // Both namespaces are known to be partly held; one that lost nothing is not.
        let on = GangLookup { known: Some(Arc::new(RwLock::new(vec![map, Map::default()]))) };
        let why = on.not_held(&GangKey::new("a", "g5")).expect("a's gangs were let go");
        assert!(why.contains("namespace a"), "{why}");
        assert!(on.not_held(&GangKey::new("b", "g2")).is_some());
        assert_eq!(on.not_held(&GangKey::new("c", "x")), None);
        assert_eq!(GangLookup::off().not_held(&GangKey::new("a", "g5")), None);
    }

    #[test]
    fn off_knows_no_gang_and_on_answers_from_the_map() {
        let off = GangLookup::off();
        assert!(!off.is_on());
        let key = GangKey::new("ml", "train");
        assert_eq!(off.find(&key).len(), 0);

        let (_, gang) = project(gang_object("train", json!([])), &resource(0).unwrap()).unwrap();
        let mut held = Map::default();
        held.put(key.clone(), gang).unwrap();
        assert!(held.not_held.is_empty());
        let shared = held.get(&key).unwrap().clone();
        let known = Arc::new(RwLock::new(vec![held, Map::default()]));
        let on = GangLookup { known: Some(known) };
        assert!(on.is_on());
        assert_eq!(on.len(), 1);
        let found = on.find(&key);
        assert_eq!(found.len(), 1);
        assert_eq!(*found[0], *shared);
        // The lookup shared the gang under its lock and copied it after: nothing of it is kept.
        assert_eq!(Arc::strong_count(&shared), 2, "the map's and this test's");
        assert_eq!(on.find(&GangKey::new("ml", "other")).len(), 0);
    }
}
