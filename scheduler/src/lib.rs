//! gang-scheduler: runs kube-gang's scheduling cycle against a cluster.
//!
//! The binary is a thin adapter around `scheduler-core`: the cluster is watched into a synchronous
//! [`index::Index`]; a cycle takes a snapshot of it and calls `schedule`; [`apply`] turns the plan
//! into typed writes (bindings, evictions, status changes, events) that [`run`] dispatches by
//! type — claims the plan binds first to [`volumes`] then bindings, in the loop; evictions to
//! [`evict`] (off the loop), status and events to a background reporter. Everything that decides is pure and tested without a cluster.

pub mod apply;
pub mod claims;
mod clock;
pub mod config;
pub mod evict;
pub mod index;
pub mod lease;
pub mod metrics;
pub mod provision;
pub mod ratelimit;
pub mod run;
pub mod volumes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

/// Places whole gangs: pods whose `spec.schedulerName` is `--scheduler-name` are bound all together
/// or not at all, with preemption, timeouts and stale-gang eviction. Reads every gang dialect
/// (kube-gang Gang, scheduling.k8s.io PodGroup, coscheduling, Volcano, Koordinator, KAI).
#[derive(Debug, Parser)]
#[command(name = "gang-scheduler", version, about, long_about = None)]
pub struct Args {
    /// Only pods with this spec.schedulerName are placed.
    #[arg(long, env = "GANG_SCHEDULER_NAME", default_value = scheduler_core::SCHEDULER_NAME)]
    pub scheduler_name: String,
    /// Run a cycle at least this often (cycles also run on every change, debounced).
    #[arg(long, env = "GANG_SCHEDULER_PERIOD", default_value = "1s", value_parser = parse_duration)]
    pub period: Duration,
    /// Scheduling policy file (YAML; every key in docs/reference.md): schedulerName, scoring,
    /// defaultTimeout, timeoutAction, staleGracePeriod, preemption, provisioning,
    /// podTopologySpread, topologyLevels, backfill.
    #[arg(long, env = "GANG_SCHEDULER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address of the plain-HTTP probe server: /healthz, /readyz, /metrics. /readyz is 200 once the
    /// caches are synced, on followers too (they stand by with warm caches, as kube-scheduler's
    /// replicas do); its body and the gang_leader metric say which replica leads. Served on a
    /// thread of its own, at most 64 connections (8 per client) and 2 s to send a request.
    #[arg(long, env = "GANG_SCHEDULER_PROBE_LISTEN", default_value = "0.0.0.0:8080")]
    pub probe_listen: SocketAddr,
    /// Elect a leader through a coordination.k8s.io Lease; only the leader binds.
    #[arg(long, env = "GANG_SCHEDULER_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Name of the Lease used for leader election.
    #[arg(long, env = "GANG_SCHEDULER_LEASE_NAME", default_value = "gang-scheduler")]
    pub lease_name: String,
    /// Namespace of the Lease (defaults to the pod's namespace, from POD_NAMESPACE).
    #[arg(long, env = "POD_NAMESPACE", default_value = "kube-gang-system")]
    pub lease_namespace: String,
    /// How long the Lease is valid without renewal; a new leader waits this long after the old one
    /// stops renewing.
    #[arg(long, env = "GANG_SCHEDULER_LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How often replicas try to acquire or renew the Lease (must be under a third of the lease
    /// duration: the leader stops acting when two thirds have passed without a renewal).
    #[arg(long, env = "GANG_SCHEDULER_LEADER_ELECT_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// Client-side limit on the requests the scheduler sends per second, reads and writes alike
    /// (as kube-scheduler's --kube-api-qps): lists, watches (one request however long the
    /// stream), gets, bindings, evictions, status patches and events. Leadership is checked
    /// after the wait, before a write goes out. The Lease has a budget of its own with the same
    /// rate, so a burst of bindings never delays a renewal.
    #[arg(long, env = "GANG_SCHEDULER_KUBE_API_QPS", default_value_t = 50.0)]
    pub kube_api_qps: f64,
    /// Burst of requests allowed above --kube-api-qps.
    #[arg(long, env = "GANG_SCHEDULER_KUBE_API_BURST", default_value_t = 100)]
    pub kube_api_burst: u32,
    /// Bindings in flight at once.
    #[arg(long, env = "GANG_SCHEDULER_BIND_CONCURRENCY", default_value_t = 16)]
    pub bind_concurrency: usize,
    #[command(flatten)]
    pub log: kube_gang_serve::log::LogArgs,
    /// Print the effective scheduling policy (after --config) as YAML and exit.
    #[arg(long)]
    pub print_config: bool,
}

