//! Kubernetes objects → the model: k8s-openapi `Node`, `Pod`, `PriorityClass` and
//! `PodDisruptionBudget`.
//!
//! Total: anything that cannot be understood is a [`FieldError`] with its field path, never a panic
//! or a silent default. Gang membership is not read here; the dialects resolve it
//! ([`crate::read::cluster`]).

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::Value;

use crate::read::coverage::{self, POD_SPEC, RESOURCES, VOLUME};
use crate::read::error::FieldError;
use crate::read::model::SmolStr;
use crate::read::model::terms::{
    AffinityTerm, BIND_ALL, HostPort, Inclusion, PodTerms, SpreadConstraint, Unsatisfiable,
};
use crate::read::model::volume::{PodResourceClaim, PodVolume};
use crate::read::model::{
    Budget, LabelOperator, LabelRequirement, LabelSelector, Node, NodeSelectorOperator,
    NodeSelectorRequirement, NodeSelectorTerm, ObjectKey, Pod, PodPhase, PreemptionPolicy, Taint,
    TaintEffect, Time, Toleration, TolerationOperator,
};
use crate::read::resources::{
    ContainerResources, PODS, PodLevel, Quantities, Resources, effective_requests_of, resource_list,
};
use crate::read::volume;

/// Priority class name → value, and the global default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PriorityClasses {
    values: BTreeMap<String, i32>,
    default: Option<i32>,
}

impl PriorityClasses {
    pub fn from_objects(classes: &[PriorityClass]) -> Self {
        let mut pcs = PriorityClasses::default();
        for pc in classes {
            let Some(name) = pc.metadata.name.clone() else { continue };
            let value = pc.value.unwrap_or(0);
            if pc.global_default == Some(true) {
                // Several global defaults: the lowest wins, as the admission plugin picks it.
                pcs.default = Some(pcs.default.map_or(value, |d| d.min(value)));
            }
            pcs.values.insert(name, value);
        }
        pcs
    }

    /// A pod's priority: `spec.priority` (set by admission) wins; else its class; else the global
    /// default; else 0. An unknown class name is an error, as admission would reject the pod.
    pub fn resolve(&self, spec: &core::PodSpec) -> Result<i32, FieldError> {
        self.resolve_of(spec.priority, spec.priority_class_name.as_deref())
    }

    /// The value of class `name` (the system classes included); `None` when no such class exists.
    pub fn value_of(&self, name: &str) -> Option<i32> {
        self.resolve_of(None, Some(name).filter(|n| !n.is_empty())).ok().filter(|_| !name.is_empty())
    }

    /// [`PriorityClasses::resolve`] of `spec.priority` and `spec.priorityClassName`.
    fn resolve_of(&self, priority: Option<i32>, class: Option<&str>) -> Result<i32, FieldError> {
        if let Some(p) = priority {
            return Ok(p);
        }
        match class {
            Some("system-cluster-critical") => Ok(2_000_000_000),
            Some("system-node-critical") => Ok(2_000_001_000),
            Some(name) if !name.is_empty() => self.values.get(name).copied().ok_or_else(|| {
                FieldError::new("spec.priorityClassName", format!("priority class {name:?} not found"))
            }),
            _ => Ok(self.default.unwrap_or(0)),
        }
    }
}

/// Deserialises a raw object into a k8s-openapi type in place (no copy), an error naming the exact
/// field that could not be read.
fn typed<'de, T: serde::Deserialize<'de>>(v: &'de Value) -> Result<T, Vec<FieldError>> {
    crate::read::error::decode(v, "", crate::read::error::Wording::BuiltIn)
}

/// The pod spec at `spec` (a pod template's), decoded as the API server decodes it (an error names
/// the exact field, under `path`: `spec.template.spec.volumes[0].configMap.defaultMode`), with
/// only the fields the scheduler reads ([`pod`], [`crate::read::resources::effective_requests`]: containers' and init
/// containers' names, resources, ports and restart policy, overhead, pod-level resources, node
/// selector, node and pod affinity, topology spread constraints, host network, tolerations,
/// priority, preemption policy, scheduler, node name, scheduling gates, the volumes and resource
/// claims the volume filters read or that make a pod wait) and the
/// dialects read (`schedulingGroup`; 1.35's `workloadRef`, kept as written) — what `simulate`
/// stamps its pods from, so that a pod costs its scheduling fields, not its template (a 100 KB
/// template of environment variables, copied for 2,000 pods, was 443 MB). Converting the result
/// gives the pod that converting the whole spec would (`scheduling_spec_converts_as_the_whole_spec`).
pub fn scheduling_spec(spec: Option<&Value>, path: &str) -> Result<Value, Vec<FieldError>> {
    let full: core::PodSpec = match spec {
        None | Some(Value::Null) => core::PodSpec::default(),
        Some(v) => crate::read::error::decode(v, path, crate::read::error::Wording::BuiltIn)?,
    };
    let slim = |c: &core::Container| core::Container {
        name: c.name.clone(),
        resources: c.resources.clone(),
        restart_policy: c.restart_policy.clone(),
        ports: c.ports.clone(),
        ..core::Container::default()
    };
    let affinity = full.affinity.as_ref().map(|a| core::Affinity {
        node_affinity: a.node_affinity.clone(),
        pod_affinity: a.pod_affinity.clone(),
        pod_anti_affinity: a.pod_anti_affinity.clone(),
    });
    let pruned = core::PodSpec {
        containers: full.containers.iter().map(slim).collect(),
        init_containers: full.init_containers.as_ref().map(|cs| cs.iter().map(slim).collect()),
        overhead: full.overhead.clone(),
        node_selector: full.node_selector.clone(),
        affinity,
        tolerations: full.tolerations.clone(),
        host_network: full.host_network,
        topology_spread_constraints: full.topology_spread_constraints.clone(),
        resources: full.resources.clone(),
        // Only the volumes the cycle reads: those the volume filters read (their sources alone),
        // and those it does not evaluate, which make the pod wait — in their order.
        volumes: full
            .volumes
            .as_ref()
            .map(|vs| {
                vs.iter()
                    .filter_map(|v| {
                        if waiting_sources(v).next().is_some() {
                            return Some(v.clone());
                        }
                        volume::scheduling_volume(v)
                    })
                    .collect::<Vec<_>>()
            })
            .filter(|vs| !vs.is_empty()),
        priority: full.priority,
        priority_class_name: full.priority_class_name.clone(),
        preemption_policy: full.preemption_policy.clone(),
        scheduler_name: full.scheduler_name.clone(),
        node_name: full.node_name.clone(),
        scheduling_gates: full.scheduling_gates.clone(),
        scheduling_group: full.scheduling_group.clone(),
        resource_claims: full.resource_claims.clone(),
        ..core::PodSpec::default()
    };
    let mut out = serde_json::to_value(pruned).map_err(|e| vec![FieldError::new(path, e.to_string())])?;
    if let (Some(r), Some(map)) = (spec.and_then(|s| s.get("workloadRef")), out.as_object_mut()) {
        map.insert("workloadRef".into(), r.clone());
    }
    Ok(out)
}

