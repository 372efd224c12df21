//! The Redis mode, for effects that are not in SQL: the processing/completed states of an
//! idempotent consumer (`docs/design.md#idempotent-consumers-and-the-dedup-window`, window mode),
//! with an atomic claim and a release that only its holder can make.
//!
//! One Redis key per business key, `{prefix}{key}`, holding either
//! - `p|<token>|<payload hash>` — being processed, with a short lease (default 30 s, `PX`): a
//!   consumer that crashes mid-effect blocks the key for the lease, not for the whole dedup window;
//! - `c|<payload hash>` — completed, kept for the key TTL (default 90 days).
//!
//! # Guarantees
//! - `begin` is one Lua script (read, then `SET ... PX` only if absent): two consumers on separate
//!   connections never both get `Fresh` for a live key.
//! - `release` and `complete` compare the holder's random token inside a Lua script before they
//!   touch the key, so a consumer whose lease expired can never delete or overwrite the claim of the
//!   consumer that took the key after it.
//! - `complete` after a lease expired succeeds if nobody took the key meanwhile, and fails with
//!   [`RedisDedupError::LeaseLost`] if someone did (the effect may then run twice: size the lease
//!   above the effect's worst duration, or [`LeaseDedup::extend`] it, and pass the business key on
//!   to the effect's target as its idempotency key).
//! - Redis TTLs run on the server's clock; the `now_ms` arguments are ignored.
//! - Durability is Redis's: without AOF/replication, a Redis restart forgets completed keys.
//!
//! Compiled, not run here (it needs a Redis server; `tests/integration/library/dedup_redis.rs` runs the same steps
//! against a real one):
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use queue_migrate_client::dedup::redis::RedisDedup;
//! use queue_migrate_client::dedup::{Begin, BusinessKey, LeaseDedup, PayloadHash};
//! use queue_migrate_client::time;
//!
//! let dedup = RedisDedup::connect("redis://127.0.0.1:6379").await?
//!     .with_prefix(format!("qm:doc:{}:", time::now_ms()));
//! let key = BusinessKey::new("order.paid", "4711", "v3")?;
//! let hash = PayloadHash::of_bytes(b"payload");
//! match dedup.begin(&key, &hash, time::now_ms()).await? {
//!     Begin::Fresh(lease) => {
//!         // apply the effect; then complete (or release if it failed)
//!         dedup.complete(&lease, time::now_ms()).await?;
//!     }
//!     Begin::Duplicate => { /* ack */ }
//!     Begin::InProgress => { /* do not ack: redelivered later */ }
//!     Begin::Conflict { .. } => { /* dead-letter, alert */ }
//! }
//! assert_eq!(dedup.begin(&key, &hash, time::now_ms()).await?, Begin::Duplicate);
//! # Ok(()) }
//! ```

use std::time::Duration;

use redis::Script;
use redis::aio::{ConnectionLike, MultiplexedConnection};

use super::{
    Begin, BusinessKey, DEFAULT_KEY_TTL, DEFAULT_LEASE, Lease, LeaseDedup, Millis, PayloadHash,
    millis,
};

/// The default prefix of the Redis keys.
pub const DEFAULT_PREFIX: &str = "qm:dedup:";

/// Read the state; claim it with a lease only if absent. Returns the existing value or nil.
const BEGIN: &str = r"
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
";
/// Completed if the claim is ours (1) or gone (2); someone else's claim is left alone (0).
const COMPLETE: &str = r"
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 2
end
return 0
";
/// Delete the claim only if it is ours.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";
/// Extend the lease only if it is ours.
const EXTEND: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
";

/// Errors of the Redis mode.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisDedupError {
    /// Redis failed or could not be reached: retry the message later.
    #[error("dedup redis error: {0}")]
    Redis(#[from] redis::RedisError),
    /// A value under a dedup key that this module did not write.
    #[error("corrupt dedup value at {key:?}: {value:?}")]
    Corrupt {
        /// The Redis key.
        key: String,
        /// The value found (cut at 120 characters).
        value: String,
    },
    /// The lease expired and another consumer took the key before this one completed.
    #[error("lease on {key} was lost: it expired and another consumer took the key")]
    LeaseLost {
        /// The business key.
        key: String,
    },
    /// The operating system's random source failed (no token can be made).
    #[error("cannot draw a random lease token: {0}")]
    Random(String),
}

/// The Redis mode over a connection `C` (a [`MultiplexedConnection`] by default, or e.g. a
/// `ConnectionManager`); cloned per call.
#[derive(Clone)]
pub struct RedisDedup<C = MultiplexedConnection> {
    conn: C,
    prefix: String,
    lease: Duration,
    completed_ttl: Duration,
    begin: Script,
    complete: Script,
    release: Script,
    extend: Script,
}

impl<C> std::fmt::Debug for RedisDedup<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisDedup")
            .field("prefix", &self.prefix)
            .field("lease", &self.lease)
            .field("completed_ttl", &self.completed_ttl)
            .finish_non_exhaustive()
    }
}

