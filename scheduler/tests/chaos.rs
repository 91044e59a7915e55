//! Never half-bound, proven under chaos: two real `gang-scheduler` processes (one with its clock
//! 36 s slow, when `faketime` is installed) against the strict fake API server, while a plan of
//! faults drawn from a seed runs — bindings answered 429, 500 or 503, made with the answer lost, or
//! held for seconds; every watch cut into 410 Gone; status, pod and Lease writes failing; the
//! processes SIGKILLed (the leader among them) and started again under the same `POD_NAME`; gang
//! members deleted mid-gang. The test plays the gangs' controllers: two gangs in three keep their
//! number of members, whatever is deleted or evicted, as a Job would; the rest are bare pods that
//! nobody replaces, so a gang that loses one can never be completed and must be released.
//!
//! Gangs that are bound whole run a while and finish (their pods succeed), so gangs keep arriving
//! for the whole run without filling the cluster.
//!
//! Throughout: no node is ever given more than it holds; every binding carries the pod's UID; only
//! the Lease holder writes; no pod is bound twice. After a quiet period: no gang is half-bound;
//! every gang with its minimum of members (all fit, by construction) is bound whole, and every
//! other has nothing bound. Every time a gang was half-bound, it was completed, or its release
//! (the first eviction of its members) was sent, within its grace period plus one lease duration
//! (and a few seconds of slack for cycles and process starts) — how long the API server then
//! refuses the evictions is not the scheduler's to decide, and is reported apart.
//!
//! `cargo test` runs a short plan (30 s of faults). `CHAOS_SECONDS=200` runs a longer one;
//! `CHAOS_SEED=<n>` replays the plan of a seed (the test prints the seed it drew, and a failing
//! run names it). The figures of a run are printed at the end. `CHAOS_KEEP=<dir>` keeps the
//! replicas' logs and the API server's record of requests (`requests.txt`: seconds since the
//! start, identity, method, path, status) in `<dir>`, to follow one gang through a run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube_gang_tests::{FakeApi, FaultKind, Recorded, node};
use serde_json::{Value, json};

const LEASE: (&str, &str) = ("kube-gang-system", "gang-scheduler");
/// `--leader-elect-lease-duration` of the replicas.
const LEASE_DURATION: Duration = Duration::from_secs(3);
/// The policy's stale grace period (the grace of a half-bound gang).
const GRACE: Duration = Duration::from_secs(5);
/// Cycles, process starts, a watch re-listing: what a release may take beyond grace and lease.
const SLACK: Duration = Duration::from_secs(6);
const NODES: usize = 30;
const NODE_CPU: i64 = 8;

/// SplitMix64: a tiny generator, so a seed gives the same plan on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// In `lo..hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next() as usize % items.len()]
    }
}

/// What happens at one moment of the plan.
#[derive(Clone, Debug)]
enum Action {
    /// A fault for the next `times` requests matching `method` and the path's end.
    Fault { method: &'static str, suffix: &'static str, kind: FaultKind, times: usize },
    /// Every watch is cut with 410 Gone; the replicas list again.
    Compact,
    /// SIGKILL the leader, or the other replica (`leader: false`), if running.
    Kill { leader: bool },
    /// A new gang arrives: `members` pods of `cpu` cores each, replaced when they go if
    /// `controlled`; once bound whole it runs for `runs` and finishes.
    Gang { members: u32, cpu: u32, controlled: bool, runs: Duration },
    /// A member of a gang (by index) is deleted; its controller replaces it.
    DeleteMember { gang: usize },
}

