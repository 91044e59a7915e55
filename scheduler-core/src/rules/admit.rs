//! Admission: the one decision the webhook (`gang-webhook`) and `kubectl gang validate` both make
//! about an object, so the two can never disagree. [`admit`] injects what a gang needs, as
//! [`workload::injection`] computes it, then validates the result with the rule book
//! ([`crate::rules::validate`]).
//!
//! What happens depends on the operation, which `old` tells:
//!
//! - **CREATE** (`old` is `None`): the object is injected, then validated. That is the object the API
//!   server stores: mutating webhooks run before validating ones, so the validating hook sees the
//!   injected form, and `kubectl gang validate -f` checks what `kubectl apply -f` of a new object
//!   would face.
//! - **UPDATE** (`old` is `Some`): nothing is injected. A pod's `schedulerName` and the pod template
//!   of a Job or JobSet are immutable once created, so a patch would make the API server refuse the
//!   user's update, and a StatefulSet's would roll its pods. The object is validated as sent, against
//!   its old version; when injection would have added something (the workload opted in after it was
//!   created), a warning says so. One exception: a Job under Kueue's partial admission has its
//!   template's `total-member`/`min-member` follow the pod count Kueue admitted, in the update that
//!   unsuspends it (and back when it is suspended): [`workload::recount`]; and a suspended Job that
//!   never ran (whose template's labels and annotations Kubernetes still lets change) gets the
//!   gang labels and annotations it lacks, as a Job created with only `generateName` does in the
//!   update that unsuspends it ([`workload::template_still_mutable`]).
//!
//! DELETE and CONNECT carry no object to admit: front doors allow them without calling this.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;

use crate::read::error::FieldError;
use crate::read::model::Gang;
use crate::read::workload::{self, Change};
use crate::rules::validate;

/// What admission decided about one object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Problems that deny the object, each with its field path.
    pub errors: Vec<FieldError>,
    /// Shown to the user; never deny.
    pub warnings: Vec<String>,
    /// What admission added to the object (already applied to it): the mutating hook's JSON Patch.
    /// Empty on UPDATE (but for [`workload::recount`]), for kinds that are not ours, and when
    /// injection failed (see `errors`).
    pub changes: Vec<Change>,
}

impl Verdict {
    /// No errors (warnings allowed).
    pub fn allowed(&self) -> bool {
        self.errors.is_empty()
    }
}

pub use crate::rules::validate::{GangSet, Gangs, NoGangs};

/// Admits `object` (turned in place into its admitted form: the changes of [`Verdict::changes`] are
/// applied to it). `old` is the previous version on UPDATE, `None` on CREATE; `namespace_labels`
/// are the labels of the object's namespace when the caller knows them (a workload may opt in
/// through its namespace). No other gang object is consulted: see [`admit_with`].
///
/// Cost: linear in the object's size; the object is read where it lies and never copied.
pub fn admit(
    object: &mut Value,
    old: Option<&Value>,
    namespace_labels: Option<&BTreeMap<String, String>>,
) -> Verdict {
    admit_with(object, old, namespace_labels, &NoGangs)
}

/// [`admit`], and a pod whose claim names a gang that `gangs` knows must name a leaf subgroup of
/// it (not an inner one, not an unknown one): [`validate::attachment_errors`], the check
/// `kubectl gang simulate` makes over its input. Both front doors pass what they know (the
/// plugin the gangs in its input files, the webhook the Gang objects it watches), so they agree
/// whenever they know the same gangs.
pub fn admit_with(
    object: &mut Value,
    old: Option<&Value>,
    namespace_labels: Option<&BTreeMap<String, String>>,
    gangs: &dyn Gangs,
) -> Verdict {
    let mut verdict = admit_one(object, old, namespace_labels, gangs);
    if verdict.allowed() && is_pod(object) {
        let (claims, _) = crate::read::dialect::pod_claims_all(object);
        let mut known: Vec<Gang> = Vec::new();
        for c in &claims {
            let found = gangs.find(&c.gang);
            // A gang the front door may have left out: its subgroup checks are the scheduler's.
            if found.is_empty()
                && validate::has_subgroup_label(c.dialect)
                && let Some(why) = gangs.not_held(&c.gang)
            {
                verdict.warnings.push(format!(
                    "{}: the pod is not checked against gang {}: {why}; the scheduler checks it, and names a subgroup it cannot count in the gang's status",
                    c.path, c.gang
                ));
            }
            known.extend(found.into_iter().map(Cow::into_owned));
        }
        if !known.is_empty() {
            verdict.errors.extend(validate::attachment_errors(&known, object));
        }
    }
    verdict
}

