//! Property tests for the invariants of the cycle, on random clusters:
//! a gang is bound fully or not at all; no node exceeds its allocatable; the same input gives the
//! same plan, whatever order the snapshot lists things in; victims are strictly lower priority.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use scheduler_core::config::{Config, Scoring};
use scheduler_core::model::terms::{self, PodTerms};
use scheduler_core::model::*;
use scheduler_core::resources::Resources;
use scheduler_core::{Reason, schedule, tree};

#[derive(Clone, Debug)]
struct GangSpec {
    members: u32,
    min: u32,
    gpus: i64,
    cpu: i64,
    priority: i32,
    topology: bool,
    subgroups: bool,
    /// What its members ask of the pods around them (see [`terms_of`]); 0 nothing.
    terms: u8,
}

fn gang_spec() -> impl Strategy<Value = GangSpec> {
    (
        1u32..6,
        0u32..6,
        prop_oneof![Just(0i64), Just(1), Just(2), Just(4), Just(8)],
        1i64..16,
        0i32..3,
        any::<bool>(),
        any::<bool>(),
        prop_oneof![4 => Just(0u8), 6 => 1u8..9],
    )
        .prop_map(|(members, min, gpus, cpu, priority, topology, subgroups, terms)| GangSpec {
            members,
            min: min.clamp(1, members),
            gpus,
            cpu: cpu * 500,
            priority: priority * 100,
            topology,
            subgroups,
            terms,
        })
}

/// (nodes as (gpus, cores, rack), gangs, running pods as (node, priority))
type Cluster = (Vec<(i64, i64, u8)>, Vec<GangSpec>, Vec<(usize, i32)>);

fn cluster() -> impl Strategy<Value = Cluster> {
    (
        prop::collection::vec((prop_oneof![Just(0i64), Just(4), Just(8)], 4i64..33, 0u8..3), 1..10),
        prop::collection::vec(gang_spec(), 1..8),
        // Running non-gang pods: (node index, priority)
        prop::collection::vec((0usize..10, 0i32..3), 0..6),
    )
}

