//! The statements the two databases spell differently as a whole, and the steps built on them:
//! the plans a round is checked against (a JSON array on SQLite, an array and `FOR SHARE` on
//! PostgreSQL), a round's scrapes (multi-row inserts against arrays and `UNNEST`), a source's
//! history read back, and what retention deletes (`rowid` against `USING`). Everything else
//! is written once in [`super::sql_store`].

use std::collections::HashMap;

use sqlx::{QueryBuilder, Row, Sqlite};

use super::sql::{Db, Dialect, Pool, Statements, Tx, TxConn, within};
use super::{Result, RoundRecord, SourceRows, StoreError, memory, scrapes};

impl Dialect {
    /// Its statements.
    pub(super) fn statements(self) -> &'static Statements {
        match self {
            Dialect::Sqlite => &super::sqlite::STATEMENTS,
            Dialect::Postgres => &super::postgres::STATEMENTS,
        }
    }
}

/// The plan hash of each migration a round was evaluated under a plan of, by name (see
/// [`memory::current_plan_rows`]), in one statement; none read when no round was. SQLite: the
/// names as one JSON array, inside a `BEGIN IMMEDIATE` transaction (no `plan apply` commits
/// until it ends). PostgreSQL: `FOR SHARE`: a `plan apply` of one of them (`FOR UPDATE`)
/// commits before this read (which then sees its plan) or waits until the caller's transaction
/// ends (and then forgets what it wrote of the changed gates), never in between.
pub(super) async fn current_plans(
    tx: &mut Tx,
    rounds: &[RoundRecord],
) -> Result<HashMap<String, String>> {
    let names = memory::planned_names(rounds);
    if names.is_empty() {
        return Ok(HashMap::new());
    }
    let deadline = tx.deadline;
    let answer = within(deadline, async {
        Ok::<Vec<(String, String)>, StoreError>(match &mut tx.conn {
        TxConn::Sqlite(c) => sqlx::query(
            "SELECT name, plan_hash FROM migrations WHERE name IN (SELECT value FROM json_each(?))",
        )
        .bind(serde_json::Value::from(names).to_string())
        .fetch_all(&mut **c)
        .await?
        .iter()
        .map(|row| Ok((row.try_get("name")?, row.try_get("plan_hash")?)))
        .collect::<Result<_>>()?,
        TxConn::Postgres(c) => sqlx::query(
            r#"SELECT name, plan_hash FROM migrations WHERE name = ANY($1)
               ORDER BY name COLLATE "C" FOR SHARE"#,
        )
        .bind(&names)
        .fetch_all(c.start())
        .await?
        .iter()
        .map(|row| Ok((row.try_get("name")?, row.try_get("plan_hash")?)))
        .collect::<Result<_>>()?,
        })
    })
    .await;
    tx.settle(&answer);
    Ok(answer?.into_iter().collect())
}

