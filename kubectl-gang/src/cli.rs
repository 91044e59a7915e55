//! The command line: kubectl's flags, kubectl's words.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = "\
Every command that reads the cluster reads the live API (kubeconfig as kubectl reads it) or, with
--cluster FILE, a dump as `kubectl gang snapshot` or `kubectl get nodes,pods,gangs -A -o yaml`
writes it.

Exit codes: 0 success; 1 a negative verdict on valid input (validate: an invalid object;
simulate: a gang that does not fit); 2 the command could not run on its input (unreadable,
malformed or empty input, bad flags, no cluster, output that could not be written). Control
characters in names and messages are shown escaped (\\x1b).";

/// kubectl gang: gang scheduling — what waits and why, would it fit, is it valid.
#[derive(Debug, Parser)]
#[command(name = "kubectl gang", bin_name = "kubectl gang", version, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes, as kubectl spells them.
#[derive(Debug, Clone, Default, Args)]
pub struct Global {
    /// Path to the kubeconfig file (default: $KUBECONFIG, merged as kubectl does, else ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace (default: the context's namespace).
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Every namespace.
    #[arg(short = 'A', long, global = true, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Label selector (`k=v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`), on the gang object
    /// or, for gangs without one, on any member pod.
    #[arg(short = 'l', long, global = true, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum)]
    pub output: Option<Format>,
    /// Do not print table headers.
    #[arg(long, global = true)]
    pub no_headers: bool,
    /// Read this cluster dump instead of the live API.
    #[arg(long, global = true, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
    /// Evaluate as of this time (RFC 3339) instead of now: ages, timeouts, backoffs.
    #[arg(long, global = true, value_name = "TIME")]
    pub now: Option<String>,
}

/// `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Wide,
    Json,
    Yaml,
    Name,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Every gang in scope, whatever its dialect: members, phase, and what it waits for.
    Status(StatusArgs),
    /// Would these workloads fit now, where would each member go, and what would they preempt.
    Simulate(SimulateArgs),
    /// The webhook's decision, offline: every problem with its field path.
    ///
    /// Each object is admitted as the webhook admits a create: what it would inject (gang label,
    /// min-member, schedulerName) is added first, then the result is checked. An object the API
    /// server would refuse before any webhook (an invalid quantity) is an input error: exit 2.
    Validate(ValidateArgs),
    /// Dump every object the plugin reads (every dialect's gangs included) as one v1 List.
    Snapshot,
    /// Shell completion script for bash, zsh or fish.
    #[command(after_help = COMPLETION_HELP)]
    Completion {
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Completion candidates, one per line, then `:<directive>` (for `kubectl_complete-gang`).
    #[command(name = "__complete", hide = true)]
    Complete {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// A tour on an embedded example cluster: no cluster needed.
    ///
    /// Ends with three replays over time through the scheduler's own cycle: the example workloads
    /// on the example cluster; three gangs on an autoscaling node pool (up to 6 nodes of 8
    /// GPUs, each ready 5 min after it is asked for, removed after 10 min empty), grown one
    /// pending pod at a time (each member with no room gets a node of its own) or atomically (a
    /// gang gets nodes for all its members at once, or none, as a ProvisioningRequest of class
    /// best-effort-atomic-scale-up asks), with each gang's time to start and the pool's idle
    /// GPU-hours (the pool's model fits members by GPUs only); and a stream of small jobs with
    /// time limits and an hourly 16-node gang on 32 nodes, without holds and with backfill, the
    /// big gangs' waits, the small jobs', utilisation and the GPUs in use over time as a chart.
    Demo,
}

const COMPLETION_HELP: &str = "\
kubectl completes plugin arguments through an executable named `kubectl_complete-gang` on PATH.
Create it once:

  printf '#!/bin/sh\\nexec kubectl-gang __complete \"$@\"\\n' > ~/.local/bin/kubectl_complete-gang
  chmod +x ~/.local/bin/kubectl_complete-gang

The script printed here completes `kubectl-gang` invoked directly:

  source <(kubectl-gang completion bash)";

/// Shells for `completion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// One gang: its subgroup tree, members, conditions, events, and why it waits, from a live
    /// scheduling cycle on the current state.
    pub name: Option<String>,
    /// The scheduler's policy file (its --config): the cycle that explains each gang runs with it
    /// instead of the defaults (with `backfill` on, the table has an EXPECTED START column).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// With NAME: draw the gang on the cluster's topology levels (the order its levels belong
    /// to: the KAI or Kueue Topology that has them, or the policy file's topologyLevels; else
    /// its required and preferred ones), a row per domain, a cell per node, its members marked.
    #[arg(long, requires = "name")]
    pub map: bool,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = SIMULATE_HELP)]
pub struct SimulateArgs {
    /// Files or directories of objects as you would apply them (Jobs, JobSets, PyTorchJobs,
    /// MPIJobs, LeaderWorkerSets, StatefulSets, Pods, Gangs, any dialect's PodGroups, Grove
    /// PodCliqueSets, TrainJobs with their runtimes); `-` is stdin.
    #[arg(short = 'f', long = "filename", required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The scheduler's policy file (its --config): scoring, preemption, timeouts; with `provisioning`
    /// on, a gang that does not fit also shows the ProvisioningRequest it would ask for.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Draw each gang on the cluster's topology levels (the order its levels belong to: the KAI
    /// or Kueue Topology that has them, or the policy file's topologyLevels; else its required
    /// and preferred ones): a row per domain it touches, a cell per node, where its members
    /// would go and what they would preempt marked.
    #[arg(long)]
    pub map: bool,
}

const SIMULATE_HELP: &str = "\
Each object is admitted as the webhook admits it on create (what `validate` reports; a workload
without a kube-gang.io/enabled label counts as opted in, as in an opted-in namespace — a
Deployment or ReplicaSet only by its own label or pods that name a gang —, one with it only if it
says \"true\", as for the webhook), an object with only
generateName is named as the API server names it, and workloads are expanded into the pods their
controllers would create (at most 100,000 in all) and placed with the scheduler's own cycle on the
cluster as it is (pending gangs that are older go first, as they would).

Exit codes: 0 every gang fits; 1 at least one does not; 2 an error (admission's errors included).

-o json prints (a stable contract):
  {\"gangs\": [{\"namespace\": \"ml\", \"name\": \"bert\", \"schedulable\": true,
              \"reason\": \"Scheduled\", \"message\": \"…\",
              \"placements\": [{\"pod\": \"ml/bert-worker-0\", \"node\": \"gpu-1\"}],
              \"preemptions\": [{\"pod\": \"research/notebook\", \"node\": \"gpu-1\"}]}]}";

#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
    /// Files or directories to check; `-` is stdin.
    #[arg(short = 'f', long = "filename", required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn kubectl_flags_parse_anywhere() {
        let cli = Cli::try_parse_from(["kubectl-gang", "status", "-n", "ml", "-o", "json", "bert"]).unwrap();
        assert_eq!(cli.global.namespace.as_deref(), Some("ml"));
        assert_eq!(cli.global.output, Some(Format::Json));
        assert!(Cli::try_parse_from(["kubectl-gang", "status", "-A", "-n", "x"]).is_err());
        assert!(Cli::try_parse_from(["kubectl-gang", "simulate"]).is_err(), "-f is required");
    }
}
