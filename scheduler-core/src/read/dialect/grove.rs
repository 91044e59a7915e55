//! NVIDIA Grove: `scheduler.grove.io/v1alpha1` `PodGang`, which Grove's operator writes for each
//! replica of a `PodCliqueSet` (and for each scaled replica of a scaling group beyond its
//! `minAvailable`), and the pod labels `grove.io/podgang` (the PodGang) and `grove.io/podclique`
//! (the PodClique, which is the name of its pod group in the PodGang).
//!
//! Read as Grove's own scheduler backends read it (its KAI backend maps a PodGang onto a KAI
//! PodGroup the same way): each of `spec.podgroups` is a leaf subgroup whose minimum is its
//! `minReplicas`; each of `spec.topologyConstraintGroupConfigs` (a scaling group's replicas in
//! the base PodGang) is an inner subgroup over the pod groups it lists, all of which it needs; pod
//! groups no config lists stay at the top level; the gang needs every top-level subgroup. A pack
//! constraint's `required` topology key is the gang's or the subgroup's topology key.
//!
//! A pack constraint's `preferred` key is the preferred level (its domains tried first; best
//! effort, in Grove's own words). `priorityClassName` (Grove writes the PodCliqueSet's class on
//! the PodGang, not on its pods; its KAI backend gives the PodGroup it makes that class) is the
//! gang's class ([`Gang::priority_class_name`]), resolved when the cluster is assembled. Not
//! evaluated, and said where it is written ([`warnings`]): `reuseReservationRef` (a suggestion
//! by Grove's definition). `podReferences` counts
//! the members Grove expects ([`Gang::total_member`]); membership itself is the pods' label.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use super::{Claim, Meta, check_dns_label, label_path, typed};
use crate::read::error::FieldError;
use crate::read::model::{Dialect, Gang, GangKey, Source, SubGroup};

/// The API group of `PodGang`.
pub const GROUP: &str = "scheduler.grove.io";
/// The kind.
pub const KIND: &str = "PodGang";
/// Pod label naming the PodGang.
pub const LABEL: &str = "grove.io/podgang";
/// Pod label naming the PodClique: the pod group (leaf subgroup) the pod is in.
pub const SUBGROUP_LABEL: &str = "grove.io/podclique";

/// Pod groups and group configs one PodGang may hold: the subgroup bound every gang keeps
/// ([`crate::read::tree::MAX_SUBGROUPS`]).
const MAX_GROUPS: usize = crate::read::tree::MAX_SUBGROUPS;

