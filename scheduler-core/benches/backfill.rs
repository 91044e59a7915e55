//! Backfill on a trace (`scheduler_core::replay::backfill_trace`): the same mixed workload —
//! a 64-node gang every hour among a stream of 1–4-node jobs with time limits, on 1,000 nodes of
//! 8 GPUs over 8 simulated hours — replayed through the real cycle without holds and with the
//! policy `backfill: {}`. Prints, for each: the big gangs' waits, the small jobs' mean and 95th
//! percentile wait, GPU utilisation, the jobs started on held capacity, whether each gang with a
//! hold started by the first time it was promised (plus the resolution), and the wall time of the
//! replay (three runs; the simulation itself is deterministic).
//!
//! `BACKFILL_NODES` and `BACKFILL_HOURS` change the size (defaults 1,000 and 8).

use std::time::{Duration, Instant};

use scheduler_core::Config;
use scheduler_core::config::Backfill;
use scheduler_core::model::Time;
use scheduler_core::replay::{Report, backfill_trace, run};

fn env(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn percentile(mut v: Vec<u64>, p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn summary(name: &str, r: &Report, resolution: Duration, wall: &[Duration]) {
    let wait = |g: &scheduler_core::replay::GangReport| g.wait().map(|w| w.as_secs());
    let (big, small): (Vec<_>, Vec<_>) = r.gangs.iter().partition(|g| g.gang.name.starts_with("big-"));
    let big_waits: Vec<String> =
        big.iter().map(|g| wait(g).map_or_else(|| "never".to_string(), |w| format!("{}m", w / 60))).collect();
    let small_waits: Vec<u64> = small.iter().filter_map(|g| wait(g)).collect();
    let never = small.iter().filter(|g| g.started_secs.is_none()).count();
    let mean = small_waits.iter().sum::<u64>() as f64 / small_waits.len().max(1) as f64;
    let promised: Vec<_> = r.gangs.iter().filter(|g| g.first_expected_secs.is_some()).collect();
    let kept = promised
        .iter()
        .filter(|g| {
            g.started_secs.is_some_and(|s| s <= g.first_expected_secs.unwrap_or(0) + resolution.as_secs())
        })
        .count();
    let walls: Vec<String> = wall.iter().map(|d| format!("{:.1}", d.as_secs_f64())).collect();
    println!("{name}:");
    println!("  big gangs' waits:        {}", big_waits.join(", "));
    println!(
        "  small jobs' waits:       mean {:.0}s, p95 {}s, {} of {} never started",
        mean,
        percentile(small_waits, 0.95),
        never,
        small.len()
    );
    println!("  GPU utilisation:         {:.1}%", r.gpu_utilisation * 100.0);
    println!("  started on held room:    {}", r.gangs.iter().filter(|g| g.backfilled).count());
    println!("  started by the promise:  {kept} of {} gangs given an expected start", promised.len());
    println!("  simulated:               {:.1} h", r.elapsed_secs as f64 / 3600.0);
    println!("  replay wall time (s):    {}", walls.join(", "));
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not used.
    let nodes = env("BACKFILL_NODES", 1_000);
    let hours = env("BACKFILL_HOURS", 8);
    let start = Time::from_secs(1_800_000_000);
    let scenario = backfill_trace(nodes, hours, start);
    println!(
        "trace: {nodes} nodes, {hours} h, {} arrivals ({} big gangs)\n",
        scenario.arrivals.len(),
        scenario.arrivals.iter().filter(|a| a.gang.key.name.starts_with("big-")).count()
    );
    let off = Config { preemption: false, ..Config::default() };
    let on = Config { backfill: Some(Backfill::default()), ..off.clone() };
    let resolution = Backfill::default().resolution;
    for (name, config) in [("without holds", &off), ("backfill: {}", &on)] {
        let mut wall = Vec::new();
        let mut report = None;
        for _ in 0..3 {
            let begun = Instant::now();
            let r = run(&scenario, config);
            wall.push(begun.elapsed());
            if let Some(prev) = &report {
                assert_eq!(prev, &r, "the replay is deterministic");
            }
            report = Some(r);
        }
        if let Some(r) = report {
            summary(name, &r, resolution, &wall);
        }
    }
}
