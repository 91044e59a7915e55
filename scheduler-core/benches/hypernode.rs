//! Volcano HyperNode tiers as topology levels (`scheduler_core::hypernode::domains`): what a cycle
//! pays, once per tier a gang asks for, to learn each node's HyperNode. 15,000 nodes in 600
//! tier-1 HyperNodes of 25 and 30 tier-2 HyperNodes of 20, the tier-1 members chosen each way
//! Volcano allows — by exact name (25 members each), by one pattern, or by one label selector —
//! and tier 2 by pattern over HyperNode names.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use scheduler_core::hypernode::domains;
use scheduler_core::model::volume::{HyperNode, HyperNodeMember, MemberSelector};
use scheduler_core::model::{LabelSelector, Node};
use scheduler_core::resources::Resources;

const NODES: usize = 15_000;
const PER_LEAF: usize = 25;
const PER_SPINE: usize = 20;

/// Node `i`'s name: its rack and its place there (`r007-n03`), as racks name their hosts.
fn name(i: usize) -> String {
    format!("r{:03}-n{:02}", i / PER_LEAF, i % PER_LEAF)
}

fn nodes() -> Vec<Node> {
    (0..NODES)
        .map(|i| Node {
            name: name(i).into(),
            allocatable: Resources::new(),
            labels: [
                ("kubernetes.io/hostname".to_string(), name(i)),
                ("rack".to_string(), format!("r{:03}", i / PER_LEAF)),
            ]
            .into(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        })
        .collect()
}

/// Tier-1 leaves chosen by `how` (`exact`, `regex`, `labels`), and tier-2 spines by pattern.
fn hypernodes(how: &str) -> BTreeMap<String, HyperNode> {
    let member = |hypernode, selector| HyperNodeMember { hypernode, selector };
    let mut out = BTreeMap::new();
    for l in 0..NODES / PER_LEAF {
        let first = l * PER_LEAF;
        let members = match how {
            "exact" => {
                (first..first + PER_LEAF).map(|i| member(false, MemberSelector::Exact(name(i)))).collect()
            }
            // A rack's hosts by a pattern over their names, as Volcano's examples write one.
            "regex" => vec![member(false, MemberSelector::Regex(format!("^r{l:03}-n[0-9]+$")))],
            _ => vec![member(
                false,
                MemberSelector::Labels(LabelSelector {
                    match_labels: [("rack".to_string(), format!("r{l:03}"))].into(),
                    ..Default::default()
                }),
            )],
        };
        let name = format!("leaf-{l:03}");
        out.insert(name.clone(), HyperNode { name, tier: 1, tier_name: None, members });
    }
    for s in 0..NODES / PER_LEAF / PER_SPINE {
        let members: Vec<HyperNodeMember> = (s * PER_SPINE..(s + 1) * PER_SPINE)
            .map(|l| member(true, MemberSelector::Regex(format!("^leaf-{l:03}$"))))
            .collect();
        let name = format!("spine-{s:02}");
        out.insert(name.clone(), HyperNode { name, tier: 2, tier_name: None, members });
    }
    out
}

fn bench(c: &mut Criterion) {
    let nodes = nodes();
    let mut group = c.benchmark_group("hypernode");
    group.sample_size(10);
    for how in ["exact", "regex", "labels"] {
        let h = hypernodes(how);
        let d = domains(&nodes, &h, 1);
        assert!(d.iter().all(Option::is_some), "{how}: every node in a leaf");
        assert_eq!(d[PER_LEAF].as_deref(), Some("leaf-001"));
        group.bench_function(format!("tier1-{how}-15000n-600h"), |b| {
            b.iter(|| domains(black_box(&nodes), &h, 1))
        });
    }
    let h = hypernodes("exact");
    assert_eq!(domains(&nodes, &h, 2)[NODES - 1].as_deref(), Some("spine-29"));
    group.bench_function("tier2-over-exact-leaves-15000n", |b| b.iter(|| domains(black_box(&nodes), &h, 2)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
