//! The volume filters, end to end from Kubernetes objects: each YAML file under
//! `tests/fixtures/volumes/` holds nodes, pods and the storage and device objects they use (PVCs,
//! PVs, StorageClasses, CSINodes, ResourceClaims) as the API serves them, read through
//! `Cluster::push` into a snapshot, and the plan expected from one cycle — then, optionally, more
//! cycles after the plan is applied as a cluster would apply it: pods bound, and claims bound by
//! the PV controller or provisioned (a PV created for the node and bound). The cases are
//! kube-scheduler's (`volumebinding`, `volumezone`, `volumerestrictions`, `nodevolumelimits`,
//! `dynamicresources` and their tests), written as our own fixtures, plus the joint cases a gang
//! adds: members that contend for one static PV, one ReadWriteOncePod claim, one node's attach
//! limit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use scheduler_core::cluster::Cluster;
use scheduler_core::{Config, Plan, Time, schedule, schedule_reference};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Fixture {
    description: String,
    nodes: Vec<FNode>,
    #[serde(default)]
    gangs: Vec<FGang>,
    #[serde(default)]
    pods: Vec<FPod>,
    /// Any other objects, as the API serves them.
    #[serde(default)]
    objects: Vec<Value>,
    expect: Expect,
    #[serde(default)]
    then: Vec<Step>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FNode {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default = "cpu")]
    cpu: String,
}

fn cpu() -> String {
    "8".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FGang {
    name: String,
    min_member: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FPod {
    name: String,
    /// `name-0` … `name-{n-1}`; `{i}` in volumes and claims is the index.
    replicas: Option<u32>,
    gang: Option<String>,
    /// Bound to this node, running.
    node: Option<String>,
    #[serde(default = "one")]
    cpu: String,
    /// `spec.volumes`, as written (`{i}` the replica index).
    #[serde(default)]
    volumes: Vec<Value>,
    /// `spec.resourceClaims`.
    #[serde(default)]
    resource_claims: Vec<Value>,
    /// `status.resourceClaimStatuses`.
    #[serde(default)]
    resource_claim_statuses: Vec<Value>,
}

fn one() -> String {
    "1".into()
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Expect {
    /// Exactly these bindings (pod → node).
    bindings: Option<BTreeMap<String, String>>,
    /// These pods are bound to one of the listed nodes.
    bound_to: Option<BTreeMap<String, Vec<String>>>,
    /// Exactly these claims are bound first: claim → PV, or `provision@node`.
    volumes: Option<BTreeMap<String, String>>,
    /// Claims provisioned, to any of the listed nodes: claim → nodes.
    provisioned_on: Option<BTreeMap<String, Vec<String>>>,
    /// Exactly these ResourceClaims are allocated or reserved first: claim → the devices
    /// allocated (`pool/device`, sorted, joined by `,`; `reserve` when allocated already).
    claims: Option<BTreeMap<String, String>>,
    /// ResourceClaims allocated for one of the listed nodes: claim → nodes.
    allocated_on: Option<BTreeMap<String, Vec<String>>>,
    /// Exactly these ResourceClaims are released: claim → `deallocate` or `unreserve <pod>`.
    releases: Option<BTreeMap<String, String>>,
    /// The pods of each list are bound to distinct nodes.
    #[serde(default)]
    apart: Vec<Vec<String>>,
    /// These pods are not bound.
    #[serde(default)]
    unbound: Vec<String>,
    #[serde(default)]
    outcomes: BTreeMap<String, FOutcome>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FOutcome {
    reason: scheduler_core::Reason,
    #[serde(default)]
    message: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Step {
    /// Apply the plan as the scheduler and the cluster would: pods bound, claims bound to their
    /// PV or provisioned for their node and bound, by the PV controller.
    #[serde(default)]
    apply: bool,
    /// Objects added or replaced.
    #[serde(default)]
    objects: Vec<Value>,
    expect: Expect,
}

fn node(n: &FNode) -> Value {
    let mut labels = n.labels.clone();
    labels.entry("kubernetes.io/hostname".into()).or_insert_with(|| n.name.clone());
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name, "labels": labels},
           "status": {"allocatable": {"cpu": n.cpu, "memory": "64Gi", "pods": "110"}}})
}

fn gang(g: &FGang) -> Value {
    json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
           "metadata": {"name": g.name, "namespace": "ml"}, "spec": {"minMember": g.min_member}})
}

