//! KAI-Scheduler: `scheduling.run.ai/v2alpha2` `PodGroup` with hierarchical `subGroups`, the pod
//! annotation `pod-group-name` and the leaf label `kai.scheduler/subgroup-name`.
//!
//! KAI's leaf `minMember` counts pods, as ours does. A mid-level subgroup's `minSubGroup` counts
//! children (all children when omitted); the root's `minSubGroup` likewise. KAI's
//! `topologyConstraint.requiredTopologyLevel` is a node label key and becomes the topology key.
//! `minMember` is optional in KAI's CRD (`omitempty`; the scheduler treats a missing one as 1).
//!
//! KAI's root and mid-level `minMember` count *pods* of the subtree ("minimal number of descendant
//! pods", KAI's `min-subgroups` design), while the canonical tree counts satisfied children above
//! the leaves. So the root's pod count becomes the gang's pod floor ([`Gang::pod_floor`]) and a
//! mid-level subgroup's becomes that subgroup's ([`SubGroup::pod_floor`]); its `min_member` counts
//! children as `minSubGroup` says (all of them when omitted). Each floor holds on top of the
//! minimums below it, and the cycle places pods beyond the leaves' minimums to reach it.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::{Claim, Meta, annotation_path, count_field, label_path, typed};
use crate::read::error::FieldError;
use crate::read::model::{Dialect, Disruption, Gang, GangKey, Source, SubGroup};

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
    #[serde(default = "one")]
    min_member: i32,
    min_sub_group: Option<i32>,
    #[serde(default)]
    sub_groups: Vec<KaiSubGroup>,
    topology_constraint: Option<Topology>,
    priority_class_name: Option<String>,
    preemptibility: Option<String>,
    staleness_grace_period: Option<String>,
}

/// The priority from which KAI calls a PodGroup that states no `preemptibility` non-preemptible
/// (its `build` class; `train` is 50, `inference` 125).
pub const NON_PREEMPTIBLE_FROM: i32 = 100;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KaiSubGroup {
    name: String,
    parent: Option<String>,
    min_member: Option<i32>,
    min_sub_group: Option<i32>,
    topology_constraint: Option<Topology>,
}

