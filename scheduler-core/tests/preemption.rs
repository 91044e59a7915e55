//! Preemption for a gang held to one domain of a required topology key: the victims come from
//! the domain kube-scheduler's criteria pick, not from whichever the global order reaches first.

use scheduler_core::cluster::Cluster;
use scheduler_core::{Config, Reason, Time};
use serde_json::{Value, json};

/// Four 8-CPU nodes, two per rack: `a0`, `a1` in rack `ra`; `b0`, `b1` in rack `rb`.
fn racks() -> Vec<Value> {
    let mut objects = Vec::new();
    for (n, rack) in [("a0", "ra"), ("a1", "ra"), ("b0", "rb"), ("b1", "rb")] {
        objects.push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n, "labels": {"rack": rack, "kubernetes.io/hostname": n}},
            "status": {"allocatable": {"cpu": "8", "pods": "10"}, "conditions": [{"type": "Ready", "status": "True"}]}}));
    }
    objects.push(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "high"}, "value": 1000}));
    objects
}

/// A running pod outside any gang on `node`, asking for `cpu`, at `priority`.
fn running(name: &str, node: &str, cpu: &str, priority: i32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "other"},
        "spec": {"nodeName": node, "priority": priority,
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running"}})
}

/// A gang of two 8-CPU workers at priority class `high`, required in one rack.
fn gang() -> Vec<Value> {
    (0..2)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("w{i}"), "namespace": "ml", "labels": {"kube-gang.io/gang": "train"},
                             "annotations": {"kube-gang.io/min-member": "2", "kube-gang.io/topology-required": "rack"}},
                "spec": {"schedulerName": "gang-scheduler", "priorityClassName": "high",
                         "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "8"}}}]},
                "status": {"phase": "Pending"}})
        })
        .collect()
}

/// The evicted pods' names, sorted, and the gang's outcome.
fn preempted(objects: Vec<Value>) -> (Reason, String, Vec<String>) {
    let mut c = Cluster::new();
    for o in objects {
        c.push(o).unwrap();
    }
    let a = c.snapshot();
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    let plan = scheduler_core::schedule(&a.snapshot, &Config::default(), Time::from_secs(1));
    let o = plan.outcomes.iter().find(|o| o.gang.name == "train").unwrap();
    let mut victims: Vec<String> = plan.evictions.iter().map(|e| e.pod.name.to_string()).collect();
    victims.sort();
    (o.reason, o.message.clone(), victims)
}

#[test]
fn a_gang_held_to_one_rack_evicts_in_the_rack_that_needs_the_fewest_victims() {
    // Rack ra (first by every key) needs four 4-CPU pods gone; rack rb two 8-CPU pods. The global
    // order reaches ra's pods first, and would evict all four.
    let mut objects = racks();
    for (i, n) in ["a0", "a0", "a1", "a1"].iter().enumerate() {
        objects.push(running(&format!("a-{i}"), n, "4", 0));
    }
    objects.push(running("z-b0", "b0", "8", 0));
    objects.push(running("z-b1", "b1", "8", 0));
    objects.extend(gang());
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["z-b0", "z-b1"], "{message}");
}

#[test]
fn a_lower_highest_victim_wins_over_fewer_victims_as_in_kube_scheduler() {
    // Same racks, but rb's two pods are at priority 5 and ra's four at 0: kube-scheduler ranks
    // the lowest highest-priority victim before the count, so ra's four go.
    let mut objects = racks();
    for (i, n) in ["a0", "a0", "a1", "a1"].iter().enumerate() {
        objects.push(running(&format!("a-{i}"), n, "4", 0));
    }
    objects.push(running("z-b0", "b0", "8", 5));
    objects.push(running("z-b1", "b1", "8", 5));
    objects.extend(gang());
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["a-0", "a-1", "a-2", "a-3"], "{message}");
}

