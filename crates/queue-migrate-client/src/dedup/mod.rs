//! Idempotent consumers: deduplicate by the business key, in one of three modes, and count every
//! outcome by route (`docs/design.md#idempotent-consumers-and-the-dedup-window`).
//!
//! | mode | module | guarantee | for |
//! |---|---|---|---|
//! | durable | [`sql`] | the key commits with the effect in the caller's transaction, or neither does; a duplicate of any age up to the key's expiry (default 90 days) is detected | effects in the same SQLite/PostgreSQL database |
//! | Redis | `redis` (feature `dedup-redis`) | processing/completed states; a short lease on "processing" so a crashed consumer blocks a key for seconds, not days; completed keys kept for the key TTL | effects outside SQL |
//! | window | [`window`] | in memory, one process, duplicates within the window (minutes) only: a reprocess older than the window is **not** detected | high volume where duplicates arrive within minutes and nothing replays older messages |
//!
//! Whatever the mode, the key is the business identity (`type:aggregate:event`, see [`key`]),
//! never the broker's message id: during a migration the same message arrives by two paths with two
//! different broker ids, and a producer's retry gets a new id for the same intent.
//!
//! # Two interfaces, and why
//! The Redis and window modes share [`LeaseDedup`]: `begin` takes a lease, the effect runs, then
//! `complete` (or `release` when it failed, so the retry can apply it). The durable mode cannot
//! take that shape: its guarantee comes from inserting the key inside the *caller's own*
//! transaction, next to the effect's writes, so [`sql::claim`] takes `&mut Transaction` and there
//! is nothing to complete or release — commit is completion, rollback is release. A trait method
//! that owned its own transaction would split the key from the effect and reopen the race the
//! seed describes (both consumers check, both apply).
//!
//! # Effects that leave the system
//! Local dedup cannot protect a call to another service: if the process dies after the call and
//! before the key is committed or completed, the message is redelivered and the call is made
//! again. Pass [`BusinessKey::idempotency_key`] to that service (an `Idempotency-Key` header) so
//! that it deduplicates on its side.
//!
//! # Out-of-order events
//! A message in flight when a slice moves back can arrive after a newer one of the same aggregate;
//! [`sql::accept_version`] rejects an event older than the last applied version, in the same
//! transaction as the effect.

// Part of the library consumers depend on: every public item is documented.
#![warn(missing_docs)]

#[cfg(any(feature = "dedup-sqlite", feature = "dedup-postgres"))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "dedup-sqlite", feature = "dedup-postgres")))
)]
pub mod admission;
mod hash;
pub mod key;
pub mod metrics;
#[cfg(any(feature = "dedup-sqlite", feature = "dedup-postgres"))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "dedup-sqlite", feature = "dedup-postgres")))
)]
pub mod pool;
#[cfg(feature = "dedup-redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "dedup-redis")))]
pub mod redis;
#[cfg(any(feature = "dedup-sqlite", feature = "dedup-postgres"))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "dedup-sqlite", feature = "dedup-postgres")))
)]
pub mod sql;
pub mod window;

/// The sqlx this crate was built with (0.9, with the databases of the enabled `dedup-*`
/// features): use it for the effect's own queries so that its `Transaction` is the one
/// [`sql::claim`] takes, without a separate `sqlx` dependency to keep in step.
#[cfg(any(feature = "dedup-sqlite", feature = "dedup-postgres"))]
pub use sqlx;

use std::future::Future;
use std::time::Duration;

pub use crate::time::Millis;
pub use hash::PayloadHash;
pub use key::BusinessKey;
pub use metrics::{ConsumerMetrics, Outcome};

