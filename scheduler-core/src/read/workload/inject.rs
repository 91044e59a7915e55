//! Injection: the gang labels, annotations and `schedulerName` admission adds to an opted-in
//! workload's pod templates, as a list of changes read without copying the object.

use super::*;

/// One field admission adds to an object: a JSON Patch `add` of `value` at `path` (an RFC 6901
/// pointer whose parent exists in the object it was computed for). Adding at a member that exists
/// replaces it; injection only does so for a `null`, for a `schedulerName` left to the default,
/// and for a template's `kai.scheduler/preemptibility` label its workload's own overrides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub value: Value,
}

impl Change {
    /// Applies the change to `obj`, which must be the object it was computed for (or that object
    /// with earlier changes of the same list applied). Returns false when the parent is missing.
    pub fn apply(&self, obj: &mut Value) -> bool {
        let Some((parent, token)) = self.path.rsplit_once('/') else { return false };
        let Some(map) = obj.pointer_mut(parent).and_then(Value::as_object_mut) else { return false };
        map.insert(token.replace("~1", "/").replace("~0", "~"), self.value.clone());
        true
    }
}

/// `key` escaped as one token of a JSON pointer.
fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// True when injection may write a member: it is absent or `null`.
fn vacant(v: Option<&Value>) -> bool {
    v.is_none_or(Value::is_null)
}

/// The changes that put `entries` into the map at `keys` under `at` (pointer `base`): the whole map
/// when it is absent, else each entry the user did not set. What the user set is never overwritten;
/// a non-map in the way leaves that part alone.
fn add_entries(at: &Value, base: &str, keys: &[&str], entries: &[(&str, String)], out: &mut Vec<Change>) {
    let mut cur = at;
    let mut path = base.to_string();
    for (depth, key) in keys.iter().enumerate() {
        let Some(map) = cur.as_object() else { return };
        path.push('/');
        path.push_str(&token(key));
        match map.get(*key) {
            Some(next) if !next.is_null() => cur = next,
            _ => {
                // Absent from here down: one change adds the rest of the path with every entry.
                let mut value: Value =
                    entries.iter().map(|(k, v)| ((*k).to_string(), Value::String(v.clone()))).collect();
                for k in keys[depth + 1..].iter().rev() {
                    value = Value::Object(std::iter::once(((*k).to_string(), value)).collect());
                }
                out.push(Change { path, value });
                return;
            }
        }
    }
    let Some(map) = cur.as_object() else { return };
    for (k, v) in entries {
        if vacant(map.get(*k)) {
            out.push(Change { path: format!("{path}/{}", token(k)), value: Value::String(v.clone()) });
        }
    }
}

/// The change that writes our `schedulerName` into the pod spec at `spec` (pointer `base`), unless
/// the user chose a scheduler other than the default.
fn add_scheduler(template: &Value, base: &str, out: &mut Vec<Change>) {
    let Some(map) = template.as_object() else { return };
    let name = Value::String(crate::read::labels::SCHEDULER_NAME.into());
    match map.get("spec") {
        None | Some(Value::Null) => out.push(Change {
            path: format!("{base}/spec"),
            value: Value::Object(std::iter::once(("schedulerName".to_string(), name)).collect()),
        }),
        Some(Value::Object(spec)) => {
            let current = spec.get("schedulerName").and_then(Value::as_str);
            if current.is_none_or(|s| s.is_empty() || s == DEFAULT_SCHEDULER) {
                out.push(Change { path: format!("{base}/spec/schedulerName"), value: name });
            }
        }
        Some(_) => {}
    }
}

/// What injection adds to `obj`, as changes (the webhook's JSON Patch; [`inject`] applies them):
/// the gang label, `min-member` and `total-member` annotations, subgroup labels and `schedulerName`
/// in every pod template (workloads), or the missing `schedulerName` (pods that claim a gang in any
/// dialect). Reads the object without copying it; never overwrites what the user set; empty for
/// other kinds and for an object already injected.
pub fn injection(obj: &Value) -> Result<Vec<Change>, Vec<FieldError>> {
    injection_of(obj, false)
}

/// [`injection`] of an object whose name the caller knows was known to mutating admission (an
/// UPDATE: the object exists), whatever its `generateName` says.
pub fn injection_named(obj: &Value) -> Result<Vec<Change>, Vec<FieldError>> {
    injection_of(obj, true)
}

