//! Backfill (policy `backfill`) on random clusters: one scarce resource (GPUs) taken by running
//! pods that end by their time limits, and gangs waiting for it with limits of their own or none.
//! Off (or disabled) it changes nothing; with nothing that can end it holds nothing; a gang that
//! starts on held capacity ends before the hold starts; the first gang in line starts when it is
//! told it will; and the fast cycle is the reference one.

use std::cmp::Reverse;
use std::time::Duration;

use proptest::prelude::*;
use scheduler_core::config::{Backfill, Config};
use scheduler_core::model::*;
use scheduler_core::resources::Resources;
use scheduler_core::{Plan, Reason, replay, schedule};

/// The first cycle's clock.
const NOW: Time = Time::from_secs(1_000_000);

/// A pod someone runs on a node.
#[derive(Clone, Debug)]
struct RunningSpec {
    /// A node, modulo the nodes.
    node: usize,
    gpus: i64,
    /// Seconds before [`NOW`] it started; `None`: no `status.startTime` yet.
    started_ago: Option<u64>,
    /// Its own time limit, in seconds.
    limit: Option<u64>,
    deleting: bool,
    /// A running gang it belongs to, modulo the running gangs (`None`: outside any gang).
    gang: Option<usize>,
}

/// A gang whose members all run (satisfied): only its time limit matters here.
#[derive(Clone, Debug)]
struct RunningGangSpec {
    limit: Option<u64>,
    priority: i32,
}

/// A gang whose members all wait.
#[derive(Clone, Debug)]
struct WaitingSpec {
    min: u32,
    /// Members beyond the minimum.
    extra: u32,
    gpus: i64,
    cpu: i64,
    priority: i32,
    limit: Option<u64>,
    /// Each member's own limit (the first `min + extra` are used).
    pod_limits: Vec<Option<u64>>,
}

#[derive(Clone, Debug)]
struct Cluster {
    /// Each node's GPUs.
    nodes: Vec<i64>,
    running: Vec<RunningSpec>,
    running_gangs: Vec<RunningGangSpec>,
    waiting: Vec<WaitingSpec>,
    /// Each waiting gang's age rank (a permutation: no two are as old).
    ages: Vec<usize>,
    /// Set the snapshot's usage (as the live index does) or leave the cycle to add it up.
    usage: bool,
}

/// A time limit in seconds, or none: at most 4 h, with pods started at most 6 h ago, so that every
/// end is within the window (a day). (Ends past the window are left out on purpose: see
/// [`fair_start`].)
fn limit(some: f64, short: u32) -> impl Strategy<Value = Option<u64>> {
    prop::option::weighted(some, prop_oneof![short => 60u64..1800, 2 => 1800u64..4 * 3600])
}

fn running() -> impl Strategy<Value = RunningSpec> {
    (
        any::<usize>(),
        1i64..9,
        prop::option::weighted(0.9, prop_oneof![3 => 0u64..3600, 1 => 0u64..6 * 3600]),
        limit(0.7, 1),
        prop::bool::weighted(0.05),
        prop::option::weighted(0.25, any::<usize>()),
    )
        .prop_map(|(node, gpus, started_ago, limit, deleting, gang)| RunningSpec {
            node,
            gpus,
            started_ago,
            limit,
            deleting,
            gang,
        })
}

/// A waiting gang; with `extras`, now and then with members beyond its minimum.
fn waiting(extras: bool) -> impl Strategy<Value = WaitingSpec> {
    let extra = if extras { prop_oneof![3 => Just(0u32), 1 => 1u32..3].boxed() } else { Just(0).boxed() };
    (
        1u32..5,
        extra,
        prop_oneof![3 => 1i64..5, 1 => 5i64..9],
        1i64..5,
        0i32..3,
        limit(0.7, 4),
        prop::collection::vec(limit(0.6, 4), 8),
    )
        .prop_map(|(min, extra, gpus, cpu, priority, limit, pod_limits)| WaitingSpec {
            min,
            extra,
            gpus,
            cpu,
            priority: priority * 100,
            limit,
            pod_limits,
        })
}

