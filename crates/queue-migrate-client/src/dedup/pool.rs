//! Opening the database of the durable mode the way [`super::sql`] needs it, and creating its
//! tables.
//!
//! | | SQLite ([`sqlite`], feature `dedup-sqlite`) | PostgreSQL ([`postgres`], feature `dedup-postgres`) |
//! |---|---|---|
//! | journal | WAL: readers never block the writer, a purge's reads block no claim | the server's |
//! | busy | waits up to `busy_timeout` (default 30 s) for the write lock instead of failing with `SQLITE_BUSY` | row locks wait; no timeout needed |
//! | durability | `synchronous = FULL` (sqlx's default): a committed key survives a power cut | the server's |
//! | pool | `max_connections` (default 4): one writer at a time in SQLite, a few for reads | `max_connections` (default 4) |
//! | tables | [`super::sql::ensure_schema`] unless `ensure_schema` is false | the same |
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use queue_migrate_client::dedup::pool::{self, PoolSettings};
//! use queue_migrate_client::dedup::sqlx; // the sqlx this crate uses
//!
//! let dir = tempfile::tempdir()?;
//! let pool = pool::sqlite(dir.path().join("consumer.db"), PoolSettings::default()).await?;
//! let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode").fetch_one(&pool).await?;
//! assert_eq!(mode, "wal");
//! # Ok(()) }
//! ```

use std::time::Duration;

#[cfg(feature = "dedup-postgres")]
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
#[cfg(feature = "dedup-sqlite")]
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use super::sql::SqlDedupError;

/// How to open the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolSettings {
    /// Connections in the pool (at least 1). Default 4.
    pub max_connections: u32,
    /// SQLite: how long a statement waits for the write lock before `SQLITE_BUSY`. Make it longer
    /// than the longest effect transaction. Default 30 s. (Ignored by PostgreSQL.)
    pub busy_timeout: Duration,
    /// How long `pool.begin()` waits for a free connection. Default 30 s.
    pub acquire_timeout: Duration,
    /// Create the dedup tables if missing ([`super::sql::ensure_schema`]). Default true; false if
    /// your own migrations carry [`super::sql::SQLITE_SCHEMA`] / [`super::sql::POSTGRES_SCHEMA`].
    pub ensure_schema: bool,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            max_connections: 4,
            busy_timeout: Duration::from_secs(30),
            acquire_timeout: Duration::from_secs(30),
            ensure_schema: true,
        }
    }
}

impl PoolSettings {
    /// With `n` connections in the pool (at least 1).
    pub fn with_max_connections(mut self, n: u32) -> PoolSettings {
        self.max_connections = n;
        self
    }

    /// With this SQLite busy timeout (ignored by PostgreSQL).
    pub fn with_busy_timeout(mut self, timeout: Duration) -> PoolSettings {
        self.busy_timeout = timeout;
        self
    }

    /// With this wait for a free connection.
    pub fn with_acquire_timeout(mut self, timeout: Duration) -> PoolSettings {
        self.acquire_timeout = timeout;
        self
    }

    /// Creating the dedup tables if missing (`true`, the default) or not.
    pub fn with_ensure_schema(mut self, ensure: bool) -> PoolSettings {
        self.ensure_schema = ensure;
        self
    }
}

/// Open (creating it if missing) the SQLite database at `path` in WAL mode with the busy timeout
/// and pool size of `settings`, and create the dedup tables unless told not to. A connection is not
/// pinged before each use: SQLite's is a thread of this process, and the ping a round trip to it
/// that checks nothing.
///
/// # Errors
/// The file cannot be opened or created, or the schema cannot be applied.
#[cfg(feature = "dedup-sqlite")]
pub async fn sqlite(
    path: impl AsRef<std::path::Path>,
    settings: PoolSettings,
) -> Result<SqlitePool, SqlDedupError> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(settings.busy_timeout);
    let pool = SqlitePoolOptions::new()
        .max_connections(settings.max_connections.max(1))
        .acquire_timeout(settings.acquire_timeout)
        .test_before_acquire(false)
        .connect_with(options)
        .await?;
    if settings.ensure_schema {
        super::sql::ensure_schema(&pool).await?;
    }
    Ok(pool)
}

/// Connect to the PostgreSQL database at `url` (`postgres://user:password@host/db`; TLS as the
/// URL's `sslmode` says, through rustls) with the pool size of `settings`, and create the dedup
/// tables unless told not to.
///
/// # Errors
/// The URL is malformed, the server cannot be reached or refuses, or the schema cannot be
/// applied. The error never contains the URL's password (sqlx does not print it).
#[cfg(feature = "dedup-postgres")]
pub async fn postgres(url: &str, settings: PoolSettings) -> Result<PgPool, SqlDedupError> {
    let options: PgConnectOptions = url.parse()?;
    let pool = PgPoolOptions::new()
        .max_connections(settings.max_connections.max(1))
        .acquire_timeout(settings.acquire_timeout)
        .connect_with(options)
        .await?;
    if settings.ensure_schema {
        super::sql::ensure_schema(&pool).await?;
    }
    Ok(pool)
}
