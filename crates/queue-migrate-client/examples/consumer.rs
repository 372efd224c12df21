//! A consumer in Rust (feature `dedup-sqlite`, or `dedup` for PostgreSQL too): each delivery's
//! effect applied once and in version order, in the same SQLite transaction as its dedup key.
//! `consumer DATABASE_FILE` runs five deliveries of three events and checks what became of them.
use queue_migrate_client::dedup::pool::{self, PoolSettings};
use queue_migrate_client::dedup::sql::{self, SqlitePool, Verdict, Versioned};
use queue_migrate_client::dedup::{BusinessKey, ConsumerMetrics, PayloadHash, sqlx};
use queue_migrate_client::stamp::{RouteLabel, RouteStamp};
use queue_migrate_client::time;

/// One delivery: its headers (with the route stamp) and its JSON payload, read from `side`.
async fn handle(
    pool: &SqlitePool,
    metrics: &ConsumerMetrics,
    headers: &[(&str, &str)],
    payload: &serde_json::Value,
    side: RouteLabel,
) -> Result<Verdict, Box<dyn std::error::Error>> {
    // Counted by the route in its stamp; a message without a stamp under the side it came from.
    let route = RouteStamp::from_headers(headers.iter().copied()).map_or(side, |s| s.side);
    let order = payload["orderId"].as_str().ok_or("no orderId")?;
    let version = payload["version"].as_i64().ok_or("no version")?;
    let key = BusinessKey::new("order.paid", order, &version.to_string())?;
    let hash = PayloadHash::of_json(payload); // without the `route` stamp field
    // The version-check key: `<aggregate type>:<aggregate id>`, one per aggregate whose
    // versions increase (the convention of every example; two types never share a counter).
    let aggregate = format!("order:{order}");
    let versioned = Versioned::new(&aggregate, version);

    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?; // PostgreSQL: pool.begin()
    let verdict = sql::admit(&mut tx, &key, &hash, Some(versioned), time::now_ms()).await?;
    match verdict {
        Verdict::Fresh => {
            sqlx::query("INSERT INTO ledger (key, amount) VALUES (?, ?)")
                .bind(key.as_str())
                .bind(payload["amount"].as_i64())
                .execute(&mut *tx)
                .await?; // the effect, in the same transaction
            tx.commit().await?; // key + effect, or neither
        }
        Verdict::Stale { .. } => tx.commit().await?, // keeps the claim; applies nothing
        Verdict::Duplicate => tx.rollback().await?,  // already applied
        Verdict::Conflict { .. } => tx.rollback().await?, // same key, other payload: alert
    }
    // ack the message here (a dead-letter queue for a conflict), then count it
    metrics.record(route, verdict.outcome());
    Ok(verdict)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: consumer DATABASE_FILE")?;
    // WAL, a 30 s busy timeout, 4 connections, and the dedup tables.
    let pool = pool::sqlite(&path, PoolSettings::default()).await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS ledger (key TEXT NOT NULL, amount BIGINT)")
        .execute(&pool)
        .await?;
    let metrics = ConsumerMetrics::new();
    let event = |version: i64, amount: i64| serde_json::json!({ "orderId": "4711", "version": version, "amount": amount });
    let stamp = [
        ("x-qm-route", "new"),
        ("x-qm-broker", "nats"),
        ("x-qm-slice", "8"),
        ("x-qm-generation", "7"),
        ("x-qm-producer", "checkout"),
        ("x-qm-at", "1764460800123"),
    ];
    let deliveries = [
        (event(1, 10), Verdict::Fresh),             // applied
        (event(1, 10), Verdict::Duplicate),         // the same event by the other path
        (event(3, 30), Verdict::Fresh),             // applied; version 3 is now the last
        (event(2, 20), Verdict::Stale { last: 3 }), // overtaken: not applied
        (
            event(1, 99),
            Verdict::Conflict {
                stored_hash: PayloadHash::of_json(&event(1, 10)),
            },
        ),
    ];
    for (payload, expected) in &deliveries {
        let verdict = handle(&pool, &metrics, &stamp, payload, RouteLabel::Old).await?;
        println!("version {} -> {verdict:?}", payload["version"]);
        assert_eq!(verdict, *expected);
    }
    let (applied,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM ledger")
        .fetch_one(&pool)
        .await?;
    assert_eq!(applied, 2);
    print!("{}", metrics.render());
    Ok(())
}
