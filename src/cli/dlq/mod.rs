//! `migrate dlq ...`: dead letters — triage an export, record decisions, replay, alert signals,
//! the weekly report, retention, and the drain gate's reading. One file per subcommand; this one
//! holds the subcommands' list and runs the one given.
//!
//! Exports are NDJSON files of envelopes (docs/dlq.md), or `-` for standard input. Decisions and
//! seen signatures live in the state store (`--state`), per queue (`--queue`).

use clap::Subcommand;

mod close;
mod decisions;
mod export;
mod gate;
mod generate;
mod output;
mod purge;
mod queue;
mod replay;
mod replay_args;
mod replay_ledger;
mod replay_progress;
mod replay_summary;
mod replay_target;
mod report;
mod triage;
mod watch;

use close::CloseArgs;
use decisions::DecisionsArgs;
use gate::GateArgs;
use generate::GenerateArgs;
use purge::PurgeArgs;
use replay_args::ReplayArgs;
use report::ReportArgs;
use triage::TriageArgs;
use watch::WatchArgs;

use super::{CliResult, Ctx};
use close::close;
use decisions::decisions;
use gate::gate_cmd;
use generate::generate;
use purge::purge;
use replay::replay_cmd;
use report::report_cmd;
use triage::triage;
use watch::watch;

#[derive(Debug, Subcommand)]
pub enum DlqCmd {
    /// Group an export by cause in one streaming pass and print a report that fits a screen.
    ///
    /// Groups by (errorClass, consumerVersion, signature v1), largest first, with the span
    /// between the first and last firstAttemptAt and a hint: a short span is an incident that
    /// ended (replay is likely right), a long one a live defect (replaying only sends them back).
    /// `--format json` prints the seed's array (errorClass, consumerVersion, signature, count,
    /// firstSeen, lastSeen, spanHours, sample).
    ///
    /// Lines that are not envelopes are listed on stderr with their numbers and skipped.
    /// Exit codes: 0 every line was an envelope; 1 some lines were skipped (the report covers the
    /// rest); 2 the input cannot be read or an option is invalid.
    #[command(verbatim_doc_comment)]
    Triage(TriageArgs),
    /// Record a decision closing a group without replay, for a reason from a closed list.
    Close(CloseArgs),
    /// List the recorded decisions, oldest first.
    Decisions(DecisionsArgs),
    /// Republish the original payloads of a group (or a whole file), rate limited, with a canary
    /// batch, origin headers and an automatic stop.
    ///
    /// Each message carries x-replay-of (its deadLetteredAt) and x-replay-reason (its errorClass).
    /// After the canary batch (default 50) the run stops: look at the effect, then run the same
    /// command with --continue (which skips the canary batch and does not pause again). A failure
    /// during the canary stops the run at once. The run aborts itself when its own failure rate
    /// passes --abort-failure-rate, or when the NDJSON output cannot be flushed; it then says how
    /// many entries went out and the --skip N that goes on without losing any. Entries first
    /// attempted longer ago than --max-age (or of unknown age) are refused unless --force-old.
    /// A replay that reaches the end is recorded as a decision (action replay) for each group
    /// all of whose messages it published; a group with a message that failed to publish (under
    /// the abort threshold) stays open, and the run says which and the --skip N to send them again.
    /// Each message is recorded in the state store (per --queue and destination) before it is
    /// published, and marked sent once confirmed: a re-run skips what went out, so that whatever
    /// failed, no message is sent twice. One whose fate was never learnt (a run killed, a publish
    /// not confirmed) is in doubt and is not sent again unless --resend-in-doubt. A store that
    /// cannot record refuses before the first publish.
    ///
    /// Where the messages go: NDJSON lines on standard output by default; --output FILE appends
    /// them to a file. --migration NAME publishes them to that migration's brokers instead (not
    /// with --output): each to brokers.old.queue or brokers.new.queue (or stream) of its stored
    /// plan, the side its aggregate key's slice routes to under the routing the store holds now
    /// (followed while the run goes on), as a producer would send it, so that a key's messages
    /// are never on both sides. There a message also carries x-qm-key and the route stamp
    /// (x-qm-route: replay, x-qm-producer: migrate-dlq-replay), and counts as published only
    /// once the broker confirmed it; a publish not confirmed, or a broker that cannot be
    /// reached, counts as a failure. The key is read from the JSON payload: the field
    /// --key-field NAME (or a /pointer) when given, else the plan's bridge.key (a JSON field);
    /// a message whose key cannot be read is not published and counts as a failure.
    /// Each message also carries x-qm-dedup-key, built from its payload by --dedup-key TEMPLATE
    /// (e.g. 'order.paid:{orderId}:{version}', as the producers build it): consumers deduplicate
    /// by it, and a stopped replay continued with --skip N, or run again, sends some messages a
    /// second time. A message whose dedup key cannot be built is not published and counts as a
    /// failure; --no-dedup-key publishes without one (one of the two is required). Once a
    /// message of a key failed, the later messages of that key in the run are not sent either
    /// (counted as failures): they would arrive before it, which can only come back on a re-run.
    ///
    /// Exit codes: 0 completed; 1 aborted (a canary failure, the failure rate, a failed flush),
    /// or completed with messages that failed to publish;
    /// 2 invalid input or refused (too old); 3 paused after the canary batch.
    #[command(verbatim_doc_comment)]
    Replay(ReplayArgs),
    /// Export the alert signals as Prometheus text: inflow per minute, new signatures, the age
    /// of the oldest unclosed dead letter.
    Watch(WatchArgs),
    /// The weekly review in Markdown, for the queue's named owner.
    Report(ReportArgs),
    /// Retention: drop dead letters older than a duration from an export (and, with
    /// --decisions, decisions taken before it).
    Purge(PurgeArgs),
    /// The drain gate's reading: passes when the old queue's export is empty or every group in
    /// it is closed or replayed. Exit codes: 0 passes, 3 gated, 2 invalid input.
    Gate(GateArgs),
    /// Write a generated export (for rehearsals and benchmarks).
    #[command(hide = true)]
    Generate(GenerateArgs),
}

pub async fn run(ctx: &Ctx, cmd: DlqCmd) -> CliResult {
    match cmd {
        DlqCmd::Triage(a) => triage(ctx, a).await,
        DlqCmd::Close(a) => close(ctx, a).await,
        DlqCmd::Decisions(a) => decisions(ctx, a).await,
        DlqCmd::Replay(a) => replay_cmd(ctx, a).await,
        DlqCmd::Watch(a) => watch(ctx, a).await,
        DlqCmd::Report(a) => report_cmd(ctx, a).await,
        DlqCmd::Purge(a) => purge(ctx, a).await,
        DlqCmd::Gate(a) => gate_cmd(ctx, a).await,
        DlqCmd::Generate(a) => generate(ctx, a),
    }
}
