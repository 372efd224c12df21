//! The durable mode: the business key is inserted, under a unique constraint, inside the caller's
//! own SQL transaction — the one that applies the effect — so that the key and the effect commit
//! together or not at all (`docs/design.md#idempotent-consumers-and-the-dedup-window`, durable mode).
//! SQLite and PostgreSQL, through sqlx.
//!
//! ```no_run
//! # async fn demo(pool: sqlx::SqlitePool) -> Result<(), Box<dyn std::error::Error>> {
//! use queue_migrate_client::dedup::sql::{self, Claim, VersionCheck};
//! use queue_migrate_client::dedup::{BusinessKey, PayloadHash};
//! # let now_ms = 0; let payload = serde_json::json!({});
//! let key = BusinessKey::new("order.paid", "4711", "evt-9")?;
//! let hash = PayloadHash::of_json(&payload);
//! let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?; // SQLite: take the write lock first
//! match sql::claim(&mut tx, &key, &hash, now_ms).await? {
//!     Claim::Fresh => {
//!         if let VersionCheck::Accepted = sql::accept_version(&mut tx, "order:4711", 12).await? {
//!             // ... apply the effect with &mut *tx ...
//!         }
//!         tx.commit().await?; // key + effect, atomically; then ack the message
//!     }
//!     Claim::Duplicate => { tx.rollback().await?; /* ack: already applied */ }
//!     Claim::Conflict { .. } => { tx.rollback().await?; /* count, alert, dead-letter */ }
//! }
//! # Ok(()) }
//! ```
//!
//! # Guarantees
//! - Two consumers claiming one key at once, on separate connections: the second `claim` waits for
//!   the first transaction (row lock in PostgreSQL, write lock in SQLite) and then answers
//!   `Duplicate` if it committed, `Fresh` if it rolled back. Exactly one effect commits.
//! - An effect that fails rolls its transaction back, and with it the key: the retry gets `Fresh`.
//!   There is nothing to release.
//! - Keys expire (default [`super::DEFAULT_KEY_TTL`], 90 days). An expired key counts as absent
//!   (`claim` takes it over) whether or not [`purge_expired`] has removed it yet, so behaviour does
//!   not depend on when the purge runs; the purge deletes in bounded batches, each its own short
//!   statement, and never deletes a key that was re-claimed meanwhile.
//! - A key claimed again with another payload hash is `Conflict` (and a `tracing` warning): never
//!   applied, never silently accepted.
//!
//! # Caveats
//! - Claim first in the transaction. In SQLite, begin with `BEGIN IMMEDIATE`
//!   (`pool.begin_with("BEGIN IMMEDIATE")`): a deferred transaction that reads before its first
//!   write can fail with `SQLITE_BUSY` instead of waiting. A long effect holds SQLite's write lock
//!   and other consumers wait up to their busy timeout.
//! - PostgreSQL at `REPEATABLE READ` or `SERIALIZABLE` answers the loser of a race with a
//!   serialization failure instead of `Duplicate`; [`SqlDedupError::is_retryable`] says so: roll
//!   back and redeliver (the retry then sees `Duplicate`).
//!
//! # Schema
//! [`ensure_schema`] creates the two tables if missing; or run [`SQLITE_SCHEMA`] /
//! [`POSTGRES_SCHEMA`] with your own migrations. PostgreSQL:
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS qm_dedup_keys (
//!     key           TEXT   NOT NULL PRIMARY KEY,  -- type:aggregate:event
//!     payload_hash  TEXT   NOT NULL,              -- SHA-256, 64 hex digits
//!     claimed_at_ms BIGINT NOT NULL,
//!     expires_at_ms BIGINT NOT NULL
//! );
//! CREATE INDEX IF NOT EXISTS qm_dedup_keys_expiry ON qm_dedup_keys (expires_at_ms);
//! CREATE TABLE IF NOT EXISTS qm_aggregate_versions (
//!     aggregate TEXT   NOT NULL PRIMARY KEY,
//!     version   BIGINT NOT NULL
//! );
//! ```
//!
//! SQLite: the same columns, both tables `WITHOUT ROWID` (one b-tree each, keyed by the primary
//! key), and no index on `expires_at_ms`. That index was a second b-tree written by every claim:
//! measured, it was most of what a claim cost beyond a bare one-column insert (BENCHMARKS.md,
//! "Durable dedup throughput"). Without it, [`purge_expired`] on SQLite walks the keys in primary
//! key order instead of in expiry order: each step first reads (no write lock; in WAL mode it
//! blocks no one) the next `batch` keys after the previous step's last one, then, if any of them
//! expired, deletes those in one short write statement that re-checks their expiry. A purge run
//! reads the whole table once, `batch` keys per step, so no step holds a read or the write lock
//! for longer than `batch` keys take, however large the table and however few keys expired.
//!
//! Upgrading a SQLite database created with the earlier schema (which had
//! `qm_dedup_keys_expiry`): [`SQLITE_SCHEMA`] drops that index, and [`ensure_schema`] runs it in
//! one `BEGIN IMMEDIATE` transaction, so the upgrade happens once, atomically, and consumers
//! starting together serialise on the write lock. The table itself is unchanged (same
//! columns, same types, same rows), so keys claimed before the upgrade keep deduplicating. A
//! database whose schema is applied by your own migrations and keeps the index also works: the
//! claims pay for the index, the purge does not use it.
//!
//! Upgrade every consumer sharing one SQLite file before an older one restarts or purges: an
//! older consumer's schema creates the index again when it starts (a build over the whole table
//! under the write lock, which the next upgraded consumer drops again), and its purge, when it
//! finds no index, sorts the whole table inside each of its delete statements, holding the write
//! lock meanwhile.

use std::future::Future;
use std::time::Duration;

use sqlx::Row;

use super::{BusinessKey, DEFAULT_KEY_TTL, PayloadHash, millis};
use crate::time::Millis;

#[cfg(feature = "dedup-postgres")]
pub use sqlx::{PgPool, Postgres};
/// The sqlx types this module's API takes, re-exported so that a consumer uses the very sqlx this
/// crate was built with (or depend on `sqlx = "0.9"` with the same database features; the whole
/// crate is [`crate::dedup::sqlx`]).
pub use sqlx::{Pool, Transaction};
#[cfg(feature = "dedup-sqlite")]
pub use sqlx::{Sqlite, SqlitePool};

/// The consumer tables for SQLite (no expiry index: see the module's "Schema"; the `DROP INDEX`
/// upgrades a database created with the earlier schema). [`ensure_schema`] runs it, when the
/// schema is not current, in one `BEGIN IMMEDIATE` transaction; your own migrations run it in
/// theirs.
pub const SQLITE_SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS qm_dedup_keys (
    key           TEXT   NOT NULL PRIMARY KEY,
    payload_hash  TEXT   NOT NULL,
    claimed_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
) WITHOUT ROWID;
DROP INDEX IF EXISTS qm_dedup_keys_expiry;
CREATE TABLE IF NOT EXISTS qm_aggregate_versions (
    aggregate TEXT   NOT NULL PRIMARY KEY,
    version   BIGINT NOT NULL
) WITHOUT ROWID;
";

/// The consumer tables for PostgreSQL (the advisory lock lets consumers starting at once apply it
/// concurrently).
pub const POSTGRES_SCHEMA: &str = "\
BEGIN;
SELECT pg_advisory_xact_lock(7160425370164195);
CREATE TABLE IF NOT EXISTS qm_dedup_keys (
    key           TEXT   NOT NULL PRIMARY KEY,
    payload_hash  TEXT   NOT NULL,
    claimed_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS qm_dedup_keys_expiry ON qm_dedup_keys (expires_at_ms);
CREATE TABLE IF NOT EXISTS qm_aggregate_versions (
    aggregate TEXT   NOT NULL PRIMARY KEY,
    version   BIGINT NOT NULL
);
COMMIT;
";

/// Insert the key, or take over an expired one; 0 rows means a live key exists.
const UPSERT_KEY: &str = "\
INSERT INTO qm_dedup_keys (key, payload_hash, claimed_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4)
ON CONFLICT (key) DO UPDATE SET payload_hash = excluded.payload_hash,
    claimed_at_ms = excluded.claimed_at_ms, expires_at_ms = excluded.expires_at_ms
WHERE qm_dedup_keys.expires_at_ms <= excluded.claimed_at_ms";
const SELECT_HASH: &str = "SELECT payload_hash FROM qm_dedup_keys WHERE key = $1";
#[cfg(feature = "dedup-postgres")]
/// PostgreSQL's purge step, in expiry order through the index. The outer `expires_at_ms` re-check
/// keeps a concurrently re-claimed key (PostgreSQL re-evaluates it on the row's new version).
const PURGE_BATCH: &str = "\
DELETE FROM qm_dedup_keys WHERE key IN (
    SELECT key FROM qm_dedup_keys WHERE expires_at_ms <= $1 ORDER BY expires_at_ms LIMIT $2
) AND expires_at_ms <= $1";
#[cfg(feature = "dedup-sqlite")]
/// SQLite's purge step, part 1 (a read): the next `$2` keys after `$1` in key order: how many, the
/// last of them, and how many of them are expired at `$3`.
const SQLITE_PURGE_SCAN: &str = "\
SELECT COUNT(*), MAX(key), COALESCE(SUM(expires_at_ms <= $3), 0) FROM (
    SELECT key, expires_at_ms FROM qm_dedup_keys WHERE key > $1 ORDER BY key LIMIT $2
)";
#[cfg(feature = "dedup-sqlite")]
/// SQLite's purge step, part 2 (a short write): the expired keys in `($1, $2]`, at most `$4`; the
/// expiry is checked again under the write lock, so a key re-claimed since the scan stays.
const SQLITE_PURGE_DELETE: &str = "\
DELETE FROM qm_dedup_keys WHERE key IN (
    SELECT key FROM qm_dedup_keys
    WHERE key > $1 AND key <= $2 AND expires_at_ms <= $3 ORDER BY key LIMIT $4
)";
const UPSERT_VERSION: &str = "\
INSERT INTO qm_aggregate_versions (aggregate, version) VALUES ($1, $2)
ON CONFLICT (aggregate) DO UPDATE SET version = excluded.version
WHERE qm_aggregate_versions.version < excluded.version";
const SELECT_VERSION: &str = "SELECT version FROM qm_aggregate_versions WHERE aggregate = $1";

