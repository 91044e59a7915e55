//! Every dialect, one model: each dialect's objects and pod markers, assembled through
//! `Cluster`, become the same canonical gang and memberships.

use std::collections::{BTreeMap, BTreeSet};

use scheduler_core::cluster::Cluster;
use scheduler_core::model::{Dialect, Gang, GangKey, GangMode, Snapshot};
use serde_json::{Value, json};

fn pod(name: &str, labels: Value, annotations: Value, extra_spec: Value) -> Value {
    let mut spec = json!({"schedulerName": "gang-scheduler", "containers": [{"name": "c",
        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra_spec.as_object()) {
        s.extend(e.clone());
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "labels": labels, "annotations": annotations},
        "spec": spec, "status": {"phase": "Pending"}})
}

fn assemble(objects: Vec<Value>) -> (Snapshot, Vec<String>) {
    let mut c = Cluster::new();
    for o in objects {
        c.push(o).unwrap();
    }
    let a = c.snapshot();
    (a.snapshot, a.problems.iter().map(ToString::to_string).collect())
}

fn only_gang(snap: &Snapshot) -> &Gang {
    assert_eq!(snap.gangs.len(), 1, "{:#?}", snap.gangs);
    &snap.gangs[0]
}

fn members(snap: &Snapshot, gang: &str) -> Vec<(String, Option<String>)> {
    let key = GangKey::new("ml", gang);
    snap.pods
        .iter()
        .filter(|p| p.gang.as_ref().is_some_and(|m| m.gang == key))
        .map(|p| (p.key.name.to_string(), p.gang.as_ref().and_then(|m| m.subgroup.clone())))
        .collect()
}

#[test]
fn kube_gang_crd_with_subgroups() {
    let (snap, problems) = assemble(vec![
        json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "llm", "namespace": "ml"},
               "spec": {"minMember": 1, "mode": "NonStrict", "scheduleTimeoutSeconds": 600, "topologyKey": "rack",
                        "subGroups": [{"name": "prefill", "minMember": 1}, {"name": "decode", "minMember": 2}],
                        "minResources": {"nvidia.com/gpu": "3"}}}),
        pod(
            "p0",
            json!({"kube-gang.io/gang": "llm", "kube-gang.io/subgroup": "prefill"}),
            json!({}),
            json!({}),
        ),
        pod(
            "d0",
            json!({"kube-gang.io/gang": "llm", "kube-gang.io/subgroup": "decode"}),
            json!({}),
            json!({}),
        ),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
    let g = only_gang(&snap);
    assert_eq!(
        (g.source.dialect, g.mode, g.topology_key.as_deref()),
        (Dialect::KubeGang, GangMode::NonStrict, Some("rack"))
    );
    assert_eq!(g.timeout.map(|t| t.as_secs()), Some(600));
    assert_eq!(g.min_resources.get("nvidia.com/gpu"), 3);
    assert_eq!(
        members(&snap, "llm"),
        vec![("d0".into(), Some("decode".into())), ("p0".into(), Some("prefill".into()))]
    );
}

#[test]
fn kube_gang_annotations_without_a_crd() {
    let ann = json!({"kube-gang.io/min-member": "2", "kube-gang.io/timeout": "15m", "kube-gang.io/gang-group": "ml/other"});
    let (snap, problems) = assemble(vec![
        pod("w0", json!({"kube-gang.io/gang": "job"}), ann.clone(), json!({})),
        pod("w1", json!({"kube-gang.io/gang": "job"}), ann, json!({})),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
    let g = only_gang(&snap);
    assert_eq!((g.min_member, g.source.dialect), (2, Dialect::KubeGangAnnotations));
    assert_eq!(g.timeout.map(|t| t.as_secs()), Some(900));
    assert_eq!(g.gang_group, vec![GangKey::new("ml", "other")]);
    assert_eq!(members(&snap, "job").len(), 2);
}

#[test]
fn coscheduling_podgroup() {
    let (snap, problems) = assemble(vec![
        json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "pg", "namespace": "ml"},
               "spec": {"minMember": 3, "scheduleTimeoutSeconds": 60}}),
        pod("a", json!({"scheduling.x-k8s.io/pod-group": "pg"}), json!({}), json!({})),
        pod("b", json!({"pod-group.scheduling.sigs.k8s.io": "pg"}), json!({}), json!({})),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
    let g = only_gang(&snap);
    assert_eq!((g.min_member, g.source.dialect), (3, Dialect::Coscheduling));
    assert_eq!(members(&snap, "pg").len(), 2, "the legacy label counts too");
}

#[test]
fn volcano_podgroup_with_task_minimums() {
    let (snap, problems) = assemble(vec![
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "vj", "namespace": "ml"},
               "spec": {"minMember": 3, "minTaskMember": {"ps": 1, "worker": 2}}}),
        pod(
            "ps-0",
            json!({}),
            json!({"scheduling.k8s.io/group-name": "vj", "volcano.sh/task-spec": "ps"}),
            json!({}),
        ),
        pod(
            "worker-0",
            json!({}),
            json!({"scheduling.k8s.io/group-name": "vj", "volcano.sh/task-spec": "worker"}),
            json!({}),
        ),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
    let g = only_gang(&snap);
    assert_eq!(g.source.dialect, Dialect::Volcano);
    assert_eq!(g.min_pods(), Some(3));
    assert_eq!(g.subgroups.len(), 2);
    assert_eq!(members(&snap, "vj")[0].1.as_deref(), Some("ps"));
}

/// A Volcano Job's PodGroup waits `Pending` until a scheduler admits it, and Volcano's job
/// controller makes no pod before: the waiting gang says so, and whether the scheduler will move
/// it (opted in by its own label, copied from the Job, or its namespace's) or not.
#[test]
fn a_pending_volcano_podgroup_says_why_it_has_no_pods() {
    let pg = |name: &str, labels: Value, status: Value| {
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
               "metadata": {"name": name, "namespace": "ml", "labels": labels, "ownerReferences": [
                   {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": name, "uid": name,
                    "controller": true}]},
               "spec": {"minMember": 2}, "status": status})
    };
    let (snap, problems) = assemble(vec![
        pg("ours", json!({"kube-gang.io/enabled": "true"}), json!({})),
        pg("theirs", json!({}), json!({"phase": "Pending"})),
        pg("admitted", json!({}), json!({"phase": "Inqueue"})),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
    let plan =
        scheduler_core::schedule(&snap, &scheduler_core::Config::default(), scheduler_core::model::Time(0));
    let message = |name: &str| plan.outcome(&GangKey::new("ml", name)).unwrap().message.clone();
    let ours = message("ours");
    assert!(
        ours.starts_with("waiting for members: 0 of 2 exist")
            && ours.contains("its PodGroup has no phase yet: Volcano's job controller creates the pods once it is Inqueue, to which the scheduler moves it"),
        "{ours}"
    );
    let theirs = message("theirs");
    assert!(
        theirs.contains("its PodGroup is Pending and, as far as what was read shows, is not opted in (kube-gang.io/enabled=true on it, copied from its Volcano Job, or on namespace ml)"),
        "{theirs}"
    );
    assert_eq!(message("admitted"), "waiting for members: 0 of 2 exist", "admitted: nothing more to say");
    let mut labelled = assemble(vec![pg("theirs", json!({}), json!({"phase": "Pending"}))]).0;
    labelled.namespaces.insert(
        "ml".into(),
        [("kube-gang.io/enabled".to_string(), "true".to_string())]
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>()
            .into(),
    );
    let plan = scheduler_core::schedule(
        &labelled,
        &scheduler_core::Config::default(),
        scheduler_core::model::Time(0),
    );
    let m = &plan.outcome(&GangKey::new("ml", "theirs")).unwrap().message;
    assert!(m.contains("to which the scheduler moves it"), "opted in by its namespace: {m}");
}

#[test]
fn a_podgroups_priority_class_is_the_gangs_priority_and_an_unknown_one_a_problem() {
    let podgroup = |name: &str, class: &str| {
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": "ml"},
               "spec": {"minMember": 1, "priorityClassName": class}})
    };
    let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 5000});
    let (snap, problems) = assemble(vec![
        class,
        podgroup("known", "high"),
        podgroup("unknown", "nope"),
        podgroup("system", "system-cluster-critical"),
        pod("w", json!({}), json!({"scheduling.k8s.io/group-name": "known"}), json!({})),
    ]);
    let priority = |name: &str| snap.gangs.iter().find(|g| g.key.name == name).unwrap().priority;
    assert_eq!(priority("known"), Some(5000));
    assert_eq!(priority("system"), Some(2_000_000_000));
    assert_eq!(priority("unknown"), None, "the members' priority stands");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("PodGroup ml/unknown") && problems[0].contains("spec.priorityClassName"),
        "{problems:?}"
    );
}

