//! Repository chores. `cargo xtask crd` writes `manifests/base/crd-gang.yaml` from the Rust type;
//! `cargo xtask crd --check` fails when the committed file has drifted from it. `cargo xtask tidy`
//! runs the import check ([`layers`]: arrows point down, no import circles) and fails on any
//! problem; `cargo xtask sizes [DIR]` lists the largest source files and functions.

mod layers;
mod sizes;
mod syntax;

use std::path::{Path, PathBuf};

use anyhow::Context;

const USAGE: &str = "usage: cargo xtask crd [--check] | tidy [WORKSPACE_DIR] | sizes [WORKSPACE_DIR]";

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn crd_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests/base/crd-gang.yaml")
}

/// The CRD as committed: a header, then the YAML rendering of `scheduler_core::crd::gang_crd()`.
fn render() -> anyhow::Result<String> {
    let crd = scheduler_core::crd::gang_crd();
    let yaml = serde_norway::to_string(&crd).context("rendering the CRD")?;
    Ok(format!(
        "# Generated from scheduler-core/src/read/crd.rs by `cargo xtask crd`. Do not edit: change the Rust type\n# and run it again (a test fails when this file drifts).\n{yaml}"
    ))
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["crd"] => {
            let path = crd_path();
            std::fs::write(&path, render()?).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {}", path.display());
            Ok(())
        }
        ["crd", "--check"] => {
            let path = crd_path();
            let committed =
                std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            anyhow::ensure!(
                committed == render()?,
                "{} is out of date: run `cargo xtask crd`",
                path.display()
            );
            Ok(())
        }
        ["tidy"] => tidy(&workspace_root()),
        ["tidy", dir] => tidy(Path::new(dir)),
        ["sizes"] => sizes::print(&workspace_root()),
        ["sizes", dir] => sizes::print(Path::new(dir)),
        _ => anyhow::bail!(USAGE),
    }
}

/// The import check on the workspace at `root`, printed; an error if it found a problem.
fn tidy(root: &Path) -> anyhow::Result<()> {
    let report = layers::check_workspace(root).map_err(anyhow::Error::msg)?;
    for p in &report.problems {
        println!("{p}");
    }
    println!(
        "layers: {} crate roots, {} modules, {} imports resolved; {} problem(s)",
        report.crates,
        report.modules,
        report.edges,
        report.problems.len()
    );
    for (layer, ranks) in layers::CORE {
        let order: Vec<String> = ranks.iter().map(|r| r.join(", ")).collect();
        println!("  scheduler-core {layer}/: {}", order.join(" < "));
    }
    anyhow::ensure!(report.problems.is_empty(), "the import check failed");
    Ok(())
}
