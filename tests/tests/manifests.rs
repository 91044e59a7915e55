//! `manifests/` rendered by the real `kubectl kustomize` (offline), every object parsed into its
//! k8s-openapi type, and the install's promises checked on the rendered YAML: least-privilege RBAC,
//! hardened containers, webhooks that spare the system namespaces and cannot stop the cluster, the
//! CRD equal to the Rust type, Deployment flags the binaries accept, and NetworkPolicies that let in
//! exactly what must reach each port.

use kube_gang_tests::tools::required_tool;

#[path = "support/exported.rs"]
mod exported;
use exported::exported;
use std::collections::BTreeSet;
use std::path::PathBuf;

use k8s_openapi::api::admissionregistration::v1 as admission;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PodSpec, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `kubectl kustomize DIR`, parsed; `None` (the test is skipped) only outside CI without kubectl.
fn render(dir: &str) -> Option<Vec<Value>> {
    let out =
        required_tool("kubectl")?.args(["kustomize"]).arg(root().join(dir)).output().expect("kubectl runs");
    assert!(out.status.success(), "kubectl kustomize {dir}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    Some(
        serde_norway::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .filter(|v: &Value| !v.is_null())
            .collect(),
    )
}

fn of_kind<'a>(objects: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
    objects.iter().filter(move |o| o["kind"] == kind)
}

fn typed<T: DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone())
        .unwrap_or_else(|e| panic!("{} {}: {e}", v["kind"], v["metadata"]["name"]))
}

fn one<T: DeserializeOwned>(objects: &[Value], kind: &str, name: &str) -> T {
    let found: Vec<&Value> = of_kind(objects, kind).filter(|o| o["metadata"]["name"] == name).collect();
    assert_eq!(found.len(), 1, "{kind} {name}");
    typed(found[0])
}

#[test]
fn every_rendered_object_parses_into_its_type() {
    for dir in ["manifests", "manifests/overlays/cert-manager", "manifests/overlays/monitoring"] {
        let Some(objects) = render(dir) else { return };
        assert!(objects.len() >= 15, "{dir}: {} objects", objects.len());
        for o in &objects {
            match o["kind"].as_str().unwrap() {
                "Namespace" => drop(typed::<Namespace>(o)),
                "ServiceAccount" => drop(typed::<ServiceAccount>(o)),
                "Secret" => drop(typed::<Secret>(o)),
                "ClusterRole" => drop(typed::<ClusterRole>(o)),
                "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(o)),
                "Role" => drop(typed::<Role>(o)),
                "RoleBinding" => drop(typed::<RoleBinding>(o)),
                "ConfigMap" => drop(typed::<ConfigMap>(o)),
                "Deployment" => drop(typed::<Deployment>(o)),
                "Service" => drop(typed::<Service>(o)),
                "PodDisruptionBudget" => drop(typed::<PodDisruptionBudget>(o)),
                "NetworkPolicy" => drop(typed::<NetworkPolicy>(o)),
                "CustomResourceDefinition" => drop(typed::<CustomResourceDefinition>(o)),
                "MutatingWebhookConfiguration" => drop(typed::<admission::MutatingWebhookConfiguration>(o)),
                "ValidatingWebhookConfiguration" => {
                    drop(typed::<admission::ValidatingWebhookConfiguration>(o))
                }
                "ValidatingAdmissionPolicy" => drop(typed::<admission::ValidatingAdmissionPolicy>(o)),
                "ValidatingAdmissionPolicyBinding" => {
                    drop(typed::<admission::ValidatingAdmissionPolicyBinding>(o))
                }
                "Issuer" | "Certificate" if dir.ends_with("cert-manager") => {}
                "ServiceMonitor" if dir.ends_with("monitoring") => {}
                other => panic!("{dir}: unexpected kind {other}"),
            }
        }
        for o in &objects {
            let cluster_scoped = matches!(
                o["kind"].as_str().unwrap(),
                "Namespace"
                    | "ClusterRole"
                    | "ClusterRoleBinding"
                    | "CustomResourceDefinition"
                    | "MutatingWebhookConfiguration"
                    | "ValidatingWebhookConfiguration"
                    | "ValidatingAdmissionPolicy"
                    | "ValidatingAdmissionPolicyBinding"
            );
            if !cluster_scoped {
                assert_eq!(
                    o["metadata"]["namespace"], "kube-gang-system",
                    "{} {}",
                    o["kind"], o["metadata"]["name"]
                );
            }
        }
    }
}

#[test]
fn the_crd_is_the_rust_type() {
    let Some(objects) = render("manifests") else { return };
    let crd = of_kind(&objects, "CustomResourceDefinition").next().unwrap();
    let mut expected = serde_json::to_value(scheduler_core::crd::gang_crd()).unwrap();
    // kustomize adds the common label; everything else must be exactly the generated CRD.
    // Through the typed CRD, so that `1` and `1.0` (a JSONSchemaProps number) compare equal.
    let mut rendered = serde_json::to_value(typed::<CustomResourceDefinition>(crd)).unwrap();
    rendered["metadata"].as_object_mut().unwrap().remove("labels");
    expected["metadata"].as_object_mut().unwrap().remove("labels");
    assert_eq!(rendered, expected, "manifests/base/crd-gang.yaml drifted: run `cargo xtask crd`");
    structural(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "openAPIV3Schema");
    let columns = &crd["spec"]["versions"][0]["additionalPrinterColumns"];
    assert!(
        columns.as_array().unwrap().iter().any(|c| c["name"] == "Phase"),
        "kubectl get gangs shows the phase"
    );
}

/// The API server's structural-schema rules (what it would reject on `kubectl apply`): every node
/// has a type (or is int-or-string / preserves unknown fields); value validations (anyOf, oneOf,
/// allOf, not) carry no type, description, default or nullable; enums are not empty.
fn structural(schema: &Value, path: &str) {
    let m = schema.as_object().unwrap_or_else(|| panic!("{path}: not an object"));
    let typed_node = m.contains_key("type")
        || m.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        || m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    assert!(typed_node, "{path}: no type");
    if let Some(e) = m.get("enum") {
        assert!(!e.as_array().unwrap().is_empty(), "{path}: empty enum");
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for (i, branch) in m.get(key).and_then(Value::as_array).into_iter().flatten().enumerate() {
            for forbidden in ["type", "description", "default", "nullable", "additionalProperties"] {
                assert!(
                    branch.get(forbidden).is_none(),
                    "{path}.{key}[{i}]: {forbidden} is not allowed here"
                );
            }
        }
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            structural(v, &format!("{path}.{k}"));
        }
    }
    if let Some(items) = m.get("items") {
        structural(items, &format!("{path}[]"));
    }
    if let Some(ap) = m.get("additionalProperties").filter(|v| v.is_object()) {
        structural(ap, &format!("{path}{{}}"));
    }
}