/// A duration such as `1s`, `500ms` or `2m`; zero is refused (every duration flag is a period or
/// a lifetime).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = scheduler_core::duration::parse(s)?;
    if d.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(d)
}

/// Entry point: parse flags, load the policy, run.
pub fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> anyhow::Result<()> {
    if args.leader_elect_retry_period.saturating_mul(3) >= args.leader_elect_lease_duration {
        anyhow::bail!(
            "--leader-elect-retry-period ({:?}) must be under a third of --leader-elect-lease-duration ({:?})",
            args.leader_elect_retry_period,
            args.leader_elect_lease_duration
        );
    }
    let policy = config::load(args.config.as_deref(), &args.scheduler_name)?;
    if args.print_config {
        print!("{}", serde_norway::to_string(&policy)?);
        return Ok(());
    }
    kube_gang_serve::log::init(args.log.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve(args, policy))
}

async fn serve(args: &Args, config: scheduler_core::Config) -> anyhow::Result<()> {
    use anyhow::Context;
    // First: a signal during start-up stops it too.
    let stop = kube_gang_serve::shutdown::install()?;
    let identity = identity();
    let mut kube_config =
        kube::Config::infer().await.context("loading the Kubernetes client configuration")?;
    // Audit logs (and tests) tell replicas apart by their User-Agent.
    let agent = format!("gang-scheduler/{} ({identity})", env!("CARGO_PKG_VERSION"));
    if let Ok(value) = http::HeaderValue::from_str(&agent) {
        kube_config.headers.push((http::header::USER_AGENT, value));
    }
    let metrics = metrics::Metrics::new();
    // On a thread of its own: a long cycle on the runtime's workers never delays a probe.
    let probes = metrics::serve_probes(args.probe_listen, &metrics)?;
    let settings = run::Settings {
        config,
        period: args.period,
        leader_elect: args.leader_elect,
        lease_name: args.lease_name.clone(),
        lease_namespace: args.lease_namespace.clone(),
        identity,
        lease_duration: args.leader_elect_lease_duration,
        retry_period: args.leader_elect_retry_period,
        bind_concurrency: args.bind_concurrency,
        qps: args.kube_api_qps,
        burst: args.kube_api_burst,
        discovery_period: Duration::from_secs(30),
    };
    let ran = run::run(kube_config, settings, metrics, stop).await;
    probes.stop();
    ran
}

/// This process's Lease holder identity: `POD_NAME` (the Deployment sets it from the pod's name),
/// else the host name, then `_` and a random UUID — as kube-scheduler's `hostname_UUID`. Fresh for
/// every process: a replica restarted in the same pod (same `POD_NAME`) is not the holder its
/// predecessor was, so it waits out that Lease like any other replica instead of taking it at
/// once, while a binding its predecessor sent may still be made.
pub fn identity() -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let base = var("POD_NAME").or_else(|| var("HOSTNAME")).unwrap_or_else(|| "gang-scheduler".into());
    format!("{base}_{}", uuid::Uuid::new_v4())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_must_be_positive_and_are_named_when_not() {
        let parsed =
            Args::try_parse_from(["gang-scheduler", "--period=250ms", "--leader-elect-retry-period=1s"]);
        let args = parsed.expect("valid flags");
        assert_eq!(args.period, Duration::from_millis(250));
        for flag in ["--period=0s", "--leader-elect-retry-period=0s", "--leader-elect-lease-duration=0"] {
            let e = Args::try_parse_from(["gang-scheduler", flag]).expect_err(flag).to_string();
            let name = flag.split('=').next().unwrap_or_default();
            assert!(e.contains(name) && e.contains("more than zero"), "{flag}: {e}");
        }
    }
}
