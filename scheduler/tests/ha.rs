//! Real `gang-scheduler` processes against the HTTP-level fake API: only the Lease holder
//! binds; when it is killed in the middle of binding a gang, the other takes over and finishes the
//! gang — no pod bound twice, none left half-bound; a process restarted in its place (the same
//! `POD_NAME`) waits out the Lease its predecessor held, so a binding the dead process left in
//! flight never meets one of its own on a full node.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube_gang_tests::{FakeApi, Recorded, gang, gang_pod, node};

const LEASE: (&str, &str) = ("kube-gang-system", "gang-scheduler");

/// A replica, killed when dropped so a failing test leaves no process behind.
struct Replica(Child);

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn replica(kubeconfig: &std::path::Path, name: &str) -> Replica {
    let child = Command::new(env!("CARGO_BIN_EXE_gang-scheduler"))
        .args([
            "--probe-listen=127.0.0.1:0",
            "--period=200ms",
            "--leader-elect-lease-duration=3s",
            "--leader-elect-retry-period=500ms",
            "--bind-concurrency=1",
        ])
        .env("KUBECONFIG", kubeconfig)
        .env("POD_NAME", name)
        .env("POD_NAMESPACE", LEASE.0)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gang-scheduler");
    Replica(child)
}

fn holder(fake: &FakeApi) -> Option<String> {
    let lease = fake.get("coordination.k8s.io/v1", "Lease", LEASE.0, LEASE.1)?;
    lease.pointer("/spec/holderIdentity").and_then(|h| h.as_str()).map(String::from)
}

/// Whether the Lease holder is a process of `replica` (its `POD_NAME`): the holder identity is
/// the name, `_` and a UUID of the process's own.
fn held_by(fake: &FakeApi, replica: &str) -> bool {
    holder(fake).is_some_and(|h| h.strip_prefix(replica).is_some_and(|rest| rest.starts_with('_')))
}

fn bound(fake: &FakeApi, name: &str) -> Option<String> {
    fake.get("v1", "Pod", "ml", name)?.pointer("/spec/nodeName").and_then(|n| n.as_str()).map(String::from)
}

