//! The admission router in-process, with AdmissionReviews shaped as the API server sends them; every
//! returned patch is decoded and applied, and the result asserted.

use axum::body::Body;
use base64::Engine as _;
use gang_webhook::{AppState, BODY_LIMIT, router};
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

fn review(operation: &str, kind: (&str, &str, &str), object: Value, old: Value) -> Value {
    let ns = object.pointer("/metadata/namespace").cloned().unwrap_or(json!("ml"));
    let name = object.pointer("/metadata/name").cloned().unwrap_or(json!(""));
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": kind.0, "version": kind.1, "kind": kind.2},
            "resource": {"group": kind.0, "version": kind.1, "resource": format!("{}s", kind.2.to_lowercase())},
            "requestKind": {"group": kind.0, "version": kind.1, "kind": kind.2},
            "namespace": ns, "name": name, "operation": operation,
            "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
            "object": object, "oldObject": old, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

async fn post(path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let app = router(AppState::default());
    let res = app
        .oneshot(
            Request::post(path).header("content-type", "application/json").body(Body::from(body)).unwrap(),
        )
        .await
        .unwrap();
    let status = res.status();
    (status, res.into_body().collect().await.unwrap().to_bytes().to_vec())
}

async fn admit(path: &str, review: &Value) -> Value {
    let (status, body) = post(path, serde_json::to_vec(review).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let out: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(out["kind"], "AdmissionReview");
    assert_eq!(out["response"]["uid"], review["request"]["uid"], "the response carries the request's uid");
    out["response"].clone()
}

/// Applies the response's patch to `object`.
fn patched(response: &Value, object: &Value) -> Value {
    let mut doc = object.clone();
    if let Some(p) = response.get("patch").and_then(Value::as_str) {
        assert_eq!(response["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD.decode(p).unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut doc, &patch).unwrap();
    }
    doc
}

fn pytorchjob(labels: Value) -> Value {
    let template = |gpus: u32| {
        json!({"spec": {"containers": [{"name": "pytorch", "image": "x",
        "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}})
    };
    json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "bert", "namespace": "ml", "labels": labels},
           "spec": {"pytorchReplicaSpecs": {
               "Master": {"replicas": 1, "template": template(8)},
               "Worker": {"replicas": 3, "template": template(8)}}}})
}

#[tokio::test]
async fn opted_in_workload_gets_labels_annotations_and_scheduler_in_every_template() {
    let mut job = pytorchjob(json!({"kube-gang.io/enabled": "true"}));
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = json!({"labels": {"app": "bert"}});
    let r =
        admit("/mutate", &review("CREATE", ("kubeflow.org", "v1", "PyTorchJob"), job.clone(), Value::Null))
            .await;
    assert_eq!(r["allowed"], true);
    let out = patched(&r, &job);
    for role in ["Master", "Worker"] {
        let t = &out["spec"]["pytorchReplicaSpecs"][role]["template"];
        assert_eq!(t["metadata"]["labels"]["kube-gang.io/gang"], "bert", "{role}");
        assert_eq!(t["metadata"]["labels"]["kube-gang.io/subgroup"], role.to_lowercase(), "{role}");
        assert_eq!(t["metadata"]["annotations"]["kube-gang.io/min-member"], "4", "{role}");
        assert_eq!(
            out["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"]["app"],
            "bert"
        );
        assert_eq!(t["spec"]["schedulerName"], "gang-scheduler", "{role}");
    }
    // Keys with `/` are escaped in the patch paths.
    let ops = String::from_utf8(
        base64::engine::general_purpose::STANDARD.decode(r["patch"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    assert!(ops.contains("/metadata/labels/kube-gang.io~1gang"), "{ops}");
    // A second pass is a no-op.
    let again =
        admit("/mutate", &review("CREATE", ("kubeflow.org", "v1", "PyTorchJob"), out.clone(), Value::Null))
            .await;
    assert!(again.get("patch").is_none(), "{again}");
    // And the validating hook accepts what mutation produced.
    let v =
        admit("/validate", &review("CREATE", ("kubeflow.org", "v1", "PyTorchJob"), out, Value::Null)).await;
    assert_eq!(v["allowed"], true, "{v}");
}

#[tokio::test]
async fn what_the_user_set_is_never_overwritten() {
    let mut job = pytorchjob(json!({"kube-gang.io/enabled": "true"}));
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] = json!("my-scheduler");
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] =
        json!({"annotations": {"kube-gang.io/min-member": "3"}, "labels": {"kube-gang.io/gang": "custom"}});
    let r =
        admit("/mutate", &review("CREATE", ("kubeflow.org", "v1", "PyTorchJob"), job.clone(), Value::Null))
            .await;
    let out = patched(&r, &job);
    let w = &out["spec"]["pytorchReplicaSpecs"]["Worker"]["template"];
    assert_eq!(w["spec"]["schedulerName"], "my-scheduler");
    assert_eq!(w["metadata"]["labels"]["kube-gang.io/gang"], "custom");
    assert_eq!(w["metadata"]["annotations"]["kube-gang.io/min-member"], "3");
}

#[tokio::test]
async fn workloads_that_did_not_opt_in_are_left_alone_unless_their_namespace_did() {
    let job = pytorchjob(json!({}));
    let r =
        admit("/mutate", &review("CREATE", ("kubeflow.org", "v1", "PyTorchJob"), job.clone(), Value::Null))
            .await;
    assert_eq!(r["allowed"], true);
    assert!(r.get("patch").is_none());
    let r = admit(
        "/mutate/namespace",
        &review("CREATE", ("kubeflow.org", "v1", "PyTorchJob"), job.clone(), Value::Null),
    )
    .await;
    let out = patched(&r, &job);
    assert_eq!(
        out["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"]["kube-gang.io/gang"],
        "bert"
    );
    // An explicit opt-out on the object wins over the namespace.
    let out_opt = pytorchjob(json!({"kube-gang.io/enabled": "false"}));
    let r = admit(
        "/mutate/namespace",
        &review("CREATE", ("kubeflow.org", "v1", "PyTorchJob"), out_opt, Value::Null),
    )
    .await;
    assert!(r.get("patch").is_none());
}

#[tokio::test]
async fn gang_pods_get_the_scheduler_they_lack() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "bert-worker-", "namespace": "ml", "labels": {"kube-gang.io/gang": "bert"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]}});
    let r = admit("/mutate", &review("CREATE", ("", "v1", "Pod"), pod.clone(), Value::Null)).await;
    assert_eq!(patched(&r, &pod)["spec"]["schedulerName"], "gang-scheduler");
    let plain = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "ml"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}});
    let r = admit("/mutate", &review("CREATE", ("", "v1", "Pod"), plain, Value::Null)).await;
    assert!(r.get("patch").is_none(), "pods outside any gang are untouched");
}