/// `v` with every `{i}` in its strings replaced by `i`.
fn indexed(v: &Value, i: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("{i}", i)),
        Value::Array(a) => Value::Array(a.iter().map(|x| indexed(x, i)).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), indexed(x, i))).collect()),
        other => other.clone(),
    }
}

fn pods(f: &FPod) -> Vec<Value> {
    let names: Vec<(String, String)> = match f.replicas {
        Some(n) => (0..n).map(|i| (format!("{}-{i}", f.name), i.to_string())).collect(),
        None => vec![(f.name.clone(), String::new())],
    };
    names
        .into_iter()
        .map(|(name, i)| {
            let mut labels = serde_json::Map::new();
            if let Some(g) = &f.gang {
                labels.insert("kube-gang.io/gang".into(), json!(g));
            }
            let mut spec = json!({"schedulerName": "gang-scheduler",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": f.cpu}}}],
                "volumes": indexed(&json!(f.volumes), &i),
                "resourceClaims": indexed(&json!(f.resource_claims), &i)});
            let mut status = json!({"phase": "Pending",
                "resourceClaimStatuses": indexed(&json!(f.resource_claim_statuses), &i)});
            if let Some(n) = &f.node {
                spec["nodeName"] = json!(n);
                status["phase"] = json!("Running");
            }
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"), "labels": labels,
                                "creationTimestamp": "2026-01-01T00:00:00Z"},
                   "spec": spec, "status": status})
        })
        .collect()
}