#[test]
fn a_budget_keeps_victims_in_the_rack_where_none_violates_it() {
    // rb needs fewer victims, but a PodDisruptionBudget allows none of its pods to go: ra's four
    // are evicted without violating it, which kube-scheduler ranks first.
    let mut objects = racks();
    for (i, n) in ["a0", "a0", "a1", "a1"].iter().enumerate() {
        objects.push(running(&format!("a-{i}"), n, "4", 0));
    }
    for n in ["b0", "b1"] {
        let mut p = running(&format!("z-{n}"), n, "8", 0);
        p["metadata"]["labels"] = json!({"app": "web"});
        objects.push(p);
    }
    objects.push(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "other"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2}}));
    objects.extend(gang());
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["a-0", "a-1", "a-2", "a-3"], "{message}");
    assert!(!message.contains("violate"), "{message}");
}

#[test]
fn victims_across_racks_serve_a_gang_free_to_span_them_and_no_one_a_gang_held_to_one() {
    // One evictable pod per rack, the other node of each rack held at a higher priority.
    let mut objects = racks();
    objects.push(running("a-0", "a0", "8", 0));
    objects.push(running("keep-a1", "a1", "8", 2000));
    objects.push(running("z-b0", "b0", "8", 0));
    objects.push(running("keep-b1", "b1", "8", 2000));
    // Free to span racks: one from each.
    let mut free = objects.clone();
    for mut w in gang() {
        w["metadata"]["annotations"].as_object_mut().unwrap().remove("kube-gang.io/topology-required");
        free.push(w);
    }
    let (reason, message, victims) = preempted(free);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["a-0", "z-b0"], "{message}");
    // Held to one rack: no rack can be emptied enough, so no one is evicted.
    objects.extend(gang());
    let (reason, message, victims) = preempted(objects);
    assert_ne!(reason, Reason::Preempting, "{message}");
    assert!(victims.is_empty(), "{message}: {victims:?}");
}

/// A running pod as [`running`] makes it, with labels.
fn labelled(name: &str, node: &str, priority: i32, labels: Value) -> Value {
    let mut p = running(name, node, "8", priority);
    p["metadata"]["labels"] = labels;
    p
}

/// A budget over `app` in namespace `other` allowing `allowed` disruptions.
fn budget(app: &str, allowed: i32) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": "other"},
        "spec": {"maxUnavailable": allowed, "selector": {"matchLabels": {"app": app}}},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2}})
}

#[test]
fn fewer_violations_win_whatever_the_priorities_as_in_kube_scheduler() {
    // Rack ra's two pods (priority 0) each violate a budget; rack rb's two (priority 5) violate
    // one between them. kube-scheduler ranks fewer violations before the highest priority, so
    // rb's pods go, though the global order's first choice was ra's.
    let mut objects = racks();
    objects.push(labelled("a-0", "a0", 0, json!({"app": "a"})));
    objects.push(labelled("a-1", "a1", 0, json!({"app": "a"})));
    objects.push(labelled("b-0", "b0", 5, json!({"app": "b"})));
    objects.push(labelled("b-1", "b1", 5, json!({})));
    objects.push(budget("a", 0));
    objects.push(budget("b", 0));
    objects.extend(gang());
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["b-0", "b-1"], "{message}");
}

#[test]
fn a_budget_spent_in_another_rack_is_judged_again_within_each_rack() {
    // One budget allows one disruption and selects a-x (rack ra) and b-y (rack rb). In the
    // global order a-x takes it and b-y would violate; within rack rb alone b-y violates nothing,
    // and is the one victim that rack needs (ra needs two).
    let mut objects = racks();
    objects.push(labelled("a-x", "a0", 0, json!({"app": "shared"})));
    objects.push(labelled("a-z", "a1", 0, json!({})));
    objects.push(labelled("b-y", "b0", 0, json!({"app": "shared"})));
    objects.push(budget("shared", 1));
    objects.extend(gang());
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["b-y"], "{message}");
    assert!(!message.contains("violate"), "{message}");
}
