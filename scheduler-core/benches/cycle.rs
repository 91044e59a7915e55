//! The cost of one scheduling cycle at cluster scale.
//!
//! Run: `cargo bench -p scheduler-core --bench cycle` (add `-- --quick` for a fast look). Each case
//! builds a synthetic cluster — GPU nodes in racks, running pods, pending gangs — and times
//! `schedule(snapshot, config, now)` alone. Snapshots carry their node usage, as the scheduler's
//! (`cluster::Live`) and the one-pass assembly's do.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use scheduler_core::model::*;
use scheduler_core::resources::Resources;
use scheduler_core::{Config, schedule};

/// `nodes` GPU nodes (8 GPUs, 96 cores) in racks of 32, half of them half-full of running pods,
/// and `gangs` pending gangs of `size` members × 8 GPUs; every fourth gang wants one rack.
fn cluster(nodes: usize, gangs: usize, size: u32) -> Snapshot {
    let mut snap = Snapshot::default();
    for i in 0..nodes {
        snap.nodes.push(Node {
            name: format!("node-{i:05}").into(),
            allocatable: Resources::new()
                .with("cpu", 96_000)
                .with("memory", 1 << 40)
                .with("nvidia.com/gpu", 8)
                .with("pods", 110),
            labels: [("rack".to_string(), format!("rack-{:03}", i / 32))].into(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        });
        if i % 2 == 0 {
            for j in 0..4 {
                snap.pods.push(pod(&format!("bg-{i}-{j}"), None, 1, 4_000, Some(format!("node-{i:05}"))));
            }
        }
    }
    for g in 0..gangs {
        let key = ObjectKey::new("ml", format!("gang-{g:05}"));
        let mut gang =
            Gang::new(key.clone(), size, Source { dialect: Dialect::KubeGang, kind: "Gang".into() });
        if g % 4 == 0 {
            gang.topology_key = Some("rack".into());
        }
        for m in 0..size {
            snap.pods.push(pod(&format!("gang-{g:05}-{m}"), Some(&key), 8, 32_000, None));
        }
        snap.gangs.push(gang);
    }
    snap
}

fn pod(name: &str, gang: Option<&GangKey>, gpus: i64, cpu: i64, node: Option<String>) -> Pod {
    Pod {
        key: ObjectKey::new("ml", name),
        uid: name.into(),
        requests: Resources::new().with("nvidia.com/gpu", gpus).with("cpu", cpu).with("memory", 64 << 30),
        node_selector: BTreeMap::new(),
        affinity: vec![],
        tolerations: vec![],
        priority: 0,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        phase: if node.is_some() { PodPhase::Running } else { PodPhase::Pending },
        node_name: node,
        nominated_node: None,
        created: Time::default(),
        deleting: false,
        scheduler_name: if gang.is_some() { "gang-scheduler".into() } else { "default-scheduler".into() },
        gang: gang.map(|g| Membership { gang: g.clone(), subgroup: None }),
        failure: None,
        scheduling_gates: Vec::new(),
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

/// The snapshot with its node usage added up, as an assembled snapshot carries it.
fn carried(mut snap: Snapshot) -> Snapshot {
    snap.usage = Some(Usage::of(&snap.pods));
    snap
}

fn cycle(c: &mut Criterion) {
    let config = Config { preemption: false, ..Config::default() };
    let now = Time::from_secs(1_000);
    let mut group = c.benchmark_group("cycle");
    group.sample_size(10);
    // (nodes, pending gangs, members per gang): the last two cases ask for more GPUs than exist,
    // so most gangs take the explain-why path.
    for (nodes, gangs, size) in [(1_000, 100, 8), (5_000, 500, 8), (15_000, 1_000, 8), (15_000, 2_000, 8)] {
        let snap = carried(cluster(nodes, gangs, size));
        let id = BenchmarkId::from_parameter(format!("{nodes}n-{gangs}g-{}p", gangs * size as usize));
        group.bench_with_input(id, &snap, |b, snap| b.iter(|| schedule(black_box(snap), &config, now)));
    }
    group.finish();
}

/// A full cluster of low-priority 4-pod gangs (one 8-GPU pod per node) and `urgent` pending
/// high-priority gangs of 8 members that can only run by preempting — each within one rack when
/// `rack` (so preemption searches the racks its victims are in). `elastic`: the low gangs have 8
/// members and a minimum of 4, started a minute apart (preemption takes their newest extras);
/// with `tree`, in 4 subgroups of 2 (each needing 1) under a pod floor of 6.
fn full_cluster(nodes: usize, urgent: usize, rack: bool, elastic: bool, tree: bool) -> Snapshot {
    let mut snap = cluster(nodes, 0, 8);
    snap.pods.retain(|p| p.node_name.is_none());
    let size = if elastic { 8 } else { 4 };
    for i in 0..nodes {
        let key = ObjectKey::new("ml", format!("low-{:05}", i / size));
        if i % size == 0 {
            let mut gang =
                Gang::new(key.clone(), 4, Source { dialect: Dialect::KubeGang, kind: "Gang".into() });
            if tree {
                gang.pod_floor = 6;
                gang.subgroups = (0..4)
                    .map(|s| SubGroup {
                        name: format!("s{s}"),
                        parent: None,
                        min_member: 1,
                        pod_floor: 0,
                        topology_key: None,
                        topology_preferred: None,
                    })
                    .collect();
            }
            snap.gangs.push(gang);
        }
        let mut p = pod(&format!("low-{i:05}"), Some(&key), 8, 32_000, Some(format!("node-{i:05}")));
        p.priority = 10;
        if elastic {
            p.started = Some(Time::from_secs(60 * (i % size) as i64));
        }
        if let (true, Some(m)) = (tree, p.gang.as_mut()) {
            m.subgroup = Some(format!("s{}", (i % size) / 2));
        }
        snap.pods.push(p);
    }
    for g in 0..urgent {
        let key = ObjectKey::new("ml", format!("urgent-{g:03}"));
        let mut gang = Gang::new(key.clone(), 8, Source { dialect: Dialect::KubeGang, kind: "Gang".into() });
        if rack {
            gang.topology_key = Some("rack".into());
        }
        snap.gangs.push(gang);
        for m in 0..8 {
            let mut p = pod(&format!("urgent-{g:03}-{m}"), Some(&key), 8, 32_000, None);
            p.priority = 1000;
            snap.pods.push(p);
        }
    }
    snap
}

fn preemption(c: &mut Criterion) {
    let config = Config::default();
    let now = Time::from_secs(1_000);
    let mut group = c.benchmark_group("preemption");
    group.sample_size(10);
    for (nodes, urgent, rack, elastic, tree) in [
        (1_000, 10, false, false, false),
        (15_000, 50, false, false, false),
        (15_000, 50, true, false, false),
        (15_000, 50, false, true, false),
        (15_000, 50, true, true, false),
        (15_000, 50, false, true, true),
    ] {
        let snap = carried(full_cluster(nodes, urgent, rack, elastic, tree));
        let tag = format!(
            "{}{}{}",
            if rack { "-rack" } else { "" },
            if elastic { "-elastic" } else { "" },
            if tree { "-tree" } else { "" }
        );
        let id = BenchmarkId::from_parameter(format!("{nodes}n-{urgent}urgent{tag}"));
        group.bench_with_input(id, &snap, |b, snap| b.iter(|| schedule(black_box(snap), &config, now)));
    }
    group.finish();
}

criterion_group!(benches, cycle, preemption);
criterion_main!(benches);