fn key(v: &Value) -> (String, String, String) {
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    (s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
}

/// The objects, keyed so a later version replaces an earlier one.
type World = BTreeMap<(String, String, String), Value>;

fn world(f: &Fixture) -> World {
    let mut all: Vec<Value> = f.nodes.iter().map(node).collect();
    all.extend(f.gangs.iter().map(gang));
    all.extend(f.pods.iter().flat_map(pods));
    all.extend(f.objects.iter().cloned());
    all.into_iter().map(|v| (key(&v), v)).collect()
}

fn plan_of(w: &World, file: &Path, step: &str) -> (scheduler_core::Snapshot, Plan) {
    let mut cluster = Cluster::new();
    for v in w.values() {
        cluster.push(v.clone()).unwrap_or_else(|e| panic!("{}: {step}: {e}", file.display()));
    }
    let assembled = cluster.snapshot();
    assert!(assembled.problems.is_empty(), "{}: {step}: {:?}", file.display(), assembled.problems);
    let now = Time::parse_rfc3339("2026-01-01T00:01:00Z").unwrap();
    let config = Config::default();
    let plan = schedule(&assembled.snapshot, &config, now);
    assert_eq!(
        plan,
        schedule_reference(&assembled.snapshot, &config, now),
        "{}: {step}: the reference cycle decides the same",
        file.display()
    );
    (assembled.snapshot, plan)
}

/// The plan applied as the cluster would: pods bound and running; each claim bound first to
/// its PV, or provisioned (a PV `pv-{claim}` of its size and class, on its node) and bound.
fn apply(w: &mut World, plan: &Plan) {
    for r in &plan.releases {
        let ck = ("ResourceClaim".to_string(), r.claim.namespace.to_string(), r.claim.name.to_string());
        let Some(claim) = w.get_mut(&ck) else { continue };
        if let Some(list) = claim["status"]["reservedFor"].as_array_mut() {
            list.retain(|e| e["uid"] != r.uid.as_str());
        }
        if r.deallocate {
            claim["status"] = json!({});
        }
    }
    for c in &plan.claims {
        let ck = ("ResourceClaim".to_string(), c.claim.namespace.to_string(), c.claim.name.to_string());
        let Some(claim) = w.get_mut(&ck) else { continue };
        if let Some(a) = &c.allocation {
            let mut allocation = json!({"devices": {"results": a.devices, "config": a.config}});
            if let Some(selector) = &a.node_selector {
                allocation["nodeSelector"] = selector.clone();
            }
            claim["status"]["allocation"] = allocation;
        }
        let entry = json!({"resource": "pods", "name": c.pod.name, "uid": c.uid});
        match claim["status"]["reservedFor"].as_array_mut() {
            Some(list) => list.push(entry),
            None => claim["status"]["reservedFor"] = json!([entry]),
        }
    }
    for b in &plan.bindings {
        let k = ("Pod".to_string(), b.pod.namespace.to_string(), b.pod.name.to_string());
        if let Some(p) = w.get_mut(&k) {
            p["spec"]["nodeName"] = json!(b.node);
            p["status"]["phase"] = json!("Running");
        }
    }
    for v in &plan.volumes {
        let ck =
            ("PersistentVolumeClaim".to_string(), v.claim.namespace.to_string(), v.claim.name.to_string());
        let Some(claim) = w.get(&ck).cloned() else { continue };
        let pv = match &v.volume {
            Some(pv) => pv.clone(),
            None => {
                let name = format!("pv-{}", v.claim.name);
                let size = claim.pointer("/spec/resources/requests/storage").cloned().unwrap_or(json!("1Gi"));
                let provisioned = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
                    "spec": {"storageClassName": claim["spec"]["storageClassName"], "capacity": {"storage": size},
                             "accessModes": claim["spec"]["accessModes"], "csi": {"driver": "csi.example.com", "volumeHandle": name},
                             "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                 {"key": "kubernetes.io/hostname", "operator": "In", "values": [v.node]}]}]}}},
                    "status": {"phase": "Available"}});
                w.insert(key(&provisioned), provisioned);
                name
            }
        };
        let pk = ("PersistentVolume".to_string(), String::new(), pv.clone());
        if let Some(p) = w.get_mut(&pk) {
            p["spec"]["claimRef"] = json!({"namespace": v.claim.namespace, "name": v.claim.name,
                                           "uid": claim["metadata"]["uid"]});
            p["status"]["phase"] = json!("Bound");
        }
        if let Some(c) = w.get_mut(&ck) {
            c["spec"]["volumeName"] = json!(pv);
            c["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = json!("yes");
            c["status"] = json!({"phase": "Bound"});
        }
    }
}

fn check(file: &Path, step: &str, plan: &Plan, e: &Expect) -> Vec<String> {
    let mut failures = Vec::new();
    let mut fail = |m: String| failures.push(format!("{}: {step}: {m}", file.display()));
    let got: BTreeMap<String, String> =
        plan.bindings.iter().map(|b| (b.pod.name.to_string(), b.node.to_string())).collect();
    if let Some(want) = &e.bindings
        && &got != want
    {
        fail(format!("bindings: want {want:?}, got {got:?}"));
    }
    for (pod, nodes) in e.bound_to.iter().flatten() {
        if !got.get(pod).is_some_and(|n| nodes.contains(n)) {
            fail(format!("{pod}: want one of {nodes:?}, got {:?}", got.get(pod)));
        }
    }
    for pod in &e.unbound {
        if let Some(n) = got.get(pod) {
            fail(format!("{pod}: want it unbound, got {n}"));
        }
    }
    for pods in &e.apart {
        let nodes: Vec<Option<&String>> = pods.iter().map(|p| got.get(p)).collect();
        let distinct: BTreeSet<&Option<&String>> = nodes.iter().collect();
        if nodes.iter().any(Option::is_none) || distinct.len() != nodes.len() {
            fail(format!("{pods:?}: want bound to distinct nodes, got {nodes:?}"));
        }
    }
    let volumes: BTreeMap<String, String> = plan
        .volumes
        .iter()
        .map(|v| {
            (v.claim.name.to_string(), v.volume.clone().unwrap_or_else(|| format!("provision@{}", v.node)))
        })
        .collect();
    if let Some(want) = &e.volumes
        && &volumes != want
    {
        fail(format!("volumes: want {want:?}, got {volumes:?}"));
    }
    for (claim, nodes) in e.provisioned_on.iter().flatten() {
        let on = volumes.get(claim).and_then(|v| v.strip_prefix("provision@"));
        if !on.is_some_and(|n| nodes.iter().any(|x| x == n)) {
            fail(format!("{claim}: want provisioned on one of {nodes:?}, got {:?}", volumes.get(claim)));
        }
    }
    let claims: BTreeMap<String, String> = plan
        .claims
        .iter()
        .map(|c| {
            let devices = match &c.allocation {
                Some(a) => {
                    let mut d: Vec<String> =
                        a.devices.iter().map(|d| format!("{}/{}", d.id.pool, d.id.device)).collect();
                    d.sort();
                    d.join(",")
                }
                None => "reserve".to_string(),
            };
            (c.claim.name.to_string(), devices)
        })
        .collect();
    if let Some(want) = &e.claims
        && &claims != want
    {
        fail(format!("claims: want {want:?}, got {claims:?}"));
    }
    let releases: BTreeMap<String, String> = plan
        .releases
        .iter()
        .map(|r| {
            let what =
                if r.deallocate { "deallocate".to_string() } else { format!("unreserve {}", r.pod.name) };
            (r.claim.name.to_string(), what)
        })
        .collect();
    if let Some(want) = &e.releases
        && &releases != want
    {
        fail(format!("releases: want {want:?}, got {releases:?}"));
    }
    // A pod placed by the plan releases nothing.
    let placed: BTreeSet<&str> = plan
        .bindings
        .iter()
        .map(|b| b.pod.name.as_str())
        .chain(plan.claims.iter().map(|c| c.pod.name.as_str()))
        .collect();
    if let Some(r) = plan.releases.iter().find(|r| placed.contains(r.pod.name.as_str())) {
        fail(format!("{} placed and its claim {} released", r.pod, r.claim));
    }
    for (claim, nodes) in e.allocated_on.iter().flatten() {
        let on = plan.claims.iter().find(|c| c.claim.name == claim.as_str() && c.allocation.is_some());
        if !on.is_some_and(|c| nodes.iter().any(|n| n == c.node.as_str())) {
            fail(format!("{claim}: want allocated for one of {nodes:?}, got {:?}", on.map(|c| &c.node)));
        }
    }
    // One device is allocated to one claim at most; a claim shared by pods gets one allocation.
    let mut owner: BTreeMap<String, &str> = BTreeMap::new();
    let mut given: BTreeMap<&str, &scheduler_core::plan::DeviceAllocation> = BTreeMap::new();
    for c in &plan.claims {
        let Some(a) = &c.allocation else { continue };
        if given.insert(c.claim.name.as_str(), a).is_some_and(|before| before != a) {
            fail(format!("claim {} given two allocations", c.claim));
        }
        for d in a.devices.iter().filter(|d| !d.admin_access) {
            let id = d.id.to_string();
            if owner.insert(id.clone(), c.claim.name.as_str()).is_some_and(|o| o != c.claim.name.as_str()) {
                fail(format!("device {id} allocated to two claims"));
            }
        }
    }
    // No pod is bound while a claim of its is bound or allocated first; no static PV is given twice.
    let waiting: BTreeSet<&str> = plan
        .volumes
        .iter()
        .map(|v| v.pod.name.as_str())
        .chain(plan.claims.iter().map(|c| c.pod.name.as_str()))
        .collect();
    if let Some(b) = plan.bindings.iter().find(|b| waiting.contains(b.pod.name.as_str())) {
        fail(format!("{} bound while its claims are bound first", b.pod));
    }
    // A claim shared by pods is bound once: one PV, or one node to provision on.
    let mut choice: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for v in &plan.volumes {
        choice
            .entry(v.claim.name.as_str())
            .or_default()
            .insert(v.volume.clone().unwrap_or_else(|| v.node.to_string()));
    }
    if let Some((claim, chosen)) = choice.iter().find(|(_, c)| c.len() > 1) {
        fail(format!("claim {claim} given more than one volume or node: {chosen:?}"));
    }
    let pvs: Vec<&String> = plan.volumes.iter().filter_map(|v| v.volume.as_ref()).collect();
    let distinct: BTreeSet<&&String> = pvs.iter().collect();
    let claims: BTreeSet<&str> =
        plan.volumes.iter().filter(|v| v.volume.is_some()).map(|v| v.claim.name.as_str()).collect();
    if distinct.len() != claims.len() {
        fail(format!("a static PV given to two claims: {:?}", plan.volumes));
    }
    for (gang, want) in &e.outcomes {
        let Some(o) = plan.outcomes.iter().find(|o| o.gang.name == gang) else {
            fail(format!("no outcome for gang {gang}"));
            continue;
        };
        if o.reason != want.reason {
            fail(format!("{gang}: reason: want {}, got {} ({})", want.reason, o.reason, o.message));
        }
        for needle in &want.message {
            if !o.message.contains(needle.as_str()) {
                fail(format!("{gang}: message {:?} lacks {needle:?}", o.message));
            }
        }
    }
    failures
}

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/volumes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn volume_fixtures() {
    let files = fixtures();
    assert!(files.len() >= 18, "expected the volume suite, found {} files", files.len());
    let mut failures = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let f: Fixture = serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(!f.description.is_empty());
        let mut w = world(&f);
        let (_, mut plan) = plan_of(&w, &file, "cycle 1");
        failures.extend(check(&file, "cycle 1", &plan, &f.expect));
        for (i, step) in f.then.iter().enumerate() {
            let name = format!("cycle {}", i + 2);
            if step.apply {
                apply(&mut w, &plan);
            }
            for v in &step.objects {
                w.insert(key(v), v.clone());
            }
            plan = plan_of(&w, &file, &name).1;
            failures.extend(check(&file, &name, &plan, &step.expect));
        }
    }
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
}

