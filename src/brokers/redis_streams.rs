//! Redis Streams (redis): `XADD` to publish, a consumer group with `XREADGROUP` and `XAUTOCLAIM`
//! to consume, `XINFO GROUPS` for the depth, `XRANGE` to browse.
//!
//! An entry is the field `payload` (the bytes) and one field `h:<name>` per header. Other fields
//! of entries written by someone else are ignored; a header value that is not UTF-8 is skipped.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError, Value};
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

use super::redis_reply::{
    HEADER_PREFIX, PAYLOAD_FIELD, entry, int, items, pairs, read_entries, text,
};
use super::types::Received;
use super::{BrokerError, CONNECT_TIMEOUT, Depth, Message, Result, SubscribeOptions};

const KIND: &str = "redis";
/// How long a command may wait for its reply.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest `XREADGROUP … BLOCK`.
const BLOCK: Duration = Duration::from_secs(1);
/// Entries read per `XRANGE` page when counting the undelivered entries by hand.
const COUNT_PAGE: usize = 1000;

/// A Redis Streams adapter: one multiplexed connection shared by every command (re-opened after
/// it broke); each subscription reads on a connection of its own (`XREADGROUP` blocks it).
pub struct RedisStreams {
    shared: Arc<Shared>,
}

struct Shared {
    client: redis::Client,
    shown: String,
    connection: Mutex<Option<MultiplexedConnection>>,
}

impl fmt::Debug for RedisStreams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStreams")
            .field("url", &self.shared.shown)
            .finish_non_exhaustive()
    }
}

fn op_error(operation: &'static str, queue: &str, reason: impl fmt::Display) -> BrokerError {
    BrokerError::operation(KIND, operation, queue, reason)
}

pub(super) fn config(response_timeout: Duration) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(response_timeout))
}

/// The connection broke (rather than the server answering with an error).
fn broken(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_timeout() || e.is_unrecoverable_error()
}

impl Shared {
    async fn connection(&self) -> std::result::Result<MultiplexedConnection, RedisError> {
        let mut slot = self.connection.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let c = self
            .client
            .get_multiplexed_async_connection_with_config(&config(REQUEST_TIMEOUT))
            .await?;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Runs one command on the shared connection; forgets the connection when it broke, so the
    /// next command opens a new one.
    async fn query<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
    ) -> std::result::Result<T, RedisError> {
        let mut c = self.connection().await?;
        let result = cmd.query_async(&mut c).await;
        if let Err(e) = &result
            && broken(e)
        {
            *self.connection.lock().await = None;
        }
        result
    }
}

