//! What `migrate dlq replay` says when the run ends: its counts, the entries in doubt, and per
//! outcome the result (exit code and message), with the `--skip N` that goes on without losing
//! an entry.

use std::fmt::Write as _;
use std::process::ExitCode;

use super::replay_args::ReplayArgs;
use crate::cli::{CliError, CliResult};
use crate::dlq::replay::{GroupTally, Outcome, ReplaySummary};
use crate::dlq::selection::GroupKey;

/// Failed messages a replay names on stderr before it only counts them.
pub(super) const SHOWN_FAILURES: u64 = 10;

/// `, N held behind a failed message of their key` when N > 0 (only a broker replay holds).
pub(super) fn held_behind(held: u64) -> String {
    if held == 0 {
        String::new()
    } else {
        format!(", {held} held behind a failed message of their key")
    }
}

/// The closing lines: on stderr at once when the messages themselves go to stdout, otherwise
/// gathered for the command's output.
pub(super) struct Said {
    to_stderr: bool,
    text: String,
}

impl Said {
    /// Lines said on stderr (`to_stderr`) or gathered.
    pub(super) fn new(to_stderr: bool) -> Said {
        Said {
            to_stderr,
            text: String::new(),
        }
    }

    /// Say one line.
    pub(super) fn say(&mut self, text: String) {
        if self.to_stderr {
            eprintln!("{text}");
        } else {
            self.text.push_str(&text);
            self.text.push('\n');
        }
    }

    /// The lines gathered, if any.
    pub(super) fn into_text(self) -> Option<String> {
        (!self.text.is_empty()).then_some(self.text)
    }
}

/// A run that ended, and what it was asked.
pub(super) struct Ending<'a> {
    pub(super) args: &'a ReplayArgs,
    pub(super) summary: &'a ReplaySummary,
    /// Failed publishes the broker did not confirm.
    pub(super) unconfirmed: u64,
    /// The messages went to standard output.
    pub(super) to_stdout: bool,
}

