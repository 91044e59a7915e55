//! `kubectl gang simulate -f FILE…`: expand workloads into the pods their controllers would create
//! (the webhook's injection applied), add them to the cluster as it is, and run the scheduler's own
//! cycle once.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use scheduler_core::cluster::{Cluster, Compact, Held, describe};
use scheduler_core::model::GangKey;
use scheduler_core::names::LABEL_ENABLED;
use scheduler_core::object::ObjectRef;
use scheduler_core::plan::Reason;
use scheduler_core::{Config, Time, admit_with, dialect, schedule, workload};
use serde::Serialize;
use serde_json::{Value, json};

use crate::cli::{Format, Global, SimulateArgs};
use crate::input::{self, Sourced};
use crate::output::Output;
use crate::table::{Grid, Tone, color_enabled};
use crate::text::escape_controls;
use crate::world::{load, unreadable};

/// A pod and a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Place {
    /// `namespace/name`.
    pub pod: String,
    pub node: String,
}

/// A member already on a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OnNode {
    /// `namespace/name`.
    pub pod: String,
    pub node: String,
    /// `bound` (a scheduler bound it, or it runs), or `pinned` (created with `spec.nodeName`:
    /// no scheduler places it; the kubelet of that node admits it or not).
    pub how: &'static str,
}

/// A pod the gang would preempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Victim {
    /// `namespace/name`.
    pub pod: String,
    pub node: String,
    /// The PodDisruptionBudget (`namespace/name`) its eviction would violate: chosen only when no
    /// set of victims within the budgets makes room, and refused by the Eviction API until the
    /// budget allows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub violates: Option<String>,
}

/// One simulated gang, as `-o json` prints it (a contract: fields are only ever added).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GangResult {
    pub namespace: String,
    pub name: String,
    pub schedulable: bool,
    pub reason: String,
    pub message: String,
    pub placements: Vec<Place>,
    /// Members already on a node: bound, or created with `spec.nodeName` (pinned), each with its
    /// node — they count toward the gang and are not placed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub on_nodes: Vec<OnNode>,
    pub preemptions: Vec<Victim>,
    /// Claims bound before the members (reason `WaitingForVolumes`): to a static PV, or
    /// provisioned for the member's node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<ClaimPlace>,
    /// What the gang would ask the cluster autoscaler for (policy `provisioning`): node shapes ×
    /// counts, from the core's `provision::asks`, the function the scheduler writes requests from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<Ask>,
    /// What `-o name` prints, as kubectl would (`podgroup.scheduling.volcano.sh/x`).
    #[serde(skip)]
    pub object: String,
    /// The levels `--map` draws it by ([`crate::map::levels`]).
    #[serde(skip)]
    pub levels: Vec<String>,
}

/// A claim bound before its member is: to `volume`, or (none) provisioned for `node`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClaimPlace {
    pub claim: String,
    pub node: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
}

/// One ProvisioningRequest the gang would write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ask {
    /// `spec.provisioningClassName`.
    pub class: String,
    /// `spec.podSets`, one per shape.
    pub pod_sets: Vec<AskedPods>,
}

/// `count` pods of one shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AskedPods {
    pub count: u32,
    /// Requests per pod, in the scheduler's units (`nvidia.com/gpu 8, cpu 32`).
    pub requests: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// The members asked for (`namespace/name`).
    pub pods: Vec<String>,
}

impl Ask {
    fn of(ask: &scheduler_core::plan::ProvisioningAsk) -> Self {
        Ask {
            class: ask.class.clone(),
            pod_sets: ask
                .pod_sets
                .iter()
                .map(|s| AskedPods {
                    count: s.count,
                    requests: s.shape.requests.to_string(),
                    node_selector: s.shape.node_selector.clone(),
                    pods: s.pods.iter().map(ToString::to_string).collect(),
                })
                .collect(),
        }
    }
}

/// Objects ready to add to a cluster: timestamps, UIDs and namespaces filled in, workloads
/// expanded.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    /// Held as compact JSON: the pods expanded from the input may be many ([`Compact::decode`]
    /// reads one).
    pub objects: Vec<Compact>,
    /// The pods among `objects`.
    pub pods: BTreeSet<(String, String)>,
    /// Gang objects among `objects`, as `namespace/name`.
    pub gang_objects: BTreeSet<GangKey>,
    /// The input objects (as `kubectl get -o name` names them) whose pods name each gang: what
    /// `-o name` prints for a gang without an object of its own.
    pub sources: BTreeMap<GangKey, BTreeSet<String>>,
    /// Problems that stop the simulation: `FILE: Kind ns/name: path: message`.
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

/// Lines said of an input, as [`prepare_bounded`] finds them: each said once, the first
/// [`SHOWN`] kept and the rest counted, so an input of many bad objects says what is wrong
/// without holding a line per object.
#[derive(Debug, Default)]
struct Said {
    lines: Vec<String>,
    more: usize,
    /// A hash of every line said, kept or not.
    seen: HashSet<u64>,
}

/// Errors (and warnings) listed by `simulate`, at most.
pub const SHOWN: usize = 20;

