//! The fake serves what the volume filters read and refuses what kube-apiserver refuses where the
//! scheduler's binder writes: a PVC's spec immutable but for `volumeName` set once (and a bound
//! claim's storage growing), a PV's source and set node affinity immutable but its `claimRef`
//! free, a StorageClass's provisioner and binding mode immutable, annotation syntax, stale
//! `resourceVersion`s (409); and, when a test runs it, the PV controller's and a provisioner's
//! part of binding.

use kube_gang_tests::FakeApi;
use serde_json::{Value, json};

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

const CLAIMS: &str = "/api/v1/namespaces/ml/persistentvolumeclaims";
const VOLUMES: &str = "/api/v1/persistentvolumes";
const CLASSES: &str = "/apis/storage.k8s.io/v1/storageclasses";

fn claim(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "ml"},
           "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
}

fn volume(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
           "spec": {"storageClassName": "fast", "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                    "local": {"path": "/mnt/a"},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}})
}

fn class(provisioner: &str) -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
           "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"})
}

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
async fn a_claim_needs_an_access_mode_and_a_positive_request() {
    let api = FakeApi::start(&[]).await;
    let mut bad = claim("bad");
    bad["spec"]["accessModes"] = json!(["ReadWriteOncePod", "ReadWriteOnce"]);
    bad["spec"]["resources"]["requests"]["storage"] = json!("0");
    let a = api.call("POST", CLAIMS, JSON, &bad).await;
    assert_eq!(a.status, 422, "{:#}", a.body);
    assert_eq!(
        causes(&a.body),
        [
            ("spec.accessModes".to_string(), "FieldValueForbidden".to_string()),
            ("spec.resources[storage]".to_string(), "FieldValueInvalid".to_string())
        ]
    );
    let mut none = claim("none");
    none["spec"] = json!({});
    let a = api.call("POST", CLAIMS, JSON, &none).await;
    assert_eq!(causes(&a.body).len(), 2, "{:#}", a.body);
    assert_eq!(api.call("POST", CLAIMS, JSON, &claim("data")).await.status, 201);
}

#[tokio::test]
async fn a_claims_volume_name_is_set_once_and_its_spec_is_otherwise_immutable() {
    let api = FakeApi::start(&[]).await;
    assert_eq!(api.call("POST", CLAIMS, JSON, &claim("data")).await.status, 201);
    let at = format!("{CLAIMS}/data");
    // The selected-node annotation and volumeName, as a binder writes them.
    let a = api
        .call(
            "PATCH",
            &at,
            MERGE,
            &json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n1"}}}),
        )
        .await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    let a = api.call("PATCH", &at, STRATEGIC, &json!({"spec": {"volumeName": "pv-1"}})).await;
    assert_eq!(a.status, 200, "{:#}", a.body);
    assert_eq!(a.body["spec"]["volumeName"], "pv-1");
    for change in [
        json!({"spec": {"volumeName": "pv-2"}}),
        json!({"spec": {"storageClassName": "slow"}}),
        json!({"spec": {"accessModes": ["ReadWriteMany"]}}),
        json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
    ] {
        let a = api.call("PATCH", &at, MERGE, &change).await;
        assert_eq!(a.status, 422, "{change}: {:#}", a.body);
        assert_eq!(causes(&a.body), [("spec".to_string(), "FieldValueForbidden".to_string())], "{change}");
        assert!(
            a.body["message"]
                .as_str()
                .is_some_and(|m| m.contains("spec is immutable after creation except resources.requests")),
            "{:#}",
            a.body
        );
    }
    // A bound claim may grow, never shrink.
    let mut stored = api.get("v1", "PersistentVolumeClaim", "ml", "data").unwrap();
    stored["status"] = json!({"phase": "Bound"});
    api.put(stored);
    let grow = api
        .call("PATCH", &at, MERGE, &json!({"spec": {"resources": {"requests": {"storage": "5Gi"}}}}))
        .await;
    assert_eq!(grow.status, 200, "{:#}", grow.body);
    let shrink = api
        .call("PATCH", &at, MERGE, &json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}}}))
        .await;
    assert_eq!(
        causes(&shrink.body),
        [("spec.resources.requests.storage".to_string(), "FieldValueForbidden".to_string())]
    );
    // Annotation keys are qualified names; a stale resourceVersion is a conflict.
    let bad_key =
        api.call("PATCH", &at, MERGE, &json!({"metadata": {"annotations": {"not a key": "x"}}})).await;
    assert_eq!(bad_key.status, 422);
    let stale = api
        .call("PATCH", &at, MERGE, &json!({"metadata": {"resourceVersion": "1", "annotations": {"a": "b"}}}))
        .await;
    assert_eq!((stale.status, stale.body["reason"].as_str()), (409, Some("Conflict")));
}

