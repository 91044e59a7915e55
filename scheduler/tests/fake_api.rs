//! gang-scheduler against the HTTP-level fake Kubernetes API: the exact requests a real API
//! server would receive, and behaviour under injected faults.

use std::time::Duration;

use gang_scheduler::metrics::Metrics;
use gang_scheduler::run::{Settings, run};
use kube_gang_tests::{FakeApi, gang, gang_pod, node};
use scheduler_core::Config;
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn start(fake: &FakeApi, leader_elect: bool) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    start_with(fake, leader_elect, Config::default()).await
}

async fn start_with(
    fake: &FakeApi,
    leader_elect: bool,
    policy: Config,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    start_lease(fake, leader_elect, policy, Duration::from_secs(15)).await
}

async fn start_lease(
    fake: &FakeApi,
    leader_elect: bool,
    policy: Config,
    lease_duration: Duration,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    start_full(fake, leader_elect, policy, lease_duration, Metrics::new()).await
}

async fn start_full(
    fake: &FakeApi,
    leader_elect: bool,
    policy: Config,
    lease_duration: Duration,
    metrics: Metrics,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let settings = Settings { config: policy, leader_elect, lease_duration, ..settings() };
    start_settings(fake, settings, metrics)
}

/// What every test starts from: cycles every 100 ms, no rate limit to speak of.
fn settings() -> Settings {
    Settings {
        config: Config::default(),
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
    }
}

fn start_settings(
    fake: &FakeApi,
    settings: Settings,
    metrics: Metrics,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let config = kube::Config::new(fake.url().parse().unwrap());
    let stop = CancellationToken::new();
    let s = stop.clone();
    let handle = tokio::spawn(async move {
        run(config, settings, metrics, s).await.unwrap();
    });
    (stop, handle)
}

async fn fake() -> FakeApi {
    FakeApi::start(&[("/apis/kube-gang.io/v1alpha1", "gangs")]).await
}

fn bound(fake: &FakeApi, ns: &str, name: &str) -> Option<String> {
    fake.get("v1", "Pod", ns, name)?.pointer("/spec/nodeName").and_then(|n| n.as_str()).map(String::from)
}

/// Two 8-GPU nodes and gang `ml/train` of two 8-GPU members: one member per node.
fn two_nodes_and_a_gang_of_two(fake: &FakeApi) {
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(node("gpu-2", "64", 8, &[]));
    fake.put(gang("ml", "train", 2));
    fake.put(gang_pod("ml", "train-0", "train", 8));
    fake.put(gang_pod("ml", "train-1", "train", 8));
}

fn both_bound(fake: &FakeApi) -> bool {
    bound(fake, "ml", "train-0").is_some() && bound(fake, "ml", "train-1").is_some()
}

#[tokio::test]
async fn binds_a_whole_gang_with_the_pod_uid_and_reports_status() {
    let fake = fake().await;
    two_nodes_and_a_gang_of_two(&fake);
    let (stop, handle) = start(&fake, false).await;
    let done = fake.wait_for(Duration::from_secs(10), both_bound).await;
    assert!(done, "requests: {:#?}", fake.requests());
    let binds = fake.requests_to("POST", "/binding");
    assert_eq!(binds.len(), 2, "one binding per member, no retries: {binds:#?}");
    let b0 = binds.iter().find(|r| r.path == "/api/v1/namespaces/ml/pods/train-0/binding").unwrap();
    let uid = fake.get("v1", "Pod", "ml", "train-0").unwrap()["metadata"]["uid"].clone();
    assert_eq!(b0.body["metadata"]["uid"], uid);
    assert_eq!(b0.body["kind"], "Binding");
    assert_ne!(
        bound(&fake, "ml", "train-0"),
        bound(&fake, "ml", "train-1"),
        "8-GPU members need a node each"
    );
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| !f.requests_to("PATCH", "/gangs/train/status").is_empty())
            .await,
        "gang status written"
    );
    let status = fake.requests_to("PATCH", "/gangs/train/status")[0].body.clone();
    assert_eq!(status["status"]["phase"], "Scheduled");
    assert_eq!(status["status"]["conditions"][0]["reason"], "Scheduled");
    assert_eq!(status["status"]["observedGeneration"], 1);
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_gang_that_cannot_fit_binds_nothing_and_says_why_once() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(gang("ml", "big", 2));
    fake.put(gang_pod("ml", "big-0", "big", 8));
    fake.put(gang_pod("ml", "big-1", "big", 8));
    let (stop, handle) = start(&fake, false).await;
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| !f.requests_to("PATCH", "/pods/big-1/status").is_empty())
            .await
    );
    // Several cycles pass.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(fake.requests_to("POST", "/binding").is_empty(), "all or nothing");
    let cond = &fake.requests_to("PATCH", "/pods/big-1/status")[0].body["status"]["conditions"][0];
    assert_eq!(cond["type"], "PodScheduled");
    assert_eq!(cond["status"], "False");
    assert!(cond["message"].as_str().unwrap().contains("room for 1 of the 2 members needed"), "{cond}");
    // Said once: a write that would change nothing is not sent again, though every write comes
    // back as a watch event that starts another cycle.
    for path in ["/pods/big-0/status", "/pods/big-1/status", "/gangs/big/status"] {
        let writes = fake.requests_to("PATCH", path);
        assert_eq!(writes.len(), 1, "{path}: {writes:#?}");
    }
    let events = fake.requests_to("POST", "/events");
    assert_eq!(events.len(), 1, "rate-limited: one FailedScheduling while nothing changes: {events:#?}");
    assert_eq!(events[0].body["reason"], "FailedScheduling");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_failed_binding_is_retried_and_the_gang_completes() {
    let fake = fake().await;
    two_nodes_and_a_gang_of_two(&fake);
    fake.fault("POST", "/pods/train-1/binding", 500, 1);
    let (stop, handle) = start(&fake, false).await;
    let done = fake.wait_for(Duration::from_secs(10), both_bound).await;
    assert!(done, "requests: {:#?}", fake.requests_to("POST", "/binding"));
    let sent = fake.requests_to("POST", "/pods/train-1/binding");
    assert_eq!(sent.len(), 2, "failed once, retried once: {sent:#?}");
    assert_eq!(
        fake.requests_to("POST", "/pods/train-0/binding").len(),
        1,
        "the bound member is not re-bound"
    );
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_watch_that_expires_relists_and_sees_what_changed() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    let (stop, handle) = start(&fake, false).await;
    let watching = |f: &FakeApi| {
        ["/api/v1/pods", "/api/v1/nodes", "/apis/kube-gang.io/v1alpha1/gangs"]
            .iter()
            .all(|p| f.requests().iter().any(|r| r.path == *p && r.query.contains("watch=true")))
    };
    assert!(fake.wait_for(Duration::from_secs(10), watching).await, "{:#?}", fake.requests());
    // Compaction: every open watch ends with 410 Gone, and resuming from any version seen so far
    // is 410 too, so what is created now reaches the scheduler only if it lists again.
    fake.compact();
    let compacted = std::time::Instant::now();
    fake.put(gang_pod("ml", "late-0", "late", 4));
    fake.put(gang("ml", "late", 1));
    assert!(
        fake.wait_for(Duration::from_secs(15), |f| bound(f, "ml", "late-0").is_some()).await,
        "{:#?}",
        fake.requests()
    );
    let relisted = |f: &FakeApi, path: &str| {
        f.requests().iter().any(|r| {
            r.method == "GET" && r.path == path && !r.query.contains("watch=true") && r.at > compacted
        })
    };
    assert!(relisted(&fake, "/api/v1/pods"), "pods listed again: {:#?}", fake.requests());
    // Every other watch ended too (each lists again after its own backoff).
    for path in ["/api/v1/nodes", "/apis/kube-gang.io/v1alpha1/gangs"] {
        assert!(fake.wait_for(Duration::from_secs(10), |f| relisted(f, path)).await, "{path} listed again");
    }
    // Only the new list could tell the scheduler about the pod: its watch ended at the compaction.
    let listed = fake.requests().into_iter().find(|r| r.path == "/api/v1/pods" && r.at > compacted).unwrap();
    let binding = fake.requests_to("POST", "/pods/late-0/binding")[0].clone();
    assert!(listed.at < binding.at && !listed.query.contains("watch=true"), "{listed:#?}");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn only_the_lease_holder_binds() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(gang("ml", "g", 1));
    fake.put(gang_pod("ml", "g-0", "g", 1));
    // Another replica holds a fresh lease.
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    fake.put(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "gang-scheduler", "namespace": "kube-gang-system"},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 3600, "renewTime": now}}));
    let (stop, handle) = start(&fake, true).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(fake.requests_to("POST", "/binding").is_empty(), "a follower never binds");
    // The holder releases the lease: this replica takes over and binds.
    fake.put(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "gang-scheduler", "namespace": "kube-gang-system"},
        "spec": {"leaseDurationSeconds": 1, "renewTime": now}}));
    assert!(fake.wait_for(Duration::from_secs(15), |f| bound(f, "ml", "g-0").is_some()).await);
    let lease = fake.get("coordination.k8s.io/v1", "Lease", "kube-gang-system", "gang-scheduler").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "test-replica");
    stop.cancel();
    handle.await.unwrap();
    let lease = fake.get("coordination.k8s.io/v1", "Lease", "kube-gang-system", "gang-scheduler").unwrap();
    assert!(lease["spec"].get("holderIdentity").is_none_or(|h| h.is_null()), "released on shutdown: {lease}");
}

