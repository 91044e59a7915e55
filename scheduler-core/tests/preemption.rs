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

/// A running member of gang `name` (namespace `other`, minimum `min`, 8 CPUs) on `node`, started
/// at `started` (RFC 3339), with more annotations (`kube-gang.io/elastic-step`, …).
fn member(gang: &str, pod: &str, node: &str, min: u32, started: &str, more: Value) -> Value {
    let mut annotations = json!({"kube-gang.io/min-member": min.to_string()});
    annotations.as_object_mut().unwrap().extend(more.as_object().unwrap().clone());
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod, "namespace": "other", "labels": {"kube-gang.io/gang": gang, "app": gang},
                     "annotations": annotations},
        "spec": {"schedulerName": "gang-scheduler", "nodeName": node, "priority": 0,
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "8"}}}]},
        "status": {"phase": "Running", "startTime": started}})
}

/// Running members of gang `name` (see [`member`]) on the nodes `placed` names, started a minute
/// apart in that order (the first at 10:00).
fn elastic(name: &str, min: u32, more: Value, placed: &[(&str, &str)]) -> Vec<Value> {
    placed
        .iter()
        .enumerate()
        .map(|(i, (pod, node))| {
            member(name, pod, node, min, &format!("2026-01-01T10:{i:02}:00Z"), more.clone())
        })
        .collect()
}

/// A gang of two 8-CPU workers at priority class `high`, free to span racks.
fn spanning() -> Vec<Value> {
    gang()
        .into_iter()
        .map(|mut w| {
            w["metadata"]["annotations"].as_object_mut().unwrap().remove("kube-gang.io/topology-required");
            w
        })
        .collect()
}

#[test]
fn an_elastic_gang_gives_up_its_newest_members_beyond_its_minimum_and_keeps_running() {
    // Gang `elastic` runs 4 members with a minimum of 2, one per node; the newest two (by start
    // time, not by name) are on rack ra. Evicting the whole gang (as before) would make room too.
    let mut objects = racks();
    objects.extend(elastic(
        "elastic",
        2,
        json!({}),
        &[("e-b0", "b0"), ("e-b1", "b1"), ("e-a0", "a0"), ("e-a1", "a1")],
    ));
    objects.extend(gang());
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["e-a0", "e-a1"], "{message}");
    assert!(message.contains("other/elastic: 2 member(s) beyond its minimum"), "{message}");
}

#[test]
fn members_beyond_a_minimum_go_before_a_pod_of_their_priority_but_never_before_a_lower_one() {
    // a0, a1 and b0 hold gang `elastic` (minimum 1, priority 0); b1 a pod outside any gang. Two
    // nodes are needed. At priority 0 too, the pod's eviction ends it where the gang's members
    // only shrink a gang that keeps running: the gang's two newest members go.
    let objects = |other: i32| {
        let mut objects = racks();
        objects.extend(elastic("elastic", 1, json!({}), &[("e-a0", "a0"), ("e-a1", "a1"), ("e-b0", "b0")]));
        objects.push(running("z-b1", "b1", "8", other));
        objects.extend(spanning());
        objects
    };
    let (reason, message, victims) = preempted(objects(0));
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["e-a1", "e-b0"], "{message}");
    // At priority -10 the pod is less important whatever it is (kube-scheduler's and upstream's
    // first rule): it goes, with the gang's newest member.
    let (reason, message, victims) = preempted(objects(-10));
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["e-b0", "z-b1"], "{message}");
}

#[test]
fn a_gang_with_nothing_beyond_its_minimum_goes_whole_or_not_at_all() {
    // Gang `full` runs 3 members with a minimum of 3 on a0, a1, b0; b1 is free. One more node
    // is needed: no member may go alone, so the whole gang goes (never half of it).
    let mut objects = racks();
    for (pod, node) in [("f-a0", "a0"), ("f-a1", "a1"), ("f-b0", "b0")] {
        objects.push(member("full", pod, node, 3, "2026-01-01T10:00:00Z", json!({})));
    }
    objects.extend(spanning());
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["f-a0", "f-a1", "f-b0"], "{message}");
    assert!(!message.contains("beyond its minimum"), "{message}");
}

