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

proptest! {
    /// `Resources` behaves as a map of names to non-zero amounts, however it was built: the same
    /// amounts, names in order, equal (and hashing alike) whatever the order of the writes, and
    /// the same after a round trip through JSON.
    #[test]
    fn resources_behave_as_a_map_of_non_zero_amounts(
        writes in proptest::collection::vec((0usize..6, -3i64..4), 0..24),
    ) {
        use std::collections::BTreeMap;
        use std::hash::{BuildHasher, RandomState};
        const NAMES: [&str; 6] = ["cpu", "memory", "pods", "nvidia.com/gpu", "ephemeral-storage", "a"];
        let mut model: BTreeMap<&str, i64> = BTreeMap::new();
        let mut forward = resources::Resources::new();
        for &(name, amount) in &writes {
            forward.set(NAMES[name], amount);
            if amount == 0 { model.remove(NAMES[name]); } else { model.insert(NAMES[name], amount); }
        }
        let listed: Vec<(&str, i64)> = forward.iter().collect();
        let want: Vec<(&str, i64)> = model.iter().map(|(k, v)| (*k, *v)).collect();
        prop_assert_eq!(&listed, &want);
        prop_assert_eq!(forward.len(), model.len());
        for name in NAMES {
            prop_assert_eq!(forward.get(name), model.get(name).copied().unwrap_or(0));
        }
        // The same amounts written in the reverse order are the same value.
        let backward: resources::Resources = model.iter().rev().map(|(k, v)| (k.to_string(), *v)).collect();
        prop_assert_eq!(&backward, &forward);
        let hasher = RandomState::new();
        prop_assert_eq!(hasher.hash_one(&backward), hasher.hash_one(&forward));
        let json = serde_json::to_value(&forward).unwrap();
        prop_assert_eq!(json.as_object().map(|m| m.len()), Some(model.len()));
        let back: resources::Resources = serde_json::from_value(json).unwrap();
        prop_assert_eq!(back, forward);
    }
}

#[test]
fn resources_read_from_json_leave_zero_amounts_out() {
    let r: resources::Resources = serde_json::from_value(json!({"memory": 0, "cpu": 500})).unwrap();
    assert_eq!(r.iter().collect::<Vec<_>>(), vec![("cpu", 500)]);
    assert_eq!(r, resources::Resources::new().with("cpu", 500));
}
