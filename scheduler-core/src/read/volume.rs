//! Kubernetes storage and device objects → the model's [`crate::read::model::volume`]: PVCs, PVs,
//! StorageClasses, CSINodes and DRA ResourceClaims, each decoded as the API server decodes it
//! (an error names the exact field), keeping only what the volume filters read; and a pod's
//! `spec.volumes` and `spec.resourceClaims`, from the typed `PodSpec` or straight from its raw
//! JSON (the assembly's path, [`crate::read::convert::pod_from_raw`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::read::error::{FieldError, Wording, decode};
use crate::read::model::device::{
    AllocatedDevice, AttributeValue, Count, CounterSet, CounterUse, Device, DeviceAsk, DeviceClass, DeviceId,
    DeviceRequest, MatchAttribute, REQUESTS_MAX, Reach, ResourceSlice, Subrequest,
};
use crate::read::model::volume::{
    AccessMode, Allocation, Attachable, BETA_STORAGE_CLASS, BIND_COMPLETED, BindingMode, ClaimName, ClaimRef,
    CsiNode, Disk, HyperNode, HyperNodeMember, MAX_PATTERN_SIZE, MIGRATED_PLUGINS, MemberSelector,
    NetworkLayer, PodResourceClaim, PodVolume, Pv, Pvc, ResourceClaim, SELECTED_NODE, StorageClass,
    TopologyTerm, VolumeMode,
};
use crate::read::model::{
    LabelOperator, LabelRequirement, LabelSelector, NodeSelectorOperator, NodeSelectorRequirement,
    NodeSelectorTerm, ObjectKey,
};
use crate::read::object::{At as _, KAI_TOPOLOGY_GROUP, KOORDINATOR_NETWORK_GROUP, KUEUE_TOPOLOGY_GROUP};

/// What one storage or device object reads as.
#[derive(Clone, Debug, PartialEq)]
pub enum Stored {
    Pvc(Pvc),
    Pv(Pv),
    Class(StorageClass),
    CsiNode(CsiNode),
    ResourceClaim(ResourceClaim),
    ResourceSlice(ResourceSlice),
    DeviceClass(DeviceClass),
    HyperNode(HyperNode),
    /// A KAI `Topology`'s levels (node label keys, broadest first).
    KaiTopology(Vec<String>),
    /// A Kueue `Topology`'s levels.
    KueueTopology(Vec<String>),
    /// A Koordinator `ClusterNetworkTopology`: its name and layers, broadest first.
    NetworkTopology(String, Vec<NetworkLayer>),
}

/// The object read by its `apiVersion` and `kind`, if it is a kind this module reads.
pub fn from_value(v: &Value) -> Option<Result<Stored, Vec<FieldError>>> {
    let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Some(match (group, version, kind) {
        ("", "v1", "PersistentVolumeClaim") => pvc_from_value(v).map(Stored::Pvc),
        ("", "v1", "PersistentVolume") => pv_from_value(v).map(Stored::Pv),
        ("storage.k8s.io", "v1", "StorageClass") => class_from_value(v).map(Stored::Class),
        ("storage.k8s.io", "v1", "CSINode") => csi_node_from_value(v).map(Stored::CsiNode),
        ("resource.k8s.io", version, "ResourceClaim") => {
            resource_claim_from_value(version, v).map(Stored::ResourceClaim)
        }
        ("resource.k8s.io", version, "ResourceSlice") => {
            resource_slice_from_value(version, v).map(Stored::ResourceSlice)
        }
        ("resource.k8s.io", version, "DeviceClass") => {
            device_class_from_value(version, v).map(Stored::DeviceClass)
        }
        ("topology.volcano.sh", "v1alpha1", "HyperNode") => hypernode_from_value(v).map(Stored::HyperNode),
        (KAI_TOPOLOGY_GROUP, "v1" | "v1alpha1", "Topology") => levels_from_value(v).map(Stored::KaiTopology),
        (KUEUE_TOPOLOGY_GROUP, "v1beta2" | "v1beta1" | "v1alpha1", "Topology") => {
            levels_from_value(v).map(Stored::KueueTopology)
        }
        (KOORDINATOR_NETWORK_GROUP, "v1alpha1", "ClusterNetworkTopology") => {
            network_topology_from_value(v).map(|(name, layers)| Stored::NetworkTopology(name, layers))
        }
        _ => return None,
    })
}

fn typed<'de, T: Deserialize<'de>>(v: &'de Value) -> Result<T, Vec<FieldError>> {
    decode(v, "", Wording::BuiltIn)
}

/// The UID of the controlling owner (`ownerReferences[].controller: true`).
fn controller(meta: &meta::ObjectMeta) -> Option<String> {
    meta.owner_references.iter().flatten().find(|r| r.controller == Some(true)).map(|r| r.uid.clone())
}

fn required_name(meta: &meta::ObjectMeta, errors: &mut Vec<FieldError>) -> String {
    let name = meta.name.clone().unwrap_or_default();
    if name.is_empty() {
        errors.push(FieldError::new("metadata.name", "required"));
    }
    name
}

/// A storage class named by the beta annotation, else by the field; `""` names none.
fn class_of(meta: &meta::ObjectMeta, field: Option<&String>) -> Option<String> {
    let annotated = meta.annotations.as_ref().and_then(|a| a.get(BETA_STORAGE_CLASS));
    annotated.or(field).filter(|c| !c.is_empty()).cloned()
}

fn access_modes(
    path: &str,
    modes: Option<&Vec<String>>,
    errors: &mut Vec<FieldError>,
) -> BTreeSet<AccessMode> {
    let mut out = BTreeSet::new();
    for (i, m) in modes.into_iter().flatten().enumerate() {
        match AccessMode::parse(m) {
            Some(mode) => {
                out.insert(mode);
            }
            None => errors.push(FieldError::new(
                format!("{path}[{i}]"),
                format!(
                    "Unsupported value: {m:?}: supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\""
                ),
            )),
        }
    }
    out
}

fn volume_mode(path: &str, mode: Option<&str>, errors: &mut Vec<FieldError>) -> VolumeMode {
    match mode {
        None | Some("Filesystem") => VolumeMode::Filesystem,
        Some("Block") => VolumeMode::Block,
        Some(other) => {
            errors.push(FieldError::new(
                path,
                format!("Unsupported value: {other:?}: supported values: \"Block\", \"Filesystem\""),
            ));
            VolumeMode::Filesystem
        }
    }
}

/// The `storage` amount of a resource list, in bytes (0 when absent).
fn storage_bytes(
    path: &str,
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    errors: &mut Vec<FieldError>,
) -> i64 {
    let Some(q) = list.and_then(|l| l.get("storage")) else { return 0 };
    match crate::read::resources::amount("storage", &q.0) {
        Ok(n) if n >= 0 => n,
        Ok(_) => {
            errors.push(FieldError::new(
                format!("{path}[storage]"),
                format!("must not be negative, got {:?}", q.0),
            ));
            0
        }
        Err(e) => {
            errors.push(FieldError::new(format!("{path}[storage]"), e.to_string()));
            0
        }
    }
}

/// `metav1.LabelSelector` (`None` when absent; an empty one selects everything, as
/// `LabelSelectorAsSelector` reads it).
fn label_selector(
    path: &str,
    s: Option<&meta::LabelSelector>,
    errors: &mut Vec<FieldError>,
) -> Option<LabelSelector> {
    Some(selector(s?, path, errors))
}

/// A `metav1.LabelSelector` in the model: an operator other than `In`, `NotIn`, `Exists` and
/// `DoesNotExist` is an error at `path.matchExpressions[j].operator` (the requirement left out).
pub(crate) fn selector(s: &meta::LabelSelector, path: &str, errors: &mut Vec<FieldError>) -> LabelSelector {
    let mut out = LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        ..LabelSelector::default()
    };
    for (i, r) in s.match_expressions.iter().flatten().enumerate() {
        let operator = match r.operator.as_str() {
            "In" => LabelOperator::In,
            "NotIn" => LabelOperator::NotIn,
            "Exists" => LabelOperator::Exists,
            "DoesNotExist" => LabelOperator::DoesNotExist,
            other => {
                errors.push(FieldError::new(
                    format!("{path}.matchExpressions[{i}].operator"),
                    format!("unknown operator {other:?}"),
                ));
                continue;
            }
        };
        out.match_expressions.push(LabelRequirement {
            key: r.key.clone(),
            operator,
            values: r.values.clone().unwrap_or_default(),
        });
    }
    out
}

