//! RabbitMQ over AMQP 0.9.1 (lapin): publisher confirms on one shared channel, one connection
//! and channel per subscription (acks per message, or coalesced: [`super::AckMode`]), the
//! management API for the depth.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{FieldTable, LongString, ShortString};
use lapin::{Channel, Confirmation, Connection, ConnectionProperties};
use tokio::sync::{Mutex, Notify};

use super::ack_window::{AckWindow, WireAck};
use super::amqp_message;
use super::types::Received;
use super::{
    AckMode, BrokerError, CONFIRM_TIMEOUT, CONNECT_TIMEOUT, Depth, Message, Result,
    SubscribeOptions,
};

const KIND: &str = "rabbitmq";
/// How long a call to the management API may take.
const MANAGEMENT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long declaring, opening a channel or setting up a consumer may take.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(15);
/// Coalesced acks: how long settled deliveries gather before one flush (so one `basic.ack`
/// covers a batch, not one message).
const FLUSH_DELAY: Duration = Duration::from_millis(5);
/// Coalesced acks: the longest a settled delivery waits behind an older unsettled one before it
/// is acked on its own.
const MAX_HOLD: Duration = Duration::from_secs(1);
/// Coalesced acks: how many settled deliveries, in multiples of the caller's `prefetch`, may
/// wait behind an older unsettled one before they are acked one by one (see
/// [`coalesced_limits`]). The bridge leaves such a gap for each message of a busy key, for a few
/// confirm round trips.
const HELD_PER_PREFETCH: u16 = 4;

/// The channel's `basic.qos` and the most settled deliveries held behind a gap, for a caller that
/// keeps at most `prefetch` unsettled: `(HELD_PER_PREFETCH + 1) × prefetch` (at most 65,535) and
/// what that leaves beside the caller's window (at least 1), so that held acks never shrink it.
fn coalesced_limits(prefetch: u16) -> (u16, usize) {
    let qos = prefetch.saturating_mul(HELD_PER_PREFETCH + 1);
    (qos, usize::from(qos.saturating_sub(prefetch)).max(1))
}

/// A RabbitMQ adapter: one AMQP connection with a confirming channel shared by every publish,
/// one more connection per subscription, and the management API (for
/// [`super::Adapter::depth`]).
pub struct RabbitMq {
    /// The AMQP URL given to lapin (without a `management` parameter).
    amqp_url: String,
    /// `amqp_url` without its password.
    shown: String,
    /// The user the AMQP connection logs in as: the only `user_id` RabbitMQ accepts on publish.
    user: String,
    management: Management,
    link: Mutex<Option<Link>>,
}

/// The open connection and its publishing channel (confirm mode).
struct Link {
    connection: Arc<Connection>,
    channel: Channel,
}

/// Where the management API is, and how to log in.
struct Management {
    /// The API root (`…/api`), without credentials.
    base: reqwest::Url,
    user: String,
    password: Option<String>,
    /// The AMQP URL's virtual host, decoded.
    vhost: String,
    http: reqwest::Client,
}

impl fmt::Debug for RabbitMq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitMq")
            .field("url", &self.shown)
            .field("management", &self.management.base.as_str())
            .field("vhost", &self.management.vhost)
            .finish_non_exhaustive()
    }
}

fn connect_error(url: &str, reason: impl fmt::Display) -> BrokerError {
    BrokerError::connect(KIND, url, reason)
}

fn op_error(operation: &'static str, queue: &str, reason: impl fmt::Display) -> BrokerError {
    BrokerError::operation(KIND, operation, queue, reason)
}

fn not_confirmed(queue: &str, reason: impl fmt::Display) -> BrokerError {
    BrokerError::not_confirmed(KIND, queue, reason)
}

fn short(value: &str, what: &str) -> std::result::Result<ShortString, String> {
    ShortString::try_new(value).map_err(|e| format!("{what} {value:?}: {e}"))
}