fn check_rules(owner: &str, rules: &[PolicyRule]) {
    for r in rules {
        for list in [
            r.verbs.as_slice(),
            r.resources.as_deref().unwrap_or(&[]),
            r.api_groups.as_deref().unwrap_or(&[]),
        ] {
            assert!(!list.iter().any(|x| x.contains('*')), "{owner}: wildcard in {r:?}");
        }
        if r.resources.as_deref().unwrap_or(&[]).iter().any(|x| x == "leases") {
            let writes = r.verbs.iter().any(|v| matches!(v.as_str(), "update" | "patch" | "delete" | "get"));
            if writes {
                assert_eq!(
                    r.resource_names.as_deref(),
                    Some(&["gang-scheduler".to_string()][..]),
                    "{owner}: {r:?}"
                );
            } else {
                assert_eq!(
                    r.verbs,
                    vec!["create".to_string()],
                    "{owner}: unnamed lease rules may only create"
                );
            }
        }
        assert!(
            !r.verbs.iter().any(|v| v == "escalate" || v == "bind" || v == "impersonate"),
            "{owner}: {r:?}"
        );
        // Delete only what the scheduler itself creates: autoscaler-visible gangs' requests.
        if r.verbs.iter().any(|v| v == "delete") {
            let own = ["provisioningrequests", "podtemplates"];
            assert!(
                r.resources.as_deref().unwrap_or(&[]).iter().all(|x| own.contains(&x.as_str())),
                "{owner}: {r:?}"
            );
        }
    }
}

#[test]
fn rbac_is_least_privilege() {
    let Some(objects) = render("manifests") else { return };
    for o in of_kind(&objects, "ClusterRole") {
        let role: ClusterRole = typed(o);
        check_rules(&format!("ClusterRole {}", o["metadata"]["name"]), role.rules.as_deref().unwrap_or(&[]));
    }
    for o in of_kind(&objects, "Role") {
        let role: Role = typed(o);
        check_rules(&format!("Role {}", o["metadata"]["name"]), role.rules.as_deref().unwrap_or(&[]));
    }
    // The scheduler can do exactly what it does: bind, evict, patch status, write events.
    let sched: ClusterRole = one(&objects, "ClusterRole", "kube-gang:gang-scheduler");
    let can = |group: &str, resource: &str, verb: &str| {
        sched.rules.as_deref().unwrap_or(&[]).iter().any(|r| {
            r.api_groups.as_deref().unwrap_or(&[]).iter().any(|g| g == group)
                && r.resources.as_deref().unwrap_or(&[]).iter().any(|x| x == resource)
                && r.verbs.iter().any(|v| v == verb)
        })
    };
    for (g, r, v) in [
        ("", "pods/binding", "create"),
        ("", "pods/eviction", "create"),
        ("", "pods/status", "patch"),
        ("", "pods", "watch"),
        ("", "nodes", "list"),
        ("events.k8s.io", "events", "create"),
        ("kube-gang.io", "gangs/status", "patch"),
        ("scheduling.volcano.sh", "podgroups", "watch"),
        // Autoscaler-visible gangs: requests and their templates, and the pods' consume annotations.
        ("autoscaling.x-k8s.io", "provisioningrequests", "create"),
        ("autoscaling.x-k8s.io", "provisioningrequests", "get"),
        ("autoscaling.x-k8s.io", "provisioningrequests", "list"),
        // Their conditions are followed by a watch.
        ("autoscaling.x-k8s.io", "provisioningrequests", "watch"),
        ("autoscaling.x-k8s.io", "provisioningrequests", "delete"),
        ("", "podtemplates", "create"),
        ("", "podtemplates", "delete"),
        ("", "pods", "patch"),
        // Claims bound before their pods: a PV's claimRef, a claim's volumeName or selected node.
        ("", "persistentvolumes", "patch"),
        ("", "persistentvolumeclaims", "patch"),
    ] {
        assert!(can(g, r, v), "the scheduler needs {v} {g}/{r}");
    }
    // Whatever the core reads (`READ`, which the scheduler watches when installed), RBAC lets it.
    for k in scheduler_core::cluster::READ {
        for verb in ["get", "list", "watch"] {
            assert!(
                can(k.group, k.plural, verb),
                "the scheduler watches {}/{} {}: RBAC must allow {verb}",
                k.group,
                k.version,
                k.plural
            );
        }
    }
    // Gang objects, from the core's table of gang kinds: read, never made, replaced or deleted;
    // patched only where the table says the scheduler moves a waiting object to the phase its
    // controllers wait for (Volcano's PodGroup, which has no status subresource); and the status
    // subresource patched only where the table says the scheduler writes a gang's state to it
    // (only our own Gang's: the others belong to their projects' controllers).
    for k in scheduler_core::dialect::GANG_KINDS {
        for verb in ["create", "update", "delete"] {
            assert!(
                !can(k.group, k.plural, verb),
                "the scheduler never writes {}/{} ({verb})",
                k.group,
                k.plural
            );
        }
        assert_eq!(
            can(k.group, k.plural, "patch"),
            k.enqueue.is_some(),
            "patch {}/{} is granted exactly when the table says the scheduler moves its phase",
            k.group,
            k.plural
        );
        let status = format!("{}/status", k.plural);
        assert_eq!(
            can(k.group, &status, "patch"),
            k.status == Some(status.as_str()) || k.reports == Some(status.as_str()),
            "patch {}/{status} is granted exactly when the table says the scheduler writes or reports to it",
            k.group
        );
    }
    assert!(
        !can("", "pods", "update"),
        "the scheduler never replaces pods (it patches consume annotations only)"
    );
    assert!(!can("", "pods", "delete") && !can("", "nodes", "patch"));
    assert!(
        !can("", "persistentvolumes", "update") && !can("", "persistentvolumeclaims", "create"),
        "claims and volumes are patched where a binder binds them, never replaced or made"
    );
    // The webhook reads Gangs (its gang lookup) and keeps its own certificate, nothing else: a
    // cluster role of get/list/watch on gangs only, and the certificate's roles, each rule naming
    // one object (webhook/tests/managed_certs.rs holds its requests to them); the token is mounted
    // into its pods alone.
    let sa: ServiceAccount = one(&objects, "ServiceAccount", "gang-webhook");
    assert_eq!(sa.automount_service_account_token, Some(false));
    let webhook: Deployment = one(&objects, "Deployment", "gang-webhook");
    let pod = webhook.spec.template.spec.unwrap();
    assert_eq!(
        pod.automount_service_account_token,
        Some(true),
        "the gang lookup and certificate need a token"
    );
    let mut roles = Vec::new();
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        for b in of_kind(&objects, kind) {
            let subjects = b["subjects"].as_array().unwrap();
            if subjects.iter().any(|s| s["name"] == "gang-webhook") {
                assert_eq!(b["subjects"][0]["namespace"], "kube-gang-system");
                roles.push(format!("{kind}/{}", b["roleRef"]["name"].as_str().unwrap()));
            }
        }
    }
    roles.sort();
    assert_eq!(
        roles,
        [
            "ClusterRoleBinding/kube-gang:gang-webhook",
            "ClusterRoleBinding/kube-gang:gang-webhook-ca-bundle",
            "RoleBinding/kube-gang:gang-webhook-certs"
        ]
    );
    let certs: Role = one(&objects, "Role", "kube-gang:gang-webhook-certs");
    let bundle: ClusterRole = one(&objects, "ClusterRole", "kube-gang:gang-webhook-ca-bundle");
    for r in certs.rules.unwrap().iter().chain(bundle.rules.unwrap().iter()) {
        assert_eq!(r.resource_names.as_ref().map(Vec::len), Some(1), "{r:?}");
        assert_eq!(r.verbs, ["get", "update"], "{r:?}");
    }
    // Exactly what the lookup watches (`gang_webhook::gangs::watched`, the table's `lookup` rows), read-only.
    let role: ClusterRole = one(&objects, "ClusterRole", "kube-gang:gang-webhook");
    let mut granted: Vec<(String, String, Vec<String>)> = role
        .rules
        .unwrap()
        .into_iter()
        .flat_map(|r| {
            let mut verbs = r.verbs.clone();
            verbs.sort();
            let resources = r.resources.unwrap_or_default();
            r.api_groups
                .unwrap_or_default()
                .into_iter()
                .flat_map(move |g| resources.clone().into_iter().map(move |x| (g.clone(), x)))
                .map(move |(g, x)| (g, x, verbs.clone()))
        })
        .collect();
    granted.sort();
    let mut watched: Vec<(String, String, Vec<String>)> = gang_webhook::gangs::watched()
        .map(|k| {
            (k.group.to_string(), k.plural.to_string(), vec!["get".into(), "list".into(), "watch".into()])
        })
        .collect();
    watched.sort();
    assert_eq!(granted, watched);
}

