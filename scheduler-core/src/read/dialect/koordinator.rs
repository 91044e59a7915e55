//! Koordinator: CRD-less gangs from pod annotations `gang.scheduling.koordinator.sh/{name,
//! min-available, total-number, mode, waiting-time, groups}`, or the `PodGroup` Koordinator ships
//! (`scheduling.sigs.k8s.io/v1alpha1`, scheduler-plugins' type under its older group; pods join by
//! label `pod-group.scheduling.sigs.k8s.io`) with the same `mode`, `groups` and `total-number`
//! annotations on the PodGroup.

use serde_json::Value;

use super::{Claim, Meta, annotation_path, parse_count, parse_duration};

/// The API group of Koordinator's `PodGroup`.
pub const GROUP: &str = "scheduling.sigs.k8s.io";
use crate::read::error::FieldError;
use crate::read::model::{Dialect, Gang, GangKey, GangMode, Source};

/// Annotation naming the gang.
pub const NAME: &str = "gang.scheduling.koordinator.sh/name";
/// Minimum members.
pub const MIN_AVAILABLE: &str = "gang.scheduling.koordinator.sh/min-available";
/// Expected total members.
pub const TOTAL_NUMBER: &str = "gang.scheduling.koordinator.sh/total-number";
/// `Strict` or `NonStrict`.
pub const MODE: &str = "gang.scheduling.koordinator.sh/mode";
/// How long the gang may wait (a Go duration).
pub const WAITING_TIME: &str = "gang.scheduling.koordinator.sh/waiting-time";
/// JSON list of `namespace/name` gangs scheduled together.
pub const GROUPS: &str = "gang.scheduling.koordinator.sh/groups";
/// The gang's network-topology gather rules (a JSON `gatherStrategy` list of layers of the
/// cluster's `ClusterNetworkTopology`), on its PodGroup or its pods.
pub const NETWORK_TOPOLOGY_SPEC: &str = "gang.scheduling.koordinator.sh/network-topology-spec";
/// A pod's rank for network-topology placement.
pub const NETWORK_TOPOLOGY_INDEX: &str = "gang.scheduling.koordinator.sh/network-topology-index";
/// Which pods count toward the gang's minimum (`once-satisfied`, the default, `waiting-and-running`,
/// `only-waiting`; `apis/extension/coscheduling.go`), and its alias of the lightweight coscheduling
/// prefix.
pub const MATCH_POLICY: &str = "gang.scheduling.koordinator.sh/match-policy";
pub const MATCH_POLICY_ALIAS: &str = "pod-group.scheduling.sigs.k8s.io/match-policy";

/// The most gather rules one `network-topology-spec` may hold (a rule per layer; a
/// `ClusterNetworkTopology` holds at most `MAX_TOPOLOGY_OBJECT_LEVELS` + 1 layers here).
pub const MAX_GATHER_RULES: usize = crate::read::volume::MAX_TOPOLOGY_OBJECT_LEVELS + 2;