/// How long a key is kept by default: longer than any plausible reprocess
/// (`docs/design.md#idempotent-consumers-and-the-dedup-window`), short
/// enough that the table does not grow without bound.
pub const DEFAULT_KEY_TTL: Duration = Duration::from_secs(90 * 24 * 3600);
/// How long a "processing" lease lasts by default before another consumer may take the key.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// Errors of the generic helper [`process_once`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError<S, E> {
    /// The dedup store failed before anything was applied: retry the message later.
    #[error("dedup store: {0}")]
    Store(S),
    /// The effect failed; the key was released (or its lease will expire): retry the message.
    #[error("effect failed: {0}")]
    Effect(E),
    /// The effect was applied but its completion could not be recorded (the lease was lost or the
    /// store failed). Ack the message: a redelivery after the lease expires would apply it again,
    /// which only the business key passed on to the effect's target can prevent.
    #[error("effect applied but not recorded as completed: {0}")]
    NotRecorded(S),
}

/// A "processing" claim on a key, held while the effect runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    key: BusinessKey,
    hash: PayloadHash,
    token: String,
}

impl Lease {
    /// A lease (for implementations of [`LeaseDedup`]).
    pub fn new(key: BusinessKey, hash: PayloadHash, token: String) -> Lease {
        Lease { key, hash, token }
    }
    /// The key held.
    pub fn key(&self) -> &BusinessKey {
        &self.key
    }
    /// The payload hash the key was claimed with.
    pub fn hash(&self) -> &PayloadHash {
        &self.hash
    }
    /// The holder's token (unique per claim).
    pub fn token(&self) -> &str {
        &self.token
    }
}

/// What [`LeaseDedup::begin`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begin {
    /// Nobody had the key: apply the effect, then `complete` (or `release` if it failed).
    Fresh(Lease),
    /// Already completed with the same payload: skip the effect, ack the message.
    Duplicate,
    /// Another consumer holds the key and has not finished: do not ack; retry later (if it crashes
    /// its lease expires and the retry takes the key).
    InProgress,
    /// The key is known with a different payload hash: a producer bug or a key collision. Not
    /// applied, not silently accepted: count it, log it, dead-letter or alert.
    Conflict {
        /// The hash stored with the key.
        stored_hash: PayloadHash,
    },
}

impl Begin {
    /// The metrics outcome of a message that got this answer (`Fresh` counts as processed once the
    /// effect is applied).
    pub fn outcome(&self) -> Outcome {
        match self {
            Begin::Fresh(_) => Outcome::Processed,
            Begin::Duplicate => Outcome::DuplicateBlocked,
            Begin::InProgress => Outcome::InProgressRetry,
            Begin::Conflict { .. } => Outcome::Conflict,
        }
    }
}

/// The modes that hold a lease while the effect runs: Redis and the in-memory window.
///
/// `now_ms` is the caller's clock (milliseconds since the Unix epoch); the Redis mode ignores it
/// (TTLs run on the server's clock).
pub trait LeaseDedup: Send + Sync {
    /// The mode's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Claim `key` for processing, unless it is completed, held, or known with another hash.
    fn begin(
        &self,
        key: &BusinessKey,
        hash: &PayloadHash,
        now_ms: Millis,
    ) -> impl Future<Output = Result<Begin, Self::Error>> + Send;