fn pod_specs(objects: &[Value]) -> Vec<(String, PodSpec)> {
    of_kind(objects, "Deployment")
        .map(|o| {
            let d: Deployment = typed(o);
            (d.metadata.name.clone().unwrap(), d.spec.template.spec.unwrap())
        })
        .collect()
}

#[test]
fn every_container_is_hardened_and_bounded() {
    let Some(objects) = render("manifests") else { return };
    let specs = pod_specs(&objects);
    assert_eq!(specs.len(), 2);
    for (name, spec) in &specs {
        let pod_sc = spec.security_context.clone().unwrap_or_default();
        assert_eq!(pod_sc.run_as_non_root, Some(true), "{name}");
        assert_eq!(
            pod_sc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
            Some("RuntimeDefault"),
            "{name}"
        );
        for c in spec.containers.iter().chain(spec.init_containers.iter().flatten()) {
            let sc = c.security_context.clone().unwrap_or_default();
            assert_eq!(sc.allow_privilege_escalation, Some(false), "{name}/{}", c.name);
            assert_eq!(sc.read_only_root_filesystem, Some(true), "{name}/{}", c.name);
            assert_eq!(
                sc.capabilities.and_then(|c| c.drop),
                Some(vec!["ALL".to_string()]),
                "{name}/{}",
                c.name
            );
            assert_ne!(sc.privileged, Some(true));
            let res = c.resources.clone().unwrap_or_default();
            for r in ["cpu", "memory"] {
                assert!(
                    res.requests.as_ref().is_some_and(|q| q.contains_key(r)),
                    "{name}/{}: requests.{r}",
                    c.name
                );
            }
            assert!(
                res.limits.as_ref().is_some_and(|q| q.contains_key("memory")),
                "{name}/{}: limits.memory",
                c.name
            );
            assert!(c.liveness_probe.is_some() && c.readiness_probe.is_some(), "{name}/{}: probes", c.name);
        }
        assert!(spec.host_network.is_none() && spec.host_pid.is_none());
    }
    let ns: Namespace = one(&objects, "Namespace", "kube-gang-system");
    let labels = ns.metadata.labels.unwrap();
    assert_eq!(labels.get("pod-security.kubernetes.io/enforce").map(String::as_str), Some("restricted"));
}

