//! Simulation over time: replay gang arrivals and run durations through the same [`crate::decide::schedule`]
//! the scheduler runs, and report waits, utilisation, stranded GPUs and preemptions.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::decide::config::Config;
use std::collections::{BTreeSet, HashMap};

use crate::decide::plan::Plan;
use crate::read::model::SmolStr;
use crate::read::model::{Gang, GangKey, GangState, Node, Pod, PodKey, PodPhase, Snapshot, Time};

/// One gang arriving during a simulation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Arrival {
    /// Seconds after the simulation starts.
    pub at_secs: u64,
    /// How long the gang runs once its minimum is running.
    pub duration_secs: u64,
    pub gang: Gang,
    /// Its members (pending, unbound).
    pub pods: Vec<Pod>,
}

/// What to replay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub nodes: Vec<Node>,
    /// Pods already running at the start (they never finish).
    #[serde(default)]
    pub background: Vec<Pod>,
    pub arrivals: Vec<Arrival>,
    /// Simulation start time.
    #[serde(default)]
    pub start: Time,
    /// Seconds between scheduling cycles.
    #[serde(default = "one")]
    pub step_secs: u64,
    /// Stop after this many seconds even if gangs still wait.
    #[serde(default)]
    pub horizon_secs: Option<u64>,
    /// A node pool that grows for pending members (none: the nodes are all there is).
    #[serde(default)]
    pub autoscale: Option<Autoscale>,
}

/// How an autoscaled node pool grows, modelled simply (fit by GPUs only):
///
/// - every cycle, the pending members of gangs that were not placed are matched, oldest first
///   (pods created the same second taken in turn across gangs, as their controllers create them
///   concurrently), against the free GPUs of the nodes there are and of the nodes on their way;
/// - [`ScaleUp::PerPod`] (a cluster autoscaler looking at pending pods one at a time): each member
///   with no room gets a node of its own while the pool is below `max_nodes`, so a gang may get
///   nodes for part of its members, which then hold their GPUs idle;
/// - [`ScaleUp::Atomic`] (a `best-effort-atomic-scale-up` ProvisioningRequest): a gang gets nodes
///   for all its members with no room at once, or none if the pool cannot grow that far;
/// - a node asked for is ready `delay_secs` later; a node of the pool with no pod on it for
///   `scale_down_secs` is removed (pending members that could not use it ask again).
///
/// Idle GPU-hours count the free GPUs of the pool's nodes over time: capacity paid for and unused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Autoscale {
    /// The shape of every node the pool adds (its name is a prefix: `{name}-{n}`).
    pub node: Node,
    /// The most nodes the pool may have at once (ready or on their way).
    pub max_nodes: u32,
    /// Seconds from asking for a node to its being ready.
    pub delay_secs: u64,
    /// Seconds an empty node of the pool stays before it is removed.
    pub scale_down_secs: u64,
    pub mode: ScaleUp,
}

/// How the pool decides what to add.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScaleUp {
    /// One pending pod at a time, each independently.
    PerPod,
    /// A whole gang's missing nodes at once, or none.
    Atomic,
}

/// The pool's state during a run.
#[derive(Debug, Default)]
struct Pool {
    /// Nodes asked for: (ready at, name).
    coming: Vec<(u64, String)>,
    /// The pool's ready nodes: name → since when it has been empty.
    ready: std::collections::BTreeMap<String, Option<u64>>,
    added: u32,
}

impl Pool {
    fn size(&self) -> u32 {
        u32::try_from(self.coming.len() + self.ready.len()).unwrap_or(u32::MAX)
    }

    /// Nodes that became ready join the snapshot; empty ones past their time leave it.
    fn settle(&mut self, a: &Autoscale, snap: &mut Snapshot, t: u64) {
        let (now_ready, still): (Vec<_>, Vec<_>) = self.coming.drain(..).partition(|(at, _)| *at <= t);
        self.coming = still;
        for (_, name) in now_ready {
            let mut node = a.node.clone();
            node.name = SmolStr::new(&name);
            snap.nodes.push(node);
            self.ready.insert(name, None);
        }
        let mut gone = BTreeSet::new();
        for (name, empty_since) in &mut self.ready {
            let busy =
                snap.pods.iter().any(|p| p.uses_node() && p.node_name.as_deref() == Some(name.as_str()));
            if busy {
                *empty_since = None;
                continue;
            }
            let since = *empty_since.get_or_insert(t);
            if t >= since + a.scale_down_secs {
                gone.insert(name.clone());
            }
        }
        if !gone.is_empty() {
            snap.nodes.retain(|n| !gone.contains(n.name.as_str()));
            self.ready.retain(|n, _| !gone.contains(n));
            snap.usage = None;
        }
    }