/// The seeded plan: actions at offsets from the start.
fn plan(seed: u64, seconds: u64) -> Vec<(Duration, Action)> {
    let mut rng = Rng(seed);
    let mut steps = Vec::new();
    let ms = seconds * 1000;
    // Gangs arrive through the whole run: about one every 3.3 s (61 in 200 s), the first few at
    // once, each of at most 4 × 3 cores, running 5 to 20 s once whole: the few running at once
    // fit the cluster's 240 cores many times over.
    let gangs = (seconds * 3 / 10).clamp(8, 61);
    for i in 0..gangs {
        let at = if i < 4 { 0 } else { rng.range(0, ms * 9 / 10) };
        let members = rng.range(2, 5) as u32;
        let cpu = rng.range(1, 4) as u32;
        let controlled = rng.range(0, 3) != 0;
        let runs = Duration::from_secs(rng.range(5, 21));
        steps.push((Duration::from_millis(at), Action::Gang { members, cpu, controlled, runs }));
    }
    let faults = seconds;
    for _ in 0..faults {
        let at = Duration::from_millis(rng.range(500, ms));
        let action = match rng.range(0, 100) {
            0..=29 => Action::Fault {
                method: "POST",
                suffix: "/binding",
                kind: FaultKind::Status(*rng.pick(&[429, 500, 503])),
                times: rng.range(1, 4) as usize,
            },
            30..=39 => Action::Fault {
                method: "POST",
                suffix: "/binding",
                kind: FaultKind::LoseResponse,
                times: rng.range(1, 3) as usize,
            },
            40..=49 => Action::Fault {
                method: "POST",
                suffix: "/binding",
                kind: FaultKind::Slow(Duration::from_millis(rng.range(500, 3_000))),
                times: rng.range(1, 3) as usize,
            },
            50..=57 => Action::Compact,
            58..=67 => Action::Fault {
                method: "PATCH",
                suffix: "",
                kind: FaultKind::Status(*rng.pick(&[500, 503, 429])),
                times: rng.range(1, 6) as usize,
            },
            68..=73 => Action::Fault {
                method: "PUT",
                suffix: "/leases/gang-scheduler",
                kind: FaultKind::Status(*rng.pick(&[500, 503])),
                times: rng.range(1, 3) as usize,
            },
            74..=79 => Action::Fault {
                method: "POST",
                suffix: "/eviction",
                kind: FaultKind::Status(*rng.pick(&[429, 500])),
                times: rng.range(1, 3) as usize,
            },
            _ => Action::DeleteMember { gang: rng.range(0, 1_000) as usize },
        };
        steps.push((at, action));
    }
    // Kills: one every 40 s or so, at least two, the leader more often than not.
    let kills = (seconds / 40).max(2);
    for k in 0..kills {
        let at = Duration::from_millis(rng.range(2_000, ms));
        steps.push((at, Action::Kill { leader: k % 3 != 2 }));
    }
    steps.sort_by_key(|(at, _)| *at);
    steps
}

/// A replica process, killed when dropped so a failing test leaves none behind.
struct Replica {
    name: &'static str,
    child: Option<Child>,
    /// When it was last killed (it is started again a moment later).
    down_since: Option<Instant>,
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            sigkill(c);
        }
    }
}

/// SIGKILLs a replica's whole process group: under `faketime` the scheduler is the wrapper's
/// child, and killing the wrapper alone left it running (and every run left replicas behind).
fn sigkill(c: &mut Child) {
    let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", c.id())]).status();
    let _ = c.kill();
    let _ = c.wait();
}

fn spawn(kubeconfig: &Path, config: &Path, name: &str, skew: bool, log: &Path) -> Child {
    let bin = env!("CARGO_BIN_EXE_gang-scheduler");
    let mut cmd = if skew {
        let mut c = Command::new("faketime");
        c.args(["-f", "-36s", bin]);
        c
    } else {
        Command::new(bin)
    };
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log).expect("log file");
    // A process group of its own, killed whole (see [`sigkill`]).
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.args([
        "--probe-listen=127.0.0.1:0",
        "--period=200ms",
        "--leader-elect-lease-duration=3s",
        "--leader-elect-retry-period=500ms",
        "--bind-concurrency=4",
    ])
    .arg(format!("--config={}", config.display()))
    .env("KUBECONFIG", kubeconfig)
    .env("POD_NAME", name)
    .env("POD_NAMESPACE", LEASE.0)
    .env("RUST_LOG", "info")
    .stdout(Stdio::null())
    .stderr(log)
    .spawn()
    .expect("start gang-scheduler")
}

