//! Label and annotation syntax, and the keys and names with fixed meanings: the bottom of the
//! reading layer, shared by the dialects, the workloads and the rules above them.
//!
//! The names are fixed in DESIGN.md ("API"; `../shared/DESIGN.md` from the repository root); the syntax is Kubernetes' own (label keys
//! and values as `k8s.io/apimachinery/pkg/util/validation` defines them).

/// The API group of kube-gang's own objects and the prefix of its labels and annotations.
pub const GROUP: &str = "kube-gang.io";
/// The `Gang` CRD's version.
pub const VERSION: &str = "v1alpha1";
/// The default `spec.schedulerName` gang members carry.
pub const SCHEDULER_NAME: &str = "gang-scheduler";

// Labels and annotations with fixed names (DESIGN.md, "API"); the crate root
// re-exports this module as `scheduler_core::labels`.

/// Pod label: the gang (same namespace) this pod belongs to.
pub const LABEL_GANG: &str = "kube-gang.io/gang";
/// Pod label: the leaf subgroup this pod belongs to.
pub const LABEL_SUBGROUP: &str = "kube-gang.io/subgroup";
/// Workload or namespace label that opts in to injection: `"true"`.
pub const LABEL_ENABLED: &str = "kube-gang.io/enabled";
/// Namespace label (`"true"`) that lets its pods (Prometheus) reach the scheduler's and the
/// webhook's metrics ports through the NetworkPolicies of `manifests/base/network-policy.yaml`.
pub const LABEL_METRICS_SCRAPER: &str = "kube-gang.io/metrics-scraper";
/// CRD-less gang: minimum members.
pub const ANNOTATION_MIN_MEMBER: &str = "kube-gang.io/min-member";
/// CRD-less gang: expected total members.
pub const ANNOTATION_TOTAL_MEMBER: &str = "kube-gang.io/total-member";
/// CRD-less gang: `Strict` or `NonStrict`.
pub const ANNOTATION_MODE: &str = "kube-gang.io/mode";
/// CRD-less gang: schedule timeout as a duration (`90s`, `15m`, `2h`).
pub const ANNOTATION_TIMEOUT: &str = "kube-gang.io/timeout";
/// CRD-less gang: required topology key.
pub const ANNOTATION_TOPOLOGY_KEY: &str = "kube-gang.io/topology-key";
/// CRD-less gang: required topology key (as `kube-gang.io/topology-key`; both set must agree).
pub const ANNOTATION_TOPOLOGY_REQUIRED: &str = "kube-gang.io/topology-required";
/// CRD-less gang: preferred topology key, tried before the required one.
pub const ANNOTATION_TOPOLOGY_PREFERRED: &str = "kube-gang.io/topology-preferred";
/// CRD-less gang: comma-separated `namespace/name` gangs that must be satisfied together.
pub const ANNOTATION_GANG_GROUP: &str = "kube-gang.io/gang-group";
/// CRD-less gang named after the workload its pods belong to, for a workload whose name mutating
/// admission did not know (`generateName`): the value is the pod label in which the workload's
/// controller writes the workload's name ([`GANG_FROM_LABELS`]), and the gang is named after it,
/// as if the pods carried `kube-gang.io/gang` with that value. Injected by the webhook.
pub const ANNOTATION_GANG_FROM: &str = "kube-gang.io/gang-from";
/// How long the work runs at most once started (a duration: `90m`, `4h`): on a pod, or on a
/// `Gang` object or pod template for the whole gang. What backfill plans with: a running pod is
/// expected to end this long after it started, and a gang may start on capacity held for another
/// only if it ends before that one's expected start. A pod's `spec.activeDeadlineSeconds` counts
/// as one; the webhook writes a Job's into its pod template.
pub const ANNOTATION_TIME_LIMIT: &str = "kube-gang.io/time-limit";
/// Gang (on a `Gang` object or a CRD-less gang's pods): the member counts an elastic gang grows to
/// beyond its minimum — `One` (any, the default), `PowerOfTwo`, `MultipleOf:N`.
pub const ANNOTATION_ELASTIC_STEP: &str = "kube-gang.io/elastic-step";
/// Gang (on a `Gang` object or a CRD-less gang's pods): `"true"` or `"false"`, whether it asks the
/// cluster autoscaler for capacity when the policy turns `provisioning` on.
pub const ANNOTATION_PROVISIONING: &str = "kube-gang.io/provisioning";