#[tokio::test]
async fn a_throttled_binding_never_stalls_the_loop_and_its_gang_completes_after_retry_after() {
    let fake = fake().await;
    two_nodes_and_a_gang_of_two(&fake);
    fake.put(node("gpu-3", "64", 8, &[]));
    // The API server throttles train-1's binding three times (429, Retry-After: 1).
    fake.fault("POST", "/pods/train-1/binding", 429, 3);
    let (stop, handle) = start(&fake, false).await;
    let throttled = |f: &FakeApi| !f.requests_to("POST", "/pods/train-1/binding").is_empty();
    assert!(fake.wait_for(Duration::from_secs(10), throttled).await, "{:#?}", fake.requests());
    // Meanwhile another gang arrives: it is placed while train-1 still waits out its 429s (kube's
    // built-in retries would hold the loop inside that one binding).
    fake.put(gang("ml", "other", 1));
    fake.put(gang_pod("ml", "other-0", "other", 8));
    assert!(fake.wait_for(Duration::from_secs(10), |f| bound(f, "ml", "other-0").is_some()).await);
    // The throttled member binds after the server's Retry-After each time — held back that
    // long, not as long as a refusal (5 s, 10 s, 20 s) — and its gang ends whole.
    assert!(
        fake.wait_for(Duration::from_secs(12), both_bound).await,
        "{:#?}",
        fake.requests_to("POST", "/binding")
    );
    let binds = fake.requests_to("POST", "/pods/train-1/binding");
    assert_eq!(binds.iter().map(|r| r.status).collect::<Vec<_>>(), [429, 429, 429, 201], "{binds:#?}");
    for pair in binds.windows(2) {
        let waited = pair[1].at.duration_since(pair[0].at);
        assert!(waited >= Duration::from_millis(950), "Retry-After: 1 honoured, retried after {waited:?}");
    }
    let other = fake.requests_to("POST", "/pods/other-0/binding");
    assert!(other[0].at < binds[3].at, "the other gang waited for the throttled binding");
    // Never re-bound elsewhere, and no node holds two 8-GPU members.
    assert_eq!(fake.requests_to("POST", "/pods/train-0/binding").len(), 1);
    let nodes: std::collections::BTreeSet<_> =
        ["train-0", "train-1", "other-0"].iter().filter_map(|p| bound(&fake, "ml", p)).collect();
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_throttled_member_withholds_the_rest_of_its_gang() {
    let fake = fake().await;
    for n in 0..3 {
        fake.put(node(&format!("gpu-{n}"), "64", 8, &[]));
    }
    fake.put(gang("ml", "wide", 3));
    for m in 0..3 {
        fake.put(gang_pod("ml", &format!("wide-{m}"), "wide", 8));
    }
    // One binding at a time: the first member's 429 stops the others before they go out.
    fake.fault("POST", "/pods/wide-0/binding", 429, 1);
    let settings = Settings { bind_concurrency: 1, ..settings() };
    let (stop, handle) = start_settings(&fake, settings, Metrics::new());
    let all = |f: &FakeApi| (0..3).all(|m| bound(f, "ml", &format!("wide-{m}")).is_some());
    assert!(fake.wait_for(Duration::from_secs(10), all).await, "{:#?}", fake.requests_to("POST", "/binding"));
    let binds = fake.requests_to("POST", "/binding");
    let first = &binds[0];
    assert_eq!((first.path.as_str(), first.status), ("/api/v1/namespaces/ml/pods/wide-0/binding", 429));
    // Nothing else of the gang went out in that round: the next binding came a Retry-After later.
    assert!(binds[1].at.duration_since(first.at) >= Duration::from_millis(950), "{binds:#?}");
    assert_eq!(binds.len(), 4, "one 429, then one binding per member: {binds:#?}");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn reads_are_rate_limited_too() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    // Two requests a second, a burst of three: starting up (a list and a watch per resource,
    // and a probe per optional one) would otherwise send some thirty at once.
    let begun = tokio::time::Instant::now();
    let settings = Settings { qps: 2.0, burst: 3, ..settings() };
    let (stop, handle) = start_settings(&fake, settings, Metrics::new());
    let mut seen = Vec::new();
    // Sampled until the first watch went out (each watched kind lists first; with the kinds the
    // volume filters read that is over a dozen requests at two a second), four times at least.
    while seen.len() < 4 || !fake.requests().iter().any(|r| r.query.contains("watch=true")) && seen.len() < 30
    {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let sent = fake.requests().len();
        // However late the count is read, no more can have arrived than the bucket let out since
        // the client was made (after `begun`).
        let allowed = 3.0 + 2.0 * begun.elapsed().as_secs_f64();
        assert!(
            (sent as f64) <= allowed,
            "{sent} requests within {:?}: {:#?}",
            begun.elapsed(),
            fake.requests()
        );
        seen.push(sent);
    }
    let requests = fake.requests();
    assert!(requests.iter().all(|r| r.method == "GET"), "reads only so far: {requests:#?}");
    assert!(requests.iter().any(|r| r.query.contains("watch=true")), "watches count: {requests:#?}");
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]) && seen[seen.len() - 1] > seen[0],
        "it makes progress: {seen:?}"
    );
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_member_another_scheduler_bound_first_is_counted_where_it_landed() {
    use kube_gang_tests::FaultKind;
    let fake = fake().await;
    two_nodes_and_a_gang_of_two(&fake);
    fake.put(node("gpu-3", "64", 8, &[]));
    // Just before train-1's binding is served, another scheduler binds it to gpu-3: the API server
    // answers 409 "already assigned".
    fake.fault_with("POST", "/pods/train-1/binding", FaultKind::BoundElsewhere("gpu-3".into()), 1);
    let (stop, handle) = start(&fake, false).await;
    assert!(fake.wait_for(Duration::from_secs(10), both_bound).await, "{:#?}", fake.requests());
    tokio::time::sleep(Duration::from_millis(600)).await;
    let train1 = fake.requests_to("POST", "/pods/train-1/binding");
    // Refused each time (at most once more, before the watch reports where it landed).
    assert!(!train1.is_empty() && train1.len() <= 2 && train1.iter().all(|r| r.status == 409), "{train1:#?}");
    assert_eq!(bound(&fake, "ml", "train-1").as_deref(), Some("gpu-3"));
    assert_ne!(bound(&fake, "ml", "train-0").as_deref(), Some("gpu-3"), "no node double-booked");
    assert_eq!(fake.requests_to("POST", "/pods/train-0/binding").len(), 1);
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_binding_whose_response_is_lost_is_not_repeated_elsewhere() {
    use kube_gang_tests::FaultKind;
    let fake = fake().await;
    two_nodes_and_a_gang_of_two(&fake);
    // The API server binds train-1, then the connection drops before the answer.
    fake.fault_with("POST", "/pods/train-1/binding", FaultKind::LoseResponse, 1);
    let (stop, handle) = start(&fake, false).await;
    assert!(fake.wait_for(Duration::from_secs(10), both_bound).await);
    // Several more cycles.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let binds = fake.requests_to("POST", "/binding");
    let train1: Vec<_> = binds.iter().filter(|r| r.path.ends_with("/train-1/binding")).collect();
    assert!(
        train1.iter().all(|r| r.body["target"]["name"] == train1[0].body["target"]["name"]),
        "never re-bound to another node: {train1:#?}"
    );
    assert!(train1.iter().skip(1).all(|r| r.status == 409), "{train1:#?}");
    assert_ne!(bound(&fake, "ml", "train-0"), bound(&fake, "ml", "train-1"), "no node double-booked");
    // The pod was checked rather than forgotten.
    assert!(!fake.requests_to("GET", "/pods/train-1").is_empty(), "{:#?}", fake.requests());
    stop.cancel();
    handle.await.unwrap();
}

/// A member of a CRD-less gang (annotations only) asking for a whole 8-GPU node.
fn annotated_pod(name: &str, annotations: serde_json::Value) -> serde_json::Value {
    let mut p = gang_pod("ml", name, "job", 8);
    p["metadata"]["annotations"] = annotations;
    p
}

fn events(fake: &FakeApi, reason: &str) -> usize {
    fake.requests_to("POST", "/events").iter().filter(|r| r.body["reason"] == reason).count()
}

#[tokio::test]
async fn a_crd_less_gang_times_out_across_cycles() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    let ann = json!({"kube-gang.io/min-member": "2", "kube-gang.io/timeout": "1s"});
    fake.put(annotated_pod("job-0", ann.clone()));
    fake.put(annotated_pod("job-1", ann));
    let (stop, handle) = start(&fake, false).await;
    // The timeout runs from the first cycle that saw the gang wait: only a state carried from
    // cycle to cycle gets there (the gang has no object to keep it in).
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| events(f, "GangTimedOut") > 0).await,
        "{:#?}",
        fake.requests_to("POST", "/events")
    );
    assert!(fake.requests_to("POST", "/binding").is_empty(), "nothing of it bound");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_half_bound_crd_less_gang_is_released_after_its_grace_period() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    let ann = json!({"kube-gang.io/min-member": "2"});
    // A restart left one member bound; the other can never fit.
    let mut held = annotated_pod("job-0", ann.clone());
    held["spec"]["nodeName"] = json!("gpu-1");
    held["status"]["phase"] = json!("Running");
    fake.put(held);
    fake.put(annotated_pod("job-1", ann));
    let policy = Config { stale_grace_period: Duration::from_secs(1), ..Config::default() };
    let (stop, handle) = start_with(&fake, false, policy).await;
    let released =
        fake.wait_for(Duration::from_secs(10), |f| !f.requests_to("POST", "/eviction").is_empty()).await;
    assert!(released, "{:#?}", fake.requests());
    let evictions = fake.requests_to("POST", "/eviction");
    assert_eq!(evictions[0].path, "/api/v1/namespaces/ml/pods/job-0/eviction");
    assert_eq!(evictions[0].body["deleteOptions"]["preconditions"]["uid"], "uid-job-0");
    assert!(fake.wait_for(Duration::from_secs(5), |f| events(f, "StaleGangEvicted") > 0).await);
    // Not before the grace period: the first cycle found it half-bound and told the waiting member
    // when it would be released.
    let told = fake.requests_to("PATCH", "/pods/job-1/status");
    let message = told[0].body["status"]["conditions"][0]["message"].as_str().unwrap_or("");
    assert!(message.contains("released at "), "{told:#?}");
    // Not at once: a grace period after the first cycle (the status write that says so goes out in
    // the background, and may leave a little after that cycle on a busy machine).
    assert!(evictions[0].at.duration_since(told[0].at) >= Duration::from_millis(500), "grace period kept");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_leader_that_cannot_renew_stops_binding_before_its_lease_runs_out() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    let (stop, handle) = start_lease(&fake, true, Config::default(), Duration::from_secs(3)).await;
    let holder = |f: &FakeApi| {
        f.get("coordination.k8s.io/v1", "Lease", "kube-gang-system", "gang-scheduler")
            .is_some_and(|l| l["spec"]["holderIdentity"] == "test-replica")
    };
    assert!(fake.wait_for(Duration::from_secs(10), holder).await);
    // Its renewals hang (a stalled API server): after the renew deadline (2 s of a 3 s lease) it
    // must not act, though it still believes it holds the Lease and nobody else took over yet.
    fake.delay("PUT", "/leases/gang-scheduler", Duration::from_secs(60));
    tokio::time::sleep(Duration::from_millis(2_600)).await;
    fake.put(gang("ml", "late", 1));
    fake.put(gang_pod("ml", "late-0", "late", 1));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(fake.requests_to("POST", "/binding").is_empty(), "{:#?}", fake.requests_to("POST", "/binding"));
    assert!(fake.requests_to("PATCH", "/pods/late-0/status").is_empty(), "no status writes either");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_late_status_write_never_undoes_a_binding() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(gang("ml", "big", 2));
    fake.put(gang_pod("ml", "big-0", "big", 8));
    fake.put(gang_pod("ml", "big-1", "big", 8));
    // The API server is slow to take status writes; bindings go through at once.
    fake.delay("PATCH", "/pods/big-1/status", Duration::from_millis(1_500));
    let (stop, handle) = start(&fake, false).await;
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| !f.requests_to("PATCH", "/pods/big-1/status").is_empty())
            .await
    );
    // Room appears while "Unschedulable" is still on its way: the gang is bound.
    fake.put(node("gpu-2", "64", 8, &[]));
    assert!(fake.wait_for(Duration::from_secs(5), |f| bound(f, "ml", "big-1").is_some()).await);
    // The late write was made against an older version of the pod: refused, not applied.
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| {
            f.requests_to("PATCH", "/pods/big-1/status").first().is_some_and(|r| r.status == 409)
        })
        .await,
        "{:#?}",
        fake.requests_to("PATCH", "/pods/big-1/status")
    );
    let pod = fake.get("v1", "Pod", "ml", "big-1").unwrap();
    let scheduled =
        pod["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "PodScheduled");
    assert_eq!(scheduled.unwrap()["status"], "True", "{pod:#}");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_gang_crd_installed_later_is_watched_and_its_gangs_placed() {
    // Volcano is not installed when the scheduler starts.
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(node("gpu-2", "64", 8, &[]));
    for m in 0..2 {
        let mut p = gang_pod("ml", &format!("vc-{m}"), "unused", 8);
        p["metadata"]["labels"] = json!({});
        p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": "pg"});
        fake.put(p);
    }
    let (stop, handle) = start(&fake, false).await;
    // Its members wait for a gang that does not exist (yet); nothing is bound.
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| !f
            .requests_to("GET", "/scheduling.volcano.sh/v1beta1/podgroups")
            .is_empty())
            .await
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(fake.requests_to("POST", "/binding").is_empty());
    // Volcano's CRD is installed and the PodGroup created: picked up, and the gang placed whole.
    fake.serve("/apis/scheduling.volcano.sh/v1beta1", "podgroups");
    fake.put(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": 2}}));
    let both = |f: &FakeApi| bound(f, "ml", "vc-0").is_some() && bound(f, "ml", "vc-1").is_some();
    assert!(fake.wait_for(Duration::from_secs(10), both).await, "{:#?}", fake.requests());
    assert_ne!(bound(&fake, "ml", "vc-0"), bound(&fake, "ml", "vc-1"));
    // Volcano's own object is Volcano's: no status written to it.
    assert!(fake.requests_to("PATCH", "/podgroups/pg/status").is_empty());
    stop.cancel();
    handle.await.unwrap();
}

/// Volcano's job controller creates a Job's pods only once the Job's PodGroup has left `Pending`
/// (Volcano's scheduler moves it to `Inqueue`): without that a Volcano Job opted in to kube-gang
/// never gets a pod. The scheduler moves an opted-in PodGroup (its own label, copied from the Job
/// by Volcano's controller, or its namespace's) to `Inqueue` once, with a patch of the object
/// (the CRD has no status subresource); then, as the controller would, its pods are made and
/// the gang is bound. PodGroups not opted in, or past `Pending`, are left as they are. A Kubeflow
/// training job's Volcano PodGroup is moved too, in an opted-in namespace.
#[tokio::test]
async fn an_opted_in_volcano_podgroup_is_moved_to_inqueue_so_its_controller_creates_the_pods() {
    let fake = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/scheduling.volcano.sh/v1beta1", "podgroups"),
    ])
    .await;
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(node("gpu-2", "64", 8, &[]));
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "lab", "labels": {"kube-gang.io/enabled": "true"}}}));
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}));
    let podgroup = |ns: &str, name: &str, labels: serde_json::Value, status: serde_json::Value| {
        let mut pg = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [
                {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train",
                 "uid": format!("job-{name}"), "controller": true}]},
            "spec": {"minMember": 2, "queue": "default"}});
        if !status.is_null() {
            pg["status"] = status;
        }
        pg
    };
    let on = json!({"kube-gang.io/enabled": "true"});
    // As Volcano's job controller makes it: the Job's labels, no status yet.
    fake.put(podgroup("ml", "train-a1", on.clone(), json!(null)));
    fake.put(podgroup("lab", "sweep-b2", json!({}), json!({"phase": "Pending"})));
    fake.put(podgroup("ml", "theirs-c3", json!({}), json!(null)));
    fake.put(podgroup("ml", "done-d4", on, json!({"phase": "Running", "running": 2})));
    // One Volcano's own controller makes for a Deployment's pods in an opted-in namespace: its
    // pods are Volcano's scheduler's, and so is its queue admission.
    let mut plain = podgroup("lab", "podgroup-e5", json!({}), json!({"phase": "Pending"}));
    plain["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f", "uid": "rs-1", "controller": true}]);
    fake.put(plain);
    // Kubeflow's training operator (Volcano as its gang scheduler) makes one for a PyTorchJob and
    // holds the job's pods back the same way; it copies the job's annotations, not its labels, so
    // only a namespace opts it in.
    let pytorch = |ns: &str, name: &str| {
        let mut pg = podgroup(ns, name, json!({}), json!(null));
        pg["metadata"]["ownerReferences"] = json!([{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "name": name, "uid": format!("pt-{name}"), "controller": true}]);
        pg
    };
    fake.put(pytorch("lab", "bert-f6"));
    fake.put(pytorch("ml", "bert-g7"));
    let (stop, handle) = start(&fake, false).await;
    let phase = |f: &FakeApi, ns: &str, name: &str| {
        f.get("scheduling.volcano.sh/v1beta1", "PodGroup", ns, name)
            .and_then(|pg| pg.pointer("/status/phase").and_then(|p| p.as_str()).map(String::from))
    };
    let enqueued = |f: &FakeApi| {
        phase(f, "ml", "train-a1").as_deref() == Some("Inqueue")
            && phase(f, "lab", "sweep-b2").as_deref() == Some("Inqueue")
            && phase(f, "lab", "bert-f6").as_deref() == Some("Inqueue")
    };
    assert!(fake.wait_for(Duration::from_secs(10), enqueued).await, "{:#?}", fake.requests());
    // Volcano's controller, seeing `Inqueue`, creates the Job's pods.
    for i in 0..2 {
        let mut p = gang_pod("ml", &format!("train-worker-{i}"), "unused", 8);
        p["metadata"]["labels"] = json!({});
        p["metadata"]["annotations"] =
            json!({"scheduling.k8s.io/group-name": "train-a1", "volcano.sh/task-spec": "worker"});
        fake.put(p);
    }
    let both = |f: &FakeApi| {
        bound(f, "ml", "train-worker-0").is_some() && bound(f, "ml", "train-worker-1").is_some()
    };
    assert!(fake.wait_for(Duration::from_secs(10), both).await, "{:#?}", fake.requests());
    // Cycles go on (the bindings, the pods' watch events): the move is not sent again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(fake.requests_to("PATCH", "/podgroups/train-a1").len(), 1);
    assert_eq!(fake.requests_to("PATCH", "/podgroups/sweep-b2").len(), 1);
    // Not opted in (neither it nor its namespace), or past Pending: untouched.
    assert_eq!(phase(&fake, "ml", "theirs-c3"), None);
    assert_eq!(phase(&fake, "ml", "done-d4").as_deref(), Some("Running"));
    assert!(fake.requests_to("PATCH", "/podgroups/theirs-c3").is_empty());
    assert!(fake.requests_to("PATCH", "/podgroups/done-d4").is_empty());
    assert!(fake.requests_to("PATCH", "/podgroups/podgroup-e5").is_empty());
    assert_eq!(phase(&fake, "lab", "podgroup-e5").as_deref(), Some("Pending"));
    assert!(fake.requests_to("PATCH", "/podgroups/bert-g7").is_empty(), "not opted in: its namespace is not");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_grove_podgang_is_placed_whole_and_only_once_its_pod_groups_all_fit() {
    // A Grove PodGang (a frontend, and a scaling group's replica of a leader and two workers) with
    // its pods as Grove's default backend leaves them, handed to us by the pod hook.
    let fake = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/scheduler.grove.io/v1alpha1", "podgangs"),
    ])
    .await;
    fake.put(node("gpu-1", "64", 8, &[("kube-gang.io/rack", "r1")]));
    fake.put(node("gpu-2", "64", 8, &[("kube-gang.io/rack", "r2")]));
    // As Grove's operator leaves it once every pod exists: Pending, Initialized.
    fake.put(json!({"apiVersion": "scheduler.grove.io/v1alpha1", "kind": "PodGang",
        "metadata": {"name": "serve-0", "namespace": "ml", "generation": 1},
        "status": {"phase": "Pending", "conditions": [{"type": "Initialized", "status": "True",
            "reason": "PodGangPodsCreated", "message": "PodGang is fully initialized",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        "spec": {"topologyConstraint": {"packConstraint": {"preferred": "kube-gang.io/rack"}},
         "podgroups": [
            {"name": "serve-0-frontend", "minReplicas": 1, "podReferences": []},
            {"name": "serve-0-prefill-0-leader", "minReplicas": 1, "podReferences": []},
            {"name": "serve-0-prefill-0-worker", "minReplicas": 2, "podReferences": []}],
         "topologyConstraintGroupConfigs": [{"name": "serve-0-prefill-0",
            "podGroupNames": ["serve-0-prefill-0-leader", "serve-0-prefill-0-worker"]}]}}));
    let grove = |name: &str, clique: &str, gpus: u32| {
        let mut p = gang_pod("ml", name, "unused", gpus);
        p["metadata"]["labels"] = json!({"grove.io/podgang": "serve-0", "grove.io/podclique": clique});
        p
    };
    // The workers ask for 8 GPUs each, the leader 1, the frontend 1: 18 of 16 GPUs.
    fake.put(grove("frontend-a", "serve-0-frontend", 1));
    fake.put(grove("leader-a", "serve-0-prefill-0-leader", 1));
    fake.put(grove("worker-a", "serve-0-prefill-0-worker", 8));
    fake.put(grove("worker-b", "serve-0-prefill-0-worker", 8));
    let (stop, handle) = start(&fake, false).await;
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| !f
            .requests_to("PATCH", "/pods/worker-a/status")
            .is_empty())
            .await
    );
    assert!(fake.requests_to("POST", "/binding").is_empty(), "no part of the PodGang is bound");
    assert!(
        scheduled_message(&fake, "worker-a").contains("ml/serve-0"),
        "{}",
        scheduled_message(&fake, "worker-a")
    );
    // Reported back in Grove's terms: still Pending, Scheduled=False with the reason; Grove's
    // own Initialized condition kept.
    let podgang = |f: &FakeApi| f.get("scheduler.grove.io/v1alpha1", "PodGang", "ml", "serve-0").unwrap();
    let scheduled = |f: &FakeApi| {
        podgang(f)["status"]["conditions"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["type"] == "Scheduled").cloned())
            .unwrap_or_default()
    };
    assert!(fake.wait_for(Duration::from_secs(5), |f| scheduled(f)["status"] == "False").await);
    let status = podgang(&fake)["status"].clone();
    assert_eq!(status["phase"], "Pending", "{status}");
    assert_eq!(scheduled(&fake)["reason"], "Unschedulable", "{status}");
    assert_eq!(status["conditions"][0]["type"], "Initialized", "{status}");
    assert_eq!(status.get("placementScore"), None);
    // Smaller workers: the PodGang fits, and is bound whole.
    for w in ["worker-a", "worker-b"] {
        fake.remove("v1", "Pod", "ml", w).unwrap();
        fake.put(grove(w, "serve-0-prefill-0-worker", 7));
    }
    let all = |f: &FakeApi| {
        ["frontend-a", "leader-a", "worker-a", "worker-b"].iter().all(|p| bound(f, "ml", p).is_some())
    };
    assert!(fake.wait_for(Duration::from_secs(10), all).await, "{:#?}", fake.requests());
    assert_ne!(bound(&fake, "ml", "worker-a"), bound(&fake, "ml", "worker-b"));
    // Bound: Starting, Scheduled=True, and the placement spans both racks of the preferred level.
    let started = |f: &FakeApi| podgang(f)["status"]["phase"] == "Starting";
    assert!(fake.wait_for(Duration::from_secs(5), started).await, "{}", podgang(&fake)["status"]);
    let status = podgang(&fake)["status"].clone();
    assert_eq!(
        (scheduled(&fake)["status"].as_str(), scheduled(&fake)["reason"].as_str()),
        (Some("True"), Some("Scheduled"))
    );
    assert_eq!(status["placementScore"], 0.5, "{status}");
    assert_eq!(scheduled(&fake)["observedGeneration"], 1);
    assert_eq!(status["conditions"][0]["type"], "Initialized", "{status}");
    // Running once its pods run; nothing Grove's operator wrote is lost, and an unchanged status
    // is not written again.
    for p in ["frontend-a", "leader-a", "worker-a", "worker-b"] {
        let mut pod = fake.get("v1", "Pod", "ml", p).unwrap();
        pod["status"]["phase"] = json!("Running");
        fake.put(pod);
    }
    let running = |f: &FakeApi| podgang(f)["status"]["phase"] == "Running";
    assert!(fake.wait_for(Duration::from_secs(5), running).await, "{}", podgang(&fake)["status"]);
    let writes = fake.requests_to("PATCH", "/podgangs/serve-0/status").len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(fake.requests_to("PATCH", "/podgangs/serve-0/status").len(), writes);
    assert_eq!(podgang(&fake)["status"]["conditions"].as_array().map(Vec::len), Some(2));
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn an_opted_in_job_on_kubernetes_1_38_is_bound_as_its_gang_beside_its_basic_podgroup() {
    // From 1.38 the Job controller gives every Job a basic PodGroup and names it on its pods,
    // beside the kube-gang label and annotation the webhook injected into the opted-in template.
    let fake = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/scheduling.k8s.io/v1beta1", "podgroups"),
    ])
    .await;
    fake.put(json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "train-x7k2p", "namespace": "ml", "uid": "pg-1",
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-1", "controller": true}]},
        "spec": {"schedulingPolicy": {"basic": {}}}}));
    let member = |name: &str| {
        let mut p = gang_pod("ml", name, "train", 8);
        p["metadata"]["labels"]["batch.kubernetes.io/job-name"] = json!("train");
        p["metadata"]["annotations"] = json!({"kube-gang.io/min-member": "2"});
        p["spec"]["schedulingGroup"] = json!({"podGroupName": "train-x7k2p"});
        p
    };
    // One 8-GPU node for two 8-GPU members: read as pods one by one, one would be bound.
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(member("train-0"));
    fake.put(member("train-1"));
    let (stop, handle) = start(&fake, false).await;
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| !f.requests_to("PATCH", "/pods/train-0/status").is_empty())
            .await,
        "{:#?}",
        fake.requests()
    );
    assert!(fake.requests_to("POST", "/binding").is_empty(), "all or nothing: {:#?}", fake.requests());
    let why = scheduled_message(&fake, "train-0");
    assert!(why.contains("ml/train") && !why.contains("claimed by two"), "{why}");
    fake.put(node("gpu-2", "64", 8, &[]));
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| bound(f, "ml", "train-0").is_some()
            && bound(f, "ml", "train-1").is_some())
            .await
    );
    assert_ne!(bound(&fake, "ml", "train-0"), bound(&fake, "ml", "train-1"));
    // The PodGroup is the Job controller's, and no gang: nothing written to it.
    assert!(fake.requests().iter().all(|r| !r.path.contains("/podgroups/")), "{:#?}", fake.requests());
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_volcano_gang_bounded_by_a_hypernode_tier_is_bound_inside_one_hypernode() {
    // Two tier-1 HyperNodes of two 8-GPU nodes; gpu-2 has 4 GPUs taken, so leaf-a has room for one
    // 8-GPU worker and leaf-b for two. Unbounded, the pair could be split across the leaves.
    let fake = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/scheduling.volcano.sh/v1beta1", "podgroups"),
        ("/apis/topology.volcano.sh/v1alpha1", "hypernodes"),
    ])
    .await;
    for n in ["gpu-1", "gpu-2", "gpu-3", "gpu-4"] {
        fake.put(node(n, "64", 8, &[]));
    }
    let mut busy = gang_pod("ml", "busy", "unused", 4);
    busy["metadata"]["labels"] = json!({});
    busy["spec"]["nodeName"] = json!("gpu-2");
    busy["status"]["phase"] = json!("Running");
    fake.put(busy);
    let leaf = |name: &str, nodes: [&str; 2]| {
        let members: Vec<serde_json::Value> =
            nodes.iter().map(|n| json!({"type": "Node", "selector": {"exactMatch": {"name": n}}})).collect();
        json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
               "spec": {"tier": 1, "members": members}})
    };
    fake.put(leaf("leaf-a", ["gpu-1", "gpu-2"]));
    fake.put(leaf("leaf-b", ["gpu-3", "gpu-4"]));
    fake.put(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": {"minMember": 2, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}));
    for m in 0..2 {
        let mut p = gang_pod("ml", &format!("vc-{m}"), "unused", 8);
        p["metadata"]["labels"] = json!({});
        p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": "pg"});
        fake.put(p);
    }
    let (stop, handle) = start(&fake, false).await;
    let both = |f: &FakeApi| bound(f, "ml", "vc-0").is_some() && bound(f, "ml", "vc-1").is_some();
    assert!(fake.wait_for(Duration::from_secs(10), both).await, "{:#?}", fake.requests());
    let mut nodes = [bound(&fake, "ml", "vc-0").unwrap(), bound(&fake, "ml", "vc-1").unwrap()];
    nodes.sort();
    assert_eq!(nodes, ["gpu-3", "gpu-4"], "both in leaf-b, the one tier-1 HyperNode with room for both");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_kai_gang_waits_for_the_topology_it_names_and_binds_within_its_level_once_it_is_there() {
    // Two racks of two 8-GPU nodes; gpu-2 has 4 GPUs taken, so only rack r2 holds the pair.
    let fake = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/scheduling.run.ai/v2alpha2", "podgroups"),
        ("/apis/kai.scheduler/v1", "topologies"),
    ])
    .await;
    for (n, rack) in [("gpu-1", "r1"), ("gpu-2", "r1"), ("gpu-3", "r2"), ("gpu-4", "r2")] {
        fake.put(node(n, "64", 8, &[("example.com/rack", rack)]));
    }
    let mut busy = gang_pod("ml", "busy", "unused", 4);
    busy["metadata"]["labels"] = json!({});
    busy["spec"]["nodeName"] = json!("gpu-2");
    busy["status"]["phase"] = json!("Running");
    fake.put(busy);
    fake.put(json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": {"minMember": 2, "topologyConstraint": {"topology": "cluster-topology", "requiredTopologyLevel": "example.com/rack"}}}));
    for m in 0..2 {
        let mut p = gang_pod("ml", &format!("kai-{m}"), "unused", 8);
        p["metadata"]["labels"] = json!({});
        p["metadata"]["annotations"] = json!({"pod-group-name": "pg"});
        fake.put(p);
    }
    let (stop, handle) = start(&fake, false).await;
    // No Topology of that name yet: the gang waits, saying for what.
    let says =
        |f: &FakeApi| scheduled_message(f, "kai-0").contains("waits for KAI Topology \"cluster-topology\"");
    assert!(
        fake.wait_for(Duration::from_secs(10), says).await,
        "{:#?}",
        fake.requests_to("PATCH", "/status")
    );
    assert!(bound(&fake, "ml", "kai-0").is_none() && bound(&fake, "ml", "kai-1").is_none());
    // The Topology arrives through the watch: the pair is bound, both in the one rack with room.
    fake.put(
        json!({"apiVersion": "kai.scheduler/v1", "kind": "Topology", "metadata": {"name": "cluster-topology"},
        "spec": {"levels": [{"nodeLabel": "example.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}}),
    );
    let both = |f: &FakeApi| bound(f, "ml", "kai-0").is_some() && bound(f, "ml", "kai-1").is_some();
    assert!(fake.wait_for(Duration::from_secs(10), both).await, "{:#?}", fake.requests());
    let mut nodes = [bound(&fake, "ml", "kai-0").unwrap(), bound(&fake, "ml", "kai-1").unwrap()];
    nodes.sort();
    assert_eq!(nodes, ["gpu-3", "gpu-4"], "both in rack r2, the one with room for both");
    stop.cancel();
    handle.await.unwrap();
}

/// The message of the last `PodScheduled=False` written to `pod`.
fn scheduled_message(fake: &FakeApi, pod: &str) -> String {
    let writes = fake.requests_to("PATCH", &format!("/pods/{pod}/status"));
    writes
        .last()
        .and_then(|w| w.body.pointer("/status/conditions/0/message"))
        .and_then(|m| m.as_str())
        .unwrap_or_default()
        .to_string()
}

/// Removes `pod`'s scheduling gates as its controller (Kueue, say) would, keeping the rest.
fn ungate(fake: &FakeApi, pod: &str) {
    let mut p = fake.get("v1", "Pod", "ml", pod).expect("pod exists");
    p["spec"]["schedulingGates"] = json!([]);
    fake.put(p);
}

#[tokio::test]
async fn gated_members_are_never_bound_and_the_gang_binds_when_the_last_gate_goes() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(gang("ml", "train", 3));
    fake.put(gang_pod("ml", "train-0", "train", 2));
    for name in ["train-1", "train-2"] {
        let mut p = gang_pod("ml", name, "train", 2);
        p["spec"]["schedulingGates"] = json!([{"name": "kueue.x-k8s.io/admission"}]);
        fake.put(p);
    }
    let (stop, handle) = start(&fake, false).await;
    let says = |text: &'static str| move |f: &FakeApi| scheduled_message(f, "train-0").contains(text);
    assert!(
        fake.wait_for(Duration::from_secs(10), says("2 of 3 members gated by kueue.x-k8s.io/admission"))
            .await,
        "{:#?}",
        fake.requests_to("PATCH", "/status")
    );
    ungate(&fake, "train-1");
    assert!(
        fake.wait_for(Duration::from_secs(10), says("1 of 3 members gated by kueue.x-k8s.io/admission"))
            .await,
        "{:#?}",
        fake.requests_to("PATCH", "/pods/train-0/status")
    );
    assert!(fake.requests_to("POST", "/binding").is_empty(), "all or nothing while a member is gated");
    let last_gate_gone = std::time::Instant::now();
    ungate(&fake, "train-2");
    let all_bound =
        |f: &FakeApi| ["train-0", "train-1", "train-2"].iter().all(|p| bound(f, "ml", p).is_some());
    assert!(fake.wait_for(Duration::from_secs(10), all_bound).await, "{:#?}", fake.requests());
    let binds = fake.requests_to("POST", "/binding");
    assert_eq!(binds.len(), 3, "one binding per member: {binds:#?}");
    assert!(binds.iter().all(|b| b.at >= last_gate_gone), "no binding was sent while a gate remained");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn the_strict_api_server_accepts_every_write_the_scheduler_makes() {
    let fake = fake().await;
    // One gang placed (bindings, status, Scheduled), one that cannot fit (pod conditions,
    // FailedScheduling), a Lease taken.
    two_nodes_and_a_gang_of_two(&fake);
    fake.put(gang("ml", "big", 3));
    for m in 0..3 {
        fake.put(gang_pod("ml", &format!("big-{m}"), "big", 8));
    }
    let (stop, handle) = start(&fake, true).await;
    assert!(fake.wait_for(Duration::from_secs(10), both_bound).await, "{:#?}", fake.requests());
    let failed_and_scheduled = |f: &FakeApi| events(f, "FailedScheduling") > 0 && events(f, "Scheduled") > 0;
    assert!(fake.wait_for(Duration::from_secs(10), failed_and_scheduled).await, "{:#?}", fake.requests());
    assert!(
        fake.wait_for(Duration::from_secs(5), |f| !f.requests_to("PATCH", "/gangs/big/status").is_empty())
            .await
    );
    stop.cancel();
    handle.await.unwrap();
    let events = fake.requests_to("POST", "/events");
    for e in &events {
        assert_eq!(e.status, 201, "event refused: {e:#?}");
        let name = e.body["metadata"]["name"].as_str().unwrap();
        assert!(fake.get("events.k8s.io/v1", "Event", "ml", name).is_some(), "{name} stored");
    }
    // No write refused as malformed (a 409 from a resourceVersion precondition is not a refusal
    // of the body).
    let refused: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET" && matches!(r.status, 400 | 404 | 405 | 415 | 422))
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
    let writes = fake.requests().iter().filter(|r| r.method != "GET").count();
    assert!(writes >= 8, "bindings, status, events and the Lease: {writes}");
}

/// Reads `/metrics` from the probe server as Prometheus would.
async fn scrape(metrics: &Metrics) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server =
        tokio::spawn(axum::serve(listener, gang_scheduler::metrics::router(metrics.clone())).into_future());
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").await.unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).await.unwrap();
    server.abort();
    text
}

/// The value of a sample line `name` (labels included) in an exposition.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

fn accepted_bindings(fake: &FakeApi) -> usize {
    fake.requests_to("POST", "/binding").iter().filter(|r| (200..300).contains(&r.status)).count()
}

#[tokio::test]
async fn a_refused_binding_never_leaves_its_gang_half_bound_past_its_grace_period_and_metrics_count_what_happened()
 {
    let fake = fake().await;
    two_nodes_and_a_gang_of_two(&fake);
    fake.put(node("gpu-3", "64", 8, &[]));
    fake.put(gang("ml", "solo", 1));
    fake.put(gang_pod("ml", "solo-0", "solo", 1));
    // The API server will not bind train-1 (a strict admission check, say).
    fake.fault("POST", "/pods/train-1/binding", 403, 1_000);
    let policy = Config { stale_grace_period: Duration::from_secs(1), ..Config::default() };
    let metrics = Metrics::new();
    let (stop, handle) = start_full(&fake, false, policy, Duration::from_secs(15), metrics.clone()).await;
    assert!(fake.wait_for(Duration::from_secs(10), |f| bound(f, "ml", "solo-0").is_some()).await);
    // train-0 may have been bound in the same round as the refusal; if so it is released after
    // the grace period, and never kept on its own.
    let settled = |f: &FakeApi| {
        let sent = !f.requests_to("POST", "/pods/train-0/binding").is_empty();
        let first_bound = f.requests_to("POST", "/pods/train-0/binding").iter().any(|r| r.status < 300);
        sent && (!first_bound || !f.requests_to("POST", "/pods/train-0/eviction").is_empty())
    };
    assert!(fake.wait_for(Duration::from_secs(10), settled).await, "{:#?}", fake.requests());
    assert_eq!(bound(&fake, "ml", "train-1"), None);
    // The refused member is held back, not retried every cycle (a cycle runs every 100 ms).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let attempts = fake.requests_to("POST", "/pods/train-1/binding").len();
    assert!(attempts <= 2, "{attempts} attempts to bind a pod the API server refuses");
    // /metrics counts bindings made, not planned, and one gang start (solo; train never started).
    let text = scrape(&metrics).await;
    assert_eq!(sample(&text, "gang_pods_bound_total"), Some(accepted_bindings(&fake) as f64), "{text}");
    assert_eq!(sample(&text, "gang_wait_duration_seconds_count{size=\"1\"}"), Some(1.0), "{text}");
    assert!(
        sample(&text, "gang_schedule_attempts_total{result=\"Scheduled\"}").is_some_and(|v| v >= 1.0),
        "{text}"
    );
    let events = fake.requests_to("POST", "/events").iter().filter(|r| r.status < 300).count();
    assert_eq!(sample(&text, "gang_events_total{result=\"sent\"}"), Some(events as f64), "{text}");
    assert_eq!(sample(&text, "gang_leader"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "gang_pending_gangs").map(|v| v >= 1.0), Some(true), "{text}");
    // Gangs by phase: the waiting ones are Pending, solo is placed; every phase is there.
    let phase = |p: &str| sample(&text, &format!("gang_gangs{{phase=\"{p}\"}}"));
    assert_eq!(phase("Pending"), sample(&text, "gang_pending_gangs"), "{text}");
    assert!(phase("Scheduled").unwrap_or(0.0) + phase("Running").unwrap_or(0.0) >= 1.0, "{text}");
    assert_eq!(phase("Failed"), Some(0.0), "{text}");
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn an_eviction_a_budget_blocks_never_stalls_the_loop_and_the_gang_says_why() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(node("gpu-2", "64", 2, &[]));
    fake.put(gang("ml", "low", 1));
    let mut low = gang_pod("ml", "low-0", "low", 8);
    low["spec"]["nodeName"] = json!("gpu-1");
    low["status"]["phase"] = json!("Running");
    // Evicted, it terminates within a second (the fake deletes it gracefully, as the kubelet would).
    low["spec"]["terminationGracePeriodSeconds"] = json!(1);
    fake.put(low);
    fake.put(gang("ml", "high", 1));
    let mut high = gang_pod("ml", "high-0", "high", 8);
    high["spec"]["priority"] = json!(1000);
    fake.put(high);
    // The victim's PodDisruptionBudget allows no disruption for two attempts (Retry-After: 1).
    fake.fault("POST", "/pods/low-0/eviction", 429, 2);
    let (stop, handle) = start(&fake, false).await;
    let says_blocked =
        |f: &FakeApi| scheduled_message(f, "high-0").contains("eviction of ml/low-0 refused for now");
    assert!(
        fake.wait_for(Duration::from_secs(10), says_blocked).await,
        "{:#?}",
        fake.requests_to("PATCH", "/pods/high-0/status")
    );
    // Meanwhile another gang arrives: it is placed at once, while the victim still waits.
    let created = std::time::Instant::now();
    fake.put(gang("ml", "other", 1));
    fake.put(gang_pod("ml", "other-0", "other", 1));
    assert!(fake.wait_for(Duration::from_secs(10), |f| bound(f, "ml", "other-0").is_some()).await);
    let took = created.elapsed();
    assert!(fake.get("v1", "Pod", "ml", "low-0").is_some(), "the victim is still blocked");
    assert!(took < Duration::from_millis(900), "the loop waited for a blocked eviction: {took:?}");
    // The victim goes once the budget allows it, and the preemptor takes its place.
    assert!(fake.wait_for(Duration::from_secs(15), |f| bound(f, "ml", "high-0").is_some()).await);
    let tries = fake.requests_to("POST", "/pods/low-0/eviction");
    assert_eq!(tries.len(), 3, "{tries:#?}");
    for pair in tries.windows(2) {
        assert!(pair[1].at.duration_since(pair[0].at) >= Duration::from_millis(950), "Retry-After honoured");
    }
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_replica_with_a_skewed_clock_neither_steals_a_live_lease_nor_keeps_a_lost_one() {
    use gang_scheduler::lease::round;
    use k8s_openapi::api::coordination::v1::Lease;
    use scheduler_core::model::Time;
    use tokio::time::Instant;
    let fake = fake().await;
    let client = kube::Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap();
    let api: kube::Api<Lease> = kube::Api::namespaced(client, "kube-gang-system");
    let lease = Duration::from_secs(15);
    let secs = Duration::from_secs;
    // Replica a's wall clock is right; b's runs ten minutes ahead. Each judges expiry on its own
    // monotonic clock, which the test drives (t0 + …).
    let wall = Time::from_secs(1_800_000_000);
    let skew = secs(600);
    let t0 = Instant::now();
    let (mut seen_a, mut seen_b) = (None, None);
    assert!(round(&api, "l", "a", wall, t0, lease, &mut seen_a).await.unwrap(), "a creates it");
    // To b, a's renewTime is ten minutes old; the Lease is live all the same.
    for i in 0..4u64 {
        let at = secs(5 * i);
        let b_sees =
            round(&api, "l", "b", wall.plus(at + secs(1) + skew), t0 + at + secs(1), lease, &mut seen_b);
        assert!(!b_sees.await.unwrap(), "b stole a live lease at {at:?}");
        let a_renews = round(&api, "l", "a", wall.plus(at + secs(5)), t0 + at + secs(5), lease, &mut seen_a);
        assert!(a_renews.await.unwrap());
    }
    let holder = |f: &FakeApi| {
        f.get("coordination.k8s.io/v1", "Lease", "kube-gang-system", "l")
            .and_then(|l| l["spec"]["holderIdentity"].as_str().map(String::from))
    };
    assert_eq!(holder(&fake).as_deref(), Some("a"));
    // a stops renewing after t0+20 s. b first sees that last renewal at t0+30 s, and takes over
    // only once a whole lease duration has passed on its own clock since then.
    let b_sees_last = round(&api, "l", "b", wall.plus(secs(30) + skew), t0 + secs(30), lease, &mut seen_b);
    assert!(!b_sees_last.await.unwrap());
    let b_early = round(&api, "l", "b", wall.plus(secs(44) + skew), t0 + secs(44), lease, &mut seen_b);
    assert!(!b_early.await.unwrap(), "b took over before the lease ran out as it observed it");
    let b_late = round(&api, "l", "b", wall.plus(secs(46) + skew), t0 + secs(46), lease, &mut seen_b);
    assert!(b_late.await.unwrap(), "expired: b takes over");
    assert_eq!(holder(&fake).as_deref(), Some("b"));
    // a comes back: b's renewTime lies ten minutes in a's future, and a follows rather than keeps.
    let a_back = round(&api, "l", "a", wall.plus(secs(47)), t0 + secs(47), lease, &mut seen_a);
    assert!(!a_back.await.unwrap(), "a kept a lease it lost");
    assert_eq!(holder(&fake).as_deref(), Some("b"));
    // b stops too. c, whose clock runs ten minutes behind, sees b's renewTime twenty minutes in
    // its future; it still takes over once the record has not changed for a lease duration.
    let behind = |at: Duration| Time(wall.plus(at).0 - 600_000);
    let mut seen_c = None;
    assert!(!round(&api, "l", "c", behind(secs(50)), t0 + secs(50), lease, &mut seen_c).await.unwrap());
    assert!(round(&api, "l", "c", behind(secs(66)), t0 + secs(66), lease, &mut seen_c).await.unwrap());
    assert_eq!(holder(&fake).as_deref(), Some("c"));
}

/// Someone else's Ready pod on `node`, labelled `app`, of `priority`, using all 8 GPUs.
fn app_pod(name: &str, app: &str, node: &str, priority: i32) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "labels": {"app": app}},
        "spec": {"nodeName": node, "priority": priority, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "8"},
                                 "limits": {"nvidia.com/gpu": "8"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
}

#[tokio::test]
async fn preemption_evicts_the_victim_no_budget_protects_and_never_stalls() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(node("gpu-2", "64", 8, &[]));
    // The protected pod has the lower priority: without its budget it would be the victim.
    fake.put(app_pod("web-0", "web", "gpu-1", -10));
    fake.put(app_pod("batch-0", "batch", "gpu-2", 0));
    fake.put(kube_gang_tests::pdb("ml", "web", &[("app", "web")], 0, 0, 1));
    fake.run_disruption_controller();
    let budget = fake.get("policy/v1", "PodDisruptionBudget", "ml", "web").unwrap();
    assert_eq!(budget["status"]["disruptionsAllowed"], 0, "1 healthy of 1 desired");
    fake.put(gang("ml", "high", 1));
    let mut high = gang_pod("ml", "high-0", "high", 8);
    high["spec"]["priority"] = json!(1000);
    fake.put(high);
    let (stop, handle) = start(&fake, false).await;
    assert!(
        fake.wait_for(Duration::from_secs(15), |f| bound(f, "ml", "high-0").is_some()).await,
        "{:#?}",
        fake.requests_to("POST", "/eviction")
    );
    assert_eq!(bound(&fake, "ml", "high-0").as_deref(), Some("gpu-2"));
    let evictions: Vec<String> = fake.requests_to("POST", "/eviction").into_iter().map(|r| r.path).collect();
    assert_eq!(evictions, ["/api/v1/namespaces/ml/pods/batch-0/eviction"]);
    assert!(fake.get("v1", "Pod", "ml", "web-0").is_some(), "the protected pod stays");
    stop.cancel();
    handle.await.unwrap();
}

/// The message of the last status written to `Gang` `name` (its condition's).
fn gang_message(fake: &FakeApi, name: &str) -> String {
    fake.requests_to("PATCH", &format!("/gangs/{name}/status"))
        .iter()
        .filter_map(|w| {
            w.body.pointer("/status/conditions/0/message").and_then(|m| m.as_str()).map(String::from)
        })
        .next_back()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_budget_that_allows_no_disruption_blocks_the_only_victim_and_the_gang_names_it() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    // The only pod a preemptor could evict is protected: its budget allows no disruption, as the
    // disruption controller computes it (1 healthy of 1 desired).
    fake.put(app_pod("web-0", "web", "gpu-1", -10));
    fake.put(kube_gang_tests::pdb("ml", "web", &[("app", "web")], 1, 1, 1));
    fake.run_disruption_controller();
    let budget = fake.get("policy/v1", "PodDisruptionBudget", "ml", "web").unwrap();
    assert_eq!(budget["status"]["disruptionsAllowed"], 0, "{budget:#}");
    fake.put(gang("ml", "high", 1));
    let mut high = gang_pod("ml", "high-0", "high", 8);
    high["spec"]["priority"] = json!(1000);
    fake.put(high);
    let (stop, handle) = start(&fake, false).await;
    // The eviction is the API server's own 429 (nothing injected), and the gang says which budget.
    // The gang's status and its member's are written independently: wait for both.
    let names_budget = |f: &FakeApi| {
        gang_message(f, "high").contains("The disruption budget web needs 1 healthy pods and has 1 currently")
            && scheduled_message(f, "high-0").contains("eviction of ml/web-0 refused for now")
    };
    assert!(
        fake.wait_for(Duration::from_secs(15), names_budget).await,
        "{:?} {:#?}",
        (gang_message(&fake, "high"), scheduled_message(&fake, "high-0")),
        fake.requests_to("POST", "/eviction")
    );
    let tries = fake.requests_to("POST", "/pods/web-0/eviction");
    assert!(!tries.is_empty() && tries.iter().all(|r| r.status == 429), "{tries:#?}");
    let status = fake.requests_to("PATCH", "/gangs/high/status").last().unwrap().body["status"].clone();
    assert_eq!(status["phase"], "Pending", "{status:#}");
    assert_eq!(status["conditions"][0]["reason"], "Preempting", "{status:#}");
    assert!(fake.get("v1", "Pod", "ml", "web-0").is_some(), "the protected pod stays");
    assert_eq!(bound(&fake, "ml", "high-0"), None);
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn the_strict_api_server_accepts_preemption_gated_gangs_and_provisioning_writes() {
    use scheduler_core::config::Provisioning;
    let fake = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/autoscaling.x-k8s.io/v1", "provisioningrequests"),
    ])
    .await;
    fake.put(node("gpu-1", "64", 8, &[]));
    // Preemption: a low-priority gang holds the node; a high-priority one needs it.
    fake.put(gang("ml", "low", 1));
    let mut low = gang_pod("ml", "low-0", "low", 8);
    low["spec"]["nodeName"] = json!("gpu-1");
    low["spec"]["terminationGracePeriodSeconds"] = json!(1);
    low["status"]["phase"] = json!("Running");
    fake.put(low);
    fake.put(gang("ml", "high", 1));
    let mut high = gang_pod("ml", "high-0", "high", 8);
    high["spec"]["priority"] = json!(1000);
    fake.put(high);
    // A gated gang.
    fake.put(gang("ml", "gated", 2));
    for m in 0..2 {
        let mut p = gang_pod("ml", &format!("gated-{m}"), "gated", 1);
        p["spec"]["schedulingGates"] = json!([{"name": "kueue.x-k8s.io/admission"}]);
        fake.put(p);
    }
    // A gang no node can ever hold: the autoscaler is asked.
    fake.put(gang("ml", "huge", 1));
    let mut huge = gang_pod("ml", "huge-0", "huge", 16);
    huge["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "huge",
        "uid": "uid-job-huge", "controller": true, "blockOwnerDeletion": true}]);
    fake.put(huge);
    let provisioning = Provisioning { retry_backoff: Duration::from_secs(1), ..Provisioning::default() };
    let policy = Config { provisioning: Some(provisioning), ..Config::default() };
    let (stop, handle) = start_full(&fake, true, policy, Duration::from_secs(15), Metrics::new()).await;
    let done = |f: &FakeApi| {
        bound(f, "ml", "high-0").is_some()
            && ["Preempted", "Preempting", "Scheduled"].iter().all(|r| events(f, r) > 0)
            && scheduled_message(f, "gated-0").contains("2 of 2 members gated by kueue.x-k8s.io/admission")
            && f.get("autoscaling.x-k8s.io/v1", "ProvisioningRequest", "ml", "huge-1").is_some()
            && f.get("v1", "Pod", "ml", "huge-0").is_some_and(|p| {
                p["metadata"]["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"] == "huge-1"
            })
    };
    assert!(fake.wait_for(Duration::from_secs(20), done).await, "{:#?}", fake.requests());
    stop.cancel();
    handle.await.unwrap();
    // Each kind of write was made, and taken.
    let taken = |method: &str, suffix: &str| {
        fake.requests_to(method, suffix).iter().any(|r| (200..300).contains(&r.status))
    };
    assert!(taken("PATCH", "/pods/high-0/status"), "nomination and conditions");
    let nominated = fake.requests_to("PATCH", "/pods/high-0/status");
    assert!(nominated.iter().any(|r| r.body["status"]["nominatedNodeName"] == "gpu-1" && r.status == 200));
    assert!(taken("POST", "/pods/low-0/eviction"), "the eviction");
    assert!(taken("POST", "/provisioningrequests") && taken("POST", "/podtemplates"), "the autoscaler's ask");
    assert!(taken("PATCH", "/pods/huge-0"), "the consume annotation");
    assert!(taken("PATCH", "/gangs/gated/status") && taken("PATCH", "/pods/gated-1/status"));
    assert!(taken("PUT", "/leases/gang-scheduler") || taken("POST", "/leases"), "the Lease");
    for e in fake.requests_to("POST", "/events") {
        assert_eq!(e.status, 201, "event refused: {e:#?}");
        assert_eq!(e.body["reportingInstance"], "test-replica");
    }
    // No write refused as malformed or unknown (a 409 from a resourceVersion precondition is no
    // refusal of the body).
    let refused: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET" && (400..500).contains(&r.status) && r.status != 409)
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
}

