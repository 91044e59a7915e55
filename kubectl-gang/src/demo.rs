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
        (0, "A PyTorchJob that fits: 4 members x 8 GPUs, placed whole"),
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

#[cfg(test)]
mod tests {
    use super::*;

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