#[test]
fn an_elastic_step_leaves_the_gang_at_a_size_its_step_allows() {
    // Four members, minimum 1, growing in powers of two: one node is needed, but 3 is not a size
    // the step allows, so two members go (4 → 2), the newest.
    let mut objects = racks();
    objects.extend(elastic(
        "elastic",
        1,
        json!({"kube-gang.io/elastic-step": "PowerOfTwo"}),
        &[("e-a0", "a0"), ("e-a1", "a1"), ("e-b0", "b0"), ("e-b1", "b1")],
    ));
    let mut one = spanning();
    one.truncate(1);
    one[0]["metadata"]["annotations"]["kube-gang.io/min-member"] = json!("1");
    objects.extend(one);
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["e-b0", "e-b1"], "{message}");
}

#[test]
fn a_budget_counts_each_member_beyond_a_minimum_once() {
    // Gang `elastic` (minimum 1) runs on a0, a1, b0 under a budget allowing 3 disruptions; b1
    // holds a pod whose own budget allows none. Three nodes are needed: the whole gang goes, within
    // its budget. (Its unit of members beyond the minimum and its whole unit share two pods:
    // counting them twice would call the whole unit a violation and take the other pod instead.)
    let mut objects = racks();
    objects.extend(elastic("elastic", 1, json!({}), &[("e-a0", "a0"), ("e-a1", "a1"), ("e-b0", "b0")]));
    objects.push(labelled("z-b1", "b1", 0, json!({"app": "z"})));
    objects.push(budget("elastic", 3));
    objects.push(budget("z", 0));
    let mut three = spanning();
    let mut w2 = three[0].clone();
    w2["metadata"]["name"] = json!("w2");
    three.push(w2);
    for w in &mut three {
        w["metadata"]["annotations"]["kube-gang.io/min-member"] = json!("3");
    }
    objects.extend(three);
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["e-a0", "e-a1", "e-b0"], "{message}");
    assert!(!message.contains("violate"), "{message}");
}

#[test]
fn two_preemptors_in_one_cycle_share_a_gang_s_members_beyond_its_minimum() {
    // Gang `elastic` (minimum 2) runs on every node; three single-member gangs of priority
    // `high` each need a node. The first two take its members beyond the minimum, newest first;
    // the third counts their victims as gone, finds none beyond the minimum left, and takes the
    // gang whole (taking one more would leave it half-bound).
    let mut objects = racks();
    objects.extend(elastic(
        "elastic",
        2,
        json!({}),
        &[("e-a0", "a0"), ("e-a1", "a1"), ("e-b0", "b0"), ("e-b1", "b1")],
    ));
    for g in ["train", "two", "three"] {
        let mut w = spanning().remove(0);
        w["metadata"]["name"] = json!(format!("{g}-0"));
        w["metadata"]["labels"]["kube-gang.io/gang"] = json!(g);
        w["metadata"]["annotations"]["kube-gang.io/min-member"] = json!("1");
        objects.push(w);
    }
    let (_, _, victims) = preempted(objects);
    assert_eq!(victims, ["e-a0", "e-a1", "e-b0", "e-b1"]);
}

#[test]
fn members_beyond_a_minimum_are_found_again_within_each_rack() {
    // Gang `elastic` (minimum 1): newest e-b0, then e-a1, e-a0, oldest e-b1. A gang held to one
    // rack needs two nodes. Taken newest first across racks, e-b0 would go for nothing beside
    // rack ra's two; within each rack, two members of that rack are enough.
    let mut objects = racks();
    objects.extend(elastic(
        "elastic",
        1,
        json!({}),
        &[("e-b1", "b1"), ("e-a0", "a0"), ("e-a1", "a1"), ("e-b0", "b0")],
    ));
    objects.extend(gang());
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims.len(), 2, "{message}: {victims:?}");
    assert!(victims.iter().all(|v| v[2..3] == victims[0][2..3]), "one rack: {victims:?}");
}

