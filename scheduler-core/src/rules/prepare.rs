//! Preparing submitted objects as the cluster would make them: what `kubectl apply` of them would
//! leave in the API, ready to add to a cluster view. One step each, in this order, shared by
//! `kubectl gang simulate`, `kubectl gang validate` and the tests:
//!
//! 1. [`defaulted`] — namespace and creation time filled in, as the API server fills them;
//! 2. [`refused_before_admission`] — what the API server refuses before any webhook runs
//!    (labels and annotations that are no strings, a Gang's undeclared fields);
//! 3. [`admitted`] — Kueue's suspension of a queued Job, then admission on create, the call the
//!    webhook makes ([`crate::rules::admit::admit_with`]);
//! 4. [`named`] — a name for an object created with only `generateName`, as the API server
//!    gives one after mutating admission;
//! 5. [`unsuspended`] — a suspended Job admitted again as the update that unsuspends it
//!    (Kueue's admission);
//! 6. [`Preparing::expand`] — workloads expanded into the pods and gang objects their
//!    controllers would create ([`workload::expand_admitted`]), within a bound over the input;
//! 7. [`Preparing::finish`] — pods attached to the gangs of the input (a pod must name a leaf of
//!    its gang's tree), the floors KAI pods set, and gangs whose members can never reach their
//!    minimum.
//!
//! Kubeflow Trainer's TrainJobs are rendered through their runtimes first, and what they make goes
//! through the same steps right after them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::rc::Rc;

use serde_json::{Value, json};

use crate::read::cluster::{self, Compact};
use crate::read::dialect::{self, GangObject};
use crate::read::labels::LABEL_ENABLED;
use crate::read::model::{GangKey, Time};
use crate::read::object::ObjectRef;
use crate::read::{convert, crd, volume, workload};
use crate::rules::admit::{GangSet, admit_with};
use crate::rules::validate;

/// One object and where it came from.
#[derive(Clone, Debug)]
pub struct Sourced {
    pub file: String,
    pub object: Value,
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

/// Errors (and warnings) listed, at most; the rest are counted.
pub const SHOWN: usize = 20;

/// Lines said of an input: each said once, the first [`SHOWN`] kept and the rest counted, so an
/// input of many bad objects says what is wrong without holding a line per object.
#[derive(Debug, Default)]
struct Said {
    lines: Vec<String>,
    more: usize,
    /// A hash of every line said, kept or not.
    seen: HashSet<u64>,
}

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

/// `Kind namespace/name` for messages about an input object; one named only by
/// `metadata.generateName` is `Kind namespace/prefix*` (the API server appends the rest).
pub fn describe(obj: &Value) -> String {
    let named = obj.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
    match obj.pointer("/metadata/generateName").and_then(Value::as_str).filter(|g| !g.is_empty() && !named) {
        Some(prefix) => {
            let mut o = obj.clone();
            if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("name".into(), Value::String(format!("{prefix}*")));
            }
            cluster::describe(&o)
        }
        None => cluster::describe(obj),
    }
}