/// Pod annotation gang-scheduler writes on a gang's active members: the gang's state (when it
/// started waiting, when it fell below its minimum, timeouts, backoff, whether it gave up) where no
/// `Gang` status holds it, so that a restarted or new leader reads it from the cluster. JSON;
/// see [`crate::read::model::Persisted`].
pub const ANNOTATION_STATE: &str = "kube-gang.io/state";

/// Where a `kube-gang.io/` key is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// A label users (or injection) put on pods, pod templates, workloads or namespaces.
    Label,
    /// An annotation users (or injection) put on pods, pod templates or `Gang`s.
    Annotation,
    /// A name kube-gang writes or shows (a Secret's annotation, a gate in messages, an Event's
    /// controller), never read from what users write.
    Written,
    /// A node label of the shipped example cluster (`examples/cluster.yaml`, the demo).
    Example,
}

/// Every `kube-gang.io/` key with a meaning, and what it is: the one list that
/// `kubectl gang validate` (and admission) checks unknown `kube-gang.io/` keys against, naming the
/// nearest, and that `docs/reference.md` is held to (`tests/tests/reference.rs`, both ways, and
/// every `kube-gang.io/` name in the binaries' sources must be here). A key added anywhere goes
/// here and into docs/reference.md.
pub const KNOWN: &[(&str, KeyKind)] = &[
    (LABEL_GANG, KeyKind::Label),
    (LABEL_SUBGROUP, KeyKind::Label),
    (LABEL_ENABLED, KeyKind::Label),
    (ANNOTATION_MIN_MEMBER, KeyKind::Annotation),
    (ANNOTATION_TOTAL_MEMBER, KeyKind::Annotation),
    (ANNOTATION_MODE, KeyKind::Annotation),
    (ANNOTATION_TIMEOUT, KeyKind::Annotation),
    (ANNOTATION_TIME_LIMIT, KeyKind::Annotation),
    (ANNOTATION_ELASTIC_STEP, KeyKind::Annotation),
    (ANNOTATION_TOPOLOGY_KEY, KeyKind::Annotation),
    (ANNOTATION_TOPOLOGY_REQUIRED, KeyKind::Annotation),
    (ANNOTATION_TOPOLOGY_PREFERRED, KeyKind::Annotation),
    (ANNOTATION_GANG_GROUP, KeyKind::Annotation),
    (ANNOTATION_PROVISIONING, KeyKind::Annotation),
    (ANNOTATION_GANG_FROM, KeyKind::Annotation),
    (LABEL_METRICS_SCRAPER, KeyKind::Label),
    (ANNOTATION_STATE, KeyKind::Written),
    ("kube-gang.io/gang-name", KeyKind::Written),
    ("kube-gang.io/gang-incarnation", KeyKind::Written),
    ("kube-gang.io/attempt", KeyKind::Written),
    ("kube-gang.io/provisioning-request", KeyKind::Written),
    ("kube-gang.io/binding-refused", KeyKind::Written),
    ("kube-gang.io/binding-throttled", KeyKind::Written),
    ("kube-gang.io/gang-scheduler", KeyKind::Written),
    ("kube-gang.io/next-ca-since", KeyKind::Written),
    ("kube-gang.io/retire-cas-at", KeyKind::Written),
    ("kube-gang.io/rack", KeyKind::Example),
];

/// The known key (label or annotation users write, [`KNOWN`]) nearest to `key` by edit distance,
/// when one is close enough to be the key meant (at most a third of its length away, and 3).
pub fn nearest_known(key: &str) -> Option<&'static str> {
    KNOWN
        .iter()
        .filter(|(_, kind)| matches!(kind, KeyKind::Label | KeyKind::Annotation))
        .map(|(k, _)| (edit_distance(key, k), *k))
        .filter(|(d, k)| *d <= 3 && *d * 3 <= k.len().max(key.len()).saturating_sub(GROUP.len() + 1))
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb { prev } else { 1 + prev.min(cur).min(row[j]) };
            prev = cur;
        }
    }
    row[b.len()]
}

