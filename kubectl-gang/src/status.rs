//! `kubectl gang status [NAME]`: every gang in scope, whatever its dialect, and what it waits for —
//! computed by running the scheduler's own cycle on the current state.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use scheduler_core::cluster::{Cluster, Compact, Held};
use scheduler_core::model::{Dialect, Gang, GangKey, Pod, PodPhase};
use scheduler_core::plan::{Outcome, Phase, Plan, Reason};
use scheduler_core::{Config, Time, schedule, tree};
use serde::Serialize;
use serde_json::Value;

use crate::cli::{Format, Global, StatusArgs};
use crate::output::Output;
use crate::selector::Selector;
use crate::table::{Grid, Tone, color_enabled};
use crate::text::{age, escape_controls};
use crate::world::{World, load};

/// One gang as `-o json` prints it (a contract: fields are only ever added). Fields are declared
/// in the order of their JSON names, so that a row serialized as it is prints as it did through a
/// JSON map (sorted), without building one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub bound: u32,
    /// Backfill: when the gang is expected to start (capacity is held for it from then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_start_time: Option<Time>,
    /// Backfill: how many nodes hold capacity for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_nodes: Option<u32>,
    pub members: u32,
    pub message: String,
    pub min_member: u64,
    pub name: String,
    pub namespace: String,
    pub phase: String,
    pub reason: String,
    pub running: u32,
    pub source: String,
    /// The few words of the WAITING FOR column.
    pub waiting_for: String,
    #[serde(skip)]
    age: String,
    /// What `-o name` prints, as kubectl would (`podgroup.scheduling.volcano.sh/x`).
    #[serde(skip)]
    pub object: String,
}

/// What `status` computes, before formatting.
#[derive(Debug)]
pub struct StatusView<'a> {
    pub gangs: Vec<&'a Gang>,
    pub members: BTreeMap<&'a GangKey, Vec<&'a Pod>>,
    pub plan: Plan,
}

/// Members per gang and the plan of one cycle on `world`, run with the scheduler's policy.
pub fn status_view<'a>(snapshot: &'a scheduler_core::Snapshot, config: &Config, now: Time) -> StatusView<'a> {
    let plan = schedule(snapshot, config, now);
    let mut members: BTreeMap<&GangKey, Vec<&Pod>> = BTreeMap::new();
    for p in &snapshot.pods {
        if let Some(m) = &p.gang {
            members.entry(&m.gang).or_default().push(p);
        }
    }
    StatusView { gangs: snapshot.gangs.iter().collect(), members, plan }
}

/// `dialect/kind`, or just the dialect for annotation gangs.
pub fn source(g: &Gang) -> String {
    let d = g.source.dialect;
    if d.is_crd_less() { d.as_str().to_string() } else { format!("{d}/{}", g.source.kind) }
}

/// The row for one gang (its member pods `pods`; `ours` is the scheduler's name) in `cluster`. Its
/// counts are the cycle's (the outcome's), as they stand before the plan is applied: members the
/// plan would bind are not bound yet.
pub fn row(
    g: &Gang,
    pods: &[&Pod],
    ours: &str,
    outcome: Option<&Outcome>,
    now: Time,
    cluster: &Cluster<impl Held>,
) -> Row {
    let counts = outcome.map(|o| o.counts).unwrap_or_default();
    let members = counts.members;
    let bound = counts.bound.saturating_sub(counts.binding);
    let running = counts.running;
    let min = g.min_pods().unwrap_or(u64::from(g.min_member));
    let (reason, phase, message) = match outcome {
        Some(o) => {
            // A plan that would bind now has not happened yet: a gang whose minimum is not placed
            // is still pending. One whose minimum already holds (extras being placed) keeps the
            // phase the cycle gives it.
            let placed_before = g.state.was_satisfied || u64::from(bound) >= min;
            let phase =
                if o.reason == Reason::Scheduled && !placed_before { Phase::Pending } else { o.phase };
            (o.reason.as_str().to_string(), phase.as_str().to_string(), o.message.clone())
        }
        None => ("Unknown".into(), "Pending".into(), String::new()),
    };
    let waiting_for = waiting_for(g, pods, ours, outcome, u64::from(members), min, now);
    let expected = outcome.and_then(|o| o.expected_start);
    Row {
        expected_start_time: expected,
        held_nodes: outcome.map(|o| u32::try_from(o.held_nodes.len()).unwrap_or(u32::MAX)).filter(|&n| n > 0),
        namespace: g.key.namespace.to_string(),
        name: g.key.name.to_string(),
        source: source(g),
        phase,
        min_member: min,
        members,
        bound,
        running,
        reason,
        message,
        waiting_for,
        age: age(now, g.created),
        // A gang without an object of its own is named by its member pods: they exist.
        object: object_name(g, cluster).unwrap_or_else(|| {
            pods.iter().map(|p| format!("pod/{}", p.key.name)).collect::<Vec<_>>().join("\n")
        }),
    }
}