#[tokio::test]
async fn invalid_gangs_are_denied_with_every_field_path() {
    let gang = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
        "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"minMember": 2, "subGroups": [{"name": "a", "minMember": 0}, {"name": "b", "parent": "zz", "minMember": 1}]}});
    let r =
        admit("/validate", &review("CREATE", ("kube-gang.io", "v1alpha1", "Gang"), gang, Value::Null)).await;
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["code"], 422);
    let msg = r["status"]["message"].as_str().unwrap();
    assert!(msg.contains("spec.subGroups[0].minMember"), "{msg}");
    assert!(msg.contains("spec.subGroups[1].parent"), "{msg}");
}

#[tokio::test]
async fn updates_are_checked_old_against_new_and_dry_run_is_the_same() {
    let old = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"minMember": 1, "subGroups": [{"name": "a", "minMember": 1}]}});
    let mut new = old.clone();
    new["spec"]["subGroups"][0]["name"] = json!("renamed");
    let mut rev = review("UPDATE", ("kube-gang.io", "v1alpha1", "Gang"), new, old.clone());
    let r = admit("/validate", &rev).await;
    assert_eq!(r["allowed"], false, "{r}");
    rev["request"]["dryRun"] = json!(true);
    assert_eq!(admit("/validate", &rev).await["allowed"], false);
    let same = review("UPDATE", ("kube-gang.io", "v1alpha1", "Gang"), old.clone(), old);
    assert_eq!(admit("/validate", &same).await["allowed"], true);
}

#[tokio::test]
async fn delete_with_a_null_object_is_allowed() {
    let old = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 0}});
    let mut rev = review("DELETE", ("kube-gang.io", "v1alpha1", "Gang"), Value::Null, old);
    rev["request"]["name"] = json!("g");
    for path in ["/validate", "/mutate"] {
        assert_eq!(admit(path, &rev).await["allowed"], true);
    }
}

