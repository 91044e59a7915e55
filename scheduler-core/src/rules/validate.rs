//! Validation: every rule a gang spec must satisfy, returned as field-path errors. The webhook, the
//! CLI (`kubectl gang validate`) and the scheduler call these same functions.

use serde_json::Value;

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::read::error::FieldError;
use crate::read::model::{Gang, GangKey};
use crate::read::object::At;

pub use crate::read::labels::{check_label_key, check_label_value};
pub use crate::read::tree::{MAX_SUBGROUP_DEPTH, MAX_SUBGROUPS};

/// What the rule book found in one object: errors deny it, warnings are shown to the user.
/// (Admission's decision about an object, which adds what was injected, is [`crate::rules::admit::Verdict`].)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
}

impl Findings {
    /// No errors (warnings allowed).
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// The gang objects a front door knows besides the object it admits, read-only: a pod's claim
/// names a gang defined by another object, and only with it can admission tell whether the pod's
/// subgroup label names a leaf, or how many pods a workload's pods must reach together when they
/// name a gang it does not define. A gang it does not know is allowed (it may be created later).
pub trait Gangs {
    /// The gangs read from objects with this key (any dialect; usually none or one): borrowed
    /// where they lie, or copies (a front door that holds them behind a lock hands out copies, so
    /// that no lock is held while an object is admitted).
    fn find(&self, key: &GangKey) -> Vec<Cow<'_, Gang>>;

    /// Why a gang with this key that [`Gangs::find`] does not return may exist all the same: the
    /// front door knows it does not hold every gang there (the webhook's lookup leaves gangs out
    /// past its bounds). Admission then says it did not check the pod against it, rather than
    /// taking "not found" for "not there". `None`: what is not found is not known to exist.
    fn not_held(&self, _key: &GangKey) -> Option<String> {
        None
    }
}

/// No gang known: what a front door that sees one object at a time supplies.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoGangs;

impl Gangs for NoGangs {
    fn find(&self, _: &GangKey) -> Vec<Cow<'_, Gang>> {
        Vec::new()
    }
}

impl Gangs for Vec<Gang> {
    fn find(&self, key: &GangKey) -> Vec<Cow<'_, Gang>> {
        self.iter().filter(|g| g.key == *key).map(Cow::Borrowed).collect()
    }
}

/// Gangs by key: what a front door holding many gangs passes (a lookup per claim, not a scan of
/// every gang per object — `kubectl gang validate` of 10,000 PodGroups and their pods would be
/// 10⁸ comparisons through a `Vec`).
#[derive(Clone, Debug, Default)]
pub struct GangSet(std::collections::BTreeMap<GangKey, Vec<Gang>>);

impl GangSet {
    /// The gangs claims of `pod` name, as [`attachment_errors`] takes them.
    pub fn claimed_by(&self, pod: &Value) -> Vec<Gang> {
        let (claims, _) = crate::read::dialect::pod_claims_all(pod);
        claims.iter().flat_map(|c| self.find(&c.gang)).map(Cow::into_owned).collect()
    }

