//! Upstream Kubernetes `scheduling.k8s.io`: `PodGroup` (gang policy `minCount`) and
//! `CompositePodGroup` (gang policy `minGroupCount`), linked by `parentCompositePodGroupName`, with
//! pods naming their group in `spec.schedulingGroup.podGroupName`.
//!
//! Every version a Kubernetes release from 1.35 on serves:
//!
//! | release | objects | pods point at them by |
//! |---|---|---|
//! | 1.35 | `v1alpha1` `Workload` whose `podGroups[]` each carry a `policy` (`gang.minCount` or `basic`) | `spec.workloadRef {name, podGroup, podGroupReplicaKey}` |
//! | 1.36 | `v1alpha2` `PodGroup` (made by a controller from a `Workload`'s `podGroupTemplates`) | `spec.schedulingGroup.podGroupName` |
//! | 1.37 | `v1alpha3` / `v1beta1` `PodGroup` and `CompositePodGroup`, `Workload` templates of both | `spec.schedulingGroup.podGroupName` |
//!
//! `v1beta1`/`v1alpha3` objects are read with k8s-openapi's own types; the 1.35 and 1.36 versions
//! (not in k8s-openapi's `latest`) with small types of our own holding the fields we use. A hierarchy
//! becomes one canonical gang rooted at its top-level group: nested CompositePodGroups are inner
//! subgroups, PodGroups are leaves, and a pod's claim on a PodGroup resolves to (root gang, leaf) in
//! [`assemble`]. A 1.35 `workloadRef` names one pod group of a Workload, applied separately per
//! replica key (KEP-4671): each (workload, pod group, replica key) is a gang of its own, named
//! `<workload>-<podGroup>[-<replicaKey>]`. From 1.36 on a Workload only holds templates the
//! controllers stamp PodGroups from; they are validated, and define no gang themselves.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::scheduling::{v1alpha3, v1beta1};
use serde::Deserialize;
use serde_json::Value;

use super::{Claim, Meta, count_field};
use crate::read::error::FieldError;
use crate::read::model::{Dialect, Disruption, Gang, GangKey, PreemptionPolicy, Source, SubGroup, Time};

/// A built-in `scheduling.k8s.io` object decoded in place, an error naming its exact field.
fn typed<'de, T: Deserialize<'de>>(obj: &'de Value) -> Result<T, Vec<FieldError>> {
    crate::read::error::decode(obj, "", crate::read::error::Wording::BuiltIn)
}

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
    /// `spec.disruptionMode`.
    pub disruption: Disruption,
    /// `spec.preemptionPolicy` (1.37's kinds).
    pub preemption_policy: Option<PreemptionPolicy>,
    pub created: Time,
    /// `metadata.uid`.
    pub uid: Option<String>,
}

/// 1.37's `spec.disruptionMode` (`{all: {}}` or `{single: {}}`): exactly one, as the API server
/// holds it; `None` (absent) is `single`. One naming neither is a mode of a later release (the
/// server admits nothing else), read on the safe side, as `all`: the group goes only whole.
fn disruption_mode(mode: Option<(bool, bool)>) -> Result<Disruption, FieldError> {
    match mode {
        None | Some((false, true)) => Ok(Disruption::Members),
        Some((true, false) | (false, false)) => Ok(Disruption::Whole),
        Some((true, true)) => {
            Err(FieldError::new("spec.disruptionMode", "exactly one of all and single must be set"))
        }
    }
}

/// 1.36's `spec.disruptionMode` (`Pod`, the default, or `PodGroup`).
fn disruption_mode_v1alpha2(mode: Option<&str>) -> Result<Disruption, FieldError> {
    match mode {
        None | Some("Pod") => Ok(Disruption::Members),
        Some("PodGroup") => Ok(Disruption::Whole),
        Some(other) => Err(FieldError::new(
            "spec.disruptionMode",
            format!("Unsupported value: {other:?}: supported values: \"Pod\", \"PodGroup\""),
        )),
    }
}

/// `spec.preemptionPolicy` (`Never` or `PreemptLowerPriority`).
fn preemption_policy(policy: Option<&str>) -> Result<Option<PreemptionPolicy>, FieldError> {
    match policy {
        None => Ok(None),
        Some("Never") => Ok(Some(PreemptionPolicy::Never)),
        Some("PreemptLowerPriority") => Ok(Some(PreemptionPolicy::PreemptLowerPriority)),
        Some(other) => Err(FieldError::new(
            "spec.preemptionPolicy",
            format!("Unsupported value: {other:?}: supported values: \"Never\", \"PreemptLowerPriority\""),
        )),
    }
}

