//! Workloads (Job, JobSet, PyTorchJob/MPIJob/TFJob/XGBoostJob/PaddleJob/JAXJob, LeaderWorkerSet,
//! RayCluster/RayJob, StatefulSet, Volcano's `batch.volcano.sh` Job, and Deployments/ReplicaSets
//! that opted in or whose pod template names a gang in any dialect):
//! whether they opted in, what gang shape they imply ([`inspect`]), injection of gang labels,
//! annotations and `schedulerName` into their pod templates ([`inject`]), and expansion into the pods
//! their controller would create ([`expand`]).
//!
//! The gang a workload implies is CRD-less: label `kube-gang.io/gang=<workload name>` and
//! annotation `kube-gang.io/min-member=<pods it needs>` on every pod template, plus a
//! `kube-gang.io/subgroup=<role>` label where the workload has roles (a Gang object with
//! `subGroups` can then give each role its own minimum). LeaderWorkerSet gets one gang per group.
//! A pod template that already names its gang in any dialect keeps that gang: it gets no second one.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::error::FieldError;
use crate::names::*;

use crate::labels::{
    JOB_NAME, JOBSET_EXCLUSIVE_TOPOLOGY, JOBSET_JOB_INDEX, JOBSET_NAME, JOBSET_REPLICATED_JOB,
};
pub use crate::labels::{LWS_GROUP_INDEX, LWS_NAME};
/// The scheduler the API server writes when a pod names none.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// One role of a workload: a pod template and how many pods it makes.
#[derive(Clone, Debug, PartialEq)]
pub struct Role {
    /// Role name (`worker`, `launcher`, a replicatedJob's name); empty for single-template kinds.
    pub name: String,
    /// Pods this role runs at once.
    pub pods: u32,
    /// JSON pointer of the pod template (`/spec/template`).
    pub template: String,
}

/// The gang a workload implies.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadShape {
    pub kind: String,
    /// The API group (`batch`, `batch.volcano.sh`, …).
    pub group: String,
    pub namespace: String,
    pub name: String,
    pub roles: Vec<Role>,
    /// Pods the gang needs (all of them: a distributed job is useless short of any).
    pub min_member: u32,
    /// One gang per this many pods (LeaderWorkerSet groups); `None`: one gang for the workload.
    pub group_size: Option<u32>,
    /// Number of gangs (LeaderWorkerSet replicas); 1 otherwise.
    pub groups: u32,
    /// The object's name was not known to mutating admission: it has only `generateName`, or a
    /// name the API server generated from it ([`named_after_mutation`]). No gang can be named
    /// after such a workload, so injection leaves its templates alone ([`unnamed_gang`] says so).
    pub named_late: bool,
}

impl WorkloadShape {
    /// A Volcano `batch.volcano.sh` Job: a gang by itself, in Volcano's own terms.
    pub fn volcano(&self) -> bool {
        self.group == "batch.volcano.sh"
    }
}

/// True when the object (or, when given, its namespace) carries `kube-gang.io/enabled: "true"`.
pub fn is_opted_in(obj: &Value, namespace_labels: Option<&BTreeMap<String, String>>) -> bool {
    let on_object =
        obj.pointer("/metadata/labels").and_then(|l| l.get(LABEL_ENABLED)).and_then(Value::as_str);
    match on_object {
        Some(v) => v == "true",
        None => namespace_labels.and_then(|l| l.get(LABEL_ENABLED)).is_some_and(|v| v == "true"),
    }
}

/// True when `obj` is a workload kind this module knows.
pub fn is_workload(obj: &Value) -> bool {
    inspect(obj).is_some()
}

fn int_at(obj: &Value, ptr: &str, default: i64, errors: &mut Vec<FieldError>) -> u32 {
    match obj.pointer(ptr) {
        None | Some(Value::Null) => u32::try_from(default).unwrap_or(0),
        Some(v) => match v.as_i64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) => n,
            None => {
                errors
                    .push(FieldError::new(path_of(ptr), format!("must be a non-negative integer, got {v}")));
                0
            }
        },
    }
}

/// `/spec/replicatedJobs/0/replicas` → `spec.replicatedJobs[0].replicas`.
pub fn path_of(ptr: &str) -> String {
    let mut out = String::new();
    for part in ptr.split('/').skip(1) {
        let part = part.replace("~1", "/").replace("~0", "~");
        if part.chars().all(|c| c.is_ascii_digit()) && !part.is_empty() {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&part);
        }
    }
    out
}

/// Unsupported replica types named one by one in the errors; the rest are counted in one more.
const MAX_UNKNOWN_NAMED: usize = 8;

/// Each Kubeflow job kind's replica-spec field and the replica types its operator defines (any
/// other key it refuses). From the operators' own definitions:
/// - training-operator `pkg/apis/kubeflow.org/v1`: `PyTorchJobReplicaTypeMaster`/`Worker` (and
///   `pkg/webhooks/pytorch/pytorchjob_webhook.go` refuses any other key with `NotSupported`);
///   `TFJobReplicaTypePS`/`Worker`/`Chief`/`Master`/`Evaluator` (`tensorflow_types.go`);
///   `XGBoostJobReplicaTypeMaster`/`Worker`; `PaddleJobReplicaTypeMaster`/`Worker`;
///   `JAXJobReplicaTypeWorker`; `MPIJobReplicaTypeLauncher`/`Worker`;
/// - mpi-operator `v2beta1`: `MPIReplicaTypeLauncher`/`Worker`.
///
/// Admission reads an unsupported type's key (to name it) and never its value: the webhook's
/// reader skips those values (`gang_webhook::pruned`), so a job with thousands of them costs its
/// keys, not its templates.
pub const KUBEFLOW_REPLICA_SPECS: [(&str, &str, &[&str]); 6] = [
    ("PyTorchJob", "pytorchReplicaSpecs", &["Master", "Worker"]),
    ("MPIJob", "mpiReplicaSpecs", &["Launcher", "Worker"]),
    ("TFJob", "tfReplicaSpecs", &["Chief", "Evaluator", "Master", "PS", "Worker"]),
    ("XGBoostJob", "xgbReplicaSpecs", &["Master", "Worker"]),
    ("JAXJob", "jaxReplicaSpecs", &["Worker"]),
    ("PaddleJob", "paddleReplicaSpecs", &["Master", "Worker"]),
];

