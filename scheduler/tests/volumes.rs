//! gang-scheduler binds a gang's claims before any of its pods, against the strict fake: a static
//! PV's `claimRef` then the claim's `volumeName`, or the claim's selected node for its
//! provisioner; the pods only once every claim is bound (the fake's PV controller and
//! provisioner finish them); a write refused or lost is retried, and no member is bound meanwhile.

#[path = "support/run.rs"]
mod support;
use support::start;

use std::time::Duration;

use kube_gang_tests::{FakeApi, Recorded, gang, gang_pod, node};
use serde_json::{Value, json};

async fn fake() -> FakeApi {
    FakeApi::start(&[("/apis/kube-gang.io/v1alpha1", "gangs")]).await
}

fn labelled_node(name: &str, zone: &str) -> Value {
    let mut n =
        node(name, "64", 8, &[("kubernetes.io/hostname", name), ("topology.kubernetes.io/zone", zone)]);
    n["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
    n
}

/// Member `i` of gang `g`, with claim `{g}-data-{i}`.
fn member(g: &str, i: usize) -> Value {
    let mut p = gang_pod("ml", &format!("{g}-{i}"), g, 1);
    p["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": format!("{g}-data-{i}")}}]);
    p
}

fn claim(name: &str, class: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
           "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
           "status": {"phase": "Pending"}})
}

fn class(name: &str, provisioner: &str, zones: &[&str]) -> Value {
    let mut c = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                       "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"});
    if !zones.is_empty() {
        c["allowedTopologies"] =
            json!([{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": zones}]}]);
    }
    c
}

fn local_pv(name: &str, on: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
           "spec": {"storageClassName": "local", "capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"],
                    "local": {"path": "/mnt/disk"},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [on]}]}]}}},
           "status": {"phase": "Available"}})
}

fn bound(fake: &FakeApi, name: &str) -> Option<String> {
    fake.get("v1", "Pod", "ml", name)?.pointer("/spec/nodeName").and_then(Value::as_str).map(String::from)
}

/// Index of the first request matching `f` among `requests`.
fn first(requests: &[Recorded], f: impl Fn(&Recorded) -> bool) -> Option<usize> {
    requests.iter().position(f)
}