#[test]
fn a_gang_at_its_objects_class_preempts_only_below_it_and_says_so() {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "4", "pods": "10"}, "conditions": [{"type": "Ready", "status": "True"}]}});
    let class = |name: &str, value: i64| json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value});
    // A running pod at 500 fills the node; the gang's pods have no class (priority 0 — the
    // PodGroup's class decides).
    let running = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "busy", "namespace": "ml"},
        "spec": {"nodeName": "n1", "priorityClassName": "mid",
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}]},
        "status": {"phase": "Running"}});
    let member = pod(
        "w",
        json!({}),
        json!({"scheduling.k8s.io/group-name": "pg"}),
        json!({"schedulerName": "gang-scheduler", "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}]}),
    );
    let podgroup = |class: &str| {
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pg", "namespace": "ml"},
               "spec": {"minMember": 1, "priorityClassName": class}})
    };
    let now = scheduler_core::Time::from_secs(1_800_000_000);
    let outcome = |pg_class: &str| {
        let (snap, problems) = assemble(vec![
            node.clone(),
            class("low", 100),
            class("mid", 500),
            class("high", 1000),
            running.clone(),
            member.clone(),
            podgroup(pg_class),
        ]);
        assert!(problems.is_empty(), "{problems:?}");
        let plan = scheduler_core::schedule(&snap, &scheduler_core::Config::default(), now);
        let o = plan.outcomes.iter().find(|o| o.gang.name == "pg").unwrap().clone();
        (o.reason, o.message, plan.evictions.len())
    };
    let (reason, message, evicted) = outcome("low");
    assert_eq!((reason, evicted), (scheduler_core::Reason::Unschedulable, 0), "{message}");
    assert!(
        message.ends_with(
            "; no pods of priority below 100 (the PodGroup's spec.priorityClassName \"low\") would make room"
        ),
        "{message}"
    );
    let (reason, message, evicted) = outcome("high");
    assert_eq!((reason, evicted), (scheduler_core::Reason::Preempting, 1), "{message}");
}

/// `n` pods of Volcano PodGroup `pg`, each asking a whole 8-CPU node.
fn whole_node_members(pg: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            pod(
                &format!("w{i}"),
                json!({}),
                json!({"scheduling.k8s.io/group-name": pg}),
                json!({"schedulerName": "gang-scheduler",
                       "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "8"}}}]}),
            )
        })
        .collect()
}

#[test]
fn a_volcano_gang_bounded_by_a_hypernode_tier_stays_in_one_hypernode() {
    // Two tier-1 HyperNodes of 4 nodes each (by name, and by pattern), under one tier-2 spine.
    let node = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
               "status": {"allocatable": {"cpu": "8", "pods": "10"}, "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    let hypernode = |name: &str, tier: i64, members: Value| {
        json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
               "spec": {"tier": tier, "members": members}})
    };
    let exact = |names: &[&str]| -> Value {
        names.iter().map(|n| json!({"type": "Node", "selector": {"exactMatch": {"name": n}}})).collect()
    };
    let cluster = |pods: usize, tier: i64| {
        let mut objects: Vec<Value> = (0..8).map(|i| node(&format!("n{i}"))).collect();
        objects.push(hypernode("s0", 1, exact(&["n0", "n1", "n2", "n3"])));
        objects.push(hypernode(
            "s1",
            1,
            json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "^n[4-7]$"}}}]),
        ));
        objects.push(hypernode(
            "spine",
            2,
            json!([{"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^s"}}}]),
        ));
        objects.push(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ml"},
            "spec": {"minMember": pods, "networkTopology": {"mode": "hard", "highestTierAllowed": tier}}}));
        objects.extend(whole_node_members("pg", pods));
        let (snap, problems) = assemble(objects);
        assert!(problems.is_empty(), "{problems:?}");
        let plan = scheduler_core::schedule(
            &snap,
            &scheduler_core::Config::default(),
            scheduler_core::Time::from_secs(1),
        );
        let o = plan.outcomes.iter().find(|o| o.gang.name == "pg").unwrap().clone();
        let nodes: Vec<String> = plan.bindings.iter().map(|b| b.node.to_string()).collect();
        (o.reason, o.message, nodes)
    };
    // Four pods of a whole node each fit in one tier-1 HyperNode: all in s0 or all in s1.
    let (reason, _, nodes) = cluster(4, 1);
    assert_eq!(reason, scheduler_core::Reason::Scheduled);
    let low = nodes.iter().filter(|n| ["n0", "n1", "n2", "n3"].contains(&n.as_str())).count();
    assert!(low == 0 || low == 4, "split across tier-1 HyperNodes: {nodes:?}");
    // Eight do not fit in one (each holds four): not placed at all, said per tier.
    let (reason, message, nodes) = cluster(8, 1);
    assert_eq!((reason, nodes.len()), (scheduler_core::Reason::TopologyUnsatisfiable, 0), "{message}");
    assert!(message.contains("volcano.sh/hypernode-tier-1"), "{message}");
    // Allowed up to tier 2, they span the spine.
    let (reason, _, nodes) = cluster(8, 2);
    assert_eq!((reason, nodes.len()), (scheduler_core::Reason::Scheduled, 8));
}

/// `highestTierName` names a tier by the HyperNodes' `tierName` (Volcano's session translates it
/// to `highestTierAllowed`): the same bound as the tier's number, resolved again when a HyperNode's
/// tier name changes; a name no HyperNode has is said, and the gang placed without a bound, as in
/// Volcano.
#[test]
fn a_volcano_gang_bounded_by_a_named_tier_stays_in_one_hypernode_of_that_tier() {
    let node = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
               "status": {"allocatable": {"cpu": "8", "pods": "10"}, "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    let hypernode = |name: &str, tier: i64, tier_name: &str, members: Value| {
        json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
               "spec": {"tier": tier, "tierName": tier_name, "members": members}})
    };
    let nodes = |pattern: &str| json!([{"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}]);
    let objects = |pods: usize, tier_name: &str| {
        let mut objects: Vec<Value> = (0..8).map(|i| node(&format!("n{i}"))).collect();
        objects.push(hypernode("s0", 1, "rack", nodes("^n[0-3]$")));
        objects.push(hypernode("s1", 1, "rack", nodes("^n[4-7]$")));
        objects.push(hypernode(
            "spine",
            2,
            "spine",
            json!([{"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^s[01]$"}}}]),
        ));
        objects.push(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ml"},
            "spec": {"minMember": pods, "networkTopology": {"mode": "hard", "highestTierName": tier_name}}}));
        objects.extend(whole_node_members("pg", pods));
        objects
    };
    let place = |snap: &Snapshot| {
        let plan = scheduler_core::schedule(
            snap,
            &scheduler_core::Config::default(),
            scheduler_core::Time::from_secs(1),
        );
        let o = plan.outcomes.iter().find(|o| o.gang.name == "pg").unwrap().clone();
        (o.reason, o.message, plan.bindings.len())
    };
    let (snap, problems) = assemble(objects(8, "rack"));
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(only_gang(&snap).topology_key.as_deref(), Some("volcano.sh/hypernode-tier-1"));
    let (reason, message, bound) = place(&snap);
    assert_eq!((reason, bound), (scheduler_core::Reason::TopologyUnsatisfiable, 0), "{message}");
    let (snap, _) = assemble(objects(8, "spine"));
    assert_eq!(place(&snap).0, scheduler_core::Reason::Scheduled);
    // A name no HyperNode has: said, and no bound.
    let (snap, problems) = assemble(objects(8, "block"));
    assert!(problems.iter().any(|p| p.contains("no HyperNode has tierName \"block\"")), "{problems:?}");
    assert_eq!((only_gang(&snap).topology_key.as_ref(), place(&snap).2), (None, 8));
    // Live: the racks renamed "block" — the gang's bound follows the HyperNodes.
    let mut live = scheduler_core::cluster::Live::new();
    for o in objects(8, "block") {
        live.push(o).unwrap();
    }
    live.refresh();
    assert_eq!(live.snapshot().gangs[0].topology_key, None);
    live.push(hypernode("s0", 1, "block", nodes("^n[0-3]$"))).unwrap();
    live.push(hypernode("s1", 1, "block", nodes("^n[4-7]$"))).unwrap();
    live.refresh();
    assert_eq!(live.snapshot().gangs[0].topology_key.as_deref(), Some("volcano.sh/hypernode-tier-1"));
    // Volcano's controller rewriting a HyperNode's status changes no tier: nothing resolved again.
    let before = live.stats().resolutions;
    let mut counted = hypernode("s0", 1, "block", nodes("^n[0-3]$"));
    counted["status"] = json!({"nodeCount": 4});
    live.push(counted).unwrap();
    live.refresh();
    assert_eq!(live.stats().resolutions, before, "a status update resolves nothing");
    // Gone: the name no longer names tier 1 only through s1, still there.
    live.remove("topology.volcano.sh/v1alpha1", "HyperNode", "", "s1");
    live.refresh();
    assert_eq!(live.stats().resolutions, before + 1);
    assert_eq!(live.snapshot().gangs[0].topology_key.as_deref(), Some("volcano.sh/hypernode-tier-1"));
}

#[test]
fn koordinator_annotations() {
    let ann = json!({"gang.scheduling.koordinator.sh/name": "kg", "gang.scheduling.koordinator.sh/min-available": "2",
                     "gang.scheduling.koordinator.sh/mode": "NonStrict", "gang.scheduling.koordinator.sh/waiting-time": "300s",
                     "gang.scheduling.koordinator.sh/groups": "[\"ml/kg\", \"ml/kh\"]"});
    let (snap, problems) = assemble(vec![pod("k0", json!({}), ann, json!({}))]);
    assert!(problems.is_empty(), "{problems:?}");
    let g = only_gang(&snap);
    assert_eq!((g.min_member, g.mode, g.source.dialect), (2, GangMode::NonStrict, Dialect::Koordinator));
    assert_eq!(g.gang_group, vec![GangKey::new("ml", "kh")], "itself is not its own group member");
}

