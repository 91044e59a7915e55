//! `kubectl-gang`: the kubectl plugin. Parses the command line, runs it, writes what it produced.
//! Exit codes: 0 done, 1 the input is valid but the verdict is negative (invalid objects, does not
//! fit), 2 the command could not run on its input (unreadable, malformed, empty, bad flags).

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use kubectl_gang::{Cli, error_text, may_colour, run, table, write_escaped};

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    let colours = may_colour(&cli) && table::color_enabled();
    match run(cli) {
        Ok(out) => {
            // Nothing the input or the cluster says reaches the terminal raw: every control
            // character is escaped, but for the plugin's own colours on a terminal.
            let _ = write_escaped(&mut std::io::stderr().lock(), &out.stderr, false);
            let mut stdout = std::io::stdout().lock();
            match write_escaped(&mut stdout, &out.stdout, colours).and_then(|()| stdout.flush()) {
                Ok(()) => ExitCode::from(out.code),
                // A closed pipe (`| head`) is not an error: stop quietly, with the verdict's code.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::from(out.code),
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "error: writing the output: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {}", error_text(&e));
            ExitCode::from(2)
        }
    }
}