/// What Koordinator's network-topology annotations ask that is not evaluated, naming each: a
/// rule's `podCountMultiple` (pods per domain in multiples), keys of the spec Koordinator does not
/// define (ignored by it as by us), a pod's rank (`network-topology-index`, which orders
/// Koordinator's placement of the gang's pods), and the gather rules of a gang of a gang group
/// (Koordinator gathers the whole group in one domain; each gang is gathered on its own here).
/// `annotations`: the object's `metadata.annotations` (a PodGroup's or a pod's).
pub fn network_topology_warnings(annotations: Option<&serde_json::Map<String, Value>>) -> Vec<String> {
    let Some(a) = annotations else { return Vec::new() };
    let mut out = Vec::new();
    // The match policy (read as Koordinator reads it: the gang key, else its alias). Members on
    // nodes count toward the minimum here, and a satisfied gang places more freely: as
    // `waiting-and-running` and `once-satisfied` do; `only-waiting` is not.
    let policy = [MATCH_POLICY, MATCH_POLICY_ALIAS]
        .into_iter()
        .find_map(|k| Some((k, a.get(k).and_then(Value::as_str).filter(|v| !v.is_empty())?)));
    match policy {
        Some((k, "only-waiting")) => out.push(format!(
            "{}: only-waiting is not evaluated: members already on nodes count toward the minimum here (as waiting-and-running)",
            annotation_path(k)
        )),
        Some((_, "waiting-and-running" | "once-satisfied")) | None => {}
        Some((k, other)) => out.push(format!(
            "{}: {other:?} is not a Koordinator match policy (once-satisfied, waiting-and-running, only-waiting): ignored",
            annotation_path(k)
        )),
    }
    let spec_path = annotation_path(NETWORK_TOPOLOGY_SPEC);
    let spec = a.get(NETWORK_TOPOLOGY_SPEC).and_then(Value::as_str).filter(|s| !s.is_empty());
    if let Some(Err(e)) = spec.map(gather_rules) {
        out.push(format!("{e}: Koordinator ignores such a spec (it logs it), and so does the scheduler"));
    }
    if let Some(spec) = spec
        && let Ok(Value::Object(spec)) = serde_json::from_str::<Value>(spec)
    {
        // Keys are matched as Go's decoder matches them: without regard to case.
        let known = |k: &str, names: &[&str]| names.iter().any(|n| n.eq_ignore_ascii_case(k));
        for k in spec.keys().filter(|k| !known(k, &["gatherStrategy"])) {
            out.push(format!("{spec_path}: key {k:?} is not Koordinator's (only gatherStrategy): ignored"));
        }
        let rules = (spec.iter().find(|(k, _)| known(k, &["gatherStrategy"])))
            .and_then(|(_, v)| v.as_array())
            .map_or(&[][..], Vec::as_slice);
        for (i, rule) in rules.iter().enumerate() {
            let Some(rule) = rule.as_object() else { continue };
            let multiple =
                rule.iter().find(|(k, _)| known(k, &["podCountMultiple"])).and_then(|(_, v)| v.as_i64());
            if multiple.is_some_and(|n| n > 1) {
                out.push(format!(
                    "{spec_path}: gatherStrategy[{i}].podCountMultiple: not evaluated: pods are not \
                     placed in multiples per domain"
                ));
            }
            for k in rule.keys().filter(|k| !known(k, &["layer", "strategy", "podCountMultiple"])) {
                out.push(format!(
                    "{spec_path}: gatherStrategy[{i}]: key {k:?} is not Koordinator's: ignored"
                ));
            }
        }
        if a.contains_key(GROUPS) {
            out.push(format!(
                "{spec_path}: the gang is gathered on its own, not with the other gangs of its \
                 {} group in one domain as Koordinator gathers them",
                annotation_path(GROUPS)
            ));
        }
    }
    if a.contains_key(NETWORK_TOPOLOGY_INDEX) {
        out.push(format!(
            "{}: not evaluated: the gang's pods are not placed in rank order",
            annotation_path(NETWORK_TOPOLOGY_INDEX)
        ));
    }
    out
}

/// [`network_topology_warnings`] for a pod whose gang is a PodGroup's (it joins by label
/// `pod-group.scheduling.sigs.k8s.io`): its rank is not evaluated, and gather rules on the pod
/// are not its gang's (Koordinator reads them from the PodGroup).
pub fn member_network_warnings(annotations: Option<&serde_json::Map<String, Value>>) -> Vec<String> {
    let Some(a) = annotations else { return Vec::new() };
    let mut out = Vec::new();
    if a.contains_key(NETWORK_TOPOLOGY_SPEC) {
        out.push(format!(
            "{}: not used: the gang's network-topology-spec is its PodGroup's",
            annotation_path(NETWORK_TOPOLOGY_SPEC)
        ));
    }
    if a.contains_key(NETWORK_TOPOLOGY_INDEX) {
        out.push(format!(
            "{}: not evaluated: the gang's pods are not placed in rank order",
            annotation_path(NETWORK_TOPOLOGY_INDEX)
        ));
    }
    out
}

