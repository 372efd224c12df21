//! The transactional outbox (issue 54): what a committed transition must announce, written in
//! the transaction that commits it, and delivered by whoever leads.
//!
//! A transition ([`super::JournalStore::commit`]) and a plan apply that republishes the routing
//! ([`super::JournalStore::replace_plan`]) insert a row `(migration, seq)` beside their journal
//! entry, in the same transaction: the entry is committed with its row or not at all. A leader
//! reads the undelivered rows with their journal entries ([`pending`]), announces each (the
//! daemon's `outbox` module), then marks it delivered ([`delivered`]) in a write fenced by its
//! own epoch.
//!
//! # Guarantees
//! - Every committed transition has a row until a leader marked it delivered: a leader paused
//!   or killed between its commit and its announcement leaves it to the next one (at least
//!   once; a receiver drops repeats by the idempotency key, `MIGRATION:SEQ`).
//! - Marking a row delivered proves the lease like every fenced write: a leader that lost its
//!   lease cannot mark what it may not have delivered.
//! - A delivered row is deleted by the retention once it is older than it
//!   ([`super::retention`]: `migrate run --retain`, `migrate prune`); an undelivered row never
//!   is, whatever its age.

use sqlx::Row;

use super::fence::Fence;
use super::sql::{Begin, SqlStore, Tx};
use super::sql_rows::journal_row;
use super::{OutboxEntry, Result};

/// Add the row of `name`'s journal entry `seq`, committed `at_ms`, inside the caller's
/// transaction (the one that writes the entry).
pub(super) async fn insert(tx: &mut Tx, name: &str, seq: i64, at_ms: i64) -> Result<()> {
    in_tx!(tx, c => sqlx::query(
        "INSERT INTO outbox (migration, seq, created_at) VALUES ($1, $2, $3)",
    )
    .bind(name)
    .bind(seq)
    .bind(at_ms)
    .execute(&mut *c)
    .await?
    .rows_affected());
    Ok(())
}

/// The undelivered rows, oldest first, at most `limit`, each with its journal entry.
pub(super) async fn pending(store: &SqlStore, limit: u32) -> Result<Vec<OutboxEntry>> {
    let rows = on!(&store.db, p => sqlx::query(
        "SELECT j.* FROM outbox o JOIN journal j ON j.migration = o.migration AND j.seq = o.seq \
         WHERE o.delivered_at IS NULL ORDER BY o.created_at, o.migration, o.seq LIMIT $1",
    )
    .bind(i64::from(limit))
    .fetch_all(p)
    .await?
    .iter()
    .map(|row| {
        Ok(OutboxEntry {
            migration: row.try_get("migration")?,
            entry: journal_row(row)?,
        })
    })
    .collect::<Result<Vec<_>>>())?;
    Ok(rows)
}

/// Mark `name`'s row `seq` delivered, with the epoch of the store's fence, proving it. A row
/// delivered already stays as it was.
pub(super) async fn delivered(store: &SqlStore, name: &str, seq: i64) -> Result<()> {
    let what = "an outbox delivery mark";
    let fence = store.fence.demand(what)?;
    let fence: Option<&Fence> = fence.as_ref();
    let mut tx = store.begin(Begin::Write).await?;
    let now = tx.db_now().await?;
    in_tx!(&mut tx, c => sqlx::query(
        "UPDATE outbox SET delivered_at = $1, delivered_epoch = $2 \
         WHERE migration = $3 AND seq = $4 AND delivered_at IS NULL",
    )
    .bind(now)
    .bind(fence.map(|f| f.epoch))
    .bind(name)
    .bind(seq)
    .execute(&mut *c)
    .await?
    .rows_affected());
    store.prove_and_commit(tx, fence, what).await
}