impl RedisStreams {
    /// Connects to `url` (`redis://[user:pass@]host:6379[/db]`).
    ///
    /// # Errors
    /// [`BrokerError::Connect`] when the URL is malformed or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<RedisStreams> {
        let shown = super::redact(url);
        let connect_error =
            |e: RedisError| BrokerError::connect(KIND, url, crate::redact::error(&e));
        let client = redis::Client::open(url).map_err(connect_error)?;
        let shared = Shared {
            client,
            shown: shown.clone(),
            connection: Mutex::new(None),
        };
        let _: Value = shared
            .query(&redis::cmd("PING"))
            .await
            .map_err(connect_error)?;
        Ok(RedisStreams {
            shared: Arc::new(shared),
        })
    }

    pub(super) async fn declare(&self, _queue: &str) -> Result<()> {
        Ok(())
    }

    pub(super) async fn publish(&self, queue: &str, message: &Message) -> Result<()> {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(queue)
            .arg("*")
            .arg(PAYLOAD_FIELD)
            .arg(&message.payload[..]);
        for (name, value) in &super::text_headers(message) {
            cmd.arg(format!("{HEADER_PREFIX}{name}"))
                .arg(value.as_str());
        }
        let _id: Value = self
            .shared
            .query(&cmd)
            .await
            .map_err(|e| BrokerError::NotConfirmed {
                kind: KIND,
                queue: queue.to_string(),
                reason: e.to_string(),
            })?;
        Ok(())
    }

    pub(super) async fn subscribe(
        &self,
        queue: &str,
        options: &SubscribeOptions,
    ) -> Result<Subscription> {
        let mut create = redis::cmd("XGROUP");
        create
            .arg("CREATE")
            .arg(queue)
            .arg(&options.group)
            .arg("0")
            .arg("MKSTREAM");
        match self.shared.query::<Value>(&create).await {
            Ok(_) => {}
            Err(e) if e.code() == Some("BUSYGROUP") => {}
            Err(e) => return Err(op_error("subscribe", queue, e)),
        }
        let visibility = options.visibility_timeout.max(Duration::from_millis(1));
        let mut reader = Box::new(Reader {
            queue: queue.to_string(),
            group: options.group.clone(),
            consumer: options.consumer.clone(),
            shared: self.shared.clone(),
            connection: None,
            // An exclusive subscription's take-over claims this consumer's own entries too.
            own_cursor: (!options.exclusive).then(|| "0".to_string()),
            take_over: options.exclusive.then(|| "0-0".to_string()),
            claim_cursor: "0-0".to_string(),
            last_claim: None,
            claim_every: (visibility / 2).clamp(Duration::from_millis(50), Duration::from_secs(5)),
            visibility,
            claim_now: Arc::new(AtomicBool::new(false)),
            permits: Arc::new(Semaphore::new(usize::from(options.prefetch.max(1)))),
        });
        reader
            .connection()
            .await
            .map_err(|e| op_error("subscribe", queue, e))?;
        Ok(Subscription {
            queue: queue.to_string(),
            group: options.group.clone(),
            consumer: options.consumer.clone(),
            buffer: VecDeque::new(),
            idle: Some(reader),
            reading: None,
            ended: false,
        })
    }

    pub(super) async fn depth(&self, queue: &str, group: &str) -> Result<Depth> {
        let exists: i64 = self
            .shared
            .query(redis::cmd("EXISTS").arg(queue))
            .await
            .map_err(|e| op_error("depth", queue, e))?;
        if exists == 0 {
            return Ok(Depth::default());
        }
        let groups: Value = self
            .shared
            .query(redis::cmd("XINFO").arg("GROUPS").arg(queue))
            .await
            .map_err(|e| op_error("depth", queue, e))?;
        let found = items(groups)
            .into_iter()
            .map(pairs)
            .find(|fields| fields.get("name").and_then(text).as_deref() == Some(group));
        let Some(fields) = found else {
            let length: u64 = self
                .shared
                .query(redis::cmd("XLEN").arg(queue))
                .await
                .map_err(|e| op_error("depth", queue, e))?;
            return Ok(Depth {
                ready: length,
                unacked: 0,
            });
        };
        let unacked = fields.get("pending").and_then(int).unwrap_or(0);
        let ready = match fields.get("lag").and_then(int) {
            Some(lag) => lag,
            None => {
                // Redis cannot tell the lag (entries were deleted in the middle): count by hand.
                let last = fields
                    .get("last-delivered-id")
                    .and_then(text)
                    .unwrap_or_else(|| "0-0".to_string());
                self.count_after(queue, &last).await?
            }
        };
        Ok(Depth { ready, unacked })
    }

    /// The number of entries after `id`.
    async fn count_after(&self, queue: &str, id: &str) -> Result<u64> {
        let mut start = format!("({id}");
        let mut count = 0u64;
        loop {
            let page: Value = self
                .shared
                .query(
                    redis::cmd("XRANGE")
                        .arg(queue)
                        .arg(&start)
                        .arg("+")
                        .arg("COUNT")
                        .arg(COUNT_PAGE),
                )
                .await
                .map_err(|e| op_error("depth", queue, e))?;
            let entries = items(page);
            let n = entries.len();
            count += n as u64;
            match entries
                .into_iter()
                .last()
                .and_then(|e| items(e).into_iter().next())
                .and_then(|id| text(&id))
            {
                Some(last) if n == COUNT_PAGE => start = format!("({last}"),
                _ => return Ok(count),
            }
        }
    }

    /// The server's clock (`TIME`), or the ms of the stream's last-generated id when that is
    /// later ([`super::marks`]).
    pub(super) async fn stale_mark(&self, queue: &str) -> Result<crate::stale::Mark> {
        let fail = |e: RedisError| op_error("stale mark", queue, e);
        let (secs, micros): (i64, i64) =
            self.shared.query(&redis::cmd("TIME")).await.map_err(fail)?;
        let now_ms = secs.saturating_mul(1000).saturating_add(micros / 1000);
        let exists: i64 = self
            .shared
            .query(redis::cmd("EXISTS").arg(queue))
            .await
            .map_err(fail)?;
        let mut last_ms = None;
        if exists != 0 {
            let info: Value = self
                .shared
                .query(redis::cmd("XINFO").arg("STREAM").arg(queue))
                .await
                .map_err(fail)?;
            last_ms = pairs(info)
                .get("last-generated-id")
                .and_then(text)
                .and_then(|id| super::types::redis_id_ms(&id));
        }
        Ok(crate::stale::Mark::EnqueuedAt(
            last_ms.map_or(now_ms, |last| last.max(now_ms)),
        ))
    }

    pub(super) async fn browse(&self, queue: &str, limit: usize) -> Result<Vec<Message>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let range: Value = self
            .shared
            .query(
                redis::cmd("XRANGE")
                    .arg(queue)
                    .arg("-")
                    .arg("+")
                    .arg("COUNT")
                    .arg(limit),
            )
            .await
            .map_err(|e| op_error("browse", queue, e))?;
        Ok(items(range)
            .into_iter()
            .filter_map(entry)
            .filter_map(|(_, m)| m)
            .collect())
    }
}