/// What `simulate` adds beside the pods it expands: a StatefulSet's claims, one per template and
/// pod (`<template>-<set>-<ordinal>`, the pod's volume pointing at it, replacing a template volume
/// of that name), and the claims the ephemeral volume controller makes (`<pod>-<volume>`, owned by
/// the pod).
#[test]
fn controllers_claims_are_what_their_controllers_make() {
    let set = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ml"},
        "spec": {"replicas": 2, "podManagementPolicy": "Parallel",
                 "template": {"spec": {"containers": [{"name": "c"}], "volumes": [{"name": "data", "emptyDir": {}}]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "data", "labels": {"app": "db"}},
                                           "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"]}}]}});
    let out = scheduler_core::workload::expand_admitted(&set).unwrap();
    let kinds: Vec<&str> = out.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Pod", "Pod", "PersistentVolumeClaim", "PersistentVolumeClaim"]);
    assert_eq!(
        out[1]["spec"]["volumes"],
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}}])
    );
    assert_eq!(out[3]["metadata"]["name"], "data-db-1");
    assert_eq!(out[3]["metadata"]["labels"]["app"], "db");
    assert_eq!(out[3]["spec"]["storageClassName"], "fast");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w-0", "namespace": "ml", "uid": "u"},
        "spec": {"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
                             {"name": "cfg", "configMap": {"name": "c"}}]}});
    let claims = scheduler_core::volume::ephemeral_claims(&pod);
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0]["metadata"]["name"], "w-0-scratch");
    assert_eq!(claims[0]["metadata"]["ownerReferences"][0]["uid"], "u");
    assert_eq!(claims[0]["metadata"]["ownerReferences"][0]["controller"], true);
    // The pod reads it as its own.
    let mut cluster = Cluster::new();
    cluster.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "1", "pods": "1"}}})).unwrap();
    let mut p = pod.clone();
    p["spec"]["schedulerName"] = json!("gang-scheduler");
    p["spec"]["containers"] = json!([{"name": "c"}]);
    p["spec"]["volumes"][0]["ephemeral"]["volumeClaimTemplate"]["spec"]["storageClassName"] =
        json!("missing");
    cluster.push(p).unwrap();
    for c in claims {
        cluster.push(c).unwrap();
    }
    let snap = cluster.snapshot().snapshot;
    let plan = schedule(&snap, &Config::default(), Time::from_secs(0));
    assert!(plan.bindings.is_empty());
    assert!(snap.storage.claims.contains_key(&scheduler_core::model::ObjectKey::new("ml", "w-0-scratch")));
}

