//! The SQLite side of the [`SqlStore`]: opening a database file (WAL mode), its schema
//! (`migrations/sqlite/`), and the statements only SQLite spells this way (see `Statements`
//! in `store/sql.rs`).

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

use super::sql::{Pool, SqlStore, Statements};
use super::{Result, StoreError};

/// A store on SQLite: the [`SqlStore`] (kept as a name for the callers that open one).
pub type SqliteStore = SqlStore;

/// The schema, embedded so that an installed binary needs no files beside it.
pub(super) const SCHEMA: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../../migrations/sqlite/0001_init.sql"),
    ),
    (
        2,
        "dlq",
        include_str!("../../migrations/sqlite/0002_dlq.sql"),
    ),
    (
        3,
        "generations index",
        include_str!("../../migrations/sqlite/0003_generations_index.sql"),
    ),
    (
        4,
        "gate memory",
        include_str!("../../migrations/sqlite/0004_gate_memory.sql"),
    ),
    (
        5,
        "scrape points by time",
        include_str!("../../migrations/sqlite/0005_scrape_points_by_time.sql"),
    ),
    (
        6,
        "scrapes",
        include_str!("../../migrations/sqlite/0006_scrapes.sql"),
    ),
    (
        7,
        "publish error generation",
        include_str!("../../migrations/sqlite/0007_publish_error_generation.sql"),
    ),
    (
        8,
        "gate memory revision",
        include_str!("../../migrations/sqlite/0008_gate_memory_revision.sql"),
    ),
    (
        9,
        "retention",
        include_str!("../../migrations/sqlite/0009_retention.sql"),
    ),
    (
        10,
        "dlq replays",
        include_str!("../../migrations/sqlite/0010_dlq_replays.sql"),
    ),
    (
        11,
        "lease epochs",
        include_str!("../../migrations/sqlite/0011_lease_epochs.sql"),
    ),
    (
        12,
        "no data cause",
        include_str!("../../migrations/sqlite/0012_no_data_cause.sql"),
    ),
    (
        13,
        "dlq one decision per group",
        include_str!("../../migrations/sqlite/0013_dlq_one_decision.sql"),
    ),
    (
        14,
        "outbox",
        include_str!("../../migrations/sqlite/0014_outbox.sql"),
    ),
    (
        15,
        "judge ledger",
        include_str!("../../migrations/sqlite/0015_judge_ledger.sql"),
    ),
    (
        16,
        "largest partition",
        include_str!("../../migrations/sqlite/0016_largest_partition.sql"),
    ),
];

/// Open (creating if needed) the database at `url` (`sqlite://PATH`, `sqlite::memory:` or a
/// plain path) and apply the migrations of `schema` (a prefix of [`SCHEMA`]) that it lacks.
///
/// # Errors
/// The database cannot be opened or its schema cannot be applied.
pub(super) async fn open_applying(url: &str, schema: &super::sql::Schema) -> Result<SqlStore> {
    if let Some(version) = super::sqlite_bits::too_old() {
        return Err(StoreError::SqliteTooOld(version));
    }
    let url = if url.starts_with("sqlite:") {
        url.to_string()
    } else {
        format!("sqlite://{url}")
    };
    let options = SqliteConnectOptions::from_str(&url)
        .map_err(|e| super::malformed(&url, &e))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true);
    create_private(&url, options.get_filename());
    let pool = pool_options().connect_with(options).await?;
    super::sql::migrator(schema).run(&pool).await?;
    Ok(SqlStore::on(Pool::Sqlite(pool)))
}

