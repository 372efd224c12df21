//! The PostgreSQL backend of the [`Store`](super::Store), for a team sharing one store.
//!
//! Same semantics as the SQLite backend: every transition is one transaction, conditional on the
//! version the caller read (`UPDATE ... WHERE version = $n`, a loser gets
//! [`StoreError::Conflict`]); the journal is append-only (a trigger refuses UPDATE, DELETE and
//! TRUNCATE). The schema is `migrations/postgres/`, embedded in the binary. Text is ordered
//! bytewise (`COLLATE "C"`), as SQLite orders it, whatever the database's collation.

use std::borrow::Cow;
use std::collections::HashMap;
use std::str::FromStr;

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool, Postgres, Row};

use super::fence::{self, FenceCell};
use super::postgres_rows::{gate_row, journal_row, migration_row};
use super::retention::{Prune, Pruned};
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
];

pub use super::pg_session::{Keepalives, SessionLimits, is_lock_timeout};

/// A PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    /// The fence of its writes ([`Store::fenced`]).
    fence: FenceCell,
    /// Journal times from the writer (`--now`), not the database.
    writer_clock: bool,
}

impl PgStore {
    /// The connection pool (for modules that keep their own tables in the same store).
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// This store, its sessions opened again with `limits` (a daemon's: see [`SessionLimits`]).
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn with_session_limits(self, limits: &SessionLimits) -> Result<PgStore> {
        let options = (*self.pool.connect_options())
            .clone()
            .options(limits.settings());
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        self.pool.close().await;
        Ok(PgStore { pool, ..self })
    }

    /// This store, stamping the journal with the writer's instants instead of the database's
    /// clock: for a simulated clock (`--now`), whose instants are the story's.
    #[must_use]
    pub fn with_writer_clock(mut self) -> PgStore {
        self.writer_clock = true;
        self
    }

    /// The database's clock now, in ms since the epoch.
    async fn db_now(conn: &mut PgConnection) -> Result<i64> {
        Ok(sqlx::query_scalar(fence::SELECT_NOW_PG)
            .fetch_one(conn)
            .await?)
    }

    /// The instant a journal entry written now carries: the database's, unless the writer's.
    async fn journal_at(&self, conn: &mut PgConnection, writer_ms: i64) -> Result<i64> {
        if self.writer_clock {
            Ok(writer_ms)
        } else {
            Self::db_now(conn).await
        }
    }

    /// Connect to the database at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=..]`
    /// or `postgresql://...`) and bring its schema up to date. The database must exist.
    ///
    /// # Errors
    /// The database cannot be reached or its schema cannot be applied.
    pub async fn open(url: &str) -> Result<PgStore> {
        Self::open_applying(url, SCHEMA).await
    }

    /// [`Self::open`] with the schema up to `version` only (tests of upgrades).
    #[cfg(test)]
    pub(crate) async fn open_at_version(url: &str, version: i64) -> Result<PgStore> {
        let upto = SCHEMA.iter().take_while(|(v, _, _)| *v <= version).count();
        Self::open_applying(url, &SCHEMA[..upto]).await
    }

    /// Open the database at `url` and apply the migrations of `schema` that it lacks.
    async fn open_applying(
        url: &str,
        schema: &[(i64, &'static str, &'static str)],
    ) -> Result<PgStore> {
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
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
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
        // Takes an advisory lock: stores opening at once apply the schema once.
        Migrator::with_migrations(migrations).run(&pool).await?;
        Ok(PgStore {
            pool,
            fence: FenceCell::default(),
            writer_clock: false,
        })
    }
}

/// A journal row (its epoch, `$16`, NULL when written without a lease).
const INSERT_JOURNAL: &str = "INSERT INTO journal (migration, seq, at, command, from_state, \
     from_step, from_paused, to_state, to_step, to_paused, actor, reason, forced, evidence, \
     generation, epoch) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, \
     $15, $16)";