#[derive(Deserialize)]
struct PodGang {
    spec: Spec,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    // Grove's field is all lowercase.
    #[serde(rename = "podgroups")]
    pod_groups: Vec<PodGroup>,
    topology_constraint: Option<Topology>,
    #[serde(default)]
    topology_constraint_group_configs: Vec<GroupConfig>,
    priority_class_name: Option<String>,
    reuse_reservation_ref: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodGroup {
    name: String,
    // Counted, not kept: a PodGang may list thousands (the API server's 3 MiB).
    pod_references: Vec<IgnoredAny>,
    min_replicas: i32,
    topology_constraint: Option<Topology>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupConfig {
    name: String,
    pod_group_names: Vec<String>,
    topology_constraint: Option<Topology>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Topology {
    pack_constraint: Option<Pack>,
}

#[derive(Deserialize)]
struct Pack {
    required: Option<String>,
    preferred: Option<String>,
}

impl Topology {
    fn required(&self) -> Option<String> {
        self.pack_constraint.as_ref()?.required.clone()
    }

    fn preferred(&self) -> Option<String> {
        self.pack_constraint.as_ref()?.preferred.clone()
    }
}

pub(crate) fn claim(meta: &Meta<'_>, _pod: &Value) -> Result<Option<Claim>, FieldError> {
    Ok(meta.labels.get(LABEL).map(|name| Claim {
        dialect: Dialect::Grove,
        gang: GangKey::new(meta.namespace, name),
        subgroup: meta.labels.get(SUBGROUP_LABEL).map(str::to_string),
        path: label_path(LABEL),
    }))
}

/// Reads a PodGang. Every error names its field as Grove's CRD names it (`spec.podgroups[1].minReplicas`).
pub fn read(obj: &Value) -> Result<Gang, Vec<FieldError>> {
    let meta = Meta::of(obj);
    let pg: PodGang = typed(obj)?;
    let spec = pg.spec;
    let mut errors = Vec::new();
    let mut gang = Gang::new(meta.key(), 0, Source { dialect: Dialect::Grove, kind: KIND.into() });
    gang.created = meta.created();
    gang.uid = meta.uid();
    gang.priority_class_name = spec.priority_class_name.clone().filter(|c| !c.is_empty());
    if meta.name.is_empty() {
        errors.push(FieldError::new("metadata.name", "required"));
    }
    if spec.pod_groups.is_empty() {
        errors.push(FieldError::new("spec.podgroups", "must name at least one pod group"));
    }
    if spec.pod_groups.len() + spec.topology_constraint_group_configs.len() > MAX_GROUPS {
        errors.push(FieldError::new(
            "spec.podgroups",
            format!(
                "{} pod groups and {} group configs: at most {MAX_GROUPS} in all",
                spec.pod_groups.len(),
                spec.topology_constraint_group_configs.len()
            ),
        ));
        return Err(errors);
    }
    let key_error = |path: String, key: &Option<String>, errors: &mut Vec<FieldError>| {
        if let Some(k) = key
            && let Err(e) = crate::read::labels::check_label_key(k)
        {
            errors.push(FieldError::new(path, e));
        }
    };
    gang.topology_key = spec.topology_constraint.as_ref().and_then(Topology::required);
    gang.topology_preferred = spec.topology_constraint.as_ref().and_then(Topology::preferred);
    key_error("spec.topologyConstraint.packConstraint.required".into(), &gang.topology_key, &mut errors);
    key_error(
        "spec.topologyConstraint.packConstraint.preferred".into(),
        &gang.topology_preferred,
        &mut errors,
    );

    // Pod group name → its index, and the group config that lists it.
    let mut groups: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, g) in spec.pod_groups.iter().enumerate() {
        let path = format!("spec.podgroups[{i}]");
        if let Err(e) = check_dns_label(&g.name) {
            errors.push(FieldError::new(format!("{path}.name"), e));
        }
        if let Some(first) = groups.insert(&g.name, i) {
            errors.push(FieldError::new(
                format!("{path}.name"),
                format!("duplicate pod group {:?} (also spec.podgroups[{first}])", g.name),
            ));
        }
        if g.min_replicas < 1 {
            errors.push(FieldError::new(
                format!("{path}.minReplicas"),
                format!("must be at least 1, got {}", g.min_replicas),
            ));
        }
    }
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut configs: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, c) in spec.topology_constraint_group_configs.iter().enumerate() {
        let path = format!("spec.topologyConstraintGroupConfigs[{i}]");
        if let Err(e) = check_dns_label(&c.name) {
            errors.push(FieldError::new(format!("{path}.name"), e));
        }
        if groups.contains_key(c.name.as_str()) || configs.insert(&c.name, i).is_some() {
            errors.push(FieldError::new(
                format!("{path}.name"),
                format!("{:?} is already the name of a pod group or another group config", c.name),
            ));
        }
        // Grove's KAI backend skips a config that lists no pod group; so does this reading.
        for (j, name) in c.pod_group_names.iter().enumerate() {
            let at = format!("{path}.podGroupNames[{j}]");
            if !groups.contains_key(name.as_str()) {
                errors.push(FieldError::new(at, format!("{name:?} is not one of spec.podgroups")));
            } else if let Some(other) = parent.insert(name, &c.name) {
                errors.push(FieldError::new(
                    at,
                    format!("pod group {name:?} is already in group config {other:?}: a pod group is in one at most"),
                ));
            }
        }
        let preferred = c.topology_constraint.as_ref().and_then(Topology::preferred);
        key_error(format!("{path}.topologyConstraint.packConstraint.preferred"), &preferred, &mut errors);
        let required = c.topology_constraint.as_ref().and_then(Topology::required);
        key_error(format!("{path}.topologyConstraint.packConstraint.required"), &required, &mut errors);
        if !c.pod_group_names.is_empty() {
            gang.subgroups.push(SubGroup {
                name: c.name.clone(),
                parent: None,
                min_member: u32::try_from(c.pod_group_names.len()).unwrap_or(u32::MAX),
                pod_floor: 0,
                topology_preferred: preferred,
                topology_key: required,
            });
        }
    }
    let mut expected = 0u32;
    for (i, g) in spec.pod_groups.iter().enumerate() {
        let preferred = g.topology_constraint.as_ref().and_then(Topology::preferred);
        key_error(
            format!("spec.podgroups[{i}].topologyConstraint.packConstraint.preferred"),
            &preferred,
            &mut errors,
        );
        let required = g.topology_constraint.as_ref().and_then(Topology::required);
        key_error(
            format!("spec.podgroups[{i}].topologyConstraint.packConstraint.required"),
            &required,
            &mut errors,
        );
        expected = expected.saturating_add(u32::try_from(g.pod_references.len()).unwrap_or(u32::MAX));
        gang.subgroups.push(SubGroup {
            name: g.name.clone(),
            parent: parent.get(g.name.as_str()).map(|p| p.to_string()),
            min_member: u32::try_from(g.min_replicas).unwrap_or(0),
            pod_floor: 0,
            topology_preferred: preferred,
            topology_key: required,
        });
    }
    // The root needs every top-level subgroup: each pod group no config lists, and each config.
    gang.min_member =
        u32::try_from(gang.subgroups.iter().filter(|s| s.parent.is_none()).count()).unwrap_or(0);
    if expected > 0 {
        gang.total_member = Some(expected);
    }
    let _ = &spec.reuse_reservation_ref;
    if errors.is_empty() { Ok(gang) } else { Err(errors) }
}

/// What a PodGang asks for that the cycle does not evaluate, naming its field:
/// `reuseReservationRef`. For `validate` and `simulate`.
pub fn warnings(obj: &Value) -> Vec<String> {
    let Ok(pg) = typed::<PodGang>(obj) else { return Vec::new() };
    let mut out = Vec::new();
    if pg.spec.reuse_reservation_ref.is_some() {
        out.push(
            "spec.reuseReservationRef: not evaluated (a suggestion in Grove's terms): the gang is placed afresh".into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The base PodGang Grove writes for replica 0 of a disaggregated-serving PodCliqueSet: a
    /// frontend clique, and a scaling group (prefill leader + workers) whose first replica is in
    /// the base PodGang, packed in one rack.
    fn base() -> Value {
        json!({"apiVersion": "scheduler.grove.io/v1alpha1", "kind": "PodGang",
        "metadata": {"name": "serve-0", "namespace": "llm", "uid": "u1"},
        "spec": {
            "podgroups": [
                {"name": "serve-0-frontend", "minReplicas": 1,
                 "podReferences": [{"namespace": "llm", "name": "serve-0-frontend-abcde"}]},
                {"name": "serve-0-prefill-0-leader", "minReplicas": 1,
                 "podReferences": [{"namespace": "llm", "name": "serve-0-prefill-0-leader-a1b2c"}]},
                {"name": "serve-0-prefill-0-worker", "minReplicas": 3,
                 "podReferences": [{"namespace": "llm", "name": "w1"}, {"namespace": "llm", "name": "w2"},
                                   {"namespace": "llm", "name": "w3"}, {"namespace": "llm", "name": "w4"}],
                 "topologyConstraint": {"packConstraint": {"required": "kubernetes.io/hostname"}}}
            ],
            "topologyConstraint": {"packConstraint": {"required": "topology.kubernetes.io/zone",
                                                      "preferred": "topology.kubernetes.io/rack"}},
            "topologyConstraintGroupConfigs": [
                {"name": "serve-0-prefill-0", "podGroupNames": ["serve-0-prefill-0-leader", "serve-0-prefill-0-worker"],
                 "topologyConstraint": {"packConstraint": {"required": "topology.kubernetes.io/rack"}}}
            ]
        }})
    }

    #[test]
    fn a_podgang_is_a_tree_of_its_pod_groups_under_its_group_configs() {
        let g = read(&base()).unwrap();
        assert_eq!(g.key, GangKey::new("llm", "serve-0"));
        assert_eq!(g.topology_key.as_deref(), Some("topology.kubernetes.io/zone"));
        let names: Vec<(&str, Option<&str>, u32)> =
            g.subgroups.iter().map(|s| (s.name.as_str(), s.parent.as_deref(), s.min_member)).collect();
        assert_eq!(
            names,
            [
                ("serve-0-prefill-0", None, 2),
                ("serve-0-frontend", None, 1),
                ("serve-0-prefill-0-leader", Some("serve-0-prefill-0"), 1),
                ("serve-0-prefill-0-worker", Some("serve-0-prefill-0"), 3),
            ]
        );
        assert_eq!(g.min_member, 2, "the frontend and the scaling group's replica");
        assert_eq!(g.min_pods(), Some(5));
        assert_eq!(g.total_member, Some(6));
        assert_eq!(g.subgroups[0].topology_key.as_deref(), Some("topology.kubernetes.io/rack"));
        assert_eq!(g.subgroups[3].topology_key.as_deref(), Some("kubernetes.io/hostname"));
        assert_eq!(g.topology_preferred.as_deref(), Some("topology.kubernetes.io/rack"));
        assert!(warnings(&base()).is_empty());
        assert_eq!(g.priority_class_name, None);
        let mut classed = base();
        classed["spec"]["priorityClassName"] = json!("inference-high");
        assert!(warnings(&classed).is_empty(), "the class is read, not warned about");
        assert_eq!(read(&classed).unwrap().priority_class_name.as_deref(), Some("inference-high"));
    }

    #[test]
    fn a_pod_names_its_podgang_and_its_clique() {
        let pod = json!({"metadata": {"name": "p", "namespace": "llm",
            "labels": {LABEL: "serve-0", SUBGROUP_LABEL: "serve-0-frontend"}}});
        let c = claim(&Meta::of(&pod), &pod).unwrap().unwrap();
        assert_eq!(
            (c.gang, c.subgroup.as_deref()),
            (GangKey::new("llm", "serve-0"), Some("serve-0-frontend"))
        );
        assert_eq!(c.path, "metadata.labels[grove.io/podgang]");
    }

    #[test]
    fn bad_podgangs_name_groves_fields() {
        let mut bad = base();
        bad["spec"]["podgroups"][1]["minReplicas"] = json!(0);
        bad["spec"]["podgroups"][2]["name"] = json!("serve-0-frontend");
        bad["spec"]["topologyConstraintGroupConfigs"][0]["podGroupNames"][1] = json!("nope");
        bad["spec"]["topologyConstraint"]["packConstraint"]["required"] = json!("bad key!");
        let e = read(&bad).unwrap_err();
        let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.topologyConstraint.packConstraint.required",
                "spec.podgroups[1].minReplicas",
                "spec.podgroups[2].name",
                "spec.topologyConstraintGroupConfigs[0].podGroupNames[1]",
            ],
            "{e:?}"
        );
        let e = read(&json!({"apiVersion": "scheduler.grove.io/v1alpha1", "kind": "PodGang",
            "metadata": {"name": "x"}, "spec": {"podgroups": [{"name": "a", "minReplicas": "2", "podReferences": []}]}}))
        .unwrap_err();
        assert_eq!(e[0].path, "spec.podgroups[0].minReplicas", "{e:?}");
        let e = read(&json!({"apiVersion": "scheduler.grove.io/v1alpha1", "kind": "PodGang",
            "metadata": {"name": "x"}, "spec": {}}))
        .unwrap_err();
        assert!(e[0].to_string().contains("podgroups"), "{e:?}");
    }
}
