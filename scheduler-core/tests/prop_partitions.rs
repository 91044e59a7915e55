//! Volcano's `subGroupPolicy` made into subgroups at assembly, on random PodGroups and pods: the
//! tree it makes is always one the rule book accepts (or too big, and refused as such), names
//! never clash, every member a policy or a partitioned task takes names a leaf, and the cycle
//! places a gang only whole — whatever the policies, names and label values (names chosen to
//! clash: a task `worker-1` beside task `worker`'s partition 1, a policy named `ungrouped`, a
//! value `missing-1`).

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use scheduler_core::cluster::Cluster;
use scheduler_core::{Config, Time, tree};
use serde_json::{Value, json};

#[derive(Clone, Debug)]
struct Policy {
    name: &'static str,
    /// `Some(task)`: a selector of exactly that task; `None`: by label `role: x`.
    task: Option<&'static str>,
    size: i32,
    min: i32,
    keys: Vec<&'static str>,
    tier: bool,
}

/// A member: its task, whether it carries `role: x`, its `p` and `q` label values, and whether
/// its task is an annotation too (else a label only).
type PodSpec = (&'static str, bool, Option<&'static str>, Option<&'static str>, bool);

#[derive(Clone, Debug)]
struct Case {
    min_member: i32,
    tasks: Vec<(&'static str, i32)>,
    policies: Vec<Policy>,
    pods: Vec<PodSpec>,
    cpu: u8,
    /// CPUs already taken on each node (by a pod outside any gang).
    busy: Vec<u8>,
}

const TASKS: &[&str] = &["worker", "worker-1", "ps", "ungrouped"];
const NAMES: &[&str] = &["worker", "worker-1", "ungrouped", "a", "a-b", ""];
const VALUES: &[&str] = &["0", "1", "missing-1", "b", "b-c", "X_y"];

fn policy() -> impl Strategy<Value = Policy> {
    (
        prop::sample::select(NAMES),
        prop::option::of(prop::sample::select(TASKS)),
        1..4i32,
        0..4i32,
        prop::sample::subsequence(vec!["p", "q"], 0..=2),
        any::<bool>(),
    )
        .prop_map(|(name, task, size, min, keys, tier)| Policy { name, task, size, min, keys, tier })
}

fn case() -> impl Strategy<Value = Case> {
    (
        1..10i32,
        prop::collection::vec((prop::sample::select(TASKS), 0..4i32), 0..3),
        prop::collection::vec(policy(), 0..4),
        prop::collection::vec(
            (
                prop::sample::select(TASKS),
                any::<bool>(),
                prop::option::of(prop::sample::select(VALUES)),
                prop::option::of(prop::sample::select(VALUES)),
                any::<bool>(),
            ),
            0..14,
        ),
        1..5u8,
        prop::collection::vec(0..8u8, 4),
    )
        .prop_map(|(min_member, tasks, policies, pods, cpu, busy)| Case {
            min_member,
            tasks,
            policies,
            pods,
            cpu,
            busy,
        })
}

fn objects(c: &Case) -> Vec<Value> {
    let mut out = Vec::new();
    for i in 0..4 {
        out.push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("n{i}"), "labels": {"kubernetes.io/hostname": format!("n{i}")}},
            "status": {"allocatable": {"cpu": "8", "pods": "20"}, "conditions": [{"type": "Ready", "status": "True"}]}}));
    }
    for (i, &cpu) in c.busy.iter().enumerate().filter(|(_, c)| **c > 0) {
        out.push(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("busy-{i}"), "namespace": "other"},
            "spec": {"nodeName": format!("n{i}"),
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu.to_string()}}}]},
            "status": {"phase": "Running"}}));
    }
    out.push(json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "s0"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n[01]$"}}}]}}));
    out.push(json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "s1"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n[23]$"}}}]}}));
    let tasks: BTreeMap<&str, i32> = c.tasks.iter().copied().collect();
    let policies: Vec<Value> = c
        .policies
        .iter()
        .map(|p| {
            let selector = match p.task {
                Some(t) => json!({"matchLabels": {"volcano.sh/task-spec": t}}),
                None => json!({"matchLabels": {"role": "x"}}),
            };
            let mut v = json!({"name": p.name, "subGroupSize": p.size, "minSubGroups": p.min,
                "labelSelector": selector, "matchLabelKeys": p.keys});
            if p.tier {
                v["networkTopology"] = json!({"mode": "hard", "highestTierAllowed": 1});
            }
            v
        })
        .collect();
    out.push(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": {"minMember": c.min_member, "minTaskMember": tasks, "subGroupPolicy": policies}}));
    for (i, (task, role, p, q, annotated)) in c.pods.iter().enumerate() {
        let mut labels = json!({"volcano.sh/task-spec": task});
        if *role {
            labels["role"] = json!("x");
        }
        if let Some(v) = p {
            labels["p"] = json!(v);
        }
        if let Some(v) = q {
            labels["q"] = json!(v);
        }
        out.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("w{i:02}"), "namespace": "ml", "labels": labels,
                         "annotations": if *annotated {
                             json!({"scheduling.k8s.io/group-name": "pg", "volcano.sh/task-spec": task})
                         } else {
                             json!({"scheduling.k8s.io/group-name": "pg"})
                         }},
            "spec": {"schedulerName": "gang-scheduler",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": c.cpu.to_string()}}}]},
            "status": {"phase": "Pending"}}));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn partitioned_gangs_are_well_formed_and_placed_only_whole(c in case()) {
        let mut cluster = Cluster::new();
        for o in objects(&c) {
            cluster.push(o).unwrap();
        }
        let a = cluster.snapshot();
        let Some(g) = a.snapshot.gangs.iter().find(|g| g.key.name == "pg") else {
            // Refused as read (a field the rule book refuses): said, never a panic.
            prop_assert!(!a.problems.is_empty());
            return Ok(());
        };
        let names: BTreeSet<&str> = g.subgroups.iter().map(|s| s.name.as_str()).collect();
        prop_assert_eq!(names.len(), g.subgroups.len(), "a name twice: {:#?}", g.subgroups);
        let errors = scheduler_core::validate::gang_tree_errors(g);
        prop_assert!(errors.is_empty() || g.oversized(), "{errors:?} {:#?}", g.subgroups);
        let leaves: BTreeSet<&str> = g.leaves().map(|s| s.name.as_str()).collect();
        let partitioned: BTreeSet<&str> = g.partitions().iter().filter_map(|p| p.task.as_deref()).collect();
        for p in a.snapshot.pods.iter().filter(|p| p.gang.as_ref().is_some_and(|m| m.gang == g.key)) {
            let sub = p.gang.as_ref().and_then(|m| m.subgroup.as_deref());
            let task = p.labels.get("volcano.sh/task-spec").unwrap_or("");
            // Every member of a gang with subgroups names a leaf: a group, its task, or the pods
            // of no group or task (Volcano counts every pod toward the job).
            let _ = (task, &partitioned);
            if !g.subgroups.is_empty() && !g.oversized() {
                prop_assert!(sub.is_some_and(|s| leaves.contains(s)), "{} in {sub:?}, leaves {leaves:?}", p.key.name);
            }
        }
        // Placed only whole: what a gang binds satisfies its tree.
        let plan = scheduler_core::schedule(&a.snapshot, &Config::default(), Time::from_secs(1));
        let mut counts: tree::LeafCounts = BTreeMap::new();
        for b in &plan.bindings {
            let pod = a.snapshot.pods.iter().find(|p| p.key == b.pod).unwrap();
            let leaf = tree::leaf_of(g, pod.gang.as_ref().and_then(|m| m.subgroup.as_deref()));
            *counts.entry(leaf.unwrap_or("").to_string()).or_default() += 1;
        }
        if !plan.bindings.is_empty() {
            prop_assert!(tree::satisfied(g, &counts), "bound {counts:?} of {:#?}", g.subgroups);
        }
        // Each group bound to a tier keeps to one HyperNode.
        for s in g.leaves().filter(|s| s.topology_key.is_some()) {
            let sides: BTreeSet<bool> = plan
                .bindings
                .iter()
                .filter(|b| a.snapshot.pods.iter().any(|p| p.key == b.pod && p.gang.as_ref().and_then(|m| m.subgroup.as_deref()) == Some(s.name.as_str())))
                .map(|b| b.node == "n0" || b.node == "n1")
                .collect();
            prop_assert!(sides.len() <= 1, "group {} split across HyperNodes", s.name);
        }
    }
}

