//! The storage and device objects the volume filters read, as plain data: PersistentVolumeClaims,
//! PersistentVolumes, StorageClasses, CSINodes and DRA ResourceClaims ([`Storage`], carried by
//! the [`super::Snapshot`]), and what a pod asks of them ([`PodVolume`], [`PodResourceClaim`]).
//! Only the fields kube-scheduler's `VolumeBinding`, `VolumeZone`, `VolumeRestrictions`,
//! `NodeVolumeLimits` and `DynamicResources` plugins read are kept; [`crate::read::volume`] reads the
//! Kubernetes objects into these types.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::device::{AllocatedDevice, DeviceAsk, DeviceClass, ResourceSlice, SelectorCache};
use super::{LabelSelector, NodeSelectorTerm, ObjectKey};

/// PVC annotation: the node kube-scheduler (or we) chose for a WaitForFirstConsumer claim to be
/// provisioned on; the provisioner removes it when it cannot provision there.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// PVC annotation the PV controller sets once it has bound the claim.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// PV and PVC annotation: the binding was made by a controller (a binder), not pre-bound by a user.
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The StorageClass annotation older PVs and PVCs carry instead of `storageClassName`; it wins.
pub const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// CSINode annotation: the in-tree volume plugins whose volumes the node's CSI drivers serve.
pub const MIGRATED_PLUGINS: &str = "storage.alpha.kubernetes.io/migrated-plugins";
/// A StorageClass provisioner that provisions nothing (static PVs only).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// How many consumers a ResourceClaim may be reserved for (`ResourceClaimReservedForMaxSize`).
pub const RESERVED_FOR_MAX: usize = 256;

/// Every storage and device object the cycle reads, keyed as the API keys them. Empty for
/// snapshots that carry none (hand-written files): then a pod with a PVC waits, naming it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub claims: BTreeMap<ObjectKey, Pvc>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub volumes: BTreeMap<String, Pv>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub classes: BTreeMap<String, StorageClass>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub csi_nodes: BTreeMap<String, CsiNode>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_claims: BTreeMap<ObjectKey, ResourceClaim>,
    /// Volcano's HyperNodes (`topology.volcano.sh/v1alpha1`, cluster-scoped), by name: the network
    /// tiers a Volcano PodGroup's `networkTopology` bounds, read as the levels
    /// [`HYPERNODE_TIER_PREFIX`]`<tier>` ([`crate::read::hypernode`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hypernodes: BTreeMap<String, HyperNode>,
    /// KAI-Scheduler's `Topology` objects (`kai.scheduler`, cluster-scoped), by name: each a
    /// level order (node label keys, broadest first) that a KAI PodGroup names in
    /// `topologyConstraint.topology`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kai_topologies: BTreeMap<String, Vec<String>>,
    /// Kueue's `Topology` objects (`kueue.x-k8s.io`, cluster-scoped), by name: level orders,
    /// broadest first, through which a preferred level is relaxed one level at a time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kueue_topologies: BTreeMap<String, Vec<String>>,
    /// Koordinator's `ClusterNetworkTopology` named `default` (`scheduling.koordinator.sh`, the
    /// only one its scheduler reads): its network layers, broadest first, `NodeTopologyLayer`
    /// last; each is read as the level [`NETWORK_LAYER_PREFIX`]`<layer>`, and so is
    /// `ClusterTopologyLayer`, the whole tree ([`crate::read::network_layer`]). Empty: the
    /// cluster has none.
    #[serde(default, skip_serializing_if = "NetworkLayers::is_empty")]
    pub network_layers: NetworkLayers,
    /// DRA ResourceSlices (`resource.k8s.io`, cluster-scoped), by name: the devices drivers
    /// publish, which claims are allocated from.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_slices: BTreeMap<String, ResourceSlice>,
    /// DRA DeviceClasses, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub device_classes: BTreeMap<String, DeviceClass>,
    /// Selector verdicts kept between cycles (see [`SelectorCache`]).
    #[serde(skip)]
    pub selector_cache: SelectorCache,
}

