//! Effective requests as kube-scheduler computes them, and node/pod conversion.

use k8s_openapi::api::core::v1::{Node, Pod, PodSpec};
use scheduler_core::convert::{self, PriorityClasses};
use scheduler_core::resources::effective_requests;
use serde_json::json;

fn spec(v: serde_json::Value) -> PodSpec {
    serde_json::from_value(v).unwrap()
}

fn c(name: &str, cpu: &str, mem: &str) -> serde_json::Value {
    json!({"name": name, "resources": {"requests": {"cpu": cpu, "memory": mem}}})
}

#[test]
fn containers_sum_and_init_containers_take_the_max() {
    let s = spec(json!({"containers": [c("a", "1", "1Gi"), c("b", "500m", "1Gi")],
                        "initContainers": [c("init", "4", "512Mi")]}));
    let r = effective_requests(&s).unwrap();
    assert_eq!(r.get("cpu"), 4000, "the init container needs more cpu than the app");
    assert_eq!(r.get("memory"), 2 << 30, "the app needs more memory than the init container");
}

#[test]
fn sidecars_run_alongside_both_init_and_app_containers() {
    // sidecar (1 cpu) starts first; then a regular init (2 cpu) runs beside it; then the app (1 cpu).
    let mut sidecar = c("proxy", "1", "100Mi");
    sidecar["restartPolicy"] = json!("Always");
    let s = spec(
        json!({"containers": [c("app", "1", "1Gi")], "initContainers": [sidecar, c("migrate", "2", "100Mi")]}),
    );
    let r = effective_requests(&s).unwrap();
    assert_eq!(r.get("cpu"), 3000, "max(app 1 + sidecar 1, migrate 2 + sidecar 1)");
    assert_eq!(r.get("memory"), (1 << 30) + 100 * (1 << 20));
}

#[test]
fn a_regular_init_container_before_a_sidecar_does_not_count_it() {
    let mut sidecar = c("proxy", "3", "0");
    sidecar["restartPolicy"] = json!("Always");
    let s =
        spec(json!({"containers": [c("app", "1", "0")], "initContainers": [c("first", "2", "0"), sidecar]}));
    assert_eq!(effective_requests(&s).unwrap().get("cpu"), 4000, "app + sidecar; `first` ran alone");
}

#[test]
fn overhead_is_added_and_limits_default_requests() {
    let s = spec(
        json!({"containers": [{"name": "gpu", "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "2"}, "requests": {"cpu": "1"}}}],
                        "overhead": {"cpu": "250m", "memory": "120Mi"}}),
    );
    let r = effective_requests(&s).unwrap();
    assert_eq!(r.get("nvidia.com/gpu"), 8, "a limit without a request requests the limit");
    assert_eq!(r.get("cpu"), 1250, "an explicit request wins over the limit; overhead added");
    assert_eq!(r.get("memory"), 120 << 20);
    assert!(effective_requests(&spec(json!({"containers": [{"name": "x"}]}))).unwrap().is_empty());
}

#[test]
fn bad_quantities_name_the_container_and_resource() {
    let s = spec(json!({"containers": [c("ok", "1", "1Gi")], "initContainers": [c("bad", "one", "1Gi")]}));
    let errs = effective_requests(&s).unwrap_err();
    assert_eq!(errs[0].path, "spec.initContainers[0].resources.requests[cpu]");
    assert!(errs[0].message.contains("\"one\""));
    let neg = spec(json!({"containers": [c("neg", "-1", "1Gi")]}));
    assert!(effective_requests(&neg).unwrap_err()[0].message.contains("negative"));
}

#[test]
fn nodes_readiness_taints_and_allocatable() {
    let n: Node = serde_json::from_value(json!({"metadata": {"name": "gpu-1", "labels": {"rack": "a"}},
        "spec": {"unschedulable": true, "taints": [{"key": "gpu", "value": "reserved", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "False"}]}}))
    .unwrap();
    let m = convert::node(&n).unwrap();
    assert_eq!((m.allocatable.get("cpu"), m.allocatable.get("pods")), (64_000, 110));
    assert!(!m.ready && m.unschedulable);
    assert_eq!(m.taints[0].to_string(), "gpu=reserved:NoSchedule");
    let bad: Node = serde_json::from_value(json!({"metadata": {"name": "x"},
        "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}))
    .unwrap();
    assert_eq!(convert::node(&bad).unwrap_err()[0].path, "spec.taints[0].effect");
}

#[test]
fn pods_priority_affinity_and_errors() {
    let pcs = PriorityClasses::from_objects(&[
        serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 1000})).unwrap(),
        serde_json::from_value(json!({"metadata": {"name": "base"}, "value": 10, "globalDefault": true}))
            .unwrap(),
    ]);
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"priorityClassName": "high", "containers": [],
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["8"]}],
                     "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}},
                 "tolerations": [{"operator": "Exists"}]}}))
    .unwrap();
    let m = convert::pod(&p, &pcs).unwrap();
    assert_eq!(
        (m.priority, m.key.namespace.as_str(), m.scheduler_name.as_str()),
        (1000, "default", "default-scheduler")
    );
    assert_eq!(m.affinity[0].match_fields.len(), 1);
    let plain: Pod =
        serde_json::from_value(json!({"metadata": {"name": "q"}, "spec": {"containers": []}})).unwrap();
    assert_eq!(convert::pod(&plain, &pcs).unwrap().priority, 10, "global default");
    let bad: Pod = serde_json::from_value(json!({"metadata": {"name": "r"}, "spec": {"priorityClassName": "nope", "containers": [],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "k", "operator": "Near"}]}]}}}}})).unwrap();
    let errs = convert::pod(&bad, &pcs).unwrap_err();
    let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
    assert!(paths.contains(&"spec.priorityClassName"), "{paths:?}");
    assert!(paths.contains(&"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator"), "{paths:?}");
}

