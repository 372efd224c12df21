//! `migrate dlq replay`: the run put together from its parts: the options (`replay_args`), the
//! pre-scan of a file (`dlq::refused`), the selection (`dlq::selection`), the destination
//! (`replay_target`), the ledger (`replay_ledger`), the progress on stderr (`replay_progress`)
//! and the closing lines (`replay_summary`).

use super::export::open_input;
use super::output::emit;
use super::queue::{queue_decisions, queue_of_migration};
use super::replay_args::{GroupArgs, ReplayArgs};
use super::replay_ledger::StoreLedger;
use super::replay_progress::Progress;
use super::replay_summary::{Ending, Said};
use super::replay_target;
use crate::cli::{CliError, CliResult, Ctx, exit_after_printing};
use crate::dlq::pacer::TokioPacer;
use crate::dlq::refused::{ReplayRequest, prescan};
use crate::dlq::replay::{self, GroupTally, Outcome, ReplayMachine, ReplayPolicy};
use crate::dlq::replayed::replay_decisions;
use crate::dlq::selection::{GroupKey, Selection};

/// The group selected by `--class`, `--version` and `--signature` (all three, or none: the
/// whole file).
fn group_filter(g: &GroupArgs) -> Result<Option<GroupKey>, CliError> {
    match (&g.class, &g.version, &g.signature) {
        (Some(c), Some(v), Some(s)) => Ok(Some((c.clone(), v.clone(), s.clone()))),
        (None, None, None) => Ok(None),
        _ => Err(CliError::input(
            "a group is --class, --version and --signature together (or none of them, for the whole file)",
        )),
    }
}

/// The policy the options give.
fn policy(a: &ReplayArgs) -> ReplayPolicy {
    ReplayPolicy {
        rate_per_second: a.rate,
        canary: a.canary,
        abort_failure_rate: a.abort_failure_rate,
        min_sample: if a.canary > 0 { a.canary } else { 50 },
        max_age_ms: Some(crate::time::millis(a.max_age)),
        force_old: a.force_old,
        resume: a.resume,
        skip: a.skip,
    }
}

/// A file can be read twice: count its selection and refuse old entries before sending any.
/// How many entries it selects.
fn prescan_file(
    a: &ReplayArgs,
    filter: Option<GroupKey>,
    policy: &ReplayPolicy,
    now: i64,
) -> Result<u64, CliError> {
    let selection = Selection::new(open_input(&a.file)?, a.line_cap.bytes(), filter);
    let scan = prescan(selection, policy, now);
    if scan.count == 0 {
        return Err(CliError::input(format!(
            "nothing to replay: no entry of the selected group in {} (see `migrate dlq triage`)",
            a.file
        )));
    }
    let request = ReplayRequest {
        file: &a.file,
        max_age: a.max_age,
        by: &a.by,
        queue: a.queue.name(),
        group_given: a.group.class.is_some(),
    };
    match scan.refused.message(&request, scan.count) {
        Some(message) => Err(CliError::input(message)),
        None => Ok(scan.count),
    }
}

pub(super) async fn replay_cmd(ctx: &Ctx, mut a: ReplayArgs) -> CliResult {
    if a.by.trim().is_empty() {
        return Err(CliError::input("--by: who replays"));
    }
    let now = ctx.now_ms()?;
    if let Some(name) = &a.migration {
        queue_of_migration(ctx, &mut a.queue, name).await?;
    }
    let filter = group_filter(&a.group)?;
    let mut machine = ReplayMachine::new(policy(&a)).map_err(|e| CliError::input(e.to_string()))?;
    let total = if a.file == "-" {
        None
    } else {
        Some(prescan_file(&a, filter.clone(), machine.policy(), now)?)
    };

    let selection = Selection::new(open_input(&a.file)?, a.line_cap.bytes(), filter);
    let counters = selection.counters();
    let replay_to_stdout = a.migration.is_none() && a.output == "-";
    let mut publisher = replay_target::open(ctx, &a, replay_to_stdout).await?;
    // What the run sends is recorded before it goes: a re-run never sends an entry twice.
    let mut ledger = StoreLedger::new(
        ctx.store().await?,
        a.queue.name(),
        replay_target::destination(&a, replay_to_stdout),
        (&a.by, now),
        a.resend_in_doubt,
    );
    let mut pacer = TokioPacer::starting_at(now);
    let mut progress = Progress::new(total);
    let summary = replay::run_recorded(
        &mut machine,
        selection,
        &mut publisher,
        &mut pacer,
        &mut ledger,
        |event, stats| progress.observe(event, stats),
    )
    .await;
    let per_side = publisher.finish();
    // What earlier runs sent counts for the groups' decisions; what they left in doubt keeps
    // its group open.
    let Progress {
        mut tally,
        unconfirmed,
        ..
    } = progress;
    tally.merge(std::mem::take(&mut ledger.earlier));

    // What the replay says: on stderr when the messages themselves go to stdout, otherwise the
    // command's output, written once the decisions are recorded.
    let mut said = Said::new(replay_to_stdout);
    let ending = Ending {
        args: &a,
        summary: &summary,
        unconfirmed,
        to_stdout: replay_to_stdout,
    };
    ending.run_lines(
        &mut said,
        per_side,
        counters.skipped(),
        counters.first_error(),
    );
    let result = match (&summary.outcome, ledger.refused.take()) {
        (_, Some(why)) => match ledger.release().await {
            Ok(()) => Err(refused(&why, summary.stats.published)),
            Err(e) => Err(e.into()),
        },
        (Outcome::Completed, None) => {
            match record_replayed(ctx, &mut ledger, &a, &tally, now).await {
                Ok(recorded) => ending.completed(&mut said, &tally, recorded),
                Err(e) => Err(e),
            }
        }
        (_, None) => match ledger.release().await {
            Ok(()) => ending.stopped(&mut said),
            Err(e) => Err(e.into()),
        },
    };
    let printed = said.into_text().map_or(Ok(()), |text| emit(&text));
    // The replay's own outcome comes first; then whether its summary could be written.
    exit_after_printing(printed, result?)
}

/// A replay that met a group already decided (exit 4): nothing of that group was sent.
fn refused(why: &str, published: u64) -> CliError {
    let before = if published == 0 {
        "refused, nothing was sent".to_string()
    } else {
        format!(
            "stopped before that group: {published} message(s) of the groups before it were sent"
        )
    };
    CliError::new(
        4,
        format!(
            "{before}: {why}. One decision per group: see `migrate dlq decisions`; replay the \
             other groups alone (--class, --version, --signature)"
        ),
    )
}

/// Record every group the run replayed whole (none of its messages failed) as a decision
/// (action `replay`), turning the run's hold on the group into it; how many.
async fn record_replayed(
    ctx: &Ctx,
    ledger: &mut StoreLedger,
    a: &ReplayArgs,
    tally: &GroupTally<GroupKey>,
    now: i64,
) -> Result<usize, CliError> {
    let decided = queue_decisions(ctx, a.queue.name()).await?;
    let decisions = replay_decisions(tally, &decided, a.queue.name(), &a.by, now);
    Ok(ledger.decide(&decisions).await?)
}