    /// Mark the key completed (kept for the mode's TTL or window). Fails if the lease was lost to
    /// another consumer (it expired and was taken).
    fn complete(
        &self,
        lease: &Lease,
        now_ms: Millis,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Give the key back after a failed effect, so that a retry applies it. Deletes only this
    /// lease's own claim: `Ok(false)` if it had expired or belongs to someone else now.
    fn release(&self, lease: &Lease) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// Extend the lease of a long effect by the mode's lease duration from now. `Ok(false)` if the
    /// lease is no longer this holder's.
    fn extend(
        &self,
        lease: &Lease,
        now_ms: Millis,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;
}

/// What [`process_once`] did with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Processed<T> {
    /// The effect ran (once) and the key is completed.
    Applied(T),
    /// Already completed: nothing ran; ack.
    Duplicate,
    /// Held by another consumer: nothing ran; do not ack, retry later.
    InProgress,
    /// Known with another payload hash: nothing ran.
    Conflict {
        /// The hash stored with the key.
        stored_hash: PayloadHash,
    },
}

impl<T> Processed<T> {
    /// The metrics outcome.
    pub fn outcome(&self) -> Outcome {
        match self {
            Processed::Applied(_) => Outcome::Processed,
            Processed::Duplicate => Outcome::DuplicateBlocked,
            Processed::InProgress => Outcome::InProgressRetry,
            Processed::Conflict { .. } => Outcome::Conflict,
        }
    }
}

/// The lease protocol in one call: begin; on `Fresh` run `effect`, then complete — or release if
/// the effect failed, so that the retry applies it. `clock` gives `now_ms` at each step.
///
/// # Errors
/// See [`ProcessError`]: each variant says whether the effect ran and what to do with the message.
pub async fn process_once<D, T, E, Fut>(
    dedup: &D,
    key: &BusinessKey,
    hash: &PayloadHash,
    clock: impl Fn() -> Millis,
    effect: impl FnOnce() -> Fut,
) -> Result<Processed<T>, ProcessError<D::Error, E>>
where
    D: LeaseDedup,
    Fut: Future<Output = Result<T, E>>,
{
    let lease = match dedup
        .begin(key, hash, clock())
        .await
        .map_err(ProcessError::Store)?
    {
        Begin::Fresh(lease) => lease,
        Begin::Duplicate => return Ok(Processed::Duplicate),
        Begin::InProgress => return Ok(Processed::InProgress),
        Begin::Conflict { stored_hash } => return Ok(Processed::Conflict { stored_hash }),
    };
    match effect().await {
        Ok(value) => {
            dedup
                .complete(&lease, clock())
                .await
                .map_err(ProcessError::NotRecorded)?;
            Ok(Processed::Applied(value))
        }
        Err(e) => {
            if let Err(release) = dedup.release(&lease).await {
                tracing::warn!(key = %key, error = %release, "cannot release the key after a failed effect; it frees itself when its lease expires");
            }
            Err(ProcessError::Effect(e))
        }
    }
}

pub(crate) use crate::time::millis;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hex_round_trip() {
        let h = PayloadHash::of_bytes(b"abc");
        assert_eq!(
            h.to_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(PayloadHash::from_hex(&h.to_hex()), Some(h));
        assert_eq!(PayloadHash::from_hex(&h.to_hex().to_uppercase()), Some(h));
        assert_eq!(PayloadHash::from_hex("ab"), None);
        assert_eq!(PayloadHash::from_hex(&"zz".repeat(32)), None);
        assert_eq!(PayloadHash::from_hex(&"é".repeat(32)), None);
    }

    #[test]
    fn json_hash_ignores_key_order_whitespace_and_the_route_stamp() {
        let a = json!({"orderId": "4711", "amount": 10, "lines": [{"b": 1, "a": 2}],
                       "route": {"broker": "rabbitmq", "route": "old"}});
        let b: serde_json::Value = serde_json::from_str(
            r#"{ "lines": [ {"a": 2, "b": 1} ], "amount": 10,
                 "route": {"broker": "nats", "route": "new"}, "orderId": "4711" }"#,
        )
        .unwrap();
        assert_eq!(PayloadHash::of_json(&a), PayloadHash::of_json(&b));
        let c = json!({"orderId": "4711", "amount": 11, "lines": [{"b": 1, "a": 2}]});
        assert_ne!(PayloadHash::of_json(&a), PayloadHash::of_json(&c));
        // A nested "route" is business content.
        let d = json!({"x": {"route": 1}});
        let e = json!({"x": {"route": 2}});
        assert_ne!(PayloadHash::of_json(&d), PayloadHash::of_json(&e));
        // Canonical form is the compact, sorted JSON.
        assert_eq!(
            PayloadHash::of_json(&json!({"b": [1, "x"], "a": null})),
            PayloadHash::of_bytes(br#"{"a":null,"b":[1,"x"]}"#)
        );
    }
}
