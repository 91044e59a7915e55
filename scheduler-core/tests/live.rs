//! `Live` (a snapshot patched object by object) always equals `Cluster::snapshot` (assembled in
//! one pass) of the same objects: after any sequence of adds, updates and deletes of nodes, pods,
//! priority classes, gang objects of several dialects and what the volume filters read (PVCs, PVs,
//! StorageClasses, CSINodes, ResourceClaims at two versions), broken ones included. So does a
//! `Cluster` holding the same objects as compact JSON (what the CLI holds).

use proptest::prelude::*;
use scheduler_core::cluster::{ApiKind, Cluster, GANG, Live, NODE, Overlay, POD, Problem, READ};
use scheduler_core::model::{GangState, Persisted, PodKey, Reservation, Snapshot, Time, Usage};
use scheduler_core::object::ObjectRef;
use serde_json::{Value, json};

/// A snapshot and its problems in a canonical order (`Live` keeps nodes and pods in no
/// particular order; the cycle does not depend on it). The carried usage must be current for the
/// pods in their own order (its open pods are held by index); it is recomputed for the new order.
fn canonical(mut snapshot: Snapshot, problems: Vec<Problem>) -> (Snapshot, Vec<String>) {
    let carried = snapshot.usage.take();
    assert!(carried.as_ref().is_some(), "the snapshot carries its usage");
    assert_eq!(carried, Some(Usage::of(&snapshot.pods)), "the carried usage is current");
    snapshot.nodes.sort_by(|a, b| a.name.cmp(&b.name));
    snapshot.pods.sort_by(|a, b| a.key.cmp(&b.key));
    snapshot.usage = Some(Usage::of(&snapshot.pods));
    let mut problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
    problems.sort();
    (snapshot, problems)
}

fn same(cluster: &Cluster, live: &mut Live) -> Result<(), TestCaseError> {
    live.refresh();
    let fresh = cluster.snapshot();
    prop_assert_eq!(
        canonical(live.snapshot().clone(), live.problems()),
        canonical(fresh.snapshot, fresh.problems)
    );
    Ok(())
}

fn node(name: &str, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
           "status": {"allocatable": {"cpu": cpu, "pods": "10"}}})
}

/// A pod of namespace `ml`. `gang`: 0 none, 1 label `kube-gang.io/gang: g1`, 2 label `g2`,
/// 3 Volcano's annotation for `pg`, 4 both a kube-gang label and Volcano's annotation (two claims).
fn pod(name: &str, cpu: &str, gang: u8, min: Option<&str>, bound: Option<&str>, class: bool) -> Value {
    pod_with(name, cpu, gang, min, bound, class, 0)
}

/// [`pod`] with volumes: 0 none, 1 PVC `c0`, 2 PVC `c1` and an ephemeral volume, 3 a GCE disk
/// and a DRA claim from a template (named in its status), 4 a volume of the wrong type.
fn pod_with(
    name: &str,
    cpu: &str,
    gang: u8,
    min: Option<&str>,
    bound: Option<&str>,
    class: bool,
    volumes: u8,
) -> Value {
    let mut labels = serde_json::Map::new();
    let mut annotations = serde_json::Map::new();
    match gang {
        1 => {
            labels.insert("kube-gang.io/gang".into(), json!("g1"));
        }
        2 => {
            labels.insert("kube-gang.io/gang".into(), json!("g2"));
        }
        3 => {
            annotations.insert("scheduling.k8s.io/group-name".into(), json!("pg"));
        }
        4 => {
            labels.insert("kube-gang.io/gang".into(), json!("g1"));
            annotations.insert("scheduling.k8s.io/group-name".into(), json!("pg"));
        }
        _ => {}
    }
    if let Some(m) = min {
        annotations.insert("kube-gang.io/min-member".into(), json!(m));
    }
    let mut spec = json!({"schedulerName": "gang-scheduler",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]});
    // Some pods keep others off their node, or bind a host port: what the usage indexes.
    match name {
        "p0" | "p3" => {
            spec["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"kube-gang.io/gang": "g1"}}},
                {"topologyKey": "zone", "namespaceSelector": {}, "labelSelector": {}}]}});
        }
        "p1" => spec["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 80}]),
        _ => {}
    }
    if let Some(n) = bound {
        spec["nodeName"] = json!(n);
    }
    if class {
        spec["priorityClassName"] = json!("high");
    }
    let mut status = json!({"phase": if bound.is_some() { "Running" } else { "Pending" }});
    match volumes {
        1 => spec["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "c0"}}]),
        2 => {
            spec["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "c1"}},
                                     {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}])
        }
        3 => {
            spec["volumes"] = json!([{"name": "pd", "gcePersistentDisk": {"pdName": "disk-1"}}]);
            spec["resourceClaims"] = json!([{"name": "gpu", "resourceClaimTemplateName": "t"}]);
            status["resourceClaimStatuses"] = json!([{"name": "gpu", "resourceClaimName": "rc0"}]);
        }
        4 => spec["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": 7}}]),
        _ => {}
    }
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "ml", "labels": labels, "annotations": annotations,
                        "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": spec, "status": status})
}

