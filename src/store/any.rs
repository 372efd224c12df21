//! One store type for every backend, chosen by the state URL at run time.
//!
//! [`open`] reads the URL: `postgres://` or `postgresql://` is PostgreSQL ([`PgStore`]);
//! `sqlite:` (`sqlite://PATH`, `sqlite::memory:`) or a plain path is SQLite ([`SqliteStore`]); any
//! other `scheme://` is [`StoreError::UnsupportedUrl`]. [`AnyStore`] implements [`Store`] and
//! [`DispositionStore`] by delegating to the backend it holds.

use std::collections::HashMap;

use super::dispositions::{Claim, DispositionStore, Purged, ReplayClaim, SeenSignature};
use super::postgres::PgStore;
use super::sqlite::SqliteStore;
use super::{
    Commit, Fleet, GateKey, GateRecord, JournalEntry, Lease, MigrationRecord, NewMigration,
    PlanReplace, Result, RoundRecord, Store, StoreError, StoredPoint, StoredSeries,
};
use crate::dlq::disposition::Disposition;

/// A store of any supported backend.
#[derive(Debug, Clone)]
pub enum AnyStore {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

/// Open the store at `url` and bring its schema up to date (see the module doc for the URLs).
///
/// # Errors
/// [`StoreError::UnsupportedUrl`] for an unknown scheme, [`StoreError::MalformedUrl`] for a URL
/// of a known one its driver cannot read; otherwise what the backend's `open` returns.
pub async fn open(url: &str) -> Result<AnyStore> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(AnyStore::Postgres(PgStore::open(url).await?))
    } else if url.starts_with("sqlite:") || !url.contains("://") {
        Ok(AnyStore::Sqlite(SqliteStore::open(url).await?))
    } else {
        // Shown to the user: its credentials masked.
        Err(StoreError::UnsupportedUrl(crate::redact::url(url)))
    }
}

/// The file a SQLite state URL names (`PATH`, `sqlite://PATH`, `sqlite:PATH`, options after `?`
/// left out); `None` for PostgreSQL, other schemes and in-memory databases.
pub fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    if url.contains("://") && !url.starts_with("sqlite://") {
        return None;
    }
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    (!path.is_empty() && !path.contains(":memory:")).then(|| std::path::PathBuf::from(path))
}

impl AnyStore {
    /// This store, stamping the journal, the step's start and the last update of what it
    /// commits with the writer's instants (a simulated clock: the demo, `--now`, a test that
    /// injects one) instead of the database's clock.
    #[must_use]
    pub fn with_writer_clock(self) -> AnyStore {
        match self {
            AnyStore::Sqlite(s) => AnyStore::Sqlite(s.with_writer_clock()),
            AnyStore::Postgres(s) => AnyStore::Postgres(s.with_writer_clock()),
        }
    }

    /// This store with a daemon's session limits (PostgreSQL; SQLite has no other session to
    /// wait for but its own file's lock, bounded by its busy timeout).
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn with_session_limits(
        self,
        limits: &super::postgres::SessionLimits,
    ) -> Result<AnyStore> {
        match self {
            AnyStore::Postgres(s) => Ok(AnyStore::Postgres(s.with_session_limits(limits).await?)),
            sqlite => Ok(sqlite),
        }
    }

    /// The backend's name: `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self {
            AnyStore::Sqlite(_) => "sqlite",
            AnyStore::Postgres(_) => "postgres",
        }
    }
}

impl From<SqliteStore> for AnyStore {
    fn from(store: SqliteStore) -> AnyStore {
        AnyStore::Sqlite(store)
    }
}

impl From<PgStore> for AnyStore {
    fn from(store: PgStore) -> AnyStore {
        AnyStore::Postgres(store)
    }
}

/// `delegate!(self, s => s.method(args))`: the same call on whichever backend `self` holds.
macro_rules! delegate {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            AnyStore::Sqlite($s) => $call.await,
            AnyStore::Postgres($s) => $call.await,
        }
    };
}

impl Store for AnyStore {
    async fn create(&self, new: &NewMigration) -> Result<MigrationRecord> {
        delegate!(self, s => s.create(new))
    }

    async fn get(&self, name: &str) -> Result<MigrationRecord> {
        delegate!(self, s => s.get(name))
    }

    async fn list(&self) -> Result<Vec<MigrationRecord>> {
        delegate!(self, s => Store::list(s))
    }

    async fn fleet(&self) -> Result<Fleet> {
        delegate!(self, s => s.fleet())
    }

    async fn commit(&self, name: &str, commit: &Commit) -> Result<MigrationRecord> {
        delegate!(self, s => s.commit(name, commit))
    }

    async fn replace_plan(&self, name: &str, replace: &PlanReplace) -> Result<MigrationRecord> {
        delegate!(self, s => s.replace_plan(name, replace))
    }

    async fn journal(&self, name: &str) -> Result<Vec<JournalEntry>> {
        delegate!(self, s => s.journal(name))
    }

