//! The compiled `stale_producers:` section of a plan (issue 58): the bounds of the built-in
//! guard on producers still writing moved slices to the old broker.

use std::time::Duration;

use serde::Serialize;

/// `stale_producers:`: where the old broker's consumers export their stale-producer counts, and
/// the bounds they check with (`docs/design.md#stale-producers`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StaleProducers {
    /// The source that reads the consumers' `/metrics`.
    pub source: String,
    /// How long after a publish a producer may still write by the generation before it.
    #[serde(with = "crate::plan::duration_serde")]
    pub grace: Duration,
    /// Whether `grace` was derived (`auto`, the default) rather than written.
    pub grace_auto: bool,
    /// How far a producer's clock may be from the controller's (the stamp's time).
    #[serde(with = "crate::plan::duration_serde")]
    pub clock_skew: Duration,
    /// The guard's window: a stale message counted within it trips the guard.
    #[serde(with = "crate::plan::duration_serde")]
    pub window: Duration,
}