/// Reads a `network-topology-spec` annotation as Koordinator's scheduler decodes it with Go's
/// `encoding/json`: its `gatherStrategy` rules, each a layer and `MustGather` or `PreferGather`,
/// object keys matched without regard to case, unknown keys ignored (said by
/// [`network_topology_warnings`]), `null` as absent.
fn gather_rules(v: &str) -> Result<Vec<crate::read::model::GatherRule>, FieldError> {
    let path = annotation_path(NETWORK_TOPOLOGY_SPEC);
    let spec: Value = serde_json::from_str(v)
        .map_err(|e| FieldError::new(&path, format!("not a JSON object of gatherStrategy rules: {e}")))?;
    // Go's decoder matches a struct's keys case-insensitively.
    let field = |obj: &serde_json::Map<String, Value>, name: &str| -> Option<Value> {
        obj.get(name)
            .or_else(|| obj.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
            .cloned()
    };
    let spec = match spec {
        Value::Null => return Ok(Vec::new()),
        Value::Object(o) => o,
        other => return Err(FieldError::new(&path, format!("must be a JSON object, got {other}"))),
    };
    let rules = match field(&spec, "gatherStrategy") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(FieldError::new(
                format!("{path}.gatherStrategy"),
                format!("must be a list, got {other}"),
            ));
        }
    };
    if rules.len() > MAX_GATHER_RULES {
        return Err(FieldError::new(
            format!("{path}.gatherStrategy"),
            format!("Too many: {}: must have at most {MAX_GATHER_RULES} items", rules.len()),
        ));
    }
    let mut out = Vec::with_capacity(rules.len());
    for (i, r) in rules.iter().enumerate() {
        let at = format!("{path}.gatherStrategy[{i}]");
        let Value::Object(r) = r else {
            return Err(FieldError::new(at, format!("must be an object, got {r}")));
        };
        let text = |name: &str| -> Result<String, FieldError> {
            match field(r, name) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s),
                Some(other) => {
                    Err(FieldError::new(format!("{at}.{name}"), format!("must be a string, got {other}")))
                }
            }
        };
        let (layer, strategy) = (text("layer")?, text("strategy")?);
        if layer.is_empty() {
            return Err(FieldError::new(format!("{at}.layer"), "Required value"));
        }
        let must = match strategy.as_str() {
            "MustGather" => true,
            "PreferGather" => false,
            other => {
                return Err(FieldError::new(
                    format!("{at}.strategy"),
                    format!(
                        "Unsupported value: {other:?}: supported values: \"MustGather\", \"PreferGather\""
                    ),
                ));
            }
        };
        out.push(crate::read::model::GatherRule { layer, must });
    }
    Ok(out)
}

