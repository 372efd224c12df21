//! The SQL store: one [`SqlStore`] over either database, each query written once.
//!
//! A store holds a pool of one backend ([`Db`]); a write holds a transaction of it ([`Tx`]). A
//! statement is written once, with numbered placeholders (`$1`, which sqlx-sqlite reads as
//! PostgreSQL does), inside [`on!`] (on the pool) or [`in_tx!`] (in a transaction): the macro
//! runs it on whichever backend the store holds. What the databases spell differently (the
//! database clock, `GREATEST`/`MAX`, `COLLATE "C"`, `FOR UPDATE`, how a transaction begins and
//! how many rows a multi-row insert takes) comes from the [`Dialect`]; the few statements that
//! differ as a whole (arrays against JSON, `USING` against `rowid`) are in [`super::dialect`].
//!
//! # Guarantees
//! Each backend runs the statements it ran when each had its own file: same schema
//! (`migrations/<database>/`), same transactions (`BEGIN IMMEDIATE` on SQLite for every write,
//! `FOR UPDATE`/`FOR SHARE` row locks on PostgreSQL), same answers and errors.

use std::time::Duration;

use super::fence::{Fence, FenceCell};
use super::{Result, StoreError};

/// `on!(db, p => expr)`: `expr` with `p` the pool (SQLite) or a connection of it held for the
/// statement ([`super::held::Held`], PostgreSQL) of whichever backend `db` (a `&Db`) holds,
/// under the store's client-side deadline ([`within`]; its `?`s return from the statement).
/// A PostgreSQL connection whose statement was cut is closed, never given back as it is.
///
/// `on!(db, sqlite p => expr, postgres p => expr)`: the same, each backend with its own.
macro_rules! on {
    ($db:expr, $p:ident => $e:expr) => {
        on!($db, sqlite $p => $e, postgres $p => $e)
    };
    ($db:expr, sqlite $p:ident => $lite:expr, postgres $q:ident => $pg:expr) => {{
        let db: &$crate::store::sql::Db = $db;
        match &db.pool {
            $crate::store::sql::Pool::Sqlite($p) => {
                $crate::store::sql::within(db.deadline, async {
                    Ok::<_, $crate::store::StoreError>($lite)
                })
                .await?
            }
            $crate::store::sql::Pool::Postgres(pool) => {
                let until = tokio::time::Instant::now() + db.deadline;
                let mut held =
                    $crate::store::held::Held::acquire(pool, until, db.deadline).await?;
                let answer = $crate::store::sql::within_until(until, db.deadline, async {
                    let $q = held.start();
                    Ok::<_, $crate::store::StoreError>($pg)
                })
                .await;
                held.settle(&answer);
                answer?
            }
        }
    }};
}

/// `in_tx!(tx, c => expr)`: `expr` with `c` the connection (`&mut`) of whichever backend's
/// transaction `tx` (a `&mut Tx`) is, under the store's client-side deadline ([`within`]). A
/// statement cut there leaves the transaction's connection to be closed when the transaction is
/// dropped ([`super::held::Held`]), never given back as it is.
///
/// `in_tx!(tx, c: Db => expr)`: the same with `Db` naming the backend's [`sqlx::Database`] in
/// `expr` (a query built for one backend).
macro_rules! in_tx {
    ($tx:expr, $c:ident : $d:ident => $e:expr) => {{
        let tx: &mut $crate::store::sql::Tx = $tx;
        let deadline = tx.deadline;
        let answer = $crate::store::sql::within(deadline, async {
            Ok::<_, $crate::store::StoreError>(match &mut tx.conn {
                $crate::store::sql::TxConn::Sqlite(t) => {
                    type $d = sqlx::Sqlite;
                    let $c = &mut **t;
                    $e
                }
                $crate::store::sql::TxConn::Postgres(t) => {
                    type $d = sqlx::Postgres;
                    let $c = t.start();
                    $e
                }
            })
        })
        .await;
        tx.settle(&answer);
        answer?
    }};
    ($tx:expr, $c:ident => $e:expr) => {
        in_tx!($tx, $c: _Backend => $e)
    };
}

