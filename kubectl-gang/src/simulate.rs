//! `kubectl gang simulate -f FILE…`: expand workloads into the pods their controllers would create
//! (the webhook's injection applied), add them to the cluster as it is, and run the scheduler's own
//! cycle once.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use scheduler_core::cluster::{Cluster, Held, describe};
use scheduler_core::model::GangKey;
use scheduler_core::object::ObjectRef;
use scheduler_core::plan::Reason;
pub use scheduler_core::prepare::{Prepared, SHOWN, prepare, prepare_bounded};
use scheduler_core::{Config, Time, schedule, workload};
use serde::Serialize;
use serde_json::{Value, json};

use crate::cli::{Format, Global, SimulateArgs};
use crate::input;
use crate::output::Output;
use crate::table::{Grid, Tone, color_enabled};
use crate::text::escape_controls;
use crate::world::load;

/// A pod and a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Place {
    /// `namespace/name`.
    pub pod: String,
    pub node: String,
}

/// A member already on a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OnNode {
    /// `namespace/name`.
    pub pod: String,
    pub node: String,
    /// `bound` (a scheduler bound it, or it runs), or `pinned` (created with `spec.nodeName`:
    /// no scheduler places it; the kubelet of that node admits it or not).
    pub how: &'static str,
}

/// A pod the gang would preempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Victim {
    /// `namespace/name`.
    pub pod: String,
    pub node: String,
    /// The PodDisruptionBudget (`namespace/name`) its eviction would violate: chosen only when no
    /// set of victims within the budgets makes room, and refused by the Eviction API until the
    /// budget allows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub violates: Option<String>,
}

/// One simulated gang, as `-o json` prints it (a contract: fields are only ever added).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GangResult {
    pub namespace: String,
    pub name: String,
    pub schedulable: bool,
    pub reason: String,
    pub message: String,
    pub placements: Vec<Place>,
    /// Members already on a node: bound, or created with `spec.nodeName` (pinned), each with its
    /// node — they count toward the gang and are not placed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub on_nodes: Vec<OnNode>,
    pub preemptions: Vec<Victim>,
    /// Claims bound before the members (reason `WaitingForVolumes`): to a static PV, or
    /// provisioned for the member's node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<ClaimPlace>,
    /// DRA claims allocated and reserved before the members (reason `WaitingForDevices`): each
    /// member's claims, with the devices chosen for them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DevicePlace>,
    /// What the gang would ask the cluster autoscaler for (policy `provisioning`): node shapes ×
    /// counts, from the core's `provision::asks`, the function the scheduler writes requests from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<Ask>,
    /// What `-o name` prints, as kubectl would (`podgroup.scheduling.volcano.sh/x`).
    #[serde(skip)]
    pub object: String,
    /// The levels `--map` draws it by ([`crate::map::levels`]).
    #[serde(skip)]
    pub levels: Vec<String>,
}

/// A claim bound before its member is: to `volume`, or (none) provisioned for `node`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClaimPlace {
    pub claim: String,
    pub node: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
}

/// A DRA claim allocated (or, with no devices, only reserved) for a member before it is bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DevicePlace {
    pub claim: String,
    pub pod: String,
    pub node: String,
    /// `driver/pool/device` (`request` first when it names a subrequest); empty: allocated
    /// already, the member added to its `reservedFor`.
    pub devices: Vec<String>,
}

/// One ProvisioningRequest the gang would write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ask {
    /// `spec.provisioningClassName`.
    pub class: String,
    /// `spec.podSets`, one per shape.
    pub pod_sets: Vec<AskedPods>,
}

/// `count` pods of one shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AskedPods {
    pub count: u32,
    /// Requests per pod, in the scheduler's units (`nvidia.com/gpu 8, cpu 32`).
    pub requests: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// The members asked for (`namespace/name`).
    pub pods: Vec<String>,
}

impl Ask {
    fn of(ask: &scheduler_core::plan::ProvisioningAsk) -> Self {
        Ask {
            class: ask.class.clone(),
            pod_sets: ask
                .pod_sets
                .iter()
                .map(|s| AskedPods {
                    count: s.count,
                    requests: s.shape.requests.to_string(),
                    node_selector: s.shape.node_selector.clone(),
                    pods: s.pods.iter().map(ToString::to_string).collect(),
                })
                .collect(),
        }
    }
}

/// The result of one simulation.
#[derive(Clone, Debug, Default)]
pub struct Simulation {
    pub gangs: Vec<GangResult>,
    pub warnings: Vec<String>,
    /// The cluster's nodes, for `--map` (kept only when asked: [`simulate_kept`]).
    pub nodes: Vec<scheduler_core::model::Node>,
}