/// A gang's required and preferred levels from its gather rules, through the cluster's network
/// `layers`, as Koordinator's solver places it: within one domain of the narrowest `MustGather`
/// layer (none: the whole tree, `ClusterTopologyLayer`; only nodes in the tree are used), and in
/// the tightest domain that holds every pod, tried from a single node up (the solver descends to
/// the deepest domain with room, whatever layer a `PreferGather` rule names — so those name
/// nothing here either). A `MustGather` layer the cluster's object lacks ranks as broad as its
/// broadest layer, as in Koordinator's ordering; when no known layer is narrower it is the
/// required level, which no node is in, so the gang waits, as Koordinator's finds no candidate.
/// Returns the levels and what to say (a layer the object lacks; no such object, or a spec that
/// could not be read: then no levels, as Koordinator schedules the gang without them).
pub fn gather_levels(
    gather: &crate::read::model::NetworkGather,
    layers: &crate::read::model::volume::NetworkLayers,
) -> (Option<String>, Option<String>, Vec<FieldError>) {
    use crate::read::network_layer::{CLUSTER_LAYER, NODE_LAYER, key_of};
    let path = annotation_path(NETWORK_TOPOLOGY_SPEC);
    if let Some(why) = &gather.unreadable {
        return (
            None,
            None,
            vec![FieldError::new(
                &path,
                format!("{why}; the gang is placed without it, as Koordinator places it"),
            )],
        );
    }
    if layers.is_empty() {
        let why = format!(
            "not evaluated: the cluster has no ClusterNetworkTopology named {:?} (scheduling.koordinator.sh/v1alpha1) to read its layers from; the gang is placed without them",
            crate::read::model::volume::NETWORK_TOPOLOGY_NAME
        );
        return (None, None, vec![FieldError::new(path, why)]);
    }
    let names = layers.layers();
    let known = |l: &str| l == CLUSTER_LAYER || names.iter().any(|n| n.name == l);
    let mut said = Vec::new();
    for (i, r) in gather.rules.iter().enumerate().filter(|(_, r)| !known(&r.layer)) {
        let list: Vec<&str> = names.iter().map(|l| l.name.as_str()).collect();
        let what = if r.must {
            "no node is in a domain of it, so the gang waits (Koordinator finds no candidate for it either)"
        } else {
            "PreferGather names no level anyway: the gang is gathered as tightly as the layers allow"
        };
        said.push(FieldError::new(
            format!("{path}.gatherStrategy[{i}].layer"),
            format!(
                "layer {:?} is not one of the cluster's ClusterNetworkTopology ({}): {what}",
                r.layer,
                list.join(", ")
            ),
        ));
    }
    // Rank, broadest first: the tree 0, the layers from 1 (an unknown one as the broadest).
    let rank = |l: &str| -> usize {
        if l == CLUSTER_LAYER { 0 } else { names.iter().position(|n| n.name == l).map_or(1, |i| i + 1) }
    };
    let narrowest = gather
        .rules
        .iter()
        .filter(|r| r.must)
        // Of equal rank, a layer the object has.
        .max_by_key(|r| (rank(&r.layer), known(&r.layer)))
        .map_or(CLUSTER_LAYER, |r| r.layer.as_str());
    let required = key_of(narrowest);
    let preferred = (narrowest != NODE_LAYER).then(|| key_of(NODE_LAYER));
    (Some(required), preferred, said)
}

pub(crate) fn claim(meta: &Meta<'_>, _pod: &Value) -> Result<Option<Claim>, FieldError> {
    Ok(meta.annotations.get(NAME).map(|name| Claim {
        dialect: Dialect::Koordinator,
        gang: GangKey::new(meta.namespace, name),
        subgroup: None,
        path: annotation_path(NAME),
    }))
}

/// Reads Koordinator's PodGroup: `minMember`, `scheduleTimeoutSeconds`, `minResources`, and the gang
/// annotations Koordinator reads on it (`mode`, `groups`, `total-number`).
pub fn read(obj: &Value) -> Result<Gang, Vec<FieldError>> {
    let meta = Meta::of(obj);
    let mut errors = Vec::new();
    let mut gang = super::coscheduling::read_as(obj, Dialect::Koordinator)?;
    let key = gang.key.clone();
    extras(&meta, &key, &mut gang, &mut errors);
    if errors.is_empty() { Ok(gang) } else { Err(errors) }
}