/// An object as `kubectl get -o name` prints it: `pod/x`, `job.batch/x`, `pytorchjob.kubeflow.org/x`.
pub fn kubectl_name(obj: &Value) -> String {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("").to_lowercase();
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    match api_version.split_once('/') {
        Some((group, _)) => format!("{kind}.{group}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// Whether a gang object, read, is a gang of its own: not a Workload (its pod groups become gangs
/// as pods name them, or are templates), not a plain basic PodGroup (no gang), and not one that
/// could not be read (it is reported, and a gang of that name is what its pods wait for).
fn defines_gang(read: &Result<GangObject, Vec<crate::read::error::FieldError>>) -> bool {
    match read {
        Ok(GangObject::Workload(_)) => false,
        Ok(GangObject::UpstreamGroup(g)) => !g.is_plain_basic(),
        Ok(GangObject::Gang(_)) | Err(_) => true,
    }
}

/// The gangs the gang objects among `objects` define (objects that are not one are passed over),
/// for checks that need a pod and its gang together: kube-gang Gangs and the dialects' PodGroups,
/// and the upstream `scheduling.k8s.io` PodGroups and CompositePodGroups assembled into their
/// trees once all are read (a pod names a PodGroup that heads its own tree by that PodGroup's key).
pub fn gangs_of<V: std::borrow::Borrow<Value>>(objects: impl IntoIterator<Item = V>) -> GangSet {
    // Each gang filed as it is read: no list of them all beside the set.
    let mut gangs = GangSet::default();
    let mut upstream = Vec::new();
    for object in objects {
        match dialect::read_object(object.borrow()) {
            Some(Ok(GangObject::Gang(g))) => gangs.extend([g]),
            Some(Ok(GangObject::UpstreamGroup(g))) => upstream.push(g),
            _ => {}
        }
    }
    if !upstream.is_empty() {
        gangs.extend(dialect::upstream::assemble(&upstream).gangs);
    }
    gangs
}

/// Why the scheduler could not read this Node, Pod or storage object (an invalid quantity, a
/// field of the wrong type), as `path: message; …`; `None` when it can, or when it is another
/// kind. A priority class is another object, looked up when the cluster is assembled, so it is
/// not checked here.
pub fn unreadable(obj: &Value) -> Option<String> {
    let errors = match obj.get("kind").and_then(Value::as_str) {
        Some("Node") => convert::node_from_value(obj).err(),
        Some("Pod") => convert::pod_from_value(obj, &convert::PriorityClasses::default()).err(),
        // PVCs, PVs, StorageClasses, CSINodes, ResourceClaims, HyperNodes.
        _ => volume::from_value(obj).and_then(Result::err),
    }
    .unwrap_or_default();
    if errors.is_empty() {
        return None;
    }
    let text: Vec<String> =
        errors.iter().filter(|e| e.path != "spec.priorityClassName").map(ToString::to_string).collect();
    (!text.is_empty()).then(|| text.join("; "))
}

/// The DRA selectors of a ResourceClaim, ResourceClaimTemplate or DeviceClass
/// (`resource.k8s.io`) that the API server refuses: longer than it allows, or that do not
/// compile; each named by its field.
pub fn selector_errors(obj: &Value) -> Vec<crate::read::error::FieldError> {
    use crate::read::object::At as _;
    let api = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if !api.starts_with("resource.k8s.io/") {
        return Vec::new();
    }
    let beta1 = api == "resource.k8s.io/v1beta1";
    let (root, requests) = match obj.get("kind").and_then(Value::as_str) {
        Some("DeviceClass") => ("spec", None),
        Some("ResourceClaim") => ("spec.devices", obj.at("/spec/devices/requests")),
        Some("ResourceClaimTemplate") => ("spec.spec.devices", obj.at("/spec/spec/devices/requests")),
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    let mut check = |path: String, selectors: Option<&Value>| {
        for (i, s) in selectors.and_then(Value::as_array).into_iter().flatten().enumerate() {
            if let Some(expr) = s.at("/cel/expression").and_then(Value::as_str)
                && let Err(e) = crate::read::cel::compile(expr)
            {
                out.push(crate::read::error::FieldError::new(format!("{path}[{i}].cel.expression"), e));
            }
        }
    };
    if root == "spec" {
        check("spec.selectors".into(), obj.at("/spec/selectors"));
        return out;
    }
    for (i, r) in requests.and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("{root}.requests[{i}]");
        if beta1 {
            check(format!("{at}.selectors"), r.get("selectors"));
        } else {
            check(format!("{at}.exactly.selectors"), r.at("/exactly/selectors"));
        }
        for (j, sub) in r.get("firstAvailable").and_then(Value::as_array).into_iter().flatten().enumerate() {
            check(format!("{at}.firstAvailable[{j}].selectors"), sub.get("selectors"));
        }
    }
    out
}

/// Whether `kind` names a cluster-scoped object of those an input may hold.
fn cluster_scoped(obj: &Value) -> bool {
    matches!(
        obj.get("kind").and_then(Value::as_str),
        Some("Node" | "Namespace" | "PriorityClass" | "ResourceSlice" | "DeviceClass")
    )
}

/// Step 1: the namespace (`default_ns` where the object has none and is namespaced) and, when
/// `stamp` is given, the creation time, as the API server fills them in.
pub fn defaulted(obj: &mut Value, default_ns: Option<&str>, stamp: Option<&Value>) {
    let scoped = cluster_scoped(obj);
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(ns) = default_ns.filter(|_| !scoped) {
            meta.entry("namespace").or_insert_with(|| Value::String(ns.to_string()));
        }
        if let Some(stamp) = stamp {
            meta.entry("creationTimestamp").or_insert_with(|| stamp.clone());
        }
    }
}

/// Step 2: what the API server refuses before any webhook sees the object: a label or annotation
/// that is no string (the object's and its templates' alike), a Gang's field its CRD does not
/// declare (strict field validation, kubectl's default). `path: message` each.
pub fn refused_before_admission(obj: &Value) -> Vec<String> {
    let refused = workload::metadata_errors(obj);
    if !refused.is_empty() {
        return refused.iter().map(ToString::to_string).collect();
    }
    let selectors = selector_errors(obj);
    if !selectors.is_empty() {
        return selectors.iter().map(ToString::to_string).collect();
    }
    crd::unknown_fields(obj)
        .iter()
        .map(|p| format!("{p}: unknown field \"{p}\" (the Gang CRD declares no such field)"))
        .collect()
}

/// Step 3: admission on create, as the webhook admits it, with Kueue's mutating webhook beside
/// ours: a Job submitted to a queue is created suspended (Kueue's own admission unsuspends it
/// later). `opted_in`: the namespace labels to judge opting in by (`None`: the object's own).
pub fn admitted(
    obj: &mut Value,
    opted_in: Option<&BTreeMap<String, String>>,
    gangs: &GangSet,
) -> crate::rules::admit::Verdict {
    if workload::kueue_suspends(obj)
        && let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.insert("suspend".into(), Value::Bool(true));
    }
    admit_with(obj, None, opted_in, gangs)
}

/// Step 4: an object created with only `generateName` named as the API server names it after
/// mutating admission: the prefix and five characters, derived from `seed` (so a simulation can
/// be repeated). Whether it was named.
pub fn named(obj: &mut Value, seed: &str) -> bool {
    if !workload::named_after_mutation(obj) {
        return false;
    }
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return false };
    let prefix = meta.get("generateName").and_then(Value::as_str).unwrap_or("").to_string();
    let name = workload::generated_name(&prefix, seed);
    meta.insert("name".into(), Value::String(name));
    true
}

