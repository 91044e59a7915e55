//! `kubectl gang`: what waits and why, would it fit, is it valid — against a live cluster or a dump.
//!
//! Every command builds its answer as text and returns it with an exit code ([`Output`]); `main`
//! writes it, so piping into `head` is never an error and tests can call [`run`] directly.

pub mod cli;
pub mod complete;
pub mod demo;
pub mod input;
pub mod live;
pub mod selector;
pub mod simulate;
pub mod status;
pub mod table;
pub mod validate;
pub mod yaml;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use scheduler_core::Time;
use scheduler_core::cluster::{Cluster, Compact};
use scheduler_core::object::ObjectRef;
use serde_json::Value;

pub use cli::{Cli, Command, Format, Global};

/// What a command prints and how it exits.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub code: u8,
}

impl Output {
    fn ok(stdout: String) -> Self {
        Output { stdout, ..Output::default() }
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<Output> {
    let g = &cli.global;
    match cli.command {
        Command::Status(args) => status::run(g, &args),
        Command::Simulate(args) => simulate::run(g, &args),
        Command::Validate(args) => validate::run(g, &args),
        Command::Snapshot => snapshot(g),
        Command::Completion { shell } => Ok(Output::ok(complete::script(shell))),
        Command::Complete { words } => complete::candidates(g, &words),
        Command::Demo => Ok(Output::ok(demo::run(&demo::Options { color: table::color_enabled() })?)),
    }
}

/// The cluster a command reads, from a dump (`--cluster`) or the live API, and the namespace
/// commands default to.
#[derive(Debug)]
pub struct World {
    /// Held as compact JSON: a decoded object of small maps costs ten to fifty times its text.
    pub cluster: Cluster<Compact>,
    /// `-n`, else the kubeconfig context's namespace, else `default`.
    pub namespace: String,
    pub now: Time,
    /// Events read from the dump or the API, for detail views.
    pub events: Vec<Compact>,
    /// ProvisioningRequests read from the dump or the API (a gang's capacity request).
    pub requests: Vec<Value>,
    /// Warnings met while reading (objects that could not be stored), the first
    /// [`UNREADABLE_SHOWN`] of them and a count of the rest.
    pub warnings: Vec<String>,
    /// Objects of kinds nothing here reads (a dump of a whole namespace's `Service`s,
    /// `ConfigMap`s, …), counted by kind: left out, and said so in one warning.
    pub unread: BTreeMap<String, usize>,
}

/// `skipped 5 objects nothing here reads: 3 ConfigMap, 2 Service`, or nothing when none were.
fn unread_line(unread: &BTreeMap<String, usize>) -> Option<String> {
    let total: usize = unread.values().sum();
    if total == 0 {
        return None;
    }
    let mut kinds: Vec<(&String, &usize)> = unread.iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let each: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    Some(format!("skipped {total} object(s) nothing here reads: {}", each.join(", ")))
}

/// `--now`, or the clock.
pub fn now(g: &Global) -> anyhow::Result<Time> {
    match &g.now {
        Some(s) => Time::parse_rfc3339(s).map_err(|e| anyhow::anyhow!("--now: {e}")),
        None => Ok(Time(jiff::Timestamp::now().as_millisecond())),
    }
}

/// The scheduling policy at `path` (the scheduler's `--config` file; defaults when `None`): read
/// here, its text read by the core's `Config::from_policy_text`, as `gang-scheduler` does.
pub fn policy(path: Option<&Path>) -> anyhow::Result<scheduler_core::Config> {
    let Some(p) = path else { return Ok(scheduler_core::Config::default()) };
    let text = std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
    scheduler_core::Config::from_policy_text(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
}

/// Reads the world the global flags point at; with `events_for` (a gang, `name` or `ns/name`), also
/// the live events of that gang's namespace (a dump brings its own).
pub fn load(g: &Global, events_for: Option<&str>) -> anyhow::Result<World> {
    let now = now(g)?;
    let mut world = World {
        cluster: Cluster::compact(),
        namespace: String::new(),
        now,
        events: Vec::new(),
        requests: Vec::new(),
        warnings: Vec::new(),
        unread: BTreeMap::new(),
    };
    let mut skipped = 0;
    let context_ns = match &g.cluster {
        Some(path) => {
            // Decoded and stored one object at a time: memory stays proportional to the dump.
            let objects = input::read(std::slice::from_ref(path))?;
            // The first unreadable objects, and how many there are.
            let (mut bad, mut unreadable) = (Vec::new(), 0);
            for s in objects.iter() {
                if let Some(e) = simulate::unreadable(&s.object) {
                    unreadable += 1;
                    if bad.len() < UNREADABLE_SHOWN {
                        bad.push(format!("{}: {e}", scheduler_core::cluster::describe(&s.object)));
                    }
                } else if unreadable == 0 {
                    world.add(s.object, &mut skipped);
                }
            }
            check_dump(path, &bad, unreadable)?;
            None
        }
        None => {
            let rt = runtime()?;
            let (objects, ns) = rt.block_on(async {
                let live = live::connect(g.kubeconfig.as_deref(), g.context.as_deref()).await?;
                let mut objects = live::fetch(&live).await?;
                if let Some(gang) = events_for {
                    let ns = match gang.split_once('/') {
                        Some((ns, _)) => ns,
                        None => g.namespace.as_deref().unwrap_or(&live.namespace),
                    };
                    objects.extend(live::events(&live, ns).await?);
                }
                anyhow::Ok((objects, live.namespace))
            })?;
            for o in objects {
                world.add(o.decode(), &mut skipped);
            }
            Some(ns)
        }
    };
    if skipped > UNREADABLE_SHOWN {
        world.warnings.push(format!("… and {} more objects skipped", skipped - UNREADABLE_SHOWN));
    }
    if let Some(line) = unread_line(&world.unread) {
        world.warnings.push(line);
    }
    world.namespace = g.namespace.clone().or(context_ns).unwrap_or_else(|| "default".to_string());
    Ok(world)
}

impl World {
    /// Stores one object read from the dump or the API: an event or a ProvisioningRequest aside,
    /// anything else in the cluster, or a warning saying why not (the first [`UNREADABLE_SHOWN`]
    /// of them; `skipped` counts them all).
    fn add(&mut self, mut o: Value, skipped: &mut usize) {
        // What `kubectl get -o yaml` prints in bulk and nothing here reads.
        if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        match o.get("kind").and_then(Value::as_str) {
            Some("Event") => {
                self.events.push(Compact::new(&o));
                return;
            }
            Some("ProvisioningRequest") => {
                self.requests.push(o);
                return;
            }
            _ => {}
        }
        let what = scheduler_core::cluster::describe(&o);
        let identity = ObjectRef::of(&o);
        let listed = o.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"));
        if !listed && !identity.kind.is_empty() && !scheduler_core::cluster::reads(&identity) {
            *self.unread.entry(identity.kind.into_owned()).or_default() += 1;
            return;
        }
        if let Err(e) = self.cluster.push(o) {
            *skipped += 1;
            if *skipped <= UNREADABLE_SHOWN {
                self.warnings.push(format!("skipped {what}: {e}"));
            }
        }
    }
}

/// Unreadable nodes and pods listed at most this many at a time.
const UNREADABLE_SHOWN: usize = 20;

/// A dump is input: a Node or Pod in it the scheduler cannot read (an invalid quantity, a field of
/// the wrong type) is an error naming the object and the field (`bad`), not an object quietly
/// dropped. (The live API never serves one: the API server validates and canonicalizes on write.)
fn check_dump(path: &Path, bad: &[String], count: usize) -> anyhow::Result<()> {
    if bad.is_empty() {
        return Ok(());
    }
    let mut text = format!("{}: the cluster dump is invalid:", path.display());
    for line in bad {
        text.push_str("\n  ");
        text.push_str(line);
    }
    if count > bad.len() {
        text.push_str(&format!("\n  … and {} more", count - bad.len()));
    }
    anyhow::bail!(text)
}

/// A current-thread runtime for the live API.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")
}

/// `kubectl gang snapshot`: every object the plugin reads, as one `v1 List`.
fn snapshot(g: &Global) -> anyhow::Result<Output> {
    let format = g.output;
    let (stdout, count) = match &g.cluster {
        Some(path) => list_text(input::read(std::slice::from_ref(path))?.iter().map(|s| s.object), format)?,
        None => {
            let objects = runtime()?.block_on(async {
                let live = live::connect(g.kubeconfig.as_deref(), g.context.as_deref()).await?;
                live::fetch(&live).await
            })?;
            list_text(objects.iter().map(Compact::decode), format)?
        }
    };
    Ok(Output { stdout, stderr: format!("{count} objects\n"), code: 0 })
}

/// `objects` (managed fields dropped) as one `v1 List` in JSON (`-o json`) or YAML, written item by
/// item: the same text as serializing the whole list at once, without holding it as one value.
fn list_text(
    objects: impl Iterator<Item = Value>,
    format: Option<Format>,
) -> anyhow::Result<(String, usize)> {
    let json = format == Some(Format::Json);
    let mut out = String::from(if json {
        "{\n  \"apiVersion\": \"v1\",\n  \"items\": ["
    } else {
        "apiVersion: v1\nitems:"
    });
    let mut count = 0;
    for mut o in objects {
        if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        if json {
            out.push_str(if count == 0 { "\n" } else { ",\n" });
            for (i, line) in serde_json::to_string_pretty(&o)?.lines().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                out.push_str("    ");
                out.push_str(line);
            }
        } else {
            if count == 0 {
                out.push('\n');
            }
            for (i, line) in serde_norway::to_string(&o)?.lines().enumerate() {
                out.push_str(match (i, line.is_empty()) {
                    (0, _) => "- ",
                    (_, false) => "  ",
                    (_, true) => "",
                });
                out.push_str(line);
                out.push('\n');
            }
        }
        count += 1;
    }
    out.push_str(match (json, count) {
        (true, 0) => "],\n  \"kind\": \"List\",\n  \"metadata\": {}\n}\n",
        (true, _) => "\n  ],\n  \"kind\": \"List\",\n  \"metadata\": {}\n}\n",
        (false, 0) => " []\nkind: List\nmetadata: {}\n",
        (false, _) => "kind: List\nmetadata: {}\n",
    });
    Ok((out, count))
}

/// The colour codes this plugin writes itself (for [`table::Tone`]: the 256-colour codes comfy-table writes for them): green,
/// yellow, red, and back to the default colour. Only these, and only when colour is on, are
/// written as they are; every other control sequence is shown escaped.
pub const COLOURS: [&str; 4] = ["\x1b[38;5;10m", "\x1b[38;5;11m", "\x1b[38;5;9m", "\x1b[39m"];

/// Whether this command line may colour its output (on a terminal, without `NO_COLOR`): only
/// tables do (`status`, `simulate`, `demo` as tables), and they escape the data they show before
/// adding colour. Any other output (JSON, YAML, names, `validate`, errors) has no colour of its own,
/// so every control sequence in it is escaped.
pub fn may_colour(cli: &Cli) -> bool {
    let tables = matches!(cli.global.output, None | Some(Format::Table | Format::Wide));
    tables && matches!(cli.command, Command::Status(_) | Command::Simulate(_) | Command::Demo)
}

/// Text safe for a terminal: every control character that names, messages or files could carry
/// (escape sequences that colour, hide or move text, retitle the window; carriage returns; bells;
/// C1 codes) is written out as `\x1b`, `\r`, `\x9b`. Newlines and tabs stay.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = Vec::with_capacity(text.len() + 16);
    // Writing into a `Vec` cannot fail.
    let _ = write_escaped(&mut out, text, false);
    std::borrow::Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

fn needs_escape(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// Writes `text` to `w` with control characters escaped as [`escape_controls`] does, keeping the
/// plugin's own [`COLOURS`] when `colours`; clean stretches are written as they are, never copied.
pub fn write_escaped(w: &mut impl std::io::Write, text: &str, colours: bool) -> std::io::Result<()> {
    let mut rest = text;
    while let Some(at) = rest.find(needs_escape) {
        w.write_all(&rest.as_bytes()[..at])?;
        rest = &rest[at..];
        if colours && let Some(code) = COLOURS.iter().find(|c| rest.starts_with(**c)) {
            w.write_all(code.as_bytes())?;
            rest = &rest[code.len()..];
            continue;
        }
        let Some(c) = rest.chars().next() else { break };
        match c {
            '\r' => w.write_all(b"\\r")?,
            c if (c as u32) < 0x100 => write!(w, "\\x{:02x}", c as u32)?,
            c => write!(w, "\\u{{{:x}}}", c as u32)?,
        }
        rest = &rest[c.len_utf8()..];
    }
    w.write_all(rest.as_bytes())
}

/// An error as one line of text: each cause in the chain once (a library's message often repeats
/// its source's, as `io` and `kube` errors do), control characters escaped.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if part.is_empty() || text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    escape_controls(&text).into_owned()
}

/// kubectl's short ages: `45s`, `3m12s`, `17m`, `5h3m`, `20h`, `3d4h`, `12d`, `2y40d`.
pub fn age(now: Time, then: Time) -> String {
    if then.0 <= 0 {
        return "<unknown>".into();
    }
    let s = now.since(then).as_secs();
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s.is_multiple_of(60) { format!("{m}m") } else { format!("{m}m{}s", s % 60) }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m.is_multiple_of(60) { format!("{h}h") } else { format!("{h}h{}m", m % 60) }
    } else if h < 48 {
        format!("{h}h")
    } else if d < 8 {
        if h.is_multiple_of(24) { format!("{d}d") } else { format!("{d}d{}h", h % 24) }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else {
        format!("{}y{}d", d / 365, d % 365)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_colours_included() {
        assert_eq!(escape_controls("plain\tline\n"), "plain\tline\n");
        assert_eq!(escape_controls("evil\x1b]0;pwned\x07name"), "evil\\x1b]0;pwned\\x07name");
        assert_eq!(escape_controls("a\x1b[2Jb\rc"), "a\\x1b[2Jb\\rc");
        // A colour in data is data: hidden text (8) and colours alike are shown, not obeyed.
        assert_eq!(escape_controls("hid\x1b[8mden"), "hid\\x1b[8mden");
        assert_eq!(escape_controls("\x1b[38;5;9mred\x1b[39m"), "\\x1b[38;5;9mred\\x1b[39m");
        assert_eq!(escape_controls("c1\u{9b}31m"), "c1\\x9b31m");
        assert_eq!(escape_controls("del\u{7f}"), "del\\x7f");
    }

    #[test]
    fn only_the_plugins_own_colours_pass_and_only_when_colour_is_on() {
        let text = "\x1b[38;5;9mbad\x1b[39m \x1b[8mhidden\x1b[0m \x1b[31mred";
        let write = |colours| {
            let mut out = Vec::new();
            write_escaped(&mut out, text, colours).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(write(true), "\x1b[38;5;9mbad\x1b[39m \\x1b[8mhidden\\x1b[0m \\x1b[31mred");
        assert_eq!(write(false), escape_controls(text));
    }

    /// A dump of many objects that cannot be stored warns of the first ones and counts the rest.
    #[test]
    fn objects_skipped_are_warned_of_twenty_at_a_time_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.yaml");
        let mut text = String::from(
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '8'}}\n",
        );
        for i in 0..25 {
            text.push_str(&format!(
                "---\napiVersion: kube-gang.io/v1alpha1\nkind: Gang\nmetadata: {{namespace: ns{i}}}\n"
            ));
        }
        // Kinds nothing reads are counted by kind, in one line.
        text.push_str("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ml}\n");
        text.push_str("---\napiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: ml}\n");
        text.push_str("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: d, namespace: ml}\n");
        std::fs::write(&path, text).unwrap();
        let cli = <Cli as clap::Parser>::parse_from([
            "kubectl-gang",
            "status",
            "--cluster",
            path.to_str().unwrap(),
        ]);
        let world = load(&cli.global, None).unwrap();
        assert_eq!(world.warnings.len(), UNREADABLE_SHOWN + 2, "{:#?}", world.warnings);
        assert_eq!(world.warnings[0], "skipped Gang ns0/: metadata.name: missing on Gang");
        assert_eq!(world.warnings[UNREADABLE_SHOWN], "… and 5 more objects skipped");
        assert_eq!(
            world.warnings[UNREADABLE_SHOWN + 1],
            "skipped 3 object(s) nothing here reads: 2 ConfigMap, 1 Service"
        );
        assert_eq!(world.cluster.count(&scheduler_core::cluster::NODE), 1);
    }