#[test]
fn kai_podgroup_with_hierarchical_subgroups() {
    let (snap, problems) = assemble(vec![
        json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "kai", "namespace": "ml"},
               "spec": {"minMember": 6, "topologyConstraint": {"topology": "cluster-topology", "requiredTopologyLevel": "rack"},
                        "subGroups": [{"name": "r0", "minSubGroup": 2}, {"name": "r0-a", "parent": "r0", "minMember": 2},
                                      {"name": "r0-b", "parent": "r0", "minMember": 4}]}}),
        pod("x", json!({"kai.scheduler/subgroup-name": "r0-a"}), json!({"pod-group-name": "kai"}), json!({})),
        json!({"apiVersion": "kai.scheduler/v1", "kind": "Topology", "metadata": {"name": "cluster-topology"},
               "spec": {"levels": [{"nodeLabel": "zone"}, {"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}}),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
    let g = only_gang(&snap);
    assert_eq!((g.source.dialect, g.min_member, g.topology_key.as_deref()), (Dialect::Kai, 1, Some("rack")));
    assert_eq!(g.topology_object.as_deref(), Some("cluster-topology"));
    assert_eq!(snap.storage.kai_topologies["cluster-topology"], ["zone", "rack", "kubernetes.io/hostname"]);
    assert_eq!(g.min_pods(), Some(6));
    assert_eq!(members(&snap, "kai"), vec![("x".into(), Some("r0-a".into()))]);
}

#[test]
fn upstream_workload_podgroups_resolve_to_their_root() {
    let (snap, problems) = assemble(vec![
        json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup", "metadata": {"name": "disagg", "namespace": "ml"},
               "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}}, "workloadRef": {"workloadName": "w", "templateName": "t"}}}),
        json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup", "metadata": {"name": "prefill", "namespace": "ml"},
               "spec": {"parentCompositePodGroupName": "disagg", "schedulingPolicy": {"gang": {"minCount": 1}},
                        "workloadRef": {"workloadName": "w", "templateName": "p"}}}),
        json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup", "metadata": {"name": "decode", "namespace": "ml"},
               "spec": {"parentCompositePodGroupName": "disagg", "schedulingPolicy": {"gang": {"minCount": 2}},
                        "workloadRef": {"workloadName": "w", "templateName": "d"}}}),
        pod("d-0", json!({}), json!({}), json!({"schedulingGroup": {"podGroupName": "decode"}})),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
    let g = only_gang(&snap);
    assert_eq!((g.key.name.as_str(), g.min_member, g.min_pods()), ("disagg", 2, Some(3)));
    assert_eq!(members(&snap, "disagg"), vec![("d-0".into(), Some("decode".into()))]);
}

#[test]
fn bad_objects_become_problems_with_paths_not_panics() {
    let mut c = Cluster::new();
    c.push(json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "lots"}}},
        {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "neg", "namespace": "ml"}, "spec": {"minMember": -1}},
    ]}))
    .unwrap();
    c.push(pod(
        "two",
        json!({"kube-gang.io/gang": "a", "scheduling.x-k8s.io/pod-group": "b"}),
        json!({}),
        json!({}),
    ))
    .unwrap();
    c.push(pod("orphan", json!({"kube-gang.io/gang": "nowhere"}), json!({}), json!({}))).unwrap();
    assert!(c.push(json!({"kind": "Pod"})).is_err(), "no name");
    assert!(c.push(json!(42)).is_err());
    let a = c.snapshot();
    let text: Vec<String> = a.problems.iter().map(ToString::to_string).collect();
    let has = |needle: &str| text.iter().any(|t| t.contains(needle));
    assert!(has("Node n: status.allocatable[cpu]: \"lots\" is not a quantity"), "{text:#?}");
    assert!(has("PodGroup ml/neg: spec.minMember: must not be negative"), "{text:#?}");
    assert!(has("claimed by two gangs"), "{text:#?}");
    assert!(has("gang ml/nowhere does not exist"), "{text:#?}");
    assert!(a.snapshot.nodes.is_empty());
    assert!(
        a.snapshot.pods.iter().all(|p| p.key.name != "two"),
        "a pending pod claimed twice is never placed"
    );
}

#[test]
fn the_same_name_in_two_dialects_keeps_the_kube_gang_object() {
    let (snap, problems) = assemble(vec![
        json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 2}}),
        json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 5}}),
    ]);
    assert_eq!(only_gang(&snap).min_member, 2);
    assert!(problems.iter().any(|p| p.contains("defined by both")), "{problems:?}");
}

#[test]
fn the_provisioning_annotation_opts_a_gang_in_or_out_on_either_kind() {
    let (snap, problems) = assemble(vec![
        json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
               "metadata": {"name": "crd", "namespace": "ml", "annotations": {"kube-gang.io/provisioning": "false"}},
               "spec": {"minMember": 1}}),
        pod("c0", json!({"kube-gang.io/gang": "crd"}), json!({}), json!({})),
        pod(
            "a0",
            json!({"kube-gang.io/gang": "ann"}),
            json!({"kube-gang.io/min-member": "1", "kube-gang.io/provisioning": "true"}),
            json!({}),
        ),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
    let opt = |name: &str| snap.gangs.iter().find(|g| g.key.name == name).map(|g| g.provisioning);
    assert_eq!((opt("crd"), opt("ann")), (Some(Some(false)), Some(Some(true))));
    let (_, problems) = assemble(vec![pod(
        "b0",
        json!({"kube-gang.io/gang": "bad"}),
        json!({"kube-gang.io/min-member": "1", "kube-gang.io/provisioning": "yes"}),
        json!({}),
    )]);
    assert!(
        problems.iter().any(|p| p.contains(
            "metadata.annotations[kube-gang.io/provisioning]: \"yes\" is not \"true\" or \"false\""
        )),
        "{problems:?}"
    );
}

/// The state a member pod keeps for its gang (annotation `kube-gang.io/state`): the gang, the uid
/// of the object it was written for, half-bound since long ago.
fn kept(gang: &str, uid: Option<&str>) -> String {
    scheduler_core::model::Persisted {
        gang: GangKey::new("ml", gang),
        uid: uid.map(String::from),
        state: scheduler_core::model::GangState {
            degraded_since: Some(scheduler_core::Time::from_secs(1_000)),
            was_satisfied: true,
            rev: 3,
            ..Default::default()
        },
    }
    .to_text()
}

/// A gang object of each dialect deleted and created again under its name (another uid) while its
/// members stay, one of them on a node: the state they keep was the old object's, and the new
/// gang starts fresh — waiting for the rest to be placed, not released for a grace period that
/// ran out under its predecessor. The same members under the old object are released at once.
#[test]
fn a_gang_object_created_again_does_not_inherit_its_predecessors_state() {
    use scheduler_core::{Config, Reason, Time, schedule};
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "1", "pods": "110"}}});
    let objects = |uid: &str| -> Vec<(&str, Value, Value, Value)> {
        vec![
            (
                "upstream",
                json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                       "metadata": {"name": "pg", "namespace": "ml", "uid": uid},
                       "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}),
                json!({}),
                json!({"schedulingGroup": {"podGroupName": "pg"}}),
            ),
            (
                "volcano",
                json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                       "metadata": {"name": "pg", "namespace": "ml", "uid": uid}, "spec": {"minMember": 2}}),
                json!({"scheduling.k8s.io/group-name": "pg"}),
                json!({}),
            ),
            (
                "coscheduling",
                json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                       "metadata": {"name": "pg", "namespace": "ml", "uid": uid}, "spec": {"minMember": 2}}),
                json!({}),
                json!({}),
            ),
        ]
    };
    let now = Time::from_secs(2_000);
    for uid in ["old", "new"] {
        for (dialect, group, annotations, spec) in objects(uid) {
            let member = |name: &str, bound: bool| {
                let mut a = annotations.clone();
                a["kube-gang.io/state"] = json!(kept("pg", Some("old")));
                let labels = if dialect == "coscheduling" {
                    json!({"scheduling.x-k8s.io/pod-group": "pg"})
                } else {
                    json!({})
                };
                let mut p = pod(name, labels, a, spec.clone());
                p["metadata"]["uid"] = json!(name);
                if bound {
                    p["spec"]["nodeName"] = json!("n1");
                }
                p
            };
            let (snap, problems) =
                assemble(vec![node.clone(), group.clone(), member("w-0", true), member("w-1", false)]);
            assert!(problems.is_empty(), "{dialect}: {problems:?}");
            assert_eq!(only_gang(&snap).uid.as_deref(), Some(uid), "{dialect}: the gang is its object's");
            let plan = schedule(&snap, &Config::default(), now);
            let o = &plan.outcomes[0];
            if uid == "old" {
                assert_eq!(o.reason, Reason::Stale, "{dialect}: its own state, grace long over: {o:?}");
                assert_eq!(plan.evictions.len(), 1, "{dialect}");
            } else {
                assert_eq!(o.reason, Reason::Degraded, "{dialect}: fresh, a grace period of its own: {o:?}");
                assert_eq!(o.state.degraded_since, Some(now), "{dialect}");
                assert!(plan.evictions.is_empty(), "{dialect}");
                // The new object's state is written on its members, for its uid.
                assert_eq!(plan.keep.len(), 2, "{dialect}: {:?}", plan.keep);
                let written = scheduler_core::model::Persisted::from_text(&plan.keep[0].text).unwrap();
                assert_eq!(written.uid.as_deref(), Some("new"), "{dialect}");
            }
        }
    }
}