/// A pod from its spec, converted.
fn converted(spec: serde_json::Value, labels: serde_json::Value) -> scheduler_core::Pod {
    let p: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p", "namespace": "ml", "labels": labels}, "spec": spec}),
    )
    .unwrap();
    convert::pod(&p, &PriorityClasses::default()).unwrap()
}

#[test]
fn host_ports_of_containers_and_sidecars_with_the_api_servers_defaults() {
    let mut sidecar = json!({"name": "proxy", "restartPolicy": "Always", "ports": [{"containerPort": 15001, "hostPort": 15001}]});
    sidecar["ports"][0]["protocol"] = json!("UDP");
    let p = converted(
        json!({"containers": [{"name": "app", "ports": [
                    {"containerPort": 8080},
                    {"containerPort": 8443, "hostPort": 443, "hostIP": "10.0.0.1"}]}],
               "initContainers": [sidecar, {"name": "init", "ports": [{"containerPort": 9, "hostPort": 9}]}]}),
        json!({}),
    );
    let ports: Vec<String> = p.host_ports().iter().map(ToString::to_string).collect();
    assert_eq!(
        ports,
        ["UDP/15001", "TCP/10.0.0.1:443"],
        "sidecars first; an init container's port is gone by then"
    );
    // Under hostNetwork each port binds its containerPort on the node.
    let p = converted(
        json!({"hostNetwork": true, "containers": [{"name": "app", "ports": [{"containerPort": 8080}]}]}),
        json!({}),
    );
    assert_eq!(p.host_ports()[0].to_string(), "TCP/8080");
    assert!(
        converted(json!({"containers": [{"name": "app"}]}), json!({})).terms.is_none(),
        "most pods ask nothing"
    );
}

#[test]
fn pod_affinity_terms_read_their_namespaces_as_kube_scheduler_does() {
    let p = converted(
        json!({"containers": [], "affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}},
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}, "namespaces": ["data"]},
                {"topologyKey": "zone", "namespaceSelector": {}}],
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": {"topologyKey": "x"}}]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}]}}}),
        json!({}),
    );
    let t = p.terms().unwrap();
    assert_eq!(t.affinity.len(), 3, "preferred terms are not read (they only score)");
    assert_eq!(t.affinity[0].namespaces, ["ml"], "no namespaces named: the pod's own");
    assert_eq!(t.affinity[1].namespaces, ["data"]);
    assert!(t.affinity[2].namespaces.is_empty() && t.affinity[2].any_namespace());
    assert!(t.affinity[2].selector.is_none(), "no labelSelector: selects nothing");
    assert_eq!(t.anti_affinity[0].topology_key, "kubernetes.io/hostname");
    let bad: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [], "affinity": {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone", "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Near"}]}}]}}}}))
    .unwrap();
    let errors = convert::pod(&bad, &PriorityClasses::default()).unwrap_err();
    assert_eq!(
        errors[0].path,
        "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator"
    );
}

