//! Memory and time of reading hostile-shaped input (issue 16): for each shape of about 4 MiB, every
//! command that reads it runs in-process under dhat's heap profiler (this bench's global allocator)
//! and reports its peak heap as a multiple of the input's size; then reading alone is timed at 1 and
//! 4 MiB (per KiB: linear reading keeps it flat), and so is the refusal of 200 KB of `[`.
//!
//! The shapes: many tiny YAML documents (`a1: b`), a List of tiny mappings, a List of tiny Pods,
//! tiny Gangs (each one an error), a JSON List of tiny Pods, documents nested 99 levels deep, and a
//! realistic dump (S4's pod shape, as `kubectl get -o yaml` prints it). Last, `validate` of a
//! 7.9 MB file of 95 nested anchors and no alias (each anchored node is copied when defined).
//!
//! `cargo bench -p kubectl-gang --bench memory` (`MEMORY_SHAPES=Pods` measures only the shapes whose
//! name holds `Pods`).

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use clap::Parser as _;
use kubectl_gang::{Cli, run};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Items from `item(i)` after `head`, until the text reaches `size` bytes.
fn build(size: usize, head: &str, item: impl Fn(usize) -> String, tail: &str) -> String {
    let mut out = String::from(head);
    let mut i = 0;
    while out.len() < size {
        out.push_str(&item(i));
        i += 1;
    }
    out.push_str(tail);
    out
}

