//! scheduler-core: the pure heart of kube-gang.
//!
//! Everything that decides lives here: the canonical gang [`model`], the readers for every gang
//! [`dialect`] in use today, [`validate`]ion with field paths, the scheduling cycle
//! [`schedule::schedule`] (`snapshot, config, now -> plan`), and the cycle replayed over time ([`replay`]).
//!
//! **This crate does no I/O and reads no clock.** Time is a parameter; cluster state arrives as a
//! [`model::Snapshot`] (or as Kubernetes objects converted by [`convert`] and [`cluster`]).
//! A test (`tests/purity.rs`) fails if `Cargo.toml` gains a dependency beyond the allowed ones or the
//! source uses a path into the clock, files, the network, processes or the environment.
//!
//! Inside, the modules live in three layers, one folder each, lowest first: [`read`] (objects and
//! files into the model), [`rules`] (validation), [`decide`] (the cycle, its policy and output).
//! Arrows point down only; `cargo xtask tidy` (in `xtask/src/layers.rs`) fails otherwise. The
//! names fixed by `../shared/DESIGN.md` (beside the repository) are in [`labels`].
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod decide;
pub mod read;
pub mod rules;

// The public paths stay flat (`scheduler_core::model`, `scheduler_core::validate`, …): the layers
// are how the crate is organised inside, not something its users need to spell.
pub use decide::{config, plan, provision, replay, schedule};
pub use read::{
    cel, cluster, convert, coverage, crd, dialect, duration, error, hypernode, labels, model, network_layer,
    object, quantity, resources, tree, volume, workload,
};
pub use rules::{admit, prepare, validate};

pub use admit::{GangSet, Gangs, NoGangs, admit, admit_with, opted_in};
pub use config::Config;
pub use error::{FieldError, FieldErrors};
pub use model::{Gang, GangKey, Node, Pod, PodKey, SmolStr, Snapshot, Time};
pub use plan::{Outcome, Plan, Reason};
#[doc(hidden)]
pub use schedule::schedule_reference;
pub use schedule::{schedule, schedule_with_stats};

pub use read::labels::{GROUP, SCHEDULER_NAME, VERSION};
