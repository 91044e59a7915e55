//! The rule book: a valid disaggregated-serving gang, and broken variants of it, each rejected with
//! the field path a user must fix. Every problem is reported, not just the first.

use scheduler_core::validate::validate;
use serde_json::{Value, json};

fn disagg() -> Value {
    json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "llm", "namespace": "serving"},
        "spec": {"minMember": 2, "topologyKey": "topology.kubernetes.io/zone", "scheduleTimeoutSeconds": 900,
                 "subGroups": [
                    {"name": "replica-0", "minMember": 2, "topologyKey": "kube-gang.io/rack"},
                    {"name": "replica-0-prefill", "parent": "replica-0", "minMember": 2},
                    {"name": "replica-0-decode", "parent": "replica-0", "minMember": 4},
                    {"name": "replica-1", "minMember": 2, "topologyKey": "kube-gang.io/rack"},
                    {"name": "replica-1-prefill", "parent": "replica-1", "minMember": 2},
                    {"name": "replica-1-decode", "parent": "replica-1", "minMember": 4}]}})
}

fn paths(v: &Value) -> Vec<String> {
    validate(v, None).errors.iter().map(|e| e.path.clone()).collect()
}

fn broken(edit: impl FnOnce(&mut Value)) -> Value {
    let mut v = disagg();
    edit(&mut v);
    v
}

#[test]
fn the_disaggregated_serving_gang_is_valid() {
    let v = validate(&disagg(), None);
    assert!(v.errors.is_empty(), "{:?}", v.errors);
}

#[test]
fn broken_variants_name_their_fields() {
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            broken(|v| v["spec"]["subGroups"][2]["parent"] = json!("replica-9")),
            "spec.subGroups[2].parent",
            "not found",
        ),
        (
            broken(|v| v["spec"]["subGroups"][4]["name"] = json!("replica-0-prefill")),
            "spec.subGroups[4].name",
            "duplicate",
        ),
        (broken(|v| v["spec"]["minMember"] = json!(3)), "spec.minMember", "can never be satisfied"),
        (
            broken(|v| v["spec"]["subGroups"][0]["minMember"] = json!(3)),
            "spec.subGroups[0].minMember",
            "can never be satisfied",
        ),
        (
            broken(|v| v["spec"]["subGroups"][1]["minMember"] = json!(0)),
            "spec.subGroups[1].minMember",
            "at least 1",
        ),
        (
            broken(|v| v["spec"]["subGroups"][0]["parent"] = json!("replica-0-decode")),
            "spec.subGroups[0].parent",
            "cycle",
        ),
        (
            broken(|v| v["spec"]["subGroups"][3]["name"] = json!("Replica 1!")),
            "spec.subGroups[3].name",
            "DNS-1123 label",
        ),
        // A valid label value, but not a DNS-1123 label (uppercase, `_`, `.`).
        (
            broken(|v| v["spec"]["subGroups"][3]["name"] = json!("Replica_1.a")),
            "spec.subGroups[3].name",
            "DNS-1123 label",
        ),
        (broken(|v| v["spec"]["topologyKey"] = json!("bad key/")), "spec.topologyKey", "label key"),
        (
            broken(|v| v["spec"]["topology"] = json!({"preferred": "bad key/"})),
            "spec.topology.preferred",
            "label key",
        ),
        (
            broken(|v| v["spec"]["topology"] = json!({"required": "kube-gang.io/rack"})),
            "spec.topology.required",
            "disagrees with spec.topologyKey",
        ),
        (
            broken(|v| v["spec"]["subGroups"][1]["topology"] = json!({"preferred": "bad key/"})),
            "spec.subGroups[1].topology.preferred",
            "label key",
        ),
        (broken(|v| v["spec"]["gangGroup"] = json!(["serving/llm"])), "spec.gangGroup[0]", "itself"),
        (
            broken(|v| v["spec"]["scheduleTimeoutSeconds"] = json!(-5)),
            "spec.scheduleTimeoutSeconds",
            "negative",
        ),
    ];
    for (obj, path, needle) in cases {
        let v = validate(&obj, None);
        let hit = v.errors.iter().find(|e| e.path == path);
        assert!(
            hit.is_some_and(|e| e.message.contains(needle)),
            "{path}: want {needle:?}, got {:?}",
            v.errors
        );
    }
}

