//! Shell completion: scripts for `kubectl-gang` itself, and the `__complete` protocol kubectl uses
//! for plugins (it runs `kubectl_complete-gang ARGS… CURRENT`, which calls `kubectl-gang __complete`):
//! candidates one per line, then `:<directive>` (4: no file completion; 0: default, files).

use clap::CommandFactory;

use crate::cli::{Cli, Global, Shell};
use crate::output::Output;
use crate::world::load;

/// The completion script for `shell`.
pub fn script(shell: Shell) -> String {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(shell, &mut cmd, "kubectl-gang", &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

const NO_FILES: &str = ":4";
const FILES: &str = ":0";

/// Candidates for the last of `words` (the word being typed; may be empty).
pub fn candidates(global: &Global, words: &[String]) -> anyhow::Result<Output> {
    let cmd = Cli::command();
    let (current, before) = match words.split_last() {
        Some((c, b)) => (c.as_str(), b),
        None => ("", &[][..]),
    };
    let sub = before.iter().find(|w| !w.starts_with('-') && cmd.find_subcommand(w.as_str()).is_some());
    let previous = before.last().map(String::as_str);
    let mut out: Vec<String> = Vec::new();
    let mut directive = NO_FILES;
    match previous {
        Some("-o" | "--output") => {
            out.extend(["table", "wide", "json", "yaml", "name"].map(String::from));
        }
        Some("-f" | "--filename" | "--kubeconfig" | "--cluster" | "--config") => directive = FILES,
        Some("-n" | "--namespace") => {
            let g = scoped(global, before);
            if let Ok(world) = load(&g, None) {
                let mut ns: Vec<String> = world
                    .cluster
                    .snapshot()
                    .snapshot
                    .pods
                    .iter()
                    .map(|p| p.key.namespace.to_string())
                    .collect();
                ns.sort();
                ns.dedup();
                out.extend(ns);
            }
        }
        _ if current.starts_with('-') => {
            let target = sub.and_then(|s| cmd.find_subcommand(s)).unwrap_or(&cmd);
            for a in target.get_arguments().chain(cmd.get_arguments()) {
                if let Some(l) = a.get_long() {
                    out.push(format!("--{l}"));
                }
            }
            out.sort();
            out.dedup();
        }
        _ => match sub.map(String::as_str) {
            None => {
                out.extend(
                    cmd.get_subcommands().filter(|s| !s.is_hide_set()).map(|s| s.get_name().to_string()),
                );
            }
            Some("status") => {
                let g = scoped(global, before);
                if let Ok(world) = load(&g, None) {
                    let snap = world.cluster.snapshot().snapshot;
                    out.extend(
                        snap.gangs
                            .iter()
                            .filter(|x| x.key.namespace == world.namespace)
                            .map(|x| x.key.name.to_string()),
                    );
                }
            }
            Some("completion") => out.extend(["bash", "zsh", "fish"].map(String::from)),
            Some("simulate" | "validate") => directive = FILES,
            Some(_) => {}
        },
    }
    out.retain(|c| c.starts_with(current));
    let mut stdout = out.join("\n");
    if !stdout.is_empty() {
        stdout.push('\n');
    }
    stdout.push_str(directive);
    stdout.push('\n');
    Ok(Output { stdout, ..Output::default() })
}

/// The global flags typed so far on the line being completed.
fn scoped(global: &Global, words: &[String]) -> Global {
    let mut g = global.clone();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        let (flag, inline) = match w.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (w.as_str(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next().cloned());
        match flag {
            "-n" | "--namespace" => g.namespace = value(),
            "--context" => g.context = value(),
            "--kubeconfig" => g.kubeconfig = value().map(Into::into),
            "--cluster" => g.cluster = value().map(Into::into),
            _ => {}
        }
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(words: &[&str]) -> String {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        candidates(&Global::default(), &words).unwrap().stdout
    }

    #[test]
    fn subcommands_flags_and_formats() {
        assert_eq!(complete(&["s"]), "status\nsimulate\nsnapshot\n:4\n");
        assert_eq!(complete(&["status", "-o", "y"]), "yaml\n:4\n");
        assert!(complete(&["status", "--no"]).contains("--no-headers\n"));
        assert_eq!(complete(&["simulate", "-f", ""]), ":0\n");
        assert!(!complete(&[""]).contains("__complete"), "hidden commands are not offered");
    }

    #[test]
    fn scripts_name_the_binary() {
        assert!(script(Shell::Bash).contains("kubectl-gang"));
        assert!(script(Shell::Fish).contains("complete -c kubectl-gang"));
    }
}