/// The gang's defining object in `cluster` as `kubectl get -o name` prints it:
/// `<kind>.<group>/<name>` (`gang.kube-gang.io/bert`, `podgroup.scheduling.volcano.sh/tf`). A gang
/// of a 1.35 `Workload` (one pod group, per replica key: `training-workers-a`) is that Workload
/// (`workload.scheduling.k8s.io/training`), the object kubectl can get. Gangs defined by pod
/// annotations have no object of their own: `None` (`-o name` then names objects that exist: its
/// member pods, or in `simulate` the input objects its pods come from).
pub fn object_name(g: &Gang, cluster: &Cluster<impl Held>) -> Option<String> {
    if g.source.dialect == Dialect::Upstream && g.source.kind == "Workload" {
        return workload_of(g, cluster).map(|w| format!("workload.scheduling.k8s.io/{w}"));
    }
    let group = scheduler_core::dialect::object_group(g.source.dialect, &g.source.kind)?;
    Some(format!("{}.{group}/{}", g.source.kind.to_lowercase(), g.key.name))
}

pub use scheduler_core::prepare::kubectl_name;

/// The name of the 1.35 Workload gang `g` is a pod group of. The core names such a gang
/// `<workload>-<podGroup>[-<replicaKey>]` (KEP-4671: a gang per replica key); the Workload is the
/// prefix, before some `-`, that the cluster holds as a Workload with that pod group. A lookup per
/// `-` in the name, each by key: no scan of the cluster.
fn workload_of(g: &Gang, cluster: &Cluster<impl Held>) -> Option<String> {
    let name = g.key.name.as_str();
    let cuts = name.match_indices('-').map(|(i, _)| i).collect::<Vec<_>>();
    cuts.into_iter().rev().find_map(|i| {
        let workload = &name[..i];
        let obj = cluster.get("scheduling.k8s.io/v1alpha1", "Workload", &g.key.namespace, workload)?;
        let w = scheduler_core::dialect::upstream::read_workload(&obj).ok()?;
        w.groups
            .iter()
            .any(|group| {
                let whole =
                    scheduler_core::dialect::upstream::workload_gang_name(workload, &group.name, None);
                name == whole || name.strip_prefix(whole.as_str()).is_some_and(|rest| rest.starts_with('-'))
            })
            .then(|| workload.to_string())
    })
}