    pub fn len(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<Gang> for GangSet {
    fn from_iter<T: IntoIterator<Item = Gang>>(iter: T) -> Self {
        let mut set = GangSet::default();
        set.extend(iter);
        set
    }
}

impl Extend<Gang> for GangSet {
    fn extend<T: IntoIterator<Item = Gang>>(&mut self, iter: T) {
        for g in iter {
            // One gang per key, nearly always: room for one (a default push makes room for four).
            self.0.entry(g.key.clone()).or_insert_with(|| Vec::with_capacity(1)).push(g);
        }
    }
}

impl Gangs for GangSet {
    fn find(&self, key: &GangKey) -> Vec<Cow<'_, Gang>> {
        self.0.get(key).map(|gs| gs.iter().map(Cow::Borrowed).collect()).unwrap_or_default()
    }
}

/// Validates any object: a `Gang`, any dialect's PodGroup, a Pod with gang labels or annotations, or
/// a workload that opted in or carries gang labels. `old` is the previous version on UPDATE.
/// Unrelated kinds get no findings. Every problem is reported, each with its field path. No other
/// gang object is consulted: see [`validate_with`].
pub fn validate(new: &Value, old: Option<&Value>) -> Findings {
    validate_with(new, old, &NoGangs)
}

/// [`validate`], knowing `gangs`: a workload whose pods name a gang it does not define (another
/// dialect's PodGroup, a `Gang`) and whose controller creates them in stages is judged against
/// that gang's minimum ([`crate::read::workload::staged_creation`]).
pub fn validate_with(new: &Value, old: Option<&Value>, gangs: &dyn Gangs) -> Findings {
    let mut v = Findings::default();
    if !new.is_object() {
        v.errors.push(FieldError::new("", "not a Kubernetes object"));
        return v;
    }
    key_warnings(new, &mut v.warnings);
    let kind = new.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = new.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if let Some(read) = crate::read::dialect::read_object(new) {
        match read {
            Ok(crate::read::dialect::GangObject::Gang(g)) => {
                v.errors.extend(gang_tree_errors(&g));
                v.warnings.extend(crate::read::dialect::object_warnings(new));
                if let Some(old) = old.and_then(|o| match crate::read::dialect::read_object(o) {
                    Some(Ok(crate::read::dialect::GangObject::Gang(g))) => Some(g),
                    _ => None,
                }) {
                    v.errors.extend(update_errors(&old, &g));
                }
                if g.mode == crate::read::model::GangMode::NonStrict && g.timeout.is_none() {
                    v.warnings.push(
                        "a NonStrict gang without a timeout holds the nodes it reserves until it fits; set spec.scheduleTimeoutSeconds"
                            .into(),
                    );
                }
            }
            Ok(crate::read::dialect::GangObject::Workload(_)) => {
                v.warnings.extend(crate::read::dialect::object_warnings(new));
            }
            Ok(crate::read::dialect::GangObject::UpstreamGroup(g)) => {
                v.warnings.extend(crate::read::dialect::object_warnings(new));
                if g.min == Some(0) {
                    let field = if g.kind == "PodGroup" { "minCount" } else { "minGroupCount" };
                    v.errors.push(FieldError::new(
                        format!("spec.schedulingPolicy.gang.{field}"),
                        "must be at least 1",
                    ));
                }
            }
            Err(e) => v.errors.extend(e),
        }
        return v;
    }
    if api_version == "v1" && kind == "Pod" {
        validate_pod(new, &mut v);
        return v;
    }
    if crate::read::workload::trainer::is_trainjob(new) {
        v.errors.extend(crate::read::workload::trainer::check(new));
        return v;
    }
    if crate::read::workload::grove::is_pcs(new) {
        let (errors, warnings) = crate::read::workload::grove::check(new);
        v.errors.extend(errors);
        v.warnings.extend(warnings);
        return v;
    }
    if let Some(shape) = crate::read::workload::inspect(new) {
        validate_workload(new, old, shape, gangs, &mut v);
    } else if crate::read::workload::is_opted_in(new, None)
        && (api_version == "ray.io/v1" || api_version == "ray.io/v1alpha1")
        && kind == "RayJob"
        && crate::read::workload::ray_job_selects_cluster(new)
    {
        v.warnings.push(
            "spec.clusterSelector: the job runs on an existing RayCluster, whose pods KubeRay created for that cluster: no gang is made for the RayJob (opt the RayCluster in for one)"
                .into(),
        );
    }
    v
}

/// Warnings on the `kube-gang.io/` labels and annotations of the object and of its pod templates:
/// an unknown key (a typo the scheduler would silently ignore) names the nearest known one
/// ([`crate::read::labels::KNOWN`]), and an opt-in label other than `"true"`/`"false"` says it does not
/// opt in (the webhook's selectors match `"true"` only; [`crate::read::workload::is_opted_in`]).
fn key_warnings(obj: &Value, out: &mut Vec<String>) {
    use crate::read::labels::{GROUP, KNOWN, KeyKind, LABEL_ENABLED, nearest_known};
    let mut at = |pointer: &str| {
        let base = crate::read::workload::path_of(pointer);
        let base = if base.is_empty() { "metadata".to_string() } else { format!("{base}.metadata") };
        for (map, kind) in [("labels", KeyKind::Label), ("annotations", KeyKind::Annotation)] {
            let Some(found) = obj.pointer(&format!("{pointer}/metadata/{map}")).and_then(Value::as_object)
            else {
                continue;
            };
            for (key, value) in found {
                let Some(rest) = key.strip_prefix(GROUP) else { continue };
                if !rest.starts_with('/') {
                    continue;
                }
                let known = KNOWN.iter().any(|(k, kk)| {
                    k == key && (*kk == kind || matches!(kk, KeyKind::Written | KeyKind::Example))
                });
                if !known {
                    let hint = match nearest_known(key) {
                        Some(k) => format!("; did you mean {k}?"),
                        None => String::new(),
                    };
                    let elsewhere = KNOWN.iter().any(|(k, _)| k == key);
                    let what = if elsewhere {
                        format!(
                            "{key} is not {} kube-gang reads",
                            if kind == KeyKind::Label { "a label" } else { "an annotation" }
                        )
                    } else {
                        format!("unknown kube-gang.io key {key}")
                    };
                    out.push(format!("{base}.{map}[{key}]: {what}, ignored{hint}"));
                } else if key == LABEL_ENABLED
                    && let Some(v) = value.as_str()
                    && v != "true"
                    && v != "false"
                {
                    out.push(format!(
                        "{base}.{map}[{key}]: {v:?} does not opt in: only \"true\" does (\"false\" opts out)"
                    ));
                }
            }
        }
    };
    at("");
    if let Some(Ok(shape)) = crate::read::workload::inspect(obj) {
        for role in &shape.roles {
            at(&role.template);
        }
    }
}

/// The members one object of an input gives each gang it names: a pod its claims, a workload its
/// pod templates' claims times the pods each template makes at once. What a front door adds up
/// over its whole input for [`member_shortfall`]. May count more than the controller makes (a
/// LeaderWorkerSet's groups are counted whole), never fewer.
pub fn members_named(obj: &Value) -> Vec<(crate::read::model::GangKey, u64)> {
    if obj.get("kind").and_then(Value::as_str) == Some("Pod") {
        let (claims, _) = crate::read::dialect::pod_claims_all(obj);
        return claims.into_iter().map(|c| (c.gang, 1)).collect();
    }
    let Some(Ok(shape)) = crate::read::workload::inspect(obj) else { return Vec::new() };
    let mut out = Vec::new();
    for role in &shape.roles {
        let Some(template) = obj.pointer(&role.template) else { continue };
        let (claims, _) = crate::read::dialect::template_claims_all(template, &shape.namespace);
        out.extend(claims.into_iter().map(|c| (c.gang, u64::from(role.pods))));
    }
    out
}

/// A gang object whose members, from everything an input holds, can never reach its minimum:
/// `members` (at least one: a gang whose members come from elsewhere is not judged) is fewer than
/// the fewest pods that satisfy its tree ([`Gang::min_pods`]), so it would wait for members
/// forever. `kubectl gang validate` and `simulate` report it as an error, at the field that asks.
/// A KAI PodGroup's pod floors are [`floor_shortfalls`]' (a warning: KAI declares no count).
pub fn member_shortfall(gang: &Gang, members: u64) -> Option<FieldError> {
    use crate::read::model::Dialect;
    let field = match gang.source.dialect {
        // A PodGang lists the pods Grove made; its pods are made by Grove's controllers.
        Dialect::Kai | Dialect::KubeGangAnnotations | Dialect::Koordinator | Dialect::Grove => return None,
        Dialect::Upstream if gang.source.kind == "PodGroup" => "spec.schedulingPolicy.gang.minCount",
        Dialect::Upstream => return None,
        Dialect::KubeGang | Dialect::Coscheduling | Dialect::Volcano => "spec.minMember",
    };
    let need = gang.min_pods()?;
    (members > 0 && members < need).then(|| {
        FieldError::new(
            field,
            format!(
                "{need} members needed, but the input's pods and workloads naming this gang make at most {members}: it would wait for members forever"
            ),
        )
    })
}

/// A pod that claims one of `gangs` but names no leaf of its subgroup tree: an inner subgroup (pods
/// attach to leaves only, DESIGN.md "Subgroup semantics"; KAI places a pod in the subgroup its
/// label names, and only leaves have pods), an unknown one, or none where the tree has subgroups.
/// Each error names the pod's subgroup label. Checked where a pod and its gang object are seen
/// together: `kubectl gang simulate` over one input, and admission given the gangs its front door
/// knows ([`crate::rules::admit::admit_with`]); the cycle reports the same members in its message (see
/// `tree::attachment_error`).
pub fn attachment_errors(gangs: &[Gang], pod: &Value) -> Vec<FieldError> {
    let (claims, _) = crate::read::dialect::pod_claims_all(pod);
    let mut errors = Vec::new();
    for c in claims {
        let Some((label, family)) = subgroup_label(c.dialect) else { continue };
        let Some(gang) = gangs.iter().find(|g| g.key == c.gang && family.contains(&g.source.dialect)) else {
            continue;
        };
        if let Some(message) = crate::read::tree::attachment_error(gang, c.subgroup.as_deref()) {
            errors.push(FieldError::new(format!("metadata.labels[{label}]"), message));
        }
    }
    errors
}

/// The label a pod of a claim in `dialect` names its subgroup with, and the dialects of the gang
/// objects it may name (`None`: upstream claims resolve to their leaf by the PodGroup they name;
/// the other dialects have no subgroups).
fn subgroup_label(
    dialect: crate::read::model::Dialect,
) -> Option<(&'static str, &'static [crate::read::model::Dialect])> {
    use crate::read::model::Dialect;
    match dialect {
        Dialect::KubeGang | Dialect::KubeGangAnnotations => {
            Some((crate::read::labels::LABEL_SUBGROUP, &[Dialect::KubeGang, Dialect::KubeGangAnnotations]))
        }
        Dialect::Kai => Some((crate::read::dialect::kai::SUBGROUP_LABEL, &[Dialect::Kai])),
        Dialect::Grove => Some((crate::read::dialect::grove::SUBGROUP_LABEL, &[Dialect::Grove])),
        _ => None,
    }
}

/// Whether a pod's claim in `dialect` names a subgroup [`attachment_errors`] checks.
pub fn has_subgroup_label(dialect: crate::read::model::Dialect) -> bool {
    subgroup_label(dialect).is_some()
}

/// Pod floors above the pods that can exist: `gang` (read from a KAI PodGroup, whose root and
/// mid-level `minMember` count pods) needs more pods than `pods` — every pod the input holds —
/// put in it, or under one of its inner subgroups. Each finding names the field that asks
/// (`spec.minMember`, `spec.subGroups[i].minMember`). A KAI PodGroup declares no member count
/// (KAI's podgrouper writes it beside the workload), so this is checked only where the pods or
/// their workload are seen with the PodGroup (`kubectl gang simulate`); admission sees one object
/// and cannot; the cycle says the same in its "waiting for members" message.
pub fn floor_shortfalls<'a>(gang: &Gang, pods: impl IntoIterator<Item = &'a Value>) -> Vec<FieldError> {
    use crate::read::model::Dialect;
    if gang.source.dialect != Dialect::Kai
        || (gang.pod_floor == 0 && gang.subgroups.iter().all(|s| s.pod_floor == 0))
    {
        return Vec::new();
    }
    let mut counts = crate::read::tree::LeafCounts::new();
    for pod in pods {
        let (claims, _) = crate::read::dialect::pod_claims_all(pod);
        for c in claims.iter().filter(|c| c.dialect == Dialect::Kai && c.gang == gang.key) {
            if let Some(leaf) = crate::read::tree::leaf_of(gang, c.subgroup.as_deref()) {
                *counts.entry(leaf.to_string()).or_default() += 1;
            }
        }
    }
    let why = "KAI counts pods here; the gang waits until that many exist";
    let mut out = Vec::new();
    let all = crate::read::tree::pods_in(&counts);
    if !gang.subgroups.is_empty() && all < u64::from(gang.pod_floor) {
        out.push(FieldError::new(
            "spec.minMember",
            format!(
                "{} pods needed but the input holds {all} of this PodGroup's pods ({why})",
                gang.pod_floor
            ),
        ));
    }
    for (i, s) in gang.subgroups.iter().enumerate().filter(|(_, s)| s.pod_floor > 0) {
        let under = crate::read::tree::pods_under(gang, &s.name, &counts);
        if under < u64::from(s.pod_floor) {
            out.push(FieldError::new(
                format!("spec.subGroups[{i}].minMember"),
                format!(
                    "{} pods needed under subgroup {:?} but the input holds {under} ({why})",
                    s.pod_floor, s.name
                ),
            ));
        }
    }
    out
}