fn one() -> i32 {
    1
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Topology {
    #[serde(default)]
    topology: String,
    required_topology_level: Option<String>,
    preferred_topology_level: Option<String>,
}

impl Topology {
    /// The (required, preferred) levels, as KAI applies them: only within a named `Topology`
    /// (its topology plugin places a PodGroup whose constraint names none as if it had none).
    fn levels(&self) -> (Option<String>, Option<String>) {
        if self.topology.is_empty() {
            return (None, None);
        }
        let some = |l: &Option<String>| l.clone().filter(|l| !l.is_empty());
        (some(&self.required_topology_level), some(&self.preferred_topology_level))
    }
}

pub(crate) fn claim(meta: &Meta<'_>, _pod: &Value) -> Result<Option<Claim>, FieldError> {
    let name = meta.annotations.get(ANNOTATION).or_else(|| meta.labels.get(ANNOTATION));
    Ok(name.map(|name| Claim {
        dialect: Dialect::Kai,
        gang: GangKey::new(meta.namespace, name),
        subgroup: meta.labels.get(SUBGROUP_LABEL).map(|s| s.to_string()),
        path: if meta.annotations.contains_key(ANNOTATION) {
            annotation_path(ANNOTATION)
        } else {
            label_path(ANNOTATION)
        },
    }))
}

/// A KAI `preemptibility` (the PodGroup field, or the `kai.scheduler/preemptibility` label) at
/// `path`: `preemptible`, `non-preemptible`, or KAI 0.18's `semi-preemptible` (the minimum, each
/// leaf's `minMember`, is the core and never taken; members beyond it may be).
pub fn preemptibility(path: &str, value: &str) -> Result<Disruption, FieldError> {
    match value {
        "preemptible" => Ok(Disruption::Members),
        "non-preemptible" => Ok(Disruption::Never),
        "semi-preemptible" => Ok(Disruption::Surplus),
        other => Err(FieldError::new(
            path,
            format!(
                "Unsupported value: {other:?}: supported values: \"preemptible\", \"non-preemptible\", \"semi-preemptible\""
            ),
        )),
    }
}

/// Reads a KAI PodGroup.
pub fn read(obj: &Value) -> Result<Gang, Vec<FieldError>> {
    let meta = Meta::of(obj);
    let pg: PodGroup = typed(obj)?;
    let mut errors = Vec::new();
    let min = count_field("spec.minMember", pg.spec.min_member).map_err(|e| errors.push(e)).unwrap_or(0);
    let mut gang = Gang::new(meta.key(), min, Source { dialect: Dialect::Kai, kind: "PodGroup".into() });
    gang.created = meta.created();
    gang.uid = meta.uid();
    gang.priority_class_name = pg.spec.priority_class_name.clone().filter(|c| !c.is_empty());
    gang.disruption = match pg.spec.preemptibility.as_deref().unwrap_or("") {
        // KAI's PodGroup priority without a class is its default, 50 (a cluster-wide default
        // class is not consulted here): preemptible.
        "" if gang.priority_class_name.is_none() => Disruption::Members,
        "" => Disruption::Below(NON_PREEMPTIBLE_FROM),
        other => preemptibility("spec.preemptibility", other).unwrap_or_else(|e| {
            errors.push(e);
            Disruption::Never
        }),
    };
    // How long it may stay short of its minimum before what it holds is released; a negative one
    // (KAI: never released) cannot hold here (a gang is never left half-bound): warned about.
    if let Some(g) = pg.spec.staleness_grace_period.as_deref().filter(|g| !g.starts_with('-')) {
        // A Go duration: a bare number other than 0 has no unit, which Go refuses.
        let bare = g.trim() != "0" && g.trim().parse::<u64>().is_ok();
        match crate::read::duration::parse(g) {
            Ok(_) if bare => errors.push(FieldError::new(
                "spec.stalenessGracePeriod",
                format!("{g:?}: missing unit in duration (e.g. 90s, 5m)"),
            )),
            // Kept in whole seconds: a fraction rounds up, never shorter than asked.
            Ok(d) => {
                gang.stale_grace =
                    Some(std::time::Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0)))
            }
            Err(e) => errors.push(FieldError::new("spec.stalenessGracePeriod", e)),
        }
    }
    if let Some(t) = &pg.spec.topology_constraint {
        (gang.topology_key, gang.topology_preferred) = t.levels();
    }
    // One level order for the gang: its own Topology, else its subgroups' (KAI's examples name
    // one Topology throughout; a second is warned about, see `warnings`).
    gang.topology_object = std::iter::once(&pg.spec.topology_constraint)
        .chain(pg.spec.sub_groups.iter().map(|s| &s.topology_constraint))
        .flatten()
        .map(|t| t.topology.as_str())
        .find(|t| !t.is_empty())
        .map(Box::from);
    let mut children: BTreeMap<Option<&str>, u32> = BTreeMap::new();
    for s in &pg.spec.sub_groups {
        *children.entry(s.parent.as_deref()).or_default() += 1;
    }
    for (i, s) in pg.spec.sub_groups.iter().enumerate() {
        let is_leaf = !children.contains_key(&Some(s.name.as_str()));
        let min_member_path = format!("spec.subGroups[{i}].minMember");
        let (min, pod_floor) = if is_leaf {
            (count_field(&min_member_path, s.min_member.unwrap_or(1)), Ok(0))
        } else {
            let all = children.get(&Some(s.name.as_str())).copied().unwrap_or(0);
            (
                s.min_sub_group
                    .map_or(Ok(all), |m| count_field(&format!("spec.subGroups[{i}].minSubGroup"), m)),
                // A mid-level minMember counts the subgroup's descendant pods.
                s.min_member.map_or(Ok(0), |m| count_field(&min_member_path, m)),
            )
        };
        gang.subgroups.push(SubGroup {
            name: s.name.clone(),
            parent: s.parent.clone(),
            min_member: min.map_err(|e| errors.push(e)).unwrap_or(0),
            pod_floor: pod_floor.map_err(|e| errors.push(e)).unwrap_or(0),
            topology_preferred: s.topology_constraint.as_ref().and_then(|t| t.levels().1),
            topology_key: s.topology_constraint.as_ref().and_then(|t| t.levels().0),
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
        // The root's minMember still counts pods, over all subgroups together.
        gang.pod_floor = min;
    }
    if errors.is_empty() { Ok(gang) } else { Err(errors) }
}

/// What a KAI PodGroup asks that is not applied, naming the field: levels in a
/// `topologyConstraint` that names no `topology` (KAI places such a group as if it had no
/// constraint, and so do we), and a subgroup naming another Topology than the group's first
/// (one Topology orders a gang's levels here).
pub fn warnings(obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let spec = |f: &str| obj.pointer("/spec").and_then(|s| s.get(f)).filter(|v| !v.is_null());
    for (field, why) in [
        ("queue", "kube-gang has no queues: the gang is admitted by room alone"),
        ("markUnschedulable", "the gang's pods always get Unschedulable events"),
        ("schedulingBackoff", "the gang is tried every cycle (its timeout and backoff are kube-gang's)"),
        ("preemptionDelay", "the gang preempts as soon as it cannot fit"),
    ] {
        if spec(field).is_some() {
            out.push(format!("spec.{field}: not evaluated: {why}"));
        }
    }
    if spec("stalenessGracePeriod").and_then(Value::as_str).is_some_and(|g| g.starts_with('-')) {
        out.push(
            "spec.stalenessGracePeriod: a negative grace period (never release) is not honored: a gang short of its minimum is released after the scheduler's staleGracePeriod, never left half-bound"
                .to_string(),
        );
    }
    let constraints =
        std::iter::once(("spec.topologyConstraint".to_string(), obj.pointer("/spec/topologyConstraint")))
            .chain(
                (obj.pointer("/spec/subGroups")
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice)
                    .iter())
                .enumerate()
                .map(|(i, s)| {
                    (format!("spec.subGroups[{i}].topologyConstraint"), s.get("topologyConstraint"))
                }),
            );
    let mut first: Option<String> = None;
    for (path, c) in constraints {
        let Some(c) = c.filter(|c| c.is_object()) else { continue };
        let name = c.get("topology").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            for field in ["requiredTopologyLevel", "preferredTopologyLevel"] {
                if c.get(field).and_then(Value::as_str).is_some_and(|l| !l.is_empty()) {
                    out.push(format!(
                        "{path}.{field}: not applied: KAI applies topology levels only within the Topology \
                         {path}.topology names, and it names none"
                    ));
                }
            }
            continue;
        }
        match &first {
            None => first = Some(name.to_string()),
            Some(f) if f != name => out.push(format!(
                "{path}.topology: {name:?} not used: the gang's levels are ordered by the first Topology \
                 it names, {f:?}"
            )),
            Some(_) => {}
        }
    }
    out
}