// cluster-autoscaler's ProvisioningRequest API (`autoscaling.x-k8s.io/v1`, defined in
// kubernetes/autoscaler `cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go`).

/// Pod annotation naming the ProvisioningRequest (same namespace) whose capacity the pod consumes.
pub const ANNOTATION_CONSUME_PROVISIONING_REQUEST: &str = "autoscaling.x-k8s.io/consume-provisioning-request";
/// Pod annotation naming the class of the request it consumes.
pub const ANNOTATION_PROVISIONING_CLASS: &str = "autoscaling.x-k8s.io/provisioning-class-name";

// Kueue's names (kubernetes-sigs/kueue `pkg/controller/constants`, `pkg/controller/jobs/pod`).

// KAI-Scheduler's pod grouper (kai-scheduler/KAI-Scheduler `pkg/podgrouper`, the Job and JobSet
// groupers).

/// Annotation on a `batch/v1` Job or a JobSet: its PodGroup's minimum (KAI's groupers give such a
/// workload a minimum of 1 without it).
pub const KAI_BATCH_MIN_MEMBER: &str = "kai.scheduler/batch-min-member";
/// KAI-Scheduler's workload annotation naming the `Topology` its levels are of (KAI's pod grouper
/// copies it, with the two below, into its PodGroup's `topologyConstraint`).
pub const KAI_TOPOLOGY: &str = "kai.scheduler/topology";
/// KAI's workload annotation: the level every pod must share (`requiredTopologyLevel`).
pub const KAI_TOPOLOGY_REQUIRED: &str = "kai.scheduler/topology-required-placement";
/// KAI's workload annotation: the level pods would rather share (`preferredTopologyLevel`).
pub const KAI_TOPOLOGY_PREFERRED: &str = "kai.scheduler/topology-preferred-placement";
/// KAI's label on a workload or its pods: how preemption may take the gang (its pod grouper
/// writes it into the PodGroup's `preemptibility`; the workload's wins over its pods').
pub const KAI_PREEMPTIBILITY: &str = "kai.scheduler/preemptibility";
/// KAI's label on a workload: the PriorityClass its pod grouper gives the PodGroup.
pub const KAI_PRIORITY_CLASS: &str = "priorityClassName";

/// Workload label: the Kueue LocalQueue the workload is submitted to.
pub const KUEUE_QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";
/// Scheduling gate Kueue puts on pods it has not admitted yet.
pub const KUEUE_ADMISSION_GATE: &str = "kueue.x-k8s.io/admission";
/// Scheduling gate Kueue's topology-aware scheduling holds until it assigns a topology.
pub const KUEUE_TOPOLOGY_GATE: &str = "kueue.x-k8s.io/topology";
/// Job annotation opting into Kueue's partial admission: the lowest `spec.parallelism` the Job
/// accepts (kubernetes-sigs/kueue KEP-420, `pkg/controller/jobs/job`).
pub const KUEUE_JOB_MIN_PARALLELISM: &str = "kueue.x-k8s.io/job-min-parallelism";
/// Kueue's Topology-Aware Scheduling: the level (a node label key) all pods of a PodSet must share
/// one domain of, set on the pod template (KEP-2724).
pub const KUEUE_PODSET_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";
/// Kueue's TAS: the level a PodSet's pods should share one domain of, relaxed level by level.
pub const KUEUE_PODSET_PREFERRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// Kueue's TAS: the PodSet takes part in topology accounting with no co-location asked.
pub const KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-unconstrained-topology";
/// Kueue's TAS: each slice of a PodSet (`podset-slice-size` pods) in one domain of this level.
pub const KUEUE_PODSET_SLICE_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-slice-required-topology";
/// Kueue's TAS: the pods in one slice.
pub const KUEUE_PODSET_SLICE_SIZE: &str = "kueue.x-k8s.io/podset-slice-size";
/// Kueue's TAS: slices at several levels, as a JSON list.
pub const KUEUE_PODSET_SLICE_CONSTRAINTS: &str = "kueue.x-k8s.io/podset-slice-required-topology-constraints";
/// Kueue's TAS: PodSets of one workload that share a flavor and a topology domain.
pub const KUEUE_PODSET_GROUP_NAME: &str = "kueue.x-k8s.io/podset-group-name";