impl Ending<'_> {
    /// The counts (`per_side`: old and new, for a replay to the brokers; `invalid`: lines that
    /// are not envelopes, `first_error` the first of them), then the entries in doubt.
    pub(super) fn run_lines(
        &self,
        said: &mut Said,
        per_side: Option<(u64, u64)>,
        invalid: u64,
        first_error: Option<String>,
    ) {
        let s = &self.summary.stats;
        let first_error = first_error
            .map(|e| format!(" (the first: {e})"))
            .unwrap_or_default();
        said.say(format!(
            "replay: {} published{}, {} failed{}, {} skipped as sent by an earlier run, {} invalid lines skipped{first_error}, {} remaining",
            s.published,
            per_side
                .map(|(old, new)| format!(" ({old} to old, {new} to new)"))
                .unwrap_or_default(),
            s.failed,
            held_behind(s.held),
            s.skipped,
            invalid,
            self.summary.remaining
        ));
        if s.in_doubt > 0 {
            said.say(format!(
                "replay: {} entries not sent again: an earlier run sent them without learning whether they arrived (in doubt). \
                 Check the destination; if they did not arrive, run the same command with --resend-in-doubt",
                s.in_doubt
            ));
        }
        if self.unconfirmed > 0 {
            said.say(format!(
                "replay: {} of the failed messages were not confirmed by the broker: they may have arrived, so they are \
                 in doubt and a re-run does not send them again unless --resend-in-doubt (once you checked that they did not arrive)",
                self.unconfirmed
            ));
        }
    }

    /// A run that reached the end and recorded `recorded` groups as replayed: exit 0, or 1 when
    /// groups of `tally` stay open (a message failed or is in doubt).
    pub(super) fn completed(
        &self,
        said: &mut Said,
        tally: &GroupTally<GroupKey>,
        recorded: usize,
    ) -> CliResult {
        let s = &self.summary.stats;
        said.say(format!(
            "completed; recorded {recorded} group(s) as replayed"
        ));
        let open: Vec<String> = tally
            .unfinished()
            .map(|((class, version, signature), c)| {
                format!(
                    "{class} {version} {signature:?} ({} of {} failed{})",
                    c.failed,
                    c.failed + c.published + c.in_doubt,
                    if c.in_doubt > 0 {
                        format!(", {} in doubt", c.in_doubt)
                    } else {
                        String::new()
                    }
                )
            })
            .collect();
        if open.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
        // Under the abort threshold, but not every message went: the groups with a failure stay
        // open (the drain gate keeps holding on them).
        Err(CliError::new(
            1,
            format!(
                "completed with {} message(s) that failed to publish{}{} (see above): {} group(s) not recorded as replayed, they stay open: {}. {}",
                s.failed,
                held_behind(s.held),
                if s.in_doubt > 0 {
                    format!(" and {} in doubt", s.in_doubt)
                } else {
                    String::new()
                },
                open.len(),
                open.join("; "),
                self.resume_hint()
            ),
        ))
    }

    /// A run that did not reach the end: paused after the canary (exit 3), or stopped (exit 1,
    /// or 2 for a refusal) with what to do.
    pub(super) fn stopped(&self, said: &mut Said) -> CliResult {
        let a = self.args;
        let s = &self.summary.stats;
        let resume_hint = || self.resume_hint();
        match &self.summary.outcome {
            Outcome::Completed => Ok(ExitCode::SUCCESS),
            Outcome::PausedAfterCanary => {
                said.say(format!(
                    "paused after the canary batch of {}: check the effect, then run the same command with --continue",
                    a.canary
                ));
                Ok(ExitCode::from(3))
            }
            Outcome::CanaryFailed => Err(CliError::new(
                1,
                format!(
                    "aborted: a message of the canary batch failed to publish (see above); nothing after it was sent. {}",
                    resume_hint()
                ),
            )),
            Outcome::Aborted { failure_rate } => Err(CliError::new(
                1,
                format!(
                    "aborted: the replay's own failure rate is {:.1}% (threshold {:.1}%); nothing more was sent. {}",
                    failure_rate * 100.0,
                    a.abort_failure_rate * 100.0,
                    resume_hint()
                ),
            )),
            Outcome::FlushFailed { error } => Err(CliError::new(
                1,
                format!(
                    "aborted: the output could not be flushed ({error}): the message being written did not go out whole \
                     (the output may end in part of its line), the {} before it went out. Check {} before going on. {}",
                    s.published,
                    if self.to_stdout {
                        "what read standard output"
                    } else {
                        a.output.as_str()
                    },
                    resume_hint()
                ),
            )),
            Outcome::NotRecorded { error } if s.published == 0 && self.unconfirmed == 0 => {
                Err(CliError::new(
                    1,
                    format!(
                        "refused, nothing was sent: the state store cannot record what the replay sends ({error}). \
                 A replay records each entry before it publishes it, so that a re-run never sends one twice: \
                 fix the store (--state), then run the same command again"
                    ),
                ))
            }
            Outcome::NotRecorded { error } => Err(CliError::new(
                1,
                format!(
                    "stopped: the state store failed to record what the replay sends ({error}); nothing after it was sent. \
                 What went out before is recorded, and an entry whose outcome could not be recorded stays in doubt: \
                 once the store is fixed, run the same command again (it skips what went out). {}",
                    resume_hint()
                ),
            )),
            Outcome::RefusedTooOld {
                first_attempt_at,
                age_ms,
            } => Err(CliError::input(format!(
                "refused: an entry first attempted at {first_attempt_at} is {} old (more than --max-age); close it (--reason window_expired) or use --force-old. {}",
                crate::dlq::report::human_age(*age_ms),
                resume_hint()
            ))),
            Outcome::RefusedUnknownAge { first_attempt_at } => Err(CliError::input(format!(
                "refused: an entry's firstAttemptAt {first_attempt_at:?} gives no age, so --max-age cannot vouch for it; \
                 close its group, or replay anyway with --force-old. {}",
                resume_hint()
            ))),
        }
    }

    /// How to go on after a run that stopped early, without losing an entry: the exact `--skip`.
    fn resume_hint(&self) -> String {
        let r = self.summary.resume;
        let went = if r.skip == 0 {
            "No entry of the selection is known to have gone out".to_string()
        } else {
            format!("Entries 1-{} of the selection went out", r.skip)
        };
        let mut text = format!(
            "{went}: once the cause is fixed, run the same command with --skip {}{} \
             (--continue alone would skip the canary batch by position).",
            r.skip,
            if self.args.resume {
                " instead of --continue"
            } else {
                ""
            },
        );
        if r.sent_again > 0 {
            let _ = write!(
                text,
                " {} later entries went out too: they are recorded as sent, and a re-run skips them.",
                r.sent_again,
            );
        }
        text
    }
}
