//! `manifests/` rendered by the real `kubectl kustomize` (offline), every object parsed into its
//! k8s-openapi type, and the install's promises checked on the rendered YAML: least-privilege RBAC,
//! hardened containers, webhooks that spare the system namespaces and cannot stop the cluster, the
//! CRD equal to the Rust type, and Deployment flags the binaries accept.

use kube_gang_tests::tools::required_tool;
use std::collections::BTreeSet;
use std::path::PathBuf;

use k8s_openapi::api::admissionregistration::v1 as admission;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PodSpec, Service, ServiceAccount};
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
    for dir in ["manifests", "manifests/overlays/cert-manager"] {
        let Some(objects) = render(dir) else { return };
        assert!(objects.len() >= 15, "{dir}: {} objects", objects.len());
        for o in &objects {
            match o["kind"].as_str().unwrap() {
                "Namespace" => drop(typed::<Namespace>(o)),
                "ServiceAccount" => drop(typed::<ServiceAccount>(o)),
                "ClusterRole" => drop(typed::<ClusterRole>(o)),
                "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(o)),
                "Role" => drop(typed::<Role>(o)),
                "RoleBinding" => drop(typed::<RoleBinding>(o)),
                "ConfigMap" => drop(typed::<ConfigMap>(o)),
                "Deployment" => drop(typed::<Deployment>(o)),
                "Service" => drop(typed::<Service>(o)),
                "PodDisruptionBudget" => drop(typed::<PodDisruptionBudget>(o)),
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
    assert!(
        !can("", "pods", "update"),
        "the scheduler never replaces pods (it patches consume annotations only)"
    );
    assert!(!can("", "pods", "delete") && !can("", "nodes", "patch"));
    assert!(
        !can("", "persistentvolumes", "update") && !can("", "persistentvolumeclaims", "create"),
        "claims and volumes are patched where a binder binds them, never replaced or made"
    );
    // The webhook reads Gangs (its gang lookup) and nothing else: one binding, to a role that
    // grants get/list/watch on gangs only; the token is mounted into its pods alone.
    let sa: ServiceAccount = one(&objects, "ServiceAccount", "gang-webhook");
    assert_eq!(sa.automount_service_account_token, Some(false));
    let webhook: Deployment = one(&objects, "Deployment", "gang-webhook");
    let pod = webhook.spec.template.spec.unwrap();
    assert_eq!(pod.automount_service_account_token, Some(true), "the gang lookup needs a token");
    let mut roles = Vec::new();
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        for b in of_kind(&objects, kind) {
            let subjects = b["subjects"].as_array().unwrap();
            if subjects.iter().any(|s| s["name"] == "gang-webhook") {
                assert_eq!(kind, "ClusterRoleBinding", "Gangs are read in every namespace");
                assert_eq!(b["subjects"][0]["namespace"], "kube-gang-system");
                roles.push(b["roleRef"]["name"].as_str().unwrap().to_string());
            }
        }
    }
    assert_eq!(roles, ["kube-gang:gang-webhook"]);
    // Exactly what the lookup watches (`gang_webhook::gangs::WATCHED`), read-only.
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
    let mut watched: Vec<(String, String, Vec<String>)> = gang_webhook::gangs::WATCHED
        .iter()
        .map(|(api_version, _, plural)| {
            let group = api_version.split_once('/').unwrap().0.to_string();
            (group, plural.to_string(), vec!["get".into(), "list".into(), "watch".into()])
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
fn webhooks_spare_the_system_and_cannot_stop_the_cluster() {
    let Some(objects) = render("manifests") else { return };
    let m: admission::MutatingWebhookConfiguration =
        one(&objects, "MutatingWebhookConfiguration", "gang-webhook");
    for w in m.webhooks.unwrap() {
        assert_eq!(w.side_effects, "None", "{}", w.name);
        assert_eq!(w.admission_review_versions, vec!["v1".to_string()]);
        assert_eq!(w.failure_policy.as_deref(), Some("Ignore"), "{}: mutation never blocks", w.name);
        assert_eq!(w.timeout_seconds, Some(1), "{}", w.name);
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
        let pods =
            w.rules.unwrap().iter().any(|r| r.resources.as_ref().unwrap().contains(&"pods".to_string()));
        let narrowed = w.object_selector.is_some() || w.match_conditions.is_some_and(|c| !c.is_empty());
        assert!(narrowed || !pods, "{}: only gang-related objects reach the webhook", w.name);
    }
    let v: admission::ValidatingWebhookConfiguration =
        one(&objects, "ValidatingWebhookConfiguration", "gang-webhook");
    for w in v.webhooks.unwrap() {
        assert_eq!(w.side_effects, "None", "{}", w.name);
        assert_eq!(w.admission_review_versions, vec!["v1".to_string()]);
        assert_eq!(w.timeout_seconds, Some(3), "{}", w.name);
        spares_system_namespaces(&w.name, &w.namespace_selector);
        let rules = w.rules.clone().unwrap();
        if w.failure_policy.as_deref() == Some("Fail") {
            // Only kube-gang's own objects may be blocked by our outage.
            for r in &rules {
                assert_eq!(r.api_groups.as_deref(), Some(&["kube-gang.io".to_string()][..]), "{}", w.name);
            }
        } else {
            assert_eq!(w.failure_policy.as_deref(), Some("Ignore"), "{}", w.name);
        }
        let pods = rules.iter().any(|r| r.resources.as_ref().unwrap().contains(&"pods".to_string()));
        if pods {
            assert!(
                w.match_conditions.is_some_and(|c| !c.is_empty()),
                "{}: pods are filtered by matchConditions",
                w.name
            );
        }
    }
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
