//! Which fields of a pod kube-scheduler reads, and what the cycle does with each: the one list the
//! safety net (a pod asking for something the cycle does not evaluate waits, naming the field),
//! the README's table and a test share. The test (`tests/coverage.rs`) holds the lists to every
//! property of k8s-openapi's `PodSpec`, `Container`, `ContainerPort`, `ResourceRequirements`,
//! `Volume`, `Affinity`, `PodAffinityTerm` and `TopologySpreadConstraint`, so a field the API adds
//! cannot go unlisted.
//!
//! When a filter learns a field marked [`Coverage::Waits`], its row becomes [`Coverage::Filter`]
//! and pods that set it are placed: [`waits`] is what the reader consults.

/// What the cycle does with one field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coverage {
    /// A filter of the cycle evaluates it as the kube-scheduler plugin named does.
    Filter(&'static str),
    /// kube-scheduler only ranks nodes by it (the plugin named scores); it never keeps a pod off a
    /// node there either. The cycle scores by its own rule (bin-packing or spreading) instead.
    Score(&'static str),
    /// The cycle reads it for something other than a node filter (what is said).
    Cycle(&'static str),
    /// kube-scheduler's plugin named evaluates it and the cycle does not yet: a pod that sets it
    /// is not placed; it waits, its gang's message naming the field.
    Waits(&'static str),
    /// kube-scheduler does not read it to place a pod.
    NotScheduling,
}

/// One field and its coverage. `field` is a property name of the object the list is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub field: &'static str,
    pub coverage: Coverage,
}

const fn f(field: &'static str, coverage: Coverage) -> Field {
    Field { field, coverage }
}

use Coverage::{Cycle, Filter, NotScheduling, Score, Waits};

/// `spec` of a Pod (and of a pod template).
pub const POD_SPEC: &[Field] = &[
    f(
        "activeDeadlineSeconds",
        Cycle(
            "the pod's time limit when it states no kube-gang.io/time-limit: when backfill expects it to end",
        ),
    ),
    f("affinity", Cycle("see AFFINITY")),
    f("automountServiceAccountToken", NotScheduling),
    f("containers", Cycle("see CONTAINER")),
    f("dnsConfig", NotScheduling),
    f("dnsPolicy", NotScheduling),
    f("enableServiceLinks", NotScheduling),
    f("ephemeralContainers", NotScheduling),
    f("evictionResponders", NotScheduling),
    f("hostAliases", NotScheduling),
    f("hostIPC", NotScheduling),
    f("hostNetwork", Filter("NodePorts: each port's hostPort defaults to its containerPort")),
    f("hostPID", NotScheduling),
    f("hostUsers", NotScheduling),
    f("hostname", NotScheduling),
    f("hostnameOverride", NotScheduling),
    f("imagePullSecrets", NotScheduling),
    f("initContainers", Cycle("see CONTAINER: sidecars (restartPolicy: Always) run with the pod")),
    f("nodeName", Filter("NodeName: a pod with spec.nodeName is on that node and is never placed")),
    f("nodeSelector", Filter("NodeAffinity")),
    f("os", NotScheduling),
    f("overhead", Filter("NodeResourcesFit")),
    f("preemptionPolicy", Cycle("DefaultPreemption: Never does not preempt")),
    f("priority", Cycle("PrioritySort and DefaultPreemption")),
    f("priorityClassName", Cycle("PrioritySort and DefaultPreemption, through the class's value")),
    f("readinessGates", NotScheduling),
    f(
        "resourceClaims",
        Filter(
            "DynamicResources: an allocated claim's node selector; a claim to allocate gets devices as the structured allocator chooses them, for the whole gang at once, allocated and reserved before the pod is bound",
        ),
    ),
    f(
        "resources",
        Filter("NodeResourcesFit: pod-level requests replace the containers' for cpu, memory, hugepages"),
    ),
    f("restartPolicy", NotScheduling),
    f(
        "runtimeClassName",
        Cycle(
            "through spec.overhead, spec.nodeSelector and spec.tolerations, which the RuntimeClass admission plugin writes into the pod",
        ),
    ),
    f("schedulerName", Cycle("only pods naming the gang scheduler are placed")),
    f("schedulingGates", Filter("SchedulingGates: a gated pod is never placed")),
    f("schedulingGroup", Cycle("the upstream gang the pod belongs to")),
    f("securityContext", NotScheduling),
    f("serviceAccount", NotScheduling),
    f("serviceAccountName", NotScheduling),
    f("setHostnameAsFQDN", NotScheduling),
    f("shareProcessNamespace", NotScheduling),
    f("subdomain", NotScheduling),
    f("terminationGracePeriodSeconds", NotScheduling),
    f("tolerations", Filter("TaintToleration and NodeUnschedulable")),
    f("topologySpreadConstraints", Cycle("see SPREAD")),
    f("volumes", Cycle("see VOLUME")),
];

/// `spec.affinity`, by its parts.
pub const AFFINITY: &[Field] = &[
    f("nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", Filter("NodeAffinity")),
    f("nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution", Score("NodeAffinity")),
    f("podAffinity.requiredDuringSchedulingIgnoredDuringExecution", Filter("InterPodAffinity")),
    f("podAffinity.preferredDuringSchedulingIgnoredDuringExecution", Score("InterPodAffinity")),
    f("podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution", Filter("InterPodAffinity")),
    f("podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution", Score("InterPodAffinity")),
];

/// A required `podAffinityTerm` (of podAffinity or podAntiAffinity).
pub const AFFINITY_TERM: &[Field] = &[
    f("labelSelector", Filter("InterPodAffinity")),
    f(
        "matchLabelKeys",
        Filter(
            "InterPodAffinity, through labelSelector: the API server merges the pod's values in when it creates the pod",
        ),
    ),
    f(
        "mismatchLabelKeys",
        Filter(
            "InterPodAffinity, through labelSelector: the API server merges the pod's values in when it creates the pod",
        ),
    ),
    f("namespaceSelector", Filter("InterPodAffinity")),
    f("namespaces", Filter("InterPodAffinity")),
    f("topologyKey", Filter("InterPodAffinity")),
];

/// A `topologySpreadConstraints` entry: `DoNotSchedule` ones filter, `ScheduleAnyway` ones only
/// score (kube-scheduler's `PodTopologySpread` scores them; the cycle does not).
pub const SPREAD: &[Field] = &[
    f("labelSelector", Filter("PodTopologySpread")),
    f("matchLabelKeys", Filter("PodTopologySpread: the pod's values merged into labelSelector")),
    f("maxSkew", Filter("PodTopologySpread")),
    f("minDomains", Filter("PodTopologySpread")),
    f("nodeAffinityPolicy", Filter("PodTopologySpread")),
    f("nodeTaintsPolicy", Filter("PodTopologySpread")),
    f("topologyKey", Filter("PodTopologySpread")),
    f("whenUnsatisfiable", Filter("PodTopologySpread: DoNotSchedule filters, ScheduleAnyway only scores")),
];

/// A container (`spec.containers[]`, `spec.initContainers[]`).
pub const CONTAINER: &[Field] = &[
    f("args", NotScheduling),
    f("command", NotScheduling),
    f("env", NotScheduling),
    f("envFrom", NotScheduling),
    f("image", Score("ImageLocality")),
    f("imagePullPolicy", NotScheduling),
    f("lifecycle", NotScheduling),
    f("livenessProbe", NotScheduling),
    f("name", NotScheduling),
    f("ports", Cycle("see CONTAINER_PORT")),
    f("readinessProbe", NotScheduling),
    f("resizePolicy", NotScheduling),
    f("resources", Cycle("see RESOURCES")),
    f("restartPolicy", Filter("NodeResourcesFit and NodePorts: an init container with Always is a sidecar")),
    f("restartPolicyRules", NotScheduling),
    f("securityContext", NotScheduling),
    f("startupProbe", NotScheduling),
    f("stdin", NotScheduling),
    f("stdinOnce", NotScheduling),
    f("terminationMessagePath", NotScheduling),
    f("terminationMessagePolicy", NotScheduling),
    f("tty", NotScheduling),
    f("volumeDevices", NotScheduling),
    f("volumeMounts", NotScheduling),
    f("workingDir", NotScheduling),
];

/// A container's `ports[]` entry: only those with a host port filter (containers' and sidecars').
pub const CONTAINER_PORT: &[Field] = &[
    f("containerPort", Filter("NodePorts: the host port under hostNetwork")),
    f("hostIP", Filter("NodePorts")),
    f("hostPort", Filter("NodePorts")),
    f("name", NotScheduling),
    f("protocol", Filter("NodePorts")),
];

/// A container's `resources`.
pub const RESOURCES: &[Field] = &[
    f("claims", Cycle("DynamicResources: through the pod's resourceClaims")),
    f("limits", Filter("NodeResourcesFit: a limit without a request requests the limit")),
    f("requests", Filter("NodeResourcesFit")),
];

/// A volume (`spec.volumes[]`), by its source.
pub const VOLUME: &[Field] = &[
    f("awsElasticBlockStore", Filter("VolumeRestrictions and NodeVolumeLimits")),
    f("azureDisk", Filter("NodeVolumeLimits")),
    f("azureFile", Waits("NodeVolumeLimits")),
    f("cephfs", NotScheduling),
    f("cinder", Filter("NodeVolumeLimits")),
    f("configMap", NotScheduling),
    f("csi", Waits("NodeVolumeLimits")),
    f("downwardAPI", NotScheduling),
    f("emptyDir", NotScheduling),
    f("ephemeral", Filter("VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits")),
    f("fc", NotScheduling),
    f("flexVolume", NotScheduling),
    f("flocker", NotScheduling),
    f("gcePersistentDisk", Filter("VolumeRestrictions and NodeVolumeLimits")),
    f("gitRepo", NotScheduling),
    f("glusterfs", NotScheduling),
    f("hostPath", NotScheduling),
    f("image", NotScheduling),
    f("iscsi", Filter("VolumeRestrictions")),
    f("name", NotScheduling),
    f("nfs", NotScheduling),
    f("persistentVolumeClaim", Filter("VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits")),
    f("photonPersistentDisk", NotScheduling),
    f("portworxVolume", Waits("NodeVolumeLimits")),
    f("projected", NotScheduling),
    f("quobyte", NotScheduling),
    f("rbd", Filter("VolumeRestrictions and NodeVolumeLimits")),
    f("scaleIO", NotScheduling),
    f("secret", NotScheduling),
    f("storageos", NotScheduling),
    f("vsphereVolume", Waits("NodeVolumeLimits")),
];

/// Whether `field` of `list` is one the cycle does not evaluate (a pod setting it waits).
pub fn waits(list: &[Field], field: &str) -> bool {
    list.iter().any(|f| f.field == field && matches!(f.coverage, Waits(_)))
}

/// The kube-scheduler plugin a waiting field needs, for the message (`None`: it does not wait).
pub fn waits_for(list: &[Field], field: &str) -> Option<&'static str> {
    list.iter().find(|f| f.field == field).and_then(|f| match f.coverage {
        Waits(plugin) => Some(plugin),
        _ => None,
    })
}

/// The kube-scheduler plugins a field path a pod was held back for needs
/// (`spec.volumes[0].persistentVolumeClaim` → `VolumeBinding, …`), for messages.
pub fn needs(path: &str) -> Option<&'static str> {
    if let Some(rest) = path.strip_prefix("spec.volumes[") {
        return rest.split_once("].").and_then(|(_, source)| waits_for(VOLUME, source));
    }
    if path.ends_with(".resources.claims") {
        return waits_for(RESOURCES, "claims");
    }
    path.strip_prefix("spec.").and_then(|field| waits_for(POD_SPEC, field))
}

