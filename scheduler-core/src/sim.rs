//! Simulation over time: replay gang arrivals and run durations through the same [`crate::schedule`]
//! the scheduler runs, and report waits, utilisation, stranded GPUs and preemptions.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::model::{Gang, GangKey, Node, Pod, Time};

/// One gang arriving during a simulation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Arrival {
    /// Seconds after the simulation starts.
    pub at_secs: u64,
    /// How long the gang runs once its minimum is running.
    pub duration_secs: u64,
    pub gang: Gang,
    /// Its members (pending, unbound).
    pub pods: Vec<Pod>,
}

/// What to replay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub nodes: Vec<Node>,
    /// Pods already running at the start (they never finish).
    #[serde(default)]
    pub background: Vec<Pod>,
    pub arrivals: Vec<Arrival>,
    /// Simulation start time.
    #[serde(default)]
    pub start: Time,
    /// Seconds between scheduling cycles.
    #[serde(default = "one")]
    pub step_secs: u64,
    /// Stop after this many seconds even if gangs still wait.
    #[serde(default)]
    pub horizon_secs: Option<u64>,
}

fn one() -> u64 {
    1
}

/// One gang's fate in a simulation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GangReport {
    pub gang: GangKey,
    pub arrived_secs: u64,
    /// When its minimum was placed, if ever.
    pub started_secs: Option<u64>,
    pub finished_secs: Option<u64>,
    /// How many times it lost members to preemption.
    pub preempted: u32,
}

impl GangReport {
    /// Time from arrival to placement.
    pub fn wait(&self) -> Option<Duration> {
        self.started_secs.map(|s| Duration::from_secs(s.saturating_sub(self.arrived_secs)))
    }
}

/// The result of a simulation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub gangs: Vec<GangReport>,
    /// Seconds simulated.
    pub elapsed_secs: u64,
    /// Mean fraction of allocatable GPUs in use, 0..=1.
    pub gpu_utilisation: f64,
    /// Mean fraction of allocatable CPU in use, 0..=1.
    pub cpu_utilisation: f64,
    /// Mean number of free GPUs that no waiting gang's member shape could use.
    pub stranded_gpus: f64,
    /// Pods evicted by preemption.
    pub preemptions: u32,
}

/// Replays `scenario` with `config`.
pub fn run(_scenario: &Scenario, _config: &Config) -> Report {
    Report::default()
}
