//! AppWrapper (`workload.codeflare.dev/v1beta2`, project-codeflare/appwrapper): a list of wrapped
//! objects (`spec.components[].template`) that Kueue admits, and the AppWrapper controller creates
//! and watches, as one workload. Its pods are one gang: each component's pod sets — declared
//! (`podSets[] {path, replicas}`), else inferred from the wrapped kind as the AppWrapper webhook
//! infers them (`InferPodSets`, for its kinds only: a Job's min(parallelism, completions), a
//! JobSet's replicated jobs, a PyTorchJob's replica specs, a RayCluster's or RayJob's head and
//! worker groups, a Deployment's or StatefulSet's replicas, a bare Pod; any other kind needs
//! declared pod sets) — are its roles, and the gang's minimum is all their pods. The pod-set
//! infos Kueue assigns at admission (`podSetInfos`: labels, annotations, node selector,
//! tolerations, scheduling gates), which the AppWrapper controller merges into each pod set's
//! template, are merged into the pods `simulate` expands ([`pod_set_info`]). The AppWrapper controller labels every pod template it creates
//! `workload.codeflare.dev/appwrapper: <name>` (`createComponent`), which names the gang of an
//! AppWrapper created with only `generateName`.
//!
//! Refused as the AppWrapper webhook refuses (`validateAppWrapperCreate`): a nested AppWrapper, a
//! component in another namespace, a declared pod set without a path or whose path does not lead
//! to a pod template, declared pod sets that do not match those it infers for a kind it knows
//! (`ValidatePodSets`: a path twice, another count, an inferred path missing, other replicas —
//! a Ray group's being its `replicas`), no pod spec at all or more than Kueue's 8; and, ours,
//! more components' pod sets than a gang has subgroups.

use serde_json::Value;

use super::{MAX_JOBSET_ROLES, Role, inspect, int_at, path_of};
use crate::read::error::FieldError;
use crate::read::object::At;

pub use crate::read::labels::APPWRAPPER_NAME as LABEL;

/// The pod sets an AppWrapper may have in all, bounded as a JobSet's replicated jobs are: each
/// is a template to inject and a subgroup of the gang.
pub const MAX_POD_SETS: usize = MAX_JOBSET_ROLES;