/// Where a gang rule's CRD path lives on a pod whose annotations define the gang.
fn annotation_field(dialect: crate::read::model::Dialect, crd_path: &str) -> String {
    use crate::read::dialect::koordinator;
    use crate::read::labels::{
        ANNOTATION_GANG_GROUP, ANNOTATION_MIN_MEMBER, ANNOTATION_TIMEOUT, ANNOTATION_TOPOLOGY_KEY,
    };
    let koord = dialect == crate::read::model::Dialect::Koordinator;
    let (key, rest) = if let Some(rest) = crd_path.strip_prefix("spec.gangGroup") {
        (if koord { koordinator::GROUPS } else { ANNOTATION_GANG_GROUP }, rest)
    } else if crd_path == "spec.topologyKey" {
        (ANNOTATION_TOPOLOGY_KEY, "")
    } else if crd_path == "spec.topology.preferred" {
        (crate::read::labels::ANNOTATION_TOPOLOGY_PREFERRED, "")
    } else if crd_path == "spec.scheduleTimeoutSeconds" {
        (if koord { koordinator::WAITING_TIME } else { ANNOTATION_TIMEOUT }, "")
    } else if crd_path == "spec.minMember" {
        (if koord { koordinator::MIN_AVAILABLE } else { ANNOTATION_MIN_MEMBER }, "")
    } else {
        return crd_path.to_string();
    };
    format!("metadata.annotations[{key}]{rest}")
}

