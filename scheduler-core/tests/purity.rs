//! scheduler-core is pure: no I/O, no clock. This test fails when `Cargo.toml`'s `[dependencies]`
//! name anything but [`ALLOWED`], when a crate that does I/O ([`FORBIDDEN`]) becomes reachable
//! through them, or when the source uses a path into the clock, the filesystem, the network,
//! processes or the environment ([`FORBIDDEN_PATHS`]). Source is parsed (`syn`, through the same
//! path reader as `cargo xtask tidy`): `use` groups and renames are followed, so `use std::{fs}` or
//! `use std::time::SystemTime as T; T::now()` fail it, and a comment or a string naming `std::fs`
//! does not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[path = "../../xtask/src/syntax.rs"]
#[allow(dead_code)]
mod syntax;

/// The only direct dependencies scheduler-core may have (docs/invariants.md).
const ALLOWED: &[&str] = &[
    "serde",
    "serde_json",
    "serde_path_to_error",
    "serde_norway",
    "k8s-openapi",
    "schemars",
    "thiserror",
    "tracing",
    "smol_str",
    "sha1",
    "regex",
    "cel",
    "semver",
];

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

/// Paths that read the clock or touch the outside world; a path starting with one is forbidden.
const FORBIDDEN_PATHS: &[&[&str]] = &[
    &["std", "time", "SystemTime", "now"],
    &["std", "time", "Instant", "now"],
    &["std", "fs"],
    &["std", "net"],
    &["std", "io"],
    &["std", "process"],
    &["std", "env"],
];

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

/// Every forbidden path in one file's text, as `line: path`; imports followed (so a name brought
/// in by `use` counts as the path it stands for).
fn forbidden_in(text: &str) -> Result<Vec<String>, String> {
    let (_, items) = syntax::scan_file(text)?;
    let mut imports = BTreeMap::new();
    let mut paths = Vec::new();
    let mut modules = vec![items];
    while let Some(items) = modules.pop() {
        let scan = syntax::scan(&items);
        for i in scan.imports {
            if let Some(name) = i.name {
                imports.insert(name, i.target);
            }
        }
        paths.extend(scan.paths);
        modules.extend(scan.children.into_iter().filter_map(|c| c.items));
    }
    let mut found = Vec::new();
    for p in paths {
        let mut full = p.segments.clone();
        for _ in 0..8 {
            match full.first().and_then(|f| imports.get(f)) {
                Some(target) if target != &full[..1] => full = [&target[..], &full[1..]].concat(),
                _ => break,
            }
        }
        // Any `…::now` reads a clock, whichever crate's: std's, jiff's (reachable through
        // k8s-openapi's re-export), chrono's. The core has no function of that name.
        let reads_clock = full.len() >= 2 && full.last().is_some_and(|s| s == "now");
        if reads_clock
            || FORBIDDEN_PATHS
                .iter()
                .any(|f| full.len() >= f.len() && full[..f.len()].iter().zip(*f).all(|(a, b)| a == b))
        {
            found.push(format!("{}: {}", p.line, full.join("::")));
        }
    }
    found.dedup();
    Ok(found)
}

#[test]
fn the_direct_dependencies_are_the_allowed_ones() {
    let toml = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let mut direct = direct_dependencies(&toml);
    direct.sort();
    let mut allowed: Vec<String> = ALLOWED.iter().map(ToString::to_string).collect();
    allowed.sort();
    assert_eq!(
        direct, allowed,
        "scheduler-core's [dependencies] changed: ARCHITECTURE.md lists them (docs/invariants.md)"
    );
}

#[test]
fn the_source_check_follows_imports_and_ignores_words() {
    let caught = |src: &str| forbidden_in(src).unwrap();
    assert_eq!(caught("use std::{fs};\nfn f() { fs::read(\"x\"); }"), vec!["1: std::fs", "2: std::fs::read"]);
    assert_eq!(caught("use std::{collections::BTreeMap, fs as disk};"), vec!["1: std::fs"]);
    assert_eq!(
        caught("use std::time::SystemTime as T;\n\nfn f() { T::now(); }"),
        vec!["3: std::time::SystemTime::now"]
    );
    assert_eq!(
        caught("use std::time;\nfn f() { time::Instant::now(); }"),
        vec!["2: std::time::Instant::now"]
    );
    assert_eq!(caught("fn f() { println!(\"{:?}\", std::env::var(\"HOME\")); }"), vec!["1: std::env::var"]);
    // Clocks of other crates, however reached.
    assert_eq!(
        caught("use k8s_openapi::jiff;\nfn f() { jiff::Timestamp::now(); }"),
        vec!["2: k8s_openapi::jiff::Timestamp::now"]
    );
    assert_eq!(caught("use jiff::Zoned as Z;\nfn f() { Z::now(); }"), vec!["2: jiff::Zoned::now"]);
    assert_eq!(caught("fn f() { chrono::Utc::now(); }"), vec!["1: chrono::Utc::now"]);
    assert_eq!(caught("mod inner { use std::net::TcpStream; }"), vec!["1: std::net::TcpStream"]);
    assert_eq!(caught("fn f() { let _ = std::io::stdin(); }"), vec!["1: std::io::stdin"]);
    // Words are not paths; durations and the type `SystemTime` alone read no clock.
    let clean = "//! Never std::fs.\n/// Not `SystemTime::now`.\nfn f() -> &'static str { \"std::fs\" }\nuse std::time::{Duration, SystemTime};\nfn g(_: SystemTime) -> Duration { Duration::ZERO }";
    assert_eq!(caught(clean), Vec::<String>::new());
    assert!(forbidden_in("fn broken( {").is_err(), "unparsable source is an error, not a pass");
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
                match forbidden_in(&text) {
                    Ok(f) => found.extend(f.into_iter().map(|f| format!("{}:{f}", path.display()))),
                    Err(e) => found.push(format!("{}: does not parse: {e}", path.display())),
                }
            }
        }
    }
    assert!(files > 10, "walked the sources");
    assert!(found.is_empty(), "{found:#?}");
}