/// Create the database file `path` of `url` empty and `0600` when it does not exist yet, so
/// that SQLite opens it rather than creating it with the umask's mode (`0644`): the state holds
/// plans, reasons and evidence. SQLite gives its `-wal` and `-shm` files the database file's
/// mode. An in-memory database, or a file that exists, is left alone; a failure here is left to
/// the open that follows to report.
fn create_private(url: &str, path: &std::path::Path) {
    let memory = url.contains(":memory:")
        || url.contains("mode=memory")
        || path.to_string_lossy().starts_with("file:sqlx-in-memory-");
    if memory || path.as_os_str().is_empty() {
        return;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let _ = options.open(path);
}

/// The store's pool: a few connections, each with the SQL function of [`super::sqlite_bits`].
/// No ping before each acquire: SQLite's "connection" is a thread of this process, which the ping
/// only wakes (a round trip that checks nothing).
pub(super) fn pool_options() -> SqlitePoolOptions {
    SqlitePoolOptions::new()
        .max_connections(4)
        .test_before_acquire(false)
        .after_connect(|conn, _| Box::pin(super::sqlite_bits::register(conn)))
}

/// The memory of every gate of a migration in one step, oldest evaluation first.
pub(super) const LATEST_EVALUATIONS: &str = "SELECT * FROM gate_memory WHERE migration = ? \
     AND step_entered = ? ORDER BY at, gate, kind";

/// Each migration's gate memory of the step it is in (see [`JournalStore::fleet`]): one seek per
/// migration (`CROSS JOIN` keeps `migrations` the outer loop in SQLite, where scanning the memory
/// of every step ever entered would read more).
pub(super) const FLEET_MEMORY: &str = "SELECT g.* FROM migrations m CROSS JOIN gate_memory g \
     WHERE g.migration = m.name AND g.step_entered = m.entered_at \
     ORDER BY g.migration, g.at, g.gate, g.kind";

/// The scrapes of a source stored after an instant (a seek on the key), joined into one text
/// `[[at, samples], ...]` (see [`super::scrapes::series_of`]); NULL when there are none.
pub(super) const SCRAPES_AFTER: &str = "SELECT '[' || group_concat('[' || at || ',' || samples \
     || ']', ',') || ']' FROM scrapes WHERE migration = ? AND source = ? AND at > ?";

/// The bytes of the samples [`SCRAPES_AFTER`] would join, in all and of the largest row.
pub(super) const SCRAPES_AFTER_SIZE: &str = "SELECT \
     CAST(COALESCE(SUM(length(CAST(samples AS BLOB))), 0) AS INTEGER) AS total, \
     CAST(COALESCE(MAX(length(CAST(samples AS BLOB))), 0) AS INTEGER) AS largest \
     FROM scrapes WHERE migration = ? AND source = ? AND at > ?";

/// The scrape instants of a source after an instant, as one list (see [`super::parse_list`]),
/// read from the key alone.
pub(super) const TIMES_AFTER: &str = "SELECT group_concat(at, ',') AS ats FROM scrapes \
     WHERE migration = ? AND source = ? AND at > ?";

/// A scrape written again: its samples of the series not given again, then the samples given
/// (so the row holds each series once however often its instant is written: a clock fixed by
/// `--now` writes every round there).
pub(super) const MERGE_SCRAPE: &str = " ON CONFLICT (migration, source, at) DO UPDATE SET samples = (\
     SELECT json_group_array(json(value)) FROM (\
     SELECT value FROM json_each(scrapes.samples) WHERE json_extract(value, '$[1]') NOT IN \
     (SELECT json_extract(value, '$[1]') FROM json_each(excluded.samples)) \
     UNION ALL SELECT value FROM json_each(excluded.samples)))";

/// The scrapes of a source older than the retention.
pub(super) const PRUNE_SCRAPES: &str =
    "DELETE FROM scrapes WHERE migration = ? AND source = ? AND at < ?";

// What a prune may delete (see [`super::retention`]): `?1` before, `?2` the migration or NULL,
// then the batch and the state of migrations never evaluated again. `CROSS JOIN` keeps
// `migrations` the outer loop: one seek per migration into the memory and the scrapes.
pub(super) const RETAIN_EVALUATIONS: &str = "DELETE FROM gate_evaluations WHERE id IN (SELECT id \
     FROM gate_evaluations WHERE at < ?1 AND (?2 IS NULL OR migration = ?2) ORDER BY at LIMIT ?3)";
const RETAINED_EVALUATIONS_COUNT: &str = "SELECT COUNT(*) FROM gate_evaluations \
     WHERE at < ?1 AND (?2 IS NULL OR migration = ?2)";
pub(super) const RETAIN_MEMORY: &str = "DELETE FROM gate_memory WHERE rowid IN (SELECT g.rowid \
     FROM migrations m CROSS JOIN gate_memory g WHERE g.migration = m.name \
     AND g.step_entered <> m.entered_at AND g.at < ?1 AND (?2 IS NULL OR m.name = ?2) LIMIT ?3)";
const RETAINED_MEMORY_COUNT: &str = "SELECT COUNT(*) FROM migrations m CROSS JOIN gate_memory g \
     WHERE g.migration = m.name AND g.step_entered <> m.entered_at AND g.at < ?1 \
     AND (?2 IS NULL OR m.name = ?2)";
pub(super) const RETAIN_SCRAPES: &str = "DELETE FROM scrapes WHERE rowid IN (SELECT s.rowid \
     FROM migrations m CROSS JOIN scrapes s WHERE s.migration = m.name AND m.state = ?4 \
     AND s.at < ?1 AND (?2 IS NULL OR m.name = ?2) LIMIT ?3)";
const RETAINED_SCRAPES_COUNT: &str = "SELECT COUNT(*) FROM migrations m CROSS JOIN scrapes s \
     WHERE s.migration = m.name AND m.state = ?3 AND s.at < ?1 AND (?2 IS NULL OR m.name = ?2)";
/// Delivered outbox rows only: an undelivered one is what the next leader announces.
pub(super) const RETAIN_OUTBOX: &str = "DELETE FROM outbox WHERE rowid IN (SELECT rowid \
     FROM outbox WHERE delivered_at IS NOT NULL AND created_at < ?1 \
     AND (?2 IS NULL OR migration = ?2) ORDER BY created_at LIMIT ?3)";
const RETAINED_OUTBOX_COUNT: &str = "SELECT COUNT(*) FROM outbox \
     WHERE delivered_at IS NOT NULL AND created_at < ?1 AND (?2 IS NULL OR migration = ?2)";

/// The statements SQLite spells its own way.
pub(super) const STATEMENTS: Statements = Statements {
    latest_evaluations: LATEST_EVALUATIONS,
    fleet_memory: FLEET_MEMORY,
    retain_evaluations: RETAIN_EVALUATIONS,
    retained_evaluations_count: RETAINED_EVALUATIONS_COUNT,
    retain_memory: RETAIN_MEMORY,
    retained_memory_count: RETAINED_MEMORY_COUNT,
    retain_scrapes: RETAIN_SCRAPES,
    retained_scrapes_count: RETAINED_SCRAPES_COUNT,
    retain_outbox: RETAIN_OUTBOX,
    retained_outbox_count: RETAINED_OUTBOX_COUNT,
};
