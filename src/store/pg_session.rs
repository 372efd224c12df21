//! What a daemon's PostgreSQL sessions may wait for (issue 42: no wedge): the session limits
//! [`super::postgres::PgStore::with_session_limits`] sets, and the error a lock not taken is.

use super::StoreError;

/// What a daemon's sessions may wait for, so that a session of an ex-leader (paused,
/// partitioned) holding a lock can block the leader only for a while (issue 42: no wedge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// `lock_timeout`: the longest wait for a lock.
    pub lock_timeout: std::time::Duration,
    /// `statement_timeout`: the longest statement.
    pub statement_timeout: std::time::Duration,
    /// `idle_in_transaction_session_timeout`: the server ends a session idle that long in a
    /// transaction, rolling it back and freeing its locks.
    pub idle_in_transaction_timeout: std::time::Duration,
}

impl SessionLimits {
    /// The session settings, with the server's TCP keepalives (a client gone away is noticed
    /// after about 10 s + 3 × 5 s, and its session and locks go with it).
    pub(super) fn settings(&self) -> Vec<(&'static str, String)> {
        let ms = |d: std::time::Duration| d.as_millis().to_string();
        vec![
            ("lock_timeout", ms(self.lock_timeout)),
            ("statement_timeout", ms(self.statement_timeout)),
            (
                "idle_in_transaction_session_timeout",
                ms(self.idle_in_transaction_timeout),
            ),
            ("tcp_keepalives_idle", "10".into()),
            ("tcp_keepalives_interval", "5".into()),
            ("tcp_keepalives_count", "3".into()),
        ]
    }
}

/// Whether `e` is PostgreSQL's "lock not available" (`lock_timeout` ran out: SQLSTATE 55P03).
pub fn is_lock_timeout(e: &StoreError) -> bool {
    match e {
        StoreError::Database(sqlx::Error::Database(d)) => d.code().as_deref() == Some("55P03"),
        _ => false,
    }
}