/// Errors of the durable mode.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqlDedupError {
    /// The database failed (see [`SqlDedupError::is_retryable`]).
    #[error("dedup database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A stored row this module cannot read (edited by hand?).
    #[error("corrupt dedup row for {key:?}: {detail}")]
    Corrupt {
        /// The key or aggregate.
        key: String,
        /// What is wrong.
        detail: String,
    },
    /// A key vanished between the insert and the read-back twice in a row (a purge racing with
    /// an expired key): retry the message.
    #[error("dedup key {0:?} changed under the claim twice; retry")]
    Unstable(String),
}

impl SqlDedupError {
    /// Whether rolling back and retrying the message is the right answer: a serialization failure
    /// or deadlock (PostgreSQL), a busy or locked database (SQLite), a lost connection or pool
    /// timeout.
    pub fn is_retryable(&self) -> bool {
        match self {
            SqlDedupError::Database(sqlx::Error::Database(e)) => match e.code().as_deref() {
                Some("40001" | "40P01") => true,
                Some(code) => code.parse::<u32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6)),
                None => false,
            },
            SqlDedupError::Database(
                sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed,
            ) => true,
            SqlDedupError::Unstable(_) => true,
            _ => false,
        }
    }
}

/// What [`claim`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The key is new (or its previous claim expired): apply the effect in this transaction and
    /// commit.
    Fresh,
    /// The key was committed before with the same payload: skip the effect; ack the message.
    Duplicate,
    /// The key was committed before with a different payload hash: not applied; count and alert.
    Conflict {
        /// The hash stored with the key.
        stored_hash: PayloadHash,
    },
}