#[tokio::test]
async fn a_pvs_claim_ref_is_free_its_source_and_set_node_affinity_are_not() {
    let api = FakeApi::start(&[]).await;
    let mut no_source = volume("bare");
    no_source["spec"].as_object_mut().unwrap().remove("local");
    let a = api.call("POST", VOLUMES, JSON, &no_source).await;
    assert_eq!(causes(&a.body), [("spec".to_string(), "FieldValueRequired".to_string())], "{:#}", a.body);
    let mut no_affinity = volume("loose");
    no_affinity["spec"].as_object_mut().unwrap().remove("nodeAffinity");
    let a = api.call("POST", VOLUMES, JSON, &no_affinity).await;
    assert_eq!(causes(&a.body), [("spec.nodeAffinity".to_string(), "FieldValueRequired".to_string())]);
    assert_eq!(api.call("POST", VOLUMES, JSON, &volume("local-1")).await.status, 201);
    let at = format!("{VOLUMES}/local-1");
    let bind = json!({"metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
                      "spec": {"claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "ml", "name": "data", "uid": "u1"}}});
    assert_eq!(api.call("PATCH", &at, MERGE, &bind).await.status, 200);
    let rebind = json!({"spec": {"claimRef": {"namespace": "ml", "name": "other"}}});
    assert_eq!(api.call("PATCH", &at, MERGE, &rebind).await.status, 200, "claimRef is not immutable");
    let a = api.call("PATCH", &at, MERGE, &json!({"spec": {"local": {"path": "/mnt/b"}}})).await;
    assert_eq!(
        causes(&a.body),
        [("spec.persistentvolumesource".to_string(), "FieldValueForbidden".to_string())]
    );
    let moved = json!({"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]}]}}}});
    let a = api.call("PATCH", &at, MERGE, &moved).await;
    assert_eq!(causes(&a.body), [("nodeAffinity".to_string(), "FieldValueInvalid".to_string())]);
    // A network volume may get a node affinity once.
    let nfs = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "nfs"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "nfs": {"server": "s", "path": "/"}}});
    assert_eq!(api.call("POST", VOLUMES, JSON, &nfs).await.status, 201);
    assert_eq!(api.call("PATCH", &format!("{VOLUMES}/nfs"), MERGE, &moved).await.status, 200);
}

#[tokio::test]
async fn a_storage_class_cannot_change_its_provisioner_or_binding_mode() {
    let api = FakeApi::start(&[]).await;
    assert_eq!(api.call("POST", CLASSES, JSON, &class("csi.example.com")).await.status, 201);
    let at = format!("{CLASSES}/fast");
    let a = api
        .call("PATCH", &at, MERGE, &json!({"provisioner": "other", "volumeBindingMode": "Immediate"}))
        .await;
    assert_eq!(
        causes(&a.body),
        [
            ("provisioner".to_string(), "FieldValueForbidden".to_string()),
            ("volumeBindingMode".to_string(), "FieldValueForbidden".to_string())
        ]
    );
    let labelled = api.call("PATCH", &at, MERGE, &json!({"metadata": {"labels": {"tier": "gold"}}})).await;
    assert_eq!(labelled.status, 200);
}

#[tokio::test]
async fn storage_kinds_are_listed_and_resource_claims_only_where_served() {
    let api = FakeApi::start(&[]).await;
    api.put(class("csi.example.com"));
    api.put(json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"},
                   "spec": {"drivers": [{"name": "d", "nodeID": "x", "allocatable": {"count": 2}}]}}));
    for path in [CLASSES, "/apis/storage.k8s.io/v1/csinodes", VOLUMES, "/api/v1/persistentvolumeclaims"] {
        let a = api.call("GET", path, "", &Value::Null).await;
        assert_eq!(a.status, 200, "{path}: {:#}", a.body);
        assert!(a.body["items"].is_array());
    }
    assert_eq!(
        api.call("GET", "/api/v1/persistentvolumeclaims", "", &Value::Null).await.body["kind"],
        "PersistentVolumeClaimList"
    );
    let claims = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims";
    assert_eq!(api.call("GET", claims, "", &Value::Null).await.status, 404, "no DRA unless served");
    let dra = FakeApi::start(&[("/apis/resource.k8s.io/v1", "resourceclaims")]).await;
    let rc = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu", "namespace": "ml"},
                    "spec": {"devices": {"requests": "many"}}});
    assert_eq!(dra.call("POST", claims, JSON, &rc).await.status, 400, "decoded as its version's type");
    let rc = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu", "namespace": "ml"}, "spec": {}});
    assert_eq!(dra.call("POST", claims, JSON, &rc).await.status, 201);
}

