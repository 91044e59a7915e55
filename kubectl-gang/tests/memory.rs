//! Memory proportional to the input (issue 16): a command's peak heap, as a multiple of its
//! input's size, on the shapes that cost the most per byte (many tiny objects, where a JSON tree
//! costs some 50 times its YAML). Measured with dhat (this test binary's global allocator): bytes,
//! not time. `cargo bench -p kubectl-gang --bench memory` prints the figures for every shape.

use clap::Parser as _;
use kubectl_gang::{Cli, run};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn build(size: usize, head: &str, item: impl Fn(usize) -> String) -> String {
    let mut out = String::from(head);
    let mut i = 0;
    while out.len() < size {
        out.push_str(&item(i));
        i += 1;
    }
    out
}

/// Peak heap while `args` runs, over `input` bytes.
fn factor(args: &[&str], input: usize) -> f64 {
    let _profiler = dhat::Profiler::builder().testing().build();
    let before = dhat::HeapStats::get().curr_bytes;
    let out = run(Cli::parse_from(args)).expect("runs");
    let peak = dhat::HeapStats::get().max_bytes.saturating_sub(before);
    drop(out);
    peak as f64 / input as f64
}

/// One test: dhat allows one profiler at a time.
#[test]
fn peak_heap_stays_a_small_multiple_of_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let size = 256 << 10;
    let docs = build(size, "", |i| format!("a{i}: b\n---\n"));
    let pods = build(size, r#"{"apiVersion":"v1","kind":"List","items":["#, |i| {
        format!(
            r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"p{i}","namespace":"d"}},"spec":{{"containers":[{{"name":"c"}}]}}}},"#
        )
    }) + "{}]}";
    let gangs = build(size, "", |i| {
        format!(
            "kind: Gang\napiVersion: kube-gang.io/v1alpha1\nmetadata: {{name: g{i}, namespace: default}}\nspec: {{minMember: 0}}\n---\n"
        )
    });
    let realistic = build(size, "apiVersion: v1\nkind: List\nitems:\n", |p| {
        format!(
            "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: job-{g}-{m}\n    namespace: team-{ns}\n    uid: u-{p}\n    creationTimestamp: \"2026-11-22T08:00:00Z\"\n    labels: {{kube-gang.io/gang: job-{g}, app: trainer}}\n    annotations: {{kube-gang.io/min-member: \"8\"}}\n  spec:\n    schedulerName: gang-scheduler\n    nodeName: node-{node}\n    containers:\n    - name: trainer\n      image: example/trainer:1\n      resources: {{requests: {{cpu: 100m, memory: 200Mi}}}}\n  status: {{phase: Running}}\n",
            g = p / 8,
            m = p % 8,
            ns = (p / 8) % 40,
            node = p % 400
        )
    });
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: \"1000\", memory: 1000Gi, pods: \"100000\"}}\n";
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let (d, p) = (file("docs.yaml", &docs), file("pods.json", &pods));
    let (g, r, n) = (file("gangs.yaml", &gangs), file("realistic.yaml", &realistic), file("node.yaml", node));
    let (d, p, g, r, n) = (d.as_str(), p.as_str(), g.as_str(), r.as_str(), n.as_str());
    // Held as JSON trees all at once, these were 50–100 times the input (tiny documents: validate
    // 58×, snapshot 100× in resident memory); objects kept compact and decoded one at a time.
    for (args, input, bound) in [
        (vec!["kubectl-gang", "validate", "-f", d], docs.len(), 5.0),
        (vec!["kubectl-gang", "snapshot", "--cluster", d], docs.len(), 5.0),
        (vec!["kubectl-gang", "snapshot", "-o", "json", "--cluster", p], pods.len(), 5.0),
        (vec!["kubectl-gang", "validate", "-f", p], pods.len(), 5.0),
        // The cluster view keeps the objects it files (pods, nodes, gangs) as compact JSON, and
        // builds the model the cycle reads; objects of no kind are warned about twenty at a
        // time, never held. Held as JSON trees, these were 15 (realistic), 37 (tiny pods) and 59
        // (tiny invalid gangs) times the input; simulate's warnings alone 21 times.
        (vec!["kubectl-gang", "status", "-A", "--cluster", d], docs.len(), 5.0),
        (vec!["kubectl-gang", "simulate", "--cluster", n, "-f", d], docs.len(), 5.0),
        (vec!["kubectl-gang", "status", "-A", "--cluster", r], realistic.len(), 8.0),
        (vec!["kubectl-gang", "simulate", "--cluster", n, "-f", r], realistic.len(), 8.0),
        (vec!["kubectl-gang", "status", "-A", "--cluster", p], pods.len(), 16.0),
        (vec!["kubectl-gang", "simulate", "--cluster", n, "-f", p], pods.len(), 18.0),
        // 26: each gang's outcome and row carry backfill's expected start and held nodes too
        // (~60 bytes a gang; 24.7× measured with them, 25× was the bound before).
        (vec!["kubectl-gang", "status", "-A", "--cluster", g], gangs.len(), 26.0),
        (vec!["kubectl-gang", "simulate", "--cluster", n, "-f", g], gangs.len(), 14.0),
    ] {
        let f = factor(&args, input);
        eprintln!("{args:?}: {f:.1}×");
        assert!(f <= bound, "{args:?}: peak heap {f:.1}× the input (at most {bound}×)");
    }
}