impl Claim {
    /// The metrics outcome (`Fresh` counts as processed once the transaction commits).
    pub fn outcome(&self) -> super::Outcome {
        match self {
            Claim::Fresh => super::Outcome::Processed,
            Claim::Duplicate => super::Outcome::DuplicateBlocked,
            Claim::Conflict { .. } => super::Outcome::Conflict,
        }
    }
}

/// What [`accept_version`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionCheck {
    /// Newer than anything applied to the aggregate: recorded in this transaction; apply it.
    Accepted,
    /// Not newer than the last applied version: do not apply (committing the claim records that the
    /// event was seen); ack.
    Stale {
        /// The last applied version.
        last: i64,
    },
}

impl VersionCheck {
    /// The verdict on a delivery whose claim was fresh: `Accepted` is [`Verdict::Fresh`] (apply
    /// it), `Stale` is [`Verdict::Stale`] (do not apply; commit the claim; ack).
    pub fn verdict(self) -> Verdict {
        match self {
            VersionCheck::Accepted => Verdict::Fresh,
            VersionCheck::Stale { last } => Verdict::Stale { last },
        }
    }
}

/// What to do with one delivery, all checks made ([`admit`]): the one enum a consumer matches
/// on, and [`Verdict::outcome`] the one metrics outcome it counts.
///
/// | verdict | effect | transaction | message | outcome |
/// |---|---|---|---|---|
/// | `Fresh` | apply it, in the transaction | commit | ack after the commit | `processed` |
/// | `Duplicate` | none | roll back | ack | `duplicate_blocked` |
/// | `Conflict` | none | roll back (or commit a record of it) | dead-letter or set aside, ack | `conflict` |
/// | `Stale` | none | commit (records the event as seen) | ack | `stale` |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// New key, and (if versioned) newer than the aggregate's last applied version, which is now
    /// recorded: apply the effect in this transaction and commit.
    Fresh,
    /// The key was committed before with the same payload: already applied; skip, ack.
    Duplicate,
    /// The key was committed before with another payload hash: a producer bug or a key
    /// collision; never applied.
    Conflict {
        /// The hash stored with the key.
        stored_hash: PayloadHash,
    },
    /// A new key, but its version is not newer than the aggregate's last applied one (an event
    /// overtaken by a newer one, e.g. in flight when its slice moved back): do not apply it;
    /// commit so that its claim is kept, ack.
    Stale {
        /// The aggregate's last applied version.
        last: i64,
    },
}