/// Adds `prepared` to `cluster` and runs one cycle (on copies of both: see [`simulate_owned`]).
pub fn simulate<H: Held>(
    cluster: &Cluster<H>,
    prepared: &Prepared,
    config: &Config,
    now: Time,
) -> Simulation {
    simulate_owned(cluster.clone(), prepared.clone(), config, now)
}

/// [`simulate`], moving `prepared`'s objects into `cluster` rather than copying them: what the
/// command runs, so that the input is held once.
pub fn simulate_owned<H: Held>(
    cluster: Cluster<H>,
    prepared: Prepared,
    config: &Config,
    now: Time,
) -> Simulation {
    simulate_kept(cluster, prepared, config, now, false)
}

/// [`simulate_owned`], keeping the cluster's nodes in the result when `nodes` (for `--map`).
pub fn simulate_kept<H: Held>(
    mut cluster: Cluster<H>,
    prepared: Prepared,
    config: &Config,
    now: Time,
    nodes: bool,
) -> Simulation {
    let mut sim = Simulation::default();
    // Upstream PodGroups are reported by key after assembly (`PodGroup ns/name`).
    let ours: HashSet<String> = prepared
        .objects
        .iter()
        .map(|o| describe(&o.decode()))
        .chain(prepared.gang_objects.iter().map(|k| format!("PodGroup {k}")))
        .collect();
    let Prepared { objects, pods, gang_objects, .. } = prepared;
    // The claims controllers make for the pods — a StatefulSet's (expanded with them), the
    // ephemeral volume controller's — unless the cluster has them already.
    let mut claims = Vec::new();
    // ResourceClaimTemplates (input only: the cluster view does not hold them), for the claims
    // the resourceclaim controller makes from them; the other objects decoded one at a time.
    let templates: BTreeMap<(String, String), Value> = objects
        .iter()
        .filter(|o| o.mentions("\"ResourceClaimTemplate\""))
        .map(|o| o.decode())
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some("ResourceClaimTemplate"))
        .map(|o| {
            let at = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
            ((at("/metadata/namespace"), at("/metadata/name")), o.clone())
        })
        .collect();
    for o in objects {
        let mut o = o.decode();
        let what = describe(&o);
        if o.get("kind").and_then(Value::as_str) == Some("PersistentVolumeClaim") {
            claims.push(o);
            continue;
        }
        if o.get("kind").and_then(Value::as_str) == Some("Pod") {
            claims.extend(scheduler_core::volume::ephemeral_claims(&o));
            claims.extend(scheduler_core::volume::template_claims(&mut o, &templates));
        }
        if let Err(e) = cluster.push(o) {
            sim.warnings.push(format!("{what}: {e}"));
        }
    }
    for c in claims {
        if cluster.get_ref(&ObjectRef::of(&c)).is_none() {
            let what = describe(&c);
            if let Err(e) = cluster.push(c) {
                sim.warnings.push(format!("{what}: {e}"));
            }
        }
    }
    let assembled = cluster.snapshot();
    let snapshot = &assembled.snapshot;
    // Everything below is looked up through indices built once: the work grows with the input,
    // not with its square (a file of 16,000 one-pod Jobs is 16,000 gangs).
    let submitted_pod = |ns: &str, name: &str| pods.contains(&(ns.to_string(), name.to_string()));
    sim.warnings
        .extend(assembled.problems.iter().filter(|p| ours.contains(&p.object)).map(ToString::to_string));
    drop(ours);
    let by_key: HashMap<&GangKey, &scheduler_core::Gang> =
        snapshot.gangs.iter().map(|g| (&g.key, g)).collect();
    // An upstream PodGroup under a CompositePodGroup is a leaf of its root's gang, not a gang.
    let upstream_leaves: HashSet<(&str, &str)> = snapshot
        .gangs
        .iter()
        .filter(|g| g.source.dialect == scheduler_core::model::Dialect::Upstream)
        .flat_map(|g| g.subgroups.iter().map(|s| (g.key.namespace.as_str(), s.name.as_str())))
        .collect();
    let is_leaf_of_upstream_tree = |k: &GangKey| {
        !by_key.contains_key(k) && upstream_leaves.contains(&(k.namespace.as_str(), k.name.as_str()))
    };
    let mut gangs: BTreeSet<GangKey> =
        gang_objects.iter().filter(|k| !is_leaf_of_upstream_tree(k)).cloned().collect();
    for p in &snapshot.pods {
        if submitted_pod(&p.key.namespace, &p.key.name) {
            match &p.gang {
                Some(m) => {
                    gangs.insert(m.gang.clone());
                }
                None => sim.warnings.push(format!(
                    "pod {} belongs to no gang: the gang scheduler would not place it as one",
                    p.key
                )),
            }
        }
    }
    let plan = schedule(snapshot, config, now);
    if nodes {
        sim.nodes = crate::map::with_tiers(snapshot.nodes.clone(), &snapshot.storage);
    }
    let levels_of = |key: &GangKey| {
        by_key.get(key).map(|g| crate::map::levels(g, config, &snapshot.storage)).unwrap_or_default()
    };
    // `-o name`: the gang's object, else the input objects its pods come from (what exists once
    // the input is applied), never a name no object has.
    let object_of = |key: &GangKey| {
        by_key.get(key).and_then(|g| crate::status::object_name(g, &cluster)).unwrap_or_else(|| {
            prepared
                .sources
                .get(key)
                .map(|s| s.iter().cloned().collect::<Vec<_>>().join("\n"))
                .unwrap_or_default()
        })
    };
    let member_of: HashMap<&scheduler_core::PodKey, &GangKey> =
        snapshot.pods.iter().filter_map(|p| p.gang.as_ref().map(|m| (&p.key, &m.gang))).collect();
    // Members on nodes already, grouped in one pass over the pods.
    let mut on_nodes: HashMap<&GangKey, Vec<OnNode>> = HashMap::new();
    for p in snapshot.pods.iter().filter(|p| p.uses_node()) {
        if let (Some(m), Some(node)) = (&p.gang, &p.node_name) {
            // A pod of the input that names its node was created with it.
            let pinned = submitted_pod(&p.key.namespace, &p.key.name);
            let how = if pinned { "pinned" } else { "bound" };
            on_nodes.entry(&m.gang).or_default().push(OnNode {
                pod: p.key.to_string(),
                node: node.clone(),
                how,
            });
        }
    }
    // Each gang's placements and preemptions, grouped in one pass over the plan.
    let mut places: HashMap<&GangKey, Vec<Place>> = HashMap::new();
    // Members whose claims are bound first are placed as well (bound in a later cycle).
    let mut waiting: BTreeMap<&scheduler_core::PodKey, &scheduler_core::SmolStr> = BTreeMap::new();
    let mut claims: HashMap<&GangKey, Vec<ClaimPlace>> = HashMap::new();
    for v in &plan.volumes {
        waiting.insert(&v.pod, &v.node);
        if let Some(g) = member_of.get(&v.pod) {
            let list = claims.entry(g).or_default();
            let c =
                ClaimPlace { claim: v.claim.to_string(), node: v.node.to_string(), volume: v.volume.clone() };
            if !list.contains(&c) {
                list.push(c);
            }
        }
    }
    let mut devices: HashMap<&GangKey, Vec<DevicePlace>> = HashMap::new();
    for c in &plan.claims {
        waiting.insert(&c.pod, &c.node);
        if let Some(g) = member_of.get(&c.pod) {
            let chosen = c.allocation.iter().flat_map(|a| &a.devices).map(|d| {
                if d.request.contains('/') { format!("{} ({})", d.id, d.request) } else { d.id.to_string() }
            });
            devices.entry(g).or_default().push(DevicePlace {
                claim: c.claim.to_string(),
                pod: c.pod.to_string(),
                node: c.node.to_string(),
                devices: chosen.collect(),
            });
        }
    }
    let placed = plan
        .bindings
        .iter()
        .map(|b| (&b.pod, &b.node))
        .chain(plan.nominations.iter().map(|n| (&n.pod, &n.node)))
        .chain(waiting);
    for (pod, node) in placed {
        if let Some(g) = member_of.get(pod) {
            places.entry(g).or_default().push(Place { pod: pod.to_string(), node: node.to_string() });
        }
    }
    let mut victims: HashMap<&GangKey, Vec<Victim>> = HashMap::new();
    for e in &plan.evictions {
        if let Some(g) = &e.preemptor {
            victims.entry(g).or_default().push(Victim {
                pod: e.pod.to_string(),
                node: e.node.to_string(),
                violates: e.budget.as_ref().map(ToString::to_string),
            });
        }
    }
    // Pods naming each gang, for the gangs the cycle decided nothing about.
    let mut naming: HashMap<&GangKey, usize> = HashMap::new();
    for g in member_of.values() {
        *naming.entry(g).or_default() += 1;
    }
    for key in gangs {
        let Some(outcome) = plan.outcome(&key) else {
            let message = match naming.get(&key).copied().unwrap_or(0) {
                0 => "the gang has no members in this simulation".to_string(),
                n => format!(
                    "{n} pod(s) name this gang, but no object defines it (neither in the input nor in the cluster): they wait until it is created"
                ),
            };
            sim.gangs.push(GangResult {
                namespace: key.namespace.to_string(),
                name: key.name.to_string(),
                schedulable: false,
                reason: Reason::WaitingForMembers.as_str().into(),
                message,
                placements: Vec::new(),
                on_nodes: Vec::new(),
                preemptions: Vec::new(),
                volumes: Vec::new(),
                devices: Vec::new(),
                provisioning: None,
                object: object_of(&key),
                levels: levels_of(&key),
            });
            continue;
        };
        let mut placements = places.remove(&key).unwrap_or_default();
        placements.sort_by(|a, b| a.pod.cmp(&b.pod));
        let preemptions = victims.remove(&key).unwrap_or_default();
        let mut held = on_nodes.remove(&key).unwrap_or_default();
        held.sort_by(|a, b| a.pod.cmp(&b.pod));
        let schedulable = matches!(
            outcome.reason,
            Reason::Scheduled
                | Reason::Running
                | Reason::Preempting
                | Reason::WaitingForVolumes
                | Reason::WaitingForDevices
        );
        let mut volumes = claims.remove(&key).unwrap_or_default();
        volumes.sort_by(|a, b| a.claim.cmp(&b.claim));
        sim.gangs.push(GangResult {
            namespace: key.namespace.to_string(),
            name: key.name.to_string(),
            schedulable,
            reason: outcome.reason.as_str().into(),
            message: outcome.message.clone(),
            placements,
            on_nodes: held,
            preemptions,
            volumes,
            devices: devices.remove(&key).unwrap_or_default(),
            provisioning: plan.provisioning_for(&key).map(Ask::of),
            object: object_of(&key),
            levels: levels_of(&key),
        });
    }
    sim
}

