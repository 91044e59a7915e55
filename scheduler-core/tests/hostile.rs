//! Hostile input to the core (issue 16): size-legal objects that used to cost cubic time, replica
//! counts that wrapped around `u32`, and names too long for the labels injected from them. Each
//! case states the behaviour a user or an attacker could observe.

use proptest::prelude::*;
use scheduler_core::validate::{MAX_SUBGROUP_DEPTH, MAX_SUBGROUPS, check_label_value, validate};
use scheduler_core::workload::{self, MAX_PODS, label_value_for};
use serde_json::{Value, json};

fn gang(min: u32, subgroups: Vec<Value>) -> Value {
    json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "g", "namespace": "ns"},
        "spec": {"minMember": min, "subGroups": subgroups}})
}

/// `n` subgroups, each the child of the one before.
fn chain(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            if i == 0 {
                json!({"name": "s0", "minMember": 1})
            } else {
                json!({"name": format!("s{i}"), "parent": format!("s{}", i - 1), "minMember": 1})
            }
        })
        .collect()
}

fn error_paths(obj: &Value) -> Vec<String> {
    validate(obj, None).errors.into_iter().map(|e| e.path).collect()
}

#[test]
fn a_chain_of_2000_subgroups_is_one_error_and_no_tree_work() {
    let errors = validate(&gang(1, chain(2000)), None).errors;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "spec.subGroups");
    assert!(errors[0].message.contains("2000 subgroups; at most 64"), "{}", errors[0].message);
}

#[test]
fn a_hundred_thousand_flat_subgroups_with_duplicates_are_one_error() {
    let flat: Vec<Value> =
        (0..100_000).map(|i| json!({"name": format!("s{}", i % 7), "minMember": 0})).collect();
    assert_eq!(error_paths(&gang(1, flat)), vec!["spec.subGroups"]);
}

#[test]
fn exactly_the_limit_is_still_examined() {
    let flat: Vec<Value> =
        (0..MAX_SUBGROUPS).map(|i| json!({"name": format!("s{i}"), "minMember": 1})).collect();
    assert!(validate(&gang(1, flat.clone()), None).is_ok());
    let mut bad = flat;
    bad[63]["name"] = json!("s0");
    assert_eq!(error_paths(&gang(1, bad)), vec!["spec.subGroups[63].name"]);
}

#[test]
fn a_tree_too_deep_is_one_error_naming_the_first_subgroup_below_the_limit() {
    let errors = validate(&gang(1, chain(40)), None).errors;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, format!("spec.subGroups[{MAX_SUBGROUP_DEPTH}].parent"));
    assert!(errors[0].message.contains("nested 5 levels deep"), "{}", errors[0].message);
    assert!(validate(&gang(1, chain(MAX_SUBGROUP_DEPTH)), None).is_ok());
}

#[test]
fn a_parent_cycle_is_one_error_and_minimums_are_not_evaluated() {
    let subgroups = vec![
        json!({"name": "a", "parent": "c", "minMember": 9}),
        json!({"name": "b", "parent": "a", "minMember": 9}),
        json!({"name": "c", "parent": "b", "minMember": 9}),
    ];
    let errors = validate(&gang(1, subgroups), None).errors;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].message.contains("parent cycle"), "{}", errors[0].message);
}

fn pytorch(chief: i64, ps: i64, worker: i64) -> Value {
    let role = |n: i64| json!({"replicas": n, "template": {"spec": {"containers": [{"name": "c"}]}}});
    json!({"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": {"name": "wrap", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"tfReplicaSpecs": {"Chief": role(chief), "PS": role(ps), "Worker": role(worker)}}})
}