/// The few words of the WAITING FOR column: what would unblock the gang, per reason, and within
/// a reason by what its members show (gates, another scheduler, subgroup labels, capacity).
fn waiting_for(
    g: &Gang,
    pods: &[&Pod],
    ours: &str,
    outcome: Option<&Outcome>,
    members: u64,
    min: u64,
    now: Time,
) -> String {
    let Some(o) = outcome else { return "-".into() };
    let waiting = || pods.iter().filter(|p| p.is_pending());
    let gates: BTreeSet<&str> =
        waiting().flat_map(|p| p.scheduling_gates.iter().map(String::as_str)).collect();
    let foreign = waiting().filter(|p| !p.is_gated() && p.scheduler_name != ours).count();
    match o.reason {
        Reason::Running | Reason::Completed | Reason::Failed => "-".into(),
        Reason::Scheduled => "binding (fits now)".into(),
        Reason::WaitingForMembers => {
            let missing = min.saturating_sub(members);
            let misfiled =
                pods.iter().any(|p| p.is_active() && tree::attachment_error(g, subgroup_of(p)).is_some());
            if missing > 0 {
                format!("{missing} more member{}", if missing == 1 { "" } else { "s" })
            } else if !gates.is_empty() {
                // The count the cycle's message gives too (`2 of 8 members gated by …`).
                let gated = waiting().filter(|p| p.is_gated()).count();
                format!("{gated} of {min} gated by {}", gates.into_iter().collect::<Vec<_>>().join(", "))
            } else if misfiled {
                "members in leaf subgroups".into()
            } else {
                "members in subgroups".into()
            }
        }
        Reason::Unschedulable if foreign > 0 => format!("schedulerName {ours} on {foreign}"),
        Reason::Unschedulable => "room on nodes".into(),
        // Exclusive placement comes from the gang or, whatever its dialect, from its members.
        Reason::TopologyUnsatisfiable => match g
            .exclusive_topology
            .as_ref()
            .or_else(|| pods.iter().find_map(|p| p.exclusive_topology.as_ref()))
        {
            Some(key) => format!("a {key} domain per child job"),
            None => format!("one {} domain", g.topology_key.as_deref().unwrap_or("topology")),
        },
        Reason::Preempting => "preemption".into(),
        Reason::TimedOut | Reason::BackingOff => match o.state.backoff_until {
            Some(t) if t > now => format!("retry in {}", age(t, now)),
            _ => "retry".into(),
        },
        Reason::Reserved => "more room (reserving)".into(),
        Reason::WaitingForResources => "running work to end (room held)".into(),
        Reason::WaitingForPriority => "gangs ahead of it (held room)".into(),
        Reason::WaitingForGangGroup => "its gang group".into(),
        Reason::WaitingForVolumes => "its PVCs to be bound".into(),
        Reason::WaitingForDevices => "its ResourceClaims to be allocated and reserved".into(),
        Reason::Degraded => "members to return".into(),
        Reason::Stale => "eviction".into(),
        Reason::InvalidSpec => "a valid spec".into(),
    }
}

fn subgroup_of(p: &Pod) -> Option<&str> {
    p.gang.as_ref().and_then(|m| m.subgroup.as_deref())
}

fn labels_of(v: &Value) -> BTreeMap<String, String> {
    v.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string()))).collect())
        .unwrap_or_default()
}

/// The raw object that defines gang `key`, if it has one: the first in the cluster's key order.
fn defining_object(world: &World, key: &GangKey) -> Option<Value> {
    let is = |o: &Value, p: &str, want: &str| o.pointer(p).and_then(Value::as_str) == Some(want);
    world
        .cluster
        .gang_objects()
        .find(|o| is(o, "/metadata/namespace", &key.namespace) && is(o, "/metadata/name", &key.name))
        .map(std::borrow::Cow::into_owned)
}

/// The labels of the raw objects that define gangs, by namespace and name: read once (for `-l`),
/// so that finding a gang's object costs a lookup, not a scan of every gang object per gang.
fn defining_labels(world: &World) -> BTreeMap<(String, String), BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for o in world.cluster.gang_objects() {
        let at = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
        // The first in the cluster's key order, as a scan from the start found it.
        out.entry((at("/metadata/namespace"), at("/metadata/name"))).or_insert_with(|| labels_of(&o));
    }
    out
}

