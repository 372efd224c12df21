//! Durable dedup throughput: claims per second with `queue_migrate::dedup::sql`, against the
//! ceiling of the same database doing one bare single-row insert transaction per message, and
//! what several messages per transaction give. Run by `bench/dedup.sh` (or
//! `cargo bench -p queue-migrate-bench --bench dedup`); under `cargo test` it only says so and
//! exits.
//!
//! One connection, one message after the other (a consumer's loop), fresh keys every round.
//! Each workload reports its wall-clock rate and its CPU time per message (this process, which
//! includes SQLite, plus the PostgreSQL backend serving the connection): on a shared machine the
//! second is the steadier comparison.
//! Workloads, each per transaction of `batch` messages:
//!
//! - `bare`: `INSERT INTO bench_bare (key) VALUES ($1)`, a one-column primary key (the ceiling);
//! - `bare_row`: a plain `INSERT` of the dedup row (key, hash, two times) into a copy of
//!   `qm_dedup_keys` as that database has it (the schema's share of the cost, without the claim's
//!   upsert);
//! - `claim`: `sql::claim` of a fresh key (the upsert; one statement when the key is new);
//! - `claim_expiry_index` (SQLite only): the same, in a second database file whose
//!   `qm_dedup_keys` still has the expiry index of the earlier schema (the baseline of the change
//!   that dropped it, in the same run);
//! - `claim_dup`: `sql::claim` of a key already committed (upsert + read-back: a redelivery);
//! - `effect` / `claim_effect`: a consumer's transaction, one ledger row, without and with the
//!   claim in front.
//!
//! Environment: `QM_DEDUP_MESSAGES` (messages per workload and round, default 2000),
//! `QM_DEDUP_ROUNDS` (3 after a warm-up round; the figures reported are the medians), `QM_DEDUP_BATCHES` (`1,10,100`),
//! `QM_DEDUP_SQLITE_SYNC` (`full,normal`: SQLite `synchronous` settings to run), and
//! `QM_TEST_POSTGRES_URL` (PostgreSQL is skipped without it).

use queue_migrate_bench as support;

use std::str::FromStr;
use std::time::{Duration, Instant};

use queue_migrate::dedup::sql::{self, Claim};
use queue_migrate::dedup::{BusinessKey, PayloadHash};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, PgPool, Pool, Postgres, Sqlite};

const WORKLOADS: &[&str] = &[
    "bare",
    "bare_row",
    "claim",
    "claim_expiry_index",
    "claim_dup",
    "effect",
    "claim_effect",
];

struct Message {
    key: BusinessKey,
    hash: PayloadHash,
}

fn messages(tag: &str, n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| Message {
            key: BusinessKey::new("order.paid", &format!("order-{tag}-{i}"), "evt-1")
                .expect("a key"),
            hash: PayloadHash::of_json(&serde_json::json!({ "amount": i })),
        })
        .collect()
}

fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The ceiling, the ledger, and `bench_rows`, a copy of `qm_dedup_keys` as PostgreSQL has it.
const BENCH_TABLES: &str = "\
CREATE TABLE IF NOT EXISTS bench_bare (key TEXT NOT NULL PRIMARY KEY);
CREATE TABLE IF NOT EXISTS bench_rows (
    key           TEXT   NOT NULL PRIMARY KEY,
    payload_hash  TEXT   NOT NULL,
    claimed_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS bench_rows_expiry ON bench_rows (expires_at_ms);
CREATE TABLE IF NOT EXISTS bench_ledger (key TEXT NOT NULL, amount BIGINT NOT NULL);
";

/// The same for SQLite, whose `qm_dedup_keys` is `WITHOUT ROWID` with no expiry index.
const SQLITE_BENCH_TABLES: &str = "\
CREATE TABLE IF NOT EXISTS bench_bare (key TEXT NOT NULL PRIMARY KEY);
CREATE TABLE IF NOT EXISTS bench_rows (
    key           TEXT   NOT NULL PRIMARY KEY,
    payload_hash  TEXT   NOT NULL,
    claimed_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bench_ledger (key TEXT NOT NULL, amount BIGINT NOT NULL);
";

/// The expiry index of the earlier SQLite schema, for the `claim_expiry_index` baseline.
const EARLIER_SQLITE_INDEX: &str =
    "CREATE INDEX IF NOT EXISTS qm_dedup_keys_expiry ON qm_dedup_keys (expires_at_ms)";

/// One body for both databases (only the pool and the `BEGIN` differ).
macro_rules! run_workload {
    ($pool:expr, $begin:expr, $workload:expr, $msgs:expr, $batch:expr, $server:expr) => {{
        let pool = $pool;
        let msgs: &[Message] = $msgs;
        let server: Option<u32> = $server;
        let now = queue_migrate::time::now_ms();
        let cpu_now = || support::cpu_seconds("self") + server.map_or(0.0, |p| support::cpu_seconds(&p.to_string()));
        let cpu0 = cpu_now();
        let started = Instant::now();
        for chunk in msgs.chunks($batch) {
            let mut tx = pool.begin_with($begin).await.expect("begin");
            for m in chunk {
                match $workload {
                    "bare" => {
                        sqlx::query("INSERT INTO bench_bare (key) VALUES ($1)")
                            .bind(m.key.as_str())
                            .execute(&mut *tx)
                            .await
                            .expect("insert");
                    }
                    "bare_row" => {
                        sqlx::query(
                            "INSERT INTO bench_rows (key, payload_hash, claimed_at_ms, expires_at_ms) \
                             VALUES ($1, $2, $3, $4)",
                        )
                        .bind(m.key.as_str())
                        .bind(m.hash.to_hex())
                        .bind(now)
                        .bind(now + 90 * 86_400_000)
                        .execute(&mut *tx)
                        .await
                        .expect("insert");
                    }
                    "claim" => {
                        let c = sql::claim(&mut tx, &m.key, &m.hash, now)
                            .await
                            .expect("claim");
                        assert_eq!(c, Claim::Fresh);
                    }
                    "claim_dup" => {
                        let c = sql::claim(&mut tx, &m.key, &m.hash, now)
                            .await
                            .expect("claim");
                        assert_eq!(c, Claim::Duplicate);
                    }
                    "effect" => {
                        sqlx::query("INSERT INTO bench_ledger (key, amount) VALUES ($1, $2)")
                            .bind(m.key.as_str())
                            .bind(42_i64)
                            .execute(&mut *tx)
                            .await
                            .expect("insert");
                    }
                    "claim_effect" => {
                        let c = sql::claim(&mut tx, &m.key, &m.hash, now)
                            .await
                            .expect("claim");
                        assert_eq!(c, Claim::Fresh);
                        sqlx::query("INSERT INTO bench_ledger (key, amount) VALUES ($1, $2)")
                            .bind(m.key.as_str())
                            .bind(42_i64)
                            .execute(&mut *tx)
                            .await
                            .expect("insert");
                    }
                    other => panic!("unknown workload {other}"),
                }
            }
            tx.commit().await.expect("commit");
        }
        let wall = started.elapsed().as_secs_f64();
        let cpu = cpu_now() - cpu0;
        Sample {
            rate: msgs.len() as f64 / wall,
            cpu_us: cpu * 1e6 / msgs.len() as f64,
        }
    }};
}

/// One workload's run: wall-clock rate, and CPU (this process, plus the PostgreSQL backend)
/// per message.
#[derive(Clone, Copy)]
struct Sample {
    rate: f64,
    cpu_us: f64,
}

/// Which keys a workload uses in a round: `claim_dup` re-claims the keys `claim` committed in the
/// round before (round 0 is a warm-up, not reported).
fn key_tag(workload: &str, db: &str, batch: usize, round: usize) -> String {
    if workload == "claim_dup" {
        return format!("{db}-claim-b{batch}-r{}", round - 1);
    }
    format!("{db}-{workload}-b{batch}-r{round}")
}

/// The workloads of a round: round 0 in order (it has no `claim_dup`, nothing to re-claim yet),
/// then rotated by one each round so that no workload always runs first after a change of
/// batch size.
fn order(round: usize) -> Vec<&'static str> {
    if round == 0 {
        return WORKLOADS
            .iter()
            .copied()
            .filter(|w| *w != "claim_dup")
            .collect();
    }
    let k = round % WORKLOADS.len();
    WORKLOADS[k..]
        .iter()
        .chain(&WORKLOADS[..k])
        .copied()
        .collect()
}

struct Results {
    db: String,
    /// (workload, batch) -> each round's sample.
    rates: Vec<((String, usize), Vec<Sample>)>,
}

impl Results {
    fn push(&mut self, workload: &str, batch: usize, rate: Sample) {
        match self
            .rates
            .iter_mut()
            .find(|((w, b), _)| w == workload && *b == batch)
        {
            Some((_, v)) => v.push(rate),
            None => self.rates.push(((workload.to_string(), batch), vec![rate])),
        }
    }

    fn median(&self, workload: &str, batch: usize, f: impl Fn(&Sample) -> f64) -> Option<f64> {
        let (_, v) = self
            .rates
            .iter()
            .find(|((w, b), _)| w == workload && *b == batch)?;
        let mut v: Vec<f64> = v.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        Some(v[v.len() / 2])
    }

    fn print(&self, batches: &[usize]) {
        println!();
        println!("{}", self.db);
        println!();
        println!(
            "| workload | messages per transaction | messages/s (median) | vs bare, same batch | vs bare, 1 per tx | CPU µs per message (median) | messages per CPU s vs bare, same batch | rounds (messages/s) |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---|");
        let rate = |s: &Sample| s.rate;
        let cpu = |s: &Sample| s.cpu_us;
        let ceiling = self.median("bare", 1, rate);
        for b in batches {
            let bare = self.median("bare", *b, rate);
            let bare_cpu = self.median("bare", *b, cpu);
            for w in WORKLOADS {
                let (Some(m), Some(c)) = (self.median(w, *b, rate), self.median(w, *b, cpu)) else {
                    continue;
                };
                let rounds = self
                    .rates
                    .iter()
                    .find(|((x, y), _)| x == w && y == b)
                    .map(|(_, v)| {
                        v.iter()
                            .map(|s| format!("{:.0}", s.rate))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                let ratio =
                    |base: Option<f64>| base.map_or("-".to_string(), |x| format!("{:.2}", m / x));
                let per_cpu = bare_cpu
                    .filter(|_| c > 0.0)
                    .map_or("-".to_string(), |x| format!("{:.2}", x / c));
                println!(
                    "| {w} | {b} | {m:.0} | {} | {} | {c:.0} | {per_cpu} | {rounds} |",
                    ratio(bare),
                    ratio(ceiling)
                );
            }
        }
    }
}

async fn sqlite(sync: &str, n: usize, rounds: usize, batches: &[usize]) -> Results {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let synchronous = match sync {
        "normal" => SqliteSynchronous::Normal,
        "full" => SqliteSynchronous::Full,
        other => panic!("QM_DEDUP_SQLITE_SYNC: full or normal, not {other}"),
    };
    let open = |file: &str| {
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join(file))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(synchronous)
            .busy_timeout(Duration::from_secs(20));
        SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
    };
    let pool: Pool<Sqlite> = open("consumer.db").await.expect("open SQLite");
    sql::ensure_schema(&pool).await.expect("schema");
    sqlx::raw_sql(SQLITE_BENCH_TABLES)
        .execute(&pool)
        .await
        .expect("bench tables");
    // The baseline: the same schema plus the earlier expiry index, in a file of its own.
    let earlier: Pool<Sqlite> = open("earlier.db").await.expect("open SQLite");
    sql::ensure_schema(&earlier).await.expect("schema");
    sqlx::raw_sql(EARLIER_SQLITE_INDEX)
        .execute(&earlier)
        .await
        .expect("the earlier expiry index");
    let db = format!(
        "SQLite (WAL, synchronous={}), one connection",
        sync.to_uppercase()
    );
    let mut results = Results {
        db,
        rates: Vec::new(),
    };
    for round in 0..=rounds {
        for &batch in batches {
            for w in order(round) {
                let msgs = messages(&key_tag(w, "sqlite", batch, round), n);
                let sample = if w == "claim_expiry_index" {
                    run_workload!(&earlier, "BEGIN IMMEDIATE", "claim", &msgs, batch, None)
                } else {
                    run_workload!(&pool, "BEGIN IMMEDIATE", w, &msgs, batch, None)
                };
                if round > 0 {
                    results.push(w, batch, sample);
                }
            }
        }
    }
    pool.close().await;
    earlier.close().await;
    results
}

async fn postgres(url: &str, n: usize, rounds: usize, batches: &[usize]) -> Results {
    let admin = PgPool::connect(url).await.expect("connect to PostgreSQL");
    let schema = format!("qm_dedup_bench_{}", std::process::id());
    sqlx::raw_sql(AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
    )))
    .execute(&admin)
    .await
    .expect("create the bench schema");
    let options = PgConnectOptions::from_str(url)
        .expect("a PostgreSQL URL")
        .options([("search_path", schema.as_str())]);
    let pool: Pool<Postgres> = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .expect("connect to PostgreSQL");
    sql::ensure_schema(&pool).await.expect("schema");
    sqlx::raw_sql(BENCH_TABLES)
        .execute(&pool)
        .await
        .expect("bench tables");
    let settings: (String, String, String) = sqlx::query_as(
        "SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('server_version')",
    )
    .fetch_one(&pool)
    .await
    .expect("settings");
    let mut results = Results {
        db: format!(
            "PostgreSQL {} (fsync={}, synchronous_commit={}), one connection over TCP on loopback",
            settings.2, settings.0, settings.1
        ),
        rates: Vec::new(),
    };
    let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .expect("the backend's pid");
    let backend = u32::try_from(backend).ok();
    for round in 0..=rounds {
        for &batch in batches {
            for w in order(round)
                .into_iter()
                .filter(|w| *w != "claim_expiry_index")
            {
                let msgs = messages(&key_tag(w, "pg", batch, round), n);
                let sample = run_workload!(&pool, "BEGIN", w, &msgs, batch, backend);
                if round > 0 {
                    results.push(w, batch, sample);
                }
            }
        }
    }
    pool.close().await;
    let _ = sqlx::raw_sql(AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE"
    )))
    .execute(&admin)
    .await;
    results
}

