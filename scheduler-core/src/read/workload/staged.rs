//! Staged creation: workloads whose controllers create their pods one stage at a time, so a gang
//! needing all of them at once can never start.

use super::*;
use crate::read::labels::{JOBSET_EXCLUSIVE_TOPOLOGY, JOBSET_NODE_SELECTOR_STRATEGY};

/// A workload whose controller creates its pods in stages (each only once the one before is
/// Ready or done), so a gang spanning stages waits for pods that are never created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staged {
    /// The field that stages creation (`spec.podManagementPolicy`).
    pub path: String,
    /// What happens, and the fix.
    pub message: String,
    /// True when the gang's minimum can provably never exist at once (deny); false: a warning.
    pub never: bool,
}

/// The pods the gang of `obj`'s pods needs at once, and the gang named when it is another
/// object's whose minimum `known_min` does not know (`None`, and its key).
fn staged_gang_min(
    obj: &Value,
    shape: &WorkloadShape,
    known_min: &dyn Fn(&crate::read::model::GangKey) -> Option<u64>,
) -> (Option<u64>, Option<String>) {
    use crate::read::model::Dialect;
    for role in &shape.roles {
        let Some(template) = obj.at(&role.template) else { continue };
        let (claims, _) = crate::read::dialect::template_claims_all(template, &shape.namespace);
        for c in &claims {
            match c.dialect {
                // The gang is the pods' annotations: the workload's own, injected or written.
                Dialect::KubeGangAnnotations | Dialect::Koordinator => {
                    if let Some(Ok(g)) =
                        crate::read::dialect::template_annotation_gang(c, template, &shape.namespace)
                    {
                        return (Some(g.min_pods().unwrap_or(u64::from(g.min_member))), None);
                    }
                }
                _ => {
                    return match known_min(&c.gang) {
                        Some(min) => (Some(min), None),
                        None => (None, Some(c.gang.to_string())),
                    };
                }
            }
        }
    }
    // Nothing injected yet (validation of an object as it is): the workload's own minimum.
    (Some(u64::from(shape.min_member)), None)
}

/// Pods of the roles that depend on no other (`depends(role index)` false): the first stage.
fn first_stage_pods(shape: &WorkloadShape, depends: &dyn Fn(usize) -> bool) -> u32 {
    shape
        .roles
        .iter()
        .enumerate()
        .filter(|(j, _)| !depends(*j))
        .map(|(_, r)| r.pods)
        .fold(0, u32::saturating_add)
}

/// JobSet's exclusive placement by pod affinity stages each child Job: the leader (completion
/// index 0; JobSet makes child Jobs Indexed) is admitted at once, its followers only once the
/// leader has a node (`ValidateCreate` in JobSet's `pkg/webhooks/pod_webhook.go`; the node-selector
/// strategy skips it). The annotation's path and the pods that exist before any is scheduled (one
/// per child Job of an exclusive replicated job, every pod of the others), when some exclusive
/// replicated job has followers.
fn exclusive_leaders_first(obj: &Value, shape: &WorkloadShape) -> Option<(String, u32)> {
    let has = |at: &str, key: &str| obj.at(at).and_then(|a| a.get(key)).is_some();
    let jobset = "/metadata/annotations";
    let mut path = None;
    let mut first = 0u32;
    for (i, role) in shape.roles.iter().enumerate() {
        let job = format!("/spec/replicatedJobs/{i}/template/metadata/annotations");
        let exclusive = has(jobset, JOBSET_EXCLUSIVE_TOPOLOGY) || has(&job, JOBSET_EXCLUSIVE_TOPOLOGY);
        let node_selector =
            has(jobset, JOBSET_NODE_SELECTOR_STRATEGY) || has(&job, JOBSET_NODE_SELECTOR_STRATEGY);
        let replicas = obj
            .at(&format!("/spec/replicatedJobs/{i}/replicas"))
            .and_then(Value::as_u64)
            .map_or(1, |r| u32::try_from(r).unwrap_or(u32::MAX));
        if exclusive && !node_selector && role.pods > replicas {
            first = first.saturating_add(replicas);
            path.get_or_insert_with(|| {
                if has(jobset, JOBSET_EXCLUSIVE_TOPOLOGY) {
                    format!("metadata.annotations[{JOBSET_EXCLUSIVE_TOPOLOGY}]")
                } else {
                    format!(
                        "spec.replicatedJobs[{i}].template.metadata.annotations[{JOBSET_EXCLUSIVE_TOPOLOGY}]"
                    )
                }
            });
        } else {
            first = first.saturating_add(role.pods);
        }
    }
    path.map(|p| (p, first))
}