impl Said {
    fn push(&mut self, line: String) {
        use std::hash::{Hash as _, Hasher as _};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        line.hash(&mut h);
        if !self.seen.insert(h.finish()) {
            return;
        }
        if self.lines.len() < SHOWN {
            self.lines.push(line);
        } else {
            self.more += 1;
        }
    }

    fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The lines kept, and `… and N more <what>` when some were not.
    fn into_lines(mut self, what: &str) -> Vec<String> {
        if self.more > 0 {
            self.lines.push(format!("… and {} more {what}", self.more));
        }
        self.lines
    }
}

impl Extend<String> for Said {
    fn extend<I: IntoIterator<Item = String>>(&mut self, lines: I) {
        for line in lines {
            self.push(line);
        }
    }
}

/// Admits, expands and stamps submitted objects, as `kubectl apply` of them would: each object is
/// admitted on create with the call the webhook makes ([`admit_with`], knowing the input's gangs,
/// as `kubectl gang validate` does), so its errors are errors here too; an object with only
/// `generateName` is then named as the API server names it (after mutating admission), a suspended
/// Job admitted again as the update that unsuspends it (Kueue's admission); workloads
/// are expanded into the pods their controllers would create ([`workload::expand_admitted`]),
/// at most [`workload::MAX_EXPANDED_PODS`] over the whole input. A workload without a
/// `kube-gang.io/enabled` label is taken as opted in (simulating it asks how it would run as a
/// gang; `validate` judges a file without its namespace, as one that did not opt in); one with the
/// label is opted in only by `"true"`, as the webhook reads it ([`scheduler_core::opted_in`]).
pub fn prepare(sourced: &[Sourced], default_ns: &str, now: Time) -> Prepared {
    prepare_bounded(|| sourced.iter().cloned(), default_ns, now, workload::MAX_EXPANDED_PODS)
}