/// What the API server would refuse in the labels and annotations of the metadata at `meta` (an
/// object's, or a pod template's, under `path`): a value that is not a string. YAML reads an
/// unquoted `yes` or `on` as `true`, and kubectl sends it so; the API server cannot decode it into
/// `ObjectMeta` and refuses the object before any webhook sees it. Every such value is named.
pub fn metadata_errors(meta: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for field in ["labels", "annotations"] {
        let Some(map) = meta.and_then(|m| m.get(field)).and_then(Value::as_object) else { continue };
        for (k, v) in map {
            if v.is_string() {
                continue;
            }
            let hint = if v.is_boolean() {
                ": quote it (YAML reads an unquoted yes, no, on, off, true or false as a boolean)"
            } else if v.is_number() {
                ": quote it"
            } else {
                ""
            };
            errors.push(FieldError::new(
                crate::read::error::join_path(path, &format!("metadata.{field}[{k}]")),
                format!("Invalid value: {v}: must be a string{hint}"),
            ));
        }
    }
    errors
}

/// A raw Node.
pub fn node_from_value(v: &Value) -> Result<Node, Vec<FieldError>> {
    node(&typed::<core::Node>(v)?)
}

/// A raw Pod, decoded whole into k8s-openapi's `Pod` first: every field is checked to have the
/// type the API server gives it, read by the model or not — what a front door that must refuse
/// what the API server would refuse needs (`kubectl gang validate`).
pub fn pod_from_value(v: &Value, priorities: &PriorityClasses) -> Result<Pod, Vec<FieldError>> {
    pod(&typed::<core::Pod>(v)?, priorities)
}

/// A raw Pod, read straight from its JSON: only the fields the model is made of, nothing else
/// decoded or copied (a typed decode allocates every field of every container; at 140,000 pods
/// that was half of a bulk load). The result is [`pod_from_value`]'s whenever a field the model
/// reads is missing, malformed or refused: those pods go through [`pod_from_value`] for its very
/// errors. Fields the model does not read are not checked — the API server did that for the
/// pods a watch delivers — so a pod with one of those malformed converts here and is refused by
/// [`pod_from_value`].
pub fn pod_from_raw(v: &Value, priorities: &PriorityClasses) -> Result<Pod, Vec<FieldError>> {
    match PodFields::raw(v).map(|f| pod_of(f, priorities)) {
        Ok(Ok(p)) => Ok(p),
        _ => pod_from_value(v, priorities),
    }
}

fn effect(path: &str, e: &str) -> Result<TaintEffect, FieldError> {
    match e {
        "NoSchedule" => Ok(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Ok(TaintEffect::PreferNoSchedule),
        "NoExecute" => Ok(TaintEffect::NoExecute),
        other => Err(FieldError::new(path, format!("unknown taint effect {other:?}"))),
    }
}

/// A Node. Allocatable comes from `status.allocatable` (falling back to capacity). Readiness: the
/// `Ready` condition must be `True`; a node that reports no conditions at all (hand-written
/// snapshot files) is taken as Ready.
pub fn node(n: &core::Node) -> Result<Node, Vec<FieldError>> {
    let mut errors = Vec::new();
    let name = n.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        errors.push(FieldError::new("metadata.name", "required"));
    }
    let status = n.status.as_ref();
    let list = status.and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
    let allocatable = match list {
        Some(l) => resource_list("status.allocatable", l).unwrap_or_else(|e| {
            errors.extend(e);
            Resources::new()
        }),
        None => Resources::new(),
    };
    let spec = n.spec.as_ref();
    let mut taints = Vec::new();
    for (i, t) in spec.and_then(|s| s.taints.as_ref()).into_iter().flatten().enumerate() {
        match effect(&format!("spec.taints[{i}].effect"), &t.effect) {
            Ok(effect) => taints.push(Taint {
                key: t.key.clone(),
                value: t.value.clone().filter(|v| !v.is_empty()),
                effect,
            }),
            Err(e) => errors.push(e),
        }
    }
    let conditions = status.and_then(|s| s.conditions.as_ref());
    let ready = match conditions {
        None => true,
        Some(cs) if cs.is_empty() => true,
        Some(cs) => cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"),
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Node {
        name: name.into(),
        allocatable,
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        ready,
    })
}

fn requirement(path: &str, r: &Requirement<'_>) -> Result<NodeSelectorRequirement, FieldError> {
    let Some(operator) = NodeSelectorOperator::parse(r.operator) else {
        return Err(FieldError::new(
            format!("{path}.operator"),
            format!("unknown operator {:?}", r.operator),
        ));
    };
    Ok(NodeSelectorRequirement {
        key: r.key.to_string(),
        operator,
        values: r.values.iter().flatten().map(|v| v.to_string()).collect(),
    })
}

/// A Pod. Namespace defaults to `default`; `schedulerName` to `default-scheduler`, as the API
/// server defaults them.
pub fn pod(p: &core::Pod, priorities: &PriorityClasses) -> Result<Pod, Vec<FieldError>> {
    pod_of(PodFields::typed(p), priorities)
}

/// A required node selector requirement (`matchExpressions` or `matchFields`), borrowed.
#[derive(Debug)]
struct Requirement<'a> {
    key: &'a str,
    operator: &'a str,
    values: Option<Vec<&'a str>>,
}

/// A required node affinity term, borrowed.
#[derive(Debug, Default)]
struct Term<'a> {
    expressions: Vec<Requirement<'a>>,
    fields: Vec<Requirement<'a>>,
}

/// A toleration, borrowed.
#[derive(Debug)]
struct Tolerates<'a> {
    key: Option<&'a str>,
    operator: Option<&'a str>,
    value: Option<&'a str>,
    effect: Option<&'a str>,
}

