//! The import check: arrows point down, and no modules import each other in a circle.
//!
//! Every crate of the workspace is read from its root (`src/lib.rs`, `src/main.rs`) through its
//! `mod` declarations; every path in every module (`use` items, paths in code, paths in macro
//! calls) is resolved to the module it names, following `crate::`, `super::`, `self::`, child
//! modules and re-exports (`pub use rules::validate;` at the root makes `crate::validate` mean
//! `crate::rules::validate`). Then:
//!
//! - **No circles, anywhere.** Among the children of any module, the imports between them (an
//!   import from deep inside one child into another counts for the two children) form no cycle.
//!   A module using its own parent or child is not a circle: that is how Rust nests modules.
//! - **Layers, in scheduler-core.** Its modules live in layer folders (`read/` < `rules/` <
//!   `decide/`); a module may use its own layer and the ones below, never one above. Inside a
//!   layer the modules have ranks ([`CORE`]): a module may use only modules of lower rank. A module
//!   a layer folder has and the table does not name is held to the layer rule and the circle rule
//!   only. Inside the crate, a path spells the layer it goes through (`crate::read::model`): the
//!   root's flat re-exports (`crate::model`) are for the crate's users, and an import through
//!   them would hide which layer it reaches.
//!
//! Each problem is reported with the file, the line, the arrow and the path that makes it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::syntax::{self, Import};

/// Layers, lowest first; in each, its modules by rank, lowest first.
pub type Table = [(&'static str, &'static [&'static [&'static str]])];

/// scheduler-core's layers, lowest first; in each, its modules by rank, lowest first (modules of
/// one rank are independent of each other).
pub const CORE: &Table = &[
    (
        "read",
        &[
            &["error", "labels", "coverage", "duration", "quantity", "object"],
            &["resources"],
            &["model"],
            &["tree", "crd", "volume", "hypernode", "network_layer", "cel"],
            &["convert", "dialect"],
            &["workload"],
            &["cluster"],
        ],
    ),
    ("rules", &[&["podspec"], &["validate"], &["admit"], &["prepare"]]),
    ("decide", &[&["config"], &["plan"], &["provision"], &["schedule"], &["replay"]]),
];

/// A crate to check: a name for messages, its root file, and its layers (if it has any).
#[derive(Clone, Debug)]
pub struct CrateSpec {
    pub name: String,
    pub root: PathBuf,
    pub layers: Option<Layers>,
}

/// Layer folders, lowest first, each with its modules by rank.
#[derive(Clone, Debug)]
pub struct Layers(pub Vec<(String, Vec<Vec<String>>)>);

impl Layers {
    pub fn of(table: &Table) -> Self {
        Layers(
            table
                .iter()
                .map(|(l, ranks)| {
                    (l.to_string(), ranks.iter().map(|r| r.iter().map(|m| m.to_string()).collect()).collect())
                })
                .collect(),
        )
    }

    fn layer(&self, name: &str) -> Option<usize> {
        self.0.iter().position(|(l, _)| l == name)
    }

    fn rank(&self, layer: usize, module: &str) -> Option<usize> {
        self.0[layer].1.iter().position(|r| r.iter().any(|m| m == module))
    }

    fn order(&self, layer: usize) -> String {
        self.0[layer].1.iter().map(|r| r.join(", ")).collect::<Vec<_>>().join(" < ")
    }
}

/// One resolved import: from one module to another, where it is written and how.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    pub from: Vec<String>,
    pub to: Vec<String>,
    pub file: PathBuf,
    pub line: usize,
    pub path: String,
}

/// A problem the check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A module cannot be read (missing file, syntax error).
    Unreadable { file: PathBuf, message: String },
    /// A lower layer (or rank) uses a higher one.
    Upward { edge: Edge, why: String },
    /// Modules under one parent import each other in a circle; the edges that close it.
    Cycle { krate: String, modules: Vec<String>, edges: Vec<Edge> },
    /// The layer table names a module the crate does not have.
    Stale { layer: String, module: String },
}