fn is_pod(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("Pod")
        && object.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

fn admit_one(
    object: &mut Value,
    old: Option<&Value>,
    namespace_labels: Option<&BTreeMap<String, String>>,
    gangs: &dyn Gangs,
) -> Verdict {
    let mut verdict = Verdict::default();
    if object.is_object() && is_ours(object, namespace_labels) {
        if old.is_none()
            && let Some(Ok(shape)) = workload::inspect(object)
        {
            verdict.warnings.extend(workload::unnamed_gang(object, &shape));
            verdict.warnings.extend(workload::kai_preemptibility_overridden(object, &shape));
        }
        let injection =
            if old.is_none() { workload::injection(object) } else { workload::injection_named(object) };
        match injection {
            Ok(changes) if old.is_none() => {
                for change in &changes {
                    change.apply(object);
                }
                verdict.changes = changes;
            }
            Ok(changes) => {
                let mut changes = changes;
                if let Some(old) = old {
                    // A suspended Job that never ran may still change its template's labels and
                    // annotations: it gets its gang now (one created with only `generateName`,
                    // or opted in late), in the update that unsuspends it. Its pods claim the gang,
                    // so the pod hook gives them our scheduler.
                    if workload::template_still_mutable(old, object) {
                        let (late, rest): (Vec<Change>, Vec<Change>) =
                            changes.into_iter().partition(|c| c.path.starts_with("/spec/template/metadata"));
                        for change in &late {
                            change.apply(object);
                        }
                        // `schedulerName` stays as it is (immutable): the pods, which claim the
                        // gang, get ours from the pod hook.
                        changes = rest.into_iter().filter(|c| !c.path.ends_with("/schedulerName")).collect();
                        verdict.changes = late;
                    }
                    let recount = workload::recount(old, object);
                    for change in &recount {
                        change.apply(object);
                    }
                    verdict.changes.extend(recount);
                }
                if !changes.is_empty() {
                    verdict.warnings.push(format!(
                        "not injected on update ({} field(s) missing, e.g. {}): pod templates and a pod's schedulerName are immutable; recreate the object to make it a gang",
                        changes.len(),
                        changes[0].path
                    ));
                }
            }
            // The object asked for a gang it cannot be: these are the reasons, and validating the
            // object as it is would only repeat them.
            Err(errors) => {
                verdict.errors = errors;
                return verdict;
            }
        }
    }
    let checked = validate::validate_with(object, old, gangs);
    verdict.errors.extend(checked.errors);
    verdict.warnings.extend(checked.warnings);
    verdict
}

/// Whether `object` opted in to kube-gang: the one reading of opt-in, which the webhook
/// configurations' selectors and `matchConditions` encode (`tests/tests/manifests.rs` evaluates
/// them against this function), so that nothing else ever reaches the webhook:
///
/// - kube-gang's own objects (`kube-gang.io`, the `Gang`): always;
/// - a workload kind ([`workload::is_workload`]): [`workload::is_opted_in`] — its own
///   `kube-gang.io/enabled` label is exactly `"true"`, or it has none and its namespace's is;
/// - a pod: it carries a kube-gang marker (label `kube-gang.io/gang`, annotation
///   `kube-gang.io/min-member`), or another dialect's claim marker
///   ([`crate::read::dialect::CLAIM_MARKERS`]) and no scheduler but ours (`spec.schedulerName` unset,
///   empty, `default-scheduler` or `gang-scheduler`: the pods injection hands to our scheduler);
/// - anything else: never. Another scheduler's gang pods and PodGroups are theirs.
pub fn opted_in(object: &Value, namespace_labels: Option<&BTreeMap<String, String>>) -> bool {
    if object.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v.starts_with("kube-gang.io/")) {
        return true;
    }
    if is_pod(object) {
        return pod_opted_in(object);
    }
    workload::is_workload(object) && workload::is_opted_in(object, namespace_labels)
}