    /// Asks for nodes for the members `plan` left pending.
    fn grow(&mut self, a: &Autoscale, snap: &Snapshot, plan: &Plan, t: u64) {
        let node_gpus = a.node.allocatable.get(GPU);
        let mut used: HashMap<&str, i64> = HashMap::new();
        for p in snap.pods.iter().filter(|p| p.uses_node()) {
            if let Some(n) = p.node_name.as_deref() {
                *used.entry(n).or_default() += p.requests.get(GPU);
            }
        }
        // Free GPUs per node, those on their way included.
        let mut free: Vec<i64> = snap
            .nodes
            .iter()
            .filter(|n| n.ready && !n.unschedulable)
            .map(|n| n.allocatable.get(GPU) - used.get(n.name.as_str()).copied().unwrap_or(0))
            .collect();
        free.extend(self.coming.iter().map(|_| node_gpus));
        let unplaced: BTreeSet<&GangKey> =
            plan.outcomes.iter().filter(|o| !o.reason.is_satisfied()).map(|o| &o.gang).collect();
        // Pending members: oldest first, then in turn across gangs, then by gang.
        let mut rank: HashMap<&GangKey, usize> = HashMap::new();
        let mut pending: Vec<(Time, usize, &GangKey, i64)> = Vec::new();
        for p in snap.pods.iter().filter(|p| p.is_pending() && !p.is_gated()) {
            let Some(m) = p.gang.as_ref().filter(|m| unplaced.contains(&m.gang)) else { continue };
            let g = p.requests.get(GPU);
            if g <= 0 || g > node_gpus {
                continue;
            }
            let r = rank.entry(&m.gang).or_default();
            pending.push((p.created, *r, &m.gang, g));
            *r += 1;
        }
        pending.sort();
        let first_fit = |free: &mut Vec<i64>, g: i64| -> bool {
            free.iter_mut().find(|f| **f >= g).map(|f| *f -= g).is_some()
        };
        let mut ask = 0u32;
        match a.mode {
            ScaleUp::PerPod => {
                for &(_, _, _, g) in &pending {
                    if !first_fit(&mut free, g) && self.size() + ask < a.max_nodes {
                        ask += 1;
                        free.push(node_gpus - g);
                    }
                }
            }
            ScaleUp::Atomic => {
                let mut gangs: Vec<&GangKey> = Vec::new();
                for &(_, _, gang, _) in &pending {
                    if !gangs.contains(&gang) {
                        gangs.push(gang);
                    }
                }
                for gang in gangs {
                    let mut trial = free.clone();
                    let mut extra: Vec<i64> = Vec::new();
                    for &(_, _, _, g) in pending.iter().filter(|(_, _, k, _)| *k == gang) {
                        if !first_fit(&mut trial, g) && !first_fit(&mut extra, g) {
                            extra.push(node_gpus - g);
                        }
                    }
                    let need = u32::try_from(extra.len()).unwrap_or(u32::MAX);
                    if self.size() + ask + need <= a.max_nodes {
                        ask += need;
                        trial.extend(extra);
                        free = trial;
                    }
                }
            }
        }
        for _ in 0..ask {
            self.added += 1;
            self.coming.push((t + a.delay_secs, format!("{}-{}", a.node.name, self.added)));
        }
    }

    /// Free GPUs on the pool's ready nodes.
    fn idle_gpus(&self, snap: &Snapshot) -> i64 {
        let mut idle = 0;
        for n in snap.nodes.iter().filter(|n| self.ready.contains_key(n.name.as_str())) {
            let used: i64 = snap
                .pods
                .iter()
                .filter(|p| p.uses_node() && p.node_name.as_deref() == Some(n.name.as_str()))
                .map(|p| p.requests.get(GPU))
                .sum();
            idle += (n.allocatable.get(GPU) - used).max(0);
        }
        idle
    }
}