/// Runs `status`.
pub fn run(g: &Global, args: &StatusArgs) -> anyhow::Result<Output> {
    let world = load(g, args.name.as_deref())?;
    let selector = match &g.selector {
        Some(s) => Selector::parse(s).map_err(|e| anyhow::anyhow!("-l: {e}"))?,
        None => Selector::default(),
    };
    let assembled = world.cluster.snapshot();
    let config = crate::world::policy(args.config.as_deref())?;
    let view = status_view(&assembled.snapshot, &config, world.now);
    let mut stderr = String::new();
    for w in &world.warnings {
        let _ = writeln!(stderr, "warning: {w}");
    }
    let in_scope = |ns: &str| g.all_namespaces || ns == world.namespace;
    for p in &assembled.problems {
        if g.all_namespaces || p.object.contains(&format!(" {}/", world.namespace)) {
            let _ = writeln!(stderr, "warning: {p}");
        }
    }

    if let Some(name) = &args.name {
        let key = GangKey::parse(name, &world.namespace)
            .ok_or_else(|| anyhow::anyhow!("invalid gang name {name:?}"))?;
        let Some(gang) = view.gangs.iter().find(|x| x.key == key) else {
            anyhow::bail!("gang {:?} not found in namespace {:?}", key.name, key.namespace);
        };
        let pods = view.members.get(&gang.key).cloned().unwrap_or_default();
        let mut r =
            row(gang, &pods, &config.scheduler_name, view.plan.outcome(&gang.key), world.now, &world.cluster);
        with_capacity(&mut r, &world, &gang.key, view.plan.outcome(&gang.key));
        let stdout = match g.output {
            Some(Format::Json) => serde_json::to_string_pretty(&serde_json::json!({"gangs": [r]}))? + "\n",
            Some(Format::Yaml) => serde_norway::to_string(&serde_json::json!({"gangs": [r]}))?,
            Some(Format::Name) => r.object.lines().map(|l| format!("{l}\n")).collect(),
            _ => {
                let colour = color_enabled();
                let held = held_domains(gang, &pods, &assembled.snapshot);
                let mut text = detail(&world, gang, &pods, &view.plan, &r, &held, colour);
                if args.map {
                    text.push('\n');
                    let snapshot = &assembled.snapshot;
                    let nodes = crate::map::with_tiers(snapshot.nodes.clone(), &snapshot.storage);
                    text.push_str(&map(&nodes, gang, &pods, &view.plan, &config, &snapshot.storage, colour));
                }
                text
            }
        };
        return Ok(Output { stdout, stderr, code: 0 });
    }

    let objects = if g.selector.is_some() { defining_labels(&world) } else { BTreeMap::new() };
    let mut rows = Vec::new();
    for gang in &view.gangs {
        if !in_scope(&gang.key.namespace) {
            continue;
        }
        let pods = view.members.get(&gang.key).cloned().unwrap_or_default();
        if g.selector.is_some() {
            let matched = match objects.get(&(gang.key.namespace.to_string(), gang.key.name.to_string())) {
                Some(labels) => selector.matches(labels),
                None => pods
                    .iter()
                    .filter_map(|m| world.cluster.pod(&m.key.namespace, &m.key.name))
                    .any(|p| selector.matches(&labels_of(&p))),
            };
            if !matched {
                continue;
            }
        }
        let mut r =
            row(gang, &pods, &config.scheduler_name, view.plan.outcome(&gang.key), world.now, &world.cluster);
        with_capacity(&mut r, &world, &gang.key, view.plan.outcome(&gang.key));
        rows.push(r);
    }
    if rows.is_empty() && !matches!(g.output, Some(Format::Json | Format::Yaml)) {
        if g.all_namespaces {
            stderr.push_str("No resources found\n");
        } else {
            let _ = writeln!(stderr, "No resources found in {} namespace.", world.namespace);
        }
        return Ok(Output { stdout: String::new(), stderr, code: 0 });
    }
    // Serialized from the rows as they are: a JSON tree of them cost as much again as the rows
    // (356,000 gangs: some 350 MB more RSS).
    #[derive(Serialize)]
    struct Gangs<'a> {
        gangs: &'a [Row],
    }
    let stdout = match g.output {
        Some(Format::Json) => serde_json::to_string_pretty(&Gangs { gangs: &rows })? + "\n",
        Some(Format::Yaml) => serde_norway::to_string(&Gangs { gangs: &rows })?,
        // One line per object, as kubectl prints: the gangs of one Workload name it once.
        Some(Format::Name) => {
            let mut seen = BTreeSet::new();
            rows.iter()
                .flat_map(|r| r.object.lines())
                .filter(|o| seen.insert(*o))
                .map(|o| format!("{o}\n"))
                .collect()
        }
        f => {
            let columns = Columns {
                namespace: g.all_namespaces,
                wide: f == Some(Format::Wide),
                expected_start: config.backfill.as_ref().filter(|b| b.enabled).map(|_| world.now),
            };
            table(&rows, columns, g.no_headers, color_enabled())
        }
    };
    // The process exits once this is printed: freeing a large cluster object by object would cost
    // a noticeable part of the run (0.4 s for 140,000 pods) and buy nothing.
    std::mem::forget(view);
    std::mem::forget(assembled);
    std::mem::forget(world);
    Ok(Output { stdout, stderr, code: 0 })
}

