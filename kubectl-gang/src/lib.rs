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
/// here, its content checked by the core's `Config::from_policy`, as `gang-scheduler` does.
pub fn policy(path: Option<&Path>) -> anyhow::Result<scheduler_core::Config> {
    let Some(p) = path else { return Ok(scheduler_core::Config::default()) };
    let text = std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
    let doc: Value = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_norway::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: invalid scheduling policy: {e}", p.display()))?
    };
    scheduler_core::Config::from_policy(doc).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
}

/// Reads the world the global flags point at; with `events_for` (a gang, `name` or `ns/name`), also
/// the live events of that gang's namespace (a dump brings its own).
pub fn load(g: &Global, events_for: Option<&str>) -> anyhow::Result<World> {
    let now = now(g)?;
    let (objects, context_ns) = match &g.cluster {
        Some(path) => (read_dump(path)?, None),
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