impl Verdict {
    /// The metrics outcome of the delivery (`Fresh` is `processed` once the transaction commits).
    pub fn outcome(&self) -> super::Outcome {
        match self {
            Verdict::Fresh => super::Outcome::Processed,
            Verdict::Duplicate => super::Outcome::DuplicateBlocked,
            Verdict::Conflict { .. } => super::Outcome::Conflict,
            Verdict::Stale { .. } => super::Outcome::Stale,
        }
    }
}

impl From<Claim> for Verdict {
    fn from(claim: Claim) -> Verdict {
        match claim {
            Claim::Fresh => Verdict::Fresh,
            Claim::Duplicate => Verdict::Duplicate,
            Claim::Conflict { stored_hash } => Verdict::Conflict { stored_hash },
        }
    }
}

/// An event's aggregate and its version, for [`admit`]'s order check (versions increase strictly
/// per aggregate). The aggregate, the version-check key, is by convention
/// `<aggregate type>:<aggregate id>` (`order:4711`), as every example writes it: one key per
/// aggregate whose versions increase, and two types' ids never share a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Versioned<'a> {
    /// The aggregate (`order:4711`).
    pub aggregate: &'a str,
    /// The event's version within it.
    pub version: i64,
}

impl<'a> Versioned<'a> {
    /// Version `version` of `aggregate`.
    pub fn new(aggregate: &'a str, version: i64) -> Versioned<'a> {
        Versioned { aggregate, version }
    }
}

mod sealed {
    pub trait Sealed {}
    #[cfg(feature = "dedup-sqlite")]
    impl Sealed for sqlx::Sqlite {}
    #[cfg(feature = "dedup-postgres")]
    impl Sealed for sqlx::Postgres {}
}

/// The databases of the durable mode: [`sqlx::Sqlite`] and [`sqlx::Postgres`]. Sealed; its
/// hidden methods are the per-database statements.
pub trait DedupDatabase: sqlx::Database + sealed::Sealed {
    /// The schema for this database.
    const SCHEMA: &'static str;