impl RedisDedup<MultiplexedConnection> {
    /// Connect to `url` (`redis://[user:password@]host:port[/db]`).
    ///
    /// # Errors
    /// The URL is invalid or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<RedisDedup<MultiplexedConnection>, RedisDedupError> {
        let client = redis::Client::open(url)?;
        let conn = client.get_multiplexed_async_connection().await?;
        Ok(RedisDedup::new(conn))
    }
}

impl<C> RedisDedup<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Over an open connection, with the default prefix, lease (30 s) and TTL (90 days).
    pub fn new(conn: C) -> RedisDedup<C> {
        RedisDedup {
            conn,
            prefix: DEFAULT_PREFIX.to_string(),
            lease: DEFAULT_LEASE,
            completed_ttl: DEFAULT_KEY_TTL,
            begin: Script::new(BEGIN),
            complete: Script::new(COMPLETE),
            release: Script::new(RELEASE),
            extend: Script::new(EXTEND),
        }
    }

    /// Another prefix for the Redis keys (one per consumer group sharing a Redis).
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> RedisDedup<C> {
        self.prefix = prefix.into();
        self
    }

    /// Another "processing" lease: above the effect's worst duration, far below the TTL.
    pub fn with_lease(mut self, lease: Duration) -> RedisDedup<C> {
        self.lease = lease;
        self
    }

    /// How long completed keys are kept (make it longer than the plan's reprocess margin).
    pub fn with_completed_ttl(mut self, ttl: Duration) -> RedisDedup<C> {
        self.completed_ttl = ttl;
        self
    }

    /// The Redis key of a business key.
    pub fn redis_key(&self, key: &BusinessKey) -> String {
        format!("{}{}", self.prefix, key.as_str())
    }

    fn processing(lease: &Lease) -> String {
        format!("p|{}|{}", lease.token(), lease.hash().to_hex())
    }

    fn ms(d: Duration) -> i64 {
        millis(d).max(1)
    }

    async fn begin_once(
        &self,
        key: &BusinessKey,
        hash: &PayloadHash,
    ) -> Result<Begin, RedisDedupError> {
        let mut token = [0u8; 16];
        getrandom::fill(&mut token).map_err(|e| RedisDedupError::Random(e.to_string()))?;
        let token: String = token.iter().map(|b| format!("{b:02x}")).collect();
        let lease = Lease::new(key.clone(), *hash, token);
        let rkey = self.redis_key(key);
        let mut conn = self.conn.clone();
        let existing: Option<String> = self
            .begin
            .key(&rkey)
            .arg(Self::processing(&lease))
            .arg(Self::ms(self.lease))
            .invoke_async(&mut conn)
            .await?;
        let Some(value) = existing else {
            return Ok(Begin::Fresh(lease));
        };
        let corrupt = || RedisDedupError::Corrupt {
            key: rkey.clone(),
            value: value.chars().take(120).collect(),
        };
        let (completed, stored) = if let Some(h) = value.strip_prefix("c|") {
            (true, h)
        } else if let Some(rest) = value.strip_prefix("p|") {
            (false, rest.rsplit_once('|').ok_or_else(corrupt)?.1)
        } else {
            return Err(corrupt());
        };
        let stored_hash = PayloadHash::from_hex(stored).ok_or_else(corrupt)?;
        if stored_hash != *hash {
            tracing::warn!(key = %key, stored = %stored_hash, got = %hash, "dedup conflict: same key, different payload; not applied");
            return Ok(Begin::Conflict { stored_hash });
        }
        Ok(if completed {
            Begin::Duplicate
        } else {
            Begin::InProgress
        })
    }
}

impl<C> LeaseDedup for RedisDedup<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    type Error = RedisDedupError;

    async fn begin(
        &self,
        key: &BusinessKey,
        hash: &PayloadHash,
        _now_ms: Millis,
    ) -> Result<Begin, RedisDedupError> {
        self.begin_once(key, hash).await
    }

    async fn complete(&self, lease: &Lease, _now_ms: Millis) -> Result<(), RedisDedupError> {
        let mut conn = self.conn.clone();
        let done: i64 = self
            .complete
            .key(self.redis_key(lease.key()))
            .arg(Self::processing(lease))
            .arg(format!("c|{}", lease.hash().to_hex()))
            .arg(Self::ms(self.completed_ttl))
            .invoke_async(&mut conn)
            .await?;
        match done {
            1 => Ok(()),
            2 => {
                tracing::warn!(key = %lease.key(), "completed after the lease expired (nobody had taken the key)");
                Ok(())
            }
            _ => Err(RedisDedupError::LeaseLost {
                key: lease.key().to_string(),
            }),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool, RedisDedupError> {
        let mut conn = self.conn.clone();
        let deleted: i64 = self
            .release
            .key(self.redis_key(lease.key()))
            .arg(Self::processing(lease))
            .invoke_async(&mut conn)
            .await?;
        Ok(deleted == 1)
    }

    async fn extend(&self, lease: &Lease, _now_ms: Millis) -> Result<bool, RedisDedupError> {
        let mut conn = self.conn.clone();
        let extended: i64 = self
            .extend
            .key(self.redis_key(lease.key()))
            .arg(Self::processing(lease))
            .arg(Self::ms(self.lease))
            .invoke_async(&mut conn)
            .await?;
        Ok(extended == 1)
    }
}
