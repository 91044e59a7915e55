//! The wall clock, read at the edge: the core takes time as a parameter, and the loop and the
//! election both read it here.

use scheduler_core::model::Time;

/// The wall clock, as the core reads time.
pub(crate) fn wall_clock() -> Time {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    Time(ms)
}