/// How long one statement (or one acquisition of a connection, or one commit) of a store may
/// take on the client's side unless told otherwise ([`SqlStore::with_statement_deadline`]).
pub const DEFAULT_STATEMENT_DEADLINE: Duration = Duration::from_secs(60);

/// `statement` cut at `deadline` on the client's side (issue 54): a statement whose connection
/// stopped answering (a partition that left the socket open: no FIN, no RST) is
/// [`StoreError::Deadline`], never a wait; its connection, dropped with the statement, is
/// closed rather than returned to the pool ([`super::held::Held`]).
///
/// # Errors
/// The statement's own, or [`StoreError::Deadline`].
pub(crate) async fn within<T>(
    deadline: Duration,
    statement: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    within_until(tokio::time::Instant::now() + deadline, deadline, statement).await
}

/// `statement` cut at the instant `until` ([`within`] with the rest of a deadline of which the
/// acquisition of its connection took a part): [`StoreError::Deadline`] (`deadline`) then.
///
/// # Errors
/// The statement's own, or [`StoreError::Deadline`].
pub(crate) async fn within_until<T>(
    until: tokio::time::Instant,
    deadline: Duration,
    statement: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout_at(until, statement).await {
        Ok(answer) => answer,
        Err(_) => Err(StoreError::Deadline(deadline)),
    }
}

/// The pool of one backend, with the client-side deadline of each statement run on it.
#[derive(Debug, Clone)]
pub(crate) struct Db {
    pub(crate) pool: Pool,
    /// How long one statement may take ([`within`]).
    pub(crate) deadline: Duration,
}

/// The pool of one backend.
#[derive(Debug, Clone)]
pub(crate) enum Pool {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

/// A transaction of one backend, with the client-side deadline of each statement run in it.
pub(crate) struct Tx {
    pub(crate) conn: TxConn,
    /// How long one statement may take ([`within`]).
    pub(crate) deadline: Duration,
}

/// A transaction of one backend: sqlx's on SQLite; on PostgreSQL a connection held for it
/// (`BEGIN`, `COMMIT` and the rollback of one given up are the [`super::held::Held`]'s), so
/// that a transaction cut anywhere, its `BEGIN` included, never goes back to the pool open.
pub(crate) enum TxConn {
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
    Postgres(super::held::Held),
}

/// How a transaction begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Begin {
    /// A write: `BEGIN IMMEDIATE` on SQLite (no other writer until it ends), `BEGIN` on
    /// PostgreSQL (its statements lock the rows they need).
    Write,
    /// A plain `BEGIN` on both.
    Plain,
    /// Reads that must see one snapshot: a read transaction of the WAL on SQLite, `REPEATABLE
    /// READ, READ ONLY` on PostgreSQL.
    Snapshot,
}

/// What the two databases spell differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The database's clock now, in ms since the epoch, as an SQL expression.
    pub fn now_ms(self) -> &'static str {
        match self {
            Dialect::Sqlite => super::fence::NOW_MS_SQLITE,
            Dialect::Postgres => super::fence::NOW_MS_PG,
        }
    }

    /// Rows per multi-row INSERT. SQLite: sqlx keeps the statements it prepared on each
    /// connection of the pool, and a statement's compiled program grows with its rows; 50 rows
    /// keep those small while already spreading a statement's fixed cost (the round's commit
    /// moved from 500 to 50 together with the daemon's arena cap, measured together:
    /// BENCHMARKS.md, seventh pass). PostgreSQL allows 65,535 parameters per statement: at
    /// most 17 per row, 1,000 rows.
    pub fn rows_per_insert(self) -> usize {
        match self {
            Dialect::Sqlite => 50,
            Dialect::Postgres => 1_000,
        }
    }

    /// `text` with its dialect's words: `{greatest}` (of two values), `{c}` (text ordered
    /// bytewise, as SQLite orders it, whatever the database's collation), `{for_update}` (the
    /// row locked for the transaction; SQLite's write transactions lock the whole file),
    /// `{now}` ([`Dialect::now_ms`]).
    pub fn sql(self, text: &'static str) -> sqlx::AssertSqlSafe<String> {
        let (greatest, c, for_update) = match self {
            Dialect::Sqlite => ("MAX", "", ""),
            Dialect::Postgres => ("GREATEST", " COLLATE \"C\"", " FOR UPDATE"),
        };
        sqlx::AssertSqlSafe(
            text.replace("{greatest}", greatest)
                .replace("{c}", c)
                .replace("{for_update}", for_update)
                .replace("{now}", self.now_ms()),
        )
    }
}