/// [`KUBEFLOW_REPLICA_SPECS`]' entry for `kind` (a Kubeflow job kind).
fn kubeflow_replica_types(kind: &str) -> (&'static str, &'static [&'static str]) {
    let at = KUBEFLOW_REPLICA_SPECS.iter().position(|(k, _, _)| *k == kind).unwrap_or(5);
    let (_, field, known) = KUBEFLOW_REPLICA_SPECS[at];
    (field, known)
}

/// The replicated jobs an opted-in JobSet may have: as many as a gang has subgroups (the rule
/// book's `MAX_SUBGROUPS`).
pub const MAX_JOBSET_ROLES: usize = 64;

/// The worker groups an opted-in RayCluster or RayJob may have, bounded as a JobSet's replicated
/// jobs are: KubeRay sets no limit (`WorkerGroupSpecs` has no `maxItems` in ray-operator's
/// `apis/ray/v1/raycluster_types.go`), and each group is a template to inject.
pub const MAX_RAY_WORKER_GROUPS: usize = MAX_JOBSET_ROLES;

/// The gang shape of a workload. `None`: not a workload kind we know.
pub fn inspect(obj: &Value) -> Option<Result<WorkloadShape, Vec<FieldError>>> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str)?;
    let kind = obj.get("kind").and_then(Value::as_str)?;
    let group = crate::dialect::group_of(api_version);
    let mut errors = Vec::new();
    let mut roles = Vec::new();
    let mut group_size = None;
    let mut groups = 1;
    match (group, kind) {
        ("batch", "Job") => {
            let parallelism = int_at(obj, "/spec/parallelism", 1, &mut errors);
            let completions = obj.pointer("/spec/completions").and_then(Value::as_u64);
            let pods = match completions {
                Some(c) => parallelism.min(u32::try_from(c).unwrap_or(u32::MAX)),
                None => parallelism,
            };
            roles.push(Role { name: String::new(), pods, template: "/spec/template".into() });
        }
        ("apps", "StatefulSet") => {
            let pods = int_at(obj, "/spec/replicas", 1, &mut errors);
            roles.push(Role { name: String::new(), pods, template: "/spec/template".into() });
        }
        ("jobset.x-k8s.io", "JobSet") => {
            // Borrowed, never cloned: a JobSet may hold thousands of jobs (issue 16).
            let jobs = obj.pointer("/spec/replicatedJobs").and_then(Value::as_array).map_or(0, Vec::len);
            // Each replicated job is a role with its own template to inject: beyond the gang's
            // subgroup limit the JobSet is refused with one bounded error, not a patch per job.
            if jobs > MAX_JOBSET_ROLES {
                return Some(Err(vec![FieldError::new(
                    "spec.replicatedJobs",
                    format!("has {jobs} replicated jobs; a gang spans at most {MAX_JOBSET_ROLES}"),
                )]));
            }
            for i in 0..jobs {
                let base = format!("/spec/replicatedJobs/{i}");
                let name =
                    obj.pointer(&format!("{base}/name")).and_then(Value::as_str).unwrap_or("").to_string();
                let replicas = int_at(obj, &format!("{base}/replicas"), 1, &mut errors);
                let parallelism = int_at(obj, &format!("{base}/template/spec/parallelism"), 1, &mut errors);
                let pods = checked_pods(
                    replicas.checked_mul(parallelism),
                    &format!("{base}/replicas"),
                    "replicas × parallelism",
                    &mut errors,
                );
                roles.push(Role { name, pods, template: format!("{base}/template/spec/template") });
            }
        }
        ("kubeflow.org", "PyTorchJob" | "MPIJob" | "TFJob" | "XGBoostJob" | "PaddleJob" | "JAXJob") => {
            let (field, known) = kubeflow_replica_types(kind);
            let specs = obj.pointer(&format!("/spec/{field}")).and_then(Value::as_object);
            let mut unknown = 0usize;
            for role in specs.into_iter().flat_map(|m| m.keys()) {
                // Only the replica types the operator defines: it refuses the others, and each
                // role becomes labels in the patch, so the patch is bounded by this list (issue 16).
                if !known.contains(&role.as_str()) {
                    unknown += 1;
                    if unknown <= MAX_UNKNOWN_NAMED {
                        let supported: Vec<String> = known.iter().map(|k| format!("{k:?}")).collect();
                        errors.push(FieldError::new(
                            path_of(&format!("/spec/{field}/{role}")),
                            format!(
                                "Unsupported value: {role:?}: supported values: {}",
                                supported.join(", ")
                            ),
                        ));
                    }
                    continue;
                }
                let base = format!("/spec/{field}/{role}");
                let pods = int_at(obj, &format!("{base}/replicas"), 1, &mut errors);
                roles.push(Role { name: role.to_lowercase(), pods, template: format!("{base}/template") });
            }
            if unknown > MAX_UNKNOWN_NAMED {
                errors.push(FieldError::new(
                    format!("spec.{field}"),
                    format!("{} more unsupported replica types", unknown - MAX_UNKNOWN_NAMED),
                ));
            }
        }
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet") => {
            groups = int_at(obj, "/spec/replicas", 1, &mut errors);
            let size = int_at(obj, "/spec/leaderWorkerTemplate/size", 1, &mut errors);
            group_size = Some(size);
            if obj.pointer("/spec/leaderWorkerTemplate/leaderTemplate").is_some_and(|t| !t.is_null()) {
                roles.push(Role {
                    name: "leader".into(),
                    pods: groups,
                    template: "/spec/leaderWorkerTemplate/leaderTemplate".into(),
                });
                let pods = checked_pods(
                    groups.checked_mul(size.saturating_sub(1)),
                    "/spec/replicas",
                    "replicas × (leaderWorkerTemplate.size - 1)",
                    &mut errors,
                );
                roles.push(Role {
                    name: "worker".into(),
                    pods,
                    template: "/spec/leaderWorkerTemplate/workerTemplate".into(),
                });
            } else {
                let pods =
                    checked_pods(groups.checked_mul(size), "/spec/replicas", "replicas × size", &mut errors);
                roles.push(Role {
                    name: "worker".into(),
                    pods,
                    template: "/spec/leaderWorkerTemplate/workerTemplate".into(),
                });
            }
        }
        ("ray.io", "RayCluster" | "RayJob") => {
            // A RayJob's cluster is `spec.rayClusterSpec`; its submitter pod is not a gang member.
            let base = if kind == "RayJob" { "/spec/rayClusterSpec" } else { "/spec" };
            roles.push(Role {
                name: "head".into(),
                pods: 1,
                template: format!("{base}/headGroupSpec/template"),
            });
            // Borrowed, never cloned: each worker group holds a whole pod template.
            let workers: &[Value] = obj
                .pointer(&format!("{base}/workerGroupSpecs"))
                .and_then(Value::as_array)
                .map_or(&[], Vec::as_slice);
            // Beyond the limit, one bounded error rather than a patch per group (issue 16).
            if workers.len() > MAX_RAY_WORKER_GROUPS {
                return Some(Err(vec![FieldError::new(
                    path_of(&format!("{base}/workerGroupSpecs")),
                    format!(
                        "has {} worker groups; a gang spans at most {MAX_RAY_WORKER_GROUPS}",
                        workers.len()
                    ),
                )]));
            }
            for (i, w) in workers.iter().enumerate() {
                let at = format!("{base}/workerGroupSpecs/{i}");
                let name = w.get("groupName").and_then(Value::as_str).unwrap_or("workers").to_string();
                let replicas = int_at(obj, &format!("{at}/replicas"), 1, &mut errors);
                let min = int_at(obj, &format!("{at}/minReplicas"), i64::from(replicas), &mut errors);
                // KubeRay creates `numOfHosts` pods per replica (multi-host TPU slices).
                let hosts = int_at(obj, &format!("{at}/numOfHosts"), 1, &mut errors);
                roles.push(Role {
                    name,
                    pods: replicas.max(min).saturating_mul(hosts),
                    template: format!("{at}/template"),
                });
            }
        }
        ("batch.volcano.sh", "Job") => {
            let tasks: &[Value] =
                obj.pointer("/spec/tasks").and_then(Value::as_array).map_or(&[], Vec::as_slice);
            for (i, t) in tasks.iter().enumerate() {
                let name = t.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                let pods = int_at(obj, &format!("/spec/tasks/{i}/replicas"), 0, &mut errors);
                roles.push(Role { name, pods, template: format!("/spec/tasks/{i}/template") });
            }
        }
        ("apps", "Deployment" | "ReplicaSet") => {
            // Only a gang when asked: opted in, or its pods already name a gang (the coscheduling
            // docs' own example is a Deployment labelled with its PodGroup).
            let names_gang =
                obj.pointer("/spec/template").is_some_and(|t| !template_claims(t, "default").is_empty());
            if !is_opted_in(obj, None) && !names_gang {
                return None;
            }
            let pods = int_at(obj, "/spec/replicas", 1, &mut errors);
            roles.push(Role { name: String::new(), pods, template: "/spec/template".into() });
        }
        _ => return None,
    }
    let meta = obj.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("").to_string();
    let namespace = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    let named_late = named_after_mutation(obj);
    if name.is_empty() && !named_late {
        // The API server's own message (apimachinery `ValidateObjectMeta`).
        errors.push(FieldError::new("metadata.name", "Required value: name or generateName is required"));
    }
    for r in &roles {
        if !obj.pointer(&r.template).is_some_and(Value::is_object) {
            errors.push(FieldError::new(path_of(&r.template), "pod template is missing"));
        }
    }
    // Every role's pods, summed with a check: the total is written into an annotation and compared
    // with minimums, so it must be a real count (at most `MAX_PODS`), never a wrapped one.
    let mut total: u32 = 0;
    let counts_before = errors.len();
    for r in &roles {
        match total.checked_add(r.pods).filter(|t| *t <= MAX_PODS) {
            Some(t) => total = t,
            None => {
                errors.push(FieldError::new(
                    path_of(&role_count_pointer(kind, &r.template)),
                    format!("the {kind}'s pods add up to more than {MAX_PODS}"),
                ));
                total = 0;
                break;
            }
        }
    }
    let mut min_member = group_size.unwrap_or(total);
    if group == "batch.volcano.sh" {
        min_member = volcano_min_available(obj, &roles, total, &mut errors);
    }
    // The workload may ask for less than all of its pods (an elastic gang): its own
    // `kube-gang.io/min-member` annotation wins over the derived minimum.
    let field = format!("metadata.annotations[{ANNOTATION_MIN_MEMBER}]");
    if let Some(v) = meta.and_then(|m| m.pointer("/annotations")).and_then(|a| a.get(ANNOTATION_MIN_MEMBER)) {
        match v.as_str().map(|s| s.trim().parse::<u32>()) {
            Some(Ok(0)) => errors.push(FieldError::new(field, "must be at least 1")),
            Some(Ok(n)) if n > min_member => errors.push(FieldError::new(
                field,
                format!("{n} exceeds the {min_member} pods the {kind} runs at once: the gang can never be satisfied"),
            )),
            Some(Ok(n)) => min_member = n,
            _ => errors.push(FieldError::new(field, format!("{v} is not a positive integer"))),
        }
    }
    if min_member == 0 && errors.len() == counts_before {
        errors.push(FieldError::new(
            "spec",
            format!("the {kind} runs no pods: a gang needs at least one member"),
        ));
    }
    if !errors.is_empty() {
        return Some(Err(errors));
    }
    Some(Ok(WorkloadShape {
        kind: kind.to_string(),
        group: group.to_string(),
        namespace: namespace.to_string(),
        name,
        roles,
        min_member,
        group_size,
        groups,
        named_late,
    }))
}

