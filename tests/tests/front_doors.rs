//! The two front doors that judge an object, the webhook (`POST /validate`, `POST /mutate`) and
//! `kubectl gang validate`, given the same objects, reach the same verdict: the same errors with the
//! same field paths, the same warnings, the same allowed/denied. Both call `scheduler_core::admit_with`
//! (the webhook with the Gangs its gang lookup watches, the plugin with the gangs of its input);
//! this test holds them to it end to end, from the bytes each one reads to what each one prints.
//! The webhook is given the gangs of the file it judges, as if they were in the cluster.
//!
//! Inputs: every file in `examples/workloads/`, the plugin's fixtures, the objects the webhook's
//! router tests send (`tests/fixtures/admission/router-objects.yaml`), and every conformance
//! fixture (`tests/fixtures/conformance/<project>/`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use clap::Parser as _;
use gang_webhook::admission::{Hook, review_with};
use kubectl_gang::Cli;
use serde_json::{Value, json};

const NAMESPACE: &str = "ml";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn inputs() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs: Vec<PathBuf> =
        ["examples/workloads", "kubectl-gang/tests/fixtures", "tests/fixtures/admission"]
            .iter()
            .map(|d| root().join(d))
            .collect();
    let mut projects: Vec<PathBuf> = std::fs::read_dir(root().join("tests/fixtures/conformance"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    projects.sort();
    dirs.extend(projects);
    for dir in dirs {
        let mut here: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "json"))
            .collect();
        here.sort();
        files.extend(here);
    }
    files
}

/// One object's verdict as a front door reports it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Seen {
    allowed: bool,
    /// `path: message` (the message alone for an error about the whole object).
    errors: Vec<String>,
    warnings: Vec<String>,
}

fn webhook_review(object: &Value) -> Vec<u8> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "front-doors", "kind": {"group": "", "version": "v1", "kind": kind},
                    "resource": {"group": "", "version": "v1", "resource": "objects"},
                    "userInfo": {"username": "admin"}, "namespace": NAMESPACE, "name": name,
                    "operation": "CREATE", "object": object, "dryRun": false}
    }))
    .unwrap()
}

