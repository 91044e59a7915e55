//! `gang-scheduler`: see the crate docs in `lib.rs`.

fn main() -> std::process::ExitCode {
    gang_scheduler::main()
}