/// A consumer of a consumer group.
///
/// Cancel-safe: a read (the prefetch permit it waits for, then `XREADGROUP` / `XAUTOCLAIM`) is a
/// future this subscription owns, not the caller's `next()`. A `next()` dropped while its read
/// is in flight (an `XREADGROUP … BLOCK` waiting on the server) leaves the read where it is, and
/// the next call resumes it and takes its reply. Were the read dropped with the call, the server
/// would still answer it (redis-rs cannot withdraw a sent command): the next `XADD` would go to
/// that abandoned read, into this consumer's pending list and nowhere else, until `XAUTOCLAIM`
/// took it back a visibility timeout later, behind the messages read after it. Dropping the
/// subscription drops the read in flight and its connection; what that read took is pending for
/// this consumer: the next subscription of the same consumer, or the next exclusive one of any
/// consumer, reads it first, any other consumer of the group claims it after the visibility
/// timeout. [`Subscription::release`] lets the read finish instead.
pub(super) struct Subscription {
    queue: String,
    group: String,
    consumer: String,
    /// The deliveries of the last read, handed out before the next read starts.
    buffer: VecDeque<Received<Acker>>,
    /// The read state, while no read is in flight.
    idle: Option<Box<Reader>>,
    /// The read in flight (it owns the read state meanwhile). The lock is never taken (`next`
    /// has `&mut self`): it only makes the subscription `Sync`.
    reading: Option<StdMutex<Read>>,
    ended: bool,
}

/// A read in flight.
type Read = Pin<Box<dyn Future<Output = Filled> + Send>>;

/// What a read brings back: its state, the deliveries it read (even when it failed after
/// reading them), how it ended.
struct Filled {
    reader: Box<Reader>,
    deliveries: VecDeque<Received<Acker>>,
    outcome: Outcome,
}

enum Outcome {
    /// Read, maybe nothing (the block timed out, a claim pass went on).
    Done,
    /// The stream or the group was deleted: the subscription is over.
    Ended,
    /// The read failed; when the connection broke, it is re-opened by the next read, which
    /// reads this consumer's pending entries again first.
    Failed(BrokerError),
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("redis_streams::Subscription")
            .field("queue", &self.queue)
            .field("group", &self.group)
            .field("consumer", &self.consumer)
            .field("reading", &self.reading.is_some())
            .finish_non_exhaustive()
    }
}

impl Subscription {
    pub(super) async fn next(&mut self) -> Result<Option<Received<Acker>>> {
        loop {
            if self.ended {
                return Ok(None);
            }
            if let Some(d) = self.buffer.pop_front() {
                return Ok(Some(d));
            }
            let reading = match &mut self.reading {
                Some(reading) => reading,
                slot @ None => {
                    let Some(reader) = self.idle.take() else {
                        // Only after a read panicked: its state went with it.
                        return Err(op_error("consume", &self.queue, "a read panicked earlier"));
                    };
                    slot.insert(StdMutex::new(Box::pin(reader.read())))
                }
            };
            // Cancelled here, the read stays in `self.reading` for the next call.
            let filled = reading
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .as_mut()
                .await;
            self.reading = None;
            self.idle = Some(filled.reader);
            self.buffer.extend(filled.deliveries);
            match filled.outcome {
                Outcome::Done => {}
                Outcome::Ended => self.ended = true,
                Outcome::Failed(e) => return Err(e),
            }
        }
    }
}