fn validate_pod(pod: &Value, v: &mut Findings) {
    // What the API server refuses in the inter-pod scheduling fields.
    v.errors.extend(super::podspec::errors(pod.at("/spec"), "spec"));
    // A time limit backfill cannot read (the scheduler reads it as none).
    let limit = crate::read::labels::ANNOTATION_TIME_LIMIT;
    if let Some(text) = pod.at("/metadata/annotations").and_then(|a| a.get(limit))
        && let Err(e) = text
            .as_str()
            .ok_or_else(|| "must be a string".to_string())
            .and_then(crate::read::duration::time_limit)
    {
        v.errors.push(FieldError::new(format!("metadata.annotations[{limit}]"), e));
    }
    // Every claim error (each dialect's, and conflicts), and the checks below on the claims that
    // could be read.
    let (claims, claim_errors) = crate::read::dialect::pod_claims_all(pod);
    v.errors.extend(claim_errors);
    v.warnings.extend(crate::read::dialect::upstream_conflicts(&claims));
    for c in &claims {
        v.warnings.extend(crate::read::dialect::topology_warnings(c, pod));
        match crate::read::dialect::annotation_gang(c, pod) {
            Some(Ok(g)) => {
                // The annotation gang's shape: topology key, gang group, timeout, as on a Gang.
                for e in gang_tree_errors(&g) {
                    if e.path != "spec.minMember" {
                        v.errors.push(FieldError::new(annotation_field(c.dialect, &e.path), e.message));
                    }
                }
                if g.min_member == 0 && c.dialect != crate::read::model::Dialect::KubeGangAnnotations {
                    v.errors.push(FieldError::new(c.path.clone(), "the gang's minimum must be at least 1"));
                }
                if let Some(total) = g.total_member
                    && g.min_member > total
                {
                    v.errors.push(FieldError::new(
                        "metadata.annotations",
                        format!(
                            "min-member {} exceeds total-member {total}: the gang can never be satisfied",
                            g.min_member
                        ),
                    ));
                }
            }
            Some(Err(e)) => v.errors.extend(e),
            None => {}
        }
    }
    if let Some(min) =
        pod.at("/metadata/annotations").and_then(|a| a.get(crate::read::labels::ANNOTATION_MIN_MEMBER))
        && min.as_str() == Some("0")
    {
        v.errors.push(FieldError::new(
            format!("metadata.annotations[{}]", crate::read::labels::ANNOTATION_MIN_MEMBER),
            "must be at least 1",
        ));
    }
    let scheduler = pod.at("/spec/schedulerName").and_then(Value::as_str).unwrap_or("");
    if !claims.is_empty()
        && scheduler != crate::read::labels::SCHEDULER_NAME
        && !scheduler.is_empty()
        && scheduler != "default-scheduler"
    {
        v.warnings.push(format!(
            "spec.schedulerName is {scheduler:?}: this gang member will not be placed by {}",
            crate::read::labels::SCHEDULER_NAME
        ));
    }
}

fn validate_workload(
    obj: &Value,
    old: Option<&Value>,
    shape: Result<crate::read::workload::WorkloadShape, Vec<FieldError>>,
    gangs: &dyn Gangs,
    v: &mut Findings,
) {
    let shape = match shape {
        Ok(s) => s,
        Err(e) => {
            // Only a workload that asked for a gang (or a Volcano Job, a gang by itself) is ours
            // to reject.
            if crate::read::workload::is_opted_in(obj, None) || has_gang_labels(obj) || is_volcano_job(obj) {
                v.errors.extend(e);
            }
            return;
        }
    };
    if !shape.volcano() && !crate::read::workload::is_opted_in(obj, None) && !has_gang_labels(obj) {
        v.warnings.extend(crate::read::workload::ray_gang_label_warning(obj));
        return;
    }
    if shape.volcano() {
        v.warnings.extend(crate::read::dialect::volcano::job_warnings(obj));
    }
    v.warnings.extend(crate::read::dialect::kai::workload_warnings(obj));
    v.warnings.extend(crate::read::workload::kubeflow_warnings(obj));
    v.warnings.extend(kai_levels_overridden(obj, &shape));
    kai_labels(obj, v);
    v.warnings.extend(crate::read::workload::ray_warnings(obj));
    job_scheduling(obj, v);
    let known = |key: &GangKey| gangs.find(key).iter().filter_map(|g| g.min_pods()).max();
    for staged in crate::read::workload::staged_creation(obj, &shape, &known) {
        if staged.never {
            v.errors.push(FieldError::new(staged.path, staged.message));
        } else {
            v.warnings.push(format!("{}: {}", staged.path, staged.message));
        }
    }
    let total = shape.total_member();
    for role in &shape.roles {
        let Some(template) = obj.at(&role.template) else { continue };
        let annotations = template.at("/metadata/annotations");
        let path = crate::read::workload::path_of(&role.template);
        // The gang labels become pod labels: a value the API server would refuse on the pods fails
        // every pod the controller creates, so it is refused here, on the workload.
        let labels = template.at("/metadata/labels");
        for key in [crate::read::labels::LABEL_GANG, crate::read::labels::LABEL_SUBGROUP] {
            if let Some(value) = labels.and_then(|l| l.get(key)) {
                let field = format!("{path}.metadata.labels[{key}]");
                match value.as_str().map(check_label_value) {
                    Some(Ok(())) => {}
                    Some(Err(e)) => v.errors.push(FieldError::new(field, e)),
                    None => v.errors.push(FieldError::new(field, format!("{value} is not a string"))),
                }
            }
        }
        if let Some(min) = annotations.and_then(|a| a.get(crate::read::labels::ANNOTATION_MIN_MEMBER)) {
            let field =
                format!("{path}.metadata.annotations[{}]", crate::read::labels::ANNOTATION_MIN_MEMBER);
            match min.as_str().map(|s| s.trim().parse::<u32>()) {
                Some(Ok(0)) => v.errors.push(FieldError::new(field, "must be at least 1")),
                Some(Ok(n))
                    if n > total
                        && let Some(e) = scaled_below_gang(obj, old, &field, n, total) =>
                {
                    v.errors.push(e);
                }
                Some(Ok(n)) if n > total => v.errors.push(FieldError::new(
                    field,
                    format!(
                        "{n} exceeds the {total} pods the {} runs at once: the gang can never be satisfied",
                        shape.kind
                    ),
                )),
                Some(Ok(_)) => {}
                _ => v.errors.push(FieldError::new(field, format!("{min} is not a positive integer"))),
            }
        }
        template_gang_errors(template, &shape.namespace, &path, v);
        // The controller's pods would be refused for these (the API server checks the templates
        // of built-in kinds itself; of custom ones, only each pod as it is created).
        v.errors.extend(super::podspec::errors(template.at("/spec"), &format!("{path}.spec")));
    }
    if shape.kind == "Job"
        && obj.at("/spec/completions").and_then(Value::as_u64).is_some_and(|c| c > u64::from(total))
    {
        v.warnings.push(format!(
            "spec.completions exceeds spec.parallelism: the gang covers the {total} pods that run at once, not every completion"
        ));
    }
}

