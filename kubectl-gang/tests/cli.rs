//! Transcript tests: every command and output format on fixture dumps, run as the real binary.
//! Regenerate expected output with `TRYCMD=overwrite cargo test -p kubectl-gang --test cli`.

#[test]
fn transcripts() {
    trycmd::TestCases::new().case("tests/cmd/*.toml");
}
