//! [`DispositionStore`] on the [`SqlStore`] (SQLite: `migrations/sqlite/0002_dlq.sql`,
//! `0010_dlq_replays.sql`; PostgreSQL: `migrations/postgres/0008_dlq.sql`), each statement
//! written once.

use std::collections::HashMap;

use sqlx::Row;

use super::dispositions::{Claim, DispositionStore, Purged, ReplayClaim, SeenSignature};
use super::dlq_rows::{Action, CloseReason, Disposition};
use super::sql::{Begin, SqlStore, Tx};
use super::{Result, StoreError};

/// A decision as stored (the same columns on both backends).
fn disposition_row<R: Row>(row: &R) -> Result<Disposition>
where
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> &'r str: sqlx::ColumnIndex<R>,
{
    let action: String = row.try_get("action")?;
    let reason: Option<String> = row.try_get("reason")?;
    let action = match (action.as_str(), reason.as_deref()) {
        ("close", Some(r)) => Action::Close(
            CloseReason::parse(r)
                .map_err(|e| StoreError::Corrupt(format!("dlq_dispositions: {e}")))?,
        ),
        ("replay", None) => Action::Replay,
        (a, r) => {
            return Err(StoreError::Corrupt(format!(
                "dlq_dispositions: action {a:?} with reason {r:?}"
            )));
        }
    };
    let affected: Option<i64> = row.try_get("affected_count")?;
    Ok(Disposition {
        id: row.try_get("id")?,
        queue: row.try_get("queue")?,
        signature: row.try_get("signature")?,
        signature_version: row.try_get("signature_version")?,
        error_class: row.try_get("error_class")?,
        consumer_version: row.try_get("consumer_version")?,
        affected_count: affected.and_then(|n| u64::try_from(n).ok()),
        first_seen: row.try_get("first_seen")?,
        last_seen: row.try_get("last_seen")?,
        action,
        decided_by: row.try_get("decided_by")?,
        decided_at_ms: row.try_get("decided_at")?,
        note: row.try_get("note")?,
    })
}

/// The group's latest decision, `$1`..`$4` queue, class, version, signature.
const LATEST_OF_GROUP: &str = "SELECT id, action, reason FROM dlq_dispositions \
     WHERE queue = $1 AND error_class = $2 AND consumer_version = $3 AND signature = $4 \
     ORDER BY decided_at DESC, id DESC LIMIT 1";

/// Two closes of one group at once, one after the other: PostgreSQL takes a lock on the group
/// for the transaction (SQLite's `BEGIN IMMEDIATE` already runs one writer at a time).
async fn lock_group(tx: &mut Tx, d: &Disposition) -> Result<()> {
    if let Tx::Postgres(c) = tx {
        sqlx::query(
            "SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2 || chr(31) \
             || $3 || chr(31) || $4, 42))",
        )
        .bind(&d.queue)
        .bind(&d.error_class)
        .bind(&d.consumer_version)
        .bind(&d.signature)
        .execute(&mut **c)
        .await?;
    }
    Ok(())
}

impl DispositionStore for SqlStore {
    async fn record(&self, d: &Disposition) -> Result<i64> {
        let what = "a dead-letter decision";
        let fence = self.fence.demand(what)?;
        let mut tx = self.begin(Begin::Write).await?;
        lock_group(&mut tx, d).await?;
        let latest = in_tx!(&mut tx, c => sqlx::query(LATEST_OF_GROUP)
            .bind(&d.queue)
            .bind(&d.error_class)
            .bind(&d.consumer_version)
            .bind(&d.signature)
            .fetch_optional(&mut *c)
            .await?
            .map(|r| {
                Ok::<_, StoreError>((r.try_get("id")?, r.try_get("action")?, r.try_get("reason")?))
            })
            .transpose()?);
        if let Some(refused) = super::dispositions::already_closed(d, latest) {
            return Err(refused);
        }
        let id: i64 = in_tx!(&mut tx, c => sqlx::query(
            "INSERT INTO dlq_dispositions (queue, signature, signature_version, error_class, \
             consumer_version, action, reason, affected_count, first_seen, last_seen, decided_by, \
             decided_at, note) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
             RETURNING id",
        )
        .bind(&d.queue)
        .bind(&d.signature)
        .bind(&d.signature_version)
        .bind(&d.error_class)
        .bind(&d.consumer_version)
        .bind(d.action.kind())
        .bind(d.action.reason().map(CloseReason::as_str))
        .bind(d.affected_count.and_then(|n| i64::try_from(n).ok()))
        .bind(&d.first_seen)
        .bind(&d.last_seen)
        .bind(&d.decided_by)
        .bind(d.decided_at_ms)
        .bind(&d.note)
        .fetch_one(&mut *c)
        .await?
        .try_get("id")?);
        self.prove_and_commit(tx, fence.as_ref(), what).await?;
        Ok(id)
    }

