//! Instants: the client's clock type ([`Millis`], [`now_ms`], [`millis`]: the client library's
//! `time`, re-exported), what the daemon's one clock (`daemon::DaemonClock`) is made of
//! ([`Clock`], [`DbClock`]; the bridge follows a [`DbClock`] too), and the text forms people read
//! and write: durations (`30d 1h 10m`), instants as JS writes them (`2026-03-02T10:15:00.000Z`,
//! the dead-letter envelope's form: [`parse_timestamp`], [`format_timestamp`]), and RFC 3339 and
//! `1h 30m` (feature `controller`, with `humantime`).
//!
//! Time is an input: only the edges (a binary, a service's handler) read the clock, through
//! [`now_ms`], and pass the instant down.

mod db_clock;
mod iso8601;

pub use db_clock::{ClockStep, DbClock, STEP_MS};
pub use iso8601::{format_timestamp, parse_timestamp};
pub use queue_migrate_client::time::{Millis, millis, now_ms};

use std::time::Duration;

#[cfg(feature = "controller")]
use std::time::UNIX_EPOCH;

/// A clock in ms since the epoch, shared between tasks (the demo runs the daemon on a faster one).
pub type Clock = std::sync::Arc<dyn Fn() -> Millis + Send + Sync>;

const DURATION_UNITS: [(u64, &str); 4] = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];

/// A duration as people write it: `Duration` → `"30d 1h 10m"`; zero is `"0s"`. The text always
/// parses back to the same value with `humantime::parse_duration` (whose own formatter writes
/// months of 30.44 days).
pub fn format_duration(d: Duration) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut secs = d.as_secs();
    for (unit, name) in DURATION_UNITS {
        let n = secs / unit;
        if n > 0 {
            parts.push(format!("{n}{name}"));
            secs %= unit;
        }
    }
    let nanos = d.subsec_nanos();
    for (n, name) in [
        (nanos / 1_000_000, "ms"),
        (nanos / 1_000 % 1_000, "us"),
        (nanos % 1_000, "ns"),
    ] {
        if n > 0 {
            parts.push(format!("{n}{name}"));
        }
    }
    if parts.is_empty() {
        "0s".to_string()
    } else {
        parts.join(" ")
    }
}

#[cfg(feature = "controller")]
/// RFC 3339 (UTC, second precision) for an instant in ms.
pub fn rfc3339(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(feature = "controller")]
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

#[cfg(feature = "controller")]
/// A duration in ms as a person reads it (`1h 30m`), at second precision.
pub fn human_ms(ms: i64) -> String {
    let secs = u64::try_from(ms.max(0) / 1000).unwrap_or(0);
    format_duration(Duration::from_secs(secs))
}

#[cfg(feature = "controller")]
/// A duration as a person reads it (`1h 30m`), at second precision: [`human_ms`] of
/// [`millis`].
pub fn human(d: Duration) -> String {
    human_ms(millis(d))
}

#[cfg(all(test, feature = "controller"))]
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