impl RabbitMq {
    /// Connects to `url` (`amqp://user:pass@host:5672/%2f`). The management API URL is taken from
    /// the query parameter `management` (percent-encoded, e.g.
    /// `?management=http%3A%2F%2Fguest%3Aguest%40rabbit%3A15672%2Fapi`) or derived:
    /// `http://user:pass@host:15672/api` (`https://…:15671/api` for `amqps`).
    ///
    /// # Errors
    /// [`BrokerError::Connect`] when the URL is malformed or the broker cannot be reached.
    pub async fn connect(url: &str) -> Result<RabbitMq> {
        let (amqp_url, management) = split_management(url)?;
        let management = match management {
            Some(m) => m,
            None => derive_management(&amqp_url)?,
        };
        RabbitMq::connect_with_management(&amqp_url, &management).await
    }

    /// Connects to `amqp_url`, with the management API at `management_url`
    /// (`http://user:pass@host:15672/api`).
    ///
    /// # Errors
    /// [`BrokerError::Connect`] when a URL is malformed or the broker cannot be reached.
    pub async fn connect_with_management(amqp_url: &str, management_url: &str) -> Result<RabbitMq> {
        let shown = super::redact(amqp_url);
        let vhost = vhost_of(amqp_url).map_err(|e| connect_error(&shown, e))?;
        let amqp_user = user_of(amqp_url).map_err(|e| connect_error(&shown, e))?;
        let mut base = reqwest::Url::parse(management_url).map_err(|e| {
            connect_error(
                &super::redact(management_url),
                format!("management API URL: {e}"),
            )
        })?;
        let user = match base.username() {
            "" => "guest".to_string(),
            u => decode(u),
        };
        let password = base.password().map(decode);
        let _ = base.set_username("");
        let _ = base.set_password(None);
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(MANAGEMENT_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| connect_error(base.as_str(), format!("HTTP client: {e}")))?;
        let broker = RabbitMq {
            amqp_url: amqp_url.to_string(),
            shown,
            user: amqp_user,
            management: Management {
                base,
                user,
                password,
                vhost,
                http,
            },
            link: Mutex::new(None),
        };
        broker.link().await?;
        Ok(broker)
    }

    /// The shared connection and publishing channel, re-opened when the last one broke.
    async fn link(&self) -> Result<(Arc<Connection>, Channel)> {
        let mut link = self.link.lock().await;
        if let Some(l) = link.as_ref()
            && l.connection.status().connected()
            && l.channel.status().connected()
        {
            return Ok((l.connection.clone(), l.channel.clone()));
        }
        *link = None;
        let opened = self.connecting(self.open()).await?;
        let pair = (opened.connection.clone(), opened.channel.clone());
        *link = Some(opened);
        Ok(pair)
    }

    /// `step` within [`CONNECT_TIMEOUT`] (no answer: a connect error).
    async fn connecting<T>(&self, step: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        tokio::time::timeout(CONNECT_TIMEOUT, step)
            .await
            .map_err(|_| {
                connect_error(&self.shown, format!("no answer within {CONNECT_TIMEOUT:?}"))
            })?
    }

    /// A new AMQP connection, named `name` in the broker's connection list.
    async fn connection(&self, name: &str) -> Result<Connection> {
        let properties =
            ConnectionProperties::default().with_connection_name(LongString::from(name));
        // The URL itself, not `shown`: its credentials are then masked wherever lapin's error
        // quotes them (`connect_error` shows the URL redacted).
        Connection::connect(&self.amqp_url, properties)
            .await
            .map_err(|e| connect_error(&self.amqp_url, crate::redact::error(&e)))
    }

