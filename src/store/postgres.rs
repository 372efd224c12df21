//! The PostgreSQL side of the [`SqlStore`], for a team sharing one store: connecting, its
//! schema (`migrations/postgres/`), a daemon's session limits, and the statements only
//! PostgreSQL spells this way (see `Statements` in `store/sql.rs`).
//!
//! Same semantics as SQLite: every transition is one transaction, conditional on the version
//! the caller read (`UPDATE ... WHERE version = $n`, a loser gets [`StoreError::Conflict`]);
//! the journal is append-only (a trigger refuses UPDATE, DELETE and TRUNCATE). Text is ordered
//! bytewise (`COLLATE "C"`), as SQLite orders it, whatever the database's collation.

use std::str::FromStr;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};

use super::Result;
#[cfg(doc)]
use super::StoreError;
use super::sql::{Db, Pool, SqlStore, Statements};

pub use super::pg_session::{Keepalives, SessionLimits, is_lock_timeout};

/// A store on PostgreSQL: the [`SqlStore`] (kept as a name for the callers that open one).
pub type PgStore = SqlStore;

/// The schema, embedded so that an installed binary needs no files beside it.
pub(super) const SCHEMA: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../../migrations/postgres/0001_init.sql"),
    ),
    (
        2,
        "generations index",
        include_str!("../../migrations/postgres/0002_generations_index.sql"),
    ),
    (
        3,
        "gate memory",
        include_str!("../../migrations/postgres/0003_gate_memory.sql"),
    ),
    (
        4,
        "scrape points by time",
        include_str!("../../migrations/postgres/0004_scrape_points_by_time.sql"),
    ),
    (
        5,
        "scrapes",
        include_str!("../../migrations/postgres/0005_scrapes.sql"),
    ),
    (
        6,
        "publish error generation",
        include_str!("../../migrations/postgres/0006_publish_error_generation.sql"),
    ),
    (
        7,
        "gate memory revision",
        include_str!("../../migrations/postgres/0007_gate_memory_revision.sql"),
    ),
    (
        8,
        "dlq",
        include_str!("../../migrations/postgres/0008_dlq.sql"),
    ),
    (
        9,
        "retention",
        include_str!("../../migrations/postgres/0009_retention.sql"),
    ),
    (
        10,
        "lease epochs",
        include_str!("../../migrations/postgres/0010_lease_epochs.sql"),
    ),
    (
        12,
        "no data cause",
        include_str!("../../migrations/postgres/0012_no_data_cause.sql"),
    ),
    (
        13,
        "dlq one decision per group",
        include_str!("../../migrations/postgres/0013_dlq_one_decision.sql"),
    ),
    (
        14,
        "outbox",
        include_str!("../../migrations/postgres/0014_outbox.sql"),
    ),
    (
        15,
        "judge ledger",
        include_str!("../../migrations/postgres/0015_judge_ledger.sql"),
    ),
    (
        16,
        "largest partition",
        include_str!("../../migrations/postgres/0016_largest_partition.sql"),
    ),
];

/// Connect to the database at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=..]`
/// or `postgresql://...`; the database must exist) and apply the migrations of `schema` (a
/// prefix of [`SCHEMA`]) that it lacks.
///
/// # Errors
/// The database cannot be reached or its schema cannot be applied.
pub(super) async fn open_applying(url: &str, schema: &super::sql::Schema) -> Result<SqlStore> {
    let options = PgConnectOptions::from_str(url)
        .map_err(|e| super::malformed(url, &e))?
        .application_name("queue-migrate")
        // PostgreSQL's NOTICEs (`relation "_sqlx_migrations" already exists, skipping` at
        // every start, from the schema's `IF NOT EXISTS`) are not sent: sqlx relays each
        // one as a log line. Warnings and errors still are.
        .options([("client_min_messages", "warning")]);
    // One plain connection first: a wrong host, port or password fails at once (a pool
    // retries until its acquire timeout, 30 s of silence).
    PgConnection::connect_with(&options).await?.close().await?;
    let pool = pool_options(super::sql::DEFAULT_STATEMENT_DEADLINE)
        .connect_with(options)
        .await?;
    // Takes an advisory lock: stores opening at once apply the schema once.
    super::sql::migrator(schema).run(&pool).await?;
    Ok(SqlStore::on(Pool::Postgres(pool)))
}