/// Whether `faketime` is on PATH (CI installs it; elsewhere the clock skew is left out).
fn have_faketime() -> bool {
    Command::new("faketime").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// A gang as its controller keeps it: `members` pods of `cpu` cores, replaced when they go (if
/// `controlled`).
#[derive(Debug)]
struct Gang {
    name: String,
    min: u32,
    cpu: u32,
    controlled: bool,
    runs: Duration,
    /// Pod names created for it so far, and how many.
    created: u32,
    /// Since when it has been bound whole, without a break.
    whole_since: Option<Instant>,
    /// It ran and finished: its pods succeeded.
    finished: bool,
}

fn member(gang: &Gang, index: u32) -> Value {
    let name = format!("{}-{index}", gang.name);
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
                     "labels": {"kube-gang.io/gang": gang.name},
                     "annotations": {"kube-gang.io/min-member": gang.min.to_string()}},
        "spec": {"schedulerName": "gang-scheduler", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": gang.cpu.to_string()}}}]},
        "status": {"phase": "Pending"}})
}

/// Every pod of the namespace that is neither finished: name → (gang, node, cpu, going away).
fn pods(fake: &FakeApi) -> BTreeMap<String, (String, Option<String>, i64, bool)> {
    let mut out = BTreeMap::new();
    for g in fake.list("v1", "Pod", "ml") {
        let s = |p: &str| g.pointer(p).and_then(Value::as_str).map(String::from);
        let Some(name) = s("/metadata/name") else { continue };
        if matches!(s("/status/phase").as_deref(), Some("Succeeded" | "Failed")) {
            continue;
        }
        let gang = s("/metadata/labels/kube-gang.io~1gang").unwrap_or_default();
        let cpu = s("/spec/containers/0/resources/requests/cpu").and_then(|c| c.parse().ok()).unwrap_or(0);
        let deleting = g.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        out.insert(name, (gang, s("/spec/nodeName").filter(|n| !n.is_empty()), cpu, deleting));
    }
    out
}

/// What the run measured.
#[derive(Debug, Default)]
struct Figures {
    faults: BTreeMap<String, usize>,
    kills: usize,
    kills_of_leader: usize,
    bindings_made: usize,
    binding_requests: usize,
    deleted_members: usize,
    /// Each time a gang was half-bound (some members on nodes, fewer than its minimum): the
    /// gang, since when, until when (`None`: still).
    half_bound: Vec<(String, Instant, Option<Instant>)>,
    gangs_finished: usize,
    converged_after_last_fault: Option<Duration>,
}

/// The Lease holder identity written by each successful Lease write, by arrival.
fn holders(requests: &[Recorded]) -> Vec<(Instant, String)> {
    requests
        .iter()
        .filter(|r| {
            (r.method == "PUT" && r.path.ends_with("/leases/gang-scheduler"))
                || (r.method == "POST" && r.path.ends_with("/leases"))
        })
        .filter(|r| (200..300).contains(&r.status))
        .map(|r| {
            (r.at, r.body.pointer("/spec/holderIdentity").and_then(Value::as_str).unwrap_or("").to_string())
        })
        .collect()
}

