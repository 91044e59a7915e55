//! Autoscaler-visible gangs against the strict fake API, with the test playing cluster-autoscaler:
//! it reads the ProvisioningRequest the scheduler writes, fails it, then provisions a node and
//! marks it `Provisioned`. No gang is ever partly bound and no request or PodTemplate is left —
//! also when the scheduler restarts at any step, and when a gang is created again under its name:
//! what the scheduler knows of its requests it reads back from them.

use std::time::Duration;

use gang_scheduler::metrics::Metrics;
use gang_scheduler::run::{Settings, run};
use kube_gang_tests::{FakeApi, gang, gang_pod, node};
use scheduler_core::Config;
use scheduler_core::config::Provisioning;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const PR: &str = "autoscaling.x-k8s.io/v1";

fn start(
    fake: &FakeApi,
    policy: Config,
    metrics: Metrics,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let config = kube::Config::new(fake.url().parse().unwrap());
    let settings = Settings {
        config: policy,
        period: Duration::from_millis(100),
        leader_elect: false,
        lease_name: "gang-scheduler".into(),
        lease_namespace: "kube-gang-system".into(),
        identity: "test-replica".into(),
        lease_duration: Duration::from_secs(15),
        retry_period: Duration::from_millis(500),
        bind_concurrency: 4,
        qps: 1000.0,
        burst: 1000,
        discovery_period: Duration::from_millis(200),
    };
    let stop = CancellationToken::new();
    let s = stop.clone();
    let handle = tokio::spawn(async move {
        run(config, settings, metrics, s).await.unwrap();
    });
    (stop, handle)
}

/// Backoffs of 3 s: the autoscaler's condition times are to the second, so a backoff counted from
/// one is at least two seconds long — time for the gang to say so on a busy machine.
fn policy() -> Config {
    let provisioning = Provisioning {
        retry_backoff: Duration::from_secs(3),
        max_retry_backoff: Duration::from_secs(6),
        ..Provisioning::default()
    };
    Config { provisioning: Some(provisioning), ..Config::default() }
}

/// One 8-GPU node and gang `ml/train` of two 8-GPU members owned by Job `train`.
fn one_node_and_a_gang_of_two(fake: &FakeApi) {
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(gang("ml", "train", 2));
    for m in 0..2 {
        let mut p = gang_pod("ml", &format!("train-{m}"), "train", 8);
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
            "uid": "uid-job-train", "controller": true, "blockOwnerDeletion": true}]);
        fake.put(p);
    }
}

fn bound(fake: &FakeApi, name: &str) -> Option<String> {
    fake.get("v1", "Pod", "ml", name)?.pointer("/spec/nodeName").and_then(Value::as_str).map(String::from)
}

fn request(fake: &FakeApi, name: &str) -> Option<Value> {
    fake.get(PR, "ProvisioningRequest", "ml", name)
}

/// Now, as the autoscaler writes a condition's `lastTransitionTime` (to the second).
fn now() -> String {
    let t = jiff::Timestamp::now();
    jiff::Timestamp::from_second(t.as_second()).unwrap().to_string()
}

/// The autoscaler's status write: `type` becomes `True`, now.
fn condition(fake: &FakeApi, name: &str, ty: &str) {
    let mut r = request(fake, name).expect("request exists");
    r["status"] = json!({"conditions": [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": now()},
        {"type": ty, "status": "True", "reason": ty, "message": "", "lastTransitionTime": now()}]});
    fake.put(r);
}

fn gang_message(fake: &FakeApi) -> String {
    fake.requests_to("PATCH", "/gangs/train/status")
        .iter()
        .filter_map(|w| {
            w.body.pointer("/status/conditions/0/message").and_then(Value::as_str).map(String::from)
        })
        .next_back()
        .unwrap_or_default()
}