/// A PVC `c{i}`: 0 unbound of class `fast`, 1 bound to `v{i}`, 2 ReadWriteOncePod and selected
/// for `n0`, 3 unreadable (a storage request that is not a quantity).
fn pvc(i: u8, variant: u8) -> Value {
    let mut c = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": format!("c{i}"), "namespace": "ml", "uid": format!("cu{i}")},
        "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    match variant {
        1 => {
            c["spec"]["volumeName"] = json!(format!("v{i}"));
            c["metadata"]["annotations"] = json!({"pv.kubernetes.io/bind-completed": "yes"});
        }
        2 => {
            c["spec"]["accessModes"] = json!(["ReadWriteOncePod"]);
            c["metadata"]["annotations"] = json!({"volume.kubernetes.io/selected-node": "n0"});
        }
        3 => c["spec"]["resources"]["requests"]["storage"] = json!("lots"),
        _ => {}
    }
    c
}

/// A PV `v{i}`: 0 local on node `n{i}`, 1 CSI and claimed by `c{i}`, 2 unreadable (an unknown
/// node affinity operator).
fn pv(i: u8, variant: u8) -> Value {
    let mut v = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": format!("v{i}")},
        "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "2Gi"}},
        "status": {"phase": "Available"}});
    let op = if variant == 2 { "Near" } else { "In" };
    match variant {
        1 => {
            v["spec"]["csi"] = json!({"driver": "d.example.com", "volumeHandle": format!("h{i}")});
            v["spec"]["claimRef"] = json!({"namespace": "ml", "name": format!("c{i}")});
        }
        _ => {
            v["spec"]["local"] = json!({"path": "/mnt"});
            v["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": op, "values": [format!("n{i}")]}]}]}});
        }
    }
    v
}

/// StorageClass `fast`: 0 WaitForFirstConsumer with allowed topologies, 1 Immediate, 2 unreadable.
fn storage_class(variant: u8) -> Value {
    let mode = ["WaitForFirstConsumer", "Immediate", "Eventually"][usize::from(variant % 3)];
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
           "provisioner": "d.example.com", "volumeBindingMode": mode,
           "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]})
}

fn csi_node(n: u8, count: i64) -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": format!("n{n}")},
           "spec": {"drivers": [{"name": "d.example.com", "nodeID": "x", "allocatable": {"count": count}}]}})
}

/// ResourceClaim `rc{i}` at `resource.k8s.io/{version}`, allocated to `n0` or not.
fn resource_claim(i: u8, version: &str, allocated: bool) -> Value {
    let mut c = json!({"apiVersion": format!("resource.k8s.io/{version}"), "kind": "ResourceClaim",
        "metadata": {"name": format!("rc{i}"), "namespace": "ml"}, "spec": {}});
    if allocated {
        c["status"] = json!({"allocation": {"nodeSelector": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0"]}]}]}}});
    }
    c
}

fn kube_gang(name: &str, min: i64) -> Value {
    json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
           "metadata": {"name": name, "namespace": "ml"}, "spec": {"minMember": min}})
}

fn volcano(min: i64) -> Value {
    json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
           "metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": min, "priorityClassName": "high"}})
}

