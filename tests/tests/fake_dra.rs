//! Dynamic resource allocation (`resource.k8s.io`) as kube-apiserver serves it to a scheduler:
//! ResourceSlices and DeviceClasses only where the cluster serves them, decoded as their
//! version's type, without a status; a ResourceClaim's spec immutable, its status written through
//! `/status` only, which keeps the claim's metadata, and checked as kube-scheduler's writes are
//! (`reservedFor` only on an allocated claim and never growing while it is deleted, an allocation
//! set once and naming the claim's requests and whole devices), stale `resourceVersion`s 409.

use std::time::Duration;

use futures::StreamExt;
use kube_gang_tests::{Answer, FakeApi};
use serde_json::{Value, json};

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

const V1: &str = "/apis/resource.k8s.io/v1";
const CLAIMS: &str = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims";
const CLAIM: &str = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/gpu";
const STATUS: &str = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/gpu/status";
const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";
const CLASSES: &str = "/apis/resource.k8s.io/v1/deviceclasses";
const FINALIZER: &str = "resource.kubernetes.io/delete-protection";

fn slice(name: &str, node: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
           "spec": {"driver": "gpu.example.com", "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}},
                                 "capacity": {"memory": {"value": "80Gi"}}}]}})
}

fn class() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
           "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}})
}

/// A claim for one GPU (`gpu`) and a NIC, a fast one or else a slow one (`nic/fast`, `nic/slow`).
fn claim() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu", "namespace": "ml"},
           "spec": {"devices": {"requests": [
               {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}},
               {"name": "nic", "firstAvailable": [
                   {"name": "fast", "deviceClassName": "nic.example.com"},
                   {"name": "slow", "deviceClassName": "nic.example.com"}]}]}}})
}

fn result(request: &str, device: &str) -> Value {
    json!({"request": request, "driver": "gpu.example.com", "pool": "n1", "device": device})
}

/// An allocation as kube-scheduler writes it: results, the node they are on, the class's config.
fn allocation(results: Vec<Value>) -> Value {
    json!({"devices": {"results": results,
                       "config": [{"source": "FromClass", "requests": ["gpu"],
                                   "opaque": {"driver": "gpu.example.com", "parameters": {}}}]},
           "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
               {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}})
}

fn good_allocation() -> Value {
    allocation(vec![result("gpu", "gpu-0"), result("nic/fast", "nic-0")])
}

fn consumer(pod: &str) -> Value {
    json!({"resource": "pods", "name": pod, "uid": format!("uid-{pod}")})
}

/// A fake serving ResourceClaims, holding claim `ml/gpu` as created through the API.
async fn dra() -> FakeApi {
    let api = FakeApi::start(&[(V1, "resourceclaims")]).await;
    let created = api.call("POST", CLAIMS, JSON, &claim()).await;
    assert_eq!(created.status, 201, "{:#}", created.body);
    api
}

async fn status(api: &FakeApi, status: Value) -> Answer {
    api.call("PATCH", STATUS, MERGE, &json!({"status": status})).await
}

fn stored(api: &FakeApi) -> Value {
    api.get("resource.k8s.io/v1", "ResourceClaim", "ml", "gpu").expect("claim stored")
}

fn version(v: &Value) -> String {
    v["metadata"]["resourceVersion"].as_str().expect("resourceVersion").to_string()
}

/// `(field, reason)` of each cause of a 422, in order.
fn causes(a: &Answer) -> Vec<(String, String)> {
    assert_eq!((a.status, a.body["reason"].as_str()), (422, Some("Invalid")), "{:#}", a.body);
    a.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (c["field"].as_str().unwrap_or("").to_string(), c["reason"].as_str().unwrap_or("").to_string())
        })
        .collect()
}

fn cause(field: &str, reason: &str) -> (String, String) {
    (field.to_string(), reason.to_string())
}

/// The events of a watch until `wait` passes without a line.
async fn watch(api: &FakeApi, uri: &str, wait: Duration) -> Vec<Value> {
    let mut body = api.send("GET", uri, "", "").await.into_body().into_data_stream();
    let (mut out, mut text) = (Vec::new(), String::new());
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(wait, body.next()).await {
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(i) = text.find('\n') {
            out.push(serde_json::from_str(&text[..i]).expect("a watch event"));
            text.drain(..=i);
        }
    }
    out
}

