//! The gang lookup end to end: the webhook, in-process over TLS, watching Gangs on the fake API
//! server (`kube-gang-tests`). A pod naming an inner subgroup of a Gang the cluster holds is denied;
//! one naming a leaf is allowed; with the lookup off, or no API server to reach, the webhook still
//! becomes ready and allows both (an unknown gang may be created later). Every wait is bounded.

use std::time::Duration;

use kube_gang_tests::FakeApi;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "support/mod.rs"]
mod support;
use support::free_port;

const BOUND: Duration = Duration::from_secs(20);

/// The webhook, with a kubeconfig (written into its directory) when given one.
struct Webhook(support::Server);

impl Webhook {
    async fn start(kubeconfig: Option<&str>, extra: &[&str]) -> Webhook {
        let config = tempfile::tempdir().unwrap();
        let path = config.path().join("kubeconfig").display().to_string();
        let mut flags: Vec<&str> = extra.to_vec();
        if let Some(text) = kubeconfig {
            std::fs::write(&path, text).unwrap();
            flags.extend(["--kubeconfig", path.as_str()]);
        }
        // The kubeconfig is read at start: its directory may go once the webhook is ready.
        Webhook(support::start(&flags).await)
    }

    /// Waits until `GET path` on the probe port satisfies `ok`.
    async fn wait_for(&self, path: &str, ok: impl Fn(u16, &str) -> bool) {
        let waited = tokio::time::timeout(BOUND, async {
            loop {
                if let Ok((status, body)) = probe(self.0.probe, path).await
                    && ok(status, &body)
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "{path} never answered as expected");
    }

    async fn gangs_known(&self, n: usize) {
        let line = format!("gang_webhook_gangs_known {n}\n");
        self.wait_for("/metrics", |status, body| status == 200 && body.contains(&line)).await;
    }

    /// The validating hook's `response` for a CREATE of `pod`.
    async fn validate(&self, pod: &Value) -> Value {
        self.review("/validate", pod).await
    }

    /// The mutating hook's JSON patch for a CREATE of `pod` (empty when it has none).
    async fn mutate(&self, pod: &Value) -> Vec<Value> {
        use base64::Engine as _;
        let response = self.review("/mutate", pod).await;
        assert_eq!(response["allowed"], true, "{response}");
        let Some(patch) = response["patch"].as_str() else { return Vec::new() };
        let bytes = base64::engine::general_purpose::STANDARD.decode(patch).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    /// The `response` of the hook at `path` for a CREATE of `pod`.
    async fn review(&self, path: &str, pod: &Value) -> Value {
        let body = serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "lookup", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "userInfo": {"username": "admin"}, "namespace": "ml",
                        "name": pod["metadata"]["name"], "operation": "CREATE", "object": pod}
        }))
        .unwrap();
        let exchange = async {
            let mut tls = support::tls(self.0.port, self.0.ca.as_bytes()).await.unwrap();
            let head = format!(
                "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            tls.write_all(head.as_bytes()).await.unwrap();
            tls.write_all(&body).await.unwrap();
            let mut out = Vec::new();
            let _ = tls.read_to_end(&mut out).await;
            out
        };
        let out = tokio::time::timeout(BOUND, exchange).await.expect("an answer in time");
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        let (_, body) = text.split_once("\r\n\r\n").unwrap();
        serde_json::from_str::<Value>(body).unwrap()["response"].clone()
    }

    async fn stop(mut self) {
        if let Some(stop) = self.0.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(BOUND, self.0.done).await.expect("stopped in time").unwrap().unwrap();
    }
}

async fn probe(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let (status, text) =
        support::plain(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).await?;
    Ok((status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
}

fn gang() -> Value {
    json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
           "metadata": {"name": "train", "namespace": "ml"},
           "spec": {"minMember": 1, "subGroups": [
               {"name": "workers", "minMember": 2},
               {"name": "workers-a", "parent": "workers", "minMember": 1},
               {"name": "workers-b", "parent": "workers", "minMember": 1}]}})
}