// Other projects' well-known keys this crate reads or writes.

/// LeaderWorkerSet's pod label carrying the group index; one gang per group.
pub const LWS_GROUP_INDEX: &str = "leaderworkerset.sigs.k8s.io/group-index";
/// LeaderWorkerSet's pod label carrying the set's name.
pub const LWS_NAME: &str = "leaderworkerset.sigs.k8s.io/name";
/// LeaderWorkerSet's pod label carrying the pod's index in its group (0: the leader).
pub const LWS_WORKER_INDEX: &str = "leaderworkerset.sigs.k8s.io/worker-index";
/// LeaderWorkerSet's pod label naming the group uniquely (SHA-1 of `<namespace>/<leader pod>`):
/// what the exclusive-placement terms select.
pub const LWS_GROUP_KEY: &str = "leaderworkerset.sigs.k8s.io/group-key";
/// LeaderWorkerSet's pod label carrying the pod's subgroup index (`subGroupPolicy`).
pub const LWS_SUBGROUP_INDEX: &str = "leaderworkerset.sigs.k8s.io/subgroup-index";
/// LeaderWorkerSet's pod label naming the subgroup uniquely (SHA-1 of `<leader pod>/<index>`).
pub const LWS_SUBGROUP_KEY: &str = "leaderworkerset.sigs.k8s.io/subgroup-key";
/// LeaderWorkerSet annotation (value: a node label key): each group gets a domain of its own.
pub const LWS_EXCLUSIVE_TOPOLOGY: &str = "leaderworkerset.sigs.k8s.io/exclusive-topology";
/// LeaderWorkerSet annotation (value: a node label key): each subgroup gets a domain of its own.
pub const LWS_SUBGROUP_EXCLUSIVE_TOPOLOGY: &str = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology";
/// LeaderWorkerSet's pod annotations: the group size, the subgroup size and policy type, and on
/// workers their leader's name.
pub const LWS_SIZE: &str = "leaderworkerset.sigs.k8s.io/size";
pub const LWS_SUBGROUP_SIZE: &str = "leaderworkerset.sigs.k8s.io/subgroup-size";
pub const LWS_SUBGROUP_POLICY_TYPE: &str = "leaderworkerset.sigs.k8s.io/subgroup-policy-type";
pub const LWS_LEADER_NAME: &str = "leaderworkerset.sigs.k8s.io/leader-name";
/// The training-operator's (and mpi-operator's) pod label carrying the job's name
/// (kubeflow/common `JobNameLabel`).
pub const KUBEFLOW_JOB_NAME: &str = "training.kubeflow.org/job-name";
/// KubeRay's pod label carrying the RayCluster's name.
pub const RAY_CLUSTER: &str = "ray.io/cluster";
/// KubeRay's label on a RayCluster or RayJob: the PriorityClass of the PodGroup its Volcano
/// integration makes (`ray-operator/controllers/ray/utils`).
pub const RAY_PRIORITY_CLASS: &str = "ray.io/priority-class-name";
/// KubeRay's label on a RayCluster or RayJob asking its batch-scheduler integrations for a gang
/// (present at all: any value).
pub const RAY_GANG_SCHEDULING: &str = "ray.io/gang-scheduling-enabled";
/// The AppWrapper controller's label on every pod template it creates: the AppWrapper's name.
pub const APPWRAPPER_NAME: &str = "workload.codeflare.dev/appwrapper";
/// The pod labels [`ANNOTATION_GANG_FROM`] may name: each is written on every pod by the
/// controller of one kind of workload, with the workload's name (the Job controller's
/// `batch.kubernetes.io/job-name`, JobSet's `jobset-name`, the training-operator's and
/// mpi-operator's `training.kubeflow.org/job-name`, KubeRay's `ray.io/cluster`, LeaderWorkerSet's
/// `name`, the AppWrapper controller's `workload.codeflare.dev/appwrapper`).
pub const GANG_FROM_LABELS: &[&str] =
    &[JOB_NAME, JOBSET_NAME, KUBEFLOW_JOB_NAME, RAY_CLUSTER, LWS_NAME, APPWRAPPER_NAME];