/// A running Job scaled below its gang's minimum: Kubernetes lets `spec.parallelism` (and an
/// indexed Job's `spec.completions`) change while the Job runs, but not its pod template once the
/// Job has started (`pkg/registry/batch/job/strategy.go`: the template's labels and annotations
/// are mutable only while it is suspended and has never run), so the gang's minimum, which the
/// template's `kube-gang.io/min-member` (`min_field`) carries to every pod, cannot follow. The
/// controller would delete pods down to the new count, the gang would fall below its minimum, its
/// members be evicted once its stale grace period passes, and the Job then wait for members that
/// are never created. Refused at the field that changed, saying so and what to do instead. `None`
/// when this is not such an update (a create, another kind, or a Job whose template may still
/// change: then the generic rule applies).
fn scaled_below_gang(
    obj: &Value,
    old: Option<&Value>,
    min_field: &str,
    min: u32,
    now: u32,
) -> Option<FieldError> {
    let old = old?;
    let is_job = |o: &Value| {
        o.get("kind").and_then(Value::as_str) == Some("Job")
            && o.get("apiVersion").and_then(Value::as_str) == Some("batch/v1")
    };
    if !is_job(obj) || !is_job(old) || crate::read::workload::template_still_mutable(old, obj) {
        return None;
    }
    let before = match crate::read::workload::inspect(old) {
        Some(Ok(shape)) => shape.total_member(),
        _ => return None,
    };
    if now >= before {
        return None;
    }
    let field = if obj.at("/spec/parallelism") != old.at("/spec/parallelism") {
        "spec.parallelism"
    } else {
        "spec.completions"
    };
    Some(FieldError::new(
        field,
        format!(
            "lowering the pods this Job runs at once from {before} to {now} leaves its running gang below its minimum of {min} ({min_field}), which cannot follow: a started Job's pod template is immutable. The Job controller would delete pods down to {now}, the gang's remaining members would be evicted once its stale grace period passes, and the Job would then wait for members that are never created. Keep it at {min} or more, or delete the Job and create it again with the smaller gang"
        ),
    ))
}