#[test]
fn every_problem_is_reported_at_once() {
    let v = broken(|v| {
        v["spec"]["subGroups"][2]["parent"] = json!("nowhere");
        v["spec"]["subGroups"][5]["minMember"] = json!(0);
    });
    let p = paths(&v);
    assert!(
        p.contains(&"spec.subGroups[2].parent".to_string())
            && p.contains(&"spec.subGroups[5].minMember".to_string()),
        "{p:?}"
    );
}

#[test]
fn malformed_gangs_are_errors_not_panics() {
    let v = json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang", "metadata": {"name": "x"}, "spec": {"minMember": "two"}});
    let errs = validate(&v, None).errors;
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].path, "spec.minMember", "{errs:?}");
    assert!(errs[0].message.contains("must be of type integer"), "{errs:?}");
    assert!(!validate(&json!("nope"), None).errors.is_empty());
}

#[test]
fn the_subgroup_tree_is_immutable_on_update() {
    let old = disagg();
    let renamed = broken(|v| v["spec"]["subGroups"][1]["name"] = json!("replica-0-p"));
    assert!(
        validate(&renamed, Some(&old))
            .errors
            .iter()
            .any(|e| e.path == "spec.subGroups" && e.message.contains("immutable"))
    );
    let resized = broken(|v| v["spec"]["subGroups"][2]["minMember"] = json!(3));
    assert!(validate(&resized, Some(&old)).errors.is_empty(), "minimums may change");
}

#[test]
fn workloads_that_can_never_be_satisfied_are_denied() {
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "labels": {"kube-gang.io/enabled": "true"}},
        "spec": {"parallelism": 4, "template": {"metadata": {"annotations": {"kube-gang.io/min-member": "8"}}, "spec": {"containers": []}}}});
    let errs = validate(&job, None).errors;
    assert_eq!(errs[0].path, "spec.template.metadata.annotations[kube-gang.io/min-member]");
    assert!(errs[0].message.contains("8 exceeds the 4 pods"), "{errs:?}");
    // Not opted in and no gang labels: not ours to judge.
    let plain = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, "spec": {"parallelism": -1, "template": {}}});
    assert!(validate(&plain, None).errors.is_empty());
}

#[test]
fn pods_claimed_by_two_gangs_and_bad_annotations() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml",
        "labels": {"kube-gang.io/gang": "a"}, "annotations": {"scheduling.k8s.io/group-name": "b"}}, "spec": {"containers": []}});
    let errs = validate(&pod, None).errors;
    assert!(errs[0].message.contains("ml/a") && errs[0].message.contains("ml/b"), "{errs:?}");
    let bad = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
        "labels": {"kube-gang.io/gang": "a"}, "annotations": {"kube-gang.io/min-member": "many", "kube-gang.io/timeout": "soon"}},
        "spec": {"containers": []}});
    let p = paths(&bad);
    assert!(p.contains(&"metadata.annotations[kube-gang.io/min-member]".to_string()), "{p:?}");
    assert!(p.contains(&"metadata.annotations[kube-gang.io/timeout]".to_string()), "{p:?}");
}

#[test]
fn other_dialects_podgroups_are_validated_too() {
    let pg = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "w"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}});
    assert_eq!(paths(&pg), vec!["spec.schedulingPolicy.gang.minCount"]);
    let kai = json!({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "k"},
        "spec": {"minMember": 1, "subGroups": [{"name": "a", "parent": "ghost", "minMember": 1}]}});
    assert!(paths(&kai).contains(&"spec.subGroups[0].parent".to_string()), "{:?}", paths(&kai));
}

mod gaps {
    use scheduler_core::validate::validate;
    use serde_json::{Value, json};