/// [`INSERT_JOURNAL`] of a row written without a lease (the column left NULL: a store whose
/// schema predates epochs takes it too).
const INSERT_JOURNAL_NO_EPOCH: &str = "INSERT INTO journal (migration, seq, at, command, \
     from_state, from_step, from_paused, to_state, to_step, to_paused, actor, reason, forced, \
     evidence, generation) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)";

/// The migration `name` read for a write, if it is still at version `expected` (a conflict
/// naming the version it is at otherwise). `FOR UPDATE`: a concurrent writer waits here until this transaction is done, then reads the
/// version it wrote, so its conflict names the actual version.
async fn current_at(conn: &mut PgConnection, name: &str, expected: i64) -> Result<MigrationRecord> {
    let row = sqlx::query("SELECT * FROM migrations WHERE name = $1 FOR UPDATE")
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
    conn: &mut PgConnection,
    name: &str,
    step_entered_ms: i64,
    c: &Commit,
) -> Result<Option<StoreError>> {
    if c.memory.is_empty() {
        return Ok(None);
    }
    let changed = memory::changed_reads::<Postgres>(name, step_entered_ms, &c.memory)
        .build()
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| Ok((row.try_get("gate")?, row.try_get("kind")?)))
        .collect::<Result<Vec<(String, String)>>>()?;
    Ok(memory::stale(name, &changed))
}

/// Append `j` to the journal, inside the caller's transaction.
async fn insert_journal(conn: &mut PgConnection, j: &JournalRow<'_>) -> Result<()> {
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
        .bind(j.from.paused)
        .bind(j.to.state.name())
        .bind(step_of(j.to.state))
        .bind(j.to.paused)
        .bind(j.actor)
        .bind(j.reason.as_deref())
        .bind(j.forced)
        .bind(&j.evidence)
        .bind(j.generation);
    let q = match j.epoch {
        Some(epoch) => q.bind(epoch),
        None => q,
    };
    q.execute(conn).await?;
    Ok(())
}

