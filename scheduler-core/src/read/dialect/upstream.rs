//! Upstream Kubernetes `scheduling.k8s.io`: `PodGroup` (gang policy `minCount`) and
//! `CompositePodGroup` (gang policy `minGroupCount`), linked by `parentCompositePodGroupName`, with
//! pods naming their group in `spec.schedulingGroup.podGroupName`.
//!
//! Objects are read with k8s-openapi's own types (`v1beta1` PodGroup; `v1alpha3` PodGroup and
//! CompositePodGroup). A hierarchy becomes one canonical gang rooted at its top-level group: nested
//! CompositePodGroups are inner subgroups, PodGroups are leaves, and a pod's claim on a PodGroup
//! resolves to (root gang, leaf) in [`assemble`].

use std::collections::BTreeMap;

use k8s_openapi::api::scheduling::{v1alpha3, v1beta1};
use serde_json::Value;

use super::{Claim, Meta, count_field, typed};
use crate::error::FieldError;
use crate::model::{Dialect, Gang, GangKey, Source, SubGroup, Time};

/// The API group.
pub const GROUP: &str = "scheduling.k8s.io";

/// One upstream group object, before hierarchies are assembled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub key: GangKey,
    /// `PodGroup` or `CompositePodGroup`.
    pub kind: String,
    /// `parentCompositePodGroupName`.
    pub parent: Option<String>,
    /// `minCount` (PodGroup) or `minGroupCount` (CompositePodGroup); `None` for the basic policy.
    pub min: Option<u32>,
    pub topology_key: Option<String>,
    pub priority: Option<i32>,
    pub created: Time,
}

pub(crate) fn claim(meta: &Meta<'_>, pod: &Value) -> Result<Option<Claim>, FieldError> {
    let name = pod.pointer("/spec/schedulingGroup/podGroupName");
    match name {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(n)) if !n.is_empty() => Ok(Some(Claim {
            dialect: Dialect::Upstream,
            gang: GangKey::new(meta.namespace, n),
            subgroup: None,
            path: "spec.schedulingGroup.podGroupName".into(),
        })),
        Some(other) => Err(FieldError::new(
            "spec.schedulingGroup.podGroupName",
            format!("must be a non-empty string, got {other}"),
        )),
    }
}

/// Reads one PodGroup or CompositePodGroup.
pub fn read(obj: &Value) -> Result<Group, Vec<FieldError>> {
    let meta = Meta::of(obj);
    let version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let mut group = Group {
        key: meta.key(),
        kind: kind.to_string(),
        parent: None,
        min: None,
        topology_key: None,
        priority: None,
        created: meta.created,
    };
    let mut errors = Vec::new();
    let first_key = |t: Option<Vec<String>>| t.and_then(|t| t.into_iter().next());
    match (version, kind) {
        ("scheduling.k8s.io/v1beta1", "PodGroup") => {
            let pg: v1beta1::PodGroup = typed(obj)?;
            group.parent = pg.spec.parent_composite_pod_group_name;
            group.priority = pg.spec.priority;
            group.topology_key = first_key(
                pg.spec
                    .scheduling_constraints
                    .and_then(|c| c.topology)
                    .map(|t| t.into_iter().map(|t| t.key).collect()),
            );
            if let Some(g) = pg.spec.scheduling_policy.gang {
                group.min = count_field("spec.schedulingPolicy.gang.minCount", g.min_count)
                    .map_err(|e| errors.push(e))
                    .ok();
            }
        }
        ("scheduling.k8s.io/v1alpha3", "PodGroup") => {
            let pg: v1alpha3::PodGroup = typed(obj)?;
            group.parent = pg.spec.parent_composite_pod_group_name;
            group.priority = pg.spec.priority;
            group.topology_key = first_key(
                pg.spec
                    .scheduling_constraints
                    .and_then(|c| c.topology)
                    .map(|t| t.into_iter().map(|t| t.key).collect()),
            );
            if let Some(g) = pg.spec.scheduling_policy.gang {
                group.min = count_field("spec.schedulingPolicy.gang.minCount", g.min_count)
                    .map_err(|e| errors.push(e))
                    .ok();
            }
        }
        ("scheduling.k8s.io/v1alpha3", "CompositePodGroup") => {
            let cpg: v1alpha3::CompositePodGroup = typed(obj)?;
            group.parent = cpg.spec.parent_composite_pod_group_name;
            group.priority = cpg.spec.priority;
            group.topology_key = first_key(
                cpg.spec
                    .scheduling_constraints
                    .and_then(|c| c.topology)
                    .map(|t| t.into_iter().map(|t| t.key).collect()),
            );
            if let Some(g) = cpg.spec.scheduling_policy.gang {
                group.min = count_field("spec.schedulingPolicy.gang.minGroupCount", g.min_group_count)
                    .map_err(|e| errors.push(e))
                    .ok();
            }
        }
        _ => {
            errors.push(FieldError::new(
                "apiVersion",
                format!("{version} {kind} is not supported; use scheduling.k8s.io/v1beta1 PodGroup or v1alpha3 PodGroup/CompositePodGroup"),
            ));
        }
    }
    if errors.is_empty() { Ok(group) } else { Err(errors) }
}

/// Where a pod naming upstream PodGroup `key` belongs: its root gang and leaf.
pub type Resolution = BTreeMap<GangKey, (GangKey, Option<String>)>;