/// Why a PodGroup's own ResourceClaims are not evaluated.
const GROUP_CLAIMS: &str = "not evaluated: ResourceClaims shared by a PodGroup (DRAWorkloadResourceClaims, KEP-5729) are not allocated or reserved for the group here: a member whose spec.resourceClaims entry matches a resourceClaimName entry gets that claim reserved for itself, as a claim pods share (at most 256 of them), and one matching a resourceClaimTemplateName entry waits, since its claim is the group's";

/// What an upstream PodGroup or Workload asks that kube-gang does not evaluate, naming the field:
/// a PodGroup's `spec.resourceClaims`, a Workload's `spec.podGroupTemplates[i].resourceClaims`.
/// For `validate`, `simulate` and the webhook.
pub fn warnings(obj: &Value) -> Vec<String> {
    let present = |v: Option<&Value>| v.and_then(Value::as_array).is_some_and(|a| !a.is_empty());
    let mut out = Vec::new();
    if present(obj.pointer("/spec/resourceClaims")) {
        out.push(format!("spec.resourceClaims: {GROUP_CLAIMS}"));
    }
    let templates = obj.pointer("/spec/podGroupTemplates").and_then(Value::as_array);
    for (i, t) in templates.map_or(&[][..], Vec::as_slice).iter().enumerate() {
        if present(t.get("resourceClaims")) {
            out.push(format!("spec.podGroupTemplates[{i}].resourceClaims: {GROUP_CLAIMS}"));
        }
    }
    out
}

impl Group {
    /// A PodGroup heading no tree, with the basic policy and no scheduling constraint: Kubernetes
    /// schedules its pods one by one, the group only labels them ("the grouping is used as
    /// group-level label"), so it defines no gang and a pod naming it claims none. From Kubernetes
    /// 1.38 the Job controller makes one for every Job that asks for no gang (KEP-5547), opted-in
    /// Jobs included. A basic group with a topology constraint still keeps its pods in one domain
    /// (topology-aware workload scheduling), a gang of one at a time here.
    pub fn is_plain_basic(&self) -> bool {
        self.kind == "PodGroup" && self.parent.is_none() && self.min.is_none() && self.topology_key.is_none()
    }
}

/// Where a 1.35 pod names its Workload.
pub const WORKLOAD_REF_PATH: &str = "spec.workloadRef";

/// A 1.35 pod's `spec.workloadRef`: (workload, pod group, replica key).
pub fn workload_ref(pod: &Value) -> Option<(&str, &str, Option<&str>)> {
    let r = crate::read::object::at(pod, "/spec/workloadRef")?;
    let name = r.get("name").and_then(Value::as_str).filter(|s| !s.is_empty())?;
    let group = r.get("podGroup").and_then(Value::as_str).filter(|s| !s.is_empty())?;
    let key = r.get("podGroupReplicaKey").and_then(Value::as_str).filter(|s| !s.is_empty());
    Some((name, group, key))
}

/// The gang a `workloadRef` names: `<workload>-<podGroup>[-<replicaKey>]`.
pub fn workload_gang_name(workload: &str, group: &str, replica: Option<&str>) -> String {
    match replica {
        Some(r) => format!("{workload}-{group}-{r}"),
        None => format!("{workload}-{group}"),
    }
}

