//! The fake API server refuses what kube-apiserver refuses, with the `Status` it sends:
//! Events (events.k8s.io/v1 and core/v1), names, labels, conditions, timestamps.

use kube_gang_tests::{FakeApi, gang, gang_pod};
use serde_json::{Value, json};

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";

async fn fake() -> FakeApi {
    FakeApi::start(&[("/apis/kube-gang.io/v1alpha1", "gangs")]).await
}

fn event() -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
           "metadata": {"name": "w-0.17a9", "namespace": "ml"},
           "eventTime": "2026-11-23T15:06:39.123456Z", "type": "Warning", "reason": "FailedScheduling",
           "action": "Scheduling", "note": "gang ml/g: room for 1 of 2",
           "reportingController": "kube-gang.io/gang-scheduler", "reportingInstance": "replica-a",
           "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "ml", "name": "w-0", "uid": "u"}})
}

const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ml/events";

fn fields(status: &Value) -> Vec<String> {
    status["details"]["causes"]
        .as_array()
        .map(|c| c.iter().map(|c| c["field"].as_str().unwrap_or("").to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_valid_event_is_created_and_stored() {
    let api = fake().await;
    let a = api.call("POST", EVENTS, JSON, &event()).await;
    assert_eq!(a.status, 201, "{:#}", a.body);
    assert_eq!(a.body["metadata"]["namespace"], "ml");
    assert!(a.body["metadata"]["uid"].as_str().is_some_and(|u| !u.is_empty()));
    assert!(api.get("events.k8s.io/v1", "Event", "ml", "w-0.17a9").is_some());
    let again = api.call("POST", EVENTS, JSON, &event()).await;
    assert_eq!((again.status, again.body["reason"].as_str()), (409, Some("AlreadyExists")));
    assert_eq!(again.body["message"], "events.events.k8s.io \"w-0.17a9\" already exists");
}

#[tokio::test]
async fn an_event_time_that_is_not_a_micro_time_is_a_bad_request() {
    let api = fake().await;
    for bad in ["2026-11-23T15:06:39.123Z", "2026-11-23T15:06:39Z"] {
        let mut e = event();
        e["eventTime"] = json!(bad);
        let a = api.call("POST", EVENTS, JSON, &e).await;
        assert_eq!(a.status, 400, "{bad}");
        assert_eq!(
            (
                a.body["kind"].as_str(),
                a.body["status"].as_str(),
                a.body["reason"].as_str(),
                a.body["code"].as_u64()
            ),
            (Some("Status"), Some("Failure"), Some("BadRequest"), Some(400))
        );
        assert!(
            a.body["message"].as_str().unwrap().contains("2006-01-02T15:04:05.000000Z07:00"),
            "{:#}",
            a.body
        );
    }
}

#[tokio::test]
async fn an_event_missing_fields_or_too_long_is_invalid_with_every_cause() {
    let api = fake().await;
    let mut e = event();
    e["note"] = json!("n".repeat(1025));
    e["reason"] = json!("");
    e["action"] = json!("a".repeat(129));
    e["type"] = json!("Info");
    e.as_object_mut().unwrap().remove("reportingController");
    let a = api.call("POST", EVENTS, JSON, &e).await;
    assert_eq!((a.status, a.body["reason"].as_str()), (422, Some("Invalid")), "{:#}", a.body);
    assert_eq!(a.body["details"]["kind"], "Event");
    assert_eq!(a.body["details"]["group"], "events.k8s.io");
    assert_eq!(
        fields(&a.body),
        ["reportingController", "reportingController", "action", "reason", "message", "type"]
    );
    assert!(
        a.body["message"].as_str().unwrap().starts_with("Event.events.k8s.io \"w-0.17a9\" is invalid: [")
    );
    assert!(api.requests_to("POST", "/events").iter().all(|r| r.status == 422));
}

#[tokio::test]
async fn a_generate_name_ending_in_a_dot_is_invalid_one_ending_in_a_dash_gets_a_suffix() {
    let api = fake().await;
    let mut e = event();
    e["metadata"] = json!({"generateName": "w-0."});
    let a = api.call("POST", EVENTS, JSON, &e).await;
    assert_eq!(a.status, 422, "{:#}", a.body);
    assert_eq!(fields(&a.body), ["metadata.generateName"]);
    e["metadata"] = json!({"generateName": "w-0-"});
    let a = api.call("POST", EVENTS, JSON, &e).await;
    assert_eq!(a.status, 201, "{:#}", a.body);
    let name = a.body["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("w-0-") && name.len() == 9, "{name}");
}

#[tokio::test]
async fn a_core_v1_event_meets_the_legacy_rules_only() {
    let api = fake().await;
    let legacy = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "w-0.1", "namespace": "ml"},
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "w-0"}, "reason": "Scheduled", "message": "m",
        "type": "Normal", "firstTimestamp": "2026-11-23T15:06:39Z", "lastTimestamp": "2026-11-23T15:06:39Z", "count": 1});
    assert_eq!(api.call("POST", "/api/v1/namespaces/ml/events", JSON, &legacy).await.status, 201);
    let mut elsewhere = legacy.clone();
    elsewhere["metadata"]["name"] = json!("w-0.2");
    elsewhere["involvedObject"]["namespace"] = json!("other");
    let a = api.call("POST", "/api/v1/namespaces/ml/events", JSON, &elsewhere).await;
    assert_eq!((a.status, fields(&a.body)), (422, vec!["involvedObject.namespace".to_string()]));
}