/// Whether Volcano's scheduler would find the job ready on room enough for every pod, as its gang
/// plugin judges it (`CheckTaskReady && CheckSubJobReady && IsReady`): every pod counts toward
/// `minMember`; each task's minimum when `minMember` covers their sum; each policy's ready groups
/// (pods its selector selects carrying every key, not taken by an earlier policy, grouped by the
/// keys' values, ready at `subGroupSize`) at least `minSubGroups`. `None` for the cases kube-gang
/// documents reading differently (a policy beside tasks that selects no single task, a second
/// policy for one task).
fn volcano_ready(c: &Case) -> Option<bool> {
    let tasks: BTreeMap<&str, i32> = c.tasks.iter().copied().collect();
    let sum: i32 = tasks.values().sum();
    let by_tasks = sum > 0 && sum <= c.min_member;
    if by_tasks {
        let mut seen = BTreeSet::new();
        for p in &c.policies {
            match p.task {
                Some(t) if tasks.contains_key(t) && seen.insert(t) => {}
                _ => return None,
            }
        }
    }
    if (c.pods.len() as i32) < c.min_member {
        return Some(false);
    }
    if by_tasks {
        for (t, &min) in &tasks {
            if (c.pods.iter().filter(|p| p.0 == *t).count() as i32) < min {
                return Some(false);
            }
        }
    }
    let mut taken = vec![false; c.pods.len()];
    for p in &c.policies {
        let mut groups: BTreeMap<Vec<&str>, i32> = BTreeMap::new();
        for (i, pod) in c.pods.iter().enumerate() {
            let selected = match p.task {
                Some(t) => pod.0 == t,
                None => pod.1,
            };
            let values: Option<Vec<&str>> =
                p.keys.iter().map(|k| if *k == "p" { pod.2 } else { pod.3 }).collect();
            if taken[i] || !selected || p.keys.is_empty() {
                continue;
            }
            let Some(values) = values else { continue };
            taken[i] = true;
            *groups.entry(values).or_default() += 1;
        }
        if (groups.values().filter(|&&n| n >= p.size).count() as i32) < p.min {
            return Some(false);
        }
    }
    Some(true)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// On room enough for every pod (no busy node, one CPU each, each group within a tier-1
    /// HyperNode's 16), a gang is placed exactly when Volcano's scheduler would find its job
    /// ready — no stricter, no looser.
    #[test]
    fn partitioned_gangs_are_placed_exactly_when_volcano_would(mut c in case()) {
        c.busy = vec![0; 4];
        c.cpu = 1;
        let Some(ready) = volcano_ready(&c) else { return Ok(()) };
        let mut cluster = Cluster::new();
        for o in objects(&c) {
            cluster.push(o).unwrap();
        }
        let a = cluster.snapshot();
        prop_assume!(a.problems.is_empty());
        let plan = scheduler_core::schedule(&a.snapshot, &Config::default(), Time::from_secs(1));
        let placed = !plan.bindings.is_empty();
        let why = plan.outcomes.iter().map(|o| o.message.clone()).collect::<Vec<_>>();
        prop_assert_eq!(placed, ready, "{:?} {:#?}", why, a.snapshot.gangs);
    }
}