/// [`prepare`], expanding at most `max_pods` pods over the whole input: a workload whose pods would
/// take the total past it is an error naming it (so are the ones after it, if they do too).
/// `sourced()` yields the input, and is gone through twice (its gangs first), one object at a
/// time: the input is never held decoded all at once.
pub fn prepare_bounded<I: Iterator<Item = Sourced>>(
    sourced: impl Fn() -> I,
    default_ns: &str,
    now: Time,
    max_pods: u64,
) -> Prepared {
    let stamp = serde_json::to_value(now.to_k8s()).unwrap_or(Value::Null);
    let mut out = Prepared::default();
    let (mut errors, mut warnings) = (Said::default(), Said::default());
    // The file each of `out.objects` came from.
    let mut origin: Vec<std::rc::Rc<str>> = Vec::new();
    let defaulted = |mut s: Sourced| {
        let obj = &mut s.object;
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        let cluster_scoped = matches!(kind, "Node" | "Namespace" | "PriorityClass");
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            if !cluster_scoped {
                meta.entry("namespace").or_insert_with(|| Value::String(default_ns.to_string()));
            }
            meta.entry("creationTimestamp").or_insert_with(|| stamp.clone());
        }
        s
    };
    // Read before admission changes anything, as `validate` reads them.
    let mut gangs = input::gangs_of(sourced().map(defaulted).map(|s| s.object));
    let opted_in: BTreeMap<String, String> = [(LABEL_ENABLED.to_string(), "true".to_string())].into();
    // The runtimes TrainJobs name (Kubeflow Trainer): rendered through them as Trainer's controller does.
    let runtimes: Vec<Value> =
        sourced().map(defaulted).map(|s| s.object).filter(workload::trainer::is_runtime).collect();
    let mut budget = max_pods;
    // What a controller of the input creates (a TrainJob's JobSet and PodGroup) goes through the
    // same steps as the input, right after the object that made it.
    // Each with what made it (`TrainJob ml/x through ClusterTrainingRuntime y`), for messages.
    let mut made: std::collections::VecDeque<(usize, Sourced, String)> = std::collections::VecDeque::new();
    let mut submitted = sourced().map(defaulted).enumerate();
    while let Some((index, Sourced { file: source, object: mut obj }, maker)) =
        made.pop_front().or_else(|| submitted.next().map(|(i, s)| (i, s, String::new())))
    {
        let file: std::rc::Rc<str> = source.as_str().into();
        if workload::trainer::is_runtime(&obj) {
            // Read above; it makes nothing by itself.
            continue;
        }
        if workload::trainer::is_trainjob(&obj) {
            let what = input::describe(&obj);
            match workload::trainer::render(&obj, &runtimes) {
                Ok(Some((objects, said))) => {
                    warnings.extend(said.iter().map(|w| format!("{source}: {what}: {w}")));
                    // Its PodGroup is known to admission of its JobSet, as in the cluster.
                    for o in &objects {
                        if let Some(Ok(dialect::GangObject::Gang(g))) = dialect::read_object(o) {
                            gangs.extend([g]);
                        }
                    }
                    for object in objects {
                        let made_here = Sourced { file: source.clone(), object };
                        let runtime = obj.pointer("/spec/runtimeRef/name").and_then(Value::as_str).unwrap_or("");
                        let kind = obj
                            .pointer("/spec/runtimeRef/kind")
                            .and_then(Value::as_str)
                            .unwrap_or("ClusterTrainingRuntime");
                        made.push_back((index, defaulted(made_here), format!("{what} through {kind} {runtime}")));
                    }
                }
                Ok(None) => warnings.push(format!(
                    "{source}: {what}: its runtime (spec.runtimeRef) is not in the input: nothing is rendered; add the TrainingRuntime or ClusterTrainingRuntime to simulate it"
                )),
                Err(e) => errors.extend(e.iter().map(|e| format!("{source}: {what}: {e}"))),
            }
            continue;
        }
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        let cluster_scoped = matches!(kind.as_str(), "Node" | "Namespace" | "PriorityClass");
        let mut what = input::describe(&obj);
        if !maker.is_empty() {
            what = format!("{what} (made by {maker})");
        }
        // What the API server refuses before any webhook: a label or annotation that is no string.
        let refused = workload::metadata_errors(&obj);
        if !refused.is_empty() {
            errors.extend(refused.iter().map(|e| format!("{}: {what}: {e}", source)));
            continue;
        }
        // A Gang's undeclared fields: strict field validation refuses it (as `validate` says).
        let unknown = scheduler_core::crd::unknown_fields(&obj);
        if !unknown.is_empty() {
            errors.extend(unknown.iter().map(|p| {
                format!("{source}: {what}: {p}: unknown field \"{p}\" (the Gang CRD declares no such field)")
            }));
            continue;
        }
        // Kueue's mutating webhook creates a Job submitted to a queue suspended (its own
        // admission unsuspends it later): modelled here as the webhook beside ours.
        if workload::kueue_suspends(&obj)
            && let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.insert("suspend".into(), Value::Bool(true));
        }
        let verdict = admit_with(&mut obj, None, Some(&opted_in), &gangs);
        let denied = !verdict.allowed();
        errors.extend(verdict.errors.iter().map(|e| format!("{}: {what}: {e}", source)));
        warnings.extend(verdict.warnings.iter().map(|w| format!("{}: {what}: {w}", source)));
        if workload::named_after_mutation(&obj)
            && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
        {
            // The API server names the object after mutating admission: `generateName` and five
            // characters (derived from the input here, so a simulation can be repeated).
            let prefix = meta.get("generateName").and_then(Value::as_str).unwrap_or("").to_string();
            let ns = meta.get("namespace").and_then(Value::as_str).unwrap_or(default_ns);
            let name = workload::generated_name(&prefix, &format!("{ns}/{prefix}#{index}"));
            meta.insert("name".into(), Value::String(name));
            what = input::describe(&obj);
        }
        if !denied
            && obj.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)
            && obj.get("kind").and_then(Value::as_str) == Some("Job")
            && obj.get("apiVersion").and_then(Value::as_str) == Some("batch/v1")
        {
            // A suspended Job runs once unsuspended (what Kueue does when it admits it): that
            // update is admitted too, and may give it its gang (a Job named by the API server).
            let mut unsuspended = obj.clone();
            unsuspended["spec"]["suspend"] = Value::Bool(false);
            let update = admit_with(&mut unsuspended, Some(&obj), Some(&opted_in), &gangs);
            errors.extend(update.errors.iter().map(|e| format!("{}: {what}: {e}", source)));
            warnings.extend(update.warnings.iter().map(|w| format!("{}: {what}: {w}", source)));
            obj = unsuspended;
        }
        let grove = workload::grove::is_pcs(&obj);
        if kind == "Pod" || grove || workload::is_workload(&obj) {
            let count = match workload::inspect(&obj) {
                Some(Ok(shape)) => Some(workload::expanded_count(&shape)),
                _ if grove => Some(workload::grove::pod_count(&obj)),
                _ => None,
            };
            if let Some(count) = count {
                match count {
                    Ok(n) if n > budget => {
                        errors.push(format!(
                            "{}: {what}: its {n} pods would make the input's {} pods in all; at most {max_pods} are expanded: simulate fewer workloads at once",
                            source,
                            max_pods - budget + n,
                        ));
                        continue;
                    }
                    Ok(n) => budget -= n,
                    Err(_) => {}
                }
            }
            match workload::expand_admitted(&obj) {
                Ok(pods) if pods.is_empty() => {
                    warnings.push(format!("{}: {what}: creates no pods; skipped", source));
                }
                Ok(pods) => {
                    // A pod the scheduler could not read (an invalid quantity) is an input error,
                    // not a workload quietly left out; the first such pod speaks for the rest
                    // (pods alike are read once: a spec is known by a hash of its contents, so
                    // pods that each differ — LeaderWorkerSet's per-group affinity terms — cost
                    // a hash each, not a comparison with every spec seen before).
                    let mut seen_specs = std::collections::HashSet::new();
                    let first_unreadable = pods.iter().find_map(|p| {
                        if !seen_specs.insert(spec_hash(p.get("spec"))) {
                            return None;
                        }
                        unreadable(p).map(|e| (p, e))
                    });
                    if let Some((pod, e)) = first_unreadable {
                        let name = pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
                        errors.push(format!("{}: {what}: pod {name}: {e}", source));
                        continue;
                    }
                    for mut p in pods {
                        if p.get("kind").and_then(Value::as_str) == Some("PersistentVolumeClaim") {
                            // A claim the controller would make (a StatefulSet's): the cluster's
                            // own, when it has it, is kept (see [`simulate_owned`]).
                            out.objects.push(Compact::new(&p));
                            continue;
                        }
                        if p.get("kind").and_then(Value::as_str) != Some("Pod") {
                            // A gang object the workload's controller would make (Volcano's PodGroup).
                            let ns = p
                                .pointer("/metadata/namespace")
                                .and_then(Value::as_str)
                                .unwrap_or(default_ns);
                            let name = p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
                            out.gang_objects.insert(GangKey::new(ns, name));
                            if let Some(meta) = p.get_mut("metadata").and_then(Value::as_object_mut) {
                                meta.insert("creationTimestamp".into(), stamp.clone());
                            }
                            out.objects.push(Compact::new(&p));
                            continue;
                        }
                        let ns = p
                            .pointer("/metadata/namespace")
                            .and_then(Value::as_str)
                            .unwrap_or(default_ns)
                            .to_string();
                        let name =
                            p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
                        if let Some(meta) = p.get_mut("metadata").and_then(Value::as_object_mut) {
                            meta.insert("uid".into(), Value::String(format!("simulated-{ns}-{name}")));
                            meta.insert("creationTimestamp".into(), stamp.clone());
                        }
                        // What the API server merges into a pod it creates (label keys of
                        // affinity terms and spread constraints).
                        workload::pod_created(&mut p);
                        if let Some(m) = p.as_object_mut() {
                            m.insert("status".into(), json!({"phase": "Pending"}));
                        }
                        let (claims, _) = dialect::pod_claims_all(&p);
                        for c in claims {
                            out.sources.entry(c.gang).or_default().insert(crate::status::kubectl_name(&obj));
                        }
                        out.pods.insert((ns, name));
                        out.objects.push(Compact::new(&p));
                    }
                }
                // Admission has said why already.
                Err(_) if denied => {}
                Err(expansion) => {
                    for e in expansion {
                        errors.push(format!("{}: {what}: {e}", source));
                    }
                }
            }
        } else if dialect::read_object(&obj).is_some() {
            // A Workload is not a gang: its pod groups become gangs as pods name them.
            if kind != "Workload" {
                let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(default_ns);
                let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
                out.gang_objects.insert(GangKey::new(ns, name));
            }
            out.objects.push(Compact::new(&obj));
        } else if cluster_scoped || scheduler_core::cluster::reads(&ObjectRef::of(&obj)) {
            // Nodes, and what the filters read (PVCs, PVs, StorageClasses, …) the input brings.
            if let Some(e) = unreadable(&obj) {
                errors.push(format!("{}: {what}: {e}", source));
                continue;
            }
            out.objects.push(Compact::new(&obj));
        } else {
            warnings.push(format!("{}: {what}: neither a workload nor a gang object; skipped", source));
        }
        origin.resize(out.objects.len(), file);
    }
    // A pod and its gang object in one input: the pod must name a leaf of the gang's tree. Each
    // pod looks up the gangs it names (by key), and each gang is handed the pods that name it.
    // The objects are decoded one at a time, in each pass. The gangs of the input as submitted
    // are no longer needed: not held beside those of the objects admitted.
    drop(gangs);
    let gangs = input::gangs_of(out.objects.iter().map(Compact::decode));
    let is_pod = |o: &Value| o.get("kind").and_then(Value::as_str) == Some("Pod");
    // Gang → the positions in `out.objects` of the pods that name it.
    let mut naming: HashMap<GangKey, Vec<usize>> = HashMap::new();
    for (i, (o, file)) in out.objects.iter().zip(&origin).enumerate() {
        let o = o.decode();
        if is_pod(&o) {
            let claimed = gangs.claimed_by(&o);
            for e in scheduler_core::validate::attachment_errors(&claimed, &o) {
                let line = format!("{file}: {}: {e}", describe(&o));
                // An input pod was admitted knowing these gangs: said once.
                errors.push(line);
            }
            for g in claimed {
                naming.entry(g.key).or_default().push(i);
            }
        }
    }
    // A KAI pod floor above the pods the input holds: the gang waits for pods (perhaps ones the
    // cluster has), so a warning naming the field. Pods that count toward no leaf are errors
    // already, and the cause of any shortfall.
    let attached = errors.is_empty();
    let mut floors = Vec::new();
    for (o, file) in out.objects.iter().zip(&origin).filter(|_| attached) {
        let o = o.decode();
        if let Some(Ok(dialect::GangObject::Gang(g))) = dialect::read_object(&o) {
            let pods: Vec<Value> =
                naming.get(&g.key).into_iter().flatten().map(|&i| out.objects[i].decode()).collect();
            for e in scheduler_core::validate::floor_shortfalls(&g, pods.iter()) {
                floors.push(format!("{file}: {}: {e}", describe(&o)));
            }
        }
    }
    warnings.extend(floors);
    // A gang whose members, from everything in the input, can never reach its minimum: it would
    // wait for members forever (what `validate` says too).
    for (o, file) in out.objects.iter().zip(&origin) {
        let o = o.decode();
        if let Some(Ok(dialect::GangObject::Gang(g))) = dialect::read_object(&o) {
            let found = naming.get(&g.key).map_or(0, Vec::len) as u64;
            if let Some(e) = scheduler_core::validate::member_shortfall(&g, found) {
                errors.push(format!("{file}: {}: {e}", describe(&o)));
            }
        }
    }
    out.errors = errors.into_lines("errors (`kubectl gang validate` lists every one)");
    out.warnings = warnings.into_lines("warnings");
    out
}