/// Labels and annotations that are not strings, in the object's metadata and (a workload's) its
/// pod templates': what the API server refuses before admission
/// ([`crate::convert::metadata_errors`]), each named.
pub fn metadata_errors(obj: &Value) -> Vec<FieldError> {
    let mut out = crate::convert::metadata_errors(obj.get("metadata"), "");
    if let Some(Ok(shape)) = inspect(obj) {
        for role in &shape.roles {
            let meta = obj.pointer(&role.template).and_then(|t| t.get("metadata"));
            out.extend(crate::convert::metadata_errors(meta, &path_of(&role.template)));
        }
    }
    out
}

/// How many random characters the API server appends to `generateName`, from which alphabet, and
/// how much of the prefix it keeps (apimachinery `names.SimpleNameGenerator`: `maxNameLength` 63
/// minus 5; `utilrand.String`'s consonants and digits, no vowels, no look-alikes).
const GENERATED_SUFFIX_LEN: usize = 5;
const GENERATED_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const MAX_GENERATED_PREFIX: usize = 63 - GENERATED_SUFFIX_LEN;

/// The name the API server would give an object with `generateName: prefix`: the prefix (cut to
/// 58 characters) and 5 characters of its alphabet. The API server draws them at random; here they
/// come from an FNV-1a hash of `seed`, so the same input always gets the same name (`simulate`).
pub fn generated_name(prefix: &str, seed: &str) -> String {
    let mut cut = prefix.len().min(MAX_GENERATED_PREFIX);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut h = seed
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let mut name = prefix[..cut].to_string();
    for _ in 0..GENERATED_SUFFIX_LEN {
        name.push(char::from(GENERATED_ALPHABET[(h % GENERATED_ALPHABET.len() as u64) as usize]));
        h /= GENERATED_ALPHABET.len() as u64;
    }
    name
}

/// True when mutating admission could not have known the object's name: it has a `generateName`
/// and either no name (what the mutating webhook and `kubectl gang validate -f` see) or a name the
/// API server generated from it (what the validating webhook sees: the API server names the object
/// after mutating admission and before validating admission, `registry/generic/registry/store.go`).
/// A user who sets both a name and a `generateName` gets the name; such a name is taken as
/// generated only when it is the prefix plus 5 characters of the generator's alphabet.
pub fn named_after_mutation(obj: &Value) -> bool {
    let Some(meta) = obj.get("metadata") else { return false };
    let Some(prefix) = meta.get("generateName").and_then(Value::as_str).filter(|p| !p.is_empty()) else {
        return false;
    };
    let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        return true;
    }
    let mut cut = prefix.len().min(MAX_GENERATED_PREFIX);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    name.strip_prefix(&prefix[..cut]).is_some_and(|suffix| {
        suffix.len() == GENERATED_SUFFIX_LEN && suffix.bytes().all(|b| GENERATED_ALPHABET.contains(&b))
    })
}

/// The warning for a workload that asks for a gang (it is ours: opted in) whose name mutating
/// admission did not know ([`WorkloadShape::named_late`]) and whose pod templates do not name
/// their gang in any dialect: no gang named after it can be injected, so its pods run without
/// one. `None` for anything else: a workload with a name, a Volcano Job (its controller names its
/// PodGroup after the name the API server gave it), templates that name their own gang, a
/// suspended Job (injected when it is unsuspended).
pub fn unnamed_gang(obj: &Value, shape: &WorkloadShape) -> Option<String> {
    if !shape.named_late || shape.volcano() {
        return None;
    }
    // A suspended Job (Kueue's way) gets its gang in the update that unsuspends it, when its name
    // is known and its template still mutable (`template_still_mutable`): nothing to warn about.
    if shape.kind == "Job"
        && shape.group == "batch"
        && obj.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)
    {
        return None;
    }
    let unnamed = shape
        .roles
        .iter()
        .any(|r| obj.pointer(&r.template).is_some_and(|t| template_claims(t, &shape.namespace).is_empty()));
    if !unnamed {
        return None;
    }
    let prefix = obj.pointer("/metadata/generateName").and_then(Value::as_str).unwrap_or("");
    let suspend = if shape.kind == "Job" && shape.group == "batch" {
        ", or create the Job suspended (its gang is injected when it is unsuspended)"
    } else {
        ""
    };
    Some(format!(
        "metadata.generateName: {prefix:?} is turned into a name by the API server only after the mutating webhook has run, so no gang named after the {} can be injected and its pods are scheduled one by one, not as a gang; set metadata.name, or name a gang in the pod template{suspend}",
        shape.kind
    ))
}

/// A workload whose controller creates its pods in stages (each only once the one before is
/// Ready or done), so a gang spanning stages waits for pods that are never created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staged {
    /// The field that stages creation (`spec.podManagementPolicy`).
    pub path: String,
    /// What happens, and the fix.
    pub message: String,
    /// True when the gang's minimum can provably never exist at once (deny); false: a warning.
    pub never: bool,
}

/// The pods the gang of `obj`'s pods needs at once, and the gang named when it is another
/// object's whose minimum `known_min` does not know (`None`, and its key).
fn staged_gang_min(
    obj: &Value,
    shape: &WorkloadShape,
    known_min: &dyn Fn(&crate::model::GangKey) -> Option<u64>,
) -> (Option<u64>, Option<String>) {
    use crate::model::Dialect;
    for role in &shape.roles {
        let Some(template) = obj.pointer(&role.template) else { continue };
        let pod = template_pod(template, &shape.namespace);
        let (claims, _) = crate::dialect::pod_claims_all(&pod);
        for c in &claims {
            match c.dialect {
                // The gang is the pods' annotations: the workload's own, injected or written.
                Dialect::KubeGangAnnotations | Dialect::Koordinator => {
                    if let Some(Ok(g)) = crate::dialect::annotation_gang(c, &pod) {
                        return (Some(g.min_pods().unwrap_or(u64::from(g.min_member))), None);
                    }
                }
                _ => {
                    return match known_min(&c.gang) {
                        Some(min) => (Some(min), None),
                        None => (None, Some(c.gang.to_string())),
                    };
                }
            }
        }
    }
    // Nothing injected yet (validation of an object as it is): the workload's own minimum.
    (Some(u64::from(shape.min_member)), None)
}

/// Pods of the roles that depend on no other (`depends(role index)` false): the first stage.
fn first_stage_pods(shape: &WorkloadShape, depends: &dyn Fn(usize) -> bool) -> u32 {
    shape
        .roles
        .iter()
        .enumerate()
        .filter(|(j, _)| !depends(*j))
        .map(|(_, r)| r.pods)
        .fold(0, u32::saturating_add)
}

