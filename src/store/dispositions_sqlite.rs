//! [`DispositionStore`] on SQLite (`migrations/sqlite/0002_dlq.sql`, `0010_dlq_replays.sql`).

use std::collections::HashMap;

use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::dispositions::{Claim, DispositionStore, Purged, ReplayClaim, SeenSignature};
use super::sqlite::SqliteStore;
use super::{Result, Store, StoreError};
use crate::dlq::disposition::{Action, CloseReason, Disposition};

fn disposition_row(row: &SqliteRow) -> Result<Disposition> {
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

impl DispositionStore for SqliteStore {
    async fn record(&self, d: &Disposition) -> Result<i64> {
        let fence = self.fence().demand("a dead-letter decision")?;
        let mut tx = self.pool().begin_with("BEGIN IMMEDIATE").await?;
        let latest = sqlx::query(super::dispositions::LATEST_OF_GROUP_SQLITE)
            .bind(&d.queue)
            .bind(&d.error_class)
            .bind(&d.consumer_version)
            .bind(&d.signature)
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| {
                Ok::<_, StoreError>((r.try_get("id")?, r.try_get("action")?, r.try_get("reason")?))
            })
            .transpose()?;
        if let Some(refused) = super::dispositions::already_closed(d, latest) {
            return Err(refused);
        }
        let done = sqlx::query(
            "INSERT INTO dlq_dispositions (queue, signature, signature_version, error_class, \
             consumer_version, action, reason, affected_count, first_seen, last_seen, decided_by, \
             decided_at, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        .execute(&mut *tx)
        .await?;
        let id = done.last_insert_rowid();
        super::fence::prove_sqlite(
            &mut tx,
            &self.fence(),
            fence.as_ref(),
            "a dead-letter decision",
        )
        .await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn list(&self) -> Result<Vec<Disposition>> {
        sqlx::query("SELECT * FROM dlq_dispositions ORDER BY decided_at, id")
            .fetch_all(self.pool())
            .await?
            .iter()
            .map(disposition_row)
            .collect()
    }

    async fn purge_before(&self, before_ms: i64) -> Result<Purged> {
        let mut tx = self.pool().begin().await?;
        let d = sqlx::query("DELETE FROM dlq_dispositions WHERE decided_at < ?")
            .bind(before_ms)
            .execute(&mut *tx)
            .await?;
        let s = sqlx::query("DELETE FROM dlq_signatures WHERE last_seen_at < ?")
            .bind(before_ms)
            .execute(&mut *tx)
            .await?;
        let r = sqlx::query("DELETE FROM dlq_replays WHERE dead_lettered_ms < ?")
            .bind(before_ms)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Purged {
            dispositions: d.rows_affected(),
            signatures: s.rows_affected(),
            replays: r.rows_affected(),
        })
    }

    async fn note_signatures(
        &self,
        seen: &[SeenSignature],
        now_ms: i64,
    ) -> Result<HashMap<String, i64>> {
        let mut tx = self.pool().begin().await?;
        let mut first_seen = HashMap::with_capacity(seen.len());
        for s in seen {
            let at: i64 = sqlx::query(
                "INSERT INTO dlq_signatures (queue, signature, error_class, consumer_version, \
                 first_seen_at, last_seen_at) VALUES (?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (queue, signature) DO UPDATE SET last_seen_at = \
                 MAX(last_seen_at, excluded.last_seen_at) RETURNING first_seen_at",
            )
            .bind(&s.queue)
            .bind(&s.signature)
            .bind(&s.error_class)
            .bind(&s.consumer_version)
            .bind(now_ms)
            .bind(now_ms)
            .fetch_one(&mut *tx)
            .await?
            .try_get("first_seen_at")?;
            first_seen.insert(s.signature.clone(), at);
        }
        tx.commit().await?;
        Ok(first_seen)
    }

    async fn claim_replay(&self, c: &ReplayClaim, retake_in_doubt: bool) -> Result<Claim> {
        // One statement: the insert takes a free entry, the conditional update an entry in
        // doubt when asked to; a row that neither touched is read back as it is.
        let taken = sqlx::query(
            "INSERT INTO dlq_replays (queue, destination, entry, state, run, dead_lettered_at, \
             dead_lettered_ms, at) VALUES (?, ?, ?, 'sending', ?, ?, ?, ?) \
             ON CONFLICT (queue, destination, entry) DO UPDATE SET run = excluded.run, \
             at = excluded.at WHERE dlq_replays.state = 'sending' AND ?",
        )
        .bind(&c.queue)
        .bind(&c.destination)
        .bind(&c.entry)
        .bind(&c.run)
        .bind(&c.dead_lettered_at)
        .bind(c.dead_lettered_ms)
        .bind(c.at_ms)
        .bind(retake_in_doubt)
        .execute(self.pool())
        .await?;
        if taken.rows_affected() == 1 {
            return Ok(Claim::Taken);
        }
        let state: String = sqlx::query(
            "SELECT state FROM dlq_replays WHERE queue = ? AND destination = ? AND entry = ?",
        )
        .bind(&c.queue)
        .bind(&c.destination)
        .bind(&c.entry)
        .fetch_one(self.pool())
        .await?
        .try_get("state")?;
        claim_of(&state)
    }

    async fn settle_replay(&self, c: &ReplayClaim, sent: bool) -> Result<bool> {
        let done = if sent {
            sqlx::query(
                "UPDATE dlq_replays SET state = 'sent', at = ? \
                 WHERE queue = ? AND destination = ? AND entry = ? AND run = ?",
            )
            .bind(c.at_ms)
        } else {
            sqlx::query(
                "DELETE FROM dlq_replays WHERE queue = ? AND destination = ? AND entry = ? \
                 AND run = ? AND state = 'sending'",
            )
        }
        .bind(&c.queue)
        .bind(&c.destination)
        .bind(&c.entry)
        .bind(&c.run)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// The answer for a row that was already claimed, in state `state`.
fn claim_of(state: &str) -> Result<Claim> {
    match state {
        "sent" => Ok(Claim::Sent),
        "sending" => Ok(Claim::InDoubt),
        other => Err(StoreError::Corrupt(format!("dlq_replays: state {other:?}"))),
    }
}