/// [`opted_in`] for a pod.
fn pod_opted_in(pod: &Value) -> bool {
    use crate::read::dialect::{CLAIM_MARKERS, Marker};
    use crate::read::labels::{ANNOTATION_GANG_FROM, ANNOTATION_MIN_MEMBER, LABEL_GANG};
    let labels = pod.pointer("/metadata/labels").and_then(Value::as_object);
    let annotations = pod.pointer("/metadata/annotations").and_then(Value::as_object);
    let has_label = |k: &str| labels.is_some_and(|l| l.contains_key(k));
    let has_annotation = |k: &str| annotations.is_some_and(|a| a.contains_key(k));
    if has_label(LABEL_GANG) || has_annotation(ANNOTATION_MIN_MEMBER) || has_annotation(ANNOTATION_GANG_FROM)
    {
        return true;
    }
    let claims = CLAIM_MARKERS.iter().any(|m| match m {
        Marker::Label(k) => has_label(k),
        Marker::Annotation(k) => has_annotation(k),
        Marker::Spec(f) => pod.get("spec").and_then(|s| s.get(*f)).is_some_and(|v| !v.is_null()),
    });
    let scheduler = pod.pointer("/spec/schedulerName");
    let ours = match scheduler {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => {
            matches!(s.as_str(), "" | "default-scheduler" | crate::read::labels::SCHEDULER_NAME)
        }
        Some(_) => false,
    };
    claims && ours
}