/// A HyperNode is read with its CRD's rules, each refusal at its field; a pattern is compiled
/// within a size bound (RE2 matching is linear in the name, so a pathological pattern costs no
/// more than a plain one), and one past the bound is refused rather than compiled.
#[test]
fn hypernodes_are_read_with_their_crds_rules_and_bounded_patterns() {
    use scheduler_core::model::volume::MemberSelector;
    use scheduler_core::volume::hypernode_from_value;
    let hn = |members: serde_json::Value| {
        serde_json::json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": "h"}, "spec": {"tier": 1, "members": members}})
    };
    let ok = hypernode_from_value(&hn(serde_json::json!([
        {"type": "Node", "selector": {"regexMatch": {"pattern": "(a*)*b"}}},
        {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}},
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}}])))
    .unwrap();
    assert_eq!(ok.tier, 1);
    assert!(matches!(&ok.members[0].selector, MemberSelector::Regex(p) if p == "(a*)*b"));
    assert!(ok.members[2].hypernode);
    let errors = |members: serde_json::Value| -> Vec<(String, String)> {
        hypernode_from_value(&hn(members)).unwrap_err().into_iter().map(|e| (e.path, e.message)).collect()
    };
    let e = errors(serde_json::json!([
        {"type": "Node", "selector": {}},
        {"type": "Node", "selector": {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "b"}}},
        {"type": "HyperNode", "selector": {"labelMatch": {"matchLabels": {"x": "y"}}}},
        {"type": "Switch", "selector": {"exactMatch": {"name": "a"}}},
        {"type": "Node", "selector": {"regexMatch": {"pattern": "("}}},
        {"type": "Node", "selector": {"regexMatch": {"pattern": "(?:a{1000}){1000}"}}}]));
    let paths: Vec<&str> = e.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.members[0].selector",
            "spec.members[1].selector",
            "spec.members[2].selector.labelMatch",
            "spec.members[3].type",
            "spec.members[4].selector.regexMatch.pattern",
            "spec.members[5].selector.regexMatch.pattern"
        ]
    );
    assert!(e[5].1.contains("size limit"), "{:?}", e[5]);
    let negative = serde_json::json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": "h"}, "spec": {"tier": -1}});
    assert_eq!(hypernode_from_value(&negative).unwrap_err()[0].path, "spec.tier");
}

