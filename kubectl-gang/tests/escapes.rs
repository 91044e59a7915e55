//! Whatever a name, label or message holds, what reaches the terminal holds no control character
//! but newlines, tabs and, when colour is on, the plugin's own colour codes ([`COLOURS`]): every
//! command and output format, on stdout and stderr, through the same writer `main` uses.

use std::io::Write as _;

use clap::Parser as _;
use kubectl_gang::simulate::{
    Ask, AskedPods, ClaimPlace, DevicePlace, GangResult, OnNode, Place, Simulation, Victim,
};
use kubectl_gang::{COLOURS, Cli, error_text, may_colour, run, write_escaped};
use proptest::prelude::*;
use scheduler_core::cluster::Cluster;
use serde_json::{Value, json};

/// What `main` writes for `text`.
fn written(text: &str, colours: bool) -> String {
    let mut out = Vec::new();
    write_escaped(&mut out, text, colours).unwrap();
    String::from_utf8(out).unwrap()
}

/// The first control character in `text` that is not a newline, a tab or (when `colours`) part
/// of one of the plugin's colour codes.
fn stray_control(text: &str, colours: bool) -> Option<(usize, char)> {
    let mut rest = text;
    let mut at = 0;
    while let Some((i, c)) = rest.char_indices().find(|&(_, c)| c.is_control() && c != '\n' && c != '\t') {
        let tail = &rest[i..];
        match COLOURS.iter().find(|code| colours && tail.starts_with(**code)) {
            Some(code) => {
                at += i + code.len();
                rest = &tail[code.len()..];
            }
            None => return Some((at + i, c)),
        }
    }
    None
}

fn without_colours(text: &str) -> String {
    COLOURS.iter().fold(text.to_string(), |t, code| t.replace(code, ""))
}

/// Strings built from the pieces that do harm (escape sequences that hide, colour, clear or
/// retitle; the plugin's own colour codes; C1 controls; carriage returns) and ordinary text.
fn hostile() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "\u{1b}[8m",
        "\u{1b}[31m",
        "\u{1b}[0m",
        "\u{1b}[2J",
        "\u{1b}]0;pwned\u{7}",
        "\u{1b}[38;5;9m",
        "\u{1b}[38;5;10m",
        "\u{1b}[39m",
        "\u{9b}31m",
        "\r",
        "\u{7}",
        "\u{0}",
        "\u{7f}",
        "\u{85}",
        "\t",
        "a",
        "b-1",
        "日本",
        "é",
    ]);
    (prop::collection::vec(pieces, 1..8), any::<String>())
        .prop_map(|(pieces, tail)| pieces.concat() + &tail.chars().take(6).collect::<String>())
}

/// A dump whose every name, label and message is `s`: a node, a gang, its member pod, an event.
fn dump(s: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": s, "labels": {"zone": s}},
         "status": {"allocatable": {"cpu": "8", "pods": "110"}}},
        {"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
         "metadata": {"name": "g", "namespace": "ml", "labels": {"team": s}},
         "spec": {"minMember": 2},
         "status": {"conditions": [{"type": s, "status": "True", "reason": s, "message": s}]}},
        {"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
         "metadata": {"name": s, "namespace": "ml"}, "spec": {"minMember": 0}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": s, "namespace": "ml", "labels": {"kube-gang.io/gang": "g", "x": s}},
         "spec": {"schedulerName": s, "nodeName": s, "containers": [{"name": s, "image": s}]},
         "status": {"phase": "Running"}},
        {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ml"},
         "regarding": {"kind": "Pod", "name": s}, "reason": s, "note": s, "type": "Warning",
         "eventTime": "2026-11-22T08:00:00Z"},
    ]})
}

