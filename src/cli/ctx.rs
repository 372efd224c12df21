//! What every subcommand gets: the global options, the plan's resolver, and on demand the
//! store, the fetcher and a controller.

use crate::controller::{Actor, Controller};
use crate::indicators::fetch::Fetcher;
use crate::plan::{SecretsMode, SystemResolve};
use crate::store::StoreError;
use crate::store::any::AnyStore;
use crate::store::traits::*;

use super::error::CliError;
use super::options::Global;
use super::output::redact_url;

/// What every subcommand gets: the parsed global options and, on demand, the store.
pub struct Ctx {
    pub global: Global,
    pub resolve: SystemResolve,
    /// The host's wall clock (ms since the epoch): [`crate::time::now_ms`], or a test's skewed one.
    pub host_clock: fn() -> i64,
}

impl Ctx {
    /// "Now": the host's clock, unless `--now` says otherwise.
    pub fn now_ms(&self) -> Result<i64, CliError> {
        match &self.global.now {
            None => Ok((self.host_clock)()),
            Some(t) => crate::time::parse_rfc3339(t).map_err(|e| {
                CliError::input(format!("--now: {e} (want e.g. 2026-11-30T12:00:00Z)"))
            }),
        }
    }

    /// "Now" for a command that reads or moves what `store` keeps: `--now` if given, otherwise
    /// the database's clock, read once (the clock that stamped the step's start, so a host whose
    /// clock runs ahead does not pass `observe` or `min_duration` early).
    pub async fn now_ms_in(&self, store: &AnyStore) -> Result<i64, CliError> {
        if self.global.now.is_some() {
            return self.now_ms();
        }
        Ok(store.clock_ms((self.host_clock)()).await?)
    }

    pub fn actor(&self, reason: Option<String>) -> Actor {
        let name = self
            .global
            .actor
            .clone()
            .or_else(|| std::env::var("USER").ok())
            .unwrap_or_else(|| "cli".into());
        Actor { name, reason }
    }

    pub async fn store(&self) -> Result<AnyStore, CliError> {
        let url = &self.global.state;
        // `--now` tells the story's time: the journal keeps it (otherwise the database's clock).
        let simulated = self.global.now.is_some();
        crate::store::any::open(url)
            .await
            .map(|s| if simulated { s.with_writer_clock() } else { s })
            .map_err(|e| match e {
                StoreError::UnsupportedUrl(_) | StoreError::MalformedUrl { .. } => {
                    CliError::input(e.to_string())
                }
                e => CliError::new(
                    1,
                    format!(
                        "cannot open the state store {}: {}",
                        redact_url(url),
                        crate::redact::text(&e.to_string())
                    ),
                ),
            })
    }

    /// The state store, which must exist: commands that read or move a migration do not create
    /// an empty SQLite file where a mistyped `--state` points (it would read as "no migrations").
    pub async fn existing_store(&self) -> Result<AnyStore, CliError> {
        let url = &self.global.state;
        if let Some(file) = crate::store::any::sqlite_file(url)
            && !file.exists()
        {
            return Err(CliError::input(format!(
                "no state store at {}: `migrate init PLAN` creates it; otherwise point --state (or MIGRATE_STATE) at the store your migrations are in",
                file.display()
            )));
        }
        self.store().await
    }

    pub fn fetcher(&self) -> Result<Fetcher, CliError> {
        Fetcher::new(self.global.source_timeout)
            .map(|f| f.with_max_series(self.global.max_series as usize))
            .map_err(|e| CliError::new(1, e.to_string()))
    }

    pub fn controller<'a>(
        &'a self,
        store: &'a AnyStore,
        fetcher: &'a Fetcher,
    ) -> Controller<'a, AnyStore> {
        // The commands read and write the store; what needs a broker or a source URL fails
        // there, naming the variable (`migrate run` builds its own, strict).
        Controller::new(store, fetcher, &self.resolve).with_secrets(SecretsMode::Deferred)
    }
}