/// A workload's KAI placement annotations that its pod templates' own kube-gang topology
/// annotations override (ours win, as injection never overwrites them): each named once.
fn kai_levels_overridden(obj: &Value, shape: &crate::read::workload::WorkloadShape) -> Vec<String> {
    use crate::read::labels::{
        ANNOTATION_TOPOLOGY_PREFERRED, ANNOTATION_TOPOLOGY_REQUIRED, KAI_TOPOLOGY, KAI_TOPOLOGY_PREFERRED,
        KAI_TOPOLOGY_REQUIRED,
    };
    let on_workload = |k: &str| {
        obj.at("/metadata/annotations")
            .and_then(|a| a.get(k))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    if on_workload(KAI_TOPOLOGY).is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (kai, ours) in [
        (KAI_TOPOLOGY_REQUIRED, ANNOTATION_TOPOLOGY_REQUIRED),
        (KAI_TOPOLOGY_PREFERRED, ANNOTATION_TOPOLOGY_PREFERRED),
    ] {
        let Some(level) = on_workload(kai) else { continue };
        let overridden = shape.roles.iter().find_map(|r| {
            let set = obj.at(&format!("{}/metadata/annotations", r.template))?.get(ours)?.as_str()?;
            (set != level).then(|| (r.template.trim_start_matches('/').replace('/', "."), set.to_string()))
        });
        if let Some((template, set)) = overridden {
            out.push(format!(
                "metadata.annotations[{kai}]: {level:?} is not used: {template}.metadata.annotations[{ours}] sets {set:?}"
            ));
        }
    }
    out
}

/// KAI's workload labels, as KAI's pod grouper reads them into the PodGroup it makes:
/// `kai.scheduler/preemptibility` is the gang's (copied to the templates at admission, over a
/// template's own: `admit` says so; refused unless a value KAI knows);
/// KAI's `priorityClassName` label is not a pod's priority, said as a warning.
fn kai_labels(obj: &Value, v: &mut Findings) {
    use crate::read::labels::{KAI_PREEMPTIBILITY, KAI_PRIORITY_CLASS};
    let label = |k: &str| {
        obj.at("/metadata/labels").and_then(|l| l.get(k)).and_then(Value::as_str).filter(|v| !v.is_empty())
    };
    if let Some(value) = label(KAI_PREEMPTIBILITY) {
        let path = format!("metadata.labels[{KAI_PREEMPTIBILITY}]");
        if let Err(e) = crate::read::dialect::kai::preemptibility(&path, value) {
            v.errors.push(e);
        }
    }
    if let Some(class) = label(KAI_PRIORITY_CLASS) {
        v.warnings.push(format!(
            "metadata.labels[{KAI_PRIORITY_CLASS}]: {class:?} is not used: KAI's pod grouper gives this class to the PodGroup it makes; a kube-gang gang's priority is its pods' (set spec.priorityClassName in the pod template)"
        ));
    }
}

/// The rules a pod's annotation gang gets at admission (timeout, topology key, gang group, every
/// annotation parsed: `validate_pod`), on the pod a workload's template makes, under the
/// template's path (`spec.template.metadata.annotations[kube-gang.io/timeout]`): the controller's
/// pods would be created with them, and each pod's gang would be refused or time out at once.
/// `min-member` is left to the workload's own check, which knows the workload's pod count.
fn template_gang_errors(template: &Value, namespace: &str, path: &str, v: &mut Findings) {
    let min_member = format!("metadata.annotations[{}]", crate::read::labels::ANNOTATION_MIN_MEMBER);
    let (claims, _) = crate::read::dialect::template_claims_all(template, namespace);
    let under = |e: FieldError| FieldError::new(format!("{path}.{}", e.path), e.message);
    v.warnings
        .extend(crate::read::dialect::upstream_conflicts(&claims).into_iter().map(|w| format!("{path}.{w}")));
    for c in &claims {
        v.warnings.extend(
            crate::read::dialect::template_topology_warnings(c, template, namespace)
                .into_iter()
                .map(|w| format!("{path}.{w}")),
        );
        match crate::read::dialect::template_annotation_gang(c, template, namespace) {
            Some(Ok(g)) => {
                for e in gang_tree_errors(&g).into_iter().filter(|e| e.path != "spec.minMember") {
                    v.errors.push(under(FieldError::new(annotation_field(c.dialect, &e.path), e.message)));
                }
            }
            Some(Err(errors)) => {
                v.errors.extend(errors.into_iter().filter(|e| e.path != min_member).map(under))
            }
            None => {}
        }
    }
}

/// A Job's `spec.scheduling` (Kubernetes 1.37, `WorkloadWithJob`), as the API server validates
/// its policy (exactly one of `basic` and `gang`, `gang.minCount` at least 1 when given); with
/// `basic` the Job asks for its pods one by one, said since it opted in to a gang.
fn job_scheduling(obj: &Value, v: &mut Findings) {
    let Some(s) = crate::read::workload::job_scheduling(obj) else { return };
    let policy = s.get("schedulingPolicy");
    let set = |k: &str| policy.and_then(|p| p.get(k)).is_some_and(|x| !x.is_null());
    match (set("basic"), set("gang")) {
        (true, false) => v.warnings.push(
            "spec.scheduling.schedulingPolicy.basic: the Job asks its controller for pod-by-pod scheduling \
             (a basic PodGroup its pods name): no gang is injected, and its pods are placed one by one"
                .into(),
        ),
        (false, true) => {
            let parallelism = obj.pointer("/spec/parallelism").and_then(Value::as_i64).unwrap_or(1);
            if let Some(n) = policy.and_then(|p| p.pointer("/gang/minCount")).filter(|n| !n.is_null()) {
                match n.as_i64() {
                    Some(m) if m >= 1 && m <= parallelism.max(1) => {}
                    Some(m) if m >= 1 => v.errors.push(FieldError::new(
                        "spec.scheduling.schedulingPolicy.gang.minCount",
                        format!("Invalid value: {m}: must be less than or equal to spec.parallelism ({parallelism})"),
                    )),
                    _ => v.errors.push(FieldError::new(
                        "spec.scheduling.schedulingPolicy.gang.minCount",
                        format!("Invalid value: {n}: must be greater than or equal to 1"),
                    )),
                }
            }
        }
        _ => v.errors.push(FieldError::new(
            "spec.scheduling.schedulingPolicy",
            "Invalid value: exactly one of basic or gang must be set",
        )),
    }
    // The controller sets each pod's group: a template that sets one of its own is refused.
    if obj.pointer("/spec/template/spec/schedulingGroup").is_some_and(|g| !g.is_null()) {
        v.errors.push(FieldError::new(
            "spec.template.spec.schedulingGroup",
            "Forbidden: may not be set when spec.scheduling is set: the Job controller sets each pod's group",
        ));
    }
}

fn is_volcano_job(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some("Job")
        && obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| crate::read::dialect::group_of(v) == "batch.volcano.sh")
}

/// Whether any pod template of the workload names a gang, in any dialect.
fn has_gang_labels(obj: &Value) -> bool {
    let Some(Ok(shape)) = crate::read::workload::inspect(obj) else { return false };
    shape.roles.iter().any(|r| {
        obj.at(&r.template)
            .is_some_and(|t| !crate::read::workload::template_claims(t, &shape.namespace).is_empty())
    })
}

/// Rules between the old and new version of a gang: the subgroup tree of an existing gang is fixed
/// (its members' labels name it), so renaming or re-parenting subgroups is rejected.
fn update_errors(old: &Gang, new: &Gang) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let old_tree: BTreeMap<&str, Option<&str>> =
        old.subgroups.iter().map(|s| (s.name.as_str(), s.parent.as_deref())).collect();
    let new_tree: BTreeMap<&str, Option<&str>> =
        new.subgroups.iter().map(|s| (s.name.as_str(), s.parent.as_deref())).collect();
    if old_tree != new_tree {
        errors.push(FieldError::new(
            "spec.subGroups",
            "the subgroup tree (names and parents) is immutable: members are labelled with it; change minimums only, or delete and recreate the gang",
        ));
    }
    if old.mode != new.mode {
        errors.push(FieldError::new(
            "spec.mode",
            format!(
                "field is immutable (was \"{:?}\"): reservations already held follow the old mode; delete and recreate the gang",
                old.mode
            ),
        ));
    }
    errors
}

