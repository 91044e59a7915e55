//! Transcript tests: every command and output format on fixture dumps, run as the real binary.
//! Regenerate expected output with `TRYCMD=overwrite cargo test -p kubectl-gang --test cli`.

#[test]
fn transcripts() {
    trycmd::TestCases::new().case("tests/cmd/*.toml");
}

/// Many gangs of `minMember: 0` (each an error) as one JSON List: output larger than a pipe holds.
fn many_invalid_gangs(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
    let items: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
                "metadata": {"name": format!("g{i}"), "namespace": "ml"}, "spec": {"minMember": 0}})
        })
        .collect();
    let path = dir.join("gangs.json");
    std::fs::write(
        &path,
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    )
    .unwrap();
    path
}

/// `| head`: the reader goes away after a few bytes. The command stops without a word and exits
/// with its verdict's code (1 here: every object is invalid), not an error's.
#[test]
fn a_closed_pipe_stops_the_output_quietly() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let file = many_invalid_gangs(dir.path(), 5_000);
    for (args, code, stderr) in [
        (vec!["validate", "-f"], 1, "5000 error(s) in 5000 objects\n"),
        (vec!["snapshot", "--cluster"], 0, "5000 objects\n"),
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-gang"))
            .args(&args)
            .arg(&file)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut head = [0u8; 16];
        child.stdout.take().unwrap().read_exact(&mut head).unwrap();
        // The pipe's read end is closed here, with most of the output (over 200 KB) unwritten.
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), stderr, "{args:?}");
    }
}

/// Any other failed write (a full disk) is an error said once, exit 2.
#[test]
fn a_failed_write_is_one_error_and_exit_2() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = many_invalid_gangs(dir.path(), 10);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-gang"))
        .args(["validate", "-f"])
        .arg(&file)
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "10 error(s) in 10 objects\nerror: writing the output: No space left on device (os error 28)\n"
    );
}