    fn gang(spec: Value) -> Value {
        json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
            "metadata": {"name": "g", "namespace": "ml"}, "spec": spec})
    }

    fn errors(v: &Value, old: Option<&Value>) -> Vec<String> {
        validate(v, old).errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn mode_is_immutable_on_update() {
        let old = gang(json!({"minMember": 2, "mode": "Strict"}));
        let new = gang(json!({"minMember": 3, "mode": "NonStrict", "scheduleTimeoutSeconds": 60}));
        let e = errors(&new, Some(&old));
        assert!(e.iter().any(|e| e.starts_with("spec.mode: field is immutable")), "{e:?}");
        assert!(errors(&gang(json!({"minMember": 3})), Some(&old)).is_empty(), "minimums may change");
    }

    #[test]
    fn timeouts_are_positive_and_bounded() {
        for (t, needle) in [(0, "greater than 0"), (40 * 24 * 3600, "30-day maximum")] {
            let e = errors(&gang(json!({"minMember": 1, "scheduleTimeoutSeconds": t})), None);
            assert!(
                e.iter().any(|e| e.starts_with("spec.scheduleTimeoutSeconds") && e.contains(needle)),
                "{e:?}"
            );
        }
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
            "labels": {"kube-gang.io/gang": "g"},
            "annotations": {"kube-gang.io/min-member": "2", "kube-gang.io/timeout": "0s"}}});
        let e = errors(&pod, None);
        assert!(
            e.iter()
                .any(|e| e.starts_with("metadata.annotations[kube-gang.io/timeout]: must be greater than 0")),
            "{e:?}"
        );
    }

    #[test]
    fn topology_key_and_gang_group_annotations_are_checked_at_admission() {
        let pod = |key: &str, value: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml",
                "labels": {"kube-gang.io/gang": "g"},
                "annotations": {"kube-gang.io/min-member": "2", key: value}}})
        };
        let e = errors(&pod("kube-gang.io/topology-key", "bad key/"), None);
        assert!(
            e.iter().any(|e| e.starts_with("metadata.annotations[kube-gang.io/topology-key]: ")),
            "{e:?}"
        );
        let e = errors(&pod("kube-gang.io/topology-preferred", "bad key/"), None);
        assert!(
            e.iter().any(|e| e.starts_with("metadata.annotations[kube-gang.io/topology-preferred]: ")),
            "{e:?}"
        );
        let both = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml",
            "labels": {"kube-gang.io/gang": "g"},
            "annotations": {"kube-gang.io/min-member": "2", "kube-gang.io/topology-key": "zone",
                            "kube-gang.io/topology-required": "rack"}}});
        let e = errors(&both, None);
        assert!(
            e.iter()
                .any(|e| e
                    .starts_with("metadata.annotations[kube-gang.io/topology-required]: \"rack\" disagrees")),
            "{e:?}"
        );
        let e = errors(&pod("kube-gang.io/gang-group", "ml/other, ml/g"), None);
        assert!(
            e.iter().any(|e| e
                .starts_with("metadata.annotations[kube-gang.io/gang-group][1]: a gang cannot name itself")),
            "{e:?}"
        );
    }

    #[test]
    fn every_claim_error_of_a_pod_is_reported() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
            "labels": {"kube-gang.io/gang": "Not A Name", "scheduling.x-k8s.io/pod-group": "a"},
            "annotations": {"scheduling.k8s.io/group-name": "b"}},
            "spec": {"schedulingGroup": {"podGroupName": 7}}});
        let e = errors(&pod, None);
        assert!(e.iter().any(|e| e.starts_with("metadata.labels[kube-gang.io/gang]")), "{e:?}");
        assert!(e.iter().any(|e| e.starts_with("spec.schedulingGroup.podGroupName")), "{e:?}");
        assert!(e.iter().any(|e| e.contains("claimed by two gangs")), "{e:?}");
    }

    #[test]
    fn type_errors_name_the_exact_field_in_the_api_servers_words() {
        let e = errors(&gang(json!({"minMember": 2, "mode": "Sometimes"})), None);
        assert_eq!(
            e,
            vec![r#"spec.mode: Unsupported value: "Sometimes": supported values: "NonStrict", "Strict""#]
        );
        let e =
            errors(&gang(json!({"minMember": "two", "subGroups": [{"name": "a", "minMember": true}]})), None);
        assert!(e.contains(&r#"spec.minMember: Invalid value: "string": spec.minMember in body must be of type integer: "string""#.to_string()), "{e:?}");
        assert!(
            e.iter().any(|e| e.starts_with("spec.subGroups[0].minMember: Invalid value: \"boolean\"")),
            "{e:?}"
        );
    }
}

#[test]
fn a_pod_floor_above_the_members_that_can_exist_is_denied() {
    use scheduler_core::model::{Dialect, Gang, GangKey, Source, SubGroup};
    use scheduler_core::validate::gang_tree_errors;
    let mut g =
        Gang::new(GangKey::new("llm", "big"), 2, Source { dialect: Dialect::Kai, kind: "PodGroup".into() });
    g.subgroups = ["leaders", "workers"]
        .iter()
        .map(|n| SubGroup {
            name: (*n).into(),
            parent: None,
            min_member: 2,
            pod_floor: 0,
            topology_preferred: None,
            topology_key: None,
        })
        .collect();
    g.total_member = Some(8);
    g.pod_floor = 8;
    assert!(gang_tree_errors(&g).is_empty(), "a floor of 8 over 8 members can be met");
    g.pod_floor = 10;
    let errors = gang_tree_errors(&g);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "spec.minMember");
    assert!(errors[0].message.contains("needs at least 10 pods") && errors[0].message.contains("only 8"));
}

/// A keyed set of gangs finds what a scan of a list finds: every gang with the key, in the order
/// given (one key may be read from two dialects' objects), and nothing for an unknown key.
#[test]
fn a_gang_set_finds_what_a_list_finds() {
    use scheduler_core::model::{Dialect, Gang, GangKey, Source};
    use scheduler_core::{GangSet, Gangs};
    let gang = |ns: &str, name: &str, dialect: Dialect| {
        Gang::new(GangKey::new(ns, name), 2, Source { dialect, kind: "PodGroup".into() })
    };
    let list = vec![
        gang("ml", "a", Dialect::Kai),
        gang("ml", "b", Dialect::Volcano),
        gang("ml", "a", Dialect::Coscheduling),
        gang("team", "a", Dialect::Kai),
    ];
    let set: GangSet = list.iter().cloned().collect();
    assert_eq!(set.len(), 4);
    for key in
        [GangKey::new("ml", "a"), GangKey::new("ml", "b"), GangKey::new("team", "a"), GangKey::new("ml", "z")]
    {
        let from_list: Vec<Gang> = list.find(&key).into_iter().map(|g| g.into_owned()).collect();
        let from_set: Vec<Gang> = set.find(&key).into_iter().map(|g| g.into_owned()).collect();
        assert_eq!(from_set, from_list, "{key}");
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml",
        "labels": {"scheduling.x-k8s.io/pod-group": "a"}}, "spec": {"containers": []}});
    let claimed: Vec<Dialect> = set.claimed_by(&pod).iter().map(|g| g.source.dialect).collect();
    assert_eq!(claimed, [Dialect::Kai, Dialect::Coscheduling], "the gangs with the key it claims");
}

