//! Layer 1, reading: Kubernetes objects and files into the canonical model.
//!
//! Label syntax and well-known names, durations, quantities and effective requests, object
//! identity, the model itself and its subgroup tree, conversion of core Kubernetes objects, every
//! gang dialect, opt-in workloads, the `Gang` CRD type and the assembly of a whole cluster.
//! Nothing here may use the layers above it ([`crate::rules`], [`crate::decide`]), and inside it a
//! module uses only those of lower rank: `error`, `labels`, `coverage`, `duration`, `quantity`, `object` <
//! `resources` < `model` < `tree`, `crd`, `volume`, `hypernode`, `network_layer`, `cel` < `convert`, `dialect` < `workload` < `cluster`. The
//! import check (`cargo xtask tidy`, table `CORE` in `xtask/src/layers.rs`) fails when one does.

pub mod cel;
pub mod cluster;
pub mod convert;
pub mod coverage;
pub mod crd;
pub mod dialect;
pub mod duration;
pub mod error;
pub mod hypernode;
pub mod labels;
pub mod model;
pub mod network_layer;
pub mod object;
pub mod quantity;
pub mod resources;
pub mod tree;
pub mod volume;
pub mod workload;