fn class(value: i64) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": value})
}

#[derive(Clone, Debug)]
enum Op {
    Node(u8, &'static str),
    Pod(u8, &'static str, u8, Option<&'static str>, Option<u8>, bool, u8),
    Gang(u8, i64),
    Volcano(i64),
    Class(i64),
    DeleteNode(u8),
    DeletePod(u8),
    DeleteGang(u8),
    DeleteVolcano,
    DeleteClass,
    /// A PodDisruptionBudget over gang `g`'s pods allowing `n` disruptions (`-1`: a bad selector).
    Budget(u8, i32),
    DeleteBudget(u8),
    /// Namespace `ml` with label `team` set to this (none when `None`).
    Namespace(Option<&'static str>),
    DeleteNamespace,
    Pvc(u8, u8),
    DeletePvc(u8),
    Pv(u8, u8),
    DeletePv(u8),
    StorageClass(u8),
    DeleteStorageClass,
    CsiNode(u8, i64),
    DeleteCsiNode(u8),
    /// A ResourceClaim at `resource.k8s.io/v1` (`true`) or `v1beta1`, allocated or not.
    ResourceClaim(u8, bool, bool),
    DeleteResourceClaim(u8, bool),
}

fn op() -> impl Strategy<Value = Op> {
    let cpu = prop_oneof![Just("1"), Just("2"), Just("500m"), Just("lots")];
    let min = prop::option::of(prop_oneof![Just("1"), Just("2"), Just("3"), Just("zero")]);
    prop_oneof![
        (0u8..3, cpu.clone()).prop_map(|(n, c)| Op::Node(n, c)),
        (0u8..6, cpu, 0u8..5, min, prop::option::of(0u8..3), any::<bool>(), 0u8..5)
            .prop_map(|(p, c, g, m, b, k, v)| Op::Pod(p, c, g, m, b, k, v)),
        (1u8..3, -1i64..4).prop_map(|(g, m)| Op::Gang(g, m)),
        (0i64..4).prop_map(Op::Volcano),
        (-5i64..5).prop_map(Op::Class),
        (0u8..3).prop_map(Op::DeleteNode),
        (0u8..6).prop_map(Op::DeletePod),
        (1u8..3).prop_map(Op::DeleteGang),
        Just(Op::DeleteVolcano),
        Just(Op::DeleteClass),
        (0u8..2, -1i32..3).prop_map(|(b, n)| Op::Budget(b, n)),
        (0u8..2).prop_map(Op::DeleteBudget),
        prop::option::of(prop_oneof![Just("a"), Just("b")]).prop_map(Op::Namespace),
        Just(Op::DeleteNamespace),
        (0u8..2, 0u8..4).prop_map(|(i, v)| Op::Pvc(i, v)),
        (0u8..2).prop_map(Op::DeletePvc),
        (0u8..2, 0u8..3).prop_map(|(i, v)| Op::Pv(i, v)),
        (0u8..2).prop_map(Op::DeletePv),
        (0u8..3).prop_map(Op::StorageClass),
        Just(Op::DeleteStorageClass),
        (0u8..3, -1i64..3).prop_map(|(n, c)| Op::CsiNode(n, c)),
        (0u8..3).prop_map(Op::DeleteCsiNode),
        (0u8..2, any::<bool>(), any::<bool>()).prop_map(|(i, v1, a)| Op::ResourceClaim(i, v1, a)),
        (0u8..2, any::<bool>()).prop_map(|(i, v1)| Op::DeleteResourceClaim(i, v1)),
    ]
}

fn rc_version(v1: bool) -> &'static str {
    if v1 { "resource.k8s.io/v1" } else { "resource.k8s.io/v1beta1" }
}

/// Whether objects of `kind` are cluster-scoped.
fn cluster_scoped(kind: &str) -> bool {
    matches!(kind, "Node" | "PriorityClass" | "Namespace" | "PersistentVolume" | "StorageClass" | "CSINode")
}

/// The object an op writes, or the (apiVersion, kind, name) it deletes.
fn act(op: &Op) -> Result<Value, (&'static str, &'static str, String)> {
    match op {
        Op::Node(n, cpu) => Ok(node(&format!("n{n}"), cpu)),
        Op::Pod(p, cpu, gang, min, bound, k, v) => {
            let on = bound.map(|n| format!("n{n}"));
            Ok(pod_with(&format!("p{p}"), cpu, *gang, *min, on.as_deref(), *k, *v))
        }
        Op::Gang(g, min) => Ok(kube_gang(&format!("g{g}"), *min)),
        Op::Volcano(min) => Ok(volcano(*min)),
        Op::Class(v) => Ok(class(*v)),
        Op::DeleteNode(n) => Err(("v1", "Node", format!("n{n}"))),
        Op::DeletePod(p) => Err(("v1", "Pod", format!("p{p}"))),
        Op::DeleteGang(g) => Err(("kube-gang.io/v1alpha1", "Gang", format!("g{g}"))),
        Op::DeleteVolcano => Err(("scheduling.volcano.sh/v1beta1", "PodGroup", "pg".into())),
        Op::DeleteClass => Err(("scheduling.k8s.io/v1", "PriorityClass", "high".into())),
        Op::Budget(b, n) => {
            let operator = if *n < 0 { "Gt" } else { "Exists" };
            Ok(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": format!("b{b}"), "namespace": "ml"},
                "spec": {"selector": {"matchExpressions": [{"key": "kube-gang.io/gang", "operator": operator}]}},
                "status": {"disruptionsAllowed": n.max(&0)}}))
        }
        Op::DeleteBudget(b) => Err(("policy/v1", "PodDisruptionBudget", format!("b{b}"))),
        Op::Namespace(team) => {
            let labels = team.map_or_else(|| json!({}), |t| json!({"team": t}));
            Ok(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": labels}}))
        }
        Op::DeleteNamespace => Err(("v1", "Namespace", "ml".into())),
        Op::Pvc(i, v) => Ok(pvc(*i, *v)),
        Op::DeletePvc(i) => Err(("v1", "PersistentVolumeClaim", format!("c{i}"))),
        Op::Pv(i, v) => Ok(pv(*i, *v)),
        Op::DeletePv(i) => Err(("v1", "PersistentVolume", format!("v{i}"))),
        Op::StorageClass(v) => Ok(storage_class(*v)),
        Op::DeleteStorageClass => Err(("storage.k8s.io/v1", "StorageClass", "fast".into())),
        Op::CsiNode(n, c) => Ok(csi_node(*n, *c)),
        Op::DeleteCsiNode(n) => Err(("storage.k8s.io/v1", "CSINode", format!("n{n}"))),
        Op::ResourceClaim(i, v1, a) => {
            Ok(resource_claim(*i, rc_version(*v1).trim_start_matches("resource.k8s.io/"), *a))
        }
        Op::DeleteResourceClaim(i, v1) => Err((rc_version(*v1), "ResourceClaim", format!("rc{i}"))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn live_equals_a_fresh_assembly_after_any_changes(ops in prop::collection::vec(op(), 1..40)) {
        let mut cluster = Cluster::new();
        let mut compact = Cluster::compact();
        let mut live = Live::new();
        for op in &ops {
            match act(op) {
                Ok(obj) => {
                    let pushed = cluster.push(obj.clone()).is_ok();
                    prop_assert_eq!(compact.push(obj.clone()).is_ok(), pushed);
                    prop_assert_eq!(live.push(obj).is_ok(), pushed);
                }
                Err((api_version, kind, name)) => {
                    let ns = if cluster_scoped(kind) { "" } else { "ml" };
                    cluster.remove_named(api_version, kind, ns, &name);
                    compact.remove_named(api_version, kind, ns, &name);
                    live.remove(api_version, kind, ns, &name);
                }
            }
            same(&cluster, &mut live)?;
            prop_assert_eq!(compact.snapshot(), cluster.snapshot());
        }
    }
}

#[test]
fn an_overlay_lasts_while_it_is_handed_in_and_survives_a_new_version_of_the_pod() {
    let mut live = Live::new();
    live.push(node("n0", "4")).unwrap();
    live.push(pod("p0", "1", 1, Some("1"), None, false)).unwrap();
    live.refresh();
    let gang = live.snapshot().gangs[0].key.clone();
    let uid = live.snapshot().pods[0].uid.clone();
    let carried = GangState { waiting_since: Some(Time::from_secs(7)), timeouts: 2, ..GangState::default() };
    let kept = Persisted { gang: gang.clone(), uid: None, state: GangState { rev: 3, ..carried.clone() } };
    let reservation = Reservation { pod: PodKey::new("ml", "p0"), node: "n0".into(), gang: gang.clone() };
    let overlay = Overlay {
        assumed: [(PodKey::new("ml", "p0"), "n0".to_string())].into(),
        // A gang of pod annotations has no object: a state carried under a uid is not its.
        carried: [(gang.clone(), ("some-uid".to_string(), carried.clone()))].into(),
        reservations: vec![reservation.clone()],
        held_back: [(PodKey::new("ml", "p0"), "example.com/refused".to_string())].into(),
        nominated: [(PodKey::new("ml", "p0"), "n0".to_string())].into(),
        kept: [(PodKey::new("ml", "p0"), (uid.clone().into(), Box::new(kept.clone())))].into(),
    };
    live.refresh_with(&overlay);
    assert_eq!(live.snapshot().pods[0].node_name.as_deref(), Some("n0"));
    assert!(live.snapshot().pods[0].gang.is_some(), "membership kept");
    assert_eq!(live.snapshot().gangs[0].state, GangState::default(), "no object, nothing carried");
    assert_eq!(live.snapshot().pods[0].persisted.as_deref(), Some(&kept), "its member keeps it");
    assert_eq!(live.snapshot().reservations, [reservation]);
    assert_eq!(live.snapshot().pods[0].scheduling_gates, ["example.com/refused"]);
    assert_eq!(live.snapshot().pods[0].nominated_node.as_deref(), Some("n0"));
    // A new version of the pod (a status update) is converted afresh; the overlay still holds.
    live.push(pod("p0", "1", 1, Some("1"), None, false)).unwrap();
    live.refresh_with(&overlay);
    assert_eq!(live.snapshot().pods[0].node_name.as_deref(), Some("n0"));
    assert_eq!(live.snapshot().pods[0].persisted.as_deref(), Some(&kept));
    assert_eq!(live.snapshot().pods[0].nominated_node.as_deref(), Some("n0"));
    // The nomination seen in the watch, the overlay drops it: the pod is as its object says.
    let mut nominated = pod("p0", "1", 1, Some("1"), None, false);
    nominated["status"]["nominatedNodeName"] = json!("n0");
    live.push(nominated.clone()).unwrap();
    live.refresh_with(&Overlay { nominated: Default::default(), ..overlay.clone() });
    assert_eq!(live.snapshot().pods[0].nominated_node.as_deref(), Some("n0"));
    live.push(pod("p0", "1", 1, Some("1"), None, false)).unwrap();
    live.refresh_with(&overlay);
    // A state written on a pod of the same name but another uid (a pod created again) is not its.
    let other = Overlay {
        kept: [(PodKey::new("ml", "p0"), ("another-uid".to_string(), Box::new(kept.clone())))].into(),
        ..overlay.clone()
    };
    live.refresh_with(&other);
    assert_eq!(live.snapshot().pods[0].persisted, None);
    // Without the overlay, the snapshot is as the objects say.
    live.refresh();
    assert_eq!(live.snapshot().pods[0].node_name, None);
    assert_eq!(live.snapshot().gangs[0].state, GangState::default());
    assert!(live.snapshot().reservations.is_empty());
    assert!(live.snapshot().pods[0].scheduling_gates.is_empty());
    assert_eq!(live.snapshot().pods[0].nominated_node, None);
    assert_eq!(live.snapshot().pods[0].gang.as_ref().map(|m| m.gang.name.as_str()), Some("g1"));
    let mut cluster = Cluster::new();
    cluster.push(node("n0", "4")).unwrap();
    cluster.push(pod("p0", "1", 1, Some("1"), None, false)).unwrap();
    same(&cluster, &mut live).unwrap();
    // Kinds the cluster view does not use are not kept.
    live.push(json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}})).unwrap();
    assert!(live.cluster().others.is_empty());
}

