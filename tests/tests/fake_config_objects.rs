//! The fake refuses Secrets and webhook configurations as kube-apiserver does
//! (`tests/src/config_objects.rs`): what the webhook's certificate management writes must pass
//! these, so they must be as strict as the real thing.

use kube_gang_tests::FakeApi;
use serde_json::{Value, json};

const JSON: &str = "application/json";
const SECRETS: &str = "/api/v1/namespaces/kube-gang-system/secrets";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";

async fn fake() -> FakeApi {
    FakeApi::start(&[
        ("/api/v1", "secrets"),
        ("/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations"),
        ("/apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations"),
    ])
    .await
}

fn causes(body: &Value) -> Vec<String> {
    body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| format!("{}: {}", c["field"].as_str().unwrap_or(""), c["message"].as_str().unwrap_or("")))
        .collect()
}

#[tokio::test]
async fn secrets_are_checked_as_the_api_server_checks_them() {
    let fake = fake().await;
    // Data is base64: anything else does not decode (400).
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"a": "not base64!"}});
    assert_eq!(fake.call("POST", SECRETS, JSON, &bad).await.status, 400);
    // Keys are config-map keys; a TLS Secret holds tls.crt and tls.key.
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "kubernetes.io/tls",
                     "data": {"ca/crt": "YQ==", "tls.crt": "YQ=="}});
    let a = fake.call("POST", SECRETS, JSON, &bad).await;
    assert_eq!(a.status, 422, "{}", a.body);
    let c = causes(&a.body);
    assert!(c.iter().any(|c| c.starts_with("data[ca/crt]: Invalid value")), "{c:?}");
    assert!(c.iter().any(|c| c.starts_with("data[tls.key]: Required value")), "{c:?}");
    // More than 1 MiB of data together.
    let big = "A".repeat(700 * 1024);
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"a": big, "b": big}});
    let a = fake.call("POST", SECRETS, JSON, &bad).await;
    assert_eq!(a.status, 422);
    assert!(causes(&a.body).iter().any(|c| c.starts_with("data: Too long")), "{:?}", causes(&a.body));

    // stringData is stored as data, never as itself.
    let ok =
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}});
    let a = fake.call("POST", SECRETS, JSON, &ok).await;
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(a.body["data"]["k"], "dg==");
    assert!(a.body.get("stringData").is_none());
    // The type never changes.
    let mut changed = a.body.clone();
    changed["type"] = "kubernetes.io/tls".into();
    changed["data"] = json!({"tls.crt": "YQ==", "tls.key": "YQ=="});
    let a = fake.call("PUT", &format!("{SECRETS}/s"), JSON, &changed).await;
    assert_eq!(a.status, 422);
    assert!(
        causes(&a.body)
            .iter()
            .any(|c| c.starts_with("type: Invalid value") && c.contains("field is immutable"))
    );
    // An immutable Secret's data never changes.
    let frozen = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "f"}, "immutable": true, "data": {"a": "YQ=="}});
    let a = fake.call("POST", SECRETS, JSON, &frozen).await;
    let mut thawed = a.body.clone();
    thawed["data"]["a"] = "Yg==".into();
    let a = fake.call("PUT", &format!("{SECRETS}/f"), JSON, &thawed).await;
    assert_eq!(a.status, 422);
    assert!(causes(&a.body).iter().any(|c| c.starts_with("data: Forbidden")), "{:?}", causes(&a.body));
}

fn hook(name: &str) -> Value {
    json!({"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
           "clientConfig": {"service": {"name": "gang-webhook", "namespace": "kube-gang-system", "path": "/mutate", "port": 443}},
           "rules": [{"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"], "operations": ["CREATE"]}]})
}

#[tokio::test]
async fn webhook_configurations_are_checked_as_the_api_server_checks_them() {
    let fake = fake().await;
    let config = |hooks: Vec<Value>| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
               "metadata": {"name": "gang-webhook"}, "webhooks": hooks})
    };
    // caBundle is []byte: base64 or the body does not decode.
    let mut h = hook("a.mutate.kube-gang.io");
    h["clientConfig"]["caBundle"] = "not base64!".into();
    assert_eq!(fake.call("POST", MUTATING, JSON, &config(vec![h])).await.status, 400);

    let mut bad = hook("two.segments");
    bad["timeoutSeconds"] = 31.into();
    bad["failurePolicy"] = "Sometimes".into();
    bad["clientConfig"]["url"] = "https://example.invalid".into();
    bad["matchConditions"] = json!([{"name": "x", "expression": ""}, {"name": "x", "expression": "true"}]);
    let mut dup = hook("a.mutate.kube-gang.io");
    dup.as_object_mut().unwrap().remove("sideEffects");
    let a = fake.call("POST", MUTATING, JSON, &config(vec![bad, dup.clone(), dup])).await;
    assert_eq!(a.status, 422, "{}", a.body);
    let c = causes(&a.body);
    for want in [
        "webhooks[0].name: Invalid value",
        "webhooks[0].timeoutSeconds: Invalid value",
        "webhooks[0].failurePolicy: Unsupported value",
        "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
        "webhooks[0].matchConditions[0].expression: Required value",
        "webhooks[0].matchConditions[1].name: Duplicate value",
        "webhooks[1].sideEffects: Required value",
        "webhooks[2].name: Duplicate value",
    ] {
        assert!(c.iter().any(|c| c.starts_with(want)), "{want} in {c:?}");
    }
    // A good one, with a caBundle, is stored and can be updated.
    let mut good = hook("a.mutate.kube-gang.io");
    good["clientConfig"]["caBundle"] = "YQ==".into();
    let a = fake.call("POST", MUTATING, JSON, &config(vec![good])).await;
    assert_eq!(a.status, 201, "{}", a.body);
}