fn main() {
    let run =
        std::env::args().any(|a| a == "--bench") || std::env::var_os("QM_DEDUP_RUN").is_some();
    if !run {
        println!(
            "dedup: run with `cargo bench -p queue-migrate-bench --bench dedup` or bench/dedup.sh; \
             nothing to do"
        );
        return;
    }
    let n = env_num("QM_DEDUP_MESSAGES", 2000);
    let rounds = env_num("QM_DEDUP_ROUNDS", 3).max(1);
    let batches: Vec<usize> = env_list("QM_DEDUP_BATCHES", "1,10,100")
        .iter()
        .map(|b| b.parse().expect("QM_DEDUP_BATCHES: numbers"))
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        println!(
            "{n} messages per workload and round, {rounds} rounds after a warm-up round, interleaved; \
             CPU: this process (client, and SQLite itself) plus, for PostgreSQL, its backend process"
        );
        for sync in env_list("QM_DEDUP_SQLITE_SYNC", "full,normal") {
            sqlite(&sync, n, rounds, &batches).await.print(&batches);
        }
        match std::env::var("QM_TEST_POSTGRES_URL") {
            Ok(url) => postgres(&url, n, rounds, &batches).await.print(&batches),
            Err(_) => println!("\nPostgreSQL: skipped (set QM_TEST_POSTGRES_URL)"),
        }
    });
}