/// `nodeSelectorTerms` of a PV's node affinity or a ResourceClaim's allocation.
fn node_selector_terms(
    path: &str,
    terms: &[core::NodeSelectorTerm],
    errors: &mut Vec<FieldError>,
) -> Vec<NodeSelectorTerm> {
    let requirement = |p: String, r: &core::NodeSelectorRequirement, errors: &mut Vec<FieldError>| {
        let Some(operator) = NodeSelectorOperator::parse(&r.operator) else {
            errors
                .push(FieldError::new(format!("{p}.operator"), format!("unknown operator {:?}", r.operator)));
            return None;
        };
        Some(NodeSelectorRequirement {
            key: r.key.clone(),
            operator,
            values: r.values.clone().unwrap_or_default(),
        })
    };
    let mut out = Vec::new();
    for (i, t) in terms.iter().enumerate() {
        let mut term = NodeSelectorTerm::default();
        for (j, r) in t.match_expressions.iter().flatten().enumerate() {
            term.match_expressions.extend(requirement(
                format!("{path}[{i}].matchExpressions[{j}]"),
                r,
                errors,
            ));
        }
        for (j, r) in t.match_fields.iter().flatten().enumerate() {
            let p = format!("{path}[{i}].matchFields[{j}]");
            if r.key != "metadata.name" {
                errors.push(FieldError::new(
                    format!("{p}.key"),
                    format!("{:?} is not a supported field (only metadata.name)", r.key),
                ));
                continue;
            }
            term.match_fields.extend(requirement(p, r, errors));
        }
        out.push(term);
    }
    out
}

/// A raw PersistentVolumeClaim.
pub fn pvc_from_value(v: &Value) -> Result<Pvc, Vec<FieldError>> {
    pvc(&typed::<core::PersistentVolumeClaim>(v)?)
}

/// A PersistentVolumeClaim, as the volume filters read it.
pub fn pvc(c: &core::PersistentVolumeClaim) -> Result<Pvc, Vec<FieldError>> {
    let mut errors = Vec::new();
    let meta = &c.metadata;
    let name = required_name(meta, &mut errors);
    let namespace = meta.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into());
    let spec = c.spec.clone().unwrap_or_default();
    let annotations = meta.annotations.as_ref();
    let out = Pvc {
        key: ObjectKey::new(namespace, name),
        uid: meta.uid.clone().unwrap_or_default(),
        class: class_of(meta, spec.storage_class_name.as_ref()),
        access_modes: access_modes("spec.accessModes", spec.access_modes.as_ref(), &mut errors),
        storage: storage_bytes(
            "spec.resources.requests",
            spec.resources.as_ref().and_then(|r| r.requests.as_ref()),
            &mut errors,
        ),
        selector: label_selector("spec.selector", spec.selector.as_ref(), &mut errors),
        volume_mode: volume_mode("spec.volumeMode", spec.volume_mode.as_deref(), &mut errors),
        volume_name: spec.volume_name.clone().filter(|n| !n.is_empty()),
        bind_completed: annotations.is_some_and(|a| a.contains_key(BIND_COMPLETED)),
        selected_node: annotations.and_then(|a| a.get(SELECTED_NODE)).filter(|n| !n.is_empty()).cloned(),
        deleting: meta.deletion_timestamp.is_some(),
        lost: c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost"),
        owner: controller(meta),
    };
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

/// A raw PersistentVolume.
pub fn pv_from_value(v: &Value) -> Result<Pv, Vec<FieldError>> {
    pv(&typed::<core::PersistentVolume>(v)?)
}

/// What a node attaches for a PV's source, for `NodeVolumeLimits`.
fn pv_attachable(spec: &core::PersistentVolumeSpec) -> Option<Attachable> {
    if let Some(csi) = &spec.csi {
        return Some(Attachable {
            driver: csi.driver.clone(),
            handle: csi.volume_handle.clone(),
            in_tree: None,
        });
    }
    let disk = if let Some(s) = &spec.aws_elastic_block_store {
        Disk::AwsEbs { volume_id: s.volume_id.clone() }
    } else if let Some(s) = &spec.gce_persistent_disk {
        Disk::GcePd { pd_name: s.pd_name.clone(), read_only: false }
    } else if let Some(s) = &spec.azure_disk {
        Disk::Other { plugin: "kubernetes.io/azure-disk".into(), handle: s.disk_uri.clone() }
    } else if let Some(s) = &spec.cinder {
        Disk::Other { plugin: "kubernetes.io/cinder".into(), handle: s.volume_id.clone() }
    } else {
        return None;
    };
    disk.attachable()
}

/// A PersistentVolume, as the volume filters read it.
pub fn pv(p: &core::PersistentVolume) -> Result<Pv, Vec<FieldError>> {
    let mut errors = Vec::new();
    let meta = &p.metadata;
    let name = required_name(meta, &mut errors);
    let spec = p.spec.clone().unwrap_or_default();
    let node_affinity = spec.node_affinity.as_ref().and_then(|a| a.required.as_ref()).map(|sel| {
        node_selector_terms(
            "spec.nodeAffinity.required.nodeSelectorTerms",
            &sel.node_selector_terms,
            &mut errors,
        )
    });
    let claim_ref = spec.claim_ref.as_ref().map(|r| ClaimRef {
        namespace: r.namespace.clone().unwrap_or_default(),
        name: r.name.clone().unwrap_or_default(),
        uid: r.uid.clone().unwrap_or_default(),
    });
    let out = Pv {
        name,
        class: class_of(meta, spec.storage_class_name.as_ref()),
        capacity: storage_bytes("spec.capacity", spec.capacity.as_ref(), &mut errors),
        access_modes: access_modes("spec.accessModes", spec.access_modes.as_ref(), &mut errors),
        volume_mode: volume_mode("spec.volumeMode", spec.volume_mode.as_deref(), &mut errors),
        node_affinity,
        labels: meta.labels.clone().unwrap_or_default(),
        claim_ref,
        available: p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available"),
        deleting: meta.deletion_timestamp.is_some(),
        attach: pv_attachable(&spec),
    };
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

/// A raw StorageClass.
pub fn class_from_value(v: &Value) -> Result<StorageClass, Vec<FieldError>> {
    class(&typed::<storage::StorageClass>(v)?)
}

/// A StorageClass, as the volume filters read it. A `volumeBindingMode` the API server would not
/// have stored is an error (it defaults an absent one to `Immediate`).
pub fn class(c: &storage::StorageClass) -> Result<StorageClass, Vec<FieldError>> {
    let mut errors = Vec::new();
    let name = required_name(&c.metadata, &mut errors);
    let binding_mode = match c.volume_binding_mode.as_deref() {
        None | Some("Immediate") => BindingMode::Immediate,
        Some("WaitForFirstConsumer") => BindingMode::WaitForFirstConsumer,
        Some(other) => {
            errors.push(FieldError::new(
                "volumeBindingMode",
                format!(
                    "Unsupported value: {other:?}: supported values: \"Immediate\", \"WaitForFirstConsumer\""
                ),
            ));
            BindingMode::Immediate
        }
    };
    let allowed_topologies = c
        .allowed_topologies
        .iter()
        .flatten()
        .map(|t| TopologyTerm {
            match_label_expressions: t
                .match_label_expressions
                .iter()
                .flatten()
                .map(|r| (r.key.clone(), r.values.clone()))
                .collect(),
        })
        .collect();
    let out = StorageClass { name, provisioner: c.provisioner.clone(), binding_mode, allowed_topologies };
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

/// A raw CSINode.
pub fn csi_node_from_value(v: &Value) -> Result<CsiNode, Vec<FieldError>> {
    let n: storage::CSINode = typed(v)?;
    let mut errors = Vec::new();
    let name = required_name(&n.metadata, &mut errors);
    let mut limits = BTreeMap::new();
    for (i, d) in n.spec.drivers.iter().enumerate() {
        if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count) {
            if count < 0 {
                errors.push(FieldError::new(
                    format!("spec.drivers[{i}].allocatable.count"),
                    format!("must be greater than or equal to 0, got {count}"),
                ));
                continue;
            }
            limits.insert(d.name.clone(), i64::from(count));
        }
    }
    let migrated = n
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MIGRATED_PLUGINS))
        .map(|s| s.split(',').map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect())
        .unwrap_or_default();
    if errors.is_empty() { Ok(CsiNode { name, limits, migrated }) } else { Err(errors) }
}