    async fn open(&self) -> Result<Link> {
        let connection = self.connection("queue-migrate").await?;
        let channel = connection
            .create_channel()
            .await
            .map_err(|e| connect_error(&self.shown, e))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| connect_error(&self.shown, format!("confirm.select: {e}")))?;
        Ok(Link {
            connection: Arc::new(connection),
            channel,
        })
    }

    /// A fresh channel on the shared connection (declares run there: a refused declare closes
    /// its channel, which must not be the publishing one).
    async fn side_channel(
        &self,
        operation: &'static str,
        queue: &str,
    ) -> Result<(Arc<Connection>, Channel)> {
        let (connection, _) = self.link().await?;
        let channel = bounded(operation, queue, connection.create_channel()).await?;
        Ok((connection, channel))
    }

    /// A channel on a connection of its own, for a consumer: RabbitMQ's flow control stops
    /// reading a publishing connection while its queues catch up, and the acks of a consumer
    /// sharing that connection would wait with the publishes.
    async fn consumer_channel(&self, queue: &str) -> Result<(Connection, Channel)> {
        let name = format!("queue-migrate consumer of {queue}");
        let connection = self.connecting(self.connection(&name)).await?;
        let channel = bounded("subscribe", queue, connection.create_channel()).await?;
        Ok((connection, channel))
    }

    pub(super) async fn declare(&self, queue: &str) -> Result<()> {
        let name = short(queue, "queue name").map_err(|e| op_error("declare", queue, e))?;
        let (_connection, channel) = self.side_channel("declare", queue).await?;
        let options = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        bounded(
            "declare",
            queue,
            channel.queue_declare(name, options, FieldTable::default()),
        )
        .await?;
        let _ = channel.close(200, ShortString::from("OK")).await;
        Ok(())
    }

    pub(super) async fn publish(&self, queue: &str, message: &Message) -> Result<()> {
        let routing_key = short(queue, "queue name").map_err(|e| not_confirmed(queue, e))?;
        // What AMQP cannot carry (a name or property over 255 bytes) is in the message: refused,
        // every time.
        let properties = amqp_message::write(message, &self.user)
            .map_err(|e| BrokerError::refused(KIND, queue, e))?;
        let (_, channel) = self.link().await.map_err(|e| not_confirmed(queue, e))?;
        let options = BasicPublishOptions {
            mandatory: true,
            ..BasicPublishOptions::default()
        };
        let confirm = async {
            channel
                .basic_publish(
                    ShortString::from(""),
                    routing_key,
                    options,
                    &message.payload,
                    properties,
                )
                .await?
                .await
        };
        let confirmation = tokio::time::timeout(CONFIRM_TIMEOUT, confirm)
            .await
            .map_err(|_| not_confirmed(queue, format!("no confirm within {CONFIRM_TIMEOUT:?}")))?
            .map_err(|e| not_confirmed(queue, e))?;
        match confirmation {
            Confirmation::Ack(None) => Ok(()),
            Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => {
                Err(not_confirmed(
                    queue,
                    format!(
                        "returned by the broker: {} {} (does the queue exist?)",
                        returned.reply_code, returned.reply_text
                    ),
                ))
            }
            Confirmation::Nack(None) => Err(not_confirmed(queue, "nacked by the broker")),
            Confirmation::NotRequested => {
                Err(not_confirmed(queue, "the channel is not in confirm mode"))
            }
        }
    }

    pub(super) async fn subscribe(
        &self,
        queue: &str,
        options: &SubscribeOptions,
        acks: AckMode,
    ) -> Result<Subscription> {
        let name = short(queue, "queue name").map_err(|e| op_error("subscribe", queue, e))?;
        let tag = ShortString::try_new(format!("{}.{}", options.group, options.consumer))
            .unwrap_or_default();
        let (connection, channel) = self.consumer_channel(queue).await?;
        let (coalesced_qos, held) = coalesced_limits(options.prefetch);
        let qos = match acks {
            AckMode::PerMessage => options.prefetch,
            AckMode::Coalesced => coalesced_qos,
        };
        bounded(
            "subscribe",
            queue,
            channel.basic_qos(qos, BasicQosOptions::default()),
        )
        .await?;
        let consume = BasicConsumeOptions {
            no_ack: false,
            ..BasicConsumeOptions::default()
        };
        let consumer = bounded(
            "subscribe",
            queue,
            channel.basic_consume(name, tag, consume, FieldTable::default()),
        )
        .await?;
        let coalescer = match acks {
            AckMode::PerMessage => None,
            AckMode::Coalesced => {
                let shared = Arc::new(Coalescer {
                    queue: queue.to_string(),
                    window: StdMutex::new(AckWindow::new(held, MAX_HOLD)),
                    wire: Mutex::new(()),
                    wake: Notify::new(),
                    closed: AtomicBool::new(false),
                    frames: [AtomicU64::new(0), AtomicU64::new(0)],
                });
                let flusher = tokio::spawn(flusher(shared.clone()));
                Some((shared, flusher))
            }
        };
        Ok(Subscription {
            queue: queue.to_string(),
            consumer,
            _channel: channel,
            connection,
            failed: None,
            coalescer,
        })
    }

    pub(super) async fn depth(&self, queue: &str, _group: &str) -> Result<Depth> {
        let m = &self.management;
        let mut url = m.base.clone();
        url.path_segments_mut()
            .map_err(|()| {
                op_error(
                    "depth",
                    queue,
                    format!("management API URL {} cannot have a path", m.base),
                )
            })?
            .pop_if_empty()
            .extend(["queues", m.vhost.as_str(), queue]);
        let needed = |reason: String| {
            op_error(
                "depth",
                queue,
                format!(
                    "{reason}; the RabbitMQ management API is needed to count unacked messages (tried {url})"
                ),
            )
        };
        let response = m
            .http
            .get(url.clone())
            .basic_auth(&m.user, m.password.as_deref())
            .send()
            .await
            .map_err(|e| needed(e.to_string()))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(op_error(
                "depth",
                queue,
                format!("no such queue in vhost {:?}", m.vhost),
            ));
        }
        if !status.is_success() {
            return Err(needed(format!("HTTP {status}")));
        }
        let body = response.bytes().await.map_err(|e| needed(e.to_string()))?;
        let json: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| needed(format!("not JSON: {e}")))?;
        let field = |name: &str| {
            json.get(name).and_then(serde_json::Value::as_u64).ok_or_else(|| {
                op_error(
                    "depth",
                    queue,
                    format!("the management API has no {name} for the queue yet (statistics are emitted every few seconds); retry"),
                )
            })
        };
        Ok(Depth {
            ready: field("messages_ready")?,
            unacked: field("messages_unacknowledged")?,
        })
    }

    pub(super) async fn browse(&self, _queue: &str, _limit: usize) -> Result<Vec<Message>> {
        Err(BrokerError::Unsupported {
            kind: KIND,
            what: "cannot browse a queue: AMQP can only take a message and put it back, which \
                   reorders the queue and marks the message redelivered. Export the queue (e.g. the \
                   dead-letter queue) to a file with a shovel or the management UI, then run \
                   `migrate dlq triage FILE`"
                .to_string(),
        })
    }
}

