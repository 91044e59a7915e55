//! Faults a test injects: an error status instead of serving, a request served but its answer
//! lost, another scheduler binding the pod first (a real 409 on the binding), and delays.

use std::time::Duration;

/// What a fault does to a matching request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Answer with this status instead of serving the request, with the reason and message
    /// kube-apiserver uses for it (a 429 carries `Retry-After: 1`).
    Status(u16),
    /// Serve the request, then drop the connection instead of answering: the change is made but
    /// the client never learns it (a lost response).
    LoseResponse,
    /// Before a `pods/binding` is served, bind the pod to this node as another scheduler would:
    /// the request then gets the API server's own 409 (`pod … is already assigned to node …`).
    BoundElsewhere(String),
    /// Hold the request this long, then serve it — also if its client has gone meanwhile (a
    /// slow answer; a client that gives up first does not learn whether it was made).
    Slow(std::time::Duration),
}

/// A fault for the next `times` requests whose method matches and whose path ends with
/// `path_suffix`.
#[derive(Clone, Debug)]
pub struct Fault {
    pub method: String,
    pub path_suffix: String,
    pub kind: FaultKind,
    pub times: usize,
}

/// The fault for this request, if any, counting it as used.
pub fn take(faults: &mut [Fault], method: &str, path: &str) -> Option<FaultKind> {
    let f =
        faults.iter_mut().find(|f| f.times > 0 && f.method == method && path.ends_with(&f.path_suffix))?;
    f.times -= 1;
    Some(f.kind.clone())
}

/// The longest delay that applies to this request.
pub fn delay(delays: &[(String, String, Duration)], method: &str, path: &str) -> Option<Duration> {
    delays
        .iter()
        .filter(|(m, suffix, _)| m == method && path.ends_with(suffix.as_str()))
        .map(|(_, _, d)| *d)
        .max()
}