/// The rules on a gang's shape, on the canonical model: minimums, the subgroup tree (names, parents,
/// cycles, depth, reachability of every minimum), topology keys and the gang group. Paths are those of
/// the `Gang` CRD (`spec.subGroups[2].parent`); other dialects map them in their own validation.
///
/// The cost is linear in the number of subgroups (parents are found through a map, depths are
/// memoised), and the tree work stops at the first structural limit: more than [`MAX_SUBGROUPS`]
/// subgroups is one error and nothing else about the subgroups is examined; a tree deeper than
/// [`MAX_SUBGROUP_DEPTH`] or with a cycle is one error and the minimums are not evaluated.
pub fn gang_tree_errors(gang: &Gang) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if gang.min_member < 1 {
        errors.push(FieldError::new("spec.minMember", "must be at least 1"));
    }
    if gang.subgroups.len() > MAX_SUBGROUPS {
        errors.push(FieldError::new(
            "spec.subGroups",
            format!("has {} subgroups; at most {MAX_SUBGROUPS} are allowed", gang.subgroups.len()),
        ));
    } else {
        subgroup_errors(gang, &mut errors);
    }
    if let Some(key) = &gang.topology_key
        && let Err(e) = check_label_key(key)
    {
        errors.push(FieldError::new("spec.topologyKey", e));
    }
    if let Some(key) = &gang.topology_preferred
        && let Err(e) = check_label_key(key)
    {
        errors.push(FieldError::new("spec.topology.preferred", e));
    }
    if let Some(e) = gang.timeout.and_then(timeout_error) {
        errors.push(FieldError::new("spec.scheduleTimeoutSeconds", e));
    }
    for (i, other) in gang.gang_group.iter().enumerate() {
        if other == &gang.key {
            errors.push(FieldError::new(
                format!("spec.gangGroup[{i}]"),
                "a gang cannot name itself in its gang group",
            ));
        }
    }
    errors
}

/// The longest a gang may wait for its members: 30 days. A timeout beyond it is a mistake (a unit
/// slip) more often than a plan, and a gang that must wait longer is better recreated.
pub const MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// Why a gang timeout is out of range, if it is: zero times the gang out at once.
pub fn timeout_error(d: std::time::Duration) -> Option<String> {
    if d.is_zero() {
        Some("must be greater than 0: a zero timeout fails the gang the moment it starts waiting".into())
    } else if d > MAX_TIMEOUT {
        Some(format!("{} s exceeds the 30-day maximum ({} s)", d.as_secs(), MAX_TIMEOUT.as_secs()))
    } else {
        None
    }
}

