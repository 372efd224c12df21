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
    /// The lease epoch the sending daemon decided it under (`null`: none): its round's, even if
    /// the lease was lost between the commit and the announcement; of two senders of one event,
    /// the higher epoch is the later leader.
    pub epoch: Option<i64>,
    /// The same for every delivery of one event, whoever sends it (a transition's:
    /// `MIGRATION:SEQ`, its journal entry), so that a receiver drops duplicates; also sent as
    /// the `Idempotency-Key` header.
    pub idempotency_key: String,
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
    pub fn send(&self, hooks: &[Webhook], event: Event) {
        let event = said(event);
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

impl Notifier {
    /// Post `event` to every one of `hooks` now (each tried as [`Notifier::send`] tries it) and
    /// answer whether every one took it: what the outbox's delivery waits for before it marks a
    /// transition delivered. Its text is logged and escaped as [`Notifier::send`] does.
    pub async fn post(&self, client: &reqwest::Client, hooks: &[Webhook], event: Event) -> bool {
        let event = said(event);
        let mut all = true;
        for hook in hooks {
            if let Err(e) = deliver(client, hook, &event).await {
                self.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    webhook = %shown_url(hook),
                    "a {:?} event not delivered after {ATTEMPTS} attempts (tried again later): {e}",
                    event.event
                );
                all = false;
            }
        }
        all
    }
}

/// `event` logged on one line and its text made the chat's ([`crate::outgoing::chat`]).
fn said(mut event: Event) -> Event {
    let line = crate::outgoing::line(&event.text);
    tracing::info!(migration = %event.migration, "{line}");
    event.text = crate::outgoing::chat(&line).into_owned();
    event
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
        let mut req = client
            .post(url)
            .header("Idempotency-Key", &event.idempotency_key)
            .json(event);
        if let Some(epoch) = event.epoch {
            req = req.header("Queue-Migrate-Epoch", epoch);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Secret;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// One request's body, read by a receiver on loopback that answers 200.
    async fn receive_one(listener: tokio::net::TcpListener) -> String {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = s.read(&mut chunk).await.unwrap();
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                if body.len() >= length || n == 0 {
                    let _ = s
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        )
                        .await;
                    return body.to_string();
                }
            }
        }
    }

    /// Regression (issue 43, item 6): a reason's chat markup was posted verbatim, so
    /// `<!channel>` pinged the channel and `<https://evil.example|approve>` showed a disguised
    /// link; and its control characters went into the chat text.
    #[tokio::test]
    async fn chat_markup_and_control_characters_in_the_text_are_escaped() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let received = tokio::spawn(receive_one(listener));
        let _ = rustls::crypto::ring::default_provider().install_default();
        let notifier = Notifier::start(reqwest::Client::new());
        let hook = Webhook {
            url: Secret::literal(url),
            token: None,
        };
        notifier.send(
            &[hook],
            Event {
                event: EventKind::Transition,
                migration: "orders".into(),
                state: "paused".into(),
                step: None,
                text: "orders paused: <!channel> <https://evil.example|approve> & \u{1b}]0;x\u{7}"
                    .into(),
                at: "2026-12-01T00:00:00Z".into(),
                details: serde_json::Value::Null,
                epoch: None,
                idempotency_key: "orders:1".into(),
            },
        );
        let body = tokio::time::timeout(Duration::from_secs(20), received)
            .await
            .unwrap()
            .unwrap();
        let posted: serde_json::Value = serde_json::from_str(&body).unwrap();
        let text = posted["text"].as_str().unwrap();
        assert_eq!(
            text,
            "orders paused: &lt;!channel&gt; &lt;https://evil.example|approve&gt; &amp; \\u{1b}]0;x\\u{7}"
        );
    }

    #[test]
    fn a_webhook_is_shown_with_its_path_masked() {
        let slack = Webhook {
            url: Secret::literal("https://hooks.slack.com/services/T000/B000/XXXXSECRET"),
            token: None,
        };
        assert_eq!(shown_url(&slack), "https://hooks.slack.com/***");
        let referenced = Webhook {
            url: Secret::new("${HOOK_URL}", "https://hooks.slack.com/services/T/B/X"),
            token: None,
        };
        assert_eq!(shown_url(&referenced), "${HOOK_URL}");
    }
}
