//! The SQLite backend of the [`Store`](super::Store) (a file; WAL mode).

use std::borrow::Cow;
use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection, SqlitePool};

use super::fence::{self, FenceCell};
use super::retention::{Prune, Pruned};
use super::sqlite_rows::{gate_row, journal_row, migration_row};
use super::{
    Commit, Fleet, GateKey, GateRecord, JournalEntry, JournalRow, Lease, MigrationRecord,
    NewMigration, PlanReplace, Result, RoundRecord, SourceRows, Store, StoreError, StoredPoint,
    StoredSeries, memory, memory::Table, samples_after, scrapes, step_of,
};
use crate::machine::State;

/// The schema, embedded so that an installed binary needs no files beside it.
const SCHEMA: &[(i64, &str, &str)] = &[
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
];

/// A SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// The fence of its writes ([`Store::fenced`]).
    fence: FenceCell,
    /// Journal times from the writer (`--now`, the demo's simulated clock), not the database.
    writer_clock: bool,
}

impl SqliteStore {
    /// The connection pool (for modules that keep their own tables in the same store).
    pub(crate) fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// This store, stamping the journal with the writer's instants instead of the database's
    /// clock: for a simulated clock (the demo, `--now`), whose instants are the story's.
    #[must_use]
    pub fn with_writer_clock(mut self) -> SqliteStore {
        self.writer_clock = true;
        self
    }

    /// The database's clock now, in ms since the epoch (in the caller's transaction).
    async fn db_now(conn: &mut SqliteConnection) -> Result<i64> {
        Ok(sqlx::query_scalar(fence::SELECT_NOW_SQLITE)
            .fetch_one(conn)
            .await?)
    }

    /// The instant a journal entry written now carries: the database's, unless the writer's.
    async fn journal_at(&self, conn: &mut SqliteConnection, writer_ms: i64) -> Result<i64> {
        if self.writer_clock {
            Ok(writer_ms)
        } else {
            Self::db_now(conn).await
        }
    }

    /// Open (creating if needed) the database at `url` (`sqlite://PATH`, `sqlite::memory:` or a
    /// plain path) and bring its schema up to date.
    ///
    /// # Errors
    /// The database cannot be opened or its schema cannot be applied.
    pub async fn open(url: &str) -> Result<SqliteStore> {
        Self::open_applying(url, SCHEMA).await
    }

    /// [`Self::open`] with the schema up to `version` only (tests of upgrades).
    #[cfg(test)]
    pub(crate) async fn open_at_version(url: &str, version: i64) -> Result<SqliteStore> {
        let upto = SCHEMA.iter().take_while(|(v, _, _)| *v <= version).count();
        Self::open_applying(url, &SCHEMA[..upto]).await
    }

    /// Open the database at `url` and apply the migrations of `schema` that it lacks.
    async fn open_applying(
        url: &str,
        schema: &[(i64, &'static str, &'static str)],
    ) -> Result<SqliteStore> {
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
        let migrations = schema
            .iter()
            .map(|(version, description, sql)| {
                Migration::new(
                    *version,
                    Cow::Borrowed(*description),
                    MigrationType::Simple,
                    sqlx::SqlSafeStr::into_sql_str(*sql),
                    false,
                )
            })
            .collect();
        Migrator::with_migrations(migrations).run(&pool).await?;
        Ok(SqliteStore {
            pool,
            fence: FenceCell::default(),
            writer_clock: false,
        })
    }
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
pub(super) fn pool_options() -> SqlitePoolOptions {
    SqlitePoolOptions::new()
        .max_connections(4)
        .after_connect(|conn, _| Box::pin(super::sqlite_bits::register(conn)))
}

fn b(v: bool) -> i64 {
    i64::from(v)
}

/// A journal row (its epoch, `?16`, NULL when written without a lease).
const INSERT_JOURNAL: &str = "INSERT INTO journal (migration, seq, at, command, from_state, \
     from_step, from_paused, to_state, to_step, to_paused, actor, reason, forced, evidence, \
     generation, epoch) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, \
     ?15, ?16)";
/// [`INSERT_JOURNAL`] of a row written without a lease (the column left NULL: a store whose
/// schema predates epochs takes it too).
const INSERT_JOURNAL_NO_EPOCH: &str = "INSERT INTO journal (migration, seq, at, command, \
     from_state, from_step, from_paused, to_state, to_step, to_paused, actor, reason, forced, \
     evidence, generation) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";

/// The migration `name` read for a write, if it is still at version `expected` (a conflict
/// naming the version it is at otherwise). Inside a `BEGIN IMMEDIATE` transaction: no other writer until it ends.
async fn current_at(
    conn: &mut SqliteConnection,
    name: &str,
    expected: i64,
) -> Result<MigrationRecord> {
    let row = sqlx::query("SELECT * FROM migrations WHERE name = ?")
        .bind(name)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| StoreError::NotFound(name.to_string()))?;
    let current = migration_row(&row)?;
    if current.version != expected {
        return Err(StoreError::Conflict {
            name: name.to_string(),
            expected,
            actual: current.version,
        });
    }
    Ok(current)
}

