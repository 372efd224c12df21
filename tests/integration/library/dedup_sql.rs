//! The durable dedup mode against real databases: SQLite (a temporary file, always) and PostgreSQL
//! (when `QM_TEST_POSTGRES_URL` is set, e.g. `postgres://postgres@127.0.0.1:5432/postgres`; each
//! test works in a schema of its own and drops it). One suite, written once, run on both.
//!
//! The effect is deliberately not idempotent (a row appended to a ledger), so that a duplicate
//! effect shows as a second row.
#![cfg(feature = "dedup")]

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use queue_migrate::dedup::admission::{Admission, Admitted};
use queue_migrate::dedup::sql::{
    self, Claim, DedupDatabase, SqlDedup, SqlDedupError, Verdict, VersionCheck,
};
use queue_migrate::dedup::{BusinessKey, ConsumerMetrics, Outcome, PayloadHash};
use queue_migrate::routing::{Route, RoutingDocument, Side};
use queue_migrate::stale::{Bounds, Decision, Delivery as StaleDelivery, Mark, StaleGuard};
use queue_migrate::stamp::{RouteLabel, RouteStamp};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{AssertSqlSafe, PgPool, Pool, Postgres, Sqlite};

const HOUR: i64 = 3_600_000;
const EFFECTS: &str =
    "CREATE TABLE IF NOT EXISTS test_ledger (key TEXT NOT NULL, amount BIGINT NOT NULL)";

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A SQLite database in a fresh temporary directory (kept alive by the returned guard).
async fn sqlite() -> Option<(Pool<Sqlite>, tempfile::TempDir)> {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join("consumer.db"))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(Duration::from_secs(20));
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await
        .unwrap();
    Some((pool, dir))
}

/// A PostgreSQL pool whose connections live in a schema of their own.
async fn postgres() -> Option<(Pool<Postgres>, PgSchema)> {
    // The PostgreSQL suite is `#[ignore]`d without its server; asked for without it, it fails.
    let url = match std::env::var("QM_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!("QM_TEST_POSTGRES_URL is not set (scripts/services.sh start postgres)"),
    };
    let admin = PgPool::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("QM_TEST_POSTGRES_URL={url}: {e}"));
    let schema = format!(
        "qm_dedup_test_{}_{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    );
    sqlx::raw_sql(AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
    )))
    .execute(&admin)
    .await
    .unwrap();
    let options = PgConnectOptions::from_str(&url)
        .unwrap()
        .options([("search_path", schema.as_str())]);
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await
        .unwrap();
    Some((pool, PgSchema { admin, schema }))
}

/// Drops the test's schema at the end of a passing test.
struct PgSchema {
    admin: PgPool,
    schema: String,
}

impl PgSchema {
    async fn drop_schema(self) {
        let _ = sqlx::raw_sql(AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {} CASCADE",
            self.schema
        )))
        .execute(&self.admin)
        .await;
    }
}

trait Cleanup {
    async fn cleanup(self);
}
impl Cleanup for tempfile::TempDir {
    async fn cleanup(self) {}
}
impl Cleanup for PgSchema {
    async fn cleanup(self) {
        self.drop_schema().await;
    }
}

fn key(n: u32) -> BusinessKey {
    BusinessKey::new("order.paid", &format!("order-{n}"), "evt-1").unwrap()
}

fn hash(s: &str) -> PayloadHash {
    PayloadHash::of_json(&serde_json::json!({ "amount": s }))
}