/// The layers of Koordinator's `ClusterNetworkTopology`, broadest first (`NodeTopologyLayer`
/// last), with the levels they are read as ([`NETWORK_LAYER_PREFIX`]`<layer>`, the
/// `ClusterTopologyLayer` first), kept beside them so they can be handed out as a level order.
/// Serialized as the list of layers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<NetworkLayer>", into = "Vec<NetworkLayer>")]
pub struct NetworkLayers {
    layers: Vec<NetworkLayer>,
    keys: Vec<String>,
}

impl NetworkLayers {
    pub fn layers(&self) -> &[NetworkLayer] {
        &self.layers
    }

    /// The levels the layers are read as, broadest first: the whole tree
    /// (`ClusterTopologyLayer`), each layer, the nodes. Empty when there are no layers.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl From<Vec<NetworkLayer>> for NetworkLayers {
    fn from(layers: Vec<NetworkLayer>) -> Self {
        let keys = if layers.is_empty() {
            Vec::new()
        } else {
            std::iter::once(CLUSTER_LAYER)
                .chain(layers.iter().map(|l| l.name.as_str()))
                .map(|l| format!("{NETWORK_LAYER_PREFIX}{l}"))
                .collect()
        };
        NetworkLayers { layers, keys }
    }
}

impl From<NetworkLayers> for Vec<NetworkLayer> {
    fn from(n: NetworkLayers) -> Self {
        n.layers
    }
}

/// The topology key a Koordinator network layer is read as: `koordinator.sh/network-layer-BlockLayer`
/// is "the BlockLayer domain a node belongs to" (the value of the first of the layer's label keys
/// the node carries), a level like any node label's.
pub const NETWORK_LAYER_PREFIX: &str = "koordinator.sh/network-layer-";

/// The one `ClusterNetworkTopology` Koordinator's scheduler reads.
pub const NETWORK_TOPOLOGY_NAME: &str = "default";

/// Koordinator's built-in layer of the nodes themselves (each node a domain).
pub const NODE_LAYER: &str = "NodeTopologyLayer";
/// Koordinator's built-in layer of the whole cluster (one domain).
pub const CLUSTER_LAYER: &str = "ClusterTopologyLayer";

/// One layer of Koordinator's `ClusterNetworkTopology`: its name (`topologyLayer`) and the node
/// labels whose value names a node's domain in it (`labelKey`, the first a node carries).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkLayer {
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub label_keys: Vec<String>,
}

/// The topology key a HyperNode tier is read as: `volcano.sh/hypernode-tier-1` is "the tier-1
/// HyperNode a node belongs to", a level like any node label's (no node carries it as a label).
pub const HYPERNODE_TIER_PREFIX: &str = "volcano.sh/hypernode-tier-";

/// The largest compiled size a HyperNode member's `regexMatch.pattern` may take (the `regex`
/// crate's bound on a compiled program): a pattern is matched against every node name.
pub const MAX_PATTERN_SIZE: usize = 1 << 20;

/// A Volcano HyperNode: a network domain of tier `tier` whose members are nodes (tier 1, most
/// often) or HyperNodes of lower tiers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HyperNode {
    pub name: String,
    pub tier: u32,
    /// `spec.tierName`: the name a PodGroup's `networkTopology.highestTierName` gives its tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier_name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<HyperNodeMember>,
}

/// One `spec.members` entry: nodes, or HyperNodes, chosen by one selector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HyperNodeMember {
    /// `type: HyperNode` (else `Node`).
    #[serde(default)]
    pub hypernode: bool,
    pub selector: MemberSelector,
}

/// How a member is chosen: by exact name, by a regular expression over names (RE2 syntax, as Go's
/// `regexp` Volcano uses), or (nodes only) by labels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MemberSelector {
    Exact(String),
    Regex(String),
    Labels(crate::read::model::LabelSelector),
}

