//! `docs/reference.md` held to the code, both ways, so it can never drift: each table's first
//! column against what the code has — `scheduler_core::labels::KNOWN` (and every `kube-gang.io/`
//! name in the binaries' sources), the `Gang` CRD generated from the Rust type, the keys
//! `Config::from_policy_text` accepts, the metrics the binaries export, and the exit codes the
//! binaries and their help give. A failure says what to add or remove, and where.

#[path = "support/exported.rs"]
mod exported;
#[path = "support/policy.rs"]
mod policy;
use policy::policy_keys;

use std::collections::BTreeSet;
use std::path::PathBuf;

use scheduler_core::labels::{KNOWN, KeyKind};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn reference() -> String {
    std::fs::read_to_string(root().join("docs/reference.md")).unwrap()
}

/// The first cell (in backticks) of each row of the table under `## {title}`; with `two`, the
/// first two cells joined by a space.
fn rows(doc: &str, title: &str, two: bool) -> BTreeSet<String> {
    let start = doc
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("docs/reference.md has no section \"## {title}\""));
    let body = &doc[start + title.len() + 5..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    body.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> =
                l.trim_matches('|').split(" | ").map(|c| c.trim().trim_matches('`')).collect();
            if two { format!("{} {}", cells[0], cells[1]) } else { cells[0].to_string() }
        })
        .collect()
}

/// Both ways, with what to do about each difference.
fn same(title: &str, documented: &BTreeSet<String>, code: &BTreeSet<String>, code_is: &str) {
    let missing: Vec<&String> = code.difference(documented).collect();
    let stale: Vec<&String> = documented.difference(code).collect();
    let mut problems = Vec::new();
    for m in missing {
        problems.push(format!(
            "add a row for `{m}` to docs/reference.md, section \"## {title}\" ({code_is} has it)"
        ));
    }
    for s in stale {
        problems.push(format!(
            "`{s}` is in docs/reference.md, section \"## {title}\", but not in {code_is}: remove the row, or add it to the code"
        ));
    }
    assert!(problems.is_empty(), "docs/reference.md has drifted from the code:\n  {}", problems.join("\n  "));
}

fn known(kinds: &[KeyKind]) -> BTreeSet<String> {
    KNOWN.iter().filter(|(_, k)| kinds.contains(k)).map(|(n, _)| n.to_string()).collect()
}

#[test]
fn labels_and_annotations_are_the_known_keys() {
    let doc = reference();
    let code_is = "scheduler_core::labels::KNOWN (scheduler-core/src/read/labels.rs)";
    same("Labels", &rows(&doc, "Labels", false), &known(&[KeyKind::Label]), code_is);
    same("Annotations", &rows(&doc, "Annotations", false), &known(&[KeyKind::Annotation]), code_is);
    same(
        "Names kube-gang writes",
        &rows(&doc, "Names kube-gang writes", false),
        &known(&[KeyKind::Written, KeyKind::Example]),
        code_is,
    );
}