#[test]
fn members_beyond_a_minimum_are_counted_per_subgroup() {
    // A `Gang` of subgroups `a` and `b` (one member each at least, both needed): `a` runs three
    // members, `b` one — the newest of all. Two nodes are needed: only `a`'s members beyond its
    // minimum may go (its two newest); `b`'s one member never goes alone.
    let mut objects = racks();
    objects.push(json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
        "metadata": {"name": "tree", "namespace": "other"},
        "spec": {"minMember": 2, "subGroups": [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 1}]}}));
    for (pod, node, subgroup, started) in [
        ("t-a0", "a0", "a", "2026-01-01T10:00:00Z"),
        ("t-a1", "a1", "a", "2026-01-01T10:01:00Z"),
        ("t-b0", "b0", "a", "2026-01-01T10:02:00Z"),
        ("t-b1", "b1", "b", "2026-01-01T10:03:00Z"),
    ] {
        objects.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": "other",
                         "labels": {"kube-gang.io/gang": "tree", "kube-gang.io/subgroup": subgroup}},
            "spec": {"schedulerName": "gang-scheduler", "nodeName": node, "priority": 0,
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "8"}}}]},
            "status": {"phase": "Running", "startTime": started}}));
    }
    objects.extend(spanning());
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["t-a1", "t-b0"], "{message}");
    assert!(message.contains("other/tree: 2 member(s) beyond its minimum"), "{message}");
}

/// An upstream `v1beta1` PodGroup in `namespace`, of `min` pods, with more `spec`.
fn pod_group(namespace: &str, name: &str, min: u32, spec: Value) -> Value {
    let mut s = json!({"schedulingPolicy": {"gang": {"minCount": min}}});
    s.as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
    json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")}, "spec": s})
}

/// Four running members of PodGroup `other/up` (minimum 2), one per node, the newest on rack ra.
fn upstream_members() -> Vec<Value> {
    [
        ("u-b0", "b0", "2026-01-01T10:00:00Z"),
        ("u-b1", "b1", "2026-01-01T10:01:00Z"),
        ("u-a0", "a0", "2026-01-01T10:02:00Z"),
        ("u-a1", "a1", "2026-01-01T10:03:00Z"),
    ]
    .into_iter()
    .map(|(pod, node, started)| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": "other"},
            "spec": {"schedulerName": "gang-scheduler", "nodeName": node, "priority": 0,
                     "schedulingGroup": {"podGroupName": "up"},
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "8"}}}]},
            "status": {"phase": "Running", "startTime": started}})
    })
    .collect()
}

#[test]
fn an_upstream_podgroup_disrupted_only_whole_goes_whole() {
    // `disruptionMode: single` (the default) lets the two newest members beyond the minimum go;
    // `all` takes every member or none.
    for (mode, want) in [
        (json!({}), vec!["u-a0", "u-a1"]),
        (json!({"disruptionMode": {"single": {}}}), vec!["u-a0", "u-a1"]),
        (json!({"disruptionMode": {"all": {}}}), vec!["u-a0", "u-a1", "u-b0", "u-b1"]),
    ] {
        let mut objects = racks();
        objects.push(pod_group("other", "up", 2, mode.clone()));
        objects.extend(upstream_members());
        objects.extend(gang());
        let (reason, message, victims) = preempted(objects);
        assert_eq!(reason, Reason::Preempting, "{mode}: {message}");
        assert_eq!(victims, want, "{mode}: {message}");
    }
}