    async fn list(&self) -> Result<Vec<Disposition>> {
        on!(&self.db, p => sqlx::query("SELECT * FROM dlq_dispositions ORDER BY decided_at, id")
            .fetch_all(p)
            .await?
            .iter()
            .map(disposition_row)
            .collect())
    }

    async fn purge_before(&self, before_ms: i64) -> Result<Purged> {
        let mut tx = self.begin(Begin::Plain).await?;
        let mut deleted = [0; 3];
        for (n, sql) in [
            "DELETE FROM dlq_dispositions WHERE decided_at < $1",
            "DELETE FROM dlq_signatures WHERE last_seen_at < $1",
            "DELETE FROM dlq_replays WHERE dead_lettered_ms < $1",
        ]
        .into_iter()
        .enumerate()
        {
            deleted[n] = in_tx!(&mut tx, c => sqlx::query(sql)
                .bind(before_ms)
                .execute(&mut *c)
                .await?
                .rows_affected());
        }
        tx.commit().await?;
        Ok(Purged {
            dispositions: deleted[0],
            signatures: deleted[1],
            replays: deleted[2],
        })
    }

    async fn note_signatures(
        &self,
        seen: &[SeenSignature],
        now_ms: i64,
    ) -> Result<HashMap<String, i64>> {
        let mut tx = self.begin(Begin::Plain).await?;
        let mut first_seen = HashMap::with_capacity(seen.len());
        for s in seen {
            let sql = tx.dialect().sql(
                "INSERT INTO dlq_signatures (queue, signature, error_class, consumer_version, \
                 first_seen_at, last_seen_at) VALUES ($1, $2, $3, $4, $5, $5) \
                 ON CONFLICT (queue, signature) DO UPDATE SET last_seen_at = \
                 {greatest}(dlq_signatures.last_seen_at, excluded.last_seen_at) \
                 RETURNING first_seen_at",
            );
            let at: i64 = in_tx!(&mut tx, c => sqlx::query(sql)
                .bind(&s.queue)
                .bind(&s.signature)
                .bind(&s.error_class)
                .bind(&s.consumer_version)
                .bind(now_ms)
                .fetch_one(&mut *c)
                .await?
                .try_get("first_seen_at")?);
            first_seen.insert(s.signature.clone(), at);
        }
        tx.commit().await?;
        Ok(first_seen)
    }

    async fn claim_replay(&self, c: &ReplayClaim, retake_in_doubt: bool) -> Result<Claim> {
        // One statement: the insert takes a free entry, the conditional update an entry in
        // doubt when asked to (PostgreSQL: both lock the row, a racing claim waits, then finds
        // it taken); a row that neither touched is read back as it is.
        let taken = on!(&self.db, p => sqlx::query(
            "INSERT INTO dlq_replays (queue, destination, entry, state, run, dead_lettered_at, \
             dead_lettered_ms, at) VALUES ($1, $2, $3, 'sending', $4, $5, $6, $7) \
             ON CONFLICT (queue, destination, entry) DO UPDATE SET run = excluded.run, \
             at = excluded.at WHERE dlq_replays.state = 'sending' AND $8",
        )
        .bind(&c.queue)
        .bind(&c.destination)
        .bind(&c.entry)
        .bind(&c.run)
        .bind(&c.dead_lettered_at)
        .bind(c.dead_lettered_ms)
        .bind(c.at_ms)
        .bind(retake_in_doubt)
        .execute(p)
        .await?
        .rows_affected());
        if taken == 1 {
            return Ok(Claim::Taken);
        }
        let state: String = on!(&self.db, p => sqlx::query(
            "SELECT state FROM dlq_replays WHERE queue = $1 AND destination = $2 AND entry = $3",
        )
        .bind(&c.queue)
        .bind(&c.destination)
        .bind(&c.entry)
        .fetch_one(p)
        .await?
        .try_get("state")?);
        match state.as_str() {
            "sent" => Ok(Claim::Sent),
            "sending" => Ok(Claim::InDoubt),
            other => Err(StoreError::Corrupt(format!("dlq_replays: state {other:?}"))),
        }
    }

    async fn settle_replay(&self, c: &ReplayClaim, sent: bool) -> Result<bool> {
        let sql = if sent {
            "UPDATE dlq_replays SET state = 'sent', at = $5 \
             WHERE queue = $1 AND destination = $2 AND entry = $3 AND run = $4"
        } else {
            "DELETE FROM dlq_replays WHERE queue = $1 AND destination = $2 AND entry = $3 \
             AND run = $4 AND state = 'sending'"
        };
        let done = on!(&self.db, p => {
            let q = sqlx::query(sql)
                .bind(&c.queue)
                .bind(&c.destination)
                .bind(&c.entry)
                .bind(&c.run);
            let q = if sent { q.bind(c.at_ms) } else { q };
            q.execute(p).await?.rows_affected()
        });
        Ok(done == 1)
    }
}
