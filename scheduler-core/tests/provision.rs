//! Property tests for what unplaceable gangs ask the cluster autoscaler for
//! (`scheduler_core::provision`): the counts are the members with no room, identical members share
//! one pod set, the order is total, and the capacity asked for is enough to place the gang.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;
use scheduler_core::config::{Config, Provisioning};
use scheduler_core::model::*;
use scheduler_core::provision::shape_of;
use scheduler_core::resources::Resources;
use scheduler_core::{Reason, schedule};

// Named cases.

fn gpu_node(name: &str, gpus: i64) -> Node {
    Node {
        name: name.into(),
        allocatable: Resources::new().with("nvidia.com/gpu", gpus).with("cpu", 64_000).with("pods", 110),
        labels: [("pool".to_string(), "a".to_string())].into(),
        taints: vec![],
        unschedulable: false,
        ready: true,
    }
}

fn member(gang: &str, name: &str, gpus: i64) -> Pod {
    Pod {
        key: ObjectKey::new("ml", name),
        uid: format!("uid-{name}").into(),
        requests: Resources::new().with("nvidia.com/gpu", gpus).with("cpu", 1000),
        node_selector: BTreeMap::new(),
        affinity: vec![],
        tolerations: vec![],
        priority: 0,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        phase: PodPhase::Pending,
        node_name: None,
        nominated_node: None,
        created: Time::default(),
        deleting: false,
        scheduler_name: scheduler_core::SCHEDULER_NAME.into(),
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

fn gang(name: &str, min: u32) -> Gang {
    Gang::new(ObjectKey::new("ml", name), min, Source { dialect: Dialect::KubeGang, kind: "Gang".into() })
}

/// A gang of `n` 8-GPU members on `nodes` 8-GPU nodes.
fn gang_of(n: usize, nodes: usize) -> Snapshot {
    Snapshot {
        nodes: (0..nodes).map(|i| gpu_node(&format!("n{i}"), 8)).collect(),
        pods: (0..n).map(|i| member("bert", &format!("bert-{i}"), 8)).collect(),
        gangs: vec![gang("bert", u32::try_from(n).unwrap())],
        ..Snapshot::default()
    }
}

fn keys(names: &[&str]) -> Vec<PodKey> {
    names.iter().map(|n| ObjectKey::new("ml", *n)).collect()
}

#[test]
fn off_by_default() {
    let plan = schedule(&gang_of(4, 2), &Config::default(), Time::from_secs(0));
    assert_eq!(plan.outcome(&ObjectKey::new("ml", "bert")).unwrap().reason, Reason::Unschedulable);
    assert!(plan.provisioning.is_empty());
}

#[test]
fn asks_for_exactly_the_members_with_no_room_in_one_pod_set() {
    let plan = schedule(&gang_of(4, 2), &on(), Time::from_secs(0));
    let ask = &plan.provisioning[..];
    assert_eq!(ask.len(), 1, "{ask:?}");
    assert_eq!(ask[0].gang, ObjectKey::new("ml", "bert"));
    assert_eq!(ask[0].class, "best-effort-atomic-scale-up.autoscaling.x-k8s.io");
    assert_eq!(ask[0].pod_sets.len(), 1);
    assert_eq!(ask[0].pod_sets[0].count, 2);
    assert_eq!(ask[0].pod_sets[0].pods, keys(&["bert-2", "bert-3"]));
    assert_eq!(ask[0].pod_sets[0].shape.requests.get("nvidia.com/gpu"), 8);
    assert_eq!(plan.provisioning_for(&ObjectKey::new("ml", "bert")), Some(&ask[0]));
    // No nodes at all: every member is asked for.
    assert_eq!(schedule(&gang_of(4, 0), &on(), Time::from_secs(0)).provisioning[0].count(), 4);
}

#[test]
fn a_gang_that_fits_asks_for_nothing() {
    let plan = schedule(&gang_of(2, 2), &on(), Time::from_secs(0));
    assert_eq!(plan.bindings.len(), 2);
    assert!(plan.provisioning.is_empty());
}

#[test]
fn shapes_group_identical_members_and_keep_first_pod_order() {
    let mut snap = gang_of(0, 0);
    snap.gangs = vec![gang("mix", 5)];
    snap.pods = vec![
        member("mix", "a-worker-0", 8),
        member("mix", "a-worker-1", 8),
        member("mix", "b-launcher", 0),
        member("mix", "c-worker-2", 8),
        member("mix", "d-tainted", 8),
    ];
    snap.pods[4].tolerations = vec![Toleration { key: "gpu".into(), ..Default::default() }];
    let ask = schedule(&snap, &on(), Time::from_secs(0)).provisioning;
    let sets: Vec<(Vec<PodKey>, u32)> = ask[0].pod_sets.iter().map(|s| (s.pods.clone(), s.count)).collect();
    assert_eq!(
        sets,
        vec![
            (keys(&["a-worker-0", "a-worker-1", "c-worker-2"]), 3),
            (keys(&["b-launcher"]), 1),
            (keys(&["d-tainted"]), 1),
        ]
    );
}

#[test]
fn the_gang_annotation_opts_in_and_out() {
    let mut snap = gang_of(4, 2);
    snap.gangs[0].provisioning = Some(false);
    assert!(schedule(&snap, &on(), Time::from_secs(0)).provisioning.is_empty());
    let mut only_opted_in = on();
    only_opted_in.provisioning.as_mut().unwrap().all_gangs = false;
    snap.gangs[0].provisioning = None;
    assert!(schedule(&snap, &only_opted_in, Time::from_secs(0)).provisioning.is_empty());
    snap.gangs[0].provisioning = Some(true);
    assert_eq!(schedule(&snap, &only_opted_in, Time::from_secs(0)).provisioning.len(), 1);
}

#[test]
fn gated_members_and_other_schedulers_pods_are_not_asked_for() {
    let mut snap = gang_of(4, 2);
    snap.pods[3].scheduling_gates = vec!["kueue.x-k8s.io/admission".into()];
    // A gang that waits for its gates to be lifted asks for nothing: whoever gated it decides.
    let plan = schedule(&snap, &on(), Time::from_secs(0));
    assert_eq!(plan.outcome(&ObjectKey::new("ml", "bert")).unwrap().reason, Reason::WaitingForMembers);
    assert!(plan.provisioning.is_empty());
    // Three of four are enough: the gated one is still not asked for, nor another scheduler's.
    snap.gangs[0].min_member = 3;
    snap.pods.push(Pod { scheduler_name: "default-scheduler".into(), ..member("bert", "bert-9", 8) });
    let ask = schedule(&snap, &on(), Time::from_secs(0)).provisioning;
    assert_eq!(ask[0].pod_sets[0].pods, keys(&["bert-2"]));
}

#[test]
fn a_gang_that_can_preempt_asks_for_nothing() {
    let mut snap = gang_of(2, 2);
    for (i, n) in ["n0", "n1"].iter().enumerate() {
        let mut p = member("low", &format!("low-{i}"), 8);
        p.gang = None;
        p.scheduler_name = "default-scheduler".into();
        p.node_name = Some((*n).into());
        p.phase = PodPhase::Running;
        p.priority = -10;
        snap.pods.push(p);
    }
    let plan = schedule(&snap, &on(), Time::from_secs(0));
    assert_eq!(plan.outcome(&ObjectKey::new("ml", "bert")).unwrap().reason, Reason::Preempting);
    assert!(plan.provisioning.is_empty());
    // Without preemption, the same gang asks for both members.
    let no_preemption = Config { preemption: false, ..on() };
    assert_eq!(schedule(&snap, &no_preemption, Time::from_secs(0)).provisioning[0].count(), 2);
}

#[test]
fn a_topology_gang_asks_for_every_pending_member() {
    let mut snap = gang_of(4, 3);
    snap.gangs[0].topology_key = Some("zone".into());
    let ask = schedule(&snap, &on(), Time::from_secs(0)).provisioning;
    assert_eq!(ask[0].count(), 4);
}

#[test]
fn more_shapes_than_a_request_holds_ask_for_nothing() {
    let mut snap = gang_of(0, 0);
    snap.gangs = vec![gang("wide", 33)];
    snap.pods = (0..33).map(|i| member("wide", &format!("w-{i:02}"), i + 1)).collect();
    assert!(schedule(&snap, &on(), Time::from_secs(0)).provisioning.is_empty());
    snap.pods.pop();
    snap.gangs[0].min_member = 32;
    assert_eq!(
        schedule(&snap, &on(), Time::from_secs(0)).provisioning[0].pod_sets.len(),
        scheduler_core::plan::MAX_POD_SETS
    );
}
// Properties.

/// A gang: its members as (gpus, cpu in cores, pool selector), min = all, a topology key or not,
/// gated members, and its opt-in.
#[derive(Clone, Debug)]
struct GangSpec {
    members: Vec<(i64, i64, Option<u8>)>,
    topology: bool,
    gated: usize,
    opt_in: Option<bool>,
    priority: i32,
}

fn gang_spec() -> impl Strategy<Value = GangSpec> {
    (
        prop::collection::vec(
            (prop_oneof![Just(0i64), Just(4), Just(8)], 1i64..3, prop::option::of(0u8..2)),
            1..7,
        ),
        any::<bool>(),
        0usize..2,
        prop_oneof![Just(None), Just(Some(true)), Just(Some(false))],
        0i32..2,
    )
        .prop_map(|(members, topology, gated, opt_in, priority)| GangSpec {
            members,
            topology,
            gated,
            opt_in,
            priority: priority * 100,
        })
}

fn node(name: String, gpus: i64, cores: i64, pool: u8) -> Node {
    Node {
        name: name.into(),
        allocatable: Resources::new().with("nvidia.com/gpu", gpus).with("cpu", cores * 1000).with("pods", 8),
        labels: [("pool".to_string(), format!("p{pool}")), ("zone".to_string(), format!("z{}", pool % 2))]
            .into(),
        taints: vec![],
        unschedulable: false,
        ready: true,
    }
}

fn pod(name: &str, gang: &GangKey, gpus: i64, cores: i64, pool: Option<u8>, priority: i32) -> Pod {
    Pod {
        key: ObjectKey::new("ml", name),
        uid: format!("uid-{name}").into(),
        requests: Resources::new().with("nvidia.com/gpu", gpus).with("cpu", cores * 1000),
        node_selector: pool.map(|p| [("pool".to_string(), format!("p{p}"))].into()).unwrap_or_default(),
        affinity: vec![],
        tolerations: vec![],
        priority,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        phase: PodPhase::Pending,
        node_name: None,
        nominated_node: None,
        created: Time::default(),
        deleting: false,
        scheduler_name: "gang-scheduler".into(),
        gang: Some(Membership { gang: gang.clone(), subgroup: None }),
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

fn build(nodes: &[(i64, i64, u8)], gangs: &[GangSpec]) -> Snapshot {
    let mut snap = Snapshot::default();
    for (i, &(gpus, cores, pool)) in nodes.iter().enumerate() {
        snap.nodes.push(node(format!("n{i:02}"), gpus, cores, pool));
    }
    for (i, g) in gangs.iter().enumerate() {
        let key = ObjectKey::new("ml", format!("g{i}"));
        let n = u32::try_from(g.members.len()).unwrap();
        let mut gang = Gang::new(key.clone(), n, Source { dialect: Dialect::KubeGang, kind: "Gang".into() });
        gang.topology_key = g.topology.then(|| "zone".into());
        gang.provisioning = g.opt_in;
        // Gated members beyond the minimum, so the gang is still attempted.
        gang.min_member = n.saturating_sub(u32::try_from(g.gated).unwrap()).max(1);
        for (m, &(gpus, cores, pool)) in g.members.iter().enumerate() {
            let mut p = pod(&format!("g{i}-{m}"), &key, gpus, cores, pool, g.priority);
            if m < g.gated && g.members.len() > g.gated {
                p.scheduling_gates = vec!["kueue.x-k8s.io/admission".into()];
            }
            snap.pods.push(p);
        }
        snap.gangs.push(gang);
    }
    snap
}

fn on() -> Config {
    Config { provisioning: Some(Provisioning::default()), ..Config::default() }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn asks_count_the_members_with_no_room_grouped_by_shape(
        nodes in prop::collection::vec((prop_oneof![Just(0i64), Just(8)], 2i64..9, 0u8..2), 0..6),
        gangs in prop::collection::vec(gang_spec(), 1..5),
    ) {
        let snap = build(&nodes, &gangs);
        let plan = schedule(&snap, &on(), Time::from_secs(0));
        let pods: HashMap<&PodKey, &Pod> = snap.pods.iter().map(|p| (&p.key, p)).collect();
        let keys: Vec<&GangKey> = plan.provisioning.iter().map(|a| &a.gang).collect();
        prop_assert!(keys.windows(2).all(|w| w[0] < w[1]), "asks in gang-key order: {keys:?}");
        for ask in &plan.provisioning {
            let gang = snap.gangs.iter().find(|g| g.key == ask.gang).unwrap();
            let outcome = plan.outcome(&ask.gang).unwrap();
            prop_assert!(matches!(outcome.reason, Reason::Unschedulable | Reason::TopologyUnsatisfiable | Reason::Reserved | Reason::WaitingForResources | Reason::WaitingForPriority),
                "{}: {:?} asks", ask.gang, outcome.reason);
            prop_assert_ne!(gang.provisioning, Some(false));
            let pending: BTreeSet<&PodKey> = snap.pods.iter()
                .filter(|p| p.gang.as_ref().is_some_and(|m| m.gang == ask.gang) && p.is_pending() && !p.is_gated())
                .map(|p| &p.key)
                .collect();
            let mut seen = BTreeSet::new();
            for (i, set) in ask.pod_sets.iter().enumerate() {
                prop_assert_eq!(set.count as usize, set.pods.len());
                prop_assert!(set.count >= 1);
                prop_assert!(set.pods.windows(2).all(|w| w[0] < w[1]));
                for p in &set.pods {
                    prop_assert!(pending.contains(p), "{p} is not a pending, ungated member");
                    prop_assert_eq!(&shape_of(pods[p]), &set.shape);
                    prop_assert!(seen.insert(p), "{p} asked for twice");
                }
                // Identical members share one set; sets follow their first pod.
                for other in &ask.pod_sets[i + 1..] {
                    prop_assert_ne!(&other.shape, &set.shape);
                    prop_assert!(other.pods[0] > set.pods[0]);
                }
            }
            prop_assert_eq!(ask.count() as usize, seen.len());
            if gang.topology_key.is_some() || snap.nodes.is_empty() {
                prop_assert_eq!(seen.len(), pending.len(), "{}: every pending member", ask.gang);
            }
        }
        // Gangs that do not want capacity, or opted out, ask for nothing.
        for o in &plan.outcomes {
            let opted_out = snap.gangs.iter().any(|g| g.key == o.gang && g.provisioning == Some(false));
            if o.reason.is_satisfied() || o.reason == Reason::Preempting || opted_out {
                prop_assert!(plan.provisioning_for(&o.gang).is_none(), "{}: {:?}", o.gang, o.reason);
            }
        }
        // Off by default: the same snapshot asks for nothing without the policy.
        prop_assert!(schedule(&snap, &Config::default(), Time::from_secs(0)).provisioning.is_empty());
        // The same input in another order gives the same asks.
        let mut reversed = snap.clone();
        reversed.nodes.reverse();
        reversed.pods.reverse();
        reversed.gangs.reverse();
        prop_assert_eq!(&schedule(&reversed, &on(), Time::from_secs(0)).provisioning, &plan.provisioning);
    }

    /// A gang of identical members asks for what it lacks, and nodes shaped as asked (one per
    /// member asked for) are enough to place it whole.
    #[test]
    fn the_capacity_asked_for_places_the_gang(
        nodes in prop::collection::vec((prop_oneof![Just(0i64), Just(8)], 2i64..9, 0u8..2), 0..5),
        members in 1usize..8,
        gpus in prop_oneof![Just(0i64), Just(2), Just(8)],
        cores in 1i64..4,
        pool in prop::option::of(0u8..2),
    ) {
        let spec = GangSpec { members: vec![(gpus, cores, pool); members], topology: false, gated: 0, opt_in: None, priority: 0 };
        let mut snap = build(&nodes, &[spec]);
        let plan = schedule(&snap, &on(), Time::from_secs(0));
        let key = ObjectKey::new("ml", "g0");
        let Some(ask) = plan.provisioning_for(&key) else {
            prop_assert!(plan.outcome(&key).unwrap().reason.is_satisfied());
            return Ok(());
        };
        for (j, set) in ask.pod_sets.iter().enumerate() {
            for k in 0..set.count {
                let mut n = node(format!("new-{j}-{k}"), 0, 0, 0);
                n.allocatable = set.shape.requests.clone().with("pods", 1);
                n.labels.extend(set.shape.node_selector.clone());
                snap.nodes.push(n);
            }
        }
        let after = schedule(&snap, &on(), Time::from_secs(0));
        prop_assert_eq!(after.outcome(&key).unwrap().reason, Reason::Scheduled, "{}", after.outcome(&key).unwrap().message);
        prop_assert!(after.provisioning.is_empty());
    }
}

/// A gang backfill holds room for (it fits once what runs ends by its limit) still asks for the
/// members with no room now: new nodes start it sooner than the hold.
#[test]
fn a_gang_with_a_hold_asks_for_what_has_no_room_now() {
    let mut snap = gang_of(2, 2);
    let mut running = member("other", "other-0", 8);
    running.gang = None;
    running.scheduler_name = "default-scheduler".into();
    running.node_name = Some("n0".into());
    running.phase = PodPhase::Running;
    running.priority = 10;
    running.started = Some(Time::from_secs(0));
    running.time_limit = Some(std::time::Duration::from_secs(3600));
    snap.pods.push(running);
    let config = Config { backfill: Some(scheduler_core::config::Backfill::default()), ..on() };
    let plan = schedule(&snap, &config, Time::from_secs(0));
    let outcome = plan.outcome(&ObjectKey::new("ml", "bert")).unwrap();
    assert_eq!(outcome.reason, Reason::WaitingForResources, "{}", outcome.message);
    assert_eq!(outcome.expected_start, Some(Time::from_secs(3600)));
    assert_eq!(plan.provisioning.len(), 1);
    assert_eq!(plan.provisioning[0].count(), 1, "the member with no room now");
}