fn build(nodes: &[(i64, i64, u8)], gangs: &[GangSpec], running: &[(usize, i32)]) -> Snapshot {
    let mut snap = Snapshot::default();
    for (i, &(gpus, cpus, rack)) in nodes.iter().enumerate() {
        snap.nodes.push(Node {
            name: format!("n{i:02}").into(),
            allocatable: Resources::new()
                .with("cpu", cpus * 1000)
                .with("nvidia.com/gpu", gpus)
                .with("pods", 20),
            labels: [("rack".to_string(), format!("r{rack}")), (HOSTNAME.to_string(), format!("n{i:02}"))]
                .into(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        });
    }
    let mut used: HashMap<usize, (i64, i64)> = HashMap::new();
    for (j, &(node, priority)) in running.iter().enumerate() {
        let node = node % nodes.len();
        let (g, c) = used.entry(node).or_default();
        // Only what fits: a cluster others overcommitted is not what these invariants are about.
        if *g < nodes[node].0 && *c + 1000 <= nodes[node].1 * 1000 {
            *g += 1;
            *c += 1000;
            let mut p = pod(&format!("bg-{j}"), None, 1, 1000, priority * 100, Some(format!("n{node:02}")));
            // Someone else's pods: labelled like gang 0's or 1's members now and then, and some
            // keep gang 0's members out of their rack, or bind the port gangs ask for.
            p.labels = labels(&[("app", &format!("g{}", j % 3))]);
            p.terms = match j % 4 {
                1 => Some(Box::new(PodTerms {
                    anti_affinity: vec![term("rack", "g0", None)],
                    ..PodTerms::default()
                })),
                3 => Some(Box::new(PodTerms { host_ports: vec![port(80)], ..PodTerms::default() })),
                _ => None,
            };
            snap.pods.push(p);
        }
    }
    for (i, g) in gangs.iter().enumerate() {
        let key = ObjectKey::new("ns", format!("g{i}"));
        let mut gang =
            Gang::new(key.clone(), g.min, Source { dialect: Dialect::KubeGang, kind: "Gang".into() });
        if g.topology {
            gang.topology_key = Some("rack".into());
        }
        // Every third gang prefers one host (within its rack, when it has one).
        if i % 3 == 0 {
            gang.topology_preferred = Some(HOSTNAME.into());
        }
        if g.subgroups && g.members >= 2 {
            gang.min_member = 2;
            gang.subgroups = vec![
                SubGroup {
                    name: "a".into(),
                    parent: None,
                    min_member: 1,
                    pod_floor: 0,
                    topology_key: None,
                    topology_preferred: None,
                },
                SubGroup {
                    name: "b".into(),
                    parent: None,
                    min_member: (g.members - 1).min(g.min).max(1),
                    pod_floor: 0,
                    // Without a gang-level rack, the larger subgroup wants one of its own; in
                    // every third gang it prefers one host too.
                    topology_preferred: (i % 3 == 1).then(|| HOSTNAME.to_string()),
                    topology_key: (!g.topology).then(|| "rack".to_string()),
                },
            ];
            if i % 2 == 1 && g.members >= 3 {
                // Every other such gang nests both leaves under an inner subgroup with a pod floor
                // (KAI's mid-level minMember): often above the leaves' minimums.
                gang.min_member = 1;
                gang.subgroups.push(SubGroup {
                    name: "mid".into(),
                    parent: None,
                    min_member: 2,
                    pod_floor: g.members - 1,
                    topology_preferred: None,
                    topology_key: None,
                });
                for s in gang.subgroups.iter_mut().filter(|s| s.name != "mid") {
                    s.parent = Some("mid".into());
                }
            }
        }
        for m in 0..g.members {
            let sub = if gang.subgroups.is_empty() {
                None
            } else if m == 0 {
                Some("a")
            } else {
                Some("b")
            };
            let mut p = pod(&format!("g{i}-{m}"), Some(&key), g.gpus, g.cpu, g.priority, None);
            if let (Some(s), Some(mem)) = (sub, p.gang.as_mut()) {
                mem.subgroup = Some(s.into());
            }
            p.labels = labels(&[("app", &format!("g{i}"))]);
            p.terms = terms_of(g.terms, i, m);
            snap.pods.push(p);
        }
        snap.gangs.push(gang);
    }
    snap
}

const HOSTNAME: &str = "kubernetes.io/hostname";

fn labels(pairs: &[(&str, &str)]) -> Labels {
    Labels::new(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

/// A required term of `key` selecting `app=<app>` in the pods' namespace (`ns`), or in the
/// namespaces a selector matches.
fn term(key: &str, app: &str, namespace_selector: Option<LabelSelector>) -> terms::AffinityTerm {
    terms::AffinityTerm {
        selector: Some(LabelSelector {
            match_labels: [("app".to_string(), app.to_string())].into(),
            match_expressions: vec![],
        }),
        namespaces: if namespace_selector.is_some() { vec![] } else { vec!["ns".into()] },
        namespace_selector,
        topology_key: key.into(),
    }
}

fn port(n: i32) -> terms::HostPort {
    terms::HostPort { protocol: "TCP".into(), ip: terms::BIND_ALL.into(), port: n }
}

fn spread_of(key: &str, app: &str, max_skew: i32, min_domains: i32) -> terms::SpreadConstraint {
    terms::SpreadConstraint {
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: terms::Unsatisfiable::DoNotSchedule,
        selector: term(key, app, None).selector,
        min_domains,
        node_affinity_policy: terms::Inclusion::Honor,
        node_taints_policy: terms::Inclusion::Ignore,
    }
}

/// What member `m` of gang `g` asks of the pods around it, by kind `kind` (0: nothing).
fn terms_of(kind: u8, g: usize, m: u32) -> Option<Box<PodTerms>> {
    let app = format!("g{g}");
    let t = match kind {
        1 => PodTerms { anti_affinity: vec![term(HOSTNAME, &app, None)], ..PodTerms::default() },
        2 => PodTerms { anti_affinity: vec![term("rack", &app, None)], ..PodTerms::default() },
        3 => PodTerms { spread: vec![spread_of("rack", &app, 1, 1)], ..PodTerms::default() },
        4 => PodTerms { host_ports: vec![port(80 + (m % 2) as i32)], ..PodTerms::default() },
        5 => PodTerms { affinity: vec![term("rack", &app, None)], ..PodTerms::default() },
        // Affinity to another gang's members (or someone else's pods labelled like them).
        6 => PodTerms {
            affinity: vec![term("rack", &format!("g{}", (g + 1) % 3), None)],
            ..PodTerms::default()
        },
        7 => PodTerms {
            spread: vec![spread_of(HOSTNAME, &app, 1, 3)],
            anti_affinity: vec![term("rack", "g0", Some(LabelSelector::default()))],
            ..PodTerms::default()
        },
        8 => PodTerms { unevaluated: vec!["spec.resourceClaims".into()], ..PodTerms::default() },
        _ => return None,
    };
    Some(Box::new(t))
}

fn pod(name: &str, gang: Option<&GangKey>, gpus: i64, cpu: i64, priority: i32, node: Option<String>) -> Pod {
    Pod {
        key: ObjectKey::new("ns", name),
        uid: format!("uid-{name}").into(),
        requests: Resources::new().with("nvidia.com/gpu", gpus).with("cpu", cpu),
        node_selector: BTreeMap::new(),
        affinity: vec![],
        tolerations: vec![],
        priority,
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

/// What the inter-pod filters promise of every pod a plan binds, checked from the plan alone: no
/// two host ports in conflict on a node; no required anti-affinity term, the new pod's or a pod's
/// beside it, selecting a pod in its domain; a pod with required affinity shares each term's
/// domain with a pod its terms all select (or selects itself: the first of a group); and no pod
/// asking for what the cycle does not evaluate is bound.
fn inter_pod_invariants(snap: &Snapshot, plan: &scheduler_core::Plan) -> Result<(), TestCaseError> {
    let by_key: HashMap<&PodKey, &Pod> = snap.pods.iter().map(|p| (&p.key, p)).collect();
    let node: HashMap<&str, &Node> = snap.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut on: Vec<(&Pod, &Node, bool)> = snap
        .pods
        .iter()
        .filter(|p| p.uses_node())
        .filter_map(|p| Some((p, *node.get(p.node_name.as_deref()?)?, false)))
        .collect();
    on.extend(plan.bindings.iter().map(|b| (by_key[&b.pod], node[b.node.as_str()], true)));
    let none = Labels::default();
    let selects = |t: &terms::AffinityTerm, q: &Pod| t.selects(&q.key.namespace, &q.labels, &none);
    let same =
        |key: &str, a: &Node, b: &Node| a.labels.get(key).is_some_and(|v| b.labels.get(key) == Some(v));
    for &(a, na, new_a) in &on {
        if new_a {
            prop_assert!(
                a.unevaluated().is_empty(),
                "{} asks for {:?} and was bound",
                a.key,
                a.unevaluated()
            );
        }
        for &(b, nb, new_b) in &on {
            if a.key == b.key || !(new_a || new_b) {
                continue;
            }
            if na.name == nb.name {
                for pa in a.host_ports() {
                    prop_assert!(
                        !b.host_ports().iter().any(|pb| pa.conflicts(pb)),
                        "{} and {} both bind {pa} on {}",
                        a.key,
                        b.key,
                        na.name
                    );
                }
            }
            for t in a.anti_affinity() {
                prop_assert!(
                    !(same(&t.topology_key, na, nb) && selects(t, b)),
                    "{}'s anti-affinity ({}) selects {} beside it",
                    a.key,
                    t.topology_key,
                    b.key
                );
            }
        }
        let affinity = a.terms().map_or(&[][..], |t| &t.affinity[..]);
        if new_a && !affinity.is_empty() && !affinity.iter().all(|t| selects(t, a)) {
            let found = on.iter().any(|&(b, nb, _)| {
                b.key != a.key && affinity.iter().all(|t| selects(t, b) && same(&t.topology_key, na, nb))
            });
            prop_assert!(found, "{} was bound with no pod its affinity selects in its domain", a.key);
        }
    }
    Ok(())
}

/// A pod of someone else's on a node, as a busy cluster has them: any size (overcommitting its
/// node, or asking for what no node offers), finished or not, on a node that may not exist.
#[derive(Clone, Debug)]
struct OtherPod {
    node: usize,
    cpu: i64,
    extended: i64,
    phase: PodPhase,
}

impl OtherPod {
    fn pod(&self, j: usize) -> Pod {
        let mut p = pod(&format!("other-{j:02}"), None, 0, self.cpu, 0, Some(format!("n{:02}", self.node)));
        p.requests.set("example.com/fpga", self.extended);
        p.phase = self.phase;
        p
    }
}

fn other_pod() -> impl Strategy<Value = OtherPod> {
    (
        0usize..12,
        prop_oneof![Just(0i64), Just(500), Just(40_000), Just(i64::MAX)],
        prop_oneof![Just(0i64), Just(1)],
        prop_oneof![Just(PodPhase::Running), Just(PodPhase::Succeeded), Just(PodPhase::Failed)],
    )
        .prop_map(|(node, cpu, extended, phase)| OtherPod { node, cpu, extended, phase })
}

fn config(spread: bool) -> Config {
    Config { scoring: if spread { Scoring::Spread } else { Scoring::BinPack }, ..Config::default() }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn all_or_nothing_and_capacity((nodes, gangs, running) in cluster(), spread in any::<bool>()) {
        let snap = build(&nodes, &gangs, &running);
        let plan = schedule(&snap, &config(spread), Time::from_secs(1_000));
        let pods: HashMap<&PodKey, &Pod> = snap.pods.iter().map(|p| (&p.key, p)).collect();

        // Capacity: every node's requests, existing and new, fit its allocatable.
        let mut load: HashMap<&str, Resources> = HashMap::new();
        for p in snap.pods.iter().filter(|p| p.uses_node()) {
            load.entry(p.node_name.as_deref().unwrap()).or_default().add(&p.requests);
        }
        let mut count: HashMap<&str, i64> = HashMap::new();
        for b in &plan.bindings {
            load.entry(b.node.as_str()).or_default().add(&pods[&b.pod].requests);
            *count.entry(b.node.as_str()).or_default() += 1;
        }
        for n in &snap.nodes {
            let used = load.get(n.name.as_str()).cloned().unwrap_or_default();
            for (r, amount) in used.iter() {
                prop_assert!(amount <= n.allocatable.get(r), "{} over {r}: {amount} > {}", n.name, n.allocatable.get(r));
            }
        }

        // All or nothing: a gang with bindings was placed whole, and a gang placed whole reports it.
        for g in &snap.gangs {
            let bound: Vec<_> = plan.bindings.iter().filter(|b| pods[&b.pod].gang.as_ref().is_some_and(|m| m.gang == g.key)).collect();
            let outcome = plan.outcome(&g.key).expect("every gang has an outcome");
            if !bound.is_empty() {
                prop_assert_eq!(outcome.reason, Reason::Scheduled, "{}: {}", g.key, outcome.message);
                let need = g.min_pods().unwrap() as usize;
                prop_assert!(bound.len() >= need, "{}: {} bound < {need}", g.key, bound.len());
            }
            if outcome.reason == Reason::Scheduled {
                prop_assert!(!bound.is_empty());
            }
            if let Some(key) = &g.topology_key {
                let domains: std::collections::BTreeSet<_> = bound.iter()
                    .map(|b| snap.nodes.iter().find(|n| n.name == b.node).unwrap().labels.get(key))
                    .collect();
                prop_assert!(domains.len() <= 1, "{} spans {domains:?}", g.key);
            }
        }

        inter_pod_invariants(&snap, &plan)?;

        // Victims are strictly lower priority than their preemptor.
        for e in &plan.evictions {
            let victim = pods[&e.pod].priority;
            let preemptor = e.preemptor.as_ref().expect("only preemption evicts here");
            let top = snap.pods.iter().filter(|p| p.gang.as_ref().is_some_and(|m| &m.gang == preemptor)).map(|p| p.priority).max().unwrap();
            prop_assert!(victim < top);
        }
    }

    /// The cycle's shortcuts (a node order kept per class of alike pods, topology domains pruned
    /// by a bound, node usage carried in the snapshot instead of added up pod by pod, the JobSet
    /// pods on nodes found once a cycle for exclusive placement, the domains exclusive child jobs
    /// hold folded into feasible nodes and kept up to date as gangs are committed) choose exactly
    /// what the plain algorithm chooses; and with JobSets about, no pod newly bound shares a rack
    /// with an exclusive child job of another job at its priority, either way round.
    #[test]
    fn shortcuts_never_change_a_plan(
        (nodes, gangs, running) in cluster(),
        singles in prop::collection::vec((prop_oneof![Just(0i64), Just(1), Just(4)], 1i64..4), 0..12),
        single_terms in 0u8..9,
        others in prop::collection::vec(other_pod(), 0..8),
        carried in any::<bool>(),
        spread in any::<bool>(),
        exclusive in any::<bool>(),
    ) {
        let mut snap = build(&nodes, &gangs, &running);
        let job_key = |job: String| -> Labels {
            BTreeMap::from([(scheduler_core::labels::JOBSET_JOB_KEY.to_string(), job)]).into()
        };
        if exclusive {
            // JobSets: each gang's members in two child jobs, every other gang's placed
            // exclusively by rack; half the pods of someone else's are child jobs of other
            // JobSets (exclusive or not), and so are some pods of ours outside any gang.
            for p in snap.pods.iter_mut().filter(|p| p.gang.is_some()) {
                let name = p.key.name.clone();
                let (gang, member) = name.rsplit_once('-').unwrap_or((name.as_str(), "0"));
                let job = format!("{gang}-job{}", member.parse::<usize>().unwrap_or(0) % 2);
                p.labels = job_key(job);
                if gang.bytes().map(usize::from).sum::<usize>() % 2 == 0 {
                    p.exclusive_topology = Some("rack".into());
                }
            }
        }
        for (j, &(gpus, cpu)) in singles.iter().enumerate() {
            let mut p = pod(&format!("single-{j:02}"), None, gpus, cpu * 1000, 0, None);
            p.scheduler_name = "gang-scheduler".into();
            // Replicas of one kind, with terms of their own (runs of alike pods the inter-pod
            // filters concern), labelled like gang 1's members.
            p.labels = labels(&[("app", "g1")]);
            p.terms = terms_of(single_terms, 1, j as u32);
            if exclusive && j % 3 == 0 {
                p.labels = job_key(format!("single-{j}"));
            }
            snap.pods.push(p);
        }
        for (j, o) in others.iter().enumerate() {
            let mut p = o.pod(j);
            if exclusive && j % 2 == 0 {
                p.labels = job_key(format!("other-{j}"));
                if j % 4 == 0 {
                    p.exclusive_topology = Some("rack".into());
                }
            }
            snap.pods.push(p);
        }
        if carried {
            snap.usage = Some(Usage::of(&snap.pods));
        }
        let config = config(spread);
        let now = Time::from_secs(1_000);
        let plan = schedule(&snap, &config, now);
        prop_assert_eq!(&plan, &scheduler_core::schedule_reference(&snap, &config, now));
        inter_pod_invariants(&snap, &plan)?;

        // JobSet's exclusive anti-affinity, both ways, over every pair with a pod newly bound.
        let rack_of: HashMap<&str, &str> = snap.nodes.iter()
            .filter_map(|n| Some((n.name.as_str(), n.labels.get("rack")?.as_str()))).collect();
        let by_key: HashMap<&PodKey, &Pod> = snap.pods.iter().map(|p| (&p.key, p)).collect();
        let mut on: Vec<(&Pod, &str, bool)> = snap.pods.iter()
            .filter(|p| p.uses_node())
            .filter_map(|p| Some((p, *rack_of.get(p.node_name.as_deref()?)?, false)))
            .collect();
        on.extend(plan.bindings.iter().filter_map(|b| Some((by_key[&b.pod], *rack_of.get(b.node.as_str())?, true))));
        let job = |p: &Pod| p.labels.get(scheduler_core::labels::JOBSET_JOB_KEY).map(str::to_string);
        for &(a, rack_a, new_a) in &on {
            if a.exclusive_topology.is_none() || job(a).is_none() {
                continue;
            }
            for &(b, rack_b, new_b) in &on {
                if (new_a || new_b) && rack_a == rack_b && job(b).is_some() && job(a) != job(b) && a.priority == b.priority {
                    prop_assert!(false, "{} (exclusive, {:?}) and {} ({:?}) share rack {rack_a}", a.key, job(a), b.key, job(b));
                }
            }
        }
    }

    #[test]
    fn same_input_same_plan_in_any_order((nodes, gangs, running) in cluster(), seed in any::<u64>()) {
        let snap = build(&nodes, &gangs, &running);
        let config = config(false);
        let now = Time::from_secs(1_000);
        let plan = schedule(&snap, &config, now);
        prop_assert_eq!(&plan, &schedule(&snap, &config, now));
        let mut shuffled = snap.clone();
        let rotate = |len: usize| if len == 0 { 0 } else { (seed as usize) % len };
        let (n, p, g) = (rotate(shuffled.nodes.len()), rotate(shuffled.pods.len()), rotate(shuffled.gangs.len()));
        shuffled.nodes.rotate_left(n);
        shuffled.pods.rotate_left(p);
        shuffled.gangs.rotate_left(g);
        shuffled.pods.reverse();
        prop_assert_eq!(plan, schedule(&shuffled, &config, now));
    }
}

/// A cluster for the PodDisruptionBudget property: nodes of 8 GPUs, each running 1 or 2 pods of
/// someone else's (8 or 4 GPUs; `app=web` or `app=batch`; priority 0–40), one budget over `web`
/// pods that allows either no disruption or plenty, and a gang of whole-node members above them.
#[derive(Clone, Debug)]
struct BudgetCase {
    /// Per node: its pods as (web?, priority).
    nodes: Vec<Vec<(bool, i32)>>,
    web_allowed: i32,
    members: u32,
}

fn budget_case() -> impl Strategy<Value = BudgetCase> {
    (
        prop::collection::vec(prop::collection::vec((any::<bool>(), 0i32..5), 1..3), 1..7),
        prop_oneof![Just(0i32), Just(100)],
        1u32..4,
    )
        .prop_map(|(nodes, web_allowed, members)| BudgetCase {
            nodes: nodes.into_iter().map(|ps| ps.into_iter().map(|(w, p)| (w, p * 10)).collect()).collect(),
            web_allowed,
            members,
        })
}

fn budget_snapshot(case: &BudgetCase) -> Snapshot {
    let mut snap = Snapshot::default();
    for (i, pods) in case.nodes.iter().enumerate() {
        let name = format!("n{i:02}");
        snap.nodes.push(Node {
            name: name.as_str().into(),
            allocatable: Resources::new().with("cpu", 64_000).with("nvidia.com/gpu", 8).with("pods", 20),
            labels: BTreeMap::new(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        });
        let gpus = 8 / pods.len() as i64;
        for (j, &(web, priority)) in pods.iter().enumerate() {
            let mut p = pod(&format!("bg-{i}-{j}"), None, gpus, 1000, priority, Some(name.to_string()));
            let app = if web { "web" } else { "batch" };
            p.labels = BTreeMap::from([("app".to_string(), app.to_string())]).into();
            snap.pods.push(p);
        }
    }
    let key = ObjectKey::new("ns", "urgent");
    for m in 0..case.members {
        snap.pods.push(pod(&format!("urgent-{m}"), Some(&key), 8, 1000, 1_000, None));
    }
    snap.gangs.push(Gang::new(key, case.members, Source { dialect: Dialect::KubeGang, kind: "Gang".into() }));
    snap.budgets.push(Budget {
        key: ObjectKey::new("ns", "web"),
        selector: Some(LabelSelector {
            match_labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
            match_expressions: vec![],
        }),
        disruptions_allowed: case.web_allowed,
        disrupted_pods: Default::default(),
    });
    snap
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Preemption never takes a victim whose eviction violates a PodDisruptionBudget when a set
    /// of victims within the budgets makes room; when none does, it still preempts (a last
    /// resort, as kube-scheduler), and the plan names the budget of exactly the violating victims.
    #[test]
    fn budgets_are_violated_only_as_a_last_resort(case in budget_case()) {
        let snap = budget_snapshot(&case);
        let plan = schedule(&snap, &Config::default(), Time::from_secs(1_000));
        let protected = |name: &str| {
            case.web_allowed == 0
                && snap.pods.iter().any(|p| p.key.name == name && p.labels.get("app") == Some("web"))
        };
        // Every member needs a whole node: nodes whose pods can all go within the budget.
        let free_nodes = case.nodes.iter().filter(|ps| case.web_allowed > 0 || ps.iter().all(|&(w, _)| !w)).count();
        let needed = case.members as usize;
        let outcome = plan.outcomes.iter().find(|o| o.gang.name == "urgent").expect("an outcome");
        if free_nodes >= needed {
            for e in &plan.evictions {
                prop_assert!(!protected(&e.pod.name), "{} violates the budget though {free_nodes} nodes are free of it", e.pod);
            }
        } else if case.nodes.len() >= needed {
            prop_assert_eq!(outcome.reason, Reason::Preempting, "{}", outcome.message);
        }
        for e in &plan.evictions {
            let named = e.budget.as_ref().map(ToString::to_string);
            let want = protected(&e.pod.name).then(|| "ns/web".to_string());
            prop_assert_eq!(named, want, "{}", e.pod);
        }
        if plan.evictions.iter().any(|e| e.budget.is_some()) {
            prop_assert!(outcome.message.contains("PodDisruptionBudget ns/web"), "{}", outcome.message);
        }
    }
}

/// What a member or a pod of ours outside any gang asks of volumes, in [`volume_snapshot`]:
/// 0 nothing; 1 a claim bound to a local PV on node `k`; 2 a claim of its own, WaitForFirstConsumer,
/// with static PVs on some nodes and a class that provisions on racks r0 and r1; 3 the one
/// ReadWriteOncePod claim; 4 an inline GCE disk, read-write; 5 an EBS CSI volume of its own,
/// counted against node limits; 6 the one unbound claim every such pod shares.
type VolumeAsk = (u8, usize);

fn volume_ask() -> impl Strategy<Value = VolumeAsk> {
    (prop_oneof![3 => Just(0u8), 1 => 1u8..7], 0usize..10)
}

/// `snap` with storage: local PVs, static PVs for the WaitForFirstConsumer claims on `statics`
/// nodes, CSINodes with an EBS limit of `limit` on every node; and each pod asking as `asks` says
/// (in pod order, cycling).
fn volume_snapshot(
    mut snap: Snapshot,
    asks: &[VolumeAsk],
    statics: &[usize],
    limit: i64,
    provisions: bool,
) -> Snapshot {
    use scheduler_core::model::volume::*;
    let n = snap.nodes.len();
    let st = &mut snap.storage;
    let class = |name: &str, provisioner: &str, racks: &[&str]| StorageClass {
        name: name.into(),
        provisioner: provisioner.into(),
        binding_mode: BindingMode::WaitForFirstConsumer,
        allowed_topologies: if racks.is_empty() {
            vec![]
        } else {
            vec![TopologyTerm {
                match_label_expressions: vec![("rack".into(), racks.iter().map(|r| r.to_string()).collect())],
            }]
        },
    };
    let provisioner = if provisions { "csi.example.com" } else { NO_PROVISIONER };
    st.classes.insert("wffc".into(), class("wffc", provisioner, &["r0", "r1"]));
    st.classes.insert("shared".into(), class("shared", "csi.example.com", &[]));
    let on = |node: usize| {
        Some(vec![NodeSelectorTerm {
            match_expressions: vec![NodeSelectorRequirement {
                key: "kubernetes.io/hostname".into(),
                operator: NodeSelectorOperator::In,
                values: vec![format!("n{node:02}")],
            }],
            match_fields: vec![],
        }])
    };
    let pv = |name: String, class: Option<&str>, affinity, attach: Option<Attachable>| Pv {
        name,
        class: class.map(String::from),
        capacity: 1 << 30,
        access_modes: [AccessMode::ReadWriteOnce, AccessMode::ReadWriteOncePod].into(),
        volume_mode: VolumeMode::Filesystem,
        node_affinity: affinity,
        labels: BTreeMap::new(),
        claim_ref: None,
        available: true,
        deleting: false,
        attach,
    };
    for &s in statics {
        let name = format!("static-{s}");
        st.volumes.insert(name.clone(), pv(name, Some("wffc"), on(s % n), None));
    }
    for node in 0..n {
        st.csi_nodes.insert(
            format!("n{node:02}"),
            CsiNode {
                name: format!("n{node:02}"),
                limits: [("ebs.csi.aws.com".to_string(), limit)].into(),
                migrated: Default::default(),
            },
        );
    }
    let claim = |name: &str, class: Option<&str>, mode: AccessMode, volume: Option<String>| Pvc {
        key: ObjectKey::new("ns", name),
        uid: format!("uid-{name}"),
        class: class.map(String::from),
        access_modes: [mode].into(),
        storage: 1 << 30,
        selector: None,
        volume_mode: VolumeMode::Filesystem,
        bind_completed: volume.is_some(),
        volume_name: volume,
        selected_node: None,
        deleting: false,
        lost: false,
        owner: None,
    };
    st.claims.insert(
        ObjectKey::new("ns", "rwop"),
        claim("rwop", None, AccessMode::ReadWriteOncePod, Some("rwop".into())),
    );
    st.volumes.insert("rwop".into(), pv("rwop".into(), None, None, None));
    st.claims.insert(
        ObjectKey::new("ns", "everyone"),
        claim("everyone", Some("shared"), AccessMode::ReadWriteMany, None),
    );
    let pods = snap.pods.iter_mut().filter(|p| p.is_pending()).enumerate();
    for (i, p) in pods {
        let (ask, k) = asks.get(i % asks.len().max(1)).copied().unwrap_or((0, 0));
        let own = format!("c-{}", p.key.name);
        let volume = match ask {
            1 => {
                let pv_name = format!("local-{own}");
                snap.storage.volumes.insert(pv_name.clone(), pv(pv_name.clone(), None, on(k % n), None));
                snap.storage.claims.insert(
                    ObjectKey::new("ns", own.as_str()),
                    claim(&own, None, AccessMode::ReadWriteOnce, Some(pv_name)),
                );
                PodVolume::Claim { claim: own, ephemeral: false }
            }
            2 => {
                snap.storage.claims.insert(
                    ObjectKey::new("ns", own.as_str()),
                    claim(&own, Some("wffc"), AccessMode::ReadWriteOnce, None),
                );
                PodVolume::Claim { claim: own, ephemeral: false }
            }
            3 => PodVolume::Claim { claim: "rwop".into(), ephemeral: false },
            4 => PodVolume::Disk(Disk::GcePd { pd_name: format!("pd-{}", k % 3), read_only: false }),
            5 => {
                let pv_name = format!("ebs-{own}");
                let attach =
                    Attachable { driver: "ebs.csi.aws.com".into(), handle: pv_name.clone(), in_tree: None };
                snap.storage.volumes.insert(pv_name.clone(), pv(pv_name.clone(), None, None, Some(attach)));
                snap.storage.claims.insert(
                    ObjectKey::new("ns", own.as_str()),
                    claim(&own, None, AccessMode::ReadWriteOnce, Some(pv_name)),
                );
                PodVolume::Claim { claim: own, ephemeral: false }
            }
            6 => PodVolume::Claim { claim: "everyone".into(), ephemeral: false },
            _ => continue,
        };
        p.volumes = vec![volume];
    }
    for node in &mut snap.nodes {
        node.labels.insert("kubernetes.io/hostname".into(), node.name.to_string());
    }
    snap
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// With volumes about — local PVs, static PVs and provisioning for WaitForFirstConsumer
    /// claims, one ReadWriteOncePod claim, inline disks, attach limits, one claim everyone shares
    /// — the shortcuts still choose what the plain algorithm chooses, and the plan keeps the
    /// volume rules jointly: no static PV given twice, no pod bound while a claim of its is bound
    /// first, no gang half bound and half waiting for volumes, the ReadWriteOncePod claim used by
    /// one pod at most, local PVs' nodes kept to, attach limits and disk conflicts respected.
    #[test]
    fn volume_rules_hold_jointly_and_shortcuts_keep_them(
        (nodes, gangs, running) in cluster(),
        singles in prop::collection::vec((prop_oneof![Just(0i64), Just(1)], 1i64..3), 0..6),
        asks in prop::collection::vec(volume_ask(), 1..12),
        statics in prop::collection::vec(0usize..10, 0..8),
        limit in 1i64..3,
        provisions in any::<bool>(),
    ) {
        let mut snap = build(&nodes, &gangs, &running);
        for (j, &(gpus, cpu)) in singles.iter().enumerate() {
            let mut p = pod(&format!("single-{j:02}"), None, gpus, cpu * 1000, 0, None);
            p.scheduler_name = "gang-scheduler".into();
            snap.pods.push(p);
        }
        let snap = volume_snapshot(snap, &asks, &statics, limit, provisions);
        let config = Config::default();
        let now = Time::from_secs(1_000);
        let plan = schedule(&snap, &config, now);
        prop_assert_eq!(&plan, &scheduler_core::schedule_reference(&snap, &config, now));

        let by_key: HashMap<&PodKey, &Pod> = snap.pods.iter().map(|p| (&p.key, p)).collect();
        let waiting: std::collections::BTreeSet<&PodKey> = plan.volumes.iter().map(|v| &v.pod).collect();
        let mut placed: Vec<(&Pod, &str)> = plan.bindings.iter().map(|b| (by_key[&b.pod], b.node.as_str())).collect();
        for b in &plan.bindings {
            prop_assert!(!waiting.contains(&b.pod), "{} bound while its claims are bound first", b.pod);
        }
        for v in &plan.volumes {
            if !placed.iter().any(|(p, _)| p.key == v.pod) {
                placed.push((by_key[&v.pod], v.node.as_str()));
            }
        }
        let mut pvs = std::collections::BTreeMap::new();
        let mut claims = std::collections::BTreeMap::new();
        for v in &plan.volumes {
            // A claim shared by pods is given one volume, on one node, for all of them.
            let choice = (v.volume.clone(), v.volume.is_none().then(|| v.node.clone()));
            let prev = claims.insert(v.claim.clone(), choice.clone());
            prop_assert!(prev.is_none_or(|c| c == choice), "claim {} given two volumes", v.claim);
            if let Some(pv) = &v.volume {
                let prev = pvs.insert(pv.clone(), v.claim.clone());
                prop_assert!(prev.is_none_or(|c| c == v.claim), "PV {pv} given to two claims");
                let pinned = snap.storage.volumes[pv].node_affinity.as_ref()
                    .map(|t| t[0].match_expressions[0].values[0].clone());
                prop_assert!(pinned.is_none_or(|n| n == v.node), "PV {pv} on the wrong node");
            }
        }
        for g in &snap.gangs {
            let mine = |k: &PodKey| by_key[k].gang.as_ref().is_some_and(|m| m.gang == g.key);
            let bound = plan.bindings.iter().any(|b| mine(&b.pod));
            let held = plan.volumes.iter().any(|v| mine(&v.pod));
            prop_assert!(!(bound && held), "{} half bound, half waiting for volumes", g.key);
        }
        let on_node = snap.pods.iter().filter(|p| p.uses_node()).map(|p| (p, p.node_name.as_deref().unwrap()));
        let everything: Vec<(&Pod, &str)> = on_node.chain(placed.iter().copied()).collect();
        let rwop = everything.iter().filter(|(p, _)| p.volumes.iter().any(|v| matches!(v, scheduler_core::model::volume::PodVolume::Claim { claim, .. } if claim == "rwop"))).count();
        prop_assert!(rwop <= 1, "the ReadWriteOncePod claim used by {rwop} pods");
        let mut attached: HashMap<&str, std::collections::BTreeSet<String>> = HashMap::new();
        let mut disks: HashMap<&str, Vec<&str>> = HashMap::new();
        for (p, node) in &everything {
            for v in &p.volumes {
                match v {
                    scheduler_core::model::volume::PodVolume::Claim { claim, .. } => {
                        let c = &snap.storage.claims[&ObjectKey::new("ns", claim.as_str())];
                        if let Some(pv) = c.volume_name.as_ref().map(|n| &snap.storage.volumes[n]) {
                            if let Some(a) = &pv.attach {
                                attached.entry(node).or_default().insert(a.handle.clone());
                            }
                            if let Some(t) = &pv.node_affinity {
                                prop_assert_eq!(&t[0].match_expressions[0].values[0], &node.to_string(), "{} off its local PV", p.key);
                            }
                        }
                    }
                    scheduler_core::model::volume::PodVolume::Disk(scheduler_core::model::volume::Disk::GcePd { pd_name, .. }) => {
                        let on = disks.entry(node).or_default();
                        prop_assert!(!on.contains(&pd_name.as_str()), "disk {pd_name} mounted twice read-write on {node}");
                        on.push(pd_name);
                    }
                    _ => {}
                }
            }
        }
        for (node, handles) in &attached {
            prop_assert!(handles.len() as i64 <= limit, "{node}: {} EBS volumes > {limit}", handles.len());
        }
    }
}

/// A pod of ours outside any gang for [`runs_resumed_past_other_pods_place_one_after_another`], by
/// `kind`: 0–4 the run's shape (1 GPU, 2 CPU, `app=web`); 5 another shape (1 CPU); 6 the run's
/// shape nominated to node `k`; 7 the run's shape with a claim bound to a local PV on node `k`;
/// 8 another shape with such a claim; 9 the run's shape kept apart from `app=web` by hostname;
/// 10 a JobSet pod of the run's shape; 11 a claim of its own, WaitForFirstConsumer, provisioned
/// anywhere; 12 twice the run's CPU, in another namespace with other labels.
fn resumed_single(snap: &mut Snapshot, j: usize, kind: u8, k: usize) {
    use scheduler_core::model::volume::*;
    let name = format!("single-{j:02}");
    let (gpus, cpu) = match kind {
        5 | 8 => (0, 1_000),
        12 => (1, 4_000),
        _ => (1, 2_000),
    };
    let mut p = pod(&name, None, gpus, cpu, 0, None);
    p.scheduler_name = "gang-scheduler".into();
    p.labels = labels(&[("app", "web")]);
    let node = format!("n{:02}", k % snap.nodes.len());
    let claim = |class: Option<&str>, volume: Option<String>| Pvc {
        key: ObjectKey::new("ns", format!("c-{name}").as_str()),
        uid: format!("uid-c-{name}"),
        class: class.map(String::from),
        access_modes: [AccessMode::ReadWriteOnce].into(),
        storage: 1 << 30,
        selector: None,
        volume_mode: VolumeMode::Filesystem,
        bind_completed: volume.is_some(),
        volume_name: volume,
        selected_node: None,
        deleting: false,
        lost: false,
        owner: None,
    };
    match kind {
        6 => p.nominated_node = Some(node),
        7 | 8 => {
            let pv = format!("local-{name}");
            snap.storage.volumes.insert(
                pv.clone(),
                Pv {
                    name: pv.clone(),
                    class: None,
                    capacity: 1 << 30,
                    access_modes: [AccessMode::ReadWriteOnce].into(),
                    volume_mode: VolumeMode::Filesystem,
                    node_affinity: Some(vec![NodeSelectorTerm {
                        match_expressions: vec![NodeSelectorRequirement {
                            key: HOSTNAME.into(),
                            operator: NodeSelectorOperator::In,
                            values: vec![node],
                        }],
                        match_fields: vec![],
                    }]),
                    labels: BTreeMap::new(),
                    claim_ref: None,
                    available: false,
                    deleting: false,
                    attach: None,
                },
            );
            let c = claim(None, Some(pv));
            snap.storage.claims.insert(c.key.clone(), c);
            p.volumes = vec![PodVolume::Claim { claim: format!("c-{name}"), ephemeral: false }];
        }
        9 => {
            p.terms = Some(Box::new(PodTerms {
                anti_affinity: vec![term(HOSTNAME, "web", None)],
                ..PodTerms::default()
            }))
        }
        10 => p.labels = labels(&[(scheduler_core::labels::JOBSET_JOB_KEY, "train-0")]),
        11 => {
            snap.storage.classes.insert(
                "wffc".into(),
                StorageClass {
                    name: "wffc".into(),
                    provisioner: "csi.example.com".into(),
                    binding_mode: BindingMode::WaitForFirstConsumer,
                    allowed_topologies: vec![],
                },
            );
            let c = claim(Some("wffc"), None);
            snap.storage.claims.insert(c.key.clone(), c);
            p.volumes = vec![PodVolume::Claim { claim: format!("c-{name}"), ephemeral: false }];
        }
        12 => {
            p.key = ObjectKey::new("other", name.as_str());
            p.labels = labels(&[("app", "batch")]);
        }
        _ => {}
    }
    snap.pods.push(p);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A run of alike pods of ours outside any gang goes on past pods of other shapes between its
    /// pods (another size, a nominated node, a local volume, a claim to provision): the plan is
    /// the one placing every pod one after another makes — and pods that end a run (kept apart,
    /// a JobSet's) still end it.
    #[test]
    fn runs_resumed_past_other_pods_place_one_after_another(
        (nodes, gangs, running) in cluster(),
        singles in prop::collection::vec((prop_oneof![4 => 0u8..5, 8 => 5u8..13], 0usize..10), 0..40),
        carried in any::<bool>(),
        spread in any::<bool>(),
    ) {
        let mut snap = build(&nodes, &gangs, &running);
        for (j, &(kind, k)) in singles.iter().enumerate() {
            resumed_single(&mut snap, j, kind, k);
        }
        if carried {
            snap.usage = Some(Usage::of(&snap.pods));
        }
        let config = config(spread);
        let now = Time::from_secs(1_000);
        let plan = schedule(&snap, &config, now);
        prop_assert_eq!(&plan, &scheduler_core::schedule_reference(&snap, &config, now));
        inter_pod_invariants(&snap, &plan)?;
    }
}

/// The case a resumed run must get right that random clusters seldom make: two pods between a
/// run's pods take a node outside the run's best nodes until then, which makes it the best (the
/// fullest) for the run's next pod. Ten nodes of 5 GPUs: the run's first pod takes n00, two
/// pods with local volumes on n09 take 2 of its GPUs, and the run's second pod goes to n09 (3
/// left), not n00 (4 left) — as one pod after another.
#[test]
fn a_node_taken_between_a_runs_pods_is_the_next_ones_best() {
    let nodes: Vec<(i64, i64, u8)> = vec![(5, 32, 0); 10];
    let mut snap = build(&nodes, &[], &[]);
    for (j, (kind, k)) in [(0, 0), (7, 9), (7, 9), (0, 0)].into_iter().enumerate() {
        resumed_single(&mut snap, j, kind, k);
    }
    let config = Config::default();
    let now = Time::from_secs(1_000);
    let plan = schedule(&snap, &config, now);
    assert_eq!(plan, scheduler_core::schedule_reference(&snap, &config, now));
    let on: Vec<(&str, &str)> =
        plan.bindings.iter().map(|b| (b.pod.name.as_str(), b.node.as_str())).collect();
    assert_eq!(on, [("single-00", "n00"), ("single-01", "n09"), ("single-02", "n09"), ("single-03", "n09")]);
}

/// A cluster for the elastic-preemption property: whole-GPU nodes held by running gangs, some
/// with members beyond their minimum (subgroups, elastic steps, a budget), and an urgent gang.
#[derive(Clone, Debug)]
struct ElasticCase {
    nodes: usize,
    /// Per gang: (members, minimum, GPUs each, priority, subgroups?, step 0 none / 1 power of two
    /// / 2 multiple of 2).
    gangs: Vec<(u32, u32, i64, i32, bool, u8)>,
    /// A budget over gang 0's members allowing this many disruptions, if any.
    budget: Option<i32>,
    urgent: u32,
    rack: bool,
    /// Start times (seconds) the members take in turn.
    starts: Vec<u8>,
}

fn elastic_case() -> impl Strategy<Value = ElasticCase> {
    (
        2usize..9,
        prop::collection::vec(
            (1u32..7, 1u32..7, prop_oneof![Just(4i64), Just(8)], 0i32..3, any::<bool>(), 0u8..3),
            1..5,
        ),
        prop::option::of(0i32..3),
        1u32..4,
        any::<bool>(),
        prop::collection::vec(0u8..8, 1..24),
    )
        .prop_map(|(nodes, gangs, budget, urgent, rack, starts)| ElasticCase {
            nodes,
            gangs: gangs
                .into_iter()
                .map(|(m, min, gpus, pr, sub, step)| (m, min.min(m), gpus, pr * 10, sub && m >= 2, step))
                .collect(),
            budget,
            urgent,
            rack,
            starts,
        })
}

fn elastic_snapshot(case: &ElasticCase) -> Snapshot {
    let mut snap = Snapshot::default();
    for i in 0..case.nodes {
        snap.nodes.push(Node {
            name: format!("n{i:02}").into(),
            allocatable: Resources::new().with("cpu", 64_000).with("nvidia.com/gpu", 8).with("pods", 20),
            labels: [("rack".to_string(), format!("r{}", i % 2))].into(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        });
    }
    let mut free = vec![8i64; case.nodes];
    for (j, &(members, min, gpus, priority, subgroups, step)) in case.gangs.iter().enumerate() {
        let key = ObjectKey::new("ns", format!("v{j}"));
        let mut gang =
            Gang::new(key.clone(), min, Source { dialect: Dialect::KubeGang, kind: "Gang".into() });
        gang.elastic_step = match step {
            1 => Some(ElasticStep::PowerOfTwo),
            2 => Some(ElasticStep::MultipleOf(2)),
            _ => None,
        };
        // Every fourth gang's minimum is never taken (KAI's semi-preemptible).
        if j % 4 == 3 {
            gang.disruption = Disruption::Surplus;
        }
        if subgroups {
            // Every other such gang needs only one of its two subgroups.
            gang.min_member = if j % 2 == 0 { 2 } else { 1 };
            gang.subgroups = ["a", "b"]
                .iter()
                .map(|n| SubGroup {
                    name: (*n).into(),
                    parent: None,
                    min_member: if *n == "a" { 1 } else { min.saturating_sub(1).max(1) },
                    pod_floor: 0,
                    topology_key: None,
                    topology_preferred: None,
                })
                .collect();
            // Every third such gang needs more pods in all than its subgroups' minimums.
            if j % 3 == 2 {
                gang.pod_floor = members.saturating_sub(1).max(1);
            }
        }
        for m in 0..members {
            // First fit; a member with no room waits (its gang may be short of its minimum).
            let node = free.iter().position(|&f| f >= gpus);
            if let Some(n) = node {
                free[n] -= gpus;
            }
            let mut p =
                pod(&format!("v{j}-{m}"), Some(&key), gpus, 1000, priority, node.map(|n| format!("n{n:02}")));
            let turn = (j * 7 + m as usize) % case.starts.len();
            p.started = node.map(|_| Time::from_secs(100 + i64::from(case.starts[turn])));
            if let (true, Some(mem)) = (subgroups, p.gang.as_mut()) {
                mem.subgroup = Some(if m == 0 { "a" } else { "b" }.into());
            }
            if j == 0 {
                p.labels = BTreeMap::from([("app".to_string(), "v0".to_string())]).into();
            }
            snap.pods.push(p);
        }
        snap.gangs.push(gang);
    }
    if let Some(allowed) = case.budget {
        snap.budgets.push(Budget {
            key: ObjectKey::new("ns", "v0"),
            selector: Some(LabelSelector {
                match_labels: BTreeMap::from([("app".to_string(), "v0".to_string())]),
                match_expressions: vec![],
            }),
            disruptions_allowed: allowed,
            disrupted_pods: Default::default(),
        });
    }
    let key = ObjectKey::new("ns", "urgent");
    for m in 0..case.urgent {
        snap.pods.push(pod(&format!("urgent-{m}"), Some(&key), 8, 1000, 1_000, None));
    }
    let mut urgent = Gang::new(key, case.urgent, Source { dialect: Dialect::KubeGang, kind: "Gang".into() });
    if case.rack {
        urgent.topology_key = Some("rack".into());
    }
    snap.gangs.push(urgent);
    snap
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Preemption leaves no gang half-bound: each gang it takes members of either keeps its
    /// minimum (and a size its elastic step allows, or its minimum) or loses every member on a
    /// node (never one whose minimum is never taken); and each subgroup it takes members of keeps its own minimum or loses every member.
    #[test]
    fn preemption_leaves_every_victim_gang_whole_or_gone(case in elastic_case()) {
        let snap = elastic_snapshot(&case);
        let plan = schedule(&snap, &Config::default(), Time::from_secs(1_000));
        let evicted: std::collections::BTreeSet<&str> = plan.evictions.iter().map(|e| e.pod.name.as_str()).collect();
        for g in snap.gangs.iter().filter(|g| g.key.name != "urgent") {
            let members: Vec<&Pod> = snap.pods.iter().filter(|p| p.gang.as_ref().is_some_and(|m| m.gang == g.key)).collect();
            if !members.iter().any(|p| evicted.contains(p.key.name.as_str())) {
                continue;
            }
            let mut left: tree::LeafCounts = BTreeMap::new();
            for p in members.iter().filter(|p| p.uses_node() && !evicted.contains(p.key.name.as_str())) {
                let leaf = tree::leaf_of(g, p.gang.as_ref().and_then(|m| m.subgroup.as_deref())).unwrap();
                *left.entry(leaf.to_string()).or_default() += 1;
            }
            let count = tree::pods_in(&left);
            let min = g.min_pods().unwrap();
            for leaf in g.leaves() {
                let touched = members.iter().any(|p| {
                    evicted.contains(p.key.name.as_str()) && p.gang.as_ref().and_then(|m| m.subgroup.as_deref()) == Some(leaf.name.as_str())
                });
                let n = left.get(&leaf.name).copied().unwrap_or(0);
                prop_assert!(!touched || count == 0 || n >= leaf.min_member, "{} left subgroup {} at {n} of {}", g.key, leaf.name, leaf.min_member);
            }
            prop_assert!(
                count > 0 || g.disruption != Disruption::Surplus,
                "{} lost its minimum, which is never taken", g.key
            );
            if count > 0 {
                prop_assert!(tree::satisfied(g, &left), "{} left {left:?} below its minimum", g.key);
                prop_assert!(
                    g.elastic_step.is_none_or(|s| s.allows(count) || count == min),
                    "{} left at {count}, which its step {:?} does not allow", g.key, g.elastic_step
                );
            }
        }
    }
}