#[tokio::test]
async fn the_autoscaler_fails_then_provisions_and_the_gang_is_placed_whole_with_nothing_leaked() {
    let fake = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/autoscaling.x-k8s.io/v1", "provisioningrequests"),
    ])
    .await;
    one_node_and_a_gang_of_two(&fake);
    let (stop, handle) = start(&fake, policy(), Metrics::new());

    // One request, for the one member with no room, as the CRD's schema accepts it.
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| request(f, "train-1").is_some()).await,
        "{:#?}",
        fake.requests()
    );
    let r = request(&fake, "train-1").unwrap();
    assert_eq!(r["spec"]["provisioningClassName"], "best-effort-atomic-scale-up.autoscaling.x-k8s.io");
    assert_eq!(r["spec"]["podSets"], json!([{"podTemplateRef": {"name": "train-1-0"}, "count": 1}]));
    assert_eq!(r["metadata"]["ownerReferences"][0]["uid"], "uid-job-train", "garbage-collected with the Job");
    let t = fake.get("v1", "PodTemplate", "ml", "train-1-0").expect("its PodTemplate");
    assert_eq!(t["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"], "8");
    assert_eq!(t["metadata"]["ownerReferences"][0]["kind"], "Job");
    let annotated = |f: &FakeApi| {
        (0..2).any(|m| {
            f.get("v1", "Pod", "ml", &format!("train-{m}")).is_some_and(|p| {
                p["metadata"]["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"] == "train-1"
                    && p["metadata"]["annotations"]["autoscaling.x-k8s.io/provisioning-class-name"]
                        == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
            })
        })
    };
    assert!(
        fake.wait_for(Duration::from_secs(5), annotated).await,
        "the member asked for consumes the request"
    );
    let waiting = "waiting for capacity: ProvisioningRequest ml/train-1 (best-effort-atomic-scale-up.autoscaling.x-k8s.io)";
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| gang_message(f).contains(waiting)).await,
        "{}",
        gang_message(&fake)
    );

    // The autoscaler gives up: the request stays as the record of it until the backoff has passed,
    // then it and its template go and a new one is asked.
    condition(&fake, "train-1", "Failed");
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| request(f, "train-2").is_some()).await,
        "{:#?}",
        fake.requests()
    );
    assert!(request(&fake, "train-1").is_none());
    let r = request(&fake, "train-2").unwrap();
    assert_eq!(r["metadata"]["annotations"]["kube-gang.io/attempt"], "2");
    let gang_uid =
        fake.get("kube-gang.io/v1alpha1", "Gang", "ml", "train").unwrap()["metadata"]["uid"].clone();
    assert_eq!(
        r["metadata"]["annotations"]["kube-gang.io/gang-incarnation"], gang_uid,
        "the Gang's incarnation"
    );
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| f.get("v1", "PodTemplate", "ml", "train-1-0").is_none())
            .await
    );
    assert!(fake.requests_to("POST", "/binding").is_empty(), "nothing bound while capacity is missing");

    // The autoscaler provisions a node and says so: the gang is placed whole, the request deleted.
    fake.put(node("gpu-2", "64", 8, &[]));
    condition(&fake, "train-2", "Provisioned");
    let both = |f: &FakeApi| bound(f, "train-0").is_some() && bound(f, "train-1").is_some();
    assert!(fake.wait_for(Duration::from_secs(10), both).await, "{:#?}", fake.requests());
    assert_ne!(bound(&fake, "train-0"), bound(&fake, "train-1"));
    assert_eq!(fake.requests_to("POST", "/binding").len(), 2, "both members, in one step");
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| request(f, "train-2").is_none()).await,
        "no request leaked"
    );
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| f.get("v1", "PodTemplate", "ml", "train-2-0").is_none())
            .await,
        "no template leaked"
    );
    // Every write was one the strict API server accepts.
    let refused: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| {
            (r.path.contains("provisioningrequests") || r.path.contains("podtemplates"))
                && r.status >= 400
                && r.status != 404
        })
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
    // Conditions come by a watch of the requests we manage: none is read one by one.
    let requests = fake.requests();
    assert!(
        !requests.iter().any(|r| r.method == "GET" && r.path.contains("/provisioningrequests/")),
        "no polling"
    );
    assert!(
        requests.iter().any(|r| r.method == "GET"
            && r.path == "/apis/autoscaling.x-k8s.io/v1/provisioningrequests"
            && r.query.contains("watch=true")
            && r.query.contains("labelSelector=app.kubernetes.io%2Fmanaged-by%3Dgang-scheduler")),
        "{:#?}",
        requests.iter().filter(|r| r.path.contains("provisioningrequests")).collect::<Vec<_>>()
    );
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn without_the_crd_the_feature_says_it_is_disabled_and_starts_when_it_is_installed() {
    let fake = FakeApi::start(&[("/apis/kube-gang.io/v1alpha1", "gangs")]).await;
    one_node_and_a_gang_of_two(&fake);
    let metrics = Metrics::new();
    let (stop, handle) = start(&fake, policy(), metrics.clone());
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| !f.requests_to("GET", "/provisioningrequests").is_empty())
            .await
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(metrics.provisioning_enabled.get(), 0);
    assert!(fake.requests_to("POST", "/podtemplates").is_empty(), "nothing written without the CRD");
    assert!(!gang_message(&fake).contains("waiting for capacity"));
    // The gang's status says why it asks for nothing.
    let disabled = gang_scheduler::provision::DISABLED;
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| gang_message(f).starts_with(disabled)).await,
        "{}",
        gang_message(&fake)
    );
    // cluster-autoscaler's CRD is installed: the request is written.
    fake.serve("/apis/autoscaling.x-k8s.io/v1", "provisioningrequests");
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| request(f, "train-1").is_some()).await,
        "{:#?}",
        fake.requests()
    );
    assert!(fake.wait_for(Duration::from_secs(5), |_| metrics.provisioning_enabled.get() == 1).await);
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| gang_message(f).starts_with("waiting for capacity")).await,
        "once enabled, the message names the request: {}",
        gang_message(&fake)
    );
    // Deleting the gang's members (the workload) drops its request.
    fake.remove("v1", "Pod", "ml", "train-0");
    fake.remove("v1", "Pod", "ml", "train-1");
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| request(f, "train-1").is_none()).await,
        "{:#?}",
        fake.requests()
    );
    stop.cancel();
    handle.await.unwrap();
}