impl Storage {
    /// The level order (broadest first) `gang`'s level `key` belongs to: the KAI Topology the gang
    /// names (none when the cluster lacks it); else the policy's `topologyLevels` when they list
    /// `key`; else the first by name of the cluster's Kueue Topologies, then KAI's, that has
    /// `key` — as Kueue relaxes a PodSet's preferred level through the Topology of its flavor
    /// (which flavor is Kueue's to say; the first that has the level stands for it). Empty: no
    /// order is known.
    pub fn level_order<'s>(
        &'s self,
        gang: &crate::read::model::Gang,
        policy: &'s [String],
        key: &str,
    ) -> &'s [String] {
        if let Some(name) = gang.topology_object.as_deref() {
            return self.kai_topologies.get(name).map_or(&[], Vec::as_slice);
        }
        if key.starts_with(NETWORK_LAYER_PREFIX) {
            return self.network_layers.keys();
        }
        if policy.iter().any(|l| l == key) {
            return policy;
        }
        (self.kueue_topologies.values().chain(self.kai_topologies.values()))
            .find(|levels| levels.iter().any(|l| l == key))
            .map_or(&[], Vec::as_slice)
    }

    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
            && self.volumes.is_empty()
            && self.classes.is_empty()
            && self.csi_nodes.is_empty()
            && self.resource_claims.is_empty()
            && self.hypernodes.is_empty()
            && self.kai_topologies.is_empty()
            && self.kueue_topologies.is_empty()
            && self.network_layers.is_empty()
            && self.resource_slices.is_empty()
            && self.device_classes.is_empty()
    }
}

/// A PersistentVolume access mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AccessMode {
    ReadWriteOnce,
    ReadOnlyMany,
    ReadWriteMany,
    ReadWriteOncePod,
}

impl AccessMode {
    /// The mode named `s`, as the API spells it.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ReadWriteOnce" => Some(AccessMode::ReadWriteOnce),
            "ReadOnlyMany" => Some(AccessMode::ReadOnlyMany),
            "ReadWriteMany" => Some(AccessMode::ReadWriteMany),
            "ReadWriteOncePod" => Some(AccessMode::ReadWriteOncePod),
            _ => None,
        }
    }
}

/// `Filesystem` (the default) or `Block`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum VolumeMode {
    #[default]
    Filesystem,
    Block,
}

/// A PersistentVolumeClaim as the volume filters read it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pvc {
    pub key: ObjectKey,
    #[serde(default)]
    pub uid: String,
    /// Its StorageClass: the beta annotation, else `spec.storageClassName`; `None` when neither
    /// names one (`""` included), as `GetPersistentVolumeClaimClass` reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    #[serde(default)]
    pub access_modes: BTreeSet<AccessMode>,
    /// `spec.resources.requests.storage`, in bytes.
    #[serde(default)]
    pub storage: i64,
    /// `spec.selector` (absent: any PV).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub volume_mode: VolumeMode,
    /// `spec.volumeName`: the PV it is bound (or being bound) to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_name: Option<String>,
    /// The PV controller finished binding it (annotation `pv.kubernetes.io/bind-completed`).
    #[serde(default)]
    pub bind_completed: bool,
    /// Annotation `volume.kubernetes.io/selected-node`: provisioning was asked for this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_node: Option<String>,
    /// `metadata.deletionTimestamp` is set.
    #[serde(default)]
    pub deleting: bool,
    /// `status.phase` is `Lost`: bound to a PV that no longer exists.
    #[serde(default)]
    pub lost: bool,
    /// The UID of its controlling owner (an ephemeral volume's PVC is owned by its pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl Pvc {
    /// Bound as kube-scheduler counts it: `spec.volumeName` set and the PV controller done.
    pub fn bound(&self) -> bool {
        self.volume_name.is_some() && self.bind_completed
    }
}

/// A volume a node attaches, as `NodeVolumeLimits` counts it: a CSI driver and the volume's
/// handle. In-tree sources name the plugin (`kubernetes.io/aws-ebs`) and count against the CSI
/// driver that serves them on nodes whose CSINode says the plugin is migrated.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attachable {
    /// The CSI driver, or for an in-tree source the CSI driver it migrates to.
    pub driver: String,
    pub handle: String,
    /// The in-tree plugin, when the source is not CSI: counted only where it is migrated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_tree: Option<String>,
}