    #[doc(hidden)]
    fn upsert_key<'c>(
        conn: &'c mut Self::Connection,
        key: &'c str,
        hash: &'c str,
        now_ms: Millis,
        expires_ms: i64,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'c;

    #[doc(hidden)]
    fn stored_hash<'c>(
        conn: &'c mut Self::Connection,
        key: &'c str,
    ) -> impl Future<Output = Result<Option<String>, sqlx::Error>> + Send + 'c;

    #[doc(hidden)]
    fn upsert_version<'c>(
        conn: &'c mut Self::Connection,
        aggregate: &'c str,
        version: i64,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'c;

    #[doc(hidden)]
    fn stored_version<'c>(
        conn: &'c mut Self::Connection,
        aggregate: &'c str,
    ) -> impl Future<Output = Result<Option<i64>, sqlx::Error>> + Send + 'c;

    /// One step of [`purge_expired`]: PostgreSQL deletes up to `batch` keys expired at `now_ms`;
    /// SQLite looks at the `batch` keys after `after` in key order and deletes the expired among
    /// them (maybe none).
    #[doc(hidden)]
    fn purge_step<'c>(
        pool: &'c Pool<Self>,
        now_ms: Millis,
        batch: i64,
        after: Option<String>,
    ) -> impl Future<Output = Result<PurgeStep, sqlx::Error>> + Send + 'c;

    #[doc(hidden)]
    fn apply_schema<'c>(
        pool: &'c Pool<Self>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'c;
}

/// What one step of a purge did.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PurgeStep {
    /// Keys deleted.
    pub deleted: u64,
    /// Where the next step starts; `None`: the purge is done.
    pub next: Option<String>,
}

#[cfg(feature = "dedup-sqlite")]
/// SQLite: a read looks at the next `batch` keys in key order, then, if any of them expired, one
/// short write deletes those (see the module's "Schema"). Both statements are bounded by `batch`,
/// whatever the size of the table and however few of its keys expired.
async fn sqlite_purge_step(
    pool: &Pool<Sqlite>,
    now_ms: Millis,
    batch: i64,
    after: Option<String>,
) -> Result<PurgeStep, sqlx::Error> {
    // Every stored key is non-empty TEXT (`BusinessKey`), so all of them sort after ''.
    let after = after.unwrap_or_default();
    let (seen, last, expired): (i64, Option<String>, i64) = sqlx::query_as(SQLITE_PURGE_SCAN)
        .bind(&after)
        .bind(batch)
        .bind(now_ms)
        .fetch_one(pool)
        .await?;
    let Some(last) = last else {
        return Ok(PurgeStep {
            deleted: 0,
            next: None,
        });
    };
    let deleted = if expired > 0 {
        sqlx::query(SQLITE_PURGE_DELETE)
            .bind(&after)
            .bind(&last)
            .bind(now_ms)
            .bind(batch)
            .execute(pool)
            .await?
            .rows_affected()
    } else {
        0
    };
    Ok(PurgeStep {
        deleted,
        next: (seen >= batch).then_some(last),
    })
}

#[cfg(feature = "dedup-postgres")]
/// PostgreSQL: the oldest `batch` expired keys through the expiry index.
async fn postgres_purge_step(
    pool: &Pool<Postgres>,
    now_ms: Millis,
    batch: i64,
    _after: Option<String>,
) -> Result<PurgeStep, sqlx::Error> {
    let deleted = sqlx::query(PURGE_BATCH)
        .bind(now_ms)
        .bind(batch)
        .execute(pool)
        .await?
        .rows_affected();
    Ok(PurgeStep {
        deleted,
        // Until a step comes back short; the deleted keys are gone, so no cursor is needed.
        next: (i64::try_from(deleted).unwrap_or(i64::MAX) >= batch).then(String::new),
    })
}