#[test]
fn topology_objects_are_read_as_level_orders_with_their_crds_rules() {
    use scheduler_core::volume::{Stored, from_value, levels_from_value};
    let topology = |api: &str, levels: serde_json::Value| serde_json::json!({"apiVersion": api, "kind": "Topology", "metadata": {"name": "t"}, "spec": {"levels": levels}});
    let levels = serde_json::json!([{"nodeLabel": "cloud.provider.com/topology-block"},
                                    {"nodeLabel": "cloud.provider.com/topology-rack"},
                                    {"nodeLabel": "kubernetes.io/hostname"}]);
    // KAI's and Kueue's, at every version each serves, read alike.
    for api in ["kai.scheduler/v1", "kai.scheduler/v1alpha1"] {
        let read = from_value(&topology(api, levels.clone())).unwrap().unwrap();
        assert!(
            matches!(&read, Stored::KaiTopology(l) if l.len() == 3 && l[2] == "kubernetes.io/hostname"),
            "{read:?}"
        );
    }
    for api in ["kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1alpha1"] {
        let read = from_value(&topology(api, levels.clone())).unwrap().unwrap();
        assert!(
            matches!(&read, Stored::KueueTopology(l) if l[0] == "cloud.provider.com/topology-block"),
            "{read:?}"
        );
    }
    let errors = |levels: serde_json::Value| -> Vec<String> {
        levels_from_value(&topology("kai.scheduler/v1", levels))
            .unwrap_err()
            .into_iter()
            .map(|e| format!("{}: {}", e.path, e.message))
            .collect()
    };
    assert_eq!(errors(serde_json::json!([])), ["spec.levels: Required value: should have at least 1 items"]);
    assert_eq!(
        errors(serde_json::json!([{"nodeLabel": "rack"}, {"nodeLabel": "rack"}])),
        ["spec.levels: Invalid value: must be unique"]
    );
    assert_eq!(
        errors(serde_json::json!([{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}])),
        [
            "spec.levels: Invalid value: the kubernetes.io/hostname label can only be used at the lowest level of topology"
        ]
    );
    let e = errors(serde_json::json!([{"nodeLabel": ""}, {"nodeLabel": "bad key/"}]));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].starts_with("spec.levels[0].nodeLabel: Required value"), "{e:?}");
    assert!(e[1].starts_with("spec.levels[1].nodeLabel: "), "{e:?}");
    let many: Vec<serde_json::Value> =
        (0..17).map(|i| serde_json::json!({"nodeLabel": format!("l{i}")})).collect();
    assert_eq!(errors(serde_json::json!(many)), ["spec.levels: Too many: 17: must have at most 16 items"]);
}