fn one() -> u64 {
    1
}

/// One gang's fate in a simulation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GangReport {
    pub gang: GangKey,
    pub arrived_secs: u64,
    /// When its minimum was placed, if ever.
    pub started_secs: Option<u64>,
    pub finished_secs: Option<u64>,
    /// How many times it lost members to preemption.
    pub preempted: u32,
    /// Backfill: the first start time the scheduler expected for it while it waited (seconds
    /// after the simulation starts), if it got one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_expected_secs: Option<u64>,
    /// Backfill: it started on capacity held for a gang ahead of it.
    #[serde(default)]
    pub backfilled: bool,
}

impl GangReport {
    /// Time from arrival to placement.
    pub fn wait(&self) -> Option<Duration> {
        self.started_secs.map(|s| Duration::from_secs(s.saturating_sub(self.arrived_secs)))
    }
}

/// The result of a simulation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub gangs: Vec<GangReport>,
    /// Seconds simulated.
    pub elapsed_secs: u64,
    /// Mean fraction of allocatable GPUs in use, 0..=1 (of the scenario's own nodes; an
    /// autoscaled pool's are in `idle_gpu_hours`).
    pub gpu_utilisation: f64,
    /// Mean fraction of allocatable CPU in use, 0..=1.
    pub cpu_utilisation: f64,
    /// Mean number of free GPUs that no waiting gang's member shape could use.
    pub stranded_gpus: f64,
    /// Pods evicted by preemption.
    pub preemptions: u32,
    /// GPU-hours the autoscaled pool's nodes stood free (0 without a pool).
    #[serde(default)]
    pub idle_gpu_hours: f64,
    /// Nodes the pool added.
    #[serde(default)]
    pub nodes_added: u32,
}

/// Applies a plan made at `now` to a snapshot the way a cluster would: bound pods start running
/// (started at `now`), evicted pods go away, outcome states and reservations are handed to the
/// next cycle.
pub fn apply(snapshot: &mut Snapshot, plan: &Plan, now: Time) {
    // Pods change below: the usage carried with them is added up again by the next cycle.
    snapshot.usage = None;
    let bindings: HashMap<&PodKey, &str> = plan.bindings.iter().map(|b| (&b.pod, b.node.as_str())).collect();
    let evicted: BTreeSet<&PodKey> = plan.evictions.iter().map(|e| &e.pod).collect();
    let nominated: HashMap<&PodKey, &str> =
        plan.nominations.iter().map(|n| (&n.pod, n.node.as_str())).collect();
    snapshot.pods.retain(|p| !evicted.contains(&p.key));
    for p in &mut snapshot.pods {
        if let Some(node) = bindings.get(&p.key) {
            p.node_name = Some((*node).to_string());
            p.phase = PodPhase::Running;
            p.nominated_node = None;
            p.started = Some(now);
        } else if let Some(node) = nominated.get(&p.key) {
            p.nominated_node = Some((*node).to_string());
        }
    }
    for g in &mut snapshot.gangs {
        if let Some(o) = plan.outcome(&g.key) {
            g.state = o.state.clone();
        }
    }
    if !plan.keep.is_empty() {
        let keep: HashMap<&PodKey, &crate::decide::plan::Keep> =
            plan.keep.iter().map(|k| (&k.pod, k)).collect();
        for p in &mut snapshot.pods {
            if let Some(k) = keep.get(&p.key).filter(|k| k.uid == p.uid) {
                p.persisted = crate::read::model::Persisted::from_text(&k.text).map(Box::new);
            }
        }
    }
    snapshot.reservations = plan.reservations.clone();
}

