//! Signal handling for both servers: SIGTERM (what the kubelet sends) and SIGINT (Ctrl-C) cancel a
//! [`CancellationToken`] that every part of the server watches; a second signal ends the process at
//! once, for an operator whose server does not stop in time.
//!
//! The handlers are installed before the server starts, and a handler that cannot be installed is
//! an error that stops it from starting: a server that cannot be told to stop would otherwise wait
//! for a signal it never receives, and its Pod be killed without draining at the end of its grace
//! period.

use tokio_util::sync::CancellationToken;

/// The exit code after a second signal: 128 + SIGINT, as shells report an interrupted process.
pub const FORCED_EXIT: i32 = 130;

/// Installs the handlers (inside a tokio runtime) and returns the token they cancel on the first
/// signal.
pub fn install() -> anyhow::Result<CancellationToken> {
    let token = CancellationToken::new();
    let signals = Signals::install()?;
    let cancel = token.clone();
    tokio::spawn(async move {
        let mut signals = signals;
        let first = signals.next().await;
        tracing::info!(signal = first, "shutting down");
        cancel.cancel();
        let second = signals.next().await;
        tracing::warn!(signal = second, "second signal: exiting at once");
        std::process::exit(FORCED_EXIT);
    });
    Ok(token)
}

/// The installed signal streams.
#[derive(Debug)]
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Self> {
        #[cfg(unix)]
        {
            use anyhow::Context as _;
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                term: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
                int: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Signals {})
        }
    }

    /// The next signal's name.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.term.recv() => "SIGTERM",
                _ = self.int.recv() => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}