impl SqlStore {
    /// This store, its sessions opened again with `limits` (a daemon's: see [`SessionLimits`]),
    /// on PostgreSQL; SQLite has no other session to wait for but its own file's lock, bounded
    /// by its busy timeout.
    ///
    /// # Errors
    /// The database cannot be reached.
    ///
    /// Each statement is cut on the client's side ([`SqlStore::with_statement_deadline`]) a
    /// little after the server's `statement_timeout` would end it
    /// ([`SessionLimits::client_deadline`]): a live server always answers first; a connection
    /// that stopped answering is dropped then.
    pub async fn with_session_limits(self, limits: &SessionLimits) -> Result<SqlStore> {
        let Pool::Postgres(pool) = &self.db.pool else {
            return Ok(self);
        };
        let deadline = limits.client_deadline();
        let options = (*pool.connect_options()).clone().options(limits.settings());
        let fresh = pool_options(deadline).connect_with(options).await?;
        pool.close().await;
        Ok(SqlStore {
            db: Db {
                pool: Pool::Postgres(fresh),
                deadline,
            },
            ..self
        })
    }
}

pub use super::held::PING_DEADLINE;

/// How much longer than the server's `statement_timeout` a daemon's statement may take on the
/// client's side ([`SessionLimits::client_deadline`]): for the server's answer to arrive, and
/// for a connection or two gone silent to be skipped when one is acquired.
pub const ANSWER_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

/// The pool every PostgreSQL store opens (issue 54: a dead connection is dropped, never waited
/// on): at most 4 connections; an acquisition waits at most `deadline`. The store takes each
/// connection through [`super::held::Held`]: pinged before it is handed out and after it is
/// given back, each ping cut at [`PING_DEADLINE`]; a connection that does not answer, or whose
/// statement was cut at its deadline ([`super::sql::within`]), is closed by dropping its
/// socket, on TLS too (sqlx's own close flushes rustls, which waits on a silent peer), and its
/// place in the pool is freed at once. The pool itself tests nothing: a connection its own
/// test found broken would be closed by that flush.
///
/// TCP keepalives: sqlx 0.9 opens the socket itself and exposes none of the client's
/// keepalive options (`PgConnectOptions` has no such setting), so the client relies on these
/// deadlines; the server's keepalives are set per session ([`SessionLimits`],
/// `tcp_keepalives_*`).
pub(crate) fn pool_options(deadline: std::time::Duration) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(deadline)
        .test_before_acquire(false)
}

impl SessionLimits {
    /// How long a daemon's statement may take on the client's side: the server's
    /// `statement_timeout` plus [`ANSWER_MARGIN`].
    pub fn client_deadline(&self) -> std::time::Duration {
        self.statement_timeout + ANSWER_MARGIN
    }
}

/// A round's scrapes (`$1` names, `$2` sources, `$3` instants, `$4` samples), one row each; a
/// scrape already stored keeps its samples of the series not given again, as SQLite's
/// `MERGE_SCRAPE` does.
pub(super) const INSERT_SCRAPES: &str = "INSERT INTO scrapes (migration, source, at, samples) \
     SELECT * FROM UNNEST($1::TEXT[], $2::TEXT[], $3::BIGINT[], $4::TEXT[]) \
     ON CONFLICT (migration, source, at) DO UPDATE SET samples = (\
     SELECT COALESCE(json_agg(e), '[]')::TEXT FROM (\
     SELECT e FROM json_array_elements(scrapes.samples::JSON) AS o(e) WHERE e->>1 NOT IN \
     (SELECT n->>1 FROM json_array_elements(EXCLUDED.samples::JSON) AS x(n)) \
     UNION ALL SELECT n FROM json_array_elements(EXCLUDED.samples::JSON) AS x(n)) AS m(e))";

