//! External programs the cross-process tests run as independent clients (`kubectl`).
//!
//! CI installs them (`.ci/run`), and there a missing tool fails the test. On a newcomer's machine
//! that has only a Rust toolchain, `cargo test --workspace --locked` still passes: a test that
//! needs a missing tool says so on stderr and checks nothing else.

use std::process::Command;

/// `Some(Command::new(program))` when `program` runs (`program version --client` or `--version`
/// exits at all); `None` outside CI when it is missing. Inside CI (`CI` set) a missing tool panics,
/// so a CI machine without it fails loudly instead of skipping.
pub fn required_tool(program: &str) -> Option<Command> {
    let found = Command::new(program).arg("--help").output().is_ok();
    if found {
        return Some(Command::new(program));
    }
    assert!(std::env::var_os("CI").is_none(), "{program} is not on PATH; CI must install it (.ci/run)");
    eprintln!("skipped: {program} is not on PATH (install it to run this test; CI always does)");
    None
}