/// Replays `scenario` with `config`.
///
/// Event-driven: after a cycle that changed nothing, time jumps to the next arrival, completion or
/// gang deadline (timeout, backoff, grace period) instead of ticking every `step_secs`.
pub fn run(scenario: &Scenario, config: &Config) -> Report {
    let step = scenario.step_secs.max(1);
    let mut snap =
        Snapshot { nodes: scenario.nodes.clone(), pods: scenario.background.clone(), ..Snapshot::default() };
    let mut order: Vec<usize> = (0..scenario.arrivals.len()).collect();
    order.sort_by_key(|&i| (scenario.arrivals[i].at_secs, i));
    let mut next_arrival = 0;
    let mut reports: Vec<GangReport> = scenario
        .arrivals
        .iter()
        .map(|a| GangReport {
            gang: a.gang.key.clone(),
            arrived_secs: a.at_secs,
            started_secs: None,
            finished_secs: None,
            preempted: 0,
            first_expected_secs: None,
            backfilled: false,
        })
        .collect();
    let index: HashMap<&GangKey, usize> =
        scenario.arrivals.iter().enumerate().map(|(i, a)| (&a.gang.key, i)).collect();
    // When each gang's current run ends (it runs once its minimum is placed).
    let mut running_until: HashMap<usize, u64> = HashMap::new();
    let total_work: u64 = scenario.arrivals.iter().map(|a| a.duration_secs).sum();
    let last_arrival = scenario.arrivals.iter().map(|a| a.at_secs).max().unwrap_or(0);
    let horizon = scenario.horizon_secs.unwrap_or(last_arrival + total_work + 3600);

    let alloc = |name: &str| -> i64 { scenario.nodes.iter().map(|n| n.allocatable.get(name)).sum() };
    let (gpu_total, cpu_total) = (alloc(GPU), alloc(crate::read::resources::CPU));
    let mut gpu_area = 0f64;
    let mut cpu_area = 0f64;
    let mut stranded_area = 0f64;
    let mut preemptions = 0u32;
    let mut pool = Pool::default();
    let mut idle_area = 0f64;
    let mut t = 0u64;
    loop {
        // Arrivals due now.
        while next_arrival < order.len() && scenario.arrivals[order[next_arrival]].at_secs <= t {
            let a = &scenario.arrivals[order[next_arrival]];
            let mut gang = a.gang.clone();
            gang.created = scenario.start.plus(Duration::from_secs(a.at_secs));
            snap.gangs.push(gang);
            for p in &a.pods {
                let mut p = p.clone();
                p.created = scenario.start.plus(Duration::from_secs(a.at_secs));
                snap.pods.push(p);
            }
            next_arrival += 1;
        }
        // Completions due now: the gang's pods succeed and leave.
        let done: Vec<usize> = running_until.iter().filter(|&(_, &end)| end <= t).map(|(&i, _)| i).collect();
        for i in done {
            running_until.remove(&i);
            reports[i].finished_secs = Some(t);
            let key = &scenario.arrivals[i].gang.key;
            snap.pods.retain(|p| p.gang.as_ref().is_none_or(|m| &m.gang != key));
            snap.gangs.retain(|g| &g.key != key);
        }

        // The pool after the completions: an emptied node starts its clock now.
        if let Some(a) = &scenario.autoscale {
            pool.settle(a, &mut snap, t);
        }
        let now = scenario.start.plus(Duration::from_secs(t));
        let plan = crate::decide::schedule::schedule(&snap, config, now);
        // Victims restart from scratch, as their controllers would recreate them.
        let mut restarted: BTreeSet<usize> = BTreeSet::new();
        for e in &plan.evictions {
            preemptions += u32::from(e.reason == crate::decide::plan::EvictionReason::Preempted);
            if let Some(&i) = e.gang.as_ref().and_then(|g| index.get(g)) {
                restarted.insert(i);
            }
        }
        apply(&mut snap, &plan, now);
        for &i in &restarted {
            reports[i].preempted += 1;
            running_until.remove(&i);
            let key = &scenario.arrivals[i].gang.key;
            let present: BTreeSet<PodKey> = snap.pods.iter().map(|p| p.key.clone()).collect();
            for p in &mut snap.pods {
                if p.gang.as_ref().is_some_and(|m| &m.gang == key) {
                    p.node_name = None;
                    p.phase = PodPhase::Pending;
                }
            }
            for p in &scenario.arrivals[i].pods {
                if !present.contains(&p.key) {
                    let mut p = p.clone();
                    p.created = now;
                    snap.pods.push(p);
                }
            }
            if let Some(g) = snap.gangs.iter_mut().find(|g| &g.key == key) {
                g.state = GangState::default();
            }
        }
        for o in &plan.outcomes {
            let Some(&i) = index.get(&o.gang) else { continue };
            if o.reason.is_satisfied() && !running_until.contains_key(&i) && !restarted.contains(&i) {
                reports[i].started_secs.get_or_insert(t);
                reports[i].backfilled |= o.backfilled;
                running_until.insert(i, t + scenario.arrivals[i].duration_secs);
            }
            if let Some(e) = o.expected_start
                && reports[i].started_secs.is_none()
            {
                reports[i].first_expected_secs.get_or_insert(e.since(scenario.start).as_secs());
            }
        }

        if let Some(a) = &scenario.autoscale {
            pool.grow(a, &snap, &plan, t);
        }

        let all_done = next_arrival == order.len() && reports.iter().all(|r| r.finished_secs.is_some());
        if all_done || t >= horizon {
            break;
        }
        let changed = !plan.bindings.is_empty() || !plan.evictions.is_empty() || !plan.nominations.is_empty();
        let mut next = if changed { t + step } else { u64::MAX };
        if let Some(a) = &scenario.autoscale {
            // The pool changes on its own: a node becomes ready, an empty one's time runs out.
            next = next.min(pool.coming.iter().map(|(at, _)| *at).min().unwrap_or(u64::MAX));
            for since in pool.ready.values().flatten() {
                let at = since + a.scale_down_secs;
                if at > t {
                    next = next.min(at);
                }
            }
        }
        if let Some(&i) = order.get(next_arrival) {
            next = next.min(scenario.arrivals[i].at_secs);
        }
        if let Some(&end) = running_until.values().min() {
            next = next.min(end);
        }
        for o in &plan.outcomes {
            for deadline in deadlines(&o.state, &snap, o, config) {
                let secs = deadline.since(scenario.start).as_secs();
                if secs > t {
                    next = next.min(secs);
                }
            }
        }
        let next = next.min(horizon).max(t + 1);
        let dt = (next - t) as f64;
        let (gpu_used, cpu_used, stranded) = usage(&snap);
        gpu_area += gpu_used as f64 * dt;
        cpu_area += cpu_used as f64 * dt;
        stranded_area += stranded as f64 * dt;
        idle_area += pool.idle_gpus(&snap) as f64 * dt;
        t = next;
    }
    let elapsed = t.max(1) as f64;
    let ratio = |area: f64, total: i64| if total > 0 { area / (total as f64 * elapsed) } else { 0.0 };
    Report {
        gangs: reports,
        elapsed_secs: t,
        gpu_utilisation: ratio(gpu_area, gpu_total),
        cpu_utilisation: ratio(cpu_area, cpu_total),
        stranded_gpus: stranded_area / elapsed,
        preemptions,
        idle_gpu_hours: idle_area / 3600.0,
        nodes_added: pool.added,
    }
}

