//! The DRA objects device allocation reads (`resource.k8s.io`), as plain data: the devices
//! drivers publish ([`ResourceSlice`]), the classes claims select them through ([`DeviceClass`]),
//! and what a ResourceClaim asks for ([`DeviceRequest`], [`MatchAttribute`]). Carried by the
//! snapshot's [`super::volume::Storage`]; [`crate::read::volume`] reads the Kubernetes objects into
//! these types, and the cycle's allocator allocates as upstream's structured allocator does.

use std::collections::{BTreeMap, HashMap};

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
    /// `sharedCounters[]`: counter sets the pool's devices consume from while allocated (a
    /// partitionable device: a whole GPU and its partitions drawing on one set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<CounterSet>,
    /// Why some of its devices cannot be allocated by this scheduler (a feature it does not
    /// implement, named by field): they are left alone, and said when a claim finds no device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsupported: Vec<String>,
}

/// An attribute's value (`DeviceAttribute`: exactly one of its fields).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AttributeValue {
    Int(i64),
    Bool(bool),
    String(String),
    /// A semantic version (`version`).
    Version(String),
}

/// One device of a slice (equal to another whatever their cached fingerprints).
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// `consumesCounters[]`: what it takes of its pool's counter sets while allocated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumes: Vec<CounterUse>,
    /// Why this scheduler does not allocate it (taints, binding conditions, counters,
    /// multiple allocations: fields named); `None` when it may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
    /// Its [`fingerprint`], computed when the slice is read (so not once per cycle); `None`:
    /// computed when needed.
    #[serde(skip)]
    pub fingerprint: Option<u64>,
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        (&self.name, &self.attributes, &self.capacity, &self.reach, &self.consumes, &self.unsupported)
            == (
                &other.name,
                &other.attributes,
                &other.capacity,
                &other.reach,
                &other.consumes,
                &other.unsupported,
            )
    }
}

/// A counter set of a pool (`sharedCounters[]`): each counter's value in billionths of its unit
/// (exact for canonical quantities; finer ones rounded down, so a set never reads as more than
/// it has; past `i128`, `i128::MAX`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CounterSet {
    pub name: String,
    pub nano: BTreeMap<String, i128>,
}

/// What a device consumes of one counter set (`consumesCounters[]`), in billionths (finer
/// amounts rounded up: a device never reads as taking less than it does).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CounterUse {
    pub counter_set: String,
    pub nano: BTreeMap<String, i128>,
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Count {
    /// `ExactCount` with `count`.
    Exact(u32),
    /// `All` the matching devices on the node (at least one).
    All,
}

/// The verdicts of DRA selectors on devices, kept from cycle to cycle: a selector's verdict on a
/// device depends only on the selector's text and the device's driver, attributes and capacity,
/// so it is computed once while those stay the same — not once per cycle. Shared by the clones of
/// a snapshot (a cluster view hands the same one to every cycle); not serialized, and equal to
/// any other (it changes no decision, only what deciding costs). Emptied when it holds more than
/// [`SelectorCache::MAX`] verdicts.
#[derive(Clone, Default)]
pub struct SelectorCache(std::sync::Arc<std::sync::Mutex<Verdicts>>);

/// (selector text hashed by [`selector_key`], device fingerprint) → verdict.
type Verdicts = HashMap<(u64, u64), Result<bool, String>, std::hash::BuildHasherDefault<Mix>>;

/// A hasher for keys that are hashes already: mixes the words it is given.
#[derive(Debug, Default)]
pub struct Mix(u64);

impl std::hash::Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A selector's text, hashed for [`SelectorCache`].
pub fn selector_key(selector: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    selector.hash(&mut h);
    h.finish()
}

impl SelectorCache {
    pub const MAX: usize = 1 << 20;

    fn lock(&self) -> std::sync::MutexGuard<'_, Verdicts> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The verdict of the selector keyed `selector` ([`selector_key`]) on a device of this
    /// `fingerprint`, if computed.
    pub fn get(&self, selector: u64, fingerprint: u64) -> Option<Result<bool, String>> {
        self.lock().get(&(selector, fingerprint)).cloned()
    }

    pub fn put(&self, selector: u64, fingerprint: u64, verdict: Result<bool, String>) {
        let mut v = self.lock();
        if v.len() >= Self::MAX {
            v.clear();
        }
        v.insert((selector, fingerprint), verdict);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PartialEq for SelectorCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for SelectorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SelectorCache({} verdicts)", self.len())
    }
}

/// What a selector can read of a device (its driver, attributes and capacity), hashed: devices
/// with the same fingerprint get the same verdicts.
pub fn fingerprint(driver: &str, device: &Device) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    driver.hash(&mut h);
    device.attributes.hash(&mut h);
    device.capacity.hash(&mut h);
    h.finish()
}

/// One way to satisfy a request: `exactly`, or one of `firstAvailable`'s subrequests.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequest {
    pub name: String,
    /// `exactly` (one entry), or `firstAvailable` (tried in order).
    pub alternatives: Vec<Subrequest>,
}

/// A claim's `spec.devices.constraints[]` entry with `matchAttribute`: every device allocated for
/// `requests` (every request when empty) has the same value of `attribute`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_amounts_past_i64_survive_a_snapshot_round_trip() {
        let set = CounterSet {
            name: "gpu-0".into(),
            nano: BTreeMap::from([("bytes".to_string(), 10i128.pow(33)), ("min".to_string(), i128::MIN)]),
        };
        let text = serde_json::to_string(&set).unwrap();
        let back: CounterSet = serde_json::from_str(&text).unwrap();
        assert_eq!(back, set, "{text}");
    }
}
