//! The latest routing document of every migration, for long-polling readers.
//!
//! One `watch` channel per migration: readers never block the daemon, a change wakes every
//! waiting reader at once, and a reader that arrives late sees the latest document immediately.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;

use crate::routing::RoutingDocument;

/// Routing documents by migration name.
#[derive(Debug, Default)]
pub struct Hub {
    channels: RwLock<HashMap<String, watch::Sender<Arc<RoutingDocument>>>>,
}

impl Hub {
    /// Publish `doc` if it is newer than what readers have (generations only move forward).
    pub fn update(&self, doc: RoutingDocument) {
        let Ok(mut map) = self.channels.write() else {
            return;
        };
        match map.get(&doc.migration) {
            Some(tx) => {
                tx.send_if_modified(|current| {
                    let newer = doc.generation > current.generation;
                    if newer {
                        *current = Arc::new(doc.clone());
                    }
                    newer
                });
            }
            None => {
                map.insert(doc.migration.clone(), watch::channel(Arc::new(doc)).0);
            }
        }
    }

    /// A receiver for one migration's routing, if it is known.
    pub fn subscribe(&self, name: &str) -> Option<watch::Receiver<Arc<RoutingDocument>>> {
        self.channels
            .read()
            .ok()?
            .get(name)
            .map(|tx| tx.subscribe())
    }

    /// The generation readers currently see.
    pub fn generation(&self, name: &str) -> Option<u64> {
        self.subscribe(name).map(|rx| rx.borrow().generation)
    }
}