/// The `nvidia.com/gpu` resource: what "GPU" means in reports.
pub const GPU: &str = "nvidia.com/gpu";

/// Times at which a gang's outcome may change without anything else happening.
fn deadlines(
    state: &GangState,
    snap: &Snapshot,
    o: &crate::decide::plan::Outcome,
    config: &Config,
) -> Vec<Time> {
    let gang = snap.gangs.iter().find(|g| g.key == o.gang);
    let mut out = Vec::new();
    out.extend(state.backoff_until);
    if let (Some(since), Some(t)) =
        (state.waiting_since, gang.and_then(|g| g.timeout).or(config.default_timeout))
    {
        out.push(since.plus(t));
    }
    if let Some(since) = state.degraded_since {
        out.push(since.plus(gang.and_then(|g| g.stale_grace).unwrap_or(config.stale_grace_period)));
    }
    out
}

/// GPUs and CPU in use, and stranded GPUs: free GPUs on nodes where no waiting member fits by GPU
/// count (counted only while GPU members wait).
fn usage(snap: &Snapshot) -> (i64, i64, i64) {
    let mut used: HashMap<&str, (i64, i64)> = HashMap::new();
    for p in snap.pods.iter().filter(|p| p.uses_node()) {
        if let Some(node) = p.node_name.as_deref() {
            let e = used.entry(node).or_default();
            e.0 += p.requests.get(GPU);
            e.1 += p.requests.get(crate::read::resources::CPU);
        }
    }
    let waiting: Vec<i64> =
        snap.pods.iter().filter(|p| p.is_pending()).map(|p| p.requests.get(GPU)).filter(|&g| g > 0).collect();
    let smallest = waiting.iter().copied().min();
    let (mut gpu, mut cpu, mut stranded) = (0, 0, 0);
    for n in &snap.nodes {
        let (g, c) = used.get(n.name.as_str()).copied().unwrap_or_default();
        gpu += g;
        cpu += c;
        let free = (n.allocatable.get(GPU) - g).max(0);
        if let Some(min) = smallest
            && free > 0
            && free < min
        {
            stranded += free;
        }
    }
    (gpu, cpu, stranded)
}