/// What a workload's KAI topology annotations ask that is not applied, naming the annotation: a
/// placement without `kai.scheduler/topology` (KAI's pod grouper then writes a constraint that
/// names no Topology, which KAI does not apply). Placements a template's own kube-gang topology
/// annotations override are `validate`'s to name (it knows the templates).
pub fn workload_warnings(obj: &Value) -> Vec<String> {
    use crate::read::labels::{KAI_TOPOLOGY, KAI_TOPOLOGY_PREFERRED, KAI_TOPOLOGY_REQUIRED};
    let annotations = obj.pointer("/metadata/annotations");
    let a = |k: &str| annotations.and_then(|a| a.get(k)).and_then(Value::as_str).filter(|v| !v.is_empty());
    let named = a(KAI_TOPOLOGY).is_some();
    let mut out = Vec::new();
    for key in [KAI_TOPOLOGY_REQUIRED, KAI_TOPOLOGY_PREFERRED] {
        if a(key).is_some() && !named {
            out.push(format!(
                "metadata.annotations[{key}]: not applied: KAI applies topology levels only within the \
                 Topology metadata.annotations[{KAI_TOPOLOGY}] names, and it names none"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn required_and_preferred_topology_levels_are_read_for_the_podgroup_and_each_subgroup() {
        let pg = json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "p"}, "spec": {"minMember": 2,
                "topologyConstraint": {"topology": "t", "requiredTopologyLevel": "zone", "preferredTopologyLevel": "rack"},
                "subGroups": [{"name": "a", "minMember": 1},
                              {"name": "b", "minMember": 1, "topologyConstraint": {"topology": "t", "preferredTopologyLevel": "host"}},
                              {"name": "c", "minMember": 1, "topologyConstraint": {"requiredTopologyLevel": "rack"}}]}});
        let g = read(&pg).unwrap();
        assert_eq!(
            (g.topology_key.as_deref(), g.topology_preferred.as_deref()),
            (Some("zone"), Some("rack"))
        );
        assert_eq!(g.topology_object.as_deref(), Some("t"), "the Topology that orders the levels");
        assert_eq!(g.subgroups[1].topology_preferred.as_deref(), Some("host"));
        assert_eq!(g.subgroups[0].topology_preferred, None);
        // KAI applies levels only within a named Topology: `c` names none, so none applies.
        assert_eq!(g.subgroups[2].topology_key, None);
        assert_eq!(
            warnings(&pg),
            [
                "spec.subGroups[2].topologyConstraint.requiredTopologyLevel: not applied: KAI applies topology \
              levels only within the Topology spec.subGroups[2].topologyConstraint.topology names, and it names none"
            ]
        );
    }

    #[test]
    fn a_group_without_a_topology_of_its_own_takes_its_subgroups_and_a_second_is_warned_about() {
        let pg = json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "p"}, "spec": {"subGroups": [
                {"name": "a", "topologyConstraint": {"topology": "fabric", "requiredTopologyLevel": "rack"}},
                {"name": "b", "topologyConstraint": {"topology": "power", "requiredTopologyLevel": "pdu"}}]}});
        let g = read(&pg).unwrap();
        assert_eq!(g.topology_object.as_deref(), Some("fabric"));
        assert_eq!(g.topology_key, None);
        assert_eq!(
            warnings(&pg),
            [
                "spec.subGroups[1].topologyConstraint.topology: \"power\" not used: the gang's levels are ordered by \
              the first Topology it names, \"fabric\""
            ]
        );
    }

    #[test]
    fn min_member_is_optional_and_defaults_to_one() {
        let g = read(&json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "p", "namespace": "ml"}, "spec": {"queue": "q"}}))
        .unwrap();
        assert_eq!(g.min_member, 1);
        let g = read(&json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "p"}, "spec": {"subGroups": [{"name": "a"}, {"name": "b", "minMember": 3}]}}))
        .unwrap();
        assert_eq!(g.min_pods(), Some(4), "a leaf without minMember needs one pod");
    }

    #[test]
    fn a_mid_level_min_member_is_the_subgroups_pod_floor() {
        let g = read(&json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "p"}, "spec": {"minMember": 10, "subGroups": [
                {"name": "mid", "minMember": 5}, {"name": "a", "parent": "mid", "minMember": 2},
                {"name": "c", "parent": "mid", "minMember": 1},
                {"name": "b", "minMember": 4}]}}))
        .unwrap();
        let mid = &g.subgroups[0];
        assert_eq!((mid.min_member, mid.pod_floor), (2, 5), "both children, and 5 pods below");
        assert_eq!(g.subgroups[1].pod_floor, 0, "a leaf's minMember is its own minimum");
        assert_eq!(g.tree_min_pods(), Some(9), "mid's 5 (over leaves of 2 + 1) and b's 4");
        assert_eq!(g.min_pods(), Some(10));
        let elastic = read(&json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "p"}, "spec": {"subGroups": [
                {"name": "mid", "minSubGroup": 1, "minMember": 6}, {"name": "a", "parent": "mid", "minMember": 2},
                {"name": "c", "parent": "mid", "minMember": 3}]}}))
        .unwrap();
        assert_eq!((elastic.subgroups[0].min_member, elastic.subgroups[0].pod_floor), (1, 6));
        let bad = read(&json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "p"}, "spec": {"subGroups": [
                {"name": "mid", "minMember": -1}, {"name": "a", "parent": "mid"}]}}))
        .unwrap_err();
        assert_eq!(bad[0].path, "spec.subGroups[0].minMember");
    }

    #[test]
    fn root_min_member_is_a_pod_floor_over_the_subgroups() {
        let g = read(&json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "big", "namespace": "llm"}, "spec": {"minMember": 10, "subGroups": [
                {"name": "leaders", "minMember": 2}, {"name": "workers", "minMember": 4}]}}))
        .unwrap();
        assert_eq!((g.min_member, g.pod_floor), (2, 10), "both subgroups, and 10 pods in all");
        assert_eq!(g.min_pods(), Some(10));
        let flat = read(&json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "p"}, "spec": {"minMember": 3}}))
        .unwrap();
        assert_eq!(
            (flat.min_member, flat.pod_floor),
            (3, 0),
            "without subgroups minMember is the root count"
        );
    }

    #[test]
    fn priority_class_preemptibility_and_grace_are_read_as_kai_reads_them() {
        let pg = |spec: Value| {
            let mut s = json!({"minMember": 2});
            s.as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
            json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                "metadata": {"name": "kai", "namespace": "ml"}, "spec": s})
        };
        // No class: KAI's default priority, 50, is preemptible; a class decides by its value.
        let g = read(&pg(json!({}))).unwrap();
        assert_eq!((g.disruption, g.priority_class_name, g.stale_grace), (Disruption::Members, None, None));
        assert_eq!(
            read(&pg(json!({"priorityClassName": "build"}))).unwrap().disruption,
            Disruption::Below(100)
        );
        assert_eq!(Disruption::Below(100).at(99), Disruption::Members);
        assert_eq!(Disruption::Below(100).at(100), Disruption::Never);
        let g = read(&pg(json!({"priorityClassName": "train", "preemptibility": "non-preemptible",
                                 "stalenessGracePeriod": "1m30s"})))
        .unwrap();
        assert_eq!(g.priority_class_name.as_deref(), Some("train"));
        assert_eq!(g.disruption, Disruption::Never);
        assert_eq!(g.stale_grace, Some(std::time::Duration::from_secs(90)));
        assert_eq!(
            read(&pg(json!({"preemptibility": "preemptible"}))).unwrap().disruption,
            Disruption::Members
        );
        // KAI 0.18's third value: the minimum is never taken, whatever the class says.
        assert_eq!(
            read(&pg(json!({"priorityClassName": "build", "preemptibility": "semi-preemptible"})))
                .unwrap()
                .disruption
                .at(50),
            Disruption::Surplus
        );
        let e = read(&pg(json!({"preemptibility": "Preemptible"}))).unwrap_err();
        assert_eq!(e[0].path, "spec.preemptibility");
        assert!(e[0].message.contains("\"semi-preemptible\""), "{}", e[0].message);
        let e = read(&pg(json!({"stalenessGracePeriod": "soon"}))).unwrap_err();
        assert_eq!(e[0].path, "spec.stalenessGracePeriod");
        // A Go duration: no bare numbers but 0, and a fraction of a second rounds up.
        assert_eq!(
            read(&pg(json!({"stalenessGracePeriod": "600"}))).unwrap_err()[0].path,
            "spec.stalenessGracePeriod"
        );
        let g = read(&pg(json!({"stalenessGracePeriod": "1.5s"}))).unwrap();
        assert_eq!(g.stale_grace, Some(std::time::Duration::from_secs(2)));
        assert_eq!(
            read(&pg(json!({"stalenessGracePeriod": "0"}))).unwrap().stale_grace,
            Some(std::time::Duration::ZERO)
        );
        // Never released is not honored, and said; the fields with no effect here are named.
        let obj = pg(json!({"stalenessGracePeriod": "-1s", "queue": "team-a", "preemptionDelay": "30s"}));
        assert_eq!(read(&obj).unwrap().stale_grace, None);
        let w = warnings(&obj);
        assert!(w.iter().any(|w| w.starts_with("spec.queue: not evaluated")), "{w:?}");
        assert!(w.iter().any(|w| w.starts_with("spec.preemptionDelay: not evaluated")), "{w:?}");
        assert!(w.iter().any(|w| w.starts_with("spec.stalenessGracePeriod: a negative")), "{w:?}");
        assert!(warnings(&pg(json!({}))).is_empty());
    }
}