/// `total-number`, `mode`, `waiting-time` and `groups`, read onto `gang`.
fn extras(meta: &Meta<'_>, key: &GangKey, gang: &mut Gang, errors: &mut Vec<FieldError>) {
    let a = &meta.annotations;
    if let Some(v) = a.get(TOTAL_NUMBER) {
        match parse_count(&annotation_path(TOTAL_NUMBER), v) {
            Ok(n) => gang.total_member = Some(n),
            Err(e) => errors.push(e),
        }
    }
    match a.get(MODE) {
        None | Some("Strict") => {}
        Some("NonStrict") => gang.mode = GangMode::NonStrict,
        Some(other) => errors.push(FieldError::new(
            annotation_path(MODE),
            format!("Unsupported value: {other:?}: supported values: \"NonStrict\", \"Strict\""),
        )),
    }
    if let Some(v) = a.get(WAITING_TIME) {
        match parse_duration(v) {
            Ok(d) => gang.timeout = Some(d),
            Err(e) => errors.push(FieldError::new(annotation_path(WAITING_TIME), e)),
        }
    }
    // Empty: no spec, as Koordinator reads it. One it cannot decode it logs and schedules the gang
    // without: said when the cluster is assembled, never a reason to drop the gang.
    if let Some(v) = a.get(NETWORK_TOPOLOGY_SPEC).filter(|v| !v.is_empty()) {
        gang.network_gather = Some(Box::new(match gather_rules(v) {
            Ok(rules) => crate::read::model::NetworkGather { rules, unreadable: None },
            Err(e) => {
                crate::read::model::NetworkGather { rules: Vec::new(), unreadable: Some(e.to_string()) }
            }
        }));
    }
    if let Some(v) = a.get(GROUPS) {
        match serde_json::from_str::<Vec<String>>(v) {
            Ok(list) => {
                for (i, s) in list.iter().enumerate() {
                    match GangKey::parse(s, meta.namespace) {
                        Some(k) if &k != key => gang.gang_group.push(k),
                        Some(_) => {}
                        None => errors.push(FieldError::new(
                            format!("{}[{i}]", annotation_path(GROUPS)),
                            format!("{s:?} is not namespace/name"),
                        )),
                    }
                }
            }
            Err(e) => errors
                .push(FieldError::new(annotation_path(GROUPS), format!("not a JSON list of strings: {e}"))),
        }
    }
}