/// Builds canonical gangs from upstream groups: one per root. Returns the gangs, how each
/// PodGroup resolves, and the groups that could not be placed in a tree (with why).
pub fn assemble(groups: &[Group]) -> (Vec<Gang>, Resolution, Vec<(GangKey, FieldError)>) {
    let by_key: BTreeMap<&GangKey, &Group> = groups.iter().map(|g| (&g.key, g)).collect();
    let mut problems = Vec::new();
    let mut roots: BTreeMap<GangKey, Vec<&Group>> = BTreeMap::new();
    'groups: for g in groups {
        let mut cur = g;
        let mut depth = 0;
        while let Some(parent) = &cur.parent {
            depth += 1;
            let pk = GangKey::new(&cur.key.namespace, parent);
            match by_key.get(&pk) {
                Some(p) if p.kind == "CompositePodGroup" && depth <= crate::tree::WALK_DEPTH_LIMIT => cur = p,
                Some(p) if p.kind != "CompositePodGroup" => {
                    problems.push((
                        g.key.clone(),
                        FieldError::new(
                            "spec.parentCompositePodGroupName",
                            format!("{pk} is a {}, not a CompositePodGroup", p.kind),
                        ),
                    ));
                    continue 'groups;
                }
                Some(_) => {
                    problems.push((
                        g.key.clone(),
                        FieldError::new(
                            "spec.parentCompositePodGroupName",
                            "the hierarchy is too deep or has a cycle",
                        ),
                    ));
                    continue 'groups;
                }
                None => {
                    problems.push((
                        g.key.clone(),
                        FieldError::new("spec.parentCompositePodGroupName", format!("not found: {pk}")),
                    ));
                    continue 'groups;
                }
            }
        }
        roots.entry(cur.key.clone()).or_default().push(g);
    }

    let mut gangs = Vec::new();
    let mut resolution = Resolution::new();
    for (root_key, members) in roots {
        let Some(root) = by_key.get(&root_key) else { continue };
        let children = |name: &str| members.iter().filter(|m| m.parent.as_deref() == Some(name)).count();
        let source = Source { dialect: Dialect::Upstream, kind: root.kind.clone() };
        let mut gang = Gang::new(root_key.clone(), 1, source);
        gang.created = root.created;
        gang.priority = root.priority;
        gang.topology_key = root.topology_key.clone();
        if root.kind == "PodGroup" {
            gang.min_member = root.min.unwrap_or(1);
            resolution.insert(root_key.clone(), (root_key.clone(), None));
        } else {
            let top = u32::try_from(children(&root_key.name)).unwrap_or(u32::MAX);
            gang.min_member = root.min.unwrap_or(top);
            for m in members.iter().filter(|m| m.key != root_key) {
                let n = u32::try_from(children(&m.key.name)).unwrap_or(u32::MAX);
                let parent = m.parent.clone().filter(|p| p != &root_key.name);
                gang.subgroups.push(SubGroup {
                    name: m.key.name.clone(),
                    parent,
                    min_member: if m.kind == "PodGroup" { m.min.unwrap_or(1) } else { m.min.unwrap_or(n) },
                    topology_key: m.topology_key.clone(),
                });
                if m.kind == "PodGroup" {
                    resolution.insert(m.key.clone(), (root_key.clone(), Some(m.key.name.clone())));
                }
            }
            gang.subgroups.sort_by(|a, b| a.name.cmp(&b.name));
        }
        gangs.push(gang);
    }
    (gangs, resolution, problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pg(name: &str, parent: Option<&str>, min: i32) -> Value {
        json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"parentCompositePodGroupName": parent, "schedulingPolicy": {"gang": {"minCount": min}},
                     "workloadRef": {"workloadName": "w", "templateName": "t"}}})
    }

    #[test]
    fn a_composite_hierarchy_becomes_one_gang_with_leaves() {
        let cpg = json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": "llm", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}},
                     "schedulingConstraints": {"topology": [{"key": "rack"}]},
                     "workloadRef": {"workloadName": "w", "templateName": "t"}}});
        let groups: Vec<Group> = [cpg, pg("prefill", Some("llm"), 2), pg("decode", Some("llm"), 4)]
            .iter()
            .map(|o| read(o).unwrap())
            .collect();
        let (gangs, resolution, problems) = assemble(&groups);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(gangs.len(), 1);
        let g = &gangs[0];
        assert_eq!((g.min_member, g.topology_key.as_deref()), (2, Some("rack")));
        assert_eq!(g.min_pods(), Some(6));
        assert_eq!(
            resolution[&GangKey::new("ml", "decode")],
            (GangKey::new("ml", "llm"), Some("decode".into()))
        );
    }

    #[test]
    fn a_missing_parent_is_a_problem_with_a_path() {
        let groups = vec![read(&pg("orphan", Some("nowhere"), 2)).unwrap()];
        let (gangs, _, problems) = assemble(&groups);
        assert!(gangs.is_empty());
        assert_eq!(problems[0].1.path, "spec.parentCompositePodGroupName");
        assert!(problems[0].1.message.contains("ml/nowhere"));
    }

    #[test]
    fn v1beta1_podgroup_reads_with_k8s_openapi_types() {
        let obj = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "w", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 8}}}});
        let g = read(&obj).unwrap();
        assert_eq!(g.min, Some(8));
        let bad = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "w"}, "spec": {"schedulingPolicy": {"gang": {"minCount": -1}}}});
        assert_eq!(read(&bad).unwrap_err()[0].path, "spec.schedulingPolicy.gang.minCount");
    }
}
