//! A restart changes nothing: on random gang lifecycles — members placed, bindings that fail and
//! leave a gang half-bound, members lost and replaced, kubelet refusals, timeouts that retry or
//! give up, grace periods running out — a scheduler that restarts before every cycle (keeping
//! nothing in memory: each gang's state is what the cluster keeps, its `Gang`'s status or what the
//! plans wrote on its members) decides exactly what one that never restarts decides.

use std::time::Duration;

use proptest::prelude::*;
use scheduler_core::config::{Config, TimeoutAction};
use scheduler_core::model::*;
use scheduler_core::resources::Resources;
use scheduler_core::{Plan, replay, schedule};

#[derive(Clone, Debug)]
struct GangSpec {
    members: u32,
    min: u32,
    cpu: i64,
    crd_less: bool,
}

#[derive(Clone, Debug)]
enum Event {
    Nothing,
    /// A pod (by index, modulo the pods) is deleted.
    Delete(usize),
    /// A binding of the last plan (by index) was not made: the pod stays pending.
    BindingLost(usize),
    /// A bound pod (by index) fails on its node.
    Fail(usize),
    /// A new member of a gang (by index) is created.
    Add(usize),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        3 => Just(Event::Nothing),
        2 => any::<usize>().prop_map(Event::Delete),
        2 => any::<usize>().prop_map(Event::BindingLost),
        1 => any::<usize>().prop_map(Event::Fail),
        2 => any::<usize>().prop_map(Event::Add),
    ]
}

fn gang_spec() -> impl Strategy<Value = GangSpec> {
    (1u32..5, 1u32..5, 1i64..5, prop::bool::weighted(0.75)).prop_map(|(members, min, cpu, crd_less)| {
        GangSpec { members, min: min.min(members), cpu: cpu * 1000, crd_less }
    })
}