fn from(r: &Recorded, replica: &str) -> bool {
    r.user_agent.contains(&format!("({replica}_"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_holder_binds_and_a_successor_finishes_the_gang_it_was_killed_in() {
    let fake = FakeApi::start(&[("/apis/kube-gang.io/v1alpha1", "gangs")]).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    for i in 0..8 {
        fake.put(node(&format!("gpu-{i}"), "64", 8, &[]));
    }
    // A slow API server: every binding takes 300 ms, one at a time, so the gang takes seconds.
    fake.delay("POST", "/binding", Duration::from_millis(300));

    let mut a = replica(&kubeconfig, "replica-a");
    assert!(
        fake.wait_for(Duration::from_secs(20), |f| held_by(f, "replica-a")).await,
        "replica-a takes the Lease"
    );
    let _b = replica(&kubeconfig, "replica-b");
    assert!(
        fake.wait_for(Duration::from_secs(20), |f| f
            .requests()
            .iter()
            .any(|r| from(r, "replica-b") && r.path.ends_with("/leases/gang-scheduler")))
            .await,
        "replica-b is up and following"
    );

    fake.put(gang("ml", "train", 8));
    for m in 0..8 {
        fake.put(gang_pod("ml", &format!("train-{m}"), "train", 8));
    }
    let members: Vec<String> = (0..8).map(|m| format!("train-{m}")).collect();
    let count = |f: &FakeApi| members.iter().filter(|m| bound(f, m).is_some()).count();
    assert!(
        fake.wait_for(Duration::from_secs(20), |f| count(f) >= 2).await,
        "the leader starts binding: {:#?}",
        fake.requests_to("POST", "/binding")
    );
    // Kill the leader mid-gang, without a chance to release the Lease.
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    let killed = Instant::now();
    let half = count(&fake);
    assert!(half < 8, "killed while the gang was half-bound ({half} of 8)");

    assert!(
        fake.wait_for(Duration::from_secs(30), |f| count(f) == 8).await,
        "the successor completes the gang: {:#?}",
        fake.requests_to("POST", "/binding")
    );
    assert!(held_by(&fake, "replica-b"), "replica-b holds the Lease now: {:?}", holder(&fake));

    let binds = fake.requests_to("POST", "/binding");
    // Only the Lease holder binds: replica-b sent nothing before replica-a died.
    for r in binds.iter().filter(|r| from(r, "replica-b")) {
        assert!(r.at > killed, "replica-b bound while replica-a led: {} {:?}", r.path, r.at);
    }
    assert!(binds.iter().all(|r| from(r, "replica-a") || from(r, "replica-b")), "{binds:#?}");
    // No pod bound twice: one successful binding per member.
    let mut ok: BTreeMap<&str, usize> = BTreeMap::new();
    for r in binds.iter().filter(|r| (200..300).contains(&r.status)) {
        *ok.entry(r.path.as_str()).or_default() += 1;
    }
    assert_eq!(ok.len(), 8, "{binds:#?}");
    assert!(ok.values().all(|&n| n == 1), "{ok:#?}");
    // The successor did not re-bind what its predecessor had bound.
    let by_a: BTreeSet<&str> = binds
        .iter()
        .filter(|r| from(r, "replica-a") && (200..300).contains(&r.status))
        .map(|r| r.path.as_str())
        .collect();
    assert!(by_a.len() >= 2);
    assert!(
        binds.iter().filter(|r| from(r, "replica-b")).all(|r| !by_a.contains(r.path.as_str())),
        "{binds:#?}"
    );
    // Whole and sound: one 8-GPU member per 8-GPU node.
    let nodes: BTreeSet<String> = members.iter().filter_map(|m| bound(&fake, m)).collect();
    assert_eq!(nodes.len(), 8, "{nodes:?}");
    // The successor reports the gang placed.
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| f
            .requests_to("PATCH", "/gangs/train/status")
            .iter()
            .any(|r| from(r, "replica-b") && r.body["status"]["phase"] != "Pending"))
            .await,
        "{:#?}",
        fake.requests_to("PATCH", "/gangs/train/status")
    );
}

/// Free CPU cores of `node`, from what the pods bound there request (a pod's one container asks
/// for `cpu` whole cores).
fn used_cpu(fake: &FakeApi, node: &str, pods: &[&str]) -> i64 {
    pods.iter()
        .filter(|p| bound(fake, p).as_deref() == Some(node))
        .filter_map(|p| fake.get("v1", "Pod", "ml", p))
        .filter_map(|p| {
            p.pointer("/spec/containers/0/resources/requests/cpu").and_then(|c| c.as_str()).map(String::from)
        })
        .map(|c| c.parse::<i64>().unwrap_or(0))
        .sum()
}

/// A pod of one CPU-only gang (annotations: the gang is the pod alone) asking for `cpu` cores.
fn cpu_pod(name: &str, cpu: u32, priority: i32) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
                     "labels": {"kube-gang.io/gang": name}, "annotations": {"kube-gang.io/min-member": "1"}},
        "spec": {"schedulerName": "gang-scheduler", "priority": priority,
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu.to_string()}}}]},
        "status": {"phase": "Pending"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_restarted_under_the_same_pod_name_waits_out_its_predecessors_lease() {
    let fake = FakeApi::start(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    fake.put(node("cpu-1", "4", 0, &[]));
    // Every binding is held by the API server for 2.5 s, and made even if its client is gone.
    fake.delay("POST", "/binding", Duration::from_millis(2_500));
    fake.put(cpu_pod("first", 3, 0));

    let mut a = replica(&kubeconfig, "replica-a");
    assert!(fake.wait_for(Duration::from_secs(20), |f| held_by(f, "replica-a")).await);
    assert!(
        fake.wait_for(Duration::from_secs(20), |f| !f.requests_to("POST", "/pods/first/binding").is_empty())
            .await,
        "the leader sends the binding of `first`"
    );
    // Killed while the API server holds that binding; a more urgent pod comes, and a process
    // starts again in the same pod.
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    let killed = Instant::now();
    fake.put(cpu_pod("second", 2, 100));
    let _a2 = replica(&kubeconfig, "replica-a");

    assert!(
        fake.wait_for(Duration::from_secs(30), |f| f.requests().iter().any(|r| r.method == "PUT"
            && r.path.ends_with("/leases/gang-scheduler")
            && r.at > killed
            && (200..300).contains(&r.status)))
            .await,
        "the new process takes the Lease over"
    );
    assert!(
        fake.wait_for(Duration::from_secs(10), |f| bound(f, "first").is_some()).await,
        "the dead process's binding is made: {:#?}",
        fake.requests_to("POST", "/binding")
    );
    // The new process did not bind `second` onto the node `first` was being bound to, although
    // it led while that binding was in flight: it took the Lease only once it had run out.
    let taken = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PUT" && r.path.ends_with("/leases/gang-scheduler") && r.at > killed)
        .find(|r| (200..300).contains(&r.status))
        .map(|r| r.at)
        .unwrap();
    assert!(
        taken >= killed + Duration::from_secs(2),
        "the Lease was taken over at once: {:?}",
        taken - killed
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let used = used_cpu(&fake, "cpu-1", &["first", "second"]);
    assert!(used <= 4, "cpu-1 holds 4 CPU and was given {used}: {:#?}", fake.requests_to("POST", "/binding"));
    assert_eq!(bound(&fake, "second"), None, "`second` does not fit beside `first`");
}
