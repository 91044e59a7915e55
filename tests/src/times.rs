//! Times as the API server writes them.

use k8s_openapi::jiff::Timestamp;

/// A `metav1.Time` as the API server writes it.
pub fn format_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A `metav1.MicroTime` as the API server writes it.
pub fn format_micro(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}