#[cfg(feature = "dedup-sqlite")]
/// Whether a SQLite database has both consumer tables and not the earlier expiry index: then
/// there is nothing to apply.
const SQLITE_SCHEMA_CURRENT: &str = "\
SELECT COUNT(*) = 2 AND NOT EXISTS (
    SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'qm_dedup_keys_expiry'
) FROM sqlite_master WHERE type = 'table' AND name IN ('qm_dedup_keys', 'qm_aggregate_versions')";

#[cfg(feature = "dedup-sqlite")]
/// SQLite: nothing when the schema is current (a read: a consumer starting while another holds
/// a long effect does not wait for the write lock); otherwise the schema (and the upgrade of an
/// earlier one) in one write transaction, which a failure rolls back whole.
async fn sqlite_apply_schema(pool: &Pool<Sqlite>) -> Result<(), sqlx::Error> {
    let (current,): (bool,) = sqlx::query_as(SQLITE_SCHEMA_CURRENT)
        .fetch_one(pool)
        .await?;
    if current {
        return Ok(());
    }
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::raw_sql(SQLITE_SCHEMA).execute(&mut *tx).await?;
    tx.commit().await
}

#[cfg(feature = "dedup-postgres")]
/// PostgreSQL: the schema carries its own transaction and advisory lock.
async fn postgres_apply_schema(pool: &Pool<Postgres>) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(POSTGRES_SCHEMA).execute(pool).await?;
    Ok(())
}

/// One body for both databases: the statements are portable (`$n` placeholders, `ON CONFLICT`),
/// only the connection types and the purge differ.
macro_rules! dedup_database {
    ($db:ty, $schema:expr, $purge_step:path, $apply_schema:path) => {
        impl DedupDatabase for $db {
            const SCHEMA: &'static str = $schema;

            async fn upsert_key<'c>(
                conn: &'c mut <$db as sqlx::Database>::Connection,
                key: &'c str,
                hash: &'c str,
                now_ms: Millis,
                expires_ms: i64,
            ) -> Result<u64, sqlx::Error> {
                Ok(sqlx::query(UPSERT_KEY)
                    .bind(key)
                    .bind(hash)
                    .bind(now_ms)
                    .bind(expires_ms)
                    .execute(&mut *conn)
                    .await?
                    .rows_affected())
            }

            async fn stored_hash<'c>(
                conn: &'c mut <$db as sqlx::Database>::Connection,
                key: &'c str,
            ) -> Result<Option<String>, sqlx::Error> {
                let row = sqlx::query(SELECT_HASH)
                    .bind(key)
                    .fetch_optional(&mut *conn)
                    .await?;
                row.map(|r| r.try_get::<String, _>(0)).transpose()
            }

            async fn upsert_version<'c>(
                conn: &'c mut <$db as sqlx::Database>::Connection,
                aggregate: &'c str,
                version: i64,
            ) -> Result<u64, sqlx::Error> {
                Ok(sqlx::query(UPSERT_VERSION)
                    .bind(aggregate)
                    .bind(version)
                    .execute(&mut *conn)
                    .await?
                    .rows_affected())
            }

            async fn stored_version<'c>(
                conn: &'c mut <$db as sqlx::Database>::Connection,
                aggregate: &'c str,
            ) -> Result<Option<i64>, sqlx::Error> {
                let row = sqlx::query(SELECT_VERSION)
                    .bind(aggregate)
                    .fetch_optional(&mut *conn)
                    .await?;
                row.map(|r| r.try_get::<i64, _>(0)).transpose()
            }

            async fn purge_step(
                pool: &Pool<$db>,
                now_ms: Millis,
                batch: i64,
                after: Option<String>,
            ) -> Result<PurgeStep, sqlx::Error> {
                $purge_step(pool, now_ms, batch, after).await
            }

            async fn apply_schema(pool: &Pool<$db>) -> Result<(), sqlx::Error> {
                $apply_schema(pool).await
            }
        }
    };
}