/// A gang not placed whose capacity request (a ProvisioningRequest the scheduler wrote, read from
/// the cluster or the dump) is open says so as the scheduler does: its message starts with
/// `waiting for capacity: ProvisioningRequest ns/name (class)` (`scheduler_core::provision`'s one
/// line), and WAITING FOR names the request.
fn with_capacity(r: &mut Row, world: &World, key: &GangKey, outcome: Option<&Outcome>) {
    if outcome.is_none_or(|o| o.reason.is_satisfied()) {
        return;
    }
    let Some(line) = scheduler_core::provision::capacity_line_for(&world.requests, key) else { return };
    let Some(request) = scheduler_core::provision::gang_request(&world.requests, key) else { return };
    let name = request.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    r.waiting_for = format!("capacity (ProvisioningRequest {name})");
    r.message = if r.message.is_empty() { line } else { format!("{line}; {}", r.message) };
}

/// The EXPECTED START column: `in 50m`, `now`, `-`.
fn expected_in(start: Option<Time>, now: Time) -> String {
    match start {
        Some(t) if t > now => format!("in {}", age(t, now)),
        Some(_) => "now".into(),
        None => "-".into(),
    }
}

/// Which columns the status table has beside the usual ones.
#[derive(Clone, Copy, Debug, Default)]
pub struct Columns {
    /// NAMESPACE (`-A`).
    pub namespace: bool,
    /// REASON and MESSAGE (`-o wide`).
    pub wide: bool,
    /// EXPECTED START, counted from this time (the policy turns backfill on: only then can a gang
    /// have one).
    pub expected_start: Option<Time>,
}