#[tokio::test]
async fn a_pod_claimed_by_two_gangs_is_denied_naming_both() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", "labels": {"kube-gang.io/gang": "one", "scheduling.x-k8s.io/pod-group": "two"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]}});
    let r = admit("/validate", &review("CREATE", ("", "v1", "Pod"), pod, Value::Null)).await;
    assert_eq!(r["allowed"], false);
    let msg = r["status"]["message"].as_str().unwrap();
    assert!(msg.contains("one") && msg.contains("two"), "{msg}");
}

#[tokio::test]
async fn an_opted_in_jobs_pod_naming_its_controllers_podgroup_is_allowed_and_told_what_decides() {
    // Kubernetes 1.38: the Job controller names its PodGroup (basic, unless the Job asked for a
    // gang) on every pod of the Job, beside the kube-gang label we injected into the template.
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "train-0-abcde", "namespace": "ml", "labels": {"kube-gang.io/gang": "train"}},
        "spec": {"schedulingGroup": {"podGroupName": "train-x7k2p"}, "containers": [{"name": "c", "image": "x"}]}});
    let r = admit("/validate", &review("CREATE", ("", "v1", "Pod"), pod.clone(), Value::Null)).await;
    assert_eq!(r["allowed"], true, "{r}");
    let warning = r["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.contains("names upstream pod group ml/train-x7k2p") && warning.contains("basic policy"),
        "{r}"
    );
    let r = admit("/mutate", &review("CREATE", ("", "v1", "Pod"), pod.clone(), Value::Null)).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert_eq!(patched(&r, &pod)["spec"]["schedulerName"], "gang-scheduler");
}

#[tokio::test]
async fn a_workload_that_can_never_be_satisfied_is_denied() {
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"},
                     "annotations": {"kube-gang.io/min-member": "5"}},
        "spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    let r = admit("/validate", &review("CREATE", ("batch", "v1", "Job"), job.clone(), Value::Null)).await;
    assert_eq!(r["allowed"], false);
    assert!(
        r["status"]["message"].as_str().unwrap().contains("metadata.annotations[kube-gang.io/min-member]")
    );
    // Mutation never blocks: it explains with a warning instead.
    let m = admit("/mutate", &review("CREATE", ("batch", "v1", "Job"), job, Value::Null)).await;
    assert_eq!(m["allowed"], true);
    assert!(m["warnings"][0].as_str().unwrap().contains("min-member"), "{m}");
}