#[test]
fn a_cluster_network_topology_is_read_as_koordinator_builds_its_tree() {
    use scheduler_core::volume::{Stored, from_value, network_topology_from_value};
    let cnt = |spec: serde_json::Value| {
        serde_json::json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
            "metadata": {"name": "default"}, "spec": {"networkTopologySpec": spec}})
    };
    // Koordinator's documented object, its entries in any order: broadest first, the nodes last.
    let doc = cnt(serde_json::json!([
        {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"},
        {"labelKey": ["network.topology.nvidia.com/spine"], "topologyLayer": "SpineLayer"},
        {"labelKey": ["network.topology.nvidia.com/block"], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"}]));
    let Some(Ok(Stored::NetworkTopology(name, layers))) = from_value(&doc) else { panic!("{doc}") };
    let names: Vec<(&str, &[String])> = layers.iter().map(|l| (l.name.as_str(), &l.label_keys[..])).collect();
    assert_eq!(name, "default");
    assert_eq!(
        names,
        [
            ("SpineLayer", &["network.topology.nvidia.com/spine".to_string()][..]),
            ("BlockLayer", &["network.topology.nvidia.com/block".to_string()][..]),
            ("NodeTopologyLayer", &[][..])
        ]
    );
    let errors = |spec: serde_json::Value| -> Vec<String> {
        network_topology_from_value(&cnt(spec))
            .unwrap_err()
            .into_iter()
            .map(|e| format!("{}: {}", e.path, e.message))
            .collect()
    };
    assert_eq!(
        errors(serde_json::json!([])),
        ["spec.networkTopologySpec: Required value: at least the NodeTopologyLayer layer"]
    );
    // No chain from the nodes: Koordinator's "topology layer … not found in spec".
    let e = errors(serde_json::json!([{"labelKey": ["spine"], "topologyLayer": "SpineLayer"}]));
    assert!(
        e[0].starts_with("spec.networkTopologySpec: topology layer \"NodeTopologyLayer\" not found in spec"),
        "{e:?}"
    );
    let e = errors(serde_json::json!([
        {"labelKey": ["spine"], "topologyLayer": "SpineLayer"},
        {"labelKey": ["block"], "parentTopologyLayer": "Spine", "topologyLayer": "BlockLayer"},
        {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"}]));
    assert!(e[0].contains("topology layer \"Spine\" not found"), "{e:?}");
    // A layer that is its own parent never reaches the others.
    let e = errors(serde_json::json!([
        {"labelKey": ["a"], "parentTopologyLayer": "A", "topologyLayer": "A"},
        {"parentTopologyLayer": "A", "topologyLayer": "NodeTopologyLayer"},
        {"labelKey": ["b"], "topologyLayer": "B"}]));
    assert!(e[0].contains("topology layer \"A\" not found"), "{e:?}");
    assert_eq!(
        errors(serde_json::json!([
            {"labelKey": ["bad key!"], "topologyLayer": "A"},
            {"parentTopologyLayer": "A", "topologyLayer": "NodeTopologyLayer"},
            {"topologyLayer": "NodeTopologyLayer"}, {"topologyLayer": ""}]))
        .iter()
        .map(|e| e.split(':').next().unwrap_or_default())
        .collect::<Vec<_>>(),
        [
            "spec.networkTopologySpec[0].labelKey[0]",
            "spec.networkTopologySpec[2].topologyLayer",
            "spec.networkTopologySpec[3].topologyLayer"
        ]
    );
    let many: Vec<serde_json::Value> =
        (0..30).map(|i| serde_json::json!({"topologyLayer": format!("L{i}"), "labelKey": ["k"]})).collect();
    assert_eq!(
        errors(serde_json::Value::Array(many)),
        ["spec.networkTopologySpec: Too many: 30: must have at most 17 items"]
    );
}
