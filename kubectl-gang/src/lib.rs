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

use std::path::Path;

use anyhow::Context;
use scheduler_core::Time;
use scheduler_core::cluster::Cluster;
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
    pub cluster: Cluster,
    /// `-n`, else the kubeconfig context's namespace, else `default`.
    pub namespace: String,
    pub now: Time,
    /// Objects of other kinds read from the dump or the API (events), for detail views.
    pub events: Vec<Value>,
    /// Warnings met while reading (objects that could not be stored).
    pub warnings: Vec<String>,
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
    let (objects, context_ns) = match &g.cluster {
        Some(path) => {
            let objects = read_dump(path)?;
            check_dump(path, &objects)?;
            (objects, None)
        }
        None => {
            let rt = runtime()?;
            rt.block_on(async {
                let live = live::connect(g.kubeconfig.as_deref(), g.context.as_deref()).await?;
                let mut objects = live::fetch(&live).await?;
                if let Some(gang) = events_for {
                    let ns = match gang.split_once('/') {
                        Some((ns, _)) => ns,
                        None => g.namespace.as_deref().unwrap_or(&live.namespace),
                    };
                    objects.extend(live::events(&live, ns).await?);
                }
                anyhow::Ok((objects, Some(live.namespace)))
            })?
        }
    };
    let namespace = g.namespace.clone().or(context_ns).unwrap_or_else(|| "default".to_string());
    let mut cluster = Cluster::new();
    let mut events = Vec::new();
    let mut warnings = Vec::new();
    for o in objects {
        if is_event(&o) {
            events.push(o);
            continue;
        }
        let what = scheduler_core::cluster::describe(&o);
        if let Err(e) = cluster.push(o) {
            warnings.push(format!("skipped {what}: {e}"));
        }
    }
    Ok(World { cluster, namespace, now, events, warnings })
}

/// Unreadable nodes and pods listed at most this many at a time.
const UNREADABLE_SHOWN: usize = 20;

/// A dump is input: a Node or Pod in it the scheduler cannot read (an invalid quantity, a field of
/// the wrong type) is an error naming the object and the field, not an object quietly dropped.
/// (The live API never serves one: the API server validates and canonicalizes on write.)
fn check_dump(path: &Path, objects: &[Value]) -> anyhow::Result<()> {
    let bad: Vec<String> = objects
        .iter()
        .filter_map(|o| {
            simulate::unreadable(o).map(|e| format!("{}: {e}", scheduler_core::cluster::describe(o)))
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    let mut text = format!("{}: the cluster dump is invalid:", path.display());
    for line in bad.iter().take(UNREADABLE_SHOWN) {
        text.push_str("\n  ");
        text.push_str(line);
    }
    if bad.len() > UNREADABLE_SHOWN {
        text.push_str(&format!("\n  … and {} more", bad.len() - UNREADABLE_SHOWN));
    }
    anyhow::bail!(text)
}

fn is_event(o: &Value) -> bool {
    o.get("kind").and_then(Value::as_str) == Some("Event")
}

fn read_dump(path: &Path) -> anyhow::Result<Vec<Value>> {
    let objects = input::read_file(path)?;
    Ok(objects.into_iter().map(|s| s.object).collect())
}

/// A current-thread runtime for the live API.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")
}

/// `kubectl gang snapshot`: every object the plugin reads, as one `v1 List`.
fn snapshot(g: &Global) -> anyhow::Result<Output> {
    let mut objects = match &g.cluster {
        Some(path) => read_dump(path)?,
        None => runtime()?.block_on(async {
            let live = live::connect(g.kubeconfig.as_deref(), g.context.as_deref()).await?;
            live::fetch(&live).await
        })?,
    };
    for o in &mut objects {
        if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
    }
    let count = objects.len();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": objects});
    let stdout = match g.output {
        Some(Format::Json) => serde_json::to_string_pretty(&list)? + "\n",
        _ => serde_norway::to_string(&list)?,
    };
    Ok(Output { stdout, stderr: format!("{count} objects\n"), code: 0 })
}

/// Text safe for a terminal: control characters that names, messages or files could carry (escape
/// sequences that move the cursor, retitle the window or hide text; carriage returns; bells) are
/// written out as `\x1b`, `\r`, `\u{85}`. Newlines and tabs stay, and so do the colour codes this
/// plugin writes itself (`ESC [ digits ; … m`), which only colour text.
pub fn escape_controls(text: &str) -> String {
    if !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\n' || c == '\t' || !c.is_control() {
            out.push(c);
            continue;
        }
        if c == '\x1b' && is_color_code(&text[i..]) {
            let end = text[i..].find('m').map_or(text.len(), |e| i + e);
            out.push_str(&text[i..=end]);
            while chars.peek().is_some_and(|&(j, _)| j <= end) {
                chars.next();
            }
            continue;
        }
        match c {
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    out
}

/// `ESC [`, then only digits and `;`, then `m`: a colour (SGR) sequence and nothing else.
fn is_color_code(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("\x1b[") else { return false };
    match rest.find(|c: char| !(c.is_ascii_digit() || c == ';')) {
        Some(end) => rest[end..].starts_with('m') && end <= 32,
        None => false,
    }
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
    fn control_characters_are_escaped_but_colours_kept() {
        assert_eq!(escape_controls("plain\tline\n"), "plain\tline\n");
        assert_eq!(escape_controls("evil\x1b]0;pwned\x07name"), "evil\\x1b]0;pwned\\x07name");
        assert_eq!(escape_controls("a\x1b[2Jb\rc"), "a\\x1b[2Jb\\rc");
        assert_eq!(escape_controls("\x1b[1;32mok\x1b[0m"), "\x1b[1;32mok\x1b[0m");
        assert_eq!(escape_controls("c1\u{9b}31m"), "c1\\x9b31m");
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