fn check_command(args: &[&str]) -> Result<(), TestCaseError> {
    let cli = Cli::try_parse_from(args).map_err(|e| TestCaseError::fail(e.to_string()))?;
    // As `main` decides it, with stdout a terminal: colour kept only where tables may colour.
    let colours = may_colour(&cli);
    match run(cli) {
        Ok(out) => {
            let stdout = written(&out.stdout, colours);
            let stderr = written(&out.stderr, false);
            prop_assert_eq!(stray_control(&stdout, colours), None, "{:?} stdout: {:?}", args, stdout);
            prop_assert_eq!(stray_control(&stderr, false), None, "{:?} stderr: {:?}", args, stderr);
        }
        Err(e) => {
            let text = error_text(&e);
            prop_assert_eq!(stray_control(&text, false), None, "{:?} error: {:?}", args, text);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every command and format, on a dump and files holding `s` everywhere.
    #[test]
    fn no_control_character_reaches_the_terminal(s in hostile()) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("dump.json");
        std::fs::File::create(&file).unwrap().write_all(dump(&s).to_string().as_bytes()).unwrap();
        let f = file.to_str().unwrap();
        let now = "2026-11-22T09:00:00Z";
        let mut runs: Vec<Vec<&str>> = Vec::new();
        for format in ["table", "wide", "name", "json", "yaml"] {
            runs.push(vec!["kubectl-gang", "status", "--cluster", f, "--now", now, "-n", "ml", "-o", format]);
            runs.push(vec!["kubectl-gang", "validate", "-f", f, "-o", format]);
            runs.push(vec!["kubectl-gang", "simulate", "--cluster", f, "--now", now, "-f", f, "-o", format]);
        }
        runs.push(vec!["kubectl-gang", "status", "--cluster", f, "--now", now, "-n", "ml", "g"]);
        runs.push(vec!["kubectl-gang", "status", "--cluster", f, "--now", now, "-n", "ml", &s]);
        runs.push(vec!["kubectl-gang", "status", "--cluster", f, "--now", now, "-A", "-l", &s]);
        runs.push(vec!["kubectl-gang", "snapshot", "--cluster", f]);
        runs.push(vec!["kubectl-gang", "validate", "-f", f]);
        for args in &runs {
            check_command(args)?;
        }
    }

    /// With colour on, data is escaped before the plugin colours it: taking the plugin's colour
    /// codes out leaves the text written without colour, so no colour code came from the data.
    #[test]
    fn colour_codes_come_only_from_the_plugin(s in hostile()) {
        let mut cluster = Cluster::new();
        for o in dump(&s)["items"].as_array().unwrap() {
            let _ = cluster.push(o.clone());
        }
        let assembled = cluster.snapshot();
        let config = scheduler_core::Config::default();
        let now = scheduler_core::Time::from_secs(1_800_000_000);
        let view = kubectl_gang::status::status_view(&assembled.snapshot, &config, now);
        let rows: Vec<_> = view
            .gangs
            .iter()
            .map(|g| {
                let pods = view.members.get(&g.key).cloned().unwrap_or_default();
                kubectl_gang::status::row(g, &pods, &s, view.plan.outcome(&g.key), now, &cluster)
            })
            .collect();
        let table = |color| kubectl_gang::status::table(&rows, kubectl_gang::status::Columns { namespace: true, wide: true, expected_start: None }, false, color);
        let sim = Simulation {
            gangs: vec![GangResult {
                namespace: s.clone(), name: s.clone(), schedulable: false, reason: s.clone(), message: s.clone(),
                placements: vec![Place { pod: s.clone(), node: s.clone() }],
                on_nodes: vec![OnNode { pod: s.clone(), node: s.clone(), how: "pinned" }],
                preemptions: vec![Victim { pod: s.clone(), node: s.clone(), violates: Some(s.clone()) }],
                volumes: vec![ClaimPlace { claim: s.clone(), node: s.clone(), volume: Some(s.clone()) }],
                devices: vec![DevicePlace {
                    claim: s.clone(),
                    pod: s.clone(),
                    node: s.clone(),
                    devices: vec![s.clone()],
                }],
                provisioning: Some(Ask { class: s.clone(), pod_sets: vec![AskedPods {
                    count: 1, requests: s.clone(), node_selector: [(s.clone(), s.clone())].into(), pods: vec![s.clone()],
                }] }),
                object: s.clone(),
                levels: vec![s.clone(), "rack".into()],
            }],
            warnings: vec![s.clone()],
            // A node whose name and domains are the hostile text, drawn by `--map`.
            nodes: vec![scheduler_core::model::Node {
                name: s.as_str().into(),
                allocatable: scheduler_core::resources::Resources::new(),
                labels: [(s.clone(), s.clone()), ("rack".to_string(), s.clone())].into(),
                taints: vec![],
                unschedulable: false,
                ready: true,
            }],
        };
        let render = |color| kubectl_gang::simulate::render(&sim, false, color, true);
        for (coloured, plain) in [(table(true), table(false)), (render(true), render(false))] {
            let shown = written(&coloured, true);
            prop_assert_eq!(stray_control(&shown, true), None, "{:?}", shown);
            prop_assert_eq!(without_colours(&shown), written(&plain, true));
        }
    }
}
