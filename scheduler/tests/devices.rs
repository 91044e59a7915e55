//! gang-scheduler allocates a gang's DRA claims before any of its pods is bound, against the
//! strict fake (which refuses what kube-apiserver refuses of a ResourceClaim's status): the
//! claim's delete-protection finalizer, then its allocation and the pod in `reservedFor` through
//! `/status`, each write with the version it was computed from; the pods only once every claim is
//! allocated and reserved for them. A write refused is retried; a restart part-way finishes from
//! what the cluster shows; a gang that cannot be completed gives back what was allocated for it.

#[path = "support/run.rs"]
mod support;
use support::start;

use std::collections::BTreeSet;
use std::time::Duration;

use kube_gang_tests::{FakeApi, Recorded, gang, gang_pod, node};
use serde_json::{Value, json};

const V1: &str = "/apis/resource.k8s.io/v1";
const FINALIZER: &str = "resource.kubernetes.io/delete-protection";

async fn fake() -> FakeApi {
    FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        (V1, "resourceclaims"),
        (V1, "resourceslices"),
        (V1, "deviceclasses"),
    ])
    .await
}

fn class() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
           "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
                    "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "none"}}}]}})
}

/// Node `name`'s slice of `gpus` GPUs.
fn slice(name: &str, gpus: usize) -> Value {
    let devices: Vec<Value> = (0..gpus)
        .map(|i| {
            json!({"name": format!("gpu-{i}"), "attributes": {"uuid": {"string": format!("{name}-gpu-{i}")}},
                        "capacity": {"memory": {"value": "80Gi"}}})
        })
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": format!("{name}-gpus")},
           "spec": {"driver": "gpu.example.com", "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "nodeName": name, "devices": devices}})
}

/// Member `i` of gang `g`, asking for ResourceClaim `{g}-{i}-gpu` (no `nvidia.com/gpu`).
fn member(g: &str, i: usize) -> Value {
    let mut p = gang_pod("ml", &format!("{g}-{i}"), g, 0);
    p["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "1"}});
    p["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": format!("{g}-{i}-gpu")}]);
    p
}

fn claim(name: &str, count: u32) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
           "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
           "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": count,
                    "selectors": [{"cel": {"expression": "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"}}]}}]}}})
}

fn bound(fake: &FakeApi, name: &str) -> Option<String> {
    fake.get("v1", "Pod", "ml", name)?.pointer("/spec/nodeName").and_then(Value::as_str).map(String::from)
}

fn get_claim(fake: &FakeApi, name: &str) -> Value {
    fake.get("resource.k8s.io/v1", "ResourceClaim", "ml", name).unwrap()
}

/// Every device is allocated to one claim at most.
fn devices_once(fake: &FakeApi, claims: &[&str]) {
    let mut seen = BTreeSet::new();
    for c in claims {
        let claim = get_claim(fake, c);
        for r in claim
            .pointer("/status/allocation/devices/results")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = format!("{}/{}/{}", r["driver"], r["pool"], r["device"]);
            assert!(seen.insert(id.clone()), "device {id} allocated twice");
        }
    }
}

fn claim_status_writes(requests: &[Recorded]) -> Vec<usize> {
    (0..requests.len())
        .filter(|&i| requests[i].path.contains("/resourceclaims/") && requests[i].path.ends_with("/status"))
        .collect()
}