/// The statements of one database that the other spells differently.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Statements {
    /// The memory of every gate of a migration in one step (`$1`, `$2`), oldest first.
    pub latest_evaluations: &'static str,
    /// Each migration's gate memory of the step it is in.
    pub fleet_memory: &'static str,
    /// What a prune may delete: `$1` before, `$2` the migration or NULL, `$3` the batch, `$4`
    /// the state of migrations never evaluated again (scrapes); and the counts of the same
    /// (the state then `$3`).
    pub retain_evaluations: &'static str,
    pub retained_evaluations_count: &'static str,
    pub retain_memory: &'static str,
    pub retained_memory_count: &'static str,
    pub retain_scrapes: &'static str,
    pub retained_scrapes_count: &'static str,
    /// The outbox's delivered rows committed before `$1` (never an undelivered one).
    pub retain_outbox: &'static str,
    pub retained_outbox_count: &'static str,
}

/// The SQL store, on SQLite or PostgreSQL.
#[derive(Debug, Clone)]
pub struct SqlStore {
    pub(crate) db: Db,
    /// The fence of its writes ([`super::LeaseStore::fenced`]).
    pub(crate) fence: FenceCell,
    /// Journal times from the writer (`--now`, the demo's simulated clock), not the database.
    pub(crate) writer_clock: bool,
}

impl SqlStore {
    /// A store on `db`, unfenced, on the database's clock.
    pub(crate) fn on(pool: Pool) -> SqlStore {
        SqlStore {
            db: Db {
                pool,
                deadline: DEFAULT_STATEMENT_DEADLINE,
            },
            fence: FenceCell::default(),
            writer_clock: false,
        }
    }

    /// This store, each of its statements (and each acquisition of a connection, each commit)
    /// cut on the client's side after `deadline` ([`within`]; [`DEFAULT_STATEMENT_DEADLINE`]
    /// unless told).
    ///
    /// # Guarantees
    /// A statement whose connection stopped answering returns [`StoreError::Deadline`] after
    /// `deadline`; on PostgreSQL that connection is closed, not returned to the pool, and the
    /// next statement runs on another connection.
    #[must_use]
    pub fn with_statement_deadline(mut self, deadline: Duration) -> SqlStore {
        self.db.deadline = deadline;
        self
    }

    /// How long one statement of this store may take on the client's side.
    pub fn statement_deadline(&self) -> Duration {
        self.db.deadline
    }

    /// What its database spells differently.
    pub(crate) fn dialect(&self) -> Dialect {
        match self.db.pool {
            Pool::Sqlite(_) => Dialect::Sqlite,
            Pool::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The backend's name: `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self.db.pool {
            Pool::Sqlite(_) => "sqlite",
            Pool::Postgres(_) => "postgres",
        }
    }

    /// This store, stamping the journal, the step's start and the last update of what it
    /// commits with the writer's instants (a simulated clock: the demo, `--now`, a test that
    /// injects one) instead of the database's clock.
    #[must_use]
    pub fn with_writer_clock(mut self) -> SqlStore {
        self.writer_clock = true;
        self
    }

    /// A transaction begun as `how` says.
    pub(crate) async fn begin(&self, how: Begin) -> Result<Tx> {
        let deadline = self.db.deadline;
        let conn = match &self.db.pool {
            Pool::Sqlite(p) => TxConn::Sqlite(
                within(deadline, async {
                    Ok(match how {
                        Begin::Write => p.begin_with("BEGIN IMMEDIATE").await?,
                        _ => p.begin().await?,
                    })
                })
                .await?,
            ),
            Pool::Postgres(p) => {
                let until = tokio::time::Instant::now() + deadline;
                let mut held = super::held::Held::acquire(p, until, deadline).await?;
                let sql = match how {
                    Begin::Snapshot => "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                    _ => "BEGIN",
                };
                let answer = within_until(until, deadline, async {
                    sqlx::raw_sql(sql).execute(held.start()).await?;
                    Ok(())
                })
                .await;
                held.settle(&answer);
                answer?;
                held.set_open(true);
                TxConn::Postgres(held)
            }
        };
        Ok(Tx { conn, deadline })
    }

