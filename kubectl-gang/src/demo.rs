//! `kubectl gang demo`: a tour on an embedded example cluster (`examples/cluster.yaml`) with the
//! workloads in `examples/workloads/` — the same code paths as `simulate`, then a replay over time
//! with the core's `replay`.

use std::fmt::Write as _;

use scheduler_core::cluster::Cluster;
use scheduler_core::model::{GangKey, PodPhase};
use scheduler_core::replay::{self, Arrival, ScaleUp, Scenario};
use scheduler_core::{Config, Time};
use serde_json::Value;

use crate::input;
use crate::simulate::{Prepared, Simulation, prepare, render, simulate};
use crate::table::Grid;

/// The example cluster.
pub const CLUSTER: &str = include_str!("../../examples/cluster.yaml");

/// The example workloads: (file, text, seconds after start it arrives in the replay, run time).
pub const WORKLOADS: [(&str, &str, u64, u64); 5] = [
    ("1-pytorchjob-fits.yaml", include_str!("../../examples/workloads/1-pytorchjob-fits.yaml"), 0, 2400),
    ("2-job-too-big.yaml", include_str!("../../examples/workloads/2-job-too-big.yaml"), 60, 3600),
    (
        "3-hierarchical-gang.yaml",
        include_str!("../../examples/workloads/3-hierarchical-gang.yaml"),
        120,
        1800,
    ),
    ("4-topology-gang.yaml", include_str!("../../examples/workloads/4-topology-gang.yaml"), 180, 1200),
    ("5-urgent-eval.yaml", include_str!("../../examples/workloads/5-urgent-eval.yaml"), 300, 600),
];

/// The demo's fixed clock, so its output is the same on every machine.
pub const NOW: &str = "2026-11-22T09:00:00Z";

/// Demo options.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub color: bool,
}

fn cluster() -> anyhow::Result<Cluster> {
    let mut c = Cluster::new();
    for s in input::parse_text("examples/cluster.yaml", CLUSTER)? {
        c.push(s.object).map_err(|e| anyhow::anyhow!("examples/cluster.yaml: {e}"))?;
    }
    Ok(c)
}

fn workload(i: usize, now: Time) -> anyhow::Result<Prepared> {
    let (file, text, _, _) = WORKLOADS[i];
    let objects = input::parse_text(&format!("examples/workloads/{file}"), text)?;
    let p = prepare(&objects, "default", now);
    anyhow::ensure!(p.errors.is_empty(), "examples/workloads/{file}: {}", p.errors.join("; "));
    Ok(p)
}

/// Adds a simulated workload to `cluster` as if it had been bound and started.
fn start(cluster: &mut Cluster, prepared: &Prepared, sim: &Simulation) -> anyhow::Result<()> {
    for o in &prepared.objects {
        let mut o = o.decode();
        let key = format!(
            "{}/{}",
            o.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(""),
            o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
        );
        if let Some(place) = sim.gangs.iter().flat_map(|g| &g.placements).find(|p| p.pod == key) {
            o["spec"]["nodeName"] = Value::String(place.node.clone());
            o["status"]["phase"] = Value::String("Running".into());
        }
        cluster.push(o).map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
    }
    Ok(())
}

fn heading(out: &mut String, text: &str) {
    let _ = writeln!(out, "\n== {text}\n");
}