impl Subscription {
    /// Lets a read in flight finish rather than abandoning it on the server (where a blocked
    /// `XREADGROUP` would still take the next entry added, for this consumer, after the next
    /// subscription's take-over): what it took is then in the group's pending list like the
    /// rest this subscription held, for the next exclusive subscription to claim first.
    pub(super) async fn release(mut self) -> Result<()> {
        if let Some(reading) = self.reading.take() {
            let read = reading.into_inner().unwrap_or_else(PoisonError::into_inner);
            tokio::time::timeout(BLOCK + REQUEST_TIMEOUT, read)
                .await
                .map_err(|_| {
                    op_error(
                        "release",
                        &self.queue,
                        format!("a read did not finish within {:?}", BLOCK + REQUEST_TIMEOUT),
                    )
                })?;
        }
        Ok(())
    }
}

/// What reading needs and keeps from one read to the next: the connection, where the re-read of
/// this consumer's pending list and the claim pass are, when the last claim pass ended.
struct Reader {
    queue: String,
    group: String,
    consumer: String,
    shared: Arc<Shared>,
    /// The connection `XREADGROUP … BLOCK` waits on; re-opened after it broke.
    connection: Option<MultiplexedConnection>,
    /// Where re-reading this consumer's own pending list is, while it is not done.
    own_cursor: Option<String>,
    /// Where the take-over of the group's whole pending list is (an exclusive subscription's
    /// start), while it is not done.
    take_over: Option<String>,
    claim_cursor: String,
    last_claim: Option<Instant>,
    claim_every: Duration,
    visibility: Duration,
    /// Set by a nack: run `XAUTOCLAIM` at once.
    claim_now: Arc<AtomicBool>,
    /// One per unacked delivery (prefetch).
    permits: Arc<Semaphore>,
}

impl Reader {
    /// One `XAUTOCLAIM` page of up to `count` entries of the group idle at least `min_idle`, from
    /// `cursor`: the cursor to go on from (`0-0` once the pending list is passed whole) and the
    /// entries claimed for this consumer.
    async fn autoclaim(
        &self,
        reader: &mut MultiplexedConnection,
        min_idle: Duration,
        cursor: &str,
        count: usize,
    ) -> std::result::Result<(String, Vec<Value>), RedisError> {
        let mut cmd = redis::cmd("XAUTOCLAIM");
        cmd.arg(&self.queue).arg(&self.group).arg(&self.consumer);
        cmd.arg(u64::try_from(min_idle.as_millis()).unwrap_or(u64::MAX));
        cmd.arg(cursor).arg("COUNT").arg(count);
        let mut reply = items(cmd.query_async(reader).await?).into_iter();
        let next_cursor = reply
            .next()
            .as_ref()
            .and_then(text)
            .unwrap_or_else(|| "0-0".to_string());
        let claimed = reply.next().map(items).unwrap_or_default();
        Ok((next_cursor, claimed))
    }

    async fn connection(&mut self) -> std::result::Result<MultiplexedConnection, RedisError> {
        if let Some(r) = &self.connection {
            return Ok(r.clone());
        }
        let r = self
            .shared
            .client
            .get_multiplexed_async_connection_with_config(&config(BLOCK + REQUEST_TIMEOUT))
            .await?;
        self.connection = Some(r.clone());
        Ok(r)
    }

