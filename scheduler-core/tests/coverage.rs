//! The safety net's list (`scheduler_core::coverage`) against the API: every property of a
//! PodSpec, a container, a container port, its resources, a volume, the affinities, a pod affinity
//! term and a topology spread constraint is listed, with what the cycle does with it — so a field
//! the API adds, or one kube-scheduler reads, cannot go unsaid — and every field listed as waiting
//! makes a pod that sets it wait, naming it, while every other leaves it placeable.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1 as core;
use scheduler_core::convert::{self, PriorityClasses};
use scheduler_core::coverage::{self, Coverage, Field};
use serde_json::{Value, json};

/// The property names of `T`'s OpenAPI schema.
fn properties<T: schemars::JsonSchema>() -> BTreeSet<String> {
    let schema = schemars::schema_for!(T);
    let value = serde_json::to_value(&schema).unwrap();
    value["properties"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

fn listed(list: &[Field]) -> BTreeSet<String> {
    list.iter().map(|f| f.field.to_string()).collect()
}

#[track_caller]
fn same(what: &str, api: BTreeSet<String>, list: &[Field]) {
    let ours = listed(list);
    assert!(!api.is_empty(), "{what}: no properties read from the schema");
    let missing: Vec<_> = api.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&api).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{what}: not listed {missing:?}; listed but not in the API {extra:?}"
    );
    assert_eq!(ours.len(), list.len(), "{what}: a field listed twice");
}

#[test]
fn every_field_kube_scheduler_could_read_is_listed_with_what_the_cycle_does() {
    same("PodSpec", properties::<core::PodSpec>(), coverage::POD_SPEC);
    same("Container", properties::<core::Container>(), coverage::CONTAINER);
    same("ContainerPort", properties::<core::ContainerPort>(), coverage::CONTAINER_PORT);
    same("ResourceRequirements", properties::<core::ResourceRequirements>(), coverage::RESOURCES);
    same("Volume", properties::<core::Volume>(), coverage::VOLUME);
    same("PodAffinityTerm", properties::<core::PodAffinityTerm>(), coverage::AFFINITY_TERM);
    same("TopologySpreadConstraint", properties::<core::TopologySpreadConstraint>(), coverage::SPREAD);
    let mut affinity = BTreeSet::new();
    for (part, fields) in [
        ("nodeAffinity", properties::<core::NodeAffinity>()),
        ("podAffinity", properties::<core::PodAffinity>()),
        ("podAntiAffinity", properties::<core::PodAntiAffinity>()),
    ] {
        assert!(properties::<core::Affinity>().contains(part));
        affinity.extend(fields.into_iter().map(|f| format!("{part}.{f}")));
    }
    same("Affinity", affinity, coverage::AFFINITY);
}

fn pod(spec: Value) -> scheduler_core::Pod {
    let v = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec});
    let typed = convert::pod_from_value(&v, &PriorityClasses::default()).unwrap();
    assert_eq!(convert::pod_from_raw(&v, &PriorityClasses::default()).unwrap(), typed);
    typed
}

#[test]
fn a_pod_that_sets_a_waiting_field_waits_naming_it_and_no_other_field_holds_it_back() {
    for f in coverage::VOLUME.iter().filter(|f| f.field != "name") {
        let p = pod(json!({"containers": [], "volumes": [{"name": "v", f.field: {}}]}));
        let waits = matches!(f.coverage, Coverage::Waits(_));
        let path = format!("spec.volumes[0].{}", f.field);
        assert_eq!(p.unevaluated().contains(&path), waits, "{}: {:?}", f.field, p.unevaluated());
        assert_eq!(p.unevaluated().is_empty(), !waits, "{}", f.field);
        if waits {
            assert!(coverage::needs(&path).is_some());
        }
    }
    let claims = pod(json!({"containers": [{"name": "a", "resources": {"claims": [{"name": "g"}]}}],
        "resourceClaims": [{"name": "g", "resourceClaimName": "c"}]}));
    for (path, list, field) in [
        ("spec.resourceClaims", coverage::POD_SPEC, "resourceClaims"),
        ("spec.containers[0].resources.claims", coverage::RESOURCES, "claims"),
    ] {
        assert_eq!(claims.unevaluated().iter().any(|u| u == path), coverage::waits(list, field), "{path}");
        assert_eq!(coverage::needs(path), coverage::waits_for(list, field));
    }
    // Every PodSpec field listed as waiting is one the reader names (a new one must be read too).
    let waiting: Vec<&str> = coverage::POD_SPEC
        .iter()
        .chain(coverage::CONTAINER)
        .chain(coverage::CONTAINER_PORT)
        .chain(coverage::AFFINITY)
        .chain(coverage::AFFINITY_TERM)
        .chain(coverage::SPREAD)
        .filter(|f| matches!(f.coverage, Coverage::Waits(_)))
        .map(|f| f.field)
        .collect();
    let looked_for = ["resourceClaims"];
    assert!(
        waiting.iter().all(|f| looked_for.contains(f)),
        "a waiting field the reader does not look for: {waiting:?}"
    );
}

/// The README's table of what the cycle evaluates is rendered from the lists (rewrite it with
/// `COVERAGE=overwrite cargo test -p scheduler-core --test coverage`).
#[test]
fn the_readme_says_field_by_field_what_the_lists_say() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let (start, end) =
        ("<!-- coverage: generated from scheduler-core/src/read/coverage.rs -->\n", "<!-- /coverage -->");
    let from = readme.find(start).expect("the README's coverage table markers") + start.len();
    let to = from + readme[from..].find(end).expect("the README's coverage table end marker");
    let table = coverage::markdown();
    if readme[from..to] != table && std::env::var("COVERAGE").as_deref() == Ok("overwrite") {
        std::fs::write(path, format!("{}{table}{}", &readme[..from], &readme[to..])).unwrap();
        return;
    }
    assert_eq!(
        readme[from..to],
        table,
        "README.md's coverage table is out of date: COVERAGE=overwrite cargo test -p scheduler-core --test coverage"
    );
}