/// Awaits a lapin operation for at most [`OPERATION_TIMEOUT`].
async fn bounded<T>(
    operation: &'static str,
    queue: &str,
    future: impl Future<Output = lapin::Result<T>>,
) -> Result<T> {
    tokio::time::timeout(OPERATION_TIMEOUT, future)
        .await
        .map_err(|_| {
            op_error(
                operation,
                queue,
                format!("no answer within {OPERATION_TIMEOUT:?}"),
            )
        })?
        .map_err(|e| op_error(operation, queue, e))
}

/// Splits a `management=` query parameter off an AMQP URL.
pub(super) fn split_management(url: &str) -> Result<(String, Option<String>)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), None));
    };
    let mut management = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("management", value)) => management = Some(decode(value)),
            _ => kept.push(pair),
        }
    }
    let amqp_url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((amqp_url, management))
}

/// `http://user:pass@host:15672/api` from `amqp://user:pass@host:5672/vhost`.
pub(super) fn derive_management(amqp_url: &str) -> Result<String> {
    let shown = super::redact(amqp_url);
    let parsed = reqwest::Url::parse(amqp_url).map_err(|e| connect_error(&shown, e))?;
    let (scheme, port) = match parsed.scheme() {
        "amqp" => ("http", 15672),
        "amqps" => ("https", 15671),
        other => {
            return Err(connect_error(
                &shown,
                format!("scheme {other:?}: expected amqp or amqps"),
            ));
        }
    };
    let host = parsed.host_str().unwrap_or("localhost");
    let userinfo = match (parsed.username(), parsed.password()) {
        ("", _) => String::new(),
        (user, Some(password)) => format!("{user}:{password}@"),
        (user, None) => format!("{user}@"),
    };
    Ok(format!("{scheme}://{userinfo}{host}:{port}/api"))
}

