//! Starting gang-scheduler against a fake for the tests that only need it running with short
//! periods and no leader election (`#[path]`-included by each test file that uses it).

use std::time::Duration;

use gang_scheduler::metrics::Metrics;
use gang_scheduler::run::{Settings, run};
use kube_gang_tests::FakeApi;
use scheduler_core::Config;
use tokio_util::sync::CancellationToken;

/// A replica that cycles every 100 ms, elects no leader and rediscovers served kinds every 200 ms.
pub fn settings() -> Settings {
    Settings {
        config: Config::default(),
        period: Duration::from_millis(100),
        leader_elect: false,
        lease_name: "gang-scheduler".into(),
        lease_namespace: "kube-gang-system".into(),
        identity: "test-replica".into(),
        lease_duration: Duration::from_secs(15),
        retry_period: Duration::from_millis(500),
        bind_concurrency: 4,
        qps: 1000.0,
        burst: 1000,
        discovery_period: Duration::from_millis(200),
    }
}

/// Runs the scheduler against `fake` until the token is cancelled.
pub fn start(fake: &FakeApi) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let config = kube::Config::new(fake.url().parse().unwrap());
    let stop = CancellationToken::new();
    let s = stop.clone();
    let handle = tokio::spawn(async move {
        run(config, settings(), Metrics::new(), s).await.unwrap();
    });
    (stop, handle)
}