/// Every field of a Pod the model is made of, borrowed from a typed k8s-openapi `Pod` or from
/// its raw JSON alike: one conversion ([`pod_of`]) for both.
#[derive(Debug, Default)]
struct PodFields<'a> {
    name: Option<&'a str>,
    namespace: Option<&'a str>,
    uid: Option<&'a str>,
    created: Option<Time>,
    deleting: bool,
    labels: Option<BTreeMap<String, String>>,
    exclusive_topology: Option<&'a str>,
    /// The gang state gang-scheduler keeps on the pod (`kube-gang.io/state`).
    state: Option<&'a str>,
    /// JobSet's node-selector strategy: exclusive placement by node labels and taints, no
    /// affinity injected (the exclusive topology is then not the scheduler's to enforce).
    node_selector_strategy: bool,
    containers: Vec<ContainerResources<'a>>,
    init_containers: Vec<ContainerResources<'a>>,
    overhead: Option<Quantities<'a>>,
    priority: Option<i32>,
    priority_class_name: Option<&'a str>,
    /// `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`.
    terms: Option<Vec<Term<'a>>>,
    tolerations: Vec<Tolerates<'a>>,
    node_selector: Option<BTreeMap<String, String>>,
    node_name: Option<&'a str>,
    scheduler_name: Option<&'a str>,
    preemption_policy: Option<&'a str>,
    scheduling_gates: Vec<&'a str>,
    phase: Option<&'a str>,
    /// `status.startTime`.
    started: Option<Time>,
    /// The `kube-gang.io/time-limit` annotation.
    time_limit: Option<&'a str>,
    /// `spec.activeDeadlineSeconds`.
    active_deadline: Option<i64>,
    nominated: Option<&'a str>,
    reason: Option<&'a str>,
    message: Option<&'a str>,
    /// `spec.hostNetwork`: each port's `hostPort` defaults to its `containerPort`.
    host_network: bool,
    /// The ports of the sidecars, then of the containers, that bind a host port.
    ports: Vec<PortFields<'a>>,
    /// `spec.affinity.podAffinity` and `podAntiAffinity`, decoded (borrowed from a typed pod; a
    /// raw one decodes just these, which few pods have).
    pod_affinity: Option<Cow<'a, core::PodAffinity>>,
    pod_anti_affinity: Option<Cow<'a, core::PodAntiAffinity>>,
    /// `spec.topologySpreadConstraints`, decoded the same way.
    spread: Option<Cow<'a, [core::TopologySpreadConstraint]>>,
    /// Pod-level `spec.resources`.
    pod_level: PodLevel<'a>,
    /// Volumes with a source the cycle does not evaluate: (index, source).
    waiting_volumes: Vec<(usize, &'a str)>,
    /// `spec.volumes` and `spec.resourceClaims`, as the volume filters read them ([`volume`]).
    volumes: Vec<PodVolume>,
    resource_claims: Vec<PodResourceClaim>,
}

/// A container port that binds a port of the node: `hostPort`, or `containerPort` under
/// `hostNetwork` (which the API server defaults `hostPort` to).
#[derive(Clone, Copy, Debug, Default)]
struct PortFields<'a> {
    container_port: i32,
    host_port: i32,
    protocol: Option<&'a str>,
    host_ip: Option<&'a str>,
}

impl PortFields<'_> {
    /// The node's port it binds (0: none).
    fn bound(&self, host_network: bool) -> i32 {
        if self.host_port == 0 && host_network { self.container_port } else { self.host_port }
    }
}

/// The sources of a volume, by their JSON names, that the cycle does not evaluate.
fn waiting_sources(v: &core::Volume) -> impl Iterator<Item = &'static str> + '_ {
    [
        ("awsElasticBlockStore", v.aws_elastic_block_store.is_some()),
        ("azureDisk", v.azure_disk.is_some()),
        ("azureFile", v.azure_file.is_some()),
        ("cephfs", v.cephfs.is_some()),
        ("cinder", v.cinder.is_some()),
        ("configMap", v.config_map.is_some()),
        ("csi", v.csi.is_some()),
        ("downwardAPI", v.downward_api.is_some()),
        ("emptyDir", v.empty_dir.is_some()),
        ("ephemeral", v.ephemeral.is_some()),
        ("fc", v.fc.is_some()),
        ("flexVolume", v.flex_volume.is_some()),
        ("flocker", v.flocker.is_some()),
        ("gcePersistentDisk", v.gce_persistent_disk.is_some()),
        ("gitRepo", v.git_repo.is_some()),
        ("glusterfs", v.glusterfs.is_some()),
        ("hostPath", v.host_path.is_some()),
        ("image", v.image.is_some()),
        ("iscsi", v.iscsi.is_some()),
        ("nfs", v.nfs.is_some()),
        ("persistentVolumeClaim", v.persistent_volume_claim.is_some()),
        ("photonPersistentDisk", v.photon_persistent_disk.is_some()),
        ("portworxVolume", v.portworx_volume.is_some()),
        ("projected", v.projected.is_some()),
        ("quobyte", v.quobyte.is_some()),
        ("rbd", v.rbd.is_some()),
        ("scaleIO", v.scale_io.is_some()),
        ("secret", v.secret.is_some()),
        ("storageos", v.storageos.is_some()),
        ("vsphereVolume", v.vsphere_volume.is_some()),
    ]
    .into_iter()
    .filter(|&(name, set)| set && coverage::waits(VOLUME, name))
    .map(|(name, _)| name)
}

fn requirement_of(r: &core::NodeSelectorRequirement) -> Requirement<'_> {
    Requirement {
        key: &r.key,
        operator: &r.operator,
        values: r.values.as_ref().map(|v| v.iter().map(String::as_str).collect()),
    }
}