fn shapes(size: usize) -> Vec<(&'static str, &'static str, String)> {
    let deep = |i: usize| {
        let mut s = format!("kind: ConfigMap\nmetadata: {{name: c{i}}}\ndata:\n");
        for d in 0..97 {
            s.push_str(&" ".repeat(2 * d + 2));
            s.push_str("k:\n");
        }
        s.push_str(&" ".repeat(196));
        s.push_str("v: x\n---\n");
        s
    };
    vec![
        ("tiny documents", "yaml", build(size, "", |i| format!("a{i}: b\n---\n"), "")),
        (
            "List of tiny maps",
            "yaml",
            build(size, "apiVersion: v1\nkind: List\nitems:\n", |i| format!("- {{a: {i}}}\n"), ""),
        ),
        (
            "List of tiny Pods",
            "yaml",
            build(
                size,
                "apiVersion: v1\nkind: List\nitems:\n",
                |i| {
                    format!(
                        "- {{kind: Pod, apiVersion: v1, metadata: {{name: p{i}, namespace: d}}, spec: {{containers: [{{name: c}}]}}}}\n"
                    )
                },
                "",
            ),
        ),
        (
            "tiny invalid Gangs",
            "yaml",
            build(
                size,
                "",
                |i| {
                    format!(
                        "kind: Gang\napiVersion: kube-gang.io/v1alpha1\nmetadata: {{name: g{i}, namespace: default}}\nspec: {{minMember: 0}}\n---\n"
                    )
                },
                "",
            ),
        ),
        (
            "JSON List of tiny Pods",
            "json",
            build(
                size,
                r#"{"apiVersion":"v1","kind":"List","items":["#,
                |i| {
                    format!(
                        r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"p{i}","namespace":"d"}},"spec":{{"containers":[{{"name":"c"}}]}}}},"#
                    )
                },
                "{}]}",
            ),
        ),
        ("documents 99 deep", "yaml", build(size, "", deep, "")),
        (
            "realistic pods (S4 shape)",
            "yaml",
            build(
                size,
                "apiVersion: v1\nkind: List\nitems:\n",
                |p| {
                    format!(
                        "- apiVersion: v1
  kind: Pod
  metadata:
    name: job-{g}-{m}
    namespace: team-{ns}
    uid: 00000000-0000-0000-0000-{p:012}
    creationTimestamp: \"2026-11-22T08:00:00Z\"
    labels: {{kube-gang.io/gang: job-{g}, app: trainer, batch.kubernetes.io/job-name: job-{g}}}
    annotations: {{kube-gang.io/min-member: \"8\"}}
  spec:
    schedulerName: gang-scheduler
    priorityClassName: training
    priority: 1000
    nodeName: node-{node}
    containers:
    - name: trainer
      image: example/trainer:1
      resources: {{requests: {{cpu: 100m, memory: 200Mi}}}}
    tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
  status: {{phase: Running}}
",
                        g = p / 8,
                        m = p % 8,
                        ns = (p / 8) % 40,
                        node = p % 4000
                    )
                },
                "",
            ),
        ),
    ]
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::File::create(&path).and_then(|mut f| f.write_all(text.as_bytes())).expect("write");
    path.display().to_string()
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = write(
        dir.path(),
        "node.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: \"1000\", memory: 1000Gi, pods: \"100000\"}}\n",
    );
    let size = 4 << 20;
    println!("peak heap during each command, as a multiple of its input ({} MiB)", size >> 20);
    println!(
        "{:<28} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "shape", "validate", "snapshot", "status", "simulate", "read only"
    );
    let only = std::env::var("MEMORY_SHAPES").unwrap_or_default();
    for (name, ext, text) in shapes(size) {
        if !name.contains(only.as_str()) {
            continue;
        }
        let file = write(dir.path(), &format!("input.{ext}"), &text);
        let input = text.len();
        drop(text);
        let commands: [Vec<&str>; 4] = [
            vec!["kubectl-gang", "validate", "-f", &file],
            vec!["kubectl-gang", "snapshot", "--cluster", &file],
            vec!["kubectl-gang", "status", "-A", "--cluster", &file],
            vec!["kubectl-gang", "simulate", "--cluster", &node, "-f", &file],
        ];
        let mut row = format!("{name:<28}");
        for args in commands {
            let _profiler = dhat::Profiler::builder().testing().build();
            let before = dhat::HeapStats::get().curr_bytes;
            let out = run(Cli::parse_from(&args));
            let peak = dhat::HeapStats::get().max_bytes.saturating_sub(before);
            drop(out);
            row.push_str(&format!(" {:>8.1}×", peak as f64 / input as f64));
        }
        {
            let _profiler = dhat::Profiler::builder().testing().build();
            let before = dhat::HeapStats::get().curr_bytes;
            let objects = kubectl_gang::input::read(&[file.clone().into()]);
            let peak = dhat::HeapStats::get().max_bytes.saturating_sub(before);
            drop(objects);
            row.push_str(&format!(" {:>8.1}×", peak as f64 / input as f64));
        }
        println!("{row}");
    }

    println!("\nreading alone (input::read, best of 3), µs per KiB at 1 and 4 MiB: flat when linear");
    for (i, (name, ext, _)) in shapes(1 << 20).into_iter().enumerate() {
        if !name.contains(only.as_str()) {
            continue;
        }
        let mut per_kib = Vec::new();
        for size in [1 << 20, 4 << 20] {
            let text = shapes(size).swap_remove(i).2;
            let file = write(dir.path(), &format!("time.{ext}"), &text);
            let best = (0..3)
                .map(|_| {
                    let start = Instant::now();
                    let objects = kubectl_gang::input::read(&[file.clone().into()]).expect("reads");
                    let took = start.elapsed();
                    std::hint::black_box(objects.len());
                    took
                })
                .min()
                .unwrap_or_default();
            per_kib.push(best.as_secs_f64() * 1e6 / (text.len() as f64 / 1024.0));
        }
        println!("{name:<28} {:>8.1} {:>8.1}", per_kib[0], per_kib[1]);
    }

    // 95 nested anchors around ~7.9 MB and no alias: each anchored node is copied when defined.
    let mut anchors = String::new();
    for d in 0..95 {
        anchors.push_str(&format!("{}a{d}: &x{d}\n", "  ".repeat(d)));
    }
    let pad = "  ".repeat(95);
    let mut i = 0;
    while anchors.len() < 7_900_000 {
        anchors.push_str(&format!("{pad}k{i}: v\n"));
        i += 1;
    }
    let file = write(dir.path(), "anchors.yaml", &anchors);
    let input = anchors.len();
    drop(anchors);
    let (peak, took, out) = {
        let _profiler = dhat::Profiler::builder().testing().build();
        let before = dhat::HeapStats::get().curr_bytes;
        let start = Instant::now();
        let out = run(Cli::parse_from(["kubectl-gang", "validate", "-f", &file]));
        let took = start.elapsed();
        (dhat::HeapStats::get().max_bytes.saturating_sub(before), took, out)
    };
    let said = match &out {
        Ok(o) => o.stderr.lines().chain(o.stdout.lines()).next().unwrap_or_default().to_string(),
        Err(e) => format!("{e:#}"),
    };
    println!(
        "\n95 nested anchors, no alias ({:.1} MB): validate took {:.2} s, peak heap {:.0} MiB ({:.1}× the input): {said}",
        input as f64 / 1e6,
        took.as_secs_f64(),
        mib(peak),
        peak as f64 / input as f64
    );

    let brackets = "[".repeat(200_000);
    let file = write(dir.path(), "brackets.yaml", &brackets);
    let start = Instant::now();
    let err = kubectl_gang::input::read(&[file.into()]).expect_err("refused");
    println!("\n200 KB of `[`: refused in {:.2} ms: {err}", start.elapsed().as_secs_f64() * 1e3);
    println!("({:.1} MiB read per shape above)", mib(size));
}
