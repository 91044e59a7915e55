//! `pods/binding`, `pods/eviction` through PodDisruptionBudgets, graceful deletion, and the
//! faults the fake injects on them.

use std::time::Duration;

use kube_gang_tests::{FakeApi, FaultKind, gang_pod, pdb};
use serde_json::{Value, json};

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";

fn binding(name: &str, uid: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": "ml", "uid": uid},
           "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
}

fn eviction(name: &str) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "ml"}})
}

fn bind_uri(name: &str) -> String {
    format!("/api/v1/namespaces/ml/pods/{name}/binding")
}

fn evict_uri(name: &str) -> String {
    format!("/api/v1/namespaces/ml/pods/{name}/eviction")
}

fn running(name: &str, app: &str) -> Value {
    let mut p = gang_pod("ml", name, "g", 1);
    p["metadata"]["labels"]["app"] = json!(app);
    p["spec"]["nodeName"] = json!("n1");
    p["status"]["phase"] = json!("Running");
    p
}

#[tokio::test]
async fn a_binding_sets_the_node_and_pod_scheduled() {
    let api = FakeApi::start(&[]).await;
    let mut p = gang_pod("ml", "w-0", "g", 1);
    p["status"]["nominatedNodeName"] = json!("n1");
    p["status"]["conditions"] =
        json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]);
    api.put(p);
    let a = api.call("POST", &bind_uri("w-0"), JSON, &binding("w-0", "uid-w-0", "n1")).await;
    assert_eq!((a.status, a.body["status"].as_str()), (201, Some("Success")), "{:#}", a.body);
    let pod = api.get("v1", "Pod", "ml", "w-0").unwrap();
    assert_eq!(pod["spec"]["nodeName"], "n1");
    assert!(pod["status"].get("nominatedNodeName").is_none());
    let cond = &pod["status"]["conditions"][0];
    assert_eq!((cond["type"].as_str(), cond["status"].as_str()), (Some("PodScheduled"), Some("True")));
    assert!(cond["lastTransitionTime"].as_str().is_some());
    let again = api.call("POST", &bind_uri("w-0"), JSON, &binding("w-0", "uid-w-0", "n2")).await;
    assert_eq!(again.status, 409);
    assert_eq!(
        again.body["message"],
        "Operation cannot be fulfilled on pods/binding \"w-0\": pod w-0 is already assigned to node \"n1\""
    );
}

#[tokio::test]
async fn a_binding_is_refused_for_another_uid_a_gated_pod_or_no_node() {
    let api = FakeApi::start(&[]).await;
    let mut gated = gang_pod("ml", "w-0", "g", 1);
    gated["spec"]["schedulingGates"] = json!([{"name": "kueue.x-k8s.io/admission"}]);
    api.put(gated);
    let a = api.call("POST", &bind_uri("w-0"), JSON, &binding("w-0", "uid-other", "n1")).await;
    assert_eq!(a.status, 409);
    assert_eq!(
        a.body["message"],
        "Operation cannot be fulfilled on pods/binding \"w-0\": Precondition failed: UID in precondition: uid-other, UID in object meta: uid-w-0"
    );
    let a = api.call("POST", &bind_uri("w-0"), JSON, &binding("w-0", "uid-w-0", "n1")).await;
    assert_eq!((a.status, a.body["reason"].as_str()), (409, Some("Conflict")));
    assert_eq!(
        a.body["message"],
        "Operation cannot be fulfilled on pods/binding \"w-0\": pod w-0 has non-empty .spec.schedulingGates"
    );
    assert!(api.get("v1", "Pod", "ml", "w-0").unwrap()["spec"].get("nodeName").is_none());
    let mut no_node = binding("w-0", "uid-w-0", "");
    no_node["target"].as_object_mut().unwrap().remove("name");
    let a = api.call("POST", &bind_uri("w-0"), JSON, &no_node).await;
    assert_eq!((a.status, a.body["details"]["causes"][0]["field"].as_str()), (422, Some("target.name")));
    let a = api.call("POST", &bind_uri("nope"), JSON, &binding("nope", "u", "n1")).await;
    assert_eq!(a.status, 404);
}

