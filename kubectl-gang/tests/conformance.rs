//! Conformance: manifests shaped like the public examples and docs of every gang project we read
//! (our own fixtures, not copies), each run through what `kubectl gang validate` runs (the
//! webhook's admission, `validate::check`) and what `kubectl gang simulate` runs (`prepare`, one
//! cycle).
//!
//! Every fixture under `tests/fixtures/conformance/<project>/` starts with a header of `# key: value`
//! lines:
//!
//! - `source:` the project, its version and where the shape is documented (required);
//! - `why:` one line on the documented semantics the expectation rests on (required);
//! - `verdict: valid | invalid` (required);
//! - `kind:` the kinds of the file's objects, as `group/Kind` (`Pod` for the core group), sorted
//!   and comma-separated (required; checked against the file, and README's table against these);
//! - `gangs:` how many gangs simulate finds; `members:` pods that belong to them (both required,
//!   for an invalid fixture too: what the simulation finds when run despite the errors, 0 when
//!   nothing could be expanded); `min:` pods their minimums need in total (required when valid);
//! - `fits: yes | no` against `examples/cluster.yaml` (optional);
//! - `error:` / `warning:` text that must appear in an error / a warning (repeatable).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kubectl_gang::{input, simulate, validate};
use scheduler_core::cluster::Cluster;
use scheduler_core::{Config, Time};

const NOW: &str = "2026-11-22T09:00:00Z";

#[derive(Debug, Default)]
struct Expect {
    source: String,
    why: String,
    valid: bool,
    gangs: Option<usize>,
    members: Option<usize>,
    min: Option<u64>,
    fits: Option<bool>,
    errors: Vec<String>,
    warnings: Vec<String>,
    kinds: Vec<String>,
}

fn header(path: &Path, text: &str) -> Expect {
    let mut e = Expect::default();
    let mut verdict = None;
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        let Some((key, value)) = line.trim_start_matches('#').split_once(':') else { continue };
        let value = value.trim().to_string();
        let num =
            || value.parse::<usize>().unwrap_or_else(|_| panic!("{}: {key}: not a number", path.display()));
        match key.trim() {
            "source" => e.source = value,
            "why" => e.why = value,
            "verdict" => verdict = Some(value == "valid"),
            "gangs" => e.gangs = Some(num()),
            "members" => e.members = Some(num()),
            "min" => e.min = Some(num() as u64),
            "fits" => e.fits = Some(value == "yes"),
            "kind" => e.kinds = value.split(',').map(|k| k.trim().to_string()).collect(),
            "error" => e.errors.push(value),
            "warning" => e.warnings.push(value),
            _ => {}
        }
    }
    let p = path.display();
    assert!(!e.source.is_empty() && !e.why.is_empty(), "{p}: `source:` and `why:` are required");
    e.valid = verdict.unwrap_or_else(|| panic!("{p}: `verdict:` is required"));
    assert!(e.gangs.is_some() && e.members.is_some(), "{p}: gangs, members required");
    assert!(!e.kinds.is_empty(), "{p}: `kind:` required");
    if e.valid {
        assert!(e.min.is_some(), "{p}: min required");
    } else {
        assert!(!e.errors.is_empty(), "{p}: an invalid fixture names the error it expects");
    }
    e
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixtures() -> Vec<PathBuf> {
    let dir = root().join("tests/fixtures/conformance");
    let mut out = Vec::new();
    for project in std::fs::read_dir(&dir).unwrap() {
        let project = project.unwrap().path();
        for f in std::fs::read_dir(&project).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|x| x == "yaml") {
                out.push(f);
            }
        }
    }
    out.sort();
    out
}

/// `group/Kind` of an object (`Pod` for the core group).
fn kind_of(object: &serde_json::Value) -> String {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let kind = object["kind"].as_str().unwrap_or("");
    match api_version.rsplit_once('/') {
        Some((group, _)) => format!("{group}/{kind}"),
        None => kind.to_string(),
    }
}

fn cluster() -> Cluster {
    let mut c = Cluster::new();
    for s in input::read_file(&root().join("examples/cluster.yaml")).unwrap() {
        c.push(s.object).unwrap();
    }
    c
}