#[tokio::test]
async fn the_pv_controller_completes_bindings_and_provisions_for_the_selected_node() {
    let api = FakeApi::start(&[]).await;
    api.run_pv_controller();
    api.put(class("csi.example.com"));
    assert_eq!(api.call("POST", CLAIMS, JSON, &claim("static")).await.status, 201);
    assert_eq!(api.call("POST", CLAIMS, JSON, &claim("dynamic")).await.status, 201);
    assert_eq!(api.call("POST", VOLUMES, JSON, &volume("local-1")).await.status, 201);
    // Untouched until a binder asks.
    assert!(
        api.get("v1", "PersistentVolumeClaim", "ml", "static").unwrap()["spec"].get("volumeName").is_none()
    );
    let uid = api.get("v1", "PersistentVolumeClaim", "ml", "static").unwrap()["metadata"]["uid"].clone();
    let bind = json!({"spec": {"claimRef": {"namespace": "ml", "name": "static", "uid": uid}}});
    assert_eq!(api.call("PATCH", &format!("{VOLUMES}/local-1"), MERGE, &bind).await.status, 200);
    let c = api.get("v1", "PersistentVolumeClaim", "ml", "static").unwrap();
    assert_eq!(c["spec"]["volumeName"], "local-1");
    assert_eq!(c["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"], "yes");
    assert_eq!(api.get("v1", "PersistentVolume", "", "local-1").unwrap()["status"]["phase"], "Bound");
    let ask = json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n7"}}});
    assert_eq!(api.call("PATCH", &format!("{CLAIMS}/dynamic"), MERGE, &ask).await.status, 200);
    let c = api.get("v1", "PersistentVolumeClaim", "ml", "dynamic").unwrap();
    let pv = c["spec"]["volumeName"].as_str().expect("provisioned and bound").to_string();
    let made = api.get("v1", "PersistentVolume", "", &pv).unwrap();
    assert_eq!(
        made["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0],
        "n7"
    );
    assert_eq!(made["spec"]["claimRef"]["name"], "dynamic");
    // A class that provisions nothing leaves the claim waiting.
    api.put(json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "manual"},
                   "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}));
    let mut manual = claim("manual");
    manual["spec"]["storageClassName"] = json!("manual");
    manual["metadata"]["annotations"] = json!({"volume.kubernetes.io/selected-node": "n7"});
    assert_eq!(api.call("POST", CLAIMS, JSON, &manual).await.status, 201);
    assert!(
        api.get("v1", "PersistentVolumeClaim", "ml", "manual").unwrap()["spec"].get("volumeName").is_none()
    );
}