impl<'a> PodFields<'a> {
    fn typed(p: &'a core::Pod) -> Self {
        let meta = &p.metadata;
        let spec = p.spec.as_ref();
        let status = p.status.as_ref();
        let quantities = |l: &'a BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >| { l.iter().map(|(k, q)| (k.as_str(), q.0.as_str())).collect() };
        let terms = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
            .map(|sel| {
                sel.node_selector_terms
                    .iter()
                    .map(|t| Term {
                        expressions: t.match_expressions.iter().flatten().map(requirement_of).collect(),
                        fields: t.match_fields.iter().flatten().map(requirement_of).collect(),
                    })
                    .collect()
            });
        let affinity = spec.and_then(|s| s.affinity.as_ref());
        let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
        PodFields {
            name: meta.name.as_deref(),
            namespace: meta.namespace.as_deref(),
            uid: meta.uid.as_deref(),
            created: meta.creation_timestamp.as_ref().map(Time::from_k8s),
            deleting: meta.deletion_timestamp.is_some(),
            labels: meta.labels.clone(),
            exclusive_topology: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::read::labels::JOBSET_EXCLUSIVE_TOPOLOGY))
                .map(String::as_str),
            state: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::read::labels::ANNOTATION_STATE))
                .map(String::as_str),
            node_selector_strategy: meta
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(crate::read::labels::JOBSET_NODE_SELECTOR_STRATEGY)),
            containers: spec.into_iter().flat_map(|s| &s.containers).map(ContainerResources::of).collect(),
            init_containers: spec
                .and_then(|s| s.init_containers.as_ref())
                .into_iter()
                .flatten()
                .map(ContainerResources::of)
                .collect(),
            overhead: spec.and_then(|s| s.overhead.as_ref()).map(quantities),
            priority: spec.and_then(|s| s.priority),
            priority_class_name: spec.and_then(|s| s.priority_class_name.as_deref()),
            terms,
            tolerations: spec
                .and_then(|s| s.tolerations.as_ref())
                .into_iter()
                .flatten()
                .map(|t| Tolerates {
                    key: t.key.as_deref(),
                    operator: t.operator.as_deref(),
                    value: t.value.as_deref(),
                    effect: t.effect.as_deref(),
                })
                .collect(),
            node_selector: spec.and_then(|s| s.node_selector.clone()),
            node_name: spec.and_then(|s| s.node_name.as_deref()),
            scheduler_name: spec.and_then(|s| s.scheduler_name.as_deref()),
            preemption_policy: spec.and_then(|s| s.preemption_policy.as_deref()),
            scheduling_gates: spec
                .and_then(|s| s.scheduling_gates.as_ref())
                .into_iter()
                .flatten()
                .map(|g| g.name.as_str())
                .collect(),
            phase: status.and_then(|s| s.phase.as_deref()),
            started: status.and_then(|s| s.start_time.as_ref()).map(Time::from_k8s),
            time_limit: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::read::labels::ANNOTATION_TIME_LIMIT))
                .map(String::as_str),
            active_deadline: spec.and_then(|s| s.active_deadline_seconds),
            nominated: status.and_then(|s| s.nominated_node_name.as_deref()),
            reason: status.and_then(|s| s.reason.as_deref()),
            message: status.and_then(|s| s.message.as_deref()),
            host_network,
            ports: spec
                .into_iter()
                .flat_map(|s| {
                    let sidecars = s
                        .init_containers
                        .iter()
                        .flatten()
                        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
                    sidecars.chain(&s.containers)
                })
                .flat_map(|c| c.ports.iter().flatten())
                .map(|p| PortFields {
                    container_port: p.container_port,
                    host_port: p.host_port.unwrap_or(0),
                    protocol: p.protocol.as_deref(),
                    host_ip: p.host_ip.as_deref(),
                })
                .filter(|p| p.bound(host_network) > 0)
                .collect(),
            pod_affinity: affinity.and_then(|a| a.pod_affinity.as_ref()).map(Cow::Borrowed),
            pod_anti_affinity: affinity.and_then(|a| a.pod_anti_affinity.as_ref()).map(Cow::Borrowed),
            spread: spec.and_then(|s| s.topology_spread_constraints.as_deref()).map(Cow::Borrowed),
            pod_level: PodLevel {
                requests: spec
                    .and_then(|s| s.resources.as_ref())
                    .and_then(|r| r.requests.as_ref())
                    .map(quantities),
                limits: spec
                    .and_then(|s| s.resources.as_ref())
                    .and_then(|r| r.limits.as_ref())
                    .map(quantities),
            },
            waiting_volumes: spec
                .and_then(|s| s.volumes.as_ref())
                .into_iter()
                .flatten()
                .enumerate()
                .flat_map(|(i, v)| waiting_sources(v).map(move |source| (i, source)))
                .collect(),
            volumes: volume::pod_volumes(
                meta.name.as_deref().unwrap_or_default(),
                spec.and_then(|s| s.volumes.as_deref()).unwrap_or_default(),
            ),
            resource_claims: volume::pod_resource_claims(
                spec.and_then(|s| s.resource_claims.as_deref()).unwrap_or_default(),
                status.and_then(|s| s.resource_claim_statuses.as_deref()).unwrap_or_default(),
            ),
        }
    }

    /// The fields from raw JSON, each where and as k8s-openapi reads it (absent and `null` are
    /// alike); [`Odd`] where one is not of the type it decodes.
    fn raw(v: &'a Value) -> Result<Self, Odd> {
        let root = v.as_object().ok_or(Odd)?;
        // The typed decode refuses another type's object (and a `null` here).
        for (key, is) in [("apiVersion", "v1"), ("kind", "Pod")] {
            if root.get(key).is_some_and(|v| v.as_str() != Some(is)) {
                return Err(Odd);
            }
        }
        let root = Some(root);
        let meta = raw::object(root, "metadata")?;
        let spec = raw::object(root, "spec")?;
        let status = raw::object(root, "status")?;
        let annotations = raw::object(meta, "annotations")?;
        // Every annotation is a string (the typed decode checks them all).
        if annotations.is_some_and(|a| a.values().any(|v| !v.is_string())) {
            return Err(Odd);
        }
        let containers = |key: &str| -> Result<Vec<ContainerResources<'a>>, Odd> {
            raw::array(spec, key)?
                .iter()
                .map(|c| {
                    let c = Some(c.as_object().ok_or(Odd)?);
                    let resources = raw::object(c, "resources")?;
                    let claims = raw::array(resources, "claims")?;
                    for claim in claims {
                        let claim = Some(claim.as_object().ok_or(Odd)?);
                        raw::string(claim, "name")?;
                        raw::string(claim, "request")?;
                    }
                    Ok(ContainerResources {
                        requests: raw::quantities(resources, "requests")?,
                        limits: raw::quantities(resources, "limits")?,
                        sidecar: raw::string(c, "restartPolicy")? == Some("Always"),
                        claims: !claims.is_empty(),
                    })
                })
                .collect()
        };
        let requirements = |term: Option<&'a serde_json::Map<String, Value>>, key: &str| {
            raw::array(term, key)?
                .iter()
                .map(|r| {
                    let r = Some(r.as_object().ok_or(Odd)?);
                    let values = match raw::field(r, "values") {
                        None => None,
                        Some(v) => {
                            Some(v.as_array().ok_or(Odd)?.iter().map(raw::str).collect::<Result<_, _>>()?)
                        }
                    };
                    Ok(Requirement {
                        key: raw::string(r, "key")?.unwrap_or(""),
                        operator: raw::string(r, "operator")?.unwrap_or(""),
                        values,
                    })
                })
                .collect::<Result<Vec<_>, Odd>>()
        };
        let affinity = raw::object(spec, "affinity")?;
        let required = raw::object(
            raw::object(affinity, "nodeAffinity")?,
            "requiredDuringSchedulingIgnoredDuringExecution",
        )?;
        let terms = match required {
            None => None,
            Some(sel) => Some(
                raw::array(Some(sel), "nodeSelectorTerms")?
                    .iter()
                    .map(|t| {
                        let t = Some(t.as_object().ok_or(Odd)?);
                        Ok(Term {
                            expressions: requirements(t, "matchExpressions")?,
                            fields: requirements(t, "matchFields")?,
                        })
                    })
                    .collect::<Result<Vec<_>, Odd>>()?,
            ),
        };
        let tolerations = raw::array(spec, "tolerations")?
            .iter()
            .map(|t| {
                let t = Some(t.as_object().ok_or(Odd)?);
                // Read by the typed decode, though not by the model.
                if raw::field(t, "tolerationSeconds").is_some_and(|s| s.as_i64().is_none()) {
                    return Err(Odd);
                }
                Ok(Tolerates {
                    key: raw::string(t, "key")?,
                    operator: raw::string(t, "operator")?,
                    value: raw::string(t, "value")?,
                    effect: raw::string(t, "effect")?,
                })
            })
            .collect::<Result<Vec<_>, Odd>>()?;
        let scheduling_gates = raw::array(spec, "schedulingGates")?
            .iter()
            .map(|g| raw::string(Some(g.as_object().ok_or(Odd)?), "name").map(Option::unwrap_or_default))
            .collect::<Result<Vec<_>, Odd>>()?;
        let host_network = raw::boolean(spec, "hostNetwork")?.unwrap_or(false);
        let mut ports = Vec::new();
        // Sidecars first, then containers, as kube-scheduler lists them; every port is read, as
        // the typed decode reads them.
        for (key, always) in [("initContainers", false), ("containers", true)] {
            for c in raw::array(spec, key)? {
                let c = Some(c.as_object().ok_or(Odd)?);
                let runs = always || raw::string(c, "restartPolicy")? == Some("Always");
                for p in raw::array(c, "ports")? {
                    let p = Some(p.as_object().ok_or(Odd)?);
                    raw::string(p, "name")?;
                    let port = PortFields {
                        container_port: raw::int32(p, "containerPort")?.unwrap_or(0),
                        host_port: raw::int32(p, "hostPort")?.unwrap_or(0),
                        protocol: raw::string(p, "protocol")?,
                        host_ip: raw::string(p, "hostIP")?,
                    };
                    if runs && port.bound(host_network) > 0 {
                        ports.push(port);
                    }
                }
            }
        }
        fn decoded<'a, T: serde::Deserialize<'a>>(v: Option<&'a Value>) -> Result<Option<T>, Odd> {
            v.map(|v| T::deserialize(v).map_err(|_| Odd)).transpose()
        }
        let pod_affinity = decoded::<core::PodAffinity>(raw::field(affinity, "podAffinity"))?;
        let pod_anti_affinity = decoded::<core::PodAntiAffinity>(raw::field(affinity, "podAntiAffinity"))?;
        let spread =
            decoded::<Vec<core::TopologySpreadConstraint>>(raw::field(spec, "topologySpreadConstraints"))?;
        let resources = raw::object(spec, "resources")?;
        for claim in raw::array(resources, "claims")? {
            let claim = Some(claim.as_object().ok_or(Odd)?);
            raw::string(claim, "name")?;
            raw::string(claim, "request")?;
        }
        let mut waiting_volumes = Vec::new();
        for (i, v) in raw::array(spec, "volumes")?.iter().enumerate() {
            let v = v.as_object().ok_or(Odd)?;
            raw::string(Some(v), "name")?;
            for (source, x) in v {
                if x.is_null() || source == "name" {
                    continue;
                }
                // A source of the wrong type is refused by the typed read, whatever the source.
                if !x.is_object() {
                    return Err(Odd);
                }
                if coverage::waits(VOLUME, source) {
                    waiting_volumes.push((i, source.as_str()));
                }
            }
        }
        let claims = raw::array(spec, "resourceClaims")?;
        for c in claims {
            let c = Some(c.as_object().ok_or(Odd)?);
            for key in ["name", "resourceClaimName", "resourceClaimTemplateName"] {
                raw::string(c, key)?;
            }
        }
        Ok(PodFields {
            name: raw::string(meta, "name")?,
            namespace: raw::string(meta, "namespace")?,
            uid: raw::string(meta, "uid")?,
            created: raw::time(meta, "creationTimestamp")?,
            deleting: raw::time(meta, "deletionTimestamp")?.is_some(),
            labels: raw::strings(meta, "labels")?,
            exclusive_topology: raw::string(annotations, crate::read::labels::JOBSET_EXCLUSIVE_TOPOLOGY)?,
            state: raw::string(annotations, crate::read::labels::ANNOTATION_STATE)?,
            node_selector_strategy: raw::field(
                annotations,
                crate::read::labels::JOBSET_NODE_SELECTOR_STRATEGY,
            )
            .is_some(),
            containers: containers("containers")?,
            init_containers: containers("initContainers")?,
            overhead: raw::quantities(spec, "overhead")?,
            priority: raw::int32(spec, "priority")?,
            priority_class_name: raw::string(spec, "priorityClassName")?,
            terms,
            tolerations,
            node_selector: raw::strings(spec, "nodeSelector")?,
            node_name: raw::string(spec, "nodeName")?,
            scheduler_name: raw::string(spec, "schedulerName")?,
            preemption_policy: raw::string(spec, "preemptionPolicy")?,
            scheduling_gates,
            phase: raw::string(status, "phase")?,
            started: raw::time(status, "startTime")?,
            time_limit: raw::string(annotations, crate::read::labels::ANNOTATION_TIME_LIMIT)?,
            active_deadline: raw::int64(spec, "activeDeadlineSeconds")?,
            nominated: raw::string(status, "nominatedNodeName")?,
            reason: raw::string(status, "reason")?,
            message: raw::string(status, "message")?,
            host_network,
            ports,
            pod_affinity: pod_affinity.map(Cow::Owned),
            pod_anti_affinity: pod_anti_affinity.map(Cow::Owned),
            spread: spread.map(Cow::Owned),
            pod_level: PodLevel {
                requests: raw::quantities(resources, "requests")?,
                limits: raw::quantities(resources, "limits")?,
            },
            waiting_volumes,
            volumes: volume::pod_volumes_raw(raw::string(meta, "name")?.unwrap_or_default(), spec)
                .ok_or(Odd)?,
            resource_claims: volume::pod_resource_claims_raw(spec, status).ok_or(Odd)?,
        })
    }
}