#[test]
fn spread_constraints_get_kube_schedulers_defaults_and_their_match_label_keys_merged() {
    use scheduler_core::model::terms::{Inclusion, Unsatisfiable};
    let p = converted(
        json!({"containers": [], "topologySpreadConstraints": [
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash", "absent"]},
            {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
             "minDomains": 3, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"}]}),
        json!({"app": "web", "pod-template-hash": "abc"}),
    );
    let t = p.terms().unwrap();
    let (a, b) = (&t.spread[0], &t.spread[1]);
    assert_eq!(
        (a.min_domains, a.node_affinity_policy, a.node_taints_policy),
        (1, Inclusion::Honor, Inclusion::Ignore)
    );
    let merged = a.selector.as_ref().unwrap();
    assert_eq!(merged.match_expressions.len(), 1, "a key the pod lacks adds nothing: {merged:?}");
    assert_eq!(merged.match_expressions[0].values, ["abc"]);
    assert_eq!((b.when_unsatisfiable, b.min_domains), (Unsatisfiable::ScheduleAnyway, 3));
    assert!(b.selector.is_none(), "no labelSelector: counts nothing");
    assert_eq!(t.hard_spread().count(), 1, "ScheduleAnyway never filters");
    let bad: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [],
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"}]}}))
    .unwrap();
    let errors = convert::pod(&bad, &PriorityClasses::default()).unwrap_err();
    assert_eq!(errors[0].path, "spec.topologySpreadConstraints[0].whenUnsatisfiable");
    assert!(errors[0].message.contains("\"DoNotSchedule\", \"ScheduleAnyway\""), "{}", errors[0]);
}

#[test]
fn pod_level_requests_replace_the_containers_for_cpu_memory_and_hugepages() {
    // Containers ask 1 cpu, 1Gi, 2 GPUs; the pod 4 cpu for all of them: cpu is the pod's, the rest
    // the containers'; overhead on top.
    let s = spec(
        json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"}}}],
        "resources": {"requests": {"cpu": "4"}}, "overhead": {"cpu": "100m"}}),
    );
    let r = effective_requests(&s).unwrap();
    assert_eq!((r.get("cpu"), r.get("memory"), r.get("nvidia.com/gpu")), (4100, 1 << 30, 2));
    // Pod-level limits only: the API server defaults the pod's requests to them (cpu, memory);
    // hugepages the containers ask for stay theirs.
    let s = spec(
        json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "hugepages-2Mi": "4Mi"}}}],
        "resources": {"limits": {"cpu": "2", "memory": "2Gi", "hugepages-2Mi": "8Mi"}}}),
    );
    let r = effective_requests(&s).unwrap();
    assert_eq!((r.get("cpu"), r.get("memory"), r.get("hugepages-2Mi")), (2000, 2 << 30, 4 << 20));
    // An extended resource at pod level is not the pod's to set.
    let s = spec(json!({"containers": [{"name": "a", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
        "resources": {"requests": {"nvidia.com/gpu": "8"}}}));
    assert_eq!(effective_requests(&s).unwrap().get("nvidia.com/gpu"), 1);
    let bad = spec(json!({"containers": [], "resources": {"requests": {"cpu": "lots"}}}));
    assert_eq!(effective_requests(&bad).unwrap_err()[0].path, "spec.resources.requests[cpu]");
}

#[test]
fn fields_the_cycle_does_not_evaluate_are_named() {
    let p = converted(
        json!({"containers": [{"name": "a", "resources": {"claims": [{"name": "gpu"}]}}],
               "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
               "volumes": [{"name": "cfg", "configMap": {"name": "x"}}, {"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
                           {"name": "scratch", "ephemeral": {}}, {"name": "inline", "csi": {"driver": "x"}}]}),
        json!({}),
    );
    // Claims, PVCs and ephemeral volumes are evaluated (the volume filters, DRA's allocated
    // claims); an inline CSI volume is not.
    assert_eq!(p.unevaluated(), ["spec.volumes[3].csi"]);
    assert!(
        converted(json!({"containers": [], "volumes": [{"name": "t", "projected": {}}]}), json!({}))
            .terms
            .is_none()
    );
}

#[test]
fn a_pod_the_kubelet_refused_carries_why() {
    let pcs = PriorityClasses::default();
    let refused: Pod = serde_json::from_value(json!({"metadata": {"name": "w-3"},
        "spec": {"nodeName": "gpu-2", "containers": []},
        "status": {"phase": "Failed", "reason": "OutOfnvidia.com/gpu",
                   "message": "Node didn't have enough resource: nvidia.com/gpu"}}))
    .unwrap();
    let m = convert::pod(&refused, &pcs).unwrap();
    assert_eq!(
        m.failure.as_deref(),
        Some("OutOfnvidia.com/gpu: Node didn't have enough resource: nvidia.com/gpu")
    );
    assert!(m.rejected_at_admission());
    let crashed: Pod = serde_json::from_value(json!({"metadata": {"name": "w-4"},
        "spec": {"nodeName": "gpu-2", "containers": []},
        "status": {"phase": "Failed", "reason": "Evicted"}}))
    .unwrap();
    let m = convert::pod(&crashed, &pcs).unwrap();
    assert_eq!(m.failure.as_deref(), Some("Evicted"));
    assert!(!m.rejected_at_admission(), "node-pressure eviction is not an admission refusal");
    let unbound: Pod =
        serde_json::from_value(json!({"metadata": {"name": "w-5"}, "spec": {"containers": []},
        "status": {"phase": "Failed", "reason": "OutOfcpu"}}))
        .unwrap();
    assert_eq!(convert::pod(&unbound, &pcs).unwrap().failure, None, "only pods that had a node");
}

#[test]
fn scheduling_gates_are_read_in_order_and_mark_the_pod_gated() {
    let pcs = PriorityClasses::default();
    // The shape Kueue creates: `spec.schedulingGates[].name` (core/v1 PodSchedulingGate).
    let gated: Pod = serde_json::from_value(json!({"metadata": {"name": "w-0"},
        "spec": {"containers": [], "schedulingGates": [
            {"name": "kueue.x-k8s.io/admission"}, {"name": "example.com/quota"}]}}))
    .unwrap();
    let m = convert::pod(&gated, &pcs).unwrap();
    assert_eq!(m.scheduling_gates, ["kueue.x-k8s.io/admission", "example.com/quota"]);
    assert!(m.is_gated() && m.is_pending(), "gated pods still exist and wait for a node");
    let released: Pod = serde_json::from_value(
        json!({"metadata": {"name": "w-0"}, "spec": {"containers": [], "schedulingGates": []}}),
    )
    .unwrap();
    assert!(!convert::pod(&released, &pcs).unwrap().is_gated());
}

/// A PodDisruptionBudget as the API server serves it (`policy/v1`): what preemption reads.
#[test]
fn a_budget_is_read_with_its_selector_allowance_and_disrupted_pods() {
    let b = convert::budget_from_value(&json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"},
                 "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["canary"]}]}},
        "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3,
                   "disruptedPods": {"web-0": "2026-01-01T00:00:00Z"}}
    }))
    .unwrap();
    assert_eq!(b.key.to_string(), "shop/web");
    assert_eq!(b.disruptions_allowed, 1);
    assert!(b.disrupted_pods.contains("web-0"));
    let pod = |ns: &str, labels: &[(&str, &str)]| {
        let mut p: scheduler_core::model::Pod =
            serde_json::from_value(json!({"key": {"namespace": ns, "name": "p"}})).unwrap();
        p.labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
            .into();
        p
    };
    assert!(b.selects(&pod("shop", &[("app", "web")])), "NotIn holds when the key is absent");
    assert!(!b.selects(&pod("shop", &[("app", "web"), ("tier", "canary")])));
    assert!(!b.selects(&pod("other", &[("app", "web")])), "a budget selects only its namespace");
    assert!(!b.selects(&pod("shop", &[])));
}

