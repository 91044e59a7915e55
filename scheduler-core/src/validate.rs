//! (being written)

/// How deep a subgroup tree may nest below the root.
pub const MAX_SUBGROUP_DEPTH: usize = 4;
/// How many subgroups one gang may have.
pub const MAX_SUBGROUPS: usize = 64;