#[test]
fn a_list_is_assembled_whole() {
    let mut live = Live::new();
    let list = json!({"apiVersion": "v1", "kind": "List",
        "items": [node("n0", "4"), pod("p0", "1", 1, Some("2"), None, false), pod("p1", "1", 1, Some("2"), None, false)]});
    live.push(list.clone()).unwrap();
    live.refresh();
    let mut cluster = Cluster::new();
    cluster.push(list).unwrap();
    let fresh = cluster.snapshot();
    assert_eq!(
        canonical(live.snapshot().clone(), live.problems()),
        canonical(fresh.snapshot, fresh.problems)
    );
    assert_eq!(live.snapshot().gangs.len(), 1);
}

#[test]
fn thousands_of_pods_one_at_a_time_then_changed() {
    // One pod in 3 claims a gang, then one in 50 (the claiming pods are found two ways).
    for every in [3, 50] {
        thousands(every);
    }
}

fn thousands(every: usize) {
    // Enough pods, converted one at a time, that the snapshot is laid out afresh on refresh.
    let mut cluster = Cluster::new();
    let mut live = Live::new();
    let both = |obj: Value, cluster: &mut Cluster, live: &mut Live| {
        cluster.push(obj.clone()).unwrap();
        live.push(obj).unwrap();
    };
    both(node("n0", "64"), &mut cluster, &mut live);
    for i in 0..1_500 {
        let gang = if i % every == 0 { 1 } else { 0 };
        both(pod(&format!("p{i:04}"), "100m", gang, Some("2"), None, false), &mut cluster, &mut live);
    }
    same(&cluster, &mut live).unwrap();
    // Changes after the new layout still land on the right pods.
    both(pod("p0003", "2", 0, None, Some("n0"), false), &mut cluster, &mut live);
    cluster.remove_named("v1", "Pod", "ml", "p0000");
    live.remove("v1", "Pod", "ml", "p0000");
    let overlay =
        Overlay { assumed: [(PodKey::new("ml", "p0006"), "n0".to_string())].into(), ..Overlay::default() };
    live.refresh_with(&overlay);
    let p6 = live.snapshot().pods.iter().find(|p| p.key.name == "p0006").unwrap();
    assert_eq!(p6.node_name.as_deref(), Some("n0"));
    same(&cluster, &mut live).unwrap();
}

