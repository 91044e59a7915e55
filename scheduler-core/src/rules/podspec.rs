//! The rules kube-apiserver holds a pod spec's inter-pod scheduling fields to (its
//! `pkg/apis/core/validation`): required and preferred pod affinity and anti-affinity terms (label
//! selectors, namespaces, `matchLabelKeys` / `mismatchLabelKeys`, topology key, weights), topology
//! spread constraints (`maxSkew`, `minDomains`, topology key, `whenUnsatisfiable`, node inclusion
//! policies, repeated constraints, `matchLabelKeys`, selector) and container ports (numbers,
//! names, protocols, host ports repeated in a pod, host ports under `hostNetwork`).
//!
//! [`crate::rules::validate`] applies them to pods and to the pod templates of the workloads it checks, so
//! the webhook, `kubectl gang validate` and `simulate` refuse what the API server would refuse in
//! these fields — for a workload of a custom kind, whose templates the API server does not check,
//! before the controller's pods are refused one by one. Each problem is worded as the API server
//! words it, at its field path.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::Value;

use crate::read::error::{FieldError, Wording, decode, join_path};
use crate::read::labels::{check_label_key, check_label_value};
use crate::read::object::At;

/// `is_not_positive` in the API server's words.
const NOT_POSITIVE: &str = "must be greater than zero";

/// Every problem with the inter-pod scheduling fields of the pod spec `spec`, at `path` (`spec`,
/// or a template's `spec.template.spec`). A field that does not decode is one error at its path.
pub fn errors(spec: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut out = Vec::new();
    let Some(spec) = spec.filter(|s| s.is_object()) else { return out };
    let at = |field: &str| join_path(path, field);
    if let Some(affinity) = spec.at("/affinity").filter(|a| !a.is_null()) {
        match decode::<core::Affinity>(affinity, &at("affinity"), Wording::BuiltIn) {
            Ok(a) => affinity_errors(&a, &at("affinity"), &mut out),
            Err(e) => out.extend(e),
        }
    }
    if let Some(list) = spec.at("/topologySpreadConstraints").filter(|a| !a.is_null()) {
        match decode::<Vec<core::TopologySpreadConstraint>>(
            list,
            &at("topologySpreadConstraints"),
            Wording::BuiltIn,
        ) {
            Ok(c) => spread_errors(&c, &at("topologySpreadConstraints"), &mut out),
            Err(e) => out.extend(e),
        }
    }
    let host_network = spec.at("/hostNetwork").and_then(Value::as_bool).unwrap_or(false);
    for kind in ["containers", "initContainers"] {
        let Some(list) = spec.at(&format!("/{kind}")).and_then(Value::as_array) else { continue };
        let mut host_ports = BTreeSet::new();
        for (i, c) in list.iter().enumerate() {
            let Some(ports) = c.at("/ports").filter(|p| !p.is_null()) else { continue };
            let ports_path = at(&format!("{kind}[{i}].ports"));
            match decode::<Vec<core::ContainerPort>>(ports, &ports_path, Wording::BuiltIn) {
                Ok(p) => {
                    port_errors(&p, &ports_path, host_network, &mut out);
                    // Init containers run one at a time: each is checked on its own.
                    if kind == "initContainers" {
                        host_ports.clear();
                    }
                    repeated_host_ports(&p, &ports_path, &mut host_ports, &mut out);
                }
                Err(e) => out.extend(e),
            }
        }
    }
    out
}