#[test]
fn deployments_are_highly_available_and_their_flags_parse() {
    let Some(objects) = render("manifests") else { return };
    let sched: Deployment = one(&objects, "Deployment", "gang-scheduler");
    let webhook: Deployment = one(&objects, "Deployment", "gang-webhook");
    assert_eq!(sched.spec.replicas, Some(2));
    let ws = &webhook.spec;
    assert_eq!(ws.replicas, Some(3));
    let ru = ws.strategy.as_ref().unwrap().rolling_update.as_ref().unwrap();
    assert_eq!(ru.max_unavailable, Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0)));
    let wpod = ws.template.spec.as_ref().unwrap();
    assert!(wpod.topology_spread_constraints.as_ref().is_some_and(|t| !t.is_empty()));
    let c = &wpod.containers[0];
    assert!(c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()).is_some(), "a preStop delay");
    let pdb: PodDisruptionBudget = one(&objects, "PodDisruptionBudget", "gang-webhook");
    let sel = pdb.spec.unwrap().selector.unwrap().match_labels.unwrap();
    assert_eq!(sel, ws.selector.match_labels.clone().unwrap(), "the PDB covers the webhook pods");

    // The flags in the manifests are flags the binaries accept, with the ports the probes use.
    let args = |d: &Deployment| {
        let c = &d.spec.template.spec.as_ref().unwrap().containers[0];
        let mut v = vec![c.command.as_ref().unwrap()[0].rsplit('/').next().unwrap().to_string()];
        v.extend(c.args.clone().unwrap_or_default());
        v
    };
    let sargs = args(&sched);
    assert_eq!(sargs[0], "gang-scheduler");
    let parsed = <gang_scheduler::Args as clap::Parser>::try_parse_from(&sargs).unwrap();
    assert!(parsed.leader_elect);
    // Two replicas must never share a Lease holder identity: it comes from the pod's own name.
    let env = sched.spec.template.spec.as_ref().unwrap().containers[0].env.clone().unwrap_or_default();
    let pod_name = env.iter().find(|e| e.name == "POD_NAME").expect("POD_NAME set");
    let field =
        pod_name.value_from.as_ref().and_then(|v| v.field_ref.as_ref()).map(|f| f.field_path.as_str());
    assert_eq!(field, Some("metadata.name"));
    let role: Role = one(&objects, "Role", "gang-scheduler-leader-election");
    let named = role
        .rules
        .unwrap()
        .iter()
        .flat_map(|r| r.resource_names.clone().unwrap_or_default())
        .collect::<Vec<_>>();
    assert_eq!(named, vec![parsed.lease_name.clone()], "the Role names the Lease the scheduler uses");
    let wargs = args(&webhook);
    assert_eq!(wargs[0], "gang-webhook");
    let parsed = <gang_webhook::Args as clap::Parser>::try_parse_from(&wargs).unwrap();
    assert_eq!(parsed.listen.port(), 8443);
    let svc: Service = one(&objects, "Service", "gang-webhook");
    assert_eq!(svc.spec.unwrap().ports.unwrap()[0].port, 443);
}

const SYSTEM: [&str; 4] = ["kube-system", "kube-public", "kube-node-lease", "kube-gang-system"];
const PATHS: [&str; 4] = ["/validate", "/mutate", "/validate/namespace", "/mutate/namespace"];

fn spares_system_namespaces(
    name: &str,
    sel: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) {
    let exprs = sel.as_ref().and_then(|s| s.match_expressions.clone()).unwrap_or_default();
    let spared: BTreeSet<String> = exprs
        .iter()
        .filter(|e| e.key == "kubernetes.io/metadata.name" && e.operator == "NotIn")
        .flat_map(|e| e.values.clone().unwrap_or_default())
        .collect();
    for ns in SYSTEM {
        assert!(spared.contains(ns), "{name} does not spare {ns}");
    }
}

#[test]
fn webhooks_spare_the_system_and_fail_closed() {
    let Some(objects) = render("manifests") else { return };
    let m: admission::MutatingWebhookConfiguration =
        one(&objects, "MutatingWebhookConfiguration", "gang-webhook");
    for w in m.webhooks.unwrap() {
        assert_eq!(w.side_effects, "None", "{}", w.name);
        assert_eq!(w.admission_review_versions, vec!["v1".to_string()]);
        assert_eq!(
            w.failure_policy.as_deref(),
            Some("Fail"),
            "{}: what opted in is never run without its gang",
            w.name
        );
        assert!(w.timeout_seconds.is_some_and(|t| t <= 10), "{}", w.name);
        spares_system_namespaces(&w.name, &w.namespace_selector);
        let svc = w.client_config.service.unwrap();
        assert!(PATHS.contains(&svc.path.as_deref().unwrap()), "{}", w.name);
        assert_eq!((svc.name.as_str(), svc.namespace.as_str()), ("gang-webhook", "kube-gang-system"));
        // Kueue's partial admission lowers a Job's parallelism in an UPDATE: the member counts follow.
        let job_updates = w.rules.as_ref().is_some_and(|rs| {
            rs.iter().any(|r| {
                r.api_groups.as_deref() == Some(&["batch".to_string()][..])
                    && r.resources.as_ref().is_some_and(|x| x.contains(&"jobs".to_string()))
                    && r.operations.as_ref().is_some_and(|o| o.contains(&"UPDATE".to_string()))
            })
        });
        assert!(
            job_updates || !w.name.starts_with("workloads") && !w.name.starts_with("namespaces"),
            "{}: Job updates reach the mutating hook",
            w.name
        );
    }
    let v: admission::ValidatingWebhookConfiguration =
        one(&objects, "ValidatingWebhookConfiguration", "gang-webhook");
    for w in v.webhooks.unwrap() {
        assert_eq!(w.side_effects, "None", "{}", w.name);
        assert_eq!(w.admission_review_versions, vec!["v1".to_string()]);
        assert_eq!(w.failure_policy.as_deref(), Some("Fail"), "{}", w.name);
        assert!(w.timeout_seconds.is_some_and(|t| t <= 10), "{}", w.name);
        spares_system_namespaces(&w.name, &w.namespace_selector);
    }
}