/// A field of raw JSON not of the type k8s-openapi decodes it as: the pod is left to the typed
/// decode, for its error.
#[derive(Debug)]
struct Odd;

/// Reading raw JSON as k8s-openapi decodes it: a missing field and `null` are alike.
mod raw {
    use std::collections::BTreeMap;

    use serde_json::{Map, Value};

    use super::Odd;
    use crate::read::model::Time;
    use crate::read::resources::Quantities;

    type Fields<'a> = Option<&'a Map<String, Value>>;

    pub fn field<'a>(m: Fields<'a>, key: &str) -> Option<&'a Value> {
        m?.get(key).filter(|v| !v.is_null())
    }

    pub fn object<'a>(m: Fields<'a>, key: &str) -> Result<Fields<'a>, Odd> {
        field(m, key).map(|v| v.as_object().ok_or(Odd)).transpose()
    }

    pub fn str(v: &Value) -> Result<&str, Odd> {
        v.as_str().ok_or(Odd)
    }

    pub fn string<'a>(m: Fields<'a>, key: &str) -> Result<Option<&'a str>, Odd> {
        field(m, key).map(str).transpose()
    }

    pub fn array<'a>(m: Fields<'a>, key: &str) -> Result<&'a [Value], Odd> {
        field(m, key).map_or(Ok(&[][..]), |v| v.as_array().map(Vec::as_slice).ok_or(Odd))
    }

    /// A map of strings, copied (the model keeps it).
    pub fn strings(m: Fields<'_>, key: &str) -> Result<Option<BTreeMap<String, String>>, Odd> {
        let Some(o) = object(m, key)? else { return Ok(None) };
        o.iter().map(|(k, v)| Ok((k.clone(), str(v)?.to_string()))).collect::<Result<_, _>>().map(Some)
    }

    /// A resource list whose quantities are strings (a number is left to the typed decode), in
    /// name order as the typed decode's map has it.
    pub fn quantities<'a>(m: Fields<'a>, key: &str) -> Result<Option<Quantities<'a>>, Odd> {
        let Some(o) = object(m, key)? else { return Ok(None) };
        let mut list: Quantities<'a> =
            o.iter().map(|(k, v)| Ok((k.as_str(), str(v)?))).collect::<Result<_, _>>()?;
        list.sort_unstable_by_key(|(k, _)| *k);
        Ok(Some(list))
    }

    pub fn boolean(m: Fields<'_>, key: &str) -> Result<Option<bool>, Odd> {
        field(m, key).map(|v| v.as_bool().ok_or(Odd)).transpose()
    }

    pub fn int64(m: Fields<'_>, key: &str) -> Result<Option<i64>, Odd> {
        field(m, key).map(|v| v.as_i64().ok_or(Odd)).transpose()
    }

    pub fn int32(m: Fields<'_>, key: &str) -> Result<Option<i32>, Odd> {
        field(m, key).map(|v| v.as_i64().and_then(|i| i32::try_from(i).ok()).ok_or(Odd)).transpose()
    }

    /// A `metav1.Time`, parsed by the parser k8s-openapi's decode uses (jiff's).
    pub fn time(m: Fields<'_>, key: &str) -> Result<Option<Time>, Odd> {
        string(m, key)?.map(|t| Time::parse_rfc3339(t).map_err(|_| Odd)).transpose()
    }
}