/// Staged creation in `obj` (StatefulSet `OrderedReady`, JobSet `startupPolicyOrder: InOrder` and
/// `dependsOn`, LeaderWorkerSet `startupPolicy: LeaderReady`, MPIJob
/// `launcherCreationPolicy: WaitForWorkersReady`, Volcano task `dependsOn`): the first stage's pod
/// count against the pods the gang needs at once. That is the gang the pod templates name: the
/// workload's own (injected, or its templates' `kube-gang.io/min-member`/Koordinator annotations),
/// or a gang another object defines (a coscheduling PodGroup, a `Gang`), whose pods `known_min`
/// gives when the caller knows the object; when it does not, staging is only warned about.
pub fn staged_creation(
    obj: &Value,
    shape: &WorkloadShape,
    known_min: &dyn Fn(&crate::model::GangKey) -> Option<u64>,
) -> Vec<Staged> {
    let mut out = Vec::new();
    let (min, named) = staged_gang_min(obj, shape, known_min);
    let mut stage = |path: &str, what: &str, first: u32, fix: &str| {
        let message = match (min, &named) {
            (Some(min), _) if min > u64::from(first) => format!(
                "{what}: only {first} pod(s) exist before the rest are created, but the gang needs {min} at once, so it can never start; {fix}"
            ),
            (Some(min), _) => format!(
                "{what}: pods are created in stages; the gang's minimum of {min} fits in the first stage, but later pods wait; {fix}"
            ),
            (None, named) => format!(
                "{what}: pods are created in stages ({first} first), and the pods name gang {} whose minimum is not known here: if it needs more than {first} pod(s) at once it can never start; {fix}",
                named.as_deref().unwrap_or("?")
            ),
        };
        out.push(Staged {
            path: path.to_string(),
            message,
            never: min.is_some_and(|m| m > u64::from(first)),
        });
    };
    let str_at = |p: &str| obj.pointer(p).and_then(Value::as_str);
    match (shape.group.as_str(), shape.kind.as_str()) {
        ("apps", "StatefulSet") => {
            let policy = str_at("/spec/podManagementPolicy").unwrap_or("OrderedReady");
            if policy == "OrderedReady" && shape.roles.first().is_some_and(|r| r.pods > 1) {
                stage(
                    "spec.podManagementPolicy",
                    "OrderedReady (the default) creates pod N+1 only once pod N is Running and Ready",
                    1,
                    "set podManagementPolicy: Parallel",
                );
            }
        }
        ("jobset.x-k8s.io", "JobSet") => {
            let jobs = obj.pointer("/spec/replicatedJobs").and_then(Value::as_array);
            let depends = |i: usize| {
                obj.pointer(&format!("/spec/replicatedJobs/{i}/dependsOn"))
                    .and_then(Value::as_array)
                    .is_some_and(|d| !d.is_empty())
            };
            if str_at("/spec/startupPolicy/startupPolicyOrder") == Some("InOrder") && shape.roles.len() > 1 {
                stage(
                    "spec.startupPolicy.startupPolicyOrder",
                    "InOrder creates each replicated job only once the one before is Ready",
                    shape.roles[0].pods,
                    "use AnyOrder, or gang only the first job with a kube-gang.io/min-member annotation",
                );
            } else if let Some(i) = (0..jobs.map_or(0, Vec::len)).find(|&i| depends(i)) {
                let first = first_stage_pods(shape, &depends);
                stage(
                    &format!("spec.replicatedJobs[{i}].dependsOn"),
                    "a replicated job with dependsOn is created only once the jobs it names are Ready or Complete",
                    first,
                    "drop dependsOn, or gang only the jobs that start first with a kube-gang.io/min-member annotation",
                );
            }
        }
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet")
            if str_at("/spec/startupPolicy") == Some("LeaderReady")
                && shape.group_size.is_some_and(|g| g > 1) =>
        {
            stage(
                "spec.startupPolicy",
                "LeaderReady creates a group's workers only once its leader is Ready",
                1,
                "use startupPolicy: LeaderCreated (the default)",
            );
        }
        ("kubeflow.org", "MPIJob")
            if str_at("/spec/launcherCreationPolicy") == Some("WaitForWorkersReady") =>
        {
            let first: u32 = shape.roles.iter().filter(|r| r.name != "launcher").map(|r| r.pods).sum();
            stage(
                "spec.launcherCreationPolicy",
                "WaitForWorkersReady creates the launcher only once every worker is Ready",
                first,
                "use launcherCreationPolicy: AtStartup (the default)",
            );
        }
        ("batch.volcano.sh", "Job") => {
            let depends = |i: usize| {
                obj.pointer(&format!("/spec/tasks/{i}/dependsOn/name"))
                    .and_then(Value::as_array)
                    .is_some_and(|d| !d.is_empty())
            };
            if let Some(i) = (0..shape.roles.len()).find(|&i| depends(i)) {
                let first = first_stage_pods(shape, &depends);
                stage(
                    &format!("spec.tasks[{i}].dependsOn"),
                    "a task with dependsOn is created only once the tasks it names are running",
                    first,
                    "drop dependsOn, or lower spec.minAvailable to the tasks that start first",
                );
            }
        }
        _ => {}
    }
    out
}

/// The gang claims a pod stamped from `template` would make (any dialect). Errors count as no claim:
/// validation reports them on the pod.
pub fn template_claims(template: &Value, namespace: &str) -> Vec<crate::dialect::Claim> {
    crate::dialect::pod_claims(&template_pod(template, namespace)).unwrap_or_default()
}

/// The pod `template` makes, as far as the dialects read a pod: its metadata (in `namespace`), and
/// of its spec the fields that name an upstream gang (`dialect::upstream`). Built with one copy of
/// the metadata and nothing of the rest of the spec: it was three copies of the metadata and two
/// of the whole spec (a `json!` re-serializes the values it is given), the bulk of a decision.
pub fn template_pod(template: &Value, namespace: &str) -> Value {
    let mut meta = match template.get("metadata") {
        Some(Value::Object(m)) => m.clone(),
        _ => serde_json::Map::new(),
    };
    meta.insert("namespace".into(), Value::String(namespace.to_string()));
    let mut spec = serde_json::Map::new();
    for field in ["workloadRef", "schedulingGroup"] {
        if let Some(v) = template.get("spec").and_then(|s| s.get(field)) {
            spec.insert(field.into(), v.clone());
        }
    }
    let mut pod = serde_json::Map::new();
    pod.insert("apiVersion".into(), Value::String("v1".into()));
    pod.insert("kind".into(), Value::String("Pod".into()));
    pod.insert("metadata".into(), Value::Object(meta));
    pod.insert("spec".into(), Value::Object(spec));
    Value::Object(pod)
}

/// A Volcano Job's gang minimum and Volcano's own admission rules on it
/// (`pkg/webhooks/admission/jobs/validate`): at least one task, task names unique DNS-1123 labels,
/// a task's `minAvailable` within its replicas, the job's `minAvailable` within the sum of task
/// replicas. Unset, `minAvailable` is the sum of the tasks' `minAvailable` (each defaulting to its
/// replicas), as Volcano's mutating webhook sets it.
fn volcano_min_available(obj: &Value, roles: &[Role], total: u32, errors: &mut Vec<FieldError>) -> u32 {
    if roles.is_empty() {
        errors.push(FieldError::new("spec.tasks", "no task specified in job spec"));
        return 0;
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut sum_min = 0u32;
    for (i, r) in roles.iter().enumerate() {
        if let Err(e) = crate::dialect::check_dns_label(&r.name) {
            errors.push(FieldError::new(format!("spec.tasks[{i}].name"), e));
        }
        if !seen.insert(r.name.as_str()) {
            errors.push(FieldError::new(
                format!("spec.tasks[{i}].name"),
                format!("duplicate task name {:?}", r.name),
            ));
        }
        let task_min = int_at(obj, &format!("/spec/tasks/{i}/minAvailable"), i64::from(r.pods), errors);
        if task_min > r.pods {
            errors.push(FieldError::new(
                format!("spec.tasks[{i}].minAvailable"),
                format!("{task_min} is greater than the task's {} replicas", r.pods),
            ));
        }
        sum_min = sum_min.saturating_add(task_min);
    }
    match obj.pointer("/spec/minAvailable") {
        None | Some(Value::Null) => sum_min,
        Some(_) => {
            let n = int_at(obj, "/spec/minAvailable", 0, errors);
            if n > total {
                errors.push(FieldError::new(
                    "spec.minAvailable",
                    format!("{n} is greater than the {total} replicas of all tasks: the job can never start"),
                ));
            }
            n
        }
    }
}

/// The most pods [`expand`] writes out for one workload, and `simulate` for its whole input.
pub const MAX_EXPANDED_PODS: u64 = 100_000;

/// The most pods one workload may imply: a count the API server can hold (int32).
pub const MAX_PODS: u32 = i32::MAX as u32;

/// A product of two user counts, or an error naming the field when it exceeds [`MAX_PODS`].
fn checked_pods(product: Option<u32>, ptr: &str, what: &str, errors: &mut Vec<FieldError>) -> u32 {
    match product.filter(|p| *p <= MAX_PODS) {
        Some(p) => p,
        None => {
            errors.push(FieldError::new(path_of(ptr), format!("{what} is more than {MAX_PODS} pods")));
            0
        }
    }
}

/// The field that sets a role's count, from its template's pointer: `…/template` → `…/replicas`
/// (JobSet: `/spec/replicatedJobs/0/template/spec/template` → `/spec/replicatedJobs/0/replicas`).
fn role_count_pointer(kind: &str, template: &str) -> String {
    if kind == "Job" {
        return "/spec/parallelism".into();
    }
    let base =
        template.strip_suffix("/template/spec/template").or_else(|| template.strip_suffix("/template"));
    match base {
        Some(b) if b.starts_with("/spec/leaderWorkerTemplate") || b.is_empty() || b == "/spec" => {
            "/spec/replicas".into()
        }
        Some(b) => format!("{b}/replicas"),
        None => "/spec/replicas".into(),
    }
}

impl WorkloadShape {
    /// Pods one gang of this workload expects: the group size (LeaderWorkerSet), else every role's
    /// pods. [`inspect`] has checked the sum, so it cannot overflow.
    pub fn total_member(&self) -> u32 {
        self.group_size.unwrap_or_else(|| self.roles.iter().map(|r| r.pods).fold(0, u32::saturating_add))
    }
}

/// The longest a label value may be.
pub const MAX_LABEL_VALUE: usize = 63;

/// A name as a label value: unchanged when it fits in 63 characters; otherwise its first 54
/// characters (trailing `-`, `_`, `.` dropped, as a value must end in an alphanumeric), `-`, and 8
/// hex digits of the FNV-1a hash of the whole name. Stable (the same name always gives the same
/// value, on every replica and in the CLI) and distinct for names that share their first 54
/// characters. Kubernetes controllers shorten generated names the same way: a truncated prefix and
/// a hash of the full input (the Deployment controller's `pod-template-hash` is FNV-32a too).
pub fn label_value_for(name: &str) -> String {
    if name.len() <= MAX_LABEL_VALUE {
        return name.to_string();
    }
    let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    let mut cut = MAX_LABEL_VALUE - 9;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let prefix = name[..cut].trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    if prefix.is_empty() { format!("{hash:08x}") } else { format!("{prefix}-{hash:08x}") }
}

/// One field admission adds to an object: a JSON Patch `add` of `value` at `path` (an RFC 6901
/// pointer whose parent exists in the object it was computed for). Adding at a member that exists
/// replaces it; injection only does so for a `null` or for a `schedulerName` left to the default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub value: Value,
}