/// The status table.
pub fn table(rows: &[Row], columns: Columns, no_headers: bool, color: bool) -> String {
    let Columns { namespace: with_namespace, wide, expected_start } = columns;
    let now = expected_start.unwrap_or_default();
    let expected_start = expected_start.is_some();
    let mut headers = Vec::new();
    if with_namespace {
        headers.push("NAMESPACE");
    }
    headers.extend(["NAME", "SOURCE", "MIN", "MEMBERS", "BOUND", "RUNNING", "PHASE", "WAITING FOR"]);
    if expected_start {
        headers.push("EXPECTED START");
    }
    headers.push("AGE");
    if wide {
        headers.extend(["REASON", "MESSAGE"]);
    }
    let mut grid = Grid::new(&headers);
    for r in rows {
        let mut cells = Vec::with_capacity(headers.len());
        if with_namespace {
            cells.push((r.namespace.clone(), Tone::Plain));
        }
        cells.push((r.name.clone(), Tone::Plain));
        cells.push((r.source.clone(), Tone::Plain));
        for n in [r.min_member, u64::from(r.members), u64::from(r.bound), u64::from(r.running)] {
            cells.push((n.to_string(), Tone::Plain));
        }
        cells.push((r.phase.clone(), Tone::of(&r.phase)));
        cells.push((r.waiting_for.clone(), Tone::Plain));
        if expected_start {
            cells.push((expected_in(r.expected_start_time, now), Tone::Plain));
        }
        cells.push((r.age.clone(), Tone::Plain));
        if wide {
            cells.push((r.reason.clone(), Tone::of(&r.reason)));
            cells.push((first_line(&r.message), Tone::Plain));
        }
        grid.toned(cells);
    }
    grid.render(no_headers, color, 0)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// The detail view of one gang.
/// The domains a gang's members on nodes hold, at each level it asks for: the gang's required
/// and preferred levels, then each subgroup's (its members under it); one line per level,
/// `level: key=value (members), …`, most members first. Levels no node carries as a label
/// (Volcano HyperNode tiers, Koordinator network layers) are derived as the cycle derives them.
pub fn held_domains(gang: &Gang, pods: &[&Pod], snapshot: &scheduler_core::Snapshot) -> Vec<String> {
    let on: Vec<&&Pod> = pods.iter().filter(|p| p.is_active() && p.node_name.is_some()).collect();
    // (what, required, preferred, the leaves it covers): the gang, then each subgroup.
    let mut asked: Vec<(String, &str, Option<Vec<String>>)> = Vec::new();
    let whole = std::iter::once((String::new(), &gang.topology_key, &gang.topology_preferred, None));
    let subs = gang.subgroups.iter().map(|s| {
        (
            format!("subgroup {} ", s.name),
            &s.topology_key,
            &s.topology_preferred,
            Some(tree::leaves_under(gang, &s.name)),
        )
    });
    for (what, required, preferred, leaves) in whole.chain(subs) {
        // A preferred level that is the required one says nothing more.
        let preferred = preferred.as_ref().filter(|p| Some(*p) != required.as_ref());
        for (kind, key) in [("required", required.as_ref()), ("preferred", preferred)] {
            if let Some(k) = key {
                asked.push((format!("{what}{kind}"), k.as_str(), leaves.clone()));
            }
        }
    }
    if asked.is_empty() || on.is_empty() {
        return Vec::new();
    }
    let at: std::collections::HashMap<&str, usize> =
        snapshot.nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
    let mut out = Vec::new();
    for (what, key, leaves) in asked {
        // A level no node carries as a label is derived for this key alone, no node copied.
        let derived = scheduler_core::hypernode::tier_of(key)
            .map(|t| scheduler_core::hypernode::domains(&snapshot.nodes, &snapshot.storage.hypernodes, t))
            .or_else(|| {
                scheduler_core::network_layer::layer_of(key).map(|l| {
                    scheduler_core::network_layer::domains(
                        &snapshot.nodes,
                        &snapshot.storage.network_layers,
                        l,
                    )
                })
            });
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &on {
            let in_scope = leaves.as_ref().is_none_or(|l| {
                p.gang
                    .as_ref()
                    .and_then(|m| m.subgroup.as_deref())
                    .is_some_and(|sg| l.iter().any(|x| x == sg))
            });
            let Some(&n) = p.node_name.as_deref().and_then(|n| at.get(n)).filter(|_| in_scope) else {
                continue;
            };
            let value = match &derived {
                Some(d) => d.get(n).and_then(Option::as_deref),
                None => snapshot.nodes[n].labels.get(key).map(String::as_str),
            };
            *counts.entry(value.unwrap_or("<none>")).or_default() += 1;
        }
        if counts.is_empty() {
            continue;
        }
        let mut held: Vec<(&str, usize)> = counts.into_iter().collect();
        held.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let text: Vec<String> = held.iter().map(|(v, n)| format!("{key}={v} ({n})")).collect();
        out.push(format!("{what}: {}", text.join(", ")));
    }
    out
}

fn detail(
    world: &World,
    gang: &Gang,
    pods: &[&Pod],
    plan: &Plan,
    r: &Row,
    held: &[String],
    color: bool,
) -> String {
    let mut out = String::new();
    // Text outside the tables is escaped here: with colour on, only escaped data keeps a colour
    // code in a name from being obeyed (tables escape their cells).
    // An empty name continues the field above.
    let field = |out: &mut String, k: &str, v: &str| {
        let name = if k.is_empty() { String::new() } else { format!("{k}:") };
        let _ = writeln!(out, "{name:<14}{}", escape_controls(v));
    };
    field(&mut out, "Name", &gang.key.name);
    field(&mut out, "Namespace", &gang.key.namespace);
    field(&mut out, "Source", &r.source);
    field(&mut out, "Mode", &format!("{:?}", gang.mode));
    // The same count as the table's MIN column: the pods the gang needs. With subgroups, the
    // root's own count (satisfied top-level subgroups) follows.
    field(&mut out, "Min member", &r.min_member.to_string());
    if !gang.subgroups.is_empty() {
        let top = gang.subgroups.iter().filter(|s| s.parent.is_none()).count();
        field(&mut out, "Min subgroup", &format!("{} of {top}", gang.min_member));
    }
    if let Some(t) = gang.total_member {
        field(&mut out, "Total member", &t.to_string());
    }
    if let Some(k) = &gang.topology_key {
        field(&mut out, "Topology key", k);
    }
    if let Some(k) = gang.topology_preferred.as_ref().filter(|p| Some(*p) != gang.topology_key.as_ref()) {
        field(&mut out, "Preferred", k);
    }
    // Where the members on nodes are, level by level: a running gang's domain.
    for (i, h) in held.iter().enumerate() {
        field(&mut out, if i == 0 { "Holds" } else { "" }, h);
    }
    if !gang.gang_group.is_empty() {
        let group: Vec<String> = gang.gang_group.iter().map(ToString::to_string).collect();
        field(&mut out, "Gang group", &group.join(", "));
    }
    if let Some(t) = gang.timeout {
        field(&mut out, "Timeout", &format!("{}s", t.as_secs()));
    }
    field(&mut out, "Members", &format!("{} (bound {}, running {})", r.members, r.bound, r.running));
    field(&mut out, "Phase", &r.phase);
    field(&mut out, "Reason", &r.reason);
    if let Some(o) = plan.outcome(&gang.key)
        && let Some(t) = o.expected_start
    {
        field(&mut out, "Starts by", &format!("{t} ({})", expected_in(Some(t), world.now)));
        let listed: Vec<&str> = o.held_nodes.iter().take(8).map(|n| n.as_str()).collect();
        let more = if o.held_nodes.len() > listed.len() { ", …" } else { "" };
        field(&mut out, "Held nodes", &format!("{}: {}{more}", o.held_nodes.len(), listed.join(", ")));
    }
    field(&mut out, "Age", &r.age);

    if !gang.subgroups.is_empty() {
        out.push_str("\nSubgroups:\n");
        let mut grid = Grid::new(&["SUBGROUP", "PARENT", "MIN", "MEMBERS", "BOUND", "RUNNING"]);
        for s in &gang.subgroups {
            let leaves = tree::leaves_under(gang, &s.name);
            let of_sub: Vec<&&Pod> = pods
                .iter()
                .filter(|p| p.is_active())
                .filter(|p| {
                    p.gang
                        .as_ref()
                        .and_then(|m| m.subgroup.as_deref())
                        .is_some_and(|sg| leaves.iter().any(|l| l == sg))
                })
                .collect();
            grid.row([
                s.name.clone(),
                s.parent.clone().unwrap_or_else(|| "-".into()),
                s.min_member.to_string(),
                of_sub.len().to_string(),
                of_sub.iter().filter(|p| p.node_name.is_some()).count().to_string(),
                of_sub.iter().filter(|p| p.phase == PodPhase::Running).count().to_string(),
            ]);
        }
        out.push_str(&grid.render(false, color, 2));
    }

    out.push_str("\nMembers:\n");
    if pods.is_empty() {
        out.push_str("  <none>\n");
    } else {
        let mut grid = Grid::new(&["POD", "SUBGROUP", "NODE", "PHASE", "AGE"]);
        for p in pods {
            let phase = format!("{:?}", p.phase);
            grid.toned(vec![
                (p.key.name.to_string(), Tone::Plain),
                (p.gang.as_ref().and_then(|m| m.subgroup.clone()).unwrap_or_else(|| "-".into()), Tone::Plain),
                (p.node_name.clone().unwrap_or_else(|| "<none>".into()), Tone::Plain),
                (phase.clone(), Tone::of(&phase)),
                (age(world.now, p.created), Tone::Plain),
            ]);
        }
        out.push_str(&grid.render(false, color, 2));
    }

    if let Some(obj) = defining_object(world, &gang.key)
        && let Some(conds) = obj.pointer("/status/conditions").and_then(Value::as_array)
        && !conds.is_empty()
    {
        out.push_str("\nConditions:\n");
        let mut grid = Grid::new(&["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"]);
        for c in conds {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let when =
                Time::parse_rfc3339(&s("lastTransitionTime")).map(|t| age(world.now, t)).unwrap_or_default();
            grid.row([s("type"), s("status"), s("reason"), when, s("message")]);
        }
        out.push_str(&grid.render(false, color, 2));
    }

    let names: BTreeSet<&str> =
        pods.iter().map(|p| p.key.name.as_str()).chain(std::iter::once(gang.key.name.as_str())).collect();
    // Held compact: decoded one at a time, the gang's kept.
    let mut events: Vec<(Time, Value)> = world
        .events
        .iter()
        .map(Compact::decode)
        .filter(|e| {
            let regarding = e.get("regarding").or_else(|| e.get("involvedObject"));
            let ns = e.pointer("/metadata/namespace").and_then(Value::as_str);
            let name = regarding.and_then(|r| r.get("name")).and_then(Value::as_str);
            ns == Some(gang.key.namespace.as_str()) && name.is_some_and(|n| names.contains(n))
        })
        .map(|e| (event_time(&e), e))
        .collect();
    events.sort_by_key(|(t, _)| *t);
    out.push_str("\nEvents:\n");
    if events.is_empty() {
        out.push_str("  <none>\n");
    } else {
        let mut grid = Grid::new(&["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
        for (t, e) in events.iter().rev().take(10).rev() {
            let s = |p: &str| e.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
            let object = e.get("regarding").or_else(|| e.get("involvedObject"));
            let object = object
                .map(|o| {
                    format!(
                        "{}/{}",
                        o.get("kind").and_then(Value::as_str).unwrap_or("").to_lowercase(),
                        o.get("name").and_then(Value::as_str).unwrap_or("")
                    )
                })
                .unwrap_or_default();
            let message = if s("/note").is_empty() { s("/message") } else { s("/note") };
            grid.row([age(world.now, *t), s("/type"), s("/reason"), object, message]);
        }
        out.push_str(&grid.render(false, color, 2));
    }

    out.push_str("\nWhy (a scheduling cycle on this state, now):\n");
    for line in r.message.lines() {
        let _ = writeln!(out, "  {}", escape_controls(line));
    }
    let member_keys: BTreeSet<_> = pods.iter().map(|p| &p.key).collect();
    let binds: Vec<_> = plan.bindings.iter().filter(|b| member_keys.contains(&b.pod)).collect();
    if !binds.is_empty() {
        let _ = writeln!(out, "  It fits now; the scheduler would bind:");
        for b in binds {
            let _ = writeln!(out, "    {} -> {}", escape_controls(&b.pod.name), escape_controls(&b.node));
        }
    }
    let victims: Vec<_> = plan.evictions.iter().filter(|e| e.preemptor.as_ref() == Some(&gang.key)).collect();
    if !victims.is_empty() {
        let _ = writeln!(out, "  It would preempt:");
        for v in victims {
            let _ =
                writeln!(out, "    {} on {}", escape_controls(&v.pod.to_string()), escape_controls(&v.node));
        }
    }
    out
}

fn event_time(e: &Value) -> Time {
    [
        "/eventTime",
        "/deprecatedLastTimestamp",
        "/lastTimestamp",
        "/series/lastObservedTime",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .filter_map(|p| e.pointer(p).and_then(Value::as_str))
    .find_map(|s| Time::parse_rfc3339(s).ok())
    .unwrap_or_default()
}

/// `status NAME --map`: the gang drawn on its levels ([`crate::map`]) — members on nodes, where
/// this cycle would place or nominate the others, and the pods it would preempt.
fn map(
    nodes: &[scheduler_core::model::Node],
    gang: &Gang,
    pods: &[&Pod],
    plan: &Plan,
    config: &Config,
    storage: &scheduler_core::model::volume::Storage,
    colour: bool,
) -> String {
    use std::collections::HashMap;
    let mut marks: HashMap<&str, crate::map::Marks> = HashMap::new();
    let mine: BTreeSet<&scheduler_core::PodKey> = pods.iter().map(|p| &p.key).collect();
    let on_nodes = pods.iter().filter(|p| p.uses_node()).filter_map(|p| p.node_name.as_deref());
    let placed = (plan.bindings.iter().map(|b| (&b.pod, &b.node)))
        .chain(plan.nominations.iter().map(|n| (&n.pod, &n.node)))
        .filter(|(p, _)| mine.contains(p))
        .map(|(_, n)| n.as_str());
    for node in on_nodes.chain(placed) {
        marks.entry(node).or_default().members += 1;
    }
    for e in plan.evictions.iter().filter(|e| e.preemptor.as_ref() == Some(&gang.key)) {
        marks.entry(e.node.as_str()).or_default().victims += 1;
    }
    let nodes: Vec<&scheduler_core::model::Node> = nodes.iter().collect();
    crate::map::draw(&nodes, &crate::map::levels(gang, config, storage), &marks, colour, 0)
}
