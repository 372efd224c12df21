//! A PostgreSQL connection taken from the pool for one statement or one transaction, that is
//! never given back as it is after a statement on it was cut (issue 54).
//!
//! sqlx hands a connection back to its pool when its `PoolConnection` is dropped, whatever the
//! state of the connection; a statement cut at its client-side deadline (or whose future was
//! dropped) leaves it mid-answer, and two things then went wrong:
//! - On TLS, the pool closes a connection that fails its test by flushing rustls, which waits
//!   for the peer to become readable: a silent peer kept the connection's place in the pool
//!   until the kernel gave the socket up.
//! - A `BEGIN` cut after it was sent (a paused leader resumed: every deadline fires at once)
//!   left the connection inside a transaction, because sqlx counts a transaction only once
//!   `BEGIN` was answered; back in the pool, the next `BEGIN` on it was `there is already a
//!   transaction in progress`, and a statement run on it outside a transaction was part of the
//!   stale one (never committed, its locks held).
//!
//! [`Held`] owns the `PoolConnection` and knows what it is doing. Dropped while a statement is
//! in flight, its socket is closed at once: no `Terminate`, no TLS `close_notify`, nothing
//! waited on (the server rolls back what the session had open when it reads the end of the
//! stream); its place in the pool is freed then. Dropped inside a transaction that no
//! statement is waiting on, the transaction is rolled back (within [`PING_DEADLINE`]) before
//! the connection goes back. Otherwise it goes back once it answers a ping within
//! [`PING_DEADLINE`], and is closed the same way when it does not. A connection is also pinged
//! before it is handed out ([`Held::acquire`]), and one that does not answer is closed so.

use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{Connection, Postgres};

use super::{Result, StoreError};

/// How long a ping that tests a connection (before it is handed out, after it is given back)
/// or the rollback of a transaction given up may take before the connection is closed: a live
/// server answers one in milliseconds. A statement's deadline
/// ([`super::SqlStore::with_statement_deadline`]) should leave room for a few: each idle
/// connection gone silent costs one before a new connection is opened.
pub const PING_DEADLINE: Duration = Duration::from_secs(1);

/// A connection of the pool, held for one statement or one transaction (see the module doc).
pub(crate) struct Held {
    conn: Option<PoolConnection<Postgres>>,
    /// A statement was sent on it and its answer not read to the end.
    busy: bool,
    /// A transaction was begun on it and not ended.
    open: bool,
}

impl Held {
    /// A connection of `pool` that answered a ping within [`PING_DEADLINE`], by `until`.
    ///
    /// # Errors
    /// [`StoreError::Deadline`] (`deadline`) when none could be had by `until`; the pool's
    /// error when a connection cannot be opened.
    pub(crate) async fn acquire(
        pool: &PgPool,
        until: tokio::time::Instant,
        deadline: Duration,
    ) -> Result<Held> {
        tokio::time::timeout_at(until, async {
            loop {
                let mut conn = pool.acquire().await?;
                match tokio::time::timeout(PING_DEADLINE, conn.ping()).await {
                    Ok(Ok(())) => {
                        return Ok::<_, StoreError>(Held {
                            conn: Some(conn),
                            busy: false,
                            open: false,
                        });
                    }
                    // Gone silent or broken while idle: closed, and another one tried.
                    _ => drop(conn.detach()),
                }
            }
        })
        .await
        .map_err(|_| StoreError::Deadline(deadline))?
    }

    /// The connection, for a statement about to be sent: until [`Held::settle`] says it was
    /// answered, it is closed when dropped.
    pub(crate) fn start(&mut self) -> &mut PgConnection {
        self.busy = true;
        self.conn
            .as_deref_mut()
            .expect("a held connection is only taken when dropped")
    }

    /// The statement started last ended as `answer` says: unless it was cut at its deadline
    /// (its answer still on the way), the connection is in a known state again.
    pub(crate) fn settle<T>(&mut self, answer: &Result<T>) {
        if !matches!(answer, Err(StoreError::Deadline(_))) {
            self.busy = false;
        }
    }

    /// Mark a transaction begun (`true`) or ended (`false`) on it.
    pub(crate) fn set_open(&mut self, open: bool) {
        self.open = open;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if self.busy {
            // Mid-answer: closed without a word (dropping the socket waits on nothing).
            drop(conn.detach());
            return;
        }
        let open = self.open;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(give_back(conn, open));
            }
            Err(_) => drop(conn.detach()),
        }
    }
}

/// `conn` back to its pool once it rolled back the transaction it had open (`open`) or
/// answered a ping, each within [`PING_DEADLINE`]; closed without a word otherwise.
async fn give_back(mut conn: PoolConnection<Postgres>, open: bool) {
    let answered = if open {
        tokio::time::timeout(PING_DEADLINE, sqlx::raw_sql("ROLLBACK").execute(&mut *conn))
            .await
            .is_ok_and(|r| r.is_ok())
    } else {
        tokio::time::timeout(PING_DEADLINE, conn.ping())
            .await
            .is_ok_and(|r| r.is_ok())
    };
    if answered {
        drop(conn);
    } else {
        drop(conn.detach());
    }
}
