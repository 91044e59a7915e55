//! The `Gang` custom resource (`kube-gang.io/v1alpha1`), and its CustomResourceDefinition generated
//! from these Rust types ([`gang_crd`]) — the committed YAML under `manifests/` is this, rendered
//! by `cargo xtask crd`, and a test fails when the two drift.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::read::model::GangMode;

/// A gang: pods that are scheduled all together or not at all.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Gang {
    pub metadata: ObjectMeta,
    pub spec: GangSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<GangStatus>,
}

impl k8s_openapi::Resource for Gang {
    const API_VERSION: &'static str = "kube-gang.io/v1alpha1";
    const GROUP: &'static str = crate::read::labels::GROUP;
    const KIND: &'static str = "Gang";
    const VERSION: &'static str = crate::read::labels::VERSION;
    const URL_PATH_SEGMENT: &'static str = "gangs";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::ListableResource for Gang {
    const LIST_KIND: &'static str = "GangList";
}

impl k8s_openapi::Metadata for Gang {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// What the gang needs. Pods join it with the label `kube-gang.io/gang: <name>` (and
/// `kube-gang.io/subgroup: <leaf>` when it has subgroups).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GangSpec {
    /// Without subgroups: the pods that must be placed together. With subgroups: how many
    /// top-level subgroups must be satisfied.
    #[schemars(range(min = 1))]
    pub min_member: i32,
    /// A hierarchy of subgroups: a leaf's minMember counts pods, an inner subgroup's counts
    /// satisfied children. At most 64, names unique (the API server refuses duplicates).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub sub_groups: Vec<SubGroupSpec>,
    /// Resources the whole gang needs at minimum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 32))]
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    /// Strict (default) holds nothing between attempts; NonStrict keeps partial reservations until
    /// the timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<GangMode>,
    /// How long the gang may wait for placement once all its members exist; unset waits forever
    /// (or the scheduler's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub schedule_timeout_seconds: Option<i64>,
    /// Every member lands in one domain of this node label (e.g. topology.kubernetes.io/zone).
    /// The same as topology.required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 317))]
    pub topology_key: Option<String>,
    /// Topology levels: required (a hard boundary, as topologyKey) and preferred (tried first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologySpec>,
    /// Other gangs (namespace/name) that must be placed in the same scheduling cycle as this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 317)))]
    pub gang_group: Vec<String>,
    /// How long the gang may run below its minimum before its remaining members are evicted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub stale_grace_period_seconds: Option<i64>,
}

/// One subgroup of a hierarchical gang.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubGroupSpec {
    /// Unique within the gang; pods name their leaf in the label kube-gang.io/subgroup.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// The enclosing subgroup; unset for a top-level subgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub parent: Option<String>,
    /// A leaf: pods needed. An inner subgroup: satisfied children needed.
    #[schemars(range(min = 1))]
    pub min_member: i32,
    /// Every member of this subgroup lands in one domain of this node label. The same as
    /// topology.required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 317))]
    pub topology_key: Option<String>,
    /// Topology levels of this subgroup: required (a hard boundary) and preferred (tried first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologySpec>,
}

/// Topology levels, as node label keys.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpec {
    /// Every member lands in one domain of this node label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 317))]
    pub required: Option<String>,
    /// A narrower node label: the members go into one of its domains (within the required one)
    /// when one takes them all, else as required allows. Never keeps a member waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 317))]
    pub preferred: Option<String>,
}

/// What the scheduler last decided, and the state it must keep across restarts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GangStatus {
    /// Pending, Scheduled, Running, Degraded, Completed or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub phase: Option<String>,
    /// Members that exist (pending, bound or running).
    #[serde(default)]
    pub members: i32,
    /// Members bound to a node.
    #[serde(default)]
    pub bound: i32,
    /// Members running.
    #[serde(default)]
    pub running: i32,
    #[serde(default)]
    pub succeeded: i32,
    #[serde(default)]
    pub failed: i32,
    /// The `Scheduled` condition carries the reason and the message saying why the gang waits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the gang started waiting for placement (its timeout runs from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<Time>,
    /// When its active members fell below the minimum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_since: Option<Time>,
    /// Timeouts so far (drives retry backoff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<i32>,
    /// Not retried before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_until: Option<Time>,
    /// The gang has been placed at some point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub was_satisfied: Option<bool>,
    /// The scheduler gave up after a timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gave_up: Option<bool>,
    /// Backfill: when the gang is expected to start (capacity is held for it from then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_start_time: Option<Time>,
    /// Backfill: the capacity held for the gang.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<GangReservation>,
}

