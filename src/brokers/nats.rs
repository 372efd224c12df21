//! NATS JetStream (async-nats): one stream per queue, a durable pull consumer per group.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr as _;
use std::time::Duration;

use async_nats::jetstream::consumer::FromConsumer as _;
use async_nats::jetstream::{self, consumer, context, stream};
use async_nats::{HeaderMap, HeaderName, HeaderValue};
use futures_util::StreamExt as _;

use super::types::Received;
use super::{
    BrokerError, CONFIRM_TIMEOUT, CONNECT_TIMEOUT, Depth, Message, Result, SubscribeOptions,
};

const KIND: &str = "nats";
/// How often the server sends a heartbeat to an idle pull subscription.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// How long one pull request stays open on the server.
const PULL_EXPIRES: Duration = Duration::from_secs(30);
/// How long a JetStream API request or an ack may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A NATS JetStream adapter: one client (it reconnects by itself) and its JetStream context.
pub struct Nats {
    client: async_nats::Client,
    js: jetstream::Context,
    shown: String,
}

impl fmt::Debug for Nats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nats")
            .field("url", &self.shown)
            .finish_non_exhaustive()
    }
}

fn op_error(operation: &'static str, queue: &str, reason: impl fmt::Display) -> BrokerError {
    BrokerError::operation(KIND, operation, queue, reason)
}

fn not_confirmed(queue: &str, reason: impl fmt::Display) -> BrokerError {
    BrokerError::not_confirmed(KIND, queue, reason)
}

fn refused(queue: &str, reason: impl fmt::Display) -> BrokerError {
    BrokerError::refused(KIND, queue, reason)
}

/// JetStream `PubAck` error codes about the message itself, which the same message meets again
/// on every retry: 10054, larger than the stream's `max_msg_size`. Every other code (a stream
/// full under `discard: new`, storage exhausted, no leader, ...) can clear by itself and stays
/// [`BrokerError::NotConfirmed`].
const REFUSED_CODES: &[jetstream::ErrorCode] =
    &[jetstream::ErrorCode::STREAM_MESSAGE_EXCEEDS_MAXIMUM];

/// A failed JetStream publish (sending it or its `PubAck`) as a [`BrokerError`]: `Refused` for
/// a message the client will not send (larger than the server's `max_payload`) or a `PubAck`
/// error in [`REFUSED_CODES`]; `NotConfirmed` for everything else (timeouts, a broken
/// connection, no stream, other server errors).
fn publish_error(queue: &str, e: &context::PublishError) -> BrokerError {
    use context::PublishErrorKind as K;
    let about_the_message = match e.kind() {
        K::MaxPayloadExceeded => true,
        K::Other => std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<jetstream::Error>())
            .is_some_and(|js| REFUSED_CODES.contains(&js.error_code())),
        K::StreamNotFound
        | K::WrongLastMessageId
        | K::WrongLastSequence
        | K::TimedOut
        | K::BrokenPipe
        | K::MaxAckPending => false,
    };
    if about_the_message {
        refused(queue, e)
    } else {
        not_confirmed(queue, e)
    }
}

/// The stream (or consumer) name for a queue (or group): JetStream names cannot hold `.`, `*`,
/// `>`, `/`, `\` or blanks; each becomes `_`.
pub(super) fn jetstream_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if matches!(c, '.' | '*' | '>' | '/' | '\\') || c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