fn affinity_errors(a: &core::Affinity, path: &str, out: &mut Vec<FieldError>) {
    for (part, terms) in [
        (
            "podAffinity",
            a.pod_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            a.pod_anti_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ] {
        let Some((required, preferred)) = terms else { continue };
        let base = join_path(path, part);
        for (i, t) in required.iter().flatten().enumerate() {
            term_errors(t, &format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"), out);
        }
        for (i, w) in preferred.iter().flatten().enumerate() {
            let at = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            if !(1..=100).contains(&w.weight) {
                out.push(FieldError::new(
                    format!("{at}.weight"),
                    format!("Invalid value: {}: must be in the range 1-100", w.weight),
                ));
            }
            term_errors(&w.pod_affinity_term, &format!("{at}.podAffinityTerm"), out);
        }
    }
}

/// One pod affinity term: `validatePodAffinityTerm`.
fn term_errors(t: &core::PodAffinityTerm, path: &str, out: &mut Vec<FieldError>) {
    if let Some(s) = &t.label_selector {
        selector_errors(s, &format!("{path}.labelSelector"), out);
    }
    if let Some(s) = &t.namespace_selector {
        selector_errors(s, &format!("{path}.namespaceSelector"), out);
    }
    for ns in t.namespaces.iter().flatten() {
        if !is_dns_label(ns) {
            // The API server names the field `namespace` here (sic).
            out.push(FieldError::new(
                format!("{path}.namespace"),
                format!("Invalid value: {ns:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"),
            ));
        }
    }
    let matching = t.match_label_keys.as_deref().unwrap_or_default();
    let mismatching = t.mismatch_label_keys.as_deref().unwrap_or_default();
    label_keys_errors(matching, t.label_selector.as_ref(), &format!("{path}.matchLabelKeys"), out);
    label_keys_errors(mismatching, t.label_selector.as_ref(), &format!("{path}.mismatchLabelKeys"), out);
    if let Some(s) = &t.label_selector {
        let in_selector = selector_keys(s);
        for (i, k) in matching.iter().enumerate() {
            if in_selector.contains(k.as_str()) {
                out.push(FieldError::new(
                    format!("{path}.matchLabelKeys[{i}]"),
                    format!("Invalid value: {k:?}: exists in both matchLabelKeys and labelSelector"),
                ));
            }
        }
    }
    for (i, k) in matching.iter().enumerate() {
        if mismatching.contains(k) {
            out.push(FieldError::new(
                format!("{path}.matchLabelKeys[{i}]"),
                format!("Invalid value: {k:?}: exists in both matchLabelKeys and mismatchLabelKeys"),
            ));
        }
    }
    topology_key_errors(&t.topology_key, &format!("{path}.topologyKey"), out);
}

/// The label keys of `matchLabelKeys` (or `mismatchLabelKeys`): valid label keys, and only with a
/// `labelSelector`.
fn label_keys_errors(
    keys: &[String],
    selector: Option<&meta::LabelSelector>,
    path: &str,
    out: &mut Vec<FieldError>,
) {
    if keys.is_empty() {
        return;
    }
    if selector.is_none() {
        out.push(FieldError::new(path, "Forbidden: must not be specified when labelSelector is not set"));
        return;
    }
    for (i, k) in keys.iter().enumerate() {
        if let Err(e) = check_label_key(k) {
            out.push(FieldError::new(format!("{path}[{i}]"), format!("Invalid value: {k:?}: {e}")));
        }
    }
}

/// The keys a selector constrains.
fn selector_keys(s: &meta::LabelSelector) -> BTreeSet<&str> {
    s.match_labels
        .iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .chain(s.match_expressions.iter().flatten().map(|r| r.key.as_str()))
        .collect()
}

/// A topology key: required, and a valid label key.
fn topology_key_errors(key: &str, path: &str, out: &mut Vec<FieldError>) {
    if key.is_empty() {
        out.push(FieldError::new(path, "Required value: can not be empty"));
        return;
    }
    if let Err(e) = check_label_key(key) {
        out.push(FieldError::new(path, format!("Invalid value: {key:?}: {e}")));
    }
}

/// A `metav1.LabelSelector`: apimachinery's `ValidateLabelSelector`.
pub fn selector_errors(s: &meta::LabelSelector, path: &str, out: &mut Vec<FieldError>) {
    for (i, r) in s.match_expressions.iter().flatten().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values = r.values.as_deref().unwrap_or_default();
        match r.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => out.push(FieldError::new(
                format!("{at}.values"),
                "Required value: must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => out.push(FieldError::new(
                format!("{at}.values"),
                "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => out.push(FieldError::new(
                format!("{at}.operator"),
                format!("Invalid value: {other:?}: not a valid selector operator"),
            )),
        }
        if let Err(e) = check_label_key(&r.key) {
            out.push(FieldError::new(format!("{at}.key"), format!("Invalid value: {:?}: {e}", r.key)));
        }
        for (j, v) in values.iter().enumerate() {
            if !v.is_empty()
                && let Err(e) = check_label_value(v)
            {
                out.push(FieldError::new(format!("{at}.values[{j}]"), format!("Invalid value: {v:?}: {e}")));
            }
        }
    }
    for (k, v) in s.match_labels.iter().flatten() {
        let at = format!("{path}.matchLabels");
        if let Err(e) = check_label_key(k) {
            out.push(FieldError::new(at.clone(), format!("Invalid value: {k:?}: {e}")));
        }
        if !v.is_empty()
            && let Err(e) = check_label_value(v)
        {
            out.push(FieldError::new(at, format!("Invalid value: {v:?}: {e}")));
        }
    }
}