#[test]
fn replica_totals_beyond_int32_are_an_error_naming_the_field_not_a_wrap() {
    let job = pytorch(2, i64::from(i32::MAX), i64::from(i32::MAX));
    let errors = workload::inspect(&job).expect("a workload").expect_err("must not wrap");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "spec.tfReplicaSpecs.PS.replicas");
    assert!(errors[0].message.contains("more than 2147483647"), "{}", errors[0].message);
    assert!(workload::inject(&job).is_err(), "nothing is injected from a wrapped count");
    let verdict = validate(&job, None);
    assert_eq!(verdict.errors.len(), 1, "{:?}", verdict.errors);
    // The largest legal total is accepted and written exactly.
    let job = pytorch(1, 1, i64::from(i32::MAX) - 2);
    let out = workload::inject(&job).expect("legal");
    let total =
        out.pointer("/spec/tfReplicaSpecs/Chief/template/metadata/annotations/kube-gang.io~1total-member");
    assert_eq!(total, Some(&json!(MAX_PODS.to_string())));
}

#[test]
fn jobset_and_leaderworkerset_products_are_checked() {
    let js = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 65536,
            "template": {"spec": {"parallelism": 65536, "template": {"spec": {}}}}}]}});
    let errors = workload::inspect(&js).unwrap().unwrap_err();
    assert_eq!(errors[0].path, "spec.replicatedJobs[0].replicas");
    let lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "l"},
        "spec": {"replicas": 2147483647, "leaderWorkerTemplate": {"size": 3, "workerTemplate": {"spec": {}}}}});
    let errors = workload::inspect(&lws).unwrap().unwrap_err();
    assert_eq!(errors[0].path, "spec.replicas");
}

#[test]
fn expansion_is_bounded_by_a_limit_not_by_the_users_count() {
    let mut j = job("wide");
    j["spec"]["parallelism"] = json!(i32::MAX);
    let errors = workload::expand(&j).expect_err("two billion pod copies are refused");
    assert_eq!(errors[0].path, "spec.parallelism");
    assert!(errors[0].message.contains("at most 100000"), "{}", errors[0].message);
    j["spec"]["parallelism"] = json!(workload::MAX_EXPANDED_PODS);
    assert_eq!(workload::expand(&j).unwrap().len() as u64, workload::MAX_EXPANDED_PODS);
}

fn job(name: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}})
}

#[test]
fn a_100_character_name_is_injected_as_a_valid_stable_label() {
    let name = format!("train-{}", "x".repeat(94));
    assert_eq!(name.len(), 100);
    let out = workload::inject(&job(&name)).unwrap();
    let label =
        out.pointer("/spec/template/metadata/labels/kube-gang.io~1gang").and_then(Value::as_str).unwrap();
    assert!(label.len() <= 63, "{label}");
    assert_eq!(check_label_value(label), Ok(()));
    assert!(label.starts_with("train-xxx"), "{label}");
    assert_eq!(workload::inject(&job(&name)).unwrap(), out, "stable");
    assert!(validate(&out, None).is_ok(), "{:?}", validate(&out, None).errors);
    // Two names sharing their first 54 characters stay apart.
    let other = format!("{name}y");
    assert_ne!(label_value_for(&name), label_value_for(&other));
    // A short name is left as it is.
    assert_eq!(label_value_for("bert"), "bert");
}

#[test]
fn the_validating_hook_rejects_an_invalid_gang_label_on_a_template() {
    let mut j = job("j");
    j["spec"]["template"]["metadata"] = json!({"labels": {"kube-gang.io/gang": "y".repeat(100)}});
    assert_eq!(error_paths(&j), vec!["spec.template.metadata.labels[kube-gang.io/gang]"]);
    j["spec"]["template"]["metadata"] =
        json!({"labels": {"kube-gang.io/gang": "ok", "kube-gang.io/subgroup": "-bad"}});
    assert_eq!(error_paths(&j), vec!["spec.template.metadata.labels[kube-gang.io/subgroup]"]);
}

/// What a naive walk finds first, taking subgroups in order: from each, follow parents; reaching
/// a cycle is a cycle, else a chain longer than the limit is too deep at that subgroup.
#[derive(Debug, PartialEq)]
enum Problem {
    Cycle,
    TooDeep(usize),
}