/// Every status message written for gang `ml/train`, in order, with the index of its request.
fn messages(fake: &FakeApi) -> Vec<(usize, String)> {
    fake.requests()
        .into_iter()
        .enumerate()
        .filter(|(_, r)| r.method == "PATCH" && r.path.ends_with("/gangs/train/status"))
        .filter_map(|(i, r)| {
            r.body.pointer("/status/conditions/0/message").and_then(Value::as_str).map(|m| (i, m.to_string()))
        })
        .collect()
}

/// The autoscaler provisions, then takes the capacity back (`CapacityRevoked`) or lets the booking
/// lapse (`BookingExpired`) before the gang could use it: the request and its template are deleted,
/// the gang reports it and backs off before asking again, nothing is bound meanwhile; the second
/// request is provisioned for real and the gang is placed whole, with nothing left behind.
async fn provisioned_then_ended(ending: &str) {
    let fake = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/autoscaling.x-k8s.io/v1", "provisioningrequests"),
    ])
    .await;
    one_node_and_a_gang_of_two(&fake);
    let (stop, handle) = start(&fake, policy(), Metrics::new());
    assert!(fake.wait_for(Duration::from_secs(10), |f| request(f, "train-1").is_some()).await);
    condition(&fake, "train-1", "Provisioned");
    let provisioned = "capacity provisioned: ProvisioningRequest ml/train-1";
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| gang_message(f).starts_with(provisioned)).await,
        "{}",
        gang_message(&fake)
    );
    // The new node never reaches the gang: the capacity goes away.
    let mut r = request(&fake, "train-1").unwrap();
    r["status"]["conditions"].as_array_mut().unwrap().push(json!(
        {"type": ending, "status": "True", "reason": ending, "message": "", "lastTransitionTime": now()}));
    fake.put(r);
    let ended = fake.requests().len();
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| request(f, "train-2").is_some()).await,
        "{:#?}",
        fake.requests()
    );
    assert!(request(&fake, "train-1").is_none(), "the ended request is deleted");
    assert!(fake.get("v1", "PodTemplate", "ml", "train-1-0").is_none(), "and its template");
    // Backoff: between the end and the next ask, the gang said why and that it waits.
    let asked_again = fake
        .requests()
        .iter()
        .position(|r| {
            r.method == "POST"
                && r.path.ends_with("/provisioningrequests")
                && r.body["metadata"]["name"] == "train-2"
        })
        .expect("the second request was posted");
    let said = format!("capacity request train-1 ended: {ending}; asking again after backoff");
    assert!(
        messages(&fake).iter().any(|(i, m)| *i >= ended && *i < asked_again && m.starts_with(&said)),
        "ended at {ended}, asked again at {asked_again}: {:#?}",
        messages(&fake)
    );
    assert!(fake.requests_to("POST", "/binding").is_empty(), "nothing bound on capacity that went away");
    assert_eq!(fake.requests_to("POST", "/provisioningrequests").len(), 2, "one ask per attempt");

    fake.put(node("gpu-2", "64", 8, &[]));
    condition(&fake, "train-2", "Provisioned");
    let both = |f: &FakeApi| bound(f, "train-0").is_some() && bound(f, "train-1").is_some();
    assert!(fake.wait_for(Duration::from_secs(10), both).await, "{:#?}", fake.requests());
    assert_eq!(fake.requests_to("POST", "/binding").len(), 2, "both members, in one step");
    let clean = |f: &FakeApi| {
        ["train-1", "train-2"]
            .iter()
            .all(|n| request(f, n).is_none() && f.get("v1", "PodTemplate", "ml", &format!("{n}-0")).is_none())
    };
    assert!(fake.wait_for(Duration::from_secs(5), clean).await, "no request or template leaked");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn capacity_revoked_after_provisioning_is_asked_again_after_backoff_and_nothing_leaks() {
    provisioned_then_ended("CapacityRevoked").await;
}

