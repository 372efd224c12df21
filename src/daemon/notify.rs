//! Webhook notifications: JSON events with a Slack-compatible `text`, delivered in the background.
//!
//! # Guarantees
//! - The daemon's loop never waits for a webhook: events go through a bounded queue; when the
//!   queue is full the event is dropped and counted (a stuck receiver cannot stall a migration).
//! - A failed delivery is tried 5 times, waiting 1 s, 2 s, 4 s and 8 s between attempts, then given
//!   up, logged and counted (`queue_migrate_webhook_failures_total`). The log line shows the
//!   webhook's URL and the client's error redacted ([`crate::redact`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;

use crate::plan::Webhook;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Transition,
    Breach,
    Hold,
    ReadyToAdvance,
    /// Where the migration stands changed ([`crate::standing`]).
    Standing,
}

/// One event, as POSTed.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub event: EventKind,
    pub migration: String,
    pub state: String,
    pub step: Option<usize>,
    /// One line a person reads in a chat.
    pub text: String,
    pub at: String,
    pub details: serde_json::Value,
}

/// Where an event goes.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub hooks: Vec<Webhook>,
    pub event: Event,
}

/// The sending side, cheap to clone.
#[derive(Debug, Clone)]
pub struct Notifier {
    tx: mpsc::Sender<Delivery>,
    pub dropped: Arc<AtomicU64>,
    pub failed: Arc<AtomicU64>,
}

const ATTEMPTS: u32 = 5;

impl Notifier {
    /// Start the delivery worker on the current runtime.
    pub fn start(client: reqwest::Client) -> Notifier {
        let (tx, mut rx) = mpsc::channel::<Delivery>(1024);
        let failed = Arc::new(AtomicU64::new(0));
        let failed_worker = failed.clone();
        tokio::spawn(async move {
            while let Some(d) = rx.recv().await {
                for hook in d.hooks {
                    let client = client.clone();
                    let event = d.event.clone();
                    let failed = failed_worker.clone();
                    tokio::spawn(async move {
                        if let Err(e) = deliver(&client, &hook, &event).await {
                            failed.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(
                                webhook = %hook.url.redacted(),
                                "giving up on a {:?} event after {ATTEMPTS} attempts: {e}",
                                event.event
                            );
                        }
                    });
                }
            }
        });
        Notifier {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
            failed,
        }
    }

    /// Queue an event for `hooks` (nothing when there are none). Never waits. Its `text` is
    /// logged and sent on one line ([`crate::oneline::escape`]); `details` keep the free text as
    /// given (JSON escapes it).
    pub fn send(&self, hooks: &[Webhook], mut event: Event) {
        if let std::borrow::Cow::Owned(one) = crate::oneline::escape(&event.text) {
            event.text = one;
        }
        tracing::info!(migration = %event.migration, "{}", event.text);
        if hooks.is_empty() {
            return;
        }
        let d = Delivery {
            hooks: hooks.to_vec(),
            event,
        };
        if self.tx.try_send(d).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn deliver(client: &reqwest::Client, hook: &Webhook, event: &Event) -> Result<(), String> {
    let url = hook.url.value().map_err(|why| format!("its URL: {why}"))?;
    let token = match &hook.token {
        Some(token) => Some(token.value().map_err(|why| format!("its token: {why}"))?),
        None => None,
    };
    let mut delay = Duration::from_secs(1);
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        let mut req = client.post(url).json(event);
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        match req.send().await {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) => last = format!("HTTP {}", r.status()),
            // reqwest quotes the whole URL, credentials included: redacted.
            Err(e) => {
                last = crate::redact::known(
                    &crate::redact::error(&e),
                    crate::redact::secret_parts(url),
                )
            }
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(delay).await;
            delay *= 2;
        }
    }
    Err(last)
}