#[tokio::test]
async fn a_binding_lost_to_another_scheduler_is_a_real_conflict() {
    let api = FakeApi::start(&[]).await;
    api.put(gang_pod("ml", "w-0", "g", 1));
    api.fault_with("POST", "/pods/w-0/binding", FaultKind::BoundElsewhere("n9".into()), 1);
    let a = api.call("POST", &bind_uri("w-0"), JSON, &binding("w-0", "uid-w-0", "n1")).await;
    assert_eq!(a.status, 409);
    assert!(
        a.body["message"].as_str().unwrap().ends_with("is already assigned to node \"n9\""),
        "{:#}",
        a.body
    );
    assert_eq!(api.get("v1", "Pod", "ml", "w-0").unwrap()["spec"]["nodeName"], "n9");
    // An injected 409 reads as the API server's own.
    api.put(gang_pod("ml", "w-1", "g", 1));
    api.fault("POST", "/binding", 409, 1);
    let a = api.call("POST", &bind_uri("w-1"), JSON, &binding("w-1", "uid-w-1", "n1")).await;
    assert_eq!(
        (a.status, a.body["reason"].as_str(), a.body["kind"].as_str()),
        (409, Some("Conflict"), Some("Status"))
    );
    assert_eq!(api.requests_to("POST", "/binding").iter().map(|r| r.status).collect::<Vec<_>>(), [409, 409]);
}

#[tokio::test]
async fn an_eviction_consumes_the_budget_then_is_refused_with_429() {
    let api = FakeApi::start(&[]).await;
    api.put(pdb("ml", "web", &[("app", "web")], 1, 3, 2));
    for i in 0..3 {
        api.put(running(&format!("web-{i}"), "web"));
    }
    let a = api.call("POST", &evict_uri("web-0"), JSON, &eviction("web-0")).await;
    assert_eq!(a.status, 201, "{:#}", a.body);
    let budget = api.get("policy/v1", "PodDisruptionBudget", "ml", "web").unwrap();
    assert_eq!(budget["status"]["disruptionsAllowed"], 0);
    assert!(budget["status"]["disruptedPods"]["web-0"].is_string());
    assert_eq!(budget["status"]["desiredHealthy"], 2, "the rest of the status kept");
    assert_eq!(budget["status"]["conditions"][0]["reason"], "InsufficientPods");
    let a = api.call("POST", &evict_uri("web-1"), JSON, &eviction("web-1")).await;
    assert_eq!((a.status, a.body["reason"].as_str()), (429, Some("TooManyRequests")));
    assert_eq!(a.body["message"], "Cannot evict pod as it would violate the pod's disruption budget.");
    assert_eq!(a.body["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert_eq!(
        a.body["details"]["causes"][0]["message"],
        "The disruption budget web needs 2 healthy pods and has 3 currently"
    );
    assert_eq!(a.retry_after, None);
    assert!(api.get("v1", "Pod", "ml", "web-1").unwrap()["metadata"].get("deletionTimestamp").is_none());
}

#[tokio::test]
async fn a_budget_not_yet_observed_asks_to_retry_after_ten_seconds() {
    let api = FakeApi::start(&[]).await;
    let mut budget = pdb("ml", "web", &[("app", "web")], 5, 3, 1);
    budget["metadata"]["generation"] = json!(2);
    api.put(budget);
    api.put(running("web-0", "web"));
    let a = api.call("POST", &evict_uri("web-0"), JSON, &eviction("web-0")).await;
    assert_eq!((a.status, a.retry_after.as_deref()), (429, Some("10")));
    assert_eq!(
        a.body["details"]["causes"][0]["message"],
        "The disruption budget web is still being processed by the server."
    );
}

#[tokio::test]
async fn pending_pods_are_evicted_past_a_budget_and_two_budgets_are_an_error() {
    let api = FakeApi::start(&[]).await;
    api.put(pdb("ml", "none", &[("app", "web")], 0, 1, 1));
    let mut pending = gang_pod("ml", "p-0", "g", 1);
    pending["metadata"]["labels"]["app"] = json!("web");
    api.put(pending);
    let a = api.call("POST", &evict_uri("p-0"), JSON, &eviction("p-0")).await;
    assert_eq!(a.status, 201, "a pending pod ignores budgets: {:#}", a.body);
    assert!(api.get("v1", "Pod", "ml", "p-0").is_none(), "never scheduled: deleted at once");
    api.put(pdb("ml", "second", &[("app", "web")], 1, 1, 1));
    api.put(running("web-0", "web"));
    let a = api.call("POST", &evict_uri("web-0"), JSON, &eviction("web-0")).await;
    assert_eq!((a.status, a.body["reason"].as_str()), (500, Some("InternalError")));
    let mut wrong = eviction("web-0");
    wrong["deleteOptions"] = json!({"preconditions": {"uid": "other"}});
    let a = api.call("POST", &evict_uri("web-0"), JSON, &wrong).await;
    assert_eq!(a.status, 409);
}

#[tokio::test]
async fn an_evicted_running_pod_terminates_gracefully() {
    let api = FakeApi::start(&[]).await;
    let mut p = running("web-0", "web");
    p["spec"]["terminationGracePeriodSeconds"] = json!(45);
    api.put(p);
    let a = api.call("POST", &evict_uri("web-0"), JSON, &eviction("web-0")).await;
    assert_eq!(a.status, 201);
    let pod = api.get("v1", "Pod", "ml", "web-0").unwrap();
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 45);
    assert!(pod["metadata"]["deletionTimestamp"].is_string());
    // A terminating pod cannot be bound, and stays until its grace period is over.
    let a = api.call("POST", &bind_uri("web-0"), JSON, &binding("web-0", "uid-web-0", "n2")).await;
    assert_eq!(a.status, 409);
    assert!(
        a.body["message"]
            .as_str()
            .unwrap()
            .ends_with("pod web-0 is being deleted, cannot be assigned to a host")
    );
    api.advance(Duration::from_secs(30));
    assert!(api.get("v1", "Pod", "ml", "web-0").is_some());
    api.advance(Duration::from_secs(16));
    assert!(api.get("v1", "Pod", "ml", "web-0").is_none());
    // A DELETE with gracePeriodSeconds: 0 removes at once; DeleteOptions of the wrong shape are a 400.
    api.put(running("web-1", "web"));
    let a = api
        .call("DELETE", "/api/v1/namespaces/ml/pods/web-1", JSON, &json!({"gracePeriodSeconds": "now"}))
        .await;
    assert_eq!(a.status, 400);
    let a =
        api.call("DELETE", "/api/v1/namespaces/ml/pods/web-1", JSON, &json!({"gracePeriodSeconds": 0})).await;
    assert_eq!(a.status, 200);
    assert!(api.get("v1", "Pod", "ml", "web-1").is_none());
}