#[test]
fn a_gang_follows_its_source_pods_annotations() {
    let mut cluster = Cluster::new();
    let mut live = Live::new();
    for min in ["2", "3"] {
        let p = pod("p0", "1", 1, Some(min), None, false);
        cluster.push(p.clone()).unwrap();
        live.push(p).unwrap();
        same(&cluster, &mut live).unwrap();
    }
    assert_eq!(live.snapshot().gangs[0].min_member, 3);
}

/// The kinds the ops write, as a watch lists them (indices into `READ`): nodes, pods,
/// namespaces, priority classes, budgets, what the volume filters read, Gangs, Volcano PodGroups.
/// (ResourceClaims are listed at one version: a cluster serving two lists every claim at both,
/// which the ops' writes at either version are not.)
fn kinds() -> Vec<usize> {
    let wanted: [(&str, &str, &str); 12] = [
        ("", "v1", "Node"),
        ("", "v1", "Pod"),
        ("", "v1", "Namespace"),
        ("scheduling.k8s.io", "v1", "PriorityClass"),
        ("policy", "v1", "PodDisruptionBudget"),
        ("", "v1", "PersistentVolumeClaim"),
        ("", "v1", "PersistentVolume"),
        ("storage.k8s.io", "v1", "StorageClass"),
        ("storage.k8s.io", "v1", "CSINode"),
        ("resource.k8s.io", "v1", "ResourceClaim"),
        ("kube-gang.io", "v1alpha1", "Gang"),
        ("scheduling.volcano.sh", "v1beta1", "PodGroup"),
    ];
    wanted
        .iter()
        .map(|&(g, v, k)| READ.iter().position(|r| (r.group, r.version, r.kind) == (g, v, k)).unwrap())
        .collect()
}