/// The result of one simulation.
#[derive(Clone, Debug, Default)]
pub struct Simulation {
    pub gangs: Vec<GangResult>,
    pub warnings: Vec<String>,
    /// The cluster's nodes, for `--map` (kept only when asked: [`simulate_kept`]).
    pub nodes: Vec<scheduler_core::model::Node>,
}

/// Adds `prepared` to `cluster` and runs one cycle (on copies of both: see [`simulate_owned`]).
pub fn simulate<H: Held>(
    cluster: &Cluster<H>,
    prepared: &Prepared,
    config: &Config,
    now: Time,
) -> Simulation {
    simulate_owned(cluster.clone(), prepared.clone(), config, now)
}

/// [`simulate`], moving `prepared`'s objects into `cluster` rather than copying them: what the
/// command runs, so that the input is held once.
pub fn simulate_owned<H: Held>(
    cluster: Cluster<H>,
    prepared: Prepared,
    config: &Config,
    now: Time,
) -> Simulation {
    simulate_kept(cluster, prepared, config, now, false)
}

/// [`simulate_owned`], keeping the cluster's nodes in the result when `nodes` (for `--map`).
pub fn simulate_kept<H: Held>(
    mut cluster: Cluster<H>,
    prepared: Prepared,
    config: &Config,
    now: Time,
    nodes: bool,
) -> Simulation {
    let mut sim = Simulation::default();
    // Upstream PodGroups are reported by key after assembly (`PodGroup ns/name`).
    let ours: HashSet<String> = prepared
        .objects
        .iter()
        .map(|o| describe(&o.decode()))
        .chain(prepared.gang_objects.iter().map(|k| format!("PodGroup {k}")))
        .collect();
    let Prepared { objects, pods, gang_objects, .. } = prepared;
    // The claims controllers make for the pods — a StatefulSet's (expanded with them), the
    // ephemeral volume controller's — unless the cluster has them already.
    let mut claims = Vec::new();
    for o in objects {
        let o = o.decode();
        let what = describe(&o);
        if o.get("kind").and_then(Value::as_str) == Some("PersistentVolumeClaim") {
            claims.push(o);
            continue;
        }
        if o.get("kind").and_then(Value::as_str) == Some("Pod") {
            claims.extend(scheduler_core::volume::ephemeral_claims(&o));
        }
        if let Err(e) = cluster.push(o) {
            sim.warnings.push(format!("{what}: {e}"));
        }
    }
    for c in claims {
        if cluster.get_ref(&ObjectRef::of(&c)).is_none() {
            let what = describe(&c);
            if let Err(e) = cluster.push(c) {
                sim.warnings.push(format!("{what}: {e}"));
            }
        }
    }
    let assembled = cluster.snapshot();
    let snapshot = &assembled.snapshot;
    // Everything below is looked up through indices built once: the work grows with the input,
    // not with its square (a file of 16,000 one-pod Jobs is 16,000 gangs).
    let submitted_pod = |ns: &str, name: &str| pods.contains(&(ns.to_string(), name.to_string()));
    sim.warnings
        .extend(assembled.problems.iter().filter(|p| ours.contains(&p.object)).map(ToString::to_string));
    drop(ours);
    let by_key: HashMap<&GangKey, &scheduler_core::Gang> =
        snapshot.gangs.iter().map(|g| (&g.key, g)).collect();
    // An upstream PodGroup under a CompositePodGroup is a leaf of its root's gang, not a gang.
    let upstream_leaves: HashSet<(&str, &str)> = snapshot
        .gangs
        .iter()
        .filter(|g| g.source.dialect == scheduler_core::model::Dialect::Upstream)
        .flat_map(|g| g.subgroups.iter().map(|s| (g.key.namespace.as_str(), s.name.as_str())))
        .collect();
    let is_leaf_of_upstream_tree = |k: &GangKey| {
        !by_key.contains_key(k) && upstream_leaves.contains(&(k.namespace.as_str(), k.name.as_str()))
    };
    let mut gangs: BTreeSet<GangKey> =
        gang_objects.iter().filter(|k| !is_leaf_of_upstream_tree(k)).cloned().collect();
    for p in &snapshot.pods {
        if submitted_pod(&p.key.namespace, &p.key.name) {
            match &p.gang {
                Some(m) => {
                    gangs.insert(m.gang.clone());
                }
                None => sim.warnings.push(format!(
                    "pod {} belongs to no gang: the gang scheduler would not place it as one",
                    p.key
                )),
            }
        }
    }
    let plan = schedule(snapshot, config, now);
    if nodes {
        sim.nodes = crate::map::with_tiers(snapshot.nodes.clone(), &snapshot.storage.hypernodes);
    }
    let levels_of = |key: &GangKey| {
        by_key.get(key).map(|g| crate::map::levels(g, config, &snapshot.storage)).unwrap_or_default()
    };
    // `-o name`: the gang's object, else the input objects its pods come from (what exists once
    // the input is applied), never a name no object has.
    let object_of = |key: &GangKey| {
        by_key.get(key).and_then(|g| crate::status::object_name(g, &cluster)).unwrap_or_else(|| {
            prepared
                .sources
                .get(key)
                .map(|s| s.iter().cloned().collect::<Vec<_>>().join("\n"))
                .unwrap_or_default()
        })
    };
    let member_of: HashMap<&scheduler_core::PodKey, &GangKey> =
        snapshot.pods.iter().filter_map(|p| p.gang.as_ref().map(|m| (&p.key, &m.gang))).collect();
    // Members on nodes already, grouped in one pass over the pods.
    let mut on_nodes: HashMap<&GangKey, Vec<OnNode>> = HashMap::new();
    for p in snapshot.pods.iter().filter(|p| p.uses_node()) {
        if let (Some(m), Some(node)) = (&p.gang, &p.node_name) {
            // A pod of the input that names its node was created with it.
            let pinned = submitted_pod(&p.key.namespace, &p.key.name);
            let how = if pinned { "pinned" } else { "bound" };
            on_nodes.entry(&m.gang).or_default().push(OnNode {
                pod: p.key.to_string(),
                node: node.clone(),
                how,
            });
        }
    }
    // Each gang's placements and preemptions, grouped in one pass over the plan.
    let mut places: HashMap<&GangKey, Vec<Place>> = HashMap::new();
    // Members whose claims are bound first are placed as well (bound in a later cycle).
    let mut waiting: BTreeMap<&scheduler_core::PodKey, &scheduler_core::SmolStr> = BTreeMap::new();
    let mut claims: HashMap<&GangKey, Vec<ClaimPlace>> = HashMap::new();
    for v in &plan.volumes {
        waiting.insert(&v.pod, &v.node);
        if let Some(g) = member_of.get(&v.pod) {
            let list = claims.entry(g).or_default();
            let c =
                ClaimPlace { claim: v.claim.to_string(), node: v.node.to_string(), volume: v.volume.clone() };
            if !list.contains(&c) {
                list.push(c);
            }
        }
    }
    let placed = plan
        .bindings
        .iter()
        .map(|b| (&b.pod, &b.node))
        .chain(plan.nominations.iter().map(|n| (&n.pod, &n.node)))
        .chain(waiting);
    for (pod, node) in placed {
        if let Some(g) = member_of.get(pod) {
            places.entry(g).or_default().push(Place { pod: pod.to_string(), node: node.to_string() });
        }
    }
    let mut victims: HashMap<&GangKey, Vec<Victim>> = HashMap::new();
    for e in &plan.evictions {
        if let Some(g) = &e.preemptor {
            victims.entry(g).or_default().push(Victim {
                pod: e.pod.to_string(),
                node: e.node.to_string(),
                violates: e.budget.as_ref().map(ToString::to_string),
            });
        }
    }
    // Pods naming each gang, for the gangs the cycle decided nothing about.
    let mut naming: HashMap<&GangKey, usize> = HashMap::new();
    for g in member_of.values() {
        *naming.entry(g).or_default() += 1;
    }
    for key in gangs {
        let Some(outcome) = plan.outcome(&key) else {
            let message = match naming.get(&key).copied().unwrap_or(0) {
                0 => "the gang has no members in this simulation".to_string(),
                n => format!(
                    "{n} pod(s) name this gang, but no object defines it (neither in the input nor in the cluster): they wait until it is created"
                ),
            };
            sim.gangs.push(GangResult {
                namespace: key.namespace.to_string(),
                name: key.name.to_string(),
                schedulable: false,
                reason: Reason::WaitingForMembers.as_str().into(),
                message,
                placements: Vec::new(),
                on_nodes: Vec::new(),
                preemptions: Vec::new(),
                volumes: Vec::new(),
                provisioning: None,
                object: object_of(&key),
                levels: levels_of(&key),
            });
            continue;
        };
        let mut placements = places.remove(&key).unwrap_or_default();
        placements.sort_by(|a, b| a.pod.cmp(&b.pod));
        let preemptions = victims.remove(&key).unwrap_or_default();
        let mut held = on_nodes.remove(&key).unwrap_or_default();
        held.sort_by(|a, b| a.pod.cmp(&b.pod));
        let schedulable = matches!(
            outcome.reason,
            Reason::Scheduled | Reason::Running | Reason::Preempting | Reason::WaitingForVolumes
        );
        let mut volumes = claims.remove(&key).unwrap_or_default();
        volumes.sort_by(|a, b| a.claim.cmp(&b.claim));
        sim.gangs.push(GangResult {
            namespace: key.namespace.to_string(),
            name: key.name.to_string(),
            schedulable,
            reason: outcome.reason.as_str().into(),
            message: outcome.message.clone(),
            placements,
            on_nodes: held,
            preemptions,
            volumes,
            provisioning: plan.provisioning_for(&key).map(Ask::of),
            object: object_of(&key),
            levels: levels_of(&key),
        });
    }
    sim
}