#[tokio::test]
async fn a_booking_that_expires_is_asked_again_after_backoff_and_nothing_leaks() {
    provisioned_then_ended("BookingExpired").await;
}

/// Stops a scheduler started by [`start`] and starts another in its place: nothing it kept in
/// memory survives.
async fn restart(
    fake: &FakeApi,
    running: (CancellationToken, tokio::task::JoinHandle<()>),
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let (stop, handle) = running;
    stop.cancel();
    handle.await.unwrap();
    start(fake, policy(), Metrics::new())
}

fn posted_requests(fake: &FakeApi) -> Vec<String> {
    fake.requests_to("POST", "/provisioningrequests")
        .iter()
        .filter(|r| (200..300).contains(&r.status))
        .map(|r| r.body["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

fn consumes(fake: &FakeApi, pod: &str) -> Option<String> {
    fake.get("v1", "Pod", "ml", pod)?
        .pointer("/metadata/annotations/autoscaling.x-k8s.io~1consume-provisioning-request")
        .and_then(Value::as_str)
        .map(String::from)
}

#[tokio::test]
async fn a_restart_at_every_step_of_a_provisioning_lifecycle_changes_nothing() {
    let fake = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/autoscaling.x-k8s.io/v1", "provisioningrequests"),
    ])
    .await;
    one_node_and_a_gang_of_two(&fake);
    let running = start(&fake, policy(), Metrics::new());
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| consumes(f, "train-1").as_deref() == Some("train-1"))
            .await
    );

    // 1. Restarted while the request is open: the new process finds it and asks for nothing more.
    let running = restart(&fake, running).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(posted_requests(&fake), ["train-1"], "one request for one gang, whatever restarts");
    assert!(request(&fake, "train-1").is_some(), "not deleted by the new process");

    // 2. The request fails; restarted during the backoff: the next attempt is the next number, once.
    condition(&fake, "train-1", "Failed");
    let running = restart(&fake, running).await;
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| request(f, "train-2").is_some()).await,
        "{:#?}",
        fake.requests()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(posted_requests(&fake), ["train-1", "train-2"]);
    assert!(request(&fake, "train-1").is_none(), "the ended request deleted once it was asked again");
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| consumes(f, "train-1").as_deref() == Some("train-2")).await
    );

    // 3. Provisioned while the scheduler is down: after the restart the gang is placed whole and the
    // request and its template are deleted — a moment that fell while nobody was there.
    let (stop, handle) = running;
    stop.cancel();
    handle.await.unwrap();
    fake.put(node("gpu-2", "64", 8, &[]));
    condition(&fake, "train-2", "Provisioned");
    let running = start(&fake, policy(), Metrics::new());
    let both = |f: &FakeApi| bound(f, "train-0").is_some() && bound(f, "train-1").is_some();
    assert!(fake.wait_for(Duration::from_secs(10), both).await, "{:#?}", fake.requests());
    let clean = |f: &FakeApi| {
        ["train-1", "train-2"]
            .iter()
            .all(|n| request(f, n).is_none() && f.get("v1", "PodTemplate", "ml", &format!("{n}-0")).is_none())
    };
    assert!(fake.wait_for(Duration::from_secs(10), clean).await, "nothing leaked: {:#?}", fake.requests());
    assert_eq!(posted_requests(&fake), ["train-1", "train-2"]);
    assert_eq!(fake.requests_to("POST", "/binding").len(), 2, "both members, in one step");
    let (stop, handle) = running;
    stop.cancel();
    handle.await.unwrap();
}