impl Change {
    /// Applies the change to `obj`, which must be the object it was computed for (or that object
    /// with earlier changes of the same list applied). Returns false when the parent is missing.
    pub fn apply(&self, obj: &mut Value) -> bool {
        let Some((parent, token)) = self.path.rsplit_once('/') else { return false };
        let Some(map) = obj.pointer_mut(parent).and_then(Value::as_object_mut) else { return false };
        map.insert(token.replace("~1", "/").replace("~0", "~"), self.value.clone());
        true
    }
}

/// `key` escaped as one token of a JSON pointer.
fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// True when injection may write a member: it is absent or `null`.
fn vacant(v: Option<&Value>) -> bool {
    v.is_none_or(Value::is_null)
}

/// The changes that put `entries` into the map at `keys` under `at` (pointer `base`): the whole map
/// when it is absent, else each entry the user did not set. What the user set is never overwritten;
/// a non-map in the way leaves that part alone.
fn add_entries(at: &Value, base: &str, keys: &[&str], entries: &[(&str, String)], out: &mut Vec<Change>) {
    let mut cur = at;
    let mut path = base.to_string();
    for (depth, key) in keys.iter().enumerate() {
        let Some(map) = cur.as_object() else { return };
        path.push('/');
        path.push_str(&token(key));
        match map.get(*key) {
            Some(next) if !next.is_null() => cur = next,
            _ => {
                // Absent from here down: one change adds the rest of the path with every entry.
                let mut value: Value =
                    entries.iter().map(|(k, v)| ((*k).to_string(), Value::String(v.clone()))).collect();
                for k in keys[depth + 1..].iter().rev() {
                    value = Value::Object(std::iter::once(((*k).to_string(), value)).collect());
                }
                out.push(Change { path, value });
                return;
            }
        }
    }
    let Some(map) = cur.as_object() else { return };
    for (k, v) in entries {
        if vacant(map.get(*k)) {
            out.push(Change { path: format!("{path}/{}", token(k)), value: Value::String(v.clone()) });
        }
    }
}

/// The change that writes our `schedulerName` into the pod spec at `spec` (pointer `base`), unless
/// the user chose a scheduler other than the default.
fn add_scheduler(template: &Value, base: &str, out: &mut Vec<Change>) {
    let Some(map) = template.as_object() else { return };
    let name = Value::String(crate::SCHEDULER_NAME.into());
    match map.get("spec") {
        None | Some(Value::Null) => out.push(Change {
            path: format!("{base}/spec"),
            value: Value::Object(std::iter::once(("schedulerName".to_string(), name)).collect()),
        }),
        Some(Value::Object(spec)) => {
            let current = spec.get("schedulerName").and_then(Value::as_str);
            if current.is_none_or(|s| s.is_empty() || s == DEFAULT_SCHEDULER) {
                out.push(Change { path: format!("{base}/spec/schedulerName"), value: name });
            }
        }
        Some(_) => {}
    }
}

/// What injection adds to `obj`, as changes (the webhook's JSON Patch; [`inject`] applies them):
/// the gang label, `min-member` and `total-member` annotations, subgroup labels and `schedulerName`
/// in every pod template (workloads), or the missing `schedulerName` (pods that claim a gang in any
/// dialect). Reads the object without copying it; never overwrites what the user set; empty for
/// other kinds and for an object already injected.
pub fn injection(obj: &Value) -> Result<Vec<Change>, Vec<FieldError>> {
    injection_of(obj, false)
}

/// [`injection`] of an object whose name the caller knows was known to mutating admission (an
/// UPDATE: the object exists), whatever its `generateName` says.
pub fn injection_named(obj: &Value) -> Result<Vec<Change>, Vec<FieldError>> {
    injection_of(obj, true)
}

/// True when an UPDATE may still change the labels and annotations of the Job's pod template:
/// the old Job is suspended and has never started (`status.startTime` unset). Kubernetes allows
/// it then (`pkg/registry/batch/job/strategy.go`: `AllowMutableSchedulingDirectives = suspended &&
/// notStarted`; `validatePodTemplateUpdate`: labels, annotations, node selector,
/// affinity, tolerations and scheduling gates of a suspended Job that never ran; not
/// `schedulerName`) — the update in which Kueue admits a Job.
pub fn template_still_mutable(old: &Value, new: &Value) -> bool {
    let job = |o: &Value| {
        o.get("kind").and_then(Value::as_str) == Some("Job")
            && o.get("apiVersion").and_then(Value::as_str) == Some("batch/v1")
    };
    job(old)
        && job(new)
        && old.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)
        && old.pointer("/status/startTime").is_none_or(Value::is_null)
}

