//! [`DispositionStore`] on the [`SqlStore`] (SQLite: `migrations/sqlite/0002_dlq.sql`,
//! `0010_dlq_replays.sql`; PostgreSQL: `migrations/postgres/0008_dlq.sql`), each statement
//! written once.

use std::collections::HashMap;

use sqlx::Row;

use super::dispositions::{
    Claim, DispositionStore, Latest, Purged, ReplayClaim, SeenSignature, Take, refuse_record,
    replay_over,
};
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

/// The group's latest row (decided or held), `$1`..`$4` queue, class, version, signature: the
/// last inserted (ids follow the order of the commits, one group's writers taking turns under
/// its lock), the one a new row supersedes.
const LATEST_OF_GROUP: &str = "SELECT id, action, reason, state, run, decided_by, decided_at, \
     last_seen FROM dlq_dispositions \
     WHERE queue = $1 AND error_class = $2 AND consumer_version = $3 AND signature = $4 \
     ORDER BY id DESC LIMIT 1";

async fn latest_of_group(tx: &mut Tx, d: &Disposition) -> Result<Option<Latest>> {
    let row = in_tx!(tx, c => sqlx::query(LATEST_OF_GROUP)
        .bind(&d.queue)
        .bind(&d.error_class)
        .bind(&d.consumer_version)
        .bind(&d.signature)
        .fetch_optional(&mut *c)
        .await?
        .map(|r| {
            Ok::<_, StoreError>(Latest {
                id: r.try_get("id")?,
                action: r.try_get("action")?,
                reason: r.try_get("reason")?,
                state: r.try_get("state")?,
                run: r.try_get("run")?,
                decided_by: r.try_get("decided_by")?,
                decided_at: r.try_get("decided_at")?,
                last_seen: r.try_get("last_seen")?,
            })
        })
        .transpose()?);
    Ok(row)
}

/// Insert `d` superseding `supersedes` (0: the group's first), in state `state` for run `run`;
/// its id. A unique index refuses a second row superseding the same one.
async fn insert(
    tx: &mut Tx,
    d: &Disposition,
    supersedes: i64,
    state: &str,
    run: Option<&str>,
) -> Result<i64> {
    let inserted = in_tx!(tx, c => sqlx::query(
        "INSERT INTO dlq_dispositions (queue, signature, signature_version, error_class, \
         consumer_version, action, reason, affected_count, first_seen, last_seen, decided_by, \
         decided_at, note, supersedes, state, run) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
         $10, $11, $12, $13, $14, $15, $16) RETURNING id",
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
    .bind(supersedes)
    .bind(state)
    .bind(run)
    .fetch_one(&mut *c)
    .await
    .and_then(|row| row.try_get::<i64, _>("id")));
    match inserted {
        Ok(id) => Ok(id),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            Err(StoreError::AlreadyDecided(format!(
                "group ({}, {}, {:?}) of queue {:?} was decided by another command meanwhile",
                d.error_class, d.consumer_version, d.signature, d.queue
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// Two closes of one group at once, one after the other: PostgreSQL takes a lock on the group
/// for the transaction (SQLite's `BEGIN IMMEDIATE` already runs one writer at a time).
async fn lock_group(tx: &mut Tx, d: &Disposition) -> Result<()> {
    if tx.dialect() == super::sql::Dialect::Postgres {
        in_tx!(tx, c => {
            sqlx::query(
            "SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2 || chr(31) \
             || $3 || chr(31) || $4, 42))",
        )
        .bind(&d.queue)
        .bind(&d.error_class)
        .bind(&d.consumer_version)
        .bind(&d.signature)
        .execute(&mut *c)
        .await?;
        });
    }
    Ok(())
}

impl DispositionStore for SqlStore {
    async fn record(&self, d: &Disposition) -> Result<i64> {
        let what = "a dead-letter decision";
        let fence = self.fence.demand(what)?;
        let mut tx = self.begin(Begin::Write).await?;
        lock_group(&mut tx, d).await?;
        let latest = latest_of_group(&mut tx, d).await?;
        if let Some(refused) = refuse_record(d, latest.as_ref()) {
            return Err(refused);
        }
        let supersedes = latest.map_or(0, |l| l.id);
        let id = insert(&mut tx, d, supersedes, "decided", None).await?;
        self.prove_and_commit(tx, fence.as_ref(), what).await?;
        Ok(id)
    }

    async fn take_replay(
        &self,
        hold: &Disposition,
        run: &str,
        first_attempt_ms: i64,
    ) -> Result<Take> {
        let what = "a dead-letter group's replay";
        let fence = self.fence.demand(what)?;
        let mut tx = self.begin(Begin::Write).await?;
        lock_group(&mut tx, hold).await?;
        let latest = latest_of_group(&mut tx, hold).await?;
        if let Some(found) = replay_over(hold, latest.as_ref(), first_attempt_ms)? {
            return Ok(found);
        }
        let supersedes = latest.map_or(0, |l| l.id);
        let id = insert(&mut tx, hold, supersedes, "replaying", Some(run)).await?;
        self.prove_and_commit(tx, fence.as_ref(), what).await?;
        Ok(Take::Held(id))
    }

    async fn finish_replay(&self, id: i64, d: &Disposition) -> Result<bool> {
        let what = "a dead-letter group's replay";
        let fence = self.fence.demand(what)?;
        let mut tx = self.begin(Begin::Write).await?;
        let done = in_tx!(&mut tx, c => sqlx::query(
            "UPDATE dlq_dispositions SET state = 'decided', run = NULL, affected_count = $2, \
             first_seen = $3, last_seen = $4, decided_by = $5, decided_at = $6, note = $7 \
             WHERE id = $1 AND state = 'replaying'",
        )
        .bind(id)
        .bind(d.affected_count.and_then(|n| i64::try_from(n).ok()))
        .bind(&d.first_seen)
        .bind(&d.last_seen)
        .bind(&d.decided_by)
        .bind(d.decided_at_ms)
        .bind(&d.note)
        .execute(&mut *c)
        .await?
        .rows_affected());
        self.prove_and_commit(tx, fence.as_ref(), what).await?;
        Ok(done == 1)
    }

    async fn release_replay(&self, id: i64, run: &str) -> Result<bool> {
        let done = on!(&self.db, p => sqlx::query(
            "DELETE FROM dlq_dispositions WHERE id = $1 AND state = 'replaying' AND run = $2",
        )
        .bind(id)
        .bind(run)
        .execute(p)
        .await?
        .rows_affected());
        Ok(done == 1)
    }

    async fn list(&self) -> Result<Vec<Disposition>> {
        on!(&self.db, p => sqlx::query(
            "SELECT * FROM dlq_dispositions WHERE state = 'decided' ORDER BY decided_at, id",
        )
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