/// Topology spread constraints: `validateTopologySpreadConstraints`.
fn spread_errors(list: &[core::TopologySpreadConstraint], path: &str, out: &mut Vec<FieldError>) {
    const ACTIONS: &str = "supported values: \"DoNotSchedule\", \"ScheduleAnyway\"";
    const POLICIES: &str = "supported values: \"Honor\", \"Ignore\"";
    for (i, c) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if c.max_skew <= 0 {
            out.push(FieldError::new(
                format!("{at}.maxSkew"),
                format!("Invalid value: {}: {NOT_POSITIVE}", c.max_skew),
            ));
        }
        if c.topology_key.is_empty() {
            out.push(FieldError::new(format!("{at}.topologyKey"), "Required value: can not be empty"));
        }
        let action = c.when_unsatisfiable.as_str();
        if !matches!(action, "DoNotSchedule" | "ScheduleAnyway") {
            out.push(FieldError::new(
                format!("{at}.whenUnsatisfiable"),
                format!("Unsupported value: {action:?}: {ACTIONS}"),
            ));
        }
        if list[i + 1..]
            .iter()
            .any(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable)
        {
            out.push(FieldError::new(
                format!("{at}.{{topologyKey, whenUnsatisfiable}}"),
                format!("Duplicate value: \"{{{}, {action}}}\"", c.topology_key),
            ));
        }
        if let Some(d) = c.min_domains {
            if d <= 0 {
                out.push(FieldError::new(
                    format!("{at}.minDomains"),
                    format!("Invalid value: {d}: {NOT_POSITIVE}"),
                ));
            }
            if action != "DoNotSchedule" {
                out.push(FieldError::new(
                    format!("{at}.minDomains"),
                    format!("Invalid value: {d}: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"),
                ));
            }
        }
        for (field, policy) in
            [("nodeAffinityPolicy", &c.node_affinity_policy), ("nodeTaintsPolicy", &c.node_taints_policy)]
        {
            if let Some(p) = policy
                && !matches!(p.as_str(), "Honor" | "Ignore")
            {
                out.push(FieldError::new(
                    format!("{at}.{field}"),
                    format!("Unsupported value: {p:?}: {POLICIES}"),
                ));
            }
        }
        let keys = c.match_label_keys.as_deref().unwrap_or_default();
        if !keys.is_empty() {
            match &c.label_selector {
                None => out.push(FieldError::new(
                    format!("{at}.matchLabelKeys"),
                    "Forbidden: must not be specified when labelSelector is not set",
                )),
                Some(s) => {
                    let in_selector = selector_keys(s);
                    for (j, k) in keys.iter().enumerate() {
                        if let Err(e) = check_label_key(k) {
                            out.push(FieldError::new(
                                format!("{at}.matchLabelKeys[{j}]"),
                                format!("Invalid value: {k:?}: {e}"),
                            ));
                        }
                        if in_selector.contains(k.as_str()) {
                            out.push(FieldError::new(
                                format!("{at}.matchLabelKeys[{j}]"),
                                format!(
                                    "Invalid value: {k:?}: exists in both matchLabelKeys and labelSelector"
                                ),
                            ));
                        }
                    }
                }
            }
        }
        if let Some(s) = &c.label_selector {
            selector_errors(s, &format!("{at}.labelSelector"), out);
        }
    }
}