#[tokio::test]
async fn malformed_bodies_are_400_and_oversized_ones_413() {
    let (status, body) = post("/validate", b"{not json".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).contains("not JSON"));
    let (status, body) =
        post("/mutate", br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).contains("request: missing"));
    let mut big = review(
        "CREATE",
        ("", "v1", "ConfigMap"),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ml"}, "data": {"blob": "x".repeat(3 * 1024 * 1024)}}),
        Value::Null,
    );
    // An object at the API server's 3 MiB limit still fits.
    assert_eq!(admit("/validate", &big).await["allowed"], true);
    big["request"]["oldObject"] = big["request"]["object"].clone();
    big["request"]["object"]["data"]["more"] = json!("y".repeat(2 * 1024 * 1024));
    let body = serde_json::to_vec(&big).unwrap();
    assert!(body.len() > BODY_LIMIT);
    let (status, _) = post("/validate", body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn metrics_count_by_hook_and_result() {
    let state = AppState::default();
    let app = router(state.clone());
    let rev = review(
        "CREATE",
        ("kubeflow.org", "v1", "PyTorchJob"),
        pytorchjob(json!({"kube-gang.io/enabled": "true"})),
        Value::Null,
    );
    let res = app
        .oneshot(Request::post("/mutate").body(Body::from(serde_json::to_vec(&rev).unwrap())).unwrap())
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let text = state.metrics.encode();
    assert!(text.contains(r#"gang_webhook_requests_total{hook="mutate",result="allowed"} 1"#), "{text}");
    assert!(text.contains("gang_webhook_request_duration_seconds_count{hook=\"mutate\"} 1"), "{text}");
    let build = format!("gang_webhook_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
    assert!(text.contains(&build), "{text}");
}

/// Kueue's partial admission (KEP-420): the UPDATE that unsuspends a Job with a lower
/// `spec.parallelism` gets a patch making the template's member counts the admitted count.
#[tokio::test]
async fn kueue_partial_admission_update_is_patched_to_the_admitted_count() {
    let template = json!({"metadata": {"labels": {"kube-gang.io/gang": "sweep"},
            "annotations": {"kube-gang.io/min-member": "6", "kube-gang.io/total-member": "6"}},
        "spec": {"schedulerName": "gang-scheduler", "restartPolicy": "Never",
            "containers": [{"name": "w", "image": "w", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}});
    let old = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "sweep", "namespace": "ml",
            "labels": {"kube-gang.io/enabled": "true", "kueue.x-k8s.io/queue-name": "team-a"},
            "annotations": {"kueue.x-k8s.io/job-min-parallelism": "2"}},
        "spec": {"suspend": true, "parallelism": 6, "completions": 6, "template": template}});
    let mut new = old.clone();
    new["spec"]["suspend"] = json!(false);
    new["spec"]["parallelism"] = json!(4);
    new["spec"]["completions"] = json!(4);
    let response =
        admit("/mutate", &review("UPDATE", ("batch", "v1", "Job"), new.clone(), old.clone())).await;
    assert_eq!(response["allowed"], true, "{response}");
    let admitted = patched(&response, &new);
    let a = &admitted["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(
        (a["kube-gang.io/min-member"].as_str(), a["kube-gang.io/total-member"].as_str()),
        (Some("4"), Some("4"))
    );
    // The validating hook allows the patched object.
    let verdict = admit("/validate", &review("UPDATE", ("batch", "v1", "Job"), admitted, old)).await;
    assert_eq!(verdict["allowed"], true, "{verdict}");
}

fn statefulset(policy: Option<&str>, template_labels: Value) -> Value {
    let mut sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "zk", "namespace": "db", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"replicas": 3, "serviceName": "zk", "selector": {"matchLabels": {"app": "zk"}},
                 "template": {"metadata": {"labels": template_labels},
                              "spec": {"containers": [{"name": "zk", "image": "zookeeper:3.9"}]}}}});
    if let Some(p) = policy {
        sts["spec"]["podManagementPolicy"] = json!(p);
    }
    sts
}

