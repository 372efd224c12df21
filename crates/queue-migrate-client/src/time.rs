//! Instants as the whole API passes them around: [`Millis`], milliseconds since the Unix epoch,
//! UTC — what the dedup claims take, what a route stamp carries
//! (`RouteStamp::at_ms`) and what [`now_ms`] answers. Always compiled, no dependencies.
//!
//! Time is an input: only the edges (a binary, a service's handler) read the clock, through
//! [`now_ms`], and pass the instant down.
//!
//! ```
//! use std::time::Duration;
//! use queue_migrate_client::time::{self, Millis};
//!
//! let now: Millis = time::now_ms();
//! assert!(now > 1_700_000_000_000); // after November 2023
//! assert_eq!(time::millis(Duration::from_secs(90)), 90_000);
//! ```

// Part of the library consumers depend on: every public item is documented.
#![warn(missing_docs)]

use std::time::{Duration, SystemTime};

/// An instant: milliseconds since the Unix epoch, UTC. The one clock type of the API (claims,
/// leases, route stamps, purges); never negative when it comes from [`now_ms`].
pub type Millis = i64;

/// The wall clock, in ms since the epoch (0 if the system clock is before 1970).
pub fn now_ms() -> Millis {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A duration in whole milliseconds, saturating at `i64::MAX`.
pub fn millis(d: Duration) -> Millis {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
