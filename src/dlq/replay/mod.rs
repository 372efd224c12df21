//! Replay: republish dead letters' original payloads, safely (docs/design.md, "Dead letters";
//! the dead-letter article's `replay`).
//!
//! What a run guarantees:
//! - **rate limit** — messages are spaced `1000 / rate` ms apart (drift-free: message *i* goes
//!   at `start + i × interval` at the earliest), so current traffic keeps priority;
//! - **canary** — after the first `canary` messages (default 50), when more remain, the run
//!   stops and hands control back: look at the effect, then run again with `--continue`, which
//!   skips the canary batch and does not pause again. A failure during the canary stops the run
//!   at once ([`Outcome::CanaryFailed`]), so `--continue` (which skips by position) is only ever
//!   offered after a canary that went out whole;
//! - **origin headers** — `x-replay-of` = `deadLetteredAt`, `x-replay-reason` = `errorClass`, so a
//!   failure of a replayed message is a known recurrence, not a new case;
//! - **automatic stop** — once at least `min_sample` messages (default: the canary size) went,
//!   the run aborts as soon as its own failure rate exceeds `abort_failure_rate` (default 0.2);
//! - **validity guard** — an entry first attempted longer than `max_age` ago is refused unless
//!   forced: a 14-month-old stock reservation replayed today debits stock sold long ago. An entry
//!   whose age cannot be computed is refused too (unless forced): the guard cannot vouch for it
//!   ([`ReplayPolicy::judge_age`], the one age check, also run on a whole file before a replay);
//! - **resume point** — every run that stops early says how many leading entries of the selection
//!   are known to have gone out ([`ResumePoint`]): a later run given that number as `skip`
//!   neither loses an entry nor, when no failure came before the stop, sends one twice;
//! - **never twice** — [`run_recorded`] claims each entry in a [`Ledger`] before publishing it
//!   and settles the claim once the outcome is known (flushed, for NDJSON): a later run skips
//!   what went out, and does not send again what was never settled (in doubt). A ledger that
//!   cannot record stops the run before the publish ([`Outcome::NotRecorded`]).
//!
//! [`ReplayMachine`] is the decision logic, pure (time is an argument). [`run`] drives it with a
//! [`Publisher`] and a [`Pacer`] (the clock and sleeping), both traits, so tests run it on a fake
//! clock. [`NdjsonPublisher`] writes each message as one JSON line to any `Write`;
//! `dlq::broker_publisher::BrokerPublisher` publishes it to a migration's brokers.
//!
//! The folder by role: `policy` (how to replay), `machine` (the pure decision logic), `traits`
//! (what a run is driven with), `ndjson` (a publisher), `tally` (per-group counts), `driver`
//! (the async run), `error`; every item is re-exported here, `crate::dlq::replay::X`.

mod driver;
mod error;
mod machine;
mod ndjson;
mod policy;
mod tally;
mod traits;

