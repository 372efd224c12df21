//! Issue 54, item 2: a partition between the leader and PostgreSQL that healed for new
//! connections but left the old ones silent (no FIN, no RST) left the round waiting forever on
//! a statement in flight, while the lease renewal, on a new connection, kept the lease: the
//! leader said `leader 1` and `/readyz` 200 and ran no round. Every statement now has a
//! client-side deadline: the one on the silent connection fails within it, its connection is
//! dropped (not returned to the pool), and the next statement runs on a new connection.
//!
//! The same on TLS: sqlx closed a connection it gave up on by flushing rustls, which waits for
//! the peer to become readable, so each statement cut on a silent TLS connection kept one of
//! the pool's 4 places until the kernel gave the socket up; once the pool was full the store
//! stopped. The store now closes such a connection by dropping its socket.
//!
//! Ignored without `QM_TEST_POSTGRES_URL` (`scripts/services.sh start postgres`).

use std::time::{Duration, Instant};

use queue_migrate::store::{JournalStore, SqlStore, StoreError};
use sqlx::{Connection, Executor};

use crate::common::Postgres;
use crate::common::silent_proxy::{SilentProxy, upstream_of};

/// The statements' client-side deadline in this test (room for a few of the pool's 1 s pings
/// of idle connections gone silent, each skipped for a new connection).
const DEADLINE: Duration = Duration::from_secs(5);
/// Far longer than the deadline and the pool's pings together: a statement still waiting then
/// waits on the silent connection.
const STUCK: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_POSTGRES_URL (scripts/services.sh start postgres)"]
async fn a_partition_that_heals_only_for_new_connections_leaves_a_leader_that_says_ready_and_runs_no_round()
 {
    partition_heals_only_for_new_connections("half_open", "disable", 1).await;
}

/// On TLS, each statement cut on a silent connection kept its place in the pool (sqlx closed the
/// connection by flushing rustls, waiting on the silent peer): as many partitions as the pool
/// has places (4) left the store with none, and every statement after them failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_POSTGRES_URL (scripts/services.sh start postgres)"]
async fn on_tls_each_statement_cut_on_a_silent_connection_kept_its_place_in_the_pool_until_none_was_left()
 {
    partition_heals_only_for_new_connections("half_open_tls", "require", 4).await;
}

/// `partitions` times (in a fresh `database`): a statement in flight on a connection (`sslmode`) that goes silent is
/// cut at its deadline, and the next statement runs on a new connection.
async fn partition_heals_only_for_new_connections(
    database: &'static str,
    sslmode: &str,
    partitions: usize,
) {
    let pg = tokio::task::spawn_blocking(move || Postgres::fresh(database))
        .await
        .unwrap();
    let proxy = SilentProxy::start(upstream_of(&pg.url)).await;
    let store = SqlStore::open(&format!("{}?sslmode={sslmode}", proxy.url_through(&pg.url)))
        .await
        .unwrap()
        .with_statement_deadline(DEADLINE);
    for partition in 1..=partitions {
        // The leader's connection works.
        store.list().await.unwrap();

        // A statement in flight: the leader's read waits behind a lock taken by another session
        // (straight to the server, not through the proxy).
        let mut other = sqlx::PgConnection::connect(&pg.url).await.unwrap();
        other.execute("BEGIN").await.unwrap();
        other
            .execute("LOCK TABLE migrations IN ACCESS EXCLUSIVE MODE")
            .await
            .unwrap();
        let reader = store.clone();
        let started = Instant::now();
        let in_flight = tokio::spawn(async move { reader.list().await });
        let mut watcher = sqlx::PgConnection::connect(&pg.url).await.unwrap();
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                 AND query LIKE 'SELECT * FROM migrations%'",
            )
            .fetch_one(&mut watcher)
            .await
            .unwrap();
            if waiting > 0 {
                break;
            }
            assert!(
                started.elapsed() < STUCK,
                "the leader's read never reached the server"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // The partition: every connection open now goes silent; new ones go through. The server
        // answers the read once the lock is gone, but the answer goes nowhere.
        proxy.silence_established();
        other.execute("ROLLBACK").await.unwrap();
        let accepted = proxy.accepted();
        let answer = tokio::time::timeout(STUCK, in_flight)
            .await
            .unwrap_or_else(|_| {
                panic!("a statement waited {STUCK:?} on a connection that stopped answering")
            })
            .unwrap();
        assert!(
            matches!(answer, Err(StoreError::Deadline(d)) if d == DEADLINE),
            "partition {partition}: the statement on the silent connection must fail at its deadline: {answer:?}"
        );

        // The next statement runs, on a new connection: the silent ones are dropped, not waited on.
        let next = tokio::time::timeout(STUCK, store.list())
            .await
            .unwrap_or_else(|_| {
                panic!("partition {partition}: the next statement waited on a silent connection")
            });
        next.unwrap_or_else(|e| {
                panic!("partition {partition}: the next statement fails (a silent connection was given to it, or the pool has no place left): {e}")
            });
        assert!(
            proxy.accepted() > accepted,
            "partition {partition}: the next statement ran on a connection opened after the partition"
        );
    }
    tokio::task::spawn_blocking(move || pg.drop_database())
        .await
        .unwrap();
}