/// Gang `ml/train` of `n` members of `gpus` GPUs each, owned by Job `train` of `job_uid`.
fn gang_of(fake: &FakeApi, n: u32, gpus: u32, job_uid: &str) {
    fake.put(gang("ml", "train", n));
    for m in 0..n {
        let mut p = gang_pod("ml", &format!("train-{m}"), "train", gpus);
        p["metadata"]["uid"] = json!(format!("{job_uid}-{m}"));
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
            "uid": job_uid, "controller": true, "blockOwnerDeletion": true}]);
        fake.put(p);
    }
}

#[tokio::test]
async fn a_gang_created_again_under_its_name_asks_for_its_own_capacity() {
    let fake = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/autoscaling.x-k8s.io/v1", "provisioningrequests"),
    ])
    .await;
    fake.put(node("gpu-1", "64", 8, &[]));
    // Someone else's object already has the first name the gang would use.
    fake.put(json!({"apiVersion": PR, "kind": "ProvisioningRequest",
        "metadata": {"name": "train-1", "namespace": "ml"},
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                 "podSets": [{"podTemplateRef": {"name": "other"}, "count": 1}]}}));
    gang_of(&fake, 2, 8, "uid-job-a");
    let running = start(&fake, policy(), Metrics::new());
    // A 409 on a name not ours is not taken for success: the next attempt's name is used.
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| request(f, "train-2").is_some()).await,
        "{:#?}",
        fake.requests()
    );
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| consumes(f, "train-1").as_deref() == Some("train-2")).await
    );
    let foreign = request(&fake, "train-1").unwrap();
    assert!(foreign["metadata"]["labels"].is_null(), "someone else's request is left alone");

    // The gang and its Job are deleted and created again at once, bigger: 3 members of 6 GPUs.
    fake.remove("kube-gang.io/v1alpha1", "Gang", "ml", "train");
    for m in 0..2 {
        fake.remove("v1", "Pod", "ml", &format!("train-{m}"));
    }
    gang_of(&fake, 3, 6, "uid-job-b");
    let gang_uid =
        fake.get("kube-gang.io/v1alpha1", "Gang", "ml", "train").unwrap()["metadata"]["uid"].clone();
    // Its own request: its incarnation, its pods (2 of 6 GPUs: one fits on gpu-1), consumed by
    // its members; the old one deleted.
    let own = |f: &FakeApi| {
        f.requests_to("POST", "/provisioningrequests").iter().filter(|r| r.status < 300).any(|r| {
            r.body["metadata"]["annotations"]["kube-gang.io/gang-incarnation"] == gang_uid
                && r.body["spec"]["podSets"][0]["count"] == 2
        })
    };
    assert!(
        fake.wait_for(Duration::from_secs(10), own).await,
        "{:#?}",
        fake.requests_to("POST", "/provisioningrequests")
    );
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| request(f, "train-2").is_none()).await,
        "the old gang's request goes"
    );
    let name = fake
        .requests_to("POST", "/provisioningrequests")
        .iter()
        .rev()
        .find(|r| r.status < 300)
        .and_then(|r| r.body["metadata"]["name"].as_str().map(String::from))
        .unwrap();
    assert_ne!(name, "train-2", "not the old gang's name");
    for m in 1..3 {
        let pod = format!("train-{m}");
        assert!(
            fake.wait_for(Duration::from_secs(5), |f| consumes(f, &pod).as_deref() == Some(name.as_str()))
                .await,
            "{pod} consumes its own gang's request {name}, not its predecessor's"
        );
    }
    assert!(request(&fake, "train-1").is_some(), "someone else's request is still left alone");
    let (stop, handle) = running;
    stop.cancel();
    handle.await.unwrap();
}
