//! Live mode: the real binary, in its own process, against the HTTP-level fake of the Kubernetes
//! API from the `tests` crate (the same fake the scheduler's tests use), and the real `kubectl`
//! finding the binary as a plugin.

use std::path::Path;
use std::process::{Command, Output};

use kube_gang_tests::{FakeApi, gang, gang_pod, node};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-gang");

async fn run(kubeconfig: &Path, args: &[&str]) -> Output {
    let (kubeconfig, args): (std::path::PathBuf, Vec<String>) =
        (kubeconfig.to_path_buf(), args.iter().map(|a| a.to_string()).collect());
    tokio::task::spawn_blocking(move || {
        Command::new(BIN).args(&args).env("KUBECONFIG", kubeconfig).env_remove("NO_COLOR").output().unwrap()
    })
    .await
    .unwrap()
}

async fn cluster() -> (FakeApi, tempfile::TempDir, std::path::PathBuf) {
    let api = FakeApi::start(&[("/apis/kube-gang.io/v1alpha1", "gangs")]).await;
    for n in ["n1", "n2", "n3"] {
        api.put(node(n, "64", 8, &[("kube-gang.io/rack", "a")]));
    }
    api.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}));
    api.put(gang("ml", "trainer", 2));
    for i in 0..2 {
        let mut p = gang_pod("ml", &format!("trainer-{i}"), "trainer", 8);
        p["spec"]["nodeName"] = json!(format!("n{}", i + 1));
        p["status"]["phase"] = json!("Running");
        api.put(p);
    }
    api.put(gang("ml", "wide", 3));
    for i in 0..3 {
        api.put(gang_pod("ml", &format!("wide-{i}"), "wide", 8));
    }
    api.put(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "wide-0.1", "namespace": "ml"}, "eventTime": "2026-11-22T08:41:00.000000Z",
        "type": "Warning", "reason": "FailedScheduling", "note": "gang ml/wide: room for 1 of the 3 members needed",
        "regarding": {"kind": "Pod", "namespace": "ml", "name": "wide-0"},
        "action": "Scheduling", "reportingController": "gang-scheduler", "reportingInstance": "a"}));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");
    std::fs::write(&kubeconfig, api.kubeconfig().replace("namespace: default", "namespace: ml")).unwrap();
    (api, dir, kubeconfig)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reads_the_live_api_in_the_contexts_namespace() {
    let (api, _dir, kubeconfig) = cluster().await;
    let out = run(&kubeconfig, &["status", "-o", "json"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gangs = v["gangs"].as_array().unwrap();
    assert_eq!(gangs.len(), 2, "{v:#}");
    let trainer = &gangs[0];
    assert_eq!(trainer["name"], "trainer");
    assert_eq!(trainer["source"], "kube-gang/Gang");
    assert_eq!(trainer["phase"], "Running");
    assert_eq!((trainer["minMember"].as_u64(), trainer["running"].as_u64()), (Some(2), Some(2)));
    let wide = &gangs[1];
    assert_eq!((wide["name"].as_str(), wide["phase"].as_str()), (Some("wide"), Some("Pending")));
    assert_eq!(wide["reason"], "Unschedulable");
    assert!(wide["message"].as_str().unwrap().contains("room for 1 of the 3"), "{wide:#}");
    // Read-only: the plugin lists and never writes.
    assert!(api.requests().iter().all(|r| r.method == "GET"), "{:?}", api.requests());
    // Dialects whose CRDs are not installed (404) are skipped, not errors.
    assert!(api.requests().iter().any(|r| r.path.contains("scheduling.volcano.sh")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detail_view_shows_live_events_and_the_why() {
    let (_api, _dir, kubeconfig) = cluster().await;
    let out = run(&kubeconfig, &["status", "wide", "--now", "2026-11-22T09:00:00Z"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("FailedScheduling"), "{text}");
    assert!(text.contains("Why (a scheduling cycle on this state, now):"), "{text}");
    assert!(text.contains("room for 1 of the 3 members needed"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_places_on_the_live_cluster_and_errors_are_clean() {
    let (_api, dir, kubeconfig) = cluster().await;
    let job = dir.path().join("job.yaml");
    std::fs::write(
        &job,
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: small, labels: {kube-gang.io/enabled: \"true\"}}\nspec:\n  parallelism: 2\n  template:\n    spec:\n      containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 4}}}]\n",
    )
    .unwrap();
    let out = run(&kubeconfig, &["simulate", "-o", "json", "-f", job.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gangs"][0]["namespace"], "ml", "the context's namespace is the default");
    assert_eq!(v["gangs"][0]["placements"].as_array().unwrap().len(), 2);
    assert_eq!(v["gangs"][0]["placements"][0]["node"], "n3", "the only node with room");

    let out = run(&kubeconfig, &["status", "--context", "nope"]).await;
    assert_eq!(out.status.code(), Some(2), "a command that cannot run exits 2");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: ") && err.contains("nope"), "{err}");
}

#[test]
fn kubectl_finds_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("kubectl-gang");
    std::fs::copy(BIN, &plugin).unwrap();
    let path = format!("{}:{}", dir.path().display(), std::env::var("PATH").unwrap_or_default());
    let Some(mut kubectl) = kube_gang_tests::tools::required_tool("kubectl") else { return };
    let list = kubectl.args(["plugin", "list"]).env("PATH", &path).output().expect("kubectl on PATH");
    let stdout = String::from_utf8_lossy(&list.stdout);
    assert!(
        stdout.contains(&plugin.display().to_string()),
        "{stdout}\n{}",
        String::from_utf8_lossy(&list.stderr)
    );
    let help = Command::new("kubectl").args(["gang", "--help"]).env("PATH", &path).output().unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("Usage: kubectl gang"), "{help}");
    for cmd in ["status", "simulate", "validate", "snapshot", "completion", "demo"] {
        assert!(help.contains(cmd), "{cmd} in {help}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_a_gang_waiting_for_its_capacity_request_from_the_live_api() {
    let api = FakeApi::start(&[
        ("/apis/kube-gang.io/v1alpha1", "gangs"),
        ("/apis/autoscaling.x-k8s.io/v1", "provisioningrequests"),
    ])
    .await;
    api.put(node("n1", "64", 8, &[]));
    api.put(gang("ml", "wide", 2));
    for i in 0..2 {
        api.put(gang_pod("ml", &format!("wide-{i}"), "wide", 8));
    }
    // What the scheduler wrote for the member with no room, as cluster-autoscaler left it: accepted.
    api.put(json!({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": "wide-1", "namespace": "ml",
            "labels": {"kube-gang.io/gang": "wide", "app.kubernetes.io/managed-by": "gang-scheduler"}},
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                 "podSets": [{"podTemplateRef": {"name": "wide-1-0"}, "count": 1}]},
        "status": {"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
            "lastTransitionTime": "2026-11-22T08:51:00Z"}]}}));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");
    std::fs::write(&kubeconfig, api.kubeconfig().replace("namespace: default", "namespace: ml")).unwrap();
    let out = run(&kubeconfig, &["status", "-o", "json"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let wide = &v["gangs"][0];
    assert_eq!(wide["name"], "wide", "{v:#}");
    assert!(
        wide["message"].as_str().unwrap().starts_with(
            "waiting for capacity: ProvisioningRequest ml/wide-1 (check-capacity.autoscaling.x-k8s.io); "
        ),
        "{v:#}"
    );
    assert_eq!(wide["waitingFor"], "capacity (ProvisioningRequest wide-1)");
    assert!(!api.requests_to("GET", "/provisioningrequests").is_empty(), "listed from the API");

    // Provisioned, the gang's nodes not there yet: the same line says so.
    let mut r = api.get("autoscaling.x-k8s.io/v1", "ProvisioningRequest", "ml", "wide-1").unwrap();
    r["status"]["conditions"].as_array_mut().unwrap().push(json!({"type": "Provisioned", "status": "True",
        "reason": "Provisioned", "message": "", "lastTransitionTime": "2026-11-22T08:55:00Z"}));
    api.put(r);
    let out = run(&kubeconfig, &["status", "wide"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("capacity provisioned: ProvisioningRequest ml/wide-1"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_cluster_is_listed_in_pages_and_read_whole() {
    let (api, _dir, kubeconfig) = cluster().await;
    // 1,201 members: three pages of pods (two of 500, kubectl's chunk size, and the rest).
    api.put(gang("ml", "many", 1_201));
    for i in 0..1_201 {
        let mut p = gang_pod("ml", &format!("many-{i:04}"), "many", 0);
        p["spec"]["nodeName"] = json!("n3");
        p["status"]["phase"] = json!("Running");
        api.put(p);
    }
    let out = run(&kubeconfig, &["status", "many", "-o", "json"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let many = &v["gangs"][0];
    assert_eq!((many["members"].as_u64(), many["running"].as_u64()), (Some(1_201), Some(1_201)), "{v:#}");
    assert_eq!(many["phase"], "Running");
    let pages: Vec<_> =
        api.requests_to("GET", "/pods").into_iter().filter(|r| r.path == "/api/v1/pods").collect();
    assert_eq!(pages.len(), 3, "{pages:#?}");
    assert!(pages.iter().all(|r| r.query.contains("limit=500") && r.status == 200), "{pages:#?}");
    assert!(pages[1..].iter().all(|r| r.query.contains("continue=")), "{pages:#?}");
}

/// The last line `kubectl get pods` prints in the same environment, when kubectl is installed.
fn kubectl_says(env: &[(&str, &Path)], home: &Path) -> Option<String> {
    let mut c = kube_gang_tests::tools::required_tool("kubectl")?;
    c.args(["get", "pods", "--request-timeout=5s"])
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().ok()?;
    String::from_utf8_lossy(&out.stderr).lines().last().map(str::to_string)
}

/// Without any configuration (no kubeconfig, not in a cluster) kubectl talks to localhost:8080 and
/// says the connection was refused; the plugin does and says the same, not that it could not read
/// an in-cluster environment variable. And a server that refuses connections is named as kubectl
/// names it (compared with the real kubectl's words where it is installed).
#[test]
fn errors_without_a_cluster_say_what_kubectl_says() {
    let home = tempfile::tempdir().unwrap();
    let plugin = |env: &[(&str, &Path)]| {
        let mut c = Command::new(BIN);
        c.args(["status"])
            .env("HOME", home.path())
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = plugin(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the server localhost:8080"), "{stderr}");
    assert!(!stderr.contains("incluster"), "{stderr}");

    // A server nothing listens on (a port just freed), through a kubeconfig.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = home.path().join("config");
    std::fs::write(
        &config,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'http://127.0.0.1:{port}'}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\nusers:\n- name: u\n  user: {{token: t}}\n"
        ),
    )
    .unwrap();
    let out = plugin(&[("KUBECONFIG", &config)]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let ours = format!(
        "The connection to the server 127.0.0.1:{port} was refused - did you specify the right host or port?"
    );
    assert_eq!(stderr.trim(), format!("error: {ours}"));
    if let Some(theirs) = kubectl_says(&[("KUBECONFIG", &config)], home.path()) {
        assert_eq!(theirs, ours, "kubectl's words");
    }
}