fn first_problem(parents: &[Option<usize>]) -> Option<Problem> {
    for start in 0..parents.len() {
        let mut depth = 1;
        let mut cur = parents[start];
        while let Some(p) = cur {
            depth += 1;
            if depth > parents.len() + 1 {
                return Some(Problem::Cycle);
            }
            cur = parents[p];
        }
        if depth > MAX_SUBGROUP_DEPTH {
            return Some(Problem::TooDeep(start));
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// On any parent graph within the size limit, the linear checks agree with a naive reference:
    /// a cycle or an over-deep tree is exactly one error, and a valid tree has none.
    #[test]
    fn tree_checks_agree_with_a_naive_walk(raw in proptest::collection::vec(proptest::option::of(0usize..64), 1..64)) {
        let n = raw.len();
        let parents: Vec<Option<usize>> =
            raw.iter().enumerate().map(|(i, p)| p.map(|p| p % n).filter(|p| *p != i)).collect();
        let subgroups: Vec<Value> = parents
            .iter()
            .enumerate()
            .map(|(i, p)| match p {
                Some(p) => json!({"name": format!("s{i}"), "parent": format!("s{p}"), "minMember": 1}),
                None => json!({"name": format!("s{i}"), "minMember": 1}),
            })
            .collect();
        let errors = validate(&gang(1, subgroups), None).errors;
        match first_problem(&parents) {
            Some(Problem::Cycle) => {
                prop_assert_eq!(errors.len(), 1);
                prop_assert!(errors[0].message.contains("cycle"), "{}", errors[0].message);
            }
            Some(Problem::TooDeep(first)) => {
                prop_assert_eq!(errors.len(), 1);
                prop_assert_eq!(&errors[0].path, &format!("spec.subGroups[{first}].parent"));
            }
            None => prop_assert!(errors.is_empty(), "{:?}", errors),
        }
    }

    /// Any name a Kubernetes object may have becomes a valid label value; short ones are unchanged.
    #[test]
    fn every_object_name_becomes_a_valid_label_value(name in "[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?") {
        let label = label_value_for(&name);
        if name.len() <= 63 && check_label_value(&name).is_ok() {
            prop_assert_eq!(&label, &name);
        }
        prop_assert!(check_label_value(&label).is_ok(), "{label:?}");
        prop_assert_eq!(label_value_for(&name), label);
    }

    /// Replica counts anywhere in int32 never wrap: the total is exact or an error.
    #[test]
    fn replica_sums_are_exact_or_errors(a in 0i64..=i64::from(i32::MAX), b in 0i64..=i64::from(i32::MAX), c in 0i64..=i64::from(i32::MAX)) {
        match workload::inspect(&pytorch(a, b, c)).unwrap() {
            Ok(shape) => {
                prop_assert!(a + b + c <= i64::from(i32::MAX));
                prop_assert_eq!(i64::from(shape.total_member()), a + b + c);
            }
            Err(errors) => {
                prop_assert!(a + b + c > i64::from(i32::MAX) || a + b + c == 0, "{:?}", errors);
            }
        }
    }
}

/// A PyTorchJob with `extra` replica types beyond Master and Worker, each a valid role.
fn pytorch_with_types(extra: usize) -> Value {
    let role =
        || json!({"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}});
    let mut specs = serde_json::Map::new();
    specs.insert("Master".into(), role());
    specs.insert("Worker".into(), role());
    for i in 0..extra {
        specs.insert(format!("Extra{i:05}"), role());
    }
    json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "many", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"pytorchReplicaSpecs": specs}})
}

#[test]
fn replica_types_the_operator_does_not_define_are_refused_and_the_patch_stays_bounded() {
    // One unknown type: named with its path and the operator's list, as its webhook says it.
    let errors = workload::inspect(&pytorch_with_types(1)).unwrap().unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "spec.pytorchReplicaSpecs.Extra00000");
    assert_eq!(errors[0].message, r#"Unsupported value: "Extra00000": supported values: "Master", "Worker""#);
    // 30,000 of them: a bounded denial (eight named, the rest counted), and nothing injected for them.
    let mut job = pytorch_with_types(30_000);
    let verdict = scheduler_core::admit(&mut job, None, None);
    assert!(!verdict.allowed());
    let unsupported: Vec<_> = verdict.errors.iter().filter(|e| e.message.contains("nsupported")).collect();
    assert_eq!(unsupported.len(), 9, "{unsupported:?}");
    assert_eq!(unsupported[8].message, "29992 more unsupported replica types");
    assert!(verdict.changes.iter().all(|c| !c.path.contains("Extra")), "a change for an unknown type");
    assert!(verdict.changes.len() < 64, "{} changes", verdict.changes.len());
    // Every kind's list: TFJob's five types are all accepted, and MPIJob's Launcher.
    let role = json!({"replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}});
    let tf = json!({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "tf"},
        "spec": {"tfReplicaSpecs": {"Chief": role, "Evaluator": role, "Master": role, "PS": role, "Worker": role}}});
    assert_eq!(workload::inspect(&tf).unwrap().unwrap().roles.len(), 5);
    let mpi = json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "m"},
        "spec": {"mpiReplicaSpecs": {"Launcher": role, "Worker": role, "Master": role}}});
    let errors = workload::inspect(&mpi).unwrap().unwrap_err();
    assert_eq!(errors[0].path, "spec.mpiReplicaSpecs.Master");
}