/// The scrapes of a source stored after an instant, joined into one text (see
/// [`super::dialect::scrapes_after`]).
/// The bytes of the samples [`SCRAPES_AFTER`] would join, in all and of the largest row.
pub(super) const SCRAPES_AFTER_SIZE: &str = "SELECT \
     CAST(COALESCE(SUM(octet_length(samples)), 0) AS BIGINT) AS total, \
     CAST(COALESCE(MAX(octet_length(samples)), 0) AS BIGINT) AS largest \
     FROM scrapes WHERE migration = $1 AND source = $2 AND at > $3";

pub(super) const SCRAPES_AFTER: &str = "SELECT '[' || string_agg('[' || at || ',' || samples \
     || ']', ',') || ']' FROM scrapes WHERE migration = $1 AND source = $2 AND at > $3";

/// Each source's scrapes older than its retention (`$1` names, `$2` sources, `$3` the
/// instants each keeps from), for many sources in one statement.
pub(super) const PRUNE_SCRAPES: &str = "DELETE FROM scrapes t \
     USING UNNEST($1::TEXT[], $2::TEXT[], $3::BIGINT[]) AS k(migration, source, keep_from) \
     WHERE t.migration = k.migration AND t.source = k.source AND t.at < k.keep_from";

/// The statements PostgreSQL spells its own way.
pub(super) const STATEMENTS: Statements = Statements {
    // Text ordered bytewise, as SQLite orders it.
    latest_evaluations: r#"SELECT * FROM gate_memory WHERE migration = $1
     AND step_entered = $2 ORDER BY at, gate COLLATE "C", kind COLLATE "C""#,
    fleet_memory: r#"SELECT g.* FROM gate_memory g JOIN migrations m
     ON m.name = g.migration AND m.entered_at = g.step_entered
     ORDER BY g.migration COLLATE "C", g.at, g.gate COLLATE "C", g.kind COLLATE "C""#,
    retain_evaluations: "DELETE FROM gate_evaluations WHERE id IN (SELECT id \
     FROM gate_evaluations WHERE at < $1 AND ($2::TEXT IS NULL OR migration = $2) \
     ORDER BY at LIMIT $3)",
    retained_evaluations_count: "SELECT COUNT(*) FROM gate_evaluations \
     WHERE at < $1 AND ($2::TEXT IS NULL OR migration = $2)",
    retain_memory: "DELETE FROM gate_memory t USING (SELECT g.migration, \
     g.step_entered, g.gate, g.kind FROM gate_memory g JOIN migrations m ON m.name = g.migration \
     WHERE g.step_entered <> m.entered_at AND g.at < $1 AND ($2::TEXT IS NULL OR m.name = $2) \
     LIMIT $3) d WHERE t.migration = d.migration AND t.step_entered = d.step_entered \
     AND t.gate = d.gate AND t.kind = d.kind",
    retained_memory_count: "SELECT COUNT(*) FROM gate_memory g JOIN migrations m \
     ON m.name = g.migration WHERE g.step_entered <> m.entered_at AND g.at < $1 \
     AND ($2::TEXT IS NULL OR m.name = $2)",
    retain_scrapes: "DELETE FROM scrapes t USING (SELECT s.migration, s.source, s.at \
     FROM scrapes s JOIN migrations m ON m.name = s.migration WHERE m.state = $4 AND s.at < $1 \
     AND ($2::TEXT IS NULL OR m.name = $2) LIMIT $3) d \
     WHERE t.migration = d.migration AND t.source = d.source AND t.at = d.at",
    retained_scrapes_count: "SELECT COUNT(*) FROM scrapes s JOIN migrations m \
     ON m.name = s.migration WHERE m.state = $3 AND s.at < $1 AND ($2::TEXT IS NULL OR m.name = $2)",
    // Delivered rows only: an undelivered one is what the next leader announces.
    retain_outbox: "DELETE FROM outbox t USING (SELECT migration, seq FROM outbox \
     WHERE delivered_at IS NOT NULL AND created_at < $1 AND ($2::TEXT IS NULL OR migration = $2) \
     ORDER BY created_at LIMIT $3) d WHERE t.migration = d.migration AND t.seq = d.seq",
    retained_outbox_count: "SELECT COUNT(*) FROM outbox WHERE delivered_at IS NOT NULL \
     AND created_at < $1 AND ($2::TEXT IS NULL OR migration = $2)",
};
