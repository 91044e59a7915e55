//! The fake API server serves cluster-autoscaler's ProvisioningRequest (`autoscaling.x-k8s.io/v1`)
//! as its CRD's schema makes kube-apiserver check it, and PodTemplates as a built-in kind.

use kube_gang_tests::FakeApi;
use serde_json::{Value, json};

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const REQUESTS: &str = "/apis/autoscaling.x-k8s.io/v1/namespaces/ml/provisioningrequests";

fn request(pod_sets: Value) -> Value {
    json!({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
           "metadata": {"name": "bert-1", "namespace": "ml"},
           "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                    "podSets": pod_sets, "parameters": {"ValidUntilSeconds": "600"}}})
}

fn fields(status: &Value) -> Vec<String> {
    status["details"]["causes"]
        .as_array()
        .map(|c| c.iter().map(|c| c["field"].as_str().unwrap_or("").to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_request_is_checked_against_the_crd_schema() {
    let api = FakeApi::start(&[("/apis/autoscaling.x-k8s.io/v1", "provisioningrequests")]).await;
    let ok = api
        .call("POST", REQUESTS, JSON, &request(json!([{"podTemplateRef": {"name": "bert-1-0"}, "count": 2}])))
        .await;
    assert_eq!(ok.status, 201, "{:#}", ok.body);

    let mut bad = request(json!([{"podTemplateRef": {"name": "Bert_0"}, "count": 0}, {"count": 1}]));
    bad["metadata"]["name"] = json!("bert-2");
    bad["spec"]["provisioningClassName"] = json!("Atomic");
    bad["spec"]["parameters"] = json!({"ValidUntilSeconds": "9".repeat(256)});
    let a = api.call("POST", REQUESTS, JSON, &bad).await;
    assert_eq!(a.status, 422, "{:#}", a.body);
    assert_eq!(a.body["reason"], "Invalid");
    assert_eq!(
        fields(&a.body),
        [
            "spec.provisioningClassName",
            "spec.podSets[0].podTemplateRef.name",
            "spec.podSets[0].count",
            "spec.podSets[1].podTemplateRef",
            "spec.parameters.ValidUntilSeconds"
        ]
    );
    let empty = request(json!([]));
    let a =
        api.call("POST", REQUESTS, JSON, &json!({"metadata": {"name": "e"}, "spec": empty["spec"]})).await;
    assert_eq!(fields(&a.body), ["spec.podSets"], "{:#}", a.body);
    let no_spec = api.call("POST", REQUESTS, JSON, &json!({"metadata": {"name": "n"}})).await;
    assert_eq!(no_spec.status, 400, "{:#}", no_spec.body);

    // The spec is immutable (`self == oldSelf`); the status is the autoscaler's to write.
    let change = json!({"spec": {"podSets": [{"podTemplateRef": {"name": "bert-1-0"}, "count": 3}]}});
    let a = api.call("PATCH", &format!("{REQUESTS}/bert-1"), MERGE, &change).await;
    assert_eq!(a.status, 422, "{:#}", a.body);
    assert_eq!(fields(&a.body), ["spec.podSets"]);
    let status = json!({"status": {"conditions": [{"type": "Provisioned", "status": "True", "reason": "Provisioned",
        "message": "", "lastTransitionTime": "2026-11-22T09:00:00Z"}]}});
    let a = api.call("PATCH", &format!("{REQUESTS}/bert-1/status"), MERGE, &status).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    let bad_condition = json!({"status": {"conditions": [{"type": "Provisioned", "status": "Maybe", "reason": "x",
        "message": "", "lastTransitionTime": "2026-11-22T09:00:00Z"}]}});
    let a = api.call("PATCH", &format!("{REQUESTS}/bert-1/status"), MERGE, &bad_condition).await;
    assert_eq!(a.status, 422, "{:#}", a.body);
}

#[tokio::test]
async fn pod_templates_are_served_and_decoded_as_the_core_type() {
    let api = FakeApi::start(&[]).await;
    let path = "/api/v1/namespaces/ml/podtemplates";
    let t = json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "bert-1-0", "namespace": "ml"},
        "template": {"spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}});
    let a = api.call("POST", path, JSON, &t).await;
    assert_eq!(a.status, 201, "{:#}", a.body);
    let bad = json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x", "namespace": "ml"},
        "template": {"spec": {"containers": "not a list"}}});
    assert_eq!(api.call("POST", path, JSON, &bad).await.status, 400);
    assert_eq!(api.call("DELETE", &format!("{path}/bert-1-0"), JSON, &Value::Null).await.status, 200);
}