/// The most levels a `Topology` may have (KAI's and Kueue's CRDs: `maxItems: 16`).
pub const MAX_TOPOLOGY_OBJECT_LEVELS: usize = 16;

/// Reads a KAI or Kueue `Topology` (their CRDs are the same shape) as its level order, with the
/// rules of their CRDs: 1 to 16 levels, each a label key of at most 316 characters, none twice,
/// and `kubernetes.io/hostname` only as the last.
pub fn levels_from_value(v: &Value) -> Result<Vec<String>, Vec<FieldError>> {
    #[derive(Deserialize)]
    struct Raw {
        metadata: meta::ObjectMeta,
        #[serde(default)]
        spec: Spec,
    }
    #[derive(Default, Deserialize)]
    struct Spec {
        #[serde(default)]
        levels: Vec<Level>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Level {
        #[serde(default)]
        node_label: String,
    }
    let raw: Raw = typed(v)?;
    let mut errors = Vec::new();
    required_name(&raw.metadata, &mut errors);
    let levels: Vec<String> = raw.spec.levels.into_iter().map(|l| l.node_label).collect();
    if levels.is_empty() {
        errors.push(FieldError::new("spec.levels", "Required value: should have at least 1 items"));
    }
    if levels.len() > MAX_TOPOLOGY_OBJECT_LEVELS {
        errors.push(FieldError::new(
            "spec.levels",
            format!("Too many: {}: must have at most {MAX_TOPOLOGY_OBJECT_LEVELS} items", levels.len()),
        ));
        return Err(errors);
    }
    for (i, level) in levels.iter().enumerate() {
        let at = format!("spec.levels[{i}].nodeLabel");
        if level.is_empty() {
            errors.push(FieldError::new(at, "Required value"));
        } else if level.len() > 316 {
            errors.push(FieldError::new(
                at,
                format!("Too long: may not be more than 316 bytes, got {}", level.len()),
            ));
        } else if let Err(e) = crate::read::labels::check_label_key(level) {
            errors.push(FieldError::new(at, e));
        } else if levels[..i].contains(level) {
            errors.push(FieldError::new("spec.levels", "Invalid value: must be unique"));
        } else if level == "kubernetes.io/hostname" && i + 1 != levels.len() {
            errors.push(FieldError::new(
                "spec.levels",
                "Invalid value: the kubernetes.io/hostname label can only be used at the lowest level of topology",
            ));
        }
    }
    if errors.is_empty() { Ok(levels) } else { Err(errors) }
}

/// The most label keys one network layer may name here (Koordinator's CRD sets none; each is
/// read on every node).
pub const MAX_LAYER_LABEL_KEYS: usize = 16;

/// Reads Koordinator's `ClusterNetworkTopology` (`scheduling.koordinator.sh/v1alpha1`): its name
/// and its layers, broadest first, `NodeTopologyLayer` last. The layers must form one chain
/// from `NodeTopologyLayer` up through `parentTopologyLayer` holding every entry once, as
/// Koordinator's scheduler requires to build its tree ("topology layer … not found in spec"); at
/// most [`MAX_TOPOLOGY_OBJECT_LEVELS`] layers of at most [`MAX_LAYER_LABEL_KEYS`] label keys, each
/// a valid label key.
pub fn network_topology_from_value(v: &Value) -> Result<(String, Vec<NetworkLayer>), Vec<FieldError>> {
    #[derive(Deserialize)]
    struct Raw {
        metadata: meta::ObjectMeta,
        #[serde(default)]
        spec: Spec,
    }
    #[derive(Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        #[serde(default)]
        network_topology_spec: Vec<Entry>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Entry {
        #[serde(default)]
        topology_layer: String,
        #[serde(default)]
        parent_topology_layer: String,
        #[serde(default)]
        label_key: Vec<String>,
    }
    let raw: Raw = typed(v)?;
    let mut errors = Vec::new();
    let name = required_name(&raw.metadata, &mut errors);
    let entries = raw.spec.network_topology_spec;
    // Koordinator builds a tree of its root alone from none: no node in it, no gang placed.
    if entries.is_empty() {
        errors.push(FieldError::new(
            "spec.networkTopologySpec",
            format!("Required value: at least the {} layer", crate::read::model::volume::NODE_LAYER),
        ));
        return Err(errors);
    }
    if entries.len() > MAX_TOPOLOGY_OBJECT_LEVELS + 1 {
        errors.push(FieldError::new(
            "spec.networkTopologySpec",
            format!(
                "Too many: {}: must have at most {} items",
                entries.len(),
                MAX_TOPOLOGY_OBJECT_LEVELS + 1
            ),
        ));
        return Err(errors);
    }
    for (i, e) in entries.iter().enumerate() {
        let at = format!("spec.networkTopologySpec[{i}]");
        if e.topology_layer.is_empty() {
            errors.push(FieldError::new(format!("{at}.topologyLayer"), "Required value"));
        } else if entries[..i].iter().any(|o| o.topology_layer == e.topology_layer) {
            errors.push(FieldError::new(
                format!("{at}.topologyLayer"),
                format!("Duplicate value: {:?}", e.topology_layer),
            ));
        }
        if e.label_key.len() > MAX_LAYER_LABEL_KEYS {
            errors.push(FieldError::new(
                format!("{at}.labelKey"),
                format!("Too many: {}: must have at most {MAX_LAYER_LABEL_KEYS} items", e.label_key.len()),
            ));
            continue;
        }
        for (j, k) in e.label_key.iter().enumerate() {
            if let Err(why) = crate::read::labels::check_label_key(k) {
                errors.push(FieldError::new(format!("{at}.labelKey[{j}]"), why));
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // The chain from the nodes up, as Koordinator's scheduler walks it.
    let mut chain: Vec<&Entry> = Vec::with_capacity(entries.len());
    let mut layer = crate::read::model::volume::NODE_LAYER;
    while chain.len() < entries.len() {
        match entries.iter().find(|e| e.topology_layer == layer) {
            Some(e) if !chain.iter().any(|c| c.topology_layer == layer) => {
                chain.push(e);
                layer = &e.parent_topology_layer;
            }
            _ => {
                let path = "spec.networkTopologySpec";
                errors.push(FieldError::new(
                    path,
                    format!(
                        "topology layer {layer:?} not found in spec: the layers must form one chain from {} up through parentTopologyLayer, each listed once",
                        crate::read::model::volume::NODE_LAYER
                    ),
                ));
                return Err(errors);
            }
        }
    }
    let layers = chain
        .into_iter()
        .rev()
        .map(|e| NetworkLayer { name: e.topology_layer.clone(), label_keys: e.label_key.clone() })
        .collect();
    Ok((name, layers))
}

/// Reads a Volcano HyperNode (`topology.volcano.sh/v1alpha1`), with the rules of its CRD: one
/// selector per member, `labelMatch` for `Node` members only, a pattern that compiles.
pub fn hypernode_from_value(v: &Value) -> Result<HyperNode, Vec<FieldError>> {
    #[derive(Deserialize)]
    struct Raw {
        metadata: meta::ObjectMeta,
        #[serde(default)]
        spec: Spec,
    }
    #[derive(Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        #[serde(default)]
        tier: i64,
        #[serde(default)]
        tier_name: Option<String>,
        #[serde(default)]
        members: Vec<Member>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Member {
        #[serde(default, rename = "type")]
        kind: String,
        #[serde(default)]
        selector: Selector,
    }
    #[derive(Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Selector {
        exact_match: Option<Exact>,
        regex_match: Option<Pattern>,
        label_match: Option<meta::LabelSelector>,
    }
    #[derive(Deserialize)]
    struct Exact {
        #[serde(default)]
        name: String,
    }
    #[derive(Deserialize)]
    struct Pattern {
        #[serde(default)]
        pattern: String,
    }
    let raw: Raw = typed(v)?;
    let mut errors = Vec::new();
    let name = required_name(&raw.metadata, &mut errors);
    let tier = u32::try_from(raw.spec.tier).unwrap_or_else(|_| {
        errors.push(FieldError::new(
            "spec.tier",
            format!("must be greater than or equal to 0, got {}", raw.spec.tier),
        ));
        0
    });
    let mut members = Vec::with_capacity(raw.spec.members.len());
    for (i, m) in raw.spec.members.into_iter().enumerate() {
        let at = format!("spec.members[{i}]");
        let hypernode = match m.kind.as_str() {
            "Node" => false,
            "HyperNode" => true,
            other => {
                errors.push(FieldError::new(
                    format!("{at}.type"),
                    format!("Unsupported value: {other:?}: supported values: \"Node\", \"HyperNode\""),
                ));
                continue;
            }
        };
        let sel = m.selector;
        let given = [sel.exact_match.is_some(), sel.regex_match.is_some(), sel.label_match.is_some()];
        match given.iter().filter(|&&b| b).count() {
            0 => {
                errors.push(FieldError::new(
                    format!("{at}.selector"),
                    "Either ExactMatch or RegexMatch or LabelMatch must be specified",
                ));
                continue;
            }
            1 => {}
            _ => {
                errors.push(FieldError::new(
                    format!("{at}.selector"),
                    "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified",
                ));
                continue;
            }
        }
        let selector = if let Some(e) = sel.exact_match {
            if e.name.is_empty() {
                errors.push(FieldError::new(format!("{at}.selector.exactMatch.name"), "Required value"));
                continue;
            }
            MemberSelector::Exact(e.name)
        } else if let Some(p) = sel.regex_match {
            let path = format!("{at}.selector.regexMatch.pattern");
            if p.pattern.is_empty() {
                errors.push(FieldError::new(path, "Required value"));
                continue;
            }
            if let Err(e) = regex::RegexBuilder::new(&p.pattern).size_limit(MAX_PATTERN_SIZE).build() {
                errors.push(FieldError::new(path, format!("not a valid regular expression: {e}")));
                continue;
            }
            MemberSelector::Regex(p.pattern)
        } else if let Some(l) = sel.label_match {
            if hypernode {
                errors.push(FieldError::new(
                    format!("{at}.selector.labelMatch"),
                    "applies to members of type Node only (Volcano ignores it on a HyperNode member)",
                ));
                continue;
            }
            MemberSelector::Labels(selector(&l, &format!("{at}.selector.labelMatch"), &mut errors))
        } else {
            continue;
        };
        members.push(HyperNodeMember { hypernode, selector });
    }
    let tier_name = raw.spec.tier_name.filter(|n| !n.is_empty());
    if errors.is_empty() { Ok(HyperNode { name, tier, tier_name, members }) } else { Err(errors) }
}

/// The parts of a ResourceClaim the cycle reads: the same at every version of `resource.k8s.io`
/// (`v1`, `v1beta2`, `v1beta1`), so one reading serves them all; the rest of the object is checked
/// by its version's type.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimParts {
    metadata: meta::ObjectMeta,
    #[serde(default)]
    status: Option<ClaimStatusParts>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimStatusParts {
    #[serde(default)]
    allocation: Option<AllocationParts>,
    #[serde(default)]
    reserved_for: Option<Vec<ConsumerParts>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AllocationParts {
    #[serde(default)]
    node_selector: Option<core::NodeSelector>,
}

#[derive(Deserialize)]
struct ConsumerParts {
    #[serde(default)]
    uid: String,
}

/// A raw ResourceClaim of `resource.k8s.io/{version}`, checked against its version's type.
pub fn resource_claim_from_value(version: &str, v: &Value) -> Result<ResourceClaim, Vec<FieldError>> {
    use k8s_openapi::api::resource;
    match version {
        "v1" => drop(typed::<resource::v1::ResourceClaim>(v)?),
        "v1beta2" => drop(typed::<resource::v1beta2::ResourceClaim>(v)?),
        "v1beta1" => drop(typed::<resource::v1beta1::ResourceClaim>(v)?),
        other => {
            return Err(vec![FieldError::new("apiVersion", format!("resource.k8s.io/{other} is not read"))]);
        }
    }
    let parts: ClaimParts = typed(v)?;
    let mut errors = Vec::new();
    let meta = &parts.metadata;
    let name = required_name(meta, &mut errors);
    let namespace = meta.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into());
    let status = parts.status.as_ref();
    let allocation = status.and_then(|s| s.allocation.as_ref()).map(|a| Allocation {
        node_selector: a.node_selector.as_ref().map(|sel| {
            node_selector_terms(
                "status.allocation.nodeSelector.nodeSelectorTerms",
                &sel.node_selector_terms,
                &mut errors,
            )
        }),
        devices: allocated_devices(v.at("/status/allocation/devices/results")),
    });
    let ask = device_ask(version, v.at("/spec/devices"));
    let out = ResourceClaim {
        key: ObjectKey::new(namespace, name),
        uid: meta.uid.clone().unwrap_or_default(),
        deleting: meta.deletion_timestamp.is_some(),
        owner: controller(meta),
        allocation,
        reserved_for: status
            .and_then(|s| s.reserved_for.as_ref())
            .map(|r| r.iter().map(|c| c.uid.clone()).collect())
            .unwrap_or_default(),
        ask,
    };
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

/// `status.allocation.devices.results[]` (already checked by the claim's type).
fn allocated_devices(results: Option<&Value>) -> Vec<AllocatedDevice> {
    let text = |r: &Value, f: &str| r.get(f).and_then(Value::as_str).unwrap_or("").to_string();
    results
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| AllocatedDevice {
            request: text(r, "request"),
            id: DeviceId { driver: text(r, "driver"), pool: text(r, "pool"), device: text(r, "device") },
            admin_access: r.get("adminAccess").and_then(Value::as_bool).unwrap_or(false),
        })
        .collect()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

/// The CEL expressions of a `selectors[]` list.
fn cel_selectors(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.at("/cel/expression").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// One way to satisfy a request (an `exactly`, a `firstAvailable` entry, or a `v1beta1` request
/// itself), or the field this scheduler does not allocate for.
fn subrequest(name: String, path: &str, v: &Value) -> Result<Subrequest, String> {
    // Fields that change what may be allocated and that this scheduler does not implement: a
    // claim that uses them waits, naming them, rather than be allocated as if they were absent.
    for field in ["tolerations", "capacity"] {
        if v.get(field).is_some_and(|f| !f.is_null() && f != &Value::Array(Vec::new())) {
            return Err(format!("{path}.{field}"));
        }
    }
    // A selector of another kind than `cel` (none exists yet; a newer API's would select
    // differently): not allocated as if it were absent.
    if let Some(i) = v
        .get("selectors")
        .and_then(Value::as_array)
        .and_then(|l| l.iter().position(|s| s.get("cel").and_then(|c| c.get("expression")).is_none()))
    {
        return Err(format!("{path}.selectors[{i}]"));
    }
    let count = match v.get("allocationMode").and_then(Value::as_str).unwrap_or("ExactCount") {
        "All" => Count::All,
        _ => {
            let n = v.get("count").and_then(Value::as_i64).unwrap_or(1);
            Count::Exact(u32::try_from(n.max(1)).unwrap_or(u32::MAX))
        }
    };
    Ok(Subrequest {
        name,
        class: v.get("deviceClassName").and_then(Value::as_str).unwrap_or("").to_string(),
        selectors: cel_selectors(v.get("selectors")),
        count,
        admin_access: v.get("adminAccess").and_then(Value::as_bool).unwrap_or(false),
    })
}

/// A claim's (or template's) `spec.devices`, at `version`: `v1` and `v1beta2` put a request's
/// device in `exactly`, `v1beta1` in the request itself.
pub fn device_ask(version: &str, devices: Option<&Value>) -> DeviceAsk {
    let mut ask = DeviceAsk::default();
    let Some(devices) = devices else { return ask };
    let requests = devices.get("requests").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    for (i, r) in requests.iter().enumerate().take(REQUESTS_MAX) {
        let name = r.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        let path = format!("spec.devices.requests[{i}]");
        let first = r.get("firstAvailable").and_then(Value::as_array).filter(|f| !f.is_empty());
        let alternatives = match first {
            Some(subs) => subs
                .iter()
                .enumerate()
                .map(|(j, sub)| {
                    let sub_name = sub.get("name").and_then(Value::as_str).unwrap_or("");
                    subrequest(format!("{name}/{sub_name}"), &format!("{path}.firstAvailable[{j}]"), sub)
                })
                .collect::<Result<Vec<_>, _>>(),
            None if version == "v1beta1" => subrequest(name.clone(), &path, r).map(|s| vec![s]),
            None => match r.get("exactly") {
                Some(exactly) => {
                    subrequest(name.clone(), &format!("{path}.exactly"), exactly).map(|s| vec![s])
                }
                None => Err(format!("{path}.exactly")),
            },
        };
        match alternatives {
            Ok(alternatives) => ask.requests.push(DeviceRequest { name, alternatives }),
            Err(field) => {
                ask.unsupported.get_or_insert(field);
            }
        }
    }
    for (i, c) in devices.get("constraints").and_then(Value::as_array).into_iter().flatten().enumerate() {
        match c.get("matchAttribute").and_then(Value::as_str) {
            Some(attribute) => ask.constraints.push(MatchAttribute {
                requests: strings(c.get("requests")),
                attribute: attribute.to_string(),
            }),
            None => {
                // `distinctAttribute` (alpha, 1.34): not implemented.
                ask.unsupported.get_or_insert(format!("spec.devices.constraints[{i}]"));
            }
        }
    }
    ask.config = devices.get("config").and_then(Value::as_array).cloned().unwrap_or_default();
    ask
}

/// A raw DeviceClass of `resource.k8s.io/{version}`, checked against its version's type.
pub fn device_class_from_value(version: &str, v: &Value) -> Result<DeviceClass, Vec<FieldError>> {
    use k8s_openapi::api::resource;
    match version {
        "v1" => drop(typed::<resource::v1::DeviceClass>(v)?),
        "v1beta2" => drop(typed::<resource::v1beta2::DeviceClass>(v)?),
        "v1beta1" => drop(typed::<resource::v1beta1::DeviceClass>(v)?),
        other => {
            return Err(vec![FieldError::new("apiVersion", format!("resource.k8s.io/{other} is not read"))]);
        }
    }
    let name = v.at("/metadata/name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        return Err(vec![FieldError::new("metadata.name", "required")]);
    }
    Ok(DeviceClass {
        name: name.to_string(),
        selectors: cel_selectors(v.at("/spec/selectors")),
        config: v.at("/spec/config").and_then(Value::as_array).cloned().unwrap_or_default(),
    })
}

/// Where a slice (or, with `perDeviceNodeSelection`, a device) says its devices are reachable
/// from: `Ok(None)` when it says none of the three.
fn reach(path: &str, v: &Value, errors: &mut Vec<FieldError>) -> Option<Reach> {
    if let Some(node) = v.get("nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        return Some(Reach::Node(node.to_string()));
    }
    if let Some(sel) = v.get("nodeSelector").filter(|s| !s.is_null()) {
        return match serde_json::from_value::<core::NodeSelector>(sel.clone()) {
            Ok(sel) => Some(Reach::Selector(node_selector_terms(
                &format!("{path}.nodeSelector.nodeSelectorTerms"),
                &sel.node_selector_terms,
                errors,
            ))),
            Err(e) => {
                errors.push(FieldError::new(format!("{path}.nodeSelector"), e.to_string()));
                None
            }
        };
    }
    v.get("allNodes").and_then(Value::as_bool).unwrap_or(false).then_some(Reach::All)
}

/// A name qualified with its domain, or with the driver's name when it has none.
fn qualified(driver: &str, name: &str) -> String {
    if name.contains('/') { name.to_string() } else { format!("{driver}/{name}") }
}

/// A raw ResourceSlice of `resource.k8s.io/{version}`, checked against its version's type.
pub fn resource_slice_from_value(version: &str, v: &Value) -> Result<ResourceSlice, Vec<FieldError>> {
    use k8s_openapi::api::resource;
    match version {
        "v1" => drop(typed::<resource::v1::ResourceSlice>(v)?),
        "v1beta2" => drop(typed::<resource::v1beta2::ResourceSlice>(v)?),
        "v1beta1" => drop(typed::<resource::v1beta1::ResourceSlice>(v)?),
        other => {
            return Err(vec![FieldError::new("apiVersion", format!("resource.k8s.io/{other} is not read"))]);
        }
    }
    let mut errors = Vec::new();
    let text = |p: &str| v.at(p).and_then(Value::as_str).unwrap_or("").to_string();
    let name = text("/metadata/name");
    if name.is_empty() {
        errors.push(FieldError::new("metadata.name", "required"));
    }
    let driver = text("/spec/driver");
    let spec = v.get("spec").unwrap_or(&Value::Null);
    let per_device = spec.get("perDeviceNodeSelection").and_then(Value::as_bool).unwrap_or(false);
    let slice_reach = if per_device { None } else { reach("spec", spec, &mut errors) };
    if !per_device && slice_reach.is_none() {
        errors.push(FieldError::new(
            "spec",
            "exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection is required",
        ));
    }
    let unsupported = Vec::new();
    let mut counters = Vec::new();
    for (i, c) in spec.get("sharedCounters").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let path = format!("spec.sharedCounters[{i}]");
        let name = c.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        if name.is_empty() {
            errors.push(FieldError::new(format!("{path}.name"), "required"));
        }
        let nano = counter_amounts(&path, c, false, &mut errors);
        counters.push(CounterSet { name, nano });
    }
    let mut devices = Vec::new();
    for (i, d) in spec.get("devices").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let path = format!("spec.devices[{i}]");
        // `v1beta1` keeps a device's fields under `basic`.
        let body = if version == "v1beta1" { d.get("basic").unwrap_or(&Value::Null) } else { d };
        let mut attributes = BTreeMap::new();
        for (k, a) in body.get("attributes").and_then(Value::as_object).into_iter().flatten() {
            let value = if let Some(i) = a.get("int").and_then(Value::as_i64) {
                AttributeValue::Int(i)
            } else if let Some(b) = a.get("bool").and_then(Value::as_bool) {
                AttributeValue::Bool(b)
            } else if let Some(s) = a.get("string").and_then(Value::as_str) {
                AttributeValue::String(s.to_string())
            } else if let Some(s) = a.get("version").and_then(Value::as_str) {
                AttributeValue::Version(s.to_string())
            } else {
                errors.push(FieldError::new(
                    format!("{path}.attributes[{k}]"),
                    "exactly one of int, bool, string or version is required",
                ));
                continue;
            };
            attributes.insert(qualified(&driver, k), value);
        }
        let mut capacity = BTreeMap::new();
        for (k, c) in body.get("capacity").and_then(Value::as_object).into_iter().flatten() {
            let q = c.get("value").and_then(Value::as_str).unwrap_or("");
            match crate::read::quantity::parse(q) {
                Ok(_) => drop(capacity.insert(qualified(&driver, k), q.to_string())),
                Err(e) => errors.push(FieldError::new(format!("{path}.capacity[{k}].value"), e.to_string())),
            }
        }
        let device_reach = if per_device {
            let r = reach(&path, body, &mut errors);
            if r.is_none() {
                errors.push(FieldError::new(
                    &path,
                    "with perDeviceNodeSelection, exactly one of nodeName, nodeSelector or allNodes is required",
                ));
            }
            r
        } else {
            None
        };
        // What would change where the device may go or who may share it, and is not
        // implemented here: the device is not allocated by this scheduler, said by field.
        let present = |f: &str| body.get(f).is_some_and(|x| !x.is_null() && x != &Value::Array(Vec::new()));
        let mut consumes = Vec::new();
        let mut negative = None;
        for (j, c) in body.get("consumesCounters").and_then(Value::as_array).into_iter().flatten().enumerate()
        {
            let at = format!("{path}.consumesCounters[{j}]");
            let counter_set = c.get("counterSet").and_then(Value::as_str).unwrap_or("").to_string();
            if counter_set.is_empty() {
                errors.push(FieldError::new(format!("{at}.counterSet"), "required"));
            }
            let nano = counter_amounts(&at, c, true, &mut errors);
            // The API accepts a negative amount; consuming one would add to the set for every
            // other device: this scheduler does not allocate such a device, said.
            if let Some(k) = nano.iter().find(|(_, v)| **v < 0).map(|(k, _)| k) {
                negative.get_or_insert(format!("{at}.counters[{k}] (negative)"));
            }
            consumes.push(CounterUse { counter_set, nano });
        }
        let unsupported_field = ["taints", "bindingConditions"]
            .into_iter()
            .find(|f| present(f))
            .map(|f| format!("{path}.{f}"))
            .or(negative)
            .or_else(|| {
                ["allowMultipleAllocations", "bindsToNode"]
                    .into_iter()
                    .find(|f| body.get(*f).and_then(Value::as_bool) == Some(true))
                    .map(|f| format!("{path}.{f}"))
            });
        let mut device = Device {
            name: d.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
            attributes,
            capacity,
            reach: device_reach,
            consumes,
            unsupported: unsupported_field,
            fingerprint: None,
        };
        device.fingerprint = Some(crate::read::model::device::fingerprint(&driver, &device));
        devices.push(device);
    }
    let slice = ResourceSlice {
        name,
        driver,
        pool: text("/spec/pool/name"),
        generation: v.at("/spec/pool/generation").and_then(Value::as_i64).unwrap_or(0),
        slice_count: v.at("/spec/pool/resourceSliceCount").and_then(Value::as_i64).unwrap_or(0),
        reach: slice_reach,
        devices,
        counters,
        unsupported,
    };
    if errors.is_empty() { Ok(slice) } else { Err(errors) }
}

/// The `counters` map of a counter set or of a device's consumption at `path`: each value in
/// billionths, exact for canonical quantities, finer ones rounded up (`up`: what a device
/// consumes) or down (what a set has), so no rounding makes room that is not there (past
/// `i128`: its bound).
fn counter_amounts(path: &str, v: &Value, up: bool, errors: &mut Vec<FieldError>) -> BTreeMap<String, i128> {
    let mut out = BTreeMap::new();
    for (k, c) in v.get("counters").and_then(Value::as_object).into_iter().flatten() {
        let q = c.get("value").and_then(Value::as_str).unwrap_or("");
        match crate::read::quantity::parse(q) {
            Ok(q) => {
                let nano = q.nano_wide(up).unwrap_or(if q.is_negative() { i128::MIN } else { i128::MAX });
                out.insert(k.clone(), nano);
            }
            Err(e) => errors.push(FieldError::new(format!("{path}.counters[{k}].value"), e.to_string())),
        }
    }
    out
}

/// The name of the PVC an ephemeral volume's controller creates for it (`ephemeral.VolumeClaimName`).
pub fn ephemeral_claim(pod: &str, volume: &str) -> String {
    format!("{pod}-{volume}")
}

/// A pod's `spec.volumes` the volume filters read, in order. `pod` names the pod (ephemeral
/// volumes' PVCs are named after it).
pub fn pod_volumes(pod: &str, volumes: &[core::Volume]) -> Vec<PodVolume> {
    volumes.iter().filter_map(|v| pod_volume(pod, v)).collect()
}

fn pod_volume(pod: &str, v: &core::Volume) -> Option<PodVolume> {
    if let Some(c) = &v.persistent_volume_claim {
        return Some(PodVolume::Claim { claim: c.claim_name.clone(), ephemeral: false });
    }
    if v.ephemeral.is_some() {
        return Some(PodVolume::Claim { claim: ephemeral_claim(pod, &v.name), ephemeral: true });
    }
    let disk = if let Some(s) = &v.gce_persistent_disk {
        Disk::GcePd { pd_name: s.pd_name.clone(), read_only: s.read_only.unwrap_or(false) }
    } else if let Some(s) = &v.aws_elastic_block_store {
        Disk::AwsEbs { volume_id: s.volume_id.clone() }
    } else if let Some(s) = &v.rbd {
        Disk::Rbd {
            monitors: s.monitors.clone(),
            pool: s.pool.clone().unwrap_or_else(|| "rbd".into()),
            image: s.image.clone(),
            read_only: s.read_only.unwrap_or(false),
        }
    } else if let Some(s) = &v.iscsi {
        Disk::Iscsi { iqn: s.iqn.clone(), read_only: s.read_only.unwrap_or(false) }
    } else if let Some(s) = &v.azure_disk {
        Disk::Other { plugin: "kubernetes.io/azure-disk".into(), handle: s.disk_uri.clone() }
    } else if let Some(s) = &v.cinder {
        Disk::Other { plugin: "kubernetes.io/cinder".into(), handle: s.volume_id.clone() }
    } else {
        return None;
    };
    Some(PodVolume::Disk(disk))
}

/// The sources of a raw volume this module reads, by their JSON names.
const READ_SOURCES: [&str; 8] = [
    "persistentVolumeClaim",
    "ephemeral",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "rbd",
    "iscsi",
    "azureDisk",
    "cinder",
];

/// [`pod_volumes`] straight from a raw pod's `spec` map: only volumes with a source this module
/// reads are decoded (each into its typed `Volume`, the source checked as the typed decode checks
/// it). `None` when one of them is not of the type the typed decode reads: the caller leaves the
/// pod to the typed decode, for its error.
pub fn pod_volumes_raw(pod: &str, spec: Option<&Map<String, Value>>) -> Option<Vec<PodVolume>> {
    let Some(list) = spec.and_then(|s| s.get("volumes")).filter(|v| !v.is_null()) else {
        return Some(Vec::new());
    };
    let mut out = Vec::new();
    for v in list.as_array()? {
        let m = v.as_object()?;
        if !READ_SOURCES.iter().any(|s| m.get(*s).is_some_and(|x| !x.is_null())) {
            continue;
        }
        let typed = core::Volume::deserialize(v).ok()?;
        out.extend(pod_volume(pod, &typed));
    }
    Some(out)
}

/// Only the volumes a scheduler reads, with only the sources it reads: what `simulate` stamps a
/// workload's pods from (see [`crate::read::convert::scheduling_spec`]).
pub fn scheduling_volumes(volumes: Option<&Vec<core::Volume>>) -> Option<Vec<core::Volume>> {
    let kept: Vec<core::Volume> = volumes?.iter().filter_map(scheduling_volume).collect();
    (!kept.is_empty()).then_some(kept)
}

/// `v` with only the sources the volume filters read, or `None` when it has none of them.
pub fn scheduling_volume(v: &core::Volume) -> Option<core::Volume> {
    let read = v.persistent_volume_claim.is_some()
        || v.ephemeral.is_some()
        || v.gce_persistent_disk.is_some()
        || v.aws_elastic_block_store.is_some()
        || v.rbd.is_some()
        || v.iscsi.is_some()
        || v.azure_disk.is_some()
        || v.cinder.is_some();
    read.then(|| core::Volume {
        name: v.name.clone(),
        persistent_volume_claim: v.persistent_volume_claim.clone(),
        ephemeral: v.ephemeral.clone(),
        gce_persistent_disk: v.gce_persistent_disk.clone(),
        aws_elastic_block_store: v.aws_elastic_block_store.clone(),
        rbd: v.rbd.clone(),
        iscsi: v.iscsi.clone(),
        azure_disk: v.azure_disk.clone(),
        cinder: v.cinder.clone(),
        ..core::Volume::default()
    })
}

/// The PVCs the ephemeral volume controller creates for `pod`'s generic ephemeral volumes (what
/// `kubectl gang simulate` adds beside the pods it expands): `<pod>-<volume>` in the pod's
/// namespace, owned by the pod, with the labels, annotations and spec of the volume's
/// `volumeClaimTemplate`.
pub fn ephemeral_claims(pod: &Value) -> Vec<Value> {
    let name = pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let namespace = pod.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default");
    let uid = pod.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
    let volumes = pod.pointer("/spec/volumes").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    volumes
        .iter()
        .filter_map(|v| {
            let template = v.pointer("/ephemeral/volumeClaimTemplate")?;
            let volume = v.get("name").and_then(Value::as_str)?;
            let mut metadata = serde_json::Map::new();
            for key in ["labels", "annotations"] {
                if let Some(m) = template.pointer(&format!("/metadata/{key}")).filter(|m| m.is_object()) {
                    metadata.insert(key.into(), m.clone());
                }
            }
            metadata.insert("name".into(), Value::String(ephemeral_claim(name, volume)));
            metadata.insert("namespace".into(), Value::String(namespace.into()));
            metadata.insert(
                "ownerReferences".into(),
                serde_json::json!([{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid,
                                    "controller": true, "blockOwnerDeletion": true}]),
            );
            Some(serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": metadata, "spec": template.get("spec").cloned().unwrap_or(Value::Null)}))
        })
        .collect()
}

/// The ResourceClaims the resourceclaim controller creates for `pod`'s `spec.resourceClaims`
/// entries that name a template (what `kubectl gang simulate` adds beside the pods it expands):
/// named `<pod>-<entry>` (the controller adds five random characters), in the pod's namespace,
/// owned by the pod, with the template's labels, annotations and `spec.spec`, at the template's
/// `apiVersion`; each recorded in the pod's `status.resourceClaimStatuses`, as the controller
/// records it. `templates`: (namespace, name) → the ResourceClaimTemplate. An entry whose template
/// is not there, or that the pod's status names already, gets none.
pub fn template_claims(pod: &mut Value, templates: &BTreeMap<(String, String), Value>) -> Vec<Value> {
    let name = pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
    let namespace =
        pod.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string();
    let uid = pod.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string();
    let entries = pod.pointer("/spec/resourceClaims").and_then(Value::as_array).cloned().unwrap_or_default();
    let named: BTreeSet<String> = pod
        .pointer("/status/resourceClaimStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    let mut claims = Vec::new();
    let mut statuses = Vec::new();
    for e in &entries {
        let (Some(entry), Some(template)) = (
            e.get("name").and_then(Value::as_str),
            e.get("resourceClaimTemplateName").and_then(Value::as_str),
        ) else {
            continue;
        };
        if named.contains(entry) {
            continue;
        }
        let Some(t) = templates.get(&(namespace.clone(), template.to_string())) else { continue };
        let claim = format!("{name}-{entry}");
        let mut metadata = serde_json::Map::new();
        for key in ["labels", "annotations"] {
            if let Some(m) = t.pointer(&format!("/spec/metadata/{key}")).filter(|m| m.is_object()) {
                metadata.insert(key.into(), m.clone());
            }
        }
        metadata.insert("name".into(), Value::String(claim.clone()));
        metadata.insert("namespace".into(), Value::String(namespace.clone()));
        metadata.insert(
            "ownerReferences".into(),
            serde_json::json!([{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid,
                                "controller": true, "blockOwnerDeletion": true}]),
        );
        let api_version = t.get("apiVersion").cloned().unwrap_or_else(|| "resource.k8s.io/v1".into());
        claims.push(
            serde_json::json!({"apiVersion": api_version, "kind": "ResourceClaim", "metadata": metadata,
            "spec": t.pointer("/spec/spec").cloned().unwrap_or_else(|| serde_json::json!({}))}),
        );
        statuses.push(serde_json::json!({"name": entry, "resourceClaimName": claim}));
    }
    if !statuses.is_empty() {
        if !pod.get("status").is_some_and(Value::is_object) {
            pod["status"] = serde_json::json!({});
        }
        match pod["status"]["resourceClaimStatuses"].as_array_mut() {
            Some(list) => list.extend(statuses),
            None => pod["status"]["resourceClaimStatuses"] = Value::Array(statuses),
        }
    }
    claims
}

/// A pod's `spec.resourceClaims`, each with the claim it names: a template's from the pod's
/// `status.resourceClaimStatuses` (`resourceclaim.Name`).
pub fn pod_resource_claims(
    claims: &[core::PodResourceClaim],
    statuses: &[core::PodResourceClaimStatus],
) -> Vec<PodResourceClaim> {
    claims
        .iter()
        .map(|c| {
            let claim = match (&c.resource_claim_name, &c.resource_claim_template_name) {
                (Some(name), _) => ClaimName::Named(name.clone()),
                (None, _) => match statuses.iter().find(|s| s.name == c.name) {
                    Some(s) => match &s.resource_claim_name {
                        Some(name) => ClaimName::Generated(name.clone()),
                        None => ClaimName::NotNeeded,
                    },
                    None => ClaimName::NotCreated,
                },
            };
            PodResourceClaim { name: c.name.clone(), claim }
        })
        .collect()
}

/// [`pod_resource_claims`] from a raw pod's `spec` and `status` maps; `None` when they are not
/// of the types the typed decode reads.
pub fn pod_resource_claims_raw(
    spec: Option<&Map<String, Value>>,
    status: Option<&Map<String, Value>>,
) -> Option<Vec<PodResourceClaim>> {
    fn list<'a>(m: Option<&'a Map<String, Value>>, key: &str) -> Option<&'a Value> {
        m.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }
    // Both decoded whenever present, as the typed decode decodes them.
    let statuses: Vec<core::PodResourceClaimStatus> = match list(status, "resourceClaimStatuses") {
        None => Vec::new(),
        Some(v) => Vec::deserialize(v).ok()?,
    };
    let claims: Vec<core::PodResourceClaim> = match list(spec, "resourceClaims") {
        None => return Some(Vec::new()),
        Some(v) => Vec::deserialize(v).ok()?,
    };
    Some(pod_resource_claims(&claims, &statuses))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_claims_class_is_the_beta_annotation_else_the_field_and_empty_names_none() {
        let c = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "ml", "uid": "u1",
                         "annotations": {"volume.beta.kubernetes.io/storage-class": "old",
                                         "volume.kubernetes.io/selected-node": "n1",
                                         "pv.kubernetes.io/bind-completed": "yes"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "w-0", "uid": "pod-uid", "controller": true}]},
            "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOncePod"], "volumeName": "pv-1",
                     "resources": {"requests": {"storage": "10Gi"}}, "selector": {}},
            "status": {"phase": "Lost"}});
        let p = pvc_from_value(&c).unwrap();
        assert_eq!(p.class.as_deref(), Some("old"));
        assert_eq!(p.storage, 10 << 30);
        assert!(p.access_modes.contains(&AccessMode::ReadWriteOncePod));
        assert!(p.bound() && p.lost && p.selected_node.as_deref() == Some("n1"));
        assert_eq!(p.owner.as_deref(), Some("pod-uid"));
        assert_eq!(p.selector, Some(LabelSelector::default()), "an empty selector selects everything");
        let mut none = c.clone();
        none["metadata"]["annotations"] = json!({});
        none["spec"]["storageClassName"] = json!("");
        assert_eq!(pvc_from_value(&none).unwrap().class, None);
    }

    #[test]
    fn bad_fields_are_named() {
        let c = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "d"},
            "spec": {"accessModes": ["Sometimes"], "volumeMode": "Tape", "resources": {"requests": {"storage": "lots"}}}});
        let e = pvc_from_value(&c).unwrap_err();
        let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["spec.accessModes[0]", "spec.resources.requests[storage]", "spec.volumeMode"]);
        let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "p"},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]}}}});
        assert_eq!(
            pv_from_value(&pv).unwrap_err()[0].path,
            "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator"
        );
        let sc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"},
            "provisioner": "x", "volumeBindingMode": "Later"});
        assert_eq!(class_from_value(&sc).unwrap_err()[0].path, "volumeBindingMode");
        let wrong_type = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "p"}, "spec": {"capacity": 3}});
        assert_eq!(pv_from_value(&wrong_type).unwrap_err()[0].path, "spec.capacity");
    }

    #[test]
    fn a_pv_attaches_its_csi_volume_or_the_driver_its_in_tree_plugin_migrates_to() {
        let pv = |source: Value| {
            let mut spec = source;
            spec["capacity"] = json!({"storage": "1Gi"});
            pv_from_value(&json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "p"}, "spec": spec}))
                .unwrap()
                .attach
        };
        let csi = pv(json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"}})).unwrap();
        assert_eq!(
            (csi.driver.as_str(), csi.handle.as_str(), csi.in_tree),
            ("ebs.csi.aws.com", "vol-1", None)
        );
        let ebs = pv(json!({"awsElasticBlockStore": {"volumeID": "vol-2"}})).unwrap();
        assert_eq!(
            (ebs.driver.as_str(), ebs.in_tree.as_deref()),
            ("ebs.csi.aws.com", Some("kubernetes.io/aws-ebs"))
        );
        assert_eq!(pv(json!({"nfs": {"server": "s", "path": "/"}})), None);
    }

    #[test]
    fn raw_pod_volumes_are_the_typed_ones() {
        let spec = json!({"volumes": [
            {"name": "cfg", "configMap": {"name": "c"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
            {"name": "pd", "gcePersistentDisk": {"pdName": "disk-1", "readOnly": true}},
            {"name": "ceph", "rbd": {"monitors": ["m1"], "image": "img"}}]});
        let typed: core::PodSpec = serde_json::from_value(spec.clone()).unwrap();
        let want = pod_volumes("w-0", typed.volumes.as_deref().unwrap_or_default());
        assert_eq!(pod_volumes_raw("w-0", spec.as_object()), Some(want.clone()));
        assert_eq!(want.len(), 4);
        assert_eq!(want[1], PodVolume::Claim { claim: "w-0-scratch".into(), ephemeral: true });
        assert_eq!(
            want[3],
            PodVolume::Disk(Disk::Rbd {
                monitors: vec!["m1".into()],
                pool: "rbd".into(),
                image: "img".into(),
                read_only: false
            })
        );
        let odd = json!({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": 7}}]});
        assert_eq!(pod_volumes_raw("w-0", odd.as_object()), None, "left to the typed decode for its error");
    }

    #[test]
    fn a_template_claim_is_named_by_the_pods_status() {
        let spec = json!({"resourceClaims": [
            {"name": "gpu", "resourceClaimTemplateName": "t"},
            {"name": "shared", "resourceClaimName": "pool"},
            {"name": "later", "resourceClaimTemplateName": "t"},
            {"name": "none", "resourceClaimTemplateName": "t"}]});
        let status = json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "w-0-gpu-x7k"}, {"name": "none"}]});
        let got = pod_resource_claims_raw(spec.as_object(), status.as_object()).unwrap();
        let claims: Vec<ClaimName> = got.into_iter().map(|c| c.claim).collect();
        assert_eq!(
            claims,
            [
                ClaimName::Generated("w-0-gpu-x7k".into()),
                ClaimName::Named("pool".into()),
                ClaimName::NotCreated,
                ClaimName::NotNeeded
            ]
        );
    }

    #[test]
    fn a_resource_claim_of_any_served_version_reads_its_allocation() {
        for version in ["v1", "v1beta2", "v1beta1"] {
            let claim = json!({"apiVersion": format!("resource.k8s.io/{version}"), "kind": "ResourceClaim",
                "metadata": {"name": "gpu", "namespace": "ml", "uid": "c1"},
                "spec": {},
                "status": {"allocation": {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
                           "reservedFor": [{"resource": "pods", "name": "w-0", "uid": "p1"}]}});
            let Some(Ok(Stored::ResourceClaim(c))) = from_value(&claim) else { panic!("{version}: {claim}") };
            assert_eq!(c.reserved_for, ["p1"]);
            let terms = c.allocation.and_then(|a| a.node_selector).unwrap();
            assert_eq!(terms[0].match_fields[0].values, ["n1"]);
        }
    }

    #[test]
    fn shared_counters_and_consumption_are_read_in_billionths_in_every_version() {
        for version in ["v1", "v1beta2", "v1beta1"] {
            let uses = json!([{"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}, "compute": {"value": "1.5"}}}]);
            let device = if version == "v1beta1" {
                json!({"name": "mig", "basic": {"consumesCounters": uses}})
            } else {
                json!({"name": "mig", "consumesCounters": uses})
            };
            let slice = json!({"apiVersion": format!("resource.k8s.io/{version}"), "kind": "ResourceSlice",
                "metadata": {"name": "s"},
                "spec": {"driver": "gpu.example.com", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}, "nodeName": "n1",
                         "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}, "compute": {"value": "7"}}}],
                         "devices": [device]}});
            let s = resource_slice_from_value(version, &slice).unwrap_or_else(|e| panic!("{version}: {e:?}"));
            assert_eq!(s.counters[0].name, "gpu-0");
            assert_eq!(s.counters[0].nano["memory"], 80 * (1 << 30) * 1_000_000_000);
            assert_eq!(s.counters[0].nano["compute"], 7_000_000_000);
            let d = &s.devices[0];
            assert_eq!(d.consumes[0].counter_set, "gpu-0", "{version}");
            assert_eq!(d.consumes[0].nano["compute"], 1_500_000_000);
            assert_eq!(d.unsupported, None, "{version}: counters are allocated");
        }
        // A malformed amount is refused by field; a negative consumption (the API accepts it)
        // makes the device one this scheduler does not allocate, named.
        let slice = |amount: &str| {
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
                "spec": {"driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "allNodes": true,
                         "sharedCounters": [{"name": "set", "counters": {"c": {"value": "2"}}}],
                         "devices": [{"name": "x", "consumesCounters": [{"counterSet": "set", "counters": {"c": {"value": amount}}}]}]}})
        };
        let errors = resource_slice_from_value("v1", &slice("lots")).unwrap_err();
        assert_eq!(errors[0].path, "spec.devices[0].consumesCounters[0].counters[c].value", "{errors:?}");
        let s = resource_slice_from_value("v1", &slice("-1")).unwrap();
        assert_eq!(
            s.devices[0].unsupported.as_deref(),
            Some("spec.devices[0].consumesCounters[0].counters[c] (negative)")
        );
        // Large amounts are exact; a set's value rounds down and a consumption up.
        let s = resource_slice_from_value("v1", &slice("1e25")).unwrap();
        assert_eq!(s.devices[0].consumes[0].nano["c"], 10i128.pow(34));
        let s = resource_slice_from_value("v1", &slice("1500u")).unwrap();
        assert_eq!(s.devices[0].consumes[0].nano["c"], 1_500_000, "exact to the billionth");
        // Finer than a billionth, a quantity is rounded up when parsed, as Kubernetes parses it
        // (`1.5e-9` is `2n`), a set's value as a consumption.
        let s = resource_slice_from_value("v1", &slice("1.5e-9")).unwrap();
        assert_eq!(s.devices[0].consumes[0].nano["c"], 2);
        let mut set = slice("1");
        set["spec"]["sharedCounters"][0]["counters"]["c"]["value"] = json!("1.5e-9");
        let s = resource_slice_from_value("v1", &set).unwrap();
        assert_eq!(s.counters[0].nano["c"], 2);
        let s = resource_slice_from_value("v1", &slice("1e40")).unwrap();
        assert_eq!(s.devices[0].consumes[0].nano["c"], i128::MAX);
    }

    #[test]
    fn a_csi_nodes_limits_and_migrated_plugins() {
        let n = json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": "n1", "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs,kubernetes.io/gce-pd"}},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}},
                                 {"name": "other", "nodeID": "x"}]}});
        let c = csi_node_from_value(&n).unwrap();
        assert_eq!(c.limits.get("ebs.csi.aws.com"), Some(&25));
        assert!(!c.limits.contains_key("other"));
        assert!(c.migrated.contains("kubernetes.io/gce-pd"));
    }
}