#[cfg(feature = "dedup-sqlite")]
dedup_database!(
    Sqlite,
    SQLITE_SCHEMA,
    sqlite_purge_step,
    sqlite_apply_schema
);
#[cfg(feature = "dedup-postgres")]
dedup_database!(
    Postgres,
    POSTGRES_SCHEMA,
    postgres_purge_step,
    postgres_apply_schema
);

/// The durable mode with a key TTL other than the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlDedup {
    ttl: Duration,
}

impl Default for SqlDedup {
    fn default() -> Self {
        SqlDedup {
            ttl: DEFAULT_KEY_TTL,
        }
    }
}

impl SqlDedup {
    /// Keys kept for [`DEFAULT_KEY_TTL`] (90 days).
    pub fn new() -> SqlDedup {
        SqlDedup::default()
    }

    /// Keys kept for `ttl` (make it longer than the plan's reprocess margin).
    pub fn with_ttl(ttl: Duration) -> SqlDedup {
        SqlDedup { ttl }
    }

    /// The key TTL.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Claim `key` inside `tx` (see [`claim`]); the key expires `ttl` after `now_ms`.
    ///
    /// # Errors
    /// The database failed (the caller rolls back and retries the message), or a stored row is
    /// unreadable.
    pub async fn claim<DB: DedupDatabase>(
        &self,
        tx: &mut Transaction<'_, DB>,
        key: &BusinessKey,
        payload_hash: &PayloadHash,
        now_ms: Millis,
    ) -> Result<Claim, SqlDedupError> {
        let hash = payload_hash.to_hex();
        let expires = now_ms.saturating_add(millis(self.ttl));
        // Twice at most: a purge can delete an expired key between our insert and our read.
        for _ in 0..2 {
            if DB::upsert_key(&mut **tx, key.as_str(), &hash, now_ms, expires).await? == 1 {
                return Ok(Claim::Fresh);
            }
            let Some(stored) = DB::stored_hash(&mut **tx, key.as_str()).await? else {
                continue;
            };
            let stored_hash =
                PayloadHash::from_hex(&stored).ok_or_else(|| SqlDedupError::Corrupt {
                    key: key.to_string(),
                    detail: format!("payload_hash {stored:?} is not 64 hex digits"),
                })?;
            if stored_hash == *payload_hash {
                return Ok(Claim::Duplicate);
            }
            tracing::warn!(key = %key, stored = %stored_hash, got = %payload_hash, "dedup conflict: same key, different payload; not applied");
            return Ok(Claim::Conflict { stored_hash });
        }
        Err(SqlDedupError::Unstable(key.to_string()))
    }
}

/// Insert `key` with `payload_hash` in the caller's transaction, with the default TTL (90 days).
/// Commit the transaction with the effect's writes; roll it back if the effect fails.
///
/// # Errors
/// See [`SqlDedup::claim`].
pub async fn claim<DB: DedupDatabase>(
    tx: &mut Transaction<'_, DB>,
    key: &BusinessKey,
    payload_hash: &PayloadHash,
    now_ms: Millis,
) -> Result<Claim, SqlDedupError> {
    SqlDedup::new().claim(tx, key, payload_hash, now_ms).await
}

