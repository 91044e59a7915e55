//! What the pods placed in a cycle took of volumes, beside the capacity the [`super::ledger`]
//! counts: a claim's volume chosen (a static PV, or provisioning on a node), the static PVs taken,
//! the ReadWriteOncePod claims in use, and per node the inline disks mounted and the volumes
//! attached. A [`super::ledger::Txn`] carries what one tentative placement took, the
//! [`super::ledger::Ledger`] what the cycle committed: so members placed earlier in a step, and
//! pods placed earlier in the cycle, count for the volume filters ([`super::volumes`]) as they
//! count for capacity. Plain data, cloned with the transaction it belongs to; only pods whose
//! volumes depend on other placements write to it.

use std::collections::{BTreeMap, BTreeSet};

use super::devices::{Allocated, DeviceIx};
use crate::read::model::ObjectKey;
use crate::read::model::volume::Disk;

/// The volume chosen for an unbound claim.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Choice {
    /// A static PV, by name.
    Pv(String),
    /// Provisioning, on this node (by index).
    Provision(usize),
}

/// A volume a node attaches: (driver, handle).
pub(crate) type Attached = (String, String);

/// What placements took of volumes (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Booked {
    /// Unbound claims given a volume, and by which pod.
    claims: BTreeMap<ObjectKey, (Choice, usize)>,
    /// Static PVs chosen.
    pvs: BTreeSet<String>,
    /// ReadWriteOncePod claims in use → the pod using them.
    rwop: BTreeMap<ObjectKey, usize>,
    /// Node → the inline disks mounted there, with their pods.
    disks: BTreeMap<usize, Vec<(Disk, usize)>>,
    /// Node → the volumes attached there.
    attached: BTreeMap<usize, BTreeSet<Attached>>,
    /// ResourceClaims allocated, and for which pod.
    allocations: BTreeMap<ObjectKey, (Allocated, usize)>,
    /// The devices those allocations took (admin access takes none).
    devices: BTreeSet<DeviceIx>,
    /// ResourceClaims → the pods added to their `reservedFor` (the pod an allocation is made for
    /// included): a set, so absorbing a transaction that holds what it was cloned from counts
    /// each once.
    reserved: BTreeMap<ObjectKey, BTreeSet<usize>>,
}

/// Nothing taken (what a transaction that took no volumes reads as).
pub(crate) static NOTHING: Booked = Booked::new();

impl Booked {
    pub const fn new() -> Self {
        Booked {
            claims: BTreeMap::new(),
            pvs: BTreeSet::new(),
            rwop: BTreeMap::new(),
            disks: BTreeMap::new(),
            attached: BTreeMap::new(),
            allocations: BTreeMap::new(),
            devices: BTreeSet::new(),
            reserved: BTreeMap::new(),
        }
    }

    /// Adds everything `other` took (a nested attempt that succeeded, or a commit).
    pub fn absorb(&mut self, other: Booked) {
        self.claims.extend(other.claims);
        self.pvs.extend(other.pvs);
        self.rwop.extend(other.rwop);
        for (n, disks) in other.disks {
            self.disks.entry(n).or_default().extend(disks);
        }
        for (n, attached) in other.attached {
            self.attached.entry(n).or_default().extend(attached);
        }
        self.allocations.extend(other.allocations);
        self.devices.extend(other.devices);
        for (claim, pods) in other.reserved {
            self.reserved.entry(claim).or_default().extend(pods);
        }
    }

    /// The volume `claim` was given, and to which pod.
    pub fn claim(&self, claim: &ObjectKey) -> Option<&(Choice, usize)> {
        self.claims.get(claim)
    }

    pub fn pv_taken(&self, pv: &str) -> bool {
        self.pvs.contains(pv)
    }

    /// The pod using ReadWriteOncePod `claim`.
    pub fn rwop(&self, claim: &ObjectKey) -> Option<usize> {
        self.rwop.get(claim).copied()
    }

    /// The inline disks mounted on node `n`, with their pods.
    pub fn disks(&self, n: usize) -> &[(Disk, usize)] {
        self.disks.get(&n).map_or(&[], Vec::as_slice)
    }

    /// The volumes attached to node `n`.
    pub fn attached_on(&self, n: usize) -> impl Iterator<Item = &Attached> {
        self.attached.get(&n).into_iter().flatten()
    }

    /// `claim` given `choice` for pod `p`.
    pub fn choose(&mut self, claim: ObjectKey, choice: Choice, p: usize) {
        if let Choice::Pv(pv) = &choice {
            self.pvs.insert(pv.clone());
        }
        self.claims.insert(claim, (choice, p));
    }

    pub fn use_rwop(&mut self, claim: ObjectKey, p: usize) {
        self.rwop.insert(claim, p);
    }

    pub fn mount(&mut self, n: usize, disk: Disk, p: usize) {
        self.disks.entry(n).or_default().push((disk, p));
    }

    pub fn attach(&mut self, n: usize, volume: Attached) {
        self.attached.entry(n).or_default().insert(volume);
    }

    /// The allocation made for `claim` in this cycle, and for which pod.
    pub fn allocation(&self, claim: &ObjectKey) -> Option<&(Allocated, usize)> {
        self.allocations.get(claim)
    }

    /// Whether an allocation of this cycle took device `ix`.
    pub fn device_taken(&self, ix: DeviceIx) -> bool {
        self.devices.contains(&ix)
    }

    /// `claim` allocated `a` for pod `p` (and reserved for it).
    pub fn allocate(&mut self, claim: ObjectKey, a: Allocated, p: usize) {
        self.devices.extend(a.devices.iter().filter(|d| !d.2).map(|d| d.1));
        self.reserved.entry(claim.clone()).or_default().insert(p);
        self.allocations.insert(claim, (a, p));
    }

    /// Pod `p` added to `claim`'s `reservedFor`.
    pub fn reserve(&mut self, claim: ObjectKey, p: usize) {
        self.reserved.entry(claim).or_default().insert(p);
    }

    /// The pods added to `claim`'s `reservedFor`.
    pub fn reserved(&self, claim: &ObjectKey) -> Option<&BTreeSet<usize>> {
        self.reserved.get(claim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_absorbed_with_what_it_was_cloned_from_counts_each_reservation_once() {
        let claim = ObjectKey::new("ml", "net");
        let mut group = Booked::new();
        group.reserve(claim.clone(), 1);
        // A gang of the group is tried on a clone of the group's transaction, then absorbed.
        let mut step = group.clone();
        step.reserve(claim.clone(), 2);
        group.absorb(step.clone());
        assert_eq!(group.reserved(&claim).map(BTreeSet::len), Some(2));
        group.absorb(step);
        assert_eq!(group.reserved(&claim).map(BTreeSet::len), Some(2));
    }
}
