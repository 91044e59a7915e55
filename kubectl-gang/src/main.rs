//! `kubectl-gang`: the kubectl plugin. Parses the command line, runs it, writes what it produced.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use kubectl_gang::{Cli, Command, run};

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    let error_code = if matches!(cli.command, Command::Simulate(_)) { 2 } else { 1 };
    match run(cli) {
        Ok(out) => {
            // A closed pipe (`| head`) is not an error: stop quietly.
            let _ = std::io::stderr().write_all(out.stderr.as_bytes());
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(out.stdout.as_bytes()).and_then(|()| stdout.flush()) {
                Ok(()) => ExitCode::from(out.code),
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: writing output: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(error_code)
        }
    }
}