fn module_name(path: &[String]) -> String {
    if path.is_empty() { "the crate root".to_string() } else { path.join("::") }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Unreadable { file, message } => write!(f, "{}: cannot read: {message}", file.display()),
            Problem::Upward { edge, why } => write!(
                f,
                "{}:{}: {} → {} (`{}`): {why}",
                edge.file.display(),
                edge.line,
                module_name(&edge.from),
                module_name(&edge.to),
                edge.path
            ),
            Problem::Cycle { krate, modules, edges } => {
                write!(f, "import circle in {krate}: {}", modules.join(" ⇄ "))?;
                for e in edges {
                    write!(
                        f,
                        "\n    {}:{}: {} → {} (`{}`)",
                        e.file.display(),
                        e.line,
                        module_name(&e.from),
                        module_name(&e.to),
                        e.path
                    )?;
                }
                Ok(())
            }
            Problem::Stale { layer, module } => {
                write!(
                    f,
                    "the layer table names {layer}::{module}, which does not exist: update xtask's CORE"
                )
            }
        }
    }
}

/// What the check saw and found.
#[derive(Debug, Default)]
pub struct Report {
    pub crates: usize,
    pub modules: usize,
    pub edges: usize,
    pub problems: Vec<Problem>,
}

struct Module {
    path: Vec<String>,
    file: PathBuf,
    imports: Vec<Import>,
    paths: Vec<syntax::PathRef>,
    children: BTreeSet<String>,
}

/// Reads a crate's module tree from `spec.root`, with `read` returning a file's text.
fn load(
    spec: &CrateSpec,
    read: &dyn Fn(&Path) -> Option<String>,
    problems: &mut Vec<Problem>,
) -> Vec<Module> {
    let mut out = Vec::new();
    let Some(text) = read(&spec.root) else {
        problems.push(Problem::Unreadable { file: spec.root.clone(), message: "no such file".into() });
        return out;
    };
    let items = match syntax::scan_file(&text) {
        Ok((_, items)) => items,
        Err(message) => {
            problems.push(Problem::Unreadable { file: spec.root.clone(), message });
            return out;
        }
    };
    let dir = spec.root.parent().map(Path::to_path_buf).unwrap_or_default();
    add(&spec.root, dir, Vec::new(), &items, read, &mut out, problems);
    out
}

/// Adds the module `path` (its `items`, written in `file`; its `mod x;` children under `dir`).
fn add(
    file: &Path,
    dir: PathBuf,
    path: Vec<String>,
    items: &[syn::Item],
    read: &dyn Fn(&Path) -> Option<String>,
    out: &mut Vec<Module>,
    problems: &mut Vec<Problem>,
) {
    let scan = syntax::scan(items);
    out.push(Module {
        path: path.clone(),
        file: file.to_path_buf(),
        imports: scan.imports,
        paths: scan.paths,
        children: scan.children.iter().map(|c| c.name.clone()).collect(),
    });
    for child in scan.children {
        let mut child_path = path.clone();
        child_path.push(child.name.clone());
        let child_dir = dir.join(&child.name);
        if let Some(items) = &child.items {
            add(file, child_dir, child_path, items, read, out, problems);
            continue;
        }
        let candidates = match &child.path_attr {
            Some(p) => vec![file.parent().map(|d| d.join(p)).unwrap_or_else(|| PathBuf::from(p))],
            None => vec![dir.join(format!("{}.rs", child.name)), child_dir.join("mod.rs")],
        };
        let Some((child_file, text)) = candidates.iter().find_map(|c| read(c).map(|t| (c.clone(), t))) else {
            problems.push(Problem::Unreadable {
                file: file.to_path_buf(),
                message: format!("line {}: no file for `mod {};`", child.line, child.name),
            });
            continue;
        };
        match syntax::scan_file(&text) {
            Ok((_, items)) => add(&child_file, child_dir, child_path, &items, read, out, problems),
            Err(message) => problems.push(Problem::Unreadable { file: child_file, message }),
        }
    }
}

/// Resolves paths to the modules they name.
struct Resolver<'a> {
    modules: BTreeMap<&'a [String], &'a Module>,
}

impl<'a> Resolver<'a> {
    fn has_child(&self, module: &[String], name: &str) -> bool {
        self.modules.get(module).is_some_and(|m| m.children.contains(name))
    }

