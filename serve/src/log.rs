//! Log set-up for both servers: `--log-format` (`json`, one object per line, or `plain`) and the
//! level from `RUST_LOG` (`info` when unset or unreadable). Libraries emit with `tracing`; the
//! binaries subscribe here, once.

/// How logs are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (what log collectors read).
    Json,
    /// Human-readable lines.
    Plain,
}

/// The log flags every server takes (flattened into its `Args`).
#[derive(Clone, Debug, clap::Args)]
pub struct LogArgs {
    /// Log format; the level comes from RUST_LOG (default: info).
    #[arg(long, value_enum, default_value_t = LogFormat::Json, env = "GANG_LOG_FORMAT")]
    pub log_format: LogFormat,
}

/// Installs the process's log subscriber, writing to stderr. A second call (a test starting a
/// second server in one process) keeps the first subscriber and returns false.
pub fn init(format: LogFormat) -> bool {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().try_init().is_ok(),
        LogFormat::Plain => builder.try_init().is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Args {
        #[command(flatten)]
        log: LogArgs,
    }

    #[test]
    fn json_by_default_plain_on_request_and_a_second_init_is_harmless() {
        assert_eq!(Args::parse_from(["x"]).log.log_format, LogFormat::Json);
        assert_eq!(Args::parse_from(["x", "--log-format", "plain"]).log.log_format, LogFormat::Plain);
        assert!(Args::try_parse_from(["x", "--log-format", "xml"]).is_err());
        init(LogFormat::Plain);
        assert!(!init(LogFormat::Json), "the first subscriber stays");
    }
}
