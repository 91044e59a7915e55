//! The AdmissionReview body read into a JSON tree without the parts no admission rule reads.
//!
//! A `serde_json::Value` costs far more than the JSON it holds: every object is a `BTreeMap` node
//! of about 600 bytes however few keys it has, so a Job whose container carries 90,000 env vars
//! (2.5 MiB of JSON) is some 60 MiB of tree. Admission ([`scheduler_core::admit()`]) reads an
//! object's metadata, its gang fields and its pod templates' metadata and scheduling fields; it never
//! reads a container, a volume or `metadata.managedFields` — which is where a legal object's bulk
//! lies (env vars, commands, mounts, probes; managed fields repeat every key). The values of the
//! keys in [`SKIPPED`] are therefore read past (serde's `IgnoredAny`: checked as JSON, nothing
//! allocated) and kept as an empty list, so the tree holds every field admission reads, at the
//! same paths, and the patch it computes is the same.
//!
//! The same holds for the values of a Kubeflow job's unsupported replica types (the keys of
//! `pytorchReplicaSpecs` and its kin other than the operator's own, [`KUBEFLOW_REPLICA_SPECS`]):
//! admission names such a key and denies, and never reads its value, so each is read past and
//! kept as `{}` — a PyTorchJob with 30,000 of them costs its keys, not 30,000 templates.
//!
//! Likewise a JobSet's `replicatedJobs` beyond the first [`MAX_JOBSET_ROLES`] + 1, and a
//! RayCluster's or RayJob's `workerGroupSpecs` beyond the first [`MAX_RAY_WORKER_GROUPS`] + 1, and a
//! Volcano Job's `tasks` beyond the first [`MAX_VOLCANO_TASKS`] + 1: an
//! object with more is denied with one error that counts them, and no rule reads past that many, so
//! the rest are read past and kept as `{}` (the count stays exact).
//!
//! `kubectl gang validate` reads whole objects; `tests/front_doors.rs` and this module's tests keep
//! the two decisions equal.

use std::fmt;

use scheduler_core::workload::{
    KUBEFLOW_REPLICA_SPECS, MAX_JOBSET_ROLES, MAX_RAY_WORKER_GROUPS, MAX_VOLCANO_TASKS,
};
use serde::Deserialize as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Keys whose list values admission never reads: read past, kept as `[]`.
pub const SKIPPED: [&str; 3] = ["ephemeralContainers", "volumes", "managedFields"];

/// Keys whose list values are containers: each kept as the fields of it admission reads.
pub const CONTAINERS: [&str; 2] = ["containers", "initContainers"];

/// The fields of a container admission reads.
const CONTAINER_KEEPS: &[&str] = &["name", "ports"];

/// Reads `body` as JSON, the values of [`SKIPPED`] keys read past.
pub fn from_slice(body: &[u8]) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = Tree.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Builds a `Value`, skipping what [`SKIPPED`] names.
struct Tree;

impl<'de> DeserializeSeed<'de> for Tree {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(TreeVisitor { skim: false, keep: None, first: None })
    }
}

/// The value of a Kubeflow replica-spec field: a map whose keys outside `keep` have their values
/// read past (kept as `{}`).
struct ReplicaSpecs(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for ReplicaSpecs {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(TreeVisitor { skim: false, keep: Some(self.0), first: None })
    }
}

/// A list of which admission reads the first `n` elements (a JobSet's `replicatedJobs`, a Ray
/// cluster's `workerGroupSpecs`): those kept, the rest read past.
struct First(usize);

impl<'de> DeserializeSeed<'de> for First {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(TreeVisitor { skim: false, keep: None, first: Some(self.0) })
    }
}

/// A replica type's value the operator refuses: read past.
struct Refused;

impl<'de> DeserializeSeed<'de> for Refused {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        IgnoredAny::deserialize(d)?;
        Ok(Value::Object(Map::new()))
    }
}

/// The value of a skipped key: a list is read past and becomes `[]`; anything else (never sent by
/// the API server) is kept as it is.
struct Skim;

impl<'de> DeserializeSeed<'de> for Skim {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(TreeVisitor { skim: true, keep: None, first: None })
    }
}

/// A list of containers: each element a map whose keys other than [`CONTAINER_KEEPS`] are
/// dropped (their values read past); anything else (never sent by the API server) kept as it is.
struct Containers;

impl<'de> DeserializeSeed<'de> for Containers {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ContainerList)
    }
}

struct ContainerList;

