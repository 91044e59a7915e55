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
    let docs_file = dir.path().join("docs.yaml");
    let pods_file = dir.path().join("pods.json");
    std::fs::write(&docs_file, &docs).unwrap();
    std::fs::write(&pods_file, &pods).unwrap();
    let (d, p) = (docs_file.to_str().unwrap(), pods_file.to_str().unwrap());
    // Held as JSON trees all at once, these were 50–100 times the input (tiny documents: validate
    // 58×, snapshot 100× in resident memory); objects kept compact and decoded one at a time.
    for (args, input, bound) in [
        (vec!["kubectl-gang", "validate", "-f", d], docs.len(), 5.0),
        (vec!["kubectl-gang", "snapshot", "--cluster", d], docs.len(), 5.0),
        (vec!["kubectl-gang", "snapshot", "-o", "json", "--cluster", p], pods.len(), 5.0),
        (vec!["kubectl-gang", "validate", "-f", p], pods.len(), 5.0),
        // The cluster view keeps the objects it files (pods, nodes, gangs) as JSON trees; objects
        // of no kind are only warned about, never held.
        (vec!["kubectl-gang", "status", "-A", "--cluster", d], docs.len(), 20.0),
    ] {
        let f = factor(&args, input);
        eprintln!("{args:?}: {f:.1}×");
        assert!(f <= bound, "{args:?}: peak heap {f:.1}× the input (at most {bound}×)");
    }
}
