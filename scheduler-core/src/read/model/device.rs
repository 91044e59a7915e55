//! The DRA objects device allocation reads (`resource.k8s.io`), as plain data: the devices
//! drivers publish ([`ResourceSlice`]), the classes claims select them through ([`DeviceClass`]),
//! and what a ResourceClaim asks for ([`DeviceRequest`], [`MatchAttribute`]). Carried by the
//! snapshot's [`super::volume::Storage`]; [`crate::read::volume`] reads the Kubernetes objects into
//! these types, and the cycle's allocator allocates as upstream's structured allocator does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::NodeSelectorTerm;

/// The finalizer kube-scheduler puts on a claim it allocates, before writing the allocation, so
/// the claim is not deleted while its devices are in use (`resourceapi.Finalizer`).
pub const CLAIM_FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// How many requests a claim may have, and how many results an allocation (`DeviceRequestsMaxSize`,
/// `AllocationResultsMaxSize`).
pub const REQUESTS_MAX: usize = 32;
/// How many devices a request in `All` mode may get at most (`AllocationResultsMaxSize`).
pub const RESULTS_MAX: usize = 32;

/// A device, as a claim's allocation names it: driver, pool and device name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DeviceId {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// Which nodes a slice's (or a device's) devices are reachable from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Reach {
    /// `nodeName`: local to this node.
    Node(String),
    /// `nodeSelector`: the nodes it selects (terms ORed).
    Selector(Vec<NodeSelectorTerm>),
    /// `allNodes`.
    All,
}

/// A ResourceSlice: some of the devices of one pool of one driver.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSlice {
    pub name: String,
    pub driver: String,
    pub pool: String,
    /// `pool.generation`: only the slices of a pool's newest generation count.
    pub generation: i64,
    /// `pool.resourceSliceCount`: a pool whose newest generation has fewer slices is incomplete.
    pub slice_count: i64,
    /// Where its devices are reachable from; `None`: `perDeviceNodeSelection`, each device says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach: Option<Reach>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<Device>,
    /// Why some of its devices cannot be allocated by this scheduler (a feature it does not
    /// implement, named by field): they are left alone, and said when a claim finds no device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsupported: Vec<String>,
}

/// An attribute's value (`DeviceAttribute`: exactly one of its fields).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AttributeValue {
    Int(i64),
    Bool(bool),
    String(String),
    /// A semantic version (`version`).
    Version(String),
}

/// One device of a slice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    pub name: String,
    /// Attributes by qualified name (`<domain>/<name>`; a name without a domain is qualified with
    /// the driver's name, as the API defines).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, AttributeValue>,
    /// Capacities by qualified name, as quantities.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, String>,
    /// Where it is reachable from, when its slice selects per device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach: Option<Reach>,
    /// Why this scheduler does not allocate it (taints, binding conditions, counters,
    /// multiple allocations: fields named); `None` when it may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
}

/// A DeviceClass: the selectors (CEL) every device allocated through it must pass, and the
/// configuration its allocations carry to the driver.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClass {
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<String>,
    /// `spec.config[]`, as written (opaque driver parameters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<serde_json::Value>,
}

/// How many devices a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Count {
    /// `ExactCount` with `count`.
    Exact(u32),
    /// `All` the matching devices on the node (at least one).
    All,
}

/// One way to satisfy a request: `exactly`, or one of `firstAvailable`'s subrequests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subrequest {
    /// The name a result carries: the request's, or `<request>/<subrequest>`.
    pub name: String,
    pub class: String,
    /// CEL expressions, all of which a device must pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<String>,
    pub count: Count,
    #[serde(default)]
    pub admin_access: bool,
}

/// One entry of a claim's `spec.devices.requests`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequest {
    pub name: String,
    /// `exactly` (one entry), or `firstAvailable` (tried in order).
    pub alternatives: Vec<Subrequest>,
}

/// A claim's `spec.devices.constraints[]` entry with `matchAttribute`: every device allocated for
/// `requests` (every request when empty) has the same value of `attribute`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchAttribute {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// Fully qualified.
    pub attribute: String,
}

/// What a ResourceClaim asks for (`spec.devices`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAsk {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<DeviceRequest>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<MatchAttribute>,
    /// `spec.devices.config[]`, as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<serde_json::Value>,
    /// A field this scheduler does not allocate for, named: the claim waits, saying so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
}

/// One device of an allocation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocatedDevice {
    /// The request (or `<request>/<subrequest>`) it was allocated for.
    pub request: String,
    #[serde(flatten)]
    pub id: DeviceId,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admin_access: bool,
}
