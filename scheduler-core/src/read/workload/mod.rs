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

use crate::read::error::FieldError;
use crate::read::labels::*;
use crate::read::object::At;

use crate::read::labels::{
    JOB_NAME, JOBSET_EXCLUSIVE_TOPOLOGY, JOBSET_JOB_INDEX, JOBSET_NAME, JOBSET_REPLICATED_JOB,
};
pub use crate::read::labels::{LWS_GROUP_INDEX, LWS_NAME};
pub mod appwrapper;
mod create;
mod expand;
pub mod grove;
mod inject;
pub mod lws;
mod names;
mod staged;
pub mod trainer;

pub use create::pod_created;
pub use expand::*;
pub use inject::*;
pub use names::*;
pub use staged::*;

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

/// A kind of workload the webhook injects gangs into, and every fact about it the front doors
/// and the manifests need. [`inspect`] reads exactly these kinds (a test holds it to the table),
/// and `tests/tests/manifests.rs` holds the webhook's workload hooks to it.
#[derive(Debug)]
pub struct WorkloadKind {
    pub group: &'static str,
    pub kind: &'static str,
    /// The resource name (webhook rules).
    pub plural: &'static str,
    /// The versions the hooks see: `v1` for Kubernetes' own kinds, every version (`*`) for a
    /// project's CRD (empty here).
    pub versions: &'static [&'static str],
    /// The label its controller writes the workload's name in on every pod it creates (what a
    /// gang injected as `kube-gang.io/gang-from` is named from); `None`: it writes none.
    pub name_label: Option<&'static str>,
    /// Whether a namespace's `kube-gang.io/enabled` opts it in (Deployments and ReplicaSets opt
    /// in by their own label only).
    pub namespace_opt_in: bool,
    /// Whether its updates are admitted too (on top of creation): every kind's, by the validating
    /// hooks; only a Job's by the mutating ones (Kueue's partial admission changes its
    /// parallelism while suspended).
    pub mutate_update: bool,
}

const fn kind(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    name_label: Option<&'static str>,
) -> WorkloadKind {
    WorkloadKind {
        group,
        kind,
        plural,
        versions: &[],
        name_label,
        namespace_opt_in: true,
        mutate_update: false,
    }
}

/// Every workload kind, in one table: [`controller_name_label`] and [`is_opted_in`] answer from
/// it; a test holds the kinds [`inspect`] reads, and the webhook configurations' workload rules,
/// to it.
pub const KINDS: &[WorkloadKind] = &[
    WorkloadKind { versions: &["v1"], mutate_update: true, ..kind("batch", "Job", "jobs", Some(JOB_NAME)) },
    WorkloadKind { versions: &["v1"], ..kind("apps", "StatefulSet", "statefulsets", None) },
    WorkloadKind {
        versions: &["v1"],
        namespace_opt_in: false,
        ..kind("apps", "Deployment", "deployments", None)
    },
    WorkloadKind {
        versions: &["v1"],
        namespace_opt_in: false,
        ..kind("apps", "ReplicaSet", "replicasets", None)
    },
    kind("jobset.x-k8s.io", "JobSet", "jobsets", Some(JOBSET_NAME)),
    kind("batch.volcano.sh", "Job", "jobs", None),
    kind("kubeflow.org", "PyTorchJob", "pytorchjobs", Some(crate::read::labels::KUBEFLOW_JOB_NAME)),
    kind("kubeflow.org", "MPIJob", "mpijobs", Some(crate::read::labels::KUBEFLOW_JOB_NAME)),
    kind("kubeflow.org", "TFJob", "tfjobs", Some(crate::read::labels::KUBEFLOW_JOB_NAME)),
    kind("kubeflow.org", "XGBoostJob", "xgboostjobs", Some(crate::read::labels::KUBEFLOW_JOB_NAME)),
    kind("kubeflow.org", "PaddleJob", "paddlejobs", Some(crate::read::labels::KUBEFLOW_JOB_NAME)),
    kind("kubeflow.org", "JAXJob", "jaxjobs", Some(crate::read::labels::KUBEFLOW_JOB_NAME)),
    kind("leaderworkerset.x-k8s.io", "LeaderWorkerSet", "leaderworkersets", Some(LWS_NAME)),
    kind("workload.codeflare.dev", "AppWrapper", "appwrappers", Some(crate::read::labels::APPWRAPPER_NAME)),
    kind("ray.io", "RayCluster", "rayclusters", Some(crate::read::labels::RAY_CLUSTER)),
    kind("ray.io", "RayJob", "rayjobs", None),
];

/// The row of [`KINDS`] for `group`/`kind`.
pub fn workload_kind(group: &str, kind: &str) -> Option<&'static WorkloadKind> {
    KINDS.iter().find(|k| k.group == group && k.kind == kind)
}

/// A `batch/v1` Job's `spec.scheduling` (Kubernetes 1.37, `WorkloadWithJob`), when it has one:
/// its controller compiles it into a `scheduling.k8s.io` PodGroup its pods name
/// (`spec.schedulingGroup`), so the Job's gang — or, with the `basic` policy, its pod-by-pod
/// scheduling — is upstream's, never a second one of ours (KEP-5547).
pub fn job_scheduling(obj: &Value) -> Option<&Value> {
    let job = obj.get("apiVersion").and_then(Value::as_str) == Some("batch/v1")
        && obj.get("kind").and_then(Value::as_str) == Some("Job");
    obj.at("/spec/scheduling").filter(|s| job && !s.is_null())
}

/// True when the object (or, when given, its namespace) carries `kube-gang.io/enabled: "true"`.
/// A Deployment or ReplicaSet opts in only by its own label: a namespace's opt-in does not make
/// every Deployment in it a gang (the namespace hooks of `manifests/` do not see them).
pub fn is_opted_in(obj: &Value, namespace_labels: Option<&BTreeMap<String, String>>) -> bool {
    let on_object = obj.at("/metadata/labels").and_then(|l| l.get(LABEL_ENABLED)).and_then(Value::as_str);
    let group = crate::read::dialect::group_of(obj.get("apiVersion").and_then(Value::as_str).unwrap_or(""));
    let own_label_only = obj
        .get("kind")
        .and_then(Value::as_str)
        .and_then(|k| workload_kind(group, k))
        .is_some_and(|k| !k.namespace_opt_in);
    match on_object {
        Some(v) => v == "true",
        None if own_label_only => false,
        None => namespace_labels.and_then(|l| l.get(LABEL_ENABLED)).is_some_and(|v| v == "true"),
    }
}

/// True when `obj` is a workload kind this module knows.
pub fn is_workload(obj: &Value) -> bool {
    inspect(obj).is_some()
}