fn injection_of(obj: &Value, name_known: bool) -> Result<Vec<Change>, Vec<FieldError>> {
    let mut out = Vec::new();
    if obj.get("kind").and_then(Value::as_str) == Some("Pod")
        && obj.get("apiVersion").and_then(Value::as_str) == Some("v1")
    {
        if !crate::dialect::pod_claims(obj)?.is_empty() {
            add_scheduler(obj, "", &mut out);
        }
        return Ok(out);
    }
    let Some(shape) = inspect(obj) else { return Ok(out) };
    let mut shape = shape?;
    if name_known {
        shape.named_late = false;
    }
    if shape.volcano() {
        // Volcano's scheduler name on a vcjob is replaced too: the job is opted in to ours.
        let current = obj.pointer("/spec/schedulerName").and_then(Value::as_str);
        if current == Some("volcano") {
            out.push(Change {
                path: "/spec/schedulerName".into(),
                value: Value::String(crate::SCHEDULER_NAME.into()),
            });
        } else {
            add_scheduler(obj, "", &mut out);
        }
    }
    let with_roles = shape.roles.len() > 1;
    let total = shape.total_member();
    let annotations =
        [(ANNOTATION_MIN_MEMBER, shape.min_member.to_string()), (ANNOTATION_TOTAL_MEMBER, total.to_string())];
    for role in &shape.roles {
        let Some(template) = obj.pointer(&role.template) else { continue };
        if shape.kind == "Job" && shape.volcano() {
            // Volcano's controller makes the PodGroup and annotates each pod with it: the gang is
            // Volcano's own. Only the scheduler is ours to set, on the job (pods inherit it).
            break;
        }
        let claims = template_claims(template, &shape.namespace);
        let named_elsewhere = claims.iter().any(|c| {
            !matches!(c.dialect, crate::model::Dialect::KubeGang | crate::model::Dialect::KubeGangAnnotations)
        });
        // Its pods already name their gang (any dialect): never a second one. A workload whose name
        // mutating admission does not know names no gang of its own either.
        if named_elsewhere || (shape.named_late && !claims.is_empty()) {
            add_scheduler(template, &role.template, &mut out);
            continue;
        }
        if shape.named_late {
            // No name to give the gang (`unnamed_gang` warns): the pods are left as they are.
            continue;
        }
        let mut labels = vec![(LABEL_GANG, label_value_for(&shape.name))];
        if with_roles && !role.name.is_empty() {
            labels.push((LABEL_SUBGROUP, label_value_for(&role.name)));
        }
        // Labels and annotations share `metadata`: when it is absent, one change adds both.
        if template.as_object().is_some_and(|t| vacant(t.get("metadata"))) {
            let map = |entries: &[(&str, String)]| -> Value {
                entries.iter().map(|(k, v)| ((*k).to_string(), Value::String(v.clone()))).collect()
            };
            let metadata: Value =
                [("labels".to_string(), map(&labels)), ("annotations".to_string(), map(&annotations))]
                    .into_iter()
                    .collect();
            out.push(Change { path: format!("{}/metadata", role.template), value: metadata });
        } else {
            add_entries(template, &role.template, &["metadata", "labels"], &labels, &mut out);
            add_entries(template, &role.template, &["metadata", "annotations"], &annotations, &mut out);
        }
        add_scheduler(template, &role.template, &mut out);
    }
    Ok(out)
}

/// What an UPDATE of a Job under Kueue's partial admission changes in its pod template, so that
/// the gang's members are the pods Kueue admitted.
///
/// A Job annotated `kueue.x-k8s.io/job-min-parallelism` may be admitted with fewer pods than it
/// asks for: Kueue lowers `spec.parallelism` (and `spec.completions` when the Job says
/// `kueue.x-k8s.io/job-completions-equal-parallelism`) in the update that unsuspends it, and puts
/// the original counts back when it suspends the Job again (kubernetes-sigs/kueue KEP-420). The
/// pod template injected at creation says `total-member`/`min-member` for the original count, so
/// the new pods would wait for members that never come. This follows the count: `total-member`
/// becomes the Job's pod count, and `min-member` too when it was the whole gang (it was equal to
/// `total-member`), else it stays, lowered to the count if above it.
///
/// Only while the old Job is suspended: Kubernetes lets a suspended Job that has not started change
/// its pod template's labels and annotations (with node selector, affinity, tolerations and
/// scheduling gates), which is also how Kueue writes its flavor's node labels. Empty for anything
/// else: another kind, a Job not opted into partial admission, a template without our
/// annotations, or counts that already agree.
pub fn recount(old: &Value, new: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    let is_job = new.get("kind").and_then(Value::as_str) == Some("Job")
        && new.get("apiVersion").and_then(Value::as_str) == Some("batch/v1");
    let partial = new
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(crate::labels::KUEUE_JOB_MIN_PARALLELISM));
    let was_suspended = old.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    if !(is_job && partial && was_suspended) {
        return out;
    }
    let Some(Ok(shape)) = inspect(new) else { return out };
    let count = shape.total_member();
    let Some(annotations) = new.pointer("/spec/template/metadata/annotations").and_then(Value::as_object)
    else {
        return out;
    };
    let read = |key: &str| annotations.get(key).and_then(Value::as_str).and_then(|v| v.parse::<u32>().ok());
    let (Some(total), Some(min)) = (read(ANNOTATION_TOTAL_MEMBER), read(ANNOTATION_MIN_MEMBER)) else {
        return out;
    };
    let base = "/spec/template/metadata/annotations";
    if total != count {
        out.push(Change {
            path: format!("{base}/{}", token(ANNOTATION_TOTAL_MEMBER)),
            value: Value::String(count.to_string()),
        });
    }
    let new_min = if min == total { count } else { min.min(count) };
    if new_min != min {
        out.push(Change {
            path: format!("{base}/{}", token(ANNOTATION_MIN_MEMBER)),
            value: Value::String(new_min.to_string()),
        });
    }
    out
}

/// The object with [`injection`]'s changes applied (a copy; the webhook patches instead).
/// Idempotent; never overwrites what the user set. Other kinds come back unchanged.
pub fn inject(obj: &Value) -> Result<Value, Vec<FieldError>> {
    let changes = injection(obj)?;
    let mut out = obj.clone();
    for c in &changes {
        c.apply(&mut out);
    }
    Ok(out)
}

/// What the JobSet and Job controllers write on the `i`-th pod of `role`: its child Job
/// (`<jobset>-<replicatedJob>-<index>`, `parallelism` pods each) in the Job controller's label,
/// JobSet's index, JobSet-name and replicated-job labels (not `job-key`, a SHA-1 of the Job's
/// `namespace/name`), and the JobSet's exclusive-topology annotation, which the JobSet controller
/// copies onto every child Job's pod template.
fn jobset_child_job(
    obj: &Value,
    jobset: &str,
    role: &Role,
    i: u32,
    metadata: &mut serde_json::Map<String, Value>,
) {
    let job_template = role.template.strip_suffix("/spec/template").unwrap_or(&role.template);
    let parallelism = obj
        .pointer(&format!("{job_template}/spec/parallelism"))
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok())
        .filter(|&p| p > 0)
        .unwrap_or(1);
    let index = i / parallelism;
    let mut object_of = |key: &str| {
        let entry = metadata.entry(key).or_insert_with(|| json!({}));
        if !entry.is_object() {
            *entry = json!({});
        }
        entry.as_object_mut().map(std::mem::take).unwrap_or_default()
    };
    let mut labels = object_of("labels");
    labels.insert(JOB_NAME.into(), Value::String(format!("{jobset}-{}-{index}", role.name)));
    labels.insert(JOBSET_JOB_INDEX.into(), Value::String(index.to_string()));
    labels.insert(JOBSET_NAME.into(), Value::String(jobset.to_string()));
    labels.insert(JOBSET_REPLICATED_JOB.into(), Value::String(role.name.clone()));
    let mut annotations = object_of("annotations");
    let exclusive =
        obj.pointer("/metadata/annotations").and_then(|a| a.get(JOBSET_EXCLUSIVE_TOPOLOGY)).or_else(|| {
            obj.pointer(&format!("{job_template}/metadata/annotations"))
                .and_then(|a| a.get(JOBSET_EXCLUSIVE_TOPOLOGY))
        });
    if let Some(key) = exclusive.filter(|k| k.is_string()) {
        annotations.entry(JOBSET_EXCLUSIVE_TOPOLOGY).or_insert_with(|| key.clone());
    }
    metadata.insert("labels".into(), Value::Object(labels));
    metadata.insert("annotations".into(), Value::Object(annotations));
}

/// The pods the workload's controller would create, injection applied. A Pod expands to itself
/// (injected); objects that are neither give an empty list. See [`expand_admitted`].
pub fn expand(obj: &Value) -> Result<Vec<Value>, Vec<FieldError>> {
    expand_admitted(&inject(obj)?)
}

/// Pods a workload implies, or an error naming the field that sets the count when they are more
/// than [`MAX_EXPANDED_PODS`]: what one expansion may write out.
pub fn expanded_count(shape: &WorkloadShape) -> Result<u64, Vec<FieldError>> {
    let count: u64 = shape.roles.iter().map(|r| u64::from(r.pods)).sum();
    if count > MAX_EXPANDED_PODS {
        let role = shape.roles.iter().max_by_key(|r| r.pods).map(|r| r.template.as_str()).unwrap_or("/spec");
        return Err(vec![FieldError::new(
            path_of(&role_count_pointer(&shape.kind, role)),
            format!("the {} would run {count} pods; at most {MAX_EXPANDED_PODS} are expanded", shape.kind),
        )]);
    }
    Ok(count)
}

