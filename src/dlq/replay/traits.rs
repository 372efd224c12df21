//! What a run is driven with, as traits so tests run it on a fake clock: where messages go
//! ([`Publisher`], each a [`ReplayMessage`]), the clock ([`Pacer`]), where sends are recorded
//! ([`Ledger`]), and what a run reports as it goes ([`Event`]).

use std::future::Future;

use super::error::PublishError;
use crate::dlq::envelope::{DeadLetter, Payload};

/// One message to republish: the original payload and the origin headers.
#[derive(Debug, Clone, Copy)]
pub struct ReplayMessage<'a> {
    /// The original body.
    pub payload: &'a Payload,
    /// `x-replay-of` and `x-replay-reason`.
    pub headers: [(&'static str, &'a str); 2],
}

impl<'a> ReplayMessage<'a> {
    /// The message for a dead letter.
    pub fn of(entry: &'a DeadLetter) -> ReplayMessage<'a> {
        ReplayMessage {
            payload: &entry.payload,
            headers: [
                ("x-replay-of", entry.dead_lettered_at.as_str()),
                ("x-replay-reason", entry.error_class.as_str()),
            ],
        }
    }
}

/// Where replayed messages go: a broker adapter, or [`NdjsonPublisher`](super::NdjsonPublisher).
pub trait Publisher: Send {
    /// Publish one message.
    fn publish(
        &mut self,
        message: &ReplayMessage<'_>,
    ) -> impl Future<Output = Result<(), PublishError>> + Send;
    /// Make sure everything published so far is out.
    fn flush(&mut self) -> impl Future<Output = Result<(), PublishError>> + Send;
}

/// The clock and sleeping, for [`run`](super::run).
pub trait Pacer: Send {
    /// Now (ms).
    fn now_ms(&self) -> i64;
    /// Wait until `at_ms` (return at once if it passed).
    fn sleep_until(&mut self, at_ms: i64) -> impl Future<Output = ()> + Send;
}

/// What [`run`](super::run) reports as it goes (`T` is the item the entries come as).
#[derive(Debug)]
pub enum Event<'a, T> {
    /// Published.
    Published(&'a T),
    /// Failed, and why.
    Failed(&'a T, &'a PublishError),
    /// Not sent: an earlier message of its key (the string) failed in this run.
    Held(&'a T, &'a str),
}

/// What the [`Ledger`] says about an entry about to be published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Claimed for this run: publish it.
    Claimed,
    /// An earlier run sent it: skip it.
    SentEarlier,
    /// An earlier run claimed it and never learnt whether it went out: not sent again.
    InDoubt,
}

/// Where a run records what it sends (the state store's replay ledger, in `migrate dlq replay`):
/// [`run_recorded`](super::run_recorded) claims each entry before it publishes it, and settles the claim once it
/// knows. Whatever fails when, a later run never sends an entry twice: a claim that was never
/// settled stays in doubt.
pub trait Ledger<T>: Send {
    /// Before publishing `item` (nothing is sent when this fails).
    fn claim(&mut self, item: &T) -> impl Future<Output = Result<Recorded, String>> + Send;
    /// After: `sent` when it went out (published, and flushed), `false` when it certainly did
    /// not ([`PublishError::certainly_not_sent`]). A publish that may have gone out is not
    /// settled: it stays in doubt.
    fn settle(&mut self, item: &T, sent: bool) -> impl Future<Output = Result<(), String>> + Send;
}
