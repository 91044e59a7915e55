//! The gang lookup: the gang objects of the cluster whose pods name a subgroup — kube-gang's `Gang`
//! (`kube-gang.io`) and KAI-Scheduler's `PodGroup` (`scheduling.run.ai/v2alpha2`) — watched
//! read-only, so that admission can tell whether a pod's subgroup label names a leaf of its gang
//! ([`scheduler_core::admit_with`]). `kubectl gang validate` passes the gangs of its input files
//! instead; given the same gangs, the two doors decide the same. (The other dialects have no
//! subgroup label for a pod to get wrong.)
//!
//! The lookup never stands in the way of serving:
//!
//! - it starts empty, and `/readyz` does not wait for it: until the first list arrives (or when the
//!   API server cannot be reached, or a CRD is not installed), a gang is unknown, and a pod naming
//!   an unknown gang is allowed, as it is without the lookup (the gang may be created later);
//! - each watch runs on the async runtime, reconnecting with backoff; a decision copies the gangs
//!   its pod names out of the maps under a read lock, held for the copy only;
//! - `--gang-lookup=false` turns it off (no watch, no RBAC needed).
//!
//! Memory: one [`Gang`] per gang object in the cluster (its key, minimums and subgroup tree, which
//! the Gang CRD caps at 64 subgroups), never the object itself: each watched object is read into
//! the model and dropped.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt as _, watcher};
use prometheus_client::metrics::gauge::Gauge;
use scheduler_core::dialect::{self, GangObject};
use scheduler_core::{Gang, GangKey, Gangs};
use serde_json::Value;

type Map = HashMap<GangKey, Gang>;

/// What is watched: `(apiVersion, kind, plural)`, each a map of its own (a Gang and a KAI PodGroup
/// may share a name; the core tells their pods apart by label).
pub const WATCHED: [(&str, &str, &str); 2] =
    [("kube-gang.io/v1alpha1", "Gang", "gangs"), ("scheduling.run.ai/v2alpha2", "PodGroup", "podgroups")];

/// The gangs admission may consult: none when the lookup is off.
#[derive(Clone, Debug, Default)]
pub struct GangLookup {
    known: Option<Arc<RwLock<Vec<Map>>>>,
}

impl Gangs for GangLookup {
    /// Copies of the gangs with `key`, the lock held only while they are copied (a Gang is its
    /// key, minimums and at most 64 subgroups): admitting a large object never holds it, so a
    /// watch event never waits for a decision, nor a decision for a watch event.
    fn find(&self, key: &GangKey) -> Vec<Cow<'_, Gang>> {
        let Some(known) = &self.known else { return Vec::new() };
        let maps = known.read().unwrap_or_else(PoisonError::into_inner);
        maps.iter().filter_map(|m| m.get(key)).map(|g| Cow::Owned(g.clone())).collect()
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

    /// Starts watching every namespace's gang objects ([`WATCHED`]) with `client`, on the current
    /// runtime; `held` is set to the number of gangs known after each change. The tasks end when
    /// the runtime does, or when the handles are aborted.
    pub fn watch(client: kube::Client, held: Gauge) -> (Self, Vec<tokio::task::JoinHandle<()>>) {
        let known = Arc::new(RwLock::new(vec![Map::new(); WATCHED.len()]));
        let tasks = (0..WATCHED.len())
            .map(|at| tokio::spawn(pump(client.clone(), at, known.clone(), held.clone())))
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
    maps.iter().map(HashMap::len).sum()
}

/// One of [`WATCHED`], as the API server serves it.
fn resource(at: usize) -> ApiResource {
    let (api_version, kind, plural) = WATCHED[at];
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The object's key, and the gang it defines (`None` when it does not read as one: then admission
/// treats its gang as unknown, and the validating hook has already refused it at its own admission).
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

fn put(map: &mut Map, key: GangKey, gang: Option<Gang>) {
    match gang {
        Some(g) => {
            map.insert(key, g);
        }
        None => {
            map.remove(&key);
        }
    }
}

async fn pump(client: kube::Client, at: usize, known: Arc<RwLock<Vec<Map>>>, held: Gauge) {
    let r = resource(at);
    let api: Api<DynamicObject> = Api::all_with(client, &r);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    // A (re-)list builds a map of its own, swapped in whole when it completes: until then the old
    // one answers, and objects deleted while the watch was down go with the swap.
    let mut listing = Map::new();
    let mut errors = 0u64;
    let write = |f: &mut dyn FnMut(&mut Map)| {
        let mut maps = known.write().unwrap_or_else(PoisonError::into_inner);
        f(&mut maps[at]);
        held.set(i64::try_from(total(&maps)).unwrap_or(i64::MAX));
    };
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => listing.clear(),
            Ok(watcher::Event::InitApply(o)) => {
                if let Some((key, gang)) = project(o, &r) {
                    put(&mut listing, key, gang);
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
                            put(map, key, gang);
                        }
                    });
                }
            }
            Ok(watcher::Event::Delete(o)) => {
                if let Some((key, _)) = project(o, &r) {
                    write(&mut |map| {
                        map.remove(&key);
                    });
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
        let (key, gang) = project(gang_object("train", tree), &resource(0)).unwrap();
        assert_eq!(key, GangKey::new("ml", "train"));
        let gang = gang.expect("a Gang reads as a gang");
        assert_eq!(gang.subgroups.len(), 2);

        // A minMember that is no number does not read: not a gang admission can lean on.
        let mut bad = gang_object("bad", json!([]));
        bad.data["spec"]["minMember"] = json!("two");
        let (key, gang) = project(bad, &resource(0)).unwrap();
        assert_eq!(key, GangKey::new("ml", "bad"));
        assert!(gang.is_none());

        let (_, good) = project(gang_object("bad", json!([])), &resource(0)).unwrap();
        let mut map = Map::new();
        put(&mut map, GangKey::new("ml", "bad"), good);
        assert_eq!(map.len(), 1);
        put(&mut map, key, None);
        assert!(map.is_empty(), "an unreadable update forgets the gang it replaced");
    }

    #[test]
    fn off_knows_no_gang_and_on_answers_from_the_map() {
        let off = GangLookup::off();
        assert!(!off.is_on());
        let key = GangKey::new("ml", "train");
        assert_eq!(off.find(&key).len(), 0);

        let (_, gang) = project(gang_object("train", json!([])), &resource(0)).unwrap();
        let known = Arc::new(RwLock::new(vec![Map::from([(key.clone(), gang.unwrap())]), Map::new()]));
        let on = GangLookup { known: Some(known) };
        assert!(on.is_on());
        assert_eq!(on.len(), 1);
        assert_eq!(on.find(&key).len(), 1);
        assert_eq!(on.find(&GangKey::new("ml", "other")).len(), 0);
    }
}