/// The model of a Pod's fields, whichever way they were read.
fn pod_of(f: PodFields<'_>, priorities: &PriorityClasses) -> Result<Pod, Vec<FieldError>> {
    let mut errors = Vec::new();
    let name = f.name.unwrap_or_default().to_string();
    if name.is_empty() {
        errors.push(FieldError::new("metadata.name", "required"));
    }
    let namespace = f.namespace.filter(|n| !n.is_empty()).unwrap_or("default").to_string();
    let requests =
        effective_requests_of(&f.containers, &f.init_containers, &f.pod_level, f.overhead.as_deref())
            .unwrap_or_else(|e| {
                errors.extend(e);
                Resources::new()
            });
    let priority = priorities.resolve_of(f.priority, f.priority_class_name).unwrap_or_else(|e| {
        errors.push(e);
        0
    });
    let mut affinity = Vec::new();
    if let Some(terms) = &f.terms {
        let base =
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
        for (i, term) in terms.iter().enumerate() {
            let mut t = NodeSelectorTerm::default();
            for (j, r) in term.expressions.iter().enumerate() {
                match requirement(&format!("{base}[{i}].matchExpressions[{j}]"), r) {
                    Ok(r) => t.match_expressions.push(r),
                    Err(e) => errors.push(e),
                }
            }
            for (j, r) in term.fields.iter().enumerate() {
                let path = format!("{base}[{i}].matchFields[{j}]");
                if r.key != "metadata.name" {
                    errors.push(FieldError::new(
                        format!("{path}.key"),
                        format!("{:?} is not a supported field (only metadata.name)", r.key),
                    ));
                    continue;
                }
                match requirement(&path, r) {
                    Ok(r) => t.match_fields.push(r),
                    Err(e) => errors.push(e),
                }
            }
            affinity.push(t);
        }
    }
    let mut tolerations = Vec::new();
    for (i, t) in f.tolerations.iter().enumerate() {
        let operator = match t.operator {
            None | Some("Equal") | Some("") => TolerationOperator::Equal,
            Some("Exists") => TolerationOperator::Exists,
            Some(other) => {
                errors.push(FieldError::new(
                    format!("spec.tolerations[{i}].operator"),
                    format!("unknown operator {other:?}"),
                ));
                continue;
            }
        };
        let effect = match t.effect {
            None | Some("") => None,
            Some(e) => match effect(&format!("spec.tolerations[{i}].effect"), e) {
                Ok(e) => Some(e),
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            },
        };
        tolerations.push(Toleration {
            key: t.key.unwrap_or_default().to_string(),
            operator,
            value: t.value.map(str::to_string),
            effect,
        });
    }
    let phase = match f.phase {
        None | Some("Pending") | Some("") => PodPhase::Pending,
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some("Unknown") => PodPhase::Unknown,
        Some(other) => {
            errors.push(FieldError::new("status.phase", format!("unknown phase {other:?}")));
            PodPhase::Unknown
        }
    };
    let preemption_policy = match f.preemption_policy {
        Some("Never") => PreemptionPolicy::Never,
        None | Some("PreemptLowerPriority") | Some("") => PreemptionPolicy::PreemptLowerPriority,
        Some(other) => {
            errors.push(FieldError::new("spec.preemptionPolicy", format!("unknown policy {other:?}")));
            PreemptionPolicy::PreemptLowerPriority
        }
    };
    let terms = pod_terms(&f, &namespace, &mut errors);
    // The shorter of the annotation and `activeDeadlineSeconds` (which the kubelet enforces; the
    // API server holds it to 1 and more). A malformed annotation is refused at admission (by
    // name, `rules::validate`) and read as none here: the pod is kept whatever its annotations.
    let deadline = f.active_deadline.and_then(|s| u64::try_from(s).ok()).map(std::time::Duration::from_secs);
    let stated = f.time_limit.and_then(|v| crate::read::duration::time_limit(v).ok());
    let time_limit = match (stated, deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let bound = f.node_name.is_some_and(|n| !n.is_empty());
    Ok(Pod {
        key: ObjectKey::new(namespace, name),
        uid: SmolStr::new(f.uid.unwrap_or_default()),
        requests,
        node_selector: f.node_selector.unwrap_or_default(),
        affinity,
        tolerations,
        priority,
        preemption_policy,
        phase,
        node_name: f.node_name.filter(|n| !n.is_empty()).map(str::to_string),
        nominated_node: f.nominated.filter(|n| !n.is_empty()).map(str::to_string),
        created: f.created.unwrap_or_default(),
        deleting: f.deleting,
        scheduler_name: f.scheduler_name.filter(|s| !s.is_empty()).unwrap_or("default-scheduler").to_string(),
        gang: None,
        failure: f.reason.filter(|r| phase == PodPhase::Failed && bound && !r.is_empty()).map(
            |reason| match f.message.filter(|m| !m.is_empty()) {
                Some(message) => format!("{reason}: {message}"),
                None => reason.to_string(),
            },
        ),
        scheduling_gates: f.scheduling_gates.iter().map(|g| g.to_string()).collect(),
        labels: f.labels.unwrap_or_default().into(),
        exclusive_topology: f
            .exclusive_topology
            .filter(|k| !k.is_empty() && !f.node_selector_strategy)
            .map(str::to_string),
        persisted: f.state.and_then(crate::read::model::Persisted::from_text).map(Box::new),
        terms: (!terms.is_empty()).then(|| Box::new(terms)),
        volumes: f.volumes,
        resource_claims: f.resource_claims,
        started: f.started,
        time_limit,
    })
}

/// What the pod asks of the pods around it, and what of it the cycle does not evaluate
/// ([`PodTerms`]); errors are pushed to `errors`, each with its field path.
fn pod_terms(f: &PodFields<'_>, namespace: &str, errors: &mut Vec<FieldError>) -> PodTerms {
    let mut terms = PodTerms {
        host_ports: f
            .ports
            .iter()
            .map(|p| HostPort {
                protocol: p.protocol.filter(|s| !s.is_empty()).unwrap_or("TCP").to_string(),
                ip: p.host_ip.filter(|s| !s.is_empty()).unwrap_or(BIND_ALL).to_string(),
                port: p.bound(f.host_network),
            })
            .collect(),
        ..PodTerms::default()
    };
    let base = "spec.affinity";
    if let Some(a) = f.pod_affinity.as_deref() {
        let path = format!("{base}.podAffinity.requiredDuringSchedulingIgnoredDuringExecution");
        let list = a.required_during_scheduling_ignored_during_execution.iter().flatten();
        terms.affinity = affinity_terms(list, namespace, &path, errors);
    }
    if let Some(a) = f.pod_anti_affinity.as_deref() {
        let path = format!("{base}.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution");
        let list = a.required_during_scheduling_ignored_during_execution.iter().flatten();
        terms.anti_affinity = affinity_terms(list, namespace, &path, errors);
    }
    let labels = f.labels.as_ref();
    for (i, c) in f.spread.as_deref().unwrap_or_default().iter().enumerate() {
        let path = format!("spec.topologySpreadConstraints[{i}]");
        if let Some(c) = spread_constraint(c, labels, &path, errors) {
            terms.spread.push(c);
        }
    }
    let mut waiting = f.waiting_volumes.clone();
    waiting.sort_unstable();
    terms.unevaluated.extend(waiting.iter().map(|(i, source)| format!("spec.volumes[{i}].{source}")));
    if !f.resource_claims.is_empty() && coverage::waits(POD_SPEC, "resourceClaims") {
        terms.unevaluated.push("spec.resourceClaims".into());
    }
    if coverage::waits(RESOURCES, "claims") {
        for (kind, list) in [("containers", &f.containers), ("initContainers", &f.init_containers)] {
            for (i, _) in list.iter().enumerate().filter(|(_, c)| c.claims) {
                terms.unevaluated.push(format!("spec.{kind}[{i}].resources.claims"));
            }
        }
    }
    terms
}

/// Required pod affinity (or anti-affinity) terms, as kube-scheduler reads them: a term that names
/// neither `namespaces` nor a `namespaceSelector` reads the pod's own namespace. The
/// `matchLabelKeys` and `mismatchLabelKeys` are not merged here: the API server merges them into
/// `labelSelector` when it creates the pod (and `kubectl gang simulate` when it creates one).
fn affinity_terms<'t>(
    list: impl Iterator<Item = &'t core::PodAffinityTerm>,
    namespace: &str,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> Vec<AffinityTerm> {
    list.enumerate()
        .map(|(i, t)| {
            let path = format!("{path}[{i}]");
            let named = t.namespaces.as_ref().is_some_and(|n| !n.is_empty());
            AffinityTerm {
                selector: t
                    .label_selector
                    .as_ref()
                    .map(|s| label_selector(s, &format!("{path}.labelSelector"), errors)),
                namespaces: if named || t.namespace_selector.is_some() {
                    t.namespaces.clone().unwrap_or_default()
                } else {
                    vec![namespace.to_string()]
                },
                namespace_selector: t
                    .namespace_selector
                    .as_ref()
                    .map(|s| label_selector(s, &format!("{path}.namespaceSelector"), errors)),
                topology_key: t.topology_key.clone(),
            }
        })
        .collect()
}

/// One topology spread constraint as kube-scheduler reads it: its defaults applied, the pod's
/// values of `matchLabelKeys` merged into its selector (as kube-scheduler merges them; a constraint
/// without a selector selects nothing still). `None` when a value cannot be understood (pushed to
/// `errors`).
fn spread_constraint(
    c: &core::TopologySpreadConstraint,
    labels: Option<&BTreeMap<String, String>>,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> Option<SpreadConstraint> {
    let before = errors.len();
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => Unsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => Unsatisfiable::ScheduleAnyway,
        other => {
            errors.push(FieldError::new(
                format!("{path}.whenUnsatisfiable"),
                format!(
                    "Unsupported value: {other:?}: supported values: \"DoNotSchedule\", \"ScheduleAnyway\""
                ),
            ));
            Unsatisfiable::DoNotSchedule
        }
    };
    let mut policy = |value: Option<&str>, field: &str, default: Inclusion| match value {
        None => default,
        Some("Honor") => Inclusion::Honor,
        Some("Ignore") => Inclusion::Ignore,
        Some(other) => {
            errors.push(FieldError::new(
                format!("{path}.{field}"),
                format!("Unsupported value: {other:?}: supported values: \"Honor\", \"Ignore\""),
            ));
            default
        }
    };
    let node_affinity_policy =
        policy(c.node_affinity_policy.as_deref(), "nodeAffinityPolicy", Inclusion::Honor);
    let node_taints_policy = policy(c.node_taints_policy.as_deref(), "nodeTaintsPolicy", Inclusion::Ignore);
    let mut selector =
        c.label_selector.as_ref().map(|s| label_selector(s, &format!("{path}.labelSelector"), errors));
    if let Some(selector) = &mut selector {
        for key in c.match_label_keys.iter().flatten() {
            if let Some(value) = labels.and_then(|l| l.get(key)) {
                selector.match_expressions.push(LabelRequirement {
                    key: key.clone(),
                    operator: LabelOperator::In,
                    values: vec![value.clone()],
                });
            }
        }
    }
    (errors.len() == before).then(|| SpreadConstraint {
        max_skew: c.max_skew,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable,
        selector,
        min_domains: c.min_domains.unwrap_or(1),
        node_affinity_policy,
        node_taints_policy,
    })
}

/// A `metav1.LabelSelector` in the model ([`volume::selector`]).
fn label_selector(s: &meta::LabelSelector, path: &str, errors: &mut Vec<FieldError>) -> LabelSelector {
    volume::selector(s, path, errors)
}

/// A raw PodDisruptionBudget.
pub fn budget_from_value(v: &Value) -> Result<Budget, Vec<FieldError>> {
    budget(&typed::<PodDisruptionBudget>(v)?)
}

/// A PodDisruptionBudget, as kube-scheduler's preemption reads it: namespace, selector (absent
/// or empty selects nothing), `status.disruptionsAllowed` and `status.disruptedPods`.
pub fn budget(b: &PodDisruptionBudget) -> Result<Budget, Vec<FieldError>> {
    let mut errors = Vec::new();
    let meta = &b.metadata;
    let name = meta.name.clone().unwrap_or_default();
    if name.is_empty() {
        errors.push(FieldError::new("metadata.name", "required"));
    }
    let namespace = meta.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into());
    let selector = b
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .map(|s| label_selector(s, "spec.selector", &mut errors))
        .unwrap_or_default();
    if !errors.is_empty() {
        return Err(errors);
    }
    let status = b.status.as_ref();
    let empty = selector.is_empty();
    Ok(Budget {
        key: ObjectKey::new(namespace, name),
        selector: (!empty).then_some(selector),
        disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
        disrupted_pods: status
            .and_then(|s| s.disrupted_pods.as_ref())
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default(),
    })
}