/// Human-readable result; with `map`, each gang drawn on its levels ([`crate::map`]).
pub fn render(sim: &Simulation, no_headers: bool, color: bool, map: bool) -> String {
    let nodes: Vec<&scheduler_core::model::Node> = if map { sim.nodes.iter().collect() } else { Vec::new() };
    // One layout per set of levels, however many gangs are drawn by it.
    let mut layouts: HashMap<&[String], crate::map::Layout<'_>> = HashMap::new();
    let mut out = String::new();
    let mut grid = Grid::new(&["NAMESPACE", "GANG", "FITS", "REASON", "PLACED", "PREEMPTS"]);
    for g in &sim.gangs {
        let fits = if g.schedulable { "yes" } else { "no" };
        grid.toned(vec![
            (g.namespace.clone(), Tone::Plain),
            (g.name.clone(), Tone::Plain),
            (fits.into(), Tone::of(fits)),
            (g.reason.clone(), Tone::of(&g.reason)),
            (g.placements.len().to_string(), Tone::Plain),
            (g.preemptions.len().to_string(), Tone::Plain),
        ]);
    }
    out.push_str(&grid.render(no_headers, color, 0));
    for g in &sim.gangs {
        let _ = writeln!(
            out,
            "\n{}/{}: {}",
            escape_controls(&g.namespace),
            escape_controls(&g.name),
            match (g.schedulable, g.reason.as_str()) {
                // The placement needs the victims gone: the message says what the cluster lacks
                // before they go, so "fits" alone would contradict it.
                (true, "Preempting") => "fits once the pods below are preempted",
                (true, _) => "fits",
                (false, _) => "does not fit",
            }
        );
        for line in g.message.lines() {
            let _ = writeln!(out, "  {}", escape_controls(line));
        }
        if !g.placements.is_empty() {
            let mut grid = Grid::new(&["POD", "NODE"]);
            for p in &g.placements {
                grid.row([p.pod.clone(), p.node.clone()]);
            }
            out.push_str(&grid.render(no_headers, color, 2));
        }
        if !g.on_nodes.is_empty() {
            let _ = writeln!(out, "  already on nodes:");
            let mut grid = Grid::new(&["POD", "NODE", "HOW"]);
            for p in &g.on_nodes {
                grid.row([p.pod.clone(), p.node.clone(), p.how.to_string()]);
            }
            out.push_str(&grid.render(no_headers, color, 2));
        }
        if !g.volumes.is_empty() {
            let _ = writeln!(out, "  would bind these claims first (the members once they are bound):");
            let mut grid = Grid::new(&["CLAIM", "VOLUME", "NODE"]);
            for c in &g.volumes {
                let volume = c.volume.clone().unwrap_or_else(|| "(provisioned)".into());
                grid.row([c.claim.clone(), volume, c.node.clone()]);
            }
            out.push_str(&grid.render(no_headers, color, 2));
        }
        if !g.preemptions.is_empty() {
            let _ = writeln!(out, "  would preempt:");
            let mut grid = Grid::new(&["VICTIM", "NODE", "VIOLATES"]);
            for p in &g.preemptions {
                grid.row([p.pod.clone(), p.node.clone(), p.violates.clone().unwrap_or_else(|| "-".into())]);
            }
            out.push_str(&grid.render(no_headers, color, 2));
        }
        if map {
            let mut marks: HashMap<&str, crate::map::Marks> = HashMap::new();
            for node in g.placements.iter().map(|p| &p.node).chain(g.on_nodes.iter().map(|p| &p.node)) {
                marks.entry(node).or_default().members += 1;
            }
            for v in &g.preemptions {
                marks.entry(&v.node).or_default().victims += 1;
            }
            let layout = layouts
                .entry(g.levels.as_slice())
                .or_insert_with(|| crate::map::Layout::new(&nodes, &g.levels));
            out.push_str(&layout.draw(&marks, color, 2));
        }
        if let Some(ask) = &g.provisioning {
            let total: u32 = ask.pod_sets.iter().map(|s| s.count).sum();
            let _ = writeln!(
                out,
                "  would ask the cluster autoscaler for {total} pod(s): ProvisioningRequest ({})",
                escape_controls(&ask.class)
            );
            let mut grid = Grid::new(&["COUNT", "REQUESTS PER POD", "NODE SELECTOR"]);
            for s in &ask.pod_sets {
                let selector: Vec<String> = s.node_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let selector = if selector.is_empty() { "<none>".to_string() } else { selector.join(",") };
                grid.row([s.count.to_string(), s.requests.clone(), selector]);
            }
            out.push_str(&grid.render(no_headers, color, 2));
        }
    }
    out
}