#[tokio::test]
async fn static_pvs_are_bound_before_any_member_and_each_once() {
    let fake = fake().await;
    fake.run_pv_controller();
    for n in ["n1", "n2", "n3"] {
        fake.put(labelled_node(n, "a"));
    }
    fake.put(class("local", "kubernetes.io/no-provisioner", &[]));
    fake.put(local_pv("local-n2", "n2"));
    fake.put(local_pv("local-n3", "n3"));
    fake.put(gang("ml", "train", 2));
    for i in 0..2 {
        fake.put(claim(&format!("train-data-{i}"), "local"));
        fake.put(member("train", i));
    }
    let (stop, handle) = start(&fake);
    let done = fake
        .wait_for(Duration::from_secs(15), |f| bound(f, "train-0").is_some() && bound(f, "train-1").is_some())
        .await;
    assert!(done, "requests: {:#?}", fake.requests());
    let mut nodes = [bound(&fake, "train-0").unwrap(), bound(&fake, "train-1").unwrap()];
    nodes.sort();
    assert_eq!(nodes, ["n2", "n3"], "each member on its claim's PV's node");
    for i in 0..2 {
        let c = fake.get("v1", "PersistentVolumeClaim", "ml", &format!("train-data-{i}")).unwrap();
        let pv = c["spec"]["volumeName"].as_str().unwrap().to_string();
        assert_eq!(format!("local-{}", bound(&fake, &format!("train-{i}")).unwrap()), pv);
        let v = fake.get("v1", "PersistentVolume", "", &pv).unwrap();
        assert_eq!(v["spec"]["claimRef"]["uid"], format!("uid-train-data-{i}"));
        assert_eq!(v["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"], "yes");
    }
    // Every claim was bound (PV claimRef first, then the claim) before the first member.
    let requests = fake.requests();
    let first_binding = first(&requests, |r| r.method == "POST" && r.path.ends_with("/binding")).unwrap();
    let pv_writes: Vec<usize> = (0..requests.len())
        .filter(|&i| {
            requests[i].method == "PATCH" && requests[i].path.starts_with("/api/v1/persistentvolumes/")
        })
        .collect();
    assert_eq!(pv_writes.len(), 2, "one claimRef per PV, never sent twice: {requests:#?}");
    assert!(pv_writes.iter().all(|&i| i < first_binding));
    for i in 0..2 {
        let claim_write = first(&requests, |r| {
            r.method == "PATCH" && r.path.ends_with(&format!("/persistentvolumeclaims/train-data-{i}"))
        });
        assert!(claim_write.is_some_and(|c| c < first_binding && pv_writes.iter().any(|&p| p < c)));
    }
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn provisioning_is_asked_for_the_chosen_nodes_and_members_follow_their_volumes() {
    let fake = fake().await;
    fake.run_pv_controller();
    fake.put(labelled_node("a1", "a"));
    fake.put(labelled_node("b1", "b"));
    fake.put(labelled_node("b2", "b"));
    fake.put(class("zonal", "ebs.csi.aws.com", &["b"]));
    fake.put(gang("ml", "train", 2));
    for i in 0..2 {
        fake.put(claim(&format!("train-data-{i}"), "zonal"));
        fake.put(member("train", i));
    }
    let (stop, handle) = start(&fake);
    let done = fake
        .wait_for(Duration::from_secs(15), |f| bound(f, "train-0").is_some() && bound(f, "train-1").is_some())
        .await;
    assert!(done, "requests: {:#?}", fake.requests());
    for i in 0..2 {
        let node = bound(&fake, &format!("train-{i}")).unwrap();
        assert!(node.starts_with('b'), "zone b only: {node}");
        let c = fake.get("v1", "PersistentVolumeClaim", "ml", &format!("train-data-{i}")).unwrap();
        assert_eq!(c["metadata"]["annotations"]["volume.kubernetes.io/selected-node"], json!(node));
        let pv = fake.get("v1", "PersistentVolume", "", c["spec"]["volumeName"].as_str().unwrap()).unwrap();
        assert_eq!(
            pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
                [0],
            json!(node)
        );
    }
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_gang_whose_claims_are_not_bound_yet_is_never_half_bound_and_says_why() {
    let fake = fake().await;
    // No PV controller: the claims are asked for nodes, and stay unbound.
    fake.put(labelled_node("n1", "a"));
    fake.put(labelled_node("n2", "a"));
    fake.put(class("fast", "csi.example.com", &[]));
    fake.put(gang("ml", "train", 2));
    fake.put(claim("train-data-0", "fast"));
    fake.put(member("train", 0));
    // The second member has no volume: it is withheld with the first all the same.
    fake.put(gang_pod("ml", "train-1", "train", 1));
    // A refused first write is retried.
    fake.fault("PATCH", "/persistentvolumeclaims/train-data-0", 409, 1);
    let (stop, handle) = start(&fake);
    let asked = fake
        .wait_for(Duration::from_secs(15), |f| {
            f.get("v1", "PersistentVolumeClaim", "ml", "train-data-0")
                .and_then(|c| c.pointer("/metadata/annotations/volume.kubernetes.io~1selected-node").cloned())
                .is_some()
        })
        .await;
    assert!(asked, "requests: {:#?}", fake.requests());
    // Once asked, the members say they wait for the provisioner.
    let waiting = fake
        .wait_for(Duration::from_secs(10), |f| {
            f.get("v1", "Pod", "ml", "train-1").is_some_and(|p| {
                p.pointer("/status/conditions/0/reason").and_then(Value::as_str)
                    == Some("GangWaitingForVolumes")
                    && p.pointer("/status/conditions/0/message")
                        .and_then(Value::as_str)
                        .is_some_and(|m| m.contains("PVC ml/train-data-0 being provisioned for node"))
            })
        })
        .await;
    assert!(waiting, "{:#?}", fake.get("v1", "Pod", "ml", "train-1"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(fake.requests_to("POST", "/binding").is_empty(), "no member bound while a claim is not");
    let writes = fake.requests_to("PATCH", "/persistentvolumeclaims/train-data-0");
    assert_eq!(writes.iter().filter(|r| r.status == 200).count(), 1, "asked once, then waits: {writes:#?}");
    // The provisioner finishes: the whole gang is bound, on the node asked.
    fake.run_pv_controller();
    let done = fake
        .wait_for(Duration::from_secs(15), |f| bound(f, "train-0").is_some() && bound(f, "train-1").is_some())
        .await;
    assert!(done, "requests: {:#?}", fake.requests());
    let c = fake.get("v1", "PersistentVolumeClaim", "ml", "train-data-0").unwrap();
    assert_eq!(
        c["metadata"]["annotations"]["volume.kubernetes.io/selected-node"].as_str(),
        bound(&fake, "train-0").as_deref()
    );
    stop.cancel();
    handle.await.unwrap();
}