/// One container's ports: `validateContainerPorts`, and `hostPort` under `hostNetwork`.
fn port_errors(ports: &[core::ContainerPort], path: &str, host_network: bool, out: &mut Vec<FieldError>) {
    let mut names = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            if let Some(why) = port_name_error(name) {
                out.push(FieldError::new(format!("{at}.name"), format!("Invalid value: {name:?}: {why}")));
            } else if !names.insert(name) {
                out.push(FieldError::new(format!("{at}.name"), format!("Duplicate value: {name:?}")));
            }
        }
        if p.container_port == 0 {
            out.push(FieldError::new(format!("{at}.containerPort"), "Required value"));
        } else if !(1..=65535).contains(&p.container_port) {
            out.push(FieldError::new(
                format!("{at}.containerPort"),
                format!("Invalid value: {}: must be between 1 and 65535, inclusive", p.container_port),
            ));
        }
        let host = p.host_port.unwrap_or(0);
        if host != 0 && !(1..=65535).contains(&host) {
            out.push(FieldError::new(
                format!("{at}.hostPort"),
                format!("Invalid value: {host}: must be between 1 and 65535, inclusive"),
            ));
        }
        // The API server defaults an empty protocol to TCP, and hostPort to containerPort under
        // hostNetwork, before it validates.
        if let Some(protocol) = p.protocol.as_deref().filter(|p| !p.is_empty())
            && !matches!(protocol, "TCP" | "UDP" | "SCTP")
        {
            out.push(FieldError::new(
                format!("{at}.protocol"),
                format!("Unsupported value: {protocol:?}: supported values: \"SCTP\", \"TCP\", \"UDP\""),
            ));
        }
        if host_network && host != 0 && host != p.container_port {
            out.push(FieldError::new(
                format!("{at}.hostPort"),
                format!("Invalid value: {host}: must match `containerPort` when `hostNetwork` is true"),
            ));
        }
    }
}

/// The same host port (protocol, address, port) bound twice among a pod's containers:
/// `AccumulateUniqueHostPorts`.
fn repeated_host_ports(
    ports: &[core::ContainerPort],
    path: &str,
    seen: &mut BTreeSet<String>,
    out: &mut Vec<FieldError>,
) {
    for (i, p) in ports.iter().enumerate() {
        let port = p.host_port.unwrap_or(0);
        if port == 0 {
            continue;
        }
        let protocol = p.protocol.as_deref().filter(|s| !s.is_empty()).unwrap_or("TCP");
        let key = format!("{protocol}/{}/{port}", p.host_ip.as_deref().unwrap_or(""));
        if !seen.insert(key.clone()) {
            out.push(FieldError::new(format!("{path}[{i}].hostPort"), format!("Duplicate value: {key:?}")));
        }
    }
}

/// apimachinery's `IsValidPortName` (an IANA service name): why `name` is not one.
fn port_name_error(name: &str) -> Option<&'static str> {
    if name.len() > 15 {
        return Some("must be no more than 15 characters");
    }
    if !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        return Some("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if name.contains("--") {
        return Some("must not contain consecutive hyphens");
    }
    if !name.chars().any(|c| c.is_ascii_lowercase()) {
        return Some("must contain at least one letter (a-z)");
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Some("must not begin or end with a hyphen");
    }
    None
}

