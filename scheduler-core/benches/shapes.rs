//! The scheduling cycle on the shapes of kube-scheduler's `scheduler_perf`, so figures can be set
//! side by side with upstream's (ours are "core only": `schedule(snapshot, config, now)` alone, no
//! API server, no binding).
//!
//! Run: `cargo bench -p scheduler-core --bench shapes` (add `-- --quick` for a fast look, or a
//! group name such as `S1` to run one). Targets, from the issue that introduced them:
//!
//! - S1: 5,000 nodes (4 CPU, 32Gi, 110 pods) with 5,000 bound pods and 50,000 pending pods of
//!   100m/500Mi: ≥ 200,000 pods/s; the same at 15,000 nodes: ≥ 100,000 pods/s.
//! - S2/S3: 5,000 nodes in 50 racks; 3,000 gangs × 3, 9 gangs × 1,000, and 1,500 gangs × 4 with a
//!   required rack: ≤ 50 ms per 10,000 pods, every rack considered.
//! - S4: 4,000 nodes (100 with 8 GPUs), 140,000 bound pods, one pending gang of 16 × 4 GPUs: a
//!   whole cycle ≤ 50 ms (reading the same cluster from a JSON dump is `kubectl-gang`'s
//!   `read_dump` bench).
//! - scaling: S1's pod mix at 1,000 / 5,000 / 15,000 nodes (10 pending pods per node) — cost
//!   should grow about linearly.
//! - S1-terms, S4-terms, scaling-terms: the same shapes with 30% of the pods carrying inter-pod
//!   terms (required anti-affinity to their own replicas by hostname, or a DoNotSchedule spread of
//!   them over zones): each within 1.5× of the shape without, S1 still ≥ 2M pods/s at 5,000 nodes,
//!   S4 still ≤ 5 ms, and linear from 1,000 to 15,000 nodes. In S4-terms the pending gang's 16
//!   members all carry both (no two on one node, spread over zones).
//! - S1-volumes, S4-volumes: S1 and S4 with one pod in ten carrying a PVC (pending ones and, in
//!   S4, bound ones), half of them bound to a local PV on one node (node affinity), half
//!   WaitForFirstConsumer claims provisioned where the class allows: within 1.5× of the case
//!   without.
//!
//! - S1-holds: S1 with a time limit on every bound pod and 10 gangs of 200 whole-node members
//!   that fit only later: a cycle that makes 10 holds, within 1.5× of S1's (and the same
//!   snapshot without backfill beside it).
//!
//! - anchored: a gang of 500 pairs that must each share a node, placed by the group-by-group
//!   pass (every pair) or refused by it (its trial budget spent on the first pair): the cost of
//!   the second pass, bounded.
//!
//! Criterion reports throughput in elements (pods) per second for every case. Snapshots carry
//! their node usage and open pods (`model::Usage`), as the scheduler's (`cluster::Live`) and the
//! one-pass assembly's do.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use scheduler_core::labels;
use scheduler_core::model::terms::{AffinityTerm, Inclusion, PodTerms, SpreadConstraint, Unsatisfiable};
use scheduler_core::model::*;
use scheduler_core::resources::Resources;
use scheduler_core::{Config, Plan, schedule};

const GANG_SCHEDULER: &str = "gang-scheduler";

fn node(name: String, cpu: i64, memory: i64, gpus: i64, labels: &[(&str, String)]) -> Node {
    let mut allocatable = Resources::new().with("cpu", cpu).with("memory", memory).with("pods", 110);
    if gpus > 0 {
        allocatable.set("nvidia.com/gpu", gpus);
    }
    Node {
        name: name.into(),
        allocatable,
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        taints: vec![],
        unschedulable: false,
        ready: true,
    }
}