/// The sources' scrapes added, one row per (migration, source, instant), then each source's
/// history pruned: one statement each for the whole fleet's round (arrays + UNNEST), in the
/// caller's transaction. A scrape already stored keeps its samples of the series not given
/// again, as SQLite's `MERGE_SCRAPE` does.
async fn insert_points(conn: &mut PgConnection, sources: &[SourceRows<'_>]) -> Result<()> {
    let rows = scrapes::rows_of(sources)?;
    if !rows.is_empty() {
        let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
        let srcs: Vec<&str> = rows.iter().map(|r| r.source).collect();
        let ats: Vec<i64> = rows.iter().map(|r| r.at_ms).collect();
        let samples: Vec<&str> = rows.iter().map(|r| r.samples.as_str()).collect();
        sqlx::query(
            "INSERT INTO scrapes (migration, source, at, samples) \
             SELECT * FROM UNNEST($1::TEXT[], $2::TEXT[], $3::BIGINT[], $4::TEXT[]) \
             ON CONFLICT (migration, source, at) DO UPDATE SET samples = (\
             SELECT COALESCE(json_agg(e), '[]')::TEXT FROM (\
             SELECT e FROM json_array_elements(scrapes.samples::JSON) AS o(e) WHERE e->>1 NOT IN \
             (SELECT n->>1 FROM json_array_elements(EXCLUDED.samples::JSON) AS x(n)) \
             UNION ALL SELECT n FROM json_array_elements(EXCLUDED.samples::JSON) AS x(n)) AS m(e))",
        )
        .bind(&names)
        .bind(&srcs)
        .bind(&ats)
        .bind(&samples)
        .execute(&mut *conn)
        .await?;
    }
    let pruned: Vec<(&str, &str, i64)> = sources
        .iter()
        .filter_map(|s| Some((s.name, s.source, s.keep_from_ms?)))
        .collect();
    if !pruned.is_empty() {
        let names: Vec<&str> = pruned.iter().map(|p| p.0).collect();
        let srcs: Vec<&str> = pruned.iter().map(|p| p.1).collect();
        let keep_from: Vec<i64> = pruned.iter().map(|p| p.2).collect();
        sqlx::query(PRUNE_SCRAPES)
            .bind(&names)
            .bind(&srcs)
            .bind(&keep_from)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Each source's scrapes older than its retention (`$1` names, `$2` sources, `$3` the
/// instants each keeps from), for many sources in one statement.
const PRUNE_SCRAPES: &str = "DELETE FROM scrapes t \
     USING UNNEST($1::TEXT[], $2::TEXT[], $3::BIGINT[]) AS k(migration, source, keep_from) \
     WHERE t.migration = k.migration AND t.source = k.source AND t.at < k.keep_from";

/// Take or renew a lease (`$1` name, `$2` holder, `$3` until, `$4` the database's now): a new
/// holder's epoch is one above both the row's and every epoch the lease ever had.
const ACQUIRE_LEASE: &str = "INSERT INTO leases (name, holder, expires_at, epoch) \
     VALUES ($1, $2, $3, COALESCE((SELECT MAX(epoch) FROM lease_epochs WHERE lease = $1), 0) + 1) \
     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, \
     epoch = CASE WHEN leases.holder = excluded.holder THEN leases.epoch \
     ELSE GREATEST(leases.epoch + 1, excluded.epoch) END \
     WHERE leases.holder = excluded.holder OR leases.expires_at <= $4";

/// The memory of every gate of a migration in one step, oldest evaluation first.
pub(super) const LATEST_EVALUATIONS: &str = r#"SELECT * FROM gate_memory WHERE migration = $1
     AND step_entered = $2 ORDER BY at, gate COLLATE "C", kind COLLATE "C""#;

/// The plan hash of each migration a round was evaluated under a plan of, by name (see
/// [`memory::current_plan_rows`]), in one statement; none read when no round was. `FOR SHARE`:
/// a `plan apply` of one of them ([`Store::replace_plan`], `FOR UPDATE`) commits before this
/// read (which then sees its plan) or waits until the caller's transaction ends (and then
/// forgets what it wrote of the changed gates), never in between.
async fn current_plans(
    conn: &mut PgConnection,
    rounds: &[RoundRecord],
) -> Result<HashMap<String, String>> {
    let names = memory::planned_names(rounds);
    if names.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = sqlx::query(
        r#"SELECT name, plan_hash FROM migrations WHERE name = ANY($1)
           ORDER BY name COLLATE "C" FOR SHARE"#,
    )
    .bind(&names)
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
/// statements of up to 1,000 rows whatever migrations they belong to (in the caller's
/// transaction).
async fn insert_evaluations(conn: &mut PgConnection, rounds: &[RoundRecord]) -> Result<()> {
    // The plans first: the lock is taken before any row is written.
    let plans = current_plans(conn, rounds).await?;
    // PostgreSQL allows 65,535 parameters per statement: at most 17 per row.
    let rows = memory::rows_of(rounds);
    for chunk in rows.chunks(1_000) {
        memory::write_rows::<Postgres>(Table::History, chunk.iter().copied())
            .build()
            .execute(&mut *conn)
            .await?;
    }
    let current = memory::current_plan_rows(rounds, &plans);
    for chunk in memory::newest_per_gate(&current).chunks(1_000) {
        memory::write_rows::<Postgres>(Table::Memory, chunk.iter().copied())
            .build()
            .execute(&mut *conn)
            .await?;
    }
    // After the memory: a late round's broken streak clears a mark written in this commit too.
    for chunk in memory::late_resets(rounds, &plans).chunks(1_000) {
        memory::clear_marks::<Postgres>(chunk.iter().copied())
            .build()
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Each migration's gate memory of the step it is in (see [`Store::fleet`]).
const FLEET_MEMORY: &str = r#"SELECT g.* FROM gate_memory g JOIN migrations m
     ON m.name = g.migration AND m.entered_at = g.step_entered
     ORDER BY g.migration COLLATE "C", g.at, g.gate COLLATE "C", g.kind COLLATE "C""#;

// What a prune may delete (see [`super::retention`]): `$1` before, `$2` the migration or NULL,
// then the batch and the state of migrations never evaluated again.
const RETAIN_EVALUATIONS: &str = "DELETE FROM gate_evaluations WHERE id IN (SELECT id \
     FROM gate_evaluations WHERE at < $1 AND ($2::TEXT IS NULL OR migration = $2) \
     ORDER BY at LIMIT $3)";
const RETAINED_EVALUATIONS_COUNT: &str = "SELECT COUNT(*) FROM gate_evaluations \
     WHERE at < $1 AND ($2::TEXT IS NULL OR migration = $2)";
const RETAIN_MEMORY: &str = "DELETE FROM gate_memory t USING (SELECT g.migration, \
     g.step_entered, g.gate, g.kind FROM gate_memory g JOIN migrations m ON m.name = g.migration \
     WHERE g.step_entered <> m.entered_at AND g.at < $1 AND ($2::TEXT IS NULL OR m.name = $2) \
     LIMIT $3) d WHERE t.migration = d.migration AND t.step_entered = d.step_entered \
     AND t.gate = d.gate AND t.kind = d.kind";
const RETAINED_MEMORY_COUNT: &str = "SELECT COUNT(*) FROM gate_memory g JOIN migrations m \
     ON m.name = g.migration WHERE g.step_entered <> m.entered_at AND g.at < $1 \
     AND ($2::TEXT IS NULL OR m.name = $2)";
const RETAIN_SCRAPES: &str = "DELETE FROM scrapes t USING (SELECT s.migration, s.source, s.at \
     FROM scrapes s JOIN migrations m ON m.name = s.migration WHERE m.state = $4 AND s.at < $1 \
     AND ($2::TEXT IS NULL OR m.name = $2) LIMIT $3) d \
     WHERE t.migration = d.migration AND t.source = d.source AND t.at = d.at";
const RETAINED_SCRAPES_COUNT: &str = "SELECT COUNT(*) FROM scrapes s JOIN migrations m \
     ON m.name = s.migration WHERE m.state = $3 AND s.at < $1 AND ($2::TEXT IS NULL OR m.name = $2)";

/// A count read back as the number of rows it is.
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl Store for PgStore {
    async fn create(&self, new: &NewMigration) -> Result<MigrationRecord> {
        let mut tx = self.pool.begin().await?;
        let planned = State::Planned;
        let at = self.journal_at(&mut tx, new.now_ms).await?;
        // ON CONFLICT: a concurrent `init` of the same name is AlreadyExists, not a database
        // error.
        let row = sqlx::query(
            "INSERT INTO migrations (name, plan_yaml, plan_path, plan_hash, state, step, paused, \
             version, generation, published_generation, entered_at, updated_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, NULL, FALSE, 1, 1, 0, $6, $6, $6) \
             ON CONFLICT (name) DO NOTHING RETURNING *",
        )
        .bind(&new.name)
        .bind(&new.plan_yaml)
        .bind(&new.plan_path)
        .bind(&new.plan_hash)
        .bind(planned.name())
        .bind(at)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::AlreadyExists(new.name.clone()))?;
        let record = migration_row(&row)?;
        let mut row = JournalRow::of_init(new);
        row.at_ms = at;
        insert_journal(&mut tx, &row).await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn get(&self, name: &str) -> Result<MigrationRecord> {
        let row = sqlx::query("SELECT * FROM migrations WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(name.to_string()))?;
        migration_row(&row)
    }

    async fn list(&self) -> Result<Vec<MigrationRecord>> {
        sqlx::query(r#"SELECT * FROM migrations ORDER BY name COLLATE "C""#)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(migration_row)
            .collect()
    }

    async fn fleet(&self) -> Result<Fleet> {
        // One snapshot for both statements.
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await?;
        let records = sqlx::query(r#"SELECT * FROM migrations ORDER BY name COLLATE "C""#)
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
        let mut tx = self.pool.begin().await?;
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
            "UPDATE migrations SET state = $1, step = $2, paused = $3, version = $4, \
             generation = $5, entered_at = $6, updated_at = $7 \
             WHERE name = $8 AND version = $9 RETURNING *",
        )
        .bind(c.to.state.name())
        .bind(step_of(c.to.state))
        .bind(c.to.paused)
        .bind(version)
        .bind(generation)
        .bind(entered_at)
        .bind(at)
        .bind(name)
        .bind(c.expected_version)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(conflict)?;
        let record = migration_row(&updated)?;
        let mut row = JournalRow::of_commit(name, c, current.snapshot(), version, generation);
        row.at_ms = at;
        row.epoch = fence.as_ref().map(|f| f.epoch);
        insert_journal(&mut tx, &row).await?;
        fence::prove_pg(&mut tx, &self.fence, fence.as_ref(), "a transition").await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn replace_plan(&self, name: &str, r: &PlanReplace) -> Result<MigrationRecord> {
        let fence = self.fence.demand("a plan apply")?;
        let mut tx = self.pool.begin().await?;
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
            "UPDATE migrations SET plan_yaml = $1, plan_path = $2, plan_hash = $3, version = $4, \
             generation = $5, updated_at = $6 WHERE name = $7 AND version = $8 RETURNING *",
        )
        .bind(&r.plan_yaml)
        .bind(&r.plan_path)
        .bind(&r.plan_hash)
        .bind(version)
        .bind(generation)
        .bind(updated_at)
        .bind(name)
        .bind(r.expected_version)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(conflict)?;
        let record = migration_row(&updated)?;
        // The memory of the current step's changed gates goes with their old definition.
        for (gate, kind) in &r.reset_gates {
            sqlx::query(
                "DELETE FROM gate_memory WHERE migration = $1 AND step_entered = $2 AND gate = $3 \
                 AND kind = $4",
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
        fence::prove_pg(&mut tx, &self.fence, fence.as_ref(), "a plan apply").await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn journal(&self, name: &str) -> Result<Vec<JournalEntry>> {
        self.get(name).await?;
        sqlx::query("SELECT * FROM journal WHERE migration = $1 ORDER BY seq")
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
            "SELECT * FROM journal WHERE migration = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3",
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
        let what = "a round's evaluations";
        let fence = self.fence.demand(what)?;
        let mut tx = self.pool.begin().await?;
        insert_evaluations(&mut tx, rounds).await?;
        insert_points(&mut tx, &SourceRows::of(rounds)).await?;
        fence::prove_pg(&mut tx, &self.fence, fence.as_ref(), what).await?;
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
            "SELECT * FROM (SELECT *, 0::BIGINT AS revision FROM gate_evaluations \
             WHERE migration = $1 ORDER BY id DESC LIMIT $2) AS newest ORDER BY id",
        )
        .bind(name)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(gate_row).collect()
    }

    async fn mark_published(&self, name: &str, generation: i64) -> Result<()> {
        let fence = self.fence.demand("a publish mark")?;
        let mut tx = self.pool.begin().await?;
        // An error noted for a newer generation still holds: only older ones are cleared.
        sqlx::query(
            "UPDATE migrations SET published_generation = GREATEST(published_generation, $1), \
             publish_error = CASE WHEN COALESCE(publish_error_generation, 0) <= $1 \
                 THEN NULL ELSE publish_error END, \
             publish_error_generation = CASE WHEN COALESCE(publish_error_generation, 0) <= $1 \
                 THEN NULL ELSE publish_error_generation END \
             WHERE name = $2",
        )
        .bind(generation)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        fence::prove_pg(&mut tx, &self.fence, fence.as_ref(), "a publish mark").await?;
        tx.commit().await?;
        Ok(())
    }

    async fn note_publish_error(&self, name: &str, generation: i64, error: &str) -> Result<()> {
        let fence = self.fence.demand("a publish error")?;
        let mut tx = self.pool.begin().await?;
        // Not when this generation or a newer one was published since, nor over the error of a
        // newer generation.
        sqlx::query(
            "UPDATE migrations SET publish_error = $1, publish_error_generation = $2 \
             WHERE name = $3 AND published_generation < $2 \
             AND (publish_error IS NULL OR COALESCE(publish_error_generation, 0) <= $2)",
        )
        .bind(error)
        .bind(generation)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        fence::prove_pg(&mut tx, &self.fence, fence.as_ref(), "a publish error").await?;
        tx.commit().await?;
        Ok(())
    }

    async fn generations(&self) -> Result<Vec<(String, i64)>> {
        let rows =
            sqlx::query(r#"SELECT name, generation FROM migrations ORDER BY name COLLATE "C""#)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("name")?, r.try_get("generation")?)))
            .collect()
    }

    async fn generations_mark(&self) -> Result<(i64, i64)> {
        let row = sqlx::query("SELECT COUNT(*)::BIGINT AS n, COALESCE(SUM(generation), 0)::BIGINT AS total FROM migrations")
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
        let mut tx = self.pool.begin().await?;
        let now = Self::db_now(&mut tx).await?;
        sqlx::query(ACQUIRE_LEASE)
            .bind(lease)
            .bind(holder)
            .bind(now.saturating_add(ttl_ms))
            .bind(now)
            .execute(&mut *tx)
            .await?;
        let row = sqlx::query("SELECT holder, expires_at, epoch FROM leases WHERE name = $1")
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
                "INSERT INTO lease_epochs (lease, epoch, holder, acquired_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (lease, epoch) DO NOTHING",
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
        sqlx::query("UPDATE leases SET expires_at = 0 WHERE name = $1 AND holder = $2")
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

    fn fenced(&self, cell: FenceCell) -> PgStore {
        PgStore {
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
            "SELECT COUNT(*)::BIGINT AS n, COALESCE(SUM(at), 0)::BIGINT AS total FROM scrapes WHERE migration = $1 AND source = $2 AND at <= $3",
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
            let times: Option<Vec<i64>> = sqlx::query_scalar(
                "SELECT array_agg(at) FROM scrapes \
                 WHERE migration = $1 AND source = $2 AND at > $3",
            )
            .bind(name)
            .bind(source)
            .bind(after_ms)
            .fetch_one(&self.pool)
            .await?;
            Some(times.unwrap_or_default())
        } else {
            None
        };
        let text: Option<String> = sqlx::query_scalar(
            "SELECT '[' || string_agg('[' || at || ',' || samples || ']', ',') || ']' \
             FROM scrapes WHERE migration = $1 AND source = $2 AND at > $3",
        )
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
        let mut tx = self.pool.begin().await?;
        let one = SourceRows {
            name,
            source,
            points,
            scrape_times,
            keep_from_ms: Some(keep_from_ms),
        };
        insert_points(&mut tx, &[one]).await?;
        fence::prove_pg(&mut tx, &self.fence, fence.as_ref(), "a scrape's samples").await?;
        tx.commit().await?;
        Ok(())
    }
    async fn prune(&self, prune: &Prune) -> Result<Pruned> {
        let (before, name, batch) = (prune.before_ms, prune.migration.as_deref(), prune.batch);
        let done = State::Complete.name();
        let what = "a retention delete";
        let fence = self.fence.demand(what)?;
        let mut tx = self.pool.begin().await?;
        let gate_evaluations = sqlx::query(RETAIN_EVALUATIONS)
            .bind(before)
            .bind(name)
            .bind(batch)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        fence::prove_pg(&mut tx, &self.fence, fence.as_ref(), what).await?;
        tx.commit().await?;
        let mut tx = self.pool.begin().await?;
        let gate_memory = sqlx::query(RETAIN_MEMORY)
            .bind(before)
            .bind(name)
            .bind(batch)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        fence::prove_pg(&mut tx, &self.fence, fence.as_ref(), what).await?;
        tx.commit().await?;
        let mut tx = self.pool.begin().await?;
        let scrapes = sqlx::query(RETAIN_SCRAPES)
            .bind(before)
            .bind(name)
            .bind(batch)
            .bind(done)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        fence::prove_pg(&mut tx, &self.fence, fence.as_ref(), what).await?;
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
