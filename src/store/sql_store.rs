//! [`Store`] on the [`SqlStore`]: each statement written once, run on either database (see
//! [`super::sql`]).

use std::collections::HashMap;

use sqlx::Row;

use super::dialect;
use super::fence::{Fence, FenceCell};
use super::retention::{Prune, Pruned};
use super::sql::{Begin, SqlStore, Tx, count};
use super::sql_rows::{Rows, gate_row, journal_row, migration_row};
use super::{
    Commit, DecisionStore, EvaluationStore, Fleet, GateKey, GateRecord, JournalEntry, JournalRow,
    JournalStore, Lease, LeaseStore, MigrationRecord, NewMigration, OutboxEntry, PlanReplace,
    Result, RoundRecord, ScrapeStore, SourceRows, StoreError, StoredPoint, StoredSeries, memory,
    memory::Table, samples_after, scrapes, step_of,
};
use crate::machine::State;

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

/// Take or renew a lease (`$1` name, `$2` holder, `$3` until, `$4` the database's now): a new
/// holder's epoch is one above both the row's and every epoch the lease ever had.
const ACQUIRE_LEASE: &str = "INSERT INTO leases (name, holder, expires_at, epoch) \
     VALUES ($1, $2, $3, COALESCE((SELECT MAX(epoch) FROM lease_epochs WHERE lease = $1), 0) + 1) \
     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, \
     epoch = CASE WHEN leases.holder = excluded.holder THEN leases.epoch \
     ELSE {greatest}(leases.epoch + 1, excluded.epoch) END \
     WHERE leases.holder = excluded.holder OR leases.expires_at <= $4";

/// The migration `name` read for a write, if it is still at version `expected` (a conflict
/// naming the version it is at otherwise). SQLite: inside a `BEGIN IMMEDIATE` transaction, no
/// other writer until it ends. PostgreSQL: `FOR UPDATE`, a concurrent writer waits here until
/// this transaction is done, then reads the version it wrote, so its conflict names the actual
/// version.
async fn current_at(tx: &mut Tx, name: &str, expected: i64) -> Result<MigrationRecord> {
    let sql = tx
        .dialect()
        .sql("SELECT * FROM migrations WHERE name = $1{for_update}");
    let current = in_tx!(tx, c => sqlx::query(sql)
        .bind(name)
        .fetch_optional(&mut *c)
        .await?
        .ok_or_else(|| StoreError::NotFound(name.to_string()))?
        .migration()?);
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
    tx: &mut Tx,
    name: &str,
    step_entered_ms: i64,
    c: &Commit,
) -> Result<Option<StoreError>> {
    if c.memory.is_empty() {
        return Ok(None);
    }
    let changed = in_tx!(tx, t: D => changed_of(
        &memory::changed_reads::<D>(name, step_entered_ms, &c.memory)
            .build()
            .fetch_all(&mut *t)
            .await?,
    )?);
    Ok(memory::stale(name, &changed))
}

/// The `(gate, kind)` of each row.
fn changed_of<R: Row>(rows: &[R]) -> Result<Vec<(String, String)>>
where
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> &'r str: sqlx::ColumnIndex<R>,
{
    rows.iter()
        .map(|row| Ok((row.try_get("gate")?, row.try_get("kind")?)))
        .collect()
}

/// Append `j` to the journal, inside the caller's transaction.
async fn insert_journal(tx: &mut Tx, j: &JournalRow<'_>) -> Result<()> {
    let sql = if j.epoch.is_some() {
        INSERT_JOURNAL
    } else {
        INSERT_JOURNAL_NO_EPOCH
    };
    in_tx!(tx, c => {
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
        q.execute(&mut *c).await?;
    });
    Ok(())
}

