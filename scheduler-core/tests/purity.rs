//! scheduler-core is pure: no I/O, no clock. This test fails when its dependency tree gains a
//! crate that does I/O, or when its source reaches for the clock, the filesystem or the network.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Crates that do I/O (or exist to); none may be reachable from scheduler-core.
const FORBIDDEN: &[&str] = &[
    "tokio",
    "hyper",
    "hyper-util",
    "reqwest",
    "axum",
    "kube",
    "kube-client",
    "kube-runtime",
    "mio",
    "socket2",
    "rustls",
    "tokio-rustls",
    "tower",
    "h2",
    "openssl",
];

/// Source patterns that read the clock or touch the outside world.
const FORBIDDEN_CALLS: &[&str] =
    &["SystemTime::now", "Instant::now", "std::fs", "std::net", "std::process", "std::env::var"];

/// Every package reachable from `root` through normal (non-dev) dependencies, from a Cargo.lock.
/// Cargo.lock does not mark dev-dependencies, so the walk starts from the crate's own
/// `[dependencies]` section in its Cargo.toml.
fn reachable(lock: &str, direct: &[String]) -> BTreeSet<String> {
    let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut in_deps = false;
    for line in lock.lines() {
        let line = line.trim();
        if line == "[[package]]" {
            current = None;
            in_deps = false;
        } else if let Some(name) = line.strip_prefix("name = ") {
            current = Some(name.trim_matches('"').to_string());
        } else if line.starts_with("dependencies = [") {
            in_deps = true;
        } else if in_deps && line == "]" {
            in_deps = false;
        } else if in_deps && let Some(c) = &current {
            // `"name"` or `"name version"`.
            let dep =
                line.trim_matches(|ch| ch == '"' || ch == ',').split(' ').next().unwrap_or("").to_string();
            deps.entry(c.clone()).or_default().push(dep);
        }
    }
    let mut seen = BTreeSet::new();
    let mut stack: Vec<String> = direct.to_vec();
    while let Some(d) = stack.pop() {
        if seen.insert(d.clone()) {
            stack.extend(deps.get(&d).cloned().unwrap_or_default());
        }
    }
    seen
}

/// Names in the `[dependencies]` section of a Cargo.toml.
fn direct_dependencies(toml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_section = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_section = line == "[dependencies]";
            continue;
        }
        if in_section && let Some((name, _)) = line.split_once(['=', '.']) {
            let name = name.trim();
            if !name.is_empty() && !name.starts_with('#') {
                out.push(name.to_string());
            }
        }
    }
    out
}

fn violations(lock: &str, toml: &str) -> Vec<String> {
    let all = reachable(lock, &direct_dependencies(toml));
    FORBIDDEN.iter().filter(|f| all.contains(**f)).map(|f| f.to_string()).collect()
}

#[test]
fn no_io_crate_is_reachable() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lock = std::fs::read_to_string(root.join("../Cargo.lock")).unwrap();
    let toml = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(direct_dependencies(&toml).contains(&"serde".to_string()), "parsed the real manifest");
    assert_eq!(
        violations(&lock, &toml),
        Vec::<String>::new(),
        "scheduler-core must not depend on I/O crates"
    );
}

#[test]
fn the_check_catches_a_transitive_io_crate() {
    let toml = "[package]\nname = \"x\"\n[dependencies]\nserde.workspace = true\nfoo = \"1\"\n[dev-dependencies]\ntokio = \"1\"\n";
    let lock = "[[package]]\nname = \"foo\"\ndependencies = [\n \"bar\",\n]\n\n[[package]]\nname = \"bar\"\ndependencies = [\n \"mio 1.0.0\",\n]\n\n[[package]]\nname = \"serde\"\n";
    assert_eq!(violations(lock, toml), vec!["mio".to_string()]);
    let clean = "[package]\nname = \"x\"\n[dependencies]\nserde.workspace = true\n[dev-dependencies]\ntokio = \"1\"\n";
    assert!(violations(lock, clean).is_empty(), "dev-dependencies do not count");
}

#[test]
fn the_source_reads_no_clock_and_touches_no_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![src];
    let mut found = Vec::new();
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files += 1;
                let text = std::fs::read_to_string(&path).unwrap();
                for call in FORBIDDEN_CALLS {
                    if text.contains(call) {
                        found.push(format!("{}: {call}", path.display()));
                    }
                }
            }
        }
    }
    assert!(files > 10, "walked the sources");
    assert!(found.is_empty(), "{found:#?}");
}