/// Step 5: a suspended `batch/v1` Job runs once unsuspended (what Kueue does when it admits it):
/// that update is admitted too, and may give it its gang (a Job named by the API server). The
/// update's verdict, when there was one; `obj` is then the unsuspended Job.
pub fn unsuspended(
    obj: &mut Value,
    opted_in: Option<&BTreeMap<String, String>>,
    gangs: &GangSet,
) -> Option<crate::rules::admit::Verdict> {
    let suspended_job = obj.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)
        && obj.get("kind").and_then(Value::as_str) == Some("Job")
        && obj.get("apiVersion").and_then(Value::as_str) == Some("batch/v1");
    if !suspended_job {
        return None;
    }
    let mut unsuspended = obj.clone();
    unsuspended["spec"]["suspend"] = Value::Bool(false);
    let verdict = admit_with(&mut unsuspended, Some(obj), opted_in, gangs);
    *obj = unsuspended;
    Some(verdict)
}

/// Admits, expands and stamps submitted objects, as `kubectl apply` of them would: each object
/// goes through the steps of this module in order. A workload without a `kube-gang.io/enabled`
/// label is taken as opted in, as in an opted-in namespace (simulating it asks how it would run as
/// a gang; `validate` judges a file without its namespace, as one that did not opt in) — a
/// Deployment or ReplicaSet, which no namespace opts in, only when its pods name a gang; one with
/// the label is opted in only by `"true"`, as the webhook reads it
/// ([`crate::rules::admit::opted_in`]). At most
/// [`workload::MAX_EXPANDED_PODS`] pods are expanded over the whole input.
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
    let defaulted = |mut s: Sourced| {
        defaulted(&mut s.object, Some(default_ns), Some(&stamp));
        s
    };
    // Read before admission changes anything, as `validate` reads them.
    let mut gangs = gangs_of(sourced().map(defaulted).map(|s| s.object));
    let opted_in: BTreeMap<String, String> = [(LABEL_ENABLED.to_string(), "true".to_string())].into();
    // The runtimes TrainJobs name (Kubeflow Trainer): rendered through them as Trainer's controller does.
    let runtimes: Vec<Value> =
        sourced().map(defaulted).map(|s| s.object).filter(workload::trainer::is_runtime).collect();
    let mut p = Preparing {
        out: Prepared::default(),
        errors: Said::default(),
        warnings: Said::default(),
        origin: Vec::new(),
        budget: max_pods,
        max_pods,
        stamp: stamp.clone(),
        default_ns,
    };
    // What a controller of the input creates (a TrainJob's JobSet and PodGroup) goes through the
    // same steps as the input, right after the object that made it, each with what made it
    // (`TrainJob ml/x through ClusterTrainingRuntime y`), for messages.
    let mut made: VecDeque<(usize, Sourced, String)> = VecDeque::new();
    let mut submitted = sourced().map(defaulted).enumerate();
    while let Some((index, Sourced { file: source, object: mut obj }, maker)) =
        made.pop_front().or_else(|| submitted.next().map(|(i, s)| (i, s, String::new())))
    {
        if workload::trainer::is_runtime(&obj) {
            // Read above; it makes nothing by itself.
            continue;
        }
        if workload::trainer::is_trainjob(&obj) {
            for (object, maker) in p.render_trainjob(&source, &obj, &runtimes, &mut gangs) {
                made.push_back((index, defaulted(Sourced { file: source.clone(), object }), maker));
            }
            continue;
        }
        let mut what = describe(&obj);
        if !maker.is_empty() {
            what = format!("{what} (made by {maker})");
        }
        let refused = refused_before_admission(&obj);
        if !refused.is_empty() {
            p.errors.extend(refused.iter().map(|e| format!("{source}: {what}: {e}")));
            continue;
        }
        let verdict = admitted(&mut obj, Some(&opted_in), &gangs);
        let denied = !verdict.allowed();
        p.errors.extend(verdict.errors.iter().map(|e| format!("{source}: {what}: {e}")));
        p.warnings.extend(verdict.warnings.iter().map(|w| format!("{source}: {what}: {w}")));
        let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(default_ns).to_string();
        let prefix = obj.pointer("/metadata/generateName").and_then(Value::as_str).unwrap_or("").to_string();
        if named(&mut obj, &format!("{ns}/{prefix}#{index}")) {
            what = describe(&obj);
        }
        if !denied && let Some(update) = unsuspended(&mut obj, Some(&opted_in), &gangs) {
            p.errors.extend(update.errors.iter().map(|e| format!("{source}: {what}: {e}")));
            p.warnings.extend(update.warnings.iter().map(|w| format!("{source}: {what}: {w}")));
        }
        p.expand(&source, obj, &what, denied);
    }
    // The gangs of the input as submitted are no longer needed: not held beside those of the
    // objects admitted.
    drop(gangs);
    p.finish()
}