#[tokio::test]
async fn names_labels_and_namespaces_are_checked() {
    let api = fake().await;
    let mut p = gang_pod("ml", "Bad_Name", "g", 1);
    p["metadata"]["labels"]["kube-gang.io/gang"] = json!("not a value");
    let a = api.call("POST", "/api/v1/namespaces/ml/pods", JSON, &p).await;
    assert_eq!(a.status, 422, "{:#}", a.body);
    assert_eq!(fields(&a.body), ["metadata.name", "metadata.labels.kube-gang.io/gang"]);
    let other_ns = gang_pod("other", "w-0", "g", 1);
    let a = api.call("POST", "/api/v1/namespaces/ml/pods", JSON, &other_ns).await;
    assert_eq!(a.status, 400);
    assert_eq!(
        a.body["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team.a"}});
    assert_eq!(
        api.call("POST", "/api/v1/namespaces", JSON, &ns).await.status,
        422,
        "a namespace is a DNS label"
    );
    let ok = gang_pod("ml", "w-0", "g", 1);
    let a = api.call("POST", "/api/v1/namespaces/ml/pods", JSON, &ok).await;
    assert_eq!(a.status, 201);
    assert_eq!(a.body["status"]["phase"], "Pending");
    assert_eq!(a.body["metadata"]["generation"], 1);
    let missing = api.call("GET", "/api/v1/namespaces/ml/pods/nope", "", &Value::Null).await;
    assert_eq!((missing.status, missing.body["message"].as_str()), (404, Some("pods \"nope\" not found")));
}