/// Objects in every state that matters to matching: each kind the hooks name and some they do not,
/// with and without each opt-in and claim marker, each scheduler name, being deleted or not.
fn admission_cases() -> Vec<(String, String, String, String, Value)> {
    use serde_json::json;
    // Every workload kind of the core's table, and what is not one.
    let mut kinds: Vec<(&str, &str, &str, &str)> = scheduler_core::workload::KINDS
        .iter()
        .map(|k| (k.group, k.versions.first().copied().unwrap_or("v1"), k.plural, k.kind))
        .collect();
    kinds.extend([
        ("", "v1", "pods", "Pod"),
        ("kube-gang.io", "v1alpha1", "gangs", "Gang"),
        ("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup"),
        ("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup"),
        ("scheduling.k8s.io", "v1alpha3", "podgroups", "PodGroup"),
        ("", "v1", "configmaps", "ConfigMap"),
        ("apps", "v1", "daemonsets", "DaemonSet"),
    ]);
    let labels = [
        json!(null),
        json!({"kube-gang.io/enabled": "true"}),
        json!({"kube-gang.io/enabled": "True"}),
        json!({"kube-gang.io/enabled": "false"}),
        json!({"kube-gang.io/gang": "g"}),
        json!({"scheduling.x-k8s.io/pod-group": "g", "app": "x"}),
        json!({"pod-group-name": "g"}),
    ];
    let annotations = [
        json!(null),
        json!({"kube-gang.io/min-member": "2"}),
        json!({"scheduling.k8s.io/group-name": "g"}),
        json!({"gang.scheduling.koordinator.sh/name": "g"}),
    ];
    let mut out = Vec::new();
    for (group, version, resource, kind) in kinds {
        let pod = kind == "Pod";
        let schedulers: &[Option<&str>] = if pod {
            &[None, Some(""), Some("default-scheduler"), Some("gang-scheduler"), Some("volcano")]
        } else {
            &[None]
        };
        for l in &labels {
            for a in &annotations {
                for sched in schedulers {
                    for grouped in if pod { &[false, true][..] } else { &[false][..] } {
                        for deleting in [false, true] {
                            let api_version = if group.is_empty() {
                                version.to_string()
                            } else {
                                format!("{group}/{version}")
                            };
                            let mut o = json!({"apiVersion": api_version, "kind": kind,
                                               "metadata": {"name": "x", "namespace": "ml"}, "spec": {}});
                            if !l.is_null() {
                                o["metadata"]["labels"] = l.clone();
                            }
                            if !a.is_null() {
                                o["metadata"]["annotations"] = a.clone();
                            }
                            if deleting {
                                o["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
                            }
                            if let Some(s) = sched {
                                o["spec"]["schedulerName"] = (*s).into();
                            }
                            if *grouped {
                                o["spec"]["schedulingGroup"] = json!({"podGroupName": "g"});
                            }
                            // A Deployment or ReplicaSet whose pods name a gang is a workload
                            // with or without a label of its own (the coscheduling docs' example).
                            let templated: &[bool] = if group == "apps" && kind != "StatefulSet" {
                                &[false, true]
                            } else {
                                &[false]
                            };
                            for &t in templated {
                                let mut o = o.clone();
                                if t {
                                    o["spec"]["template"] = json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "g"}},
                                        "spec": {"containers": [{"name": "c", "image": "x"}]}});
                                }
                                out.push((
                                    group.to_string(),
                                    version.to_string(),
                                    resource.to_string(),
                                    kind.to_string(),
                                    o,
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The rendered configurations, evaluated as the API server matches them (selectors, rules,
/// `matchConditions` in CEL), against the core's one reading of opt-in
/// (`scheduler_core::opted_in`, which the webhook also checks): an object that did not opt in
/// never reaches any of our webhooks, so it can never be refused by ours, whatever state it or
/// the webhook is in; what opted in (outside the system namespaces) reaches them, all of which
/// fail closed; and no condition ever errors (an error under `Fail` would refuse the request).
#[test]
fn an_object_that_did_not_opt_in_can_never_be_refused_by_our_webhook() {
    use kube_gang_tests::admission_match::{Call, Request, call};
    use serde_json::json;
    let Some(objects) = render("manifests") else { return };
    let hooks: Vec<(String, Value)> = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
        .iter()
        .flat_map(|k| {
            of_kind(&objects, k).flat_map(move |c| {
                c["webhooks"].as_array().unwrap().iter().map(move |w| (k.to_string(), w.clone()))
            })
        })
        .collect();
    let namespaces = [
        ("ml", json!({})),
        ("ml", json!({"kube-gang.io/enabled": "true"})),
        ("ml", json!({"kube-gang.io/enabled": "True"})),
        ("kube-system", json!({})),
        ("kube-gang-system", json!({"kube-gang.io/enabled": "true"})),
    ];
    let (mut checked, mut reached) = (0, 0);
    for (group, version, resource, kind, object) in admission_cases() {
        for (ns, ns_labels) in &namespaces {
            let mut ns_labels = ns_labels.clone();
            ns_labels["kubernetes.io/metadata.name"] = (*ns).into();
            let as_map: std::collections::BTreeMap<String, String> =
                serde_json::from_value(ns_labels.clone()).unwrap();
            let opted = scheduler_core::opted_in(&object, Some(&as_map));
            let system = SYSTEM.contains(ns);
            let deleting = object["metadata"].get("deletionTimestamp").is_some();
            for operation in ["CREATE", "UPDATE"] {
                let r = Request {
                    group: &group,
                    version: &version,
                    resource: &resource,
                    operation,
                    object: &object,
                    old_object: (operation == "UPDATE").then_some(&object),
                    namespace_labels: &ns_labels,
                };
                let calls: Vec<(&str, &str, Call)> = hooks
                    .iter()
                    .map(|(k, w)| (k.as_str(), w["name"].as_str().unwrap(), call(w, &r)))
                    .collect();
                let what = format!("{operation} {kind} in {ns} {ns_labels}: {object}");
                checked += 1;
                for (_, name, c) in &calls {
                    assert_ne!(*c, Call::Refused, "{name} would refuse {what}: a match condition errors");
                    if !opted {
                        assert_eq!(*c, Call::Skipped, "{name} sees {what}, which did not opt in");
                    }
                }
                if opted && !system && !deleting {
                    let called = |config: &str| {
                        calls.iter().any(|(k, _, c)| k.starts_with(config) && *c == Call::Called)
                    };
                    let creates_pods_or_workloads = operation == "CREATE" && kind != "Gang";
                    let validated_on_update = kind != "Pod";
                    if operation == "CREATE" || validated_on_update {
                        assert!(called("Validating"), "no validating hook sees {what}, which opted in");
                        reached += 1;
                    }
                    if creates_pods_or_workloads {
                        assert!(called("Mutating"), "no mutating hook sees {what}, which opted in");
                    }
                }
            }
        }
    }
    assert!(checked > 10_000 && reached > 500, "{checked} cases, {reached} opted in");
}

/// The opt-in label's value is read by the one function both ways: `"True"`, `"yes"` or
/// `"false"` on the object keep it out whatever its namespace says, as the selectors do.
#[test]
fn the_opt_in_label_is_read_as_the_selectors_read_it() {
    use serde_json::json;
    let Some(objects) = render("manifests") else { return };
    let hooks: Vec<Value> = of_kind(&objects, "ValidatingWebhookConfiguration")
        .flat_map(|c| c["webhooks"].as_array().unwrap().clone())
        .filter(|w| {
            w["name"].as_str().unwrap().starts_with("workloads")
                || w["name"].as_str().unwrap().starts_with("namespaces")
        })
        .collect();
    for own in [None, Some("true"), Some("True"), Some("TRUE"), Some("yes"), Some("false"), Some("")] {
        for ns in [None, Some("true"), Some("True")] {
            let mut job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ml"}, "spec": {}});
            if let Some(v) = own {
                job["metadata"]["labels"] = json!({"kube-gang.io/enabled": v});
            }
            let mut ns_labels = json!({"kubernetes.io/metadata.name": "ml"});
            if let Some(v) = ns {
                ns_labels["kube-gang.io/enabled"] = v.into();
            }
            let selected = hooks.iter().any(|w| {
                kube_gang_tests::admission_match::selector_matches(&w["namespaceSelector"], &ns_labels)
                    && kube_gang_tests::admission_match::selector_matches(
                        &w["objectSelector"],
                        &job["metadata"]["labels"],
                    )
            });
            let map: std::collections::BTreeMap<String, String> = serde_json::from_value(ns_labels).unwrap();
            assert_eq!(
                scheduler_core::workload::is_opted_in(&job, Some(&map)),
                selected,
                "object {own:?}, namespace {ns:?}"
            );
        }
    }
}

/// (group, resource) pairs, sorted, of the gang kinds the core's table says our admission
/// validates.
fn validated_kinds() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = scheduler_core::dialect::GANG_KINDS
        .iter()
        .filter(|k| k.validated)
        .map(|k| (k.group.to_string(), k.plural.to_string()))
        .collect();
    v.sort();
    v
}

/// (group, resource) pairs, sorted, that rules of this shape (`apiGroups`, `resources`) match.
fn matched(rules: &[Value]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = rules
        .iter()
        .flat_map(|r| {
            let groups: Vec<String> =
                r["apiGroups"].as_array().unwrap().iter().map(|g| g.as_str().unwrap().to_string()).collect();
            let resources: Vec<String> =
                r["resources"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect();
            groups.into_iter().flat_map(move |g| resources.clone().into_iter().map(move |x| (g.clone(), x)))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn the_gang_object_hook_and_the_admission_policy_cover_what_the_table_says_we_validate() {
    let Some(objects) = render("manifests") else { return };
    // The validating hook for gang objects: exactly the kinds the table marks validated, and no
    // other hook sees a gang kind (a peer's object is its project's to validate).
    let validated = validated_kinds();
    assert!(!validated.is_empty());
    for config in of_kind(&objects, "ValidatingWebhookConfiguration")
        .chain(of_kind(&objects, "MutatingWebhookConfiguration"))
    {
        for w in config["webhooks"].as_array().unwrap() {
            let name = w["name"].as_str().unwrap();
            let covered = matched(w["rules"].as_array().unwrap());
            if name == "gangs.validate.kube-gang.io" {
                assert_eq!(covered, validated, "{name}");
            } else {
                for (g, r) in &covered {
                    let gang =
                        scheduler_core::dialect::GANG_KINDS.iter().any(|k| k.group == g && k.plural == r);
                    assert!(!gang, "{name} sees gang objects {g}/{r}");
                }
            }
        }
    }
    let p = of_kind(&objects, "ValidatingAdmissionPolicy")
        .find(|o| o["metadata"]["name"] == "kube-gang-gang-rules")
        .unwrap();
    assert_eq!(matched(p["spec"]["matchConstraints"]["resourceRules"].as_array().unwrap()), validated);
}

/// The workload hooks (mutating and validating, by the workload's label and by its namespace's)
/// see exactly the kinds of the core's table of workload kinds (`workload::KINDS`), at its
/// versions, on the operations it says: a kind added to the table and not to the hooks (or the
/// other way round) fails here.
#[test]
fn the_workload_hooks_see_exactly_the_tables_workload_kinds() {
    let Some(objects) = render("manifests") else { return };
    // (group, resource, versions, operations) per hook, sorted.
    let seen = |w: &Value| {
        let mut out: Vec<(String, String, Vec<String>, Vec<String>)> = Vec::new();
        for r in w["rules"].as_array().unwrap() {
            let strings = |k: &str| -> Vec<String> {
                r[k].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
            };
            for g in strings("apiGroups") {
                for res in strings("resources") {
                    out.push((g.clone(), res, strings("apiVersions"), strings("operations")));
                }
            }
        }
        out.sort();
        out
    };
    let mut checked = 0;
    for config in of_kind(&objects, "MutatingWebhookConfiguration")
        .chain(of_kind(&objects, "ValidatingWebhookConfiguration"))
    {
        let mutating = config["kind"] == "MutatingWebhookConfiguration";
        for w in config["webhooks"].as_array().unwrap() {
            let name = w["name"].as_str().unwrap();
            let by_namespace = match name.split('.').next() {
                Some("workloads") => false,
                Some("namespaces") => true,
                _ => continue,
            };
            let mut want: Vec<(String, String, Vec<String>, Vec<String>)> = scheduler_core::workload::KINDS
                .iter()
                .filter(|k| !by_namespace || k.namespace_opt_in)
                .map(|k| {
                    let versions = if k.versions.is_empty() {
                        vec!["*".to_string()]
                    } else {
                        k.versions.iter().map(|v| v.to_string()).collect()
                    };
                    let update = !mutating || k.mutate_update;
                    let ops = if update {
                        vec!["CREATE".to_string(), "UPDATE".to_string()]
                    } else {
                        vec!["CREATE".to_string()]
                    };
                    (k.group.to_string(), k.plural.to_string(), versions, ops)
                })
                .collect();
            want.sort();
            assert_eq!(seen(w), want, "{name}");
            checked += 1;
        }
    }
    assert_eq!(checked, 4, "two mutating and two validating workload hooks");
}

#[test]
fn the_admission_policy_covers_gangs() {
    let Some(objects) = render("manifests") else { return };
    let p: admission::ValidatingAdmissionPolicy =
        one(&objects, "ValidatingAdmissionPolicy", "kube-gang-gang-rules");
    let spec = p.spec.unwrap();
    let rules = spec.match_constraints.unwrap().resource_rules.unwrap();
    assert!(rules.iter().any(|r| r.resources.as_ref().unwrap().contains(&"gangs".to_string())));
    let validations = spec.validations.unwrap();
    assert!(validations.iter().any(|v| v.expression.contains("minMember >= 1")));
    let b: admission::ValidatingAdmissionPolicyBinding =
        one(&objects, "ValidatingAdmissionPolicyBinding", "kube-gang-gang-rules");
    assert_eq!(b.spec.policy_name, "kube-gang-gang-rules");
}

/// The CEL text of every pod hook's `matchConditions`, mutating and validating.
fn pod_match_conditions(objects: &[Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for kind in ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"] {
        for config in of_kind(objects, kind) {
            for w in config["webhooks"].as_array().unwrap() {
                let pods = w["rules"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["resources"].as_array().unwrap().iter().any(|x| x == "pods"));
                if pods {
                    let text: Vec<&str> = w["matchConditions"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|c| c["expression"].as_str().unwrap())
                        .collect();
                    out.push((w["name"].as_str().unwrap().to_string(), text.join("\n")));
                }
            }
        }
    }
    out
}

#[test]
fn every_pod_that_names_a_gang_reaches_the_pod_hooks() {
    use scheduler_core::dialect::{CLAIM_MARKERS, Marker};
    let Some(objects) = render("manifests") else { return };
    let hooks = pod_match_conditions(&objects);
    assert!(hooks.len() >= 2, "a mutating and a validating pod hook: {hooks:?}");
    // Each marker the claim readers read lets a pod through every pod hook.
    for (name, cel) in &hooks {
        for m in CLAIM_MARKERS {
            let wanted = match m {
                Marker::Label(k) => format!("'{k}' in object.metadata.labels"),
                Marker::Annotation(k) => format!("'{k}' in object.metadata.annotations"),
                Marker::Spec(f) => format!("has(object.spec.{f})"),
            };
            assert!(cel.contains(&wanted), "{name}: matchConditions miss {wanted}");
        }
    }
    // And the list is the readers': every pod of every conformance fixture and example that claims a
    // gang (workloads expanded as their controllers would) carries one of the markers.
    let carries = |pod: &Value| {
        CLAIM_MARKERS.iter().any(|m| match m {
            Marker::Label(k) => pod["metadata"]["labels"].get(*k).is_some(),
            Marker::Annotation(k) => pod["metadata"]["annotations"].get(*k).is_some(),
            Marker::Spec(f) => pod["spec"].get(*f).is_some_and(|v| !v.is_null()),
        })
    };
    let mut claiming = 0;
    let mut dirs = vec![root().join("examples/workloads")];
    for e in std::fs::read_dir(root().join("tests/fixtures/conformance")).unwrap() {
        dirs.push(e.unwrap().path());
    }
    for dir in dirs {
        let Ok(sourced) = kubectl_gang::input::read_paths(&[dir]) else { continue };
        for s in sourced {
            let Ok(pods) = scheduler_core::workload::expand(&s.object) else { continue };
            for pod in pods.iter().filter(|p| p["kind"] == "Pod") {
                let (claims, errors) = scheduler_core::dialect::pod_claims_all(pod);
                if !claims.is_empty() || !errors.is_empty() {
                    claiming += 1;
                    assert!(carries(pod), "{}: claims {claims:?} through no listed marker", s.file);
                }
            }
        }
    }
    assert!(claiming >= 50, "{claiming} claiming pods checked");
}

/// The image is named once: every container of every rendered install (base and overlays) runs
/// the image `images:` in `manifests/base/kustomization.yaml` names, and the raw manifests say only
/// `kube-gang`, the name that entry rewrites. The Dockerfile builds it reproducibly (`--locked`).
#[test]
fn the_image_is_named_once() {
    let text = std::fs::read_to_string(root().join("manifests/base/kustomization.yaml")).unwrap();
    let k: Value = serde_norway::from_str(&text).unwrap();
    let images = k["images"].as_array().unwrap();
    assert_eq!(images.len(), 1, "one image entry");
    assert_eq!(images[0]["name"], "kube-gang");
    let want =
        format!("{}:{}", images[0]["newName"].as_str().unwrap(), images[0]["newTag"].as_str().unwrap());
    for dir in ["manifests", "manifests/overlays/cert-manager", "manifests/overlays/monitoring"] {
        let Some(objects) = render(dir) else { return };
        let specs = pod_specs(&objects);
        assert_eq!(specs.len(), 2, "{dir}");
        for (name, spec) in specs {
            for c in spec.containers.iter().chain(spec.init_containers.iter().flatten()) {
                assert_eq!(c.image.as_deref(), Some(want.as_str()), "{dir}: {name}/{}", c.name);
            }
        }
    }
    for e in std::fs::read_dir(root().join("manifests/base")).unwrap() {
        let path = e.unwrap().path();
        let raw = std::fs::read_to_string(&path).unwrap();
        for line in raw.lines().filter(|l| l.trim_start().starts_with("image:")) {
            assert_eq!(line.trim(), "image: kube-gang", "{}: name the image in images: only", path.display());
        }
    }
    let docker = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    assert!(docker.contains("cargo build --release --locked"), "the image builds from Cargo.lock");
}

/// Every metric the Grafana dashboard queries is one the binaries export (their registries'
/// exposition), and it shows what an operator asks first: gangs waiting and by outcome, time to
/// start, cycle time, webhook latency. The metrics Services reach the probe port that serves
/// `/metrics`, the ServiceMonitors select them, and the scheduler has a disruption budget.
#[test]
fn metrics_are_served_scraped_and_shown() {
    // Each family and its type: a query names a counter's samples `_total`, a histogram's
    // `_bucket`/`_sum`/`_count`, a gauge's by the family's own name.
    let families: std::collections::BTreeMap<String, String> = exported()
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, t)| (n.to_string(), t.trim().to_string()))
        .collect();
    let text = std::fs::read_to_string(root().join("manifests/overlays/monitoring/dashboard.json")).unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    let mut used = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(i) = rest.find("gang_") {
                let name: String =
                    rest[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                rest = &rest[i + name.len()..];
                let sample = |family: &str, ty: &str| match ty {
                    "counter" => name == format!("{family}_total"),
                    "histogram" => {
                        ["_bucket", "_sum", "_count"].iter().any(|s| name == format!("{family}{s}"))
                    }
                    _ => name == family,
                };
                let family = families.iter().find(|(f, ty)| sample(f, ty)).map(|(f, _)| f.clone());
                let Some(family) = family else {
                    panic!(
                        "panel {:?} queries {name}, which no binary exports as such ({families:?})",
                        panel["title"]
                    )
                };
                used.insert(family);
            }
        }
    }
    for wanted in [
        "gang_pending_gangs",
        "gang_gangs",
        "gang_schedule_attempts",
        "gang_wait_duration_seconds",
        "gang_cycle_duration_seconds",
        "gang_webhook_request_duration_seconds",
    ] {
        assert!(used.contains(wanted), "the dashboard does not show {wanted}");
    }
    let Some(objects) = render("manifests/overlays/monitoring") else { return };
    for (binary, service) in
        [("gang-scheduler", "gang-scheduler-metrics"), ("gang-webhook", "gang-webhook-metrics")]
    {
        let svc: Service = one(&objects, "Service", service);
        let spec = svc.spec.unwrap();
        let port = &spec.ports.unwrap()[0];
        let d: Deployment = one(&objects, "Deployment", binary);
        let pod = d.spec.template.spec.unwrap();
        let target = match &port.target_port {
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s)) => s.clone(),
            other => panic!("{service}: target a named port, not {other:?}"),
        };
        assert!(
            pod.containers[0].ports.iter().flatten().any(|p| p.name.as_deref() == Some(target.as_str())),
            "{service} targets port {target}, which {binary} does not name"
        );
        assert_eq!(spec.selector, d.spec.selector.match_labels, "{service} selects {binary}'s pods");
        let monitor = of_kind(&objects, "ServiceMonitor").find(|m| m["metadata"]["name"] == binary).unwrap();
        let labels = svc.metadata.labels.unwrap();
        for (k, v) in monitor["spec"]["selector"]["matchLabels"].as_object().unwrap() {
            assert_eq!(
                labels.get(k).map(String::as_str),
                v.as_str(),
                "ServiceMonitor {binary} selects {service}"
            );
        }
        assert_eq!(monitor["spec"]["endpoints"][0]["port"], port.name.clone().unwrap().as_str());
    }
    let dash = one::<ConfigMap>(&objects, "ConfigMap", "kube-gang-dashboard");
    assert_eq!(dash.metadata.labels.unwrap().get("grafana_dashboard").map(String::as_str), Some("1"));
    let pdb: PodDisruptionBudget = one(&objects, "PodDisruptionBudget", "gang-scheduler");
    let sched: Deployment = one(&objects, "Deployment", "gang-scheduler");
    let spec = pdb.spec.unwrap();
    assert_eq!(spec.selector.unwrap().match_labels, sched.spec.selector.match_labels);
    assert_eq!(spec.min_available, Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1)));
}

/// Issue 32: no NetworkPolicy limited who may connect. Every pod of ours is selected by an
/// ingress policy; every port it listens on (read from the flags the binaries parse) is let in,
/// and no other; the probe and metrics ports only from the node (always allowed) and namespaces
/// labelled as metrics scrapers (the label named once, in the core); the admission port from any
/// source, since the API server cannot be selected (the policy file says why).
#[test]
fn network_policies_let_in_exactly_what_must_reach_each_port() {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let Some(objects) = render("manifests") else { return };
    let policies: Vec<NetworkPolicy> = of_kind(&objects, "NetworkPolicy").map(typed).collect();
    let scraper = scheduler_core::labels::LABEL_METRICS_SCRAPER;
    for (name, admission) in [("gang-scheduler", None), ("gang-webhook", Some(8443))] {
        let d: Deployment = one(&objects, "Deployment", name);
        let pod_labels = d.spec.template.metadata.as_ref().unwrap().labels.clone().unwrap();
        let selecting: Vec<&NetworkPolicy> = policies
            .iter()
            .filter(|p| {
                let spec = p.spec.as_ref().unwrap();
                spec.pod_selector
                    .as_ref()
                    .and_then(|s| s.match_labels.as_ref())
                    .unwrap()
                    .iter()
                    .all(|(k, v)| pod_labels.get(k) == Some(v))
            })
            .collect();
        assert_eq!(selecting.len(), 1, "{name}: one policy selects its pods");
        let spec = selecting[0].spec.as_ref().unwrap();
        assert_eq!(spec.policy_types.as_deref(), Some(&["Ingress".to_string()][..]), "{name}");
        // The ports the binary listens on, from the flags it parses.
        let c = &d.spec.template.spec.as_ref().unwrap().containers[0];
        let mut argv = vec![name.to_string()];
        argv.extend(c.args.clone().unwrap_or_default());
        let (probe, listen) = if name == "gang-scheduler" {
            let a = <gang_scheduler::Args as clap::Parser>::try_parse_from(&argv).unwrap();
            (a.probe_listen.port(), None)
        } else {
            let a = <gang_webhook::Args as clap::Parser>::try_parse_from(&argv).unwrap();
            (a.probe_listen.port(), Some(a.listen.port()))
        };
        assert_eq!(listen, admission, "{name}");
        let mut let_in = BTreeSet::new();
        for rule in spec.ingress.clone().unwrap_or_default() {
            for p in rule.ports.clone().unwrap_or_default() {
                let Some(IntOrString::Int(port)) = p.port else { panic!("{name}: ports by number") };
                let_in.insert(port as u16);
                let from = rule.from.clone().unwrap_or_default();
                if port as u16 == probe {
                    assert_eq!(from.len(), 1, "{name}: the probe port from the scrapers only");
                    let ns =
                        from[0].namespace_selector.as_ref().and_then(|s| s.match_labels.clone()).unwrap();
                    assert_eq!(ns.get(scraper).map(String::as_str), Some("true"), "{name}");
                    assert!(from[0].pod_selector.is_none() && from[0].ip_block.is_none(), "{name}");
                } else {
                    assert_eq!(Some(port as u16), admission, "{name}: {port} is no port of it");
                    assert!(from.is_empty(), "{name}: the API server cannot be selected; any source");
                }
            }
        }
        let listened: BTreeSet<u16> = [Some(probe), listen].into_iter().flatten().collect();
        assert_eq!(let_in, listened, "{name}: exactly the ports it listens on");
        // And the ports the Deployment declares are those.
        let declared: BTreeSet<u16> =
            c.ports.clone().unwrap_or_default().iter().map(|p| p.container_port as u16).collect();
        assert_eq!(declared, listened, "{name}");
    }
}