#[tokio::test]
async fn a_short_grace_period_passes_on_the_wall_clock_too() {
    let api = FakeApi::start(&[]).await;
    let mut p = running("web-0", "web");
    p["spec"]["terminationGracePeriodSeconds"] = json!(1);
    api.put(p);
    let a = api.call("DELETE", "/api/v1/namespaces/ml/pods/web-0", JSON, &Value::Null).await;
    assert_eq!(a.status, 200);
    assert!(a.body["metadata"]["deletionTimestamp"].is_string());
    assert!(api.wait_for(Duration::from_secs(5), |f| f.get("v1", "Pod", "ml", "web-0").is_none()).await);
}

/// The kubelet's part looks only at pods being deleted (kept as they are committed, however they
/// got their `deletionTimestamp`), and still finds each of them.
#[tokio::test]
async fn terminating_pods_are_found_however_they_were_written() {
    let api = FakeApi::start(&[]).await;
    let mut gone = running("web-0", "web");
    gone["metadata"]["deletionTimestamp"] = json!("2020-01-01T00:00:00Z");
    api.put(gone);
    api.put(running("web-1", "web"));
    let mut later = running("web-2", "web");
    later["spec"]["terminationGracePeriodSeconds"] = json!(60);
    api.put(later);
    let a = api.call("DELETE", "/api/v1/namespaces/ml/pods/web-2", JSON, &Value::Null).await;
    assert_eq!(a.status, 200);
    api.advance(Duration::ZERO);
    assert!(api.get("v1", "Pod", "ml", "web-0").is_none(), "written with a past deletionTimestamp");
    assert!(api.get("v1", "Pod", "ml", "web-1").is_some(), "not being deleted");
    assert!(api.get("v1", "Pod", "ml", "web-2").is_some(), "within its grace period");
    api.advance(Duration::from_secs(61));
    assert!(api.get("v1", "Pod", "ml", "web-2").is_none(), "its grace period over");
    assert!(api.get("v1", "Pod", "ml", "web-1").is_some());
}

