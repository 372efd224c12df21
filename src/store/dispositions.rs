//! Dead-letter decisions and seen signatures in the state store
//! (`migrations/sqlite/0002_dlq.sql`).
//!
//! [`DispositionStore`] is its own trait beside [`super::Store`], implemented by
//! [`SqliteStore`] and by [`AnyStore`] (which delegates to SQLite; a PostgreSQL state store
//! answers [`StoreError::UnsupportedUrl`] until `PgStore` gets an implementation and a schema
//! migration under `migrations/postgres/`). Both traits have a `list`: where both are in scope,
//! call `DispositionStore::list(&store)`.

use std::collections::HashMap;
use std::future::Future;

use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::any::AnyStore;
use super::sqlite::SqliteStore;
use super::{Result, StoreError};
use crate::dlq::disposition::{Action, CloseReason, Disposition};

/// A signature seen in a queue (for the "never seen before" signal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenSignature {
    /// The queue.
    pub queue: String,
    /// The signature.
    pub signature: String,
    /// The class of the group it was seen in.
    pub error_class: String,
    /// The consumer version of that group.
    pub consumer_version: String,
}

/// What `purge_before` removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Purged {
    /// Decisions taken before the cut.
    pub dispositions: u64,
    /// Seen signatures not seen since the cut.
    pub signatures: u64,
}

/// Decisions about dead-letter groups.
pub trait DispositionStore: Send + Sync {
    /// Record a decision; returns its id.
    fn record(&self, disposition: &Disposition) -> impl Future<Output = Result<i64>> + Send;
    /// Every decision, oldest first (the order [`crate::dlq::disposition`] expects).
    fn list(&self) -> impl Future<Output = Result<Vec<Disposition>>> + Send;
    /// Remove decisions taken before `before_ms`, and seen signatures not seen since.
    fn purge_before(&self, before_ms: i64) -> impl Future<Output = Result<Purged>> + Send;
    /// Note that these signatures were seen at `now_ms`; returns, for each, when it was first
    /// seen (now for the ones never seen before).
    fn note_signatures(
        &self,
        seen: &[SeenSignature],
        now_ms: i64,
    ) -> impl Future<Output = Result<HashMap<String, i64>>> + Send;
}

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
        .execute(self.pool())
        .await?;
        Ok(done.last_insert_rowid())
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
        tx.commit().await?;
        Ok(Purged {
            dispositions: d.rows_affected(),
            signatures: s.rows_affected(),
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
            sqlx::query(
                "INSERT INTO dlq_signatures (queue, signature, error_class, consumer_version, \
                 first_seen_at, last_seen_at) VALUES (?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (queue, signature) DO UPDATE SET last_seen_at = \
                 MAX(last_seen_at, excluded.last_seen_at)",
            )
            .bind(&s.queue)
            .bind(&s.signature)
            .bind(&s.error_class)
            .bind(&s.consumer_version)
            .bind(now_ms)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            let at: i64 = sqlx::query(
                "SELECT first_seen_at FROM dlq_signatures WHERE queue = ? AND signature = ?",
            )
            .bind(&s.queue)
            .bind(&s.signature)
            .fetch_one(&mut *tx)
            .await?
            .try_get("first_seen_at")?;
            first_seen.insert(s.signature.clone(), at);
        }
        tx.commit().await?;
        Ok(first_seen)
    }
}

fn postgres_unsupported() -> StoreError {
    StoreError::UnsupportedUrl(
        "postgres:// (dead-letter decisions are kept in a SQLite state store for now)".into(),
    )
}

impl DispositionStore for AnyStore {
    async fn record(&self, disposition: &Disposition) -> Result<i64> {
        match self {
            AnyStore::Sqlite(s) => s.record(disposition).await,
            _ => Err(postgres_unsupported()),
        }
    }

    async fn list(&self) -> Result<Vec<Disposition>> {
        match self {
            AnyStore::Sqlite(s) => DispositionStore::list(s).await,
            _ => Err(postgres_unsupported()),
        }
    }

    async fn purge_before(&self, before_ms: i64) -> Result<Purged> {
        match self {
            AnyStore::Sqlite(s) => s.purge_before(before_ms).await,
            _ => Err(postgres_unsupported()),
        }
    }

    async fn note_signatures(
        &self,
        seen: &[SeenSignature],
        now_ms: i64,
    ) -> Result<HashMap<String, i64>> {
        match self {
            AnyStore::Sqlite(s) => s.note_signatures(seen, now_ms).await,
            _ => Err(postgres_unsupported()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("state.db");
        let store = SqliteStore::open(path.to_str().expect("utf8 path"))
            .await
            .expect("opens");
        (dir, store)
    }

    fn decision(action: Action, at: i64) -> Disposition {
        Disposition {
            id: 0,
            queue: "orders.dlq".into(),
            signature: "timeout after <n>ms".into(),
            signature_version: "v1".into(),
            error_class: "dependency_timeout".into(),
            consumer_version: "2.14.0".into(),
            affected_count: Some(9120),
            first_seen: Some("2026-03-01T10:00:00.000Z".into()),
            last_seen: Some("2026-03-01T12:00:00.000Z".into()),
            action,
            decided_by: "ana".into(),
            decided_at_ms: at,
            note: Some("incident INC-7".into()),
        }
    }

    #[tokio::test]
    async fn record_list_purge() {
        let (_dir, s) = store().await;
        let a = decision(Action::Close(CloseReason::WindowExpired), 2000);
        let b = Disposition {
            affected_count: None,
            last_seen: None,
            note: None,
            ..decision(Action::Replay, 1000)
        };
        let id_a = s.record(&a).await.expect("records");
        let id_b = s.record(&b).await.expect("records");
        let listed = s.list().await.expect("lists");
        assert_eq!(
            listed,
            vec![Disposition { id: id_b, ..b }, Disposition { id: id_a, ..a }]
        );
        let purged = s.purge_before(1500).await.expect("purges");
        assert_eq!(purged.dispositions, 1);
        assert_eq!(s.list().await.expect("lists").len(), 1);
    }

    #[tokio::test]
    async fn the_schema_refuses_a_reason_outside_the_list() {
        let (_dir, s) = store().await;
        let bad = sqlx::query(
            "INSERT INTO dlq_dispositions (queue, signature, error_class, consumer_version, \
             action, reason, decided_by, decided_at) VALUES ('q','s','c','v','close','other','a',0)",
        )
        .execute(s.pool())
        .await;
        assert!(bad.is_err());
        let bad = sqlx::query(
            "INSERT INTO dlq_dispositions (queue, signature, error_class, consumer_version, \
             action, reason, decided_by, decided_at) VALUES ('q','s','c','v','close',NULL,'a',0)",
        )
        .execute(s.pool())
        .await;
        assert!(bad.is_err());
    }

    #[tokio::test]
    async fn signatures_keep_their_first_sighting() {
        let (_dir, s) = store().await;
        let seen = |sig: &str| SeenSignature {
            queue: "q".into(),
            signature: sig.into(),
            error_class: "c".into(),
            consumer_version: "v".into(),
        };
        let first = s.note_signatures(&[seen("a")], 100).await.expect("notes");
        assert_eq!(first.get("a"), Some(&100));
        let again = s
            .note_signatures(&[seen("a"), seen("b")], 200)
            .await
            .expect("notes");
        assert_eq!((again.get("a"), again.get("b")), (Some(&100), Some(&200)));
        let purged = s.purge_before(150).await.expect("purges");
        assert_eq!(purged.signatures, 0, "a was seen again at 200");
    }
}