fn pod(gang: &GangKey, name: String, cpu: i64, created: Time) -> Pod {
    Pod {
        key: ObjectKey::new("ml", &name),
        uid: format!("uid-{name}").into(),
        requests: Resources::new().with("cpu", cpu),
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
        scheduler_name: scheduler_core::SCHEDULER_NAME.into(),
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

fn build(nodes: &[i64], gangs: &[GangSpec], start: Time) -> Snapshot {
    let mut snap = Snapshot::default();
    for (i, &cpus) in nodes.iter().enumerate() {
        snap.nodes.push(Node {
            name: format!("n{i}").into(),
            allocatable: Resources::new().with("cpu", cpus * 1000).with("pods", 20),
            labels: Default::default(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        });
    }
    for (g, spec) in gangs.iter().enumerate() {
        let key = ObjectKey::new("ml", format!("g{g}"));
        let source = if spec.crd_less {
            Source { dialect: Dialect::KubeGangAnnotations, kind: "Pod".into() }
        } else {
            Source { dialect: Dialect::KubeGang, kind: "Gang".into() }
        };
        let mut gang = Gang::new(key.clone(), spec.min, source);
        gang.created = start;
        snap.gangs.push(gang);
        for i in 0..spec.members {
            snap.pods.push(pod(&key, format!("g{g}-{i}"), spec.cpu, start));
        }
    }
    snap
}

/// The gangs a cluster holds: every `Gang`, and each gang of pod annotations while a pod claims
/// it (a gang of annotations with no pod left is gone; pods created for it later make a new one).
fn present(snap: &mut Snapshot, all: &[Gang]) {
    let claimed: std::collections::BTreeSet<&GangKey> =
        snap.pods.iter().filter_map(|p| p.gang.as_ref().map(|m| &m.gang)).collect();
    let mut gangs = Vec::new();
    for g in all {
        if g.keeps_state_on_pods() && !claimed.contains(&g.key) {
            continue;
        }
        let now = snap.gangs.iter().find(|h| h.key == g.key);
        gangs.push(now.cloned().unwrap_or_else(|| g.clone()));
    }
    snap.gangs = gangs;
}

/// What the cluster keeps when the scheduler restarts: see the scenario suite's `restart`.
fn restart(snap: &mut Snapshot) {
    for g in &mut snap.gangs {
        if g.keeps_state_on_pods() {
            g.state = GangState::default();
        } else {
            g.state.rev = 0;
        }
    }
    snap.reservations.clear();
}

/// What a decision is, beside its wording: which pods are bound where, which are evicted, and
/// each gang's reason and phase.
fn decided(plan: &Plan) -> (Vec<String>, Vec<String>, Vec<String>) {
    (
        plan.bindings.iter().map(|b| format!("{}→{}", b.pod.name, b.node)).collect(),
        plan.evictions.iter().map(|e| e.pod.name.to_string()).collect(),
        plan.outcomes.iter().map(|o| format!("{}: {} {}", o.gang.name, o.reason, o.phase)).collect(),
    )
}

/// Applies one event to the cluster after `plan` was applied.
fn happen(snap: &mut Snapshot, plan: &Plan, e: &Event, gangs: &[GangSpec], now: Time, added: &mut u32) {
    snap.usage = None;
    match *e {
        Event::Nothing => {}
        Event::Delete(i) if !snap.pods.is_empty() => {
            let i = i % snap.pods.len();
            snap.pods.remove(i);
        }
        Event::BindingLost(i) if !plan.bindings.is_empty() => {
            let b = &plan.bindings[i % plan.bindings.len()];
            if let Some(p) = snap.pods.iter_mut().find(|p| p.key == b.pod) {
                p.node_name = None;
                p.phase = PodPhase::Pending;
            }
        }
        Event::Fail(i) => {
            let bound: Vec<usize> = (0..snap.pods.len()).filter(|&p| snap.pods[p].uses_node()).collect();
            if !bound.is_empty() {
                let p = &mut snap.pods[bound[i % bound.len()]];
                p.phase = PodPhase::Failed;
                p.failure = Some("OutOfcpu: Node didn't have enough resource".into());
            }
        }
        Event::Add(g) => {
            let g = g % gangs.len();
            *added += 1;
            let key = ObjectKey::new("ml", format!("g{g}"));
            snap.pods.push(pod(&key, format!("g{g}-new{added}"), gangs[g].cpu, now));
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn a_scheduler_restarted_before_every_cycle_decides_what_one_never_restarted_decides(
        nodes in prop::collection::vec(2i64..9, 1..5),
        gangs in prop::collection::vec(gang_spec(), 1..5),
        steps in prop::collection::vec((1u64..45, event()), 1..14),
        timeout in prop::option::of(20u64..90),
        fail in any::<bool>(),
        grace in 15u64..90,
    ) {
        let config = Config {
            default_timeout: timeout.map(Duration::from_secs),
            timeout_action: if fail {
                TimeoutAction::Fail
            } else {
                TimeoutAction::Retry { initial_backoff: Duration::from_secs(20), max_backoff: Duration::from_secs(80) }
            },
            stale_grace_period: Duration::from_secs(grace),
            ..Config::default()
        };
        let mut now = Time::from_secs(1_800_000_000);
        let mut kept = build(&nodes, &gangs, now);
        let all = kept.gangs.clone();
        let mut forgot = kept.clone();
        let (mut added_a, mut added_b) = (0, 0);
        let mut plan = schedule(&kept, &config, now);
        let mut other = schedule(&forgot, &config, now);
        prop_assert_eq!(decided(&plan), decided(&other));
        for (i, (advance, e)) in steps.iter().enumerate() {
            // Each applies its own plan: the same decisions, and the gang state each wrote.
            replay::apply(&mut kept, &plan, now);
            replay::apply(&mut forgot, &other, now);
            now = now.plus(Duration::from_secs(*advance));
            happen(&mut kept, &plan, e, &gangs, now, &mut added_a);
            happen(&mut forgot, &plan, e, &gangs, now, &mut added_b);
            present(&mut kept, &all);
            present(&mut forgot, &all);
            restart(&mut forgot);
            plan = schedule(&kept, &config, now);
            other = schedule(&forgot, &config, now);
            prop_assert_eq!(
                decided(&plan),
                decided(&other),
                "cycle {} after {:?}: the restarted scheduler decided otherwise",
                i + 2,
                e
            );
        }
    }
}