fn ready(name: &str, app: &str) -> Value {
    let mut p = running(name, app);
    p["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
    p
}

fn allowed(api: &FakeApi, name: &str) -> (i64, i64, i64, i64) {
    let b = api.get("policy/v1", "PodDisruptionBudget", "ml", name).unwrap();
    let at = |f: &str| b["status"][f].as_i64().unwrap_or(-1);
    (at("disruptionsAllowed"), at("currentHealthy"), at("desiredHealthy"), at("expectedPods"))
}

/// The disruption controller: `disruptionsAllowed` = currentHealthy − desiredHealthy, recomputed
/// as pods change, so a budget an eviction used up recovers when the replacement is Ready.
#[tokio::test]
async fn the_disruption_controller_gives_a_budget_back_when_the_replacement_is_ready() {
    let api = FakeApi::start(&[]).await;
    // Written by hand as "nothing allowed"; the controller computes it from the pods.
    api.put(pdb("ml", "web", &[("app", "web")], 0, 0, 2));
    for i in 0..3 {
        api.put(ready(&format!("web-{i}"), "web"));
    }
    api.put(running("web-slow", "other"));
    assert_eq!(allowed(&api, "web"), (0, 0, 2, 0), "off until a test runs it");
    api.run_disruption_controller();
    assert_eq!(allowed(&api, "web"), (1, 3, 2, 3));
    let a = api.call("POST", &evict_uri("web-0"), JSON, &eviction("web-0")).await;
    assert_eq!(a.status, 201, "{:#}", a.body);
    // Terminating: no longer healthy; the grant is dropped with it.
    assert_eq!(allowed(&api, "web"), (0, 2, 2, 3));
    let a = api.call("POST", &evict_uri("web-1"), JSON, &eviction("web-1")).await;
    assert_eq!(a.status, 429, "{:#}", a.body);
    api.advance(Duration::from_secs(60));
    assert!(api.get("v1", "Pod", "ml", "web-0").is_none(), "the victim is gone");
    assert_eq!(allowed(&api, "web"), (0, 2, 2, 2));
    // The replacement: not Ready yet, then Ready.
    api.put(running("web-3", "web"));
    assert_eq!(allowed(&api, "web"), (0, 2, 2, 3));
    api.put(ready("web-3", "web"));
    assert_eq!(allowed(&api, "web"), (1, 3, 2, 3));
    let a = api.call("POST", &evict_uri("web-1"), JSON, &eviction("web-1")).await;
    assert_eq!(a.status, 201, "{:#}", a.body);
}

/// A Ready pod of `app` controlled by `owner` = (apiVersion, kind, name).
fn owned(name: &str, app: &str, owner: (&str, &str, &str)) -> Value {
    let mut p = ready(name, app);
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": owner.0, "kind": owner.1, "name": owner.2,
        "uid": format!("uid-{}", owner.2), "controller": true}]);
    p
}

/// A workload controller of `replicas`, optionally controlled by `owner` = (apiVersion, kind, name).
fn controller(
    api_version: &str,
    kind: &str,
    name: &str,
    replicas: i64,
    owner: Option<(&str, &str, &str)>,
) -> Value {
    let mut c = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
        "spec": {"replicas": replicas}});
    if let Some((v, k, n)) = owner {
        c["metadata"]["ownerReferences"] =
            json!([{"apiVersion": v, "kind": k, "name": n, "uid": format!("uid-{n}"), "controller": true}]);
    }
    c
}

fn budget(name: &str, app: &str, rule: (&str, Value)) -> Value {
    let mut b = pdb("ml", name, &[("app", app)], 0, 0, 0);
    b["spec"] = json!({"selector": {"matchLabels": {"app": app}}});
    b["spec"][rule.0] = rule.1;
    b
}

