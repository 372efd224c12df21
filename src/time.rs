//! Instants as the controller passes them around: milliseconds since the Unix epoch, UTC.
//!
//! Time is an input: only the edges (the CLI, the daemon) read the clock, through [`now_ms`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The wall clock, in ms since the epoch. Only binaries call this.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// RFC 3339 (UTC, second precision) for an instant in ms.
pub fn rfc3339(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Parse an RFC 3339 instant into ms.
///
/// # Errors
/// The text is not RFC 3339, or is before the epoch.
pub fn parse_rfc3339(text: &str) -> Result<i64, String> {
    let t = humantime::parse_rfc3339_weak(text).map_err(|e| format!("{text:?}: {e}"))?;
    let d = t
        .duration_since(UNIX_EPOCH)
        .map_err(|_| format!("{text:?} is before 1970"))?;
    i64::try_from(d.as_millis()).map_err(|_| format!("{text:?} is too far away"))
}

/// A duration in ms as a person reads it (`1h 30m`), at second precision.
pub fn human_ms(ms: i64) -> String {
    let secs = u64::try_from(ms.max(0) / 1000).unwrap_or(0);
    crate::plan::duration_serde::format(Duration::from_secs(secs))
}

/// A duration in whole milliseconds, saturating at `i64::MAX`.
pub fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A duration as a person reads it (`1h 30m`), at second precision: [`human_ms`] of
/// [`millis`].
pub fn human(d: Duration) -> String {
    human_ms(millis(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_at_second_precision() {
        let ms = 1_764_460_800_000;
        assert_eq!(rfc3339(ms), "2025-11-30T00:00:00Z");
        assert_eq!(parse_rfc3339(&rfc3339(ms)), Ok(ms));
        assert!(parse_rfc3339("yesterday").is_err());
    }
}
