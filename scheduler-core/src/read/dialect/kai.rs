//! KAI-Scheduler: `scheduling.run.ai/v2alpha2` `PodGroup` with hierarchical `subGroups`, the pod
//! annotation `pod-group-name` and the leaf label `kai.scheduler/subgroup-name`.
//!
//! KAI's leaf `minMember` counts pods, as ours does. A mid-level subgroup's `minSubGroup` counts
//! children (all children when omitted); the root's `minSubGroup` likewise. KAI's
//! `topologyConstraint.requiredTopologyLevel` is a node label key and becomes the topology key.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::{Claim, Meta, annotation_path, count_field, label_path, typed};
use crate::error::FieldError;
use crate::model::{Dialect, Gang, GangKey, Source, SubGroup};

/// The API group.
pub const GROUP: &str = "scheduling.run.ai";
/// Pod annotation naming the PodGroup.
pub const ANNOTATION: &str = "pod-group-name";
/// Pod label naming the leaf subgroup.
pub const SUBGROUP_LABEL: &str = "kai.scheduler/subgroup-name";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodGroup {
    #[serde(default)]
    spec: Spec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    min_member: i32,
    min_sub_group: Option<i32>,
    #[serde(default)]
    sub_groups: Vec<KaiSubGroup>,
    topology_constraint: Option<Topology>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KaiSubGroup {
    name: String,
    parent: Option<String>,
    #[serde(default)]
    min_member: i32,
    min_sub_group: Option<i32>,
    topology_constraint: Option<Topology>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Topology {
    required_topology_level: Option<String>,
}

pub(crate) fn claim(meta: &Meta<'_>, _pod: &Value) -> Result<Option<Claim>, FieldError> {
    let name = meta.annotations.get(ANNOTATION).or_else(|| meta.labels.get(ANNOTATION));
    Ok(name.map(|name| Claim {
        dialect: Dialect::Kai,
        gang: GangKey::new(meta.namespace, *name),
        subgroup: meta.labels.get(SUBGROUP_LABEL).map(|s| s.to_string()),
        path: if meta.annotations.contains_key(ANNOTATION) {
            annotation_path(ANNOTATION)
        } else {
            label_path(ANNOTATION)
        },
    }))
}

/// Reads a KAI PodGroup.
pub fn read(obj: &Value) -> Result<Gang, Vec<FieldError>> {
    let meta = Meta::of(obj);
    let pg: PodGroup = typed(obj)?;
    let mut errors = Vec::new();
    let min = count_field("spec.minMember", pg.spec.min_member).map_err(|e| errors.push(e)).unwrap_or(0);
    let mut gang = Gang::new(meta.key(), min, Source { dialect: Dialect::Kai, kind: "PodGroup".into() });
    gang.created = meta.created;
    gang.topology_key = pg.spec.topology_constraint.and_then(|t| t.required_topology_level);
    let mut children: BTreeMap<Option<&str>, u32> = BTreeMap::new();
    for s in &pg.spec.sub_groups {
        *children.entry(s.parent.as_deref()).or_default() += 1;
    }
    for (i, s) in pg.spec.sub_groups.iter().enumerate() {
        let is_leaf = !children.contains_key(&Some(s.name.as_str()));
        let min = if is_leaf {
            count_field(&format!("spec.subGroups[{i}].minMember"), s.min_member)
        } else {
            let all = children.get(&Some(s.name.as_str())).copied().unwrap_or(0);
            s.min_sub_group.map_or(Ok(all), |m| count_field(&format!("spec.subGroups[{i}].minSubGroup"), m))
        };
        gang.subgroups.push(SubGroup {
            name: s.name.clone(),
            parent: s.parent.clone(),
            min_member: min.map_err(|e| errors.push(e)).unwrap_or(0),
            topology_key: s.topology_constraint.as_ref().and_then(|t| t.required_topology_level.clone()),
        });
    }
    if !gang.subgroups.is_empty() {
        // The root counts satisfied top-level subgroups: all of them unless minSubGroup says fewer.
        let top = children.get(&None).copied().unwrap_or(0);
        gang.min_member = pg
            .spec
            .min_sub_group
            .map_or(Ok(top), |m| count_field("spec.minSubGroup", m))
            .map_err(|e| errors.push(e))
            .unwrap_or(0);
    }
    if errors.is_empty() { Ok(gang) } else { Err(errors) }
}