/// Eight nodes of 8 CPUs in one zone, two blocks of two racks of two; n0 and n4 each half taken
/// (so bin-packing, left alone, starts on both blocks at once). Pods of 4 CPUs: a rack holds 4
/// of them, a block 7.
fn leveled_cluster() -> Vec<Value> {
    let mut objects = Vec::new();
    for i in 0..8 {
        objects.push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("n{i}"), "labels": {"zone": "z0", "block": format!("b{}", i / 4),
                                                          "rack": format!("r{}", i / 2), "kubernetes.io/hostname": format!("n{i}")}},
            "status": {"allocatable": {"cpu": "8", "pods": "10"}, "conditions": [{"type": "Ready", "status": "True"}]}}));
    }
    for n in ["n0", "n4"] {
        objects.push(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("busy-{n}"), "namespace": "other"},
            "spec": {"nodeName": n, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}]},
            "status": {"phase": "Running"}}));
    }
    objects
}

/// The nodes `plan` binds the gang `name`'s members to, and its outcome.
fn placed(objects: Vec<Value>, name: &str) -> (scheduler_core::Reason, String, Vec<String>) {
    let (snap, problems) = assemble(objects);
    assert!(problems.is_empty(), "{problems:?}");
    let plan = scheduler_core::schedule(
        &snap,
        &scheduler_core::Config::default(),
        scheduler_core::Time::from_secs(1),
    );
    let o = plan.outcomes.iter().find(|o| o.gang.name == name).unwrap().clone();
    (o.reason, o.message, plan.bindings.iter().map(|b| b.node.to_string()).collect())
}

fn one_block(nodes: &[String]) -> bool {
    let block = |n: &String| n.trim_start_matches('n').parse::<usize>().unwrap() / 4;
    nodes.iter().all(|n| block(n) == block(&nodes[0]))
}

#[test]
fn a_kai_gang_relaxes_its_preferred_level_through_the_topology_it_names() {
    let kai = |levels: Value| {
        let mut objects = leveled_cluster();
        objects.push(json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "kai", "namespace": "ml"},
            "spec": {"minMember": 6, "topologyConstraint": {"topology": "cluster-topology",
                     "requiredTopologyLevel": "zone", "preferredTopologyLevel": "rack"}}}));
        for i in 0..6 {
            objects.push(pod(
                &format!("w{i}"),
                json!({}),
                json!({"pod-group-name": "kai"}),
                json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}]}),
            ));
        }
        if !levels.is_null() {
            objects.push(json!({"apiVersion": "kai.scheduler/v1", "kind": "Topology",
                "metadata": {"name": "cluster-topology"}, "spec": {"levels": levels}}));
        }
        placed(objects, "kai")
    };
    // No rack holds 6; the Topology puts block between rack and zone, and one block holds 7.
    let (reason, message, nodes) =
        kai(json!([{"nodeLabel": "zone"}, {"nodeLabel": "block"}, {"nodeLabel": "rack"}]));
    assert_eq!((reason, nodes.len()), (scheduler_core::Reason::Scheduled, 6), "{message}");
    assert!(one_block(&nodes), "split across blocks: {nodes:?} ({message})");
    // Without block among its levels the gang goes where the zone allows: both blocks.
    let (reason, _, nodes) = kai(json!([{"nodeLabel": "zone"}, {"nodeLabel": "rack"}]));
    assert_eq!((reason, nodes.len()), (scheduler_core::Reason::Scheduled, 6));
    assert!(!one_block(&nodes), "{nodes:?}");
    // As in KAI, a Topology that is not there, or lacks a level asked for, keeps the gang waiting.
    let (reason, message, nodes) = kai(Value::Null);
    assert_eq!((reason, nodes.len()), (scheduler_core::Reason::Unschedulable, 0), "{message}");
    assert!(message.contains("waits for KAI Topology \"cluster-topology\""), "{message}");
    let (reason, message, nodes) = kai(json!([{"nodeLabel": "zone"}, {"nodeLabel": "block"}]));
    assert_eq!((reason, nodes.len()), (scheduler_core::Reason::Unschedulable, 0), "{message}");
    assert!(message.contains("has no level \"rack\" (the preferred level)"), "{message}");
}

#[test]
fn a_kueue_preferred_level_is_relaxed_through_the_kueue_topology_that_has_it() {
    let gang = |topology: bool| {
        let mut objects = leveled_cluster();
        for i in 0..6 {
            objects.push(pod(
                &format!("w{i}"),
                json!({"kube-gang.io/gang": "train"}),
                json!({"kube-gang.io/min-member": "6", "kueue.x-k8s.io/podset-preferred-topology": "rack"}),
                json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}]}),
            ));
        }
        if topology {
            objects.push(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "default"},
                "spec": {"levels": [{"nodeLabel": "block"}, {"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}}));
        }
        placed(objects, "train")
    };
    let (reason, message, nodes) = gang(true);
    assert_eq!((reason, nodes.len()), (scheduler_core::Reason::Scheduled, 6), "{message}");
    assert!(one_block(&nodes), "split across blocks: {nodes:?} ({message})");
    // No order known: the preferred rack, then wherever there is room.
    let (reason, _, nodes) = gang(false);
    assert_eq!((reason, nodes.len()), (scheduler_core::Reason::Scheduled, 6));
    assert!(!one_block(&nodes), "{nodes:?}");
}

/// The gang of annotations the pod `ml/train-0` made from Job `job`'s template would define.
fn template_gang(job: &Value) -> Gang {
    let mut pod = job["spec"]["template"].clone();
    pod["apiVersion"] = json!("v1");
    pod["kind"] = json!("Pod");
    pod["metadata"]["namespace"] = json!("ml");
    pod["metadata"]["name"] = json!("train-0");
    let claim = scheduler_core::dialect::pod_claims(&pod).unwrap().remove(0);
    scheduler_core::dialect::annotation_gang(&claim, &pod).unwrap().unwrap()
}

#[test]
fn a_workloads_kai_topology_annotations_become_its_templates_levels_within_the_topology_named() {
    let job = |annotations: Value| {
        json!({"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "train", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"},
                            "annotations": annotations},
               "spec": {"parallelism": 3, "completions": 3, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    };
    let named = job(json!({"kai.scheduler/topology": "cluster-topology",
                           "kai.scheduler/topology-required-placement": "topology.kubernetes.io/zone",
                           "kai.scheduler/topology-preferred-placement": "topology.kubernetes.io/rack"}));
    let injected = scheduler_core::workload::inject(&named).unwrap();
    let a = &injected["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(a["kube-gang.io/topology-required"], "topology.kubernetes.io/zone");
    assert_eq!(a["kube-gang.io/topology-preferred"], "topology.kubernetes.io/rack");
    assert_eq!(a["kai.scheduler/topology"], "cluster-topology");
    assert!(scheduler_core::dialect::kai::workload_warnings(&named).is_empty());
    // The pods' gang is ordered by that Topology.
    let g = template_gang(&injected);
    assert_eq!(
        (g.topology_key.as_deref(), g.topology_preferred.as_deref(), g.topology_object.as_deref()),
        (Some("topology.kubernetes.io/zone"), Some("topology.kubernetes.io/rack"), Some("cluster-topology"))
    );
    // Without a Topology named, KAI applies no level: nothing is injected, and it is said.
    let unnamed = job(json!({"kai.scheduler/topology-required-placement": "topology.kubernetes.io/zone"}));
    let a =
        &scheduler_core::workload::inject(&unnamed).unwrap()["spec"]["template"]["metadata"]["annotations"];
    assert!(a.get("kube-gang.io/topology-required").is_none(), "{a}");
    assert_eq!(
        scheduler_core::dialect::kai::workload_warnings(&unnamed),
        [
            "metadata.annotations[kai.scheduler/topology-required-placement]: not applied: KAI applies topology \
          levels only within the Topology metadata.annotations[kai.scheduler/topology] names, and it names none"
        ]
    );
}

#[test]
fn a_kai_gang_waiting_for_its_topology_preempts_no_one() {
    // The nodes are full of pods of priority 0; the gang, at 1000, names a Topology the cluster
    // lacks: evicting anyone would not let it start, so no one is evicted.
    let mut objects = leveled_cluster();
    objects.push(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}));
    for i in 0..8 {
        objects.push(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("fill-{i}"), "namespace": "other"},
            "spec": {"nodeName": format!("n{i}"), "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}]},
            "status": {"phase": "Running"}}));
    }
    objects.push(json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
        "metadata": {"name": "kai", "namespace": "ml"},
        "spec": {"minMember": 2, "priorityClassName": "high",
                 "topologyConstraint": {"topology": "missing", "requiredTopologyLevel": "rack"}}}));
    for i in 0..2 {
        objects.push(pod(&format!("w{i}"), json!({}), json!({"pod-group-name": "kai"}),
            json!({"priorityClassName": "high", "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "8"}}}]})));
    }
    let plan = |objects: Vec<Value>| {
        let (snap, problems) = assemble(objects);
        assert!(problems.is_empty(), "{problems:?}");
        let plan = scheduler_core::schedule(
            &snap,
            &scheduler_core::Config::default(),
            scheduler_core::Time::from_secs(1),
        );
        let o = plan.outcomes.iter().find(|o| o.gang.name == "kai").unwrap().clone();
        (o.reason, o.message, plan.evictions.len(), plan.bindings.len())
    };
    let (reason, message, evicted, bound) = plan(objects.clone());
    assert_eq!((reason, evicted, bound), (scheduler_core::Reason::Unschedulable, 0, 0), "{message}");
    assert!(message.contains("waits for KAI Topology \"missing\""), "{message}");
    // With the Topology there, the same gang does preempt (pods of one rack make room; which
    // rack, and so how many victims, is the preemption's choice).
    objects
        .push(json!({"apiVersion": "kai.scheduler/v1", "kind": "Topology", "metadata": {"name": "missing"},
        "spec": {"levels": [{"nodeLabel": "rack"}]}}));
    let (reason, message, evicted, _) = plan(objects);
    assert_eq!(reason, scheduler_core::Reason::Preempting, "{message}");
    assert!(evicted >= 2, "{message}");
}

#[test]
fn nodes_sharing_a_hostname_value_are_one_domain_and_nodes_named_by_it_one_each() {
    // Required anti-affinity by hostname among three replicas: one per domain of the key.
    let placed_with = |hostnames: [&str; 3]| {
        let mut objects = Vec::new();
        for (i, h) in hostnames.iter().enumerate() {
            objects.push(json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": format!("n{i}"), "labels": {"kubernetes.io/hostname": h}},
                "status": {"allocatable": {"cpu": "8", "pods": "10"}, "conditions": [{"type": "Ready", "status": "True"}]}}));
        }
        for i in 0..3 {
            objects.push(pod(&format!("r{i}"), json!({"app": "x"}), json!({}), json!({
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "x"}}}]}}})));
        }
        let (snap, problems) = assemble(objects);
        assert!(problems.is_empty(), "{problems:?}");
        let plan = scheduler_core::schedule(
            &snap,
            &scheduler_core::Config::default(),
            scheduler_core::Time::from_secs(1),
        );
        let mut nodes: Vec<String> = plan.bindings.iter().map(|b| b.node.to_string()).collect();
        nodes.sort();
        nodes
    };
    // Each node's hostname its own name (as the kubelet sets it): three domains, three placed.
    assert_eq!(placed_with(["n0", "n1", "n2"]), ["n0", "n1", "n2"]);
    // Two nodes report one hostname: they are one domain, and only two replicas fit.
    let nodes = placed_with(["shared", "shared", "n2"]);
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert!(nodes.contains(&"n2".to_string()), "{nodes:?}");
}