/// A PersistentVolume as the volume filters read it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pv {
    pub name: String,
    /// The beta annotation, else `spec.storageClassName` (`None`: no class).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// `spec.capacity.storage`, in bytes.
    #[serde(default)]
    pub capacity: i64,
    #[serde(default)]
    pub access_modes: BTreeSet<AccessMode>,
    #[serde(default)]
    pub volume_mode: VolumeMode,
    /// `spec.nodeAffinity.required.nodeSelectorTerms` (ORed); `None`: any node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<Vec<NodeSelectorTerm>>,
    /// `metadata.labels`: what a claim's selector matches, and the zone labels `VolumeZone` reads.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `spec.claimRef`: the claim it is bound or pre-bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_ref: Option<ClaimRef>,
    /// `status.phase` is `Available`.
    #[serde(default)]
    pub available: bool,
    #[serde(default)]
    pub deleting: bool,
    /// What a node attaches for it (`None`: nothing `NodeVolumeLimits` counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<Attachable>,
}

/// A PV's `spec.claimRef`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimRef {
    pub namespace: String,
    pub name: String,
    /// Empty when the reference does not say (then any claim of that name matches).
    #[serde(default)]
    pub uid: String,
}

impl Pv {
    /// Whether it is bound or pre-bound to `claim` (`IsVolumeBoundToClaim`).
    pub fn bound_to(&self, claim: &Pvc) -> bool {
        self.claim_ref.as_ref().is_some_and(|r| {
            r.namespace == claim.key.namespace
                && r.name == claim.key.name
                && (r.uid.is_empty() || r.uid == claim.uid)
        })
    }
}

/// `volumeBindingMode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum BindingMode {
    #[default]
    Immediate,
    WaitForFirstConsumer,
}

/// One `allowedTopologies` term: every `matchLabelExpressions` entry holds (a node label whose
/// value is one of the listed ones).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyTerm {
    #[serde(default)]
    pub match_label_expressions: Vec<(String, Vec<String>)>,
}

/// A StorageClass as the volume filters read it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageClass {
    pub name: String,
    #[serde(default)]
    pub provisioner: String,
    #[serde(default)]
    pub binding_mode: BindingMode,
    /// Terms ORed; empty: every node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_topologies: Vec<TopologyTerm>,
}

impl StorageClass {
    /// Whether it can provision a volume at all (`""` and `kubernetes.io/no-provisioner` cannot).
    pub fn provisions(&self) -> bool {
        !self.provisioner.is_empty() && self.provisioner != NO_PROVISIONER
    }
}

/// A CSINode: the attach limits of the node's CSI drivers and the in-tree plugins they serve.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsiNode {
    pub name: String,
    /// Driver → `spec.drivers[].allocatable.count` (drivers that state no count are absent).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, i64>,
    /// Annotation `storage.alpha.kubernetes.io/migrated-plugins`, split at commas.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub migrated: BTreeSet<String>,
}

/// A DRA ResourceClaim (`resource.k8s.io`) as the cycle reads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaim {
    pub key: ObjectKey,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub deleting: bool,
    /// The UID of its controlling owner (a claim generated from a template is owned by its pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// `status.allocation`, when devices are allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<Allocation>,
    /// `status.reservedFor[].uid`: the consumers it is reserved for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_for: Vec<String>,
    /// `spec.devices`: what it asks for.
    #[serde(default)]
    pub ask: DeviceAsk,
}

/// A ResourceClaim's `status.allocation`, as far as placement goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Allocation {
    /// `nodeSelector.nodeSelectorTerms` (ORed); `None`: the devices are reachable from any node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<Vec<NodeSelectorTerm>>,
    /// `devices.results[]`: the devices it holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<AllocatedDevice>,
}

/// One entry of a pod's `spec.volumes` the volume filters read (the others — configMaps,
/// secrets, emptyDirs, … — place nothing).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PodVolume {
    /// `persistentVolumeClaim`, or `ephemeral` (the PVC the ephemeral volume controller creates,
    /// named `<pod>-<volume>` and owned by the pod).
    Claim {
        /// The PVC's name, in the pod's namespace.
        claim: String,
        #[serde(default)]
        ephemeral: bool,
    },
    /// An inline disk `VolumeRestrictions` checks for conflicts (and `NodeVolumeLimits` counts,
    /// where its plugin is migrated to CSI).
    Disk(Disk),
}

