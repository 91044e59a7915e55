//! `kubectl-gang`: the kubectl plugin. Parses the command line, runs it, writes what it produced.
//! Exit codes: 0 done, 1 the input is valid but the verdict is negative (invalid objects, does not
//! fit), 2 the command could not run on its input (unreadable, malformed, empty, bad flags).

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use kubectl_gang::{Cli, escape_controls, run};

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match run(cli) {
        Ok(out) => {
            // A closed pipe (`| head`) is not an error: stop quietly.
            let _ = std::io::stderr().write_all(escape_controls(&out.stderr).as_bytes());
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(escape_controls(&out.stdout).as_bytes()).and_then(|()| stdout.flush()) {
                Ok(()) => ExitCode::from(out.code),
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: writing output: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Err(e) => {
            eprintln!("error: {}", escape_controls(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}