/// The virtual host of an AMQP URL, as lapin reads it: the path without its leading `/`,
/// decoded; `/` when there is no path.
pub(super) fn vhost_of(amqp_url: &str) -> std::result::Result<String, String> {
    let parsed = reqwest::Url::parse(amqp_url).map_err(|e| e.to_string())?;
    Ok(match parsed.path().get(1..) {
        Some(path) => decode(path),
        None => "/".to_string(),
    })
}

/// The user of an AMQP URL, as lapin logs in: decoded, `guest` when the URL names none.
fn user_of(amqp_url: &str) -> std::result::Result<String, String> {
    let parsed = reqwest::Url::parse(amqp_url).map_err(|e| e.to_string())?;
    Ok(match parsed.username() {
        "" => "guest".to_string(),
        user => decode(user),
    })
}

/// Percent-decodes (lossy: invalid UTF-8 becomes U+FFFD).
pub(super) fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A consumer on its own channel.
pub(super) struct Subscription {
    queue: String,
    consumer: lapin::Consumer,
    _channel: Channel,
    /// The subscription's own connection, closed when it is dropped.
    connection: Connection,
    failed: Option<String>,
    /// Coalesced acks: the window shared with the ackers, and the task that flushes it.
    coalescer: Option<(Arc<Coalescer>, tokio::task::JoinHandle<()>)>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // Acks not on the wire yet are dropped with the channel: the broker delivers those
        // messages again (at least once, never lost).
        if let Some((shared, flusher)) = &self.coalescer {
            shared.closed.store(true, Ordering::Release);
            flusher.abort();
            tracing::debug!(
                queue = %self.queue,
                multiple = shared.frames[0].load(Ordering::Relaxed),
                single = shared.frames[1].load(Ordering::Relaxed),
                "coalesced ack frames sent"
            );
        }
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("rabbitmq::Subscription")
            .field("queue", &self.queue)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Subscription {
    pub(super) async fn next(&mut self) -> Result<Option<Received<Acker>>> {
        if let Some(reason) = &self.failed {
            return Err(op_error(
                "consume",
                &self.queue,
                format!("the subscription failed earlier: {reason}"),
            ));
        }
        match self.consumer.next().await {
            Some(Ok(delivery)) => {
                let acker = match &self.coalescer {
                    None => Acker::Single {
                        queue: self.queue.clone(),
                        inner: delivery.acker,
                    },
                    Some((shared, _)) => {
                        let tag = delivery.delivery_tag;
                        shared.window().delivered(tag, delivery.acker);
                        Acker::Coalesced {
                            tag,
                            shared: shared.clone(),
                        }
                    }
                };
                let (headers, properties) = amqp_message::read(&delivery.properties);
                Ok(Some(Received {
                    message: Message {
                        headers,
                        payload: delivery.data,
                        properties,
                        record: super::Record::default(),
                    },
                    redelivered: delivery.redelivered,
                    // A classic queue tells neither a position nor an enqueue time.
                    stored: super::Stored::default(),
                    acker,
                }))
            }
            Some(Err(e)) => {
                self.failed = Some(e.to_string());
                Err(op_error("consume", &self.queue, e))
            }
            None if self.connection.status().errored() => {
                let reason = "the connection was lost".to_string();
                self.failed = Some(reason.clone());
                Err(op_error("consume", &self.queue, reason))
            }
            None => Ok(None),
        }
    }

    /// Sends every settled ack now (coalesced acks; nothing to do otherwise).
    pub(super) async fn flush_acks(&self) -> Result<()> {
        match &self.coalescer {
            Some((shared, _)) => shared.flush(None).await,
            None => Ok(()),
        }
    }
}

/// The coalesced acks of one subscription: its [`AckWindow`], shared by the deliveries' ackers
/// (which settle) and the flusher task (which sends).
pub(super) struct Coalescer {
    queue: String,
    window: StdMutex<AckWindow<lapin::Acker>>,
    /// Held while acks or a nack go on the wire, so a nack always precedes a multiple ack that
    /// would otherwise cover its tag.
    wire: Mutex<()>,
    wake: Notify,
    closed: AtomicBool,
    /// `basic.ack` frames sent: multiple, single (logged at debug when the subscription goes).
    frames: [AtomicU64; 2],
}

impl Coalescer {
    fn window(&self) -> std::sync::MutexGuard<'_, AckWindow<lapin::Acker>> {
        // A panic while holding this lock cannot leave the window inconsistent (each method
        // is one short update), so a poisoned lock is used as it is.
        self.window
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn closed_error(&self, operation: &'static str) -> BrokerError {
        op_error(
            operation,
            &self.queue,
            "the subscription is closed (the broker will deliver the message again)",
        )
    }

