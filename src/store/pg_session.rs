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
    /// The server's TCP keepalives on the session.
    pub keepalives: Keepalives,
}

/// The server's TCP keepalives on a daemon's sessions (`tcp_keepalives_idle`, `_interval`,
/// `_count`): a client gone away (killed, partitioned, paused) is noticed after about
/// `idle + count × interval`, and its session and locks go with it. Whole seconds, at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalives {
    pub idle: std::time::Duration,
    pub interval: std::time::Duration,
    pub count: u32,
}

impl Default for Keepalives {
    /// 10 s idle, then 3 probes 5 s apart: about 25 s.
    fn default() -> Keepalives {
        Keepalives {
            idle: std::time::Duration::from_secs(10),
            interval: std::time::Duration::from_secs(5),
            count: 3,
        }
    }
}

impl SessionLimits {
    /// The session settings, with the server's TCP keepalives ([`Keepalives`]).
    pub(super) fn settings(&self) -> Vec<(&'static str, String)> {
        let ms = |d: std::time::Duration| d.as_millis().to_string();
        // PostgreSQL takes whole seconds here; a part of one rounds up (0 would be the OS's).
        let secs = |d: std::time::Duration| d.as_millis().div_ceil(1000).max(1).to_string();
        vec![
            ("lock_timeout", ms(self.lock_timeout)),
            ("statement_timeout", ms(self.statement_timeout)),
            (
                "idle_in_transaction_session_timeout",
                ms(self.idle_in_transaction_timeout),
            ),
            ("tcp_keepalives_idle", secs(self.keepalives.idle)),
            ("tcp_keepalives_interval", secs(self.keepalives.interval)),
            (
                "tcp_keepalives_count",
                self.keepalives.count.max(1).to_string(),
            ),
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn limits(keepalives: Keepalives) -> SessionLimits {
        SessionLimits {
            lock_timeout: Duration::from_secs(2),
            statement_timeout: Duration::from_secs(30),
            idle_in_transaction_timeout: Duration::from_secs(5),
            keepalives,
        }
    }

    /// Issue 42: the keepalives were fixed at 10 s / 5 s x 3, with no flag to change them.
    #[test]
    fn the_sessions_keepalives_are_the_ones_given_in_whole_seconds() {
        let set = |k| {
            limits(k)
                .settings()
                .into_iter()
                .collect::<std::collections::HashMap<_, _>>()
        };
        let default = set(Keepalives::default());
        assert_eq!(default["tcp_keepalives_idle"], "10");
        assert_eq!(default["tcp_keepalives_interval"], "5");
        assert_eq!(default["tcp_keepalives_count"], "3");
        assert_eq!(default["lock_timeout"], "2000");
        let given = set(Keepalives {
            idle: Duration::from_millis(2500),
            interval: Duration::from_millis(200),
            count: 0,
        });
        assert_eq!(given["tcp_keepalives_idle"], "3");
        assert_eq!(given["tcp_keepalives_interval"], "1");
        assert_eq!(given["tcp_keepalives_count"], "1");
    }
}