/// The ops, ResourceClaims written at `v1` only (see [`kinds`]).
fn at_one_version(ops: Vec<Op>) -> Vec<Op> {
    ops.into_iter()
        .map(|op| match op {
            Op::ResourceClaim(i, _, a) => Op::ResourceClaim(i, true, a),
            Op::DeleteResourceClaim(i, _) => Op::DeleteResourceClaim(i, true),
            other => other,
        })
        .collect()
}

/// Each object's last version among `ops`' writes.
fn last(ops: &[Op]) -> Vec<Value> {
    let mut last: std::collections::BTreeMap<ObjectRef, Value> = std::collections::BTreeMap::new();
    for op in ops {
        match act(op) {
            Ok(obj) => {
                last.insert(ObjectRef::of(&obj), obj);
            }
            Err((api_version, kind, name)) => {
                let ns = if cluster_scoped(kind) { "" } else { "ml" };
                last.remove(&ObjectRef::new(api_version, kind, ns, name));
            }
        }
    }
    last.into_values().collect()
}

/// The objects of `kind` among `objects`, as a list of it delivers them: each with a
/// `resourceVersion` that changes when the object does (a hash of its content here).
fn list_of(kind: &ApiKind, objects: &[Value]) -> Vec<(ObjectRef, Value)> {
    use std::hash::{Hash, Hasher};
    let versioned = |v: &Value| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        v.to_string().hash(&mut h);
        let mut v = v.clone();
        v["metadata"]["resourceVersion"] = json!(h.finish().to_string());
        v
    };
    objects.iter().map(|v| (ObjectRef::of(v), versioned(v))).filter(|(r, _)| r.is(kind)).collect()
}

