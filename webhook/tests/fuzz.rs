//! Property tests of the decode → admit path: no input panics, every well-formed review is answered
//! with its own uid, and mutation never denies.

use gang_webhook::admission::{Hook, review};
use proptest::prelude::*;
use serde_json::{Value, json};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-z0-9./~-]{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "Pod",
            "Job",
            "Gang",
            "v1",
            "batch/v1",
            "kube-gang.io/v1alpha1",
            "true",
            "-1",
            "2Gi"
        ])
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "apiVersion",
                    "kind",
                    "metadata",
                    "name",
                    "namespace",
                    "labels",
                    "annotations",
                    "spec",
                    "template",
                    "replicas",
                    "parallelism",
                    "minMember",
                    "subGroups",
                    "parent",
                    "containers",
                    "kube-gang.io/gang",
                    "kube-gang.io/enabled",
                    "kube-gang.io/min-member",
                    "pytorchReplicaSpecs",
                    "Worker",
                    "resources",
                    "limits",
                ])
                .prop_map(String::from),
                inner,
                0..6,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn object() -> impl Strategy<Value = Value> {
    let kinds = prop::sample::select(vec![
        ("v1", "Pod"),
        ("batch/v1", "Job"),
        ("kube-gang.io/v1alpha1", "Gang"),
        ("kubeflow.org/v1", "PyTorchJob"),
        ("scheduling.volcano.sh/v1beta1", "PodGroup"),
        ("apps/v1", "StatefulSet"),
    ]);
    (kinds, json_value(), json_value()).prop_map(|((api, kind), metadata, spec)| {
        json!({"apiVersion": api, "kind": kind, "metadata": metadata, "spec": spec})
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = review(Hook::Validate, &bytes, false);
        let _ = review(Hook::Mutate, &bytes, true);
    }

    #[test]
    fn every_review_is_answered_with_its_uid(
        obj in prop_oneof![object(), json_value()],
        old in prop_oneof![Just(Value::Null), object()],
        op in prop::sample::select(vec!["CREATE", "UPDATE", "DELETE", "CONNECT"]),
        ns_opt_in in any::<bool>(),
    ) {
        let body = serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": op, "namespace": "ml", "object": obj, "oldObject": old}})).unwrap();
        let answer = |hook| review(hook, &body, ns_opt_in).map(|(a, s)| (serde_json::to_value(a).unwrap(), s));
        let (v, _) = answer(Hook::Validate).unwrap();
        prop_assert_eq!(&v["response"]["uid"], "u");
        prop_assert!(v["response"]["allowed"].is_boolean());
        let (m, summary) = answer(Hook::Mutate).unwrap();
        prop_assert_eq!(&m["response"]["uid"], "u");
        prop_assert_eq!(&m["response"]["allowed"], true, "mutation never denies");
        if let Some(p) = m["response"]["patch"].as_str() {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD.decode(p).unwrap();
            let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
            prop_assert_eq!(summary.patched, patch.0.len(), "the logged count is the patch's");
            let mut doc = obj.clone();
            prop_assert!(json_patch::patch(&mut doc, &patch).is_ok(), "the patch applies to the object it was made for");
        } else {
            prop_assert_eq!(summary.patched, 0);
        }
    }
}
