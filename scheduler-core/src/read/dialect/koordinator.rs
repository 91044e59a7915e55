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
    let spec_path = annotation_path(NETWORK_TOPOLOGY_SPEC);
    if let Some(spec) = a.get(NETWORK_TOPOLOGY_SPEC).and_then(Value::as_str)
        && let Ok(Value::Object(spec)) = serde_json::from_str::<Value>(spec)
    {
        for k in spec.keys().filter(|k| *k != "gatherStrategy") {
            out.push(format!("{spec_path}: key {k:?} is not Koordinator's (only gatherStrategy): ignored"));
        }
        let rules = spec.get("gatherStrategy").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        for (i, rule) in rules.iter().enumerate() {
            let Some(rule) = rule.as_object() else { continue };
            if rule.get("podCountMultiple").and_then(Value::as_i64).is_some_and(|n| n > 1) {
                out.push(format!(
                    "{spec_path}: gatherStrategy[{i}].podCountMultiple: not evaluated: pods are not \
                     placed in multiples per domain"
                ));
            }
            for k in rule.keys().filter(|k| !["layer", "strategy", "podCountMultiple"].contains(&k.as_str()))
            {
                out.push(format!(
                    "{spec_path}: gatherStrategy[{i}]: key {k:?} is not Koordinator's: ignored"
                ));
            }
        }
        if !rules.is_empty() && a.contains_key(GROUPS) {
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

/// Reads a `network-topology-spec` annotation: its `gatherStrategy` rules, each a layer and
/// `MustGather` or `PreferGather`, as Koordinator's scheduler decodes it.
fn gather_rules(v: &str) -> Result<Vec<crate::read::model::GatherRule>, FieldError> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        #[serde(default)]
        gather_strategy: Vec<Rule>,
    }
    #[derive(serde::Deserialize)]
    struct Rule {
        #[serde(default)]
        layer: String,
        #[serde(default)]
        strategy: String,
    }
    let path = annotation_path(NETWORK_TOPOLOGY_SPEC);
    let spec: Spec = serde_json::from_str(v)
        .map_err(|e| FieldError::new(&path, format!("not a JSON object of gatherStrategy rules: {e}")))?;
    if spec.gather_strategy.len() > MAX_GATHER_RULES {
        return Err(FieldError::new(
            format!("{path}.gatherStrategy"),
            format!("Too many: {}: must have at most {MAX_GATHER_RULES} items", spec.gather_strategy.len()),
        ));
    }
    let mut rules = Vec::with_capacity(spec.gather_strategy.len());
    for (i, r) in spec.gather_strategy.into_iter().enumerate() {
        let at = format!("{path}.gatherStrategy[{i}]");
        if r.layer.is_empty() {
            return Err(FieldError::new(format!("{at}.layer"), "Required value"));
        }
        let must = match r.strategy.as_str() {
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
        rules.push(crate::read::model::GatherRule { layer: r.layer, must });
    }
    Ok(rules)
}

/// A gang's required and preferred levels from its gather rules, through the cluster's network
/// `layers` (broadest first), as Koordinator's solver places it: within one domain of the
/// narrowest `MustGather` layer (`ClusterTopologyLayer`: anywhere), and — whatever layers the
/// `PreferGather` rules name — in the tightest domain that holds the whole gang, tried from the
/// narrowest layer up (its solver descends to the deepest domain with room for every pod). `Err`:
/// why the rules cannot be evaluated (no `ClusterNetworkTopology` named `default`, a layer it does
/// not have), the gang placed without them.
pub fn gather_levels(
    rules: &[crate::read::model::GatherRule],
    layers: &crate::read::model::volume::NetworkLayers,
) -> Result<(Option<String>, Option<String>), FieldError> {
    use crate::read::network_layer::{CLUSTER_LAYER, NODE_LAYER, key_of};
    let path = annotation_path(NETWORK_TOPOLOGY_SPEC);
    if rules.is_empty() {
        return Ok((None, None));
    }
    if layers.is_empty() {
        return Err(FieldError::new(
            path,
            format!(
                "not evaluated: the cluster has no ClusterNetworkTopology named {:?} \
                 (scheduling.koordinator.sh/v1alpha1) to read its layers from; the gang is placed without them",
                crate::read::model::volume::NETWORK_TOPOLOGY_NAME
            ),
        ));
    }
    let names = layers.layers();
    // Rank: the cluster -1, the layers broadest first, the nodes last.
    let rank = |layer: &str| -> Option<isize> {
        match layer {
            CLUSTER_LAYER => Some(-1),
            NODE_LAYER => isize::try_from(names.len()).ok(),
            _ => names.iter().position(|l| l.name == layer).and_then(|i| isize::try_from(i).ok()),
        }
    };
    for (i, r) in rules.iter().enumerate() {
        if rank(&r.layer).is_none() {
            let known: Vec<&str> = names.iter().map(|l| l.name.as_str()).collect();
            return Err(FieldError::new(
                format!("{path}.gatherStrategy[{i}].layer"),
                format!(
                    "not evaluated: layer {:?} is not one of the cluster's ClusterNetworkTopology ({}, {NODE_LAYER}); the gang is placed without its rules",
                    r.layer,
                    known.join(", ")
                ),
            ));
        }
    }
    let must = rules.iter().filter(|r| r.must).filter_map(|r| rank(&r.layer)).max().unwrap_or(-1);
    let key_at = |at: isize| -> Option<String> {
        match usize::try_from(at) {
            Ok(i) if i < names.len() => Some(key_of(&names[i].name)),
            Ok(_) => Some(key_of(NODE_LAYER)),
            Err(_) => None,
        }
    };
    let required = key_at(must);
    let narrowest = isize::try_from(names.len()).unwrap_or(isize::MAX) - 1;
    let preferred = (narrowest > must).then(|| key_at(narrowest)).flatten();
    Ok((required, preferred))
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
    if let Some(v) = a.get(NETWORK_TOPOLOGY_SPEC) {
        match gather_rules(v) {
            Ok(rules) => gang.network_gather = rules,
            Err(e) => errors.push(e),
        }
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
    use crate::read::model::GatherRule;
    use crate::read::model::volume::{NetworkLayer, NetworkLayers};

    fn layers() -> NetworkLayers {
        ["SpineLayer", "BlockLayer"]
            .into_iter()
            .map(|n| NetworkLayer { name: n.into(), label_keys: vec![n.to_lowercase()] })
            .collect::<Vec<_>>()
            .into()
    }

    fn rules(spec: &str) -> Vec<GatherRule> {
        gather_rules(spec).unwrap()
    }

    fn levels(spec: &str) -> (Option<String>, Option<String>) {
        gather_levels(&rules(spec), &layers()).unwrap()
    }

    const SPINE: &str = "koordinator.sh/network-layer-SpineLayer";
    const BLOCK: &str = "koordinator.sh/network-layer-BlockLayer";

    #[test]
    fn the_narrowest_must_gather_layer_bounds_the_gang_and_it_gathers_as_tightly_as_it_can() {
        let must = |l: &str| format!(r#"{{"layer": "{l}", "strategy": "MustGather"}}"#);
        let prefer = |l: &str| format!(r#"{{"layer": "{l}", "strategy": "PreferGather"}}"#);
        let spec = |r: &[String]| format!(r#"{{"gatherStrategy": [{}]}}"#, r.join(", "));
        // Koordinator's documented PodGroup: prefer one block.
        assert_eq!(levels(&spec(&[prefer("BlockLayer")])), (None, Some(BLOCK.into())));
        // Whatever layer a preference names, the solver gathers as tightly as the layers allow.
        assert_eq!(levels(&spec(&[prefer("SpineLayer")])), (None, Some(BLOCK.into())));
        assert_eq!(
            levels(&spec(&[must("SpineLayer"), prefer("BlockLayer")])),
            (Some(SPINE.into()), Some(BLOCK.into()))
        );
        // Two MustGather layers, in either order: the narrower bounds it.
        for r in [[must("SpineLayer"), must("BlockLayer")], [must("BlockLayer"), must("SpineLayer")]] {
            assert_eq!(levels(&spec(&r)), (Some(BLOCK.into()), None));
        }
        assert_eq!(
            levels(&spec(&[must("NodeTopologyLayer")])).0.as_deref(),
            Some("koordinator.sh/network-layer-NodeTopologyLayer")
        );
        assert_eq!(levels(&spec(&[must("ClusterTopologyLayer")])), (None, Some(BLOCK.into())));
        assert_eq!(levels(r#"{"gatherStrategy": []}"#), (None, None));
        // A layer the cluster does not have, or no ClusterNetworkTopology: not evaluated, said.
        let e = gather_levels(&rules(&spec(&[must("RackLayer")])), &layers()).unwrap_err();
        assert_eq!(
            e.path,
            "metadata.annotations[gang.scheduling.koordinator.sh/network-topology-spec].gatherStrategy[0].layer"
        );
        assert!(
            e.message.contains(
                "\"RackLayer\" is not one of the cluster's ClusterNetworkTopology (SpineLayer, BlockLayer"
            ),
            "{e}"
        );
        let e = gather_levels(&rules(&spec(&[must("BlockLayer")])), &NetworkLayers::default()).unwrap_err();
        assert!(e.message.contains("no ClusterNetworkTopology named \"default\""), "{e}");
    }

    #[test]
    fn a_malformed_spec_is_refused_naming_the_rule() {
        let path = "metadata.annotations[gang.scheduling.koordinator.sh/network-topology-spec]";
        let e = gather_rules(r#"{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "Gather"}]}"#)
            .unwrap_err();
        assert_eq!(e.path, format!("{path}.gatherStrategy[0].strategy"));
        assert!(e.message.starts_with("Unsupported value: \"Gather\""), "{e}");
        let e = gather_rules(r#"{"gatherStrategy": [{"strategy": "MustGather"}]}"#).unwrap_err();
        assert_eq!(e.path, format!("{path}.gatherStrategy[0].layer"));
        assert_eq!(gather_rules("[1]").unwrap_err().path, path);
        let many = format!(
            r#"{{"gatherStrategy": [{}]}}"#,
            vec![r#"{"layer": "L", "strategy": "MustGather"}"#; 40].join(",")
        );
        assert!(gather_rules(&many).unwrap_err().message.starts_with("Too many: 40"));
        // What Koordinator ignores is said: unknown keys, podCountMultiple, a gang group.
        let mut a = serde_json::Map::new();
        a.insert(NETWORK_TOPOLOGY_SPEC.into(), serde_json::json!(r#"{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather", "podCountMultiple": 4, "weight": 1}], "topologyPolicy": "x"}"#));
        a.insert(GROUPS.into(), serde_json::json!(r#"["default/a", "default/b"]"#));
        let w = network_topology_warnings(Some(&a));
        assert_eq!(w.len(), 4, "{w:#?}");
        assert!(w.iter().any(|w| w.contains("podCountMultiple: not evaluated")));
        assert!(w.iter().any(|w| w.contains("\"weight\" is not Koordinator's")));
        assert!(w.iter().any(|w| w.contains("\"topologyPolicy\" is not Koordinator's")));
        assert!(w.iter().any(|w| w.contains("gathered on its own")));
    }
}