/// `(status, body)` of a GET on the probe server.
async fn probe(metrics: &Metrics, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server =
        tokio::spawn(axum::serve(listener, gang_scheduler::metrics::router(metrics.clone())).into_future());
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).await.unwrap();
    server.abort();
    let code = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").trim_end().to_string();
    (code, body)
}

#[tokio::test]
async fn readyz_is_503_until_the_caches_sync_then_says_follower_or_leader() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    // Another replica holds the Lease; the pods list is slow to come.
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    fake.put(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "gang-scheduler", "namespace": "kube-gang-system"},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 3600, "renewTime": now}}));
    fake.delay("GET", "/api/v1/pods", Duration::from_secs(3));
    let metrics = Metrics::new();
    let (stop, handle) =
        start_full(&fake, true, Config::default(), Duration::from_secs(15), metrics.clone()).await;
    assert_eq!(probe(&metrics, "/readyz").await, (503, "caches not synced".into()));
    assert_eq!(probe(&metrics, "/healthz").await, (200, "ok".into()), "alive all along");
    let mut last = (0, String::new());
    for _ in 0..100 {
        last = probe(&metrics, "/readyz").await;
        if last.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last, (200, "ok: follower".into()), "synced, standing by");
    // The holder lets go: this replica leads.
    fake.put(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "gang-scheduler", "namespace": "kube-gang-system"},
        "spec": {"leaseDurationSeconds": 1, "renewTime": now}}));
    for _ in 0..150 {
        last = probe(&metrics, "/readyz").await;
        if last.1 == "ok: leader" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last, (200, "ok: leader".into()));
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn metrics_count_what_happened_family_by_family() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(gang("ml", "solo", 1));
    fake.put(gang_pod("ml", "solo-0", "solo", 8));
    fake.put(gang("ml", "big", 2));
    fake.put(gang_pod("ml", "big-0", "big", 8));
    fake.put(gang_pod("ml", "big-1", "big", 8));
    // The API server refuses the first event.
    fake.fault("POST", "/events", 500, 1);
    let begun = std::time::Instant::now();
    let metrics = Metrics::new();
    let (stop, handle) =
        start_full(&fake, false, Config::default(), Duration::from_secs(15), metrics.clone()).await;
    let settled = |f: &FakeApi| {
        bound(f, "ml", "solo-0").is_some()
            && events(f, "Scheduled") + events(f, "FailedScheduling") >= 2
            && !f.requests_to("PATCH", "/gangs/big/status").is_empty()
    };
    assert!(fake.wait_for(Duration::from_secs(10), settled).await, "{:#?}", fake.requests());
    // Let the reporter finish what it has (events go out in the background).
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    handle.await.unwrap();
    let elapsed = begun.elapsed().as_secs_f64();
    let text = scrape(&metrics).await;
    let value = |name: &str| sample(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"));
    // Bindings made, exactly; one gang started, after waiting no longer than the test ran.
    assert_eq!(value("gang_pods_bound_total"), accepted_bindings(&fake) as f64);
    assert_eq!(value("gang_pods_bound_total"), 1.0);
    assert_eq!(value("gang_wait_duration_seconds_count{size=\"1\"}"), 1.0);
    let waited = value("gang_wait_duration_seconds_sum{size=\"1\"}");
    assert!((0.0..=elapsed).contains(&waited), "{waited} of {elapsed}");
    assert_eq!(value("gang_wait_duration_seconds_bucket{le=\"+Inf\",size=\"1\"}"), 1.0);
    // Every cycle timed: as many observations as the +Inf bucket, in total no longer than the run.
    let cycles = value("gang_cycle_duration_seconds_count");
    assert!(cycles >= 1.0, "{text}");
    assert_eq!(value("gang_cycle_duration_seconds_bucket{le=\"+Inf\"}"), cycles);
    let spent = value("gang_cycle_duration_seconds_sum");
    assert!(spent > 0.0 && spent <= elapsed, "{spent} of {elapsed}");
    // Decisions: solo scheduled once (then running), big unschedulable each cycle it was seen.
    assert_eq!(value("gang_schedule_attempts_total{result=\"Scheduled\"}"), 1.0, "{text}");
    let unschedulable = value("gang_schedule_attempts_total{result=\"Unschedulable\"}");
    assert!(unschedulable >= 1.0 && unschedulable <= cycles, "{unschedulable} of {cycles} cycles");
    assert_eq!(value("gang_pending_gangs"), 1.0, "big waits");
    // Events: what the API server took, and the one it refused.
    let posted = fake.requests_to("POST", "/events");
    let sent = posted.iter().filter(|r| r.status == 201).count() as f64;
    assert_eq!(value("gang_events_total{result=\"sent\"}"), sent);
    assert_eq!(value("gang_events_total{result=\"refused\"}"), 1.0);
    assert_eq!(posted.len() as f64, sent + 1.0);
    // This replica led; provisioning is off; the build is named.
    assert_eq!(value("gang_leader"), 1.0);
    assert_eq!(value("gang_provisioning_enabled"), 0.0);
    let build = format!("gang_build_info{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"));
    assert_eq!(value(&build), 1.0);
}

