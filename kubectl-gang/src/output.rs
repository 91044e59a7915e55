//! What a command returns: its text and exit code, which `main` writes (so piping into `head`
//! is never an error, and tests call [`crate::run`] directly).

/// What a command prints and how it exits.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub code: u8,
}

impl Output {
    pub fn ok(stdout: String) -> Self {
        Output { stdout, ..Output::default() }
    }
}