#[tokio::test]
async fn gang_status_conditions_are_checked_as_metav1_conditions() {
    let api = fake().await;
    api.put(gang("ml", "g", 2));
    let path = "/apis/kube-gang.io/v1alpha1/namespaces/ml/gangs/g/status";
    let bad = json!({"status": {"conditions": [{"type": "Scheduled", "status": "Yes", "reason": "no spaces allowed",
                                                "message": "m", "lastTransitionTime": "2026-11-23T15:06:39Z"}]}});
    let a = api.call("PATCH", path, MERGE, &bad).await;
    assert_eq!(a.status, 422, "{:#}", a.body);
    assert_eq!(fields(&a.body), ["status.conditions[0].status", "status.conditions[0].reason"]);
    let no_zone = json!({"status": {"conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled",
                                                    "message": "m", "lastTransitionTime": "2026-11-23T15:06:39"}]}});
    let a = api.call("PATCH", path, MERGE, &no_zone).await;
    assert_eq!(a.status, 422, "the schema's format: date-time: {:#}", a.body);
    assert_eq!(fields(&a.body), ["status.conditions[0].lastTransitionTime"]);
    assert_eq!(a.body["details"]["causes"][0]["reason"], "FieldValueTypeInvalid");
    let good = json!({"status": {"phase": "Pending", "conditions": [{"type": "Scheduled", "status": "False",
        "reason": "Unschedulable", "message": "m", "lastTransitionTime": "2026-11-23T15:06:39.5Z"}]}});
    assert_eq!(api.call("PATCH", path, MERGE, &good).await.status, 200);
}

#[tokio::test]
async fn a_body_that_is_not_json_is_a_bad_request() {
    let api = fake().await;
    let resp = api.send("POST", EVENTS, JSON, "{not json").await;
    assert_eq!(resp.status().as_u16(), 400);
}

#[tokio::test]
async fn an_events_related_object_is_decoded_not_judged_and_what_an_event_says_is_immutable() {
    let api = fake().await;
    // `related` has no rule of its own on create (events.go; events/v1's declarative validation
    // says "Related has no validation"): any object reference decodes, in any namespace.
    let mut e = event();
    e["related"] = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "namespace": "other",
                          "name": "g", "uid": "u-g"});
    let a = api.call("POST", EVENTS, JSON, &e).await;
    assert_eq!(a.status, 201, "{:#}", a.body);
    // A reference that does not decode into an ObjectReference is a bad request.
    let mut bad = event();
    bad["metadata"]["name"] = json!("w-0.2");
    bad["related"] = json!({"name": 7});
    let a = api.call("POST", EVENTS, JSON, &bad).await;
    assert_eq!((a.status, a.body["reason"].as_str()), (400, Some("BadRequest")), "{:#}", a.body);
    let mut bad = event();
    bad["metadata"]["name"] = json!("w-0.3");
    bad["related"] = json!("ml/g");
    assert_eq!(api.call("POST", EVENTS, JSON, &bad).await.status, 400);
    // ValidateEventUpdate: what an event says cannot change, `related` and `regarding` included,
    // named as the internal type names them.
    let path = format!("{EVENTS}/w-0.17a9");
    let patch = json!({"related": {"kind": "Gang", "name": "h"}, "regarding": {"name": "w-1"},
                       "note": "changed", "reportingInstance": "replica-b"});
    let a = api.call("PATCH", &path, MERGE, &patch).await;
    assert_eq!((a.status, a.body["reason"].as_str()), (422, Some("Invalid")), "{:#}", a.body);
    let mut got = fields(&a.body);
    got.sort();
    assert_eq!(got, ["involvedObject", "message", "related", "reportingInstance"]);
    assert!(a.body["details"]["causes"][0]["message"].as_str().unwrap().ends_with("field is immutable"));
    // Its series and metadata may change.
    let series = json!({"series": {"count": 2, "lastObservedTime": "2026-11-23T15:07:39.000000Z"},
                        "metadata": {"labels": {"seen": "twice"}}});
    let a = api.call("PATCH", &path, MERGE, &series).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
}