    async fn journal_page(
        &self,
        name: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<JournalEntry>> {
        delegate!(self, s => s.journal_page(name, before, limit))
    }

    async fn record_rounds(&self, rounds: &[RoundRecord]) -> Result<()> {
        delegate!(self, s => s.record_rounds(rounds))
    }

    async fn record_evaluations(&self, name: &str, records: &[GateRecord]) -> Result<()> {
        delegate!(self, s => s.record_evaluations(name, records))
    }

    async fn latest_evaluations(
        &self,
        name: &str,
        step_entered_ms: i64,
        gates: &[GateKey<'_>],
    ) -> Result<Vec<GateRecord>> {
        delegate!(self, s => s.latest_evaluations(name, step_entered_ms, gates))
    }

    async fn evaluation_history(&self, name: &str, limit: u32) -> Result<Vec<GateRecord>> {
        delegate!(self, s => s.evaluation_history(name, limit))
    }

    async fn mark_published(&self, name: &str, generation: i64) -> Result<()> {
        delegate!(self, s => s.mark_published(name, generation))
    }

    async fn scrape_instants_through(
        &self,
        name: &str,
        source: &str,
        through_ms: i64,
    ) -> Result<(i64, i64)> {
        delegate!(self, s => s.scrape_instants_through(name, source, through_ms))
    }

    async fn load_series_after(
        &self,
        name: &str,
        source: &str,
        after_ms: i64,
        samples_from_ms: i64,
    ) -> Result<(Vec<StoredSeries>, Vec<i64>)> {
        delegate!(self, s => s.load_series_after(name, source, after_ms, samples_from_ms))
    }

    async fn save_points(
        &self,
        name: &str,
        source: &str,
        points: &[StoredPoint],
        scrape_times: &[i64],
        keep_from_ms: i64,
    ) -> Result<()> {
        delegate!(self, s => s.save_points(name, source, points, scrape_times, keep_from_ms))
    }

    async fn note_publish_error(&self, name: &str, generation: i64, error: &str) -> Result<()> {
        delegate!(self, s => s.note_publish_error(name, generation, error))
    }

    async fn generations(&self) -> Result<Vec<(String, i64)>> {
        delegate!(self, s => s.generations())
    }

    async fn generations_mark(&self) -> Result<(i64, i64)> {
        delegate!(self, s => s.generations_mark())
    }

    async fn acquire_lease(
        &self,
        lease: &str,
        holder: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<Lease> {
        delegate!(self, s => s.acquire_lease(lease, holder, now_ms, ttl_ms))
    }

    async fn release_lease(&self, lease: &str, holder: &str) -> Result<()> {
        delegate!(self, s => s.release_lease(lease, holder))
    }

    async fn clock_ms(&self, writer_ms: i64) -> Result<i64> {
        delegate!(self, s => s.clock_ms(writer_ms))
    }

    async fn prune(&self, prune: &super::retention::Prune) -> Result<super::retention::Pruned> {
        delegate!(self, s => s.prune(prune))
    }

    async fn prunable(&self, prune: &super::retention::Prune) -> Result<super::retention::Pruned> {
        delegate!(self, s => s.prunable(prune))
    }

    async fn dlq_decisions(&self) -> Result<Vec<Disposition>> {
        delegate!(self, s => s.dlq_decisions())
    }

    fn fenced(&self, cell: super::fence::FenceCell) -> AnyStore {
        match self {
            AnyStore::Sqlite(s) => AnyStore::Sqlite(s.fenced(cell)),
            AnyStore::Postgres(s) => AnyStore::Postgres(s.fenced(cell)),
        }
    }

    fn fence(&self) -> super::fence::FenceCell {
        match self {
            AnyStore::Sqlite(s) => s.fence(),
            AnyStore::Postgres(s) => s.fence(),
        }
    }
}

impl DispositionStore for AnyStore {
    async fn record(&self, disposition: &Disposition) -> Result<i64> {
        delegate!(self, s => s.record(disposition))
    }

    async fn list(&self) -> Result<Vec<Disposition>> {
        delegate!(self, s => DispositionStore::list(s))
    }

    async fn purge_before(&self, before_ms: i64) -> Result<Purged> {
        delegate!(self, s => s.purge_before(before_ms))
    }

    async fn note_signatures(
        &self,
        seen: &[SeenSignature],
        now_ms: i64,
    ) -> Result<HashMap<String, i64>> {
        delegate!(self, s => s.note_signatures(seen, now_ms))
    }

    async fn claim_replay(&self, claim: &ReplayClaim, retake_in_doubt: bool) -> Result<Claim> {
        delegate!(self, s => s.claim_replay(claim, retake_in_doubt))
    }

    async fn settle_replay(&self, claim: &ReplayClaim, sent: bool) -> Result<bool> {
        delegate!(self, s => s.settle_replay(claim, sent))
    }
}

#[cfg(test)]
mod tests {
    use super::sqlite_file;
    use std::path::PathBuf;

    #[test]
    fn the_file_of_a_sqlite_state_url() {
        for (url, file) in [
            ("queue-migrate.db", Some("queue-migrate.db")),
            ("./state/qm.db", Some("./state/qm.db")),
            ("sqlite:///var/lib/qm.db", Some("/var/lib/qm.db")),
            ("sqlite://qm.db?mode=rwc", Some("qm.db")),
            ("sqlite:qm.db", Some("qm.db")),
            ("sqlite::memory:", None),
            ("postgres://u@h/db", None),
            ("redis://h", None),
        ] {
            assert_eq!(sqlite_file(url), file.map(PathBuf::from), "{url}");
        }
    }
}
