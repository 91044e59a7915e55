//! scheduler-core: the pure heart of kube-gang.
//!
//! Everything that decides lives here: the canonical gang [`model`], the readers for every gang
//! [`dialect`] in use today, [`validate`]ion with field paths, the scheduling cycle
//! [`schedule::schedule`] (`snapshot, config, now -> plan`), and simulation over time ([`sim`]).
//!
//! **This crate does no I/O and reads no clock.** Time is a parameter; cluster state arrives as a
//! [`model::Snapshot`] (or as Kubernetes objects converted by [`convert`] and [`cluster`]).
//! A test (`tests/purity.rs`) fails if `Cargo.toml` gains a dependency that does I/O.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod decide;
pub mod read;
pub mod rules;

// The public paths stay flat (`scheduler_core::model`, `scheduler_core::validate`, …): the layers
// are how the crate is organised inside, not something its users need to spell.
pub use decide::{config, plan, schedule, sim};
pub use read::{cluster, convert, crd, dialect, error, model, quantity, resources, workload};
pub use rules::{admit, validate};

pub use admit::admit;
pub use config::Config;
pub use error::{FieldError, FieldErrors};
pub use model::{Gang, GangKey, Node, Pod, PodKey, Snapshot, Time};
pub use plan::{Outcome, Plan, Reason};
pub use schedule::schedule;
#[doc(hidden)]
pub use schedule::schedule_reference;

/// The API group of kube-gang's own objects and the prefix of its labels and annotations.
pub const GROUP: &str = "kube-gang.io";
/// The `Gang` CRD's version.
pub const VERSION: &str = "v1alpha1";
/// The default `spec.schedulerName` gang members carry.
pub const SCHEDULER_NAME: &str = "gang-scheduler";

/// Labels and annotations with fixed names (DESIGN.md, "API").
pub mod names {
    /// Pod label: the gang (same namespace) this pod belongs to.
    pub const LABEL_GANG: &str = "kube-gang.io/gang";
    /// Pod label: the leaf subgroup this pod belongs to.
    pub const LABEL_SUBGROUP: &str = "kube-gang.io/subgroup";
    /// Workload or namespace label that opts in to injection: `"true"`.
    pub const LABEL_ENABLED: &str = "kube-gang.io/enabled";
    /// CRD-less gang: minimum members.
    pub const ANNOTATION_MIN_MEMBER: &str = "kube-gang.io/min-member";
    /// CRD-less gang: expected total members.
    pub const ANNOTATION_TOTAL_MEMBER: &str = "kube-gang.io/total-member";
    /// CRD-less gang: `Strict` or `NonStrict`.
    pub const ANNOTATION_MODE: &str = "kube-gang.io/mode";
    /// CRD-less gang: schedule timeout as a duration (`90s`, `15m`, `2h`).
    pub const ANNOTATION_TIMEOUT: &str = "kube-gang.io/timeout";
    /// CRD-less gang: required topology key.
    pub const ANNOTATION_TOPOLOGY_KEY: &str = "kube-gang.io/topology-key";
    /// CRD-less gang: comma-separated `namespace/name` gangs that must be satisfied together.
    pub const ANNOTATION_GANG_GROUP: &str = "kube-gang.io/gang-group";
}