    fn alias(&self, module: &[String], name: &str) -> Option<&'a Import> {
        self.modules.get(module)?.imports.iter().find(|i| i.name.as_deref() == Some(name))
    }

    /// `segments` as written in `module`, made absolute (from the crate root). `None`: a path
    /// into another crate, the prelude, or a local name.
    fn absolute(&self, module: &[String], segments: &[String], depth: usize) -> Option<Vec<String>> {
        let first = segments.first()?;
        match first.as_str() {
            "crate" => Some(segments[1..].to_vec()),
            "self" => Some([module, &segments[1..]].concat()),
            "super" => {
                let mut base = module.to_vec();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                Some([&base[..], rest].concat())
            }
            _ if self.has_child(module, first) => Some([module, segments].concat()),
            _ if depth < 16 => {
                let import = self.alias(module, first)?;
                let target = self.absolute(module, &import.target, depth + 1)?;
                Some([&target[..], &segments[1..]].concat())
            }
            _ => None,
        }
    }

    /// The module an absolute path ends in: its own module if it names one, else the module that
    /// defines (or re-exports from elsewhere) the item it names.
    fn target(&self, absolute: &[String], depth: usize) -> Vec<String> {
        let mut cur: Vec<String> = Vec::new();
        for (i, seg) in absolute.iter().enumerate() {
            if self.has_child(&cur, seg) {
                cur.push(seg.clone());
            } else if let Some(import) = self.alias(&cur, seg).filter(|_| depth < 16) {
                return match self.absolute(&cur, &import.target, depth + 1) {
                    Some(t) => self.target(&[&t[..], &absolute[i + 1..]].concat(), depth + 1),
                    None => cur,
                };
            } else {
                break;
            }
        }
        cur
    }
}

/// The resolved imports of a crate's modules (from ≠ to), deduplicated by (from, to, line).
fn edges(modules: &[Module]) -> Vec<Edge> {
    let r = Resolver { modules: modules.iter().map(|m| (&m.path[..], m)).collect() };
    let mut out = BTreeSet::new();
    for m in modules {
        for p in &m.paths {
            let Some(abs) = r.absolute(&m.path, &p.segments, 0) else { continue };
            let to = r.target(&abs, 0);
            if to != m.path {
                out.insert(Edge {
                    from: m.path.clone(),
                    to,
                    file: m.file.clone(),
                    line: p.line,
                    path: p.segments.join("::"),
                });
            }
        }
    }
    out.into_iter().collect()
}

/// Whether `a` is `b` or inside it.
fn within(a: &[String], b: &[String]) -> bool {
    a.len() >= b.len() && a[..b.len()] == *b
}

/// Circles among siblings: every edge lifted to the two children of the deepest module containing
/// both ends; edges between a module and its own ancestor are nesting, not imports.
fn cycles(krate: &str, edges: &[Edge]) -> Vec<Problem> {
    // parent → (child → (child → first edge))
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, &Edge>>> = BTreeMap::new();
    for e in edges {
        if within(&e.from, &e.to) || within(&e.to, &e.from) {
            continue;
        }
        let common = e.from.iter().zip(&e.to).take_while(|(a, b)| a == b).count();
        let parent = e.from[..common].to_vec();
        graphs
            .entry(parent)
            .or_default()
            .entry(e.from[common].clone())
            .or_default()
            .entry(e.to[common].clone())
            .or_insert(e);
    }
    let mut out = Vec::new();
    for (parent, graph) in &graphs {
        let reach = |start: &str| {
            let mut seen = BTreeSet::new();
            let mut stack = vec![start.to_string()];
            while let Some(n) = stack.pop() {
                for next in graph.get(&n).into_iter().flat_map(|m| m.keys()) {
                    if seen.insert(next.clone()) {
                        stack.push(next.clone());
                    }
                }
            }
            seen
        };
        let reaches: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|k| (k, reach(k))).collect();
        let mut done = BTreeSet::new();
        for node in graph.keys() {
            if done.contains(node) || !reaches[node].contains(node) {
                continue;
            }
            let component: BTreeSet<String> = reaches[node]
                .iter()
                .filter(|other| reaches.get(other).is_some_and(|r| r.contains(node)))
                .cloned()
                .collect();
            done.extend(component.iter().cloned());
            let mut cycle_edges: Vec<Edge> = Vec::new();
            for from in &component {
                for (to, e) in graph.get(from).into_iter().flatten() {
                    if component.contains(to) {
                        cycle_edges.push((*e).clone());
                    }
                }
            }
            let name = |c: &String| [&parent[..], std::slice::from_ref(c)].concat().join("::");
            out.push(Problem::Cycle {
                krate: krate.to_string(),
                modules: component.iter().map(name).collect(),
                edges: cycle_edges,
            });
        }
    }
    out
}