#[test]
fn a_kai_placement_the_templates_own_level_overrides_is_named() {
    let mut job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"},
                     "annotations": {"kai.scheduler/topology": "cluster-topology",
                                     "kai.scheduler/topology-required-placement": "topology.kubernetes.io/zone"}},
        "spec": {"parallelism": 2, "completions": 2, "template": {
            "metadata": {"annotations": {"kube-gang.io/topology-required": "example.com/rack"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}});
    let verdict = scheduler_core::admit::admit(&mut job, None, None);
    assert!(verdict.allowed(), "{verdict:?}");
    assert!(
        verdict.warnings.iter().any(|w| w
            == "metadata.annotations[kai.scheduler/topology-required-placement]: \"topology.kubernetes.io/zone\" is not used: \
                spec.template.metadata.annotations[kube-gang.io/topology-required] sets \"example.com/rack\""),
        "{:?}",
        verdict.warnings
    );
    // The template keeps its own level, and no KAI Topology is tied to it.
    let a = &job["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(a["kube-gang.io/topology-required"].as_str(), Some("example.com/rack"));
    assert!(a.get("kai.scheduler/topology").is_none(), "{a}");
}

#[test]
fn a_subgroup_bound_more_loosely_than_its_parent_waits_saying_so() {
    // The gang is required in one rack; its subgroup asks for a block, which a Kueue Topology
    // orders above the rack: Grove's rule (a child's level the same as or narrower than its
    // parent's) holds it back with the reason. The same subgroup asking for a host is placed.
    let objects = |sub_level: &str| {
        let mut objects = leveled_cluster();
        objects.push(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": "zone"}, {"nodeLabel": "block"}, {"nodeLabel": "rack"},
                                {"nodeLabel": "kubernetes.io/hostname"}]}}),
        );
        objects.push(json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "tree", "namespace": "ml"},
            "spec": {"minMember": 1, "topology": {"required": "rack"},
                     "subGroups": [{"name": "workers", "minMember": 1, "topology": {"required": sub_level}}]}}));
        objects.push(pod(
            "w0",
            json!({"kube-gang.io/gang": "tree", "kube-gang.io/subgroup": "workers"}),
            json!({}),
            json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}),
        ));
        objects
    };
    let (reason, message, nodes) = placed(objects("block"), "tree");
    assert_eq!((reason, nodes.len()), (scheduler_core::Reason::Unschedulable, 0), "{message}");
    assert!(
        message.contains("subgroup \"workers\" requires level \"block\", broader than the gang's \"rack\""),
        "{message}"
    );
    let (reason, message, nodes) = placed(objects("kubernetes.io/hostname"), "tree");
    assert!(reason.is_satisfied(), "{message}");
    assert_eq!(nodes.len(), 1);
    // A subgroup between them with no level of its own: the nearest level above still binds.
    let mut nested = objects("block");
    for o in &mut nested {
        if o["kind"] == "Gang" {
            o["spec"]["subGroups"] = json!([{"name": "pool", "minMember": 1},
                {"name": "workers", "parent": "pool", "minMember": 1, "topology": {"required": "block"}}]);
        }
    }
    let (reason, message, _) = placed(nested, "tree");
    assert_eq!(reason, scheduler_core::Reason::Unschedulable, "{message}");
    assert!(message.contains("broader than the gang's \"rack\""), "{message}");
}

/// A PodGroup as Kubernetes 1.38's Job controller makes for Job `train` (KEP-5547), with the
/// policy it was given.
fn job_podgroup(policy: Value) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "train-x7k2p", "namespace": "ml",
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u1", "controller": true}]},
        "spec": {"schedulingPolicy": policy}})
}

/// A pod of Job `train`, opted in to kube-gang (our labels injected into its template), as the
/// Job controller of Kubernetes 1.38 creates it: naming its PodGroup.
fn opted_in_job_pod(name: &str) -> Value {
    pod(
        name,
        json!({"kube-gang.io/gang": "train", "batch.kubernetes.io/job-name": "train"}),
        json!({"kube-gang.io/min-member": "2"}),
        json!({"schedulingGroup": {"podGroupName": "train-x7k2p"}}),
    )
}

#[test]
fn an_opted_in_job_keeps_its_gang_beside_the_basic_podgroup_its_controller_makes() {
    let (snap, problems) =
        assemble(vec![job_podgroup(json!({"basic": {}})), opted_in_job_pod("w0"), opted_in_job_pod("w1")]);
    assert!(problems.is_empty(), "{problems:?}");
    // The basic PodGroup is no gang of its own (not listed, not waited for).
    let g = only_gang(&snap);
    assert_eq!(
        (g.key.name.as_str(), g.min_member, g.source.dialect),
        ("train", 2, Dialect::KubeGangAnnotations)
    );
    assert_eq!(members(&snap, "train").len(), 2);
    // A pod that names only the basic PodGroup (a Job that did not opt in) belongs to no gang.
    let (snap, problems) = assemble(vec![
        job_podgroup(json!({"basic": {}})),
        pod("plain", json!({}), json!({}), json!({"schedulingGroup": {"podGroupName": "train-x7k2p"}})),
    ]);
    assert!(problems.is_empty() && snap.gangs.is_empty(), "{problems:?} {:?}", snap.gangs);
    assert!(snap.pods[0].gang.is_none());
}