/// The identity in a request's `User-Agent` (`gang-scheduler/0.1.0 (identity)`).
fn identity(r: &Recorded) -> Option<&str> {
    let inner = r.user_agent.rsplit_once('(')?.1;
    inner.strip_suffix(')')
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_gang_stays_half_bound_and_no_node_is_overcommitted_under_chaos() {
    let seconds: u64 = std::env::var("CHAOS_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    let seed: u64 = std::env::var("CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |d| d.as_nanos() as u64)
    });
    println!("chaos: CHAOS_SEED={seed} CHAOS_SECONDS={seconds}");
    let steps = plan(seed, seconds);
    let skew = have_faketime();
    if !skew {
        println!("chaos: faketime is not on PATH: both replicas run on the machine's clock");
        assert!(std::env::var_os("CI").is_none(), "CI installs faketime (.ci/run)");
    }

    let fake = FakeApi::start(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    let config = dir.path().join("policy.yaml");
    std::fs::write(&config, format!("staleGracePeriod: {}\n", GRACE.as_secs())).unwrap();
    let logs: Vec<PathBuf> = ["a", "b"].iter().map(|r| dir.path().join(format!("replica-{r}.log"))).collect();
    for i in 0..NODES {
        fake.put(node(&format!("n{i:02}"), &NODE_CPU.to_string(), 0, &[]));
    }
    let mut replicas = [
        Replica {
            name: "replica-a",
            child: Some(spawn(&kubeconfig, &config, "replica-a", false, &logs[0])),
            down_since: None,
        },
        Replica {
            name: "replica-b",
            child: Some(spawn(&kubeconfig, &config, "replica-b", skew, &logs[1])),
            down_since: None,
        },
    ];

    let start = Instant::now();
    let mut gangs: Vec<Gang> = Vec::new();
    let mut figures = Figures::default();
    let mut next = 0;
    let mut half_since: BTreeMap<String, Instant> = BTreeMap::new();
    let mut last_fault = start;
    let mut overcommit: Option<String> = None;
    let mut replace: Vec<(Instant, usize)> = Vec::new();
    let quiet_limit = Duration::from_secs(60);
    let mut converged: Option<Instant> = None;

    loop {
        let elapsed = start.elapsed();
        // The plan.
        while next < steps.len() && steps[next].0 <= elapsed {
            let (_, action) = &steps[next];
            next += 1;
            match action {
                Action::Fault { method, suffix, kind, times } => {
                    fake.fault_with(method, suffix, kind.clone(), *times);
                    let what = match kind {
                        FaultKind::Status(s) => format!("{method} {suffix} {s}"),
                        FaultKind::LoseResponse => format!("{method} {suffix} answer lost"),
                        FaultKind::Slow(_) => format!("{method} {suffix} slow"),
                        FaultKind::BoundElsewhere(_) => format!("{method} {suffix} bound elsewhere"),
                    };
                    *figures.faults.entry(what).or_default() += *times;
                    last_fault = Instant::now();
                }
                Action::Compact => {
                    fake.compact();
                    *figures.faults.entry("watches cut (410 Gone)".into()).or_default() += 1;
                    last_fault = Instant::now();
                }
                Action::Kill { leader } => {
                    let held = fake
                        .get("coordination.k8s.io/v1", "Lease", LEASE.0, LEASE.1)
                        .and_then(|l| {
                            l.pointer("/spec/holderIdentity").and_then(Value::as_str).map(String::from)
                        })
                        .unwrap_or_default();
                    let target = replicas
                        .iter()
                        .position(|r| held.starts_with(&format!("{}_", r.name)) == *leader)
                        .unwrap_or(0);
                    let r = &mut replicas[target];
                    if let Some(mut c) = r.child.take() {
                        sigkill(&mut c);
                        r.down_since = Some(Instant::now());
                        figures.kills += 1;
                        if held.starts_with(&format!("{}_", r.name)) {
                            figures.kills_of_leader += 1;
                        }
                        last_fault = Instant::now();
                    }
                }
                Action::Gang { members, cpu, controlled, runs } => {
                    let g = Gang {
                        name: format!("g{:02}", gangs.len()),
                        min: *members,
                        cpu: *cpu,
                        controlled: *controlled,
                        runs: *runs,
                        created: 0,
                        whole_since: None,
                        finished: false,
                    };
                    gangs.push(g);
                }
                Action::DeleteMember { gang } => {
                    if !gangs.is_empty() {
                        let g = &gangs[gang % gangs.len()];
                        let live: Vec<String> = pods(&fake)
                            .into_iter()
                            .filter(|(_, p)| p.0 == g.name && !p.3)
                            .map(|(n, _)| n)
                            .collect();
                        if let Some(victim) = live.get(gang % live.len().max(1)) {
                            fake.remove("v1", "Pod", "ml", victim);
                            figures.deleted_members += 1;
                            last_fault = Instant::now();
                        }
                    }
                }
            }
        }
        // Killed replicas come back a moment later, under the same POD_NAME.
        for (i, r) in replicas.iter_mut().enumerate() {
            if r.child.is_none() && r.down_since.is_some_and(|t| t.elapsed() >= Duration::from_millis(1_500))
            {
                r.child = Some(spawn(&kubeconfig, &config, r.name, i == 1 && skew, &logs[i]));
                r.down_since = None;
            }
        }
        // The controller: each gang keeps its members (a replacement shortly after one goes).
        let now_pods = pods(&fake);
        for (gi, g) in gangs.iter().enumerate() {
            if g.finished {
                continue;
            }
            let live = now_pods.values().filter(|p| p.0 == g.name && !p.3).count() as u32;
            let due = replace.iter().filter(|(_, i)| *i == gi).count() as u32;
            if !g.controlled && g.created >= g.min {
                continue;
            }
            for _ in live + due..g.min {
                let delay = if g.created == 0 { Duration::ZERO } else { Duration::from_millis(700) };
                replace.push((Instant::now() + delay, gi));
            }
        }
        replace.sort_by_key(|(at, _)| *at);
        while replace.first().is_some_and(|(at, _)| *at <= Instant::now()) {
            let (_, gi) = replace.remove(0);
            let g = &mut gangs[gi];
            fake.put(member(g, g.created));
            g.created += 1;
        }
        // What holds at every moment: no node given more than it holds; half-bound time.
        let now_pods = pods(&fake);
        let mut used: BTreeMap<&str, i64> = BTreeMap::new();
        for (_, node, cpu, _) in now_pods.values() {
            if let Some(n) = node {
                *used.entry(n.as_str()).or_default() += cpu;
            }
        }
        if let Some((n, u)) = used.iter().find(|(_, u)| **u > NODE_CPU) {
            overcommit.get_or_insert_with(|| {
                format!("{n} holds {NODE_CPU} CPU and was given {u} at {:?}", start.elapsed())
            });
        }
        let mut all_whole = !gangs.is_empty() && replace.is_empty();
        for g in gangs.iter_mut().filter(|g| !g.finished) {
            let bound = now_pods.values().filter(|p| p.0 == g.name && p.1.is_some() && !p.3).count() as u32;
            let live = now_pods.values().filter(|p| p.0 == g.name && !p.3).count() as u32;
            if bound > 0 && bound < g.min {
                half_since.entry(g.name.clone()).or_insert_with(Instant::now);
            } else if let Some(since) = half_since.remove(&g.name) {
                figures.half_bound.push((g.name.clone(), since, Some(Instant::now())));
            }
            all_whole &= if live >= g.min { bound >= g.min } else { bound == 0 };
            // Whole long enough: it ran, and finishes (a Job's pods succeed).
            if bound >= g.min {
                let since = *g.whole_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= g.runs && next < steps.len() {
                    for (name, p) in now_pods.iter().filter(|(_, p)| p.0 == g.name) {
                        if let Some(mut pod) = fake.get("v1", "Pod", "ml", name) {
                            pod["status"]["phase"] =
                                json!(if p.1.is_some() { "Succeeded" } else { "Failed" });
                            fake.put(pod);
                        }
                    }
                    g.finished = true;
                    figures.gangs_finished += 1;
                }
            } else {
                g.whole_since = None;
            }
        }
        let plan_done = next >= steps.len() && replicas.iter().all(|r| r.child.is_some());
        if plan_done && all_whole && half_since.is_empty() {
            converged.get_or_insert_with(Instant::now);
            // Quiet for a while after converging: nothing undoes it.
            if converged.is_some_and(|c| c.elapsed() >= Duration::from_secs(3)) {
                break;
            }
        } else {
            converged = None;
        }
        if plan_done && last_fault.elapsed() > quiet_limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    figures.converged_after_last_fault = converged.map(|c| c.saturating_duration_since(last_fault));
    for (g, since) in half_since {
        figures.half_bound.push((g, since, None));
    }

    // The record, as the API server saw it.
    let requests = fake.requests();
    let bindings: Vec<&Recorded> =
        requests.iter().filter(|r| r.method == "POST" && r.path.ends_with("/binding")).collect();
    figures.binding_requests = bindings.len();
    figures.bindings_made = bindings.iter().filter(|r| (200..300).contains(&r.status)).count();
    let bound_of_release = GRACE + LEASE_DURATION + SLACK;
    let end_of_run = Instant::now();
    // Each half-bound spell: how long, and how long until its release was sent (the first
    // eviction of one of its members, if any).
    let spells: Vec<(String, Duration, Option<Duration>)> = figures
        .half_bound
        .iter()
        .map(|(g, since, until)| {
            let until = until.unwrap_or(end_of_run);
            let released = requests
                .iter()
                .filter(|r| r.method == "POST" && r.path.ends_with("/eviction"))
                .filter(|r| r.path.contains(&format!("/pods/{g}-")) && r.at >= *since && r.at <= until)
                .map(|r| r.at - *since)
                .min();
            (g.clone(), until - *since, released)
        })
        .collect();
    if let Some(keep) = std::env::var_os("CHAOS_KEEP").map(PathBuf::from) {
        std::fs::create_dir_all(&keep).unwrap();
        for l in &logs {
            std::fs::copy(l, keep.join(l.file_name().unwrap())).unwrap();
        }
        let record: String = requests
            .iter()
            .map(|r| {
                let at = r.at.saturating_duration_since(start).as_secs_f64();
                format!("{at:9.3} {:12} {:6} {} {}\n", identity(r).unwrap_or("-"), r.method, r.path, r.status)
            })
            .collect();
        std::fs::write(keep.join("requests.txt"), record).unwrap();
        let spells: String = figures
            .half_bound
            .iter()
            .map(|(g, since, until)| {
                let from = since.saturating_duration_since(start).as_secs_f64();
                let to = until.unwrap_or(end_of_run).saturating_duration_since(start).as_secs_f64();
                format!("{g} half-bound from {from:.3} to {to:.3}\n")
            })
            .collect();
        std::fs::write(keep.join("spells.txt"), spells).unwrap();
        println!("chaos: logs and requests kept in {}", keep.display());
    }
    let worst = spells.iter().map(|s| s.1).max().unwrap_or_default();
    let worst_decided = spells.iter().map(|s| s.2.map_or(s.1, |r| r.min(s.1))).max().unwrap_or_default();
    println!(
        "chaos: seed {seed}, {seconds} s of faults, {} gangs on {NODES} nodes ({} ran and finished)",
        gangs.len(),
        figures.gangs_finished
    );
    println!("chaos: faults {:?}", figures.faults);
    println!(
        "chaos: {} kills ({} of the leader), {} members deleted, {} binding requests, {} bindings made",
        figures.kills,
        figures.kills_of_leader,
        figures.deleted_members,
        figures.binding_requests,
        figures.bindings_made
    );
    println!(
        "chaos: converged {:?} after the last fault; {} half-bound spells; the longest {:?}; completed or release sent within {:?} at worst",
        figures.converged_after_last_fault,
        spells.len(),
        worst,
        worst_decided
    );
    let logs_tail = || {
        logs.iter()
            .map(|l| {
                let text = std::fs::read_to_string(l).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                format!("{}:\n{}", l.display(), lines[lines.len().saturating_sub(40)..].join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };

    assert!(overcommit.is_none(), "seed {seed}: {}", overcommit.unwrap_or_default());
    // Every binding carried its pod's UID.
    for b in &bindings {
        let pod = b.path.rsplit('/').nth(1).unwrap_or("");
        assert_eq!(
            b.body["metadata"]["uid"],
            format!("uid-{pod}"),
            "seed {seed}: binding without its pod's UID: {b:?}"
        );
    }
    // No pod bound twice.
    let mut made: BTreeMap<&str, usize> = BTreeMap::new();
    for b in bindings.iter().filter(|r| (200..300).contains(&r.status)) {
        *made.entry(b.path.as_str()).or_default() += 1;
    }
    assert!(made.values().all(|&n| n == 1), "seed {seed}: a pod bound twice: {made:?}");
    // Only the Lease holder wrote: each write's author held the Lease at its last write before it.
    let leases = holders(&requests);
    let writes = requests.iter().filter(|r| {
        matches!(r.method.as_str(), "POST" | "PATCH" | "DELETE" | "PUT")
            && !r.path.contains("/leases")
            && r.user_agent.starts_with("gang-scheduler/")
    });
    for w in writes {
        let Some(who) = identity(w) else { continue };
        let holder = leases.iter().rev().find(|(at, _)| *at <= w.at).map(|(_, h)| h.as_str());
        assert_eq!(
            holder,
            Some(who),
            "seed {seed}: {} {} written at {:?} by a replica not holding the Lease; Lease writes: {:?}",
            w.method,
            w.path,
            w.at - start,
            leases.iter().map(|(at, h)| (*at - start, h)).collect::<Vec<_>>()
        );
    }
    // After the quiet period: whole gangs, none half-bound.
    let end = pods(&fake);
    let mut not_whole = Vec::new();
    let mut released = 0;
    for g in gangs.iter().filter(|g| !g.finished) {
        let bound = end.values().filter(|p| p.0 == g.name && p.1.is_some() && !p.3).count() as u32;
        let live = end.values().filter(|p| p.0 == g.name && !p.3).count() as u32;
        if live >= g.min && bound < g.min {
            not_whole.push(format!("{} ({bound} of {} bound, {live} exist)", g.name, g.min));
        } else if live < g.min && bound > 0 {
            not_whole
                .push(format!("{} ({bound} bound, only {live} of {} exist: never released)", g.name, g.min));
        } else if live < g.min {
            released += 1;
        }
    }
    println!(
        "chaos: at the end {} gangs whole, {released} that lost members for good and hold nothing ({} finished before)",
        gangs.len() - released - figures.gangs_finished,
        figures.gangs_finished
    );
    assert!(
        not_whole.is_empty(),
        "seed {seed}: gangs neither whole nor released after the quiet period: {not_whole:?}\n{}",
        logs_tail()
    );
    let late: Vec<&(String, Duration, Option<Duration>)> = spells
        .iter()
        .filter(|(_, d, released)| released.map_or(*d, |r| r.min(*d)) > bound_of_release)
        .collect();
    if !late.is_empty() {
        // What the replicas said of the gangs whose release came late.
        for (g, _, _) in &late {
            for l in &logs {
                let text = std::fs::read_to_string(l).unwrap_or_default();
                for line in text
                    .lines()
                    .filter(|line| line.contains(&format!("{g}-")) || line.contains(&format!("/{g}")))
                {
                    println!("{}: {line}", l.display());
                }
            }
        }
    }
    assert!(
        late.is_empty(),
        "seed {seed}: a half-bound gang neither completed nor released within grace {GRACE:?} + lease {LEASE_DURATION:?} + slack {SLACK:?}: {late:?}"
    );
}
