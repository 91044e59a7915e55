//! PATCH as kube-apiserver applies it: the three patch types, `/status` separated from the main
//! resource, `generation` bumped on spec changes, resourceVersion preconditions.

use kube_gang_tests::{FakeApi, gang, gang_pod};
use serde_json::json;

const POD: &str = "/api/v1/namespaces/ml/pods/w-0";
const GANG: &str = "/apis/kube-gang.io/v1alpha1/namespaces/ml/gangs/g";
const JSON_PATCH: &str = "application/json-patch+json";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

async fn fake() -> FakeApi {
    let api = FakeApi::start(&[("/apis/kube-gang.io/v1alpha1", "gangs")]).await;
    let mut p = gang_pod("ml", "w-0", "g", 1);
    p["metadata"]["generation"] = json!(1);
    p["spec"]["schedulingGates"] = json!([{"name": "kueue.x-k8s.io/admission"}, {"name": "example.com/b"}]);
    p["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
    api.put(p);
    api.put(gang("ml", "g", 2));
    api
}

#[tokio::test]
async fn a_strategic_status_patch_merges_conditions_by_type() {
    let api = fake().await;
    let patch = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                  "message": "m", "lastTransitionTime": "2026-11-23T15:06:39Z"}]}});
    let a = api.call("PATCH", &format!("{POD}/status"), STRATEGIC, &patch).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    let types: Vec<&str> = a.body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["Ready", "PodScheduled"]);
    // As a merge patch the list is replaced.
    let a = api.call("PATCH", &format!("{POD}/status"), MERGE, &patch).await;
    assert_eq!(a.body["status"]["conditions"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_json_patch_removes_a_scheduling_gate_and_bumps_generation() {
    let api = fake().await;
    let ops = json!([{"op": "remove", "path": "/spec/schedulingGates/0"}]);
    let a = api.call("PATCH", POD, JSON_PATCH, &ops).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    assert_eq!(a.body["spec"]["schedulingGates"], json!([{"name": "example.com/b"}]));
    assert_eq!(a.body["metadata"]["generation"], 2, "a spec change");
    let failing = json!([{"op": "test", "path": "/spec/schedulerName", "value": "default-scheduler"}]);
    let a = api.call("PATCH", POD, JSON_PATCH, &failing).await;
    assert_eq!((a.status, a.body["reason"].as_str()), (422, Some("Invalid")));
    // Labels are metadata: no generation bump.
    let a = api.call("PATCH", POD, MERGE, &json!({"metadata": {"labels": {"extra": "1"}}})).await;
    assert_eq!(a.body["metadata"]["generation"], 2);
}

#[tokio::test]
async fn status_and_spec_are_written_through_their_own_endpoints() {
    let api = fake().await;
    // The main resource cannot change status...
    let a = api
        .call(
            "PATCH",
            POD,
            MERGE,
            &json!({"status": {"phase": "Running"}, "spec": {"activeDeadlineSeconds": 50}}),
        )
        .await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    assert_eq!(a.body["status"]["phase"], "Pending");
    assert_eq!(a.body["spec"]["activeDeadlineSeconds"], 50);
    // ... and /status cannot change the spec.
    let a = api
        .call(
            "PATCH",
            &format!("{POD}/status"),
            MERGE,
            &json!({"status": {"phase": "Running"}, "spec": {"activeDeadlineSeconds": 9}}),
        )
        .await;
    assert_eq!(a.body["status"]["phase"], "Running");
    assert_eq!(a.body["spec"]["activeDeadlineSeconds"], 50);
    // A CRD with a status subresource behaves the same, and its generation follows its spec only.
    let a = api
        .call(
            "PATCH",
            &format!("{GANG}/status"),
            MERGE,
            &json!({"status": {"phase": "Pending"}, "spec": {"minMember": 5}}),
        )
        .await;
    assert_eq!(
        (a.body["spec"]["minMember"].as_u64(), a.body["metadata"]["generation"].as_u64()),
        (Some(2), Some(1))
    );
    let a = api
        .call("PATCH", GANG, MERGE, &json!({"spec": {"minMember": 3}, "status": {"phase": "Running"}}))
        .await;
    assert_eq!(
        (a.body["spec"]["minMember"].as_u64(), a.body["metadata"]["generation"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(a.body["status"]["phase"], "Pending");
}

#[tokio::test]
async fn strategic_merge_is_refused_for_custom_resources() {
    let api = fake().await;
    let a = api
        .call("PATCH", &format!("{GANG}/status"), STRATEGIC, &json!({"status": {"phase": "Pending"}}))
        .await;
    assert_eq!((a.status, a.body["reason"].as_str()), (415, Some("UnsupportedMediaType")));
    let a = api.call("PATCH", POD, "application/json", &json!({})).await;
    assert_eq!(a.status, 415);
}

#[tokio::test]
async fn a_stale_resource_version_is_a_conflict() {
    let api = fake().await;
    let rv = api.get("v1", "Pod", "ml", "w-0").unwrap()["metadata"]["resourceVersion"].clone();
    let fresh = json!({"metadata": {"resourceVersion": rv}, "status": {"nominatedNodeName": "n1"}});
    assert_eq!(api.call("PATCH", &format!("{POD}/status"), MERGE, &fresh).await.status, 200);
    let a = api.call("PATCH", &format!("{POD}/status"), MERGE, &fresh).await;
    assert_eq!((a.status, a.body["reason"].as_str()), (409, Some("Conflict")));
    assert_eq!(
        a.body["message"],
        "Operation cannot be fulfilled on pods \"w-0\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // A PUT with a stale resourceVersion too; without one it is unconditional.
    let mut pod = api.get("v1", "Pod", "ml", "w-0").unwrap();
    pod["metadata"]["resourceVersion"] = json!("1");
    assert_eq!(api.call("PUT", POD, "application/json", &pod).await.status, 409);
    pod["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    pod["metadata"]["labels"]["x"] = json!("y");
    assert_eq!(api.call("PUT", POD, "application/json", &pod).await.status, 200);
}

/// The cause a 422 lists for `field`: (reason, message).
fn cause(body: &serde_json::Value, field: &str) -> Option<(String, String)> {
    body["details"]["causes"].as_array()?.iter().find(|c| c["field"] == field).map(|c| {
        (c["reason"].as_str().unwrap_or("").to_string(), c["message"].as_str().unwrap_or("").to_string())
    })
}

#[tokio::test]
async fn a_pods_spec_is_immutable_but_for_the_fields_the_api_server_lets_change() {
    let api = fake().await;
    // What may change: an image, a lower deadline, a toleration added, a gate removed, and (the
    // pod is gated) a node selector entry added.
    let allowed = [
        json!({"spec": {"containers": [{"name": "c", "image": "y"}]}}),
        json!({"spec": {"activeDeadlineSeconds": 100}}),
        json!({"spec": {"activeDeadlineSeconds": 60}}),
        json!({"spec": {"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}}),
        json!({"spec": {"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                                        {"key": "spot", "operator": "Exists"}]}}),
        json!({"spec": {"nodeSelector": {"zone": "a"}}}),
    ];
    for patch in allowed {
        let a = api.call("PATCH", POD, STRATEGIC, &patch).await;
        assert_eq!(a.status, 200, "{patch}: {:#}", a.body);
    }
    // (Gates merge by name in a strategic patch: a merge patch replaces the list.)
    let a = api
        .call("PATCH", POD, MERGE, &json!({"spec": {"schedulingGates": [{"name": "example.com/b"}]}}))
        .await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    // What may not, each a 422 naming the field.
    let refused = [
        (json!({"spec": {"priority": 5}}), "spec", "FieldValueForbidden", "changed: spec.priority"),
        (
            json!({"spec": {"schedulerName": "default-scheduler"}}),
            "spec",
            "FieldValueForbidden",
            "changed: spec.schedulerName",
        ),
        (
            json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}),
            "spec",
            "FieldValueForbidden",
            "changed: spec.containers",
        ),
        (
            json!({"spec": {"activeDeadlineSeconds": 90}}),
            "spec.activeDeadlineSeconds",
            "FieldValueInvalid",
            "must be less than or equal to previous value",
        ),
        (
            json!({"spec": {"activeDeadlineSeconds": null}}),
            "spec.activeDeadlineSeconds",
            "FieldValueInvalid",
            "must not update from a positive integer to nil value",
        ),
        (
            json!({"spec": {"tolerations": [{"key": "spot", "operator": "Exists"}]}}),
            "spec.tolerations",
            "FieldValueForbidden",
            "existing toleration can not be modified except its tolerationSeconds",
        ),
        (
            json!({"spec": {"schedulingGates": [{"name": "example.com/b"}, {"name": "x.io/new"}]}}),
            "spec.schedulingGates[1].name",
            "FieldValueForbidden",
            "only deletion is allowed, but found new scheduling gate 'x.io/new'",
        ),
        (
            json!({"spec": {"nodeSelector": {"zone": "b"}}}),
            "spec.nodeSelector",
            "FieldValueInvalid",
            "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
        ),
    ];
    for (patch, field, reason, says) in refused {
        let a = api.call("PATCH", POD, STRATEGIC, &patch).await;
        assert_eq!((a.status, a.body["reason"].as_str()), (422, Some("Invalid")), "{patch}: {:#}", a.body);
        let (r, m) =
            cause(&a.body, field).unwrap_or_else(|| panic!("{patch}: no cause on {field}: {:#}", a.body));
        assert_eq!(r, reason, "{patch}");
        assert!(m.contains(says), "{patch}: {m}");
    }
    // A container added or removed is refused before anything else.
    let ops = json!([{"op": "add", "path": "/spec/containers/-", "value": {"name": "d", "image": "x"}}]);
    let a = api.call("PATCH", POD, JSON_PATCH, &ops).await;
    let c = cause(&a.body, "spec.containers").map(|c| c.1);
    assert_eq!(c.as_deref(), Some("Forbidden: pod updates may not add or remove containers"), "{:#}", a.body);
    // Nothing refused was stored; the last gate removed, the selector is no longer extensible.
    let stored = api.get("v1", "Pod", "ml", "w-0").unwrap();
    assert_eq!(stored["spec"]["activeDeadlineSeconds"], 60);
    assert_eq!(stored["spec"]["containers"][0]["image"], "y");
    assert!(stored["spec"].get("priority").is_none());
    let a = api.call("PATCH", POD, MERGE, &json!({"spec": {"schedulingGates": null}})).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    let a =
        api.call("PATCH", POD, MERGE, &json!({"spec": {"nodeSelector": {"zone": "a", "rack": "r1"}}})).await;
    assert_eq!(
        cause(&a.body, "spec").map(|c| c.0),
        Some("FieldValueForbidden".into()),
        "an ungated pod: {:#}",
        a.body
    );
}
