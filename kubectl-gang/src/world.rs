//! What a command reads: the cluster, from a dump (`--cluster`) or the live API, its events and
//! ProvisioningRequests, the namespace and the time commands evaluate against, and the policy
//! file.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use scheduler_core::Time;
use scheduler_core::cluster::{Cluster, Compact};
use scheduler_core::object::ObjectRef;
use serde_json::Value;

use crate::cli::Global;
use crate::{input, live};

/// The cluster a command reads, from a dump (`--cluster`) or the live API, and the namespace
/// commands default to.
#[derive(Debug)]
pub struct World {
    /// Held as compact JSON: a decoded object of small maps costs ten to fifty times its text.
    pub cluster: Cluster<Compact>,
    /// `-n`, else the kubeconfig context's namespace, else `default`.
    pub namespace: String,
    pub now: Time,
    /// Events read from the dump or the API, for detail views.
    pub events: Vec<Compact>,
    /// ProvisioningRequests read from the dump or the API (a gang's capacity request).
    pub requests: Vec<Value>,
    /// Warnings met while reading (objects that could not be stored), the first
    /// [`UNREADABLE_SHOWN`] of them and a count of the rest.
    pub warnings: Vec<String>,
    /// Objects of kinds nothing here reads (a dump of a whole namespace's `Service`s,
    /// `ConfigMap`s, …), counted by kind: left out, and said so in one warning.
    pub unread: BTreeMap<String, usize>,
}

/// `skipped 5 objects nothing here reads: 3 ConfigMap, 2 Service`, or nothing when none were.
fn unread_line(unread: &BTreeMap<String, usize>) -> Option<String> {
    let total: usize = unread.values().sum();
    if total == 0 {
        return None;
    }
    let mut kinds: Vec<(&String, &usize)> = unread.iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let each: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    Some(format!("skipped {total} object(s) nothing here reads: {}", each.join(", ")))
}

/// `--now`, or the clock.
pub fn now(g: &Global) -> anyhow::Result<Time> {
    match &g.now {
        Some(s) => Time::parse_rfc3339(s).map_err(|e| anyhow::anyhow!("--now: {e}")),
        None => Ok(Time(jiff::Timestamp::now().as_millisecond())),
    }
}