#[test]
fn an_opted_in_job_whose_podgroup_is_a_gang_is_claimed_twice_and_said_so() {
    // The 1.36 alpha made a gang PodGroup for an Indexed Job with parallelism = completions.
    let (snap, problems) = assemble(vec![
        job_podgroup(json!({"gang": {"minCount": 2}})),
        opted_in_job_pod("w0"),
        opted_in_job_pod("w1"),
    ]);
    // Ours stands: the pods are placed with the gang the Job opted in to.
    assert_eq!(members(&snap, "train").len(), 2);
    assert!(members(&snap, "train-x7k2p").is_empty());
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].contains("spec.schedulingGroup.podGroupName: pod is claimed by two gangs: kube-gang/annotations ml/train (metadata.labels[kube-gang.io/gang])")
            && problems[0].contains("upstream ml/train-x7k2p, a group that defines a gang"),
        "{}",
        problems[0]
    );
    // One group named in two dialects is one claim: the pod joins its tree, nothing reported.
    let (snap, problems) = assemble(vec![
        json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup", "metadata": {"name": "llm", "namespace": "ml"},
               "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 1}}}}),
        json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup", "metadata": {"name": "a", "namespace": "ml"},
               "spec": {"parentCompositePodGroupName": "llm", "schedulingPolicy": {"gang": {"minCount": 1}}}}),
        pod(
            "a-0",
            json!({"scheduling.x-k8s.io/pod-group": "a"}),
            json!({}),
            json!({"schedulingGroup": {"podGroupName": "a"}}),
        ),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(members(&snap, "llm"), [("a-0".to_string(), Some("a".to_string()))]);
    // So with a gang's annotations on the pod: no gang of the leaf's name is made of them.
    let tree = || {
        vec![
            json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup", "metadata": {"name": "llm", "namespace": "ml"},
                   "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 1}}}}),
            json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup", "metadata": {"name": "a", "namespace": "ml"},
                   "spec": {"parentCompositePodGroupName": "llm", "schedulingPolicy": {"gang": {"minCount": 1}}}}),
        ]
    };
    let mut objects = tree();
    objects.push(pod(
        "a-0",
        json!({"kube-gang.io/gang": "a"}),
        json!({"kube-gang.io/min-member": "2"}),
        json!({"schedulingGroup": {"podGroupName": "a"}}),
    ));
    let (snap, problems) = assemble(objects);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(snap.gangs.iter().map(|g| g.key.name.as_str()).collect::<Vec<_>>(), ["llm"]);
    assert_eq!(members(&snap, "llm").len(), 1);
    // A gang another object defines under the leaf's name keeps its claim, and the conflict is said.
    let mut objects = tree();
    objects.push(json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "a", "namespace": "ml"}, "spec": {"minMember": 1}}));
    objects.push(pod(
        "a-0",
        json!({"scheduling.x-k8s.io/pod-group": "a"}),
        json!({}),
        json!({"schedulingGroup": {"podGroupName": "a"}}),
    ));
    let (snap, problems) = assemble(objects);
    assert_eq!(members(&snap, "a").len(), 1);
    assert!(problems.iter().any(|p| p.contains("claimed by two gangs")), "{problems:?}");
    // A PodGroup not created yet decides nothing either.
    let (snap, problems) = assemble(vec![opted_in_job_pod("w0"), opted_in_job_pod("w1")]);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(members(&snap, "train").len(), 2);
}

/// Koordinator's documented ClusterNetworkTopology: spines over blocks over nodes.
fn network_topology() -> Value {
    json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default"},
        "spec": {"networkTopologySpec": [
            {"labelKey": ["network.topology.nvidia.com/spine"], "topologyLayer": "SpineLayer"},
            {"labelKey": ["network.topology.nvidia.com/block"], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
            {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"}]}})
}

#[test]
fn a_koordinator_gang_takes_its_levels_from_the_cluster_network_topology_as_it_comes_and_goes() {
    // The scheduler's incremental view: what changes is read again, and gangs resolved again only
    // when something they read changed.
    let mut live = scheduler_core::cluster::Live::new();
    // Two spines of two blocks of two 8-GPU nodes, as in Koordinator's walkthrough.
    for i in 0..8 {
        let (spine, block) = (format!("s{}", i / 4 + 1), format!("b{}", i / 2 + 1));
        live.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("n{i}"), "labels": {
                "network.topology.nvidia.com/spine": spine, "network.topology.nvidia.com/block": block}},
            "status": {"allocatable": {"cpu": "96", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}}}))
        .unwrap();
    }
    live.push(json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ml", "annotations": {
            "gang.scheduling.koordinator.sh/network-topology-spec":
                r#"{"gatherStrategy": [{"layer": "SpineLayer", "strategy": "MustGather"}, {"layer": "BlockLayer", "strategy": "PreferGather"}]}"#}},
        "spec": {"minMember": 4}}))
    .unwrap();
    for i in 0..4 {
        live.push(pod(
            &format!("w{i}"),
            json!({"pod-group.scheduling.sigs.k8s.io": "train"}),
            json!({}),
            json!({}),
        ))
        .unwrap();
    }
    let spec_path = "metadata.annotations[gang.scheduling.koordinator.sh/network-topology-spec]";
    let said = |live: &scheduler_core::cluster::Live, what: &str| {
        live.problems().iter().any(|p| p.to_string().contains(what))
    };
    // No ClusterNetworkTopology yet: said, and the gang has no levels.
    live.refresh();
    let g = only_gang(live.snapshot());
    assert_eq!((g.topology_key.as_deref(), g.topology_preferred.as_deref()), (None, None));
    assert!(said(&live, &format!("{spec_path}: not evaluated")), "{:?}", live.problems());
    // It arrives: the gang is bound to one spine and gathered as tightly as it goes, from a node up.
    live.push(network_topology()).unwrap();
    live.refresh();
    assert!(live.problems().is_empty(), "{:?}", live.problems());
    let g = only_gang(live.snapshot());
    assert_eq!(
        (g.topology_key.as_deref(), g.topology_preferred.as_deref()),
        (
            Some("koordinator.sh/network-layer-SpineLayer"),
            Some("koordinator.sh/network-layer-NodeTopologyLayer")
        )
    );
    let plan = scheduler_core::schedule(
        live.snapshot(),
        &scheduler_core::Config::default(),
        scheduler_core::Time::from_secs(1),
    );
    // Four 1-GPU pods: the tightest domain with room is one node.
    let nodes: std::collections::BTreeSet<&str> = plan.bindings.iter().map(|b| b.node.as_str()).collect();
    assert_eq!((plan.bindings.len(), nodes.len()), (4, 1), "{nodes:?}");
    // The same object again, or its status rewritten (as Koordinator does when nodes change),
    // resolves nothing again.
    let before = live.stats().resolutions;
    let mut rewritten = network_topology();
    rewritten["metadata"]["resourceVersion"] = json!("2");
    rewritten["status"] = json!({"detailStatus": [{"topologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"}, "nodeNum": 4}]});
    live.push(rewritten).unwrap();
    live.refresh();
    assert_eq!(live.stats().resolutions, before);
    // An update that cannot be read keeps the layers (Koordinator keeps its tree), said.
    let mut broken = network_topology();
    broken["metadata"]["resourceVersion"] = json!("3");
    broken["spec"]["networkTopologySpec"][1]["parentTopologyLayer"] = json!("Nowhere");
    live.push(broken).unwrap();
    live.refresh();
    assert_eq!(
        only_gang(live.snapshot()).topology_key.as_deref(),
        Some("koordinator.sh/network-layer-SpineLayer")
    );
    assert!(said(&live, "not found in spec"), "{:?}", live.problems());
    // It goes: said again, and the gang is placed without levels.
    live.remove("scheduling.koordinator.sh/v1alpha1", "ClusterNetworkTopology", "", "default");
    live.refresh();
    assert_eq!(only_gang(live.snapshot()).topology_key, None);
    assert!(said(&live, "no ClusterNetworkTopology named \"default\""), "{:?}", live.problems());
}

/// KAI's `kai.scheduler/preemptibility` label on a workload is its gang's, as KAI's pod grouper
/// makes it its PodGroup's: copied to the pod templates at admission (over a template's own,
/// named), refused unless a value KAI knows. KAI's `priorityClassName` label is named as unused.
#[test]
fn a_workloads_kai_preemptibility_label_becomes_its_gang_s_and_a_bad_one_is_refused() {
    let job = |labels: Value, template_labels: Value| {
        let mut l = json!({"kube-gang.io/enabled": "true"});
        l.as_object_mut().unwrap().extend(labels.as_object().unwrap().clone());
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "ml", "labels": l},
            "spec": {"parallelism": 2, "completions": 2, "template": {
                "metadata": {"labels": template_labels},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}})
    };
    let gang_of = template_gang;
    let mut semi = job(
        json!({"kai.scheduler/preemptibility": "semi-preemptible", "priorityClassName": "train"}),
        json!({}),
    );
    let verdict = scheduler_core::admit::admit(&mut semi, None, None);
    assert!(verdict.allowed(), "{verdict:?}");
    assert_eq!(
        semi["spec"]["template"]["metadata"]["labels"]["kai.scheduler/preemptibility"],
        "semi-preemptible"
    );
    assert_eq!(gang_of(&semi).disruption, scheduler_core::model::Disruption::Surplus);
    assert!(
        verdict
            .warnings
            .iter()
            .any(|w| w.starts_with("metadata.labels[priorityClassName]: \"train\" is not used")),
        "{:?}",
        verdict.warnings
    );
    // The workload's value wins over the template's own (KAI reads the top owner's first), and
    // the template's is named as overridden.
    let mut own = job(
        json!({"kai.scheduler/preemptibility": "preemptible"}),
        json!({"kai.scheduler/preemptibility": "non-preemptible"}),
    );
    let verdict = scheduler_core::admit::admit(&mut own, None, None);
    assert!(verdict.allowed(), "{verdict:?}");
    assert_eq!(gang_of(&own).disruption, scheduler_core::model::Disruption::Members);
    assert!(
        verdict.warnings.iter().any(|w| w
            == "spec.template.metadata.labels[kai.scheduler/preemptibility]: \"non-preemptible\" is overridden by the \
                workload's \"preemptible\" (metadata.labels[kai.scheduler/preemptibility]), as KAI's pod grouper reads \
                the top owner's label first"),
        "{:?}",
        verdict.warnings
    );
    // A value KAI does not know: refused at the label (every pod would carry it).
    let mut bad = job(json!({"kai.scheduler/preemptibility": "Non-Preemptible"}), json!({}));
    let verdict = scheduler_core::admit::admit(&mut bad, None, None);
    assert!(!verdict.allowed(), "{verdict:?}");
    assert!(format!("{verdict:?}").contains("metadata.labels[kai.scheduler/preemptibility]"), "{verdict:?}");
}