/// Capacity held for a waiting gang (backfill): recomputed every cycle from what runs, so it is
/// what the scheduler would keep if it restarted now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GangReservation {
    /// How many nodes hold capacity for it.
    #[serde(default)]
    pub node_count: i32,
    /// The first of those nodes, sorted by name (at most 64 listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 253)))]
    pub nodes: Vec<String>,
}

/// The most nodes a Gang's `status.reservation.nodes` lists.
pub const RESERVATION_NODES_LISTED: usize = 64;

/// A structural OpenAPI v3 schema for `T`: everything inlined, nulls as `nullable`, no `$schema`,
/// `title` or definitions — what the API server accepts in a CRD.
fn schema_of<T: JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::openapi3().with(|s| {
        s.inline_subschemas = true;
    });
    let generator = settings.into_generator();
    let mut v = generator.into_root_schema_for::<T>().to_value();
    structural(&mut v);
    v
}

/// Rewrites what schemars emits into what Kubernetes' structural-schema rules allow.
fn structural(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for k in ["$schema", "title", "definitions", "$defs", "examples"] {
                m.remove(k);
            }
            // ["string", "null"] → "string" + nullable.
            if let Some(Value::Array(types)) = m.get("type").cloned() {
                let non_null: Vec<Value> = types.into_iter().filter(|t| t != "null").collect();
                if let [one] = non_null.as_slice() {
                    m.insert("type".into(), one.clone());
                    m.insert("nullable".into(), Value::Bool(true));
                }
            }
            // A documented enum comes as oneOf [{enum: [x], type, description}, …]: one enum.
            if let Some(Value::Array(one_of)) = m.get("oneOf").cloned()
                && !one_of.is_empty()
                && one_of
                    .iter()
                    .all(|s| s.get("enum").and_then(Value::as_array).is_some_and(|e| e.len() == 1))
            {
                let values: Vec<Value> =
                    one_of.iter().filter_map(|s| s.get("enum").and_then(|e| e.get(0)).cloned()).collect();
                m.remove("oneOf");
                m.insert("type".into(), Value::String("string".into()));
                m.insert("enum".into(), Value::Array(values));
            }
            // Option<enum> comes as anyOf [{enum}, {null}]: flatten it.
            if let Some(Value::Array(any)) = m.get("anyOf").cloned() {
                let only_null = |s: &Value| {
                    s.get("type") == Some(&Value::String("null".into()))
                        || s.get("enum")
                            .and_then(Value::as_array)
                            .is_some_and(|e| e.iter().all(Value::is_null))
                };
                let non_null: Vec<Value> = any
                    .into_iter()
                    .filter(|s| !only_null(s))
                    .map(|mut s| {
                        structural(&mut s);
                        s
                    })
                    .collect();
                if let [Value::Object(one)] = non_null.as_slice() {
                    m.remove("anyOf");
                    for (k, val) in one {
                        m.entry(k.clone()).or_insert(val.clone());
                    }
                    m.insert("nullable".into(), Value::Bool(true));
                }
            }
            if let Some(Value::String(f)) = m.get("format")
                && matches!(
                    f.as_str(),
                    "uint" | "uint8" | "uint16" | "uint32" | "uint64" | "int" | "double" | "float"
                )
            {
                let f = if f.contains("64") || f == "uint" { "int64" } else { "int32" };
                let numeric = m.get("type") == Some(&Value::String("number".into()));
                m.insert("format".into(), Value::String(if numeric { "double".into() } else { f.into() }));
            }
            if let Some(Value::Array(e)) = m.get_mut("enum") {
                e.retain(|x| !x.is_null());
            }
            for (_, child) in m.iter_mut() {
                structural(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(structural),
        _ => {}
    }
}

/// Bounds on the parts of the schema that come from Kubernetes' own types, which carry none in
/// their generated schemas: `metav1.Condition`'s strings (the lengths its Go type declares:
/// type 316, reason 1024, message 32768), timestamps (an RFC 3339 time is at most 35 characters;
/// 64 leaves room), and quantities (64). With every list and string bounded, the API server
/// refuses oversize gangs before any webhook or policy runs, and the policy's CEL cost estimate is
/// finite.
fn bound_foreign(v: &mut Value) {
    let Value::Object(m) = v else { return };
    let is_string = m.get("type").and_then(Value::as_str) == Some("string");
    if is_string && m.get("format").and_then(Value::as_str) == Some("date-time") {
        m.entry("maxLength").or_insert(json!(64));
    }
    if m.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        m.entry("maxLength").or_insert(json!(64));
        m.remove("description");
    }
    if let Some(Value::Object(props)) = m.get_mut("properties")
        && props.contains_key("lastTransitionTime")
        && props.contains_key("reason")
    {
        for (field, max) in [("type", 316), ("reason", 1024), ("message", 32768)] {
            if let Some(Value::Object(f)) = props.get_mut(field) {
                f.entry("maxLength").or_insert(json!(max));
            }
        }
        if let Some(Value::Object(f)) = props.get_mut("status") {
            f.insert("enum".into(), json!(["True", "False", "Unknown"]));
        }
    }
    for (_, child) in m.iter_mut() {
        match child {
            Value::Array(a) => a.iter_mut().for_each(bound_foreign),
            c => bound_foreign(c),
        }
    }
}

