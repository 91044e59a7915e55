//! Resource amounts in integer units, and effective pod requests as kube-scheduler computes them.
//!
//! Units follow kube-scheduler's `framework.Resource`: `cpu` in millicores, every other resource
//! (memory, ephemeral-storage, hugepages-*, extended resources such as `nvidia.com/gpu`) in base
//! units, rounded up. Amounts are `i64`, like Kubernetes' `Quantity.Value()`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The `cpu` resource name.
pub const CPU: &str = "cpu";
/// The `memory` resource name.
pub const MEMORY: &str = "memory";
/// The `pods` resource name (pod-count limit on nodes).
pub const PODS: &str = "pods";
/// The `ephemeral-storage` resource name.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// A set of resource amounts, keyed by resource name, in the units described in the module docs.
/// Zero amounts are not stored.
///
/// Held as a vector sorted by name: a pod asks for two or three resources, and the cycle compares
/// the requests of each pending pod with the previous one's — a slice comparison, where a map
/// would walk its nodes (about a tenth of a cycle of 50,000 pending pods).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources(Vec<(String, i64)>);

impl Resources {
    pub fn new() -> Self {
        Resources(Vec::new())
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(name))
    }

    /// The amount of `name` (zero when absent).
    pub fn get(&self, name: &str) -> i64 {
        self.position(name).map_or(0, |i| self.0[i].1)
    }

    /// Sets `name` to `amount` (removing it when zero).
    pub fn set(&mut self, name: impl Into<String>, amount: i64) {
        let name = name.into();
        match (self.position(&name), amount) {
            (Ok(i), 0) => {
                self.0.remove(i);
            }
            (Ok(i), _) => self.0[i].1 = amount,
            (Err(_), 0) => {}
            (Err(i), _) => self.0.insert(i, (name, amount)),
        }
    }

    /// Builder form of [`Resources::set`].
    pub fn with(mut self, name: impl Into<String>, amount: i64) -> Self {
        self.set(name, amount);
        self
    }

    /// Adds every amount of `other` (saturating).
    pub fn add(&mut self, other: &Resources) {
        for (k, v) in &other.0 {
            let cur = self.get(k);
            self.set(k.clone(), cur.saturating_add(*v));
        }
    }

    /// For each resource, the larger of the two.
    pub fn max_with(&mut self, other: &Resources) {
        for (k, v) in &other.0 {
            if *v > self.get(k) {
                self.set(k.clone(), *v);
            }
        }
    }

    /// Resource names and amounts, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Renders one amount in the units a user reads: `cpu 500m`, `memory 4Gi`, `nvidia.com/gpu 8`.
    pub fn format_amount(name: &str, amount: i64) -> String {
        if name == CPU {
            if amount % 1000 == 0 { format!("{}", amount / 1000) } else { format!("{amount}m") }
        } else if name == MEMORY || name == EPHEMERAL_STORAGE || name.starts_with("hugepages-") {
            const UNITS: [(&str, i64); 5] =
                [("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
            for (suffix, size) in UNITS {
                if amount != 0 && amount % size == 0 {
                    return format!("{}{suffix}", amount / size);
                }
            }
            format!("{amount}")
        } else {
            format!("{amount}")
        }
    }
}

impl FromIterator<(String, i64)> for Resources {
    fn from_iter<T: IntoIterator<Item = (String, i64)>>(iter: T) -> Self {
        let mut r = Resources::new();
        for (k, v) in iter {
            r.set(k, v);
        }
        r
    }
}

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.iter().map(|(k, v)| (k, v))).finish()
    }
}

/// A map of names to amounts, as a `ResourceList` is written.
impl Serialize for Resources {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

/// From a map of names to amounts; zero amounts are left out, as [`Resources::set`] leaves them.
impl<'de> Deserialize<'de> for Resources {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, i64>::deserialize(deserializer)?;
        Ok(map.into_iter().collect())
    }
}

/// `cpu 8, memory 32Gi, nvidia.com/gpu 8`
impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.0 {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{k} {}", Resources::format_amount(k, *v))?;
        }
        Ok(())
    }
}

/// The amount of `resource` in the scheduler's units: millicores for `cpu`, base units (rounded
/// up) for everything else.
pub fn amount(resource: &str, q: &str) -> Result<i64, crate::read::quantity::QuantityError> {
    let parsed = crate::read::quantity::parse(q.trim_matches(|c: char| c == '"'))?;
    let v = if resource == CPU { parsed.milli_ceil() } else { parsed.value_ceil() };
    v.ok_or_else(|| crate::read::quantity::QuantityError::Overflow(q.to_string()))
}