/// Upward arrows between layers, and between ranks within a layer.
fn upward(layers: &Layers, modules: &[Module], edges: &[Edge]) -> Vec<Problem> {
    let mut out = Vec::new();
    for (layer, ranks) in &layers.0 {
        for module in ranks.iter().flatten() {
            let path = [layer.clone(), module.clone()];
            if !modules.iter().any(|m| m.path == path) {
                out.push(Problem::Stale { layer: layer.clone(), module: module.clone() });
            }
        }
    }
    // (layer, rank, module name) of a module path; `None` for the root and the layer modules.
    let place = |p: &[String]| -> Option<(usize, Option<usize>, String)> {
        let (l, m) = (p.first()?, p.get(1)?);
        let layer = layers.layer(l)?;
        Some((layer, layers.rank(layer, m), m.clone()))
    };
    let mut reported = BTreeSet::new();
    for e in edges {
        // One problem per arrow: its first line (usually the `use`) says where to start.
        if !reported.insert((&e.from, &e.to)) {
            continue;
        }
        let (Some(from), Some(to)) = (place(&e.from), place(&e.to)) else {
            if e.to.is_empty() && !e.from.is_empty() {
                out.push(Problem::Upward {
                    edge: e.clone(),
                    why: "uses an item defined at the crate root; define it in a layer (the root only re-exports)"
                        .into(),
                });
            }
            continue;
        };
        if from.2 == to.2 && from.0 == to.0 {
            continue;
        }
        if from.0 < to.0 {
            out.push(Problem::Upward {
                edge: e.clone(),
                why: format!(
                    "the {} layer may not use the {} layer above it",
                    layers.0[from.0].0, layers.0[to.0].0
                ),
            });
        } else if from.0 == to.0
            && let (Some(fr), Some(tr)) = (from.1, to.1)
            && fr <= tr
        {
            out.push(Problem::Upward {
                edge: e.clone(),
                why: format!(
                    "within {}/ a module uses only modules of lower rank: {}",
                    layers.0[from.0].0,
                    layers.order(from.0)
                ),
            });
        }
    }
    // A path through the root's flat re-exports, each such path once per line, unless its arrow
    // is a problem already.
    let mut flat = BTreeSet::new();
    for e in edges {
        let through_root = e.path.strip_prefix("crate::").and_then(|r| r.split("::").next());
        if e.from.is_empty()
            || e.to.is_empty()
            || through_root.is_none_or(|first| layers.layer(first).is_some())
            || reported_problem(&out, e)
            || !flat.insert((&e.file, e.line, &e.path))
        {
            continue;
        }
        out.push(Problem::Upward {
            edge: e.clone(),
            why: format!(
                "goes through the crate root's re-export; write the layer path (`crate::{}::…`)",
                e.to.join("::")
            ),
        });
    }
    out
}

/// Whether `out` already holds a problem for `e`'s arrow.
fn reported_problem(out: &[Problem], e: &Edge) -> bool {
    out.iter().any(|p| matches!(p, Problem::Upward { edge, .. } if edge.from == e.from && edge.to == e.to))
}

/// Checks the given crates, reading files through `read`.
pub fn check(crates: &[CrateSpec], read: &dyn Fn(&Path) -> Option<String>) -> Report {
    let mut report = Report { crates: crates.len(), ..Report::default() };
    for spec in crates {
        let modules = load(spec, read, &mut report.problems);
        let edges = edges(&modules);
        report.modules += modules.len();
        report.edges += edges.len();
        if let Some(layers) = &spec.layers {
            report.problems.extend(upward(layers, &modules, &edges));
        }
        report.problems.extend(cycles(&spec.name, &edges));
    }
    report
}