#[tokio::test]
async fn a_gangs_claims_are_allocated_and_reserved_before_any_member_is_bound() {
    let fake = fake().await;
    for n in ["n1", "n2"] {
        fake.put(node(n, "8", 0, &[("kubernetes.io/hostname", n)]));
        fake.put(slice(n, 2));
    }
    fake.put(class());
    fake.put(gang("ml", "train", 2));
    for i in 0..2 {
        fake.put(claim(&format!("train-{i}-gpu"), 2));
        fake.put(member("train", i));
    }
    // A first status write refused (another writer got there first): retried.
    fake.fault("PATCH", "/resourceclaims/train-0-gpu/status", 409, 1);
    let (stop, handle) = start(&fake);
    let done = fake
        .wait_for(Duration::from_secs(20), |f| bound(f, "train-0").is_some() && bound(f, "train-1").is_some())
        .await;
    assert!(
        done,
        "claim: {:#} pod: {:#}",
        get_claim(&fake, "train-0-gpu"),
        fake.get("v1", "Pod", "ml", "train-0").unwrap()
    );
    let mut nodes = BTreeSet::new();
    for i in 0..2 {
        let node = bound(&fake, &format!("train-{i}")).unwrap();
        nodes.insert(node.clone());
        let c = get_claim(&fake, &format!("train-{i}-gpu"));
        assert_eq!(c["metadata"]["finalizers"], json!([FINALIZER]));
        let results = c["status"]["allocation"]["devices"]["results"].as_array().unwrap();
        assert_eq!(results.len(), 2);
        assert!(results.iter().all(|r| r["pool"] == json!(node) && r["driver"] == "gpu.example.com"));
        assert_eq!(
            c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"],
            json!([node])
        );
        assert_eq!(c["status"]["allocation"]["devices"]["config"][0]["source"], "FromClass");
        assert_eq!(
            c["status"]["reservedFor"],
            json!([{"resource": "pods", "name": format!("train-{i}"), "uid": format!("uid-train-{i}")}])
        );
    }
    assert_eq!(nodes.len(), 2, "two GPUs a node: one member each");
    devices_once(&fake, &["train-0-gpu", "train-1-gpu"]);
    // Every claim was allocated and reserved before the first member was bound.
    let requests = fake.requests();
    let first_binding =
        requests.iter().position(|r| r.method == "POST" && r.path.ends_with("/binding")).unwrap();
    let made: Vec<usize> =
        claim_status_writes(&requests).into_iter().filter(|&i| requests[i].status == 200).collect();
    assert_eq!(made.len(), 2, "one status write made per claim: {requests:#?}");
    assert!(made.iter().all(|&i| i < first_binding));
    assert!(
        claim_status_writes(&requests).iter().any(|&i| requests[i].status == 409),
        "the refused write was answered 409"
    );
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_restart_part_way_finishes_from_what_the_cluster_shows() {
    let fake = fake().await;
    for n in ["n1", "n2", "n3"] {
        fake.put(node(n, "8", 0, &[("kubernetes.io/hostname", n)]));
        fake.put(slice(n, 1));
    }
    fake.put(class());
    fake.put(gang("ml", "train", 3));
    for i in 0..3 {
        fake.put(claim(&format!("train-{i}-gpu"), 1));
        fake.put(member("train", i));
    }
    // The last claim's status cannot be written (the API server fails it): the process is
    // stopped with two of the three claims allocated and reserved.
    fake.fault("PATCH", "/resourceclaims/train-2-gpu/status", 500, 1_000_000);
    let (stop, handle) = start(&fake);
    let some = fake
        .wait_for(Duration::from_secs(20), |f| {
            (0..2).all(|i| get_claim(f, &format!("train-{i}-gpu")).pointer("/status/allocation").is_some())
        })
        .await;
    assert!(some, "requests: {:#?}", fake.requests());
    // A few more cycles: still nothing bound, the two claims kept.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    handle.await.unwrap();
    assert!(
        (0..3).all(|i| bound(&fake, &format!("train-{i}")).is_none()),
        "nothing bound before every claim is"
    );
    assert!(
        (0..2).all(|i| get_claim(&fake, &format!("train-{i}-gpu")).pointer("/status/allocation").is_some())
    );
    assert!(get_claim(&fake, "train-2-gpu").pointer("/status/allocation").is_none());
    fake.clear_faults();
    // A new process: it reads the allocations made and finishes the gang, allocating nothing twice.
    let (stop, handle) = start(&fake);
    let done = fake
        .wait_for(Duration::from_secs(20), |f| (0..3).all(|i| bound(f, &format!("train-{i}")).is_some()))
        .await;
    assert!(done, "requests: {:#?}", fake.requests());
    devices_once(&fake, &["train-0-gpu", "train-1-gpu", "train-2-gpu"]);
    for i in 0..3 {
        let c = get_claim(&fake, &format!("train-{i}-gpu"));
        assert_eq!(
            c["status"]["allocation"]["devices"]["results"][0]["pool"],
            json!(bound(&fake, &format!("train-{i}")).unwrap())
        );
        assert_eq!(c["status"]["reservedFor"][0]["uid"], format!("uid-train-{i}"));
    }
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_gang_that_cannot_be_completed_gives_back_the_devices_allocated_for_it() {
    let fake = fake().await;
    for n in ["n1", "n2"] {
        fake.put(node(n, "8", 0, &[("kubernetes.io/hostname", n)]));
        fake.put(slice(n, 1));
    }
    fake.put(class());
    fake.put(gang("ml", "train", 2));
    // The first member's claim was allocated and reserved for it (an earlier write); the second
    // member's devices went to another claim since.
    let mut first = claim("train-0-gpu", 1);
    first["metadata"]["finalizers"] = json!([FINALIZER]);
    first["status"] = json!({"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]},
                                          "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
                             "reservedFor": [{"resource": "pods", "name": "train-0", "uid": "uid-train-0"}]});
    fake.put(first);
    let mut other = claim("thief", 1);
    other["status"] = json!({"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n2", "device": "gpu-0"}]}}});
    fake.put(other);
    fake.put(claim("train-1-gpu", 1));
    for i in 0..2 {
        fake.put(member("train", i));
    }
    let (stop, handle) = start(&fake);
    let released = fake
        .wait_for(Duration::from_secs(20), |f| {
            get_claim(f, "train-0-gpu").pointer("/status/allocation").is_none()
        })
        .await;
    assert!(released, "requests: {:#?}", fake.requests());
    let c = get_claim(&fake, "train-0-gpu");
    assert!(
        c.pointer("/status/reservedFor").is_none_or(|r| r.as_array().is_some_and(Vec::is_empty)),
        "{c:#}"
    );
    assert!((0..2).all(|i| bound(&fake, &format!("train-{i}")).is_none()));
    assert!(
        get_claim(&fake, "train-1-gpu").pointer("/status/allocation").is_none(),
        "nothing allocated for the rest"
    );
    // The other claim lets go of its device: the gang is allocated and placed whole.
    let mut freed = get_claim(&fake, "thief");
    freed["status"] = json!({});
    fake.put(freed);
    let done = fake
        .wait_for(Duration::from_secs(20), |f| (0..2).all(|i| bound(f, &format!("train-{i}")).is_some()))
        .await;
    assert!(done, "requests: {:#?}", fake.requests());
    devices_once(&fake, &["train-0-gpu", "train-1-gpu"]);
    stop.cancel();
    handle.await.unwrap();
}