    #[test]
    fn an_error_chain_says_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file (os error 2)");
        let e =
            anyhow::Error::new(io).context("reading x.yaml: No such file (os error 2)").context("simulate");
        assert_eq!(error_text(&e), "simulate: reading x.yaml: No such file (os error 2)");
        let e = anyhow::anyhow!("bad \x1b[31mname");
        assert_eq!(error_text(&e), "bad \\x1b[31mname");
    }

    /// `snapshot` writes its List item by item: the text must be what serializing the whole list
    /// writes, in both formats, whatever the items hold (block scalars, empty values, nesting).
    #[test]
    fn a_list_written_item_by_item_is_the_whole_lists_text() {
        let items = [
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "managedFields": [{"x": 1}]},
                "data": {"script": "line one\n  indented\n\nafter a blank\n", "empty": "", "lead": "  spaces",
                         "quoted": "yes", "num": "0644", "multi": "a\nb"}}),
            serde_json::json!({"kind": "Pod", "metadata": {"name": "p", "labels": {}}, "spec": {"containers": [], "n": [1, [2, [3]], {}]}}),
            serde_json::json!({"kind": "Node", "status": {"allocatable": {"cpu": "8"}}, "e": null, "f": 1.5}),
        ];
        for format in [None, Some(Format::Json), Some(Format::Yaml)] {
            for n in 0..=items.len() {
                let items = &items[..n];
                let (text, count) = list_text(items.iter().cloned(), format).unwrap();
                let mut whole: Vec<Value> = items.to_vec();
                for o in &mut whole {
                    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("managedFields");
                    }
                }
                let list =
                    serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": whole});
                let want = match format {
                    Some(Format::Json) => serde_json::to_string_pretty(&list).unwrap() + "\n",
                    _ => serde_norway::to_string(&list).unwrap(),
                };
                assert_eq!(text, want, "{format:?}, {n} items");
                assert_eq!(count, n);
            }
        }
    }

    #[test]
    fn ages_read_like_kubectl() {
        let now = Time::from_secs(10_000_000);
        let ago = |s: i64| age(now, Time::from_secs(10_000_000 - s));
        assert_eq!(ago(45), "45s");
        assert_eq!(ago(192), "3m12s");
        assert_eq!(ago(17 * 60 + 5), "17m");
        assert_eq!(ago(5 * 3600 + 180), "5h3m");
        assert_eq!(ago(20 * 3600), "20h");
        assert_eq!(ago(3 * 86_400 + 4 * 3600), "3d4h");
        assert_eq!(ago(12 * 86_400), "12d");
        assert_eq!(age(now, Time(0)), "<unknown>");
    }
}