/// Every `kube-gang.io/` name in the binaries' and the core's sources (their tests excepted), and
/// every `pub const` of `names` with such a value, is in `KNOWN`: a key added anywhere cannot miss
/// the list the CLI warns with and this page is held to.
#[test]
fn every_kube_gang_name_in_the_sources_is_known() {
    let known: BTreeSet<String> = KNOWN.iter().map(|(k, _)| k.to_string()).collect();
    let mut unknown = BTreeSet::new();
    for krate in ["scheduler-core/src", "scheduler/src", "webhook/src", "kubectl-gang/src"] {
        let mut dirs = vec![root().join(krate)];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let path = e.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                if path.extension().is_none_or(|x| x != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = &text[..text.find("#[cfg(test)]").unwrap_or(text.len())];
                let mut rest = code;
                while let Some(i) = rest.find("\"kube-gang.io/") {
                    let name: String = rest[i + 1..].chars().take_while(|c| *c != '"').collect();
                    rest = &rest[i + 1 + name.len()..];
                    let suffix = &name["kube-gang.io/".len()..];
                    // `kube-gang.io/v1alpha1`: the API group and a version, not a key.
                    let version =
                        suffix.starts_with('v') && suffix[1..].starts_with(|c: char| c.is_ascii_digit());
                    if !version && !suffix.is_empty() && !known.contains(&name) {
                        unknown.insert(format!(
                            "{name} ({})",
                            path.strip_prefix(root()).unwrap_or(&path).display()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "kube-gang.io names in the sources that scheduler_core::labels::KNOWN lacks: add each to KNOWN \
         (scheduler-core/src/read/labels.rs) and a row to docs/reference.md:\n  {}",
        unknown.into_iter().collect::<Vec<_>>().join("\n  ")
    );
}

/// The CRD's fields, as the CRD generated from the Rust type declares them.
fn crd_fields() -> BTreeSet<String> {
    fn walk(s: &Value, path: String, out: &mut BTreeSet<String>) {
        if !path.is_empty() {
            out.insert(path.clone());
        }
        match s.get("type").and_then(Value::as_str) {
            Some("object") if s.get("properties").is_some() => {
                for (k, v) in s["properties"].as_object().unwrap() {
                    walk(v, if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, out);
                }
            }
            Some("array") if s.get("items").is_some() => walk(&s["items"], format!("{path}[]"), out),
            Some("object") if s.get("additionalProperties").is_some_and(Value::is_object) => {
                walk(&s["additionalProperties"], format!("{path}{{}}"), out)
            }
            _ => {}
        }
    }
    let crd = serde_json::to_value(scheduler_core::crd::gang_crd()).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut out = BTreeSet::new();
    for top in ["spec", "status"] {
        walk(&schema["properties"][top], top.to_string(), &mut out);
    }
    out
}

#[test]
fn the_gang_fields_are_the_crds() {
    same(
        "Gang CRD fields",
        &rows(&reference(), "Gang CRD fields", false),
        &crd_fields(),
        "the Gang CRD (scheduler_core::crd::gang_crd)",
    );
}

#[test]
fn the_policy_keys_are_the_readers() {
    same(
        "Policy file",
        &rows(&reference(), "Policy file", false),
        &policy_keys(),
        "Config::from_policy_text",
    );
}

#[test]
fn the_metrics_are_the_exported_ones() {
    let text = exported::exported();
    let names: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let mut parts = l.split_whitespace();
            let (name, ty) = (parts.next().unwrap(), parts.next().unwrap());
            if ty == "counter" { format!("{name}_total") } else { name.to_string() }
        })
        .collect();
    same("Metrics", &rows(&reference(), "Metrics", false), &names, "the binaries' /metrics");
}

/// The exit codes: kubectl-gang's as its `--help` states them (the text `main` returns them by),
/// the servers' as their `main` returns them (`ExitCode::SUCCESS`/`FAILURE`) and clap's usage error.
#[test]
fn the_exit_codes_are_the_binaries() {
    use clap::CommandFactory;
    let mut code = BTreeSet::new();
    let help = kubectl_gang::cli::Cli::command().render_long_help().to_string();
    let stated = &help[help.find("Exit codes:").expect("kubectl gang --help states its exit codes")..];
    let stated = &stated[..stated.find('.').unwrap()];
    for part in stated.trim_start_matches("Exit codes:").split(';') {
        // "0 success", "1 a negative verdict … (validate: …", " simulate: …)": a code starts a part.
        let first = part.split_whitespace().next().unwrap_or("");
        if first.chars().all(|c| c.is_ascii_digit()) && !first.is_empty() {
            code.insert(format!("kubectl-gang {first}"));
        }
    }
    for (binary, main, usage) in [
        (
            "gang-scheduler",
            "scheduler/src/lib.rs",
            <gang_scheduler::Args as clap::Parser>::try_parse_from(["gang-scheduler", "--no-such-flag"])
                .unwrap_err()
                .exit_code(),
        ),
        (
            "gang-webhook",
            "webhook/src/main.rs",
            <gang_webhook::Args as clap::Parser>::try_parse_from(["gang-webhook", "--no-such-flag"])
                .unwrap_err()
                .exit_code(),
        ),
    ] {
        let text = std::fs::read_to_string(root().join(main)).unwrap();
        assert!(text.contains("ExitCode::SUCCESS") && text.contains("ExitCode::FAILURE"), "{main}");
        code.extend([format!("{binary} 0"), format!("{binary} 1"), format!("{binary} {usage}")]);
    }
    same("Exit codes", &rows(&reference(), "Exit codes", true), &code, "the binaries");
}