/// Human-readable result; with `map`, each gang drawn on its levels ([`crate::map`]).
pub fn render(sim: &Simulation, no_headers: bool, color: bool, map: bool) -> String {
    let nodes: Vec<&scheduler_core::model::Node> = if map { sim.nodes.iter().collect() } else { Vec::new() };
    // One layout per set of levels, however many gangs are drawn by it.
    let mut layouts: HashMap<&[String], crate::map::Layout<'_>> = HashMap::new();
    let mut out = String::new();
    let mut grid = Grid::new(&["NAMESPACE", "GANG", "FITS", "REASON", "PLACED", "PREEMPTS"]);
    for g in &sim.gangs {
        let fits = if g.schedulable { "yes" } else { "no" };
        grid.toned(vec![
            (g.namespace.clone(), Tone::Plain),
            (g.name.clone(), Tone::Plain),
            (fits.into(), Tone::of(fits)),
            (g.reason.clone(), Tone::of(&g.reason)),
            (g.placements.len().to_string(), Tone::Plain),
            (g.preemptions.len().to_string(), Tone::Plain),
        ]);
    }
    out.push_str(&grid.render(no_headers, color, 0));
    for g in &sim.gangs {
        let _ = writeln!(
            out,
            "\n{}/{}: {}",
            escape_controls(&g.namespace),
            escape_controls(&g.name),
            match (g.schedulable, g.reason.as_str()) {
                // The placement needs the victims gone: the message says what the cluster lacks
                // before they go, so "fits" alone would contradict it.
                (true, "Preempting") => "fits once the pods below are preempted",
                (true, _) => "fits",
                (false, _) => "does not fit",
            }
        );
        for line in g.message.lines() {
            let _ = writeln!(out, "  {}", escape_controls(line));
        }
        if !g.placements.is_empty() {
            let mut grid = Grid::new(&["POD", "NODE"]);
            for p in &g.placements {
                grid.row([p.pod.clone(), p.node.clone()]);
            }
            out.push_str(&grid.render(no_headers, color, 2));
        }
        if !g.on_nodes.is_empty() {
            let _ = writeln!(out, "  already on nodes:");
            let mut grid = Grid::new(&["POD", "NODE", "HOW"]);
            for p in &g.on_nodes {
                grid.row([p.pod.clone(), p.node.clone(), p.how.to_string()]);
            }
            out.push_str(&grid.render(no_headers, color, 2));
        }
        if !g.volumes.is_empty() {
            let _ = writeln!(out, "  would bind these claims first (the members once they are bound):");
            let mut grid = Grid::new(&["CLAIM", "VOLUME", "NODE"]);
            for c in &g.volumes {
                let volume = c.volume.clone().unwrap_or_else(|| "(provisioned)".into());
                grid.row([c.claim.clone(), volume, c.node.clone()]);
            }
            out.push_str(&grid.render(no_headers, color, 2));
        }
        if !g.devices.is_empty() {
            let _ = writeln!(
                out,
                "  would allocate these ResourceClaims first (the members once each is allocated and reserved):"
            );
            let mut grid = Grid::new(&["CLAIM", "POD", "NODE", "DEVICES"]);
            for d in &g.devices {
                let devices = if d.devices.is_empty() {
                    "(allocated; reserved)".to_string()
                } else {
                    d.devices.join(", ")
                };
                grid.row([d.claim.clone(), d.pod.clone(), d.node.clone(), devices]);
            }
            out.push_str(&grid.render(no_headers, color, 2));
        }
        if !g.preemptions.is_empty() {
            let _ = writeln!(out, "  would preempt:");
            let mut grid = Grid::new(&["VICTIM", "NODE", "VIOLATES"]);
            for p in &g.preemptions {
                grid.row([p.pod.clone(), p.node.clone(), p.violates.clone().unwrap_or_else(|| "-".into())]);
            }
            out.push_str(&grid.render(no_headers, color, 2));
        }
        if map {
            let mut marks: HashMap<&str, crate::map::Marks> = HashMap::new();
            for node in g.placements.iter().map(|p| &p.node).chain(g.on_nodes.iter().map(|p| &p.node)) {
                marks.entry(node).or_default().members += 1;
            }
            for v in &g.preemptions {
                marks.entry(&v.node).or_default().victims += 1;
            }
            let layout = layouts
                .entry(g.levels.as_slice())
                .or_insert_with(|| crate::map::Layout::new(&nodes, &g.levels));
            out.push_str(&layout.draw(&marks, color, 2));
        }
        if let Some(ask) = &g.provisioning {
            let total: u32 = ask.pod_sets.iter().map(|s| s.count).sum();
            let _ = writeln!(
                out,
                "  would ask the cluster autoscaler for {total} pod(s): ProvisioningRequest ({})",
                escape_controls(&ask.class)
            );
            let mut grid = Grid::new(&["COUNT", "REQUESTS PER POD", "NODE SELECTOR"]);
            for s in &ask.pod_sets {
                let selector: Vec<String> = s.node_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let selector = if selector.is_empty() { "<none>".to_string() } else { selector.join(",") };
                grid.row([s.count.to_string(), s.requests.clone(), selector]);
            }
            out.push_str(&grid.render(no_headers, color, 2));
        }
    }
    out
}