/// kubernetes#138765 through the API: one pool of node n1 in the 1.35 shape (a slice with only
/// the counter set, a slice of devices drawing on it: `whole` takes both widgets, each half one),
/// two members each claiming `firstAvailable` [whole, half]. The first member's greedy choice
/// (whole) would starve the second; the gang is allocated a half each, both claims written before
/// either member is bound, the counter never over-committed.
#[tokio::test]
async fn a_gang_on_a_partitionable_device_gets_the_halves_that_serve_every_member() {
    let fake = fake().await;
    fake.put(node("n1", "8", 0, &[("kubernetes.io/hostname", "n1")]));
    fake.put(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "widget.example.com"},
                    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'widget.example.com'"}}]}}));
    let pool = json!({"name": "n1", "generation": 1, "resourceSliceCount": 2});
    fake.put(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-counters"},
                    "spec": {"driver": "widget.example.com", "pool": pool, "nodeName": "n1",
                             "sharedCounters": [{"name": "widgets", "counters": {"widgets": {"value": "2"}}}]}}));
    let part = |name: &str, size: &str, widgets: &str| {
        json!({"name": name, "attributes": {"size": {"string": size}},
               "consumesCounters": [{"counterSet": "widgets", "counters": {"widgets": {"value": widgets}}}]})
    };
    fake.put(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-devices"},
                    "spec": {"driver": "widget.example.com", "pool": pool, "nodeName": "n1",
                             "devices": [part("whole", "whole", "2"), part("half-1", "half", "1"), part("half-2", "half", "1")]}}));
    fake.put(gang("ml", "pair", 2));
    let size = |s: &str| json!([{"cel": {"expression": format!("device.attributes['widget.example.com'].size == '{s}'")}}]);
    for i in 0..2 {
        fake.put(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": format!("pair-{i}-gpu"), "namespace": "ml", "uid": format!("uid-pair-{i}-gpu")},
            "spec": {"devices": {"requests": [{"name": "widget", "firstAvailable": [
                {"name": "whole", "deviceClassName": "widget.example.com", "selectors": size("whole")},
                {"name": "half", "deviceClassName": "widget.example.com", "selectors": size("half")}]}]}}}));
        fake.put(member("pair", i));
    }
    let (stop, handle) = start(&fake);
    let done = fake
        .wait_for(Duration::from_secs(20), |f| bound(f, "pair-0").is_some() && bound(f, "pair-1").is_some())
        .await;
    assert!(done, "claim: {:#}", get_claim(&fake, "pair-0-gpu"));
    let mut devices = BTreeSet::new();
    for i in 0..2 {
        let c = get_claim(&fake, &format!("pair-{i}-gpu"));
        let results = c["status"]["allocation"]["devices"]["results"].as_array().unwrap();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0]["request"], "widget/half", "{c:#}");
        devices.insert(results[0]["device"].as_str().unwrap().to_string());
    }
    assert_eq!(devices, BTreeSet::from(["half-1".to_string(), "half-2".to_string()]));
    let requests = fake.requests();
    let first_binding =
        requests.iter().position(|r| r.method == "POST" && r.path.ends_with("/binding")).unwrap();
    assert!(claim_status_writes(&requests).iter().all(|&i| i < first_binding));
    stop.cancel();
    handle.await.unwrap();
}