fn pod(
    namespace: &str,
    name: String,
    requests: Resources,
    node: Option<String>,
    gang: Option<&GangKey>,
) -> Pod {
    Pod {
        key: ObjectKey::new(namespace, name.clone()),
        uid: name.into(),
        requests,
        node_selector: BTreeMap::new(),
        affinity: vec![],
        tolerations: vec![],
        priority: 0,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        phase: if node.is_some() { PodPhase::Running } else { PodPhase::Pending },
        scheduler_name: if node.is_some() { "default-scheduler".into() } else { GANG_SCHEDULER.into() },
        node_name: node,
        nominated_node: None,
        created: Time::default(),
        deleting: false,
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

fn gang(namespace: &str, name: String, size: u32) -> Gang {
    Gang::new(
        ObjectKey::new(namespace, name),
        size,
        Source { dialect: Dialect::KubeGang, kind: "Gang".into() },
    )
}

/// S1: `nodes` nodes of 4 CPU / 32Gi / 110 pods, one bound pod each, and `pending` pods of
/// 100m/500Mi that belong to no gang (each is a gang of one, as in `SchedulingBasic`).
fn s1(nodes: usize, pending: usize) -> Snapshot {
    let small = || Resources::new().with("cpu", 100).with("memory", 500 << 20);
    let mut snap = Snapshot::default();
    for i in 0..nodes {
        let name = format!("node-{i:05}");
        snap.nodes.push(node(name.clone(), 4_000, 32 << 30, 0, &[]));
        snap.pods.push(pod("init", format!("init-{i:05}"), small(), Some(name), None));
    }
    for i in 0..pending {
        snap.pods.push(pod("bench", format!("pod-{i:06}"), small(), None, None));
    }
    snap
}

/// S1 with backfill's work to do: every bound pod states a time limit and ends at its own minute
/// within the next day (node `i`'s at `i mod 1,440` minutes), and 10 gangs of 200 whole-node
/// members (priority 10, so decided first) fit only once enough nodes have emptied: each gets a
/// hold (2,000 nodes held in all), found by bisection over 1,440 steps; the 50,000 pods of S1
/// go on the other 3,000 nodes.
fn s1_holds() -> Snapshot {
    let mut snap = s1(5_000, 50_000);
    let now = Time::from_secs(1_000);
    for (i, p) in snap.pods.iter_mut().filter(|p| p.node_name.is_some()).enumerate() {
        p.started = Some(now);
        p.time_limit = Some(std::time::Duration::from_secs(60 * (1 + (i as u64 % 1_440))));
        // As important as the big gangs: they wait for it to end rather than preempt it.
        p.priority = 10;
    }
    for g in 0..10 {
        let gang = gang("bench", format!("big-{g}"), 200);
        for m in 0..200 {
            let requests = Resources::new().with("cpu", 4_000).with("memory", 1 << 30);
            let mut p = pod("bench", format!("big-{g}-{m:03}"), requests, None, Some(&gang.key));
            p.priority = 10;
            snap.pods.push(p);
        }
        snap.gangs.push(gang);
    }
    snap
}

fn backfill_config() -> Config {
    Config { backfill: Some(scheduler_core::config::Backfill::default()), ..config() }
}

/// S2/S3: 5,000 nodes (32 CPU / 128Gi) in 50 racks of 100, and gangs of 1-CPU/2Gi pods.
fn racks(gangs: usize, size: u32, rack_required: bool) -> Snapshot {
    let mut snap = Snapshot::default();
    for i in 0..5_000 {
        let rack = ("topology.kubernetes.io/rack", format!("rack-{:02}", i / 100));
        snap.nodes.push(node(format!("node-{i:05}"), 32_000, 128 << 30, 0, &[rack]));
    }
    for g in 0..gangs {
        let mut gang = gang("bench", format!("gang-{g:05}"), size);
        if rack_required {
            gang.topology_key = Some("topology.kubernetes.io/rack".into());
        }
        for m in 0..size {
            let requests = Resources::new().with("cpu", 1_000).with("memory", 2 << 30);
            snap.pods.push(pod("bench", format!("gang-{g:05}-{m:04}"), requests, None, Some(&gang.key)));
        }
        snap.gangs.push(gang);
    }
    snap
}

/// S5: 15,000 nodes of 8 GPUs in four levels (3 zones > 30 blocks > 750 racks of 20 hosts), 30%
/// of them busy (every GPU taken), and 1,000 pending gangs of 8–64 members of 2 GPUs each; with
/// `levels`, each gang requires one block and prefers one rack, else none of it.
fn s5(levels: bool) -> Snapshot {
    let mut snap = Snapshot::default();
    for i in 0..15_000usize {
        let name = format!("node-{i:05}");
        let labels = [
            ("topology.kubernetes.io/zone", format!("zone-{}", i / 5_000)),
            ("kube-gang.io/block", format!("block-{:02}", i / 500)),
            ("kube-gang.io/rack", format!("rack-{:03}", i / 20)),
            ("kubernetes.io/hostname", name.clone()),
        ];
        snap.nodes.push(node(name.clone(), 64_000, 512 << 30, 8, &labels));
        if i % 10 < 3 {
            let requests =
                Resources::new().with("cpu", 1_000).with("memory", 1 << 30).with("nvidia.com/gpu", 8);
            snap.pods.push(pod("busy", format!("busy-{i:05}"), requests, Some(name), None));
        }
    }
    for g in 0..1_000usize {
        let size = 8 + u32::try_from(g * 7 % 57).unwrap_or(0);
        let mut gang = gang("bench", format!("gang-{g:04}"), size);
        if levels {
            gang.topology_key = Some("kube-gang.io/block".into());
            gang.topology_preferred = Some("kube-gang.io/rack".into());
        }
        for m in 0..size {
            let requests =
                Resources::new().with("cpu", 4_000).with("memory", 16 << 30).with("nvidia.com/gpu", 2);
            snap.pods.push(pod("bench", format!("gang-{g:04}-{m:02}"), requests, None, Some(&gang.key)));
        }
        snap.gangs.push(gang);
    }
    snap
}

/// S4: 4,000 nodes, the first 100 with 8 GPUs (half of those with 4 already in use), 140,000
/// bound pods, and one pending gang of 16 members × 4 GPUs.
fn s4() -> Snapshot {
    let mut snap = Snapshot::default();
    let nodes = 4_000;
    for i in 0..nodes {
        let gpus = if i < 100 { 8 } else { 0 };
        let zone = ("topology.kubernetes.io/zone", format!("zone-{}", i % 3));
        snap.nodes.push(node(format!("node-{i:05}"), 64_000, 256 << 30, gpus, &[zone]));
    }
    for p in 0..140_000 {
        let n = p % nodes;
        let mut requests = Resources::new().with("cpu", 100).with("memory", 200 << 20);
        if n < 100 && n % 2 == 0 && p < nodes {
            requests.set("nvidia.com/gpu", 4);
        }
        let ns = format!("team-{}", p % 40);
        snap.pods.push(pod(&ns, format!("running-{p:06}"), requests, Some(format!("node-{n:05}")), None));
    }
    let trainer = gang("ml", "trainer".into(), 16);
    for m in 0..16 {
        let requests = Resources::new().with("cpu", 8_000).with("memory", 64 << 30).with("nvidia.com/gpu", 4);
        snap.pods.push(pod("ml", format!("trainer-{m:02}"), requests, None, Some(&trainer.key)));
    }
    snap.gangs.push(trainer);
    snap
}

/// S4-exclusive: S4's 4,000 nodes in 400 racks of 10 and its 140,000 bound pods, 10,000 of them
/// JobSet child-job pods (on the first 100 racks), and 50 pending JobSets with exclusive rack
/// topology, each two child jobs of 4 pods: every child job needs a rack no other child job holds.
///
/// `mixed`: the bound child jobs are exclusive too (they hold racks 0–99 against every other
/// JobSet pod), and every other pending JobSet is plain — its pods kept out of the racks the
/// bound ones and the exclusive JobSets committed earlier in the cycle hold (JobSet's
/// anti-affinity applied the other way round).
fn s4_exclusive(mixed: bool) -> Snapshot {
    const RACK: &str = "topology.kubernetes.io/rack";
    let mut snap = Snapshot::default();
    let nodes = 4_000;
    for i in 0..nodes {
        snap.nodes.push(node(
            format!("node-{i:05}"),
            64_000,
            256 << 30,
            0,
            &[(RACK, format!("rack-{:03}", i / 10))],
        ));
    }
    let small = || Resources::new().with("cpu", 100).with("memory", 200 << 20);
    for p in 0..140_000 {
        let ns = format!("team-{}", p % 40);
        let mut bound = if p < 10_000 {
            // JobSet pods, each child job's 4 pods on one of the first 1,000 nodes (racks 0–99).
            let mut pod =
                pod(&ns, format!("js-{p:06}"), small(), Some(format!("node-{:05}", (p / 4) % 1_000)), None);
            pod.labels =
                BTreeMap::from([(labels::JOBSET_JOB_KEY.to_string(), format!("key-{}", p / 4))]).into();
            if mixed {
                pod.exclusive_topology = Some(RACK.into());
            }
            pod
        } else {
            pod(&ns, format!("running-{p:06}"), small(), Some(format!("node-{:05}", p % nodes)), None)
        };
        bound.phase = PodPhase::Running;
        snap.pods.push(bound);
    }
    for j in 0..50 {
        let gang = gang("ml", format!("jobset-{j:02}"), 8);
        for m in 0..8 {
            let requests = Resources::new().with("cpu", 8_000).with("memory", 16 << 30);
            let mut pod = pod("ml", format!("jobset-{j:02}-{m}"), requests, None, Some(&gang.key));
            pod.labels =
                BTreeMap::from([(labels::JOBSET_JOB_KEY.to_string(), format!("pending-{j}-{}", m / 4))])
                    .into();
            if !mixed || j % 2 == 0 {
                pod.exclusive_topology = Some(RACK.into());
            }
            snap.pods.push(pod);
        }
        snap.gangs.push(gang);
    }
    snap
}

const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

/// `app=<app>`.
fn app(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: BTreeMap::from([("app".to_string(), app.to_string())]),
        match_expressions: vec![],
    }
}

/// Required anti-affinity to the pods of `app` (in `namespace`) by hostname: one per node.
fn apart(namespace: &str, of: &str) -> AffinityTerm {
    AffinityTerm {
        selector: Some(app(of)),
        namespaces: vec![namespace.to_string()],
        namespace_selector: None,
        topology_key: HOSTNAME.into(),
    }
}

/// A DoNotSchedule spread of the pods of `app` over zones, maxSkew 1.
fn spread(of: &str) -> SpreadConstraint {
    SpreadConstraint {
        max_skew: 1,
        topology_key: ZONE.into(),
        when_unsatisfiable: Unsatisfiable::DoNotSchedule,
        selector: Some(app(of)),
        min_domains: 1,
        node_affinity_policy: Inclusion::Honor,
        node_taints_policy: Inclusion::Ignore,
    }
}

/// Gives pod `p` (the `i`-th of its kind) the terms of a replica of deployment `d`: every other
/// deployment keeps its replicas on separate nodes, the rest spreads them over zones.
fn replica_of(p: &mut Pod, d: usize) {
    let name = format!("d{d:04}");
    p.labels = BTreeMap::from([("app".to_string(), name.clone())]).into();
    let terms = if d.is_multiple_of(2) {
        PodTerms { anti_affinity: vec![apart(&p.key.namespace, &name)], ..PodTerms::default() }
    } else {
        PodTerms { spread: vec![spread(&name)], ..PodTerms::default() }
    };
    p.terms = Some(Box::new(terms));
}

/// Labels every node with its hostname and one of three zones.
fn zoned(snap: &mut Snapshot) {
    for (i, n) in snap.nodes.iter_mut().enumerate() {
        n.labels.insert(HOSTNAME.into(), n.name.to_string());
        n.labels.entry(ZONE.into()).or_insert_with(|| format!("zone-{}", i % 3));
    }
}

/// S1 with 30% of every pod carrying terms: the pending ones in deployments of 50 replicas
/// (kept apart by hostname, or spread over zones), placed before the rest; of the bound ones,
/// as many again, each kept apart from its own.
fn s1_terms(nodes: usize, pending: usize) -> Snapshot {
    let mut snap = s1(nodes, pending);
    zoned(&mut snap);
    let with_terms = pending * 3 / 10;
    let mut d = 0;
    for (i, p) in snap.pods.iter_mut().enumerate() {
        if p.node_name.is_some() {
            if i % 10 < 3 {
                replica_of(p, 10_000 + i % 50);
            }
            continue;
        }
        let k = i - nodes;
        if k < with_terms {
            // Named ahead of the plain pods (`pod-…`), so they come first in the cycle's order.
            p.key.name = format!("dep-{:06}", k).into();
            if k.is_multiple_of(50) {
                d += 1;
            }
            replica_of(p, d);
        }
    }
    snap
}

/// S4 with the pending gang's 16 members kept on 16 nodes and spread over zones, and 30% of the
/// 140,000 bound pods carrying terms of their own.
fn s4_terms() -> Snapshot {
    let mut snap = s4();
    zoned(&mut snap);
    for (i, p) in snap.pods.iter_mut().enumerate() {
        if p.node_name.is_some() {
            if i % 10 < 3 {
                replica_of(p, i % 400);
            }
        } else {
            p.labels = BTreeMap::from([("app".to_string(), "trainer".to_string())]).into();
            p.terms = Some(Box::new(PodTerms {
                anti_affinity: vec![apart("ml", "trainer")],
                spread: vec![spread("trainer")],
                ..PodTerms::default()
            }));
        }
    }
    snap
}

/// `snap` with one pod in `every` carrying a PVC: pending ones, and with `bound`, the pods on nodes
/// too. Alternately a claim bound to a local PV on one node (the pod's own node; for a pending pod,
/// the node the cycle picks for it without volumes, so every pod still fits), and an unbound
/// WaitForFirstConsumer claim of a class that provisions on every node. Nodes get their
/// `kubernetes.io/hostname` label, as kubelets write it.
fn with_volumes(mut snap: Snapshot, every: usize, bound: bool) -> Snapshot {
    use scheduler_core::model::volume::*;
    let picked: BTreeMap<PodKey, SmolStr> =
        schedule(&carried(snap.clone()), &config(), Time::from_secs(1_000))
            .bindings
            .into_iter()
            .map(|b| (b.pod, b.node))
            .collect();
    for n in &mut snap.nodes {
        n.labels.insert("kubernetes.io/hostname".into(), n.name.to_string());
    }
    let nodes: Vec<String> = snap.nodes.iter().map(|n| n.name.to_string()).collect();
    let st = &mut snap.storage;
    st.classes.insert(
        "wffc".into(),
        StorageClass {
            name: "wffc".into(),
            provisioner: "ebs.csi.aws.com".into(),
            binding_mode: BindingMode::WaitForFirstConsumer,
            allowed_topologies: vec![],
        },
    );
    let mut k = 0usize;
    for (i, p) in snap.pods.iter_mut().enumerate() {
        if i % every != 0 || (!bound && !p.is_pending()) {
            continue;
        }
        k += 1;
        let claim = format!("data-{}", p.key.name);
        let key = ObjectKey::new(p.key.namespace.as_str(), claim.as_str());
        let local = k.is_multiple_of(2) || !p.is_pending();
        let mut pvc = Pvc {
            key: key.clone(),
            uid: format!("uid-{claim}"),
            class: Some("wffc".into()),
            access_modes: [AccessMode::ReadWriteOnce].into(),
            storage: 10 << 30,
            selector: None,
            volume_mode: VolumeMode::Filesystem,
            volume_name: None,
            bind_completed: false,
            selected_node: None,
            deleting: false,
            lost: false,
            owner: None,
        };
        if local {
            let on = p
                .node_name
                .clone()
                .or_else(|| picked.get(&p.key).map(|n| n.to_string()))
                .unwrap_or_else(|| nodes[i % nodes.len()].clone());
            let pv = format!("local-{claim}");
            st.volumes.insert(
                pv.clone(),
                Pv {
                    name: pv.clone(),
                    class: Some("local".into()),
                    capacity: 100 << 30,
                    access_modes: [AccessMode::ReadWriteOnce].into(),
                    volume_mode: VolumeMode::Filesystem,
                    node_affinity: Some(vec![NodeSelectorTerm {
                        match_expressions: vec![NodeSelectorRequirement {
                            key: "kubernetes.io/hostname".into(),
                            operator: NodeSelectorOperator::In,
                            values: vec![on],
                        }],
                        match_fields: vec![],
                    }]),
                    labels: BTreeMap::new(),
                    claim_ref: Some(ClaimRef {
                        namespace: key.namespace.to_string(),
                        name: claim.clone(),
                        uid: pvc.uid.clone(),
                    }),
                    available: false,
                    deleting: false,
                    attach: None,
                },
            );
            pvc.class = Some("local".into());
            pvc.volume_name = Some(pv);
            pvc.bind_completed = true;
        }
        st.claims.insert(key, pvc);
        p.volumes = vec![PodVolume::Claim { claim, ephemeral: false }];
    }
    snap
}

/// The snapshot with its node usage added up, as an assembled snapshot carries it.
/// A gang of 1,000 members in 500 pairs, each pair's required affinity selecting itself on
/// hostname (LeaderWorkerSet subgroups of 2 on `kubernetes.io/hostname`), on 5,000 nodes of 4 CPU
/// of which every other one runs a pod of 3 CPU: member by member, a pair's first goes to the
/// fullest node and its partner finds no room there, so every pair is placed by the second,
/// group-by-group pass. `memory`: each member's memory; at 20Gi no node holds a pair (32Gi
/// each), and the second pass spends its whole trial budget on the first pair and gives up.
fn anchored(memory: i64) -> Snapshot {
    let mut snap = Snapshot::default();
    for i in 0..5_000 {
        let name = format!("node-{i:05}");
        snap.nodes.push(node(name.clone(), 4_000, 32 << 30, 0, &[(HOSTNAME, name.clone())]));
        if i % 2 == 0 {
            let busy = Resources::new().with("cpu", 3_000).with("memory", 1 << 30);
            snap.pods.push(pod("other", format!("busy-{i:05}"), busy, Some(name), None));
        }
    }
    let key = GangKey::new("serve", "disagg");
    snap.gangs.push(gang("serve", "disagg".into(), 1_000));
    for i in 0..1_000 {
        let requests = Resources::new().with("cpu", 1_000).with("memory", memory);
        let mut p = pod("serve", format!("disagg-{i:04}"), requests, None, Some(&key));
        let pair = format!("p{:03}", i / 2);
        p.labels = BTreeMap::from([("pair".to_string(), pair.clone())]).into();
        let selector = LabelSelector {
            match_labels: BTreeMap::from([("pair".to_string(), pair)]),
            match_expressions: vec![],
        };
        p.terms = Some(Box::new(PodTerms {
            affinity: vec![AffinityTerm {
                selector: Some(selector),
                namespaces: vec!["serve".into()],
                namespace_selector: None,
                topology_key: HOSTNAME.into(),
            }],
            ..PodTerms::default()
        }));
        snap.pods.push(p);
    }
    snap
}

fn bench_s5(c: &mut Criterion) {
    let mut group = c.benchmark_group("S5");
    group.sample_size(10);
    for (levels, id) in
        [(false, "15000n-1000gangs-flat"), (true, "15000n-1000gangs-block-required-rack-preferred")]
    {
        let snap = carried(s5(levels));
        let plan = schedule(&snap, &config(), Time::from_secs(1_000));
        let placed = plan.outcomes.iter().filter(|o| o.reason == scheduler_core::Reason::Scheduled).count();
        assert!(placed > 500, "{id}: {placed} gangs placed");
        if levels {
            let preferred = plan.outcomes.iter().filter(|o| o.message.contains("(preferred)")).count();
            assert!(preferred > 0 && preferred < placed, "{id}: {preferred} of {placed} in a preferred rack");
        }
        group.throughput(Throughput::Elements(snap.pods.iter().filter(|p| p.is_pending()).count() as u64));
        group
            .bench_function(id, |b| b.iter(|| schedule(black_box(&snap), &config(), Time::from_secs(1_000))));
    }
    group.finish();
}

fn bench_anchored(c: &mut Criterion) {
    let mut group = c.benchmark_group("anchored");
    group.sample_size(10);
    let fits = carried(anchored(1 << 30));
    check(&fits, 1_000);
    group.throughput(Throughput::Elements(1_000));
    group.bench_function("5000n-500pairs-fit", |b| {
        b.iter(|| schedule(black_box(&fits), &config(), Time::from_secs(1_000)))
    });
    let never = carried(anchored(20 << 30));
    check(&never, 0);
    group.bench_function("5000n-500pairs-never", |b| {
        b.iter(|| schedule(black_box(&never), &config(), Time::from_secs(1_000)))
    });
    group.finish();
}

/// S6: 4,000 nodes (64 CPU) each publishing 8 GPUs through one ResourceSlice (32,000 devices,
/// 40Gi or 80Gi of memory), 30% of them allocated already (whole nodes, 1,200 of them), and 500
/// gangs of 8 pods each claiming 8 GPUs of at least 40Gi by a CEL selector: 350 gangs are
/// placed, each member's claim allocated on its node; 150 find no node with 8 free GPUs.
fn s6() -> Snapshot {
    use scheduler_core::model::device::{
        AttributeValue, Count, Device, DeviceAsk, DeviceClass, DeviceRequest, Reach, ResourceSlice,
        Subrequest,
    };
    const DRIVER: &str = "gpu.example.com";
    let mut snap = Snapshot::default();
    snap.storage.device_classes.insert(
        DRIVER.into(),
        DeviceClass {
            name: DRIVER.into(),
            selectors: vec![format!("device.driver == '{DRIVER}'")],
            config: Vec::new(),
        },
    );
    for i in 0..4_000 {
        let name = format!("node-{i:05}");
        snap.nodes.push(node(name.clone(), 64_000, 512 << 30, 0, &[]));
        let devices = (0..8)
            .map(|d| Device {
                name: format!("gpu-{d}"),
                // Every device distinct, as drivers publish them (a UUID each).
                attributes: BTreeMap::from([
                    (format!("{DRIVER}/index"), AttributeValue::Int(d)),
                    (format!("{DRIVER}/model"), AttributeValue::String("a100".into())),
                    (format!("{DRIVER}/uuid"), AttributeValue::String(format!("gpu-{i:05}-{d}"))),
                ]),
                capacity: BTreeMap::from([(
                    format!("{DRIVER}/memory"),
                    if i % 2 == 0 { "80Gi" } else { "40Gi" }.to_string(),
                )]),
                reach: None,
                consumes: Vec::new(),
                unsupported: None,
                fingerprint: None,
            })
            // As the slice reader does: each device's fingerprint once, when its slice is read.
            .map(|mut d: Device| {
                d.fingerprint = Some(scheduler_core::model::device::fingerprint(DRIVER, &d));
                d
            })
            .collect();
        snap.storage.resource_slices.insert(
            name.clone(),
            ResourceSlice {
                name: name.clone(),
                driver: DRIVER.into(),
                pool: name.clone(),
                generation: 1,
                slice_count: 1,
                reach: Some(Reach::Node(name.clone())),
                devices,
                counters: Vec::new(),
                unsupported: Vec::new(),
            },
        );
        // 30% of the devices in use: every device of 1,200 nodes spread over the cluster.
        if i % 10 < 3 {
            held_claim(&mut snap, i, DRIVER, &name, (0..8).map(|d| format!("gpu-{d}")));
        }
    }
    let ask = DeviceAsk {
        requests: vec![DeviceRequest {
            name: "gpu".into(),
            alternatives: vec![Subrequest {
                name: "gpu".into(),
                class: DRIVER.into(),
                selectors: vec![format!(
                    "device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0"
                )],
                count: Count::Exact(8),
                admin_access: false,
            }],
        }],
        ..DeviceAsk::default()
    };
    for g in 0..500 {
        let gk = GangKey::new("bench", format!("g-{g:03}"));
        snap.gangs.push(gang("bench", format!("g-{g:03}"), 8));
        for m in 0..8 {
            let name = format!("g-{g:03}-{m}");
            let p = pod("bench", name, Resources::new().with("cpu", 8_000), None, Some(&gk));
            with_generated_claim(&mut snap, p, &ask);
        }
    }
    snap
}

fn bench_s6(c: &mut Criterion) {
    let mut group = c.benchmark_group("S6");
    group.sample_size(10);
    let snap = carried(s6());
    let (plan, stats) = scheduler_core::schedule_with_stats(&snap, &config(), Time::from_secs(1_000));
    let placed =
        plan.outcomes.iter().filter(|o| o.reason == scheduler_core::Reason::WaitingForDevices).count();
    assert_eq!(placed, 350, "350 gangs have their devices allocated");
    assert_eq!(plan.claims.len(), 350 * 8);
    // One selector the interpreter runs (the class's `device.driver ==` is decided without it),
    // at most once per device.
    assert!(stats.selector_evaluations <= 32_000, "{stats:?}");
    eprintln!("S6: {} selector evaluations in a cycle", stats.selector_evaluations);
    group.throughput(Throughput::Elements(4_000));
    // The selector verdicts kept from the cycle before (the scheduler's steady state).
    group.bench_function("S6-4000n-32000dev-500x8-dra", |b| {
        b.iter(|| schedule(black_box(&snap), &config(), Time::from_secs(1_000)))
    });
    // None kept: every device's selectors evaluated (the first cycle, or every slice changed).
    group.bench_function("S6-4000n-32000dev-500x8-dra-cold", |b| {
        b.iter_batched(
            || {
                let mut s = snap.clone();
                s.storage.selector_cache = Default::default();
                s
            },
            |s| schedule(black_box(&s), &config(), Time::from_secs(1_000)),
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// S7: partitionable GPUs. `nodes` nodes (64 CPU) each publish `gpus` GPUs in one pool, each GPU
/// a counter set (80Gi of memory, 7 compute) drawn on by its whole device (all of it), two 3g
/// partitions (40Gi, 3) and seven 1g partitions (10Gi, 1): 10 devices a GPU. Every whole GPU of
/// `held` percent of the nodes is allocated already. `gangs` gangs of 8 pods each claim one
/// partition, `firstAvailable` [3g, 1g] by CEL selectors on the profile: a node serves two 3g
/// pods a GPU, or seven 1g. `members` per gang; `one_node`: each gang must be on one node
/// (required topology `kubernetes.io/hostname`), so on one GPU a gang of 7 fits only as seven 1g
/// partitions: taken greedily the first two members take the 3g ones and the third finds nothing,
/// and earlier members' choices are revisited until every member has a 1g partition.
fn s7(nodes: usize, gpus: usize, held: usize, gangs: usize, members: usize, one_node: bool) -> Snapshot {
    use scheduler_core::model::device::{
        AttributeValue, Count, CounterSet, CounterUse, Device, DeviceAsk, DeviceClass, DeviceRequest, Reach,
        ResourceSlice, Subrequest,
    };
    const DRIVER: &str = "gpu.example.com";
    let mut snap = Snapshot::default();
    snap.storage.device_classes.insert(
        DRIVER.into(),
        DeviceClass {
            name: DRIVER.into(),
            selectors: vec![format!("device.driver == '{DRIVER}'")],
            config: Vec::new(),
        },
    );
    let nano = |gi: i128, compute: i128| {
        let n = 1_000_000_000;
        BTreeMap::from([("memory".to_string(), (gi << 30) * n), ("compute".to_string(), compute * n)])
    };
    for i in 0..nodes {
        let name = format!("node-{i:05}");
        snap.nodes.push(node(name.clone(), 64_000, 512 << 30, 0, &[(HOSTNAME, name.clone())]));
        let mut devices = Vec::new();
        let mut counters = Vec::new();
        for g in 0..gpus {
            let set = format!("gpu-{g}-counter-set");
            counters.push(CounterSet { name: set.clone(), nano: nano(80, 7) });
            let parts = std::iter::once(("whole".to_string(), "whole", 80, 7))
                .chain((0..2).map(|k| (format!("3g-{k}"), "3g", 40, 3)))
                .chain((0..7).map(|k| (format!("1g-{k}"), "1g", 10, 1)));
            for (part, profile, gi, compute) in parts {
                let mut d = Device {
                    name: format!("gpu-{g}-{part}"),
                    attributes: BTreeMap::from([
                        (format!("{DRIVER}/profile"), AttributeValue::String(profile.into())),
                        (format!("{DRIVER}/uuid"), AttributeValue::String(format!("{name}-{g}-{part}"))),
                    ]),
                    capacity: BTreeMap::new(),
                    reach: None,
                    consumes: vec![CounterUse { counter_set: set.clone(), nano: nano(gi, compute) }],
                    unsupported: None,
                    fingerprint: None,
                };
                d.fingerprint = Some(scheduler_core::model::device::fingerprint(DRIVER, &d));
                devices.push(d);
            }
        }
        snap.storage.resource_slices.insert(
            name.clone(),
            ResourceSlice {
                name: name.clone(),
                driver: DRIVER.into(),
                pool: name.clone(),
                generation: 1,
                slice_count: 1,
                reach: Some(Reach::Node(name.clone())),
                devices,
                counters,
                unsupported: Vec::new(),
            },
        );
        if i % 100 < held {
            held_claim(&mut snap, i, DRIVER, &name, (0..gpus).map(|g| format!("gpu-{g}-whole")));
        }
    }
    let profile = |p: &str| Subrequest {
        name: format!("gpu/{p}"),
        class: DRIVER.into(),
        selectors: vec![format!("device.attributes['{DRIVER}'].profile == '{p}'")],
        count: Count::Exact(1),
        admin_access: false,
    };
    let ask = DeviceAsk {
        requests: vec![DeviceRequest {
            name: "gpu".into(),
            alternatives: vec![profile("3g"), profile("1g")],
        }],
        ..DeviceAsk::default()
    };
    for g in 0..gangs {
        let gk = GangKey::new("bench", format!("g-{g:04}"));
        let mut gang = gang("bench", format!("g-{g:04}"), u32::try_from(members).unwrap_or(u32::MAX));
        if one_node {
            gang.topology_key = Some(HOSTNAME.into());
        }
        snap.gangs.push(gang);
        for m in 0..members {
            let name = format!("g-{g:04}-{m}");
            let p = pod("bench", name, Resources::new().with("cpu", 1_000), None, Some(&gk));
            with_generated_claim(&mut snap, p, &ask);
        }
    }
    snap
}

fn bench_s7(c: &mut Criterion) {
    let mut group = c.benchmark_group("S7");
    group.sample_size(10);
    // 1,000 nodes × 8 GPUs (80,000 devices), 30% of the nodes held: 700 × 8 × 2 = 11,200 3g
    // partitions free for 350 gangs × 8 = 2,800 pods.
    let fits = carried(s7(1_000, 8, 30, 350, 8, false));
    let plan = schedule(&fits, &config(), Time::from_secs(1_000));
    assert_eq!(plan.claims.len(), 350 * 8, "every member's claim is allocated");
    group.throughput(Throughput::Elements(2_800));
    group.bench_function("S7-1000n-80000dev-350x8-partitions", |b| {
        b.iter(|| schedule(black_box(&fits), &config(), Time::from_secs(1_000)))
    });
    // 200 nodes × 1 GPU, 200 gangs of 7 each on one node: each fits only as seven 1g
    // partitions, found by revisiting the greedy choice.
    let host = carried(s7(200, 1, 0, 200, 7, true));
    let plan = schedule(&host, &config(), Time::from_secs(1_000));
    assert_eq!(plan.claims.len(), 200 * 7, "every gang fits with its choices revisited");
    group.throughput(Throughput::Elements(1_400));
    group.bench_function("S7-200n-2000dev-200x7-one-node-revisited", |b| {
        b.iter(|| schedule(black_box(&host), &config(), Time::from_secs(1_000)))
    });
    // The same with gangs of 8: none fits one GPU however it is chosen, and every gang spends
    // its revisits (within the per-gang and per-cycle budgets).
    let never = carried(s7(200, 1, 0, 200, 8, true));
    let plan = schedule(&never, &config(), Time::from_secs(1_000));
    assert!(plan.claims.is_empty(), "no gang of 8 fits one GPU");
    group.bench_function("S7-200n-2000dev-200x8-one-node-never", |b| {
        b.iter(|| schedule(black_box(&never), &config(), Time::from_secs(1_000)))
    });
    group.finish();
}

/// Adds a claim of a pod running elsewhere that holds `devices` of pool `pool` (node `i`'s).
fn held_claim(
    snap: &mut Snapshot,
    i: usize,
    driver: &str,
    pool: &str,
    devices: impl Iterator<Item = String>,
) {
    use scheduler_core::model::device::{AllocatedDevice, DeviceAsk, DeviceId};
    use scheduler_core::model::volume::{Allocation, ResourceClaim};
    let key = ObjectKey::new("used", format!("held-{i:05}"));
    let devices = devices
        .map(|device| AllocatedDevice {
            request: "gpu".into(),
            id: DeviceId { driver: driver.into(), pool: pool.into(), device },
            admin_access: false,
        })
        .collect();
    snap.storage.resource_claims.insert(
        key.clone(),
        ResourceClaim {
            key,
            uid: format!("held-{i}"),
            deleting: false,
            owner: None,
            allocation: Some(Allocation { node_selector: None, devices }),
            reserved_for: vec![format!("held-{i}")],
            ask: DeviceAsk::default(),
        },
    );
}

/// Adds pod `p` with a claim `gpu` generated from its template and owned by it (as Jobs and
/// JobSets make them), asking `ask`.
fn with_generated_claim(snap: &mut Snapshot, mut p: Pod, ask: &scheduler_core::model::device::DeviceAsk) {
    use scheduler_core::model::volume::{ClaimName, PodResourceClaim, ResourceClaim};
    let name = p.key.name.to_string();
    let claim = ObjectKey::new("bench", format!("{name}-gpu"));
    p.resource_claims =
        vec![PodResourceClaim { name: "gpu".into(), claim: ClaimName::Generated(claim.name.to_string()) }];
    snap.storage.resource_claims.insert(
        claim.clone(),
        ResourceClaim {
            key: claim,
            uid: format!("{name}-gpu"),
            deleting: false,
            owner: Some(name),
            allocation: None,
            reserved_for: Vec::new(),
            ask: ask.clone(),
        },
    );
    snap.pods.push(p);
}

fn carried(mut snap: Snapshot) -> Snapshot {
    snap.usage = Some(Usage::of(&snap.pods));
    snap
}

fn config() -> Config {
    Config { scheduler_name: GANG_SCHEDULER.into(), ..Config::default() }
}

/// Runs the cycle once outside the timer and checks the case measures what it claims.
fn check(snap: &Snapshot, want_bound: usize) -> Plan {
    let plan = schedule(snap, &config(), Time::from_secs(1_000));
    assert_eq!(plan.bindings.len(), want_bound, "every pending pod of the case is placed");
    plan
}

/// [`check`] for the cases with volumes: every pending pod is bound, or placed with its claim
/// bound first (singles); `gang_placed`: the gang's outcome says it placed them all.
fn check_volumes(snap: &Snapshot, want_placed: usize, gang_placed: bool) -> Plan {
    let plan = schedule(snap, &config(), Time::from_secs(1_000));
    let waiting: std::collections::BTreeSet<&PodKey> = plan.volumes.iter().map(|v| &v.pod).collect();
    assert!(!plan.volumes.is_empty(), "some claims are bound first");
    if gang_placed {
        let o = &plan.outcomes[0];
        assert!(o.message.contains(&format!("placed {want_placed} member(s)")), "{}", o.message);
    } else {
        assert_eq!(
            plan.bindings.len() + waiting.len(),
            want_placed,
            "every pending pod of the case is placed"
        );
    }
    plan
}

fn bench_s1(c: &mut Criterion) {
    let mut group = c.benchmark_group("S1");
    group.sample_size(10);
    for nodes in [5_000, 15_000] {
        let snap = carried(s1(nodes, 50_000));
        check(&snap, 50_000);
        group.throughput(Throughput::Elements(50_000));
        let id = BenchmarkId::from_parameter(format!("{nodes}n-50000p"));
        group.bench_with_input(id, &snap, |b, s| {
            b.iter(|| schedule(black_box(s), &config(), Time::from_secs(1_000)))
        });
    }
    group.finish();
}

fn bench_holds(c: &mut Criterion) {
    let mut group = c.benchmark_group("S1-holds");
    group.sample_size(10);
    let snap = carried(s1_holds());
    let plan = schedule(&snap, &backfill_config(), Time::from_secs(1_000));
    assert_eq!(plan.bindings.len(), 50_000, "S1's pods are placed");
    let held = plan.outcomes.iter().filter(|o| o.expected_start.is_some()).count();
    assert_eq!(held, 10, "every big gang has a hold");
    group.throughput(Throughput::Elements(50_000));
    group.bench_function("5000n-50000p-10-holds", |b| {
        b.iter(|| schedule(black_box(&snap), &backfill_config(), Time::from_secs(1_000)))
    });
    // The same snapshot without backfill: what the big gangs cost when they only fail.
    group.bench_function("5000n-50000p-10-unplaced", |b| {
        b.iter(|| schedule(black_box(&snap), &config(), Time::from_secs(1_000)))
    });
    group.finish();
}

fn bench_volumes(c: &mut Criterion) {
    let mut group = c.benchmark_group("volumes");
    group.sample_size(10);
    let s1 = carried(with_volumes(s1(5_000, 50_000), 10, false));
    check_volumes(&s1, 50_000, false);
    group.throughput(Throughput::Elements(50_000));
    group.bench_function("S1-5000n-50000p-10pct-pvc", |b| {
        b.iter(|| schedule(black_box(&s1), &config(), Time::from_secs(1_000)))
    });
    let s4 = carried(with_volumes(s4(), 10, true));
    check_volumes(&s4, 16, true);
    group.throughput(Throughput::Elements(16));
    group.bench_function("S4-4000n-140000bound-16x4gpu-10pct-pvc", |b| {
        b.iter(|| schedule(black_box(&s4), &config(), Time::from_secs(1_000)))
    });
    group.finish();
}

fn bench_racks(c: &mut Criterion) {
    let mut group = c.benchmark_group("S2-S3");
    group.sample_size(10);
    for (name, gangs, size, rack) in
        [("3000x3", 3_000, 3, false), ("9x1000", 9, 1_000, false), ("1500x4-rack", 1_500, 4, true)]
    {
        let snap = carried(racks(gangs, size, rack));
        let pods = gangs * size as usize;
        let plan = check(&snap, pods);
        if rack {
            let all_in_one_rack =
                plan.outcomes.iter().all(|o| o.message.contains("topology.kubernetes.io/rack="));
            assert!(all_in_one_rack, "every rack-bound gang names its rack");
        }
        group.throughput(Throughput::Elements(pods as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &snap, |b, s| {
            b.iter(|| schedule(black_box(s), &config(), Time::from_secs(1_000)))
        });
    }
    group.finish();
}

fn bench_s4(c: &mut Criterion) {
    let mut group = c.benchmark_group("S4");
    group.sample_size(10);
    let snap = carried(s4());
    check(&snap, 16);
    group.throughput(Throughput::Elements(16));
    group.bench_function("4000n-140000bound-16x4gpu", |b| {
        b.iter(|| schedule(black_box(&snap), &config(), Time::from_secs(1_000)))
    });
    group.finish();
}

fn is_exclusive(snap: &Snapshot, pod: &str) -> bool {
    snap.pods.iter().any(|p| p.key.name == pod && p.exclusive_topology.is_some())
}

fn bench_s4_exclusive(c: &mut Criterion) {
    let mut group = c.benchmark_group("S4-exclusive");
    group.sample_size(10);
    for (mixed, id) in
        [(false, "4000n-140000bound-50jobsets-2x4"), (true, "mixed-4000n-140000bound-25+25jobsets-2x4")]
    {
        let snap = carried(s4_exclusive(mixed));
        let plan = check(&snap, 400);
        if mixed {
            // No plain JobSet's pod in a rack an exclusive child job holds.
            let rack = |node: &str| node.trim_start_matches("node-").parse::<usize>().unwrap_or(0) / 10;
            let exclusive: std::collections::BTreeSet<usize> = (0..100)
                .chain(
                    plan.bindings.iter().filter(|b| is_exclusive(&snap, &b.pod.name)).map(|b| rack(&b.node)),
                )
                .collect();
            for b in plan.bindings.iter().filter(|b| !is_exclusive(&snap, &b.pod.name)) {
                assert!(
                    !exclusive.contains(&rack(&b.node)),
                    "{} in exclusive rack {}",
                    b.pod.name,
                    rack(&b.node)
                );
            }
        }
        group.throughput(Throughput::Elements(400));
        group
            .bench_function(id, |b| b.iter(|| schedule(black_box(&snap), &config(), Time::from_secs(1_000))));
    }
    group.finish();
}

fn bench_scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("scaling");
    group.sample_size(10);
    for nodes in [1_000, 5_000, 15_000] {
        let snap = carried(s1(nodes, nodes * 10));
        check(&snap, nodes * 10);
        group.throughput(Throughput::Elements((nodes * 10) as u64));
        let id = BenchmarkId::from_parameter(format!("{nodes}n-{}p", nodes * 10));
        group.bench_with_input(id, &snap, |b, s| {
            b.iter(|| schedule(black_box(s), &config(), Time::from_secs(1_000)))
        });
    }
    group.finish();
}

fn bench_terms(c: &mut Criterion) {
    let mut group = c.benchmark_group("S1-terms");
    group.sample_size(10);
    for nodes in [5_000, 15_000] {
        let snap = carried(s1_terms(nodes, 50_000));
        check_terms(&snap, 50_000);
        group.throughput(Throughput::Elements(50_000));
        let id = BenchmarkId::from_parameter(format!("{nodes}n-50000p-30pct-terms"));
        group.bench_with_input(id, &snap, |b, s| {
            b.iter(|| schedule(black_box(s), &config(), Time::from_secs(1_000)))
        });
    }
    group.finish();
    let mut group = c.benchmark_group("S4-terms");
    group.sample_size(10);
    let snap = carried(s4_terms());
    check_terms(&snap, 16);
    group.throughput(Throughput::Elements(16));
    group.bench_function("4000n-140000bound-16x4gpu-apart-spread", |b| {
        b.iter(|| schedule(black_box(&snap), &config(), Time::from_secs(1_000)))
    });
    group.finish();
    let mut group = c.benchmark_group("scaling-terms");
    group.sample_size(10);
    for nodes in [1_000, 5_000, 15_000] {
        let snap = carried(s1_terms(nodes, nodes * 10));
        check_terms(&snap, nodes * 10);
        group.throughput(Throughput::Elements((nodes * 10) as u64));
        let id = BenchmarkId::from_parameter(format!("{nodes}n-{}p-30pct-terms", nodes * 10));
        group.bench_with_input(id, &snap, |b, s| {
            b.iter(|| schedule(black_box(s), &config(), Time::from_secs(1_000)))
        });
    }
    group.finish();
}

/// [`check`], and that the terms hold: no two replicas kept apart share a node, and each spread
/// deployment's zones differ by at most one.
fn check_terms(snap: &Snapshot, want_bound: usize) {
    let plan = check(snap, want_bound);
    let pods: std::collections::HashMap<&PodKey, &Pod> = snap.pods.iter().map(|p| (&p.key, p)).collect();
    let zone: std::collections::HashMap<&str, &str> =
        snap.nodes.iter().map(|n| (n.name.as_str(), n.labels[ZONE].as_str())).collect();
    let mut apart: std::collections::HashSet<(String, &str)> = std::collections::HashSet::new();
    let mut zones: BTreeMap<(String, &str), usize> = BTreeMap::new();
    for b in &plan.bindings {
        let p = pods[&b.pod];
        let Some(terms) = p.terms() else { continue };
        let app = p.labels.get("app").unwrap_or("").to_string();
        if !terms.anti_affinity.is_empty() {
            assert!(apart.insert((app.clone(), b.node.as_str())), "{app}: two replicas on {}", b.node);
        }
        if !terms.spread.is_empty() {
            *zones.entry((app, zone[b.node.as_str()])).or_default() += 1;
        }
    }
    let mut by_app: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for ((app, _), n) in &zones {
        by_app.entry(app.as_str()).or_default().push(*n);
    }
    for (app, counts) in by_app {
        let (lo, hi) = (counts.iter().min().unwrap_or(&0), counts.iter().max().unwrap_or(&0));
        assert!(hi - lo <= 1 || counts.len() < 3, "{app}: zones {counts:?}");
    }
}

criterion_group!(
    benches,
    bench_s1,
    bench_racks,
    bench_s4,
    bench_s4_exclusive,
    bench_scaling,
    bench_terms,
    bench_volumes,
    bench_anchored,
    bench_s5,
    bench_s6,
    bench_s7,
    bench_holds
);

/// `SHAPES_RUNS=<case>:<n>` runs one case's cycle `n` times and nothing else, for counting with
/// `perf stat -e instructions:u` (run it with `n` and with 0; the difference over `n` is one cycle,
/// and instruction counts do not depend on what else the machine runs). Cases: `S1-5000`,
/// `S1-15000`, `S2-3000x3`, `S2-9x1000`, `S3-1500x4-rack`, `S4`, `S4-exclusive`,
/// `S4-exclusive-mixed`, `scaling-15000`, `S1-terms-5000`, `S1-terms-15000`, `S4-terms`,
/// `scaling-terms-1000`, `scaling-terms-5000`, `scaling-terms-15000`, `S1-5000-volumes`,
/// `S4-volumes`, `anchored-fit`, `anchored-never`, `S5-flat`, `S5-levels`, `S6` (selector verdicts kept between cycles), `S6-cold` (none kept), `S7`,
/// `S7-host`, `S7-never`, `S1-holds` (with backfill).
fn runs(spec: &str) {
    let (case, n) = spec.split_once(':').unwrap_or((spec, "1"));
    let n: usize = n.parse().unwrap_or(1);
    let snap = match case {
        "S1-5000" => carried(s1(5_000, 50_000)),
        "S1-15000" => carried(s1(15_000, 50_000)),
        "S4" => carried(s4()),
        "S4-exclusive" => carried(s4_exclusive(false)),
        "S4-exclusive-mixed" => carried(s4_exclusive(true)),
        "scaling-15000" => carried(s1(15_000, 150_000)),
        "S1-terms-5000" => carried(s1_terms(5_000, 50_000)),
        "S1-terms-15000" => carried(s1_terms(15_000, 50_000)),
        "S4-terms" => carried(s4_terms()),
        "scaling-terms-1000" => carried(s1_terms(1_000, 10_000)),
        "scaling-terms-5000" => carried(s1_terms(5_000, 50_000)),
        "scaling-terms-15000" => carried(s1_terms(15_000, 150_000)),
        "S2-3000x3" => carried(racks(3_000, 3, false)),
        "S2-9x1000" => carried(racks(9, 1_000, false)),
        "S3-1500x4-rack" => carried(racks(1_500, 4, true)),
        "S1-5000-volumes" => carried(with_volumes(s1(5_000, 50_000), 10, false)),
        "S4-volumes" => carried(with_volumes(s4(), 10, true)),
        "anchored-fit" => carried(anchored(1 << 30)),
        "anchored-never" => carried(anchored(20 << 30)),
        "S5-flat" => carried(s5(false)),
        "S6" => carried(s6()),
        "S7" => carried(s7(1_000, 8, 30, 350, 8, false)),
        "S7-host" => carried(s7(200, 1, 0, 200, 7, true)),
        "S7-never" => carried(s7(200, 1, 0, 200, 8, true)),
        "S1-holds" => {
            let snap = carried(s1_holds());
            for _ in 0..n {
                black_box(schedule(black_box(&snap), &backfill_config(), Time::from_secs(1_000)));
            }
            return;
        }
        "S6-cold" => {
            let mut snap = carried(s6());
            for _ in 0..n {
                snap.storage.selector_cache = Default::default();
                black_box(schedule(black_box(&snap), &config(), Time::from_secs(1_000)));
            }
            return;
        }
        "S5-levels" => carried(s5(true)),
        "S5-block" => {
            let mut snap = s5(true);
            for g in &mut snap.gangs {
                g.topology_preferred = None;
            }
            carried(snap)
        }
        other => panic!("SHAPES_RUNS: unknown case {other}"),
    };
    for _ in 0..n {
        black_box(schedule(black_box(&snap), &config(), Time::from_secs(1_000)));
    }
}

fn main() {
    if let Ok(spec) = std::env::var("SHAPES_RUNS") {
        runs(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