/// Staged creation in `obj` (StatefulSet `OrderedReady`, JobSet `startupPolicyOrder: InOrder` and
/// `dependsOn`, LeaderWorkerSet `startupPolicy: LeaderReady` and exclusive placement, MPIJob
/// `launcherCreationPolicy: WaitForWorkersReady`, Volcano task `dependsOn`, JobSet exclusive
/// placement by pod affinity): the first stage's pod
/// count against the pods the gang needs at once. That is the gang the pod templates name: the
/// workload's own (injected, or its templates' `kube-gang.io/min-member`/Koordinator annotations),
/// or a gang another object defines (a coscheduling PodGroup, a `Gang`), whose pods `known_min`
/// gives when the caller knows the object; when it does not, staging is only warned about.
pub fn staged_creation(
    obj: &Value,
    shape: &WorkloadShape,
    known_min: &dyn Fn(&crate::read::model::GangKey) -> Option<u64>,
) -> Vec<Staged> {
    let mut out = Vec::new();
    // Read only when a stage is found: it reads every template's claims and annotation gang,
    // which most workloads, staged by nothing, need not pay for.
    let mut gang: Option<(Option<u64>, Option<String>)> = None;
    let mut stage = |path: &str, what: &str, first: u32, fix: &str| {
        let (min, named) = gang.get_or_insert_with(|| staged_gang_min(obj, shape, known_min)).clone();
        let message = match (min, &named) {
            (Some(min), _) if min > u64::from(first) => format!(
                "{what}: only {first} pod(s) exist before the rest are created, but the gang needs {min} at once, so it can never start; {fix}"
            ),
            (Some(min), _) => format!(
                "{what}: pods are created in stages; the gang's minimum of {min} fits in the first stage, but later pods wait; {fix}"
            ),
            (None, named) => format!(
                "{what}: pods are created in stages ({first} first), and the pods name gang {} whose minimum is not known here: if it needs more than {first} pod(s) at once it can never start; {fix}",
                named.as_deref().unwrap_or("?")
            ),
        };
        out.push(Staged {
            path: path.to_string(),
            message,
            never: min.is_some_and(|m| m > u64::from(first)),
        });
    };
    let str_at = |p: &str| obj.at(p).and_then(Value::as_str);
    match (shape.group.as_str(), shape.kind.as_str()) {
        ("apps", "StatefulSet") => {
            let policy = str_at("/spec/podManagementPolicy").unwrap_or("OrderedReady");
            if policy == "OrderedReady" && shape.roles.first().is_some_and(|r| r.pods > 1) {
                stage(
                    "spec.podManagementPolicy",
                    "OrderedReady (the default) creates pod N+1 only once pod N is Running and Ready",
                    1,
                    "set podManagementPolicy: Parallel",
                );
            }
        }
        ("jobset.x-k8s.io", "JobSet") => {
            let jobs = obj.at("/spec/replicatedJobs").and_then(Value::as_array);
            let depends = |i: usize| {
                obj.at(&format!("/spec/replicatedJobs/{i}/dependsOn"))
                    .and_then(Value::as_array)
                    .is_some_and(|d| !d.is_empty())
            };
            if str_at("/spec/startupPolicy/startupPolicyOrder") == Some("InOrder") && shape.roles.len() > 1 {
                stage(
                    "spec.startupPolicy.startupPolicyOrder",
                    "InOrder creates each replicated job only once the one before is Ready",
                    shape.roles[0].pods,
                    "use AnyOrder, or gang only the first job with a kube-gang.io/min-member annotation",
                );
            } else if let Some(i) = (0..jobs.map_or(0, Vec::len)).find(|&i| depends(i)) {
                let first = first_stage_pods(shape, &depends);
                stage(
                    &format!("spec.replicatedJobs[{i}].dependsOn"),
                    "a replicated job with dependsOn is created only once the jobs it names are Ready or Complete",
                    first,
                    "drop dependsOn, or gang only the jobs that start first with a kube-gang.io/min-member annotation",
                );
            }
            if let Some((path, first)) = exclusive_leaders_first(obj, shape) {
                stage(
                    &path,
                    "exclusive placement by pod affinity (JobSet's default strategy): JobSet's pod webhook admits a child job's pods other than its leader (completion index 0) only once the leader is scheduled",
                    first,
                    &format!(
                        "gang only the pods that exist first (kube-gang.io/min-member: \"{first}\"), or use JobSet's node-selector strategy ({JOBSET_NODE_SELECTOR_STRATEGY}, nodes labelled per child job)"
                    ),
                );
            }
        }
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet") if shape.group_size.is_some_and(|g| g > 1) => {
            let exclusive = obj
                .at("/metadata/annotations")
                .and_then(|a| a.get(crate::read::labels::LWS_EXCLUSIVE_TOPOLOGY))
                .and_then(Value::as_str)
                .filter(|k| !k.is_empty());
            if str_at("/spec/startupPolicy") == Some("LeaderReady") {
                stage(
                    "spec.startupPolicy",
                    "LeaderReady creates a group's workers only once its leader is Ready",
                    1,
                    "use startupPolicy: LeaderCreated (the default)",
                );
            } else if let Some(key) = exclusive {
                stage(
                    &format!("metadata.annotations[{}]", crate::read::labels::LWS_EXCLUSIVE_TOPOLOGY),
                    "exclusive placement: LeaderWorkerSet creates a group's workers only once its leader is scheduled (and pins them to the leader's domain)",
                    1,
                    &format!(
                        "gang only the leader (kube-gang.io/min-member: \"1\"), or give the group a topology instead (kube-gang.io/topology-key: {key} on the pod templates)"
                    ),
                );
            }
        }
        ("kubeflow.org", "MPIJob")
            if str_at("/spec/launcherCreationPolicy") == Some("WaitForWorkersReady") =>
        {
            let first: u32 = shape.roles.iter().filter(|r| r.name != "launcher").map(|r| r.pods).sum();
            stage(
                "spec.launcherCreationPolicy",
                "WaitForWorkersReady creates the launcher only once every worker is Ready",
                first,
                "use launcherCreationPolicy: AtStartup (the default)",
            );
        }
        ("batch.volcano.sh", "Job") => {
            let depends = |i: usize| {
                obj.at(&format!("/spec/tasks/{i}/dependsOn/name"))
                    .and_then(Value::as_array)
                    .is_some_and(|d| !d.is_empty())
            };
            if let Some(i) = (0..shape.roles.len()).find(|&i| depends(i)) {
                let first = first_stage_pods(shape, &depends);
                stage(
                    &format!("spec.tasks[{i}].dependsOn"),
                    "a task with dependsOn is created only once the tasks it names are running",
                    first,
                    "drop dependsOn, or lower spec.minAvailable to the tasks that start first",
                );
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobset(annotations: Value, jobs: Value) -> Value {
        json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": "ml", "annotations": annotations},
            "spec": {"replicatedJobs": jobs},
        })
    }

    fn job(name: &str, replicas: u32, parallelism: u32, annotations: Value) -> Value {
        json!({"name": name, "replicas": replicas, "template": {
            "metadata": {"annotations": annotations},
            "spec": {"parallelism": parallelism, "template": {"spec": {"containers": [{"name": "c"}]}}},
        }})
    }

    fn staged(obj: &Value) -> Vec<Staged> {
        let shape = inspect(obj).expect("a workload").expect("a valid shape");
        staged_creation(obj, &shape, &|_| None)
    }

    #[test]
    fn exclusive_placement_by_affinity_holds_followers_back_until_their_leader_is_scheduled() {
        let obj =
            jobset(json!({JOBSET_EXCLUSIVE_TOPOLOGY: "rack"}), json!([job("workers", 2, 2, json!({}))]));
        let s = staged(&obj);
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s[0].never);
        assert_eq!(s[0].path, format!("metadata.annotations[{JOBSET_EXCLUSIVE_TOPOLOGY}]"));
        assert!(s[0].message.contains("only 2 pod(s) exist"), "{}", s[0].message);
        assert!(s[0].message.contains("needs 4 at once"), "{}", s[0].message);
        assert!(s[0].message.contains("kube-gang.io/min-member: \"2\""), "{}", s[0].message);
    }

    #[test]
    fn node_selector_strategy_and_one_pod_child_jobs_are_not_staged() {
        let strategy = jobset(
            json!({JOBSET_EXCLUSIVE_TOPOLOGY: "rack", JOBSET_NODE_SELECTOR_STRATEGY: "true"}),
            json!([job("workers", 2, 2, json!({}))]),
        );
        assert_eq!(staged(&strategy), vec![]);
        let leaders_only =
            jobset(json!({JOBSET_EXCLUSIVE_TOPOLOGY: "rack"}), json!([job("workers", 3, 1, json!({}))]));
        assert_eq!(staged(&leaders_only), vec![]);
        let strategy_on_the_job = jobset(
            json!({}),
            json!([job(
                "workers",
                2,
                2,
                json!({JOBSET_EXCLUSIVE_TOPOLOGY: "rack", JOBSET_NODE_SELECTOR_STRATEGY: "true"})
            )]),
        );
        assert_eq!(staged(&strategy_on_the_job), vec![]);
    }

    #[test]
    fn a_replicated_jobs_own_annotation_stages_only_that_job() {
        let obj = jobset(
            json!({}),
            json!([
                job("driver", 1, 2, json!({})),
                job("workers", 2, 2, json!({JOBSET_EXCLUSIVE_TOPOLOGY: "rack"}))
            ]),
        );
        let s = staged(&obj);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(
            s[0].path,
            format!("spec.replicatedJobs[1].template.metadata.annotations[{JOBSET_EXCLUSIVE_TOPOLOGY}]")
        );
        // The driver's two pods and one leader per worker job exist first: 4 of 6.
        assert!(s[0].message.contains("only 4 pod(s) exist"), "{}", s[0].message);
        assert!(s[0].message.contains("needs 6 at once"), "{}", s[0].message);
    }
}