/// Every test below, once per database. `$begin` is how a consumer opens its transaction.
macro_rules! suite {
    ($name:ident, $db:ty, $setup:ident, $begin:literal $(, #[$needs:meta])?) => {
        mod $name {
            use super::*;

            async fn setup() -> Option<(Pool<$db>, impl Cleanup)> {
                let (pool, guard) = $setup().await?;
                sql::ensure_schema(&pool).await.unwrap();
                sql::ensure_schema(&pool).await.unwrap(); // idempotent
                sqlx::raw_sql(EFFECTS).execute(&pool).await.unwrap();
                Some((pool, guard))
            }

            async fn effects(pool: &Pool<$db>, k: &BusinessKey) -> i64 {
                let row: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM test_ledger WHERE key = $1")
                    .bind(k.as_str())
                    .fetch_one(pool)
                    .await
                    .unwrap();
                row.0
            }

            async fn keys(pool: &Pool<$db>) -> i64 {
                let row: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM qm_dedup_keys")
                    .fetch_one(pool)
                    .await
                    .unwrap();
                row.0
            }

            /// One delivery, as a consumer handles it: claim and effect in one transaction;
            /// `fail` makes the effect fail after its write (the transaction rolls back).
            async fn deliver(
                pool: &Pool<$db>,
                dedup: SqlDedup,
                k: &BusinessKey,
                h: &PayloadHash,
                now_ms: i64,
                fail: bool,
            ) -> Result<Outcome, SqlDedupError> {
                let mut tx = pool.begin_with($begin).await?;
                match dedup.claim(&mut tx, k, h, now_ms).await? {
                    Claim::Fresh => {
                        sqlx::query("INSERT INTO test_ledger (key, amount) VALUES ($1, 10)")
                            .bind(k.as_str())
                            .execute(&mut *tx)
                            .await?;
                        if fail {
                            tx.rollback().await?;
                            return Ok(Outcome::Failed);
                        }
                        tx.commit().await?;
                        Ok(Outcome::Processed)
                    }
                    other => {
                        tx.rollback().await?;
                        Ok(other.outcome())
                    }
                }
            }

            #[tokio::test]

            $(#[$needs])?
            async fn the_same_message_five_times_gives_one_effect() {
                let Some((pool, guard)) = setup().await else {
                    return;
                };
                let metrics = ConsumerMetrics::new();
                let k = key(1);
                // Coexistence: it comes by the old path three times, by the new path twice.
                for (i, route) in [
                    RouteLabel::Old,
                    RouteLabel::New,
                    RouteLabel::Old,
                    RouteLabel::New,
                    RouteLabel::Old,
                ]
                .into_iter()
                .enumerate()
                {
                    let outcome = deliver(&pool, SqlDedup::new(), &k, &hash("10"), i as i64, false)
                        .await
                        .unwrap();
                    metrics.record(route, outcome);
                }
                assert_eq!(effects(&pool, &k).await, 1);
                assert_eq!(metrics.get(RouteLabel::Old, Outcome::Processed), 1);
                assert_eq!(metrics.get(RouteLabel::Old, Outcome::DuplicateBlocked), 2);
                assert_eq!(metrics.get(RouteLabel::New, Outcome::DuplicateBlocked), 2);
                guard.cleanup().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]

            $(#[$needs])?
            async fn two_consumers_racing_on_one_key_apply_it_once() {
                let Some((pool, guard)) = setup().await else {
                    return;
                };
                // A holds the key with its effect in progress; B claims the same key meanwhile
                // from another connection and must wait for A's outcome.
                let k = key(2);
                let h = hash("10");
                let mut a = pool.begin_with($begin).await.unwrap();
                assert_eq!(sql::claim(&mut a, &k, &h, 0).await.unwrap(), Claim::Fresh);
                let b = {
                    let (pool, k) = (pool.clone(), k.clone());
                    tokio::spawn(
                        async move { deliver(&pool, SqlDedup::new(), &k, &h, 1, false).await },
                    )
                };
                tokio::time::sleep(Duration::from_millis(300)).await;
                assert!(!b.is_finished(), "B did not wait for A's transaction");
                sqlx::query("INSERT INTO test_ledger (key, amount) VALUES ($1, 10)")
                    .bind(k.as_str())
                    .execute(&mut *a)
                    .await
                    .unwrap();
                a.commit().await.unwrap();
                assert_eq!(b.await.unwrap().unwrap(), Outcome::DuplicateBlocked);
                assert_eq!(effects(&pool, &k).await, 1);

                // A rolls back instead: B gets the key and applies it.
                let k = key(3);
                let mut a = pool.begin_with($begin).await.unwrap();
                assert_eq!(sql::claim(&mut a, &k, &h, 0).await.unwrap(), Claim::Fresh);
                let b = {
                    let (pool, k) = (pool.clone(), k.clone());
                    tokio::spawn(
                        async move { deliver(&pool, SqlDedup::new(), &k, &h, 1, false).await },
                    )
                };
                tokio::time::sleep(Duration::from_millis(300)).await;
                assert!(!b.is_finished());
                a.rollback().await.unwrap();
                assert_eq!(b.await.unwrap().unwrap(), Outcome::Processed);
                assert_eq!(effects(&pool, &k).await, 1);

                // Many keys, four consumers each, all at once.
                let mut tasks = Vec::new();
                for n in 100..130 {
                    for c in 0..4 {
                        let pool = pool.clone();
                        tasks.push(tokio::spawn(async move {
                            let mut attempt = 0;
                            loop {
                                match deliver(
                                    &pool,
                                    SqlDedup::new(),
                                    &key(n),
                                    &hash("10"),
                                    c,
                                    false,
                                )
                                .await
                                {
                                    Ok(o) => return o,
                                    Err(e) if e.is_retryable() && attempt < 20 => attempt += 1,
                                    Err(e) => panic!("{e}"),
                                }
                            }
                        }));
                    }
                }
                let mut processed = 0;
                for t in tasks {
                    if t.await.unwrap() == Outcome::Processed {
                        processed += 1;
                    }
                }
                assert_eq!(processed, 30);
                for n in 100..130 {
                    assert_eq!(effects(&pool, &key(n)).await, 1, "key {n}");
                }
                guard.cleanup().await;
            }

            #[tokio::test]

            $(#[$needs])?
            async fn a_failed_effect_releases_the_key_and_the_retry_applies_it() {
                let Some((pool, guard)) = setup().await else {
                    return;
                };
                let k = key(4);
                let d = SqlDedup::new();
                assert_eq!(
                    deliver(&pool, d, &k, &hash("10"), 0, true).await.unwrap(),
                    Outcome::Failed
                );
                assert_eq!(effects(&pool, &k).await, 0);
                assert_eq!(keys(&pool).await, 0, "the key rolled back with the effect");
                assert_eq!(
                    deliver(&pool, d, &k, &hash("10"), 1, false).await.unwrap(),
                    Outcome::Processed
                );
                assert_eq!(
                    deliver(&pool, d, &k, &hash("10"), 2, false).await.unwrap(),
                    Outcome::DuplicateBlocked
                );
                assert_eq!(effects(&pool, &k).await, 1);
                guard.cleanup().await;
            }

            #[tokio::test]

            $(#[$needs])?
            async fn a_different_payload_under_the_same_key_is_a_conflict() {
                let Some((pool, guard)) = setup().await else {
                    return;
                };
                let k = key(5);
                let d = SqlDedup::new();
                assert_eq!(
                    deliver(&pool, d, &k, &hash("10"), 0, false).await.unwrap(),
                    Outcome::Processed
                );
                let mut tx = pool.begin_with($begin).await.unwrap();
                assert_eq!(
                    sql::claim(&mut tx, &k, &hash("99"), 1).await.unwrap(),
                    Claim::Conflict {
                        stored_hash: hash("10")
                    }
                );
                tx.rollback().await.unwrap();
                assert_eq!(
                    deliver(&pool, d, &k, &hash("99"), 2, false).await.unwrap(),
                    Outcome::Conflict
                );
                assert_eq!(effects(&pool, &k).await, 1);
                guard.cleanup().await;
            }

            #[tokio::test]

            $(#[$needs])?
            async fn keys_expire_and_the_purge_removes_them_in_bounded_batches() {
                let Some((pool, guard)) = setup().await else {
                    return;
                };
                let short = SqlDedup::with_ttl(Duration::from_secs(3600));
                let long = SqlDedup::new();
                assert_eq!(long.ttl(), Duration::from_secs(90 * 86_400));
                let k = key(6);
                assert_eq!(
                    deliver(&pool, short, &k, &hash("10"), 0, false)
                        .await
                        .unwrap(),
                    Outcome::Processed
                );
                assert_eq!(
                    deliver(&pool, short, &k, &hash("10"), HOUR - 1, false)
                        .await
                        .unwrap(),
                    Outcome::DuplicateBlocked
                );
                // Expired: absent, whether or not the purge ran (a reprocess after the TTL applies again).
                assert_eq!(
                    deliver(&pool, short, &k, &hash("10"), HOUR, false)
                        .await
                        .unwrap(),
                    Outcome::Processed
                );
                assert_eq!(effects(&pool, &k).await, 2);

                // 250 short keys, 10 long ones.
                for n in 1000..1250 {
                    deliver(&pool, short, &key(n), &hash("1"), 0, false)
                        .await
                        .unwrap();
                }
                for n in 2000..2010 {
                    deliver(&pool, long, &key(n), &hash("1"), 0, false)
                        .await
                        .unwrap();
                }
                assert_eq!(keys(&pool).await, 261);
                // One step deletes at most `batch` keys.
                assert_eq!(
                    <$db as DedupDatabase>::purge_step(&pool, 3 * HOUR, 100, None)
                        .await
                        .unwrap()
                        .deleted,
                    100
                );
                // The other 150, and key 6 (re-claimed at 1 h, expired at 2 h): two batches.
                assert_eq!(sql::purge_expired(&pool, 3 * HOUR, 100).await.unwrap(), 151);
                assert_eq!(keys(&pool).await, 10);
                assert_eq!(sql::purge_expired(&pool, 3 * HOUR, 100).await.unwrap(), 0);
                // A key re-claimed after its expiry is not purged with the old expiry.
                let k = key(2000);
                assert_eq!(
                    deliver(&pool, long, &k, &hash("1"), 91 * 24 * HOUR, false)
                        .await
                        .unwrap(),
                    Outcome::Processed
                );
                assert_eq!(
                    sql::purge_expired(&pool, 91 * 24 * HOUR, 100)
                        .await
                        .unwrap(),
                    9
                );
                assert_eq!(keys(&pool).await, 1);
                assert_eq!(
                    deliver(&pool, long, &k, &hash("1"), 91 * 24 * HOUR + 1, false)
                        .await
                        .unwrap(),
                    Outcome::DuplicateBlocked
                );
                guard.cleanup().await;
            }

            #[tokio::test]

            $(#[$needs])?
            async fn an_event_older_than_the_applied_version_is_rejected_in_the_transaction() {
                let Some((pool, guard)) = setup().await else {
                    return;
                };
                let agg = "order:4711";
                let check = |v: i64, commit: bool| {
                    let pool = pool.clone();
                    async move {
                        let mut tx = pool.begin_with($begin).await.unwrap();
                        let r = sql::accept_version(&mut tx, agg, v).await.unwrap();
                        if commit {
                            tx.commit().await.unwrap();
                        } else {
                            tx.rollback().await.unwrap();
                        }
                        r
                    }
                };
                assert_eq!(check(1, true).await, VersionCheck::Accepted);
                assert_eq!(check(3, true).await, VersionCheck::Accepted);
                // In flight when the slice moved back: v2 arrives after v3.
                assert_eq!(check(2, true).await, VersionCheck::Stale { last: 3 });
                assert_eq!(check(3, true).await, VersionCheck::Stale { last: 3 });
                // Rolled back with its transaction: v5 was never applied, so v4 is newer.
                assert_eq!(check(5, false).await, VersionCheck::Accepted);
                assert_eq!(check(4, true).await, VersionCheck::Accepted);
                assert_eq!(check(4, true).await, VersionCheck::Stale { last: 4 });
                // Aggregates are independent.
                let mut tx = pool.begin_with($begin).await.unwrap();
                assert_eq!(
                    sql::accept_version(&mut tx, "order:4712", 1).await.unwrap(),
                    VersionCheck::Accepted
                );
                tx.commit().await.unwrap();
                guard.cleanup().await;
            }

            /// `VersionCheck::Stale` had no outcome of its own, so a consumer following the docs
            /// counted a stale event as processed: `admit` gives one verdict per delivery, and a
            /// stale one counts as `stale`.
            #[tokio::test]

            $(#[$needs])?
            async fn admit_gives_one_verdict_per_delivery_and_a_stale_event_counts_as_stale() {
                let Some((pool, guard)) = setup().await else {
                    return;
                };
                let metrics = ConsumerMetrics::new();
                let deliver = |version: i64, amount: i64| {
                    let pool = pool.clone();
                    let metrics = &metrics;
                    async move {
                        let payload = serde_json::json!({"v": version, "amount": amount});
                        let key = BusinessKey::new("order.paid", "4711", &version.to_string())
                            .unwrap();
                        let hash = PayloadHash::of_json(&payload);
                        let versioned = Some(sql::Versioned::new("order:4711", version));
                        let mut tx = pool.begin_with($begin).await.unwrap();
                        let verdict = sql::admit(&mut tx, &key, &hash, versioned, HOUR)
                            .await
                            .unwrap();
                        match verdict {
                            Verdict::Fresh | Verdict::Stale { .. } => tx.commit().await.unwrap(),
                            _ => tx.rollback().await.unwrap(),
                        }
                        metrics.record(RouteLabel::New, verdict.outcome());
                        verdict
                    }
                };
                assert_eq!(deliver(1, 10).await, Verdict::Fresh);
                assert_eq!(deliver(1, 10).await, Verdict::Duplicate);
                assert_eq!(deliver(3, 30).await, Verdict::Fresh);
                assert_eq!(deliver(2, 20).await, Verdict::Stale { last: 3 });
                // The stale event's claim was committed: its redelivery is a duplicate.
                assert_eq!(deliver(2, 20).await, Verdict::Duplicate);
                assert!(matches!(deliver(1, 99).await, Verdict::Conflict { .. }));
                let count = |o| metrics.get(RouteLabel::New, o);
                assert_eq!(count(Outcome::Processed), 2);
                assert_eq!(count(Outcome::Stale), 1);
                assert_eq!(count(Outcome::DuplicateBlocked), 2);
                assert_eq!(count(Outcome::Conflict), 1);
                guard.cleanup().await;
            }

            /// One delivery through the admit path with the stale-producer check (`old`: the
            /// delivery's broker facts when it came from the old broker), applied once.
            async fn admit_checked(
                pool: &Pool<$db>,
                stale: &StaleGuard,
                k: &BusinessKey,
                headers: &[(String, String)],
                old: Option<StaleDelivery>,
            ) -> Admitted {
                let h = hash(k.as_str());
                let mut tx = pool.begin_with($begin).await.unwrap();
                let mut admission = Admission::new(k, &h);
                if let Some(delivery) = old {
                    let headers = headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
                    admission = admission.from_old_broker(stale, headers, delivery);
                }
                let admitted = admission.admit(&mut tx, T0).await.unwrap();
                if admitted.verdict == Verdict::Fresh {
                    sqlx::query("INSERT INTO test_ledger (key, amount) VALUES ($1, 10)")
                        .bind(k.as_str())
                        .execute(&mut *tx)
                        .await
                        .unwrap();
                    tx.commit().await.unwrap();
                } else {
                    tx.rollback().await.unwrap();
                }
                admitted
            }

            /// Issue 58: the consumer's admit path checks each delivery from the old broker for a
            /// stale producer and counts it by producer and slice (unstamped apart) in the
            /// consumer's /metrics text, never a backlog from before the publish (by the broker's
            /// position, and by the stamp's time within the skew bound), and applies every
            /// message exactly once whatever the check says.
            #[tokio::test]

            $(#[$needs])?
            async fn the_admit_path_counts_a_stale_producer_and_still_applies_the_message_once() {
                let Some((pool, guard)) = setup().await else {
                    return;
                };
                let stale = Arc::new(StaleGuard::new(STALE_BOUNDS));
                let metrics = ConsumerMetrics::new().with_stale_guard(stale.clone());
                // Slices 0..8 moved at generation 5, published at T0, the old broker's stream
                // then at position 1000.
                stale.follow(&moved_document(5, 8), T0, Some(Mark::Position(1_000)));
                let none = Some(StaleDelivery::default());
                let at = |p| Some(StaleDelivery::at_position(p));
                let pinned = old_stamp(3, 4, T0 + 60_000);
                let cases: [(u32, Vec<(String, String)>, Option<StaleDelivery>, &str); 7] = [
                    // A producer pinned to generation 4, a minute after the move.
                    (1, pinned.clone(), none, "stale"),
                    // Its redelivery: a duplicate, counted again (deliveries are counted).
                    (1, pinned.clone(), none, "stale"),
                    // No stamp: a producer without the library.
                    (2, vec![("content-type".into(), "application/json".into())], none, "unstamped"),
                    // A backlog by the broker's position, though its producer's clock is an hour
                    // ahead.
                    (3, old_stamp(3, 4, T0 + 3_600_000), at(1_000), "backlog"),
                    // After the publish by position, stamped beyond the grace: stale.
                    (4, old_stamp(5, 4, T0 + 3_600_000), at(1_001), "stale"),
                    // A backlog by the stamp's time, within the skew bound of the publish.
                    (5, old_stamp(5, 4, T0 + 1_000), none, "backlog"),
                    // The same stale stamp read from the new broker: not checked.
                    (6, pinned.clone(), None, "unchecked"),
                ];
                for (n, headers, old, expect) in cases {
                    let admitted = admit_checked(&pool, &stale, &key(n), &headers, old).await;
                    let got = match &admitted.stale {
                        Some(Decision::Stale { .. }) => "stale",
                        Some(Decision::Unstamped) => "unstamped",
                        Some(Decision::Backlog) => "backlog",
                        Some(other) => panic!("delivery {n}: {other:?}"),
                        None => "unchecked",
                    };
                    assert_eq!(got, expect, "delivery {n}");
                    let route = if old.is_some() { RouteLabel::Old } else { RouteLabel::New };
                    metrics.record(route, admitted.verdict.outcome());
                }
                // Every message applied once, the redelivery blocked.
                for n in 1..=6 {
                    assert_eq!(effects(&pool, &key(n)).await, 1, "key {n}");
                }
                let counts = stale.counts();
                assert_eq!(counts.stale("checkout", 3), 2);
                assert_eq!(counts.stale("checkout", 5), 1);
                assert_eq!(counts.stale_total(), 3);
                assert_eq!((counts.unstamped(), counts.backlog()), (1, 2));
                // In the consumer's one text, next to its own counters.
                let text = metrics.render();
                for line in [
                    "queue_migrate_consumer_messages_total{route=\"old\",outcome=\"processed\"} 5",
                    "queue_migrate_consumer_messages_total{route=\"old\",outcome=\"duplicate_blocked\"} 1",
                    "queue_migrate_stale_messages_total 3",
                    "queue_migrate_stale_producer_messages_total{producer=\"checkout\",slice=\"3\"} 2",
                    "queue_migrate_stale_producer_messages_total{producer=\"checkout\",slice=\"5\"} 1",
                    "queue_migrate_unstamped_messages_total 1",
                ] {
                    assert!(text.contains(&format!("\n{line}\n")), "{line} in\n{text}");
                }
                guard.cleanup().await;
            }
        }
    };
}

/// The stale-producer check's bounds in these tests: a 5 s grace, a 1 s clock-skew bound.
const STALE_BOUNDS: Bounds = Bounds {
    grace_ms: 5_000,
    clock_skew_ms: 1_000,
};
/// When the routing document that moved the slices was published.
const T0: i64 = 1_800_000_000_000;

/// A routing document of generation `generation` with slices `0..migrated` on the new broker.
fn moved_document(generation: u64, migrated: u32) -> RoutingDocument {
    serde_json::from_value(serde_json::json!({
        "migration": "orders", "generation": generation, "state": "slices", "step": 0,
        "paused": false, "slices_total": 16, "slices_migrated": migrated,
        "consume": ["old", "new"], "brokers": {"old": "rabbitmq", "new": "nats"},
        "updated_at": "2027-01-15T08:00:00Z"
    }))
    .unwrap()
}

/// The headers of a message the producer `checkout` sent to the old broker, routed by
/// `generation`, stamped at `at_ms`.
fn old_stamp(slice: u32, generation: u64, at_ms: i64) -> Vec<(String, String)> {
    let route = Route::new(Side::Old, slice, generation);
    let stamp = RouteStamp::new(&route, "rabbitmq", "checkout", at_ms).unwrap();
    stamp
        .headers()
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect()
}

suite!(on_sqlite, Sqlite, sqlite, "BEGIN IMMEDIATE");
suite!(
    on_postgres,
    Postgres,
    postgres,
    "BEGIN",
    #[ignore = "needs QM_TEST_POSTGRES_URL (scripts/services.sh start postgres)"]
);

#[test]
fn retryable_errors_are_recognised() {
    assert!(SqlDedupError::Database(sqlx::Error::PoolTimedOut).is_retryable());
    assert!(SqlDedupError::Unstable("k".into()).is_retryable());
    assert!(!SqlDedupError::Database(sqlx::Error::RowNotFound).is_retryable());
}

/// `SQLITE_SCHEMA` as it was before the expiry index was dropped from it: what a consumer's
/// existing database looks like.
const EARLIER_SQLITE_SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS qm_dedup_keys (
    key           TEXT   NOT NULL PRIMARY KEY,
    payload_hash  TEXT   NOT NULL,
    claimed_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS qm_dedup_keys_expiry ON qm_dedup_keys (expires_at_ms);
CREATE TABLE IF NOT EXISTS qm_aggregate_versions (
    aggregate TEXT   NOT NULL PRIMARY KEY,
    version   BIGINT NOT NULL
) WITHOUT ROWID;
";

async fn sqlite_claim(pool: &Pool<Sqlite>, dedup: SqlDedup, n: u32, h: &str, now: i64) -> Claim {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.unwrap();
    let c = dedup.claim(&mut tx, &key(n), &hash(h), now).await.unwrap();
    tx.commit().await.unwrap();
    c
}

async fn sqlite_expiry_index(pool: &Pool<Sqlite>) -> bool {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'qm_dedup_keys_expiry'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    n == 1
}

#[tokio::test]
async fn a_sqlite_database_of_the_earlier_schema_keeps_deduplicating_across_the_upgrade() {
    let (pool, _dir) = sqlite().await.unwrap();
    sqlx::raw_sql(EARLIER_SQLITE_SCHEMA)
        .execute(&pool)
        .await
        .unwrap();
    assert!(sqlite_expiry_index(&pool).await);
    let short = SqlDedup::with_ttl(Duration::from_secs(3600));
    let long = SqlDedup::new();
    // Claimed by a consumer of the earlier version, before the upgrade.
    assert_eq!(sqlite_claim(&pool, long, 1, "a", 0).await, Claim::Fresh);
    assert_eq!(sqlite_claim(&pool, short, 2, "b", 0).await, Claim::Fresh);

    sql::ensure_schema(&pool).await.unwrap();
    assert!(
        !sqlite_expiry_index(&pool).await,
        "the upgrade drops the index"
    );
    sql::ensure_schema(&pool).await.unwrap(); // idempotent after the upgrade

    // The keys claimed before the upgrade still deduplicate, and still conflict.
    assert_eq!(
        sqlite_claim(&pool, long, 1, "a", HOUR).await,
        Claim::Duplicate
    );
    assert!(matches!(
        sqlite_claim(&pool, long, 1, "other", HOUR).await,
        Claim::Conflict { stored_hash } if stored_hash == hash("a")
    ));
    // Key 2 expired at 1 h: absent, taken over.
    assert_eq!(sqlite_claim(&pool, short, 2, "b", HOUR).await, Claim::Fresh);
    assert_eq!(
        sqlite_claim(&pool, short, 2, "b", HOUR + 1).await,
        Claim::Duplicate
    );
    assert_eq!(sqlite_claim(&pool, long, 3, "c", HOUR).await, Claim::Fresh);

    // The purge without the index: 300 keys, short and long TTLs interleaved in key order, purged
    // 7 at a time; only the expired ones go, whatever steps they fall in.
    for n in 100..400 {
        let dedup = if n % 2 == 0 { short } else { long };
        assert_eq!(sqlite_claim(&pool, dedup, n, "x", 0).await, Claim::Fresh);
    }
    // 150 short keys, and key 2 (re-claimed at 1 h, expired at 2 h).
    assert_eq!(sql::purge_expired(&pool, 3 * HOUR, 7).await.unwrap(), 151);
    assert_eq!(sql::purge_expired(&pool, 3 * HOUR, 7).await.unwrap(), 0);
    let (left,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM qm_dedup_keys")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 152); // keys 1, 3 and the 150 long ones
    assert_eq!(
        sqlite_claim(&pool, long, 101, "x", 3 * HOUR).await,
        Claim::Duplicate
    );
    assert_eq!(
        sqlite_claim(&pool, short, 100, "x", 3 * HOUR).await,
        Claim::Fresh
    );
}

#[tokio::test]
async fn a_sqlite_purge_step_reads_at_most_batch_keys_even_when_none_of_them_expired() {
    let (pool, _dir) = sqlite().await.unwrap();
    sql::ensure_schema(&pool).await.unwrap();
    let short = SqlDedup::with_ttl(Duration::from_secs(3600));
    let long = SqlDedup::new();
    // 30 live keys, then (in key order: "order-999" sorts after "order-129") one expired key.
    for n in 100..130 {
        assert_eq!(sqlite_claim(&pool, long, n, "x", 0).await, Claim::Fresh);
    }
    assert_eq!(sqlite_claim(&pool, short, 999, "x", 0).await, Claim::Fresh);

    // The first step looks at 7 keys, finds nothing to delete, and goes on after the 7th; it
    // does not read on through the table until it finds expired keys.
    let step = <Sqlite as DedupDatabase>::purge_step(&pool, 3 * HOUR, 7, None)
        .await
        .unwrap();
    assert_eq!(step.deleted, 0);
    assert_eq!(step.next.as_deref(), Some(key(106).as_str()));
    // The last step (the 3 keys after order-127: 128, 129 and 999) deletes the expired one and ends.
    let step =
        <Sqlite as DedupDatabase>::purge_step(&pool, 3 * HOUR, 7, Some(key(127).to_string()))
            .await
            .unwrap();
    assert_eq!(step.deleted, 1);
    assert_eq!(step.next, None);

    assert_eq!(
        sqlite_claim(&pool, short, 999, "x", 3 * HOUR).await,
        Claim::Fresh
    );
    assert_eq!(sql::purge_expired(&pool, 5 * HOUR, 7).await.unwrap(), 1);
    let (left,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM qm_dedup_keys")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 30);
}

/// Regression (review of the no-expiry-index schema): `ensure_schema` took SQLite's write lock at
/// every start, so a consumer starting while another held a long effect waited for it, and
/// failed with `SQLITE_BUSY` past its busy timeout. A current schema is now only read.
#[tokio::test]
async fn ensure_schema_on_a_current_sqlite_database_does_not_wait_for_the_write_lock() {
    let (pool, _dir) = sqlite().await.unwrap();
    sql::ensure_schema(&pool).await.unwrap();
    let mut long_effect = pool.begin_with("BEGIN IMMEDIATE").await.unwrap();
    let claimed = SqlDedup::new()
        .claim(&mut long_effect, &key(1), &hash("a"), 0)
        .await
        .unwrap();
    assert_eq!(claimed, Claim::Fresh);
    // The pool's busy timeout is 20 s: waiting for the lock would take that long.
    tokio::time::timeout(Duration::from_secs(5), sql::ensure_schema(&pool))
        .await
        .expect("ensure_schema waited for the write lock")
        .unwrap();
    long_effect.rollback().await.unwrap();
}

/// docs/routing.md's "using the stale check in your consumer" snippet is `Admission`'s doc test
/// (which `cargo test --doc` compiles and runs), verbatim without its hidden lines: the snippet
/// the docs show compiles.
#[test]
fn the_stale_check_snippet_in_the_docs_is_the_admission_doc_test() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let source =
        std::fs::read_to_string(root.join("crates/queue-migrate-client/src/dedup/admission.rs"))
            .unwrap();
    let doc: Vec<&str> = source
        .lines()
        .take_while(|l| !l.starts_with("pub struct Admission"))
        .filter_map(|l| l.strip_prefix("///"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect();
    let open = doc.iter().position(|l| *l == "```").unwrap();
    let close = open + 1 + doc[open + 1..].iter().position(|l| *l == "```").unwrap();
    let shown: String = doc[open + 1..close]
        .iter()
        .filter(|l| !l.starts_with("# ") && **l != "#")
        .map(|l| format!("{l}\n"))
        .collect();
    let docs = std::fs::read_to_string(root.join("docs/routing.md")).unwrap();
    assert!(
        docs.contains(&format!("```rust\n{shown}```\n")),
        "docs/routing.md does not show Admission's doc test verbatim:\n{shown}"
    );
}