/// Pods (their gang claims decide) and workloads that opted in, themselves or through their
/// namespace, are injected; nothing else is.
fn is_ours(object: &Value, namespace_labels: Option<&BTreeMap<String, String>>) -> bool {
    is_pod(object) || (workload::is_workload(object) && workload::is_opted_in(object, namespace_labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::labels::KUEUE_QUEUE_NAME;
    use crate::read::labels::{ANNOTATION_MIN_MEMBER, LABEL_ENABLED, LABEL_GANG};
    use serde_json::json;

    fn job(labels: Value) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "train", "namespace": "ml", "labels": labels},
               "spec": {"parallelism": 3, "template": {"spec": {"containers": [{"name": "c"}]}}}})
    }

    #[test]
    fn a_pod_on_an_inner_subgroup_of_a_known_gang_is_denied_an_unknown_gang_allowed() {
        let gang = crate::read::dialect::kubegang::read(
            &json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
            "metadata": {"name": "llm", "namespace": "ml"},
            "spec": {"minMember": 1, "subGroups": [{"name": "r0", "minMember": 1},
                {"name": "r0-decode", "parent": "r0", "minMember": 2}]}}),
        )
        .unwrap();
        let pod = |subgroup: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ml", "labels": {LABEL_GANG: "llm", crate::read::labels::LABEL_SUBGROUP: subgroup}},
                "spec": {"schedulerName": "gang-scheduler", "containers": [{"name": "c"}]}})
        };
        let known = vec![gang];
        let v = admit_with(&mut pod("r0"), None, None, &known);
        assert_eq!(v.errors.len(), 1, "{v:?}");
        assert_eq!(v.errors[0].path, format!("metadata.labels[{}]", crate::read::labels::LABEL_SUBGROUP));
        assert!(v.errors[0].message.contains("inner subgroup"), "{}", v.errors[0].message);
        assert!(admit_with(&mut pod("r0-decode"), None, None, &known).allowed(), "a leaf is fine");
        assert!(admit(&mut pod("r0"), None, None).allowed(), "no gang known: allowed");
        let other: Vec<Gang> = Vec::new();
        assert!(admit_with(&mut pod("r0"), None, None, &other).allowed(), "unknown gang: allowed");
    }

    /// A front door that knows it left gangs of a namespace out (the webhook's lookup past its
    /// bounds) says a pod was not checked against one, instead of allowing it as quietly as a pod
    /// of a gang not created yet; where it holds everything, nothing is said.
    #[test]
    fn a_pod_of_a_gang_the_front_door_may_have_left_out_is_allowed_with_a_warning() {
        struct Partial;
        impl Gangs for Partial {
            fn find(&self, _: &crate::read::model::GangKey) -> Vec<Cow<'_, Gang>> {
                Vec::new()
            }
            fn not_held(&self, key: &crate::read::model::GangKey) -> Option<String> {
                (key.namespace == "crowded").then(|| "namespace crowded is not wholly held".into())
            }
        }
        let pod = |ns: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": ns,
                             "labels": {LABEL_GANG: "llm", crate::read::labels::LABEL_SUBGROUP: "r0"}},
                "spec": {"schedulerName": "gang-scheduler", "containers": [{"name": "c"}]}})
        };
        let v = admit_with(&mut pod("crowded"), None, None, &Partial);
        assert!(v.allowed(), "{v:?}");
        assert_eq!(v.warnings.len(), 1, "{v:?}");
        let w = &v.warnings[0];
        assert!(
            w.starts_with(&format!(
                "metadata.labels[{LABEL_GANG}]: the pod is not checked against gang crowded/llm"
            )),
            "{w}"
        );
        assert!(
            w.contains("namespace crowded is not wholly held") && w.contains("the scheduler checks it"),
            "{w}"
        );
        assert!(admit_with(&mut pod("quiet"), None, None, &Partial).warnings.is_empty());
    }

    #[test]
    fn create_injects_then_validates_the_result() {
        let mut obj = job(json!({LABEL_ENABLED: "true"}));
        let original = obj.clone();
        let v = admit(&mut obj, None, None);
        assert!(v.allowed(), "{v:?}");
        let t = &obj["spec"]["template"];
        assert_eq!(t["metadata"]["labels"][LABEL_GANG], "train");
        assert_eq!(t["metadata"]["annotations"][ANNOTATION_MIN_MEMBER], "3");
        assert_eq!(t["spec"]["schedulerName"], "gang-scheduler");
        // The changes, applied to the original, give the admitted object.
        let mut replayed = original;
        assert!(v.changes.iter().all(|c| c.apply(&mut replayed)));
        assert_eq!(replayed, obj);
        // Admitting the admitted object changes nothing.
        let mut again = obj.clone();
        assert_eq!(admit(&mut again, None, None).changes, vec![]);
    }

    /// A Job's `activeDeadlineSeconds` becomes its pods' time limit (what backfill plans with),
    /// unless the template states its own; a bad one in the template is refused by name.
    #[test]
    fn a_jobs_deadline_becomes_its_pods_time_limit() {
        let limit = crate::read::labels::ANNOTATION_TIME_LIMIT;
        let mut obj = job(json!({LABEL_ENABLED: "true"}));
        obj["spec"]["activeDeadlineSeconds"] = json!(5400);
        let v = admit(&mut obj, None, None);
        assert!(v.allowed(), "{v:?}");
        assert_eq!(obj["spec"]["template"]["metadata"]["annotations"][limit], "5400s");
        let mut own = job(json!({LABEL_ENABLED: "true"}));
        own["spec"]["activeDeadlineSeconds"] = json!(5400);
        own["spec"]["template"]["metadata"] = json!({"annotations": {limit: "2h"}});
        assert!(admit(&mut own, None, None).allowed());
        assert_eq!(own["spec"]["template"]["metadata"]["annotations"][limit], "2h");
        // On the Job itself: copied to its pods (a deadline too: the pod reads the shorter).
        let mut on_job = job(json!({LABEL_ENABLED: "true"}));
        on_job["metadata"]["annotations"] = json!({limit: "45m"});
        on_job["spec"]["activeDeadlineSeconds"] = json!(5400);
        assert!(admit(&mut on_job, None, None).allowed());
        assert_eq!(on_job["spec"]["template"]["metadata"]["annotations"][limit], "45m");
        let mut bad_on_job = job(json!({LABEL_ENABLED: "true"}));
        bad_on_job["metadata"]["annotations"] = json!({limit: "soon"});
        let v = admit(&mut bad_on_job, None, None);
        assert!(!v.allowed() && format!("{v:?}").contains(limit), "refused by name: {v:?}");
        let mut none = job(json!({LABEL_ENABLED: "true"}));
        assert!(admit(&mut none, None, None).allowed());
        assert!(none["spec"]["template"]["metadata"]["annotations"].get(limit).is_none());
        let mut bad = job(json!({LABEL_ENABLED: "true"}));
        bad["spec"]["template"]["metadata"] = json!({"annotations": {limit: "soon"}});
        let v = admit(&mut bad, None, None);
        assert!(!v.allowed(), "{v:?}");
        assert!(
            format!("{v:?}").contains(&format!("metadata.annotations[{limit}]")),
            "the field is named: {v:?}"
        );
    }

    #[test]
    fn update_injects_nothing_and_says_what_is_missing() {
        let old = job(json!({}));
        let mut obj = job(json!({LABEL_ENABLED: "true"}));
        let before = obj.clone();
        let v = admit(&mut obj, Some(&old), None);
        assert!(v.allowed(), "{v:?}");
        assert!(v.changes.is_empty());
        assert_eq!(obj, before, "the object is untouched");
        assert!(v.warnings.iter().any(|w| w.contains("not injected on update")), "{v:?}");
    }

    /// Kubernetes lets a running Job's parallelism change; its pod template (and the gang's
    /// minimum it carries) cannot. Scaling within the minimum is allowed; below it, refused at the
    /// field with why; while the template may still change (suspended, never run), Kueue's
    /// partial admission path applies instead.
    #[test]
    fn a_running_job_may_scale_within_its_gangs_minimum_and_is_told_why_not_below_it() {
        let mut created = job(json!({LABEL_ENABLED: "true"}));
        created["spec"]["parallelism"] = json!(4);
        assert!(admit(&mut created, None, None).allowed());
        created["status"] = json!({"startTime": "2026-01-01T00:00:00Z", "active": 4});
        let scaled = |parallelism: u32, min: Option<&str>| {
            let mut new = created.clone();
            new["spec"]["parallelism"] = json!(parallelism);
            if let Some(m) = min {
                new["spec"]["template"]["metadata"]["annotations"][ANNOTATION_MIN_MEMBER] = json!(m);
            }
            admit(&mut new, Some(&created), None)
        };
        let down = scaled(2, None);
        assert_eq!(down.errors.len(), 1, "{down:?}");
        assert_eq!(down.errors[0].path, "spec.parallelism");
        let why = &down.errors[0].message;
        assert!(why.contains("from 4 to 2") && why.contains("minimum of 4"), "{why}");
        assert!(why.contains("pod template is immutable") && why.contains("delete the Job"), "{why}");
        assert!(scaled(8, None).allowed(), "scaling up: the extra pods are surplus");
        assert!(scaled(4, None).allowed());
        // An elastic gang (minimum 2 of 4) scales down to its minimum, as Kubernetes allows.
        let mut elastic = created.clone();
        elastic["spec"]["template"]["metadata"]["annotations"][ANNOTATION_MIN_MEMBER] = json!("2");
        let mut new = elastic.clone();
        new["spec"]["parallelism"] = json!(2);
        assert!(admit(&mut new, Some(&elastic), None).allowed());
        // An indexed Job whose completions shrink with it is named at completions.
        let mut new = created.clone();
        new["spec"]["completions"] = json!(2);
        let v = admit(&mut new, Some(&created), None);
        assert_eq!(v.errors[0].path, "spec.completions", "{v:?}");
        // A create that asks for more than it runs keeps the plain rule.
        let mut fresh = job(json!({LABEL_ENABLED: "true"}));
        fresh["spec"]["template"]["metadata"] = json!({"annotations": {ANNOTATION_MIN_MEMBER: "5"}});
        let v = admit(&mut fresh, None, None);
        assert!(v.errors.iter().any(|e| e.message.contains("can never be satisfied")), "{v:?}");
    }

    #[test]
    fn namespace_opt_in_counts_and_the_objects_own_label_wins() {
        let ns: BTreeMap<String, String> = [(LABEL_ENABLED.to_string(), "true".to_string())].into();
        let mut plain = job(json!({}));
        assert!(!admit(&mut plain, None, Some(&ns)).changes.is_empty());
        let mut out = job(json!({LABEL_ENABLED: "false"}));
        assert!(admit(&mut out, None, Some(&ns)).changes.is_empty());
        let mut unlabelled = job(json!({}));
        assert!(admit(&mut unlabelled, None, None).changes.is_empty());
    }

    #[test]
    fn a_workload_that_cannot_be_a_gang_is_denied_once_per_problem() {
        let mut obj = job(json!({LABEL_ENABLED: "true"}));
        obj["metadata"]["annotations"] = json!({ANNOTATION_MIN_MEMBER: "5"});
        let v = admit(&mut obj, None, None);
        assert_eq!(v.errors.len(), 1, "{v:?}");
        assert_eq!(v.errors[0].path, "metadata.annotations[kube-gang.io/min-member]");
        assert!(v.changes.is_empty());
    }

    #[test]
    fn a_workload_named_by_the_api_server_gets_its_gang_from_its_pods_or_a_warning_where_it_cannot() {
        let generated = |labels: Value, template: Value| {
            json!({"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"generateName": "train-", "namespace": "ml", "labels": labels},
                   "spec": {"parallelism": 3, "template": template}})
        };
        let plain = json!({"spec": {"containers": [{"name": "c"}]}});
        // What the mutating hook and `kubectl gang validate` see: no name.
        // No gang can be named after the Job: its pods name it, from the label in which the Job
        // controller writes the Job's name.
        let mut asked = generated(json!({LABEL_ENABLED: "true"}), plain.clone());
        let v = admit(&mut asked, None, None);
        assert!(v.allowed() && v.warnings.is_empty(), "{v:?}");
        let t = &asked["spec"]["template"]["metadata"];
        assert_eq!(
            t["annotations"][crate::read::labels::ANNOTATION_GANG_FROM],
            crate::read::labels::JOB_NAME,
            "{v:?}"
        );
        assert_eq!(t["annotations"][ANNOTATION_MIN_MEMBER], "3");
        assert!(t["labels"].get(LABEL_GANG).is_none(), "no name to give: {t}");
        // What the validating hook sees: the name the API server generated, the same verdict.
        let mut named = generated(json!({LABEL_ENABLED: "true"}), plain.clone());
        named["metadata"]["name"] = json!(workload::generated_name("train-", "seed"));
        let w = admit(&mut named, None, None);
        assert_eq!(
            (w.errors, w.warnings, w.changes.len()),
            (v.errors.clone(), v.warnings.clone(), v.changes.len())
        );
        // A kind whose controller writes no such label (a StatefulSet): no gang, and a warning.
        let mut sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"generateName": "db-", "namespace": "ml", "labels": {LABEL_ENABLED: "true"}},
            "spec": {"replicas": 2, "podManagementPolicy": "Parallel", "template": plain.clone()}});
        let st = admit(&mut sts, None, None);
        assert!(st.changes.is_empty(), "{st:?}");
        assert_eq!(st.warnings.len(), 1, "{st:?}");
        assert!(st.warnings[0].starts_with("metadata.generateName: \"db-\""), "{}", st.warnings[0]);
        // A name the user chose beside a generateName is a name.
        let mut chosen = generated(json!({LABEL_ENABLED: "true"}), plain.clone());
        chosen["metadata"]["name"] = json!("train-final");
        let c = admit(&mut chosen, None, None);
        assert!(c.warnings.is_empty() && !c.changes.is_empty(), "{c:?}");
        // Submitted to a Kueue queue (label or annotation): Kueue's webhook creates it suspended
        // and gives it its gang when it admits it, so nothing to warn about — unless a controller
        // owns it (its owner is Kueue's to suspend), or it is not a batch/v1 Job.
        let queued = generated(json!({LABEL_ENABLED: "true", KUEUE_QUEUE_NAME: "q"}), plain.clone());
        assert!(workload::kueue_suspends(&queued));
        assert!(admit(&mut queued.clone(), None, None).warnings.is_empty());
        let mut annotated = generated(json!({LABEL_ENABLED: "true"}), plain.clone());
        annotated["metadata"]["annotations"] = json!({KUEUE_QUEUE_NAME: "q"});
        assert!(workload::kueue_suspends(&annotated));
        let mut owned = queued.clone();
        owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "u", "controller": true}]);
        assert!(!workload::kueue_suspends(&owned));
        let o = admit(&mut owned, None, None);
        assert!(o.warnings.is_empty() && !o.changes.is_empty(), "named from its pods: {o:?}");
        let mut empty_queue = generated(json!({LABEL_ENABLED: "true", KUEUE_QUEUE_NAME: ""}), plain.clone());
        assert!(!workload::kueue_suspends(&empty_queue));
        let q = admit(&mut empty_queue, None, None);
        assert!(q.warnings.is_empty() && !q.changes.is_empty(), "named from its pods: {q:?}");
        // A Job that asked for no gang: nothing to say.
        let mut not_ours = generated(json!({}), plain.clone());
        assert_eq!(admit(&mut not_ours, None, None), Verdict::default());
        // Pods that name their gang need no name: the scheduler is still set, nothing warned.
        let named_gang = json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "pg"}},
                                "spec": {"containers": [{"name": "c"}]}});
        let mut elsewhere = generated(json!({LABEL_ENABLED: "true"}), named_gang);
        let e = admit(&mut elsewhere, None, None);
        assert!(e.warnings.is_empty(), "{e:?}");
        assert_eq!(e.changes.len(), 1);
        assert_eq!(e.changes[0].path, "/spec/template/spec/schedulerName");
        // A Volcano Job: its controller names the PodGroup after the generated name.
        let mut vcjob = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"generateName": "vc-", "namespace": "ml", "labels": {LABEL_ENABLED: "true"}},
            "spec": {"minAvailable": 2, "schedulerName": "volcano",
                     "tasks": [{"name": "w", "replicas": 2, "template": plain}]}});
        let vc = admit(&mut vcjob, None, None);
        assert!(vc.allowed() && vc.warnings.is_empty(), "{vc:?}");
        assert_eq!(vcjob["spec"]["schedulerName"], crate::read::labels::SCHEDULER_NAME);
    }

    #[test]
    fn a_suspended_job_named_by_the_api_server_gets_its_gang_when_it_is_unsuspended() {
        let mut created = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"generateName": "sample-job-", "namespace": "team-a", "labels": {LABEL_ENABLED: "true"}},
            "spec": {"suspend": true, "parallelism": 3,
                     "template": {"spec": {"containers": [{"name": "c"}]}}}});
        let v = admit(&mut created, None, None);
        assert_eq!(v, Verdict::default(), "nothing to inject yet, nothing to warn about: it is suspended");
        created["metadata"]["name"] = json!(workload::generated_name("sample-job-", "x"));
        // Kueue admits it: the update that unsuspends it.
        let mut admitted = created.clone();
        admitted["spec"]["suspend"] = json!(false);
        let v = admit(&mut admitted, Some(&created), None);
        assert!(v.allowed() && v.warnings.is_empty(), "{v:?}");
        assert_eq!(v.changes.len(), 1, "{v:?}");
        assert_eq!(v.changes[0].path, "/spec/template/metadata", "labels and annotations, not schedulerName");
        let t = &admitted["spec"]["template"];
        assert_eq!(t["metadata"]["labels"][LABEL_GANG], created["metadata"]["name"]);
        assert_eq!(t["metadata"]["annotations"][ANNOTATION_MIN_MEMBER], "3");
        assert!(t["spec"].get("schedulerName").is_none(), "immutable: the pod hook sets it");
        // A Job that has run: its template is immutable, so only a warning.
        let mut ran = created.clone();
        ran["status"] = json!({"startTime": "2026-11-22T09:00:00Z"});
        let mut again = ran.clone();
        again["spec"]["suspend"] = json!(false);
        let v = admit(&mut again, Some(&ran), None);
        assert!(v.changes.is_empty(), "{v:?}");
        assert!(v.warnings.iter().any(|w| w.contains("not injected on update")), "{v:?}");
    }

    #[test]
    fn gangs_are_validated_as_they_are() {
        let mut gang = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
            "metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 0}});
        let v = admit(&mut gang, None, None);
        assert_eq!(v.errors[0].path, "spec.minMember");
        assert!(v.changes.is_empty());
        let mut not_an_object = json!("text");
        assert!(!admit(&mut not_an_object, None, None).allowed());
    }

    #[test]
    fn a_jobset_with_more_replicated_jobs_than_a_gang_has_subgroups_is_denied_with_one_error() {
        let jobset = |n: usize| {
            let jobs: Vec<Value> = (0..n)
                .map(|i| {
                    json!({"name": format!("r{i}"), "replicas": 1,
                    "template": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}})
                })
                .collect();
            json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                   "metadata": {"name": "js", "namespace": "ml", "labels": {LABEL_ENABLED: "true"}},
                   "spec": {"replicatedJobs": jobs}})
        };
        let limit = crate::read::workload::MAX_JOBSET_ROLES;
        assert_eq!(limit, crate::rules::validate::MAX_SUBGROUPS);
        let v = admit(&mut jobset(limit), None, None);
        assert!(v.allowed(), "{v:?}");
        assert_eq!(v.changes.len(), 2 * limit, "the metadata and schedulerName of each template");
        let v = admit(&mut jobset(limit + 1), None, None);
        assert_eq!(v.errors.len(), 1, "{v:?}");
        assert_eq!(v.errors[0].path, "spec.replicatedJobs");
        assert!(v.errors[0].message.contains(&format!("has {} replicated jobs", limit + 1)));
        assert!(v.changes.is_empty());
    }
}