/// One tenant's upstream hierarchy: `n` PodGroups (each with one pending pod) under one
/// CompositePodGroup. Read into one gang of `n` leaves, which the rule book refuses as a whole.
fn wide_hierarchy(n: usize) -> scheduler_core::cluster::Cluster {
    let mut cluster = scheduler_core::cluster::Cluster::new();
    cluster
        .push(json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": "llm", "namespace": "ml"}, "spec": {}}))
        .unwrap();
    for i in 0..n {
        cluster
            .push(json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup",
                "metadata": {"name": format!("pg-{i:05}"), "namespace": "ml"},
                "spec": {"parentCompositePodGroupName": "llm", "schedulingPolicy": {"gang": {"minCount": 1}}}}))
            .unwrap();
        cluster
            .push(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p-{i:05}"), "namespace": "ml", "uid": format!("u-{i}")},
                "spec": {"schedulerName": "gang-scheduler",
                         "schedulingGroup": {"podGroupName": format!("pg-{i:05}")},
                         "containers": [{"name": "c"}]},
                "status": {"phase": "Pending"}}))
            .unwrap();
    }
    cluster
}

/// 5,000 PodGroups under one CompositePodGroup: one gang whose minimum counts all its children
/// (counted once, not per member), refused by the cycle as InvalidSpec naming the limit, with
/// every member accounted for. (Its cost is the `hierarchy` bench's: it was cubic in members.)
#[test]
fn thousands_of_podgroups_under_one_composite_are_one_gang_refused_whole() {
    let n = 5_000;
    let assembled = wide_hierarchy(n).snapshot();
    let snap = &assembled.snapshot;
    assert_eq!(snap.gangs.len(), 1);
    let gang = &snap.gangs[0];
    assert_eq!(
        (gang.subgroups.len(), gang.min_member),
        (n, n as u32),
        "minGroupCount defaults to every child"
    );
    let plan =
        scheduler_core::schedule(snap, &scheduler_core::Config::default(), scheduler_core::model::Time(0));
    let outcome = &plan.outcomes[0];
    assert_eq!(outcome.reason, scheduler_core::plan::Reason::InvalidSpec);
    assert!(
        outcome.message.contains(&format!("has {n} subgroups; at most {MAX_SUBGROUPS}")),
        "{}",
        outcome.message
    );
    assert_eq!(outcome.counts.members, n as u32);
    assert!(plan.bindings.is_empty());
}

