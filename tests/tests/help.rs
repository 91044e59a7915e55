//! Every `--help` checked against the parsers: what a help text names (a flag, a policy key) is
//! what the program's parser takes. The help is clap's own rendering of each binary's `Args`, the
//! text `--help` prints.

#[path = "support/policy.rs"]
mod policy;

use std::collections::BTreeSet;

use clap::CommandFactory;

/// Every command of a binary, subcommands included, with its long help.
fn helps(mut command: clap::Command) -> Vec<(String, String, clap::Command)> {
    command.build();
    let mut out = Vec::new();
    let mut todo = vec![(command.get_name().to_string(), command)];
    while let Some((path, mut c)) = todo.pop() {
        let help = c.render_long_help().to_string();
        for sub in c.get_subcommands() {
            todo.push((format!("{path} {}", sub.get_name()), sub.clone()));
        }
        out.push((path, help, c));
    }
    out
}

/// `--name` tokens in a text.
fn flags_named(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("--") {
        let name: String = rest[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        rest = &rest[i + 2 + name.len()..];
        if !name.is_empty() && name.starts_with(|c: char| c.is_ascii_lowercase()) {
            out.insert(name);
        }
    }
    out
}

/// Every `--flag` a help text names is a flag that command (or its binary, for a flag it names
/// of the whole program) takes: a help never sends a user to a flag the parser refuses.
#[test]
fn every_flag_a_help_names_is_one_the_parser_takes() {
    for command in
        [gang_scheduler::Args::command(), gang_webhook::Args::command(), kubectl_gang::cli::Cli::command()]
    {
        let all = helps(command);
        let mut binary_flags: BTreeSet<String> = ["help", "version"].map(String::from).into();
        for (_, _, c) in &all {
            binary_flags.extend(c.get_arguments().filter_map(|a| a.get_long()).map(String::from));
        }
        for (path, help, _) in &all {
            for f in flags_named(help) {
                assert!(binary_flags.contains(&f), "`{path} --help` names --{f}, which it does not take");
            }
        }
    }
}

/// The policy keys `gang-scheduler --help` lists for `--config` are exactly the keys the file's
/// reader (`Config::from_policy_text`) accepts at its top level, `provisioning` included.
#[test]
fn the_policy_keys_the_scheduler_help_names_are_the_readers() {
    let command = gang_scheduler::Args::command();
    let config = command.get_arguments().find(|a| a.get_id() == "config").expect("--config");
    let help = config.get_long_help().or(config.get_help()).expect("--config has help").to_string();
    let listed = &help[help.find("): ").expect("the help lists the keys after \"): \"") + 3..];
    let named: BTreeSet<String> = listed
        .trim_end_matches('.')
        .split(',')
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .collect();
    let accepted: BTreeSet<String> = policy::policy_keys().into_iter().filter(|k| !k.contains('.')).collect();
    assert_eq!(named, accepted, "gang-scheduler --help, --config: {help}");
}

/// Where `kubectl gang --help` speaks of the policy file, the keys it names in backticks are keys
/// the reader accepts.
#[test]
fn the_policy_keys_the_plugin_help_names_are_the_readers() {
    let accepted = policy::policy_keys();
    for (path, _, c) in helps(kubectl_gang::cli::Cli::command()) {
        if let Some(config) = c.get_arguments().find(|a| a.get_id() == "config") {
            let help = config.get_long_help().or(config.get_help()).unwrap().to_string();
            for key in help.split('`').skip(1).step_by(2) {
                assert!(
                    accepted.contains(key),
                    "`{path} --help`, --config names `{key}`, which no policy file takes"
                );
            }
        }
    }
}