/// JobSet's exclusive placement annotation (value: a node label key): each child Job gets a domain
/// of that label of its own. The JobSet controller copies it onto each Job and its pod template.
pub const JOBSET_EXCLUSIVE_TOPOLOGY: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";
/// JobSet's node-selector strategy for exclusive placement (nodes labelled per child Job ahead of
/// time): with it, JobSet injects no pod affinity and its pod webhook does not hold back a child
/// Job's followers until the leader is scheduled.
pub const JOBSET_NODE_SELECTOR_STRATEGY: &str = "alpha.jobset.sigs.k8s.io/node-selector";
/// JobSet's pod label identifying the child Job (a hash of `namespace/job`): JobSet's exclusive
/// placement keeps pods of other values out of a child Job's domain.
pub const JOBSET_JOB_KEY: &str = "jobset.sigs.k8s.io/job-key";
/// JobSet's pod label carrying the pod's priority (set by JobSet's pod webhook from
/// `spec.priority`): exclusive placement keeps out only other child Jobs of the same priority.
pub const JOBSET_PRIORITY: &str = "jobset.sigs.k8s.io/priority";
/// The node label (value `<namespace>_<job>`) and taint of JobSet's node-selector strategy: the
/// controller gives each exclusive child Job's pods a nodeSelector on the label and a toleration
/// of the taint; the nodes are labelled and tainted ahead of time.
pub const JOBSET_NAMESPACED_JOB: &str = "alpha.jobset.sigs.k8s.io/namespaced-job";
/// See [`JOBSET_NAMESPACED_JOB`].
pub const JOBSET_NO_SCHEDULE_TAINT: &str = "alpha.jobset.sigs.k8s.io/no-schedule";
/// JobSet's pod label naming the JobSet.
pub const JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";
/// JobSet's pod label naming the replicated job.
pub const JOBSET_REPLICATED_JOB: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// JobSet's pod label carrying the child Job's index within its replicated job.
pub const JOBSET_JOB_INDEX: &str = "jobset.sigs.k8s.io/job-index";
/// The Job controller's pod label naming the pod's Job.
pub const JOB_NAME: &str = "batch.kubernetes.io/job-name";

/// A Kubernetes label value: at most 63 characters, alphanumerics, `-`, `_`, `.`, starting and
/// ending with an alphanumeric. Subgroup names are written into pod labels, so they must be one.
pub fn check_label_value(v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Err("must not be empty".into());
    }
    if v.len() > 63 {
        return Err(format!("{v:?} is longer than 63 characters"));
    }
    let ok_inner = v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !ok_inner || !ends(v.chars().next()) || !ends(v.chars().last()) {
        return Err(format!(
            "{v:?} is not a valid label value (alphanumerics, '-', '_', '.', starting and ending with an alphanumeric)"
        ));
    }
    Ok(())
}

/// A DNS-1123 subdomain as apimachinery checks one: at most 253 characters, dot-separated parts
/// of lowercase alphanumerics and `-`, each starting and ending with an alphanumeric.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// A Kubernetes label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters (as a label value, but not empty).
pub fn check_label_key(k: &str) -> Result<(), String> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix
        && !is_dns_subdomain(p)
    {
        return Err(format!("{k:?} is not a valid label key: prefix {p:?} is not a DNS subdomain"));
    }
    check_label_value(name).map_err(|e| format!("{k:?} is not a valid label key: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_names_the_key_meant_and_a_stranger_names_none() {
        assert_eq!(nearest_known("kube-gang.io/min-memebr"), Some(ANNOTATION_MIN_MEMBER));
        assert_eq!(nearest_known("kube-gang.io/timout"), Some(ANNOTATION_TIMEOUT));
        assert_eq!(nearest_known("kube-gang.io/subgroups"), Some(LABEL_SUBGROUP));
        assert_eq!(nearest_known("kube-gang.io/enable"), Some(LABEL_ENABLED));
        // Too far from every key a user writes to be a typo of one.
        assert_eq!(nearest_known("kube-gang.io/priority"), None);
        assert_eq!(nearest_known("kube-gang.io/x"), None);
        // Names kube-gang writes are never suggested to users.
        assert_eq!(nearest_known("kube-gang.io/rackk"), None);
    }
}