/// Whether Kueue's mutating webhook creates `obj` suspended: a `batch/v1` Job submitted to a
/// queue (label `kueue.x-k8s.io/queue-name`, or the annotation of the same name Kueue still
/// reads) that no controller owns (a Job owned by a workload Kueue manages is that workload's to
/// suspend): Kueue's `jobframework` `WorkloadShouldBeSuspended` on create. Such a Job gets its gang
/// in the update by which Kueue admits (unsuspends) it, as one created suspended does.
pub fn kueue_suspends(obj: &Value) -> bool {
    let is_job = obj.get("kind").and_then(Value::as_str) == Some("Job")
        && obj.get("apiVersion").and_then(Value::as_str) == Some("batch/v1");
    let queued = ["/metadata/labels", "/metadata/annotations"].iter().any(|at| {
        obj.at(at)
            .and_then(|m| m.get(crate::read::labels::KUEUE_QUEUE_NAME))
            .and_then(Value::as_str)
            .is_some_and(|q| !q.is_empty())
    });
    let owned = obj
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| r.get("controller").and_then(Value::as_bool) == Some(true)));
    is_job && queued && !owned
}

/// True when an UPDATE may still change the labels and annotations of the Job's pod template:
/// the old Job is suspended and has never started (`status.startTime` unset). Kubernetes allows
/// it then (`pkg/registry/batch/job/strategy.go`: `AllowMutableSchedulingDirectives = suspended &&
/// notStarted`; `validatePodTemplateUpdate`: labels, annotations, node selector,
/// affinity, tolerations and scheduling gates of a suspended Job that never ran; not
/// `schedulerName`) — the update in which Kueue admits a Job.
pub fn template_still_mutable(old: &Value, new: &Value) -> bool {
    let job = |o: &Value| {
        o.get("kind").and_then(Value::as_str) == Some("Job")
            && o.get("apiVersion").and_then(Value::as_str) == Some("batch/v1")
    };
    job(old)
        && job(new)
        && old.at("/spec/suspend").and_then(Value::as_bool) == Some(true)
        && old.at("/status/startTime").is_none_or(Value::is_null)
}