/// The roles (pod sets) of AppWrapper `obj` in `namespace`, in component order.
pub(super) fn roles(obj: &Value, namespace: &str, roles: &mut Vec<Role>, errors: &mut Vec<FieldError>) {
    let Some(components) = obj.at("/spec/components").and_then(Value::as_array) else {
        errors.push(FieldError::new("spec.components", "Required value"));
        return;
    };
    if components.len() > MAX_POD_SETS {
        errors.push(FieldError::new(
            "spec.components",
            format!("has {} components; a gang spans at most {MAX_POD_SETS} pod sets", components.len()),
        ));
        return;
    }
    // Pod specs in all, as the webhook counts them (a component's declared or inferred pod sets,
    // whichever are more): Kueue takes at most 8 pod sets a workload.
    let mut pod_sets = 0usize;
    let from = roles.len();
    for (i, c) in components.iter().enumerate() {
        let base = format!("/spec/components/{i}");
        let Some(t) = c.get("template").filter(|t| t.is_object()) else {
            errors.push(FieldError::new(
                path_of(&format!("{base}/template")),
                "Required value: the wrapped object",
            ));
            continue;
        };
        let group =
            t.get("apiVersion").and_then(Value::as_str).map(crate::read::dialect::group_of).unwrap_or("");
        let kind = t.get("kind").and_then(Value::as_str).unwrap_or("");
        if group == "workload.codeflare.dev" && kind == "AppWrapper" {
            errors.push(FieldError::new(
                path_of(&format!("{base}/template")),
                "Forbidden: Nested AppWrappers are forbidden",
            ));
            continue;
        }
        if let Some(ns) = t.at("/metadata/namespace").and_then(Value::as_str).filter(|n| !n.is_empty())
            && ns != namespace
        {
            errors.push(FieldError::new(
                path_of(&format!("{base}/template/metadata/namespace")),
                "Forbidden: AppWrappers cannot create objects in other namespaces",
            ));
            continue;
        }
        let declared = c.get("podSets").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let (mut inferred_here, mut infer_errors) = (Vec::new(), Vec::new());
        inferred(t, kind, group, &base, i, &mut inferred_here, &mut infer_errors);
        pod_sets += declared.len().max(inferred_here.len());
        if declared.len() > MAX_POD_SETS {
            // Read no further: each would be a subgroup, a template and perhaps an error.
            errors.push(FieldError::new(
                path_of(&format!("{base}/podSets")),
                format!("has {} pod sets; a gang spans at most {MAX_POD_SETS}", declared.len()),
            ));
            return;
        }
        if !declared.is_empty() {
            for (j, ps) in declared.iter().enumerate() {
                let at = format!("{base}/podSets/{j}");
                let path = ps.get("path").and_then(Value::as_str).unwrap_or("");
                if path.is_empty() {
                    errors.push(FieldError::new(
                        path_of(&format!("{at}/path")),
                        "Required value: podspec must specify path",
                    ));
                    continue;
                }
                let template = format!("{base}{}", pointer_of(path));
                if !obj.at(&template).is_some_and(|p| p.get("spec").is_some_and(Value::is_object)) {
                    errors.push(FieldError::new(
                        path_of(&format!("{at}/path")),
                        format!("Invalid value: {path:?}: path does not refer to a v1.PodSpecTemplate"),
                    ));
                    continue;
                }
                let pods = int_at(obj, &format!("{at}/replicas"), 1, errors);
                roles.push(Role {
                    name: role_name(i, kind, &format!("{j}"), declared.len()),
                    pods,
                    template,
                });
            }
            // After each path is checked, as the webhook checks them in that order.
            if let Some(why) = declared_against_inferred(declared, &inferred_here, obj, &base, group) {
                errors.push(FieldError::new(path_of(&format!("{base}/podSets")), why));
            }
        } else {
            roles.append(&mut inferred_here);
            errors.append(&mut infer_errors);
        }
        if roles.len() > MAX_POD_SETS {
            errors.push(FieldError::new(
                "spec.components",
                format!("has more than {MAX_POD_SETS} pod sets in all; a gang spans at most {MAX_POD_SETS}"),
            ));
            return;
        }
    }
    if pod_sets == 0 && roles.len() == from && errors.is_empty() {
        errors.push(FieldError::new("spec.components", "Invalid value: components contains no podspecs"));
    } else if pod_sets > MAX_KUEUE_POD_SETS {
        errors.push(FieldError::new(
            "spec.components",
            format!(
                "Invalid value: components contains {pod_sets} podspecs; at most {MAX_KUEUE_POD_SETS} are allowed"
            ),
        ));
    }
}

/// The pod specs the AppWrapper webhook allows in one AppWrapper (Kueue's limit on a workload's
/// pod sets).
pub const MAX_KUEUE_POD_SETS: usize = 8;