#[test]
fn an_upstream_podgroup_that_never_preempts_does_not_whatever_its_pods_say() {
    // The preemptor's own PodGroup says Never; its pods (priority class `high`) say nothing.
    let mut objects = racks();
    for n in ["a0", "a1", "b0", "b1"] {
        objects.push(running(&format!("z-{n}"), n, "8", 0));
    }
    objects.push(pod_group("ml", "train", 2, json!({"preemptionPolicy": "Never"})));
    for w in gang() {
        let mut w = w;
        w["metadata"]["labels"] = json!({});
        w["metadata"]["annotations"] = json!({});
        w["spec"]["schedulingGroup"] = json!({"podGroupName": "train"});
        objects.push(w);
    }
    let (reason, message, victims) = preempted(objects.clone());
    assert_ne!(reason, Reason::Preempting, "{message}");
    assert!(victims.is_empty(), "{message}: {victims:?}");
    // Without the policy the same gang preempts.
    let i = objects.iter().position(|o| o["kind"] == "PodGroup").unwrap();
    objects[i] = pod_group("ml", "train", 2, json!({}));
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims.len(), 2, "{message}");
}

#[test]
fn the_domain_of_the_first_choice_is_searched_again_for_members_beyond_a_minimum() {
    // Gang `elastic` (minimum 1) on a0, a1, b0, the newest on b0; b1 is held at a higher
    // priority. Across racks its newest members (b0, a1) fit no one rack, so the global search
    // takes the whole gang, in rack ra; within ra, its two members there are enough, and the gang
    // keeps running on b0.
    let mut objects = racks();
    objects.extend(elastic("elastic", 1, json!({}), &[("e-a0", "a0"), ("e-a1", "a1"), ("e-b0", "b0")]));
    objects.push(running("keep-b1", "b1", "8", 2000));
    objects.extend(gang());
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["e-a0", "e-a1"], "{message}");
}

#[test]
fn an_elastic_step_may_leave_the_gang_at_its_minimum_though_the_step_does_not_allow_it() {
    // Six 4-CPU members, minimum 3, growing in powers of two, two per node on a0, a1, b0; b1 free.
    // Five 4-CPU pods need three more slots: three members go (6 → 3, the minimum, though 3 is no
    // power of two), not the whole gang.
    let mut objects = racks();
    for (i, node) in ["a0", "a0", "a1", "a1", "b0", "b0"].iter().enumerate() {
        let mut m = member(
            "elastic",
            &format!("e-{i}"),
            node,
            3,
            &format!("2026-01-01T10:0{i}:00Z"),
            json!({"kube-gang.io/elastic-step": "PowerOfTwo"}),
        );
        m["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("4");
        objects.push(m);
    }
    for i in 0..5 {
        let mut w = spanning().remove(0);
        w["metadata"]["name"] = json!(format!("w{i}"));
        w["metadata"]["annotations"]["kube-gang.io/min-member"] = json!("5");
        w["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("4");
        objects.push(w);
    }
    let (reason, message, victims) = preempted(objects);
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["e-3", "e-4", "e-5"], "{message}");
}

#[test]
fn a_violating_victim_still_takes_from_every_budget_it_is_under_as_in_kube_scheduler() {
    // x (on a0) is under budgets `team` (none allowed) and `tier` (one allowed); z (on a1) under
    // `tier` only; b0 and b1 are held at a higher priority. Both must go: x violates `team` and
    // still takes `tier`'s one disruption, so z violates `tier` too (kube-scheduler decrements
    // every budget that matches a victim, violated or not).
    let mut objects = racks();
    objects.push(labelled("x", "a0", 0, json!({"team": "t", "tier": "u"})));
    objects.push(labelled("z", "a1", 0, json!({"tier": "u"})));
    objects.push(running("keep-b0", "b0", "8", 2000));
    objects.push(running("keep-b1", "b1", "8", 2000));
    for (name, key, allowed) in [("team", "team", 0), ("tier", "tier", 1)] {
        objects.push(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "other"},
            "spec": {"maxUnavailable": allowed, "selector": {"matchLabels": {key: if key == "team" { "t" } else { "u" }}}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2}}));
    }
    objects.extend(spanning());
    let mut c = Cluster::new();
    for o in objects {
        c.push(o).unwrap();
    }
    let plan = scheduler_core::schedule(&c.snapshot().snapshot, &Config::default(), Time::from_secs(1));
    let mut named: Vec<(String, Option<String>)> = plan
        .evictions
        .iter()
        .map(|e| (e.pod.name.to_string(), e.budget.as_ref().map(|b| b.name.to_string())))
        .collect();
    named.sort();
    assert_eq!(
        named,
        [("x".to_string(), Some("team".to_string())), ("z".to_string(), Some("tier".to_string()))]
    );
}