/// The lists as the README's table (between `<!-- coverage -->` markers, held equal by
/// `tests/coverage.rs`): every field kube-scheduler reads to place a pod, where it is and what the
/// cycle does with it. Fields kube-scheduler does not read are left out; rows that only point to
/// another list are that list's rows.
pub fn markdown() -> String {
    let parts: [(&str, &[Field]); 8] = [
        ("spec.", POD_SPEC),
        ("spec.affinity.", AFFINITY),
        ("spec.affinity.pod(Anti)Affinity.required…[].", AFFINITY_TERM),
        ("spec.topologySpreadConstraints[].", SPREAD),
        ("containers[], initContainers[]: ", CONTAINER),
        ("containers[].ports[].", CONTAINER_PORT),
        ("containers[].resources.", RESOURCES),
        ("spec.volumes[].", VOLUME),
    ];
    let mut out = String::from("| field | what the cycle does |\n|---|---|\n");
    for (prefix, list) in parts {
        for f in list {
            let what = match f.coverage {
                Filter(plugin) => format!("filters, as kube-scheduler's {plugin}"),
                Score(plugin) => {
                    format!(
                        "never keeps a pod off a node (kube-scheduler's {plugin} only scores by it; the cycle does not)"
                    )
                }
                Cycle(what) if what.starts_with("see ") => continue,
                Cycle(what) => what.to_string(),
                Waits(plugin) => {
                    format!(
                        "**waits**: the pod is not placed and its gang's message names the field (needs {plugin})"
                    )
                }
                NotScheduling => continue,
            };
            out.push_str(&format!("| `{prefix}{}` | {what} |\n", f.field));
        }
    }
    out
}