/// Runs the tour and returns what it prints.
pub fn run(opts: &Options) -> anyhow::Result<String> {
    let now = Time::parse_rfc3339(NOW).map_err(anyhow::Error::msg)?;
    let config = Config::default();
    let base = cluster()?;
    let mut out = String::new();
    out.push_str("kube-gang demo: an embedded example cluster, no real cluster needed.\n");
    out.push_str("Each step runs the scheduler's own cycle, exactly as `kubectl gang simulate` does:\n");
    out.push_str("  kubectl-gang simulate --cluster examples/cluster.yaml -f examples/workloads/<file>\n");

    heading(&mut out, "The cluster (examples/cluster.yaml)");
    out.push_str(&nodes_table(&base, opts.color));

    let steps = [
        (0, "An elastic PyTorchJob that fits: 4 workers x 8 GPUs (it can run with 2), placed whole"),
        (1, "A Job too big for the cluster: 8 members x 8 GPUs. Nothing is bound, and here is why"),
        (2, "A hierarchical gang: 2 prefill (4 GPUs) + 4 decode (2 GPUs) members that start together"),
        (3, "A topology-constrained gang: 3 members x 8 GPUs within one rack"),
    ];
    let mut fits = Vec::new();
    for (i, title) in steps {
        heading(&mut out, &format!("{}. {title} ({})", i + 1, WORKLOADS[i].0));
        let prepared = workload(i, now)?;
        let sim = simulate(&base, &prepared, &config, now);
        out.push_str(&render(&sim, false, opts.color, false));
        fits.push((prepared, sim));
    }

    heading(
        &mut out,
        &format!(
            "5. An urgent gang on a busy cluster: 2 members x 8 GPUs at priority 10000 ({})",
            WORKLOADS[4].0
        ),
    );
    // Start steps 1 and 3 one after the other, each placed on the cluster the previous one left.
    let mut busy = base.clone();
    for i in [0, 2] {
        let prepared = &fits[i].0;
        let sim = simulate(&busy, prepared, &config, now);
        anyhow::ensure!(sim.gangs.iter().all(|g| g.schedulable), "{} no longer fits", WORKLOADS[i].0);
        start(&mut busy, prepared, &sim)?;
    }
    out.push_str("With bert-large and llm-serving running (steps 1 and 3):\n\n");
    out.push_str(&nodes_table(&busy, opts.color));
    out.push('\n');
    let urgent = workload(4, now)?;
    let sim = simulate(&busy, &urgent, &config, now);
    out.push_str(&render(&sim, false, opts.color, false));

    heading(&mut out, "6. A replay over time: the five workloads arrive one after another");
    out.push_str(&replay(&base, &config, now, opts.color)?);

    heading(&mut out, "7. An autoscaling node pool: one pod at a time, or the whole gang at once");
    out.push_str(&autoscaling(&config, now, opts.color));

    heading(&mut out, "8. Big gangs among small jobs: without holds, and with backfill");
    out.push_str(&backfill(&config, now, opts.color));
    out.push_str("\nNext: `kubectl-gang --help`, and README.md to install the scheduler and the webhook.\n");
    Ok(out)
}

fn nodes_table(cluster: &Cluster, color: bool) -> String {
    let snap = cluster.snapshot().snapshot;
    let mut grid = Grid::new(&["NODE", "RACK", "GPUS FREE", "CPU FREE", "PODS", "TAINTS"]);
    for n in &snap.nodes {
        let on: Vec<_> =
            snap.pods.iter().filter(|p| p.uses_node() && p.node_name.as_deref() == Some(&n.name)).collect();
        let used = |r: &str| on.iter().map(|p| p.requests.get(r)).sum::<i64>();
        let gpus = n.allocatable.get(replay::GPU);
        let gpu_cell =
            if gpus == 0 { "-".to_string() } else { format!("{}/{gpus}", gpus - used(replay::GPU)) };
        let cpu_free = (n.allocatable.get("cpu") - used("cpu")) / 1000;
        let taints: Vec<String> = n
            .taints
            .iter()
            .map(|t| format!("{}={}:{:?}", t.key, t.value.clone().unwrap_or_default(), t.effect))
            .collect();
        grid.row([
            n.name.to_string(),
            n.labels.get("kube-gang.io/rack").cloned().unwrap_or_else(|| "-".into()),
            gpu_cell,
            cpu_free.to_string(),
            on.len().to_string(),
            if taints.is_empty() { "-".into() } else { taints.join(",") },
        ]);
    }
    grid.render(false, color, 0)
}