#[tokio::test]
async fn slices_and_classes_are_served_only_when_the_cluster_serves_them() {
    let plain = FakeApi::start(&[(V1, "resourceclaims")]).await;
    for path in [SLICES, CLASSES, "/apis/resource.k8s.io/v1beta1/resourceslices"] {
        assert_eq!(plain.call("GET", path, "", &Value::Null).await.status, 404, "{path}");
    }
    assert_eq!(plain.call("POST", SLICES, JSON, &slice("n1-gpu", "n1")).await.status, 404);

    let api = FakeApi::start(&[(V1, "resourceslices"), (V1, "deviceclasses")]).await;
    let created = api.call("POST", SLICES, JSON, &slice("n1-gpu", "n1")).await;
    assert_eq!(created.status, 201, "{:#}", created.body);
    assert_eq!(created.body["metadata"]["generation"], 1);
    let from = version(&created.body);
    assert_eq!(api.call("POST", SLICES, JSON, &slice("n2-gpu", "n2")).await.status, 201);
    assert_eq!(api.call("POST", CLASSES, JSON, &class()).await.status, 201);

    let list = api.call("GET", SLICES, "", &Value::Null).await;
    assert_eq!((list.status, list.body["kind"].as_str()), (200, Some("ResourceSliceList")));
    assert_eq!(list.body["items"].as_array().map(Vec::len), Some(2));
    let classes = api.call("GET", CLASSES, "", &Value::Null).await;
    assert_eq!(classes.body["kind"], "DeviceClassList");
    let got = api.call("GET", &format!("{CLASSES}/gpu.example.com"), "", &Value::Null).await;
    assert_eq!((got.status, got.body["metadata"]["name"].as_str()), (200, Some("gpu.example.com")));

    // A spec change is a new generation, a label alone is not.
    let grown = json!({"spec": {"devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}});
    let patched = api.call("PATCH", &format!("{SLICES}/n1-gpu"), MERGE, &grown).await;
    assert_eq!(
        (patched.status, patched.body["metadata"]["generation"].as_i64()),
        (200, Some(2)),
        "{:#}",
        patched.body
    );
    let mut replaced = patched.body.clone();
    replaced["metadata"]["labels"] = json!({"team": "ml"});
    let put = api.call("PUT", &format!("{SLICES}/n1-gpu"), JSON, &replaced).await;
    assert_eq!((put.status, put.body["metadata"]["generation"].as_i64()), (200, Some(2)), "{:#}", put.body);
    let stale = api.call("PUT", &format!("{SLICES}/n1-gpu"), JSON, &replaced).await;
    assert_eq!(stale.status, 409, "the resourceVersion read before the last write");
    assert_eq!(api.call("DELETE", &format!("{SLICES}/n2-gpu"), "", &Value::Null).await.status, 200);
    assert_eq!(api.call("GET", &format!("{SLICES}/n2-gpu"), "", &Value::Null).await.status, 404);

    let events =
        watch(&api, &format!("{SLICES}?watch=1&resourceVersion={from}"), Duration::from_millis(300)).await;
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e["type"].as_str().unwrap_or(""), e["object"]["metadata"]["name"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        seen,
        [("ADDED", "n2-gpu"), ("MODIFIED", "n1-gpu"), ("MODIFIED", "n1-gpu"), ("DELETED", "n2-gpu")]
    );
    assert_eq!(events[0]["object"]["kind"], "ResourceSlice");
}

#[tokio::test]
async fn slices_and_classes_decode_as_their_versions_type_and_have_no_status() {
    let beta = "/apis/resource.k8s.io/v1beta1";
    let api =
        FakeApi::start(&[(V1, "resourceslices"), (V1, "deviceclasses"), (beta, "resourceslices")]).await;
    let mut bad = slice("n1-gpu", "n1");
    bad["spec"]["devices"] = json!("many");
    let a = api.call("POST", SLICES, JSON, &bad).await;
    assert_eq!((a.status, a.body["reason"].as_str()), (400, Some("BadRequest")), "{:#}", a.body);
    assert!(
        a.body["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("ResourceSlice in version \"v1\" cannot be handled")
    );
    let mut bad = class();
    bad["spec"]["selectors"] = json!({"cel": "x"});
    assert_eq!(api.call("POST", CLASSES, JSON, &bad).await.status, 400);
    let mut late = slice("n1-gpu", "n1");
    late["spec"]["devices"][0]["taints"] =
        json!([{"key": "k", "effect": "NoSchedule", "timeAdded": "yesterday"}]);
    assert_eq!(api.call("POST", SLICES, JSON, &late).await.status, 400, "a taint's time is a metav1.Time");

    // v1beta1 nests a device's fields under `basic`: the v1 shape is not its shape.
    let mut old = slice("n1-gpu", "n1");
    old["apiVersion"] = json!("resource.k8s.io/v1beta1");
    old["spec"]["devices"] =
        json!([{"name": "gpu-0", "basic": {"attributes": {"model": {"string": "a100"}}}}]);
    let a = api.call("POST", &format!("{beta}/resourceslices"), JSON, &old).await;
    assert_eq!(a.status, 201, "{:#}", a.body);
    old["spec"]["devices"][0]["basic"] = json!("none");
    old["metadata"]["name"] = json!("n2-gpu");
    assert_eq!(api.call("POST", &format!("{beta}/resourceslices"), JSON, &old).await.status, 400);

    assert_eq!(api.call("POST", SLICES, JSON, &slice("n1-gpu", "n1")).await.status, 201);
    assert_eq!(api.call("POST", CLASSES, JSON, &class()).await.status, 201);
    for base in [format!("{SLICES}/n1-gpu"), format!("{CLASSES}/gpu.example.com")] {
        let sub = format!("{base}/status");
        assert_eq!(api.call("GET", &sub, "", &Value::Null).await.status, 404, "{sub}");
        let patch = json!({"status": {"x": 1}});
        assert_eq!(api.call("PATCH", &sub, MERGE, &patch).await.status, 404, "{sub}");
        let whole = api.call("GET", &base, "", &Value::Null).await.body;
        assert_eq!(api.call("PUT", &sub, JSON, &whole).await.status, 404, "{sub}");
    }
}

#[tokio::test]
async fn a_claims_spec_is_immutable_and_its_status_not_the_main_resources() {
    let api = FakeApi::start(&[(V1, "resourceclaims")]).await;
    let mut with_status = claim();
    with_status["status"] = json!({"allocation": good_allocation(), "reservedFor": [consumer("w-0")]});
    let created = api.call("POST", CLAIMS, JSON, &with_status).await;
    assert_eq!(created.status, 201, "{:#}", created.body);
    assert!(created.body.get("status").is_none(), "a claim is created without a status: {:#}", created.body);

    let grown = json!({"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}]}}});
    let a = api.call("PATCH", CLAIM, MERGE, &grown).await;
    assert_eq!(causes(&a), [cause("spec", "FieldValueInvalid")]);
    assert!(
        a.body["details"]["causes"][0]["message"].as_str().unwrap_or("").ends_with(": field is immutable")
    );
    assert_eq!(a.body["details"]["kind"], "ResourceClaim");
    assert_eq!(a.body["details"]["group"], "resource.k8s.io");
    let mut replaced = stored(&api);
    replaced["spec"]["devices"]["requests"][0]["exactly"]["count"] = json!(2);
    assert_eq!(causes(&api.call("PUT", CLAIM, JSON, &replaced).await), [cause("spec", "FieldValueInvalid")]);

    // The main resource takes metadata and ignores a status.
    let labelled =
        json!({"metadata": {"labels": {"team": "ml"}}, "status": {"allocation": good_allocation()}});
    let a = api.call("PATCH", CLAIM, MERGE, &labelled).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    assert_eq!(stored(&api)["metadata"]["labels"]["team"], "ml");
    assert!(stored(&api).get("status").is_none(), "status only through /status");
    assert_eq!(stored(&api)["spec"], claim()["spec"]);
}

#[tokio::test]
async fn finalizers_stick_through_the_claim_but_not_through_its_status() {
    let api = dra().await;
    let a = api.call("PATCH", CLAIM, MERGE, &json!({"metadata": {"finalizers": [FINALIZER]}})).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    assert_eq!(stored(&api)["metadata"]["finalizers"], json!([FINALIZER]));

    // Through /status only the status changes: metadata and spec stay as stored.
    let sneaky = json!({"metadata": {"finalizers": ["example.com/other"], "labels": {"team": "ml"}, "annotations": {"a": "b"}},
                        "spec": {"devices": {"requests": []}},
                        "status": {"allocation": good_allocation()}});
    let a = api.call("PATCH", STATUS, MERGE, &sneaky).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    let now = stored(&api);
    assert_eq!(now["metadata"]["finalizers"], json!([FINALIZER]));
    assert!(now["metadata"].get("labels").is_none(), "{:#}", now["metadata"]);
    assert!(now["metadata"].get("annotations").is_none(), "{:#}", now["metadata"]);
    assert_eq!(now["spec"], claim()["spec"]);
    assert_eq!(now["status"]["allocation"], good_allocation());

    // Taking the finalizer away through /status is ignored just the same.
    let mut whole = now.clone();
    whole["metadata"]["finalizers"] = json!([]);
    let a = api.call("PUT", STATUS, JSON, &whole).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    assert_eq!(stored(&api)["metadata"]["finalizers"], json!([FINALIZER]));
}

#[tokio::test]
async fn an_allocation_and_its_consumers_are_written_with_the_version_they_were_computed_from() {
    let api = dra().await;
    let read = version(&stored(&api));
    let write = json!({"metadata": {"resourceVersion": read},
                       "status": {"allocation": good_allocation(), "reservedFor": [consumer("w-0")]}});
    let a = api.call("PATCH", STATUS, MERGE, &write).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    assert_eq!(a.body["status"]["reservedFor"], json!([consumer("w-0")]));
    assert_eq!(stored(&api)["status"]["allocation"], good_allocation());

    // The same write again carries a version that is no longer the claim's.
    let again = api.call("PATCH", STATUS, MERGE, &write).await;
    assert_eq!((again.status, again.body["reason"].as_str()), (409, Some("Conflict")), "{:#}", again.body);
    let mut whole = stored(&api);
    whole["metadata"]["resourceVersion"] = json!(read);
    assert_eq!(api.call("PUT", STATUS, JSON, &whole).await.status, 409);
    let mut main = stored(&api);
    main["metadata"]["resourceVersion"] = json!(read);
    assert_eq!(api.call("PUT", CLAIM, JSON, &main).await.status, 409);

    // Another consumer joins with the current version (consumers merge by uid in a strategic
    // patch); the allocation sent again unchanged is no change.
    let current = version(&stored(&api));
    let join =
        json!({"metadata": {"resourceVersion": current}, "status": {"reservedFor": [consumer("w-1")]}});
    let a = api.call("PATCH", STATUS, STRATEGIC, &join).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    assert_eq!(stored(&api)["status"]["reservedFor"], json!([consumer("w-0"), consumer("w-1")]));
    let same = json!({"allocation": good_allocation(), "reservedFor": [consumer("w-0"), consumer("w-1")]});
    assert_eq!(status(&api, same).await.status, 200);

    // Released: no consumer left, and the allocation cleared with them.
    let a = status(&api, json!({"reservedFor": null, "allocation": null, "devices": null})).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    assert!(stored(&api)["status"].get("allocation").is_none());
}

#[tokio::test]
async fn consumers_need_an_allocation_and_whole_unique_entries() {
    let api = dra().await;
    let a = status(&api, json!({"reservedFor": [consumer("w-0")]})).await;
    assert_eq!(causes(&a), [cause("status.reservedFor", "FieldValueForbidden")]);
    assert!(
        a.body["details"]["causes"][0]["message"]
            .as_str()
            .unwrap_or("")
            .ends_with("may not be specified when `allocated` is not set"),
        "{:#}",
        a.body
    );

    let holes = json!([{"resource": "", "name": "w-0", "uid": "u0"}, {"resource": "pods", "uid": ""},
                       consumer("w-2"), {"resource": "pods", "name": "w-3", "uid": "uid-w-2"}]);
    let a = status(&api, json!({"allocation": good_allocation(), "reservedFor": holes})).await;
    assert_eq!(
        causes(&a),
        [
            cause("status.reservedFor[0].resource", "FieldValueRequired"),
            cause("status.reservedFor[1].name", "FieldValueRequired"),
            cause("status.reservedFor[1].uid", "FieldValueRequired"),
            cause("status.reservedFor[3]", "FieldValueDuplicate"),
        ]
    );
    assert_eq!(a.body["details"]["causes"][3]["message"], "Duplicate value: \"uid-w-2\"");

    // Too many: counted, and no entry looked at (the last two are repeats).
    let mut many: Vec<Value> = (0..255).map(|i| consumer(&format!("w-{i}"))).collect();
    many.extend([consumer("w-0"), json!({"resource": "pods"})]);
    let a = status(&api, json!({"allocation": good_allocation(), "reservedFor": many})).await;
    assert_eq!(causes(&a), [cause("status.reservedFor", "FieldValueTooMany")]);
    assert_eq!(a.body["details"]["causes"][0]["message"], "Too many: 257: must have at most 256 items");
    many.truncate(256);
    many[255] = consumer("w-255");
    let a = status(&api, json!({"allocation": good_allocation(), "reservedFor": many})).await;
    assert_eq!(a.status, 200, "256 consumers are allowed: {:#}", a.body);
}

#[tokio::test]
async fn no_consumer_joins_a_claim_being_deleted() {
    let api = FakeApi::start(&[(V1, "resourceclaims")]).await;
    let mut deleting = claim();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    deleting["metadata"]["finalizers"] = json!([FINALIZER]);
    deleting["status"] =
        json!({"allocation": good_allocation(), "reservedFor": [consumer("w-0"), consumer("w-1")]});
    api.put(deleting);
    let a = status(&api, json!({"reservedFor": [consumer("w-0"), consumer("w-1"), consumer("w-2")]})).await;
    assert_eq!(causes(&a), [cause("status.reservedFor", "FieldValueForbidden")]);
    assert!(a.body["message"].as_str().unwrap_or("").contains("deletionTimestamp"), "{:#}", a.body);
    // One consumer swapped for another is one joining too.
    let a = status(&api, json!({"reservedFor": [consumer("w-0"), consumer("w-2")]})).await;
    assert_eq!(causes(&a), [cause("status.reservedFor", "FieldValueForbidden")]);
    // Leaving is allowed.
    let a = status(&api, json!({"reservedFor": [consumer("w-1")]})).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    assert_eq!(stored(&api)["status"]["reservedFor"], json!([consumer("w-1")]));
}

#[tokio::test]
async fn an_allocation_is_set_once_and_cleared_before_it_is_set_again() {
    let api = dra().await;
    assert_eq!(status(&api, json!({"allocation": good_allocation()})).await.status, 200);
    let other = allocation(vec![result("gpu", "gpu-1"), result("nic/fast", "nic-0")]);
    let a = status(&api, json!({"allocation": other.clone()})).await;
    assert_eq!(causes(&a), [cause("status.allocation", "FieldValueInvalid")]);
    assert!(
        a.body["details"]["causes"][0]["message"].as_str().unwrap_or("").ends_with(": field is immutable")
    );
    let moved = json!({"allocation": {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}});
    assert_eq!(causes(&status(&api, moved).await), [cause("status.allocation", "FieldValueInvalid")]);
    assert_eq!(stored(&api)["status"]["allocation"], good_allocation());

    assert_eq!(status(&api, json!({"allocation": null})).await.status, 200);
    let a = status(&api, json!({"allocation": other.clone()})).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    assert_eq!(stored(&api)["status"]["allocation"], other);
}

#[tokio::test]
async fn a_new_allocation_names_the_claims_requests_and_whole_devices() {
    let api = dra().await;
    let wrong = vec![
        result("tpu", "tpu-0"),
        result("gpu/fast", "gpu-0"),
        result("nic/slow", "nic-0"),
        json!({"request": "nic", "driver": "", "pool": "", "device": ""}),
    ];
    let a = status(&api, json!({"allocation": allocation(wrong)})).await;
    let p = "status.allocation.devices.results";
    assert_eq!(
        causes(&a),
        [
            cause(&format!("{p}[0].request"), "FieldValueInvalid"),
            cause(&format!("{p}[1].request"), "FieldValueInvalid"),
            cause(&format!("{p}[3].driver"), "FieldValueRequired"),
            cause(&format!("{p}[3].driver"), "FieldValueInvalid"),
            cause(&format!("{p}[3].pool"), "FieldValueRequired"),
            cause(&format!("{p}[3].device"), "FieldValueInvalid"),
        ]
    );
    assert!(
        a.body["details"]["causes"][0]["message"]
            .as_str()
            .unwrap_or("")
            .ends_with("must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"),
        "{:#}",
        a.body
    );

    let many: Vec<Value> = (0..33)
        .map(|i| json!({"request": "tpu", "driver": "", "pool": "n1", "device": format!("gpu-{i}")}))
        .collect();
    let a = status(&api, json!({"allocation": allocation(many)})).await;
    assert_eq!(causes(&a), [cause(p, "FieldValueTooMany")], "32 results at most, and then none looked at");
    assert!(stored(&api).get("status").is_none());

    let thirty_two: Vec<Value> = (0..32).map(|i| result("gpu", &format!("gpu-{i}"))).collect();
    let a = status(&api, json!({"allocation": allocation(thirty_two)})).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
}