/// The replay `kubectl gang demo` shows for an autoscaling node pool, with `mode`: a pool of up to
/// 6 nodes of 8 GPUs (none at the start), each ready 5 minutes after it is asked for and removed
/// after 10 minutes empty; three gangs of 8-GPU members in namespace `ml`:
///
/// - `pretrain`, 8 members, at +0, for 1 h: more than the pool can ever hold;
/// - `finetune`, 4 members, at +1 min, for 1 h;
/// - `eval`, 2 members, at +2 min, for 30 min.
pub fn autoscaling_example(mode: ScaleUp, start: Time) -> Scenario {
    use crate::read::model::{Dialect, ObjectKey, Source};
    let member = |gang: &str, i: u32| gpu_member(gang, i, start);
    let arrival = |name: &str, members: u32, at_secs: u64, duration_secs: u64| Arrival {
        at_secs,
        duration_secs,
        gang: Gang::new(
            ObjectKey::new("ml", name),
            members,
            Source { dialect: Dialect::KubeGang, kind: "Gang".into() },
        ),
        pods: (0..members).map(|i| member(name, i)).collect(),
    };
    Scenario {
        nodes: vec![],
        background: vec![],
        arrivals: vec![
            arrival("pretrain", 8, 0, 3600),
            arrival("finetune", 4, 60, 3600),
            arrival("eval", 2, 120, 1800),
        ],
        start,
        step_secs: 10,
        horizon_secs: Some(3 * 3600),
        autoscale: Some(Autoscale {
            node: gpu_node("pool".into()),
            max_nodes: 6,
            delay_secs: 300,
            scale_down_secs: 600,
            mode,
        }),
    }
}

/// A node of 8 GPUs and 64 CPUs, as the examples' clusters have.
fn gpu_node(name: String) -> Node {
    use crate::read::resources::Resources;
    Node {
        name: name.into(),
        allocatable: Resources::new()
            .with(GPU, 8)
            .with(crate::read::resources::CPU, 64_000)
            .with("pods", 110),
        labels: Default::default(),
        taints: vec![],
        unschedulable: false,
        ready: true,
    }
}

/// Member `i` of gang `gang` (namespace `ml`), pending since `created`, asking 8 GPUs and 8 CPUs.
fn gpu_member(gang: &str, i: u32, created: Time) -> Pod {
    use crate::read::model::{Membership, ObjectKey, PreemptionPolicy};
    use crate::read::resources::Resources;
    Pod {
        key: ObjectKey::new("ml", format!("{gang}-{i}")),
        uid: format!("uid-{gang}-{i}").into(),
        requests: Resources::new().with(GPU, 8).with(crate::read::resources::CPU, 8_000),
        node_selector: Default::default(),
        affinity: vec![],
        tolerations: vec![],
        priority: 0,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        phase: PodPhase::Pending,
        node_name: None,
        nominated_node: None,
        created,
        deleting: false,
        scheduler_name: crate::read::labels::SCHEDULER_NAME.into(),
        gang: Some(Membership { gang: ObjectKey::new("ml", gang), subgroup: None }),
        failure: None,
        scheduling_gates: vec![],
        labels: Default::default(),
        exclusive_topology: None,
        persisted: None,
        terms: None,
        volumes: Vec::new(),
        resource_claims: Vec::new(),
        started: None,
        time_limit: None,
    }
}