/// Runs `simulate`.
pub fn run(g: &Global, args: &SimulateArgs) -> anyhow::Result<Output> {
    let config = crate::world::policy(args.config.as_deref())?;
    let objects = input::read(&args.files)?;
    let world = load(g, None)?;
    let prepared =
        prepare_bounded(|| objects.iter(), &world.namespace, world.now, workload::MAX_EXPANDED_PODS);
    drop(objects);
    let mut stderr = String::new();
    for w in world.warnings.iter().chain(&prepared.warnings) {
        let _ = writeln!(stderr, "warning: {w}");
    }
    // Warnings come first and are always shown: they often say why nothing could be simulated.
    if !prepared.errors.is_empty() {
        let _ = write!(stderr, "error: the input is invalid:");
        for e in &prepared.errors {
            let _ = write!(stderr, "\n  {e}");
        }
        stderr.push('\n');
        return Ok(Output { stdout: String::new(), stderr, code: 2 });
    }
    let sim = simulate_kept(world.cluster, prepared, &config, world.now, args.map);
    for w in &sim.warnings {
        let _ = writeln!(stderr, "warning: {w}");
    }
    if sim.gangs.is_empty() {
        stderr.push_str("error: no gang in the input: nothing to simulate\n");
        return Ok(Output { stdout: String::new(), stderr, code: 2 });
    }
    let stdout = match g.output {
        Some(Format::Json) => serde_json::to_string_pretty(&json!({"gangs": sim.gangs}))? + "\n",
        Some(Format::Yaml) => serde_norway::to_string(&json!({"gangs": sim.gangs}))?,
        Some(Format::Name) => {
            let mut seen = BTreeSet::new();
            sim.gangs
                .iter()
                .flat_map(|x| x.object.lines())
                .filter(|o| seen.insert(*o))
                .map(|o| format!("{o}\n"))
                .collect()
        }
        _ => render(&sim, g.no_headers, color_enabled(), args.map),
    };
    let code = if sim.gangs.iter().all(|x| x.schedulable) { 0 } else { 1 };
    Ok(Output { stdout, stderr, code })
}