/// The pods the controller of `obj` — as admission left it: nothing is injected here — would
/// create (`simulate`), and for a Volcano Job its PodGroup. Each pod is what the pod webhook
/// admits: a pod that claims a gang gets our `schedulerName` when it names none.
///
/// Cost: each role's template is decoded once, and its pods share one copy of what the scheduler
/// reads of it ([`crate::convert::scheduling_spec`]) — a pod costs its labels, annotations and
/// scheduling fields, whatever else its template holds. A template the API server could not decode
/// is an error naming the exact field. A Pod expands to itself.
pub fn expand_admitted(obj: &Value) -> Result<Vec<Value>, Vec<FieldError>> {
    let is_pod = obj.get("kind").and_then(Value::as_str) == Some("Pod");
    if is_pod {
        return Ok(vec![obj.clone()]);
    }
    let Some(shape) = inspect(obj) else { return Ok(Vec::new()) };
    let shape = shape?;
    let count = expanded_count(&shape)?;
    let mut stamps = Vec::with_capacity(shape.roles.len());
    let mut errors = Vec::new();
    for role in &shape.roles {
        let Some(template) = obj.pointer(&role.template) else {
            stamps.push(None);
            continue;
        };
        match stamp_of(template, &path_of(&role.template), &shape.namespace) {
            Ok(s) => stamps.push(Some(s)),
            Err(e) => errors.extend(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if shape.volcano() {
        return Ok(expand_volcano(obj, &shape, &stamps));
    }
    let mut pods = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    for (role, stamp) in shape.roles.iter().zip(&stamps) {
        let Some(stamp) = stamp else { continue };
        let per_group = match shape.group_size {
            Some(_) => role.pods / shape.groups.max(1),
            None => role.pods,
        };
        for g in 0..shape.groups {
            for i in 0..per_group {
                let mut name = shape.name.clone();
                if shape.group_size.is_some() {
                    name.push_str(&format!("-{g}"));
                }
                if !role.name.is_empty() {
                    name.push_str(&format!("-{}", role.name));
                }
                name.push_str(&format!("-{i}"));
                let mut metadata = stamp.metadata.clone();
                metadata.insert("name".into(), Value::String(name));
                metadata.insert("namespace".into(), Value::String(shape.namespace.clone()));
                if shape.kind == "JobSet" {
                    jobset_child_job(obj, &shape.name, role, i, &mut metadata);
                }
                if shape.group_size.is_some() {
                    let labels = metadata.entry("labels").or_insert_with(|| json!({}));
                    if !labels.is_object() {
                        *labels = json!({});
                    }
                    if let Some(labels) = labels.as_object_mut() {
                        labels.insert(LWS_NAME.into(), Value::String(label_value_for(&shape.name)));
                        labels.insert(LWS_GROUP_INDEX.into(), Value::String(g.to_string()));
                    }
                }
                pods.push(pod_of(metadata, stamp.spec.clone()));
            }
        }
    }
    Ok(pods)
}

/// What every pod of one role starts from: the template's labels and annotations, and the
/// scheduler's view of its spec (decoded once).
struct Stamp {
    metadata: Map<String, Value>,
    spec: Value,
}

fn stamp_of(template: &Value, path: &str, namespace: &str) -> Result<Stamp, Vec<FieldError>> {
    let mut spec = crate::convert::scheduling_spec(template.get("spec"), &format!("{path}.spec"))?;
    let mut metadata = Map::new();
    for key in ["labels", "annotations"] {
        match template.pointer(&format!("/metadata/{key}")) {
            None | Some(Value::Null) => {}
            Some(v) => {
                metadata.insert(key.into(), v.clone());
            }
        }
    }
    // The pod webhook: a pod that names a gang in any dialect gets our scheduler unless it names
    // another one.
    if !template_claims(template, namespace).is_empty()
        && let Some(sp) = spec.as_object_mut()
    {
        let current = sp.get("schedulerName").and_then(Value::as_str);
        if current.is_none_or(|s| s.is_empty() || s == DEFAULT_SCHEDULER) {
            sp.insert("schedulerName".into(), Value::String(crate::SCHEDULER_NAME.into()));
        }
    }
    Ok(Stamp { metadata, spec })
}

fn pod_of(metadata: Map<String, Value>, spec: Value) -> Value {
    let mut pod = Map::new();
    pod.insert("apiVersion".into(), Value::String("v1".into()));
    pod.insert("kind".into(), Value::String("Pod".into()));
    pod.insert("metadata".into(), Value::Object(metadata));
    pod.insert("spec".into(), spec);
    Value::Object(pod)
}

/// What Volcano's job controller makes of a `batch.volcano.sh` Job: a PodGroup named after the job
/// (`minMember` = `minAvailable`, `minTaskMember` = each task's `minAvailable`) and
/// `<job>-<task>-<index>` pods annotated with the group and their task, scheduled by the job's
/// `schedulerName`.
fn expand_volcano(obj: &Value, shape: &WorkloadShape, stamps: &[Option<Stamp>]) -> Vec<Value> {
    let scheduler = obj.pointer("/spec/schedulerName").cloned().unwrap_or_else(|| json!("volcano"));
    let mut task_min = Map::new();
    let mut pods = Vec::new();
    for (i, (role, stamp)) in shape.roles.iter().zip(stamps).enumerate() {
        let min = obj
            .pointer(&format!("/spec/tasks/{i}/minAvailable"))
            .and_then(Value::as_u64)
            .unwrap_or(u64::from(role.pods));
        task_min.insert(role.name.clone(), json!(min));
        let Some(stamp) = stamp else { continue };
        let mut spec = stamp.spec.clone();
        if let Some(sp) = spec.as_object_mut() {
            sp.insert("schedulerName".into(), scheduler.clone());
        }
        for n in 0..role.pods {
            let mut metadata = Value::Object(stamp.metadata.clone());
            if let Some(m) = metadata.as_object_mut() {
                m.insert("name".into(), json!(format!("{}-{}-{n}", shape.name, role.name)));
                m.insert("namespace".into(), json!(shape.namespace));
            }
            if let Some(a) = map_at(&mut metadata, &["annotations"]) {
                a.insert(crate::dialect::volcano::ANNOTATION.into(), json!(shape.name));
                a.insert(crate::dialect::volcano::TASK_ANNOTATION.into(), json!(role.name));
            }
            let Value::Object(metadata) = metadata else { continue };
            pods.push(pod_of(metadata, spec.clone()));
        }
    }
    let mut out = vec![json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": shape.name, "namespace": shape.namespace,
                     "creationTimestamp": obj.pointer("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null)},
        "spec": {"minMember": shape.min_member, "minTaskMember": task_min,
                 "queue": obj.pointer("/spec/queue").cloned().unwrap_or_else(|| json!("default"))},
    })];
    out.extend(pods);
    out
}

/// The map at `keys` under `obj`, created (or made from a `null`) on the way: for the copies
/// [`expand`] writes out, never for the user's object.
fn map_at<'a>(obj: &'a mut Value, keys: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = obj;
    for k in keys {
        let map = cur.as_object_mut()?;
        let entry = map.entry(k.to_string()).or_insert_with(|| json!({}));
        if entry.is_null() {
            *entry = json!({});
        }
        cur = entry;
    }
    cur.as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pytorch() -> Value {
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "bert", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "m"}]}}},
                "Worker": {"replicas": 3, "template": {"metadata": {"annotations": {"kube-gang.io/min-member": "2"}},
                    "spec": {"schedulerName": "volcano", "containers": [{"name": "w"}]}}}}}})
    }

    #[test]
    fn pytorchjob_roles_sum_and_user_settings_win() {
        let shape = inspect(&pytorch()).unwrap().unwrap();
        assert_eq!(shape.min_member, 4);
        let out = inject(&pytorch()).unwrap();
        let master = out.pointer("/spec/pytorchReplicaSpecs/Master/template").unwrap();
        assert_eq!(master.pointer("/metadata/labels/kube-gang.io~1gang"), Some(&json!("bert")));
        assert_eq!(master.pointer("/metadata/labels/kube-gang.io~1subgroup"), Some(&json!("master")));
        assert_eq!(master.pointer("/metadata/annotations/kube-gang.io~1min-member"), Some(&json!("4")));
        assert_eq!(master.pointer("/spec/schedulerName"), Some(&json!("gang-scheduler")));
        let worker = out.pointer("/spec/pytorchReplicaSpecs/Worker/template").unwrap();
        assert_eq!(
            worker.pointer("/metadata/annotations/kube-gang.io~1min-member"),
            Some(&json!("2")),
            "never overwritten"
        );
        assert_eq!(
            worker.pointer("/spec/schedulerName"),
            Some(&json!("volcano")),
            "the user's scheduler stays"
        );
        assert_eq!(inject(&out).unwrap(), out, "a second pass is a no-op");
    }

    #[test]
    fn jobset_pods_name_their_child_job_and_carry_exclusive_topology() {
        let js = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"},
                "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "rack"}},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {"parallelism": 2,
                "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}}]}});
        let pods = expand(&js).unwrap();
        let jobs: Vec<&str> =
            pods.iter().map(|p| p["metadata"]["labels"][JOB_NAME].as_str().unwrap_or("")).collect();
        assert_eq!(jobs, ["js-w-0", "js-w-0", "js-w-1", "js-w-1"], "parallelism pods per child job");
        assert!(pods.iter().all(|p| p["metadata"]["annotations"][JOBSET_EXCLUSIVE_TOPOLOGY] == "rack"));
        let (claims, _) = crate::dialect::pod_claims_all(&pods[2]);
        assert_eq!(claims[0].subgroup.as_deref(), Some("js-w-1"), "the child job is the pod's group");
        let gang = crate::dialect::annotation_gang(&claims[0], &pods[2]).unwrap().unwrap();
        assert_eq!(gang.exclusive_topology.as_deref(), Some("rack"));
    }

    #[test]
    fn jobset_counts_replicas_times_parallelism() {
        let js = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
            "spec": {"replicatedJobs": [
                {"name": "driver", "template": {"spec": {"template": {"spec": {}}}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4, "template": {"spec": {}}}}}]}});
        let shape = inspect(&js).unwrap().unwrap();
        assert_eq!(shape.min_member, 9);
        let pods = expand(&js).unwrap();
        assert_eq!(pods.len(), 9);
        assert!(pods.iter().all(|p| p.pointer("/spec/schedulerName") == Some(&json!("gang-scheduler"))));
        assert_eq!(pods[0].pointer("/metadata/namespace"), Some(&json!("default")));
    }

    #[test]
    fn leaderworkerset_is_one_gang_per_group() {
        let lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "vllm"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4, "workerTemplate": {"spec": {}}}}});
        let shape = inspect(&lws).unwrap().unwrap();
        assert_eq!((shape.min_member, shape.groups), (4, 2));
        let pods = expand(&lws).unwrap();
        assert_eq!(pods.len(), 8);
        let groups: std::collections::BTreeSet<_> =
            pods.iter().map(|p| crate::dialect::pod_claims(p).unwrap()[0].gang.name.clone()).collect();
        assert_eq!(groups.into_iter().collect::<Vec<_>>(), vec!["vllm-0", "vllm-1"]);
    }

    #[test]
    fn bad_counts_name_the_field() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"parallelism": -2, "template": {"spec": {}}}});
        let errs = inspect(&job).unwrap().unwrap_err();
        assert_eq!(errs[0].path, "spec.parallelism");
        let missing = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"replicas": 3}});
        assert_eq!(inspect(&missing).unwrap().unwrap_err()[0].path, "spec.template");
    }

    #[test]
    fn a_template_that_names_its_gang_gets_no_second_one() {
        for markers in [
            json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "pg"}}, "spec": {}}),
            json!({"metadata": {"annotations": {"scheduling.k8s.io/group-name": "pg"}}, "spec": {}}),
            json!({"spec": {"schedulingGroup": {"podGroupName": "pg"}}}),
            json!({"metadata": {"annotations": {"pod-group-name": "pg"}}, "spec": {}}),
        ] {
            let job = json!({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "j", "labels": {"kube-gang.io/enabled": "true"}},
                "spec": {"parallelism": 2, "template": markers}});
            let out = inject(&job).unwrap();
            let t = out.pointer("/spec/template").unwrap();
            assert_eq!(t.pointer("/metadata/labels/kube-gang.io~1gang"), None, "{markers}");
            assert_eq!(t.pointer("/metadata/annotations/kube-gang.io~1min-member"), None, "{markers}");
            assert_eq!(t.pointer("/spec/schedulerName"), Some(&json!("gang-scheduler")), "{markers}");
            let pods = expand(&job).unwrap();
            assert!(pods.iter().all(|p| crate::dialect::pod_claims(p).unwrap().len() == 1), "{markers}");
        }
    }

    #[test]
    fn ray_counts_hosts_per_replica_and_rayjob_reads_its_cluster_spec() {
        let workers = json!([{"groupName": "tpu", "replicas": 2, "numOfHosts": 4, "template": {"spec": {}}}]);
        let rc = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
            "spec": {"headGroupSpec": {"template": {"spec": {}}}, "workerGroupSpecs": workers}});
        assert_eq!(inspect(&rc).unwrap().unwrap().min_member, 9);
        let job = json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r"},
            "spec": {"entrypoint": "python x.py", "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {}}},
                     "workerGroupSpecs": workers}}});
        assert_eq!(expand(&job).unwrap().len(), 9);
    }

    #[test]
    fn ray_beyond_the_worker_group_limit_is_one_error_at_the_list() {
        let groups = |n: usize| -> Value {
            (0..n)
                .map(|i| json!({"groupName": format!("g{i}"), "replicas": 1, "template": {"spec": {}}}))
                .collect()
        };
        let rc = |n| {
            json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
            "spec": {"headGroupSpec": {"template": {"spec": {}}}, "workerGroupSpecs": groups(n)}})
        };
        let shape = inspect(&rc(MAX_RAY_WORKER_GROUPS)).unwrap().unwrap();
        assert_eq!(shape.min_member as usize, 1 + MAX_RAY_WORKER_GROUPS);
        let errors = inspect(&rc(MAX_RAY_WORKER_GROUPS + 1)).unwrap().unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].path, "spec.workerGroupSpecs");
        assert!(errors[0].message.contains(&format!("has {} worker groups", MAX_RAY_WORKER_GROUPS + 1)));
        let job = json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r"},
            "spec": {"rayClusterSpec": {"headGroupSpec": {"template": {"spec": {}}}, "workerGroupSpecs": groups(1000)}}});
        let errors = inspect(&job).unwrap().unwrap_err();
        assert_eq!(errors[0].path, "spec.rayClusterSpec.workerGroupSpecs");
    }

    #[test]
    fn a_volcano_job_expands_as_its_controller_does() {
        let vj = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "tf", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
            "spec": {"tasks": [
                {"name": "ps", "replicas": 1, "template": {"spec": {}}},
                {"name": "worker", "replicas": 3, "minAvailable": 2, "template": {"spec": {}}}]}});
        assert_eq!(inspect(&vj).unwrap().unwrap().min_member, 3, "sum of task minAvailable");
        let out = expand(&vj).unwrap();
        assert_eq!(out.len(), 5);
        assert_eq!(out[0]["kind"], "PodGroup");
        assert_eq!(out[0].pointer("/spec/minTaskMember/worker"), Some(&json!(2)));
        let pod = &out[4];
        assert_eq!(pod.pointer("/metadata/name"), Some(&json!("tf-worker-2")));
        assert_eq!(pod.pointer("/spec/schedulerName"), Some(&json!("gang-scheduler")), "opted in");
        let claims = crate::dialect::pod_claims(pod).unwrap();
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].subgroup.as_deref(), Some("worker"));
    }

    #[test]
    fn deployments_are_gangs_only_when_asked() {
        let d = |labels: Value| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": labels},
                "spec": {"replicas": 3, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {}}}})
        };
        assert!(inspect(&d(json!({}))).is_none());
        assert_eq!(inspect(&d(json!({"kube-gang.io/enabled": "true"}))).unwrap().unwrap().min_member, 3);
    }

    #[test]
    fn opt_in_on_object_or_namespace() {
        let labelled = json!({"metadata": {"labels": {"kube-gang.io/enabled": "true"}}});
        let plain = json!({"metadata": {}});
        let off = json!({"metadata": {"labels": {"kube-gang.io/enabled": "false"}}});
        let ns: BTreeMap<String, String> = [(LABEL_ENABLED.to_string(), "true".to_string())].into();
        assert!(is_opted_in(&labelled, None));
        assert!(!is_opted_in(&plain, None));
        assert!(is_opted_in(&plain, Some(&ns)));
        assert!(!is_opted_in(&off, Some(&ns)), "the object's own label wins");
    }

    #[test]
    fn pods_claiming_a_gang_get_our_scheduler() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"kube-gang.io/gang": "g"}},
            "spec": {"schedulerName": "default-scheduler"}});
        assert_eq!(inject(&pod).unwrap().pointer("/spec/schedulerName"), Some(&json!("gang-scheduler")));
        let other = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
        assert_eq!(inject(&other).unwrap(), other);
    }
}