/// The state of one [`prepare_bounded`] pass.
struct Preparing<'a> {
    out: Prepared,
    errors: Said,
    warnings: Said,
    /// The file each of `out.objects` came from.
    origin: Vec<Rc<str>>,
    /// Pods that may still be expanded, of `max_pods`.
    budget: u64,
    max_pods: u64,
    stamp: Value,
    default_ns: &'a str,
}

impl Preparing<'_> {
    /// A TrainJob rendered through its runtime as Trainer's controller renders it: the objects it
    /// makes (its JobSet and PodGroup), each with what made it; its PodGroup is known to
    /// admission of its JobSet, as in the cluster.
    fn render_trainjob(
        &mut self,
        source: &str,
        obj: &Value,
        runtimes: &[Value],
        gangs: &mut GangSet,
    ) -> Vec<(Value, String)> {
        let what = describe(obj);
        match workload::trainer::render(obj, runtimes) {
            Ok(Some((objects, said))) => {
                self.warnings.extend(said.iter().map(|w| format!("{source}: {what}: {w}")));
                for o in &objects {
                    if let Some(Ok(GangObject::Gang(g))) = dialect::read_object(o) {
                        gangs.extend([g]);
                    }
                }
                let runtime = obj.pointer("/spec/runtimeRef/name").and_then(Value::as_str).unwrap_or("");
                let kind = obj
                    .pointer("/spec/runtimeRef/kind")
                    .and_then(Value::as_str)
                    .unwrap_or("ClusterTrainingRuntime");
                objects.into_iter().map(|o| (o, format!("{what} through {kind} {runtime}"))).collect()
            }
            Ok(None) => {
                self.warnings.push(format!(
                    "{source}: {what}: its runtime (spec.runtimeRef) is not in the input: nothing is rendered; add the TrainingRuntime or ClusterTrainingRuntime to simulate it"
                ));
                Vec::new()
            }
            Err(e) => {
                self.errors.extend(e.iter().map(|e| format!("{source}: {what}: {e}")));
                Vec::new()
            }
        }
    }

    /// Step 6: an admitted object into what the cluster would hold: a workload's (or a Pod's)
    /// pods and gang objects, stamped as created; a gang object, node or storage object as it
    /// is; anything else skipped with a warning. `denied`: admission refused it (and has said
    /// why).
    fn expand(&mut self, source: &str, obj: Value, what: &str, denied: bool) {
        let file: Rc<str> = source.into();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        let grove = workload::grove::is_pcs(&obj);
        if kind == "Pod" || grove || workload::is_workload(&obj) {
            let count = match workload::inspect(&obj) {
                Some(Ok(shape)) => Some(workload::expanded_count(&shape)),
                _ if grove => Some(workload::grove::pod_count(&obj)),
                _ => None,
            };
            if let Some(Ok(n)) = count {
                if n > self.budget {
                    self.errors.push(format!(
                        "{source}: {what}: its {n} pods would make the input's {} pods in all; at most {} are expanded: simulate fewer workloads at once",
                        self.max_pods - self.budget + n,
                        self.max_pods,
                    ));
                    return;
                }
                self.budget -= n;
            }
            match workload::expand_admitted(&obj) {
                Ok(pods) if pods.is_empty() => {
                    self.warnings.push(format!("{source}: {what}: creates no pods; skipped"));
                }
                Ok(pods) => self.created(source, &obj, what, pods),
                // Admission has said why already.
                Err(_) if denied => {}
                Err(expansion) => {
                    self.errors.extend(expansion.iter().map(|e| format!("{source}: {what}: {e}")));
                }
            }
        } else if let Some(read) = dialect::read_object(&obj) {
            // A Workload is not a gang: its pod groups become gangs as pods name them. Nor is a
            // plain basic PodGroup: its pods are scheduled one by one.
            if kind != "Workload" && defines_gang(&read) {
                let ns =
                    obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(self.default_ns);
                let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
                self.out.gang_objects.insert(GangKey::new(ns, name));
            }
            self.out.objects.push(Compact::new(&obj));
        } else if kind == "ResourceClaimTemplate"
            && obj
                .get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|v| v.starts_with("resource.k8s.io/"))
        {
            // What the resourceclaim controller makes pods' claims from (simulate creates them).
            if let Some(e) = unreadable(&obj) {
                self.errors.push(format!("{source}: {what}: {e}"));
                return;
            }
            self.out.objects.push(Compact::new(&obj));
        } else if cluster_scoped(&obj) || cluster::reads(&ObjectRef::of(&obj)) {
            // Nodes, and what the filters read (PVCs, PVs, StorageClasses, …) the input brings.
            if let Some(e) = unreadable(&obj) {
                self.errors.push(format!("{source}: {what}: {e}"));
                return;
            }
            self.out.objects.push(Compact::new(&obj));
        } else if obj.get("kind").and_then(Value::as_str) == Some("RayJob")
            && crate::read::workload::ray_job_selects_cluster(&obj)
        {
            // Runs on an existing RayCluster, which makes its pods: nothing to place here (the
            // rule book says so when it opted in).
        } else {
            self.warnings.push(format!("{source}: {what}: neither a workload nor a gang object; skipped"));
        }
        self.origin.resize(self.out.objects.len(), file);
    }

    /// What a workload's controller creates from it (`pods`: its pods, and the claims and gang
    /// objects it makes), stamped as the API server stamps what it creates.
    fn created(&mut self, source: &str, obj: &Value, what: &str, pods: Vec<Value>) {
        // A pod the scheduler could not read (an invalid quantity) is an input error, not a
        // workload quietly left out; the first such pod speaks for the rest (pods alike are read
        // once: a spec is known by a hash of its contents, so pods that each differ —
        // LeaderWorkerSet's per-group affinity terms — cost a hash each, not a comparison with
        // every spec seen before).
        let mut seen_specs = HashSet::new();
        let first_unreadable = pods.iter().find_map(|p| {
            if !seen_specs.insert(spec_hash(p.get("spec"))) {
                return None;
            }
            unreadable(p).map(|e| (p, e))
        });
        if let Some((pod, e)) = first_unreadable {
            let name = pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
            self.errors.push(format!("{source}: {what}: pod {name}: {e}"));
            return;
        }
        for mut p in pods {
            let kind = p.get("kind").and_then(Value::as_str);
            if kind == Some("PersistentVolumeClaim") {
                // A claim the controller would make (a StatefulSet's): the cluster's own, when it
                // has it, is kept.
                self.out.objects.push(Compact::new(&p));
                continue;
            }
            let ns = p
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or(self.default_ns)
                .to_string();
            let name = p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
            if kind != Some("Pod") {
                // A gang object the workload's controller would make (Volcano's PodGroup).
                if dialect::read_object(&p).is_none_or(|read| defines_gang(&read)) {
                    self.out.gang_objects.insert(GangKey::new(&ns, &name));
                }
                if let Some(meta) = p.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("creationTimestamp".into(), self.stamp.clone());
                }
                self.out.objects.push(Compact::new(&p));
                continue;
            }
            if let Some(meta) = p.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("uid".into(), Value::String(format!("simulated-{ns}-{name}")));
                meta.insert("creationTimestamp".into(), self.stamp.clone());
            }
            // What the API server merges into a pod it creates (label keys of affinity terms and
            // spread constraints).
            workload::pod_created(&mut p);
            if let Some(m) = p.as_object_mut() {
                m.insert("status".into(), json!({"phase": "Pending"}));
            }
            let (claims, _) = dialect::pod_claims_all(&p);
            for c in claims {
                self.out.sources.entry(c.gang).or_default().insert(kubectl_name(obj));
            }
            self.out.pods.insert((ns, name));
            self.out.objects.push(Compact::new(&p));
        }
    }

    /// Step 7: the pods prepared, attached to the gangs prepared: a pod must name a leaf of its
    /// gang's tree (an error each that does not); a KAI pod floor above the pods the input holds
    /// is a warning (the gang waits for pods, perhaps ones the cluster has); a gang whose members,
    /// from everything in the input, can never reach its minimum is an error (it would wait
    /// forever: what `validate` says too).
    fn finish(mut self) -> Prepared {
        // Each pod looks up the gangs it names (by key), and each gang is handed the pods that
        // name it; the objects are decoded one at a time, in each pass.
        let gangs = gangs_of(self.out.objects.iter().map(Compact::decode));
        let is_pod = |o: &Value| o.get("kind").and_then(Value::as_str) == Some("Pod");
        // Gang → the positions in `out.objects` of the pods that name it.
        let mut naming: HashMap<GangKey, Vec<usize>> = HashMap::new();
        for (i, (o, file)) in self.out.objects.iter().zip(&self.origin).enumerate() {
            let o = o.decode();
            if is_pod(&o) {
                let claimed = gangs.claimed_by(&o);
                for e in validate::attachment_errors(&claimed, &o) {
                    // An input pod was admitted knowing these gangs: said once.
                    self.errors.push(format!("{file}: {}: {e}", describe(&o)));
                }
                for g in claimed {
                    naming.entry(g.key).or_default().push(i);
                }
            }
        }
        // Pods that count toward no leaf are errors already, and the cause of any shortfall.
        let attached = self.errors.is_empty();
        let mut floors = Vec::new();
        for (o, file) in self.out.objects.iter().zip(&self.origin).filter(|_| attached) {
            let o = o.decode();
            if let Some(Ok(GangObject::Gang(g))) = dialect::read_object(&o) {
                let pods: Vec<Value> =
                    naming.get(&g.key).into_iter().flatten().map(|&i| self.out.objects[i].decode()).collect();
                for e in validate::floor_shortfalls(&g, pods.iter()) {
                    floors.push(format!("{file}: {}: {e}", describe(&o)));
                }
            }
        }
        self.warnings.extend(floors);
        for (o, file) in self.out.objects.iter().zip(&self.origin) {
            let o = o.decode();
            if let Some(Ok(GangObject::Gang(g))) = dialect::read_object(&o) {
                let found = naming.get(&g.key).map_or(0, Vec::len) as u64;
                if let Some(e) = validate::member_shortfall(&g, found) {
                    self.errors.push(format!("{file}: {}: {e}", describe(&o)));
                }
            }
        }
        let mut out = self.out;
        out.errors = self.errors.into_lines("errors (`kubectl gang validate` lists every one)");
        out.warnings = self.warnings.into_lines("warnings");
        out
    }
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

    #[test]
    fn dra_selectors_the_api_server_refuses_are_refused_by_field() {
        let template = serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "g",
                "selectors": [{"cel": {"expression": "device.attributes['x'].?y.orValue(1) == 1"}},
                              {"cel": {"expression": "device.driver =="}}]}}]}}}});
        let refused = refused_before_admission(&template);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].starts_with(
            "spec.spec.devices.requests[0].exactly.selectors[1].cel.expression: does not compile"
        ));
        let beta = serde_json::json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "g",
                "selectors": [{"cel": {"expression": format!("'{}' == device.driver", "x".repeat(10 * 1024))}}]}]}}});
        let refused = refused_before_admission(&beta);
        assert!(
            refused[0].starts_with("spec.devices.requests[0].selectors[0].cel.expression: the expression is"),
            "{refused:?}"
        );
        let class = serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "g"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'g'"}}]}});
        assert!(refused_before_admission(&class).is_empty());
        let broken = serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "g"},
            "spec": {"selectors": [{"cel": {"expression": ")("}}]}});
        assert!(refused_before_admission(&broken)[0].starts_with("spec.selectors[0].cel.expression"));
    }

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