/// KubeRay's batch-scheduling labels: `ray.io/priority-class-name` is the PodGroup's class in
/// KubeRay's Volcano integration, not the pods' — named as unused; `ray.io/gang-scheduling-
/// enabled` on a cluster not opted in to kube-gang is named as not the opt-in.
#[test]
fn kuberay_batch_scheduling_labels_are_named_where_they_do_not_take_effect() {
    let cluster = |labels: Value| {
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "r", "namespace": "ml", "labels": labels},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}},
                     "workerGroupSpecs": [{"groupName": "w", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                         "template": {"spec": {"containers": [{"name": "w", "image": "ray"}]}}}]}})
    };
    let warnings = |obj: &Value| scheduler_core::validate::validate(obj, None).warnings;
    let w = warnings(&cluster(json!({"kube-gang.io/enabled": "true", "ray.io/priority-class-name": "high"})));
    assert!(
        w.iter().any(|w| w.starts_with("metadata.labels[ray.io/priority-class-name]: \"high\" is not used")),
        "{w:?}"
    );
    let w = warnings(&cluster(json!({"ray.io/gang-scheduling-enabled": "true"})));
    assert!(
        w.iter()
            .any(|w| w.starts_with("metadata.labels[ray.io/gang-scheduling-enabled]: asks KubeRay's own")),
        "{w:?}"
    );
    // Opted in, the label asks nothing more: not named.
    let w =
        warnings(&cluster(json!({"kube-gang.io/enabled": "true", "ray.io/gang-scheduling-enabled": "true"})));
    assert!(!w.iter().any(|w| w.contains("ray.io/gang-scheduling-enabled")), "{w:?}");
}

/// Eight 8-CPU nodes in two tier-1 HyperNodes of four (`s0`: n0–n3, `s1`: n4–n7) under a tier-2
/// spine.
fn hypernode_cluster() -> Vec<Value> {
    let mut objects: Vec<Value> = (0..8)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("n{i}")},
                   "status": {"allocatable": {"cpu": "8", "pods": "10"}, "conditions": [{"type": "Ready", "status": "True"}]}})
        })
        .collect();
    for (name, pattern) in [("s0", "^n[0-3]$"), ("s1", "^n[4-7]$")] {
        objects.push(json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}]}}));
    }
    objects.push(json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "spine"},
        "spec": {"tier": 2, "members": [{"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^s"}}}]}}));
    objects
}

/// `objects` on [`hypernode_cluster`], a whole node taken on each of `busy` by a pod outside any
/// gang, assembled (no problem) and scheduled once: the snapshot, each bound pod's node, and the
/// outcomes.
fn on_hypernodes(
    objects: Vec<Value>,
    busy: &[&str],
) -> (Snapshot, BTreeMap<String, String>, Vec<scheduler_core::plan::Outcome>) {
    let mut all = hypernode_cluster();
    for n in busy {
        all.push(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("busy-{n}"), "namespace": "other"},
            "spec": {"nodeName": n, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "8"}}}]},
            "status": {"phase": "Running"}}));
    }
    all.extend(objects);
    let (snap, problems) = assemble(all);
    assert!(problems.is_empty(), "{problems:?}");
    let plan = scheduler_core::schedule(
        &snap,
        &scheduler_core::Config::default(),
        scheduler_core::Time::from_secs(1),
    );
    let placed = plan.bindings.iter().map(|b| (b.pod.name.to_string(), b.node.to_string())).collect();
    (snap, placed, plan.outcomes)
}