fn pod(name: &str, subgroup: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "ml",
                        "labels": {"kube-gang.io/gang": "train", "kube-gang.io/subgroup": subgroup}},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

async fn fake_with_gang() -> FakeApi {
    let fake = FakeApi::start(&[("/apis/kube-gang.io/v1alpha1", "gangs")]).await;
    fake.put(gang());
    fake
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_on_an_inner_subgroup_of_a_gang_in_the_cluster_is_denied_and_one_on_a_leaf_allowed() {
    let fake = fake_with_gang().await;
    let webhook = Webhook::start(Some(&fake.kubeconfig()), &[]).await;
    webhook.gangs_known(1).await;

    let inner = webhook.validate(&pod("inner", "workers")).await;
    assert_eq!(inner["allowed"], false, "{inner}");
    assert_eq!(inner["status"]["code"], 422);
    let cause = &inner["status"]["details"]["causes"][0];
    assert_eq!(cause["field"], "metadata.labels[kube-gang.io/subgroup]");
    assert!(cause["message"].as_str().unwrap().contains("\"workers\" is an inner subgroup"), "{cause}");
    let unknown = webhook.validate(&pod("unknown", "workers-c")).await;
    assert_eq!(unknown["allowed"], false, "{unknown}");
    let leaf = webhook.validate(&pod("leaf", "workers-a")).await;
    assert_eq!(leaf["allowed"], true, "{leaf}");

    // The Gang deleted: the watch forgets it, and the pod is judged as one of an unknown gang.
    fake.remove("kube-gang.io/v1alpha1", "Gang", "ml", "train").unwrap();
    webhook.gangs_known(0).await;
    assert_eq!(webhook.validate(&pod("inner", "workers")).await["allowed"], true);
    // Created again: known again.
    fake.put(gang());
    webhook.gangs_known(1).await;
    assert_eq!(webhook.validate(&pod("inner", "workers")).await["allowed"], false);
    webhook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_on_an_inner_subgroup_of_a_kai_pod_group_is_denied_too() {
    // KAI's PodGroup served beside the Gang (in the test above it is not: its watch fails with 404
    // and the Gang lookup works regardless).
    let fake = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/scheduling.run.ai/v2alpha2", "podgroups"),
    ])
    .await;
    fake.put(json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                    "metadata": {"name": "serve", "namespace": "ml"},
                    "spec": {"minMember": 2, "subGroups": [
                        {"name": "decode"},
                        {"name": "decode-leader", "parent": "decode", "minMember": 1},
                        {"name": "decode-workers", "parent": "decode", "minMember": 1}]}}));
    let webhook = Webhook::start(Some(&fake.kubeconfig()), &[]).await;
    webhook.gangs_known(1).await;
    let kai = |name: &str, subgroup: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "ml", "annotations": {"pod-group-name": "serve"},
                            "labels": {"kai.scheduler/subgroup-name": subgroup}},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    };
    let inner = webhook.validate(&kai("inner", "decode")).await;
    assert_eq!(inner["allowed"], false, "{inner}");
    assert_eq!(
        inner["status"]["details"]["causes"][0]["field"],
        "metadata.labels[kai.scheduler/subgroup-name]"
    );
    assert_eq!(webhook.validate(&kai("leaf", "decode-workers")).await["allowed"], true);
    webhook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grove_pod_on_a_group_config_is_denied_and_one_on_its_pod_group_gets_our_scheduler() {
    // A Grove PodGang as its operator writes it for a PodCliqueSet replica: a scaling group's
    // replica (leader + workers) as a group config over two pod groups.
    let fake = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/scheduler.grove.io/v1alpha1", "podgangs"),
    ])
    .await;
    fake.put(json!({"apiVersion": "scheduler.grove.io/v1alpha1", "kind": "PodGang",
                    "metadata": {"name": "serve-0", "namespace": "ml"},
                    "spec": {"podgroups": [
                        {"name": "serve-0-prefill-0-leader", "minReplicas": 1, "podReferences": []},
                        {"name": "serve-0-prefill-0-worker", "minReplicas": 2, "podReferences": []}],
                     "topologyConstraintGroupConfigs": [{"name": "serve-0-prefill-0",
                        "podGroupNames": ["serve-0-prefill-0-leader", "serve-0-prefill-0-worker"]}]}}));
    let webhook = Webhook::start(Some(&fake.kubeconfig()), &[]).await;
    webhook.gangs_known(1).await;
    let grove = |name: &str, clique: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "ml",
                            "labels": {"grove.io/podgang": "serve-0", "grove.io/podclique": clique}},
               "spec": {"schedulerName": "default-scheduler", "containers": [{"name": "c", "image": "busybox"}]}})
    };
    let inner = webhook.validate(&grove("inner", "serve-0-prefill-0")).await;
    assert_eq!(inner["allowed"], false, "{inner}");
    assert_eq!(inner["status"]["details"]["causes"][0]["field"], "metadata.labels[grove.io/podclique]");
    let leaf = webhook.validate(&grove("leaf", "serve-0-prefill-0-worker")).await;
    assert_eq!(leaf["allowed"], true, "{leaf}");
    // The mutating hook hands Grove's default-scheduler pod to ours.
    let patch = webhook.mutate(&grove("leaf", "serve-0-prefill-0-worker")).await;
    assert!(
        patch.iter().any(|op| op["path"] == "/spec/schedulerName" && op["value"] == "gang-scheduler"),
        "{patch:?}"
    );
    webhook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_lookup_off_no_gang_is_watched_and_the_pod_is_allowed() {
    let fake = fake_with_gang().await;
    let webhook = Webhook::start(Some(&fake.kubeconfig()), &["--gang-lookup=false"]).await;
    assert_eq!(webhook.validate(&pod("inner", "workers")).await["allowed"], true);
    webhook.gangs_known(0).await;
    assert!(
        fake.requests_to("GET", "/gangs").is_empty()
            && !fake.requests().iter().any(|r| r.path.contains("/gangs")),
        "the lookup off asks the API server nothing"
    );
    webhook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_api_server_to_reach_the_webhook_is_ready_and_allows_the_pod() {
    // A kubeconfig naming a port nobody listens on.
    let nobody = free_port();
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: http://127.0.0.1:{nobody}\ncontexts:\n- name: gone\n  context:\n    cluster: gone\n    user: u\ncurrent-context: gone\nusers:\n- name: u\n  user:\n    token: t\n"
    );
    let webhook = Webhook::start(Some(&kubeconfig), &[]).await;
    assert_eq!(webhook.validate(&pod("inner", "workers")).await["allowed"], true);
    assert_eq!(probe(webhook.0.probe, "/readyz").await.unwrap().0, 200);
    webhook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_kubeconfig_is_an_error_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = support::localhost_certs(dir.path());
    drop(bundle);
    let missing = dir.path().join("no-such-kubeconfig");
    let args = <gang_webhook::Args as clap::Parser>::parse_from([
        "gang-webhook".to_string(),
        "--listen".into(),
        format!("127.0.0.1:{}", free_port()),
        "--probe-listen".into(),
        format!("127.0.0.1:{}", free_port()),
        "--tls-cert-file".into(),
        dir.path().join("tls.crt").display().to_string(),
        "--tls-key-file".into(),
        dir.path().join("tls.key").display().to_string(),
        "--kubeconfig".into(),
        missing.display().to_string(),
    ]);
    let result =
        tokio::time::timeout(BOUND, gang_webhook::serve(args, std::future::pending())).await.unwrap();
    let error = format!("{:#}", result.unwrap_err());
    assert!(error.starts_with("--kubeconfig "), "{error}");
}