/// A mixed workload on `nodes` nodes of 8 GPUs for `hours` simulated hours, the shape backfill
/// exists for (a pseudo-random stream, the same for the same arguments):
///
/// - small jobs, one every 5 s on average per 1,000 nodes (with the big gangs, a little more
///   than the nodes can run: the queue is never empty): 1–4 members of 8 GPUs, running
///   10–60 min, each stating a time limit of its run plus half, rounded up to 5 min (users
///   overestimate);
/// - a big gang (`big-N`) every hour from the first: `nodes / 16` members (64 on 1,000 nodes)
///   of 8 GPUs, running 1 h, limit 90 min.
///
/// Every gang has the same priority: the order is arrival. Without holds, a big gang waits until
/// its members fit at once, while the small jobs behind it take each node as it frees.
pub fn backfill_trace(nodes: u32, hours: u32, start: Time) -> Scenario {
    use crate::read::model::{Dialect, ObjectKey, Source};
    let node = |i: u32| gpu_node(format!("gpu-{i}"));
    let member = |gang: &str, i: u32, limit: u64| Pod {
        time_limit: Some(Duration::from_secs(limit)),
        ..gpu_member(gang, i, start)
    };
    let arrival = |name: String, members: u32, at_secs: u64, duration_secs: u64, limit: u64| {
        let mut gang = Gang::new(
            ObjectKey::new("ml", &name),
            members,
            Source { dialect: Dialect::KubeGang, kind: "Gang".into() },
        );
        gang.time_limit = Some(Duration::from_secs(limit));
        Arrival {
            at_secs,
            duration_secs,
            pods: (0..members).map(|i| member(&name, i, limit)).collect(),
            gang,
        }
    };
    // xorshift64*: a fixed stream, no dependency.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ u64::from(nodes) << 32 ^ u64::from(hours);
    let mut next = move |below: u64| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d) % below.max(1)
    };
    let horizon = u64::from(hours) * 3600;
    let mean_gap_ms = 5_000 * 1_000 / u64::from(nodes.max(1));
    let mut arrivals = Vec::new();
    let (mut t_ms, mut n) = (0u64, 0u32);
    while t_ms / 1000 < horizon {
        t_ms += 1 + next(2 * mean_gap_ms);
        let duration = 600 + 60 * next(51);
        let limit = (duration * 3 / 2).div_ceil(300) * 300;
        arrivals.push(arrival(format!("job-{n}"), 1 + next(4) as u32, t_ms / 1000, duration, limit));
        n += 1;
    }
    for h in 1..hours {
        arrivals.push(arrival(format!("big-{h}"), (nodes / 16).max(2), u64::from(h) * 3600, 3600, 5400));
    }
    arrivals.sort_by_key(|a| a.at_secs);
    Scenario {
        nodes: (0..nodes).map(node).collect(),
        background: vec![],
        arrivals,
        start,
        step_secs: 10,
        horizon_secs: Some(horizon + 6 * 3600),
        autoscale: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starts(r: &Report) -> Vec<(String, Option<u64>)> {
        r.gangs.iter().map(|g| (g.gang.name.to_string(), g.started_secs)).collect()
    }

    #[test]
    fn atomic_scale_up_leaves_no_gpus_idle_for_a_gang_that_cannot_fit() {
        let start = Time::from_secs(1_000_000);
        let per_pod = run(&autoscaling_example(ScaleUp::PerPod, start), &Config::default());
        let atomic = run(&autoscaling_example(ScaleUp::Atomic, start), &Config::default());
        // One pod at a time: pretrain's members get the pool's 6 nodes first; it never fits, and
        // the others run on the nodes it was given.
        assert_eq!(
            starts(&per_pod),
            [("pretrain".into(), None), ("finetune".into(), Some(300)), ("eval".into(), Some(300))]
        );
        // Atomic: pretrain asks for nothing the pool cannot give; the others get their own nodes.
        assert_eq!(
            starts(&atomic),
            [("pretrain".into(), None), ("finetune".into(), Some(360)), ("eval".into(), Some(420))]
        );
        // Per pod, the pool keeps adding nodes for pretrain that sit empty until removed, and adds
        // them again: 58 nodes, 69⅓ idle GPU-hours. Atomic: 6 nodes, idle only while an emptied
        // node waits out its 10 minutes (2 × 8 GPUs after eval, 4 × 8 after finetune): 8 GPU-hours.
        assert_eq!((per_pod.nodes_added, atomic.nodes_added), (58, 6));
        assert!((per_pod.idle_gpu_hours - 208.0 / 3.0).abs() < 1e-9, "{per_pod:?}");
        assert!((atomic.idle_gpu_hours - 8.0).abs() < 1e-9, "{atomic:?}");
    }
}