    /// The instant a journal entry written now carries: the database's (read in `tx`), unless
    /// the writer's.
    pub(crate) async fn journal_at(&self, tx: &mut Tx, writer_ms: i64) -> Result<i64> {
        if self.writer_clock {
            Ok(writer_ms)
        } else {
            tx.db_now().await
        }
    }

    /// Prove `fence` in `tx` ([`Tx::prove`]) and commit: what every fenced write ends with.
    pub(crate) async fn prove_and_commit(
        &self,
        mut tx: Tx,
        fence: Option<&Fence>,
        what: &str,
    ) -> Result<()> {
        tx.prove(&self.fence, fence, what).await?;
        tx.commit().await
    }
}

impl Tx {
    /// Commit it.
    pub(crate) async fn commit(self) -> Result<()> {
        let deadline = self.deadline;
        match self.conn {
            TxConn::Sqlite(t) => {
                within(deadline, async {
                    t.commit().await?;
                    Ok(())
                })
                .await
            }
            TxConn::Postgres(mut held) => {
                let answer = within(deadline, async {
                    sqlx::raw_sql("COMMIT").execute(held.start()).await?;
                    Ok(())
                })
                .await;
                held.settle(&answer);
                if !matches!(answer, Err(StoreError::Deadline(_))) {
                    // Answered: the transaction ended (a failed COMMIT rolls it back).
                    held.set_open(false);
                }
                answer
            }
        }
    }

    /// The statement run last in it ended as `answer` says ([`super::held::Held::settle`]).
    pub(crate) fn settle<T>(&mut self, answer: &Result<T>) {
        if let TxConn::Postgres(held) = &mut self.conn {
            held.settle(answer);
        }
    }

    /// What its database spells differently.
    pub(crate) fn dialect(&self) -> Dialect {
        match self.conn {
            TxConn::Sqlite(_) => Dialect::Sqlite,
            TxConn::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The database's clock now, in ms since the epoch (in this transaction).
    pub(crate) async fn db_now(&mut self) -> Result<i64> {
        let sql = match self.dialect() {
            Dialect::Sqlite => super::fence::SELECT_NOW_SQLITE,
            Dialect::Postgres => super::fence::SELECT_NOW_PG,
        };
        Ok(in_tx!(self, c => sqlx::query_scalar(sql).fetch_one(&mut *c).await?))
    }

    /// The proof of `fence` ([`super::fence`]): a conditional write against the lease row, the
    /// last statement before the commit; the write is refused (`cell` counts it) when it
    /// changes no row. Nothing without a fence.
    pub(crate) async fn prove(
        &mut self,
        cell: &FenceCell,
        fence: Option<&Fence>,
        what: &str,
    ) -> Result<()> {
        let Some(f) = fence else { return Ok(()) };
        let sql = match self.dialect() {
            Dialect::Sqlite => super::fence::PROVE_SQLITE,
            Dialect::Postgres => super::fence::PROVE_PG,
        };
        let done = in_tx!(self, c => sqlx::query(sql)
            .bind(&f.lease)
            .bind(&f.holder)
            .bind(f.epoch)
            .execute(&mut *c)
            .await?
            .rows_affected());
        if done == 1 {
            Ok(())
        } else {
            Err(cell.refuse(what, Some(f.epoch)))
        }
    }
}

/// A schema: `(version, description, SQL)` of each migration, in order.
pub(crate) type Schema = [(i64, &'static str, &'static str)];

/// What applies the migrations of `schema` a database lacks.
pub(crate) fn migrator(schema: &Schema) -> sqlx::migrate::Migrator {
    let migrations = schema
        .iter()
        .map(|(version, description, sql)| {
            sqlx::migrate::Migration::new(
                *version,
                std::borrow::Cow::Borrowed(*description),
                sqlx::migrate::MigrationType::Simple,
                sqlx::SqlSafeStr::into_sql_str(*sql),
                false,
            )
        })
        .collect();
    sqlx::migrate::Migrator::with_migrations(migrations)
}

/// A count read back as the number of rows it is.
pub(crate) fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