impl Nats {
    /// Connects to `url` (`nats://[user:pass@]host:4222`).
    ///
    /// # Errors
    /// [`BrokerError::Connect`] when the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Nats> {
        let shown = super::redact(url);
        let client = async_nats::ConnectOptions::new()
            .name("queue-migrate")
            .connection_timeout(CONNECT_TIMEOUT)
            .request_timeout(Some(REQUEST_TIMEOUT))
            .connect(url)
            .await
            .map_err(|e| BrokerError::connect(KIND, url, crate::redact::error(&e)))?;
        let js = jetstream::ContextBuilder::new()
            .timeout(CONFIRM_TIMEOUT.min(REQUEST_TIMEOUT))
            .build(client.clone());
        Ok(Nats { client, js, shown })
    }

    async fn stream(&self, operation: &'static str, queue: &str) -> Result<stream::Stream> {
        let name = jetstream_name(queue);
        self.js.get_stream(&name).await.map_err(|e| match e.kind() {
            context::GetStreamErrorKind::JetStream(js)
                if js.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND =>
            {
                op_error(
                    operation,
                    queue,
                    format!("no stream {name:?} (declare the queue first)"),
                )
            }
            _ => op_error(operation, queue, e),
        })
    }

    pub(super) async fn declare(&self, queue: &str) -> Result<()> {
        let config = stream::Config {
            name: jetstream_name(queue),
            subjects: vec![queue.to_string()],
            storage: stream::StorageType::File,
            retention: stream::RetentionPolicy::WorkQueue,
            ..stream::Config::default()
        };
        self.js
            .get_or_create_stream(config)
            .await
            .map_err(|e| op_error("declare", queue, e))?;
        Ok(())
    }

    pub(super) async fn publish(&self, queue: &str, message: &Message) -> Result<()> {
        let mut headers = HeaderMap::new();
        for (name, value) in &nats_headers(message) {
            // What NATS cannot encode in a header is in the message: refused, on every retry.
            let name = HeaderName::from_str(name)
                .map_err(|e| refused(queue, format!("header {name:?}: {e}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|e| refused(queue, format!("header {name}: {e}")))?;
            headers.insert(name, value);
        }
        let confirm = async {
            let ack = self
                .js
                .publish_with_headers(queue.to_string(), headers, message.payload.clone().into())
                .await
                .map_err(|e| publish_error(queue, &e))?;
            ack.await.map_err(|e| publish_error(queue, &e))
        };
        tokio::time::timeout(CONFIRM_TIMEOUT, confirm)
            .await
            .map_err(|_| not_confirmed(queue, format!("no PubAck within {CONFIRM_TIMEOUT:?}")))??;
        Ok(())
    }

    pub(super) async fn subscribe(
        &self,
        queue: &str,
        options: &SubscribeOptions,
    ) -> Result<Subscription> {
        let stream = self.stream("subscribe", queue).await?;
        let durable = jetstream_name(&options.group);
        let config = consumer::pull::Config {
            durable_name: Some(durable.clone()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: options.visibility_timeout,
            max_ack_pending: i64::from(options.prefetch.max(1)),
            deliver_policy: consumer::DeliverPolicy::All,
            filter_subject: queue.to_string(),
            ..consumer::pull::Config::default()
        };
        let fail = |e: &dyn fmt::Display| op_error("subscribe", queue, e);
        // A durable that exists keeps what it was made with (a hand-set `max_deliver`, a
        // description, its filter) but for the two numbers this subscription owns: a plan's new
        // prefetch or visibility timeout applies at the next start, not the first one's for good.
        let pull: consumer::PullConsumer = match stream.consumer_info(&durable).await {
            Err(e) if e.kind() == context::ConsumerInfoErrorKind::NotFound => {
                stream.create_consumer(config).await.map_err(|e| fail(&e))?
            }
            Err(e) => return Err(fail(&e)),
            Ok(mut info) => {
                let have = &info.config;
                if have.max_ack_pending != config.max_ack_pending
                    || have.ack_wait != config.ack_wait
                {
                    let edited = consumer::Config {
                        max_ack_pending: config.max_ack_pending,
                        ack_wait: config.ack_wait,
                        ..have.clone()
                    };
                    let updated = stream.create_consumer(edited).await.map_err(|e| fail(&e))?;
                    info = updated.cached_info().clone();
                }
                let pull = consumer::pull::Config::try_from_consumer_config(info.config.clone())
                    .map_err(|e| fail(&e))?;
                consumer::Consumer::new(pull, info, self.js.clone())
            }
        };
        let messages = pull
            .stream()
            .max_messages_per_batch(usize::from(options.prefetch.max(1)))
            .expires(PULL_EXPIRES)
            .heartbeat(HEARTBEAT)
            .messages()
            .await
            .map_err(|e| op_error("subscribe", queue, e))?;
        Ok(Subscription {
            queue: queue.to_string(),
            client: self.client.clone(),
            messages,
            deleted: false,
            ended: None,
        })
    }

    pub(super) async fn depth(&self, queue: &str, group: &str) -> Result<Depth> {
        let mut stream = self.stream("depth", queue).await?;
        match stream.consumer_info(jetstream_name(group)).await {
            Ok(info) => Ok(Depth {
                ready: info.num_pending,
                unacked: info.num_ack_pending as u64,
            }),
            Err(e) if e.kind() == context::ConsumerInfoErrorKind::NotFound => {
                let info = stream
                    .info()
                    .await
                    .map_err(|e| op_error("depth", queue, e))?;
                Ok(Depth {
                    ready: info.state.messages,
                    unacked: 0,
                })
            }
            Err(e) => Err(op_error("depth", queue, e)),
        }
    }

    /// The stream's last sequence ([`super::marks`]).
    pub(super) async fn stale_mark(&self, queue: &str) -> Result<crate::stale::Mark> {
        let mut stream = self.stream("stale mark", queue).await?;
        let info = stream
            .info()
            .await
            .map_err(|e| op_error("stale mark", queue, e))?;
        Ok(crate::stale::Mark::Position(info.state.last_sequence))
    }

    pub(super) async fn browse(&self, queue: &str, limit: usize) -> Result<Vec<Message>> {
        let mut stream = self.stream("browse", queue).await?;
        let state = stream
            .info()
            .await
            .map_err(|e| op_error("browse", queue, e))?
            .state
            .clone();
        let mut out = Vec::new();
        let mut sequence = state.first_sequence.max(1);
        while out.len() < limit && sequence <= state.last_sequence {
            // The next message on the queue's subject at or after `sequence`: deleted (acked)
            // sequences are skipped by the server.
            let got = stream
                .raw_message_builder()
                .sequence(sequence)
                .next_by_subject(queue.to_string())
                .send()
                .await;
            match got {
                Ok(m) => {
                    sequence = m.sequence + 1;
                    out.push(Message {
                        headers: read_headers(Some(&m.headers)),
                        ..Message::new(m.payload.to_vec())
                    });
                }
                Err(e) if e.kind() == stream::RawMessageErrorKind::NoMessageFound => break,
                Err(e) => return Err(op_error("browse", queue, e)),
            }
        }
        Ok(out)
    }
}

fn read_headers(headers: Option<&HeaderMap>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(headers) = headers {
        for (name, values) in headers.iter() {
            if let Some(value) = values.last() {
                out.insert(name.to_string(), value.as_str().to_string());
            }
        }
    }
    out
}

/// What JetStream says of a delivery (its ack subject): its stream sequence, and the time the
/// server stored it (the server's clock), in ms (`None` past what an `i64` of ms holds).
fn stored(sequence: u64, published: async_nats::datetime::DateTime) -> super::Stored {
    let ms = published.unix_timestamp_nanos() / 1_000_000;
    super::Stored {
        position: Some(sequence),
        enqueued_at_ms: i64::try_from(ms).ok(),
        ..super::Stored::default()
    }
}

/// A durable pull consumer's message stream.
pub(super) struct Subscription {
    queue: String,
    client: async_nats::Client,
    messages: consumer::pull::Stream,
    /// The consumer was deleted: the subscription is over.
    deleted: bool,
    /// The stream of messages ended with this error.
    ended: Option<String>,
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("nats::Subscription")
            .field("queue", &self.queue)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Subscription {
    /// Ends the subscription: the same as dropping it. What it held comes back after `ack_wait`
    /// (see [`super::Subscription::release`] for why it is not NAKed).
    pub(super) async fn release(self) -> Result<()> {
        drop(self);
        Ok(())
    }

    pub(super) async fn next(&mut self) -> Result<Option<Received<Acker>>> {
        if self.deleted {
            return Ok(None);
        }
        if let Some(reason) = &self.ended {
            return Err(op_error(
                "consume",
                &self.queue,
                format!("the subscription ended: {reason}"),
            ));
        }
        match self.messages.next().await {
            Some(Ok(m)) => {
                let info = m.info().ok();
                let redelivered = info.as_ref().is_some_and(|info| info.delivered > 1);
                let stored = info.map(|info| stored(info.stream_sequence, info.published));
                let reply = m.message.reply.clone();
                Ok(Some(Received {
                    message: Message {
                        headers: read_headers(m.message.headers.as_ref()),
                        ..Message::new(m.message.payload.to_vec())
                    },
                    redelivered,
                    stored: stored.unwrap_or_default(),
                    acker: Acker {
                        queue: self.queue.clone(),
                        client: self.client.clone(),
                        reply,
                    },
                }))
            }
            Some(Err(e)) => {
                use consumer::pull::MessagesErrorKind as K;
                match e.kind() {
                    K::ConsumerDeleted => {
                        self.deleted = true;
                        Ok(None)
                    }
                    K::PushBasedConsumer | K::RequestLimitExceeded => {
                        self.ended = Some(e.to_string());
                        Err(op_error("consume", &self.queue, e))
                    }
                    _ => Err(op_error("consume", &self.queue, e)),
                }
            }
            None => Ok(None),
        }
    }
}

/// The ack handle of one JetStream delivery: its reply subject.
#[derive(Debug)]
pub(super) struct Acker {
    queue: String,
    client: async_nats::Client,
    reply: Option<async_nats::Subject>,
}

impl Acker {
    pub(super) async fn ack(self) -> Result<()> {
        self.send("ack", "+ACK").await
    }

    pub(super) async fn nack(self) -> Result<()> {
        self.send("nack", "-NAK").await
    }

    /// Sends the ack with a reply subject, so the server confirms it.
    async fn send(self, operation: &'static str, body: &'static str) -> Result<()> {
        let Some(reply) = self.reply else {
            return Err(op_error(
                operation,
                &self.queue,
                "the message has no reply subject: not a JetStream delivery",
            ));
        };
        let request = self.client.request(reply, body.into());
        tokio::time::timeout(REQUEST_TIMEOUT, request)
            .await
            .map_err(|_| {
                op_error(
                    operation,
                    &self.queue,
                    format!("no answer within {REQUEST_TIMEOUT:?}"),
                )
            })?
            .map_err(|e| op_error(operation, &self.queue, e))?;
        Ok(())
    }
}

/// The headers NATS carries for `message`: its text headers as they are, and the AMQP property
/// headers its properties make ([`PROPERTY_HEADERS`](super::properties::PROPERTY_HEADERS),
/// `x-amqp-*`) with `%`, CR and LF percent-encoded (`%25`, `%0D`, `%0A`), since NATS refuses CR
/// and LF in a header value and an AMQP property may hold them; a consumer decodes these three.
/// A header the message already has (one read from NATS, encoded then) is never encoded again.
pub(super) fn nats_headers(message: &Message) -> BTreeMap<String, String> {
    let mut headers = super::text_headers(message);
    for (name, value) in super::properties::property_headers(&message.properties) {
        if let Cow::Owned(encoded) = percent_encoded(&value) {
            headers.insert(name.to_string(), encoded);
        }
    }
    headers
}

/// `value` with `%`, CR and LF percent-encoded.
fn percent_encoded(value: &str) -> Cow<'_, str> {
    if !value.contains(['%', '\r', '\n']) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '%' => out.push_str("%25"),
            '\r' => out.push_str("%0D"),
            '\n' => out.push_str("%0A"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pub_ack_error(code: u64) -> context::PublishError {
        let js: jetstream::Error = serde_json::from_value(serde_json::json!({
            "code": 400, "err_code": code, "description": "from the server"
        }))
        .expect("a JetStream API error");
        context::PublishError::with_source(context::PublishErrorKind::Other, js)
    }

    /// Regression: a message larger than the server's max_payload was NotConfirmed, which the
    /// bridge retried forever, blocking its key and, once enough piled up behind it, everything.
    #[test]
    fn a_message_over_max_payload_or_the_streams_max_msg_size_is_refused() {
        let over = context::PublishError::with_source(
            context::PublishErrorKind::MaxPayloadExceeded,
            "Payload size limit of 1048576 exceeded by message size of 2097152",
        );
        let e = publish_error("ORDERS", &over);
        assert!(e.is_refused(), "{e}");
        assert!(e.to_string().contains("1048576"), "{e}");
        let e = publish_error("ORDERS", &pub_ack_error(10054));
        assert!(e.is_refused(), "{e}");
    }

    #[test]
    fn transient_publish_failures_are_not_refused() {
        use context::PublishErrorKind as K;
        for kind in [
            K::TimedOut,
            K::BrokenPipe,
            K::StreamNotFound,
            K::MaxAckPending,
            K::Other,
        ] {
            let e = publish_error("ORDERS", &context::PublishError::new(kind));
            assert!(
                matches!(e, BrokerError::NotConfirmed { .. }),
                "{kind:?}: {e}"
            );
        }
        // Server errors that can clear: storage, a full stream with `discard: new`, no leader.
        for code in [10047, 10077, 10008, 10023] {
            let e = publish_error("ORDERS", &pub_ack_error(code));
            assert!(matches!(e, BrokerError::NotConfirmed { .. }), "{code}: {e}");
        }
    }

    #[test]
    fn names_lose_the_characters_jetstream_refuses() {
        assert_eq!(jetstream_name("orders.dlq"), "orders_dlq");
        assert_eq!(jetstream_name("a b*c>d/e\\f"), "a_b_c_d_e_f");
        assert_eq!(jetstream_name("ORDERS"), "ORDERS");
    }

    /// Regression: an AMQP property holding a newline (a `correlation_id`), forwarded as an
    /// `x-amqp-*` header, made NATS refuse a message it used to accept.
    #[test]
    fn property_headers_have_cr_lf_and_percent_encoded_for_nats() {
        let message = Message {
            properties: super::super::properties::Properties {
                correlation_id: Some("a\r\nb 100%".into()),
                message_id: Some("m-1".into()),
                ..Default::default()
            },
            ..Message::new("x").with_header("x-retry", "100%")
        };
        let headers = nats_headers(&message);
        assert_eq!(headers["x-amqp-correlation-id"], "a%0D%0Ab 100%25");
        assert_eq!(headers["x-amqp-message-id"], "m-1");
        assert_eq!(headers["x-retry"], "100%");
        for (name, value) in &headers {
            assert!(HeaderValue::from_str(value).is_ok(), "{name}: {value:?}");
        }
    }

    #[test]
    fn a_property_header_read_from_nats_is_not_encoded_twice() {
        // A message a bridge put on NATS, read back (no AMQP properties, the header encoded).
        let message = Message::new("x").with_header("x-amqp-correlation-id", "a%0Ab 100%25");
        assert_eq!(
            nats_headers(&message)["x-amqp-correlation-id"],
            "a%0Ab 100%25"
        );
    }
}