fn items(list: &[Value]) -> Vec<(ObjectRef, Value)> {
    list.iter().map(|v| (ObjectRef::of(v), v.clone())).collect()
}

fn assembled(objects: &[Value]) -> Cluster {
    let mut cluster = Cluster::new();
    for obj in objects {
        let _ = cluster.push(obj.clone());
    }
    cluster
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Lists loaded in bulk, kind by kind in any order, give what loading every object in one
    /// pass gives; so does a re-list of every kind after more changes (objects it no longer lists
    /// are gone).
    #[test]
    fn lists_in_any_order_equal_one_at_a_time(
        ops in prop::collection::vec(op(), 1..40),
        order in Just(kinds()).prop_shuffle(),
        later in prop::collection::vec(op(), 0..20),
    ) {
        let (ops, later) = (at_one_version(ops), at_one_version(later));
        let objects = last(&ops);
        let mut live = Live::new();
        for &i in &order {
            let _ = live.replace(&READ[i], list_of(&READ[i], &objects));
        }
        same(&assembled(&objects), &mut live)?;
        let objects = last(&[ops, later].concat());
        for &i in order.iter().rev() {
            let _ = live.replace(&READ[i], list_of(&READ[i], &objects));
        }
        same(&assembled(&objects), &mut live)?;
    }
}

/// `n` running pods on `n0` and a gang of 3 pending members, as a watch lists them.
fn many(n: usize) -> (Vec<Value>, Vec<Value>) {
    let mut pods: Vec<Value> =
        (0..n).map(|i| pod(&format!("p{i:05}"), "100m", 0, None, Some("n0"), false)).collect();
    pods.extend((0..3).map(|i| pod(&format!("m{i}"), "1", 1, None, None, false)));
    for (i, p) in pods.iter_mut().enumerate() {
        p["metadata"]["resourceVersion"] = json!(format!("{}", 100 + i));
    }
    let nodes = (0..4).map(|i| node(&format!("n{i}"), "64")).collect();
    (nodes, pods)
}