/// A DNS-1123 label (a namespace's name): at most 63 lowercase alphanumerics and `-`, starting
/// and ending with an alphanumeric.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(spec: Value) -> Vec<String> {
        errors(Some(&spec), "spec").into_iter().map(|e| format!("{}: {}", e.path, e.message)).collect()
    }

    #[test]
    fn a_spec_without_these_fields_is_fine() {
        assert!(paths(json!({"containers": [{"name": "a"}]})).is_empty());
        assert!(errors(None, "spec").is_empty());
    }

    #[test]
    fn affinity_terms_as_the_api_server_checks_them() {
        let e = paths(json!({"affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "", "labelSelector": {"matchExpressions": [
                    {"key": "app", "operator": "Near"}, {"key": "app", "operator": "In"},
                    {"key": "tier", "operator": "Exists", "values": ["x"]}]}},
                {"topologyKey": "zone", "namespaces": ["Bad_NS"], "matchLabelKeys": ["app"]},
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "x"}},
                 "matchLabelKeys": ["app", "tier"], "mismatchLabelKeys": ["tier"]}],
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "podAffinityTerm": {"topologyKey": "zone"}}]}}}));
        let base = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution";
        let want = [
            format!("{base}[0].labelSelector.matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator"),
            format!("{base}[0].labelSelector.matchExpressions[1].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
            format!("{base}[0].labelSelector.matchExpressions[2].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
            format!("{base}[0].topologyKey: Required value: can not be empty"),
            format!("{base}[1].namespace: Invalid value"),
            format!("{base}[1].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"),
            format!("{base}[2].matchLabelKeys[0]: Invalid value: \"app\": exists in both matchLabelKeys and labelSelector"),
            format!("{base}[2].matchLabelKeys[1]: Invalid value: \"tier\": exists in both matchLabelKeys and mismatchLabelKeys"),
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100".to_string(),
        ];
        for w in &want {
            assert!(e.iter().any(|x| x.starts_with(w.as_str())), "missing {w:?} in {e:#?}");
        }
        assert_eq!(e.len(), want.len(), "{e:#?}");
    }

    #[test]
    fn spread_constraints_as_the_api_server_checks_them() {
        let e = paths(json!({"topologySpreadConstraints": [
            {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 0},
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "Sometimes", "nodeAffinityPolicy": "Maybe"},
            {"maxSkew": 1, "topologyKey": "host", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2,
             "labelSelector": {"matchLabels": {"app": "x"}}, "matchLabelKeys": ["app"]},
            {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule", "matchLabelKeys": ["app"]}]}));
        let p = "spec.topologySpreadConstraints";
        let want = [
            format!("{p}[0].maxSkew: Invalid value: 0: must be greater than zero"),
            format!(
                "{p}[0].{{topologyKey, whenUnsatisfiable}}: Duplicate value: \"{{zone, DoNotSchedule}}\""
            ),
            format!("{p}[0].minDomains: Invalid value: 0: must be greater than zero"),
            format!("{p}[2].topologyKey: Required value: can not be empty"),
            format!("{p}[2].whenUnsatisfiable: Unsupported value: \"Sometimes\""),
            format!("{p}[2].nodeAffinityPolicy: Unsupported value: \"Maybe\""),
            format!(
                "{p}[3].minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"
            ),
            format!(
                "{p}[3].matchLabelKeys[0]: Invalid value: \"app\": exists in both matchLabelKeys and labelSelector"
            ),
            format!("{p}[4].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"),
        ];
        for w in &want {
            assert!(e.iter().any(|x| x.starts_with(w.as_str())), "missing {w:?} in {e:#?}");
        }
        assert_eq!(e.len(), want.len(), "{e:#?}");
    }

    #[test]
    fn ports_as_the_api_server_checks_them() {
        let e = paths(json!({"hostNetwork": true, "containers": [
            {"name": "a", "ports": [
                {"containerPort": 0, "name": "HTTP"},
                {"containerPort": 70000, "hostPort": 70000, "protocol": "QUIC"},
                {"containerPort": 80, "hostPort": 8080, "name": "web"},
                {"containerPort": 81, "name": "web"}]},
            {"name": "b", "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]}],
            "initContainers": [{"name": "i", "ports": [{"containerPort": 8080, "hostPort": 8080}]}]}));
        let p = "spec.containers[0].ports";
        let want = [
            format!("{p}[0].name: Invalid value: \"HTTP\": must contain only alpha-numeric characters"),
            format!("{p}[0].containerPort: Required value"),
            format!("{p}[1].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"),
            format!("{p}[1].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive"),
            format!("{p}[1].protocol: Unsupported value: \"QUIC\""),
            format!(
                "{p}[2].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true"
            ),
            format!("{p}[3].name: Duplicate value: \"web\""),
            "spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//8080\"".to_string(),
        ];
        for w in &want {
            assert!(e.iter().any(|x| x.starts_with(w.as_str())), "missing {w:?} in {e:#?}");
        }
        assert_eq!(e.len(), want.len(), "{e:#?}");
        let bad = paths(json!({"topologySpreadConstraints": [{"maxSkew": "one"}]}));
        assert_eq!(bad.len(), 1);
        assert!(bad[0].starts_with("spec.topologySpreadConstraints[0].maxSkew: cannot decode"), "{bad:?}");
    }
}