/// A running KAI PodGroup `other/kai` of two 8-CPU members on a0 and a1, with `spec`, and a
/// PriorityClass `kai-class` of `value`.
fn kai_gang(spec: Value, value: i32) -> Vec<Value> {
    let mut s = json!({"minMember": 2, "priorityClassName": "kai-class"});
    s.as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
    let mut objects = vec![
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "kai-class"}, "value": value}),
        json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "kai", "namespace": "other", "uid": "uid-kai"}, "spec": s}),
    ];
    for (pod, node) in [("k-a0", "a0"), ("k-a1", "a1")] {
        objects.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": "other", "annotations": {"pod-group-name": "kai"}},
            "spec": {"schedulerName": "gang-scheduler", "nodeName": node, "priority": value,
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "8"}}}]},
            "status": {"phase": "Running"}}));
    }
    objects
}

#[test]
fn a_kai_podgroup_that_runs_to_completion_is_no_one_s_victim() {
    // The preemptor (priority class `high`, 1000) needs two nodes; b0 and b1 are held at 2000.
    // The KAI gang on a0, a1 goes only when KAI would let it: preemptible, or stating nothing at
    // a priority below 100.
    for (spec, value, goes) in [
        (json!({}), 50, true),
        (json!({}), 100, false),
        (json!({"preemptibility": "preemptible"}), 500, true),
        (json!({"preemptibility": "non-preemptible"}), 10, false),
    ] {
        let mut objects = racks();
        objects.push(running("keep-b0", "b0", "8", 2000));
        objects.push(running("keep-b1", "b1", "8", 2000));
        objects.extend(kai_gang(spec.clone(), value));
        objects.extend(spanning());
        let (reason, message, victims) = preempted(objects);
        if goes {
            assert_eq!(reason, Reason::Preempting, "{spec} {value}: {message}");
            assert_eq!(victims, ["k-a0", "k-a1"], "{spec} {value}: {message}");
        } else {
            assert!(victims.is_empty(), "{spec} {value}: {message}: {victims:?}");
        }
    }
}

/// KAI's `semi-preemptible` (0.18): the minimum is the gang's core and never goes; members beyond
/// it go newest first. Gang `other/kai` runs four members (minimum 2 or 3) on every node; the
/// preemptor needs two nodes.
#[test]
fn a_semi_preemptible_kai_podgroup_gives_up_members_beyond_its_minimum_never_the_minimum() {
    let kai = |min: u32, preemptibility: &str| {
        let mut objects = vec![json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "kai", "namespace": "other", "uid": "uid-kai"},
            "spec": {"minMember": min, "preemptibility": preemptibility}})];
        for (i, node) in ["b0", "b1", "a0", "a1"].iter().enumerate() {
            objects.push(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("k-{node}"), "namespace": "other", "annotations": {"pod-group-name": "kai"}},
                "spec": {"schedulerName": "gang-scheduler", "nodeName": node, "priority": 0,
                         "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "8"}}}]},
                "status": {"phase": "Running", "startTime": format!("2026-01-01T10:0{i}:00Z")}}));
        }
        objects
    };
    let run = |min: u32, preemptibility: &str| {
        let mut objects = racks();
        objects.extend(kai(min, preemptibility));
        objects.extend(spanning());
        preempted(objects)
    };
    // Two beyond a minimum of 2: the two newest go, the gang keeps running.
    let (reason, message, victims) = run(2, "semi-preemptible");
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims, ["k-a0", "k-a1"], "{message}");
    // One beyond a minimum of 3: not room enough, and the minimum is never taken.
    let (_, message, victims) = run(3, "semi-preemptible");
    assert!(victims.is_empty(), "{message}: {victims:?}");
    // Preemptible, the same gang goes whole.
    let (reason, message, victims) = run(3, "preemptible");
    assert_eq!(reason, Reason::Preempting, "{message}");
    assert_eq!(victims.len(), 4, "{message}: {victims:?}");
}