/// A value of any JSON type, small: what a hostile field may hold.
fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-4i64..70).prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-zA-Z\\[\\]0-9.~/]{0,24}".prop_map(Value::String),
        Just(json!([])),
        Just(json!({})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A LeaderWorkerSet's subgroup policy of any shape and value: reading, injecting and
    /// expanding it never panics, and when it is accepted every pod of a group carries a
    /// subgroup index below the number of subgroups (or none, the leader under LeaderExcluded).
    #[test]
    fn lws_subgroups_of_any_shape_are_read_or_refused(
        size in any_value(), sub in any_value(), replicas in 0i64..4,
        kind in prop_oneof![any_value(), Just(json!("LeaderWorker")), Just(json!("LeaderExcluded"))],
    ) {
        let obj = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "s", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"},
                         "annotations": {scheduler_core::labels::LWS_SUBGROUP_EXCLUSIVE_TOPOLOGY: "kubernetes.io/hostname"}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size,
                "subGroupPolicy": {"subGroupSize": sub, "subGroupPolicyType": kind},
                "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}});
        let Some(shape) = workload::inspect(&obj) else { return Err(TestCaseError::fail("not read")) };
        let Ok(shape) = shape else { return Ok(()) };
        let size = shape.group_size.unwrap_or(1);
        prop_assume!(u64::from(size) * u64::from(shape.groups) <= 2_000);
        let pods = workload::expand(&obj).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(pods.len() as u64, u64::from(size) * u64::from(shape.groups));
        let sub = obj["spec"]["leaderWorkerTemplate"]["subGroupPolicy"]["subGroupSize"].as_u64().unwrap_or(1);
        for p in &pods {
            if let Some(i) = p["metadata"]["labels"].get("leaderworkerset.sigs.k8s.io/subgroup-index") {
                let i: u64 = i.as_str().unwrap().parse().unwrap();
                prop_assert!(i < u64::from(size).div_ceil(sub.max(1)), "{i} of size {size} by {sub}");
            }
        }
    }

    /// An AppWrapper's pod-set paths and replicas of any shape: read or refused, never a panic, and
    /// an accepted one's roles all point at a pod template inside it.
    #[test]
    fn appwrapper_pod_sets_of_any_shape_are_read_or_refused(path in any_value(), replicas in any_value()) {
        let obj = json!({"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
            "metadata": {"name": "aw", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
            "spec": {"components": [{"podSets": [{"path": path, "replicas": replicas}],
                "template": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                             "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}}]}});
        let Some(shape) = workload::inspect(&obj) else { return Err(TestCaseError::fail("not read")) };
        if let Ok(shape) = shape {
            for r in &shape.roles {
                prop_assert!(obj.pointer(&r.template).is_some_and(|t| t["spec"].is_object()), "{}", r.template);
            }
            prop_assume!(shape.total_member() <= 2_000);
            prop_assert!(workload::expand(&obj).is_ok());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A Grove PodGang of any shape in its counts, names and group configs: read or refused with
    /// Grove's field paths, never a panic; an accepted one is a valid gang tree whose leaves are
    /// its pod groups.
    #[test]
    fn grove_podgangs_of_any_shape_are_read_or_refused(
        min in any_value(), name in any_value(), listed in any_value(), refs in any_value(),
        required in any_value(), preferred in any_value(),
    ) {
        let obj = json!({"apiVersion": "scheduler.grove.io/v1alpha1", "kind": "PodGang",
            "metadata": {"name": "pg", "namespace": "llm"},
            "spec": {"podgroups": [{"name": name, "minReplicas": min, "podReferences": refs},
                                   {"name": "b", "minReplicas": 1, "podReferences": [],
                                    "topologyConstraint": {"packConstraint": {"required": required, "preferred": preferred}}}],
                     "topologyConstraintGroupConfigs": [{"name": "cfg", "podGroupNames": [listed, "b"]}]}});
        match scheduler_core::dialect::read_object(&obj) {
            Some(Ok(scheduler_core::dialect::GangObject::Gang(g))) => {
                prop_assert!(scheduler_core::validate::gang_tree_errors(&g).is_empty(), "{:?}", g);
                prop_assert!(g.min_pods().is_some_and(|n| n >= 1));
            }
            Some(Ok(_)) => prop_assert!(false, "a PodGang read as another kind"),
            Some(Err(errors)) => {
                for e in errors {
                    prop_assert!(e.path.starts_with("spec") || e.path.starts_with("metadata"), "{e}");
                }
            }
            None => prop_assert!(false, "a PodGang not taken for a gang object"),
        }
    }

    /// A Grove PodCliqueSet of any shape in its counts and names: checked and expanded, or refused,
    /// never a panic; an accepted one expands into exactly the pods it counts, each claiming one
    /// PodGang the expansion also writes.
    #[test]
    fn grove_podcliquesets_of_any_shape_are_expanded_or_refused(
        replicas in any_value(), clique in any_value(), min in any_value(),
        group_replicas in any_value(), group_min in any_value(), set_replicas in prop_oneof![any_value(), (0i64..3).prop_map(|n| json!(n))],
    ) {
        let obj = json!({"apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet",
            "metadata": {"name": "s", "namespace": "llm"},
            "spec": {"replicas": set_replicas, "template": {
                "cliques": [{"name": clique, "spec": {"roleName": "a", "replicas": replicas, "minAvailable": min,
                                                       "podSpec": {"containers": [{"name": "c", "image": "x"}]}}},
                            {"name": "w", "spec": {"roleName": "w", "replicas": 2,
                                                   "podSpec": {"containers": [{"name": "c", "image": "x"}]}}}],
                "podCliqueScalingGroups": [{"name": "g", "cliqueNames": ["w"], "replicas": group_replicas, "minAvailable": group_min}]}}});
        let (errors, _) = workload::grove::check(&obj);
        match workload::expand_admitted(&obj) {
            Ok(out) => {
                prop_assert!(errors.is_empty());
                let pods: Vec<&Value> = out.iter().filter(|o| o["kind"] == "Pod").collect();
                prop_assert_eq!(pods.len() as u64, workload::grove::pod_count(&obj).unwrap_or(u64::MAX));
                for p in pods {
                    let gang = p["metadata"]["labels"]["grove.io/podgang"].as_str().unwrap_or("");
                    prop_assert!(out.iter().any(|o| o["kind"] == "PodGang" && o["metadata"]["name"] == gang), "{gang}");
                }
            }
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }

    /// A TrainJob of any shape in its runtime reference and trainer: rendered or refused, never a
    /// panic; a rendered one's PodGroup counts exactly the pods its JobSet runs at once.
    #[test]
    fn trainjobs_of_any_shape_are_rendered_or_refused(
        name in prop_oneof![any_value(), Just(json!("torch"))], kind in any_value(), nodes in any_value(), resources in any_value(),
    ) {
        let runtime = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "torch"},
            "spec": {"mlPolicy": {"numNodes": 2, "torch": {}}, "podGroupPolicy": {"coscheduling": {}},
                "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "x"}]}}}}}]}}}});
        let tj = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "t", "namespace": "ml"},
            "spec": {"runtimeRef": {"name": name, "kind": kind}, "trainer": {"numNodes": nodes, "resourcesPerNode": resources}}});
        match workload::trainer::render(&tj, &[runtime]) {
            Ok(Some((objects, _))) => {
                let parallelism = objects[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"].as_i64();
                let min = objects.get(1).and_then(|g| g["spec"]["minMember"].as_i64());
                prop_assert_eq!(parallelism, min);
                prop_assert!(parallelism.is_some_and(|n| n >= 1));
            }
            Ok(None) => {}
            Err(e) => prop_assert!(e.iter().all(|e| e.path.starts_with("spec.") || e.path.starts_with("metadata.")), "{e:?}"),
        }
    }
}