pub(crate) fn annotation_gang(meta: &Meta<'_>, claim: &Claim) -> Result<Gang, Vec<FieldError>> {
    let mut errors = Vec::new();
    let a = &meta.annotations;
    let min = match a.get(MIN_AVAILABLE) {
        Some(v) => parse_count(&annotation_path(MIN_AVAILABLE), v).map_err(|e| errors.push(e)).unwrap_or(0),
        None => {
            errors.push(FieldError::new(
                annotation_path(MIN_AVAILABLE),
                "required with gang.scheduling.koordinator.sh/name",
            ));
            0
        }
    };
    let mut gang =
        Gang::new(claim.gang.clone(), min, Source { dialect: Dialect::Koordinator, kind: "Pod".into() });
    gang.created = meta.created();
    extras(meta, &claim.gang, &mut gang, &mut errors);
    if errors.is_empty() { Ok(gang) } else { Err(errors) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::model::NetworkGather;
    use crate::read::model::volume::{NetworkLayer, NetworkLayers};

    fn layers() -> NetworkLayers {
        ["SpineLayer", "BlockLayer", "NodeTopologyLayer"]
            .into_iter()
            .map(|n| NetworkLayer { name: n.into(), label_keys: vec![n.to_lowercase()] })
            .collect::<Vec<_>>()
            .into()
    }

    fn gather(spec: &str) -> NetworkGather {
        NetworkGather { rules: gather_rules(spec).unwrap(), unreadable: None }
    }

    fn levels(spec: &str) -> (Option<String>, Option<String>) {
        let (r, p, said) = gather_levels(&gather(spec), &layers());
        assert!(said.is_empty(), "{said:?}");
        (r, p)
    }

    const TREE: &str = "koordinator.sh/network-layer-ClusterTopologyLayer";
    const SPINE: &str = "koordinator.sh/network-layer-SpineLayer";
    const BLOCK: &str = "koordinator.sh/network-layer-BlockLayer";
    const NODE: &str = "koordinator.sh/network-layer-NodeTopologyLayer";

    fn must(l: &str) -> String {
        format!(r#"{{"layer": "{l}", "strategy": "MustGather"}}"#)
    }

    fn prefer(l: &str) -> String {
        format!(r#"{{"layer": "{l}", "strategy": "PreferGather"}}"#)
    }

    fn spec(r: &[String]) -> String {
        format!(r#"{{"gatherStrategy": [{}]}}"#, r.join(", "))
    }

    #[test]
    fn the_narrowest_must_gather_layer_bounds_the_gang_and_it_gathers_as_tightly_as_it_can() {
        let some = |s: &str| Some(s.to_string());
        // Koordinator's documented PodGroup: prefer one block. Whatever layer a preference names,
        // the solver goes down to the deepest domain with room, a node included, within the tree.
        assert_eq!(levels(&spec(&[prefer("BlockLayer")])), (some(TREE), some(NODE)));
        assert_eq!(levels(&spec(&[prefer("SpineLayer")])), (some(TREE), some(NODE)));
        assert_eq!(levels(&spec(&[must("SpineLayer"), prefer("BlockLayer")])), (some(SPINE), some(NODE)));
        // Two MustGather layers, in either order: the narrower bounds it.
        for r in [[must("SpineLayer"), must("BlockLayer")], [must("BlockLayer"), must("SpineLayer")]] {
            assert_eq!(levels(&spec(&r)), (some(BLOCK), some(NODE)));
        }
        assert_eq!(levels(&spec(&[must("NodeTopologyLayer")])), (some(NODE), None));
        assert_eq!(levels(&spec(&[must("ClusterTopologyLayer")])), (some(TREE), some(NODE)));
        assert_eq!(levels(r#"{"gatherStrategy": []}"#), (some(TREE), some(NODE)));
    }

    #[test]
    fn layers_the_cluster_lacks_are_ranked_and_said_as_koordinator_ranks_them() {
        let some = |s: &str| Some(s.to_string());
        // An unknown PreferGather layer names nothing anyway: the MustGather stands, and it is said.
        let (r, p, said) =
            gather_levels(&gather(&spec(&[must("SpineLayer"), prefer("RackLayer")])), &layers());
        assert_eq!((r, p), (some(SPINE), some(NODE)));
        assert_eq!(
            said[0].path,
            "metadata.annotations[gang.scheduling.koordinator.sh/network-topology-spec].gatherStrategy[1].layer"
        );
        assert!(
            said[0].message.contains("\"RackLayer\" is not one of the cluster's ClusterNetworkTopology"),
            "{}",
            said[0]
        );
        // An unknown MustGather layer ranks as the broadest: a narrower known one bounds the gang.
        let (r, _, said) = gather_levels(&gather(&spec(&[must("RackLayer"), must("BlockLayer")])), &layers());
        assert_eq!((r.as_deref(), said.len()), (Some(BLOCK), 1));
        // Alone, it is the required level: no node is in it, and the gang waits, saying why.
        let (r, _, said) = gather_levels(&gather(&spec(&[must("RackLayer")])), &layers());
        assert_eq!(r.as_deref(), Some("koordinator.sh/network-layer-RackLayer"));
        assert!(said[0].message.contains("so the gang waits"), "{}", said[0]);
        // No ClusterNetworkTopology, or a spec that could not be read: no levels, said.
        let (r, p, said) = gather_levels(&gather(&spec(&[must("BlockLayer")])), &NetworkLayers::default());
        assert_eq!((r, p), (None, None));
        assert!(said[0].message.contains("no ClusterNetworkTopology named \"default\""), "{}", said[0]);
        let bad = NetworkGather { rules: vec![], unreadable: Some("x: not JSON".into()) };
        let (r, _, said) = gather_levels(&bad, &layers());
        assert_eq!(
            (r, said[0].message.starts_with("x: not JSON; the gang is placed without it")),
            (None, true)
        );
    }

    #[test]
    fn a_spec_is_decoded_as_go_decodes_it_and_a_malformed_one_named() {
        let path = "metadata.annotations[gang.scheduling.koordinator.sh/network-topology-spec]";
        // Keys without regard to case, `null` as absent.
        let r = gather_rules(r#"{"GatherStrategy": [{"Layer": "BlockLayer", "STRATEGY": "MustGather"}]}"#)
            .unwrap();
        assert_eq!((r[0].layer.as_str(), r[0].must), ("BlockLayer", true));
        assert!(gather_rules("null").unwrap().is_empty());
        assert!(gather_rules(r#"{"gatherStrategy": null}"#).unwrap().is_empty());
        let e = gather_rules(r#"{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "Gather"}]}"#)
            .unwrap_err();
        assert_eq!(e.path, format!("{path}.gatherStrategy[0].strategy"));
        assert!(e.message.starts_with("Unsupported value: \"Gather\""), "{e}");
        let e = gather_rules(r#"{"gatherStrategy": [{"strategy": "MustGather"}]}"#).unwrap_err();
        assert_eq!(e.path, format!("{path}.gatherStrategy[0].layer"));
        assert_eq!(gather_rules("[1]").unwrap_err().path, path);
        assert_eq!(gather_rules("{").unwrap_err().path, path);
        let many = format!(r#"{{"gatherStrategy": [{}]}}"#, vec![must("L"); 40].join(","));
        assert!(gather_rules(&many).unwrap_err().message.starts_with("Too many: 40"));
        // A PodGroup whose spec is malformed is still a gang (Koordinator logs the spec and goes on).
        let pg = serde_json::json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ml", "annotations": {NETWORK_TOPOLOGY_SPEC: "{"}}, "spec": {"minMember": 2}});
        let g = read(&pg).unwrap();
        assert!(g.network_gather.unwrap().unreadable.unwrap().contains("not a JSON object"));
        let empty = serde_json::json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ml", "annotations": {NETWORK_TOPOLOGY_SPEC: ""}}, "spec": {"minMember": 2}});
        assert!(read(&empty).unwrap().network_gather.is_none(), "empty: no spec");
        // What Koordinator ignores is said: unknown keys, podCountMultiple, a gang group, bad specs.
        let mut a = serde_json::Map::new();
        a.insert(NETWORK_TOPOLOGY_SPEC.into(), serde_json::json!(r#"{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather", "PodCountMultiple": 4, "weight": 1}], "topologyPolicy": "x"}"#));
        a.insert(GROUPS.into(), serde_json::json!(r#"["default/a", "default/b"]"#));
        let w = network_topology_warnings(Some(&a));
        assert_eq!(w.len(), 4, "{w:#?}");
        assert!(w.iter().any(|w| w.contains("podCountMultiple: not evaluated")));
        assert!(w.iter().any(|w| w.contains("\"weight\" is not Koordinator's")));
        assert!(w.iter().any(|w| w.contains("\"topologyPolicy\" is not Koordinator's")));
        assert!(w.iter().any(|w| w.contains("gathered on its own")));
        a.insert(NETWORK_TOPOLOGY_SPEC.into(), serde_json::json!("{"));
        assert!(network_topology_warnings(Some(&a))[0].contains("Koordinator ignores such a spec"));
        let policy = |k: &str, v: &str| network_topology_warnings(serde_json::json!({k: v}).as_object());
        assert!(policy(MATCH_POLICY, "once-satisfied").is_empty());
        assert!(policy(MATCH_POLICY_ALIAS, "waiting-and-running").is_empty());
        assert!(policy(MATCH_POLICY, "only-waiting")[0].contains("only-waiting is not evaluated"));
        assert!(policy(MATCH_POLICY_ALIAS, "sometimes")[0].contains("is not a Koordinator match policy"));
    }
}