/// Why a component's declared pod sets do not match those the AppWrapper webhook infers for its
/// kind (`ValidatePodSets`), in its words: a path declared twice; for a kind it infers pod sets
/// for, another count, a path it infers that is not declared, or another replica count. `None`
/// when they match, or when nothing is declared or inferred.
fn declared_against_inferred(
    declared: &[Value],
    inferred: &[Role],
    obj: &Value,
    base: &str,
    group: &str,
) -> Option<String> {
    // Past Kueue's limit the whole AppWrapper is refused anyway (`roles`): nothing to compare,
    // and a hostile list costs nothing more.
    if declared.is_empty() || declared.len() > MAX_KUEUE_POD_SETS {
        return None;
    }
    let mut paths: Vec<(String, i64)> = Vec::with_capacity(declared.len());
    for ps in declared {
        let path = ps.get("path").and_then(Value::as_str).unwrap_or("");
        if paths.iter().any(|(p, _)| p == path) {
            return Some(format!("Invalid value: multiple DeclaredPodSets with path '{path}'"));
        }
        paths.push((path.to_string(), ps.get("replicas").and_then(Value::as_i64).unwrap_or(1)));
    }
    if inferred.is_empty() {
        return None;
    }
    if inferred.len() != declared.len() {
        return Some(format!(
            "Invalid value: DeclaredPodSet count {} differs from inferred count {}",
            declared.len(),
            inferred.len()
        ));
    }
    for role in inferred {
        let path = path_from_pointer(role.template.strip_prefix(base).unwrap_or(&role.template));
        let Some((_, replicas)) = paths.iter().find(|(p, _)| pointer_of(p) == pointer_of(&path)) else {
            return Some(format!("Invalid value: PodSet with path '{path}' is missing"));
        };
        // The webhook infers a Ray group's count from its `replicas` alone (the head: 1), where
        // the pods KubeRay makes (ours) also weigh the bounds, suspension and hosts.
        let count = if group == "ray.io" {
            let group_replicas = role.template.strip_suffix("/template").map(|g| format!("{g}/replicas"));
            match group_replicas {
                Some(at) if !role.template.ends_with("/headGroupSpec/template") => {
                    obj.at(&at).and_then(Value::as_i64).unwrap_or(1)
                }
                _ => 1,
            }
        } else {
            i64::from(role.pods)
        };
        if *replicas != count {
            return Some(format!(
                "Invalid value: replica count {replicas} differs from inferred count {count} for PodSet at path position '{path}'"
            ));
        }
    }
    None
}

/// A JSON pointer relative to a component (`/template/spec/replicatedJobs/1/template/spec/template`)
/// as an AppWrapper pod-set path (`template.spec.replicatedJobs[1].template.spec.template`).
fn path_from_pointer(pointer: &str) -> String {
    let mut out = String::new();
    for part in pointer.split('/').filter(|p| !p.is_empty()) {
        if part.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&part.replace("~1", "/").replace("~0", "~"));
        }
    }
    out
}

/// The pod sets of a component that declares none, as the AppWrapper webhook infers them.
fn inferred(
    t: &Value,
    kind: &str,
    group: &str,
    base: &str,
    i: usize,
    roles: &mut Vec<Role>,
    errors: &mut Vec<FieldError>,
) {
    let template = format!("{base}/template");
    // `InferPodSets` knows these kinds at these versions only (its GroupVersionKind switch):
    // any other version of them, like any other kind, has no pod sets inferred.
    let version =
        t.get("apiVersion").and_then(Value::as_str).map_or("", |v| v.rsplit('/').next().unwrap_or(v));
    let known = match (group, kind) {
        ("", "Pod") | ("apps", "Deployment" | "StatefulSet") | ("batch", "Job") => version == "v1",
        ("jobset.x-k8s.io", "JobSet") => version == "v1alpha2",
        ("kubeflow.org", "PyTorchJob") | ("ray.io", "RayCluster" | "RayJob") => version == "v1",
        _ => false,
    };
    if !known {
        return;
    }
    match (group, kind) {
        ("", "Pod") => roles.push(Role { name: role_name(i, kind, "", 1), pods: 1, template }),
        ("apps", "Deployment" | "StatefulSet") => {
            let mut own = Vec::new();
            let pods = int_at(t, "/spec/replicas", 1, &mut own);
            errors.extend(own.into_iter().map(|e| prefixed(e, &template)));
            roles.push(Role {
                name: role_name(i, kind, "", 1),
                pods,
                template: format!("{template}/spec/template"),
            });
        }
        ("batch", "Job")
        | ("jobset.x-k8s.io", "JobSet")
        | ("kubeflow.org", "PyTorchJob")
        | ("ray.io", "RayCluster" | "RayJob") => match inspect(t) {
            Some(Ok(shape)) => {
                let n = shape.roles.len();
                for r in shape.roles {
                    roles.push(Role {
                        name: role_name(i, kind, &r.name, n),
                        pods: r.pods,
                        template: format!("{template}{}", r.template),
                    });
                }
            }
            Some(Err(e)) => errors.extend(e.into_iter().map(|e| prefixed(e, &template))),
            None => {}
        },
        // AppWrapper infers no pod sets for any other kind (a Service, a ConfigMap — or a TFJob,
        // a ReplicaSet, which need declared ones): the component adds no member, as it adds no
        // pods to the workload AppWrapper and Kueue account for.
        _ => {}
    }
}