/// The workspace's crates (members of the root `Cargo.toml`; each `src/lib.rs` and `src/main.rs`).
pub fn workspace(root: &Path) -> Result<Vec<CrateSpec>, String> {
    let manifest =
        std::fs::read_to_string(root.join("Cargo.toml")).map_err(|e| format!("Cargo.toml: {e}"))?;
    let members = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("members = ["))
        .ok_or("Cargo.toml: no `members = [...]` line")?;
    let mut out = Vec::new();
    for member in members.trim_end_matches(']').split(',').map(|m| m.trim().trim_matches('"')) {
        if member.is_empty() {
            continue;
        }
        for file in ["src/lib.rs", "src/main.rs"] {
            let path = Path::new(member).join(file);
            if root.join(&path).is_file() {
                out.push(CrateSpec {
                    name: format!("{member}/{file}"),
                    root: path,
                    layers: (member == "scheduler-core" && file == "src/lib.rs").then(|| Layers::of(CORE)),
                });
            }
        }
    }
    Ok(out)
}

/// Runs the check on the workspace at `root`: the report, with paths relative to `root`.
pub fn check_workspace(root: &Path) -> Result<Report, String> {
    let crates = workspace(root)?;
    Ok(check(&crates, &|p| std::fs::read_to_string(root.join(p)).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
        let files: BTreeMap<PathBuf, String> =
            files.iter().map(|(p, t)| (PathBuf::from(p), t.to_string())).collect();
        move |p| files.get(p).cloned()
    }

    fn run(files: &[(&str, &str)], layers: Option<&Table>) -> Vec<String> {
        let spec =
            CrateSpec { name: "demo".into(), root: "src/lib.rs".into(), layers: layers.map(Layers::of) };
        check(&[spec], &tree(files)).problems.iter().map(ToString::to_string).collect()
    }

    const TABLE: &Table = &[("low", &[&["a"], &["b"]]), ("high", &[&["c"]])];
    const LIB: &str = "pub mod low; pub mod high; pub use low::a; pub use high::c as top;";
    const LOW: &str = "pub mod a; pub mod b;";
    const HIGH: &str = "pub mod c;";

    #[test]
    fn downward_imports_pass() {
        let problems = run(
            &[
                ("src/lib.rs", LIB),
                ("src/low/mod.rs", LOW),
                ("src/low/a.rs", "pub const X: u8 = 1;"),
                ("src/low/b.rs", "use crate::low::a::X;\npub fn f() -> u8 { super::a::X }"),
                ("src/high/mod.rs", HIGH),
                ("src/high/c.rs", "use crate::low::b;\npub fn g() -> u8 { b::f() + crate::low::a::X }"),
            ],
            Some(TABLE),
        );
        assert_eq!(problems, Vec::<String>::new());
    }

    #[test]
    fn an_upward_import_names_file_line_and_arrow() {
        let problems = run(
            &[
                ("src/lib.rs", LIB),
                ("src/low/mod.rs", LOW),
                ("src/low/a.rs", "pub const X: u8 = 1;"),
                // Through the root's re-export `top`, on line 2, inside a macro call.
                ("src/low/b.rs", "pub fn f() -> u8 {\n    std::convert::identity(crate::top::Y)\n}"),
                ("src/high/mod.rs", HIGH),
                ("src/high/c.rs", "pub const Y: u8 = 2;"),
            ],
            Some(TABLE),
        );
        assert_eq!(
            problems,
            vec![
                "src/low/b.rs:2: low::b → high::c (`crate::top::Y`): the low layer may not use the high layer above it"
            ]
        );
    }

    #[test]
    fn within_a_layer_the_ranks_hold() {
        let problems = run(
            &[
                ("src/lib.rs", LIB),
                ("src/low/mod.rs", LOW),
                ("src/low/a.rs", "use super::b::Z;\npub const X: u8 = Z;"),
                ("src/low/b.rs", "pub const Z: u8 = 1;"),
                ("src/high/mod.rs", HIGH),
                ("src/high/c.rs", ""),
            ],
            Some(TABLE),
        );
        assert_eq!(
            problems,
            vec![
                "src/low/a.rs:1: low::a → low::b (`super::b::Z`): within low/ a module uses only modules of lower rank: a < b"
            ]
        );
    }

    #[test]
    fn a_circle_is_reported_with_both_arrows() {
        let problems = run(
            &[
                ("src/lib.rs", "mod lease;\nmod run;\nmod clock { pub fn now() {} }"),
                ("src/lease.rs", "use crate::clock::now;\n\npub fn go() { crate::run::wall_clock(); now() }"),
                ("src/run.rs", "use crate::lease::go;\npub fn wall_clock() {}\nfn tick() { go() }"),
            ],
            None,
        );
        assert_eq!(
            problems,
            vec![
                "import circle in demo: lease ⇄ run\n    src/lease.rs:3: lease → run (`crate::run::wall_clock`)\n    src/run.rs:1: run → lease (`crate::lease::go`)"
            ]
        );
    }

    #[test]
    fn a_circle_deep_inside_two_modules_counts_for_them() {
        let problems = run(
            &[
                ("src/lib.rs", "mod x;\nmod y;"),
                ("src/x.rs", "mod inner { fn f() { crate::y::g() } }\npub fn h() {}"),
                ("src/y/mod.rs", "mod deep;\npub fn g() {}"),
                ("src/y/deep.rs", "use crate::x::h;"),
            ],
            None,
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("import circle in demo: x ⇄ y"), "{}", problems[0]);
        assert!(problems[0].contains("src/x.rs:1: x::inner → y"), "{}", problems[0]);
        assert!(problems[0].contains("src/y/deep.rs:1: y::deep → x"), "{}", problems[0]);
    }

    #[test]
    fn parents_and_children_are_nesting_not_circles() {
        let problems = run(
            &[
                ("src/lib.rs", "mod d;"),
                ("src/d/mod.rs", "mod k;\npub struct Claim;\npub fn all() { k::read() }"),
                (
                    "src/d/k.rs",
                    "use super::Claim;\npub fn read() {}\n#[cfg(test)]\nmod tests { use super::*; }",
                ),
            ],
            None,
        );
        assert_eq!(problems, Vec::<String>::new());
    }

    #[test]
    fn items_left_at_the_root_and_stale_table_entries_are_reported() {
        let problems = run(
            &[
                ("src/lib.rs", "pub mod low; pub mod high; pub const GROUP: &str = \"g\";"),
                ("src/low/mod.rs", "pub mod a;"),
                ("src/low/a.rs", "pub fn f() -> &'static str { crate::GROUP }"),
                ("src/high/mod.rs", HIGH),
                ("src/high/c.rs", ""),
            ],
            Some(TABLE),
        );
        assert_eq!(
            problems,
            vec![
                "the layer table names low::b, which does not exist: update xtask's CORE",
                "src/low/a.rs:1: low::a → the crate root (`crate::GROUP`): uses an item defined at the crate root; define it in a layer (the root only re-exports)",
            ]
        );
    }

    #[test]
    fn a_path_through_the_roots_re_exports_is_a_problem() {
        let problems = run(
            &[
                ("src/lib.rs", LIB),
                ("src/low/mod.rs", LOW),
                ("src/low/a.rs", "pub const X: u8 = 1;"),
                ("src/low/b.rs", "use crate::low::a::X; pub fn f() -> u8 { X }"),
                ("src/high/mod.rs", HIGH),
                ("src/high/c.rs", "pub fn g() -> u8 { crate::a::X }"),
            ],
            Some(TABLE),
        );
        assert_eq!(
            problems,
            vec![
                "src/high/c.rs:1: high::c → low::a (`crate::a::X`): goes through the crate root's re-export; write the layer path (`crate::low::a::…`)"
            ]
        );
    }

    #[test]
    fn unreadable_modules_are_problems_not_panics() {
        let problems = run(&[("src/lib.rs", "mod gone;\nfn broken( {")], None);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with("src/lib.rs: cannot read: line"), "{}", problems[0]);
        let problems = run(&[("src/lib.rs", "mod gone;")], None);
        assert_eq!(problems, vec!["src/lib.rs: cannot read: line 1: no file for `mod gone;`"]);
    }

    #[test]
    fn the_workspace_has_no_upward_import_and_no_circle() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let report = check_workspace(&root).unwrap();
        assert!(report.crates >= 6 && report.modules > 50 && report.edges > 100, "{report:?}");
        let text: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
        assert!(text.is_empty(), "\n{}", text.join("\n"));
    }
}
