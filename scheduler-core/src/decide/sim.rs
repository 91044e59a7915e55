//! Simulation over time: replay gang arrivals and run durations through the same [`crate::schedule`]
//! the scheduler runs, and report waits, utilisation, stranded GPUs and preemptions.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use std::collections::{BTreeSet, HashMap};

use crate::model::{Gang, GangKey, GangState, Node, Pod, PodKey, PodPhase, Snapshot, Time};
use crate::plan::Plan;

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
    /// Mean fraction of allocatable GPUs in use, 0..=1.
    pub gpu_utilisation: f64,
    /// Mean fraction of allocatable CPU in use, 0..=1.
    pub cpu_utilisation: f64,
    /// Mean number of free GPUs that no waiting gang's member shape could use.
    pub stranded_gpus: f64,
    /// Pods evicted by preemption.
    pub preemptions: u32,
}

/// Applies a plan to a snapshot the way a cluster would: bound pods start running, evicted pods go
/// away, outcome states and reservations are handed to the next cycle.
pub fn apply(snapshot: &mut Snapshot, plan: &Plan) {
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
        } else if let Some(node) = nominated.get(&p.key) {
            p.nominated_node = Some((*node).to_string());
        }
    }
    for g in &mut snapshot.gangs {
        if let Some(o) = plan.outcome(&g.key) {
            g.state = o.state.clone();
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
    let (gpu_total, cpu_total) = (alloc(GPU), alloc(crate::resources::CPU));
    let mut gpu_area = 0f64;
    let mut cpu_area = 0f64;
    let mut stranded_area = 0f64;
    let mut preemptions = 0u32;
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

        let now = scenario.start.plus(Duration::from_secs(t));
        let plan = crate::schedule(&snap, config, now);
        // Victims restart from scratch, as their controllers would recreate them.
        let mut restarted: BTreeSet<usize> = BTreeSet::new();
        for e in &plan.evictions {
            preemptions += u32::from(e.reason == crate::plan::EvictionReason::Preempted);
            if let Some(&i) = e.gang.as_ref().and_then(|g| index.get(g)) {
                restarted.insert(i);
            }
        }
        apply(&mut snap, &plan);
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
                running_until.insert(i, t + scenario.arrivals[i].duration_secs);
            }
        }

        let all_done = next_arrival == order.len() && reports.iter().all(|r| r.finished_secs.is_some());
        if all_done || t >= horizon {
            break;
        }
        let changed = !plan.bindings.is_empty() || !plan.evictions.is_empty() || !plan.nominations.is_empty();
        let mut next = if changed { t + step } else { u64::MAX };
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
    }
}

/// The `nvidia.com/gpu` resource: what "GPU" means in reports.
pub const GPU: &str = "nvidia.com/gpu";

/// Times at which a gang's outcome may change without anything else happening.
fn deadlines(state: &GangState, snap: &Snapshot, o: &crate::plan::Outcome, config: &Config) -> Vec<Time> {
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
            e.1 += p.requests.get(crate::resources::CPU);
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