/// The `podSetInfos` entry of the role whose template is at `template`, the `j`-th pod set of its
/// component: where it is, to merge into the pods of that role as the AppWrapper controller does.
pub fn pod_set_info<'a>(obj: &'a Value, template: &str, j: usize) -> Option<&'a Value> {
    let rest = template.strip_prefix("/spec/components/")?;
    let i = rest.split('/').next()?;
    obj.at(&format!("/spec/components/{i}/podSetInfos/{j}")).filter(|v| v.is_object())
}

/// The component index of the role whose template is at `template`.
pub fn component_of(template: &str) -> Option<&str> {
    template.strip_prefix("/spec/components/")?.split('/').next()
}

/// `e` (a field of the wrapped object) as a field of the AppWrapper, under `template`.
fn prefixed(e: FieldError, template: &str) -> FieldError {
    FieldError::new(format!("{}.{}", path_of(template), e.path), e.message)
}

/// A pod set's role (subgroup) name: the component's index, and the wrapped role's name (or the
/// pod set's index) when the component has more than one.
fn role_name(i: usize, kind: &str, role: &str, count: usize) -> String {
    let kind = kind.to_ascii_lowercase();
    if count > 1 && !role.is_empty() { format!("{i}-{kind}-{role}") } else { format!("{i}-{kind}") }
}