/// One delivery's checks in the caller's transaction: [`claim`] the key (default TTL), then, if
/// it is fresh and `versioned` is given, [`accept_version`]. Match on the [`Verdict`]; count
/// [`Verdict::outcome`]. A delivery from the old broker during a migration:
/// `dedup::admission::Admission` does the same and counts a stale producer's message.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use queue_migrate_client::dedup::sql::{self, Verdict, Versioned};
/// use queue_migrate_client::dedup::{BusinessKey, ConsumerMetrics, PayloadHash, pool};
/// use queue_migrate_client::stamp::RouteLabel;
/// use queue_migrate_client::time;
///
/// let dir = tempfile::tempdir()?;
/// let pool = pool::sqlite(dir.path().join("consumer.db"), pool::PoolSettings::default()).await?;
/// let metrics = ConsumerMetrics::new();
/// let payload = serde_json::json!({"orderId": "4711", "version": 3, "amount": 10});
/// let key = BusinessKey::new("order.paid", "4711", "v3")?;
/// let hash = PayloadHash::of_json(&payload);
/// let versioned = Versioned::new("order:4711", 3); // `<aggregate type>:<aggregate id>`
///
/// for delivery in 0..2 {
///     let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
///     let verdict = sql::admit(&mut tx, &key, &hash, Some(versioned), time::now_ms()).await?;
///     match verdict {
///         Verdict::Fresh => { /* apply the effect with &mut *tx */ tx.commit().await? }
///         Verdict::Stale { .. } => tx.commit().await?, // keep the claim, apply nothing
///         Verdict::Duplicate | Verdict::Conflict { .. } => tx.rollback().await?,
///     }
///     // ack the message here, then count it
///     metrics.record(RouteLabel::New, verdict.outcome());
///     assert_eq!(verdict, if delivery == 0 { Verdict::Fresh } else { Verdict::Duplicate });
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
/// See [`SqlDedup::claim`] and [`accept_version`]: roll back and retry the message.
pub async fn admit<DB: DedupDatabase>(
    tx: &mut Transaction<'_, DB>,
    key: &BusinessKey,
    payload_hash: &PayloadHash,
    versioned: Option<Versioned<'_>>,
    now_ms: Millis,
) -> Result<Verdict, SqlDedupError> {
    match claim(tx, key, payload_hash, now_ms).await? {
        Claim::Fresh => match versioned {
            Some(v) => Ok(accept_version(tx, v.aggregate, v.version).await?.verdict()),
            None => Ok(Verdict::Fresh),
        },
        other => Ok(other.into()),
    }
}

/// Record `version` as the last applied version of `aggregate` if it is newer than the one stored,
/// in the caller's transaction; otherwise answer `Stale` with the stored one. Versions must
/// increase strictly per aggregate; an equal version is stale.
///
/// # Errors
/// The database failed.
pub async fn accept_version<DB: DedupDatabase>(
    tx: &mut Transaction<'_, DB>,
    aggregate: &str,
    version: i64,
) -> Result<VersionCheck, SqlDedupError> {
    if DB::upsert_version(&mut **tx, aggregate, version).await? == 1 {
        return Ok(VersionCheck::Accepted);
    }
    match DB::stored_version(&mut **tx, aggregate).await? {
        Some(last) => Ok(VersionCheck::Stale { last }),
        None => Err(SqlDedupError::Corrupt {
            key: aggregate.to_string(),
            detail: "version row neither inserted nor found".into(),
        }),
    }
}

/// Delete keys expired at `now_ms`, at most `batch` per statement (each its own short transaction,
/// so consumers are never blocked for long). Returns how many were deleted. Run it periodically
/// (e.g. hourly) from one place or several: concurrent purges are safe. PostgreSQL finds the
/// expired keys through its expiry index, until a statement deletes fewer than `batch`; SQLite
/// reads the table once in key order, `batch` keys per step (see the module's "Schema").
///
/// # Errors
/// The database failed (what was deleted before stays deleted).
pub async fn purge_expired<DB: DedupDatabase>(
    pool: &Pool<DB>,
    now_ms: Millis,
    batch: u32,
) -> Result<usize, SqlDedupError> {
    let batch = i64::from(batch.max(1));
    let mut total: usize = 0;
    let mut after = None;
    loop {
        let step = DB::purge_step(pool, now_ms, batch, after).await?;
        total = total.saturating_add(usize::try_from(step.deleted).unwrap_or(usize::MAX));
        match step.next {
            Some(next) => after = Some(next),
            None => return Ok(total),
        }
        tokio::task::yield_now().await;
    }
}

/// Create the consumer tables if they do not exist ([`SQLITE_SCHEMA`] or [`POSTGRES_SCHEMA`]).
/// On SQLite, a database made by an earlier version loses its expiry index here, under the
/// write lock (see the module's "Schema"); a current one is only read.
///
/// # Errors
/// The database failed.
pub async fn ensure_schema<DB: DedupDatabase>(pool: &Pool<DB>) -> Result<(), SqlDedupError> {
    DB::apply_schema(pool).await?;
    Ok(())
}