pub use driver::{ReplaySummary, run, run_recorded};
pub use error::{PublishError, ReplayError};
pub use machine::{Admission, Outcome, ReplayMachine, ReplayStats, ResumePoint};
pub use ndjson::NdjsonPublisher;
pub use policy::{Age, ReplayPolicy};
pub use tally::{GroupCount, GroupTally};
pub use traits::{Event, Ledger, Pacer, Publisher, Recorded, ReplayMessage};

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::dlq::envelope::{DeadLetter, Payload};
    use crate::time::format_timestamp;

    struct FakeClock {
        now: i64,
        sleeps: Vec<i64>,
    }

    impl Pacer for FakeClock {
        fn now_ms(&self) -> i64 {
            self.now
        }
        async fn sleep_until(&mut self, at_ms: i64) {
            self.sleeps.push(at_ms);
            self.now = self.now.max(at_ms);
        }
    }

    /// Fails the messages whose index is in `fail` (the index of the message in this run), and
    /// the flush when `flush_fails`.
    struct Flaky {
        n: usize,
        fail: fn(usize) -> bool,
        /// Answers [`PublishError::KeyHeld`] for these (the index in this run).
        held: fn(usize) -> bool,
        flush_fails: bool,
        out: NdjsonPublisher<Vec<u8>>,
    }

    impl Publisher for Flaky {
        async fn publish(&mut self, m: &ReplayMessage<'_>) -> Result<(), PublishError> {
            self.n += 1;
            if (self.fail)(self.n - 1) {
                return Err(PublishError::Rejected("nack".into()));
            }
            if (self.held)(self.n - 1) {
                return Err(PublishError::KeyHeld("K".into()));
            }
            self.out.publish(m).await
        }
        async fn flush(&mut self) -> Result<(), PublishError> {
            if self.flush_fails {
                return Err(PublishError::Io(std::io::Error::from(
                    std::io::ErrorKind::BrokenPipe,
                )));
            }
            Ok(())
        }
    }

    /// A disk that takes `room` more bytes, then writes what fits and fails; `room` can grow.
    struct FillingDisk {
        written: Vec<u8>,
        room: usize,
    }

    impl Write for FillingDisk {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
            }
            let n = buf.len().min(self.room);
            self.written.extend_from_slice(&buf[..n]);
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Regression: a line whose write failed half way (a full disk) stayed in the output as a
    /// fragment, and once the disk had room again the next line was written right after it:
    /// the consumer of the file read one line of garbage for two messages.
    #[test]
    fn a_line_cut_by_a_full_disk_is_not_followed_by_more_lines() {
        let list = entries(3, 1_000);
        let mut out = NdjsonPublisher::new(FillingDisk {
            written: Vec::new(),
            room: usize::MAX,
        });
        let first = futures_lite_block_on(out.publish(&ReplayMessage::of(&list[0])));
        assert!(first.is_ok());
        let whole = out.out.written.len();
        out.out.room = 10;
        let cut = futures_lite_block_on(out.publish(&ReplayMessage::of(&list[1])));
        assert!(cut.is_err(), "the disk filled");
        out.out.room = usize::MAX;
        let after = futures_lite_block_on(out.publish(&ReplayMessage::of(&list[2])));
        assert!(after.is_err(), "nothing is written after a fragment");
        assert!(futures_lite_block_on(out.flush()).is_err());
        let written = out.into_inner().written;
        assert_eq!(
            written.len(),
            whole + 10,
            "the first line and the fragment only"
        );
    }

    const NOW: i64 = 1_772_445_600_000;

    /// A publisher that fails the messages `fail` picks, answers [`PublishError::KeyHeld`] for
    /// those `held` picks (by index in the run), and fails the flush when `flush_fails`.
    fn flaky(fail: fn(usize) -> bool, held: fn(usize) -> bool, flush_fails: bool) -> Flaky {
        Flaky {
            n: 0,
            fail,
            held,
            flush_fails,
            out: NdjsonPublisher::new(Vec::new()),
        }
    }

    /// A fake clock at [`NOW`] that has not slept.
    fn clock() -> FakeClock {
        FakeClock {
            now: NOW,
            sleeps: Vec::new(),
        }
    }

    fn entries(n: usize, age_ms: i64) -> Vec<DeadLetter> {
        (0..n)
            .map(|i| DeadLetter {
                payload: Payload::Bytes(if i % 2 == 0 { vec![b'a'] } else { vec![0xFF] }),
                error_class: "dependency_timeout".into(),
                error_message: "t".into(),
                consumer_version: "1".into(),
                trace_id: None,
                attempts: 3,
                first_attempt_at: format_timestamp(NOW - age_ms),
                dead_lettered_at: format_timestamp(NOW - age_ms + i as i64),
            })
            .collect()
    }

    fn go(
        policy: ReplayPolicy,
        list: Vec<DeadLetter>,
        fail: fn(usize) -> bool,
    ) -> (ReplaySummary, FakeClock, Vec<u8>) {
        go_flush(policy, list, fail, false)
    }

    fn go_flush(
        policy: ReplayPolicy,
        list: Vec<DeadLetter>,
        fail: fn(usize) -> bool,
        flush_fails: bool,
    ) -> (ReplaySummary, FakeClock, Vec<u8>) {
        let mut machine = ReplayMachine::new(policy).expect("valid");
        let mut publisher = flaky(fail, |_| false, flush_fails);
        let mut clock = clock();
        let summary = futures_lite_block_on(run(
            &mut machine,
            list,
            &mut publisher,
            &mut clock,
            |_: &Event<'_, DeadLetter>, _| {},
        ));
        (summary, clock, publisher.out.into_inner())
    }

    /// The `x-replay-of` of each line written (which entry it was: `entries` numbers them).
    fn sent(out: &[u8]) -> Vec<String> {
        std::str::from_utf8(out)
            .expect("utf8")
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("json");
                v["headers"]["x-replay-of"]
                    .as_str()
                    .expect("header")
                    .to_string()
            })
            .collect()
    }

    fn futures_lite_block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn pauses_after_the_canary_then_continues_without_pausing() {
        let (s, clock, out) = go(ReplayPolicy::default(), entries(120, 3_600_000), |_| false);
        assert_eq!(s.outcome, Outcome::PausedAfterCanary);
        assert_eq!((s.stats.published, s.remaining), (50, 70));
        // 20/s: 50 ms apart, from the start.
        assert_eq!(clock.sleeps[0], NOW);
        assert_eq!(clock.sleeps[49], NOW + 49 * 50);
        let first: serde_json::Value = serde_json::from_str(
            std::str::from_utf8(&out)
                .expect("utf8")
                .lines()
                .next()
                .expect("line"),
        )
        .expect("json");
        assert_eq!(first["headers"]["x-replay-reason"], "dependency_timeout");
        assert_eq!(
            first["headers"]["x-replay-of"],
            format_timestamp(NOW - 3_600_000)
        );
        let second = std::str::from_utf8(&out)
            .expect("utf8")
            .lines()
            .nth(1)
            .expect("line")
            .to_string();
        assert!(
            second.contains(r#""payload":{"base64":"/w=="}"#),
            "{second}"
        );

        let resume = ReplayPolicy {
            resume: true,
            ..ReplayPolicy::default()
        };
        let (s, _, _) = go(resume, entries(120, 3_600_000), |_| false);
        assert_eq!(s.outcome, Outcome::Completed);
        assert_eq!(
            (s.stats.published, s.stats.skipped, s.remaining),
            (70, 50, 0)
        );
    }

    #[test]
    fn exactly_the_canary_size_completes() {
        let (s, _, _) = go(ReplayPolicy::default(), entries(50, 1000), |_| false);
        assert_eq!(s.outcome, Outcome::Completed);
    }

    /// Regression: the messages held behind one failed message of their key counted as
    /// failures, so one key with many dead letters aborted the replay of every other key.
    #[test]
    fn messages_held_behind_one_failure_of_their_key_do_not_abort_the_run() {
        let policy = ReplayPolicy {
            canary: 0,
            min_sample: 10,
            ..ReplayPolicy::default()
        };
        let mut machine = ReplayMachine::new(policy).expect("valid");
        // Message 2 fails; 3..=40 are its key's later messages (held); 41..100 go.
        let mut publisher = flaky(|i| i == 2, |i| (3..=40).contains(&i), false);
        let mut clock = clock();
        let mut seen_held = 0;
        let summary = futures_lite_block_on(run(
            &mut machine,
            entries(100, 1000),
            &mut publisher,
            &mut clock,
            |e: &Event<'_, DeadLetter>, _| {
                if let Event::Held(_, key) = e {
                    assert_eq!(*key, "K");
                    seen_held += 1;
                }
            },
        ));
        assert_eq!(summary.outcome, Outcome::Completed);
        assert_eq!(
            (
                summary.stats.published,
                summary.stats.failed,
                summary.stats.held
            ),
            (61, 1, 38)
        );
        assert_eq!(seen_held, 38);
        // A later run starts at the failed message, and sends again what went after it.
        assert_eq!(
            summary.resume,
            ResumePoint {
                skip: 2,
                sent_again: 59
            }
        );
        // Held messages take no pacing slot: 62 sends, 62 slots.
        assert_eq!(clock.sleeps.len(), 100);
        let last = *clock.sleeps.last().expect("slept");
        let interval = ReplayPolicy::default().interval_ms();
        assert_eq!(last, NOW + (61.0 * interval).ceil() as i64);
    }

    #[test]
    fn aborts_on_its_own_failure_rate_after_the_sample() {
        // Every 4th fails (25% > 20%), no canary: checked from message 50 on.
        let policy = ReplayPolicy {
            canary: 0,
            ..ReplayPolicy::default()
        };
        let (s, _, _) = go(policy, entries(200, 1000), |i| i % 4 == 3);
        assert!(matches!(s.outcome, Outcome::Aborted { failure_rate } if failure_rate > 0.2));
        assert_eq!(s.stats.processed(), 50);
        assert_eq!(s.remaining, 150);
        // During the canary the first failure stops the run (never a pause).
        let (s, _, _) = go(ReplayPolicy::default(), entries(200, 1000), |i| i % 2 == 0);
        assert_eq!(s.outcome, Outcome::CanaryFailed);
        assert_eq!((s.stats.published, s.stats.failed), (0, 1));
        // A continued run with the same failures aborts at its own sample.
        let resume = ReplayPolicy {
            resume: true,
            ..ReplayPolicy::default()
        };
        let (s, _, _) = go(resume, entries(200, 1000), |i| i % 2 == 0);
        assert!(matches!(s.outcome, Outcome::Aborted { .. }));
    }

    #[test]
    fn refuses_old_entries_unless_forced() {
        let old = 8 * 86_400_000;
        let (s, _, out) = go(ReplayPolicy::default(), entries(3, old), |_| false);
        assert!(matches!(s.outcome, Outcome::RefusedTooOld { age_ms, .. } if age_ms == old));
        assert!(out.is_empty());
        let forced = ReplayPolicy {
            force_old: true,
            ..ReplayPolicy::default()
        };
        let (s, _, _) = go(forced, entries(3, old), |_| false);
        assert_eq!(s.outcome, Outcome::Completed);
    }

    /// All `n` entries of `entries(n, _)`, by `x-replay-of`.
    fn all(n: usize, age_ms: i64) -> Vec<String> {
        entries(n, age_ms)
            .into_iter()
            .map(|e| e.dead_lettered_at)
            .collect()
    }

    #[test]
    fn replay_continue_does_not_skip_a_failed_canary_entry() {
        // The canary's 4th message fails: the run stops there instead of pausing, so --continue
        // (which would skip the whole canary batch by position) is never offered.
        let (s, _, out) = go(ReplayPolicy::default(), entries(120, 1000), |i| i == 3);
        assert_eq!(s.outcome, Outcome::CanaryFailed);
        assert_eq!(
            (s.stats.published, s.stats.failed, s.remaining),
            (3, 1, 116)
        );
        assert_eq!(
            s.resume,
            ResumePoint {
                skip: 3,
                sent_again: 0
            }
        );
        // Resumed where it says (a new canary, then --continue), every entry goes exactly once.
        let resumed = ReplayPolicy {
            skip: s.resume.skip,
            ..ReplayPolicy::default()
        };
        let (s2, _, out2) = go(resumed.clone(), entries(120, 1000), |_| false);
        assert_eq!(s2.outcome, Outcome::PausedAfterCanary);
        let (s3, _, out3) = go(
            ReplayPolicy {
                resume: true,
                ..resumed
            },
            entries(120, 1000),
            |_| false,
        );
        assert_eq!(s3.outcome, Outcome::Completed);
        assert_eq!(s3.stats.skipped, 53);
        let mut everything = sent(&out);
        everything.extend(sent(&out2));
        everything.extend(sent(&out3));
        assert_eq!(everything, all(120, 1000));
    }

    #[test]
    fn replay_flush_failure_after_the_canary_is_not_a_pause() {
        // The canary's lines sit in a buffer and the flush fails: nothing says they went out, so
        // the run must not offer --continue (which would skip them).
        let (s, _, _) = go_flush(ReplayPolicy::default(), entries(120, 1000), |_| false, true);
        assert!(
            matches!(&s.outcome, Outcome::FlushFailed { error } if error.contains("broken pipe")),
            "{:?}",
            s.outcome
        );
        assert_eq!(
            s.resume,
            ResumePoint {
                skip: 0,
                sent_again: 50
            }
        );
        // On a continued run the resume point keeps what the earlier run sent.
        let resume = ReplayPolicy {
            resume: true,
            ..ReplayPolicy::default()
        };
        let (s, _, _) = go_flush(resume, entries(120, 1000), |_| false, true);
        assert!(matches!(s.outcome, Outcome::FlushFailed { .. }));
        assert_eq!(
            s.resume,
            ResumePoint {
                skip: 50,
                sent_again: 70
            }
        );
    }

    #[test]
    fn replay_abort_gives_a_resume_point_that_loses_nothing() {
        // No canary, every 4th fails: aborted at 50 with 12 failures, the first at entry 3.
        let policy = ReplayPolicy {
            canary: 0,
            ..ReplayPolicy::default()
        };
        let (s, _, out) = go(policy.clone(), entries(200, 1000), |i| i % 4 == 3);
        assert!(matches!(s.outcome, Outcome::Aborted { .. }));
        assert_eq!((s.stats.published, s.stats.failed), (38, 12));
        // Entries 0–2 went; 35 of those after the first failure went too (and go again).
        assert_eq!(
            s.resume,
            ResumePoint {
                skip: 3,
                sent_again: 35
            }
        );
        let (s2, _, out2) = go(
            ReplayPolicy {
                skip: s.resume.skip,
                ..policy
            },
            entries(200, 1000),
            |_| false,
        );
        assert_eq!(s2.outcome, Outcome::Completed);
        let mut everything: std::collections::BTreeSet<String> = sent(&out).into_iter().collect();
        everything.extend(sent(&out2));
        assert_eq!(everything.len(), 200, "no entry lost");
        assert_eq!(sent(&out).len() + sent(&out2).len(), 200 + 35);
        // A run that completes has nothing to resume.
        assert_eq!(s2.resume.skip, 200);
    }

    #[test]
    fn replay_refuses_an_entry_whose_first_attempt_cannot_be_read() {
        let mut list = entries(3, 1000);
        list[1].first_attempt_at = "not a time".into();
        let (s, _, out) = go(ReplayPolicy::default(), list.clone(), |_| false);
        assert_eq!(
            s.outcome,
            Outcome::RefusedUnknownAge {
                first_attempt_at: "not a time".into()
            }
        );
        assert_eq!(sent(&out).len(), 1, "nothing from the unknown one on");
        let forced = ReplayPolicy {
            force_old: true,
            ..ReplayPolicy::default()
        };
        let (s, _, _) = go(forced, list, |_| false);
        assert_eq!(s.outcome, Outcome::Completed);
        // An instant so far away that now − it overflows is an unknown age, not a negative one.
        let mut machine = ReplayMachine::new(ReplayPolicy::default()).expect("valid");
        assert!(matches!(
            machine.admit(Some(i64::MIN), "far", NOW),
            Admission::Stop(Outcome::RefusedUnknownAge { .. })
        ));
        assert!(matches!(
            machine.admit(Some(i64::MIN + 1), "far", NOW),
            Admission::Stop(Outcome::RefusedUnknownAge { .. })
        ));
    }

    /// The one age check: the pre-scan of a file (`dlq::refused`) and [`ReplayMachine::admit`]
    /// both ask [`ReplayPolicy::judge_age`].
    #[test]
    fn the_validity_guard_admits_up_to_max_age_and_refuses_past_it_or_without_an_age() {
        let policy = ReplayPolicy {
            max_age_ms: Some(1000),
            ..ReplayPolicy::default()
        };
        assert_eq!(policy.judge_age(Some(NOW - 1000), NOW), Age::Admitted);
        assert_eq!(
            policy.judge_age(Some(NOW - 1001), NOW),
            Age::TooOld { age_ms: 1001 }
        );
        assert_eq!(policy.judge_age(None, NOW), Age::Unknown);
        assert_eq!(policy.judge_age(Some(i64::MIN), NOW), Age::Unknown);
        let forced = ReplayPolicy {
            force_old: true,
            ..policy.clone()
        };
        assert_eq!(forced.judge_age(None, NOW), Age::Admitted);
        let unbounded = ReplayPolicy {
            max_age_ms: None,
            ..policy
        };
        assert_eq!(unbounded.judge_age(Some(i64::MIN), NOW), Age::Admitted);
    }

    #[test]
    fn replay_pacing_does_not_overflow_at_a_tiny_rate() {
        let policy = ReplayPolicy {
            rate_per_second: 1e-300,
            ..ReplayPolicy::default()
        };
        let mut machine = ReplayMachine::new(policy).expect("valid");
        assert_eq!(
            machine.admit(Some(NOW), "now", NOW),
            Admission::Publish { not_before_ms: NOW }
        );
        assert_eq!(machine.record(true, true), None);
        assert_eq!(
            machine.admit(Some(NOW), "now", NOW),
            Admission::Publish {
                not_before_ms: i64::MAX
            }
        );
    }

    #[test]
    fn policy_is_checked() {
        assert!(
            ReplayMachine::new(ReplayPolicy {
                rate_per_second: 0.0,
                ..ReplayPolicy::default()
            })
            .is_err()
        );
        assert!(
            ReplayMachine::new(ReplayPolicy {
                abort_failure_rate: 2.0,
                ..ReplayPolicy::default()
            })
            .is_err()
        );
    }

    /// A ledger in memory: `claims` answers per entry index (by `deadLetteredAt` order), what
    /// was settled, and a claim or settle that fails from a chosen call on.
    #[derive(Default)]
    struct Book {
        /// Answers for the entries an earlier run touched (by `deadLetteredAt`).
        earlier: std::collections::HashMap<String, Recorded>,
        /// The n-th claim (from 0) and every later one fail.
        claim_fails_from: Option<usize>,
        /// The n-th settle (from 0) and every later one fail.
        settle_fails_from: Option<usize>,
        claims: usize,
        settles: usize,
        /// (deadLetteredAt, sent) of each settle that succeeded.
        settled: Vec<(String, bool)>,
    }

    impl Ledger<DeadLetter> for Book {
        async fn claim(&mut self, e: &DeadLetter) -> Result<Recorded, String> {
            self.claims += 1;
            if self.claim_fails_from.is_some_and(|n| self.claims > n) {
                return Err("the store is read-only".into());
            }
            Ok(self
                .earlier
                .get(&e.dead_lettered_at)
                .copied()
                .unwrap_or(Recorded::Claimed))
        }
        async fn settle(&mut self, e: &DeadLetter, sent: bool) -> Result<(), String> {
            self.settles += 1;
            if self.settle_fails_from.is_some_and(|n| self.settles > n) {
                return Err("the store went away".into());
            }
            self.settled.push((e.dead_lettered_at.clone(), sent));
            Ok(())
        }
    }

    fn go_recorded(
        list: Vec<DeadLetter>,
        fail: fn(usize) -> bool,
        flush_fails: bool,
        book: &mut Book,
    ) -> (ReplaySummary, Vec<u8>) {
        let mut machine = ReplayMachine::new(ReplayPolicy {
            canary: 0,
            ..ReplayPolicy::default()
        })
        .expect("valid");
        let mut publisher = flaky(fail, |_| false, flush_fails);
        let mut clock = clock();
        let summary = futures_lite_block_on(run_recorded(
            &mut machine,
            list,
            &mut publisher,
            &mut clock,
            book,
            |_: &Event<'_, DeadLetter>, _| {},
        ));
        (summary, publisher.out.into_inner())
    }

    /// Regression: a replay on a store that could not record published every message and only
    /// then failed to record the decision, so a re-run sent them all again.
    #[test]
    fn a_ledger_that_cannot_record_stops_the_run_before_the_first_publish() {
        let mut book = Book {
            claim_fails_from: Some(0),
            ..Book::default()
        };
        let (s, out) = go_recorded(entries(5, 60_000), |_| false, false, &mut book);
        assert!(out.is_empty(), "nothing may be published");
        assert_eq!(s.stats.published, 0);
        assert_eq!(
            s.outcome,
            Outcome::NotRecorded {
                error: "the store is read-only".into()
            }
        );
        assert_eq!(s.resume.skip, 0);
        assert!(book.settled.is_empty());
    }

    #[test]
    fn each_message_is_claimed_before_and_settled_after_and_what_went_out_earlier_is_skipped() {
        let list = entries(6, 60_000);
        let at = |i: usize| list[i].dead_lettered_at.clone();
        let mut book = Book::default();
        book.earlier.insert(at(1), Recorded::SentEarlier);
        book.earlier.insert(at(3), Recorded::InDoubt);
        // The third message this run publishes (entry 4) is refused by the broker.
        let (s, out) = go_recorded(list.clone(), |n| n == 2, false, &mut book);
        assert_eq!(s.outcome, Outcome::Completed);
        assert_eq!(sent(&out), [at(0), at(2), at(5)]);
        assert_eq!((s.stats.skipped, s.stats.in_doubt), (1, 1));
        assert_eq!(
            book.settled,
            [(at(0), true), (at(2), true), (at(4), false), (at(5), true)],
            "a refused message is settled as not sent: a later run sends it"
        );
        // Position 3 (in doubt) is where a run resuming by position starts.
        assert_eq!(s.resume.skip, 3);
    }

    #[test]
    fn a_publish_the_broker_did_not_confirm_stays_in_doubt() {
        struct Unconfirmed;
        impl Publisher for Unconfirmed {
            async fn publish(&mut self, _: &ReplayMessage<'_>) -> Result<(), PublishError> {
                Err(PublishError::Broker("no confirm within 5s".into()))
            }
            async fn flush(&mut self) -> Result<(), PublishError> {
                Ok(())
            }
        }
        let mut machine = ReplayMachine::new(ReplayPolicy {
            canary: 0,
            ..ReplayPolicy::default()
        })
        .expect("valid");
        let mut clock = clock();
        let mut book = Book::default();
        let s = futures_lite_block_on(run_recorded(
            &mut machine,
            entries(2, 60_000),
            &mut Unconfirmed,
            &mut clock,
            &mut book,
            |_: &Event<'_, DeadLetter>, _| {},
        ));
        assert_eq!(s.stats.failed, 2);
        assert_eq!(book.claims, 2);
        assert!(book.settled.is_empty(), "never settled: in doubt");
    }

    #[test]
    fn a_settle_that_fails_stops_the_run_after_the_message_that_went_out() {
        let list = entries(4, 60_000);
        let mut book = Book {
            settle_fails_from: Some(1),
            ..Book::default()
        };
        let (s, out) = go_recorded(list.clone(), |_| false, false, &mut book);
        assert_eq!(
            sent(&out),
            [
                list[0].dead_lettered_at.clone(),
                list[1].dead_lettered_at.clone()
            ]
        );
        assert_eq!(s.stats.published, 2);
        assert!(matches!(s.outcome, Outcome::NotRecorded { .. }), "{s:?}");
        assert_eq!(book.claims, 2, "nothing after it was claimed");
    }

    #[test]
    fn a_recorded_run_settles_a_message_as_sent_only_once_flushed() {
        let mut book = Book::default();
        let (s, _) = go_recorded(entries(3, 60_000), |_| false, true, &mut book);
        assert!(matches!(s.outcome, Outcome::FlushFailed { .. }), "{s:?}");
        assert_eq!(
            book.claims, 1,
            "the run stops at the first flush that fails"
        );
        assert_eq!(book.settled.len(), 1);
        assert!(!book.settled[0].1, "not flushed: not sent");
        assert_eq!((s.stats.published, s.resume.skip), (0, 0));
    }
}