/// A `ResourceList` (requests, limits, allocatable, overhead) in the scheduler's units. Every bad
/// entry is an error at `path[name]` naming the value; negative amounts are errors.
pub fn resource_list(
    path: &str,
    list: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Result<Resources, Vec<crate::read::error::FieldError>> {
    quantities(path, list.iter().map(|(k, q)| (k.as_str(), q.0.as_str())))
}

/// [`resource_list`] of (name, quantity) pairs, in name order.
pub(crate) fn quantities<'a>(
    path: &str,
    list: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Resources, Vec<crate::read::error::FieldError>> {
    let mut out = Resources::new();
    let mut errors = Vec::new();
    for (name, q) in list {
        match amount(name, q) {
            Ok(a) if a < 0 => errors.push(crate::read::error::FieldError::new(
                format!("{path}[{name}]"),
                format!("must not be negative, got {q:?}"),
            )),
            Ok(a) => out.set(name, a),
            Err(e) => {
                errors.push(crate::read::error::FieldError::new(format!("{path}[{name}]"), e.to_string()))
            }
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

/// (name, quantity) pairs of a resource list, in name order.
pub(crate) type Quantities<'a> = Vec<(&'a str, &'a str)>;

/// What effective requests read of a container, borrowed from a typed `Container` or its raw
/// JSON alike.
#[derive(Clone, Debug, Default)]
pub(crate) struct ContainerResources<'a> {
    /// `resources.requests`, `resources.limits`.
    pub requests: Option<Quantities<'a>>,
    pub limits: Option<Quantities<'a>>,
    /// An init container with `restartPolicy: Always` (a sidecar).
    pub sidecar: bool,
    /// `resources.claims` names DRA claims (which the cycle does not evaluate yet).
    pub claims: bool,
}

impl<'a> ContainerResources<'a> {
    pub fn of(c: &'a k8s_openapi::api::core::v1::Container) -> Self {
        let list = |l: Option<
            &'a BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >| { l.map(|l| l.iter().map(|(k, q)| (k.as_str(), q.0.as_str())).collect()) };
        let res = c.resources.as_ref();
        ContainerResources {
            requests: list(res.and_then(|r| r.requests.as_ref())),
            limits: list(res.and_then(|r| r.limits.as_ref())),
            sidecar: c.restart_policy.as_deref() == Some("Always"),
            claims: res.and_then(|r| r.claims.as_ref()).is_some_and(|c| !c.is_empty()),
        }
    }
}

/// One container's requests, with the API server's defaulting applied: a resource with a limit and
/// no request requests its limit (objects read from files have not been through the API server).
fn container_requests(
    path: &str,
    c: &ContainerResources<'_>,
) -> Result<Resources, Vec<crate::read::error::FieldError>> {
    let mut errors = Vec::new();
    let mut requests = match &c.requests {
        Some(r) => quantities(&format!("{path}.resources.requests"), r.iter().copied()).unwrap_or_else(|e| {
            errors.extend(e);
            Resources::new()
        }),
        None => Resources::new(),
    };
    if let Some(limits) = &c.limits {
        match quantities(&format!("{path}.resources.limits"), limits.iter().copied()) {
            Ok(l) => {
                for (name, amount) in l.iter() {
                    let explicit = c.requests.as_ref().is_some_and(|r| r.iter().any(|(k, _)| *k == name));
                    if !explicit {
                        requests.set(name.to_string(), amount);
                    }
                }
            }
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() { Ok(requests) } else { Err(errors) }
}

/// Pod-level `spec.resources` (KEP-2837), borrowed: `requests` and `limits`.
#[derive(Clone, Debug, Default)]
pub(crate) struct PodLevel<'a> {
    pub requests: Option<Quantities<'a>>,
    pub limits: Option<Quantities<'a>>,
}

/// Whether `spec.resources` may set `name` for the whole pod: cpu, memory and hugepages.
fn pod_level(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with("hugepages-")
}

/// Effective pod requests exactly as kube-scheduler computes them (`PodRequests` with sidecars):
/// regular containers and restartable init containers (sidecars, `restartPolicy: Always`) run
/// together; each regular init container runs alone beside the sidecars started before it; per
/// resource the pod needs the larger of the two; pod-level `spec.resources` requests replace
/// that for cpu, memory and hugepages; plus `spec.overhead`.
pub fn effective_requests(
    spec: &k8s_openapi::api::core::v1::PodSpec,
) -> Result<Resources, Vec<crate::read::error::FieldError>> {
    let containers: Vec<_> = spec.containers.iter().map(ContainerResources::of).collect();
    let init: Vec<_> = spec.init_containers.iter().flatten().map(ContainerResources::of).collect();
    fn list(
        l: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    ) -> Option<Quantities<'_>> {
        l.map(|o| o.iter().map(|(k, q)| (k.as_str(), q.0.as_str())).collect())
    }
    let overhead = list(spec.overhead.as_ref());
    let res = spec.resources.as_ref();
    let pod = PodLevel {
        requests: list(res.and_then(|r| r.requests.as_ref())),
        limits: list(res.and_then(|r| r.limits.as_ref())),
    };
    effective_requests_of(&containers, &init, &pod, overhead.as_deref())
}

/// [`effective_requests`] of what it reads.
pub(crate) fn effective_requests_of(
    containers: &[ContainerResources<'_>],
    init_containers: &[ContainerResources<'_>],
    pod: &PodLevel<'_>,
    overhead: Option<&[(&str, &str)]>,
) -> Result<Resources, Vec<crate::read::error::FieldError>> {
    let mut errors = Vec::new();
    let mut running = Resources::new();
    for (i, c) in containers.iter().enumerate() {
        match container_requests(&format!("spec.containers[{i}]"), c) {
            Ok(r) => running.add(&r),
            Err(e) => errors.extend(e),
        }
    }
    let mut sidecars = Resources::new();
    let mut init_peak = Resources::new();
    for (i, c) in init_containers.iter().enumerate() {
        let r = match container_requests(&format!("spec.initContainers[{i}]"), c) {
            Ok(r) => r,
            Err(e) => {
                errors.extend(e);
                continue;
            }
        };
        if c.sidecar {
            running.add(&r);
            sidecars.add(&r);
            init_peak.max_with(&sidecars);
        } else {
            let mut alone = r;
            alone.add(&sidecars);
            init_peak.max_with(&alone);
        }
    }
    running.max_with(&init_peak);
    match pod_requests(pod, &running) {
        Ok(whole) => {
            for (name, amount) in whole {
                running.set(name, amount);
            }
        }
        Err(e) => errors.extend(e),
    }
    if let Some(overhead) = overhead {
        match quantities("spec.overhead", overhead.iter().copied()) {
            Ok(o) => running.add(&o),
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() { Ok(running) } else { Err(errors) }
}

/// The pod-level requests that replace the containers' sum (`aggregated`) for cpu, memory and
/// hugepages, when `spec.resources` sets any of them (empty otherwise); with the API server's
/// defaulting applied (objects read from files have not been through it): when pod-level limits
/// are set, a hugepages request the pod does not set is the containers' sum, and any other it
/// does not set is its limit. A request written as zero is kept (it replaces the sum too).
fn pod_requests(
    pod: &PodLevel<'_>,
    aggregated: &Resources,
) -> Result<Vec<(String, i64)>, Vec<crate::read::error::FieldError>> {
    let read = |path: &str, list: &Option<Quantities<'_>>| match list {
        Some(l) => quantities(path, l.iter().copied()),
        None => Ok(Resources::new()),
    };
    let (requests, limits) =
        match (read("spec.resources.requests", &pod.requests), read("spec.resources.limits", &pod.limits)) {
            (Ok(r), Ok(l)) => (r, l),
            (r, l) => return Err(r.err().into_iter().chain(l.err()).flatten().collect()),
        };
    let mut whole: BTreeMap<String, i64> =
        pod.requests.iter().flatten().map(|&(k, _)| (k.to_string(), requests.get(k))).collect();
    if pod.limits.as_ref().is_some_and(|l| !l.is_empty()) {
        for (name, amount) in aggregated.iter().filter(|(n, _)| n.starts_with("hugepages-")) {
            whole.entry(name.to_string()).or_insert(amount);
        }
        for &(name, _) in pod.limits.iter().flatten().filter(|(n, _)| pod_level(n)) {
            whole.entry(name.to_string()).or_insert_with(|| limits.get(name));
        }
    }
    Ok(whole.into_iter().filter(|(k, _)| pod_level(k)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::quantity::QuantityError;

    #[test]
    fn canonical_examples_from_the_kubernetes_docs() {
        // "128974848, 129e6, 129M, 128974848000m, 123Mi" are all roughly the same memory.
        assert_eq!(amount("memory", "128974848"), Ok(128_974_848));
        assert_eq!(amount("memory", "129e6"), Ok(129_000_000));
        assert_eq!(amount("memory", "129M"), Ok(129_000_000));
        assert_eq!(amount("memory", "128974848000m"), Ok(128_974_848));
        assert_eq!(amount("memory", "123Mi"), Ok(128_974_848));
        assert_eq!(amount("cpu", "0.5"), Ok(500));
        assert_eq!(amount("cpu", "100m"), Ok(100));
        assert_eq!(amount("cpu", "0.1"), Ok(100));
        assert_eq!(amount("cpu", "1u"), Ok(1), "rounds up");
        assert_eq!(amount("cpu", "2"), Ok(2000));
        assert_eq!(amount("memory", "1Gi"), Ok(1 << 30));
        assert_eq!(amount("memory", "1.5Gi"), Ok(3 << 29));
        assert_eq!(amount("memory", "1e3"), Ok(1000));
        assert_eq!(amount("memory", "12E-3"), Ok(1), "0.012 bytes rounds up to 1");
        assert_eq!(amount("nvidia.com/gpu", "8"), Ok(8));
        assert_eq!(amount("memory", "1E"), Ok(1_000_000_000_000_000_000));
        assert_eq!(amount("cpu", "-1"), Ok(-1000));
        assert_eq!(amount("cpu", "+.5"), Ok(500));
    }

    #[test]
    fn amounts_that_overflow_are_errors() {
        assert!(matches!(amount("memory", "99999999999999999999Ei"), Err(QuantityError::Overflow(_))));
        assert!(matches!(amount("memory", "1e40"), Err(QuantityError::Overflow(_))));
    }
}
