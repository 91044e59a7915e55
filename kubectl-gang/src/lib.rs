//! `kubectl gang`: what waits and why, would it fit, is it valid — against a live cluster or a dump.
//!
//! This file only dispatches: [`run`] hands a parsed command line to its command's module, each of
//! which builds its answer as text and returns it with an exit code ([`Output`]); `main` writes it.
//! The modules, lowest first: `cli`, `text`, `output`, `yaml` < `input`, `selector`, `table`,
//! `live`, `map` < `world` < the commands (`status`, `simulate`, `validate`, `snapshot`, `complete`,
//! `demo`). The re-exports below are for users outside the crate (`main`, tests, benches).

pub mod cli;
pub mod complete;
pub mod demo;
pub mod input;
pub mod live;
pub mod map;
pub mod output;
pub mod selector;
pub mod simulate;
pub mod snapshot;
pub mod status;
pub mod table;
pub mod text;
pub mod validate;
pub mod world;
pub mod yaml;

pub use cli::{Cli, Command, Format, Global};
pub use output::Output;
pub use text::{COLOURS, age, error_text, escape_controls, may_colour, write_escaped};
pub use world::{World, load, now, policy, runtime};

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<Output> {
    let g = &cli.global;
    match cli.command {
        Command::Status(args) => status::run(g, &args),
        Command::Simulate(args) => simulate::run(g, &args),
        Command::Validate(args) => validate::run(g, &args),
        Command::Snapshot => snapshot::run(g),
        Command::Completion { shell } => Ok(Output::ok(complete::script(shell))),
        Command::Complete { words } => complete::candidates(g, &words),
        Command::Demo => Ok(Output::ok(demo::run(&demo::Options { color: table::color_enabled() })?)),
    }
}
