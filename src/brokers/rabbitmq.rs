//! RabbitMQ over AMQP 0.9.1 (lapin): publisher confirms on one shared channel, one channel per
//! subscription, the management API for the depth.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};
use tokio::sync::Mutex;

use super::{
    BrokerError, CONFIRM_TIMEOUT, CONNECT_TIMEOUT, Depth, Message, Result, SubscribeOptions,
};

const KIND: &str = "rabbitmq";
/// How long a call to the management API may take.
const MANAGEMENT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long declaring, opening a channel or setting up a consumer may take.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(15);
/// AMQP `delivery_mode` of a persistent message.
const PERSISTENT: u8 = 2;

/// A RabbitMQ adapter: one AMQP connection with a confirming channel shared by every publish,
/// and the management API (for [`super::Adapter::depth`]).
pub struct RabbitMq {
    /// The AMQP URL given to lapin (without a `management` parameter).
    amqp_url: String,
    /// `amqp_url` without its password.
    shown: String,
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
    BrokerError::Connect {
        kind: KIND,
        url: url.to_string(),
        reason: reason.to_string(),
    }
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
        let opened = tokio::time::timeout(CONNECT_TIMEOUT, self.open())
            .await
            .map_err(|_| {
                connect_error(&self.shown, format!("no answer within {CONNECT_TIMEOUT:?}"))
            })??;
        let pair = (opened.connection.clone(), opened.channel.clone());
        *link = Some(opened);
        Ok(pair)
    }

    async fn open(&self) -> Result<Link> {
        let properties =
            ConnectionProperties::default().with_connection_name(LongString::from("queue-migrate"));
        let connection = Connection::connect(&self.amqp_url, properties)
            .await
            .map_err(|e| connect_error(&self.shown, e))?;
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
        let mut headers = FieldTable::default();
        for (name, value) in &message.headers {
            let name = short(name, "header name").map_err(|e| not_confirmed(queue, e))?;
            headers.insert(
                name,
                AMQPValue::LongString(LongString::from(value.as_bytes())),
            );
        }
        let properties = BasicProperties::default()
            .with_delivery_mode(PERSISTENT)
            .with_headers(headers);
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
    ) -> Result<Subscription> {
        let name = short(queue, "queue name").map_err(|e| op_error("subscribe", queue, e))?;
        let tag = ShortString::try_new(format!("{}.{}", options.group, options.consumer))
            .unwrap_or_default();
        let (connection, channel) = self.side_channel("subscribe", queue).await?;
        bounded(
            "subscribe",
            queue,
            channel.basic_qos(options.prefetch, BasicQosOptions::default()),
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
        Ok(Subscription {
            queue: queue.to_string(),
            consumer,
            _channel: channel,
            connection,
            failed: None,
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
fn split_management(url: &str) -> Result<(String, Option<String>)> {
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
fn derive_management(amqp_url: &str) -> Result<String> {
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
fn vhost_of(amqp_url: &str) -> std::result::Result<String, String> {
    let parsed = reqwest::Url::parse(amqp_url).map_err(|e| e.to_string())?;
    Ok(match parsed.path().get(1..) {
        Some(path) => decode(path),
        None => "/".to_string(),
    })
}

/// Percent-decodes (lossy: invalid UTF-8 becomes U+FFFD).
fn decode(s: &str) -> String {
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

/// The headers of an AMQP message: long and short strings, and byte arrays that are UTF-8; other
/// types are skipped.
fn read_headers(properties: &BasicProperties) -> std::collections::BTreeMap<String, String> {
    let mut headers = std::collections::BTreeMap::new();
    if let Some(table) = properties.headers() {
        for (name, value) in table.inner() {
            let value = match value {
                AMQPValue::LongString(s) => String::from_utf8(s.as_bytes().to_vec()).ok(),
                AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
                AMQPValue::ByteArray(b) => String::from_utf8(b.as_slice().to_vec()).ok(),
                _ => None,
            };
            if let Some(value) = value {
                headers.insert(name.as_str().to_string(), value);
            }
        }
    }
    headers
}

/// A consumer on its own channel.
pub(super) struct Subscription {
    queue: String,
    consumer: lapin::Consumer,
    _channel: Channel,
    connection: Arc<Connection>,
    failed: Option<String>,
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
    pub(super) async fn next(&mut self) -> Result<Option<super::Delivery>> {
        if let Some(reason) = &self.failed {
            return Err(op_error(
                "consume",
                &self.queue,
                format!("the subscription failed earlier: {reason}"),
            ));
        }
        match self.consumer.next().await {
            Some(Ok(delivery)) => Ok(Some(super::Delivery {
                message: Message {
                    headers: read_headers(&delivery.properties),
                    payload: delivery.data,
                },
                redelivered: delivery.redelivered,
                acker: super::Acker::RabbitMq(Acker {
                    queue: self.queue.clone(),
                    inner: delivery.acker,
                }),
            })),
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
}

/// The ack handle of one RabbitMQ delivery.
#[derive(Debug)]
pub(super) struct Acker {
    queue: String,
    inner: lapin::Acker,
}

impl Acker {
    pub(super) async fn ack(self) -> Result<()> {
        let done = bounded(
            "ack",
            &self.queue,
            self.inner.ack(BasicAckOptions::default()),
        )
        .await?;
        self.settled("ack", done)
    }

    pub(super) async fn nack(self) -> Result<()> {
        let options = BasicNackOptions {
            requeue: true,
            multiple: false,
        };
        let done = bounded("nack", &self.queue, self.inner.nack(options)).await?;
        self.settled("nack", done)
    }

    fn settled(&self, operation: &'static str, done: bool) -> Result<()> {
        if done {
            Ok(())
        } else {
            Err(op_error(
                operation,
                &self.queue,
                "the delivery's channel is closed (the broker will deliver the message again)",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn headers_of_other_types_are_skipped() {
        let mut table = FieldTable::default();
        table.insert("a".into(), AMQPValue::LongString("x".into()));
        table.insert("b".into(), AMQPValue::ShortString("y".into()));
        table.insert("c".into(), AMQPValue::ByteArray(b"z".to_vec().into()));
        table.insert("d".into(), AMQPValue::LongInt(4));
        table.insert("e".into(), AMQPValue::ByteArray(vec![0xff].into()));
        let headers = read_headers(&BasicProperties::default().with_headers(table));
        let got: Vec<_> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(got, [("a", "x"), ("b", "y"), ("c", "z")]);
    }
}