fn injection_of(obj: &Value, name_known: bool) -> Result<Vec<Change>, Vec<FieldError>> {
    let mut out = Vec::new();
    if obj.get("kind").and_then(Value::as_str) == Some("Pod")
        && obj.get("apiVersion").and_then(Value::as_str) == Some("v1")
    {
        if !crate::read::dialect::pod_claims(obj)?.is_empty() {
            add_scheduler(obj, "", &mut out);
        }
        return Ok(out);
    }
    let Some(shape) = inspect(obj) else { return Ok(out) };
    let mut shape = shape?;
    if name_known {
        shape.named_late = false;
    }
    if shape.volcano() {
        // Volcano's scheduler name on a vcjob is replaced too: the job is opted in to ours.
        let current = obj.at("/spec/schedulerName").and_then(Value::as_str);
        if current == Some("volcano") {
            out.push(Change {
                path: "/spec/schedulerName".into(),
                value: Value::String(crate::read::labels::SCHEDULER_NAME.into()),
            });
        } else {
            add_scheduler(obj, "", &mut out);
        }
    }
    let with_roles = shape.roles.len() > 1;
    let total = shape.total_member();
    let annotations =
        [(ANNOTATION_MIN_MEMBER, shape.min_member.to_string()), (ANNOTATION_TOTAL_MEMBER, total.to_string())];
    for role in &shape.roles {
        let Some(template) = obj.at(&role.template) else { continue };
        if shape.kind == "Job" && shape.volcano() {
            // Volcano's controller makes the PodGroup and annotates each pod with it: the gang is
            // Volcano's own. Only the scheduler is ours to set, on the job (pods inherit it).
            break;
        }
        // A Job whose `spec.scheduling` its controller compiles into an upstream PodGroup: its
        // pods name that one.
        if job_scheduling(obj).is_some() {
            add_scheduler(template, &role.template, &mut out);
            continue;
        }
        let claims = template_claims(template, &shape.namespace);
        let named_elsewhere = claims.iter().any(|c| {
            !matches!(
                c.dialect,
                crate::read::model::Dialect::KubeGang | crate::read::model::Dialect::KubeGangAnnotations
            )
        });
        // Its pods already name their gang (any dialect): never a second one. A workload whose name
        // mutating admission does not know names no gang of its own either.
        if named_elsewhere || (shape.named_late && !claims.is_empty()) {
            add_scheduler(template, &role.template, &mut out);
            continue;
        }
        // A workload named after admission: its gang is named after it on each pod, from the
        // label its controller writes its name in (`late_name_label`); a kind with no such label
        // gets nothing (`unnamed_gang` warns).
        let from = match shape.named_late {
            false => None,
            true => match late_name_label(obj, &shape) {
                Some(label) => Some(label),
                None => continue,
            },
        };
        let mut labels = match from {
            None => vec![(LABEL_GANG, label_value_for(&shape.name))],
            Some(_) => Vec::new(),
        };
        let mut annotations = annotations.to_vec();
        if let Some(label) = from {
            annotations.push((ANNOTATION_GANG_FROM, label.to_string()));
        }
        // KAI's levels, where the template sets none of its own; its Topology with them.
        if let Some((topology, levels)) = kai_levels(obj) {
            let own = |k: &str| template.at("/metadata/annotations").and_then(|a| a.get(k)).is_some();
            let levels: Vec<_> = levels.into_iter().filter(|(k, _)| !own(k)).collect();
            if !levels.is_empty() {
                annotations.extend(levels);
                annotations.push((crate::read::labels::KAI_TOPOLOGY, topology));
            }
        }
        // The workload's own time limit, else a Job's deadline (it bounds its pods' run): their
        // time limit, for backfill.
        let own_limit = obj
            .at("/metadata/annotations")
            .and_then(|a| a.get(crate::read::labels::ANNOTATION_TIME_LIMIT))
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(limit) = own_limit.or_else(|| job_deadline(obj, &shape, &role.template)) {
            annotations.push((crate::read::labels::ANNOTATION_TIME_LIMIT, limit));
        }
        if with_roles && !role.name.is_empty() {
            labels.push((LABEL_SUBGROUP, label_value_for(&role.name)));
        }
        // KAI's preemptibility, stated on the workload: its pods' too — over the template's own,
        // as KAI's pod grouper reads the top owner's label before the pod's (`validate` names a
        // template it overrides).
        if let Some(v) = kai_preemptibility(obj) {
            let key = crate::read::labels::KAI_PREEMPTIBILITY;
            let own = template.at("/metadata/labels").and_then(|l| l.get(key));
            match own.and_then(Value::as_str) {
                Some(o) if o != v => out.push(Change {
                    path: format!("{}/metadata/labels/{}", role.template, token(key)),
                    value: Value::String(v.to_string()),
                }),
                _ => labels.push((key, v.to_string())),
            }
        }
        // Labels and annotations share `metadata`: when it is absent, one change adds both.
        if template.as_object().is_some_and(|t| vacant(t.get("metadata"))) {
            let map = |entries: &[(&str, String)]| -> Value {
                entries.iter().map(|(k, v)| ((*k).to_string(), Value::String(v.clone()))).collect()
            };
            let metadata: Value =
                [("labels".to_string(), map(&labels)), ("annotations".to_string(), map(&annotations))]
                    .into_iter()
                    .collect();
            out.push(Change { path: format!("{}/metadata", role.template), value: metadata });
        } else {
            add_entries(template, &role.template, &["metadata", "labels"], &labels, &mut out);
            add_entries(template, &role.template, &["metadata", "annotations"], &annotations, &mut out);
        }
        add_scheduler(template, &role.template, &mut out);
    }
    Ok(out)
}

/// The time limit a Job's `spec.activeDeadlineSeconds` gives the pods of the template at
/// `template` (a Job's, or a JobSet's child Job's): `"{n}s"`, written as
/// `kube-gang.io/time-limit` unless the template states its own. The Job controller ends every
/// pod once the deadline passes (counted from the Job's start, so no pod runs longer).
fn job_deadline(obj: &Value, shape: &WorkloadShape, template: &str) -> Option<String> {
    if !matches!(shape.kind.as_str(), "Job" | "JobSet") {
        return None;
    }
    let job = template.strip_suffix("/template")?;
    let secs = obj.at(&format!("{job}/activeDeadlineSeconds"))?.as_i64().filter(|&n| n > 0)?;
    Some(format!("{secs}s"))
}

/// What injection overrides of a template's own `kai.scheduler/preemptibility` label (the
/// workload's wins, as KAI's pod grouper reads the top owner's label first), as a warning naming
/// the first such template. For admission, before the changes are applied.
pub fn kai_preemptibility_overridden(obj: &Value, shape: &WorkloadShape) -> Option<String> {
    let key = crate::read::labels::KAI_PREEMPTIBILITY;
    let value = kai_preemptibility(obj)?;
    shape.roles.iter().find_map(|r| {
        let set = obj.at(&format!("{}/metadata/labels", r.template))?.get(key)?.as_str()?;
        (set != value).then(|| {
            format!(
                "{}.metadata.labels[{key}]: {set:?} is overridden by the workload's {value:?} (metadata.labels[{key}]), as KAI's pod grouper reads the top owner's label first",
                super::path_of(&r.template)
            )
        })
    })
}