fn int_at(obj: &Value, ptr: &str, default: i64, errors: &mut Vec<FieldError>) -> u32 {
    match obj.at(ptr) {
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

/// What a Kubeflow job asks of its gang's minimum, as its operator makes the gang:
/// `spec.runPolicy.schedulingPolicy.minAvailable` (training-operator's and mpi-operator's
/// PodGroup `minMember`, counting every pod, else all replicas), else, on a PyTorchJob,
/// `spec.elasticPolicy.minReplicas` — the workers an elastic job starts with (training-operator
/// scales `Worker.replicas` by it) — plus its Master, which must run too. `None` when neither is
/// set; an error at the field when it is below 1 or above the `total` pods the job runs (a gang
/// that could never be satisfied).
fn kubeflow_min_available(
    obj: &Value,
    kind: &str,
    roles: &[Role],
    total: u32,
    errors: &mut Vec<FieldError>,
) -> Option<u32> {
    let asked = [
        Some("/spec/runPolicy/schedulingPolicy/minAvailable"),
        (kind == "PyTorchJob").then_some("/spec/elasticPolicy/minReplicas"),
    ];
    let (ptr, v) =
        asked.into_iter().flatten().find_map(|p| Some((p, obj.at(p).filter(|v| !v.is_null())?)))?;
    match v.as_i64() {
        Some(n) if n < 1 => {
            errors.push(FieldError::new(path_of(ptr), format!("{n}: must be at least 1")));
            None
        }
        Some(n) if n > i64::from(total) => {
            errors.push(FieldError::new(
                path_of(ptr),
                format!("{n} exceeds the {total} pods the {kind} runs: the gang can never be satisfied"),
            ));
            None
        }
        Some(n) if ptr.starts_with("/spec/elasticPolicy") => {
            let masters: u32 = roles.iter().filter(|r| r.name == "master").map(|r| r.pods).sum();
            let workers: u32 = roles.iter().filter(|r| r.name == "worker").map(|r| r.pods).sum();
            if n > i64::from(workers) {
                errors.push(FieldError::new(
                    path_of(ptr),
                    format!(
                        "{n} exceeds the {workers} workers the {kind} runs: the gang can never be satisfied"
                    ),
                ));
                return None;
            }
            u32::try_from(n).ok().map(|n| n.saturating_add(masters).min(total))
        }
        Some(n) => u32::try_from(n).ok(),
        None => {
            errors.push(FieldError::new(path_of(ptr), format!("must be an integer, got {v}")));
            None
        }
    }
}

/// With in-tree autoscaling on (`enableInTreeAutoscaling`), the pods a RayCluster needs at once:
/// its head and each worker group's `minReplicas` × `numOfHosts` (suspended groups none), as
/// KubeRay's Volcano integration makes the gang (`CalculateMinReplicas` + 1) — the autoscaler
/// adds the rest as they are asked for. `None` without autoscaling. Counts were checked by the
/// caller.
fn ray_autoscaling_min(obj: &Value, kind: &str) -> Option<u32> {
    let base = if kind == "RayJob" { "/spec/rayClusterSpec" } else { "/spec" };
    if obj.at(&format!("{base}/enableInTreeAutoscaling")).and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let workers =
        obj.at(&format!("{base}/workerGroupSpecs")).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let count = |w: &Value, f: &str, default: u64| w.get(f).and_then(Value::as_u64).unwrap_or(default);
    let pods = workers
        .iter()
        .filter(|w| w.get("suspend").and_then(Value::as_bool) != Some(true))
        .map(|w| count(w, "minReplicas", 0).saturating_mul(count(w, "numOfHosts", 1)))
        .fold(1u64, u64::saturating_add);
    Some(u32::try_from(pods).unwrap_or(MAX_PODS))
}

/// Whether a RayJob runs on an existing RayCluster: a non-empty `spec.clusterSelector`, which
/// KubeRay follows whatever `spec.rayClusterSpec` says. KubeRay then creates no cluster pods for
/// it, so it has no gang of its own — the selected cluster's pods are that cluster's.
pub fn ray_job_selects_cluster(obj: &Value) -> bool {
    obj.at("/spec/clusterSelector").and_then(Value::as_object).is_some_and(|m| !m.is_empty())
}

/// What a RayCluster's or RayJob's KubeRay batch-scheduling labels ask that a kube-gang gang
/// does not take, naming the label: `ray.io/priority-class-name` (KubeRay gives it to the
/// PodGroup of its Volcano integration; a gang's priority is its pods'). `ray.io/gang-scheduling-
/// enabled` asks KubeRay's own integrations for a gang and needs nothing here: an opted-in
/// cluster is a gang with or without it.
pub fn ray_warnings(obj: &Value) -> Vec<String> {
    let is_ray = is_ray(obj);
    let label = obj
        .at("/metadata/labels")
        .and_then(|l| l.get(crate::read::labels::RAY_PRIORITY_CLASS))
        .and_then(Value::as_str)
        .filter(|v| is_ray && !v.is_empty());
    label
        .map(|class| {
            format!(
                "metadata.labels[{}]: {class:?} is not used: KubeRay gives this class to the PodGroup of its Volcano integration; a kube-gang gang's priority is its pods' (set priorityClassName in headGroupSpec.template and each workerGroupSpecs[].template)",
                crate::read::labels::RAY_PRIORITY_CLASS
            )
        })
        .into_iter()
        .collect()
}

/// Whether `obj` is KubeRay's (`ray.io`).
fn is_ray(obj: &Value) -> bool {
    obj.get("apiVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| crate::read::object::group_of(v) == "ray.io")
}

/// For a RayCluster or RayJob not opted in by its own label: KubeRay's
/// `ray.io/gang-scheduling-enabled` asks KubeRay's batch-scheduler integrations for a gang, not
/// kube-gang — said, since a user may take it for the opt-in.
pub fn ray_gang_label_warning(obj: &Value) -> Option<String> {
    let key = crate::read::labels::RAY_GANG_SCHEDULING;
    let is_ray = is_ray(obj);
    (is_ray && obj.at("/metadata/labels").and_then(|l| l.get(key)).is_some()).then(|| {
        format!(
            "metadata.labels[{key}]: asks KubeRay's own batch-scheduler integration for a gang; kube-gang makes this cluster a gang only when it is labelled {}: \"true\" (or its namespace is)",
            crate::read::labels::LABEL_ENABLED
        )
    })
}

/// What a Kubeflow job's `spec.runPolicy.schedulingPolicy` asks beyond `minAvailable` that
/// kube-gang does not evaluate, naming each field (the operators copy them into the PodGroup they
/// make for Volcano or the coscheduling plugin). For `validate`, `simulate` and the webhook.
pub fn kubeflow_warnings(obj: &Value) -> Vec<String> {
    let is_kubeflow = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| crate::read::object::group_of(v) == "kubeflow.org");
    let mut out = Vec::new();
    // PaddleJob's elastic policy scales it between bounds; no operator makes it a gang minimum.
    if is_kubeflow
        && obj.get("kind").and_then(Value::as_str) == Some("PaddleJob")
        && obj.at("/spec/elasticPolicy/minReplicas").is_some_and(|v| !v.is_null())
    {
        out.push(
            "spec.elasticPolicy.minReplicas: not evaluated: a PaddleJob's gang is all its replicas (or spec.runPolicy.schedulingPolicy.minAvailable, or kube-gang.io/min-member)"
                .to_string(),
        );
    }
    let Some(policy) = obj.at("/spec/runPolicy/schedulingPolicy").filter(|_| is_kubeflow) else {
        return out;
    };
    let said = [
        ("priorityClass", "the gang's priority is its pods' (their priorityClassName)"),
        ("queue", "kube-gang has no queues (Kueue's kueue.x-k8s.io/queue-name label admits a job)"),
        ("minResources", "the gang waits for room for its members' own requests"),
        (
            "scheduleTimeoutSeconds",
            "set the kube-gang.io/timeout annotation on the pod templates for a gang timeout",
        ),
    ];
    out.extend(
        said.iter()
            .filter(|(field, _)| policy.get(field).is_some_and(|v| !v.is_null()))
            .map(|(field, why)| format!("spec.runPolicy.schedulingPolicy.{field}: not evaluated: {why}")),
    );
    out
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

/// The tasks an opted-in Volcano Job may have: each task is a subgroup of its gang (its
/// `minTaskMember`), so as many as a gang has subgroups. Volcano sets no limit; past this one the
/// job is refused with one error, before any task is read (a 3 MiB job of 20,000 tasks cost
/// 67 ms of admission, and its gang could never be scheduled).
pub const MAX_VOLCANO_TASKS: usize = MAX_JOBSET_ROLES;

/// The gang shape of a workload. `None`: not a workload kind we know.
pub fn inspect(obj: &Value) -> Option<Result<WorkloadShape, Vec<FieldError>>> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str)?;
    let kind = obj.get("kind").and_then(Value::as_str)?;
    let group = crate::read::dialect::group_of(api_version);
    let mut errors = Vec::new();
    let mut roles = Vec::new();
    let mut group_size = None;
    let mut groups = 1;
    match (group, kind) {
        ("batch", "Job") => {
            let pods = job_pods_at_once(obj, "/spec", &mut errors);
            roles.push(Role { name: String::new(), pods, template: "/spec/template".into() });
        }
        ("apps", "StatefulSet") => {
            let pods = int_at(obj, "/spec/replicas", 1, &mut errors);
            roles.push(Role { name: String::new(), pods, template: "/spec/template".into() });
        }
        ("jobset.x-k8s.io", "JobSet") => {
            // Borrowed, never cloned: a JobSet may hold thousands of jobs (issue 16).
            let jobs = obj.at("/spec/replicatedJobs").and_then(Value::as_array).map_or(0, Vec::len);
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
                let name = obj.at(&format!("{base}/name")).and_then(Value::as_str).unwrap_or("").to_string();
                let replicas = int_at(obj, &format!("{base}/replicas"), 1, &mut errors);
                // Each child Job runs min(parallelism, completions) pods at once, as a Job does.
                let per_job = job_pods_at_once(obj, &format!("{base}/template/spec"), &mut errors);
                let pods = checked_pods(
                    replicas.checked_mul(per_job),
                    &format!("{base}/replicas"),
                    "replicas × min(parallelism, completions)",
                    &mut errors,
                );
                roles.push(Role { name, pods, template: format!("{base}/template/spec/template") });
            }
        }
        ("kubeflow.org", "PyTorchJob" | "MPIJob" | "TFJob" | "XGBoostJob" | "PaddleJob" | "JAXJob") => {
            let (field, known) = kubeflow_replica_types(kind);
            let specs = obj.at(&format!("/spec/{field}")).and_then(Value::as_object);
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
            lws::check(obj, groups, size, &mut errors);
            group_size = Some(size);
            if obj.at("/spec/leaderWorkerTemplate/leaderTemplate").is_some_and(|t| !t.is_null()) {
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
        ("ray.io", "RayJob") if ray_job_selects_cluster(obj) => return None,
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
                .at(&format!("{base}/workerGroupSpecs"))
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
                let pods = ray_group_pods(obj, &at, &name, &mut errors);
                roles.push(Role { name, pods, template: format!("{at}/template") });
            }
        }
        ("batch.volcano.sh", "Job") => {
            let tasks: &[Value] = obj.at("/spec/tasks").and_then(Value::as_array).map_or(&[], Vec::as_slice);
            if tasks.len() > MAX_VOLCANO_TASKS {
                return Some(Err(vec![FieldError::new(
                    "spec.tasks",
                    format!("has {} tasks; a gang spans at most {MAX_VOLCANO_TASKS}", tasks.len()),
                )]));
            }
            for (i, t) in tasks.iter().enumerate() {
                let name = t.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                let pods = int_at(obj, &format!("/spec/tasks/{i}/replicas"), 0, &mut errors);
                roles.push(Role { name, pods, template: format!("/spec/tasks/{i}/template") });
            }
        }
        ("workload.codeflare.dev", "AppWrapper") => {
            let namespace = obj.at("/metadata/namespace").and_then(Value::as_str).filter(|n| !n.is_empty());
            appwrapper::roles(obj, namespace.unwrap_or("default"), &mut roles, &mut errors);
        }
        ("apps", "Deployment" | "ReplicaSet") => {
            // Only a gang when asked: opted in, or its pods already name a gang (the coscheduling
            // docs' own example is a Deployment labelled with its PodGroup).
            let names_gang =
                obj.at("/spec/template").is_some_and(|t| !template_claims(t, "default").is_empty());
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
        if !obj.at(&r.template).is_some_and(Value::is_object) {
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
        volcano_dag(obj, &roles, &mut errors);
        volcano_templates(obj, &roles, namespace, &mut errors);
        volcano_policies(obj.at("/spec/policies"), "spec.policies", &mut errors);
        for i in 0..roles.len() {
            volcano_policies(
                obj.at(&format!("/spec/tasks/{i}/policies")),
                &format!("spec.tasks[{i}].policies"),
                &mut errors,
            );
        }
    }
    // The pods the workload runs at once: what a minimum it asks for may not exceed.
    let at_once = min_member;
    if group == "kubeflow.org"
        && let Some(n) = kubeflow_min_available(obj, kind, &roles, min_member, &mut errors)
    {
        min_member = n;
    }
    if group == "ray.io"
        && let Some(n) = ray_autoscaling_min(obj, kind)
    {
        min_member = n.min(min_member);
    }
    // The workload may ask for less than all of its pods (an elastic gang): its own
    // `kube-gang.io/min-member` annotation wins over the derived minimum; on a Job or a JobSet,
    // KAI's `kai.scheduler/batch-min-member` says the same where ours is absent (what a workload
    // written for KAI's pod grouper asks; its value read as KAI reads it, a base-10 integer).
    let annotations = meta.and_then(|m| m.at("/annotations"));
    let kai = matches!((group, kind), ("batch", "Job") | ("jobset.x-k8s.io", "JobSet"));
    let asked = annotations.and_then(|a| {
        a.get(ANNOTATION_MIN_MEMBER).map(|v| (ANNOTATION_MIN_MEMBER, v)).or_else(|| {
            a.get(crate::read::labels::KAI_BATCH_MIN_MEMBER)
                .filter(|_| kai)
                .map(|v| (crate::read::labels::KAI_BATCH_MIN_MEMBER, v))
        })
    });
    if let Some((key, v)) = asked {
        let field = format!("metadata.annotations[{key}]");
        match v.as_str().map(|s| s.trim().parse::<u32>()) {
            Some(Ok(0)) => errors.push(FieldError::new(field, "must be at least 1")),
            Some(Ok(n)) if n > at_once => errors.push(FieldError::new(
                field,
                format!(
                    "{n} exceeds the {at_once} pods the {kind} runs at once: the gang can never be satisfied"
                ),
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
/// ([`crate::read::convert::metadata_errors`]), each named.
pub fn metadata_errors(obj: &Value) -> Vec<FieldError> {
    let mut out = crate::read::convert::metadata_errors(obj.get("metadata"), "");
    if let Some(Ok(shape)) = inspect(obj) {
        for role in &shape.roles {
            let meta = obj.at(&role.template).and_then(|t| t.get("metadata"));
            out.extend(crate::read::convert::metadata_errors(meta, &path_of(&role.template)));
        }
    }
    out
}

/// The gang claims a pod stamped from `template` would make (any dialect). Errors count as no claim:
/// validation reports them on the pod.
pub fn template_claims(template: &Value, namespace: &str) -> Vec<crate::read::dialect::Claim> {
    let (claims, errors) = crate::read::dialect::template_claims_all(template, namespace);
    if errors.is_empty() { claims } else { Vec::new() }
}

/// The pod `template` makes, built as a pod: its metadata copied (in `namespace`), and of its spec
/// the fields that name an upstream gang. The reference the borrowed readers
/// ([`crate::read::dialect::template_claims_all`], which copy nothing) are held equal to.
#[cfg(test)]
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
    // The subgroups the Job's gang will have: a task each, and a partitioned task's partitions.
    let mut subgroups = roles.len();
    for (i, r) in roles.iter().enumerate() {
        if let Err(e) = crate::read::dialect::check_dns_label(&r.name) {
            errors.push(FieldError::new(format!("spec.tasks[{i}].name"), e));
        }
        if !seen.insert(r.name.as_str()) {
            errors.push(FieldError::new(
                format!("spec.tasks[{i}].name"),
                format!("duplicate task name {:?}", r.name),
            ));
        }
        let partitioned = volcano_partition(obj, i, r.pods, errors);
        subgroups = subgroups.saturating_add(partitioned.map_or(0, |p| p.total as usize));
        let default_min = partitioned.map_or(r.pods, |p| p.task_min(r.pods));
        let task_min = int_at(obj, &format!("/spec/tasks/{i}/minAvailable"), i64::from(default_min), errors);
        if let Some(p) = partitioned
            && p.min > 0
            && obj.at(&format!("/spec/tasks/{i}/minAvailable")).is_some_and(|v| !v.is_null())
            && u64::from(task_min) != u64::from(p.min) * u64::from(p.size)
        {
            errors.push(FieldError::new(
                format!("spec.tasks[{i}].minAvailable"),
                format!(
                    "{task_min} is not partitionPolicy.minPartitions × partitionSize ({} × {}): Volcano refuses the job",
                    p.min, p.size
                ),
            ));
        }
        if task_min > r.pods {
            errors.push(FieldError::new(
                format!("spec.tasks[{i}].minAvailable"),
                format!("{task_min} is greater than the task's {} replicas", r.pods),
            ));
        }
        sum_min = sum_min.saturating_add(task_min);
    }
    if subgroups > crate::read::tree::MAX_SUBGROUPS {
        errors.push(FieldError::new(
            "spec.tasks",
            format!(
                "the tasks and their partitions make {subgroups} subgroups; a gang has at most {}",
                crate::read::tree::MAX_SUBGROUPS
            ),
        ));
    }
    match obj.at("/spec/minAvailable") {
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

/// A Volcano Job task's `partitionPolicy`: its pods in `total` partitions of `size` (the
/// controller labels pod `i` with partition `i / size`), of which `min` must be ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VolcanoPartition {
    pub total: u32,
    pub size: u32,
    pub min: u32,
}

impl VolcanoPartition {
    /// The task's `minAvailable` when it states none, as Volcano's job mutating webhook sets it:
    /// `minPartitions × partitionSize` when `minPartitions` is above 0, else every replica.
    pub fn task_min(self, replicas: u32) -> u32 {
        if self.min > 0 { self.min.saturating_mul(self.size) } else { replicas }
    }
}

/// Task `i`'s `partitionPolicy`, held to Volcano's job admission rules
/// (`validatePartitionPolicy`): `totalPartitions` and `partitionSize` above 0, their product the
/// task's `replicas` (`pods`), `minPartitions` not negative and within `totalPartitions`, and
/// not both `highestTierAllowed` and `highestTierName` in its `networkTopology`. `None` without
/// one, or when it breaks a rule (the error names the field).
pub fn volcano_partition(
    obj: &Value,
    i: usize,
    pods: u32,
    errors: &mut Vec<FieldError>,
) -> Option<VolcanoPartition> {
    let at = format!("/spec/tasks/{i}/partitionPolicy");
    let policy = obj.at(&at).filter(|v| !v.is_null())?;
    let before = errors.len();
    let path = format!("spec.tasks[{i}].partitionPolicy");
    let field = |name: &str, errors: &mut Vec<FieldError>| -> i64 {
        match policy.get(name) {
            None | Some(Value::Null) => 0,
            Some(v) => match v.as_i64().filter(|n| i32::try_from(*n).is_ok()) {
                Some(n) => n,
                None => {
                    errors.push(FieldError::new(
                        format!("{path}.{name}"),
                        format!("{v} is not a 32-bit integer"),
                    ));
                    0
                }
            },
        }
    };
    let total = field("totalPartitions", errors);
    let size = field("partitionSize", errors);
    let min = field("minPartitions", errors);
    if errors.len() > before {
        return None;
    }
    if total <= 0 {
        errors.push(FieldError::new(
            format!("{path}.totalPartitions"),
            format!("must be greater than 0, got {total}"),
        ));
    } else if size <= 0 {
        errors.push(FieldError::new(
            format!("{path}.partitionSize"),
            format!("must be greater than 0, got {size}"),
        ));
    } else if total.saturating_mul(size) != i64::from(pods) {
        errors.push(FieldError::new(
            format!("spec.tasks[{i}].replicas"),
            format!("{pods} is not partitionPolicy.totalPartitions × partitionSize ({total} × {size}): Volcano refuses the job"),
        ));
    }
    if min < 0 {
        errors.push(FieldError::new(
            format!("{path}.minPartitions"),
            format!("must not be negative, got {min}"),
        ));
    } else if min > total {
        errors.push(FieldError::new(
            format!("{path}.minPartitions"),
            format!("{min} is greater than totalPartitions {total}: the task can never start"),
        ));
    }
    let topology = policy.get("networkTopology");
    let named = topology
        .and_then(|t| t.get("highestTierName"))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if named && topology.and_then(|t| t.get("highestTierAllowed")).is_some_and(|v| !v.is_null()) {
        errors.push(FieldError::new(
            format!("{path}.networkTopology"),
            "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously",
        ));
    }
    if errors.len() > before {
        return None;
    }
    let n = |v: i64| u32::try_from(v).unwrap_or(0);
    Some(VolcanoPartition { total: n(total), size: n(size), min: n(min) })
}

/// Volcano's DAG rule for `dependsOn`: every task a task depends on exists and the dependencies
/// form no cycle, or Volcano's job admission refuses the job ("job has dependencies between tasks,
/// but doesn't form a directed acyclic graph(DAG)": `pkg/webhooks/admission/jobs/validate`
/// `topoSort`, which counts a name that is no task, and a task naming itself, as breaking it).
/// Tasks are at most [`MAX_VOLCANO_TASKS`], so the check is cheap; it is Kahn's algorithm, as
/// Volcano's.
fn volcano_dag(obj: &Value, roles: &[Role], errors: &mut Vec<FieldError>) {
    let index: BTreeMap<&str, usize> = roles.iter().enumerate().map(|(i, r)| (r.name.as_str(), i)).collect();
    let mut needs = vec![0usize; roles.len()];
    let mut unblocks: Vec<Vec<usize>> = vec![Vec::new(); roles.len()];
    let mut any = false;
    for (i, need) in needs.iter_mut().enumerate() {
        let names = obj.at(&format!("/spec/tasks/{i}/dependsOn/name")).and_then(Value::as_array);
        for (k, name) in names.into_iter().flatten().enumerate() {
            any = true;
            match name.as_str().and_then(|n| index.get(n)) {
                Some(&j) => {
                    *need += 1;
                    unblocks[j].push(i);
                }
                None => errors.push(FieldError::new(
                    format!("spec.tasks[{i}].dependsOn.name[{k}]"),
                    format!(
                        "{name} is not a task of this job: Volcano refuses a job whose task dependencies do not form a directed acyclic graph (DAG)"
                    ),
                )),
            }
        }
    }
    if !any {
        return;
    }
    let mut ready: Vec<usize> = (0..roles.len()).filter(|&i| needs[i] == 0).collect();
    while let Some(j) = ready.pop() {
        for &i in &unblocks[j] {
            needs[i] -= 1;
            if needs[i] == 0 {
                ready.push(i);
            }
        }
    }
    let stuck: Vec<usize> = (0..roles.len()).filter(|&i| needs[i] > 0).collect();
    if let Some(&first) = stuck.first() {
        let names: Vec<String> = stuck.iter().map(|&i| format!("{:?}", roles[i].name)).collect();
        errors.push(FieldError::new(
            format!("spec.tasks[{first}].dependsOn"),
            format!(
                "tasks {} wait on each other in a cycle, so none of them is ever created: Volcano refuses a job whose task dependencies do not form a directed acyclic graph (DAG)",
                names.join(", ")
            ),
        ));
    }
}

/// The lifecycle-policy events a Volcano Job may name, and the actions it may take on them
/// (Volcano's job admission, `pkg/webhooks/admission/jobs/validate`: the events and actions it
/// allows for external use; the others are its controller's own).
const VOLCANO_EVENTS: &[&str] =
    &["*", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated"];
const VOLCANO_ACTIONS: &[&str] =
    &["AbortJob", "RestartJob", "RestartTask", "TerminateJob", "CompleteJob", "ResumeJob"];

/// Volcano's rules for one list of lifecycle policies (a Job's `spec.policies` or a task's), as its
/// job admission refuses them: a policy names events (`event`, `events`) or an `exitCode`, not
/// both and not neither; events and actions are ones it allows; no event is handled by two
/// policies of the list; `*` stands alone; an exit code is not 0 and not handled twice. As
/// Volcano does, a list is judged up to its first policy in error, so what is said of a list stays
/// a few lines however long it is (each check is a set lookup).
fn volcano_policies(list: Option<&Value>, at: &str, errors: &mut Vec<FieldError>) {
    let policies = match list {
        None | Some(Value::Null) => return,
        Some(Value::Array(p)) => p,
        Some(v) => {
            errors.push(FieldError::new(at, format!("must be a list of policies, got {v}")));
            return;
        }
    };
    let mut events: BTreeMap<&str, usize> = BTreeMap::new();
    let mut codes: BTreeMap<i64, usize> = BTreeMap::new();
    let before = errors.len();
    // Paths are spelled only for what is refused: a valid list of 60,000 policies costs lookups.
    let mut named: Vec<(&str, Option<usize>)> = Vec::new();
    for (i, policy) in policies.iter().enumerate() {
        if errors.len() > before {
            return;
        }
        let here = |field: &str| format!("{at}[{i}]{field}");
        let event_path = |k: Option<usize>| match k {
            None => here(".event"),
            Some(k) => here(&format!(".events[{k}]")),
        };
        named.clear();
        match policy.get("event") {
            None | Some(Value::Null) => {}
            Some(Value::String(e)) if e.is_empty() => {}
            Some(Value::String(e)) => named.push((e, None)),
            Some(v) => errors.push(FieldError::new(here(".event"), format!("must be a string, got {v}"))),
        }
        match policy.get("events") {
            None | Some(Value::Null) => {}
            Some(Value::Array(list)) => {
                for (k, e) in list.iter().enumerate() {
                    match e.as_str() {
                        Some(e) => named.push((e, Some(k))),
                        None => {
                            errors.push(FieldError::new(
                                event_path(Some(k)),
                                format!("must be a string, got {e}"),
                            ));
                            break;
                        }
                    }
                }
            }
            Some(v) => errors.push(FieldError::new(here(".events"), format!("must be a list, got {v}"))),
        }
        if errors.len() > before {
            return;
        }
        let code = policy.get("exitCode").filter(|v| !v.is_null());
        match (named.is_empty(), code) {
            (false, Some(_)) => {
                errors.push(FieldError::new(
                    here(".exitCode"),
                    "a policy names events or an exit code, not both: Volcano refuses the job",
                ));
                continue;
            }
            (true, None) => {
                errors.push(FieldError::new(
                    here(""),
                    "names neither an event nor an exit code: Volcano refuses the job",
                ));
                continue;
            }
            (true, Some(v)) => {
                match v.as_i64().filter(|c| i32::try_from(*c).is_ok()) {
                    Some(0) => errors.push(FieldError::new(
                        here(".exitCode"),
                        "0 is not an error code: Volcano refuses the job",
                    )),
                    Some(c) => {
                        if let Some(first) = codes.insert(c, i) {
                            errors.push(FieldError::new(
                                here(".exitCode"),
                                format!("exit code {c} is handled by {at}[{first}] already: Volcano refuses the job"),
                            ));
                        }
                    }
                    None => errors.push(FieldError::new(
                        here(".exitCode"),
                        format!("must be a 32-bit integer, got {v}"),
                    )),
                }
                continue;
            }
            (false, None) => {}
        }
        let action = policy.get("action").and_then(Value::as_str).unwrap_or("");
        if !VOLCANO_ACTIONS.contains(&action) {
            errors.push(FieldError::new(
                here(".action"),
                format!(
                    "{action:?} is not an action a policy may take: Volcano allows {}",
                    VOLCANO_ACTIONS.join(", ")
                ),
            ));
        }
        // One policy may name an event twice (Volcano counts it once); two policies may not. The
        // first event in error ends the list's judgement, so a policy naming 100,000 events costs
        // a lookup each among the few Volcano allows.
        let mut own: Vec<&str> = Vec::with_capacity(VOLCANO_EVENTS.len());
        for &(event, k) in &named {
            if own.contains(&event) {
                continue;
            }
            if !VOLCANO_EVENTS.contains(&event) {
                errors.push(FieldError::new(
                    event_path(k),
                    format!("{event:?} is not a policy event: Volcano allows {}", VOLCANO_EVENTS.join(", ")),
                ));
                break;
            }
            own.push(event);
            if let Some(first) = events.insert(event, i) {
                errors.push(FieldError::new(
                    event_path(k),
                    format!(
                        "event {event} is handled by {at}[{first}] already: Volcano refuses an event in two policies of one list"
                    ),
                ));
                break;
            }
        }
    }
    if errors.len() == before && events.contains_key("*") && events.len() > 1 {
        errors.push(FieldError::new(
            at,
            "a policy for every event (\"*\") must be the only event of the list: Volcano refuses the job",
        ));
    }
}

/// A Volcano Job's task templates must not name a gang: Volcano's job controller puts every pod it
/// creates into the Job's own PodGroup (`createJobPod` sets `scheduling.k8s.io/group-name`), so a
/// pod whose template names another gang (any dialect) claims two gangs and is refused at its own
/// admission — every pod, after the Job was allowed. Refused here, on the Job, naming the field.
/// A template's own `scheduling.k8s.io/group-name` is not a second claim: the controller writes
/// its PodGroup's name over it, as Volcano documents and does.
fn volcano_templates(obj: &Value, roles: &[Role], namespace: &str, errors: &mut Vec<FieldError>) {
    for role in roles {
        let Some(template) = obj.at(&role.template) else { continue };
        let (claims, _) = crate::read::dialect::template_claims_all(template, namespace);
        for c in claims {
            if c.dialect == crate::read::model::Dialect::Volcano {
                continue;
            }
            errors.push(FieldError::new(
                format!("{}.{}", path_of(&role.template), c.path),
                format!(
                    "names gang {}, but Volcano puts every pod of this Job into the Job's own PodGroup: each pod would belong to two gangs and be refused; remove it (the Job is a gang by itself: use spec.minAvailable and the tasks' minAvailable)",
                    c.gang
                ),
            ));
        }
    }
}

/// An optional count at `ptr`: `None` when absent or `null`, an error naming the field when it is
/// not a non-negative integer (within int32, as every count the API server takes).
fn opt_int_at(obj: &Value, ptr: &str, errors: &mut Vec<FieldError>) -> Option<u32> {
    match obj.at(ptr) {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_i64().and_then(|n| u32::try_from(n).ok()).filter(|&n| n <= MAX_PODS) {
            Some(n) => Some(n),
            None => {
                errors
                    .push(FieldError::new(path_of(ptr), format!("must be a non-negative integer, got {v}")));
                None
            }
        },
    }
}

/// The pods a Job (its spec at `spec`: a Job's own, or a JobSet's child Job template) runs at
/// once: `parallelism` (1 when unset, as Kubernetes defaults it), never more than `completions`
/// when that is set (the Job controller keeps min(parallelism, remaining completions) pods
/// active: `pkg/controller/job` `manageJob`).
fn job_pods_at_once(obj: &Value, spec: &str, errors: &mut Vec<FieldError>) -> u32 {
    let parallelism = int_at(obj, &format!("{spec}/parallelism"), 1, errors);
    match opt_int_at(obj, &format!("{spec}/completions"), errors) {
        Some(c) => parallelism.min(c),
        None => parallelism,
    }
}

/// The pods KubeRay creates for the worker group at `at`, as its `GetWorkerGroupDesiredReplicas`
/// (ray-operator `controllers/ray/utils/util.go`) computes them: none for a suspended group;
/// `replicas` kept within `[minReplicas, maxReplicas]` (unset: `minReplicas`; the CRD defaults
/// them to 0 and 2³¹−1); times `numOfHosts` (1 by default). A `minReplicas` above `maxReplicas`
/// is refused, as KubeRay's `ValidateRayClusterSpec` refuses the cluster (no pod is created).
/// A whole cluster's `spec.suspend` is not read here: it deletes the pods only until the cluster
/// is resumed (Kueue's way), and the gang is the pods it then creates.
fn ray_group_pods(obj: &Value, at: &str, name: &str, errors: &mut Vec<FieldError>) -> u32 {
    let min = opt_int_at(obj, &format!("{at}/minReplicas"), errors).unwrap_or(0);
    let max = opt_int_at(obj, &format!("{at}/maxReplicas"), errors).unwrap_or(MAX_PODS);
    let replicas = opt_int_at(obj, &format!("{at}/replicas"), errors);
    // KubeRay creates `numOfHosts` pods per replica (multi-host TPU slices).
    let hosts = int_at(obj, &format!("{at}/numOfHosts"), 1, errors);
    if min > max {
        errors.push(FieldError::new(
            path_of(&format!("{at}/minReplicas")),
            format!("worker group {name:?} has minReplicas {min} greater than maxReplicas {max}: KubeRay refuses the cluster and creates no pod"),
        ));
        return 0;
    }
    if obj.at(&format!("{at}/suspend")).and_then(Value::as_bool) == Some(true) {
        return 0;
    }
    let desired = replicas.map_or(min, |r| r.clamp(min, max));
    checked_pods(desired.checked_mul(hosts), &format!("{at}/replicas"), "replicas × numOfHosts", errors)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_hostile_policy_list_costs_one_line_of_errors() {
        let judged = |policies: Value| {
            let mut errors = Vec::new();
            volcano_policies(Some(&policies), "spec.policies", &mut errors);
            errors
        };
        let unknown: Vec<String> = (0..50_000).map(|i| format!("x{i}")).collect();
        let e = judged(serde_json::json!([{"events": unknown, "action": "RestartJob"}]));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].path, "spec.policies[0].events[0]");
        let e = judged(serde_json::json!([{"events": vec![1; 50_000], "action": "RestartJob"}]));
        assert_eq!(e.len(), 1, "{e:?}");
        // One policy repeating an allowed event is one event; a second policy naming it is refused.
        let repeated = vec!["PodFailed"; 50_000];
        assert!(judged(serde_json::json!([{"events": repeated, "action": "RestartJob"}])).is_empty());
        let e = judged(serde_json::json!([
            {"events": ["PodFailed"], "action": "RestartJob"},
            {"event": "PodFailed", "action": "AbortJob"},
            {"exitCode": 0, "action": "RestartJob"}
        ]));
        assert_eq!(e.len(), 1, "judged up to the first policy in error: {e:?}");
        assert_eq!(e[0].path, "spec.policies[1].event");
        // Many distinct exit codes are valid.
        let codes: Vec<Value> =
            (1..=20_000).map(|c| serde_json::json!({"exitCode": c, "action": "RestartJob"})).collect();
        assert!(judged(Value::Array(codes)).is_empty());
    }

    mod borrowed_template_readers {
        use super::*;
        use proptest::prelude::*;

        /// Keys every dialect reads a claim or an annotation gang from, and some no dialect reads.
        const KEYS: &[&str] = &[
            "kube-gang.io/gang",
            "kube-gang.io/subgroup",
            "kube-gang.io/min-member",
            "kube-gang.io/timeout",
            "kube-gang.io/topology-key",
            "kube-gang.io/gang-group",
            "kube-gang.io/mode",
            "scheduling.x-k8s.io/pod-group",
            "pod-group.scheduling.sigs.k8s.io",
            "scheduling.k8s.io/group-name",
            "kai.scheduler/subgroup-name",
            "pod-group-name",
            "gang.scheduling.koordinator.sh/name",
            "gang.scheduling.koordinator.sh/min-available",
            "gang.scheduling.koordinator.sh/total-number",
            "gang.scheduling.koordinator.sh/mode",
            "gang.scheduling.koordinator.sh/groups",
            "gang.scheduling.koordinator.sh/waiting-time",
            "volcano.sh/task-spec",
            "alpha.jobset.sigs.k8s.io/exclusive-topology",
            "example.com/unrelated",
        ];
        const VALUES: &[&str] =
            &["g", "other", "2", "0", "-1", "30s", "rack", "Strict", "", "Bad_Value", "[\"ns/g\"]"];

        fn entries() -> impl Strategy<Value = serde_json::Map<String, Value>> {
            proptest::collection::vec((0..KEYS.len(), 0..VALUES.len(), any::<bool>()), 0..6).prop_map(|kv| {
                kv.into_iter()
                    .map(|(k, v, string)| {
                        let value = if string { json!(VALUES[v]) } else { json!(v) };
                        (KEYS[k].to_string(), value)
                    })
                    .collect()
            })
        }

        fn templates() -> impl Strategy<Value = (Value, String)> {
            (
                entries(),
                entries(),
                prop_oneof![Just(None), Just(Some(json!({"podGroupName": "g"}))), Just(Some(json!("x")))],
                prop_oneof![Just(None), Just(Some(json!({"name": "w", "podGroup": "g"})))],
                prop_oneof![Just(""), Just("ml"), Just("default")],
                any::<bool>(),
            )
                .prop_map(|(labels, annotations, group, workload, ns, named)| {
                    let mut meta = json!({"labels": labels, "annotations": annotations});
                    if named {
                        meta["name"] = json!("t");
                        meta["namespace"] = json!("elsewhere");
                    }
                    let mut spec = json!({"containers": [{"name": "c"}]});
                    if let Some(g) = group {
                        spec["schedulingGroup"] = g;
                    }
                    if let Some(w) = workload {
                        spec["workloadRef"] = w;
                    }
                    (json!({"metadata": meta, "spec": spec}), ns.to_string())
                })
        }

        proptest! {
            /// Reading a template where it is finds what reading the pod built from it finds:
            /// every claim, every error, every annotation gang.
            #[test]
            fn read_in_place_equals_read_from_a_built_pod((template, ns) in templates()) {
                let pod = template_pod(&template, &ns);
                let built = crate::read::dialect::pod_claims_all(&pod);
                let borrowed = crate::read::dialect::template_claims_all(&template, &ns);
                prop_assert_eq!(&borrowed, &built);
                for claim in &built.0 {
                    prop_assert_eq!(
                        crate::read::dialect::template_annotation_gang(claim, &template, &ns),
                        crate::read::dialect::annotation_gang(claim, &pod)
                    );
                }
            }
        }
    }

    fn pytorch() -> Value {
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "bert", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "m"}]}}},
                "Worker": {"replicas": 3, "template": {"metadata": {"annotations": {"kube-gang.io/min-member": "2"}},
                    "spec": {"schedulerName": "volcano", "containers": [{"name": "w"}]}}}}}})
    }

    #[test]
    fn a_kubeflow_job_s_own_minimum_is_read_as_its_operator_reads_it() {
        let min = |spec: Value, annotations: Value| {
            let mut obj = pytorch();
            obj["metadata"]["annotations"] = annotations;
            obj["spec"].as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
            inspect(&obj).unwrap().map(|s| s.min_member).map_err(|e| e[0].to_string())
        };
        assert_eq!(min(json!({}), json!({})), Ok(4));
        // minReplicas counts workers: the Master (1) runs too.
        assert_eq!(min(json!({"elasticPolicy": {"minReplicas": 2, "maxReplicas": 4}}), json!({})), Ok(3));
        // The gang field wins over the elastic policy, and our own annotation over both, up to
        // every pod the job runs (not only up to the minimum they ask).
        let both = json!({"runPolicy": {"schedulingPolicy": {"minAvailable": 3}}, "elasticPolicy": {"minReplicas": 2}});
        assert_eq!(min(both.clone(), json!({})), Ok(3));
        assert_eq!(min(both.clone(), json!({"kube-gang.io/min-member": "1"})), Ok(1));
        assert_eq!(min(both.clone(), json!({"kube-gang.io/min-member": "4"})), Ok(4));
        assert!(min(both, json!({"kube-gang.io/min-member": "5"})).is_err());
        for (bad, why) in [
            (
                json!({"runPolicy": {"schedulingPolicy": {"minAvailable": 0}}}),
                "spec.runPolicy.schedulingPolicy.minAvailable: 0: must be at least 1",
            ),
            (
                json!({"runPolicy": {"schedulingPolicy": {"minAvailable": "2"}}}),
                "spec.runPolicy.schedulingPolicy.minAvailable: must be an integer",
            ),
            (
                json!({"elasticPolicy": {"minReplicas": 4}}),
                "spec.elasticPolicy.minReplicas: 4 exceeds the 3 workers",
            ),
            (
                json!({"runPolicy": {"schedulingPolicy": {"minAvailable": 9_000_000_000u64}}}),
                "exceeds the 4 pods",
            ),
        ] {
            let e = min(bad.clone(), json!({})).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        // Only a PyTorchJob's elastic policy is a gang minimum (a PaddleJob's is warned about).
        let mut tf = pytorch();
        tf["kind"] = json!("TFJob");
        tf["spec"] = json!({"elasticPolicy": {"minReplicas": 1},
            "tfReplicaSpecs": {"Worker": {"replicas": 3, "template": {"spec": {"containers": [{"name": "w"}]}}}}});
        assert_eq!(inspect(&tf).unwrap().unwrap().min_member, 3);
        let mut paddle = tf.clone();
        paddle["kind"] = json!("PaddleJob");
        paddle["spec"] = json!({"elasticPolicy": {"minReplicas": 1},
            "runPolicy": {"schedulingPolicy": {"queue": "q"}},
            "paddleReplicaSpecs": {"Worker": {"replicas": 3, "template": {"spec": {"containers": [{"name": "w"}]}}}}});
        assert_eq!(inspect(&paddle).unwrap().unwrap().min_member, 3);
        let w = kubeflow_warnings(&paddle);
        assert!(w[0].starts_with("spec.elasticPolicy.minReplicas: not evaluated"), "{w:?}");
        assert!(w[1].starts_with("spec.runPolicy.schedulingPolicy.queue: not evaluated"), "{w:?}");
        assert!(kubeflow_warnings(&pytorch()).is_empty());
    }

    #[test]
    fn pytorchjob_roles_sum_and_user_settings_win() {
        let shape = inspect(&pytorch()).unwrap().unwrap();
        assert_eq!(shape.min_member, 4);
        let out = inject(&pytorch()).unwrap();
        let master = out.at("/spec/pytorchReplicaSpecs/Master/template").unwrap();
        assert_eq!(master.at("/metadata/labels/kube-gang.io~1gang"), Some(&json!("bert")));
        assert_eq!(master.at("/metadata/labels/kube-gang.io~1subgroup"), Some(&json!("master")));
        assert_eq!(master.at("/metadata/annotations/kube-gang.io~1min-member"), Some(&json!("4")));
        assert_eq!(master.at("/spec/schedulerName"), Some(&json!("gang-scheduler")));
        let worker = out.at("/spec/pytorchReplicaSpecs/Worker/template").unwrap();
        assert_eq!(
            worker.at("/metadata/annotations/kube-gang.io~1min-member"),
            Some(&json!("2")),
            "never overwritten"
        );
        assert_eq!(worker.at("/spec/schedulerName"), Some(&json!("volcano")), "the user's scheduler stays");
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
        let (claims, _) = crate::read::dialect::pod_claims_all(&pods[2]);
        assert_eq!(claims[0].subgroup.as_deref(), Some("js-w-1"), "the child job is the pod's group");
        let gang = crate::read::dialect::annotation_gang(&claims[0], &pods[2]).unwrap().unwrap();
        assert_eq!(gang.exclusive_topology.as_deref(), Some("rack"));
    }

    #[test]
    fn jobset_node_selector_strategy_pins_each_child_job_and_leaves_exclusivity_to_the_nodes() {
        let js = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"},
                "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "rack"}},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {
                "metadata": {"annotations": {"alpha.jobset.sigs.k8s.io/node-selector": "true"}},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}],
                    "nodeSelector": {"gpu": "h100"}}}}}}]}});
        let pods = expand(&js).unwrap();
        assert_eq!(
            pods[1].at("/spec/nodeSelector"),
            Some(&json!({"gpu": "h100", JOBSET_NAMESPACED_JOB: "ml_js-w-1"}))
        );
        assert_eq!(
            pods[1].at("/spec/tolerations"),
            Some(&json!([{"key": JOBSET_NO_SCHEDULE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]))
        );
        // No affinity under this strategy, so nothing for the scheduler to enforce: the pod and
        // the gang carry no exclusive topology.
        let pod = crate::read::convert::pod_from_raw(&pods[1], &Default::default()).unwrap();
        assert_eq!(pod.exclusive_topology, None);
        let (claims, _) = crate::read::dialect::pod_claims_all(&pods[1]);
        let gang = crate::read::dialect::annotation_gang(&claims[0], &pods[1]).unwrap().unwrap();
        assert_eq!(gang.exclusive_topology, None);
        // Without the strategy the same pod keeps it.
        let mut plain = pods[1].clone();
        plain["metadata"]["annotations"].as_object_mut().unwrap().remove(JOBSET_NODE_SELECTOR_STRATEGY);
        let pod = crate::read::convert::pod_from_raw(&plain, &Default::default()).unwrap();
        assert_eq!(pod.exclusive_topology.as_deref(), Some("rack"));
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
        assert!(pods.iter().all(|p| p.at("/spec/schedulerName") == Some(&json!("gang-scheduler"))));
        assert_eq!(pods[0].at("/metadata/namespace"), Some(&json!("default")));
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
            pods.iter().map(|p| crate::read::dialect::pod_claims(p).unwrap()[0].gang.name.clone()).collect();
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
            let t = out.at("/spec/template").unwrap();
            assert_eq!(t.at("/metadata/labels/kube-gang.io~1gang"), None, "{markers}");
            assert_eq!(t.at("/metadata/annotations/kube-gang.io~1min-member"), None, "{markers}");
            assert_eq!(t.at("/spec/schedulerName"), Some(&json!("gang-scheduler")), "{markers}");
            let pods = expand(&job).unwrap();
            assert!(
                pods.iter().all(|p| crate::read::dialect::pod_claims(p).unwrap().len() == 1),
                "{markers}"
            );
        }
    }

    /// KubeRay's `GetWorkerGroupDesiredReplicas`, case by case (our fixtures, from its rules).
    #[test]
    fn ray_worker_groups_count_the_replicas_kuberay_keeps_within_min_and_max() {
        let cluster = |group: Value| {
            json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
                "spec": {"headGroupSpec": {"template": {"spec": {}}}, "workerGroupSpecs": [group]}})
        };
        let workers = |group: Value| {
            let mut g = group;
            g["groupName"] = json!("w");
            g["template"] = json!({"spec": {}});
            inspect(&cluster(g)).unwrap().map(|s| s.roles[1].pods)
        };
        // Above maxReplicas: KubeRay creates maxReplicas (replicas 10, max 2: 2 workers, 3 pods).
        assert_eq!(workers(json!({"replicas": 10, "minReplicas": 1, "maxReplicas": 2})), Ok(2));
        let mut rc = cluster(json!({"groupName": "w", "replicas": 10, "minReplicas": 1, "maxReplicas": 2,
                                    "template": {"spec": {}}}));
        assert_eq!(inspect(&rc).unwrap().unwrap().min_member, 3);
        // Below minReplicas, or unset: minReplicas (0 when that is unset too, as the CRD defaults).
        assert_eq!(workers(json!({"replicas": 1, "minReplicas": 3, "maxReplicas": 5})), Ok(3));
        assert_eq!(workers(json!({"minReplicas": 2, "maxReplicas": 5})), Ok(2));
        assert_eq!(workers(json!({"replicas": 4})), Ok(4));
        assert_eq!(workers(json!({})), Ok(0));
        // Times numOfHosts, after clamping.
        assert_eq!(workers(json!({"replicas": 10, "maxReplicas": 2, "numOfHosts": 4})), Ok(8));
        // A suspended group has no pods.
        assert_eq!(
            workers(json!({"replicas": 4, "minReplicas": 1, "maxReplicas": 8, "suspend": true})),
            Ok(0)
        );
        // minReplicas above maxReplicas: KubeRay refuses the cluster.
        let errs = workers(json!({"replicas": 3, "minReplicas": 4, "maxReplicas": 2})).unwrap_err();
        assert_eq!(errs[0].path, "spec.workerGroupSpecs[0].minReplicas");
        assert!(errs[0].message.contains("greater than maxReplicas 2"), "{}", errs[0]);
        // A negative count names its field.
        assert_eq!(
            workers(json!({"maxReplicas": -1})).unwrap_err()[0].path,
            "spec.workerGroupSpecs[0].maxReplicas"
        );
        // The whole cluster suspended (Kueue's way) still counts the pods it makes once resumed.
        rc["spec"]["suspend"] = json!(true);
        assert_eq!(inspect(&rc).unwrap().unwrap().min_member, 3);
    }

    /// A Job, and each child Job of a JobSet, runs min(parallelism, completions) pods at once.
    #[test]
    fn jobs_and_jobset_child_jobs_count_the_pods_that_run_at_once() {
        let job = |spec: Value| {
            let mut spec = spec;
            spec["template"] = json!({"spec": {}});
            inspect(
                &json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": spec}),
            )
            .unwrap()
            .map(|s| s.min_member)
        };
        assert_eq!(job(json!({"parallelism": 4, "completions": 2})), Ok(2));
        assert_eq!(job(json!({"parallelism": 4})), Ok(4));
        assert_eq!(job(json!({"completions": 3})), Ok(1), "parallelism defaults to 1");
        assert_eq!(
            job(json!({"parallelism": 4, "completions": -1})).unwrap_err()[0].path,
            "spec.completions"
        );
        let jobset = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
            "spec": {"replicatedJobs": [
                {"name": "workers", "replicas": 3,
                 "template": {"spec": {"parallelism": 4, "completions": 2, "template": {"spec": {}}}}},
                {"name": "driver", "replicas": 1,
                 "template": {"spec": {"parallelism": 2, "template": {"spec": {}}}}}]}});
        let shape = inspect(&jobset).unwrap().unwrap();
        assert_eq!(shape.roles.iter().map(|r| r.pods).collect::<Vec<_>>(), vec![6, 2]);
        assert_eq!(shape.min_member, 8);
        assert_eq!(expand(&jobset).unwrap().len(), 8);
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
    fn volcano_beyond_the_task_limit_is_one_error_at_the_list() {
        let vcjob = |n: usize| {
            let tasks: Vec<Value> = (0..n)
                .map(|i| json!({"name": format!("t{i}"), "replicas": 1, "template": {"spec": {}}}))
                .collect();
            json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "v"},
                "spec": {"tasks": tasks}})
        };
        let shape = inspect(&vcjob(MAX_VOLCANO_TASKS)).unwrap().unwrap();
        assert_eq!(shape.roles.len(), MAX_VOLCANO_TASKS);
        let errors = inspect(&vcjob(MAX_VOLCANO_TASKS + 1)).unwrap().unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].path, "spec.tasks");
        assert!(errors[0].message.contains(&format!("has {} tasks", MAX_VOLCANO_TASKS + 1)));
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
        // A cluster selector wins over a cluster spec (KubeRay uses the existing cluster).
        let mut selecting = job.clone();
        selecting["spec"]["clusterSelector"] = json!({"ray.io/cluster": "shared"});
        assert!(inspect(&selecting).is_none());
        selecting["spec"]["clusterSelector"] = json!({});
        assert!(inspect(&selecting).is_some());
    }

    #[test]
    fn a_volcano_job_expands_as_its_controller_does() {
        let vj = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "tf", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
            "spec": {"priorityClassName": "high", "networkTopology": {}, "tasks": [
                {"name": "ps", "replicas": 1, "template": {"spec": {}}},
                {"name": "worker", "replicas": 3, "minAvailable": 2, "template": {"spec": {"priorityClassName": "low"}}}]}});
        assert_eq!(inspect(&vj).unwrap().unwrap().min_member, 3, "sum of task minAvailable");
        let out = expand(&vj).unwrap();
        assert_eq!(out.len(), 5);
        assert_eq!(out[0]["kind"], "PodGroup");
        assert_eq!(out[0].at("/spec/minTaskMember/worker"), Some(&json!(2)));
        assert_eq!(
            out[0].at("/spec/priorityClassName"),
            Some(&json!("high")),
            "the job's class on its PodGroup"
        );
        assert_eq!(
            out[1].at("/spec/priorityClassName"),
            Some(&json!("high")),
            "and on a pod whose template has none"
        );
        assert_eq!(out[4].at("/spec/priorityClassName"), Some(&json!("low")), "a template's own class stays");
        assert_eq!(
            out[0].at("/spec/networkTopology"),
            Some(&json!({"mode": "hard", "highestTierAllowed": 1})),
            "the Job CRD's defaults, copied to its PodGroup"
        );
        let pod = &out[4];
        assert_eq!(pod.at("/metadata/name"), Some(&json!("tf-worker-2")));
        assert_eq!(pod.at("/spec/schedulerName"), Some(&json!("gang-scheduler")), "opted in");
        let claims = crate::read::dialect::pod_claims(pod).unwrap();
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].subgroup.as_deref(), Some("worker"));
    }

    #[test]
    fn the_table_of_workload_kinds_is_what_inspect_reads() {
        for k in KINDS {
            let api_version = format!("{}/{}", k.group, k.versions.first().copied().unwrap_or("v1"));
            let obj = json!({"apiVersion": api_version, "kind": k.kind,
                "metadata": {"name": "w", "namespace": "ml", "labels": {LABEL_ENABLED: "true"}}, "spec": {}});
            assert!(inspect(&obj).is_some(), "{}/{} is in the table but not read", k.group, k.kind);
            assert_eq!(controller_name_label(k.group, k.kind), k.name_label);
        }
        for (api_version, kind) in [
            ("apps/v1", "DaemonSet"),
            ("batch/v1", "CronJob"),
            ("v1", "Pod"),
            ("kubeflow.org/v1", "Notebook"),
        ] {
            let obj = json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"name": "w", "namespace": "ml", "labels": {LABEL_ENABLED: "true"}}, "spec": {}});
            assert!(inspect(&obj).is_none(), "{kind} is read but not in the table");
        }
        // The labels a gang may be named from are the table's, each once.
        let mut labels: Vec<&str> = KINDS.iter().filter_map(|k| k.name_label).collect();
        labels.dedup();
        let mut from: Vec<&str> = crate::read::labels::GANG_FROM_LABELS.to_vec();
        from.sort_unstable();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels, from);
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
        // A Deployment opts in by its own label only.
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}});
        assert!(!is_opted_in(&deployment, Some(&ns)));
        let mut labelled_deployment = deployment.clone();
        labelled_deployment["metadata"]["labels"] = json!({LABEL_ENABLED: "true"});
        assert!(is_opted_in(&labelled_deployment, None));
    }

    #[test]
    fn pods_claiming_a_gang_get_our_scheduler() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"kube-gang.io/gang": "g"}},
            "spec": {"schedulerName": "default-scheduler"}});
        assert_eq!(inject(&pod).unwrap().at("/spec/schedulerName"), Some(&json!("gang-scheduler")));
        let other = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
        assert_eq!(inject(&other).unwrap(), other);
    }
}