pub(crate) fn claim(meta: &Meta<'_>, pod: &Value) -> Result<Option<Claim>, FieldError> {
    // Read for every pod a cluster lists: one look at `spec`, nothing copied.
    let spec = pod.get("spec");
    let name = spec.and_then(|s| s.get("schedulingGroup")).and_then(|g| g.get("podGroupName"));
    if name.is_none_or(Value::is_null)
        && spec.and_then(|s| s.get("workloadRef")).is_some_and(|r| !r.is_null())
    {
        return match workload_ref(pod) {
            Some((w, g, r)) => Ok(Some(Claim {
                dialect: Dialect::Upstream,
                gang: GangKey::new(meta.namespace, workload_gang_name(w, g, r)),
                subgroup: None,
                path: WORKLOAD_REF_PATH.into(),
            })),
            None => Err(FieldError::new(
                WORKLOAD_REF_PATH,
                "name and podGroup must be non-empty strings (podGroupReplicaKey optional)",
            )),
        };
    }
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
        disruption: Disruption::Members,
        preemption_policy: None,
        created: meta.created(),
        uid: meta.uid(),
    };
    let mut errors = Vec::new();
    // "Currently only a single topology constraint can be specified": the API server refuses a
    // second, so a list of more is an error here too, never its first entry taken quietly.
    let mut first_key = |t: Option<Vec<String>>| {
        let t = t?;
        if t.len() > 1 {
            errors.push(FieldError::new(
                "spec.schedulingConstraints.topology",
                format!("Too many: {}: must have at most 1 items", t.len()),
            ));
        }
        t.into_iter().next()
    };
    // Fields read beside the topology, whose closure holds `errors` until the match ends.
    let mut more = Vec::new();
    match (version, kind) {
        ("scheduling.k8s.io/v1beta1", "PodGroup") => {
            let pg: v1beta1::PodGroup = typed(obj)?;
            group.parent = pg.spec.parent_composite_pod_group_name;
            group.priority = pg.spec.priority;
            let mode = pg.spec.disruption_mode.map(|d| (d.all.is_some(), d.single.is_some()));
            group.disruption = disruption_mode(mode).map_err(|e| more.push(e)).unwrap_or_default();
            group.preemption_policy = preemption_policy(pg.spec.preemption_policy.as_deref())
                .map_err(|e| more.push(e))
                .unwrap_or_default();
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
            let mode = pg.spec.disruption_mode.map(|d| (d.all.is_some(), d.single.is_some()));
            group.disruption = disruption_mode(mode).map_err(|e| more.push(e)).unwrap_or_default();
            group.preemption_policy = preemption_policy(pg.spec.preemption_policy.as_deref())
                .map_err(|e| more.push(e))
                .unwrap_or_default();
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
        ("scheduling.k8s.io/v1alpha2", "PodGroup") => {
            let pg: V1alpha2PodGroup = typed(obj)?;
            group.priority = pg.spec.priority;
            group.disruption = disruption_mode_v1alpha2(pg.spec.disruption_mode.as_deref())
                .map_err(|e| more.push(e))
                .unwrap_or_default();
            group.topology_key = first_key(
                pg.spec.scheduling_constraints.map(|c| c.topology.into_iter().map(|t| t.key).collect()),
            );
            if let Some(g) = pg.spec.scheduling_policy.gang {
                match g.min_count {
                    Some(n) => {
                        group.min = count_field("spec.schedulingPolicy.gang.minCount", n)
                            .map_err(|e| errors.push(e))
                            .ok();
                    }
                    None => {
                        errors.push(FieldError::new("spec.schedulingPolicy.gang.minCount", "Required value"))
                    }
                }
            }
        }
        ("scheduling.k8s.io/v1alpha3", "CompositePodGroup") => {
            let cpg: v1alpha3::CompositePodGroup = typed(obj)?;
            group.parent = cpg.spec.parent_composite_pod_group_name;
            group.priority = cpg.spec.priority;
            let mode = cpg.spec.disruption_mode.map(|d| (d.all.is_some(), d.single.is_some()));
            group.disruption = disruption_mode(mode).map_err(|e| more.push(e)).unwrap_or_default();
            group.preemption_policy = preemption_policy(cpg.spec.preemption_policy.as_deref())
                .map_err(|e| more.push(e))
                .unwrap_or_default();
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
                format!("{version} {kind} is not supported; use scheduling.k8s.io/v1beta1, v1alpha3 or v1alpha2 PodGroup, or v1alpha3 CompositePodGroup"),
            ));
        }
    }
    errors.extend(more);
    if errors.is_empty() { Ok(group) } else { Err(errors) }
}

/// The 1.36 `v1alpha2` PodGroup, as far as gangs need it (not in k8s-openapi's `latest`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct V1alpha2PodGroup {
    spec: V1alpha2Spec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct V1alpha2Spec {
    #[serde(default)]
    scheduling_policy: Policy,
    scheduling_constraints: Option<Constraints>,
    priority: Option<i32>,
    disruption_mode: Option<String>,
}

/// `schedulingPolicy` (1.36+) or `policy` (1.35): `gang` or `basic`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Policy {
    gang: Option<GangPolicy>,
    basic: Option<Value>,
}

/// `gang`: `minCount` (a PodGroup's pods) or, on a composite, `minGroupCount` (its child groups).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GangPolicy {
    min_count: Option<i32>,
    min_group_count: Option<i32>,
}

#[derive(Deserialize)]
struct Constraints {
    #[serde(default)]
    topology: Vec<TopologyKey>,
}

#[derive(Deserialize)]
struct TopologyKey {
    key: String,
}

/// One pod group of a Workload: a 1.35 `podGroups[]` entry or a later `podGroupTemplates[]` one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadGroup {
    pub name: String,
    /// `gang.minCount`; `None` for the basic policy (pods scheduled one by one).
    pub min: Option<u32>,
    pub topology_key: Option<String>,
}