/// An AppWrapper pod-set path (`template.spec.replicatedJobs[1].template.spec.template`, relative
/// to the component) as a JSON pointer (`/template/spec/replicatedJobs/1/template/spec/template`).
pub fn pointer_of(path: &str) -> String {
    let mut out = String::new();
    for part in path.split('.') {
        let (key, indexes) = match part.find('[') {
            Some(at) => (&part[..at], &part[at..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push('/');
            out.push_str(&key.replace('~', "~0").replace('/', "~1"));
        }
        for index in indexes.split('[').filter(|s| !s.is_empty()) {
            out.push('/');
            out.push_str(index.trim_end_matches(']'));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wrapper(components: Value) -> Value {
        json!({"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
               "metadata": {"name": "aw", "namespace": "ml"}, "spec": {"components": components}})
    }

    #[test]
    fn pod_set_paths_are_pointers() {
        assert_eq!(pointer_of("template.spec.template"), "/template/spec/template");
        assert_eq!(
            pointer_of("template.spec.replicatedJobs[1].template.spec.template"),
            "/template/spec/replicatedJobs/1/template/spec/template"
        );
        assert_eq!(pointer_of("template"), "/template");
    }

    #[test]
    fn declared_and_inferred_pod_sets_are_the_gang() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                         "spec": {"parallelism": 4, "completions": 2, "template": {"spec": {"containers": []}}}});
        let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                            "spec": {"replicas": 3, "template": {"spec": {"containers": []}}}});
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}});
        let aw = wrapper(json!([
            {"template": job},
            {"template": deploy.clone(), "podSets": [{"path": "template.spec.template", "replicas": 3}]},
            {"template": svc},
        ]));
        let shape = inspect(&aw).unwrap().unwrap();
        let got: Vec<_> =
            shape.roles.iter().map(|r| (r.name.as_str(), r.pods, r.template.as_str())).collect();
        assert_eq!(
            got,
            [
                ("0-job", 2, "/spec/components/0/template/spec/template"),
                ("1-deployment", 3, "/spec/components/1/template/spec/template"),
            ]
        );
        assert_eq!(shape.min_member, 5);
        // A kind AppWrapper infers no pod sets for (a TFJob): no member unless declared.
        let tf = json!({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "t"},
            "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": []}}}}}});
        let only_tf = wrapper(json!([{"template": tf.clone()}]));
        assert!(matches!(inspect(&only_tf), Some(Err(_))), "runs no pods");
        let declared = wrapper(json!([{"template": tf,
            "podSets": [{"path": "template.spec.tfReplicaSpecs.Worker.template", "replicas": 2}]}]));
        assert_eq!(inspect(&declared).unwrap().unwrap().min_member, 2);
    }

    #[test]
    fn pod_set_infos_are_merged_into_the_pods_as_the_controller_merges_them() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"parallelism": 2, "template": {"metadata": {"labels": {"app": "mine"}},
                "spec": {"nodeSelector": {"disk": "ssd"}, "schedulingGates": [{"name": "g1"}],
                         "containers": [{"name": "c", "image": "x"}]}}}});
        let info = json!({"labels": {"app": "kueue", "flavor": "a100"}, "annotations": {"a": "b"},
            "nodeSelector": {"disk": "hdd", "zone": "z1"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "schedulingGates": [{"name": "g1"}, {"name": "kueue.x-k8s.io/topology"}]});
        let aw = wrapper(json!([{"template": job, "podSetInfos": [info]}]));
        let pods = super::super::expand_admitted(&aw).unwrap();
        assert_eq!(pods.len(), 2);
        for p in &pods {
            let (m, s) = (&p["metadata"], &p["spec"]);
            assert_eq!(m["labels"]["app"], "mine", "the template's value stays");
            assert_eq!(m["labels"]["flavor"], "a100");
            assert_eq!(m["labels"][LABEL], "aw", "the controller's label");
            assert_eq!(m["annotations"]["a"], "b");
            assert_eq!(s["nodeSelector"], json!({"disk": "ssd", "zone": "z1"}));
            assert_eq!(s["tolerations"][0]["key"], "gpu");
            assert_eq!(s["schedulingGates"], json!([{"name": "g1"}, {"name": "kueue.x-k8s.io/topology"}]));
        }
        // No infos: the template as written.
        let plain =
            wrapper(json!([{"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}}]));
        let pods = super::super::expand_admitted(&plain).unwrap();
        assert!(pods[0]["spec"].get("tolerations").is_none_or(Value::is_null), "{}", pods[0]);
    }

    #[test]
    fn refused_as_the_appwrapper_webhook_refuses() {
        let errors = |aw: &Value| match inspect(aw) {
            Some(Err(e)) => e.iter().map(ToString::to_string).collect::<Vec<_>>(),
            other => panic!("expected errors, got {other:?}"),
        };
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "other"},
                         "spec": {"containers": []}});
        let e = errors(&wrapper(json!([{"template": pod}])));
        assert!(e[0].starts_with("spec.components[0].template.metadata.namespace: Forbidden"), "{e:?}");
        let nested = wrapper(json!([{"template": wrapper(json!([]))}]));
        assert!(errors(&nested)[0].contains("Nested AppWrappers are forbidden"));
        let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                            "spec": {"template": {"spec": {"containers": []}}}});
        let e = errors(&wrapper(
            json!([{"template": deploy.clone(), "podSets": [{"path": "template.spec.nope"}]}]),
        ));
        assert!(e[0].starts_with("spec.components[0].podSets[0].path: Invalid value"), "{e:?}");
        let e = errors(&wrapper(json!([{"template": deploy, "podSets": [{"replicas": 1}]}])));
        assert!(e[0].contains("podspec must specify path"), "{e:?}");
        // Declared pod sets against those the webhook infers for the kind (`ValidatePodSets`).
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                         "spec": {"parallelism": 4, "template": {"spec": {"containers": []}}}});
        let declared = |sets: Value| errors(&wrapper(json!([{"template": job.clone(), "podSets": sets}])));
        let e = declared(json!([{"path": "template.spec.template", "replicas": 3}]));
        assert!(
            e[0].ends_with("replica count 3 differs from inferred count 4 for PodSet at path position 'template.spec.template'"),
            "{e:?}"
        );
        assert!(e[0].starts_with("spec.components[0].podSets: Invalid value"), "{e:?}");
        let e = declared(
            json!([{"path": "template.spec.template", "replicas": 4}, {"path": "template.spec.template"}]),
        );
        assert!(e[0].contains("multiple DeclaredPodSets with path 'template.spec.template'"), "{e:?}");
        let js = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "s"},
            "spec": {"replicatedJobs": [
                {"name": "a", "template": {"spec": {"template": {"spec": {"containers": []}}}}},
                {"name": "b", "replicas": 2, "template": {"spec": {"parallelism": 2, "template": {"spec": {"containers": []}}}}}]}});
        let e = errors(&wrapper(json!([{"template": js.clone(), "podSets": [
            {"path": "template.spec.replicatedJobs[0].template.spec.template"}]}])));
        assert!(e[0].contains("DeclaredPodSet count 1 differs from inferred count 2"), "{e:?}");
        let e = errors(&wrapper(json!([{"template": js.clone(), "podSets": [
            {"path": "template.spec.replicatedJobs[0].template.spec.template"},
            {"path": "template.spec.replicatedJobs[0].template.spec.template", "replicas": 4}]}])));
        assert!(e[0].contains("multiple DeclaredPodSets"), "{e:?}");
        let ok = wrapper(json!([{"template": js.clone(), "podSets": [
            {"path": "template.spec.replicatedJobs[1].template.spec.template", "replicas": 4},
            {"path": "template.spec.replicatedJobs[0].template.spec.template"}]}]));
        assert_eq!(
            inspect(&ok).unwrap().unwrap().min_member,
            5,
            "declared in another order: matched by path"
        );
        // A Ray group's count is its `replicas` to the webhook, whatever its hosts.
        let ray = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}},
                     "workerGroupSpecs": [{"groupName": "w", "replicas": 2, "numOfHosts": 2,
                        "template": {"spec": {"containers": []}}}]}});
        let ok = wrapper(json!([{"template": ray.clone(), "podSets": [
            {"path": "template.spec.headGroupSpec.template"},
            {"path": "template.spec.workerGroupSpecs[0].template", "replicas": 2}]}]));
        assert!(inspect(&ok).unwrap().is_ok(), "{:?}", inspect(&ok));
        let e = errors(&wrapper(json!([{"template": ray, "podSets": [
            {"path": "template.spec.headGroupSpec.template"},
            {"path": "template.spec.workerGroupSpecs[0].template", "replicas": 4}]}])));
        assert!(e[0].contains("replica count 4 differs from inferred count 2"), "{e:?}");
        // A version `InferPodSets` does not know infers nothing: with no pod sets declared, none.
        let old_ray = json!({"apiVersion": "ray.io/v1alpha1", "kind": "RayCluster", "metadata": {"name": "r"},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}}}});
        let e = errors(&wrapper(json!([{"template": old_ray}])));
        assert!(e[0].contains("components contains no podspecs"), "{e:?}");
        // A hostile list of pod sets is refused before it is read: one error, not one a set.
        let sets: Vec<Value> = (0..100_000).map(|_| json!({"path": ""})).collect();
        let e = errors(&wrapper(json!([{"template": job.clone(), "podSets": sets}])));
        assert!(e.len() <= 2, "{:?}", &e[..e.len().min(3)]);
        assert!(e[0].contains("has 100000 pod sets"), "{e:?}");
        // Kueue's limit of 8 pod sets an AppWrapper, and none at all.
        let many: Vec<Value> = (0..9).map(|_| json!({"template": job.clone()})).collect();
        let e = errors(&wrapper(Value::Array(many)));
        assert!(e[0].contains("components contains 9 podspecs; at most 8 are allowed"), "{e:?}");
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}});
        let e = errors(&wrapper(json!([{"template": service}])));
        assert!(e[0].contains("components contains no podspecs"), "{e:?}");
        // The wrapped object's own errors, under its path in the AppWrapper.
        let bad = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                         "spec": {"parallelism": -1, "template": {"spec": {"containers": []}}}});
        let e = errors(&wrapper(json!([{"template": bad}])));
        assert!(e[0].starts_with("spec.components[0].template.spec.parallelism"), "{e:?}");
    }
}