/// A random cluster; half the time one shaped for backfill (as Slurm's users see it): nodes of 8
/// GPUs, and a gang ahead of every other (priority 300) that needs whole nodes, some of them busy,
/// while smaller gangs behind it may fit beside what runs.
fn cluster(extras: bool) -> impl Strategy<Value = Cluster> {
    (
        prop::collection::vec(prop_oneof![1 => 1i64..9, 1 => Just(8i64)], 2..9),
        prop::collection::vec(running(), 0..9),
        prop::collection::vec((limit(0.7, 1), 0i32..3), 1..3),
        prop::collection::vec(waiting(extras), 1..7),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_flat_map(|(mut nodes, running, running_gangs, mut waiting, usage, shaped)| {
            if shaped {
                nodes.iter_mut().for_each(|n| *n = 8);
                for w in &mut waiting[1..] {
                    w.gpus = w.gpus.min(4);
                }
                let big = &mut waiting[0];
                big.priority = 300;
                big.gpus = 8;
                big.min = (big.min + 1).min(nodes.len() as u32);
            }
            let n = waiting.len();
            let running_gangs: Vec<RunningGangSpec> = running_gangs
                .into_iter()
                .map(|(limit, p)| RunningGangSpec { limit, priority: p * 100 })
                .collect();
            Just((0..n).collect::<Vec<usize>>()).prop_shuffle().prop_map(move |ages| Cluster {
                nodes: nodes.clone(),
                running: running.clone(),
                running_gangs: running_gangs.clone(),
                waiting: waiting.clone(),
                ages,
                usage,
            })
        })
}

/// The backfill policy: the default, now and then with a default time limit or another
/// resolution.
fn policy() -> impl Strategy<Value = Backfill> {
    (
        prop::option::weighted(0.25, 600u64..4 * 3600),
        prop_oneof![6 => Just(60u64), 1 => Just(1u64), 2 => Just(600u64)],
    )
        .prop_map(|(default, res)| Backfill {
            default_time_limit: default.map(Duration::from_secs),
            resolution: Duration::from_secs(res),
            ..Backfill::default()
        })
}

fn config(backfill: Option<Backfill>) -> Config {
    Config { backfill, preemption: false, ..Config::default() }
}

fn secs(s: Option<u64>) -> Option<Duration> {
    s.map(Duration::from_secs)
}

fn pod(name: &str, gpus: i64, cpu: i64, priority: i32) -> Pod {
    Pod {
        key: ObjectKey::new("ml", name),
        uid: format!("uid-{name}").into(),
        requests: Resources::new().with("nvidia.com/gpu", gpus).with("cpu", cpu),
        node_selector: Default::default(),
        affinity: vec![],
        tolerations: vec![],
        priority,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        phase: PodPhase::Pending,
        node_name: None,
        nominated_node: None,
        created: Time::default(),
        deleting: false,
        scheduler_name: "default-scheduler".into(),
        gang: None,
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

/// Nodes of 32 cores, running pods where they fit (a running gang's members are as many as run),
/// and the waiting gangs, each `i` created `10 s × ages[i]` before the first of them.
fn build(c: &Cluster) -> Snapshot {
    let mut snap = Snapshot::default();
    for (i, &gpus) in c.nodes.iter().enumerate() {
        snap.nodes.push(Node {
            name: format!("n{i}").into(),
            allocatable: Resources::new().with("nvidia.com/gpu", gpus).with("cpu", 32_000).with("pods", 110),
            labels: Default::default(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        });
    }
    let mut free = c.nodes.clone();
    let mut run_members = vec![0u32; c.running_gangs.len()];
    for (j, r) in c.running.iter().enumerate() {
        let n = r.node % c.nodes.len();
        // Only what fits: an overcommitted node is not what backfill is about.
        let gpus = r.gpus.min(free[n]);
        if gpus == 0 {
            continue;
        }
        free[n] -= gpus;
        let owner = r.gang.map(|g| g % c.running_gangs.len());
        let priority = owner.map_or(0, |g| c.running_gangs[g].priority);
        let mut p = pod(&format!("run-{j}"), gpus, 1000, priority);
        p.node_name = Some(format!("n{n}"));
        p.phase = PodPhase::Running;
        p.started = r.started_ago.map(|a| Time(NOW.0 - 1000 * a as i64));
        p.time_limit = secs(r.limit);
        p.deleting = r.deleting;
        p.created = Time(NOW.0 - 5 * 3600 * 1000);
        if let Some(g) = owner {
            p.scheduler_name = scheduler_core::SCHEDULER_NAME.into();
            p.gang = Some(Membership { gang: ObjectKey::new("ml", format!("run{g}")), subgroup: None });
            run_members[g] += 1;
        }
        snap.pods.push(p);
    }
    for (g, spec) in c.running_gangs.iter().enumerate() {
        if run_members[g] == 0 {
            continue;
        }
        let mut gang = gang(&format!("run{g}"), run_members[g]);
        gang.time_limit = secs(spec.limit);
        gang.created = Time(NOW.0 - 5 * 3600 * 1000);
        gang.state.was_satisfied = true;
        snap.gangs.push(gang);
    }
    for (i, w) in c.waiting.iter().enumerate() {
        let created = Time(NOW.0 - 3600 * 1000 + 10_000 * c.ages[i] as i64);
        let mut gang = gang(&format!("w{i}"), w.min);
        gang.time_limit = secs(w.limit);
        gang.created = created;
        for m in 0..w.min + w.extra {
            let mut p = pod(&format!("w{i}-{m}"), w.gpus, w.cpu * 1000, w.priority);
            p.scheduler_name = scheduler_core::SCHEDULER_NAME.into();
            p.gang = Some(Membership { gang: gang.key.clone(), subgroup: None });
            p.time_limit = secs(w.pod_limits[m as usize]);
            p.created = created;
            snap.pods.push(p);
        }
        snap.gangs.push(gang);
    }
    if c.usage {
        snap.usage = Some(Usage::of(&snap.pods));
    }
    snap
}

/// The cluster with nothing that states a time limit and nothing being deleted: nothing is
/// expected to end.
fn endless(mut c: Cluster) -> Cluster {
    for r in &mut c.running {
        r.limit = None;
        r.deleting = false;
    }
    for g in &mut c.running_gangs {
        g.limit = None;
    }
    for w in &mut c.waiting {
        w.limit = None;
        w.pod_limits.iter_mut().for_each(|l| *l = None);
    }
    c
}

/// When a pod on a node is expected to end: being deleted, `now`; else its start (`now` if it
/// has none) plus its limit (its own, else its gang's, else the policy's). `None`: it has no
/// limit. Backfill rounds ends up to its steps, but a hold starts on a step after `now`, and a
/// pod ends by a step exactly when its end, unrounded, does.
fn expected_end(snap: &Snapshot, policy: &Backfill, now: Time, p: &Pod) -> Option<Time> {
    if p.deleting {
        return Some(now);
    }
    let gang = p.gang.as_ref().and_then(|m| snap.gangs.iter().find(|g| g.key == m.gang));
    let limit = p.time_limit.or(gang.and_then(|g| g.time_limit)).or(policy.default_time_limit)?;
    Some(p.started.unwrap_or(now).plus(limit))
}

/// A gang's time limit were it to start with its pending members: its own, else the longest of
/// theirs when every one states one, else the policy's.
fn gang_limit(snap: &Snapshot, policy: &Backfill, g: &Gang) -> Option<Duration> {
    // The longest of its pending members' limits (each: its own, else the gang's, else the
    // default), none when one has none: the rule the pods are later held to when they run.
    let mut longest = None;
    let mut any = false;
    for p in snap.pods.iter().filter(|p| p.is_pending() && p.gang.as_ref().is_some_and(|m| m.gang == g.key)) {
        any = true;
        let l = p.time_limit.or(g.time_limit).or(policy.default_time_limit)?;
        longest = longest.max(Some(l));
    }
    if any { longest } else { g.time_limit.or(policy.default_time_limit) }
}

/// A waiting gang's place in the cycle's order: priority (its highest member's), then age, then
/// key (no member of it is on a node yet).
fn rank(snap: &Snapshot, g: &Gang) -> (Reverse<i32>, Time, ObjectKey) {
    let priority = snap
        .pods
        .iter()
        .filter(|p| p.gang.as_ref().is_some_and(|m| m.gang == g.key))
        .map(|p| p.priority)
        .max()
        .unwrap_or(0);
    (Reverse(priority), g.created, g.key.clone())
}

/// The cycle at [`NOW`] and the one at the expected start of the first gang in line that waits for
/// resources: its key and both plans, or `None` when no gang waits for resources.
///
/// Between the two the cluster is what the first plan made it (what it bound started at `NOW`),
/// and every pod expected to end by then (its start plus its limit: its own, else its gang's,
/// else the policy's; one being deleted at `NOW`) has succeeded.
fn at_expected_start(snap: &Snapshot, policy: &Backfill) -> Option<(GangKey, Plan, Plan)> {
    let config = config(Some(policy.clone()));
    let plan = schedule(snap, &config, NOW);
    let first = plan
        .outcomes
        .iter()
        .filter(|o| o.reason == Reason::WaitingForResources)
        .filter_map(|o| snap.gangs.iter().find(|g| g.key == o.gang))
        .min_by_key(|g| rank(snap, g))?;
    // A gang waits for resources only with a hold: when it is none, `then` is the same cycle.
    let start = plan.outcome(&first.key)?.expected_start.unwrap_or(NOW);
    let mut next = snap.clone();
    replay::apply(&mut next, &plan, NOW);
    let ended: Vec<PodKey> = next
        .pods
        .iter()
        .filter(|p| p.uses_node() && expected_end(&next, policy, NOW, p).is_some_and(|e| e <= start))
        .map(|p| p.key.clone())
        .collect();
    // They finished (as a Job's pods do: Succeeded, kept until cleaned up). A gang ahead in line
    // whose members were deleted instead would fall below its minimum and need it again, ahead
    // of the gang held for: the order, not a broken promise.
    for p in next.pods.iter_mut().filter(|p| ended.contains(&p.key)) {
        p.phase = PodPhase::Succeeded;
    }
    let then = schedule(&next, &config, start);
    Some((first.key.clone(), plan, then))
}

/// The fair start: the first gang in line that waits for resources, with an expected start, is
/// placed at that start when what was expected to end by then has ended. (Rejected when no gang
/// waits for resources.)
///
/// What it is not promised against: a gang ahead of it in line that fits only after the window
/// gets a hold once the window reaches it, and may take what was held (as a job beyond Slurm's
/// `bf_window` does); every end here is within the window ([`limit`]). Members beyond a
/// satisfied gang's minimum, and members whose own limit outlasts their gang's, were found to
/// break the promise and are fixed (the tests below).
fn fair_start(snap: &Snapshot, policy: &Backfill) -> Result<(), TestCaseError> {
    let Some((first, plan, then)) = at_expected_start(snap, policy) else {
        return Err(TestCaseError::reject("no gang waits for resources"));
    };
    let before = outcome(&plan, &first)?;
    prop_assert!(before.expected_start.is_some(), "{first} waits for resources with no expected start");
    let o = outcome(&then, &first)?;
    prop_assert!(
        matches!(o.reason, Reason::Scheduled | Reason::WaitingForVolumes | Reason::WaitingForDevices),
        "{first} was expected to start at {} and is {}: {}\nfirst cycle: {:#?}\nthen: {:#?}",
        before.expected_start.unwrap_or(NOW),
        o.reason,
        o.message,
        plan.outcomes,
        then.outcomes
    );
    Ok(())
}

fn outcome<'p>(plan: &'p Plan, gang: &GangKey) -> Result<&'p scheduler_core::Outcome, TestCaseError> {
    plan.outcome(gang).ok_or_else(|| TestCaseError::fail(format!("no outcome for {gang}")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn with_nothing_that_can_end_backfill_holds_nothing(c in cluster(true), res in prop_oneof![Just(1u64), Just(60)]) {
        let snap = build(&endless(c.clone()));
        let on = Backfill { resolution: Duration::from_secs(res), ..Backfill::default() };
        // Nothing held, whatever waits.
        let plan = schedule(&snap, &config(Some(on.clone())), NOW);
        for o in &plan.outcomes {
            prop_assert!(o.expected_start.is_none() && o.held_nodes.is_empty() && !o.backfilled, "{o:?}");
            prop_assert!(!matches!(o.reason, Reason::WaitingForResources | Reason::WaitingForPriority), "{o:?}");
        }
        // And with no members beyond the minimum (which backfill places after every gang's
        // minimum), the plan of no backfill.
        let mut c = c;
        for w in &mut c.waiting {
            w.extra = 0;
        }
        let snap = build(&endless(c));
        let mut plan = schedule(&snap, &config(Some(on)), NOW);
        let off = schedule(&snap, &config(None), NOW);
        // The plan without backfill, but that a gang that does not fit may say it is not
        // expected to start within the window.
        for (o, f) in plan.outcomes.iter_mut().zip(&off.outcomes) {
            let note = o.message.strip_prefix(f.message.as_str());
            prop_assert!(
                note.is_some_and(|n| n.is_empty() || n.starts_with("; not expected to start within the backfill window")),
                "{}: {:?} with backfill, {:?} without", o.gang, o.message, f.message
            );
            o.message.clone_from(&f.message);
        }
        prop_assert_eq!(plan, off);
    }

    #[test]
    fn backfill_disabled_is_backfill_off(c in cluster(true), policy in policy()) {
        let snap = build(&c);
        let off = Backfill { enabled: false, ..policy };
        prop_assert_eq!(schedule(&snap, &config(Some(off)), NOW), schedule(&snap, &config(None), NOW));
    }

    #[test]
    fn a_gang_started_on_held_capacity_ends_before_the_hold_starts(c in cluster(true), policy in policy()) {
        let snap = build(&c);
        let plan = schedule(&snap, &config(Some(policy.clone())), NOW);
        for o in plan.outcomes.iter().filter(|o| o.backfilled) {
            prop_assert_eq!(o.reason, Reason::Scheduled);
            let Some(g) = snap.gangs.iter().find(|g| g.key == o.gang) else { continue };
            let limit = gang_limit(&snap, &policy, g);
            prop_assert!(limit.is_some(), "{} backfilled with no time limit", g.key);
            let end = NOW.plus(limit.unwrap_or_default());
            let mine = |k: &PodKey| snap.pods.iter().any(|p| p.key == *k && p.gang.as_ref().is_some_and(|m| m.gang == g.key));
            let on: Vec<&str> = plan.bindings.iter().filter(|b| mine(&b.pod)).map(|b| b.node.as_str()).collect();
            let held = plan.outcomes.iter().any(|h| {
                h.gang != g.key
                    && h.expected_start.is_some_and(|s| end <= s)
                    && h.held_nodes.iter().any(|n| on.contains(&n.as_str()))
            });
            prop_assert!(held, "{} backfilled on {:?}, ending at {}, by no hold there: {:#?}", g.key, on, end, plan.outcomes);
        }
    }

    #[test]
    fn the_first_gang_in_line_starts_when_it_is_expected_to(c in cluster(true), policy in policy()) {
        let snap = build(&c);
        fair_start(&snap, &policy)?;
    }

    #[test]
    fn with_backfill_the_cycle_is_the_reference_cycle(c in cluster(true), policy in policy()) {
        let snap = build(&c);
        let config = config(Some(policy));
        let plan = schedule(&snap, &config, NOW);
        prop_assert_eq!(&plan, &schedule(&snap, &config, NOW));
        prop_assert_eq!(&plan, &scheduler_core::schedule_reference(&snap, &config, NOW));
    }
}

/// Nodes with these GPUs; on the first, a pod of 4 GPUs started now that ends in an hour; and
/// waiting gangs `w0`, `w1`, … (oldest first) of priority 0.
fn example(nodes: &[i64], waiting: Vec<WaitingSpec>) -> Snapshot {
    let n = waiting.len();
    build(&Cluster {
        nodes: nodes.to_vec(),
        running: vec![RunningSpec {
            node: 0,
            gpus: 4,
            started_ago: Some(0),
            limit: Some(3600),
            deleting: false,
            gang: None,
        }],
        running_gangs: vec![],
        waiting,
        ages: (0..n).collect(),
        usage: false,
    })
}

/// A gang of `min` (+ `extra`) members of 4 GPUs.
fn wait(min: u32, extra: u32, limit: Option<u64>, pod_limits: &[Option<u64>]) -> WaitingSpec {
    let mut pod_limits = pod_limits.to_vec();
    pod_limits.resize(8, None);
    WaitingSpec { min, extra, gpus: 4, cpu: 1, priority: 0, limit, pod_limits }
}

/// `w0` (2 × 4 GPUs) waits an hour for the first node; `w1`, whose limit ends it in 20 minutes,
/// starts on the second meanwhile; at the hour `w0` starts.
#[test]
fn a_gang_that_ends_first_starts_on_held_capacity_and_the_first_gang_starts_on_time() {
    let snap = example(&[4, 4], vec![wait(2, 0, None, &[]), wait(1, 0, Some(1200), &[Some(600)])]);
    let policy = Backfill::default();
    let (first, plan, then) = at_expected_start(&snap, &policy).expect("w0 waits for resources");
    assert_eq!(first.name, "w0");
    assert!(outcome(&plan, &ObjectKey::new("ml", "w1")).unwrap().backfilled);
    assert_eq!(outcome(&then, &first).unwrap().reason, Reason::Scheduled);
    fair_start(&snap, &policy).unwrap();
}

/// Found by the fair-start property (fixed): `w1`'s `Gang` states 20 minutes, its member's own
/// limit 2 hours. A gang's limit to backfill by was its own before its members', while a running
/// pod's end is its own limit first: `w1` started on what is held for `w0` from the hour, still
/// ran then, and `w0` slipped to two hours. Now a gang starting is judged by the longest of its
/// members' limits, each read as it will be once it runs.
#[test]
fn a_member_whose_own_limit_outlasts_its_gangs_does_not_delay_the_first_gang() {
    let snap = example(&[4, 4], vec![wait(2, 0, None, &[]), wait(1, 0, Some(1200), &[Some(7200)])]);
    fair_start(&snap, &Backfill::default()).unwrap();
}

/// Found by the fair-start property (fixed): the same through the policy's default (20
/// minutes) for `w1`, one of whose members states none and the other 2 hours.
#[test]
fn a_member_whose_own_limit_outlasts_the_default_does_not_delay_the_first_gang() {
    let snap = example(&[4, 4, 4], vec![wait(3, 0, None, &[]), wait(2, 0, None, &[None, Some(7200)])]);
    let policy = Backfill { default_time_limit: Some(Duration::from_secs(1200)), ..Backfill::default() };
    fair_start(&snap, &policy).unwrap();
}

/// Found by the fair-start property (fixed): `w1`, younger than `w0` and of its priority,
/// starts its minimum on the third node (nothing is held there) and its extra member waits.
/// When the first node freed at the hour, `w1` had a member on a node, so it went before `w0`
/// ("gangs already partly running" first) and its extra member took the room held for `w0` —
/// with no limit, for good. Now members beyond a satisfied gang's minimum are placed after
/// every gang's minimum.
#[test]
fn extras_of_a_younger_gang_wait_behind_an_older_ones_minimum() {
    let mut w1 = wait(1, 1, None, &[]);
    w1.gpus = 2;
    let snap = example(&[4, 4, 2], vec![wait(2, 0, None, &[]), w1]);
    fair_start(&snap, &Backfill::default()).unwrap();
}
