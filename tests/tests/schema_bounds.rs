//! The Gang CRD bounds what it can hold (issue 16): the committed CRD is walked and every list, string
//! and map in its schema must carry a limit, so the API server refuses an oversize Gang before any
//! webhook or policy runs, and the ValidatingAdmissionPolicy's CEL has a finite cost.

use std::path::PathBuf;

use serde_json::Value;

fn file(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_norway::Deserializer::from_str(&text).map(|d| serde::Deserialize::deserialize(d).unwrap()).collect()
}

fn crd_schema() -> Value {
    let crd = file("manifests/base/crd-gang.yaml").remove(0);
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// Every node of the schema that could hold unbounded data, with its path.
fn unbounded(schema: &Value, path: &str, out: &mut Vec<String>) {
    let ty = schema.get("type").and_then(Value::as_str);
    let has = |k: &str| schema.get(k).is_some();
    match ty {
        Some("array") if !has("maxItems") => out.push(format!("{path}: array without maxItems")),
        Some("string") if !has("maxLength") && !has("enum") => {
            out.push(format!("{path}: string without maxLength"))
        }
        Some("object") if has("additionalProperties") && !has("maxProperties") => {
            out.push(format!("{path}: map without maxProperties"))
        }
        None if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) && !has("maxLength") => {
            out.push(format!("{path}: int-or-string without maxLength"))
        }
        _ => {}
    }
    if let Some(Value::Object(props)) = schema.get("properties") {
        for (name, child) in props {
            unbounded(child, &format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = schema.get("items") {
        unbounded(items, &format!("{path}[]"), out);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        unbounded(values, &format!("{path}{{}}"), out);
    }
}

#[test]
fn every_list_string_and_map_in_the_gang_crd_is_bounded() {
    let mut schema = crd_schema();
    // apiVersion and kind are checked by the API server against the CRD's group, versions and kind;
    // metadata by ObjectMeta's own validation.
    for k in ["apiVersion", "kind", "metadata"] {
        schema["properties"].as_object_mut().unwrap().remove(k);
    }
    let mut out = Vec::new();
    unbounded(&schema, "", &mut out);
    assert!(out.is_empty(), "unbounded fields:\n{}", out.join("\n"));
}

#[test]
fn the_walk_finds_an_unbounded_field() {
    let schema: Value = serde_json::json!({"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "string", "maxLength": 3}},
        "b": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
        "c": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 1}}}});
    let mut out = Vec::new();
    unbounded(&schema, "", &mut out);
    assert_eq!(
        out,
        vec![".a: array without maxItems", ".b[]: string without maxLength", ".c: map without maxProperties"]
    );
}

#[test]
fn subgroups_are_a_list_map_keyed_by_name_at_most_64_long() {
    let schema = crd_schema();
    let sub = &schema["properties"]["spec"]["properties"]["subGroups"];
    assert_eq!(sub["maxItems"], 64);
    assert_eq!(sub["x-kubernetes-list-type"], "map");
    assert_eq!(sub["x-kubernetes-list-map-keys"], serde_json::json!(["name"]));
    // A list-map key must be required and must not be nullable.
    assert!(sub["items"]["required"].as_array().unwrap().contains(&Value::from("name")));
    assert!(sub["items"]["properties"]["name"].get("nullable").is_none());
    assert_eq!(sub["items"]["properties"]["name"]["maxLength"], 63);
    assert_eq!(
        scheduler_core::validate::MAX_SUBGROUPS,
        64,
        "the schema's maxItems and the rule book's limit are the same number"
    );
}

/// With the list-map, the quadratic uniqueness rule is gone; what remains iterates over bounded
/// lists only.
#[test]
fn the_admission_policy_has_no_quadratic_uniqueness_rule() {
    let objects = file("manifests/base/validating-admission-policy.yaml");
    let policy = objects.iter().find(|o| o["kind"] == "ValidatingAdmissionPolicy").unwrap();
    let expressions: Vec<&str> = policy["spec"]["validations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["expression"].as_str().unwrap())
        .collect();
    assert!(expressions.iter().all(|e| !e.contains("exists_one")), "{expressions:?}");
    // Only spec.subGroups is iterated, and it is bounded by the CRD.
    for e in &expressions {
        for iterated in
            e.match_indices(".all(").chain(e.match_indices(".exists(")).chain(e.match_indices(".filter("))
        {
            let before = &e[..iterated.0];
            assert!(before.ends_with("object.spec.subGroups"), "iterates over something unbounded: {e}");
        }
    }
}