/// The workload's own `kai.scheduler/preemptibility` label, if it states one.
pub(crate) fn kai_preemptibility(obj: &Value) -> Option<&str> {
    obj.at("/metadata/labels")
        .and_then(|l| l.get(crate::read::labels::KAI_PREEMPTIBILITY))
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
}

/// What a workload's KAI topology annotations become on its templates, as KAI's pod grouper
/// turns them into its PodGroup's `topologyConstraint`: the Topology named (kept under KAI's own
/// key, `kai.scheduler/topology`; it orders the gang's levels) and the required and preferred
/// placements as ours (`kube-gang.io/topology-required` / `-preferred`). `None` without a
/// Topology named or without a placement: KAI applies no level then (`validate` warns).
fn kai_levels(obj: &Value) -> Option<(String, Vec<(&'static str, String)>)> {
    use crate::read::labels::{KAI_TOPOLOGY, KAI_TOPOLOGY_PREFERRED, KAI_TOPOLOGY_REQUIRED};
    let a = |k: &str| {
        obj.at("/metadata/annotations")
            .and_then(|a| a.get(k))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let topology = a(KAI_TOPOLOGY)?;
    let levels: Vec<(&'static str, String)> = [
        (crate::read::labels::ANNOTATION_TOPOLOGY_REQUIRED, a(KAI_TOPOLOGY_REQUIRED)),
        (crate::read::labels::ANNOTATION_TOPOLOGY_PREFERRED, a(KAI_TOPOLOGY_PREFERRED)),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k, v?)))
    .collect();
    (!levels.is_empty()).then_some((topology, levels))
}

/// What an UPDATE of a Job under Kueue's partial admission changes in its pod template, so that
/// the gang's members are the pods Kueue admitted.
///
/// A Job annotated `kueue.x-k8s.io/job-min-parallelism` may be admitted with fewer pods than it
/// asks for: Kueue lowers `spec.parallelism` (and `spec.completions` when the Job says
/// `kueue.x-k8s.io/job-completions-equal-parallelism`) in the update that unsuspends it, and puts
/// the original counts back when it suspends the Job again (kubernetes-sigs/kueue KEP-420). The
/// pod template injected at creation says `total-member`/`min-member` for the original count, so
/// the new pods would wait for members that never come. This follows the count: `total-member`
/// becomes the Job's pod count, and `min-member` too when it was the whole gang (it was equal to
/// `total-member`), else it stays, lowered to the count if above it.
///
/// Only while the old Job is suspended: Kubernetes lets a suspended Job that has not started change
/// its pod template's labels and annotations (with node selector, affinity, tolerations and
/// scheduling gates), which is also how Kueue writes its flavor's node labels. Empty for anything
/// else: another kind, a Job not opted into partial admission, a template without our
/// annotations, or counts that already agree.
pub fn recount(old: &Value, new: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    let is_job = new.get("kind").and_then(Value::as_str) == Some("Job")
        && new.get("apiVersion").and_then(Value::as_str) == Some("batch/v1");
    let partial = new
        .at("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(crate::read::labels::KUEUE_JOB_MIN_PARALLELISM));
    let was_suspended = old.at("/spec/suspend").and_then(Value::as_bool) == Some(true);
    if !(is_job && partial && was_suspended) {
        return out;
    }
    let Some(Ok(shape)) = inspect(new) else { return out };
    let count = shape.total_member();
    let Some(annotations) = new.at("/spec/template/metadata/annotations").and_then(Value::as_object) else {
        return out;
    };
    let read = |key: &str| annotations.get(key).and_then(Value::as_str).and_then(|v| v.parse::<u32>().ok());
    let (Some(total), Some(min)) = (read(ANNOTATION_TOTAL_MEMBER), read(ANNOTATION_MIN_MEMBER)) else {
        return out;
    };
    let base = "/spec/template/metadata/annotations";
    if total != count {
        out.push(Change {
            path: format!("{base}/{}", token(ANNOTATION_TOTAL_MEMBER)),
            value: Value::String(count.to_string()),
        });
    }
    let new_min = if min == total { count } else { min.min(count) };
    if new_min != min {
        out.push(Change {
            path: format!("{base}/{}", token(ANNOTATION_MIN_MEMBER)),
            value: Value::String(new_min.to_string()),
        });
    }
    out
}

/// The object with [`injection`]'s changes applied (a copy; the webhook patches instead).
/// Idempotent; never overwrites what the user set. Other kinds come back unchanged.
pub fn inject(obj: &Value) -> Result<Value, Vec<FieldError>> {
    let changes = injection(obj)?;
    let mut out = obj.clone();
    for c in &changes {
        c.apply(&mut out);
    }
    Ok(out)
}