/// An inline disk source: who else may mount it on the same node.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Disk {
    /// `gcePersistentDisk`: shared only read-only by all.
    GcePd { pd_name: String, read_only: bool },
    /// `awsElasticBlockStore`: never shared.
    AwsEbs { volume_id: String },
    /// `rbd`: one read-write mount of an image (same pool and image, a monitor in common).
    Rbd { monitors: Vec<String>, pool: String, image: String, read_only: bool },
    /// `iscsi`: one read-write mount of an IQN.
    Iscsi { iqn: String, read_only: bool },
    /// `azureDisk` and `cinder`: no conflict rule, but counted against attach limits where
    /// migrated to CSI.
    Other { plugin: String, handle: String },
}

impl Disk {
    /// Whether this disk and `other` cannot both be mounted on one node (`isVolumeConflict`).
    pub fn conflicts(&self, other: &Disk) -> bool {
        match (self, other) {
            (Disk::GcePd { pd_name: a, read_only: ra }, Disk::GcePd { pd_name: b, read_only: rb }) => {
                a == b && !(*ra && *rb)
            }
            (Disk::AwsEbs { volume_id: a }, Disk::AwsEbs { volume_id: b }) => a == b,
            (Disk::Iscsi { iqn: a, read_only: ra }, Disk::Iscsi { iqn: b, read_only: rb }) => {
                a == b && !(*ra && *rb)
            }
            (
                Disk::Rbd { monitors: ma, pool: pa, image: ia, read_only: ra },
                Disk::Rbd { monitors: mb, pool: pb, image: ib, read_only: rb },
            ) => ma.iter().any(|m| mb.contains(m)) && pa == pb && ia == ib && !(*ra && *rb),
            _ => false,
        }
    }

    /// What a node attaches for it, counted against its driver's limit where the in-tree plugin
    /// is migrated to CSI (`None`: not attachable, RBD and iSCSI are not migrated).
    pub fn attachable(&self) -> Option<Attachable> {
        let (plugin, handle) = match self {
            Disk::GcePd { pd_name, .. } => ("kubernetes.io/gce-pd", pd_name.as_str()),
            Disk::AwsEbs { volume_id } => ("kubernetes.io/aws-ebs", volume_id.as_str()),
            Disk::Other { plugin, handle } => (plugin.as_str(), handle.as_str()),
            Disk::Rbd { .. } | Disk::Iscsi { .. } => return None,
        };
        let driver = csi_driver_of(plugin)?;
        Some(Attachable {
            driver: driver.to_string(),
            handle: handle.to_string(),
            in_tree: Some(plugin.into()),
        })
    }
}

/// The CSI driver an in-tree volume plugin migrates to (csi-translation-lib), for the plugins whose
/// volumes attach to nodes.
pub fn csi_driver_of(plugin: &str) -> Option<&'static str> {
    match plugin {
        "kubernetes.io/aws-ebs" => Some("ebs.csi.aws.com"),
        "kubernetes.io/gce-pd" => Some("pd.csi.storage.gke.io"),
        "kubernetes.io/azure-disk" => Some("disk.csi.azure.com"),
        "kubernetes.io/cinder" => Some("cinder.csi.openstack.org"),
        _ => None,
    }
}

/// One entry of a pod's `spec.resourceClaims`, with the ResourceClaim it names.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodResourceClaim {
    /// The entry's `name`.
    pub name: String,
    pub claim: ClaimName,
}

/// Which ResourceClaim a pod's `spec.resourceClaims` entry names (`resourceclaim.Name`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClaimName {
    /// `resourceClaimName`.
    Named(String),
    /// Generated from `resourceClaimTemplateName`; the name from the pod's
    /// `status.resourceClaimStatuses` (the claim must be owned by the pod).
    Generated(String),
    /// A template entry the pod's status does not list yet: the claim is not created yet.
    NotCreated,
    /// A template entry whose status names no claim: none is needed.
    NotNeeded,
}