/// `field → cause reason` of a 422.
fn causes(status: &Value) -> Vec<(String, String)> {
    status["details"]["causes"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| {
                    (
                        c["field"].as_str().unwrap_or("").to_string(),
                        c["reason"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_gang_is_checked_against_its_crds_schema_on_create_update_and_status() {
    let api = fake().await;
    const GANGS: &str = "/apis/kube-gang.io/v1alpha1/namespaces/ml/gangs";
    let mut sub: Vec<Value> = (0..65).map(|i| json!({"name": format!("s{i}"), "minMember": 1})).collect();
    sub[0] = json!({"name": "s0"});
    sub[2] = json!({"name": "s1", "minMember": 1});
    let bad = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"minMember": 0, "mode": "Loose", "topologyKey": "k".repeat(318), "subGroups": sub,
                 "gangGroup": [7], "scheduleTimeoutSeconds": -1}});
    let a = api.call("POST", GANGS, JSON, &bad).await;
    assert_eq!((a.status, a.body["reason"].as_str()), (422, Some("Invalid")), "{:#}", a.body);
    let got = causes(&a.body);
    for want in [
        ("spec.minMember", "FieldValueInvalid"),
        ("spec.mode", "FieldValueNotSupported"),
        ("spec.topologyKey", "FieldValueTooLong"),
        ("spec.subGroups", "FieldValueTooMany"),
        ("spec.subGroups[0].minMember", "FieldValueRequired"),
        ("spec.subGroups[2]", "FieldValueDuplicate"),
        ("spec.gangGroup[0]", "FieldValueTypeInvalid"),
        ("spec.scheduleTimeoutSeconds", "FieldValueInvalid"),
    ] {
        assert!(got.contains(&(want.0.to_string(), want.1.to_string())), "{want:?} not in {got:#?}");
    }
    let message = a.body["message"].as_str().unwrap();
    assert!(message.contains("spec.minMember in body should be greater than or equal to 1"), "{message}");
    assert!(
        message.contains(r#"spec.mode: Unsupported value: "Loose": supported values: "Strict", "NonStrict""#)
    );
    // No spec at all.
    let a = api
        .call(
            "POST",
            GANGS,
            JSON,
            &json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "g"}}),
        )
        .await;
    assert_eq!(causes(&a.body), [("spec".to_string(), "FieldValueRequired".to_string())], "{:#}", a.body);
    // A valid one is created; an update of the wrong type is refused, as is a status out of bounds.
    let a = api.call("POST", GANGS, JSON, &gang("ml", "g", 2)).await;
    assert_eq!(a.status, 201, "{:#}", a.body);
    let a = api.call("PATCH", &format!("{GANGS}/g"), MERGE, &json!({"spec": {"minMember": "three"}})).await;
    assert_eq!(causes(&a.body), [("spec.minMember".to_string(), "FieldValueTypeInvalid".to_string())]);
    assert!(
        a.body["message"]
            .as_str()
            .unwrap()
            .contains(r#"spec.minMember in body must be of type integer: "string""#)
    );
    let condition = json!({"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "m",
                           "lastTransitionTime": "2026-11-23T15:06:39Z"});
    let status = json!({"status": {"phase": "p".repeat(33), "waitingSince": "yesterday",
                                   "conditions": vec![condition; 17], "members": null}});
    let a = api.call("PATCH", &format!("{GANGS}/g/status"), MERGE, &status).await;
    let got = causes(&a.body);
    for want in [
        ("status.phase", "FieldValueTooLong"),
        ("status.waitingSince", "FieldValueTypeInvalid"),
        ("status.conditions", "FieldValueTooMany"),
        ("status.conditions[1]", "FieldValueDuplicate"),
    ] {
        assert!(got.contains(&(want.0.to_string(), want.1.to_string())), "{want:?} not in {got:#?}");
    }
    // Nullable fields take null (a merge patch of null removes, so put it whole).
    let mut stored = api.get("kube-gang.io/v1alpha1", "Gang", "ml", "g").unwrap();
    stored["status"] = json!({"phase": null, "waitingSince": null, "members": 2});
    let a = api.call("PUT", &format!("{GANGS}/g/status"), JSON, &stored).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    stored["status"] = json!({"members": null});
    stored["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    let a = api.call("PUT", &format!("{GANGS}/g/status"), JSON, &stored).await;
    assert_eq!(
        causes(&a.body),
        [("status.members".to_string(), "FieldValueTypeInvalid".to_string())],
        "{:#}",
        a.body
    );
}
