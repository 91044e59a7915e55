//! Prometheus metrics (text format on `/metrics`). No per-pod or per-gang labels: cardinality stays
//! flat on a 15,000-node cluster.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabel {
    pub phase: String,
}

/// A gang's size as a label: `1`, `2-8`, `9-64`, `65-512` or `513+` members (five values, so
/// the cardinality stays flat).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SizeLabel {
    pub size: &'static str,
}

impl SizeLabel {
    pub fn of(members: u32) -> Self {
        let size = match members {
            0 | 1 => "1",
            2..=8 => "2-8",
            9..=64 => "9-64",
            65..=512 => "65-512",
            _ => "513+",
        };
        SizeLabel { size }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
}

/// The scheduler's metrics and readiness.
#[derive(Debug, Clone)]
pub struct Metrics {
    pub attempts: Family<ResultLabel, Counter>,
    pub cycle_duration: Histogram,
    pub pending_gangs: Gauge,
    /// Gangs by phase at the leader's last cycle (`gang_gangs{phase}`), every phase present.
    pub gangs: Family<PhaseLabel, Gauge>,
    /// Time from quorum to placement, by gang size (`gang_wait_duration_seconds{size}`).
    pub wait_duration: Family<SizeLabel, Histogram>,
    pub pods_bound: Counter,
    /// Backfill: gangs capacity is held for at the last cycle.
    pub reservations: Gauge,
    /// Backfill: nodes holding capacity for waiting gangs at the last cycle.
    pub reserved_nodes: Gauge,
    /// Backfill: gangs placed on capacity held for gangs ahead of them.
    pub backfill_starts: Counter,
    /// Events sent, by result (`sent`, `refused`).
    pub events: Family<ResultLabel, Counter>,
    pub leader: Gauge,
    /// 1 while autoscaler-visible gangs are on and the ProvisioningRequest API is served.
    pub provisioning_enabled: Gauge,
    /// Connections the probe port closed, by reason (`gang_connections_closed_total{port="probe"}`).
    pub closed: kube_gang_serve::probe::ClosedConnections,
    /// Caches synced: `/readyz` answers 200.
    pub ready: Arc<AtomicBool>,
    pub registry: Arc<Registry>,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let attempts = Family::<ResultLabel, Counter>::default();
        registry.register(
            "gang_schedule_attempts",
            "Gang placement decisions, by result (reason)",
            attempts.clone(),
        );
        let cycle_duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register(
            "gang_cycle_duration_seconds",
            "Duration of one scheduling cycle",
            cycle_duration.clone(),
        );
        let pending_gangs = Gauge::default();
        registry.register("gang_pending_gangs", "Gangs waiting to be placed", pending_gangs.clone());
        let gangs = Family::<PhaseLabel, Gauge>::default();
        registry.register(
            "gang_gangs",
            "Gangs by phase (Pending, Scheduled, Running, Degraded, Completed, Failed) at the last cycle",
            gangs.clone(),
        );
        let wait_duration = Family::<SizeLabel, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(1.0, 2.0, 16))) as fn() -> Histogram,
        );
        registry.register(
            "gang_wait_duration_seconds",
            "Time from a gang's quorum to its placement, by gang size (members placed)",
            wait_duration.clone(),
        );
        // Every size present from the start (a histogram at 0): the family is exported, and a
        // rate over it has a series to start from.
        for members in [1, 2, 9, 65, 513] {
            let _ = wait_duration.get_or_create(&SizeLabel::of(members));
        }
        let reservations = Gauge::default();
        registry.register(
            "gang_reservations",
            "Gangs capacity is held for (backfill) at the last cycle",
            reservations.clone(),
        );
        let reserved_nodes = Gauge::default();
        registry.register(
            "gang_reserved_nodes",
            "Nodes holding capacity for waiting gangs (backfill) at the last cycle",
            reserved_nodes.clone(),
        );
        let backfill_starts = Counter::default();
        registry.register(
            "gang_backfill_starts",
            "Gangs placed on capacity held for gangs ahead of them, ending before those start",
            backfill_starts.clone(),
        );
        let pods_bound = Counter::default();
        registry.register(
            "gang_pods_bound",
            "Bindings the API server accepted (not bindings planned)",
            pods_bound.clone(),
        );
        let events = Family::<ResultLabel, Counter>::default();
        registry.register("gang_events", "Events posted, by result (sent, refused)", events.clone());
        let leader = Gauge::default();
        registry.register("gang_leader", "1 while this replica holds the leader Lease", leader.clone());
        let provisioning_enabled = Gauge::default();
        registry.register(
            "gang_provisioning_enabled",
            "1 while autoscaler-visible gangs are on and the ProvisioningRequest API is served",
            provisioning_enabled.clone(),
        );
        let closed = kube_gang_serve::probe::ClosedConnections::default();
        registry.register(
            "gang_connections_closed",
            "Connections the probe port closed, by reason (a limit, a timeout, bad HTTP, closed for another client's, shutdown)",
            closed.0.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build.get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION").to_string() }).set(1);
        registry.register("gang_build_info", "Build information", build);
        Metrics {
            attempts,
            cycle_duration,
            pending_gangs,
            gangs,
            wait_duration,
            pods_bound,
            reservations,
            reserved_nodes,
            backfill_starts,
            events,
            leader,
            provisioning_enabled,
            closed,
            ready: Arc::new(AtomicBool::new(false)),
            registry: Arc::new(registry),
        }
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    /// Sets `gang_gangs{phase}` from the phases of one cycle's gangs; a phase no gang is in reads 0.
    pub fn record_phases(&self, phases: impl Iterator<Item = scheduler_core::plan::Phase>) {
        use scheduler_core::plan::Phase;
        const ALL: [Phase; 6] = [
            Phase::Pending,
            Phase::Scheduled,
            Phase::Running,
            Phase::Degraded,
            Phase::Completed,
            Phase::Failed,
        ];
        let mut counts = [0i64; ALL.len()];
        for p in phases {
            if let Some(i) = ALL.iter().position(|a| *a == p) {
                counts[i] += 1;
            }
        }
        for (p, n) in ALL.iter().zip(counts) {
            self.gangs.get_or_create(&PhaseLabel { phase: p.as_str().to_string() }).set(n);
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// The probe server: `/healthz`, `/readyz`, `/metrics` (served within the probe port's limits,
/// on a thread of its own: `kube_gang_serve::probe`).
///
/// `/readyz` answers 200 once the caches are synced, on the leader and on followers alike: a
/// follower stands by with warm caches and takes over the moment it wins the Lease, so a
/// rollout must not wait for it to lead (kube-scheduler's `/readyz` likewise checks its handlers'
/// sync, not leadership). The body says `ok: leader` or `ok: follower`; `gang_leader` says the same
/// to Prometheus.
pub fn router(metrics: Metrics) -> axum::Router {
    use kube_gang_serve::probe::Readiness;
    let m = metrics.clone();
    kube_gang_serve::probe::routes(
        move || {
            let (ready, leading) = (m.is_ready(), m.leader.get() == 1);
            match (ready, leading) {
                (true, true) => Readiness { ready: true, detail: "ok: leader" },
                (true, false) => Readiness { ready: true, detail: "ok: follower" },
                _ => Readiness { ready: false, detail: "caches not synced" },
            }
        },
        move || metrics.encode(),
    )
}

/// Serves [`router`] on `addr` from a thread of its own, within the probe port's limits
/// (`kube_gang_serve::server::Limits::probes`: 64 connections, 8 per client, 16 KiB of headers,
/// 2 s to send them), counting what it closes in `gang_connections_closed_total`: a flood of
/// connections or of unfinished headers costs the scheduler a bounded amount of memory, and a
/// long cycle never delays a probe.
pub fn serve_probes(
    addr: std::net::SocketAddr,
    metrics: &Metrics,
) -> anyhow::Result<kube_gang_serve::probe::Probes> {
    kube_gang_serve::probe::Probes::bind(
        addr,
        router(metrics.clone()),
        kube_gang_serve::server::Limits::default().probes(),
        metrics.closed.port("probe"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names_every_metric_without_per_gang_labels() {
        let m = Metrics::new();
        m.record_phases(std::iter::empty());
        m.attempts.get_or_create(&ResultLabel { result: "Scheduled".into() }).inc();
        m.pods_bound.inc_by(8);
        let text = m.encode();
        for name in [
            "gang_schedule_attempts_total{result=\"Scheduled\"} 1",
            "gang_cycle_duration_seconds",
            "gang_pending_gangs",
            "gang_gangs{phase=\"Running\"} 0",
            "gang_wait_duration_seconds",
            "gang_pods_bound_total 8",
            "gang_build_info",
        ] {
            assert!(text.contains(name), "missing {name} in\n{text}");
        }
        assert!(!text.contains("gang=\""));
    }
}