#[test]
fn a_list_of_one_kind_converts_that_kind_only() {
    let (nodes, pods) = many(3_000);
    let (node_kind, pod_kind, gang_kind) = (&NODE, &POD, &GANG);
    for pods_first in [true, false] {
        let mut live = Live::new();
        if pods_first {
            live.replace(pod_kind, items(&pods)).unwrap();
            live.replace(node_kind, items(&nodes)).unwrap();
        } else {
            live.replace(node_kind, items(&nodes)).unwrap();
            live.replace(pod_kind, items(&pods)).unwrap();
        }
        live.replace(gang_kind, items(&[kube_gang("g1", 3)])).unwrap();
        live.refresh();
        let s = live.stats();
        assert_eq!((s.pods_converted, s.nodes_converted), (3_003, 4), "pods first: {pods_first}");
        assert_eq!(s.resolutions, 1, "gangs resolved once, at the refresh");
        assert_eq!(live.snapshot().gangs.len(), 1);
        // A re-list of nodes (a watch's 410) converts nodes only; one of pods at the versions
        // held converts nothing.
        live.replace(node_kind, items(&nodes[1..])).unwrap();
        live.replace(pod_kind, items(&pods)).unwrap();
        live.refresh();
        let again = live.stats();
        assert_eq!((again.pods_converted, again.nodes_converted), (3_003, 4 + 3));
        assert_eq!(again.resolutions, 1, "nothing a gang reads changed");
        assert_eq!(live.snapshot().nodes.len(), 3, "the node not listed is gone");
        let mut cluster = Cluster::new();
        for obj in nodes[1..].iter().chain(&pods).chain([&kube_gang("g1", 3)]) {
            cluster.push(obj.clone()).unwrap();
        }
        same(&cluster, &mut live).unwrap();
        // A pod changed while the watch was down is the one converted again.
        let mut changed = pods.clone();
        changed[7]["metadata"]["resourceVersion"] = json!("9999");
        changed[7]["status"]["phase"] = json!("Succeeded");
        live.replace(pod_kind, items(&changed[1..])).unwrap();
        live.refresh();
        assert_eq!(live.stats().pods_converted, 3_003 + 1);
        let mut cluster = Cluster::new();
        for obj in nodes[1..].iter().chain(&changed[1..]).chain([&kube_gang("g1", 3)]) {
            cluster.push(obj.clone()).unwrap();
        }
        same(&cluster, &mut live).unwrap();
    }
}

#[test]
fn storage_objects_are_read_into_the_snapshot_and_unreadable_ones_listed() {
    let mut live = Live::new();
    for obj in [
        pvc(0, 1),
        pvc(1, 3),
        pv(0, 0),
        pv(1, 2),
        storage_class(0),
        csi_node(0, 2),
        resource_claim(0, "v1beta1", true),
        resource_claim(0, "v1", false),
        pod_with("p0", "1", 0, None, None, false, 3),
    ] {
        live.push(obj).unwrap();
    }
    live.refresh();
    let s = &live.snapshot().storage;
    let c0 = &s.claims[&scheduler_core::model::ObjectKey::new("ml", "c0")];
    assert_eq!((c0.volume_name.as_deref(), c0.bound()), (Some("v0"), true));
    assert!(s.volumes.contains_key("v0") && !s.volumes.contains_key("v1"));
    assert_eq!(s.classes["fast"].allowed_topologies.len(), 1);
    assert_eq!(s.csi_nodes["n0"].limits["d.example.com"], 2);
    let rc = &s.resource_claims[&scheduler_core::model::ObjectKey::new("ml", "rc0")];
    assert!(rc.allocation.is_none(), "the v1 copy is kept, whichever arrived last");
    assert_eq!(live.snapshot().pods[0].resource_claims.len(), 1);
    assert_eq!(live.snapshot().pods[0].volumes.len(), 1);
    let problems: Vec<String> = live.problems().iter().map(|p| p.object.clone()).collect();
    assert_eq!(problems, ["PersistentVolumeClaim ml/c1", "PersistentVolume v1"]);
    live.remove("v1", "PersistentVolumeClaim", "ml", "c0");
    live.refresh();
    assert!(live.snapshot().storage.claims.is_empty());
}