/// Write the gate rows of `rows` to `table` ([`memory::write_rows`]), in statements of up to
/// [`super::sql::Dialect::rows_per_insert`] rows whatever migrations they belong to.
async fn write_rows(tx: &mut Tx, table: Table, rows: &[memory::Owned<'_>]) -> Result<()> {
    for chunk in rows.chunks(tx.dialect().rows_per_insert()) {
        in_tx!(tx, t: D => memory::write_rows::<D>(table, chunk.iter().copied())
            .build()
            .execute(&mut *t)
            .await?
            .rows_affected());
    }
    Ok(())
}

/// The gate rows of every round: appended to the history, and each gate's memory replaced (of
/// the rounds evaluated under their migration's plan: [`memory::current_plan_rows`]; of the
/// others, only the marks of the gates whose streak they saw break are cleared:
/// [`memory::late_resets`]), in the caller's transaction.
async fn insert_evaluations(tx: &mut Tx, rounds: &[RoundRecord]) -> Result<()> {
    // The plans first: the lock is taken before any row is written.
    let plans = dialect::current_plans(tx, rounds).await?;
    write_rows(tx, Table::History, &memory::rows_of(rounds)).await?;
    let current = memory::current_plan_rows(rounds, &plans);
    write_rows(tx, Table::Memory, &memory::newest_per_gate(&current)).await?;
    // After the memory: a late round's broken streak clears a mark written in this commit too.
    let resets = memory::late_resets(rounds, &plans);
    for chunk in resets.chunks(tx.dialect().rows_per_insert()) {
        in_tx!(tx, t: D => memory::clear_marks::<D>(chunk.iter().copied())
            .build()
            .execute(&mut *t)
            .await?
            .rows_affected());
    }
    Ok(())
}

impl SqlStore {
    /// Append `row` to the journal, stamped `at` and with the epoch of `fence` (and, when
    /// `announce`, its row to the outbox: [`super::outbox`]), then prove the fence and commit:
    /// how a transition and a plan apply end.
    async fn journal_and_commit(
        &self,
        mut tx: Tx,
        mut row: JournalRow<'_>,
        at: i64,
        fence: Option<&Fence>,
        (what, announce): (&str, bool),
    ) -> Result<()> {
        row.at_ms = at;
        row.epoch = fence.map(|f| f.epoch);
        insert_journal(&mut tx, &row).await?;
        if announce {
            super::outbox::insert(&mut tx, row.name, row.seq, at).await?;
        }
        self.prove_and_commit(tx, fence, what).await
    }

    /// One retention statement (`$1` before, `$2` the migration, `$3` the batch, `$4` the
    /// state), fenced, in a transaction of its own; how many rows it deleted.
    async fn retain(&self, sql: &'static str, prune: &Prune, state: Option<&str>) -> Result<u64> {
        let what = "a retention delete";
        let fence = self.fence.demand(what)?;
        let mut tx = self.begin(Begin::Write).await?;
        let (before, name, batch) = (prune.before_ms, prune.migration.as_deref(), prune.batch);
        let deleted = in_tx!(&mut tx, c => {
            let q = sqlx::query(sql).bind(before).bind(name).bind(batch);
            let q = match state {
                Some(state) => q.bind(state),
                None => q,
            };
            q.execute(&mut *c).await?.rows_affected()
        });
        self.prove_and_commit(tx, fence.as_ref(), what).await?;
        Ok(deleted)
    }

    /// One count of [`EvaluationStore::prunable`] (`$1` before, `$2` the migration, `$3` the state).
    async fn retained(&self, sql: &'static str, prune: &Prune, state: Option<&str>) -> Result<u64> {
        let (before, name) = (prune.before_ms, prune.migration.as_deref());
        let n: i64 = on!(&self.db, p => {
            let q = sqlx::query_scalar(sql).bind(before).bind(name);
            let q = match state {
                Some(state) => q.bind(state),
                None => q,
            };
            q.fetch_one(p).await?
        });
        Ok(count(n))
    }
}

impl JournalStore for SqlStore {
    async fn create(&self, new: &NewMigration) -> Result<MigrationRecord> {
        let mut tx = self.begin(Begin::Write).await?;
        let at = self.journal_at(&mut tx, new.now_ms).await?;
        // ON CONFLICT: a concurrent `init` of the same name is AlreadyExists, not a database
        // error.
        let record = in_tx!(&mut tx, c => sqlx::query(
            "INSERT INTO migrations (name, plan_yaml, plan_path, plan_hash, state, step, paused, \
             version, generation, published_generation, entered_at, updated_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, NULL, FALSE, 1, 1, 0, $6, $6, $6) \
             ON CONFLICT (name) DO NOTHING RETURNING *",
        )
        .bind(&new.name)
        .bind(&new.plan_yaml)
        .bind(&new.plan_path)
        .bind(&new.plan_hash)
        .bind(State::Planned.name())
        .bind(at)
        .fetch_optional(&mut *c)
        .await?
        .ok_or_else(|| StoreError::AlreadyExists(new.name.clone()))?
        .migration()?);
        let mut row = JournalRow::of_init(new);
        row.at_ms = at;
        insert_journal(&mut tx, &row).await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn get(&self, name: &str) -> Result<MigrationRecord> {
        on!(&self.db, p => sqlx::query("SELECT * FROM migrations WHERE name = $1")
            .bind(name)
            .fetch_optional(p)
            .await?
            .ok_or_else(|| StoreError::NotFound(name.to_string()))?
            .migration())
    }

    async fn list(&self) -> Result<Vec<MigrationRecord>> {
        let sql = self
            .dialect()
            .sql("SELECT * FROM migrations ORDER BY name{c}");
        on!(&self.db, p => sqlx::query(sql)
            .fetch_all(p)
            .await?
            .iter()
            .map(migration_row)
            .collect())
    }

    async fn fleet(&self) -> Result<Fleet> {
        // One snapshot for both statements (SQLite: one read transaction of the WAL).
        let d = self.dialect();
        let mut tx = self.begin(Begin::Snapshot).await?;
        let (records, memory) = in_tx!(&mut tx, c => {
            let records = sqlx::query(d.sql("SELECT * FROM migrations ORDER BY name{c}"))
                .fetch_all(&mut *c)
                .await?
                .iter()
                .map(migration_row)
                .collect::<Result<Vec<_>>>()?;
            let mut memory: HashMap<String, Vec<GateRecord>> = HashMap::new();
            for row in sqlx::query(d.statements().fleet_memory).fetch_all(&mut *c).await? {
                let name: String = row.try_get("migration")?;
                memory.entry(name).or_default().push(gate_row(&row)?);
            }
            (records, memory)
        });
        tx.commit().await?;
        Ok(Fleet { records, memory })
    }

    async fn commit(&self, name: &str, c: &Commit) -> Result<MigrationRecord> {
        let what = "a transition";
        let fence = self.fence.demand(what)?;
        let mut tx = self.begin(Begin::Write).await?;
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
        let record = in_tx!(&mut tx, conn => sqlx::query(
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
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(conflict)?
        .migration()?);
        let row = JournalRow::of_commit(name, c, current.snapshot(), version, generation);
        self.journal_and_commit(tx, row, at, fence.as_ref(), (what, true))
            .await?;
        Ok(record)
    }

    async fn replace_plan(&self, name: &str, r: &PlanReplace) -> Result<MigrationRecord> {
        let what = "a plan apply";
        let fence = self.fence.demand(what)?;
        let mut tx = self.begin(Begin::Write).await?;
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
        let record = in_tx!(&mut tx, c => sqlx::query(
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
        .fetch_optional(&mut *c)
        .await?
        .ok_or_else(conflict)?
        .migration()?);
        // The memory of the current step's changed gates goes with their old definition.
        for (gate, kind) in &r.reset_gates {
            in_tx!(&mut tx, c => sqlx::query(
                "DELETE FROM gate_memory WHERE migration = $1 AND step_entered = $2 AND gate = $3 \
                 AND kind = $4",
            )
            .bind(name)
            .bind(current.entered_at_ms)
            .bind(gate)
            .bind(kind)
            .execute(&mut *c)
            .await?
            .rows_affected());
        }
        let row = JournalRow::of_plan_apply(name, r, current.snapshot(), version, generation);
        self.journal_and_commit(tx, row, at, fence.as_ref(), (what, r.republish))
            .await?;
        Ok(record)
    }

    async fn journal(&self, name: &str) -> Result<Vec<JournalEntry>> {
        self.get(name).await?;
        on!(&self.db, p => sqlx::query("SELECT * FROM journal WHERE migration = $1 ORDER BY seq")
            .bind(name)
            .fetch_all(p)
            .await?
            .iter()
            .map(journal_row)
            .collect())
    }

    async fn journal_page(
        &self,
        name: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<JournalEntry>> {
        self.get(name).await?;
        let mut page = on!(&self.db, p => sqlx::query(
            "SELECT * FROM journal WHERE migration = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3",
        )
        .bind(name)
        .bind(before.unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(p)
        .await?
        .iter()
        .map(journal_row)
        .collect::<Result<Vec<_>>>())?;
        page.reverse();
        Ok(page)
    }

    async fn mark_published(&self, name: &str, generation: i64) -> Result<()> {
        let what = "a publish mark";
        let fence = self.fence.demand(what)?;
        let mut tx = self.begin(Begin::Write).await?;
        // An error noted for a newer generation still holds: only older ones are cleared.
        let sql = tx.dialect().sql(
            "UPDATE migrations SET published_generation = {greatest}(published_generation, $1), \
             publish_error = CASE WHEN COALESCE(publish_error_generation, 0) <= $1 \
                 THEN NULL ELSE publish_error END, \
             publish_error_generation = CASE WHEN COALESCE(publish_error_generation, 0) <= $1 \
                 THEN NULL ELSE publish_error_generation END \
             WHERE name = $2",
        );
        in_tx!(&mut tx, c => sqlx::query(sql)
            .bind(generation)
            .bind(name)
            .execute(&mut *c)
            .await?
            .rows_affected());
        self.prove_and_commit(tx, fence.as_ref(), what).await
    }

    async fn note_publish_error(&self, name: &str, generation: i64, error: &str) -> Result<()> {
        let what = "a publish error";
        let fence = self.fence.demand(what)?;
        let mut tx = self.begin(Begin::Write).await?;
        // Not when this generation or a newer one was published since, nor over the error of a
        // newer generation.
        in_tx!(&mut tx, c => sqlx::query(
            "UPDATE migrations SET publish_error = $1, publish_error_generation = $2 \
             WHERE name = $3 AND published_generation < $2 \
             AND (publish_error IS NULL OR COALESCE(publish_error_generation, 0) <= $2)",
        )
        .bind(error)
        .bind(generation)
        .bind(name)
        .execute(&mut *c)
        .await?
        .rows_affected());
        self.prove_and_commit(tx, fence.as_ref(), what).await
    }

    async fn outbox_pending(&self, limit: u32) -> Result<Vec<OutboxEntry>> {
        super::outbox::pending(self, limit).await
    }

    async fn outbox_delivered(&self, name: &str, seq: i64) -> Result<()> {
        super::outbox::delivered(self, name, seq).await
    }

    async fn generations(&self) -> Result<Vec<(String, i64)>> {
        let sql = self
            .dialect()
            .sql("SELECT name, generation FROM migrations ORDER BY name{c}");
        on!(&self.db, p => sqlx::query(sql)
            .fetch_all(p)
            .await?
            .iter()
            .map(|r| Ok((r.try_get("name")?, r.try_get("generation")?)))
            .collect())
    }

    async fn generations_mark(&self) -> Result<(i64, i64)> {
        on!(&self.db, p => sqlx::query(
            "SELECT CAST(COUNT(*) AS BIGINT) AS n, \
             CAST(COALESCE(SUM(generation), 0) AS BIGINT) AS total FROM migrations",
        )
        .fetch_one(p)
        .await?
        .counts())
    }

    async fn clock_ms(&self, writer_ms: i64) -> Result<i64> {
        if self.writer_clock {
            return Ok(writer_ms);
        }
        let sql = match self.dialect() {
            super::sql::Dialect::Sqlite => super::fence::SELECT_NOW_SQLITE,
            super::sql::Dialect::Postgres => super::fence::SELECT_NOW_PG,
        };
        Ok(on!(&self.db, p => sqlx::query_scalar(sql).fetch_one(p).await?))
    }
}

impl EvaluationStore for SqlStore {
    async fn record_rounds(&self, rounds: &[RoundRecord]) -> Result<()> {
        let what = "a round's evaluations";
        let fence = self.fence.demand(what)?;
        let mut tx = self.begin(Begin::Write).await?;
        insert_evaluations(&mut tx, rounds).await?;
        dialect::insert_points(&mut tx, &SourceRows::of(rounds)).await?;
        self.prove_and_commit(tx, fence.as_ref(), what).await
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
        let sql = self.dialect().statements().latest_evaluations;
        on!(&self.db, p => memory::named(
            sqlx::query(sql)
                .bind(name)
                .bind(step_entered_ms)
                .fetch_all(p)
                .await?
                .iter()
                .map(gate_row),
            gates,
        ))
    }

    async fn evaluation_history(&self, name: &str, limit: u32) -> Result<Vec<GateRecord>> {
        on!(&self.db, p => sqlx::query(
            "SELECT * FROM (SELECT *, CAST(0 AS BIGINT) AS revision FROM gate_evaluations \
             WHERE migration = $1 ORDER BY id DESC LIMIT $2) AS newest ORDER BY id",
        )
        .bind(name)
        .bind(i64::from(limit))
        .fetch_all(p)
        .await?
        .iter()
        .map(gate_row)
        .collect())
    }

    async fn prune(&self, prune: &Prune) -> Result<Pruned> {
        let s = self.dialect().statements();
        Ok(Pruned {
            gate_evaluations: self.retain(s.retain_evaluations, prune, None).await?,
            gate_memory: self.retain(s.retain_memory, prune, None).await?,
            scrapes: self
                .retain(s.retain_scrapes, prune, Some(State::Complete.name()))
                .await?,
            outbox: self.retain(s.retain_outbox, prune, None).await?,
        })
    }

    async fn prunable(&self, prune: &Prune) -> Result<Pruned> {
        let s = self.dialect().statements();
        let done = Some(State::Complete.name());
        Ok(Pruned {
            gate_evaluations: self
                .retained(s.retained_evaluations_count, prune, None)
                .await?,
            gate_memory: self.retained(s.retained_memory_count, prune, None).await?,
            scrapes: self.retained(s.retained_scrapes_count, prune, done).await?,
            outbox: self.retained(s.retained_outbox_count, prune, None).await?,
        })
    }
}

impl LeaseStore for SqlStore {
    async fn acquire_lease(
        &self,
        lease: &str,
        holder: &str,
        _now_ms: i64,
        ttl_ms: i64,
    ) -> Result<Lease> {
        let mut tx = self.begin(Begin::Write).await?;
        let now = tx.db_now().await?;
        let acquire = tx.dialect().sql(ACQUIRE_LEASE);
        let got = in_tx!(&mut tx, c => {
            sqlx::query(acquire)
                .bind(lease)
                .bind(holder)
                .bind(now.saturating_add(ttl_ms))
                .bind(now)
                .execute(&mut *c)
                .await?;
            let row = sqlx::query("SELECT holder, expires_at, epoch FROM leases WHERE name = $1")
                .bind(lease)
                .fetch_one(&mut *c)
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
                .execute(&mut *c)
                .await?;
            }
            got
        });
        tx.commit().await?;
        Ok(got)
    }

    async fn peek_lease(&self, lease: &str) -> Result<Option<Lease>> {
        let mut tx = self.begin(Begin::Snapshot).await?;
        let now = tx.db_now().await?;
        let got = in_tx!(&mut tx, c => {
            match sqlx::query("SELECT holder, expires_at, epoch FROM leases WHERE name = $1")
                .bind(lease)
                .fetch_optional(&mut *c)
                .await?
            {
                Some(row) => Some(Lease {
                    holder: row.try_get("holder")?,
                    expires_at_ms: row.try_get("expires_at")?,
                    epoch: row.try_get("epoch")?,
                    db_now_ms: now,
                }),
                None => None,
            }
        });
        tx.commit().await?;
        Ok(got)
    }

    async fn lease_holder(&self, lease: &str) -> Result<Option<String>> {
        let mut tx = self.begin(Begin::Snapshot).await?;
        let now = tx.db_now().await?;
        let holder = in_tx!(&mut tx, c => sqlx::query_scalar::<_, String>(
            "SELECT holder FROM leases WHERE name = $1 AND expires_at > $2",
        )
        .bind(lease)
        .bind(now)
        .fetch_optional(&mut *c)
        .await?);
        tx.commit().await?;
        Ok(holder)
    }

    async fn release_lease(&self, lease: &str, holder: &str) -> Result<()> {
        // The row stays, expired: its epoch never goes back.
        on!(&self.db, p => sqlx::query(
            "UPDATE leases SET expires_at = 0 WHERE name = $1 AND holder = $2",
        )
        .bind(lease)
        .bind(holder)
        .execute(p)
        .await?
        .rows_affected());
        Ok(())
    }

    fn fenced(&self, cell: FenceCell) -> SqlStore {
        SqlStore {
            fence: cell,
            ..self.clone()
        }
    }

    fn fence(&self) -> FenceCell {
        self.fence.clone()
    }
}

impl ScrapeStore for SqlStore {
    async fn scrape_instants_through(
        &self,
        name: &str,
        source: &str,
        through_ms: i64,
    ) -> Result<(i64, i64)> {
        on!(&self.db, p => sqlx::query(
            "SELECT CAST(COUNT(*) AS BIGINT) AS n, CAST(COALESCE(SUM(at), 0) AS BIGINT) \
             AS total FROM scrapes WHERE migration = $1 AND source = $2 AND at <= $3",
        )
        .bind(name)
        .bind(source)
        .bind(through_ms)
        .fetch_one(p)
        .await?
        .counts())
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
            Some(dialect::times_after(&self.db, name, source, after_ms).await?)
        } else {
            None
        };
        let text = dialect::scrapes_after(&self.db, name, source, from).await?;
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
        let what = "a scrape's samples";
        let fence = self.fence.demand(what)?;
        let mut tx = self.begin(Begin::Write).await?;
        let one = SourceRows {
            name,
            source,
            points,
            scrape_times,
            keep_from_ms: Some(keep_from_ms),
        };
        dialect::insert_points(&mut tx, &[one]).await?;
        self.prove_and_commit(tx, fence.as_ref(), what).await
    }
}

impl DecisionStore for SqlStore {
    async fn dlq_decisions(&self) -> Result<Vec<super::dlq_rows::Disposition>> {
        super::dispositions::DispositionStore::list(self).await
    }
}