/// A hash of a pod's spec by its contents (keys and values, in order), for telling pods alike
/// apart from pods that differ in one pass.
fn spec_hash(spec: Option<&Value>) -> u64 {
    use std::hash::{Hash, Hasher};
    fn walk(v: &Value, h: &mut std::collections::hash_map::DefaultHasher) {
        match v {
            Value::Null => 0u8.hash(h),
            Value::Bool(b) => (1u8, b).hash(h),
            Value::Number(n) => (2u8, n.to_string()).hash(h),
            Value::String(s) => (3u8, s).hash(h),
            Value::Array(a) => {
                (4u8, a.len()).hash(h);
                a.iter().for_each(|x| walk(x, h));
            }
            Value::Object(m) => {
                (5u8, m.len()).hash(h);
                for (k, x) in m {
                    k.hash(h);
                    walk(x, h);
                }
            }
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    if let Some(v) = spec {
        walk(v, &mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, parallelism: u32) -> Sourced {
        Sourced {
            file: "jobs.yaml".into(),
            object: json!({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "namespace": "ml", "labels": {LABEL_ENABLED: "true"}},
                "spec": {"parallelism": parallelism,
                         "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
        }
    }

    #[test]
    fn the_pods_expanded_are_bounded_over_the_whole_input() {
        let now = Time::parse_rfc3339("2026-11-22T09:00:00Z").unwrap();
        let input = [job("a", 4), job("b", 4), job("c", 2)];
        let p = prepare_bounded(|| input.iter().cloned(), "ml", now, 9);
        assert_eq!(p.pods.len(), 8, "a and b are expanded, c would pass the bound");
        assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
        assert_eq!(
            p.errors[0],
            "jobs.yaml: Job ml/c: its 2 pods would make the input's 10 pods in all; at most 9 are expanded: simulate fewer workloads at once"
        );
        assert!(prepare_bounded(|| input.iter().cloned(), "ml", now, 10).errors.is_empty());
    }

    /// An input of many bad objects lists the first [`SHOWN`] errors and warnings and counts the
    /// rest, each line said once.
    #[test]
    fn many_bad_objects_are_listed_twenty_at_a_time_and_counted() {
        let now = Time::parse_rfc3339("2026-11-22T09:00:00Z").unwrap();
        let mut input: Vec<Sourced> = (0..35)
            .map(|i| Sourced {
                file: "x.yaml".into(),
                object: json!({"kind": "ConfigMap", "metadata": {"name": format!("c{i}")}}),
            })
            .collect();
        // Invalid: a Job whose parallelism is no number, 25 of them, one twice.
        for i in 0..25 {
            let mut j = job(&format!("bad-{i}"), 1);
            j.object["spec"]["parallelism"] = json!("many");
            input.push(j);
        }
        input.push(input.last().unwrap().clone());
        let p = prepare_bounded(|| input.iter().cloned(), "ml", now, 1_000);
        assert_eq!(p.warnings.len(), SHOWN + 1, "{:#?}", p.warnings);
        assert_eq!(p.warnings[0], "x.yaml: ConfigMap ml/c0: neither a workload nor a gang object; skipped");
        assert_eq!(p.warnings[SHOWN], "… and 15 more warnings");
        assert_eq!(p.errors.len(), SHOWN + 1, "{:#?}", p.errors);
        assert!(p.errors[0].starts_with("jobs.yaml: Job ml/bad-0: spec.parallelism"), "{}", p.errors[0]);
        // Two errors for each of the 25 Jobs; the repeated Job's said once.
        assert_eq!(p.errors[SHOWN], "… and 30 more errors (`kubectl gang validate` lists every one)");
    }
}
