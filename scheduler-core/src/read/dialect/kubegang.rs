//! kube-gang's own dialect: the `kube-gang.io/v1alpha1` `Gang` CRD, or CRD-less gangs from pod
//! annotations (`kube-gang.io/min-member`, …); membership by label `kube-gang.io/gang`.

use std::time::Duration;

use serde_json::Value;

use super::{Claim, Meta, annotation_path, count_field, label_path, parse_count, parse_duration, typed};
use crate::read::crd;
use crate::read::error::FieldError;
use crate::read::labels::*;
use crate::read::model::{Dialect, Gang, GangKey, GangMode, GangState, Source, SubGroup, Time};

pub(crate) fn claim(meta: &Meta<'_>, _pod: &Value) -> Result<Option<Claim>, FieldError> {
    let (name, path) = match (meta.labels.get(LABEL_GANG), meta.annotations.get(ANNOTATION_GANG_FROM)) {
        (Some(name), _) => (name, label_path(LABEL_GANG)),
        (None, Some(from)) => match owner_name(meta, from)? {
            Some(name) => (name, annotation_path(ANNOTATION_GANG_FROM)),
            None => return Ok(None),
        },
        (None, None) => return Ok(None),
    };
    if name.is_empty() {
        return Err(FieldError::new(path, "must name a gang"));
    }
    if let Err(e) = crate::read::labels::check_label_value(name) {
        return Err(FieldError::new(path, e));
    }
    let dialect = if meta.annotations.contains_key(ANNOTATION_MIN_MEMBER) {
        Dialect::KubeGangAnnotations
    } else {
        Dialect::KubeGang
    };
    // LeaderWorkerSet: one gang per group, told apart by the group index the LWS controller writes.
    let lws = meta
        .labels
        .get(crate::read::labels::LWS_NAME)
        .zip(meta.labels.get(crate::read::labels::LWS_GROUP_INDEX));
    let gang = match lws {
        Some((lws_name, index)) if lws_name == name => {
            GangKey::new(meta.namespace, format!("{name}-{index}"))
        }
        _ => GangKey::new(meta.namespace, name),
    };
    // Exclusive placement (a JobSet's annotation gang): the pod's group is its child Job.
    let exclusive_job = (dialect == Dialect::KubeGangAnnotations
        && meta.annotations.contains_key(crate::read::labels::JOBSET_EXCLUSIVE_TOPOLOGY))
    .then(|| meta.labels.get(crate::read::labels::JOB_NAME))
    .flatten();
    Ok(Some(Claim {
        dialect,
        gang,
        subgroup: exclusive_job.or(meta.labels.get(LABEL_SUBGROUP)).map(|s| s.to_string()),
        path,
    }))
}

/// The name `kube-gang.io/gang-from: <label>` gives the pod's gang: the value of that label, which
/// the workload's controller writes on each pod it creates. `None` when the pod does not carry the
/// label (a pod made from the template by something else); an error when the annotation names a
/// label no controller we know writes a workload's name in.
fn owner_name<'m>(meta: &Meta<'m>, from: &str) -> Result<Option<&'m str>, FieldError> {
    if !crate::read::labels::GANG_FROM_LABELS.contains(&from) {
        return Err(FieldError::new(
            annotation_path(ANNOTATION_GANG_FROM),
            format!(
                "{from:?} is not a label a workload controller writes its workload's name in; one of: {}",
                crate::read::labels::GANG_FROM_LABELS.join(", ")
            ),
        ));
    }
    Ok(meta.labels.get(from))
}

