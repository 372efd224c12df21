//! The async driver: [`run`] and [`run_recorded`] feed entries to a [`ReplayMachine`] and
//! publish what it admits, paced, optionally recorded in a [`Ledger`]; the end of a run is a
//! [`ReplaySummary`].

use std::borrow::Borrow;
use std::future::Future;

use serde::Serialize;

use super::error::PublishError;
use super::machine::{Admission, Outcome, ReplayMachine, ReplayStats, ResumePoint};
use super::traits::{Event, Ledger, Pacer, Publisher, Recorded, ReplayMessage};
use crate::dlq::envelope::DeadLetter;

/// The end of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplaySummary {
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Counters.
    #[serde(flatten)]
    pub stats: ReplayStats,
    /// Entries selected and not processed (not counted for a refusal, which stops reading).
    pub remaining: u64,
    /// Where a later run can start.
    pub resume: ResumePoint,
}

/// Replay `entries` (dead letters, or anything that borrows as one) through `publisher`, paced by
/// `pacer`, calling `on_event` after each message. Records nothing: `migrate dlq replay` runs
/// [`run_recorded`].
pub async fn run<T, I, P, C, F>(
    machine: &mut ReplayMachine,
    entries: I,
    publisher: &mut P,
    pacer: &mut C,
    on_event: F,
) -> ReplaySummary
where
    T: Borrow<DeadLetter>,
    I: IntoIterator<Item = T>,
    P: Publisher,
    C: Pacer,
    F: FnMut(&Event<'_, T>, &ReplayStats),
{
    drive(
        machine,
        entries,
        publisher,
        pacer,
        None::<&mut Unrecorded>,
        on_event,
    )
    .await
}

/// [`run`], each entry claimed in `ledger` before it is published and settled after; every
/// message is flushed before its claim is settled as sent. A ledger that fails stops the run
/// ([`Outcome::NotRecorded`]): a claim that fails before anything was sent leaves nothing sent.
pub async fn run_recorded<T, I, P, C, L, F>(
    machine: &mut ReplayMachine,
    entries: I,
    publisher: &mut P,
    pacer: &mut C,
    ledger: &mut L,
    on_event: F,
) -> ReplaySummary
where
    T: Borrow<DeadLetter>,
    I: IntoIterator<Item = T>,
    P: Publisher,
    C: Pacer,
    L: Ledger<T>,
    F: FnMut(&Event<'_, T>, &ReplayStats),
{
    drive(machine, entries, publisher, pacer, Some(ledger), on_event).await
}

/// The ledger of [`run`]: none.
struct Unrecorded;

impl<T> Ledger<T> for Unrecorded {
    fn claim(&mut self, _: &T) -> impl Future<Output = Result<Recorded, String>> + Send {
        std::future::ready(Ok(Recorded::Claimed))
    }
    fn settle(&mut self, _: &T, _: bool) -> impl Future<Output = Result<(), String>> + Send {
        std::future::ready(Ok(()))
    }
}

async fn drive<T, I, P, C, L, F>(
    machine: &mut ReplayMachine,
    entries: I,
    publisher: &mut P,
    pacer: &mut C,
    mut ledger: Option<&mut L>,
    mut on_event: F,
) -> ReplaySummary
where
    T: Borrow<DeadLetter>,
    I: IntoIterator<Item = T>,
    P: Publisher,
    C: Pacer,
    L: Ledger<T>,
    F: FnMut(&Event<'_, T>, &ReplayStats),
{
    let mut entries = entries.into_iter().peekable();
    let mut outcome = Outcome::Completed;
    // Set when a flush after one message failed (recorded runs only).
    let mut flush_failed = None;
    while let Some(item) = entries.next() {
        let entry: &DeadLetter = item.borrow();
        match machine.admit(
            entry.first_attempt_ms(),
            &entry.first_attempt_at,
            pacer.now_ms(),
        ) {
            Admission::SkipEarlier => continue,
            Admission::Stop(o) => {
                outcome = o;
                break;
            }
            Admission::Publish { not_before_ms } => pacer.sleep_until(not_before_ms).await,
        }
        if let Some(ledger) = ledger.as_deref_mut() {
            match claim(machine, ledger, &item).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(error) => {
                    outcome = Outcome::NotRecorded { error };
                    break;
                }
            }
        }
        let mut result = publisher.publish(&ReplayMessage::of(entry)).await;
        // Set when the ledger could not settle the claim: the run stops after this message.
        let mut not_recorded = None;
        if let Some(ledger) = ledger.as_deref_mut() {
            // A message counts as out once flushed; one not flushed did not go out whole.
            if result.is_ok()
                && let Err(e) = publisher.flush().await
            {
                flush_failed = Some(e.to_string());
                result = Err(e);
            }
            let settled = match &result {
                Ok(()) => Some(true),
                Err(e) if e.certainly_not_sent() => Some(false),
                // It may have gone out: the claim stays, in doubt.
                Err(_) => None,
            };
            if let Some(sent) = settled
                && let Err(error) = ledger.settle(&item, sent).await
            {
                not_recorded = Some(error);
            }
        }
        if flush_failed.is_some() {
            machine.flush_failed();
            if let Err(e) = &result {
                on_event(&Event::Failed(&item, e), &machine.stats());
            }
            if let Some(error) = not_recorded {
                outcome = Outcome::NotRecorded { error };
                flush_failed = None;
            }
            break;
        }
        let stop = if let Err(PublishError::KeyHeld(key)) = &result {
            machine.held();
            on_event(&Event::Held(&item, key), &machine.stats());
            None
        } else {
            let stop = machine.record(result.is_ok(), entries.peek().is_some());
            match &result {
                Ok(()) => on_event(&Event::Published(&item), &machine.stats()),
                Err(e) => on_event(&Event::Failed(&item, e), &machine.stats()),
            }
            stop
        };
        if let Some(error) = not_recorded {
            outcome = Outcome::NotRecorded { error };
            break;
        }
        if let Some(o) = stop {
            outcome = o;
            break;
        }
    }
    summarize(machine, publisher, outcome, flush_failed, entries).await
}

/// Claims `item` in the ledger: `Ok(true)` to publish it, `Ok(false)` to skip it (sent by an
/// earlier run, or in doubt), `Err` when the ledger cannot record and the run must stop.
async fn claim<T, L: Ledger<T>>(
    machine: &mut ReplayMachine,
    ledger: &mut L,
    item: &T,
) -> Result<bool, String> {
    match ledger.claim(item).await? {
        Recorded::Claimed => Ok(true),
        Recorded::SentEarlier => {
            machine.sent_earlier();
            Ok(false)
        }
        Recorded::InDoubt => {
            machine.in_doubt();
            Ok(false)
        }
    }
}

/// The run's summary, after the last flush; `rest` are the entries the run did not reach.
async fn summarize<P: Publisher>(
    machine: &ReplayMachine,
    publisher: &mut P,
    mut outcome: Outcome,
    flush_failed: Option<String>,
    rest: impl Iterator,
) -> ReplaySummary {
    // A flush failure makes every message of this run suspect, whatever the outcome was: after
    // a pause, `--continue` would skip lines that were never written. (A recorded run flushed
    // each message: only the one whose flush failed did not go out.)
    let mut resume = machine.resume_point();
    if let Some(error) = flush_failed {
        outcome = Outcome::FlushFailed { error };
    } else if let Err(e) = publisher.flush().await {
        outcome = Outcome::FlushFailed {
            error: e.to_string(),
        };
        let stats = machine.stats();
        resume = ResumePoint {
            skip: stats.skipped,
            sent_again: stats.published,
        };
    }
    let remaining = rest.count() as u64;
    ReplaySummary {
        outcome,
        stats: machine.stats(),
        remaining,
        resume,
    }
}
