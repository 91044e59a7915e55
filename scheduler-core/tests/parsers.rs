//! Parsers never panic, whatever they are fed: quantities, durations, any JSON through validation,
//! workload inspection, injection, expansion and cluster assembly.

use proptest::prelude::*;
use scheduler_core::cluster::Cluster;
use scheduler_core::{dialect, duration, quantity, resources, validate, workload};
use serde_json::{Value, json};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-zA-Z0-9./-]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("8"),
            Just("-1"),
            Just("1.5Gi"),
            Just("x"),
            Just("Gang"),
            Just("Pod"),
            Just("kube-gang.io/gang")
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("apiVersion".to_string()),
                    Just("kind".to_string()),
                    Just("metadata".to_string()),
                    Just("spec".to_string()),
                    Just("labels".to_string()),
                    Just("annotations".to_string()),
                    Just("minMember".to_string()),
                    Just("subGroups".to_string()),
                    Just("replicas".to_string()),
                    Just("template".to_string()),
                    Just("name".to_string()),
                    Just("parent".to_string()),
                    "[a-z]{1,6}",
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Objects that look like what the parsers dispatch on, with arbitrary insides.
fn object() -> impl Strategy<Value = Value> {
    let kinds = prop_oneof![
        Just(("kube-gang.io/v1alpha1", "Gang")),
        Just(("v1", "Pod")),
        Just(("batch/v1", "Job")),
        Just(("jobset.x-k8s.io/v1alpha2", "JobSet")),
        Just(("kubeflow.org/v1", "PyTorchJob")),
        Just(("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")),
        Just(("scheduling.x-k8s.io/v1alpha1", "PodGroup")),
        Just(("scheduling.volcano.sh/v1beta1", "PodGroup")),
        Just(("scheduling.run.ai/v2alpha2", "PodGroup")),
        Just(("scheduling.k8s.io/v1beta1", "PodGroup")),
        Just(("v1", "Node")),
        Just(("v1", "List")),
    ];
    (kinds, json_value(), json_value()).prop_map(|((api, kind), metadata, spec)| {
        json!({"apiVersion": api, "kind": kind, "metadata": metadata, "spec": spec, "items": [spec.clone()]})
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn quantities_never_panic(s in "\\PC{0,24}") {
        let _ = quantity::parse(&s);
        let _ = resources::amount("cpu", &s);
        let _ = duration::parse(&s);
    }

    #[test]
    fn integer_binary_quantities_are_exact(n in 0i64..1_000_000, suffix in 0usize..4) {
        let (s, mult) = [("Ki", 1i64 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30), ("", 1)][suffix];
        prop_assert_eq!(resources::amount("memory", &format!("{n}{s}")), Ok(n * mult));
        prop_assert_eq!(resources::amount("cpu", &format!("{n}m")), Ok(n));
    }

    #[test]
    fn every_entry_point_survives_any_object(obj in object(), old in proptest::option::of(object())) {
        let _ = validate::validate(&obj, old.as_ref());
        let _ = workload::inspect(&obj);
        let _ = workload::inject(&obj);
        let _ = workload::expand(&obj);
        let _ = dialect::read_object(&obj);
        let _ = dialect::pod_claims(&obj);
        let mut c = Cluster::new();
        let _ = c.push(obj);
        let a = c.snapshot();
        let _ = scheduler_core::schedule(&a.snapshot, &scheduler_core::Config::default(), scheduler_core::Time(0));
    }

    #[test]
    fn injection_is_idempotent(replicas in 0i64..5, parallelism in 0i64..5) {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": {"kube-gang.io/enabled": "true"}},
            "spec": {"parallelism": parallelism, "completions": replicas, "template": {"spec": {"containers": []}}}});
        if let Ok(once) = workload::inject(&job) {
            prop_assert_eq!(workload::inject(&once).unwrap(), once);
        }
    }
}