/// `maxUnavailable` and a percentage `minAvailable` count the owning controllers' scale, not the
/// pods that exist (kube-controller-manager's `getExpectedScale`): a StatefulSet of 4 with 3 pods
/// up expects 4; a Deployment's pods count its `spec.replicas` through their ReplicaSet; pods no
/// controller owns are not expected; a controller that cannot be found allows nothing.
#[tokio::test]
async fn percentages_and_max_unavailable_count_the_controllers_scale() {
    let api = FakeApi::start(&[]).await;
    api.put(budget("web", "web", ("maxUnavailable", json!(1))));
    api.put(budget("db", "db", ("minAvailable", json!("50%"))));
    api.put(budget("loose", "loose", ("maxUnavailable", json!("50%"))));
    api.put(budget("job", "job", ("minAvailable", json!("50%"))));
    api.put(budget("count", "web", ("minAvailable", json!(2))));
    api.put(controller("apps/v1", "StatefulSet", "web", 4, None));
    api.put(controller("apps/v1", "Deployment", "db", 6, None));
    // The ReplicaSet's own replicas are not read: its Deployment's are.
    api.put(controller("apps/v1", "ReplicaSet", "db-5d8f", 4, Some(("apps/v1", "Deployment", "db"))));
    api.run_disruption_controller();
    for i in 0..3 {
        api.put(owned(&format!("web-{i}"), "web", ("apps/v1", "StatefulSet", "web")));
    }
    for i in 0..4 {
        api.put(owned(&format!("db-{i}"), "db", ("apps/v1", "ReplicaSet", "db-5d8f")));
    }
    api.put(ready("loose-0", "loose"));
    api.put(ready("loose-1", "loose"));
    // 4 expected, 3 desired, 3 healthy: nothing to spare (counting pods would allow 1).
    assert_eq!(allowed(&api, "web"), (0, 3, 3, 4));
    // An integer minAvailable counts the selected pods.
    assert_eq!(allowed(&api, "count"), (1, 3, 2, 3));
    // 50% of the Deployment's 6 is 3 desired; 4 healthy.
    assert_eq!(allowed(&api, "db"), (1, 4, 3, 6));
    // Pods without a controller are not expected: nothing can be disrupted.
    assert_eq!(allowed(&api, "loose"), (0, 2, 0, 0));
    // The StatefulSet scaled down to its 3 pods: the controller computes the budget again.
    api.put(controller("apps/v1", "StatefulSet", "web", 3, None));
    assert_eq!(allowed(&api, "web"), (1, 3, 2, 3));
    // A pod whose controller has no scale the controller can find (a Job): the sync fails and
    // the budget allows nothing, saying why.
    api.put(owned("job-0", "job", ("batch/v1", "Job", "train")));
    let b = api.get("policy/v1", "PodDisruptionBudget", "ml", "job").unwrap();
    assert_eq!(b["status"]["disruptionsAllowed"], 0);
    let condition = &b["status"]["conditions"][0];
    assert_eq!(
        (&condition["type"], &condition["status"], &condition["reason"]),
        (&json!("DisruptionAllowed"), &json!("False"), &json!("SyncFailed"))
    );
    assert_eq!(condition["message"], "found no controllers for pod \"job-0\"");
    let c = |name: &str| {
        api.get("policy/v1", "PodDisruptionBudget", "ml", name).unwrap()["status"]["conditions"][0].clone()
    };
    assert_eq!(
        (c("db")["status"].clone(), c("db")["reason"].clone()),
        (json!("True"), json!("SufficientPods"))
    );
    assert_eq!(c("loose")["reason"], "InsufficientPods");
    // An eviction against the StatefulSet's budget (its only one) is granted once, then refused.
    api.remove("policy/v1", "PodDisruptionBudget", "ml", "count");
    let a = api.call("POST", &evict_uri("web-0"), JSON, &eviction("web-0")).await;
    assert_eq!(a.status, 201, "{:#}", a.body);
    let a = api.call("POST", &evict_uri("web-1"), JSON, &eviction("web-1")).await;
    assert_eq!(a.status, 429, "{:#}", a.body);
}

/// Volcano's PodGroup CRD serves no status subresource: its status is written with the object (a
/// merge patch of the object), the phase must be one of its enum, a stale `resourceVersion` is a
/// conflict, and the change bumps the generation as a custom resource's strategy does for any
/// change but to metadata.
#[tokio::test]
async fn a_volcano_podgroup_has_no_status_subresource_and_its_phase_is_an_enum() {
    let prefix = "/apis/scheduling.volcano.sh/v1beta1";
    let api = FakeApi::start(&[(prefix, "podgroups")]).await;
    api.put(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml", "generation": 1}, "spec": {"minMember": 2}}));
    let uri = format!("{prefix}/namespaces/ml/podgroups/pg");
    let stale = api.get("scheduling.volcano.sh/v1beta1", "PodGroup", "ml", "pg").unwrap()["metadata"]
        ["resourceVersion"]
        .clone();
    let a =
        api.call("PATCH", &format!("{uri}/status"), MERGE, &json!({"status": {"phase": "Inqueue"}})).await;
    assert_eq!(a.status, 404, "{:#}", a.body);
    let a = api.call("PATCH", &uri, MERGE, &json!({"status": {"phase": "Queued"}})).await;
    assert_eq!((a.status, a.body["details"]["causes"][0]["field"].as_str()), (422, Some("status.phase")));
    assert!(a.body["message"].as_str().unwrap().contains("supported values: \"Pending\""), "{:#}", a.body);
    let a = api
        .call(
            "PATCH",
            &uri,
            MERGE,
            &json!({"metadata": {"resourceVersion": stale}, "status": {"phase": "Inqueue"}}),
        )
        .await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    assert_eq!(
        (a.body["status"]["phase"].as_str(), a.body["metadata"]["generation"].as_i64()),
        (Some("Inqueue"), Some(2))
    );
    let a = api
        .call(
            "PATCH",
            &uri,
            MERGE,
            &json!({"metadata": {"resourceVersion": stale}, "status": {"phase": "Running"}}),
        )
        .await;
    assert_eq!(a.status, 409, "{:#}", a.body);
}