    /// One read: waits for a prefetch permit, then reads up to as many entries as there are
    /// permits. Owns the state while it runs, so the subscription can keep it across calls.
    async fn read(mut self: Box<Self>) -> Filled {
        let mut deliveries = VecDeque::new();
        let outcome = match self.permits.clone().acquire_owned().await {
            Err(e) => Outcome::Failed(op_error("consume", &self.queue, e)),
            Ok(first) => {
                let count = 1 + self.permits.available_permits();
                match self.fill(first, count, &mut deliveries).await {
                    Ok(()) => Outcome::Done,
                    Err(e) if e.code() == Some("NOGROUP") => Outcome::Ended,
                    Err(e) => {
                        if broken(&e) {
                            self.connection = None;
                            // Read again what this consumer holds: the take-over from its
                            // start when it was not done (it covers this consumer's entries).
                            if self.take_over.is_some() {
                                self.take_over = Some("0-0".to_string());
                            } else {
                                self.own_cursor = Some("0".to_string());
                            }
                        }
                        Outcome::Failed(op_error("consume", &self.queue, e))
                    }
                }
            }
        };
        Filled {
            reader: self,
            deliveries,
            outcome,
        }
    }

    /// Reads up to `count` entries into `out`: this consumer's own pending entries first,
    /// then stale entries of the group when a claim is due, else new entries (blocking up to
    /// [`BLOCK`]).
    async fn fill(
        &mut self,
        first: OwnedSemaphorePermit,
        count: usize,
        out: &mut VecDeque<Received<Acker>>,
    ) -> std::result::Result<(), RedisError> {
        let mut reader = self.connection().await?;
        let mut first = Some(first);
        if let Some(cursor) = self.take_over.clone() {
            // Every entry of the group delivered before and not acked, whoever it went to, in
            // stream order, before any new one: the sessions before this one have ended.
            let (next_cursor, claimed) = self
                .autoclaim(&mut reader, Duration::ZERO, &cursor, count)
                .await?;
            self.take_over = (next_cursor != "0-0").then_some(next_cursor);
            if !claimed.is_empty() {
                self.take(claimed, true, &mut first, out).await?;
                return Ok(());
            }
            if self.take_over.is_some() {
                // Only deleted entries in this page: go on with the pass first.
                return Ok(());
            }
        }
        if let Some(cursor) = self.own_cursor.clone() {
            let mut cmd = redis::cmd("XREADGROUP");
            cmd.arg("GROUP")
                .arg(&self.group)
                .arg(&self.consumer)
                .arg("COUNT")
                .arg(count);
            cmd.arg("STREAMS").arg(&self.queue).arg(&cursor);
            let entries = read_entries(cmd.query_async(&mut reader).await?);
            if entries.is_empty() {
                self.own_cursor = None;
            } else {
                let last = self.take(entries, true, &mut first, out).await?;
                self.own_cursor = last;
                return Ok(());
            }
        }
        let due = self.claim_now.swap(false, Ordering::SeqCst)
            || self
                .last_claim
                .is_none_or(|at| at.elapsed() >= self.claim_every);
        if due {
            let cursor = self.claim_cursor.clone();
            let (next_cursor, claimed) = self
                .autoclaim(&mut reader, self.visibility, &cursor, count)
                .await?;
            let full = claimed.len() >= count;
            // A pass over the whole pending list is over when the cursor is back at 0-0.
            if next_cursor == "0-0" && !full {
                self.last_claim = Some(Instant::now());
            }
            self.claim_cursor = next_cursor;
            if !claimed.is_empty() {
                self.take(claimed, true, &mut first, out).await?;
                return Ok(());
            }
            if self.claim_cursor != "0-0" {
                // The pass stopped before the end of the pending list: go on with it first.
                return Ok(());
            }
        }
        let until_claim = self.last_claim.map_or(Duration::ZERO, |at| {
            self.claim_every.saturating_sub(at.elapsed())
        });
        let block = BLOCK.min(until_claim).max(Duration::from_millis(10));
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(&self.group)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(count);
        cmd.arg("BLOCK")
            .arg(u64::try_from(block.as_millis()).unwrap_or(1000));
        cmd.arg("STREAMS").arg(&self.queue).arg(">");
        let entries = read_entries(cmd.query_async(&mut reader).await?);
        self.take(entries, false, &mut first, out).await?;
        Ok(())
    }