/// A Job whose `spec.scheduling` its controller compiles into an upstream PodGroup (Kubernetes
/// 1.37) gets our scheduler and no gang of ours: its pods name that PodGroup, and would otherwise
/// claim two gangs. Without `spec.scheduling` the same Job gets its kube-gang gang.
#[test]
fn a_job_with_its_own_upstream_scheduling_gets_no_second_gang() {
    let job = |scheduling: Value| {
        let mut j = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "ml", "labels": {"kube-gang.io/enabled": "true"}},
            "spec": {"parallelism": 4, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        if !scheduling.is_null() {
            j["spec"]["scheduling"] = scheduling;
        }
        j
    };
    let injected = |j: &Value| scheduler_core::workload::inject(j).unwrap()["spec"]["template"].clone();
    let own = injected(&job(json!({"schedulingPolicy": {"gang": {}}})));
    assert_eq!(own["spec"]["schedulerName"], "gang-scheduler");
    assert!(own["metadata"]["labels"].get("kube-gang.io/gang").is_none(), "{own}");
    let ours = injected(&job(Value::Null));
    assert_eq!(ours["metadata"]["labels"]["kube-gang.io/gang"], "train");
    // Its pods, as its controller makes them, name the PodGroup it compiles (minCount from
    // parallelism).
    let made =
        scheduler_core::workload::expand_admitted(&job(json!({"schedulingPolicy": {"gang": {}}}))).unwrap();
    assert_eq!(made[0]["kind"], "PodGroup");
    assert_eq!(made[0]["spec"]["schedulingPolicy"]["gang"]["minCount"], 4);
    assert!(made[1..].iter().all(|p| p["spec"]["schedulingGroup"]["podGroupName"] == "train"));
    assert_eq!(made.len(), 5);
}