fn replay(base: &Cluster, config: &Config, now: Time, color: bool) -> anyhow::Result<String> {
    let snap = base.snapshot().snapshot;
    let mut scenario = Scenario {
        nodes: snap.nodes.clone(),
        background: snap.pods.iter().filter(|p| p.uses_node()).cloned().collect(),
        arrivals: Vec::new(),
        start: now,
        step_secs: 10,
        horizon_secs: Some(2 * 3600),
        autoscale: None,
    };
    for (i, (_, _, at, duration)) in WORKLOADS.iter().enumerate() {
        let arrival = now.plus(std::time::Duration::from_secs(*at));
        let prepared = workload(i, arrival)?;
        let mut c = base.clone();
        for o in &prepared.objects {
            c.push(o.decode()).map_err(|e| anyhow::anyhow!("{}: {e}", WORKLOADS[i].0))?;
        }
        let s = c.snapshot().snapshot;
        let keys: Vec<GangKey> = s
            .pods
            .iter()
            .filter(|p| prepared.pods.contains(&(p.key.namespace.to_string(), p.key.name.to_string())))
            .filter_map(|p| p.gang.as_ref().map(|m| m.gang.clone()))
            .collect();
        let Some(key) = keys.first() else { continue };
        let Some(gang) = s.gangs.iter().find(|g| &g.key == key) else { continue };
        let pods = s
            .pods
            .iter()
            .filter(|p| p.gang.as_ref().is_some_and(|m| &m.gang == key) && p.phase == PodPhase::Pending)
            .cloned()
            .collect();
        scenario.arrivals.push(Arrival { at_secs: *at, duration_secs: *duration, gang: gang.clone(), pods });
    }
    let report = replay::run(&scenario, config);
    let mut grid = Grid::new(&["GANG", "ARRIVES", "STARTS", "WAITS", "RUNS FOR", "PREEMPTED"]);
    let mmss = |s: u64| format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
    for (g, a) in report.gangs.iter().zip(&scenario.arrivals) {
        grid.row([
            g.gang.to_string(),
            format!("+{}", mmss(g.arrived_secs)),
            g.started_secs.map_or_else(|| "never".into(), |s| format!("+{}", mmss(s))),
            g.wait().map_or_else(|| "-".into(), |w| mmss(w.as_secs())),
            mmss(a.duration_secs),
            g.preempted.to_string(),
        ]);
    }
    let mut out = grid.render(false, color, 0);
    let _ = writeln!(
        out,
        "\nOver {}: GPU utilisation {:.0}%, CPU utilisation {:.0}%, {:.1} GPUs stranded on average, {} pods preempted.",
        mmss(report.elapsed_secs),
        report.gpu_utilisation * 100.0,
        report.cpu_utilisation * 100.0,
        report.stranded_gpus,
        report.preemptions
    );
    Ok(out)
}

/// The same gangs replayed twice on an autoscaled pool (`scheduler_core::replay::autoscaling_example`):
/// one pending pod at a time, and atomic scale-up; time-to-start and idle GPU-hours side by side.
pub fn autoscaling(config: &Config, now: Time, color: bool) -> String {
    let per_pod_scenario = replay::autoscaling_example(ScaleUp::PerPod, now);
    let per_pod = replay::run(&per_pod_scenario, config);
    let atomic = replay::run(&replay::autoscaling_example(ScaleUp::Atomic, now), config);
    let mut out = String::new();
    if let Some(a) = &per_pod_scenario.autoscale {
        let _ = writeln!(
            out,
            "A pool of up to {} nodes of {} GPUs, none at the start; a node is ready {} min after it is asked for\n\
             and removed after {} min empty. One pod at a time: each pending member with no room gets a node\n\
             of its own (as a cluster autoscaler sees pods). Atomic (a best-effort-atomic-scale-up\n\
             ProvisioningRequest): a gang gets nodes for all its members at once, or none. Same gangs, same\n\
             scheduler, in both.\n",
            a.max_nodes,
            a.node.allocatable.get(replay::GPU),
            a.delay_secs / 60,
            a.scale_down_secs / 60
        );
    }
    let mmss = |s: u64| format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
    let wait = |g: &replay::GangReport| g.wait().map_or_else(|| "never".into(), |w| mmss(w.as_secs()));
    let mut grid = Grid::new(&[
        "GANG",
        "MEMBERS",
        "ARRIVES",
        "TIME TO START (ONE POD AT A TIME)",
        "TIME TO START (ATOMIC)",
    ]);
    for ((p, a), arrival) in per_pod.gangs.iter().zip(&atomic.gangs).zip(&per_pod_scenario.arrivals) {
        grid.row([
            p.gang.to_string(),
            format!("{} x 8 GPUs", arrival.pods.len()),
            format!("+{}", mmss(p.arrived_secs)),
            wait(p),
            wait(a),
        ]);
    }
    out.push_str(&grid.render(false, color, 0));
    out.push('\n');
    let mut totals = Grid::new(&["SCALE-UP", "NODES ADDED", "IDLE GPU-HOURS"]);
    for (name, r) in [("one pod at a time", &per_pod), ("atomic", &atomic)] {
        totals.row([name.to_string(), r.nodes_added.to_string(), format!("{:.1}", r.idle_gpu_hours)]);
    }
    out.push_str(&totals.render(false, color, 0));
    let _ = writeln!(
        out,
        "\nOver {}. Idle GPU-hours: GPUs of the pool's nodes with nothing running on them.",
        mmss(per_pod.elapsed_secs)
    );
    out
}

/// Nodes and hours of the demo's backfill trace (`scheduler_core::replay::backfill_trace`).
const BACKFILL_NODES: u32 = 32;
const BACKFILL_HOURS: u32 = 4;
/// Members of each big gang (of 8 GPUs each): half the nodes.
const BACKFILL_BIG: u32 = 16;
/// Minutes per column of the chart, and the hours it spans (the stream, then its queue draining).
const CHART_MINUTES: u64 = 6;
const CHART_HOURS: u64 = 7;