/// The `Gang` CustomResourceDefinition, generated from [`GangSpec`] and [`GangStatus`].
pub fn gang_crd() -> apiext::CustomResourceDefinition {
    let mut schema = json!({
        "type": "object",
        "description": "A gang: pods that are scheduled all together or not at all.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": schema_of::<GangSpec>(),
            "status": schema_of::<GangStatus>(),
        },
    });
    bound_foreign(&mut schema);
    let column =
        |name: &str, ty: &str, path: &str, description: &str| apiext::CustomResourceColumnDefinition {
            name: name.into(),
            type_: ty.into(),
            json_path: path.into(),
            description: Some(description.into()),
            ..Default::default()
        };
    apiext::CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("gangs.{}", crate::read::labels::GROUP)),
            ..ObjectMeta::default()
        },
        spec: apiext::CustomResourceDefinitionSpec {
            group: crate::read::labels::GROUP.into(),
            scope: "Namespaced".into(),
            names: apiext::CustomResourceDefinitionNames {
                kind: "Gang".into(),
                list_kind: Some("GangList".into()),
                plural: "gangs".into(),
                singular: Some("gang".into()),
                short_names: Some(vec!["gng".into()]),
                categories: Some(vec!["kube-gang".into()]),
            },
            versions: vec![apiext::CustomResourceDefinitionVersion {
                name: crate::read::labels::VERSION.into(),
                served: true,
                storage: true,
                subresources: Some(apiext::CustomResourceSubresources {
                    status: Some(apiext::CustomResourceSubresourceStatus(json!({}))),
                    scale: None,
                }),
                schema: Some(apiext::CustomResourceValidation {
                    open_api_v3_schema: serde_json::from_value(schema).ok(),
                }),
                additional_printer_columns: Some(vec![
                    column("Min", "integer", ".spec.minMember", "Members (or top-level subgroups) needed"),
                    column("Members", "integer", ".status.members", "Members that exist"),
                    column("Running", "integer", ".status.running", "Members running"),
                    column(
                        "Phase",
                        "string",
                        ".status.phase",
                        "Pending, Scheduled, Running, Degraded, Completed or Failed",
                    ),
                    column(
                        "Reason",
                        "string",
                        ".status.conditions[?(@.type==\"Scheduled\")].reason",
                        "Why, in one word",
                    ),
                    column("Age", "date", ".metadata.creationTimestamp", "Age"),
                ]),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

/// The fields of a `Gang` object its CRD's schema does not declare, as dotted paths
/// (`spec.timeout`, `spec.subGroups[1].minMembers`): what the API server's strict field validation
/// (kubectl's default, `--validate=strict`) refuses with `unknown field "spec.timeout"` before any
/// webhook sees the object. `metadata` is the API server's own (ObjectMeta) and not walked here.
pub fn unknown_fields(gang: &Value) -> Vec<String> {
    if gang.get("kind").and_then(Value::as_str) != Some("Gang")
        || !gang.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v.starts_with("kube-gang.io/"))
    {
        return Vec::new();
    }
    static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let schema = SCHEMA.get_or_init(|| {
        let crd = serde_json::to_value(gang_crd()).unwrap_or(Value::Null);
        crd.pointer("/spec/versions/0/schema/openAPIV3Schema").cloned().unwrap_or(Value::Null)
    });
    let mut out = Vec::new();
    if let Some(fields) = gang.as_object() {
        for (k, v) in fields {
            match k.as_str() {
                "apiVersion" | "kind" | "metadata" => {}
                _ => walk(schema.pointer(&format!("/properties/{k}")), v, k.clone(), &mut out),
            }
        }
    }
    out
}

fn walk(schema: Option<&Value>, value: &Value, path: String, out: &mut Vec<String>) {
    let Some(schema) = schema else {
        out.push(path);
        return;
    };
    if schema.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true) {
        return;
    }
    match value {
        Value::Object(fields) => {
            let props = schema.get("properties");
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, v) in fields {
                let child = format!("{path}.{k}");
                match (props.and_then(|p| p.get(k)), extra) {
                    (Some(s), _) => walk(Some(s), v, child, out),
                    (None, Some(s)) => walk(Some(s), v, child, out),
                    // A map of anything (no properties, no item schema), or a type the schema
                    // checks elsewhere: only declared objects refuse unknown keys.
                    (None, None) if props.is_some() => out.push(child),
                    (None, None) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    walk(Some(item), v, format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undeclared_fields_are_named_by_their_path_and_declared_ones_pass() {
        let gang = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
            "metadata": {"name": "g", "anything": 1},
            "spec": {"minMember": 2, "timeout": "5m", "minResources": {"cpu": "1"},
                     "subGroups": [{"name": "a", "minMember": 1}, {"name": "b", "minMembers": 1}]},
            "status": {"phase": "Pending", "colour": "red"}});
        assert_eq!(unknown_fields(&gang), ["spec.subGroups[1].minMembers", "spec.timeout", "status.colour"]);
        let ok = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "g"},
                        "spec": {"minMember": 1, "mode": "Strict", "gangGroup": ["ml/x"]}});
        assert!(unknown_fields(&ok).is_empty());
        // Other kinds are not this schema's.
        assert!(unknown_fields(&json!({"apiVersion": "v1", "kind": "Pod", "spec": {"x": 1}})).is_empty());
    }

    #[test]
    fn a_gang_round_trips_and_reads_its_status() {
        let v = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
            "metadata": {"name": "llm", "namespace": "ml"},
            "spec": {"minMember": 1, "subGroups": [{"name": "prefill", "minMember": 2}],
                     "minResources": {"nvidia.com/gpu": "16"}, "mode": "NonStrict", "topologyKey": "rack"},
            "status": {"phase": "Pending", "members": 3, "waitingSince": "2026-01-01T00:00:00Z", "gaveUp": false}});
        let g: Gang = serde_json::from_value(v).unwrap();
        assert_eq!(g.spec.sub_groups[0].min_member, 2);
        assert_eq!(g.spec.mode, Some(GangMode::NonStrict));
        let back = serde_json::to_value(&g).unwrap();
        assert_eq!(back["spec"]["minResources"]["nvidia.com/gpu"], "16");
        assert_eq!(back["status"]["waitingSince"], "2026-01-01T00:00:00Z");
    }

    #[test]
    fn the_crd_schema_is_structural() {
        let crd = serde_json::to_value(gang_crd()).unwrap();
        let text = crd.to_string();
        assert!(!text.contains("$ref"), "inlined: {text}");
        assert!(!text.contains("\"null\""), "no null types: {text}");
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["properties"]["minMember"]["minimum"], 1.0);
        assert_eq!(spec["required"], json!(["minMember"]));
        assert_eq!(spec["properties"]["subGroups"]["items"]["required"], json!(["name", "minMember"]));
        assert_eq!(crd["spec"]["versions"][0]["subresources"]["status"], json!({}));
    }
}