/// Runs `simulate`.
pub fn run(g: &Global, args: &SimulateArgs) -> anyhow::Result<Output> {
    let config = crate::world::policy(args.config.as_deref())?;
    let objects = input::read(&args.files)?;
    let world = load(g, None)?;
    let prepared =
        prepare_bounded(|| objects.iter(), &world.namespace, world.now, workload::MAX_EXPANDED_PODS);
    drop(objects);
    let mut stderr = String::new();
    for w in world.warnings.iter().chain(&prepared.warnings) {
        let _ = writeln!(stderr, "warning: {w}");
    }
    // Warnings come first and are always shown: they often say why nothing could be simulated.
    if !prepared.errors.is_empty() {
        let _ = write!(stderr, "error: the input is invalid:");
        for e in &prepared.errors {
            let _ = write!(stderr, "\n  {e}");
        }
        stderr.push('\n');
        return Ok(Output { stdout: String::new(), stderr, code: 2 });
    }
    let sim = simulate_kept(world.cluster, prepared, &config, world.now, args.map);
    for w in &sim.warnings {
        let _ = writeln!(stderr, "warning: {w}");
    }
    if sim.gangs.is_empty() {
        stderr.push_str("error: no gang in the input: nothing to simulate\n");
        return Ok(Output { stdout: String::new(), stderr, code: 2 });
    }
    let stdout = match g.output {
        Some(Format::Json) => serde_json::to_string_pretty(&json!({"gangs": sim.gangs}))? + "\n",
        Some(Format::Yaml) => serde_norway::to_string(&json!({"gangs": sim.gangs}))?,
        Some(Format::Name) => {
            let mut seen = BTreeSet::new();
            sim.gangs
                .iter()
                .flat_map(|x| x.object.lines())
                .filter(|o| seen.insert(*o))
                .map(|o| format!("{o}\n"))
                .collect()
        }
        _ => render(&sim, g.no_headers, color_enabled(), args.map),
    };
    let code = if sim.gangs.iter().all(|x| x.schedulable) { 0 } else { 1 };
    Ok(Output { stdout, stderr, code })
}