/// The subgroup rules of [`gang_tree_errors`], on at most [`MAX_SUBGROUPS`] subgroups.
fn subgroup_errors(gang: &Gang, errors: &mut Vec<FieldError>) {
    let subgroups = &gang.subgroups;
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, s) in subgroups.iter().enumerate() {
        let path = format!("spec.subGroups[{i}]");
        if let Err(e) = crate::read::dialect::check_dns_label(&s.name) {
            errors.push(FieldError::new(format!("{path}.name"), e));
        }
        if let Some(&first) = index.get(s.name.as_str()) {
            errors.push(FieldError::new(
                format!("{path}.name"),
                format!("duplicate subgroup name {:?} (also spec.subGroups[{first}])", s.name),
            ));
        } else {
            index.insert(&s.name, i);
        }
        // (Volcano's tasks and groups may need none: `minTaskMember` 0, `minSubGroups` 0.)
        if s.min_member < 1 && !gang.subgroups_may_need_none() {
            errors.push(FieldError::new(format!("{path}.minMember"), "must be at least 1"));
        }
        if let Some(key) = &s.topology_key
            && let Err(e) = check_label_key(key)
        {
            errors.push(FieldError::new(format!("{path}.topologyKey"), e));
        }
        if let Some(key) = &s.topology_preferred
            && let Err(e) = check_label_key(key)
        {
            errors.push(FieldError::new(format!("{path}.topology.preferred"), e));
        }
    }
    // Each subgroup's parent as an index (None: top level).
    let mut parents: Vec<Option<usize>> = Vec::with_capacity(subgroups.len());
    let mut tree_ok = true;
    for (i, s) in subgroups.iter().enumerate() {
        let Some(parent) = &s.parent else {
            parents.push(None);
            continue;
        };
        let path = format!("spec.subGroups[{i}].parent");
        if parent == &s.name {
            errors.push(FieldError::new(path, format!("subgroup {:?} names itself as parent", s.name)));
            tree_ok = false;
        } else if !index.contains_key(parent.as_str()) {
            errors
                .push(FieldError::new(path, format!("not found: {parent:?} is not a subgroup of this gang")));
            tree_ok = false;
        }
        parents.push(index.get(parent.as_str()).copied());
    }
    if !tree_ok {
        return;
    }
    // Depth of every subgroup (1 for top level), each computed once: a walk up stops at the first
    // subgroup whose depth is known, so the whole pass is linear. A walk that meets itself is a cycle.
    const ON_PATH: usize = usize::MAX;
    let mut depth = vec![0usize; subgroups.len()];
    let mut path = Vec::new();
    for start in 0..subgroups.len() {
        let mut cur = Some(start);
        let mut base = 0;
        while let Some(i) = cur {
            match depth[i] {
                0 => {
                    depth[i] = ON_PATH;
                    path.push(i);
                    cur = parents[i];
                }
                ON_PATH => {
                    errors.push(FieldError::new(
                        format!("spec.subGroups[{i}].parent"),
                        format!("subgroup {:?} is part of a parent cycle", subgroups[i].name),
                    ));
                    return;
                }
                d => {
                    base = d;
                    cur = None;
                }
            }
        }
        for &i in path.iter().rev() {
            base += 1;
            depth[i] = base;
        }
        path.clear();
        if depth[start] > MAX_SUBGROUP_DEPTH {
            errors.push(FieldError::new(
                format!("spec.subGroups[{start}].parent"),
                format!(
                    "subgroup {:?} is nested {} levels deep; at most {MAX_SUBGROUP_DEPTH} are allowed",
                    subgroups[start].name, depth[start]
                ),
            ));
            return;
        }
    }
    let mut children = vec![0usize; subgroups.len()];
    let mut top = 0usize;
    for p in &parents {
        match p {
            Some(p) => children[*p] += 1,
            None => top += 1,
        }
    }
    if !subgroups.is_empty() && u64::from(gang.min_member) > top as u64 {
        errors.push(FieldError::new(
            "spec.minMember",
            format!(
                "counts satisfied top-level subgroups when subgroups are set: {} can never be satisfied by {top} top-level subgroup(s)",
                gang.min_member
            ),
        ));
    }
    for (i, s) in subgroups.iter().enumerate() {
        let n = children[i];
        if n > 0 && u64::from(s.min_member) > n as u64 {
            errors.push(FieldError::new(
                format!("spec.subGroups[{i}].minMember"),
                format!(
                    "counts satisfied child subgroups: {} can never be satisfied by {n} child subgroup(s)",
                    s.min_member
                ),
            ));
        }
    }
    if let (Some(total), Some(min)) = (gang.total_member, gang.min_pods())
        && min > u64::from(total)
    {
        errors.push(FieldError::new(
            "spec.minMember",
            format!("needs at least {min} pods but the gang expects only {total} members: it can never be satisfied"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A time limit backfill cannot read is refused on any pod, gang or not, by name (the
    /// scheduler would read it as none).
    /// `kube-gang.io/elastic-step` is read on a CRD-less gang's pods and on a `Gang`, and a value
    /// it cannot be is refused by name.
    #[test]
    fn an_elastic_step_is_one_power_of_two_or_a_multiple() {
        use crate::read::model::ElasticStep;
        assert_eq!(ElasticStep::parse("MultipleOf:3"), Ok(ElasticStep::MultipleOf(3)));
        for bad in ["MultipleOf:0", "MultipleOf:", "Twice", "powerOfTwo"] {
            assert!(ElasticStep::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(ElasticStep::PowerOfTwo.most(3, 7), 4);
        assert_eq!(ElasticStep::PowerOfTwo.most(3, 3), 3, "never below the minimum");
        assert_eq!(ElasticStep::MultipleOf(4).most(2, 11), 8);
        assert_eq!(ElasticStep::One.most(2, 5), 5);
        let pod = |step: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "p", "namespace": "ml",
                                "labels": {"kube-gang.io/gang": "g"},
                                "annotations": {"kube-gang.io/min-member": "2", "kube-gang.io/elastic-step": step}},
                   "spec": {"containers": [{"name": "c", "image": "x"}]}})
        };
        let path = "metadata.annotations[kube-gang.io/elastic-step]";
        let found = validate(&pod("Twice"), None);
        assert!(found.errors.iter().any(|e| e.path == path), "{:?}", found.errors);
        assert!(validate(&pod("PowerOfTwo"), None).errors.is_empty());
        let gang = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
                          "metadata": {"name": "g", "namespace": "ml", "annotations": {"kube-gang.io/elastic-step": "MultipleOf:x"}},
                          "spec": {"minMember": 2}});
        let found = validate(&gang, None);
        assert!(found.errors.iter().any(|e| e.path == path), "{:?}", found.errors);
    }

    #[test]
    fn a_malformed_time_limit_on_a_pod_is_refused_by_name() {
        let pod = |limit: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "p", "namespace": "ml", "annotations": {"kube-gang.io/time-limit": limit}},
                   "spec": {"containers": [{"name": "c", "image": "x"}]}})
        };
        let path = "metadata.annotations[kube-gang.io/time-limit]";
        for bad in ["2 hours", "0s", "9000h"] {
            let found = validate(&pod(bad), None);
            assert!(found.errors.iter().any(|e| e.path == path), "{bad}: {:?}", found.errors);
        }
        assert!(validate(&pod("90m"), None).errors.is_empty());
    }

    #[test]
    fn a_templates_gang_annotations_are_checked_at_workload_admission_under_the_templates_path() {
        let job = |annotations: Value| {
            json!({"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": "j", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
                   "spec": {"parallelism": 2, "template": {
                       "metadata": {"labels": {"kube-gang.io/gang": "j"}, "annotations": annotations},
                       "spec": {"containers": [{"name": "c"}]}}}})
        };
        let paths = |v: &Findings| v.errors.iter().map(|e| e.path.clone()).collect::<Vec<_>>();
        let base = "spec.template.metadata.annotations";
        let v = validate(
            &job(json!({"kube-gang.io/min-member": "2", "kube-gang.io/timeout": "0s",
                        "kube-gang.io/topology-key": "bad key/", "kube-gang.io/gang-group": "ml/j"})),
            None,
        );
        assert_eq!(
            paths(&v),
            [format!("{base}[kube-gang.io/gang-group][0]"),],
            "the gang group naming itself stops the gang being read: {v:?}"
        );
        let v = validate(
            &job(json!({"kube-gang.io/min-member": "2", "kube-gang.io/timeout": "0s",
                        "kube-gang.io/topology-key": "bad key/"})),
            None,
        );
        assert_eq!(
            paths(&v),
            [format!("{base}[kube-gang.io/topology-key]"), format!("{base}[kube-gang.io/timeout]")],
            "{v:?}"
        );
        assert!(v.errors[1].message.contains("greater than 0"), "{}", v.errors[1]);
        let v = validate(&job(json!({"kube-gang.io/min-member": "2", "kube-gang.io/timeout": "900h"})), None);
        assert_eq!(paths(&v), [format!("{base}[kube-gang.io/timeout]")], "over 30 days: {v:?}");
        let v = validate(&job(json!({"kube-gang.io/min-member": "2", "kube-gang.io/timeout": "soon"})), None);
        assert_eq!(paths(&v), [format!("{base}[kube-gang.io/timeout]")], "unparsable, once: {v:?}");
        let v = validate(&job(json!({"kube-gang.io/min-member": "x"})), None);
        assert_eq!(paths(&v), [format!("{base}[kube-gang.io/min-member]")], "said once: {v:?}");
        assert!(
            validate(&job(json!({"kube-gang.io/min-member": "2", "kube-gang.io/timeout": "10m"})), None)
                .is_ok()
        );
    }
}
