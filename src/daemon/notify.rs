//! Webhook notifications: JSON events with a Slack-compatible `text`, delivered in the background.
//!
//! # Guarantees
//! - The daemon's loop never waits for a webhook: events go through a bounded queue; when the
//!   queue is full the event is dropped and counted (a stuck receiver cannot stall a migration).
//! - A failed delivery is tried 5 times, waiting 1 s, 2 s, 4 s and 8 s between attempts, then given
//!   up, logged and counted (`queue_migrate_webhook_failures_total`). The log line shows the
//!   webhook's URL with its path masked ([`crate::outgoing::webhook_url`]: a chat webhook's
//!   path is its secret) and the client's error through the one text rule (the URL's
//!   credentials, path and the token masked in every form).
//! - Every text goes through [`crate::outgoing`]: the event's `text` is one line, no control
//!   character, at most [`crate::outgoing::LINE_MAX`] bytes, and posted with `&`, `<`, `>`
//!   escaped for Slack-style receivers ([`crate::outgoing::chat`]: `<!channel>` pings nobody).

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
                                webhook = %shown_url(&hook),
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
    /// logged on one line ([`crate::outgoing::line`]) and posted so, chat markup escaped
    /// ([`crate::outgoing::chat`]); `details` keep the free text as given (JSON escapes it).
    pub fn send(&self, hooks: &[Webhook], mut event: Event) {
        let line = crate::outgoing::line(&event.text);
        tracing::info!(migration = %event.migration, "{line}");
        event.text = crate::outgoing::chat(&line).into_owned();
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

/// A webhook's URL as the log shows it: its reference when it has one, else its value, with
/// credentials and path masked.
fn shown_url(hook: &Webhook) -> String {
    match hook.url.reference_shown() {
        Some(reference) => crate::outgoing::webhook_url(&reference),
        None => hook
            .url
            .value()
            .map_or_else(|_| hook.url.redacted(), crate::outgoing::webhook_url),
    }
}

async fn deliver(client: &reqwest::Client, hook: &Webhook, event: &Event) -> Result<(), String> {
    let url = hook.url.value().map_err(|why| format!("its URL: {why}"))?;
    let token = match &hook.token {
        Some(token) => Some(token.value().map_err(|why| format!("its token: {why}"))?),
        None => None,
    };
    let mut known = crate::outgoing::Secrets::none();
    known.add_webhook(url);
    if let Some(token) = token {
        known.add(token);
    }
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
            // reqwest quotes the whole URL, credentials and path included: redacted.
            Err(e) => last = crate::outgoing::reason(&crate::redact::error(&e), &known),
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(delay).await;
            delay *= 2;
        }
    }
    Err(last)
}