/// The sources' scrapes added, one row per (migration, source, instant), then each source's
/// history pruned when the round dropped something (in the caller's transaction). A scrape
/// already stored keeps its samples of the series not given again. SQLite: statements of up to
/// [`Dialect::rows_per_insert`] rows whatever migrations and sources they belong to
/// ([`super::sqlite::MERGE_SCRAPE`]), one prune per source; PostgreSQL: one statement each for
/// the whole fleet's round (arrays + UNNEST).
pub(super) async fn insert_points(tx: &mut Tx, sources: &[SourceRows<'_>]) -> Result<()> {
    let rows = scrapes::rows_of(sources)?;
    let pruned: Vec<(&str, &str, i64)> = sources
        .iter()
        .filter_map(|s| Some((s.name, s.source, s.keep_from_ms?)))
        .collect();
    let deadline = tx.deadline;
    let answer = within(deadline, async {
        match &mut tx.conn {
            TxConn::Sqlite(c) => {
                for chunk in rows.chunks(Dialect::Sqlite.rows_per_insert()) {
                    let mut q = QueryBuilder::<Sqlite>::new(
                        "INSERT INTO scrapes (migration, source, at, samples) ",
                    );
                    q.push_values(chunk, |mut row, r| {
                        row.push_bind(r.name)
                            .push_bind(r.source)
                            .push_bind(r.at_ms)
                            .push_bind(&r.samples);
                    });
                    q.push(super::sqlite::MERGE_SCRAPE);
                    q.build().execute(&mut **c).await?;
                }
                for (name, source, keep_from_ms) in pruned {
                    sqlx::query(super::sqlite::PRUNE_SCRAPES)
                        .bind(name)
                        .bind(source)
                        .bind(keep_from_ms)
                        .execute(&mut **c)
                        .await?;
                }
            }
            TxConn::Postgres(held) => {
                let c = held.start();
                if !rows.is_empty() {
                    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
                    let srcs: Vec<&str> = rows.iter().map(|r| r.source).collect();
                    let ats: Vec<i64> = rows.iter().map(|r| r.at_ms).collect();
                    let samples: Vec<&str> = rows.iter().map(|r| r.samples.as_str()).collect();
                    sqlx::query(super::postgres::INSERT_SCRAPES)
                        .bind(&names)
                        .bind(&srcs)
                        .bind(&ats)
                        .bind(&samples)
                        .execute(&mut *c)
                        .await?;
                }
                if !pruned.is_empty() {
                    let names: Vec<&str> = pruned.iter().map(|p| p.0).collect();
                    let srcs: Vec<&str> = pruned.iter().map(|p| p.1).collect();
                    let keep_from: Vec<i64> = pruned.iter().map(|p| p.2).collect();
                    sqlx::query(super::postgres::PRUNE_SCRAPES)
                        .bind(&names)
                        .bind(&srcs)
                        .bind(&keep_from)
                        .execute(&mut *c)
                        .await?;
                }
            }
        }
        Ok(())
    })
    .await;
    tx.settle(&answer);
    answer
}

/// The scrape instants of a source after `after_ms` (read from the key alone), as one list:
/// SQLite joins them into a text ([`super::parse_list`]), PostgreSQL into an array.
pub(super) async fn times_after(
    db: &Db,
    name: &str,
    source: &str,
    after_ms: i64,
) -> Result<Vec<i64>> {
    Ok(on!(db,
        sqlite p => {
            let times: Option<String> = sqlx::query_scalar(super::sqlite::TIMES_AFTER)
                .bind(name)
                .bind(source)
                .bind(after_ms)
                .fetch_one(p)
                .await?;
            super::parse_list(times.as_deref().unwrap_or_default(), source)?
        },
        postgres p => {
            let times: Option<Vec<i64>> = sqlx::query_scalar(
                "SELECT array_agg(at) FROM scrapes \
                 WHERE migration = $1 AND source = $2 AND at > $3",
            )
            .bind(name)
            .bind(source)
            .bind(after_ms)
            .fetch_one(p)
            .await?;
            times.unwrap_or_default()
        }
    ))
}

/// The scrapes of a source stored after `after_ms` (a seek on the key), joined into one text
/// `[[at, samples], ...]` (see [`scrapes::series_of`]); `None` when there are none.
pub(super) async fn scrapes_after(
    db: &Db,
    name: &str,
    source: &str,
    after_ms: i64,
) -> Result<Option<String>> {
    // Measured first (a seek on the key, the lengths from the rows' headers): a text the
    // database cannot build, or the controller should not hold, is refused, never asked for.
    let (total, largest): (i64, i64) = on!(db, p => {
        let row = sqlx::query(match db.pool {
            Pool::Sqlite(_) => super::sqlite::SCRAPES_AFTER_SIZE,
            Pool::Postgres(_) => super::postgres::SCRAPES_AFTER_SIZE,
        })
        .bind(name)
        .bind(source)
        .bind(after_ms)
        .fetch_one(p)
        .await?;
        (row.try_get("total")?, row.try_get("largest")?)
    });
    if let Some(why) = scrapes::too_large(source, total, largest) {
        return Err(StoreError::TooLarge(why));
    }
    Ok(on!(db, p => sqlx::query_scalar(match db.pool {
        Pool::Sqlite(_) => super::sqlite::SCRAPES_AFTER,
        Pool::Postgres(_) => super::postgres::SCRAPES_AFTER,
    })
    .bind(name)
    .bind(source)
    .bind(after_ms)
    .fetch_one(p)
    .await?))
}
