//! Workloads (Job, JobSet, PyTorchJob/MPIJob/TFJob, LeaderWorkerSet, RayCluster, StatefulSet):
//! whether they opted in, what gang shape they imply, injection of gang labels/annotations and
//! `schedulerName` into their pod templates, and expansion into the pods their controller would create.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::FieldError;

/// True when the object (or, when given, its namespace) carries `kube-gang.io/enabled: "true"`.
pub fn is_opted_in(_obj: &Value, _namespace_labels: Option<&BTreeMap<String, String>>) -> bool {
    false
}

/// The object with the gang label, `min-member` annotation, subgroup labels and `schedulerName`
/// written into every pod template (workloads), or the missing `schedulerName` (gang pods).
/// Idempotent; never overwrites what the user set. Unknown kinds come back unchanged.
pub fn inject(obj: &Value) -> Result<Value, Vec<FieldError>> {
    Ok(obj.clone())
}

/// The pods the workload's controller would create, injection applied. A Pod expands to itself.
pub fn expand(_obj: &Value) -> Result<Vec<Value>, Vec<FieldError>> {
    Ok(Vec::new())
}