/// Checks one fixture; returns what went wrong, if anything.
fn check(path: &Path, cluster: &Cluster) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let expect = header(path, &text);
    let mut wrong = Vec::new();
    let now = Time::parse_rfc3339(NOW).unwrap();
    let sourced = match input::parse_text(&path.display().to_string(), &text) {
        Ok(s) => s,
        Err(e) => return vec![format!("cannot read: {e}")],
    };

    let mut kinds: Vec<String> = sourced.iter().map(|s| kind_of(&s.object)).collect();
    kinds.sort();
    kinds.dedup();
    if kinds != expect.kinds {
        wrong.push(format!("kind: the header says {:?}, the file holds {kinds:?}", expect.kinds));
    }
    // `kubectl gang validate`: the webhook's decision, knowing the input's gangs.
    let report = validate::check(|| sourced.iter().cloned(), None);
    let mut errors = report.unreadable.clone();
    errors.extend(report.errors.iter().map(|f| format!("{}: {}", f.field, f.message)));
    let mut warnings = report.warnings.clone();
    // `kubectl gang simulate`: admission, expansion and one cycle.
    let prepared = simulate::prepare(&sourced, "default", now);
    errors.extend(prepared.errors.iter().cloned());
    warnings.extend(prepared.warnings.iter().cloned());

    for want in &expect.errors {
        if !errors.iter().any(|e| e.contains(want.as_str())) {
            wrong.push(format!("expected an error containing {want:?}, got {errors:?}"));
        }
    }
    if expect.valid && !errors.is_empty() {
        wrong.push(format!("expected valid, got errors {errors:?}"));
        return wrong;
    }
    let sim = simulate::simulate(cluster, &prepared, &Config::default(), now);
    if expect.valid {
        warnings.extend(sim.warnings.iter().cloned());
        for want in &expect.warnings {
            if !warnings.iter().any(|w| w.contains(want.as_str())) {
                wrong.push(format!("expected a warning containing {want:?}, got {warnings:?}"));
            }
        }
        if expect.warnings.is_empty() && !warnings.is_empty() {
            wrong.push(format!("expected no warning, got {warnings:?}"));
        }
    }

    // Members and minimums, from the snapshot simulate assembled.
    let mut with = cluster.clone();
    for o in &prepared.objects {
        with.push(o.decode()).unwrap();
    }
    let snapshot = with.snapshot().snapshot;
    let gangs: BTreeSet<_> = sim.gangs.iter().map(|g| format!("{}/{}", g.namespace, g.name)).collect();
    let members = snapshot
        .pods
        .iter()
        .filter(|p| prepared.pods.contains(&(p.key.namespace.to_string(), p.key.name.to_string())))
        .filter(|p| p.gang.as_ref().is_some_and(|m| gangs.contains(&m.gang.to_string())))
        .count();
    let min: u64 = snapshot
        .gangs
        .iter()
        .filter(|g| gangs.contains(&g.key.to_string()))
        .map(|g| g.min_pods().unwrap_or(0))
        .sum();
    if Some(sim.gangs.len()) != expect.gangs {
        wrong.push(format!("gangs: expected {:?}, got {} ({gangs:?})", expect.gangs, sim.gangs.len()));
    }
    if Some(members) != expect.members {
        wrong.push(format!("members: expected {:?}, got {members}", expect.members));
    }
    if expect.min.is_some() && Some(min) != expect.min {
        wrong.push(format!("min: expected {:?}, got {min}", expect.min));
    }
    if let Some(fits) = expect.fits.filter(|_| expect.valid) {
        let all = sim.gangs.iter().all(|g| g.schedulable);
        if all != fits {
            let why: Vec<_> = sim.gangs.iter().map(|g| format!("{}: {}", g.name, g.message)).collect();
            wrong.push(format!("fits: expected {fits}, got {all}: {why:?}"));
        }
    }
    wrong
}

#[test]
fn every_project_example_reads_validates_and_simulates_as_documented() {
    let cluster = cluster();
    let files = fixtures();
    assert!(files.len() >= 20, "the suite lost fixtures: {}", files.len());
    let mut failures = Vec::new();
    for f in &files {
        for w in check(f, &cluster) {
            failures.push(format!("{}: {w}", f.strip_prefix(root()).unwrap_or(f).display()));
        }
    }
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_readme_table_lists_exactly_the_projects_and_kinds_the_fixtures_hold() {
    use std::collections::BTreeMap;
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    // README: each row of the supported-kinds table, its fixture folder and its kinds (last cell).
    let mut table: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in readme.lines().filter(|l| l.starts_with("| ") && l.contains("`tests/fixtures/conformance/")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let dir = cells
            .iter()
            .find_map(|c| c.strip_prefix("`tests/fixtures/conformance/").and_then(|d| d.strip_suffix("/`")))
            .unwrap_or_else(|| panic!("no fixture folder in {line}"));
        let kinds = cells.last().unwrap().split(", ").map(|k| k.trim_matches('`').to_string()).collect();
        assert!(table.insert(dir.to_string(), kinds).is_none(), "README names {dir} twice");
    }
    // The fixtures: each folder's `kind:` headers.
    let mut held: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in fixtures() {
        let project = f.parent().unwrap().file_name().unwrap().to_string_lossy().to_string();
        let e = header(&f, &std::fs::read_to_string(&f).unwrap());
        held.entry(project).or_default().extend(e.kinds);
    }
    assert_eq!(
        table.keys().collect::<Vec<_>>(),
        held.keys().collect::<Vec<_>>(),
        "README's table rows and the fixture folders differ"
    );
    for (dir, kinds) in &held {
        assert_eq!(&table[dir], kinds, "README's kinds for tests/fixtures/conformance/{dir}/");
    }
}