/// Reads a `Gang` object (spec and the scheduler's persisted status).
pub fn read(obj: &Value) -> Result<Gang, Vec<FieldError>> {
    // Types and enums first, against the CRD's own schema, worded as the API server words them.
    static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let crd = SCHEMA.get_or_init(|| serde_json::to_value(crd::gang_crd()).unwrap_or(Value::Null));
    let mut errors = Vec::new();
    if let Some(schema) = crd.pointer("/spec/versions/0/schema/openAPIV3Schema") {
        for key in ["spec"] {
            if let (Some(s), Some(v)) = (schema.pointer(&format!("/properties/{key}")), obj.get(key)) {
                schema_errors(s, v, key, &mut errors);
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let g: crd::Gang = typed(obj)?;
    from_crd(&g)
}

/// Type and enum errors of `v` against an OpenAPI v3 `schema`, with exact paths and the API
/// server's wording (`spec.mode: Unsupported value: "Sometimes": supported values: "NonStrict",
/// "Strict"`).
fn schema_errors(schema: &Value, v: &Value, path: &str, out: &mut Vec<FieldError>) {
    if v.is_null() {
        return;
    }
    let type_name = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let actual = type_name(v);
    if let Some(want) = schema.get("type").and_then(Value::as_str) {
        let ok = want == actual || (want == "number" && actual == "integer");
        if !ok && schema.get("x-kubernetes-int-or-string").is_none() {
            out.push(FieldError::new(
                path,
                format!("Invalid value: \"{actual}\": {path} in body must be of type {want}: \"{actual}\""),
            ));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        let mut names: Vec<String> = allowed.iter().map(Value::to_string).collect();
        names.sort();
        out.push(FieldError::new(
            path,
            format!("Unsupported value: {v}: supported values: {}", names.join(", ")),
        ));
    }
    match v {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    if let Some(x) = map.get(k) {
                        schema_errors(sub, x, &format!("{path}.{k}"), out);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, x) in items.iter().enumerate() {
                    schema_errors(sub, x, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// The required and preferred keys of a gang or subgroup at `path`: `topology.required`, or
/// `topologyKey` (the same meaning; both set must agree), and `topology.preferred`.
fn topology_of(
    path: &str,
    key: Option<&String>,
    topology: Option<&crd::TopologySpec>,
    errors: &mut Vec<FieldError>,
) -> (Option<String>, Option<String>) {
    let required = topology.and_then(|t| t.required.as_ref());
    if let (Some(k), Some(r)) = (key, required)
        && k != r
    {
        errors.push(FieldError::new(
            format!("{path}.topology.required"),
            format!("{r:?} disagrees with {path}.topologyKey {k:?}: both name the required key; set one"),
        ));
    }
    (required.or(key).cloned(), topology.and_then(|t| t.preferred.clone()))
}

/// The canonical gang of a typed `Gang`.
pub fn from_crd(g: &crd::Gang) -> Result<Gang, Vec<FieldError>> {
    let meta = &g.metadata;
    let key = GangKey::new(
        meta.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or("default"),
        meta.name.as_deref().unwrap_or(""),
    );
    let spec = &g.spec;
    let mut errors = Vec::new();
    let min = count_field("spec.minMember", spec.min_member).map_err(|e| errors.push(e)).unwrap_or(0);
    let mut gang = Gang::new(key.clone(), min, Source { dialect: Dialect::KubeGang, kind: "Gang".into() });
    gang.created = meta.creation_timestamp.as_ref().map(Time::from_k8s).unwrap_or_default();
    gang.uid = meta.uid.clone().filter(|u| !u.is_empty());
    for (i, s) in spec.sub_groups.iter().enumerate() {
        gang.subgroups.push(SubGroup {
            name: s.name.clone(),
            parent: s.parent.clone(),
            min_member: count_field(&format!("spec.subGroups[{i}].minMember"), s.min_member)
                .map_err(|e| errors.push(e))
                .unwrap_or(0),
            pod_floor: 0,
            topology_preferred: None,
            topology_key: None,
        });
        let (required, preferred) = topology_of(
            &format!("spec.subGroups[{i}]"),
            s.topology_key.as_ref(),
            s.topology.as_ref(),
            &mut errors,
        );
        if let Some(last) = gang.subgroups.last_mut() {
            last.topology_key = required;
            last.topology_preferred = preferred;
        }
    }
    match super::min_resources("spec.minResources", spec.min_resources.as_ref()) {
        Ok(r) => gang.min_resources = r,
        Err(e) => errors.extend(e),
    }
    gang.mode = spec.mode.unwrap_or_default();
    gang.timeout = seconds("spec.scheduleTimeoutSeconds", spec.schedule_timeout_seconds, &mut errors);
    gang.stale_grace = seconds("spec.staleGracePeriodSeconds", spec.stale_grace_period_seconds, &mut errors);
    let (required, preferred) =
        topology_of("spec", spec.topology_key.as_ref(), spec.topology.as_ref(), &mut errors);
    gang.topology_key = required;
    gang.topology_preferred = preferred;
    for (i, s) in spec.gang_group.iter().enumerate() {
        match GangKey::parse(s, &key.namespace) {
            Some(k) => gang.gang_group.push(k),
            None => errors.push(FieldError::new(
                format!("spec.gangGroup[{i}]"),
                format!("{s:?} is not namespace/name"),
            )),
        }
    }
    if let Some(v) = meta.annotations.as_ref().and_then(|a| a.get(ANNOTATION_PROVISIONING)) {
        match opt_in(v) {
            Ok(b) => gang.provisioning = Some(b),
            Err(e) => errors.push(e),
        }
    }
    if let Some(v) = meta.annotations.as_ref().and_then(|a| a.get(ANNOTATION_ELASTIC_STEP)) {
        match crate::read::model::ElasticStep::parse(v) {
            Ok(s) => gang.elastic_step = Some(s),
            Err(e) => errors.push(FieldError::new(annotation_path(ANNOTATION_ELASTIC_STEP), e)),
        }
    }
    if let Some(v) = meta.annotations.as_ref().and_then(|a| a.get(ANNOTATION_TIME_LIMIT)) {
        match crate::read::duration::time_limit(v) {
            Ok(d) => gang.time_limit = Some(d),
            Err(e) => errors.push(FieldError::new(annotation_path(ANNOTATION_TIME_LIMIT), e)),
        }
    }
    if let Some(status) = &g.status {
        gang.state = state_of(status);
    }
    if errors.is_empty() { Ok(gang) } else { Err(errors) }
}

/// `kube-gang.io/provisioning`: `"true"` or `"false"`, as Kubernetes spells booleans in annotations.
fn opt_in(v: &str) -> Result<bool, FieldError> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(FieldError::new(
            annotation_path(ANNOTATION_PROVISIONING),
            format!("{other:?} is not \"true\" or \"false\""),
        )),
    }
}

fn seconds(path: &str, v: Option<i64>, errors: &mut Vec<FieldError>) -> Option<Duration> {
    let v = v?;
    match u64::try_from(v) {
        Ok(s) => Some(Duration::from_secs(s)),
        Err(_) => {
            errors.push(FieldError::new(path, format!("must not be negative, got {v}")));
            None
        }
    }
}

/// The scheduler state persisted in a Gang's status.
pub fn state_of(status: &crd::GangStatus) -> GangState {
    GangState {
        waiting_since: status.waiting_since.as_ref().map(Time::from_k8s),
        degraded_since: status.degraded_since.as_ref().map(Time::from_k8s),
        timeouts: u32::try_from(status.timeouts.unwrap_or(0)).unwrap_or(0),
        backoff_until: status.backoff_until.as_ref().map(Time::from_k8s),
        was_satisfied: status.was_satisfied.unwrap_or(false),
        failed: status.gave_up.unwrap_or(false),
        rev: 0,
    }
}

/// The reverse of [`state_of`]: writes `state` into a Gang's status, so that reading it back
/// gives the same state. Times are kept to the second, as the API server stores a `metav1.Time`
/// (what is written is then what is read back, and an unchanged state compares equal).
pub fn write_state(state: &GangState, status: &mut crd::GangStatus) {
    let time = |t: Option<Time>| t.map(|t| Time(t.0.div_euclid(1000).saturating_mul(1000)).to_k8s());
    status.waiting_since = time(state.waiting_since);
    status.degraded_since = time(state.degraded_since);
    status.timeouts = Some(i32::try_from(state.timeouts).unwrap_or(i32::MAX));
    status.backoff_until = time(state.backoff_until);
    status.was_satisfied = Some(state.was_satisfied);
    status.gave_up = Some(state.failed);
}

pub(crate) fn annotation_gang(meta: &Meta<'_>, claim: &Claim) -> Result<Gang, Vec<FieldError>> {
    let a = &meta.annotations;
    let mut errors = Vec::new();
    let min = match a.get(ANNOTATION_MIN_MEMBER) {
        Some(v) => {
            parse_count(&annotation_path(ANNOTATION_MIN_MEMBER), v).map_err(|e| errors.push(e)).unwrap_or(0)
        }
        None => 0,
    };
    let source = Source { dialect: Dialect::KubeGangAnnotations, kind: "Pod".into() };
    let mut gang = Gang::new(claim.gang.clone(), min, source);
    gang.created = meta.created();
    if let Some(v) = a.get(ANNOTATION_TOTAL_MEMBER) {
        match parse_count(&annotation_path(ANNOTATION_TOTAL_MEMBER), v) {
            Ok(n) => gang.total_member = Some(n),
            Err(e) => errors.push(e),
        }
    }
    match a.get(ANNOTATION_MODE) {
        None | Some("Strict") => {}
        Some("NonStrict") => gang.mode = GangMode::NonStrict,
        Some(other) => errors.push(FieldError::new(
            annotation_path(ANNOTATION_MODE),
            format!("{other:?} is not Strict or NonStrict"),
        )),
    }
    if let Some(v) = a.get(ANNOTATION_TIMEOUT) {
        match parse_duration(v) {
            Ok(d) => gang.timeout = Some(d),
            Err(e) => errors.push(FieldError::new(annotation_path(ANNOTATION_TIMEOUT), e)),
        }
    }
    if let Some(v) = a.get(ANNOTATION_TIME_LIMIT) {
        match crate::read::duration::time_limit(v) {
            Ok(d) => gang.time_limit = Some(d),
            Err(e) => errors.push(FieldError::new(annotation_path(ANNOTATION_TIME_LIMIT), e)),
        }
    }
    let key = a.get(ANNOTATION_TOPOLOGY_KEY);
    let required = a.get(crate::read::labels::ANNOTATION_TOPOLOGY_REQUIRED);
    if let (Some(k), Some(r)) = (key, required)
        && k != r
    {
        errors.push(FieldError::new(
            annotation_path(crate::read::labels::ANNOTATION_TOPOLOGY_REQUIRED),
            format!(
                "{r:?} disagrees with {ANNOTATION_TOPOLOGY_KEY} {k:?}: both name the required key; set one"
            ),
        ));
    }
    gang.topology_key = required.or(key).map(str::to_string);
    gang.topology_preferred = a.get(crate::read::labels::ANNOTATION_TOPOLOGY_PREFERRED).map(str::to_string);
    // The KAI Topology a KAI-annotated workload names (copied to its templates at admission):
    // the order of the gang's levels, as in the PodGroup KAI's pod grouper would make.
    if gang.topology_key.is_some() || gang.topology_preferred.is_some() {
        gang.topology_object =
            a.get(crate::read::labels::KAI_TOPOLOGY).filter(|t| !t.is_empty()).map(Box::from);
    }
    // Kueue's TAS levels, set on the pod template of a workload of one PodSet, are its gang's (a
    // workload of several PodSets sets them per role: `kueue_topology_warnings`). Ours win.
    if gang.topology_key.is_none()
        && gang.topology_preferred.is_none()
        && meta.labels.get(LABEL_SUBGROUP).is_none()
    {
        let kueue = |k: &str| a.get(k).filter(|v| !v.is_empty()).map(str::to_string);
        gang.topology_key = kueue(crate::read::labels::KUEUE_PODSET_REQUIRED_TOPOLOGY);
        gang.topology_preferred = kueue(crate::read::labels::KUEUE_PODSET_PREFERRED_TOPOLOGY);
    }
    // Under JobSet's node-selector strategy the nodes, labelled and tainted per child Job, keep
    // the Jobs apart: nothing for the scheduler to enforce.
    if let Some(v) = a.get(crate::read::labels::JOBSET_EXCLUSIVE_TOPOLOGY).filter(|v| !v.is_empty())
        && a.get(crate::read::labels::JOBSET_NODE_SELECTOR_STRATEGY).is_none()
    {
        gang.exclusive_topology = Some(v.to_string());
    }
    if let Some(v) = a.get(ANNOTATION_PROVISIONING) {
        match opt_in(v) {
            Ok(b) => gang.provisioning = Some(b),
            Err(e) => errors.push(e),
        }
    }
    if let Some(v) = a.get(ANNOTATION_ELASTIC_STEP) {
        match crate::read::model::ElasticStep::parse(v) {
            Ok(s) => gang.elastic_step = Some(s),
            Err(e) => errors.push(FieldError::new(annotation_path(ANNOTATION_ELASTIC_STEP), e)),
        }
    }
    // KAI's label, on the pods or copied from their workload at admission, as KAI's pod grouper
    // reads it into the PodGroup it would make.
    if let Some(v) = meta.labels.get(KAI_PREEMPTIBILITY).filter(|v| !v.is_empty()) {
        match super::kai::preemptibility(&label_path(KAI_PREEMPTIBILITY), v) {
            Ok(d) => gang.disruption = d,
            Err(e) => errors.push(e),
        }
    }
    if let Some(v) = a.get(ANNOTATION_GANG_GROUP) {
        for (i, s) in v.split(',').map(str::trim).filter(|s| !s.is_empty()).enumerate() {
            match GangKey::parse(s, meta.namespace) {
                Some(k) if k != claim.gang => gang.gang_group.push(k),
                Some(_) => errors.push(FieldError::new(
                    format!("{}[{i}]", annotation_path(ANNOTATION_GANG_GROUP)),
                    "a gang cannot name itself in its gang group",
                )),
                None => errors.push(FieldError::new(
                    format!("{}[{i}]", annotation_path(ANNOTATION_GANG_GROUP)),
                    format!("{s:?} is not namespace/name"),
                )),
            }
        }
    }
    if errors.is_empty() { Ok(gang) } else { Err(errors) }
}

/// What a pod's Kueue topology annotations ask that its gang does not take, each naming the
/// annotation: slices (`podset-slice-*`), PodSet groups, levels set per role of a workload of
/// several PodSets, and Kueue's levels where kube-gang's own say otherwise.
pub(crate) fn kueue_topology_warnings(meta: &Meta<'_>) -> Vec<String> {
    use crate::read::labels::*;
    let a = &meta.annotations;
    let mut out = Vec::new();
    let ours = a.get(ANNOTATION_TOPOLOGY_REQUIRED).or(a.get(ANNOTATION_TOPOLOGY_KEY)).is_some()
        || a.get(ANNOTATION_TOPOLOGY_PREFERRED).is_some();
    for key in [KUEUE_PODSET_REQUIRED_TOPOLOGY, KUEUE_PODSET_PREFERRED_TOPOLOGY] {
        let Some(level) = a.get(key).filter(|v| !v.is_empty()) else { continue };
        let path = annotation_path(key);
        if ours {
            out.push(format!(
                "{path}: {level:?} is not used: the kube-gang.io topology annotations set the gang's levels"
            ));
        } else if let Some(role) = meta.labels.get(LABEL_SUBGROUP) {
            out.push(format!(
                "{path}: {level:?} is not evaluated: it asks it of the pods of role {role:?} alone (one Kueue PodSet of several), and a role's own level is not read from Kueue's annotations yet; set kube-gang.io/topology-required on the workload to hold the whole gang to one domain"
            ));
        }
    }
    for key in [KUEUE_PODSET_SLICE_REQUIRED_TOPOLOGY, KUEUE_PODSET_SLICE_CONSTRAINTS, KUEUE_PODSET_GROUP_NAME]
    {
        if let Some(v) = a.get(key) {
            out.push(format!(
                "{}: {v:?} is not evaluated: slices and PodSet groups are not modelled (the gang's pods are placed by its own levels)",
                annotation_path(key)
            ));
        }
    }
    out
}

#[cfg(test)]
mod kueue_topology_tests {
    use serde_json::json;

    use crate::read::dialect::{annotation_gang, pod_claims, topology_warnings};

    fn pod(labels: Value, annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "w-0", "namespace": "ml", "labels": labels, "annotations": annotations}})
    }

    use serde_json::Value;

    fn read(p: &Value) -> (Option<String>, Option<String>, Vec<String>) {
        let claims = pod_claims(p).unwrap();
        let g = annotation_gang(&claims[0], p).unwrap().unwrap();
        (g.topology_key, g.topology_preferred, topology_warnings(&claims[0], p))
    }

    #[test]
    fn kueues_levels_are_the_gangs_when_the_pod_is_its_workloads_one_podset() {
        let p = pod(
            json!({"kube-gang.io/gang": "job"}),
            json!({"kube-gang.io/min-member": "2", "kueue.x-k8s.io/podset-required-topology": "cloud/block",
                   "kueue.x-k8s.io/podset-preferred-topology": "cloud/rack"}),
        );
        assert_eq!(read(&p), (Some("cloud/block".into()), Some("cloud/rack".into()), vec![]));
    }

    #[test]
    fn kube_gangs_own_levels_win_and_kueues_are_said_unused() {
        let p = pod(
            json!({"kube-gang.io/gang": "job"}),
            json!({"kube-gang.io/min-member": "2", "kube-gang.io/topology-required": "zone",
                   "kueue.x-k8s.io/podset-required-topology": "cloud/block"}),
        );
        let (required, preferred, warnings) = read(&p);
        assert_eq!((required.as_deref(), preferred), (Some("zone"), None));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with("metadata.annotations[kueue.x-k8s.io/podset-required-topology]"));
    }

    #[test]
    fn a_roles_level_and_slices_are_warned_about_not_applied_to_the_whole_gang() {
        let p = pod(
            json!({"kube-gang.io/gang": "js", "kube-gang.io/subgroup": "workers"}),
            json!({"kube-gang.io/min-member": "2", "kueue.x-k8s.io/podset-required-topology": "cloud/rack",
                   "kueue.x-k8s.io/podset-slice-required-topology": "kubernetes.io/hostname",
                   "kueue.x-k8s.io/podset-slice-size": "2"}),
        );
        let (required, _, warnings) = read(&p);
        assert_eq!(required, None, "a role's level is not the whole gang's");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("role \"workers\""), "{warnings:?}");
        assert!(warnings[1].contains("podset-slice-required-topology"), "{warnings:?}");
    }

    #[test]
    fn a_gang_objects_pods_kueue_levels_are_said_unused() {
        let p = pod(
            json!({"scheduling.x-k8s.io/pod-group": "pg"}),
            json!({"kueue.x-k8s.io/podset-required-topology": "cloud/rack"}),
        );
        let claims = pod_claims(&p).unwrap();
        let warnings = topology_warnings(&claims[0], &p);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("levels are its"), "{warnings:?}");
    }
}
