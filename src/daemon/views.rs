//! What the daemon's readers see ([`Views`]): the routing long-polls parked, who polls the
//! routing, why a migration could not be loaded, where the watcher stands, and whether the
//! daemon is stopping. The HTTP API's and the watcher's part of [`super::Shared`].

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

/// The readers' state (see the module doc).
pub struct Views {
    /// Routing long-polls parked now, at most [`super::http::Limits::max_long_polls`].
    pub long_polls: Arc<tokio::sync::Semaphore>,
    /// Flips to true when the daemon stops: long-polls answer at once.
    pub stopping: watch::Sender<bool>,
    /// Who polls the routing document, with the generation each applied (in memory: a new
    /// leader relearns them within one long-poll).
    pub followers: Arc<crate::indicators::followers::Followers>,
    /// Why a migration could not be loaded (its plan does not compile here), by name; cleared
    /// when it loads again.
    load_errors: Mutex<HashMap<String, String>>,
    /// The store's [`crate::store::JournalStore::generations_mark`] when the watcher last
    /// compared every migration.
    pub(super) watch_mark: Mutex<Option<(i64, i64)>>,
    /// The watcher's polls so far.
    pub(super) watch_polls: AtomicU64,
}

impl Views {
    /// Nothing seen yet: at most `max_long_polls` long-polls parked at once; `followers` kept.
    pub(super) fn new(
        max_long_polls: usize,
        followers: Arc<crate::indicators::followers::Followers>,
    ) -> Views {
        Views {
            long_polls: Arc::new(tokio::sync::Semaphore::new(max_long_polls)),
            stopping: watch::Sender::new(false),
            followers,
            load_errors: Mutex::new(HashMap::new()),
            watch_mark: Mutex::new(None),
            watch_polls: AtomicU64::new(0),
        }
    }

    /// Note why `name` cannot be loaded (`None`: it loads); whether that is news.
    pub(super) fn set_load_error(&self, name: &str, why: Option<String>) -> bool {
        let mut errors = self
            .load_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match why {
            Some(why) => errors.insert(name.to_string(), why.clone()).as_ref() != Some(&why),
            None => errors.remove(name).is_some(),
        }
    }

    /// Why `name` could not be loaded when last tried, if it could not.
    pub fn load_error(&self, name: &str) -> Option<String> {
        self.load_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }
}
