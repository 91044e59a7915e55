//! `cargo xtask sizes [DIR]`: the largest source files (lines) and functions (first to last line)
//! of the workspace's crates, `#[cfg(test)]` modules left out of the functions. Point it at an
//! older checkout (`git archive REV | tar -x -C /tmp/old`) to compare before and after.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::{layers, syntax};

const TOP: usize = 12;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

pub fn print(root: &Path) -> anyhow::Result<()> {
    let mut files = Vec::new();
    for spec in layers::workspace(root).map_err(anyhow::Error::msg)? {
        let src = root.join(&spec.root);
        let src = src.parent().context("a crate root has a directory")?;
        if !files.iter().any(|f: &PathBuf| f.starts_with(src)) {
            rust_files(src, &mut files)?;
        }
    }
    files.sort();
    files.dedup();
    let mut by_lines = Vec::new();
    let mut fns = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let name = f.strip_prefix(root).unwrap_or(f).display().to_string();
        by_lines.push((text.lines().count(), name.clone()));
        let (_, items) = syntax::scan_file(&text).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        for (func, start, end) in syntax::functions(&items) {
            fns.push((end + 1 - start, format!("{name}:{start} {func}")));
        }
    }
    by_lines.sort_by(|a, b| b.cmp(a));
    fns.sort_by(|a, b| b.cmp(a));
    println!("largest files (lines), {} files:", files.len());
    for (n, name) in by_lines.iter().take(TOP) {
        println!("{n:6}  {name}");
    }
    println!("largest functions (lines), {} functions:", fns.len());
    for (n, name) in fns.iter().take(TOP) {
        println!("{n:6}  {name}");
    }
    Ok(())
}