    /// Adds the entries to `out` as deliveries (each holding a prefetch permit); acks the ids of
    /// deleted entries (nothing left to deliver). Returns the last id.
    async fn take(
        &mut self,
        entries: Vec<Value>,
        redelivered: bool,
        first: &mut Option<OwnedSemaphorePermit>,
        out: &mut VecDeque<Received<Acker>>,
    ) -> std::result::Result<Option<String>, RedisError> {
        let mut last = None;
        let mut gone = Vec::new();
        for (id, message) in entries.into_iter().filter_map(entry) {
            last = Some(id.clone());
            let Some(message) = message else {
                gone.push(id);
                continue;
            };
            let permit = first
                .take()
                .or_else(|| self.permits.clone().try_acquire_owned().ok());
            out.push_back(Received {
                message,
                redelivered,
                stored: super::Stored::redis_entry(&id),
                acker: Acker {
                    shared: self.shared.clone(),
                    queue: self.queue.clone(),
                    group: self.group.clone(),
                    consumer: self.consumer.clone(),
                    id,
                    visibility: self.visibility,
                    claim_now: self.claim_now.clone(),
                    _permit: permit,
                },
            });
        }
        if !gone.is_empty() {
            let _: Value = self
                .shared
                .query(
                    redis::cmd("XACK")
                        .arg(&self.queue)
                        .arg(&self.group)
                        .arg(&gone),
                )
                .await?;
        }
        Ok(last)
    }
}

/// The ack handle of one Redis delivery: its entry id in the group.
pub(super) struct Acker {
    shared: Arc<Shared>,
    queue: String,
    group: String,
    consumer: String,
    id: String,
    visibility: Duration,
    claim_now: Arc<AtomicBool>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl fmt::Debug for Acker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("redis_streams::Acker")
            .field("queue", &self.queue)
            .field("group", &self.group)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Acker {
    pub(super) async fn ack(self) -> Result<()> {
        let _: Value = self
            .shared
            .query(
                redis::cmd("XACK")
                    .arg(&self.queue)
                    .arg(&self.group)
                    .arg(&self.id),
            )
            .await
            .map_err(|e| op_error("ack", &self.queue, e))?;
        Ok(())
    }

    /// Leaves the entry pending, idle for the whole visibility timeout already, so the next
    /// `XAUTOCLAIM` of the group takes it.
    pub(super) async fn nack(self) -> Result<()> {
        let idle = u64::try_from(self.visibility.as_millis()).unwrap_or(u64::MAX);
        let mut cmd = redis::cmd("XCLAIM");
        cmd.arg(&self.queue)
            .arg(&self.group)
            .arg(&self.consumer)
            .arg(0)
            .arg(&self.id);
        cmd.arg("IDLE").arg(idle).arg("JUSTID");
        let _: Value = self
            .shared
            .query(&cmd)
            .await
            .map_err(|e| op_error("nack", &self.queue, e))?;
        self.claim_now.store(true, Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(b: &[u8]) -> Value {
        Value::BulkString(b.to_vec())
    }

    #[test]
    fn entries_read_payload_and_headers() {
        let v = Value::Array(vec![
            bulk(b"1-0"),
            Value::Array(vec![
                bulk(b"payload"),
                bulk(&[0, 0xff]),
                bulk(b"h:x-qm-key"),
                bulk(b"k"),
                bulk(b"other"),
                bulk(b"o"),
            ]),
        ]);
        let (id, message) = entry(v).unwrap();
        assert_eq!(id, "1-0");
        let message = message.unwrap();
        assert_eq!(message.payload, [0, 0xff]);
        assert_eq!(message.header("x-qm-key"), Some("k"));
        assert_eq!(message.headers.len(), 1);
        assert_eq!(
            entry(Value::Array(vec![bulk(b"2-0"), Value::Nil])).unwrap(),
            ("2-0".to_string(), None)
        );
    }

    #[test]
    fn xreadgroup_replies_of_both_protocols() {
        let e = Value::Array(vec![
            bulk(b"1-0"),
            Value::Array(vec![bulk(b"payload"), bulk(b"x")]),
        ]);
        let resp2 = Value::Array(vec![Value::Array(vec![
            bulk(b"q"),
            Value::Array(vec![e.clone()]),
        ])]);
        let resp3 = Value::Map(vec![(bulk(b"q"), Value::Array(vec![e]))]);
        assert_eq!(read_entries(resp2).len(), 1);
        assert_eq!(read_entries(resp3).len(), 1);
        assert!(read_entries(Value::Nil).is_empty());
    }
}
