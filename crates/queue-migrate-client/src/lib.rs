//! queue-migrate-client: the producer's and the consumer's side of a queue-migrate migration.
//!
//! A producer routes each message by its aggregate key to the old broker or the new one, as the
//! routing document of the migration says, and stamps it; a consumer applies each message's
//! effect once, whichever broker it came from. The controller (`migrate`, the `queue-migrate`
//! crate) moves the document along; this crate only follows it.
//!
//! Producer:
//! - [`slice`](mod@slice) — the slice function of an aggregate key (byte-for-byte the same in
//!   the Node.js and Python clients).
//! - `routing` — the routing document and `route(key)` (feature `routing`).
//! - `router` — `Router`: follows the document (the daemon's long-poll or a file), lock-free
//!   (feature `router`).
//! - `stamp` — the route stamp a message carries, and the published-messages counter (feature
//!   `routing`).
//!
//! Consumer:
//! - `stale` — on the old broker: a message written by a producer still routing a moved slice by
//!   an older generation after the grace, counted by producer and slice; unstamped ones apart
//!   (feature `routing`).
//! - `dedup` — apply a message's effect once: durable claims on SQLite or PostgreSQL in the
//!   effect's transaction (features `dedup-sqlite`, `dedup-postgres`; `dedup` is both), a Redis
//!   mode (`dedup-redis`), a window mode, the consumer's metrics.
//! - `probe` — recognise the controller's synthetic probes and count them (feature `routing`).
//!
//! Both:
//! - [`time`] — [`time::Millis`], the one clock type of the API: instants are inputs; only the
//!   edges read the clock.
//!
//! Two modules are shared with the `queue-migrate` crate and left out of these docs: `redact`
//! (the redaction of anything that may hold a secret: URLs, client errors) and `metrics_text`
//! (the Prometheus text format the counters render).
//!
//! Cargo features (none by default; each set builds alone): `routing` (no async runtime),
//! `router`, `dedup-sqlite`, `dedup-postgres`, `dedup`, `dedup-redis`. See the README for a
//! producer and a consumer, and `examples/`. On docs.rs (built with every feature) each item
//! says which feature it needs.

// docs.rs builds with `--cfg docsrs` on nightly: the feature labels below (and on every other
// item gated by a feature) are shown there; nothing changes in a normal build.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod slice;
pub mod time;

// Used by this crate's modules and by queue-migrate's; not what a producer or a consumer calls.
#[doc(hidden)]
pub mod metrics_text;
#[doc(hidden)]
pub mod redact;

#[cfg(feature = "routing")]
#[cfg_attr(docsrs, doc(cfg(feature = "routing")))]
pub mod probe;
#[cfg(feature = "routing")]
#[cfg_attr(docsrs, doc(cfg(feature = "routing")))]
pub mod routing;
#[cfg(feature = "routing")]
#[cfg_attr(docsrs, doc(cfg(feature = "routing")))]
pub mod stale;
#[cfg(feature = "routing")]
#[cfg_attr(docsrs, doc(cfg(feature = "routing")))]
pub mod stamp;

#[cfg(feature = "router")]
#[cfg_attr(docsrs, doc(cfg(feature = "router")))]
pub mod router;

#[cfg(any(
    feature = "dedup-sqlite",
    feature = "dedup-postgres",
    feature = "dedup-redis"
))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(
        feature = "dedup-sqlite",
        feature = "dedup-postgres",
        feature = "dedup-redis"
    )))
)]
pub mod dedup;
