//! Repository chores. `cargo xtask crd` writes `manifests/base/crd-gang.yaml` from the Rust type;
//! `cargo xtask crd --check` fails when the committed file has drifted from it.

use std::path::PathBuf;

use anyhow::Context;

const USAGE: &str = "usage: cargo xtask crd [--check]";

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
        _ => anyhow::bail!(USAGE),
    }
}