/// KAI's `kai.scheduler/preemptibility` label on the pods of a kube-gang gang (copied there from
/// their workload at admission) is the gang's, as KAI's pod grouper makes it its PodGroup's.
#[test]
fn the_kai_preemptibility_label_on_a_gang_s_pods_decides_how_preemption_takes_it() {
    let labelled = |value: Option<&str>| -> Vec<Value> {
        elastic("elastic", 2, json!({}), &[("e-b0", "b0"), ("e-b1", "b1"), ("e-a0", "a0"), ("e-a1", "a1")])
            .into_iter()
            .map(|mut p| {
                if let Some(v) = value {
                    p["metadata"]["labels"]["kai.scheduler/preemptibility"] = json!(v);
                }
                p
            })
            .collect()
    };
    for (value, expected) in [
        (None, vec!["e-a0", "e-a1"]),
        (Some("preemptible"), vec!["e-a0", "e-a1"]),
        (Some("semi-preemptible"), vec!["e-a0", "e-a1"]),
        (Some("non-preemptible"), vec![]),
    ] {
        let mut objects = racks();
        objects.extend(labelled(value));
        objects.extend(gang());
        let (_, message, victims) = preempted(objects);
        assert_eq!(victims, expected, "{value:?}: {message}");
    }
    // At its minimum, semi-preemptible keeps every member where preemptible loses them all.
    for (value, gone) in [("preemptible", 2), ("semi-preemptible", 0)] {
        let mut objects = racks();
        objects.push(running("keep-b0", "b0", "8", 2000));
        objects.push(running("keep-b1", "b1", "8", 2000));
        objects.extend(elastic("elastic", 2, json!({}), &[("e-a0", "a0"), ("e-a1", "a1")]).into_iter().map(
            |mut p| {
                p["metadata"]["labels"]["kai.scheduler/preemptibility"] = json!(value);
                p
            },
        ));
        objects.extend(spanning());
        let (_, message, victims) = preempted(objects);
        assert_eq!(victims.len(), gone, "{value}: {message}: {victims:?}");
    }
    // Members that disagree are said, the gang's source pod deciding.
    let mut c = Cluster::new();
    let mut members = labelled(Some("non-preemptible"));
    members[3]["metadata"]["labels"]["kai.scheduler/preemptibility"] = json!("preemptible");
    for o in racks().into_iter().chain(members) {
        c.push(o).unwrap();
    }
    let said: Vec<String> = c.snapshot().problems.iter().map(ToString::to_string).collect();
    assert!(
        said.iter().any(|p| p.contains("preemptibility \"preemptible\" disagrees with \"non-preemptible\"")),
        "{said:?}"
    );
    // A value KAI does not know is refused, naming the label.
    let mut c = Cluster::new();
    for o in racks().into_iter().chain(labelled(Some("Never"))) {
        c.push(o).unwrap();
    }
    let a = c.snapshot();
    let said: Vec<String> = a.problems.iter().flat_map(|p| p.errors.iter().map(|e| e.path.clone())).collect();
    assert!(said.iter().any(|p| p == "metadata.labels[kai.scheduler/preemptibility]"), "{:?}", a.problems);
}