#[test]
fn a_budget_without_a_selector_selects_nothing_and_bad_operators_are_named() {
    let empty = convert::budget_from_value(&json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "all", "namespace": "shop"}, "spec": {"selector": {}}
    }))
    .unwrap();
    assert_eq!(empty.selector, None);
    assert_eq!(empty.disruptions_allowed, 0, "no status yet: nothing allowed");
    let errors = convert::budget_from_value(&json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "bad", "namespace": "shop"},
        "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}}
    }))
    .unwrap_err();
    assert_eq!(errors[0].to_string(), "spec.selector.matchExpressions[0].operator: unknown operator \"Gt\"");
}

mod raw_pods {
    //! A pod read straight from its JSON (`pod_from_raw`, the scheduler's and the dump reader's
    //! path) converts exactly as one decoded whole first (`pod_from_value`): the same pod, or the
    //! same errors, whatever the fields the model reads hold — random ones and every pod of the
    //! repository's fixtures.

    use std::path::Path;

    use proptest::prelude::*;
    use scheduler_core::convert::{self, PriorityClasses};
    use serde_json::{Map, Value, json};

    fn classes() -> PriorityClasses {
        PriorityClasses::from_objects(&[
            serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 1000})).unwrap(),
            serde_json::from_value(json!({"metadata": {"name": "base"}, "value": 10, "globalDefault": true}))
                .unwrap(),
        ])
    }

    /// Both ways, compared.
    fn same_both_ways(pod: &Value) -> Result<(), TestCaseError> {
        let pcs = classes();
        let raw = convert::pod_from_raw(pod, &pcs);
        let typed = convert::pod_from_value(pod, &pcs);
        prop_assert_eq!(raw, typed, "{:#}", pod);
        Ok(())
    }

    /// Something a field may hold that k8s-openapi would not decode there (or would).
    fn odd() -> impl Strategy<Value = Value> {
        prop::sample::select(vec![
            Value::Null,
            json!(5),
            json!(-3),
            json!(3_000_000_000i64),
            json!(1.5),
            json!(true),
            json!("x"),
            json!(""),
            json!([]),
            json!(["x"]),
            json!({}),
            json!({"x": 1}),
        ])
    }

    /// A string field: mostly the first of `known` (one the model reads well), now and then
    /// another of them (some it refuses), rarely anything else.
    fn text(known: &'static [&'static str]) -> BoxedStrategy<Value> {
        prop_oneof![
            20 => Just(json!(known[0])),
            6 => prop::sample::select(known).prop_map(|s| json!(s)),
            1 => "[a-z]{0,3}".prop_map(Value::String),
            1 => odd(),
        ]
        .boxed()
    }

    fn quantity() -> BoxedStrategy<Value> {
        text(&["1", "500m", "2Gi", "0", "8", "-1", "lots", "1e3", ""])
    }

    fn time() -> BoxedStrategy<Value> {
        text(&[
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00.5+02:00",
            "2026-13-01T00:00:00Z",
            "yesterday",
            "",
        ])
    }

    /// An object of some of `fields` (absent when `None`), rarely something else.
    fn object(fields: Vec<(&'static str, BoxedStrategy<Option<Value>>)>) -> BoxedStrategy<Value> {
        let (names, values): (Vec<_>, Vec<_>) = fields.into_iter().unzip();
        let built = values.prop_map(move |vs| {
            let mut m = Map::new();
            for (k, v) in names.iter().zip(vs) {
                if let Some(v) = v {
                    m.insert((*k).to_string(), v);
                }
            }
            Value::Object(m)
        });
        prop_oneof![30 => built, 1 => odd()].boxed()
    }

    fn some(s: BoxedStrategy<Value>) -> BoxedStrategy<Option<Value>> {
        prop::option::weighted(0.7, s).boxed()
    }

    fn list(s: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
        prop_oneof![30 => prop::collection::vec(s, 0..3).prop_map(Value::Array), 1 => odd()].boxed()
    }

    fn map_of(keys: &'static [&'static str], s: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
        prop_oneof![
            30 => prop::collection::btree_map(prop::sample::select(keys), s, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
            1 => odd(),
        ]
        .boxed()
    }

    fn container() -> BoxedStrategy<Value> {
        let port = object(vec![
            (
                "containerPort",
                some(prop_oneof![8 => Just(json!(8080)), 2 => Just(json!(0)), 1 => odd()].boxed()),
            ),
            ("hostPort", some(prop_oneof![8 => Just(json!(80)), 2 => Just(json!(0)), 1 => odd()].boxed())),
            ("protocol", some(text(&["TCP", "UDP", ""]))),
            ("hostIP", some(text(&["10.0.0.1", ""]))),
            ("name", some(text(&["http"]))),
        ]);
        let claim = object(vec![("name", some(text(&["gpu"]))), ("request", some(text(&["one"])))]);
        let resources = object(vec![
            ("requests", some(map_of(&["cpu", "memory", "nvidia.com/gpu"], quantity()))),
            ("limits", some(map_of(&["cpu", "memory", "nvidia.com/gpu"], quantity()))),
            ("claims", prop::option::weighted(0.1, list(claim)).boxed()),
        ]);
        // Fields the model does not read (a container's name, image, …) are left out: the raw
        // read does not check them (see `pod_from_raw`), so one of the wrong type converts there
        // and is refused by the typed decode.
        object(vec![
            ("resources", some(resources)),
            ("restartPolicy", some(text(&["Always", "Never"]))),
            ("ports", prop::option::weighted(0.3, list(port)).boxed()),
        ])
    }

    fn selector() -> BoxedStrategy<Value> {
        let expression = object(vec![
            ("key", some(text(&["app", "tier"]))),
            ("operator", some(text(&["In", "NotIn", "Exists", "Near"]))),
            ("values", some(list(text(&["web", "db"])))),
        ]);
        object(vec![
            ("matchLabels", some(map_of(&["app", "tier"], text(&["web", "db"])))),
            ("matchExpressions", some(list(expression))),
        ])
    }

    fn affinity_term() -> BoxedStrategy<Value> {
        object(vec![
            ("labelSelector", some(selector())),
            ("namespaceSelector", prop::option::weighted(0.3, selector()).boxed()),
            ("namespaces", some(list(text(&["ml", "data"])))),
            ("topologyKey", some(text(&["zone", ""]))),
            ("matchLabelKeys", prop::option::weighted(0.2, list(text(&["app"]))).boxed()),
        ])
    }

    fn spread() -> BoxedStrategy<Value> {
        object(vec![
            ("maxSkew", some(prop_oneof![8 => Just(json!(1)), 1 => odd()].boxed())),
            ("topologyKey", some(text(&["zone"]))),
            ("whenUnsatisfiable", some(text(&["DoNotSchedule", "ScheduleAnyway", "Sometimes"]))),
            ("labelSelector", some(selector())),
            ("matchLabelKeys", some(list(text(&["app", "pod-template-hash"])))),
            ("minDomains", prop::option::weighted(0.3, prop_oneof![Just(json!(2)), odd()].boxed()).boxed()),
            ("nodeAffinityPolicy", some(text(&["Honor", "Ignore", "Maybe"]))),
            ("nodeTaintsPolicy", some(text(&["Ignore", "Honor"]))),
        ])
    }

    fn requirement() -> BoxedStrategy<Value> {
        object(vec![
            ("key", some(text(&["metadata.name", "gen", "zone"]))),
            ("operator", some(text(&["In", "NotIn", "Exists", "Gt", "Near"]))),
            ("values", some(list(text(&["8", "n1"])))),
        ])
    }

    fn pod() -> BoxedStrategy<Value> {
        let labels = map_of(&["app", "kube-gang.io/gang"], text(&["web", "g"]));
        let annotations =
            map_of(&["alpha.jobset.sigs.k8s.io/exclusive-topology", "note"], text(&["rack", ""]));
        let metadata = object(vec![
            ("name", some(text(&["p"]))),
            ("namespace", some(text(&["ml", ""]))),
            ("uid", some(text(&["u1"]))),
            ("creationTimestamp", some(time())),
            ("deletionTimestamp", prop::option::weighted(0.1, time()).boxed()),
            ("labels", some(labels)),
            ("annotations", some(annotations)),
        ]);
        let term = object(vec![
            ("matchExpressions", some(list(requirement()))),
            ("matchFields", some(list(requirement()))),
        ]);
        let pod_affinity = || {
            object(vec![
                ("requiredDuringSchedulingIgnoredDuringExecution", some(list(affinity_term()))),
                (
                    "preferredDuringSchedulingIgnoredDuringExecution",
                    prop::option::weighted(
                        0.2,
                        list(object(vec![
                            ("weight", some(prop_oneof![Just(json!(10)), odd()].boxed())),
                            ("podAffinityTerm", some(affinity_term())),
                        ])),
                    )
                    .boxed(),
                ),
            ])
        };
        let affinity = object(vec![
            (
                "nodeAffinity",
                some(object(vec![(
                    "requiredDuringSchedulingIgnoredDuringExecution",
                    some(object(vec![("nodeSelectorTerms", some(list(term)))])),
                )])),
            ),
            ("podAffinity", prop::option::weighted(0.3, pod_affinity()).boxed()),
            ("podAntiAffinity", prop::option::weighted(0.3, pod_affinity()).boxed()),
        ]);
        let toleration = object(vec![
            ("key", some(text(&["gpu"]))),
            ("operator", some(text(&["Exists", "Equal", "", "Sometimes"]))),
            ("value", some(text(&["yes"]))),
            ("effect", some(text(&["NoSchedule", "NoExecute", "", "Later"]))),
            ("tolerationSeconds", some(prop_oneof![8 => Just(json!(30)), 1 => odd()].boxed())),
        ]);
        let gate = object(vec![("name", some(text(&["kueue.x-k8s.io/admission"])))]);
        // A volume always has a source the model reads (the raw read skips the others, as it skips
        // container fields it does not read).
        let always = |s: BoxedStrategy<Value>| s.prop_map(Some).boxed();
        let volume = prop_oneof![
            object(vec![
                ("name", some(text(&["data"]))),
                ("persistentVolumeClaim", always(object(vec![("claimName", some(text(&["c0", ""])))]))),
            ]),
            object(vec![
                ("name", some(text(&["scratch"]))),
                ("ephemeral", always(object(vec![("volumeClaimTemplate", some(object(vec![])))]))),
            ]),
            object(vec![
                ("name", some(text(&["pd"]))),
                (
                    "gcePersistentDisk",
                    always(object(vec![
                        ("pdName", some(text(&["disk-1"]))),
                        ("readOnly", some(prop_oneof![Just(json!(true)), odd()].boxed())),
                    ])),
                ),
            ]),
            object(vec![
                ("name", some(text(&["ceph"]))),
                (
                    "rbd",
                    always(object(vec![
                        ("monitors", some(list(text(&["m1", "m2"])))),
                        ("image", some(text(&["img"]))),
                        ("pool", some(text(&["rbd", "fast"]))),
                    ])),
                ),
            ]),
        ]
        .boxed();
        let claim = object(vec![
            ("name", some(text(&["gpu", "nic"]))),
            ("resourceClaimName", some(text(&["shared"]))),
            ("resourceClaimTemplateName", some(text(&["t"]))),
        ]);
        let claim_status =
            object(vec![("name", some(text(&["gpu"]))), ("resourceClaimName", some(text(&["p-gpu-x", ""])))]);
        let spec = object(vec![
            ("containers", some(list(container()))),
            ("initContainers", some(list(container()))),
            ("overhead", some(map_of(&["cpu", "memory"], quantity()))),
            ("priority", some(prop_oneof![8 => Just(json!(5)), 1 => odd()].boxed())),
            ("priorityClassName", some(text(&["high", "", "system-node-critical", "nope"]))),
            ("affinity", some(affinity)),
            ("tolerations", some(list(toleration))),
            ("nodeSelector", some(map_of(&["zone", "disk"], text(&["a", "ssd"])))),
            ("nodeName", some(text(&["n1", ""]))),
            ("schedulerName", some(text(&["gang-scheduler", ""]))),
            ("preemptionPolicy", some(text(&["Never", "PreemptLowerPriority", "", "Sometimes"]))),
            ("schedulingGates", some(list(gate))),
            (
                "hostNetwork",
                prop::option::weighted(0.2, prop_oneof![Just(json!(true)), odd()].boxed()).boxed(),
            ),
            ("topologySpreadConstraints", prop::option::weighted(0.3, list(spread())).boxed()),
            (
                "resources",
                prop::option::weighted(
                    0.2,
                    object(vec![
                        ("requests", some(map_of(&["cpu", "memory", "hugepages-2Mi"], quantity()))),
                        ("limits", some(map_of(&["cpu", "memory"], quantity()))),
                    ]),
                )
                .boxed(),
            ),
            ("volumes", prop::option::weighted(0.5, list(volume)).boxed()),
            ("resourceClaims", prop::option::weighted(0.3, list(claim)).boxed()),
        ]);
        let status = object(vec![
            ("phase", some(text(&["Pending", "Running", "Failed", "Succeeded", "Unknown", "", "Lost"]))),
            ("nominatedNodeName", some(text(&["n2", ""]))),
            ("reason", some(text(&["OutOfcpu", ""]))),
            ("message", some(text(&["no room", ""]))),
            ("resourceClaimStatuses", some(list(claim_status))),
        ]);
        object(vec![
            ("apiVersion", prop::option::weighted(0.9, text(&["v1"])).boxed()),
            ("kind", prop::option::weighted(0.9, text(&["Pod"])).boxed()),
            ("metadata", some(metadata)),
            ("spec", some(spec)),
            ("status", some(status)),
        ])
    }

    /// The JSON pointer of every value in `v`, `v` itself last.
    fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    pointers(x, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    pointers(x, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
        out.push(at);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

        /// A pod, with up to two values anywhere in it replaced by something odd.
        #[test]
        fn a_pod_read_raw_is_the_pod_decoded_whole(
            pod in pod(),
            faults in prop::collection::vec((any::<prop::sample::Index>(), odd()), 0..3),
        ) {
            let mut pod = pod;
            for (at, odd) in faults {
                let mut places = Vec::new();
                pointers(&pod, String::new(), &mut places);
                let place = at.get(&places).clone();
                if let Some(v) = pod.pointer_mut(&place) {
                    *v = odd;
                }
            }
            same_both_ways(&pod)?;
        }
    }

    /// Every object that is (or holds, as a pod template) a pod, anywhere in `v`.
    fn pods_in(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Object(m) => {
                if m.get("kind").and_then(Value::as_str) == Some("Pod") {
                    out.push(v.clone());
                } else if m.get("spec").and_then(|s| s.get("containers")).is_some() {
                    // A pod template (a workload's, or a fixture's own shorthand): as a pod.
                    let mut p = Map::new();
                    for k in ["metadata", "spec", "status"] {
                        p.extend(m.get(k).map(|x| (k.to_string(), x.clone())));
                    }
                    out.push(Value::Object(p));
                }
                m.values().for_each(|x| pods_in(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| pods_in(x, out)),
            _ => {}
        }
    }

    fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                files(&p, out);
            } else if matches!(p.extension().and_then(|x| x.to_str()), Some("yaml" | "yml" | "json")) {
                out.push(p);
            }
        }
    }

    #[test]
    fn every_fixture_pod_reads_raw_as_decoded_whole() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut paths = Vec::new();
        for dir in ["tests/fixtures", "kubectl-gang/tests/fixtures", "examples", "webhook/tests"] {
            if root.join(dir).is_dir() {
                files(&root.join(dir), &mut paths);
            }
        }
        let mut pods = Vec::new();
        for path in &paths {
            let text = std::fs::read_to_string(path).unwrap();
            let docs: Vec<Value> = if path.extension().is_some_and(|x| x == "json") {
                serde_json::from_str(&text).into_iter().collect()
            } else {
                // Up to the first document that does not parse (some fixtures are broken on
                // purpose).
                serde_norway::Deserializer::from_str(&text)
                    .map_while(|d| serde::Deserialize::deserialize(d).ok())
                    .collect()
            };
            docs.iter().for_each(|d| pods_in(d, &mut pods));
        }
        assert!(pods.len() > 100, "only {} pods found in {} files", pods.len(), paths.len());
        for pod in &pods {
            same_both_ways(pod).unwrap();
        }
    }
}
