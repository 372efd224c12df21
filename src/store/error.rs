//! The store's one error type.

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No migration of that name in this store.
    #[error("no migration named {0:?} in this store (see `migrate status` for the ones it has)")]
    NotFound(String),
    /// `init` of a name that exists.
    #[error(
        "a migration named {0:?} already exists in this store; to change its plan: `migrate plan apply FILE --reason \"...\"`"
    )]
    AlreadyExists(String),
    /// A transition decided on gates whose memory another writer changed since it was read
    /// ([`Commit::memory`](super::Commit::memory)).
    #[error(
        "the memory of gate(s) {gates} of migration {name:?} changed since it was read: another writer (a daemon's round or a `migrate advance`) evaluated them meanwhile, so the transition was not applied; run `migrate advance` again to decide on the memory as it is now (a daemon decides again at its next round)"
    )]
    StaleMemory { name: String, gates: String },
    /// Somebody else changed the migration since it was read.
    #[error(
        "migration {name:?} changed under us (expected version {expected}, now {actual}): another command or controller acted first; re-read its status and retry"
    )]
    Conflict {
        name: String,
        expected: i64,
        actual: i64,
    },
    /// A row the store cannot make sense of (edited by hand, or a newer schema).
    #[error("corrupt row in the store: {0}")]
    Corrupt(String),
    /// The state URL's scheme is neither SQLite's nor PostgreSQL's (the URL as given, redacted).
    #[error(
        "unsupported state URL {0}: the state store is SQLite or PostgreSQL; give a file path, sqlite://PATH or postgres://USER@HOST[:PORT]/DATABASE"
    )]
    UnsupportedUrl(String),
    /// A SQLite or PostgreSQL state URL that cannot be read (a port that is not a number, an
    /// unknown option): `url` redacted, `why` the driver's words (redacted too).
    #[error(
        "malformed state URL {url}: {why}; write it as a file path, sqlite://PATH or postgres://USER@HOST[:PORT]/DATABASE"
    )]
    MalformedUrl { url: String, why: String },
    /// The SQLite library this build links cannot run the store's queries (too old, or built
    /// without its JSON functions).
    #[error(
        "this build links SQLite {0}; the state store needs 3.38 or newer, with its JSON functions; build with sqlx's bundled SQLite (the default: do not set LIBSQLITE3_SYS_USE_PKG_CONFIG)"
    )]
    SqliteTooOld(String),
    /// A write made as the holder of a lease that it no longer holds with the epoch the write
    /// was made under (another holder took it, or it expired on the database's clock): rolled
    /// back, nothing committed (see [`fence`](super::fence)).
    #[error(
        "fenced: the write was refused and rolled back: {holder:?} no longer holds the lease {lease:?} with epoch {epoch} (another controller took it, or it expired)"
    )]
    Fenced {
        lease: String,
        holder: String,
        epoch: String,
    },
    /// A decision on a dead-letter group that already has one (two `dlq close` at once, whatever
    /// their reasons, or a close racing a replay: the second records nothing, and a replay
    /// refused so sends nothing of the group); what was decided, in words. Exit 4 at the CLI.
    #[error("nothing recorded: {0}; see `migrate dlq decisions`")]
    AlreadyDecided(String),
    /// A read that would join more than the store's cap into one value (a source's history
    /// larger than [`MAX_HISTORY_BYTES`](super::MAX_HISTORY_BYTES), or holding a row larger
    /// than [`MAX_SCRAPE_ROW_BYTES`](super::MAX_SCRAPE_ROW_BYTES)): refused before the database
    /// is asked; what and which cap, in words.
    #[error("{0}")]
    TooLarge(String),
    /// A statement (or the acquisition of a connection, or a commit) did not finish within the
    /// store's client-side deadline ([`super::SqlStore::with_statement_deadline`]): its
    /// connection stopped answering or the database is that slow; the connection was dropped,
    /// not waited on (issue 54).
    #[error("the database did not answer within {}: the statement was abandoned and its connection dropped", crate::time::human(*.0))]
    Deadline(std::time::Duration),
    /// The database itself failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Applying the schema failed.
    #[error("cannot apply the schema: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