    /// Sends what is due at `now` (`None`: every settled delivery, whatever it waits behind).
    async fn flush(&self, now: Option<Instant>) -> Result<()> {
        let _wire = self.wire.lock().await;
        let ops = match now {
            Some(now) => self.window().flush(now),
            None => self.window().flush_all(),
        };
        let mut failed = None;
        for op in ops {
            let (acker, multiple) = match op {
                WireAck::UpTo(acker) => (acker, true),
                WireAck::One(acker) => (acker, false),
            };
            self.frames[usize::from(!multiple)].fetch_add(1, Ordering::Relaxed);
            let sent = bounded("ack", &self.queue, acker.ack(BasicAckOptions { multiple })).await;
            match sent {
                Ok(true) => {}
                Ok(false) => failed = Some(self.closed_error("ack")),
                Err(e) => failed = Some(e),
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

/// Flushes the coalesced acks of a subscription: a short while after a settle (so one ack
/// covers a batch), and when a settled delivery has waited [`MAX_HOLD`] behind an older one.
async fn flusher(shared: Arc<Coalescer>) {
    loop {
        let deadline = shared.window().deadline();
        tokio::select! {
            () = shared.wake.notified() => tokio::time::sleep(FLUSH_DELAY).await,
            () = sleep_until(deadline), if deadline.is_some() => {}
        }
        if let Err(e) = shared.flush(Some(Instant::now())).await {
            tracing::warn!("ingress acks not delivered (those messages will come again): {e}");
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(at) = deadline {
        tokio::time::sleep_until(at.into()).await;
    }
}

/// The ack handle of one RabbitMQ delivery.
#[derive(Debug)]
pub(super) enum Acker {
    /// Acked or nacked on the wire at once.
    Single { queue: String, inner: lapin::Acker },
    /// Settled in the subscription's window; the flusher sends the ack.
    Coalesced { tag: u64, shared: Arc<Coalescer> },
}

impl fmt::Debug for Coalescer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coalescer")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl Acker {
    pub(super) async fn ack(self) -> Result<()> {
        match self {
            Acker::Single { queue, inner } => {
                let done = bounded("ack", &queue, inner.ack(BasicAckOptions::default())).await?;
                settled(&queue, "ack", done)
            }
            Acker::Coalesced { tag, shared } => {
                if shared.closed.load(Ordering::Acquire) {
                    return Err(shared.closed_error("ack"));
                }
                if shared.window().settle(tag, Instant::now()) {
                    shared.wake.notify_one();
                }
                Ok(())
            }
        }
    }

    pub(super) async fn nack(self) -> Result<()> {
        let options = BasicNackOptions {
            requeue: true,
            multiple: false,
        };
        match self {
            Acker::Single { queue, inner } => {
                let done = bounded("nack", &queue, inner.nack(options)).await?;
                settled(&queue, "nack", done)
            }
            Acker::Coalesced { tag, shared } => {
                let _wire = shared.wire.lock().await;
                let Some(inner) = shared.window().take_open(tag) else {
                    return Err(shared.closed_error("nack"));
                };
                let done = bounded("nack", &shared.queue, inner.nack(options)).await?;
                settled(&shared.queue, "nack", done)
            }
        }
    }
}

fn settled(queue: &str, operation: &'static str, done: bool) -> Result<()> {
    if done {
        Ok(())
    } else {
        Err(op_error(
            operation,
            queue,
            "the delivery's channel is closed (the broker will deliver the message again)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_acks_have_room_beside_the_callers_window() {
        assert_eq!(coalesced_limits(1), (5, 4));
        assert_eq!(coalesced_limits(256), (1_280, 1_024));
        assert_eq!(coalesced_limits(13_107), (65_535, 52_428));
        // Past 13,107 the channel's prefetch stops at 65,535: the held room is what is left.
        assert_eq!(coalesced_limits(13_108), (65_535, 52_427));
        assert_eq!(coalesced_limits(u16::MAX), (65_535, 1));
        for prefetch in [1, 2, 255, 256, 1_024, 13_107, 13_108, 40_000, u16::MAX] {
            let (qos, held) = coalesced_limits(prefetch);
            assert!(
                usize::from(prefetch) + held <= usize::from(qos) || held == 1,
                "prefetch {prefetch}: held acks would shrink the window"
            );
        }
    }

    #[test]
    fn management_url_is_derived_from_the_amqp_url() {
        assert_eq!(
            derive_management("amqp://guest:guest@127.0.0.1:5672/%2f").unwrap(),
            "http://guest:guest@127.0.0.1:15672/api"
        );
        assert_eq!(
            derive_management("amqps://u@rabbit.example/v").unwrap(),
            "https://u@rabbit.example:15671/api"
        );
        assert!(derive_management("http://x").is_err());
    }

    #[test]
    fn management_parameter_is_split_off() {
        let (amqp, m) = split_management(
            "amqp://h/%2f?heartbeat=10&management=http%3A%2F%2Fa%3Ab%40m%3A1%2Fapi",
        )
        .unwrap();
        assert_eq!(amqp, "amqp://h/%2f?heartbeat=10");
        assert_eq!(m.as_deref(), Some("http://a:b@m:1/api"));
        let (amqp, m) = split_management("amqp://h/%2f").unwrap();
        assert_eq!((amqp.as_str(), m), ("amqp://h/%2f", None));
    }

    #[test]
    fn vhost_is_read_as_lapin_reads_it() {
        assert_eq!(vhost_of("amqp://h:5672/%2f").unwrap(), "/");
        assert_eq!(vhost_of("amqp://h:5672").unwrap(), "/");
        assert_eq!(vhost_of("amqp://h:5672/prod").unwrap(), "prod");
    }

    #[test]
    fn user_is_read_as_lapin_logs_in() {
        assert_eq!(user_of("amqp://h:5672/%2f").unwrap(), "guest");
        assert_eq!(user_of("amqp://bridge%40x:pw@h/%2f").unwrap(), "bridge@x");
    }
}