/// Why transition `c` of `name` (in the step entered at `step_entered_ms`) may not be
/// applied: a gate memory it rests on changed since it was read ([`memory::changed_reads`]),
/// in the caller's transaction; `None` when none did.
async fn stale_memory(
    conn: &mut SqliteConnection,
    name: &str,
    step_entered_ms: i64,
    c: &Commit,
) -> Result<Option<StoreError>> {
    if c.memory.is_empty() {
        return Ok(None);
    }
    let changed = memory::changed_reads::<Sqlite>(name, step_entered_ms, &c.memory)
        .build()
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| Ok((row.try_get("gate")?, row.try_get("kind")?)))
        .collect::<Result<Vec<(String, String)>>>()?;
    Ok(memory::stale(name, &changed))
}

/// Append `j` to the journal, inside the caller's transaction.
async fn insert_journal(conn: &mut SqliteConnection, j: &JournalRow<'_>) -> Result<()> {
    let sql = if j.epoch.is_some() {
        INSERT_JOURNAL
    } else {
        INSERT_JOURNAL_NO_EPOCH
    };
    let q = sqlx::query(sql)
        .bind(j.name)
        .bind(j.seq)
        .bind(j.at_ms)
        .bind(j.command)
        .bind(j.from.state.name())
        .bind(step_of(j.from.state))
        .bind(b(j.from.paused))
        .bind(j.to.state.name())
        .bind(step_of(j.to.state))
        .bind(b(j.to.paused))
        .bind(j.actor)
        .bind(j.reason.as_deref())
        .bind(b(j.forced))
        .bind(&j.evidence)
        .bind(j.generation);
    let q = match j.epoch {
        Some(epoch) => q.bind(epoch),
        None => q,
    };
    q.execute(conn).await?;
    Ok(())
}

/// Rows per multi-row INSERT: one statement instead of one per row. sqlx keeps the statements it
/// prepared on each connection of the pool, and a statement's compiled program grows with its
/// rows; 50 rows keep those small while already spreading a statement's fixed cost (the round's
/// commit moved from 500 to 50 together with the daemon's arena cap, measured together:
/// BENCHMARKS.md, seventh pass).
const ROWS_PER_INSERT: usize = 50;

/// The memory of every gate of a migration in one step, oldest evaluation first.
pub(super) const LATEST_EVALUATIONS: &str = "SELECT * FROM gate_memory WHERE migration = ? \
     AND step_entered = ? ORDER BY at, gate, kind";

/// The plan hash of each migration a round was evaluated under a plan of, by name (see
/// [`memory::current_plan_rows`]), in one statement (the names as one JSON array); none read
/// when no round was. Inside a `BEGIN IMMEDIATE` transaction: no `plan apply` commits until it
/// ends.
async fn current_plans(
    conn: &mut SqliteConnection,
    rounds: &[RoundRecord],
) -> Result<HashMap<String, String>> {
    let names = memory::planned_names(rounds);
    if names.is_empty() {
        return Ok(HashMap::new());
    }
    let names = serde_json::Value::from(names).to_string();
    let rows = sqlx::query(
        "SELECT name, plan_hash FROM migrations WHERE name IN (SELECT value FROM json_each(?))",
    )
    .bind(names)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| Ok((row.try_get("name")?, row.try_get("plan_hash")?)))
        .collect()
}

