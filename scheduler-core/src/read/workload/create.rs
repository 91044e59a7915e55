//! What the API server writes into a pod when it creates it, of what the scheduler reads: the
//! pod's own values of `matchLabelKeys` (`key In [value]`) and `mismatchLabelKeys`
//! (`key NotIn [value]`) merged into each pod affinity and anti-affinity term's `labelSelector`
//! (`MatchLabelKeysInPodAffinity`, locked on since 1.33), and of a topology spread constraint's
//! `matchLabelKeys` into its `labelSelector` (`MatchLabelKeysInPodTopologySpreadSelectorMerge`,
//! on since 1.34) — `pkg/registry/core/pod/strategy.go` (`PrepareForCreate`). kube-scheduler
//! merges nothing for affinity itself, so a pod `simulate` creates gets this; pods read from the
//! cluster have it already. A term without a `labelSelector` is left alone (it selects nothing).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::read::object::At;

/// Merges, into `pod` (a Pod's JSON), what the API server merges at creation (see the module).
pub fn pod_created(pod: &mut Value) {
    let labels: BTreeMap<String, String> = pod
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    let Some(spec) = pod.get_mut("spec") else { return };
    if let Some(affinity) = spec.get_mut("affinity") {
        for part in ["podAffinity", "podAntiAffinity"] {
            let Some(part) = affinity.get_mut(part) else { continue };
            if let Some(terms) =
                part.get_mut("requiredDuringSchedulingIgnoredDuringExecution").and_then(Value::as_array_mut)
            {
                for term in terms {
                    merge_keys(term, &labels, true);
                }
            }
            if let Some(terms) =
                part.get_mut("preferredDuringSchedulingIgnoredDuringExecution").and_then(Value::as_array_mut)
            {
                for weighted in terms {
                    if let Some(term) = weighted.get_mut("podAffinityTerm") {
                        merge_keys(term, &labels, true);
                    }
                }
            }
        }
    }
    if let Some(constraints) = spec.get_mut("topologySpreadConstraints").and_then(Value::as_array_mut) {
        for c in constraints {
            merge_keys(c, &labels, false);
        }
    }
}

/// Appends to `term`'s `labelSelector.matchExpressions` a requirement per key of its
/// `matchLabelKeys` (and, with `mismatch`, of its `mismatchLabelKeys`) the pod's labels have.
fn merge_keys(term: &mut Value, labels: &BTreeMap<String, String>, mismatch: bool) {
    let keys = |field: &str| -> Vec<String> {
        term.get(field)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|k| k.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    let mut add: Vec<Value> = Vec::new();
    for (field, operator) in [("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")] {
        if field == "mismatchLabelKeys" && !mismatch {
            continue;
        }
        for key in keys(field) {
            if let Some(value) = labels.get(&key) {
                add.push(json!({"key": key, "operator": operator, "values": [value]}));
            }
        }
    }
    if add.is_empty() {
        return;
    }
    let Some(selector) = term.get_mut("labelSelector").and_then(Value::as_object_mut) else { return };
    let expressions = selector.entry("matchExpressions").or_insert_with(|| Value::Array(Vec::new()));
    if expressions.is_null() {
        *expressions = Value::Array(Vec::new());
    }
    if let Some(list) = expressions.as_array_mut() {
        list.extend(add);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pods_values_of_the_label_keys_are_merged_as_the_api_server_merges_them() {
        let mut pod = json!({"metadata": {"labels": {"app": "web", "pod-template-hash": "abc"}}, "spec": {
            "affinity": {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}},
                     "matchLabelKeys": ["pod-template-hash", "absent"]},
                    {"topologyKey": "zone", "matchLabelKeys": ["app"]}]},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {},
                     "mismatchLabelKeys": ["app"]}}]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "labelSelector": {},
                "matchLabelKeys": ["pod-template-hash"], "mismatchLabelKeys": ["app"]}]}});
        pod_created(&mut pod);
        let required =
            &pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
        assert_eq!(
            required[0]["labelSelector"]["matchExpressions"],
            json!([{"key": "pod-template-hash", "operator": "In", "values": ["abc"]}]),
            "a key the pod lacks adds nothing"
        );
        assert!(required[1].get("labelSelector").is_none(), "no selector: it selects nothing, left alone");
        let preferred =
            &pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"];
        assert_eq!(
            preferred[0]["podAffinityTerm"]["labelSelector"]["matchExpressions"],
            json!([{"key": "app", "operator": "NotIn", "values": ["web"]}])
        );
        assert_eq!(
            pod["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"],
            json!([{"key": "pod-template-hash", "operator": "In", "values": ["abc"]}]),
            "spread constraints have no mismatchLabelKeys"
        );
    }
}