/// The scheduling policy at `path` (the scheduler's `--config` file; defaults when `None`): read
/// here, its text read by the core's `Config::from_policy_text`, as `gang-scheduler` does.
pub fn policy(path: Option<&Path>) -> anyhow::Result<scheduler_core::Config> {
    let Some(p) = path else { return Ok(scheduler_core::Config::default()) };
    let text = std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
    scheduler_core::Config::from_policy_text(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
}

/// Reads the world the global flags point at; with `events_for` (a gang, `name` or `ns/name`), also
/// the live events of that gang's namespace (a dump brings its own).
pub fn load(g: &Global, events_for: Option<&str>) -> anyhow::Result<World> {
    let now = now(g)?;
    let mut world = World {
        cluster: Cluster::compact(),
        namespace: String::new(),
        now,
        events: Vec::new(),
        requests: Vec::new(),
        warnings: Vec::new(),
        unread: BTreeMap::new(),
    };
    let mut skipped = 0;
    let context_ns = match &g.cluster {
        Some(path) => {
            // Decoded and stored one object at a time: memory stays proportional to the dump.
            let objects = input::read(std::slice::from_ref(path))?;
            // The first unreadable objects, and how many there are.
            let (mut bad, mut unreadable) = (Vec::new(), 0);
            for s in objects.iter() {
                if let Some(e) = self::unreadable(&s.object) {
                    unreadable += 1;
                    if bad.len() < UNREADABLE_SHOWN {
                        bad.push(format!("{}: {e}", scheduler_core::cluster::describe(&s.object)));
                    }
                } else if unreadable == 0 {
                    world.add(s.object, &mut skipped);
                }
            }
            check_dump(path, &bad, unreadable)?;
            None
        }
        None => {
            let rt = runtime()?;
            let (objects, ns) = rt.block_on(async {
                let live = live::connect(g.kubeconfig.as_deref(), g.context.as_deref()).await?;
                let mut objects = live::fetch(&live).await?;
                if let Some(gang) = events_for {
                    let ns = match gang.split_once('/') {
                        Some((ns, _)) => ns,
                        None => g.namespace.as_deref().unwrap_or(&live.namespace),
                    };
                    objects.extend(live::events(&live, ns).await?);
                }
                anyhow::Ok((objects, live.namespace))
            })?;
            for o in objects {
                world.add(o.decode(), &mut skipped);
            }
            Some(ns)
        }
    };
    if skipped > UNREADABLE_SHOWN {
        world.warnings.push(format!("… and {} more objects skipped", skipped - UNREADABLE_SHOWN));
    }
    if let Some(line) = unread_line(&world.unread) {
        world.warnings.push(line);
    }
    world.namespace = g.namespace.clone().or(context_ns).unwrap_or_else(|| "default".to_string());
    Ok(world)
}

impl World {
    /// Stores one object read from the dump or the API: an event or a ProvisioningRequest aside,
    /// anything else in the cluster, or a warning saying why not (the first [`UNREADABLE_SHOWN`]
    /// of them; `skipped` counts them all).
    fn add(&mut self, mut o: Value, skipped: &mut usize) {
        // What `kubectl get -o yaml` prints in bulk and nothing here reads.
        if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        match o.get("kind").and_then(Value::as_str) {
            Some("Event") => {
                self.events.push(Compact::new(&o));
                return;
            }
            Some("ProvisioningRequest") => {
                self.requests.push(o);
                return;
            }
            _ => {}
        }
        let what = scheduler_core::cluster::describe(&o);
        let identity = ObjectRef::of(&o);
        let listed = o.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"));
        if !listed && !identity.kind.is_empty() && !scheduler_core::cluster::reads(&identity) {
            *self.unread.entry(identity.kind.into_owned()).or_default() += 1;
            return;
        }
        if let Err(e) = self.cluster.push(o) {
            *skipped += 1;
            if *skipped <= UNREADABLE_SHOWN {
                self.warnings.push(format!("skipped {what}: {e}"));
            }
        }
    }
}

/// Unreadable nodes and pods listed at most this many at a time.
const UNREADABLE_SHOWN: usize = 20;

/// A dump is input: a Node or Pod in it the scheduler cannot read (an invalid quantity, a field of
/// the wrong type) is an error naming the object and the field (`bad`), not an object quietly
/// dropped. (The live API never serves one: the API server validates and canonicalizes on write.)
fn check_dump(path: &Path, bad: &[String], count: usize) -> anyhow::Result<()> {
    if bad.is_empty() {
        return Ok(());
    }
    let mut text = format!("{}: the cluster dump is invalid:", path.display());
    for line in bad {
        text.push_str("\n  ");
        text.push_str(line);
    }
    if count > bad.len() {
        text.push_str(&format!("\n  … and {} more", count - bad.len()));
    }
    anyhow::bail!(text)
}

/// A current-thread runtime for the live API.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")
}

pub use scheduler_core::prepare::unreadable;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;

    /// A dump of many objects that cannot be stored warns of the first ones and counts the rest.
    #[test]
    fn objects_skipped_are_warned_of_twenty_at_a_time_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.yaml");
        let mut text = String::from(
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '8'}}\n",
        );
        for i in 0..25 {
            text.push_str(&format!(
                "---\napiVersion: kube-gang.io/v1alpha1\nkind: Gang\nmetadata: {{namespace: ns{i}}}\n"
            ));
        }
        // Kinds nothing reads are counted by kind, in one line.
        text.push_str("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ml}\n");
        text.push_str("---\napiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: ml}\n");
        text.push_str("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: d, namespace: ml}\n");
        std::fs::write(&path, text).unwrap();
        let cli = <Cli as clap::Parser>::parse_from([
            "kubectl-gang",
            "status",
            "--cluster",
            path.to_str().unwrap(),
        ]);
        let world = load(&cli.global, None).unwrap();
        assert_eq!(world.warnings.len(), UNREADABLE_SHOWN + 2, "{:#?}", world.warnings);
        assert_eq!(world.warnings[0], "skipped Gang ns0/: metadata.name: missing on Gang");
        assert_eq!(world.warnings[UNREADABLE_SHOWN], "… and 5 more objects skipped");
        assert_eq!(
            world.warnings[UNREADABLE_SHOWN + 1],
            "skipped 3 object(s) nothing here reads: 2 ConfigMap, 1 Service"
        );
        assert_eq!(world.cluster.count(&scheduler_core::cluster::NODE), 1);
    }
}