/// Backfill against the API: the first gang in line that cannot start gets capacity held from
/// when the running job ends (its start plus its time limit), written to its status; a gang whose
/// time limit ends it first starts on the held node; one with no limit waits for priority. The
/// metrics count the hold, its nodes and the start.
#[tokio::test]
async fn backfill_holds_room_for_the_first_gang_writes_when_and_lets_a_short_gang_start_first() {
    let fake = fake().await;
    fake.put(node("gpu-1", "64", 8, &[]));
    fake.put(node("gpu-2", "64", 8, &[]));
    // A job of higher priority runs on gpu-1 until 50 minutes from now (no preemption of it).
    let started =
        (k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_mins(10)).to_string();
    let mut job = gang_pod("ml", "job-0", "other", 8);
    job["metadata"]["labels"] = json!({});
    job["metadata"]["annotations"] = json!({"kube-gang.io/time-limit": "1h"});
    job["spec"]["nodeName"] = json!("gpu-1");
    job["spec"]["priority"] = json!(100);
    job["status"] = json!({"phase": "Running", "startTime": started});
    fake.put(job);
    let with = |mut pod: serde_json::Value, priority: i32, limit: Option<&str>| {
        pod["spec"]["priority"] = json!(priority);
        if let Some(l) = limit {
            pod["metadata"]["annotations"] = json!({"kube-gang.io/time-limit": l});
        }
        pod
    };
    fake.put(gang("ml", "big", 2));
    fake.put(with(gang_pod("ml", "big-0", "big", 8), 10, None));
    fake.put(with(gang_pod("ml", "big-1", "big", 8), 10, None));
    fake.put(gang("ml", "short", 1));
    fake.put(with(gang_pod("ml", "short-0", "short", 8), 0, Some("20m")));
    fake.put(gang("ml", "long", 1));
    fake.put(with(gang_pod("ml", "long-0", "long", 8), 0, None));
    let policy = Config { backfill: Some(scheduler_core::config::Backfill::default()), ..Config::default() };
    let metrics = Metrics::new();
    let (stop, handle) = start_full(&fake, false, policy, Duration::from_secs(15), metrics.clone()).await;
    let settled = |f: &FakeApi| {
        bound(f, "ml", "short-0").is_some()
            && !f.requests_to("PATCH", "/gangs/big/status").is_empty()
            && !f.requests_to("PATCH", "/gangs/long/status").is_empty()
    };
    assert!(fake.wait_for(Duration::from_secs(10), settled).await, "{:#?}", fake.requests());
    assert_eq!(bound(&fake, "ml", "short-0").as_deref(), Some("gpu-2"));
    assert_eq!(bound(&fake, "ml", "long-0"), None);
    assert_eq!(bound(&fake, "ml", "big-0"), None);
    let big = fake.get("kube-gang.io/v1alpha1", "Gang", "ml", "big").unwrap();
    let status = &big["status"];
    assert_eq!(status["conditions"][0]["reason"], "WaitingForResources", "{status}");
    assert_eq!(status["reservation"]["nodeCount"], 2, "{status}");
    assert_eq!(status["reservation"]["nodes"], json!(["gpu-1", "gpu-2"]), "{status}");
    // Expected when the job ends: 50 minutes from now, to the minute (the default resolution).
    let expected: k8s_openapi::jiff::Timestamp =
        status["expectedStartTime"].as_str().unwrap().parse().unwrap();
    let ahead = expected.duration_since(k8s_openapi::jiff::Timestamp::now()).as_secs();
    assert!((49 * 60..=51 * 60).contains(&ahead), "{ahead} s ahead: {status}");
    let long = fake.get("kube-gang.io/v1alpha1", "Gang", "ml", "long").unwrap();
    assert_eq!(long["status"]["conditions"][0]["reason"], "WaitingForPriority", "{long}");
    let message = long["status"]["conditions"][0]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("capacity held for ml/big") && message.contains("states no time limit"),
        "{message}"
    );
    // What is written does not move with the clock: once the short gang's binding is seen (the
    // big gang's "now" changes with it), cycles go on and the status is not written again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let writes = fake.requests_to("PATCH", "/gangs/big/status").len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        fake.requests_to("PATCH", "/gangs/big/status").len(),
        writes,
        "rewritten while nothing changed: {:#?}",
        fake.requests_to("PATCH", "/gangs/big/status").iter().map(|r| r.body.clone()).collect::<Vec<_>>()
    );
    let text = scrape(&metrics).await;
    assert_eq!(sample(&text, "gang_reservations"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "gang_reserved_nodes"), Some(2.0), "{text}");
    assert_eq!(sample(&text, "gang_backfill_starts_total"), Some(1.0), "{text}");
    stop.cancel();
    handle.await.unwrap();
}