/// The webhook's verdict: the validating hook's answer, after the mutating hook's patch is applied
/// (the API server runs mutating hooks first).
fn webhook(object: &Value, gangs: &scheduler_core::GangSet) -> Seen {
    let answer = |hook, object: &Value| {
        let (a, _) = review_with(hook, &webhook_review(object), false, gangs).unwrap();
        serde_json::to_value(a).unwrap()["response"].clone()
    };
    let mutated = answer(Hook::Mutate, object);
    assert_eq!(mutated["allowed"], true, "mutation never denies");
    let mut object = object.clone();
    if let Some(p) = mutated["patch"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD.decode(p).unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
    }
    // The API server names an object with only `generateName` after mutating admission and
    // before validating admission: the validating hook sees the generated name.
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
        && meta.get("name").is_none()
        && let Some(prefix) = meta.get("generateName").and_then(Value::as_str)
    {
        let name = scheduler_core::workload::generated_name(prefix, "front-doors");
        meta.insert("name".into(), json!(name));
    }
    let r = answer(Hook::Validate, &object);
    let allowed = r["allowed"].as_bool().unwrap();
    // One error a cause (a message may hold "; " itself); the message lists them all.
    let errors: Vec<String> = r["status"]["details"]["causes"]
        .as_array()
        .map(|causes| {
            causes
                .iter()
                .map(|c| match (c["field"].as_str(), c["message"].as_str().unwrap()) {
                    (Some(field), message) => format!("{field}: {message}"),
                    (None, message) => message.to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    if !allowed {
        let message = r["status"]["message"].as_str().unwrap();
        assert_eq!(message, format!("kube-gang: {}", errors.join("; ")), "the message lists the causes");
    }
    let warnings = r["warnings"]
        .as_array()
        .map(|w| w.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    Seen { allowed, errors, warnings }
}

/// `kubectl gang validate -o json -n ml -f FILE`, as verdicts per object (`Kind ns/name`); `None`
/// when the plugin refuses the input as the API server would before admission (exit 2: an invalid
/// quantity), so no webhook ever sees it.
fn plugin(file: &Path) -> Option<BTreeMap<String, Seen>> {
    let cli = Cli::try_parse_from([
        "kubectl-gang",
        "validate",
        "-o",
        "json",
        "-n",
        NAMESPACE,
        "-f",
        file.to_str().unwrap(),
    ])
    .unwrap();
    let out = kubectl_gang::run(cli).unwrap();
    if out.code == 2 {
        assert!(out.stderr.starts_with("error: the input is invalid:"), "{}", out.stderr);
        return None;
    }
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    // Findings over the whole input (a gang's members across objects) are the plugin's alone: the
    // webhook admits one object at a time.
    for e in report["errors"].as_array().unwrap().iter().filter(|e| e.get("wholeInput").is_none()) {
        let (field, message) = (e["field"].as_str().unwrap(), e["message"].as_str().unwrap());
        let text = if field.is_empty() { message.to_string() } else { format!("{field}: {message}") };
        seen.entry(e["object"].as_str().unwrap().to_string()).or_default().errors.push(text);
    }
    let prefix = format!("{}: ", file.display());
    for w in report["warnings"].as_array().unwrap() {
        let w = w.as_str().unwrap().strip_prefix(&prefix).unwrap();
        // `Kind ns/name: warning`; the object names no ": ".
        let (object, warning) = w.split_once(": ").unwrap();
        seen.entry(object.to_string()).or_default().warnings.push(warning.to_string());
    }
    let whole_input = report["errors"].as_array().unwrap().iter().any(|e| e.get("wholeInput").is_some());
    assert_eq!(
        out.code,
        u8::from(whole_input || seen.values().any(|s| !s.errors.is_empty())),
        "{}",
        out.stderr
    );
    Some(seen)
}

/// The gangs a file defines, read as the plugin reads them (namespace defaulted to the one both
/// doors are given).
fn gangs_in(objects: &[kubectl_gang::input::Sourced]) -> scheduler_core::GangSet {
    let with_namespace: Vec<Value> = objects
        .iter()
        .map(|s| {
            let mut o = s.object.clone();
            if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.entry("namespace").or_insert_with(|| json!(NAMESPACE));
            }
            o
        })
        .collect();
    kubectl_gang::input::gangs_of(&with_namespace)
}

#[test]
fn a_pod_on_an_inner_or_unknown_subgroup_of_a_known_gang_is_denied_by_both_doors_alike() {
    let file = root().join("tests/fixtures/admission/gang-inner-subgroup.yaml");
    let objects = kubectl_gang::input::read_paths(std::slice::from_ref(&file)).unwrap();
    let gangs = gangs_in(&objects);
    assert_eq!(gangs.len(), 1, "the file defines one Gang");
    let by_plugin = plugin(&file).unwrap();
    let pod =
        |name: &str| objects.iter().find(|s| s.object["metadata"]["name"] == name).unwrap().object.clone();
    let inner = webhook(&pod("train-inner"), &gangs);
    assert!(!inner.allowed);
    assert_eq!(
        inner.errors,
        [
            "metadata.labels[kube-gang.io/subgroup]: \"workers\" is an inner subgroup (it has child subgroups); pods attach to leaf subgroups only (workers-a, workers-b)"
        ]
    );
    assert_eq!(by_plugin["Pod ml/train-inner"].errors, inner.errors);
    let unknown = webhook(&pod("train-unknown"), &gangs);
    assert!(!unknown.allowed);
    assert_eq!(by_plugin["Pod ml/train-unknown"].errors, unknown.errors);
    assert!(webhook(&pod("train-leaf"), &gangs).allowed);
    assert!(!by_plugin.contains_key("Pod ml/train-leaf"), "{by_plugin:?}");
    // Without the gang (the webhook's lookup off, or the Gang not yet created) the pods are allowed:
    // an unknown gang may be created later.
    assert!(webhook(&pod("train-inner"), &scheduler_core::GangSet::default()).allowed);
}

#[test]
fn the_webhook_and_kubectl_gang_validate_agree_on_every_input() {
    let mut compared = 0;
    let (mut denied, mut warned, mut injected) = (0, 0, 0);
    for file in inputs() {
        // Inputs the plugin cannot read (a fixture of broken YAML) have no verdict to compare.
        let Ok(objects) = kubectl_gang::input::read_paths(std::slice::from_ref(&file)) else { continue };
        let Some(mut by_plugin) = plugin(&file) else { continue };
        let gangs = gangs_in(&objects);
        for sourced in objects {
            let mut object = sourced.object;
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.entry("namespace").or_insert_with(|| json!(NAMESPACE));
            }
            let name = kubectl_gang::input::describe(&object);
            let mut from_plugin = by_plugin.remove(&name).unwrap_or_default();
            from_plugin.allowed = from_plugin.errors.is_empty();
            let from_webhook = webhook(&object, &gangs);
            assert_eq!(from_webhook, from_plugin, "{}: {name}", file.display());
            compared += 1;
            denied += usize::from(!from_webhook.allowed);
            warned += usize::from(!from_webhook.warnings.is_empty());
            let (m, _) = review_with(Hook::Mutate, &webhook_review(&object), false, &gangs).unwrap();
            injected += usize::from(m.response.patch.is_some());
        }
        assert!(
            by_plugin.is_empty(),
            "{}: the plugin judged objects the webhook never saw: {by_plugin:?}",
            file.display()
        );
    }
    // The inputs exercise every kind of verdict, or the comparison proves little.
    assert!(compared >= 20, "{compared} objects compared");
    assert!(denied >= 4, "{denied} denied");
    assert!(warned >= 2, "{warned} with warnings");
    assert!(injected >= 5, "{injected} injected");
}
