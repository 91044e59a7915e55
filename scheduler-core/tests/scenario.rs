//! Data-driven scenarios for the scheduling cycle: each YAML file under
//! `tests/fixtures/scenarios/` lists nodes, gangs, pods and `now`, and the plan expected from one
//! cycle — optionally followed by more cycles after time passes and the plan is applied the way a
//! cluster would (`replay::apply`). One scenario per rule; one per bug.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use scheduler_core::config::Config;
use scheduler_core::model::terms::{self, PodTerms};
use scheduler_core::model::*;
use scheduler_core::resources::Resources;
use scheduler_core::{Plan, replay, schedule};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Scenario {
    description: String,
    #[serde(default = "epoch")]
    now: Time,
    #[serde(default)]
    config: serde_json::Value,
    nodes: Vec<FNode>,
    #[serde(default)]
    gangs: Vec<FGang>,
    #[serde(default)]
    pods: Vec<FPod>,
    /// PodDisruptionBudgets.
    #[serde(default)]
    budgets: Vec<Budget>,
    /// Namespaces and their labels (what a pod affinity term's `namespaceSelector` matches).
    #[serde(default)]
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    expect: Expect,
    #[serde(default)]
    then: Vec<Step>,
}

fn epoch() -> Time {
    Time::parse_rfc3339("2026-01-01T00:00:00Z").unwrap()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Step {
    advance_seconds: u64,
    #[serde(default)]
    delete_pods: Vec<String>,
    #[serde(default)]
    set_phase: BTreeMap<String, PodPhase>,
    #[serde(default)]
    add_pods: Vec<FPod>,
    /// Pods whose `spec.schedulingGates` are all removed.
    #[serde(default)]
    ungate: Vec<String>,
    /// The scheduler restarts (or another replica takes over) before this cycle: what it held in
    /// memory is gone, and each gang's state is what the cluster keeps — a `Gang`'s status, or
    /// the state the plans wrote on the members of the other gangs.
    #[serde(default)]
    restart: bool,
    expect: Expect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FNode {
    name: String,
    resources: BTreeMap<String, String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    taints: Vec<String>,
    #[serde(default)]
    unschedulable: bool,
    #[serde(default = "yes")]
    ready: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FGang {
    name: String,
    #[serde(default = "default_ns")]
    namespace: String,
    min_member: u32,
    #[serde(default)]
    sub_groups: Vec<FSubGroup>,
    #[serde(default)]
    mode: GangMode,
    timeout_seconds: Option<u64>,
    topology_key: Option<String>,
    /// The preferred level: its domains tried first.
    topology_preferred: Option<String>,
    /// One domain of this label per member group (pods' `subgroup`), none shared.
    exclusive_topology: Option<String>,
    #[serde(default)]
    gang_group: Vec<String>,
    stale_grace_seconds: Option<u64>,
    total_member: Option<u32>,
    /// Pods the whole gang needs on top of its subgroups' minimums (KAI's root `minMember`).
    #[serde(default)]
    pod_floor: u32,
    /// Seconds before `now` the gang was created.
    #[serde(default)]
    age_seconds: u64,
    #[serde(default)]
    state: GangState,
    /// A gang of pod annotations (CRD-less): its state is kept on its members, not in a `Gang`'s
    /// status.
    #[serde(default)]
    crd_less: bool,
    /// Its time limit (`kube-gang.io/time-limit` on the gang), seconds.
    time_limit_seconds: Option<u64>,
    /// `kube-gang.io/elastic-step`.
    elastic_step: Option<String>,
}

fn default_ns() -> String {
    "default".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FSubGroup {
    name: String,
    parent: Option<String>,
    min_member: u32,
    /// Pods the leaves under an inner subgroup need together (KAI's mid-level `minMember`).
    #[serde(default)]
    pod_floor: u32,
    topology_key: Option<String>,
    topology_preferred: Option<String>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FPod {
    name: String,
    #[serde(default = "default_ns")]
    namespace: String,
    /// Expands `name` into `name-0` … `name-{n-1}`.
    replicas: Option<u32>,
    gang: Option<String>,
    subgroup: Option<String>,
    #[serde(default)]
    resources: BTreeMap<String, String>,
    node: Option<String>,
    #[serde(default)]
    phase: PodPhase,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    preemption_policy: PreemptionPolicy,
    #[serde(default = "ours")]
    scheduler: String,
    #[serde(default)]
    node_selector: BTreeMap<String, String>,
    /// `key=value:Effect`, `key:Exists`, `key` (any effect, Exists).
    #[serde(default)]
    tolerations: Vec<String>,
    /// One term of `key Op v1,v2` requirements.
    #[serde(default)]
    affinity: Vec<String>,
    #[serde(default)]
    deleting: bool,
    nominated: Option<String>,
    /// `reason: message` of a pod that failed on its node.
    failure: Option<String>,
    /// `spec.schedulingGates` names.
    #[serde(default)]
    gates: Vec<String>,
    #[serde(default)]
    age_seconds: u64,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    /// JobSet's `alpha.jobset.sigs.k8s.io/exclusive-topology` annotation on the pod.
    exclusive_topology: Option<String>,
    /// The state of its gang the pod keeps (annotation `kube-gang.io/state`).
    kept: Option<GangState>,
    /// Host ports: `TCP/8080`, `UDP/10.0.0.1:53`.
    #[serde(default)]
    host_ports: Vec<String>,
    /// Required pod affinity terms.
    #[serde(default)]
    pod_affinity: Vec<FTerm>,
    /// Required pod anti-affinity terms.
    #[serde(default)]
    pod_anti_affinity: Vec<FTerm>,
    /// Topology spread constraints.
    #[serde(default)]
    spread: Vec<FSpread>,
    /// Scheduling fields the cycle does not evaluate (field paths).
    #[serde(default)]
    unevaluated: Vec<String>,
    /// Its time limit (`kube-gang.io/time-limit`), seconds.
    time_limit_seconds: Option<u64>,
    /// Seconds before `now` it started (`status.startTime`).
    started_ago_seconds: Option<u64>,
}

/// A label selector: `matchLabels` and `matchExpressions` as `key Op v1,v2`.
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FSelector {
    #[serde(default)]
    match_labels: BTreeMap<String, String>,
    #[serde(default)]
    match_expressions: Vec<String>,
}

impl FSelector {
    fn model(&self) -> LabelSelector {
        LabelSelector {
            match_labels: self.match_labels.clone(),
            match_expressions: self
                .match_expressions
                .iter()
                .map(|e| {
                    let mut parts = e.split_whitespace();
                    let key = parts.next().expect("key").to_string();
                    let operator = serde_json::from_value(serde_json::Value::String(
                        parts.next().expect("operator").into(),
                    ))
                    .expect("label operator");
                    let values =
                        parts.next().map(|v| v.split(',').map(String::from).collect()).unwrap_or_default();
                    LabelRequirement { key, operator, values }
                })
                .collect(),
        }
    }
}

/// A required pod (anti-)affinity term.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FTerm {
    topology_key: String,
    /// `None`: no `labelSelector` (selects nothing).
    selector: Option<FSelector>,
    #[serde(default)]
    namespaces: Vec<String>,
    namespace_selector: Option<FSelector>,
}

/// A topology spread constraint (kube-scheduler's defaults where left out).
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FSpread {
    max_skew: i32,
    topology_key: String,
    #[serde(default = "do_not_schedule")]
    when_unsatisfiable: terms::Unsatisfiable,
    selector: Option<FSelector>,
    #[serde(default)]
    match_label_keys: Vec<String>,
    min_domains: Option<i32>,
    node_affinity_policy: Option<terms::Inclusion>,
    node_taints_policy: Option<terms::Inclusion>,
}

fn do_not_schedule() -> terms::Unsatisfiable {
    terms::Unsatisfiable::DoNotSchedule
}

/// The model's terms of a fixture pod in `namespace` with `labels`.
fn pod_terms(f: &FPod) -> Option<Box<PodTerms>> {
    let term = |t: &FTerm| terms::AffinityTerm {
        selector: t.selector.as_ref().map(FSelector::model),
        namespaces: if t.namespaces.is_empty() && t.namespace_selector.is_none() {
            vec![f.namespace.clone()]
        } else {
            t.namespaces.clone()
        },
        namespace_selector: t.namespace_selector.as_ref().map(FSelector::model),
        topology_key: t.topology_key.clone(),
    };
    let spread = |c: &FSpread| {
        let mut selector = c.selector.as_ref().map(FSelector::model);
        if let Some(sel) = &mut selector {
            for key in &c.match_label_keys {
                if let Some(v) = f.labels.get(key) {
                    sel.match_expressions.push(LabelRequirement {
                        key: key.clone(),
                        operator: LabelOperator::In,
                        values: vec![v.clone()],
                    });
                }
            }
        }
        terms::SpreadConstraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            when_unsatisfiable: c.when_unsatisfiable,
            selector,
            min_domains: c.min_domains.unwrap_or(1),
            node_affinity_policy: c.node_affinity_policy.unwrap_or(terms::Inclusion::Honor),
            node_taints_policy: c.node_taints_policy.unwrap_or(terms::Inclusion::Ignore),
        }
    };
    let t = PodTerms {
        host_ports: f
            .host_ports
            .iter()
            .map(|s| {
                let (protocol, rest) = s.split_once('/').expect("PROTOCOL/[ip:]port");
                let (ip, port) = rest.rsplit_once(':').unwrap_or((terms::BIND_ALL, rest));
                terms::HostPort {
                    protocol: protocol.into(),
                    ip: ip.into(),
                    port: port.parse().expect("port"),
                }
            })
            .collect(),
        affinity: f.pod_affinity.iter().map(term).collect(),
        anti_affinity: f.pod_anti_affinity.iter().map(term).collect(),
        spread: f.spread.iter().map(spread).collect(),
        unevaluated: f.unevaluated.clone(),
    };
    (!t.is_empty()).then(|| Box::new(t))
}

fn ours() -> String {
    "gang-scheduler".into()
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Expect {
    /// Exactly these bindings (pod → node).
    bindings: Option<BTreeMap<String, String>>,
    /// Exactly this many bindings (when which node is up to scoring).
    binding_count: Option<usize>,
    /// These pods are bound to one of the listed nodes.
    bound_to: Option<BTreeMap<String, Vec<String>>>,
    /// All bindings of these pods land in one domain of `label`.
    same_domain: Option<SameDomain>,
    /// These pods are bound, so many in each domain of `label`.
    domain_counts: Option<DomainCounts>,
    /// Exactly these pods are evicted.
    evictions: Option<BTreeSet<String>>,
    nominations: Option<BTreeMap<String, String>>,
    /// Exactly these evictions violate a PodDisruptionBudget: pod → budget (`namespace/name`).
    violating: Option<BTreeMap<String, String>>,
    reservation_count: Option<usize>,
    /// Exactly these pods get their gang's state written (annotation `kube-gang.io/state`).
    kept: Option<BTreeSet<String>>,
    #[serde(default)]
    outcomes: BTreeMap<String, FOutcome>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DomainCounts {
    label: String,
    pods: Vec<String>,
    counts: BTreeMap<String, usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SameDomain {
    label: String,
    pods: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FOutcome {
    reason: scheduler_core::Reason,
    phase: Option<scheduler_core::plan::Phase>,
    #[serde(default)]
    message: Vec<String>,
    /// Backfill: seconds after the cycle's `now` it is expected to start (`null`: no time).
    #[serde(default, deserialize_with = "some")]
    expected_start_seconds: Option<Option<u64>>,
    /// Backfill: exactly these nodes hold capacity for it.
    held_nodes: Option<Vec<String>>,
    /// Backfill: placed on capacity held for a gang ahead of it.
    backfilled: Option<bool>,
}

/// A present field, `null` included, as `Some`.
fn some<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Fixture quantities (`64Gi`, `500m`, `8`) in the crate's units; a tiny subset of the real grammar,
/// enough for hand-written fixtures.
fn amount(resource: &str, q: &str) -> i64 {
    let (num, mult): (&str, f64) =
        [("Ki", 1024f64), ("Mi", 1048576.0), ("Gi", 1073741824.0), ("Ti", 1099511627776.0), ("m", 0.001)]
            .iter()
            .find_map(|(s, m)| q.strip_suffix(s).map(|n| (n, *m)))
            .unwrap_or((q, 1.0));
    let v: f64 = num.parse::<f64>().unwrap_or_else(|e| panic!("fixture quantity {q:?}: {e}")) * mult;
    if resource == "cpu" { (v * 1000.0).round() as i64 } else { v.round() as i64 }
}

fn resources(m: &BTreeMap<String, String>) -> Resources {
    m.iter().map(|(k, v)| (k.clone(), amount(k, v))).collect()
}

fn taint(s: &str) -> Taint {
    let (kv, effect) = s.rsplit_once(':').expect("taint needs :Effect");
    let effect = serde_json::from_value(serde_json::Value::String(effect.into())).expect("taint effect");
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k.to_string(), Some(v.to_string())),
        None => (kv.to_string(), None),
    };
    Taint { key, value, effect }
}

fn toleration(s: &str) -> Toleration {
    let (kv, effect) = match s.rsplit_once(':') {
        Some((kv, "Exists")) => (kv, None),
        Some((kv, e)) => {
            (kv, Some(serde_json::from_value(serde_json::Value::String(e.into())).expect("effect")))
        }
        None => (s, None),
    };
    match kv.split_once('=') {
        Some((k, v)) => {
            Toleration { key: k.into(), operator: TolerationOperator::Equal, value: Some(v.into()), effect }
        }
        None => Toleration { key: kv.into(), operator: TolerationOperator::Exists, value: None, effect },
    }
}

fn requirement(s: &str) -> NodeSelectorRequirement {
    let mut parts = s.split_whitespace();
    let key = parts.next().expect("key").to_string();
    let op = serde_json::from_value(serde_json::Value::String(parts.next().expect("operator").into()))
        .expect("op");
    let values = parts.next().map(|v| v.split(',').map(String::from).collect()).unwrap_or_default();
    NodeSelectorRequirement { key, operator: op, values }
}

fn pods(f: &FPod, now: Time) -> Vec<Pod> {
    let names: Vec<String> = match f.replicas {
        Some(n) => (0..n).map(|i| format!("{}-{i}", f.name)).collect(),
        None => vec![f.name.clone()],
    };
    let (expressions, fields): (Vec<_>, Vec<_>) =
        f.affinity.iter().map(|s| requirement(s)).partition(|r| r.key != "metadata.name");
    names
        .into_iter()
        .map(|name| Pod {
            key: ObjectKey::new(&f.namespace, &name),
            uid: format!("uid-{name}").into(),
            requests: resources(&f.resources),
            node_selector: f.node_selector.clone(),
            affinity: if f.affinity.is_empty() {
                vec![]
            } else {
                vec![NodeSelectorTerm {
                    match_expressions: expressions.clone(),
                    match_fields: fields.clone(),
                }]
            },
            tolerations: f.tolerations.iter().map(|t| toleration(t)).collect(),
            priority: f.priority,
            preemption_policy: f.preemption_policy,
            phase: f.phase,
            node_name: f.node.clone(),
            nominated_node: f.nominated.clone(),
            created: Time(now.0 - 1000 * f.age_seconds as i64),
            deleting: f.deleting,
            scheduler_name: f.scheduler.clone(),
            gang: f
                .gang
                .as_ref()
                .map(|g| Membership { gang: ObjectKey::new(&f.namespace, g), subgroup: f.subgroup.clone() }),
            failure: f.failure.clone(),
            scheduling_gates: f.gates.clone(),
            labels: f.labels.clone().into(),
            exclusive_topology: f.exclusive_topology.clone(),
            persisted: f.kept.as_ref().zip(f.gang.as_ref()).map(|(state, g)| {
                Box::new(Persisted { gang: ObjectKey::new(&f.namespace, g), uid: None, state: state.clone() })
            }),
            terms: pod_terms(f),
            volumes: Vec::new(),
            resource_claims: Vec::new(),
            started: f.started_ago_seconds.map(|s| Time(now.0 - 1000 * s as i64)),
            time_limit: f.time_limit_seconds.map(Duration::from_secs),
        })
        .collect()
}

fn snapshot(s: &Scenario) -> Snapshot {
    let nodes = s
        .nodes
        .iter()
        .map(|n| {
            let mut allocatable = resources(&n.resources);
            if allocatable.get("pods") == 0 {
                allocatable.set("pods", 110);
            }
            Node {
                name: n.name.as_str().into(),
                allocatable,
                labels: n.labels.clone(),
                taints: n.taints.iter().map(|t| taint(t)).collect(),
                unschedulable: n.unschedulable,
                ready: n.ready,
            }
        })
        .collect();
    let gangs = s
        .gangs
        .iter()
        .map(|g| {
            let source = if g.crd_less {
                Source { dialect: Dialect::KubeGangAnnotations, kind: "Pod".into() }
            } else {
                Source { dialect: Dialect::KubeGang, kind: "Gang".into() }
            };
            let mut gang = Gang::new(ObjectKey::new(&g.namespace, &g.name), g.min_member, source);
            gang.subgroups = g
                .sub_groups
                .iter()
                .map(|s| SubGroup {
                    name: s.name.clone(),
                    parent: s.parent.clone(),
                    min_member: s.min_member,
                    pod_floor: s.pod_floor,
                    topology_preferred: s.topology_preferred.clone(),
                    topology_key: s.topology_key.clone(),
                })
                .collect();
            gang.mode = g.mode;
            gang.timeout = g.timeout_seconds.map(Duration::from_secs);
            gang.topology_key = g.topology_key.clone();
            gang.topology_preferred = g.topology_preferred.clone();
            gang.exclusive_topology = g.exclusive_topology.clone();
            gang.gang_group =
                g.gang_group.iter().map(|k| ObjectKey::parse(k, &g.namespace).unwrap()).collect();
            gang.stale_grace = g.stale_grace_seconds.map(Duration::from_secs);
            gang.total_member = g.total_member;
            gang.pod_floor = g.pod_floor;
            gang.created = Time(s.now.0 - 1000 * g.age_seconds as i64);
            gang.state = g.state.clone();
            gang.time_limit = g.time_limit_seconds.map(Duration::from_secs);
            gang.elastic_step =
                g.elastic_step.as_deref().map(|s| ElasticStep::parse(s).expect("elastic step"));
            gang
        })
        .collect();
    let pods = s.pods.iter().flat_map(|p| pods(p, s.now)).collect();
    let namespaces = s.namespaces.iter().map(|(k, v)| (k.clone(), Labels::new(v.clone()))).collect();
    Snapshot { nodes, pods, gangs, budgets: s.budgets.clone(), namespaces, ..Snapshot::default() }
}

/// What a restarted scheduler starts from: what the cluster keeps of each gang's state — a
/// `Gang`'s status (which holds no revision), or nothing beyond what its members keep.
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

fn config(v: &serde_json::Value) -> Config {
    if v.is_null() { Config::default() } else { serde_json::from_value(v.clone()).expect("config") }
}

fn check(file: &Path, step: &str, snap: &Snapshot, plan: &Plan, e: &Expect, now: Time) -> Vec<String> {
    let mut failures = Vec::new();
    let mut fail = |m: String| failures.push(format!("{}: {step}: {m}", file.display()));
    let got: BTreeMap<String, String> =
        plan.bindings.iter().map(|b| (b.pod.name.to_string(), b.node.to_string())).collect();
    if let Some(want) = &e.bindings
        && &got != want
    {
        fail(format!("bindings: want {want:?}, got {got:?}"));
    }
    if let Some(n) = e.binding_count
        && got.len() != n
    {
        fail(format!("binding count: want {n}, got {} ({got:?})", got.len()));
    }
    for (pod, nodes) in e.bound_to.iter().flatten() {
        if !got.get(pod).is_some_and(|n| nodes.contains(n)) {
            fail(format!("{pod}: want one of {nodes:?}, got {:?}", got.get(pod)));
        }
    }
    if let Some(sd) = &e.same_domain {
        let domains: BTreeSet<Option<&String>> = sd
            .pods
            .iter()
            .map(|p| {
                let node = got.get(p).unwrap_or_else(|| panic!("{}: {p} not bound", file.display()));
                snap.nodes.iter().find(|n| n.name == node).and_then(|n| n.labels.get(&sd.label))
            })
            .collect();
        if domains.len() != 1 {
            fail(format!("pods span {} domains of {}: {domains:?}", domains.len(), sd.label));
        }
    }
    if let Some(dc) = &e.domain_counts {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for p in &dc.pods {
            let Some(node) = got.get(p) else {
                fail(format!("{p} not bound"));
                continue;
            };
            let domain = snap.nodes.iter().find(|n| n.name == node).and_then(|n| n.labels.get(&dc.label));
            *counts.entry(domain.cloned().unwrap_or_default()).or_default() += 1;
        }
        if counts != dc.counts {
            fail(format!("per {} domain: want {:?}, got {counts:?}", dc.label, dc.counts));
        }
    }
    if let Some(want) = &e.evictions {
        let got: BTreeSet<String> = plan.evictions.iter().map(|e| e.pod.name.to_string()).collect();
        if &got != want {
            fail(format!("evictions: want {want:?}, got {got:?}"));
        }
    }
    if let Some(want) = &e.violating {
        let got: BTreeMap<String, String> = plan
            .evictions
            .iter()
            .filter_map(|e| Some((e.pod.name.to_string(), e.budget.as_ref()?.to_string())))
            .collect();
        if &got != want {
            fail(format!("violating: want {want:?}, got {got:?}"));
        }
    }
    if let Some(want) = &e.nominations {
        let got: BTreeMap<String, String> =
            plan.nominations.iter().map(|n| (n.pod.name.to_string(), n.node.to_string())).collect();
        if &got != want {
            fail(format!("nominations: want {want:?}, got {got:?}"));
        }
    }
    if let Some(n) = e.reservation_count
        && plan.reservations.len() != n
    {
        fail(format!("reservations: want {n}, got {:?}", plan.reservations));
    }
    if let Some(want) = &e.kept {
        let got: BTreeSet<String> = plan.keep.iter().map(|k| k.pod.name.to_string()).collect();
        if &got != want {
            fail(format!("kept: want {want:?}, got {got:?}"));
        }
    }
    for (gang, want) in &e.outcomes {
        let Some(o) = plan.outcomes.iter().find(|o| o.gang.name == gang) else {
            fail(format!("no outcome for gang {gang}"));
            continue;
        };
        if o.reason != want.reason {
            fail(format!("{gang}: reason: want {}, got {} ({})", want.reason, o.reason, o.message));
        }
        if let Some(p) = want.phase
            && o.phase != p
        {
            fail(format!("{gang}: phase: want {p}, got {}", o.phase));
        }
        for needle in &want.message {
            if !o.message.contains(needle.as_str()) {
                fail(format!("{gang}: message {:?} lacks {needle:?}", o.message));
            }
        }
        if let Some(want) = want.expected_start_seconds {
            let got = o.expected_start.map(|t| (t.0 - now.0) / 1000);
            if got != want.map(|s| s as i64) {
                fail(format!(
                    "{gang}: expected start: want {want:?} s from now, got {got:?} ({})",
                    o.message
                ));
            }
        }
        if let Some(want) = &want.held_nodes {
            let got: Vec<String> = o.held_nodes.iter().map(ToString::to_string).collect();
            if &got != want {
                fail(format!("{gang}: held nodes: want {want:?}, got {got:?}"));
            }
        }
        if let Some(want) = want.backfilled
            && o.backfilled != want
        {
            fail(format!("{gang}: backfilled: want {want}, got {} ({})", o.backfilled, o.message));
        }
    }
    failures
}

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn scenarios() {
    let files = fixtures();
    assert!(files.len() >= 20, "expected the scenario suite, found {} files", files.len());
    let mut failures = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let s: Scenario = serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(!s.description.is_empty());
        let config = config(&s.config);
        let mut snap = snapshot(&s);
        let mut now = s.now;
        let plan = schedule(&snap, &config, now);
        assert_eq!(plan, schedule(&snap, &config, now), "{}: same input, same plan", file.display());
        assert_eq!(
            plan,
            scheduler_core::schedule_reference(&snap, &config, now),
            "{}: the cycle's shortcuts change no plan",
            file.display()
        );
        // As the scheduler hands it over: the pods on nodes summed and indexed, read only there.
        let mut carried = snap.clone();
        carried.usage = Some(scheduler_core::model::Usage::of(&carried.pods));
        assert_eq!(plan, schedule(&carried, &config, now), "{}: carried usage, same plan", file.display());
        failures.extend(check(&file, "cycle 1", &snap, &plan, &s.expect, now));
        let mut plan = plan;
        for (i, step) in s.then.iter().enumerate() {
            replay::apply(&mut snap, &plan, now);
            now = now.plus(Duration::from_secs(step.advance_seconds));
            snap.pods.retain(|p| !step.delete_pods.iter().any(|d| *d == p.key.name));
            for p in &mut snap.pods {
                if let Some(phase) = step.set_phase.get(p.key.name.as_str()) {
                    p.phase = *phase;
                }
                if step.ungate.iter().any(|d| *d == p.key.name) {
                    p.scheduling_gates.clear();
                }
            }
            for f in &step.add_pods {
                snap.pods.extend(pods(f, now));
            }
            if step.restart {
                restart(&mut snap);
            }
            plan = schedule(&snap, &config, now);
            failures.extend(check(&file, &format!("cycle {}", i + 2), &snap, &plan, &step.expect, now));
        }
    }
    assert!(failures.is_empty(), "{} scenario failure(s):\n{}", failures.len(), failures.join("\n"));
}