#[tokio::test]
async fn staged_creation_that_can_never_start_is_denied_naming_the_field_and_the_fix() {
    let sts = statefulset(None, json!({"app": "zk"}));
    let kind = ("apps", "v1", "StatefulSet");
    // The mutating hook injects (a gang of all 3 pods) and only warns; the validating hook, which
    // sees the injected object, denies.
    let mutated = admit("/mutate", &review("CREATE", kind, sts.clone(), Value::Null)).await;
    assert_eq!(mutated["allowed"], true);
    let injected = patched(&mutated, &sts);
    let r = admit("/validate", &review("CREATE", kind, injected, Value::Null)).await;
    assert_eq!(r["allowed"], false, "{r}");
    let causes = r["status"]["details"]["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 1, "{r}");
    assert_eq!(causes[0]["field"], "spec.podManagementPolicy");
    let message = causes[0]["message"].as_str().unwrap();
    assert!(message.contains("the gang needs 3 at once, so it can never start"), "{message}");
    assert!(message.contains("set podManagementPolicy: Parallel"), "{message}");
    // Parallel: nothing staged, nothing said.
    let parallel = statefulset(Some("Parallel"), json!({"app": "zk"}));
    let r = admit("/validate", &review("CREATE", kind, parallel, Value::Null)).await;
    assert_eq!((r["allowed"].as_bool(), r.get("warnings")), (Some(true), None), "{r}");
}

#[tokio::test]
async fn staged_creation_whose_pods_name_a_gang_of_unknown_size_is_only_warned_about() {
    // The pods name a coscheduling PodGroup the webhook does not watch: its minimum may be 1, so
    // ordered creation is a warning that says what to check, not a denial.
    let sts = statefulset(None, json!({"app": "zk", "scheduling.x-k8s.io/pod-group": "zk"}));
    let kind = ("apps", "v1", "StatefulSet");
    let r = admit("/validate", &review("CREATE", kind, sts, Value::Null)).await;
    assert_eq!(r["allowed"], true, "{r}");
    let warnings = r["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{r}");
    let w = warnings[0].as_str().unwrap();
    assert!(w.starts_with("spec.podManagementPolicy: OrderedReady"), "{w}");
    assert!(w.contains("name gang db/zk whose minimum is not known here"), "{w}");
}

#[tokio::test]
async fn a_suspended_job_named_by_the_api_server_is_given_its_gang_in_the_update_that_unsuspends_it() {
    let kind = ("batch", "v1", "Job");
    let created = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"generateName": "sample-job-", "namespace": "team-a",
                     "labels": {"kube-gang.io/enabled": "true", "kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {"suspend": true, "parallelism": 3,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}});
    // CREATE: the mutating hook sees no name and injects nothing, saying nothing (it is suspended).
    let m = admit("/mutate", &review("CREATE", kind, created.clone(), Value::Null)).await;
    assert_eq!((m["allowed"].as_bool(), m.get("patch"), m.get("warnings")), (Some(true), None, None), "{m}");
    // The API server names it; Kueue unsuspends it in an UPDATE: now the gang is injected.
    let mut stored = created;
    stored["metadata"]["name"] = json!("sample-job-x7kzq");
    let mut unsuspended = stored.clone();
    unsuspended["spec"]["suspend"] = json!(false);
    let m = admit("/mutate", &review("UPDATE", kind, unsuspended.clone(), stored.clone())).await;
    let patched = patched(&m, &unsuspended);
    let t = &patched["spec"]["template"];
    assert_eq!(t["metadata"]["labels"]["kube-gang.io/gang"], "sample-job-x7kzq", "{m}");
    assert_eq!(t["metadata"]["annotations"]["kube-gang.io/min-member"], "3");
    assert!(t["spec"].get("schedulerName").is_none(), "immutable on update: the pod hook sets it");
    let v = admit("/validate", &review("UPDATE", kind, patched, stored)).await;
    assert_eq!((v["allowed"].as_bool(), v.get("warnings")), (Some(true), None), "{v}");
}

#[tokio::test]
async fn a_running_job_named_by_the_api_server_is_a_gang_through_its_pods() {
    let kind = ("batch", "v1", "Job");
    let created = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"generateName": "train-", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"parallelism": 2,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}});
    // CREATE: no name to give the gang; its pods will name it, from the Job controller's label.
    let m = admit("/mutate", &review("CREATE", kind, created.clone(), Value::Null)).await;
    assert!(m.get("warnings").is_none(), "{m}");
    let job = patched(&m, &created);
    let t = &job["spec"]["template"];
    assert_eq!(t["metadata"]["annotations"]["kube-gang.io/gang-from"], "batch.kubernetes.io/job-name", "{m}");
    assert_eq!(t["metadata"]["annotations"]["kube-gang.io/min-member"], "2");
    assert!(t["metadata"]["labels"].get("kube-gang.io/gang").is_none());
    assert_eq!(t["spec"]["schedulerName"], "gang-scheduler");
    // The validating hook sees the generated name: the same verdict, nothing warned.
    let mut named = job.clone();
    named["metadata"]["name"] = json!("train-x7kzq");
    let v = admit("/validate", &review("CREATE", kind, named, Value::Null)).await;
    assert_eq!((v["allowed"].as_bool(), v.get("warnings")), (Some(true), None), "{v}");
    // A pod the Job controller makes from the template reaches the pod hooks and is allowed.
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "train-x7kzq-", "namespace": "ml",
                     "labels": {"batch.kubernetes.io/job-name": "train-x7kzq"},
                     "annotations": t["metadata"]["annotations"].clone()},
        "spec": {"schedulerName": "gang-scheduler", "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}});
    let v = admit("/validate", &review("CREATE", ("", "v1", "Pod"), pod.clone(), Value::Null)).await;
    assert_eq!(v["allowed"].as_bool(), Some(true), "{v}");
    // One naming a label no controller writes a workload's name in is refused, naming the field.
    let mut bad = pod;
    bad["metadata"]["annotations"]["kube-gang.io/gang-from"] = json!("app");
    let v = admit("/validate", &review("CREATE", ("", "v1", "Pod"), bad, Value::Null)).await;
    assert_eq!(v["allowed"].as_bool(), Some(false), "{v}");
    assert!(
        v["status"]["message"].as_str().unwrap().contains("metadata.annotations[kube-gang.io/gang-from]"),
        "{v}"
    );
}
