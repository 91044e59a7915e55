//! The metrics the binaries export, for the tests that hold the dashboard (`manifests.rs`) and
//! `docs/reference.md` (`reference.rs`) to them.

/// Every metric family the binaries export: their registries' exposition once each labelled family
/// has a child (a family without one is not written): a scheduler decision and event counted, one
/// AdmissionReview answered by the webhook's router, one connection closed.
pub fn exported() -> String {
    use gang_scheduler::metrics::{Metrics, ResultLabel};
    use gang_webhook::server::ConnectionEvents as _;
    use tower::ServiceExt as _;
    let scheduler = Metrics::new();
    scheduler.attempts.get_or_create(&ResultLabel { result: "Scheduled".into() }).inc();
    scheduler.events.get_or_create(&ResultLabel { result: "sent".into() }).inc();
    scheduler.record_phases(std::iter::empty());
    let state = gang_webhook::AppState::default();
    let gang = serde_json::json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
                                  "metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 1}});
    let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "kube-gang.io", "version": "v1alpha1", "kind": "Gang"},
        "resource": {"group": "kube-gang.io", "version": "v1alpha1", "resource": "gangs"},
        "namespace": "ml", "name": "g", "operation": "CREATE",
        "userInfo": {"username": "admin"}, "object": gang, "dryRun": false}});
    let request = axum::http::Request::post("/validate")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(review.to_string()))
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let answer = rt.block_on(gang_webhook::router(state.clone()).oneshot(request)).unwrap();
    assert_eq!(answer.status(), 200);
    state.metrics.port("webhook").closed("timeout");
    [scheduler.encode(), state.metrics.encode()].concat()
}