/// The same stream of small jobs and big gangs replayed twice — the scheduler as it is, and with
/// the policy's `backfill: {}` — the big gangs' waits, the small jobs', utilisation and what
/// started on held capacity side by side, and GPUs in use over time as a chart.
pub fn backfill(config: &Config, now: Time, color: bool) -> String {
    let mut scenario = replay::backfill_trace(BACKFILL_NODES, BACKFILL_HOURS, now);
    // The trace's big gangs are a sixteenth of the nodes (what the bench replays on 1,000):
    // here half of them, so a small cluster shows what a big one does.
    for a in scenario.arrivals.iter_mut().filter(|a| a.gang.key.name.starts_with("big-")) {
        let Some(first) = a.pods.first().cloned() else { continue };
        a.pods = (0..BACKFILL_BIG)
            .map(|i| {
                let mut p = first.clone();
                let name = format!("{}-{i}", a.gang.key.name);
                p.uid = format!("{}/{name}", a.gang.key.namespace).into();
                p.key = scheduler_core::model::PodKey::new(a.gang.key.namespace.as_str(), &name);
                p
            })
            .collect();
        a.gang.min_member = BACKFILL_BIG;
    }
    let with = Config { backfill: Some(scheduler_core::config::Backfill::default()), ..config.clone() };
    let runs = [
        ("without holds", replay::run(&scenario, &Config { backfill: None, ..config.clone() })),
        ("backfill: {}", replay::run(&scenario, &with)),
    ];
    let big = |name: &str| name.starts_with("big-");
    let members: std::collections::HashMap<&GangKey, usize> =
        scenario.arrivals.iter().map(|a| (&a.gang.key, a.pods.len())).collect();
    let hms = |s: u64| format!("{}:{:02}", s / 3600, (s / 60) % 60);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{BACKFILL_NODES} nodes of 8 GPUs, {BACKFILL_HOURS} hours: a stream of 1-4 node jobs (10-60 min, each with a\n\
         time limit) arriving a little faster than the nodes run them, and every hour a gang of {}\n\
         nodes. Without holds a big gang waits until its members fit at once while the small jobs\n\
         behind it take each node as it frees. With backfill the first gangs in line that cannot\n\
         start get nodes held from when running jobs' limits end; a job behind them starts on held\n\
         nodes only if its limit ends it first. Same stream, same scheduler, in both.\n",
        BACKFILL_BIG
    );
    let mut grid = Grid::new(&[
        "RUN",
        "BIG GANGS WAIT",
        "SMALL JOBS WAIT (MEAN)",
        "GPU UTILISATION",
        "STARTED ON HELD NODES",
    ]);
    for (name, r) in &runs {
        let waits: Vec<String> = r
            .gangs
            .iter()
            .filter(|g| big(&g.gang.name))
            .map(|g| g.wait().map_or_else(|| "never".into(), |w| hms(w.as_secs())))
            .collect();
        let small: Vec<u64> = r
            .gangs
            .iter()
            .filter(|g| !big(&g.gang.name))
            .filter_map(|g| g.wait().map(|w| w.as_secs()))
            .collect();
        let mean = small.iter().sum::<u64>() / (small.len().max(1) as u64);
        // Jobs that never started are not in the mean: said beside it.
        let never = r.gangs.iter().filter(|g| !big(&g.gang.name) && g.started_secs.is_none()).count();
        grid.row([
            name.to_string(),
            waits.join(", "),
            if never == 0 { hms(mean) } else { format!("{} ({never} never started)", hms(mean)) },
            format!("{:.0}%", r.gpu_utilisation * 100.0),
            r.gangs.iter().filter(|g| g.backfilled).count().to_string(),
        ]);
    }
    out.push_str(&grid.render(false, color, 0));
    // GPUs in use per column (its middle), from each gang's start and end; ▲ where a big gang starts.
    let total = f64::from(BACKFILL_NODES * 8);
    let columns = CHART_HOURS * 60 / CHART_MINUTES;
    let _ = writeln!(
        out,
        "\nGPUs in use, one column per {CHART_MINUTES} min (blank none, ▁ under 1/7 … ▇ under all, █ all);\n\
         ▲ a big gang starts:\n"
    );
    for (name, r) in &runs {
        let mut bars = String::new();
        let mut starts = String::new();
        for c in 0..columns {
            let (from, to) = (c * CHART_MINUTES * 60, (c + 1) * CHART_MINUTES * 60);
            let mid = from + CHART_MINUTES * 30;
            let busy: usize = r
                .gangs
                .iter()
                .filter(|g| {
                    g.started_secs.is_some_and(|s| s <= mid) && g.finished_secs.is_none_or(|f| f > mid)
                })
                .map(|g| members.get(&g.gang).copied().unwrap_or(0) * 8)
                .sum();
            // Seven steps below full, so a column short of a node shows it; full alone is █.
            const LEVELS: [char; 7] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇'];
            bars.push(match busy {
                0 => ' ',
                b if b as f64 >= total => '█',
                b => LEVELS[((b as f64 / total) * 7.0) as usize],
            });
            let started = r
                .gangs
                .iter()
                .any(|g| big(&g.gang.name) && g.started_secs.is_some_and(|s| s >= from && s < to));
            starts.push(if started { '▲' } else { ' ' });
        }
        let _ = writeln!(out, "  {name:<14} {}", bars.trim_end());
        let _ = writeln!(out, "  {:<14} {}", "", starts.trim_end());
    }
    let per_hour = usize::try_from(60 / CHART_MINUTES).unwrap_or(10);
    let mut axis = String::new();
    for h in 0..=CHART_HOURS {
        let label = format!("{h}h");
        let at = usize::try_from(h).unwrap_or(0) * per_hour;
        while axis.chars().count() < at {
            axis.push(' ');
        }
        axis.push_str(&label);
    }
    let _ = writeln!(out, "  {:<14} {axis}", "");
    let _ = writeln!(
        out,
        "\nThe stream stops arriving at {BACKFILL_HOURS}h. Backfill trades the small jobs' waits for the big gangs':\n\
         each starts when the nodes held for it are free, not when the queue behind it drains."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo's backfill step tells the story it tells: every big gang starts sooner with
    /// backfill than without, and some jobs start on held nodes.
    #[test]
    fn the_backfill_step_starts_every_big_gang_sooner() {
        let now = Time::parse_rfc3339(NOW).unwrap();
        let text = backfill(&Config::default(), now, false);
        let row = |run: &str| {
            let line = text.lines().find(|l| l.starts_with(run)).unwrap_or_else(|| panic!("{text}"));
            let waits = line[run.len()..].trim_start().split("   ").next().unwrap().to_string();
            // "never" is longer than any wait.
            waits
                .split(", ")
                .map(|w| match w.split_once(':') {
                    Some((h, m)) => h.parse::<u64>().unwrap() * 60 + m.parse::<u64>().unwrap(),
                    None => u64::MAX,
                })
                .collect::<Vec<_>>()
        };
        let (without, with) = (row("without holds"), row("backfill: {}"));
        assert_eq!(without.len(), 3, "{text}");
        assert!(without.iter().zip(&with).all(|(a, b)| b < a), "{without:?} {with:?}\n{text}");
        let held = text.lines().find(|l| l.starts_with("backfill: {}")).unwrap();
        assert!(!held.trim_end().ends_with(" 0"), "something started on held nodes: {held}");
    }

    #[test]
    fn every_example_reads_and_expands() {
        let now = Time::parse_rfc3339(NOW).unwrap();
        for (i, (file, ..)) in WORKLOADS.iter().enumerate() {
            let p = workload(i, now).unwrap();
            assert!(!p.pods.is_empty(), "{file} creates pods");
            assert!(p.warnings.is_empty(), "{file}: {:?}", p.warnings);
        }
        let snap = cluster().unwrap().snapshot();
        assert!(snap.problems.is_empty(), "{:?}", snap.problems);
        assert_eq!(snap.snapshot.nodes.len(), 12);
    }

    #[test]
    fn the_autoscaling_table_shows_both_modes_from_the_same_sim() {
        let now = Time::parse_rfc3339(NOW).unwrap();
        let text = autoscaling(&Config::default(), now, false);
        let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
        let row = |gang: &str| lines.iter().find(|l| l.starts_with(gang)).copied().unwrap_or_default();
        let cells = |line: &str| {
            line.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect::<Vec<_>>()
        };
        assert_eq!(cells(row("ml/pretrain")), ["ml/pretrain", "8 x 8 GPUs", "+00:00:00", "never", "never"]);
        assert_eq!(
            cells(row("ml/finetune")),
            ["ml/finetune", "4 x 8 GPUs", "+00:01:00", "00:04:00", "00:05:00"]
        );
        assert_eq!(cells(row("ml/eval")), ["ml/eval", "2 x 8 GPUs", "+00:02:00", "00:03:00", "00:05:00"]);
        assert_eq!(cells(row("one pod at a time")), ["one pod at a time", "58", "69.3"]);
        assert_eq!(cells(row("atomic")), ["atomic", "6", "8.0"]);
    }
}