impl<'de> Visitor<'de> for ContainerList {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of containers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Container)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        TreeVisitor { skim: false, keep: None, first: None }.visit_map(map)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// One container: its [`CONTAINER_KEEPS`] fields, the others dropped (read past).
struct Container;

impl<'de> DeserializeSeed<'de> for Container {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ContainerFields)
    }
}

struct ContainerFields;

impl<'de> Visitor<'de> for ContainerFields {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a container")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if CONTAINER_KEEPS.contains(&key.as_str()) {
                let v = map.next_value_seed(Tree)?;
                out.insert(key, v);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Value::Object(out))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        TreeVisitor { skim: false, keep: None, first: None }.visit_seq(seq)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

struct TreeVisitor {
    /// Read a list past instead of keeping it.
    skim: bool,
    /// In a map: the only keys whose values are read (a Kubeflow replica-spec field).
    keep: Option<&'static [&'static str]>,
    /// In a list: how many elements are read; the rest are read past and kept as `{}`.
    first: Option<usize>,
}

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        if self.skim {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Value::Array(Vec::new()));
        }
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        let first = self.first.unwrap_or(usize::MAX);
        while out.len() < first {
            let Some(v) = seq.next_element_seed(Tree)? else { return Ok(Value::Array(out)) };
            out.push(v);
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {
            out.push(Value::Object(Map::new()));
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = if let Some(keep) = self.keep {
                if keep.contains(&key.as_str()) {
                    map.next_value_seed(Tree)?
                } else {
                    map.next_value_seed(Refused)?
                }
            } else if SKIPPED.contains(&key.as_str()) {
                map.next_value_seed(Skim)?
            } else if CONTAINERS.contains(&key.as_str()) {
                map.next_value_seed(Containers)?
            } else if key == "replicatedJobs" {
                map.next_value_seed(First(MAX_JOBSET_ROLES + 1))?
            } else if key == "workerGroupSpecs" {
                map.next_value_seed(First(MAX_RAY_WORKER_GROUPS + 1))?
            } else if key == "tasks" {
                map.next_value_seed(First(MAX_VOLCANO_TASKS + 1))?
            } else if let Some((_, _, keep)) = KUBEFLOW_REPLICA_SPECS.iter().find(|(_, f, _)| *f == key) {
                map.next_value_seed(ReplicaSpecs(keep))?
            } else {
                map.next_value_seed(Tree)?
            };
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn skipped_lists_are_empty_and_everything_else_is_kept() {
        let object = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "labels": {"a": "b"}, "managedFields": [{"manager": "kubectl"}]},
            "spec": {"parallelism": 2, "template": {"metadata": {"annotations": {"x": "1"}},
                "spec": {"schedulerName": "s", "containers": [{"name": "c", "env": [{"name": "A"}]}],
                         "initContainers": [{"name": "i"}], "volumes": [{"name": "v"}],
                         "tolerations": [{"key": "k"}], "priority": -3, "overhead": {"cpu": 1.5},
                         "hostNetwork": true, "nodeName": null}}}});
        let read = from_slice(&serde_json::to_vec(&object).unwrap()).unwrap();
        let mut expected = object;
        expected["metadata"]["managedFields"] = json!([]);
        expected["spec"]["template"]["spec"]["volumes"] = json!([]);
        // Containers keep their names and ports only (the API server's rules on ports apply).
        expected["spec"]["template"]["spec"]["containers"] = json!([{"name": "c"}]);
        assert_eq!(read, expected);
        let ports = json!({"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 80}]}]});
        let read = from_slice(&serde_json::to_vec(&ports).unwrap()).unwrap();
        assert_eq!(
            read,
            json!({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]})
        );
        // A skipped key that holds something other than a list is kept as it is.
        assert_eq!(from_slice(br#"{"volumes": {"a": 1}}"#).unwrap(), json!({"volumes": {"a": 1}}));
    }

    #[test]
    fn a_kubeflow_jobs_unsupported_replica_types_keep_their_keys_not_their_values() {
        let object = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"metadata": {"labels": {"a": "b"}}}},
                "Worker": {"replicas": 3},
                "Chief": {"replicas": 2, "template": {"spec": {"nodeName": "n"}}},
                "Evaluator": [1, 2, {"x": null}]},
            "tfReplicaSpecs": {"Chief": {"replicas": 1}, "Launcher": {"replicas": 1}}}});
        let read = from_slice(&serde_json::to_vec(&object).unwrap()).unwrap();
        let mut expected = object;
        // Chief is TFJob's, not PyTorchJob's; Launcher is MPIJob's, not TFJob's.
        expected["spec"]["pytorchReplicaSpecs"]["Chief"] = json!({});
        expected["spec"]["pytorchReplicaSpecs"]["Evaluator"] = json!({});
        expected["spec"]["tfReplicaSpecs"]["Launcher"] = json!({});
        assert_eq!(read, expected);
        // Read past, still checked as JSON.
        assert!(from_slice(br#"{"pytorchReplicaSpecs": {"Other": {"a": }}}"#).is_err());
        // A replica-spec field that is not a map is kept as it is.
        assert_eq!(from_slice(br#"{"jaxReplicaSpecs": [1]}"#).unwrap(), json!({"jaxReplicaSpecs": [1]}));
    }

    #[test]
    fn a_jobsets_replicated_jobs_past_the_limit_are_counted_not_kept() {
        let job = |i: usize| json!({"name": format!("j{i}"), "replicas": 1, "template": {"spec": {}}});
        let within: Vec<Value> = (0..=MAX_JOBSET_ROLES).map(job).collect();
        let read = from_slice(&serde_json::to_vec(&json!({"replicatedJobs": within})).unwrap()).unwrap();
        assert_eq!(read["replicatedJobs"], json!(within), "up to the limit + 1, all kept");
        let over: Vec<Value> = (0..MAX_JOBSET_ROLES + 10).map(job).collect();
        let read = from_slice(&serde_json::to_vec(&json!({"replicatedJobs": over})).unwrap()).unwrap();
        let list = read["replicatedJobs"].as_array().unwrap();
        assert_eq!(list.len(), MAX_JOBSET_ROLES + 10, "the count is exact");
        assert_eq!(list[MAX_JOBSET_ROLES], over[MAX_JOBSET_ROLES]);
        assert!(list[MAX_JOBSET_ROLES + 1..].iter().all(|j| *j == json!({})));
        assert!(
            from_slice(&[br#"{"replicatedJobs": ["#.as_slice(), &b"{},".repeat(70), b"{]}"].concat())
                .is_err()
        );
    }

    #[test]
    fn a_volcano_jobs_tasks_past_the_limit_are_counted_not_kept() {
        let task = |i: usize| json!({"name": format!("t{i}"), "replicas": 1, "template": {"spec": {}}});
        let over: Vec<Value> = (0..MAX_VOLCANO_TASKS + 10).map(task).collect();
        let read = from_slice(&serde_json::to_vec(&json!({"spec": {"tasks": over}})).unwrap()).unwrap();
        let list = read.pointer("/spec/tasks").and_then(Value::as_array).unwrap();
        assert_eq!(list.len(), MAX_VOLCANO_TASKS + 10, "the count is exact");
        assert_eq!(list[..=MAX_VOLCANO_TASKS], over[..=MAX_VOLCANO_TASKS]);
        assert!(list[MAX_VOLCANO_TASKS + 1..].iter().all(|t| *t == json!({})));
    }

    #[test]
    fn a_ray_clusters_worker_groups_past_the_limit_are_counted_not_kept() {
        let group = |i: usize| json!({"groupName": format!("g{i}"), "replicas": 1, "template": {"spec": {}}});
        let over: Vec<Value> = (0..MAX_RAY_WORKER_GROUPS + 10).map(group).collect();
        for spec in [json!({"workerGroupSpecs": over}), json!({"rayClusterSpec": {"workerGroupSpecs": over}})]
        {
            let read = from_slice(&serde_json::to_vec(&json!({"spec": spec})).unwrap()).unwrap();
            let list = read
                .pointer("/spec/workerGroupSpecs")
                .or(read.pointer("/spec/rayClusterSpec/workerGroupSpecs"));
            let list = list.and_then(Value::as_array).unwrap();
            assert_eq!(list.len(), MAX_RAY_WORKER_GROUPS + 10, "the count is exact");
            assert_eq!(list[..=MAX_RAY_WORKER_GROUPS], over[..=MAX_RAY_WORKER_GROUPS]);
            assert!(list[MAX_RAY_WORKER_GROUPS + 1..].iter().all(|g| *g == json!({})));
        }
    }

    #[test]
    fn bad_json_is_an_error_even_inside_a_skipped_list() {
        for bad in
            [&br#"{"containers": [{"name": }]}"#[..], br#"{"a": 1} x"#, b"{", br#"{"containers": [1,]}"#]
        {
            assert!(from_slice(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
