//! The store of the state URL: [`open`] reads the URL: `postgres://` or `postgresql://` is
//! PostgreSQL, `sqlite:` (`sqlite://PATH`, `sqlite::memory:`) or a plain path is SQLite; any
//! other `scheme://` is [`StoreError::UnsupportedUrl`]. Either is the one [`SqlStore`].

use super::sql::{Schema, SqlStore};
use super::{Result, StoreError};
use super::{postgres, sqlite};

/// A store of any supported backend: the [`SqlStore`].
pub type AnyStore = SqlStore;

/// Open the store at `url` and bring its schema up to date (see the module doc for the URLs).
///
/// # Errors
/// [`StoreError::UnsupportedUrl`] for an unknown scheme, [`StoreError::MalformedUrl`] for a URL
/// of a known one its driver cannot read; otherwise what the backend's `open` returns.
pub async fn open(url: &str) -> Result<AnyStore> {
    open_upto(url, i64::MAX).await
}

/// [`open`] with the schema up to `version` of the URL's database only (tests of upgrades).
async fn open_upto(url: &str, version: i64) -> Result<SqlStore> {
    /// The migrations of `schema` up to `version`.
    fn upto(schema: &Schema, version: i64) -> &Schema {
        &schema[..schema.iter().take_while(|(v, _, _)| *v <= version).count()]
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        postgres::open_applying(url, upto(postgres::SCHEMA, version)).await
    } else if url.starts_with("sqlite:") || !url.contains("://") {
        sqlite::open_applying(url, upto(sqlite::SCHEMA, version)).await
    } else {
        // Shown to the user: its credentials masked.
        Err(StoreError::UnsupportedUrl(crate::redact::url(url)))
    }
}

impl SqlStore {
    /// [`open`]: the store at `url`, its schema brought up to date.
    ///
    /// # Errors
    /// As [`open`].
    pub async fn open(url: &str) -> Result<SqlStore> {
        open(url).await
    }

    /// [`open`] with the schema up to `version` of the URL's database only (tests of upgrades).
    #[cfg(test)]
    pub(crate) async fn open_at_version(url: &str, version: i64) -> Result<SqlStore> {
        open_upto(url, version).await
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
