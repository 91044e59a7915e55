//! Step 3 of the cycle: the work in order — gangs (and pods of ours outside any gang, as gangs of
//! one) by priority, then gangs already partly running, then creation time, then key: a total
//! order — and the gang groups that are decided together.

use std::cmp::Reverse;
use std::collections::HashMap;

use super::members::Members;
use crate::read::model::{GangKey, Snapshot};

/// A unit of work in the cycle's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unit {
    Gang(usize),
    /// A pod of ours that belongs to no gang: a gang of one.
    Single(usize),
}

/// Every unit of work, in the order the cycle decides them: the gangs, and `singles` (pods of
/// ours outside any gang, pending and not gated).
pub(super) fn units(
    snap: &Snapshot,
    members: &[Members],
    priorities: &[i32],
    singles: &[usize],
) -> Vec<Unit> {
    let mut units = Vec::with_capacity(snap.gangs.len() + singles.len());
    for (g, gang) in snap.gangs.iter().enumerate() {
        let partly = members[g].counts.bound > 0;
        units.push((Reverse(priorities[g]), !partly, gang.created, &gang.key, Unit::Gang(g)));
    }
    for &i in singles {
        let p = &snap.pods[i];
        units.push((Reverse(p.priority), true, p.created, &p.key, Unit::Single(i)));
    }
    units.sort_by(|a, b| (a.0, a.1, a.2, a.3).cmp(&(b.0, b.1, b.2, b.3)));
    units.into_iter().map(|(.., u)| u).collect()
}

/// For each gang, the gangs that must be satisfied in the same cycle (itself included), in the
/// cycle's order. Links are symmetric: naming a gang in `gangGroup` binds both.
pub(super) fn gang_groups(
    snap: &Snapshot,
    priorities: &[i32],
    gang_index: &HashMap<&GangKey, usize>,
) -> Vec<Vec<usize>> {
    let n = snap.gangs.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    for (g, gang) in snap.gangs.iter().enumerate() {
        for other in &gang.gang_group {
            if let Some(&o) = gang_index.get(other) {
                let (a, b) = (find(&mut parent, g), find(&mut parent, o));
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let mut by_root: HashMap<usize, Vec<usize>> = HashMap::new();
    for g in 0..n {
        let r = find(&mut parent, g);
        by_root.entry(r).or_default().push(g);
    }
    let key = |g: usize| (Reverse(priorities[g]), snap.gangs[g].created, &snap.gangs[g].key);
    let mut out = vec![Vec::new(); n];
    for (_, mut group) in by_root {
        group.sort_by(|&a, &b| key(a).cmp(&key(b)));
        for &g in &group {
            out[g] = group.clone();
        }
    }
    out
}
