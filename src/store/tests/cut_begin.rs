//! Issue 54: after a paused leader resumed, the daemons logged `WARN sqlx::postgres::notice:
//! there is already a transaction in progress`. On resume every deadline fires at once; a
//! `BEGIN` cut after it was sent left its connection inside a transaction (sqlx counts a
//! transaction only once its `BEGIN` is answered, so dropping it rolled nothing back), and the
//! pool handed that connection out again: the next `BEGIN` on it warned, and a statement run on
//! it outside a transaction ran inside the stale one (not committed, its locks kept).

use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::*;
use crate::store::sql::{Begin, Pool};

/// Whether the server ran a `BEGIN` of the store (`queue-migrate`) in `database` whose session
/// now waits, inside that transaction, for its next statement.
async fn begin_ran(watcher: &mut PgConnection, database: &str) -> bool {
    sqlx::query_scalar::<_, i64>(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 \
         AND application_name = 'queue-migrate' AND state = 'idle in transaction' \
         AND query = 'BEGIN'",
    )
    .bind(database)
    .fetch_one(watcher)
    .await
    .unwrap()
        > 0
}

/// Whether a statement of `store` runs inside a transaction begun before it.
async fn inside_a_transaction(store: &SqlStore) -> Result<bool> {
    Ok(on!(&store.db, p => sqlx::raw_sql(STALE).fetch_one(p).await?.try_get(0)?))
}

/// Whether `tx` began before `instant` (a `timestamptz` of the server's clock).
async fn begun_before(tx: &mut crate::store::sql::Tx, instant: &str) -> Result<bool> {
    Ok(in_tx!(tx, c => sqlx::query_scalar(
        "SELECT transaction_timestamp() < CAST($1 AS TIMESTAMPTZ)",
    )
    .bind(instant)
    .fetch_one(&mut *c)
    .await?))
}

/// Outside a transaction, a statement's transaction begins with it (one message of the simple
/// protocol: the extended one's `Parse` begins the transaction before its `Execute`).
const STALE: &str = "SELECT transaction_timestamp() <> statement_timestamp()";

#[tokio::test]
#[ignore = "needs QM_TEST_POSTGRES_URL (scripts/services.sh start postgres)"]
async fn a_begin_cut_after_it_was_sent_gave_its_connection_back_inside_a_transaction() {
    on_postgres(|b| async move {
        let store = SqlStore::open(&b.url).await.unwrap();
        let database = b.url.rsplit('/').next().unwrap().to_string();
        let mut watcher = PgConnection::connect(&b.url).await.unwrap();
        store.list().await.unwrap();
        // Drive a transaction's beginning by hand and drop it (what a deadline that fires, or
        // a future given up, does) once the server ran its BEGIN and before its answer is read.
        let mut caught = false;
        for _attempt in 0..20 {
            let mut begin = Box::pin(store.begin(Begin::Write));
            for _step in 0..1_000 {
                let polled = begin.as_mut().poll(&mut Context::from_waker(Waker::noop()));
                if let Poll::Ready(tx) = polled {
                    drop(tx);
                    break;
                }
                if begin_ran(&mut watcher, &database).await {
                    caught = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            drop(begin);
            if caught {
                break;
            }
        }
        assert!(
            caught,
            "no BEGIN was caught between its sending and its answer"
        );
        // Once every connection of the pool is back (or closed), none is inside a transaction:
        // outside one, a statement's transaction begins with it.
        let Pool::Postgres(pool) = &store.db.pool else {
            unreachable!("a PostgreSQL store")
        };
        for _ in 0..500 {
            if pool.num_idle() == pool.size() as usize {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for _ in 0..4 {
            assert!(
                !inside_a_transaction(&store).await.unwrap(),
                "the pool handed out a connection inside the transaction of a cut BEGIN"
            );
        }
        // And the next transaction begins on a connection outside any.
        let now: String = sqlx::query_scalar("SELECT CAST(clock_timestamp() AS TEXT)")
            .fetch_one(&mut watcher)
            .await
            .unwrap();
        let mut tx = store.begin(Begin::Write).await.unwrap();
        assert!(
            !begun_before(&mut tx, &now).await.unwrap(),
            "a transaction began inside the one of a cut BEGIN"
        );
        tx.commit().await.unwrap();
    })
    .await;
}