/// The gate rows of every round: appended to the history, and each gate's memory replaced (of
/// the rounds evaluated under their migration's plan: [`memory::current_plan_rows`]; of the
/// others, only the marks of the gates whose streak they saw break are cleared:
/// [`memory::late_resets`]), in
/// statements of up to [`ROWS_PER_INSERT`] rows whatever migrations they belong to.
async fn insert_evaluations(conn: &mut SqliteConnection, rounds: &[RoundRecord]) -> Result<()> {
    let plans = current_plans(conn, rounds).await?;
    let rows = memory::rows_of(rounds);
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        memory::write_rows::<Sqlite>(Table::History, chunk.iter().copied())
            .build()
            .execute(&mut *conn)
            .await?;
    }
    let current = memory::current_plan_rows(rounds, &plans);
    for chunk in memory::newest_per_gate(&current).chunks(ROWS_PER_INSERT) {
        memory::write_rows::<Sqlite>(Table::Memory, chunk.iter().copied())
            .build()
            .execute(&mut *conn)
            .await?;
    }
    // After the memory: a late round's broken streak clears a mark written in this commit too.
    for chunk in memory::late_resets(rounds, &plans).chunks(ROWS_PER_INSERT) {
        memory::clear_marks::<Sqlite>(chunk.iter().copied())
            .build()
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Each migration's gate memory of the step it is in (see [`Store::fleet`]): one seek per
/// migration (`CROSS JOIN` keeps `migrations` the outer loop in SQLite, where scanning the memory
/// of every step ever entered would read more).
pub(super) const FLEET_MEMORY: &str = "SELECT g.* FROM migrations m CROSS JOIN gate_memory g \
     WHERE g.migration = m.name AND g.step_entered = m.entered_at \
     ORDER BY g.migration, g.at, g.gate, g.kind";

/// The scrapes of a source stored after an instant (a seek on the key), joined into one text
/// `[[at, samples], ...]` (see [`super::scrapes::series_of`]); NULL when there are none.
pub(super) const SCRAPES_AFTER: &str = "SELECT '[' || group_concat('[' || at || ',' || samples \
     || ']', ',') || ']' FROM scrapes WHERE migration = ? AND source = ? AND at > ?";

/// The scrape instants of a source after an instant, as one list (see [`super::parse_list`]),
/// read from the key alone.
pub(super) const TIMES_AFTER: &str = "SELECT group_concat(at, ',') AS ats FROM scrapes \
     WHERE migration = ? AND source = ? AND at > ?";

/// A scrape written again: its samples of the series not given again, then the samples given
/// (so the row holds each series once however often its instant is written: a clock fixed by
/// `--now` writes every round there).
const MERGE_SCRAPE: &str = " ON CONFLICT (migration, source, at) DO UPDATE SET samples = (\
     SELECT json_group_array(json(value)) FROM (\
     SELECT value FROM json_each(scrapes.samples) WHERE json_extract(value, '$[1]') NOT IN \
     (SELECT json_extract(value, '$[1]') FROM json_each(excluded.samples)) \
     UNION ALL SELECT value FROM json_each(excluded.samples)))";

/// The scrapes of a source older than the retention.
pub(super) const PRUNE_SCRAPES: &str =
    "DELETE FROM scrapes WHERE migration = ? AND source = ? AND at < ?";

/// The sources' scrapes added, one row per (migration, source, instant) in statements of up
/// to [`ROWS_PER_INSERT`] rows whatever migrations and sources they belong to, then each
/// source's history pruned when the round dropped something (in the caller's transaction). A
/// scrape already stored keeps its samples of the series not given again ([`MERGE_SCRAPE`]).
async fn insert_points(conn: &mut SqliteConnection, sources: &[SourceRows<'_>]) -> Result<()> {
    for chunk in scrapes::rows_of(sources)?.chunks(ROWS_PER_INSERT) {
        let mut q =
            QueryBuilder::<Sqlite>::new("INSERT INTO scrapes (migration, source, at, samples) ");
        q.push_values(chunk, |mut row, r| {
            row.push_bind(r.name)
                .push_bind(r.source)
                .push_bind(r.at_ms)
                .push_bind(&r.samples);
        });
        q.push(MERGE_SCRAPE);
        q.build().execute(&mut *conn).await?;
    }
    for (s, keep_from_ms) in sources.iter().filter_map(|s| Some((s, s.keep_from_ms?))) {
        sqlx::query(PRUNE_SCRAPES)
            .bind(s.name)
            .bind(s.source)
            .bind(keep_from_ms)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

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

/// Take or renew a lease (`?1` name, `?2` holder, `?3` until, `?4` the database's now): a new
/// holder's epoch is one above both the row's and every epoch the lease ever had.
const ACQUIRE_LEASE: &str = "INSERT INTO leases (name, holder, expires_at, epoch) \
     VALUES (?1, ?2, ?3, COALESCE((SELECT MAX(epoch) FROM lease_epochs WHERE lease = ?1), 0) + 1) \
     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, \
     epoch = CASE WHEN leases.holder = excluded.holder THEN leases.epoch \
     ELSE MAX(leases.epoch + 1, excluded.epoch) END \
     WHERE leases.holder = excluded.holder OR leases.expires_at <= ?4";

/// A count read back as the number of rows it is.
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl Store for SqliteStore {
    async fn create(&self, new: &NewMigration) -> Result<MigrationRecord> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let exists = sqlx::query("SELECT 1 FROM migrations WHERE name = ?")
            .bind(&new.name)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_some() {
            return Err(StoreError::AlreadyExists(new.name.clone()));
        }
        let planned = State::Planned;
        let at = self.journal_at(&mut tx, new.now_ms).await?;
        sqlx::query(
            "INSERT INTO migrations (name, plan_yaml, plan_path, plan_hash, state, step, paused, \
             version, generation, published_generation, entered_at, updated_at, created_at) \
             VALUES (?, ?, ?, ?, ?, NULL, 0, 1, 1, 0, ?, ?, ?)",
        )
        .bind(&new.name)
        .bind(&new.plan_yaml)
        .bind(&new.plan_path)
        .bind(&new.plan_hash)
        .bind(planned.name())
        .bind(at)
        .bind(at)
        .bind(at)
        .execute(&mut *tx)
        .await?;
        let mut row = JournalRow::of_init(new);
        row.at_ms = at;
        insert_journal(&mut tx, &row).await?;
        tx.commit().await?;
        self.get(&new.name).await
    }

    async fn get(&self, name: &str) -> Result<MigrationRecord> {
        let row = sqlx::query("SELECT * FROM migrations WHERE name = ?")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(name.to_string()))?;
        migration_row(&row)
    }

    async fn list(&self) -> Result<Vec<MigrationRecord>> {
        sqlx::query("SELECT * FROM migrations ORDER BY name")
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(migration_row)
            .collect()
    }

    async fn fleet(&self) -> Result<Fleet> {
        // One read transaction: both statements see the same snapshot of the WAL.
        let mut tx = self.pool.begin().await?;
        let records = sqlx::query("SELECT * FROM migrations ORDER BY name")
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(migration_row)
            .collect::<Result<Vec<_>>>()?;
        let mut memory: HashMap<String, Vec<GateRecord>> = HashMap::new();
        for row in sqlx::query(FLEET_MEMORY).fetch_all(&mut *tx).await? {
            let name: String = row.try_get("migration")?;
            memory.entry(name).or_default().push(gate_row(&row)?);
        }
        tx.commit().await?;
        Ok(Fleet { records, memory })
    }

    async fn commit(&self, name: &str, c: &Commit) -> Result<MigrationRecord> {
        let fence = self.fence.demand("a transition")?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let current = current_at(&mut tx, name, c.expected_version).await?;
        if let Some(stale) = stale_memory(&mut tx, name, current.entered_at_ms, c).await? {
            return Err(stale);
        }
        let conflict = || StoreError::Conflict {
            name: name.to_string(),
            expected: c.expected_version,
            actual: current.version,
        };
        let version = c.expected_version + 1;
        let generation = current.generation + 1;
        // One instant for the step's start, the last update and the journal entry: the
        // database's (unless the writer's clock is the story's), never a skewed host's.
        let at = self.journal_at(&mut tx, c.at_ms).await?;
        let entered_at = if c.to.state == current.state {
            current.entered_at_ms
        } else {
            at
        };
        let updated = sqlx::query(
            "UPDATE migrations SET state = ?, step = ?, paused = ?, version = ?, generation = ?, \
             entered_at = ?, updated_at = ? WHERE name = ? AND version = ?",
        )
        .bind(c.to.state.name())
        .bind(step_of(c.to.state))
        .bind(b(c.to.paused))
        .bind(version)
        .bind(generation)
        .bind(entered_at)
        .bind(at)
        .bind(name)
        .bind(c.expected_version)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            return Err(conflict());
        }
        let mut row = JournalRow::of_commit(name, c, current.snapshot(), version, generation);
        row.at_ms = at;
        row.epoch = fence.as_ref().map(|f| f.epoch);
        insert_journal(&mut tx, &row).await?;
        fence::prove_sqlite(&mut tx, &self.fence, fence.as_ref(), "a transition").await?;
        tx.commit().await?;
        self.get(name).await
    }

    async fn replace_plan(&self, name: &str, r: &PlanReplace) -> Result<MigrationRecord> {
        let fence = self.fence.demand("a plan apply")?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let current = current_at(&mut tx, name, r.expected_version).await?;
        let conflict = || StoreError::Conflict {
            name: name.to_string(),
            expected: r.expected_version,
            actual: current.version,
        };
        let version = r.expected_version + 1;
        let at = self.journal_at(&mut tx, r.at_ms).await?;
        let (generation, updated_at) = if r.republish {
            (current.generation + 1, at)
        } else {
            (current.generation, current.updated_at_ms)
        };
        let updated = sqlx::query(
            "UPDATE migrations SET plan_yaml = ?, plan_path = ?, plan_hash = ?, version = ?, \
             generation = ?, updated_at = ? WHERE name = ? AND version = ?",
        )
        .bind(&r.plan_yaml)
        .bind(&r.plan_path)
        .bind(&r.plan_hash)
        .bind(version)
        .bind(generation)
        .bind(updated_at)
        .bind(name)
        .bind(r.expected_version)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            return Err(conflict());
        }
        // The memory of the current step's changed gates goes with their old definition.
        for (gate, kind) in &r.reset_gates {
            sqlx::query(
                "DELETE FROM gate_memory WHERE migration = ? AND step_entered = ? AND gate = ? \
                 AND kind = ?",
            )
            .bind(name)
            .bind(current.entered_at_ms)
            .bind(gate)
            .bind(kind)
            .execute(&mut *tx)
            .await?;
        }
        let mut row = JournalRow::of_plan_apply(name, r, current.snapshot(), version, generation);
        row.at_ms = at;
        row.epoch = fence.as_ref().map(|f| f.epoch);
        insert_journal(&mut tx, &row).await?;
        fence::prove_sqlite(&mut tx, &self.fence, fence.as_ref(), "a plan apply").await?;
        tx.commit().await?;
        self.get(name).await
    }

    async fn journal(&self, name: &str) -> Result<Vec<JournalEntry>> {
        self.get(name).await?;
        sqlx::query("SELECT * FROM journal WHERE migration = ? ORDER BY seq")
            .bind(name)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(journal_row)
            .collect()
    }

    async fn journal_page(
        &self,
        name: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<JournalEntry>> {
        self.get(name).await?;
        let mut page = sqlx::query(
            "SELECT * FROM journal WHERE migration = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
        )
        .bind(name)
        .bind(before.unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(journal_row)
        .collect::<Result<Vec<_>>>()?;
        page.reverse();
        Ok(page)
    }

    async fn record_rounds(&self, rounds: &[RoundRecord]) -> Result<()> {
        let fence = self.fence.demand("a round's evaluations")?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        insert_evaluations(&mut tx, rounds).await?;
        insert_points(&mut tx, &SourceRows::of(rounds)).await?;
        fence::prove_sqlite(
            &mut tx,
            &self.fence,
            fence.as_ref(),
            "a round's evaluations",
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn record_evaluations(&self, name: &str, records: &[GateRecord]) -> Result<()> {
        self.record_round(name, records, &[]).await
    }

    async fn latest_evaluations(
        &self,
        name: &str,
        step_entered_ms: i64,
        gates: &[GateKey<'_>],
    ) -> Result<Vec<GateRecord>> {
        let rows = sqlx::query(LATEST_EVALUATIONS)
            .bind(name)
            .bind(step_entered_ms)
            .fetch_all(&self.pool)
            .await?;
        memory::named(rows.iter().map(gate_row), gates)
    }

    async fn evaluation_history(&self, name: &str, limit: u32) -> Result<Vec<GateRecord>> {
        let rows = sqlx::query(
            "SELECT * FROM (SELECT *, 0 AS revision FROM gate_evaluations WHERE migration = ? \
             ORDER BY id DESC LIMIT ?) ORDER BY id",
        )
        .bind(name)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(gate_row).collect()
    }

    async fn mark_published(&self, name: &str, generation: i64) -> Result<()> {
        let fence = self.fence.demand("a publish mark")?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        // An error noted for a newer generation still holds: only older ones are cleared.
        sqlx::query(
            "UPDATE migrations SET published_generation = MAX(published_generation, ?1), \
             publish_error = CASE WHEN COALESCE(publish_error_generation, 0) <= ?1 \
                 THEN NULL ELSE publish_error END, \
             publish_error_generation = CASE WHEN COALESCE(publish_error_generation, 0) <= ?1 \
                 THEN NULL ELSE publish_error_generation END \
             WHERE name = ?2",
        )
        .bind(generation)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        fence::prove_sqlite(&mut tx, &self.fence, fence.as_ref(), "a publish mark").await?;
        tx.commit().await?;
        Ok(())
    }

    async fn note_publish_error(&self, name: &str, generation: i64, error: &str) -> Result<()> {
        let fence = self.fence.demand("a publish error")?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        // Not when this generation or a newer one was published since, nor over the error of a
        // newer generation.
        sqlx::query(
            "UPDATE migrations SET publish_error = ?1, publish_error_generation = ?2 \
             WHERE name = ?3 AND published_generation < ?2 \
             AND (publish_error IS NULL OR COALESCE(publish_error_generation, 0) <= ?2)",
        )
        .bind(error)
        .bind(generation)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        fence::prove_sqlite(&mut tx, &self.fence, fence.as_ref(), "a publish error").await?;
        tx.commit().await?;
        Ok(())
    }

    async fn generations(&self) -> Result<Vec<(String, i64)>> {
        let rows = sqlx::query("SELECT name, generation FROM migrations ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("name")?, r.try_get("generation")?)))
            .collect()
    }

    async fn generations_mark(&self) -> Result<(i64, i64)> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, COALESCE(SUM(generation), 0) AS total FROM migrations",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok((row.try_get("n")?, row.try_get("total")?))
    }

    async fn acquire_lease(
        &self,
        lease: &str,
        holder: &str,
        _now_ms: i64,
        ttl_ms: i64,
    ) -> Result<Lease> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let now = Self::db_now(&mut tx).await?;
        sqlx::query(ACQUIRE_LEASE)
            .bind(lease)
            .bind(holder)
            .bind(now.saturating_add(ttl_ms))
            .bind(now)
            .execute(&mut *tx)
            .await?;
        let row = sqlx::query("SELECT holder, expires_at, epoch FROM leases WHERE name = ?")
            .bind(lease)
            .fetch_one(&mut *tx)
            .await?;
        let got = Lease {
            holder: row.try_get("holder")?,
            expires_at_ms: row.try_get("expires_at")?,
            epoch: row.try_get("epoch")?,
            db_now_ms: now,
        };
        if got.holder == holder {
            sqlx::query(
                "INSERT INTO lease_epochs (lease, epoch, holder, acquired_at) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (lease, epoch) DO NOTHING",
            )
            .bind(lease)
            .bind(got.epoch)
            .bind(holder)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(got)
    }

    async fn release_lease(&self, lease: &str, holder: &str) -> Result<()> {
        // The row stays, expired: its epoch never goes back.
        sqlx::query("UPDATE leases SET expires_at = 0 WHERE name = ? AND holder = ?")
            .bind(lease)
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn clock_ms(&self, writer_ms: i64) -> Result<i64> {
        let mut conn = self.pool.acquire().await?;
        self.journal_at(&mut conn, writer_ms).await
    }

    fn fenced(&self, cell: FenceCell) -> SqliteStore {
        SqliteStore {
            fence: cell,
            ..self.clone()
        }
    }

    fn fence(&self) -> FenceCell {
        self.fence.clone()
    }

    async fn dlq_decisions(&self) -> Result<Vec<crate::dlq::disposition::Disposition>> {
        super::dispositions::DispositionStore::list(self).await
    }

    async fn scrape_instants_through(
        &self,
        name: &str,
        source: &str,
        through_ms: i64,
    ) -> Result<(i64, i64)> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, COALESCE(SUM(at), 0) AS total FROM scrapes WHERE migration = ? AND source = ? AND at <= ?",
        )
        .bind(name)
        .bind(source)
        .bind(through_ms)
        .fetch_one(&self.pool)
        .await?;
        Ok((row.try_get("n")?, row.try_get("total")?))
    }

    async fn load_series_after(
        &self,
        name: &str,
        source: &str,
        after_ms: i64,
        samples_from_ms: i64,
    ) -> Result<(Vec<StoredSeries>, Vec<i64>)> {
        let from = samples_after(after_ms, samples_from_ms);
        let times = if from > after_ms {
            let times: Option<String> = sqlx::query_scalar(TIMES_AFTER)
                .bind(name)
                .bind(source)
                .bind(after_ms)
                .fetch_one(&self.pool)
                .await?;
            Some(super::parse_list(
                times.as_deref().unwrap_or_default(),
                source,
            )?)
        } else {
            None
        };
        let text: Option<String> = sqlx::query_scalar(SCRAPES_AFTER)
            .bind(name)
            .bind(source)
            .bind(from)
            .fetch_one(&self.pool)
            .await?;
        scrapes::history(text.as_deref(), times, source)
    }

    async fn save_points(
        &self,
        name: &str,
        source: &str,
        points: &[StoredPoint],
        scrape_times: &[i64],
        keep_from_ms: i64,
    ) -> Result<()> {
        let fence = self.fence.demand("a scrape's samples")?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let one = SourceRows {
            name,
            source,
            points,
            scrape_times,
            keep_from_ms: Some(keep_from_ms),
        };
        insert_points(&mut tx, &[one]).await?;
        fence::prove_sqlite(&mut tx, &self.fence, fence.as_ref(), "a scrape's samples").await?;
        tx.commit().await?;
        Ok(())
    }
    async fn prune(&self, prune: &Prune) -> Result<Pruned> {
        let (before, name, batch) = (prune.before_ms, prune.migration.as_deref(), prune.batch);
        let done = State::Complete.name();
        let fence = self.fence.demand("a retention delete")?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let gate_evaluations = sqlx::query(RETAIN_EVALUATIONS)
            .bind(before)
            .bind(name)
            .bind(batch)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        fence::prove_sqlite(&mut tx, &self.fence, fence.as_ref(), "a retention delete").await?;
        tx.commit().await?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let gate_memory = sqlx::query(RETAIN_MEMORY)
            .bind(before)
            .bind(name)
            .bind(batch)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        fence::prove_sqlite(&mut tx, &self.fence, fence.as_ref(), "a retention delete").await?;
        tx.commit().await?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let scrapes = sqlx::query(RETAIN_SCRAPES)
            .bind(before)
            .bind(name)
            .bind(batch)
            .bind(done)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        fence::prove_sqlite(&mut tx, &self.fence, fence.as_ref(), "a retention delete").await?;
        tx.commit().await?;
        Ok(Pruned {
            gate_evaluations,
            gate_memory,
            scrapes,
        })
    }

    async fn prunable(&self, prune: &Prune) -> Result<Pruned> {
        let (before, name) = (prune.before_ms, prune.migration.as_deref());
        let evaluations: i64 = sqlx::query_scalar(RETAINED_EVALUATIONS_COUNT)
            .bind(before)
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        let memory: i64 = sqlx::query_scalar(RETAINED_MEMORY_COUNT)
            .bind(before)
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        let scrapes: i64 = sqlx::query_scalar(RETAINED_SCRAPES_COUNT)
            .bind(before)
            .bind(name)
            .bind(State::Complete.name())
            .fetch_one(&self.pool)
            .await?;
        Ok(Pruned {
            gate_evaluations: count(evaluations),
            gate_memory: count(memory),
            scrapes: count(scrapes),
        })
    }
}