/// A `scheduling.k8s.io` Workload, any version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub key: GangKey,
    /// True from 1.36 on: the groups are templates for PodGroups, not gangs pods point at.
    pub templates_only: bool,
    pub groups: Vec<WorkloadGroup>,
    pub created: Time,
    /// `metadata.uid`.
    pub uid: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnyWorkload {
    spec: AnyWorkloadSpec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnyWorkloadSpec {
    /// 1.35.
    #[serde(default)]
    pod_groups: Vec<AnyGroup>,
    /// 1.36+.
    #[serde(default)]
    pod_group_templates: Vec<AnyGroup>,
    /// 1.37+.
    #[serde(default)]
    composite_pod_group_templates: Vec<AnyGroup>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnyGroup {
    name: String,
    /// 1.35.
    policy: Option<Policy>,
    /// 1.36+.
    scheduling_policy: Option<Policy>,
    scheduling_constraints: Option<Constraints>,
    /// 1.37+ composite templates: their children.
    pod_group_templates: Option<Vec<AnyGroup>>,
    composite_pod_group_templates: Option<Vec<AnyGroup>>,
}

/// The most templates one list may hold, and pod groups a 1.35 Workload (Kubernetes
/// `pkg/apis/scheduling/validation`: `maxPodGroups`, "The maximum number of templates is 8").
const MAX_TEMPLATES: usize = 8;

/// How deep composite templates may nest here: as deep as a gang's subgroup tree.
const MAX_COMPOSITE_DEPTH: usize = crate::read::tree::MAX_SUBGROUP_DEPTH;

/// Reads a Workload (`v1alpha1`, `v1alpha2`, `v1alpha3` or `v1beta1`). Its pod groups (1.35) or
/// templates (1.36+) are checked as the API server checks them: at most 8 in a list, names DNS
/// labels unique in the Workload, exactly one of `basic` and `gang` with `gang.minCount` (a pod
/// group) or `gang.minGroupCount` (a composite template) at least 1; from 1.37, exactly one of
/// `podGroupTemplates` and `compositePodGroupTemplates`, and a composite template holds at least
/// one child. Ours on top: a composite's `minGroupCount` within its children (a tree that could
/// never be satisfied), and nesting at most [`MAX_COMPOSITE_DEPTH`] deep.
pub fn read_workload(obj: &Value) -> Result<Workload, Vec<FieldError>> {
    let meta = Meta::of(obj);
    let version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let (templates_only, composites) = match version {
        "scheduling.k8s.io/v1alpha1" => (false, false),
        "scheduling.k8s.io/v1alpha2" => (true, false),
        "scheduling.k8s.io/v1alpha3" | "scheduling.k8s.io/v1beta1" => (true, true),
        _ => {
            return Err(vec![FieldError::new(
                "apiVersion",
                format!(
                    "{version} Workload is not supported; use scheduling.k8s.io/v1alpha1, v1alpha2, v1alpha3 or v1beta1"
                ),
            )]);
        }
    };
    let w: AnyWorkload = typed(obj)?;
    let mut walk = Walk {
        errors: Vec::new(),
        groups: Vec::new(),
        seen: std::collections::BTreeSet::new(),
        templates_only,
    };
    if !templates_only {
        walk.pod_groups("spec.podGroups", &w.spec.pod_groups);
        if w.spec.pod_groups.is_empty() {
            walk.errors.push(FieldError::new("spec.podGroups", "must name at least one pod group"));
        }
    } else {
        let pods = &w.spec.pod_group_templates;
        let composite = &w.spec.composite_pod_group_templates;
        if composites && pods.is_empty() == composite.is_empty() {
            walk.errors.push(FieldError::new(
                "spec",
                "exactly one of podGroupTemplates and compositePodGroupTemplates must be set",
            ));
        } else if pods.is_empty() && composite.is_empty() {
            walk.errors.push(FieldError::new("spec.podGroupTemplates", "must name at least one pod group"));
        }
        walk.pod_groups("spec.podGroupTemplates", pods);
        if !composites && !composite.is_empty() {
            walk.errors.push(FieldError::new(
                "spec.compositePodGroupTemplates",
                format!(
                    "not served in {version}: composite templates are scheduling.k8s.io/v1alpha3 or v1beta1"
                ),
            ));
        } else {
            walk.composites("spec.compositePodGroupTemplates", composite, 1);
        }
    }
    let Walk { errors, groups, .. } = walk;
    if errors.is_empty() {
        Ok(Workload { key: meta.key(), templates_only, groups, created: meta.created(), uid: meta.uid() })
    } else {
        Err(errors)
    }
}

/// One pass over a Workload's groups and templates, collecting the pod groups and every error.
struct Walk {
    errors: Vec<FieldError>,
    groups: Vec<WorkloadGroup>,
    seen: std::collections::BTreeSet<String>,
    templates_only: bool,
}

impl Walk {
    fn name(&mut self, path: &str, name: &str) {
        if let Err(e) = super::check_dns_label(name) {
            self.errors.push(FieldError::new(format!("{path}.name"), e));
        }
        if !self.seen.insert(name.to_string()) {
            self.errors
                .push(FieldError::new(format!("{path}.name"), format!("duplicate pod group {name:?}")));
        }
    }

    fn bounded(&mut self, path: &str, n: usize) {
        if n > MAX_TEMPLATES {
            self.errors
                .push(FieldError::new(path, format!("has {n} entries; at most {MAX_TEMPLATES} are allowed")));
        }
    }

    /// The policy of the group at `path` and its `gang` count (`field`): `Some(n)` for a gang,
    /// `None` for basic (or an error, recorded).
    fn policy(&mut self, path: &str, g: &AnyGroup, field: &str) -> Option<u32> {
        let (policy, key) = match (&g.policy, &g.scheduling_policy) {
            (Some(p), _) => (Some(p), "policy"),
            (None, Some(p)) => (Some(p), "schedulingPolicy"),
            (None, None) => (None, if self.templates_only { "schedulingPolicy" } else { "policy" }),
        };
        match policy {
            Some(Policy { gang: Some(gang), basic: None }) => {
                let at = format!("{path}.{key}.gang.{field}");
                let n = if field == "minCount" { gang.min_count } else { gang.min_group_count };
                match n.map(|n| count_field(&at, n)) {
                    Some(Ok(0)) => {
                        self.errors.push(FieldError::new(at, "must be at least 1"));
                        None
                    }
                    Some(Ok(n)) => Some(n),
                    Some(Err(e)) => {
                        self.errors.push(e);
                        None
                    }
                    None => {
                        self.errors.push(FieldError::new(at, "Required value"));
                        None
                    }
                }
            }
            Some(Policy { gang: None, basic: Some(_) }) => None,
            _ => {
                self.errors.push(FieldError::new(
                    format!("{path}.{key}"),
                    "exactly one of basic or gang must be set",
                ));
                None
            }
        }
    }

    fn pod_groups(&mut self, list: &str, groups: &[AnyGroup]) {
        self.bounded(list, groups.len());
        for (i, g) in groups.iter().enumerate() {
            let path = format!("{list}[{i}]");
            self.name(&path, &g.name);
            let min = self.policy(&path, g, "minCount");
            self.groups.push(WorkloadGroup {
                name: g.name.clone(),
                min,
                topology_key: g
                    .scheduling_constraints
                    .as_ref()
                    .and_then(|c| c.topology.first())
                    .map(|t| t.key.clone()),
            });
        }
    }

    fn composites(&mut self, list: &str, templates: &[AnyGroup], depth: usize) {
        self.bounded(list, templates.len());
        if depth > MAX_COMPOSITE_DEPTH {
            self.errors.push(FieldError::new(
                list,
                format!("composite templates nest more than {MAX_COMPOSITE_DEPTH} levels deep"),
            ));
            return;
        }
        for (i, c) in templates.iter().enumerate() {
            let path = format!("{list}[{i}]");
            self.name(&path, &c.name);
            let pods = c.pod_group_templates.as_deref().unwrap_or_default();
            let inner = c.composite_pod_group_templates.as_deref().unwrap_or_default();
            let children = pods.len() + inner.len();
            if children == 0 {
                self.errors.push(FieldError::new(
                    path.clone(),
                    "at least one of podGroupTemplates and compositePodGroupTemplates must be set",
                ));
            }
            if let Some(n) = self.policy(&path, c, "minGroupCount")
                && children > 0
                && n as usize > children
            {
                self.errors.push(FieldError::new(
                    format!("{path}.schedulingPolicy.gang.minGroupCount"),
                    format!("counts satisfied child groups: {n} can never be satisfied by {children} child template(s)"),
                ));
            }
            self.pod_groups(&format!("{path}.podGroupTemplates"), pods);
            self.composites(&format!("{path}.compositePodGroupTemplates"), inner, depth + 1);
        }
    }
}

/// The gang a 1.35 pod's `workloadRef` names, from its Workload. `None` when the Workload does not
/// name that pod group (the pod waits, as kube-scheduler's pods do).
pub fn workload_gang(workload: &Workload, pod: &Value) -> Option<Gang> {
    if workload.templates_only {
        return None;
    }
    let (_, group, replica) = workload_ref(pod)?;
    let g = workload.groups.iter().find(|g| g.name == group)?;
    if g.is_plain_basic() {
        return None;
    }
    let key = GangKey::new(&workload.key.namespace, workload_gang_name(&workload.key.name, group, replica));
    let source = Source { dialect: Dialect::Upstream, kind: "Workload".into() };
    // A basic group with a topology constraint: one pod at a time, all in one domain.
    let mut gang = Gang::new(key, g.min.unwrap_or(1), source);
    gang.created = workload.created;
    gang.uid.clone_from(&workload.uid);
    gang.topology_key = g.topology_key.clone();
    Some(gang)
}

/// Whether the pod group a 1.35 pod's `workloadRef` names is a plain basic one (see
/// [`Group::is_plain_basic`]): the pod claims no gang.
pub fn workload_group_is_plain_basic(workload: &Workload, pod: &Value) -> bool {
    !workload.templates_only
        && workload_ref(pod).is_some_and(|(_, group, _)| {
            workload.groups.iter().any(|g| g.name == group && g.is_plain_basic())
        })
}

impl WorkloadGroup {
    /// The basic policy and no constraint: no gang (see [`Group::is_plain_basic`]).
    pub fn is_plain_basic(&self) -> bool {
        self.min.is_none() && self.topology_key.is_none()
    }
}

/// Where a pod naming upstream PodGroup `key` belongs: its root gang and leaf.
pub type Resolution = BTreeMap<GangKey, (GangKey, Option<String>)>;

/// What [`assemble`] builds from the upstream groups.
#[derive(Debug, Default)]
pub struct Assembled {
    /// One canonical gang per tree.
    pub gangs: Vec<Gang>,
    /// Where a pod naming each PodGroup of a gang belongs.
    pub resolution: Resolution,
    /// The groups that could not be placed in a tree, with why.
    pub problems: Vec<(GangKey, FieldError)>,
    /// The plain basic PodGroups ([`Group::is_plain_basic`]): no gang; a pod naming one claims none.
    pub basic: std::collections::BTreeSet<GangKey>,
}

/// Builds canonical gangs from upstream groups: one per root, but for plain basic PodGroups,
/// which define none.
pub fn assemble(groups: &[Group]) -> Assembled {
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
                Some(p) if p.kind == "CompositePodGroup" && depth <= crate::read::tree::WALK_DEPTH_LIMIT => {
                    cur = p
                }
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
    let mut basic = std::collections::BTreeSet::new();
    for (root_key, members) in roots {
        let Some(root) = by_key.get(&root_key) else { continue };
        if root.is_plain_basic() {
            basic.insert(root_key);
            continue;
        }
        // Each member's children counted in one pass over the tree: looking them up member by
        // member made 40,000 PodGroups under one CompositePodGroup cost 1.6 billion comparisons.
        let mut child_counts: HashMap<&str, usize> = HashMap::new();
        for m in &members {
            if let Some(p) = m.parent.as_deref() {
                *child_counts.entry(p).or_default() += 1;
            }
        }
        let children = |name: &str| child_counts.get(name).copied().unwrap_or(0);
        let source = Source { dialect: Dialect::Upstream, kind: root.kind.clone() };
        let mut gang = Gang::new(root_key.clone(), 1, source);
        gang.created = root.created;
        gang.uid.clone_from(&root.uid);
        gang.priority = root.priority;
        gang.preemption_policy = root.preemption_policy;
        // A tree with any group disrupted only whole goes whole: the groups of a tree are one
        // gang here, so a child taken alone is not a unit preemption has.
        if members.iter().any(|m| m.disruption == Disruption::Whole) {
            gang.disruption = Disruption::Whole;
        }
        gang.topology_key = root.topology_key.clone();
        if root.kind == "PodGroup" {
            gang.min_member = root.min.unwrap_or(1);
            resolution.insert(root_key.clone(), (root_key.clone(), None));
        } else {
            let top = u32::try_from(children(&root_key.name)).unwrap_or(u32::MAX);
            gang.min_member = root.min.unwrap_or(top);
            for m in members.iter().filter(|m| m.key != root_key) {
                let n = u32::try_from(children(&m.key.name)).unwrap_or(u32::MAX);
                let parent = m.parent.clone().filter(|p| p != root_key.name);
                gang.subgroups.push(SubGroup {
                    name: m.key.name.to_string(),
                    parent,
                    min_member: if m.kind == "PodGroup" { m.min.unwrap_or(1) } else { m.min.unwrap_or(n) },
                    pod_floor: 0,
                    topology_preferred: None,
                    topology_key: m.topology_key.clone(),
                });
                if m.kind == "PodGroup" {
                    resolution.insert(m.key.clone(), (root_key.clone(), Some(m.key.name.to_string())));
                }
            }
            gang.subgroups.sort_by(|a, b| a.name.cmp(&b.name));
        }
        gangs.push(gang);
    }
    Assembled { gangs, resolution, problems, basic }
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
        let Assembled { gangs, resolution, problems, .. } = assemble(&groups);
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
    fn a_plain_basic_podgroup_defines_no_gang_but_a_constrained_or_nested_one_does() {
        // As Kubernetes 1.38's Job controller makes for a Job that asks for no gang.
        let basic = |name: &str, parent: Option<&str>, topology: Option<&str>| {
            json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "ml"},
                "spec": {"parentCompositePodGroupName": parent, "schedulingPolicy": {"basic": {}},
                         "schedulingConstraints": topology.map(|k| json!({"topology": [{"key": k}]}))}})
        };
        let cpg = json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": "llm", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 1}}}});
        let groups: Vec<Group> = [
            basic("job-a", None, None),
            basic("job-b", None, Some("rack")),
            basic("aux", Some("llm"), None),
            cpg,
        ]
        .iter()
        .map(|o| read(o).unwrap())
        .collect();
        let Assembled { gangs, resolution, problems, basic } = assemble(&groups);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(basic.into_iter().collect::<Vec<_>>(), [GangKey::new("ml", "job-a")]);
        let names: Vec<&str> = gangs.iter().map(|g| g.key.name.as_str()).collect();
        assert_eq!(names, ["job-b", "llm"]);
        assert_eq!((gangs[0].min_member, gangs[0].topology_key.as_deref()), (1, Some("rack")));
        assert_eq!(resolution[&GangKey::new("ml", "aux")], (GangKey::new("ml", "llm"), Some("aux".into())));
        assert!(!resolution.contains_key(&GangKey::new("ml", "job-a")));
    }

    #[test]
    fn a_missing_parent_is_a_problem_with_a_path() {
        let groups = vec![read(&pg("orphan", Some("nowhere"), 2)).unwrap()];
        let Assembled { gangs, problems, .. } = assemble(&groups);
        assert!(gangs.is_empty());
        assert_eq!(problems[0].1.path, "spec.parentCompositePodGroupName");
        assert!(problems[0].1.message.contains("ml/nowhere"));
    }

    #[test]
    fn v1alpha2_podgroup_as_kubernetes_1_36_serves_it() {
        let obj = json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "w", "namespace": "ml"},
            "spec": {"podGroupTemplateRef": {"workload": {"workloadName": "x", "podGroupTemplateName": "t"}},
                     "schedulingPolicy": {"gang": {"minCount": 3}},
                     "schedulingConstraints": {"topology": [{"key": "rack"}]}}});
        let g = read(&obj).unwrap();
        assert_eq!((g.min, g.topology_key.as_deref()), (Some(3), Some("rack")));
    }

    #[test]
    fn a_second_topology_constraint_is_refused_as_the_api_server_refuses_it() {
        for version in ["v1beta1", "v1alpha3", "v1alpha2"] {
            let obj = json!({"apiVersion": format!("scheduling.k8s.io/{version}"), "kind": "PodGroup",
                "metadata": {"name": "w", "namespace": "ml"},
                "spec": {"podGroupTemplateRef": {"workload": {"workloadName": "x", "podGroupTemplateName": "t"}},
                         "schedulingPolicy": {"gang": {"minCount": 3}},
                         "schedulingConstraints": {"topology": [{"key": "rack"}, {"key": "zone"}]}}});
            let e = read(&obj).unwrap_err();
            assert_eq!(e.len(), 1, "{version}: {e:?}");
            assert_eq!(e[0].path, "spec.schedulingConstraints.topology", "{version}");
            assert_eq!(e[0].message, "Too many: 2: must have at most 1 items", "{version}");
        }
    }

    #[test]
    fn a_v1alpha1_workload_is_one_gang_per_pod_group_and_replica_key() {
        let w = read_workload(&json!({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
            "metadata": {"name": "job", "namespace": "ml"},
            "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 4}}},
                                   {"name": "aux", "policy": {"basic": {}}}]}}))
        .unwrap();
        let pod = |group: &str, key: Option<&str>| {
            json!({"metadata": {"name": "p", "namespace": "ml"},
                   "spec": {"workloadRef": {"name": "job", "podGroup": group, "podGroupReplicaKey": key}}})
        };
        let g = workload_gang(&w, &pod("workers", Some("r1"))).unwrap();
        assert_eq!((g.key, g.min_member), (GangKey::new("ml", "job-workers-r1"), 4));
        assert!(workload_gang(&w, &pod("aux", None)).is_none(), "basic: one by one, no gang");
        assert!(workload_group_is_plain_basic(&w, &pod("aux", None)));
        assert!(!workload_group_is_plain_basic(&w, &pod("workers", None)));
        assert!(workload_gang(&w, &pod("nope", None)).is_none());
        let plain = pod("workers", None);
        let c = claim(&Meta::of(&plain), &plain).unwrap().unwrap();
        assert_eq!((c.gang.name.as_str(), c.path.as_str()), ("job-workers", "spec.workloadRef"));
        let bad = json!({"metadata": {"name": "p"}, "spec": {"workloadRef": {"name": "job"}}});
        assert_eq!(claim(&Meta::of(&bad), &bad).unwrap_err().path, "spec.workloadRef");
    }

    #[test]
    fn a_podgroup_of_an_unknown_version_is_an_error_naming_the_versions() {
        let obj = json!({"apiVersion": "scheduling.k8s.io/v1alpha9", "kind": "PodGroup",
            "metadata": {"name": "w"}, "spec": {}});
        let e = read(&obj).unwrap_err();
        assert!(e[0].message.contains("v1alpha2"), "{}", e[0]);
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

    #[test]
    fn a_podgroup_s_own_resource_claims_are_said_to_be_unevaluated() {
        let pg = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "w", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                     "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "nvl"}]}});
        let w = crate::read::dialect::object_warnings(&pg);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("spec.resourceClaims: not evaluated"), "{w:?}");
        let workload = json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ml"},
            "spec": {"podGroupTemplates": [
                {"name": "a", "schedulingPolicy": {"gang": {"minCount": 2}}},
                {"name": "b", "schedulingPolicy": {"gang": {"minCount": 2}},
                 "resourceClaims": [{"name": "gpus", "resourceClaimName": "shared"}]}]}});
        let w = crate::read::dialect::object_warnings(&workload);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("spec.podGroupTemplates[1].resourceClaims: not evaluated"), "{w:?}");
        let plain = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "w"}, "spec": {"resourceClaims": []}});
        assert!(crate::read::dialect::object_warnings(&plain).is_empty());
    }

    #[test]
    fn disruption_mode_and_preemption_policy_read_in_every_version() {
        let with = |version: &str, kind: &str, spec: Value| {
            let mut s = json!({"schedulingPolicy": {"gang": {"minCount": 2, "minGroupCount": 2}}});
            s.as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
            read(&json!({"apiVersion": format!("scheduling.k8s.io/{version}"), "kind": kind,
                "metadata": {"name": "w", "namespace": "ml"}, "spec": s}))
        };
        for (version, kind) in
            [("v1beta1", "PodGroup"), ("v1alpha3", "PodGroup"), ("v1alpha3", "CompositePodGroup")]
        {
            let g = with(version, kind, json!({})).unwrap();
            assert_eq!((g.disruption, g.preemption_policy), (Disruption::Members, None), "{version} {kind}");
            let g = with(version, kind, json!({"disruptionMode": {"all": {}}, "preemptionPolicy": "Never"}))
                .unwrap();
            assert_eq!(
                (g.disruption, g.preemption_policy),
                (Disruption::Whole, Some(PreemptionPolicy::Never)),
                "{version} {kind}"
            );
            let g = with(version, kind, json!({"disruptionMode": {"single": {}}})).unwrap();
            assert_eq!(g.disruption, Disruption::Members, "{version} {kind}");
            let e = with(version, kind, json!({"disruptionMode": {"all": {}, "single": {}}})).unwrap_err();
            assert_eq!(e[0].path, "spec.disruptionMode", "{version} {kind}");
            // A mode of a later release: only whole, the safe side.
            let g = with(version, kind, json!({"disruptionMode": {"partial": {}}})).unwrap();
            assert_eq!(g.disruption, Disruption::Whole, "{version} {kind}");
            let e = with(version, kind, json!({"preemptionPolicy": "Sometimes"})).unwrap_err();
            assert_eq!(e[0].path, "spec.preemptionPolicy", "{version} {kind}");
        }
        // 1.36 named the modes Pod and PodGroup.
        assert_eq!(with("v1alpha2", "PodGroup", json!({})).unwrap().disruption, Disruption::Members);
        let g = with("v1alpha2", "PodGroup", json!({"disruptionMode": "PodGroup"})).unwrap();
        assert_eq!(g.disruption, Disruption::Whole);
        let e = with("v1alpha2", "PodGroup", json!({"disruptionMode": "All"})).unwrap_err();
        assert_eq!(e[0].path, "spec.disruptionMode");
        assert!(e[0].message.contains("\"Pod\", \"PodGroup\""), "{}", e[0].message);
    }

    #[test]
    fn a_tree_with_one_group_disrupted_whole_goes_whole() {
        let mut child = pg("a", Some("llm"), 1);
        child["spec"]["disruptionMode"] = json!({"all": {}});
        let groups = vec![
            read(&json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
                "metadata": {"name": "llm", "namespace": "ml"},
                "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 1}}, "preemptionPolicy": "Never",
                         "workloadRef": {"name": "x"}}}))
            .unwrap(),
            read(&child).unwrap(),
            read(&pg("b", Some("llm"), 1)).unwrap(),
        ];
        let Assembled { gangs, problems, .. } = assemble(&groups);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(gangs[0].disruption, Disruption::Whole);
        assert_eq!(gangs[0].preemption_policy, Some(PreemptionPolicy::Never));
        let plain = assemble(&[read(&pg("b", None, 1)).unwrap()]);
        assert_eq!(
            (plain.gangs[0].disruption, plain.gangs[0].preemption_policy),
            (Disruption::Members, None)
        );
    }
}