/// A Volcano Job task's `partitionPolicy` (Volcano ≥ 1.13): the controller labels each pod with
/// its partition and writes a `subGroupPolicy` per partitioned task; each partition of
/// `partitionSize` pods lands in one tier-1 HyperNode, and `minPartitions` of them must fit.
#[test]
fn a_volcano_job_s_partitions_each_land_in_one_hypernode_of_their_tier() {
    let job = |replicas: u32, size: u32, min: u32, cpu: &str| {
        json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "llm", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
            "spec": {"schedulerName": "gang-scheduler", "tasks": [
                {"name": "worker", "replicas": replicas,
                 "partitionPolicy": {"totalPartitions": replicas / size, "partitionSize": size, "minPartitions": min,
                                     "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
                 "template": {"spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}}]}})
    };
    let run = |job: Value, busy: &[&str]| {
        let expanded = scheduler_core::workload::expand(&job).unwrap();
        let pg = &expanded[0];
        assert_eq!(
            pg["spec"]["subGroupPolicy"][0]["matchLabelKeys"],
            json!(["volcano.sh/partition-id"]),
            "{pg}"
        );
        let (snap, placed, outcomes) = on_hypernodes(expanded, busy);
        let o = outcomes.iter().find(|o| o.gang.name == "llm").unwrap().clone();
        (o.reason, o.message, placed, snap)
    };
    // Two partitions of four 4-CPU pods, n0 and n4 busy: each partition within s0 or within s1
    // (never split), though packing them in order would put the second across both.
    let (reason, message, placed, snap) = run(job(8, 4, 2, "4"), &["n0", "n4"]);
    assert_eq!(reason, scheduler_core::Reason::Scheduled, "{message}");
    let g = only_gang(&snap);
    let names: Vec<&str> = g.subgroups.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["worker", "worker-0", "worker-1"], "{g:#?}");
    assert_eq!((g.subgroups[0].min_member, g.subgroups[0].pod_floor, g.subgroups[1].min_member), (2, 8, 4));
    for part in [0..4, 4..8] {
        let hypernodes: BTreeSet<bool> = part
            .map(|i| ["n0", "n1", "n2", "n3"].contains(&placed[&format!("llm-worker-{i}")].as_str()))
            .collect();
        assert_eq!(hypernodes.len(), 1, "a partition split across HyperNodes: {placed:?}");
    }
    // Whole-node pods, free nodes n3 (s0) and n4–n6 (s1): four pods fit, but two partitions of
    // two do not (s0 holds one) — nothing is placed, a partition named.
    let (reason, message, placed, _) = run(job(4, 2, 2, "8"), &["n0", "n1", "n2", "n7"]);
    assert_eq!(placed.len(), 0, "{reason:?} {message}");
    assert!(message.contains("subgroup worker-"), "{message}");
    assert!(message.contains("all within one tier-1 Volcano HyperNode"), "{message}");
    // minPartitions left at 0: the task's minimum is every replica, and each partition still
    // keeps to one HyperNode — the second has none with two free nodes, so nothing is placed.
    let (reason, message, placed, _) = run(job(4, 2, 0, "8"), &["n0", "n1", "n2", "n7"]);
    assert_eq!(placed.len(), 0, "{reason:?} {message}: {placed:?}");
    // Needing one partition, the job starts with the one that fits, whole, in s1.
    let (reason, message, placed, _) = run(job(4, 2, 1, "8"), &["n0", "n1", "n2", "n7"]);
    assert_eq!(reason, scheduler_core::Reason::Scheduled, "{message}");
    let in_s1 = |pod: &str| placed.get(pod).is_some_and(|n| ["n4", "n5", "n6"].contains(&n.as_str()));
    assert!(
        (in_s1("llm-worker-0") && in_s1("llm-worker-1")) || (in_s1("llm-worker-2") && in_s1("llm-worker-3")),
        "{placed:?}"
    );
}

/// A PodGroup's own `subGroupPolicy`: its pods grouped by `matchLabelKeys` values, each group
/// ready at `subGroupSize` pods and bound by the policy's tier, `minSubGroups` of them needed;
/// pods no policy groups are the gang's and need no group; a group not among the pods yet is
/// waited for.
#[test]
fn a_volcano_podgroup_s_sub_group_policy_groups_its_pods_by_label_values() {
    let member = |name: &str, rack: Option<&str>| {
        let labels = rack.map_or(json!({}), |r| json!({"rack-id": r}));
        pod(
            name,
            labels,
            json!({"scheduling.k8s.io/group-name": "pg"}),
            json!({"schedulerName": "gang-scheduler",
                   "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "8"}}}]}),
        )
    };
    let run = |members: Vec<Value>| {
        let mut objects = vec![json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ml"},
            "spec": {"minMember": 3, "subGroupPolicy": [{"name": "racks", "subGroupSize": 2, "minSubGroups": 2,
                "matchLabelKeys": ["rack-id"], "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]}})];
        objects.extend(members);
        let (snap, placed, outcomes) = on_hypernodes(objects, &[]);
        let message = outcomes.iter().find(|o| o.gang.name == "pg").unwrap().message.clone();
        (only_gang(&snap).clone(), placed, message)
    };
    // One group of two and a pod of no group: the second group is waited for.
    let (g, placed, message) = run(vec![member("a0", Some("a")), member("a1", Some("a")), member("x", None)]);
    let shape: Vec<(&str, Option<&str>, u32)> =
        g.subgroups.iter().map(|s| (s.name.as_str(), s.parent.as_deref(), s.min_member)).collect();
    assert_eq!(
        shape,
        [
            ("racks", None, 2),
            ("racks-a", Some("racks"), 2),
            ("racks-missing-1", Some("racks"), 2),
            ("ungrouped", None, 0)
        ]
    );
    assert_eq!((g.min_member, g.pod_floor), (2, 3));
    assert!(placed.is_empty(), "{placed:?}: {message}");
    // Two groups: placed, each within one tier-1 HyperNode.
    let (_, placed, message) = run(vec![
        member("a0", Some("a")),
        member("a1", Some("a")),
        member("b0", Some("b")),
        member("b1", Some("b")),
        member("x", None),
    ]);
    assert_eq!(placed.len(), 5, "{message}");
    let s0 = |p: &str| ["n0", "n1", "n2", "n3"].contains(&placed[p].as_str());
    assert_eq!((s0("a0"), s0("b0")), (s0("a1"), s0("b1")), "{placed:?}");
}

/// Groups a policy makes never take a name already used (task `worker-1` beside task `worker`'s
/// partition 1), and a partitioned task's pods without the group label are in a subgroup of their
/// own that needs none of them, not lost.
#[test]
fn partition_names_never_clash_and_unlabelled_task_pods_still_count() {
    let member = |name: &str, task: &str, partition: Option<&str>| {
        let mut labels = json!({"volcano.sh/task-spec": task});
        if let Some(p) = partition {
            labels["volcano.sh/partition-id"] = json!(p);
        }
        pod(
            name,
            labels,
            json!({"scheduling.k8s.io/group-name": "pg", "volcano.sh/task-spec": task}),
            json!({"schedulerName": "gang-scheduler",
                   "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}),
        )
    };
    let mut objects = hypernode_cluster();
    objects.push(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": {"minMember": 5, "minTaskMember": {"worker": 4, "worker-1": 1},
                 "subGroupPolicy": [{"name": "worker", "subGroupSize": 2,
                     "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
                     "matchLabelKeys": ["volcano.sh/partition-id"]}]}}));
    objects.extend([
        member("w0", "worker", Some("0")),
        member("w1", "worker", Some("0")),
        member("w2", "worker", Some("1")),
        member("w3", "worker", Some("1")),
        member("w4", "worker", None),
        member("other", "worker-1", None),
    ]);
    let (snap, problems) = assemble(objects);
    assert!(problems.is_empty(), "{problems:?}");
    let g = only_gang(&snap);
    let mut names: Vec<&str> = g.subgroups.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["worker", "worker-0", "worker-1", "worker-1-2", "worker-ungrouped"], "{g:#?}");
    let leaf_of = |pod: &str| {
        snap.pods.iter().find(|p| p.key.name == pod).and_then(|p| p.gang.as_ref()?.subgroup.clone()).unwrap()
    };
    assert_eq!(leaf_of("other"), "worker-1", "the task keeps its name");
    assert_eq!(leaf_of("w2"), "worker-1-2", "the partition gets another");
    assert_eq!(leaf_of("w4"), "worker-ungrouped");
    assert!(
        scheduler_core::validate::gang_tree_errors(g).is_empty(),
        "{:?}",
        scheduler_core::validate::gang_tree_errors(g)
    );
    let plan = scheduler_core::schedule(
        &snap,
        &scheduler_core::Config::default(),
        scheduler_core::Time::from_secs(1),
    );
    assert_eq!(plan.bindings.len(), 6, "{:?}", plan.outcomes);
}

/// A Kubeflow training job's Volcano PodGroup still Pending, with no pods yet: the gang's message
/// says why (the operator waits for it to leave Pending) and whether the scheduler will move it.
#[test]
fn a_kubeflow_job_s_pending_volcano_podgroup_says_who_waits_for_it() {
    let message = |namespace_labels: Value| {
        let objects = vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": namespace_labels}}),
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "bert", "namespace": "ml", "ownerReferences": [
                    {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "bert", "uid": "u", "controller": true}]},
                "spec": {"minMember": 4}, "status": {"phase": "Pending"}}),
        ];
        let (snap, problems) = assemble(objects);
        assert!(problems.is_empty(), "{problems:?}");
        let plan = scheduler_core::schedule(
            &snap,
            &scheduler_core::Config::default(),
            scheduler_core::Time::from_secs(1),
        );
        plan.outcomes.iter().find(|o| o.gang.name == "bert").unwrap().message.clone()
    };
    let m = message(json!({"kube-gang.io/enabled": "true"}));
    assert!(m.contains("the Kubeflow training operator creates the PyTorchJob's pods once it is Inqueue, to which the scheduler moves it"), "{m}");
    let m = message(json!({}));
    assert!(m.contains("namespace ml is not opted in"), "{m}");
}

/// What a review found Volcano counts and we did not: a task with `minAvailable: 0` (its pods
/// count toward the job's `minAvailable`, never alone), pods naming their task only by label, a
/// partitioned task's pods without the partition label (they count toward the task's minimum),
/// and a partition filled by its task's floor that fits only in its second-tightest HyperNode.
#[test]
fn volcano_counts_every_pod_toward_the_job_and_its_task() {
    let run = |objects: Vec<Value>, busy: &[&str]| {
        let (_, placed, outcomes) = on_hypernodes(objects, busy);
        let message = outcomes.iter().map(|o| o.message.clone()).collect::<Vec<_>>().join(" | ");
        (placed, message)
    };
    let task = |name: &str, replicas: u32, min: Option<u32>, cpu: &str| {
        let mut t = json!({"name": name, "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}});
        if let Some(m) = min {
            t["minAvailable"] = json!(m);
        }
        t
    };
    let job = |min: u32, tasks: Vec<Value>| {
        json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
            "spec": {"schedulerName": "gang-scheduler", "minAvailable": min, "tasks": tasks}})
    };
    // A task that needs none of its pods: three pods of any task start the job.
    let zero = job(3, vec![task("master", 1, Some(1), "1"), task("worker", 4, Some(0), "1")]);
    let (placed, message) = run(scheduler_core::workload::expand(&zero).unwrap(), &[]);
    assert_eq!(placed.len(), 5, "{message}");
    // A pod naming its task by label only counts toward it.
    let mut pods = scheduler_core::workload::expand(&job(
        2,
        vec![task("master", 1, Some(1), "1"), task("worker", 1, Some(1), "1")],
    ))
    .unwrap();
    pods[2]["metadata"]["annotations"].as_object_mut().unwrap().remove("volcano.sh/task-spec");
    let (placed, message) = run(pods, &[]);
    assert_eq!(placed.len(), 2, "{message}");
    // A partition of four whole-node pods whose task needs three: s0 has one free node, s1
    // three — the partition goes to s1 whole.
    let mut partitioned = task("worker", 4, Some(3), "8");
    partitioned["partitionPolicy"] = json!({"totalPartitions": 1, "partitionSize": 4,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1}});
    let (placed, message) =
        run(scheduler_core::workload::expand(&job(3, vec![partitioned])).unwrap(), &["n0", "n1", "n2", "n4"]);
    assert_eq!(placed.len(), 3, "{message}");
    assert!(placed.values().all(|n| ["n5", "n6", "n7"].contains(&n.as_str())), "{placed:?}");
}

/// A partitioned task's pods without the partition label count toward the task's minimum (as
/// Volcano counts a task's pods whatever their subJob), without being a ready group.
#[test]
fn a_partitioned_task_s_unlabelled_pods_count_toward_its_minimum() {
    let member = |name: &str, partition: Option<&str>| {
        let mut labels = json!({"volcano.sh/task-spec": "worker"});
        if let Some(p) = partition {
            labels["volcano.sh/partition-id"] = json!(p);
        }
        pod(
            name,
            labels,
            json!({"scheduling.k8s.io/group-name": "pg", "volcano.sh/task-spec": "worker"}),
            json!({"schedulerName": "gang-scheduler",
                   "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}),
        )
    };
    let mut objects = hypernode_cluster();
    objects.push(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": {"minMember": 4, "minTaskMember": {"worker": 4},
                 "subGroupPolicy": [{"name": "worker", "subGroupSize": 2, "minSubGroups": 1,
                     "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
                     "matchLabelKeys": ["volcano.sh/partition-id"]}]}}));
    objects.extend([
        member("w0", Some("0")),
        member("w1", Some("0")),
        member("w2", None),
        member("w3", None),
    ]);
    let (snap, problems) = assemble(objects);
    assert!(problems.is_empty(), "{problems:?}");
    let g = only_gang(&snap);
    let worker = g.subgroups.iter().find(|s| s.name == "worker").unwrap();
    assert_eq!((worker.min_member, worker.pod_floor), (2, 4), "one group and the ungrouped pods: {g:#?}");
    let plan = scheduler_core::schedule(
        &snap,
        &scheduler_core::Config::default(),
        scheduler_core::Time::from_secs(1),
    );
    assert_eq!(plan.bindings.len(), 4, "{:?}", plan.outcomes);
}