/// The pod-count limit a node reports (for messages).
pub fn pod_slots(n: &Node) -> i64 {
    n.allocatable.get(PODS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A pod is kept whatever its time-limit annotation says (annotations change after admission,
    /// and the webhook does not see every pod): a malformed one is read as none; the shorter of
    /// it and `activeDeadlineSeconds` is the pod's limit.
    #[test]
    fn a_time_limit_is_the_shorter_of_the_annotation_and_the_deadline_and_never_drops_the_pod() {
        let pod = |annotation: Option<&str>, deadline: Option<i64>| {
            let mut v = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ml"},
                "spec": {"nodeName": "n0", "containers": [{"name": "c", "image": "x"}]},
                "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}});
            if let Some(a) = annotation {
                v["metadata"]["annotations"] = json!({"kube-gang.io/time-limit": a});
            }
            if let Some(d) = deadline {
                v["spec"]["activeDeadlineSeconds"] = json!(d);
            }
            v
        };
        let limit = |v: &Value| {
            let a = pod_from_value(v, &PriorityClasses::default()).map(|p| p.time_limit);
            let b = pod_from_raw(v, &PriorityClasses::default()).map(|p| p.time_limit);
            assert_eq!(a, b, "typed and raw reads agree");
            a
        };
        let secs = |s: u64| Ok(Some(std::time::Duration::from_secs(s)));
        assert_eq!(limit(&pod(Some("2h"), None)), secs(7200));
        assert_eq!(limit(&pod(Some("2h"), Some(600))), secs(600));
        assert_eq!(limit(&pod(Some("5m"), Some(600))), secs(300));
        assert_eq!(limit(&pod(None, Some(600))), secs(600));
        assert_eq!(limit(&pod(Some("2 hours"), None)), Ok(None));
        assert_eq!(limit(&pod(Some("2 hours"), Some(600))), secs(600));
        let started = pod_from_value(&pod(None, None), &PriorityClasses::default()).unwrap().started;
        assert_eq!(started, Some(Time::parse_rfc3339("2026-01-01T00:00:00Z").unwrap()));
        // Admission refuses it by name: `rules::validate`'s test.
    }

    #[test]
    fn a_label_or_annotation_that_is_not_a_string_is_named() {
        let meta = json!({"labels": {"kube-gang.io/enabled": true, "app": "x"}, "annotations": {"n": 3}});
        let e = metadata_errors(Some(&meta), "spec.template");
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!(e[0].path, "spec.template.metadata.labels[kube-gang.io/enabled]");
        assert!(e[0].message.starts_with("Invalid value: true: must be a string: quote it"), "{}", e[0]);
        assert_eq!(e[1].path, "spec.template.metadata.annotations[n]");
        assert!(metadata_errors(Some(&json!({"labels": {"a": "b"}})), "").is_empty());
    }

    #[test]
    fn scheduling_spec_converts_as_the_whole_spec() {
        let spec = json!({
            "containers": [{"name": "c", "image": "x", "env": [{"name": "A", "value": "x".repeat(10_000)}],
                            "ports": [{"containerPort": 80}],
                            "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": 1}}}],
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                {"name": "init", "resources": {"requests": {"cpu": "4"}}}],
            "overhead": {"cpu": "100m"},
            "nodeSelector": {"pool": "gpu"},
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"a": "b"}}}]}},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "system-cluster-critical",
            "preemptionPolicy": "Never",
            "schedulerName": "gang-scheduler",
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "schedulingGroup": {"podGroupName": "pg"},
            "workloadRef": {"name": "w", "podGroup": "g"},
            "volumes": [{"name": "v", "configMap": {"name": "cm", "defaultMode": 420}}]
        });
        let pod = |spec: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": spec});
        let slim = scheduling_spec(Some(&spec), "spec").unwrap();
        let classes = PriorityClasses::default();
        assert_eq!(
            pod_from_value(&pod(slim.clone()), &classes),
            pod_from_value(&pod(spec.clone()), &classes)
        );
        assert_eq!(slim["workloadRef"], spec["workloadRef"]);
        assert_eq!(slim["schedulingGroup"], spec["schedulingGroup"]);
        assert!(slim.to_string().len() < spec.to_string().len() / 3, "{slim}");
        let e = scheduling_spec(
            Some(&json!({"volumes": [{"name": "v", "configMap": {"defaultMode": "abc"}}]})),
            "spec.template.spec",
        )
        .unwrap_err();
        assert_eq!(e[0].path, "spec.template.spec.volumes[0].configMap.defaultMode");
    }
}
