//! The latest routing document of every migration, for long-polling readers.
//!
//! One `watch` channel per migration: readers never block the daemon, a change wakes every
//! waiting reader at once, and a reader that arrives late sees the latest document immediately.
//!
//! A change is encoded once, when it is published: the JSON body and the `ETag` are shared by
//! every reader it wakes (a thousand parked long-polls answer with the same bytes instead of
//! serializing the document a thousand times while the fan-out is on the critical path).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use axum::body::Bytes;
use axum::http::HeaderValue;
use tokio::sync::watch;

use crate::routing::RoutingDocument;

/// One generation of a migration's routing, ready to answer with.
#[derive(Debug)]
pub struct Published {
    /// The document.
    pub doc: RoutingDocument,
    /// Its compact JSON, as `axum::Json` would write it.
    pub body: Bytes,
    /// `"<generation>"`.
    pub etag: HeaderValue,
}

impl Published {
    fn new(doc: RoutingDocument) -> Published {
        // A document of strings, integers and booleans: serializing cannot fail.
        let body = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
        Published {
            etag: etag(doc.generation),
            doc,
            body,
        }
    }

    /// The generation.
    pub fn generation(&self) -> u64 {
        self.doc.generation
    }
}

/// The `ETag` of a generation: `"7"`.
pub fn etag(generation: u64) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{generation}\"")).unwrap_or(HeaderValue::from_static("\"0\""))
}

/// Routing documents by migration name.
#[derive(Debug, Default)]
pub struct Hub {
    channels: RwLock<HashMap<String, watch::Sender<Arc<Published>>>>,
}

impl Hub {
    /// Publish `doc` if it is newer than what readers have (generations only move forward).
    pub fn update(&self, doc: RoutingDocument) {
        let Ok(mut map) = self.channels.write() else {
            return;
        };
        match map.get(&doc.migration) {
            Some(tx) => {
                if doc.generation > tx.borrow().generation() {
                    // Encoded before the swap, so that no reader waits on it.
                    let published = Arc::new(Published::new(doc));
                    tx.send_if_modified(|current| {
                        // Checked again under the channel's lock: only forward.
                        let newer = published.generation() > current.generation();
                        if newer {
                            *current = published;
                        }
                        newer
                    });
                }
            }
            None => {
                let name = doc.migration.clone();
                map.insert(name, watch::channel(Arc::new(Published::new(doc))).0);
            }
        }
    }

    /// A receiver for one migration's routing, if it is known.
    pub fn subscribe(&self, name: &str) -> Option<watch::Receiver<Arc<Published>>> {
        self.channels
            .read()
            .ok()?
            .get(name)
            .map(|tx| tx.subscribe())
    }

    /// The generation readers currently see.
    pub fn generation(&self, name: &str) -> Option<u64> {
        self.channels
            .read()
            .ok()?
            .get(name)
            .map(|tx| tx.borrow().generation())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{BrokerNames, Side};

    fn doc(generation: u64) -> RoutingDocument {
        RoutingDocument {
            migration: "m".into(),
            generation,
            state: "slices".into(),
            step: Some(1),
            paused: false,
            slices_total: 128,
            slices_migrated: 32,
            consume: vec![Side::Old, Side::New],
            brokers: BrokerNames {
                old: "rabbitmq".into(),
                new: "nats".into(),
            },
            updated_at: "2026-03-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn publishes_forward_only_with_the_body_encoded_once() {
        let hub = Hub::default();
        assert_eq!(hub.generation("m"), None);
        hub.update(doc(3));
        let mut rx = hub.subscribe("m").expect("known");
        assert_eq!(rx.borrow_and_update().generation(), 3);
        hub.update(doc(2));
        assert!(!rx.has_changed().expect("open"));
        hub.update(doc(4));
        assert!(rx.has_changed().expect("open"));
        let p = rx.borrow_and_update().clone();
        assert_eq!(p.generation(), 4);
        assert_eq!(p.etag, "\"4\"");
        let expected = serde_json::to_vec(&doc(4)).expect("json");
        assert_eq!(p.body.as_ref(), expected.as_slice());
        assert_eq!(hub.generation("m"), Some(4));
    }
}
