//! `migrate dlq close`: record a decision closing a group without replay.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use super::export::run_triage;
use super::queue::{QueueArg, queue_of_migration};
use crate::cli::{CliError, CliResult, Ctx, print_json, to_stdout};
use crate::dlq::disposition::{Action, CloseReason, Disposition};
use crate::dlq::signature::SignatureVersion;
use crate::dlq::triage::TriageOptions;
use crate::store::dispositions::DispositionStore;

const REASONS_HELP: &str = "entity_deleted (the referenced entity no longer exists), \
window_expired (the event lost its temporal validity), producer_retired (a producer version's \
format that no longer exists), already_processed (another path produced the same effect), \
fixed_in_code (defect fixed; the old messages are irrelevant)";

#[derive(Debug, Args)]
pub struct CloseArgs {
    /// The group's signature (as triage prints it).
    #[arg(long)]
    pub signature: String,
    /// The group's errorClass.
    #[arg(long = "class")]
    pub class: String,
    /// The group's consumerVersion.
    #[arg(long = "version")]
    pub version: String,
    /// Why it is closed without replay. One of:
    #[arg(long, value_parser = parse_reason, long_help = format!("Why it is closed without replay: {REASONS_HELP}."))]
    pub reason: CloseReason,
    /// Who decides.
    #[arg(long)]
    pub by: String,
    /// Free text beside the reason (a ticket, a PR).
    #[arg(long)]
    pub note: Option<String>,
    /// The export the group is in: records its count and first/last seen (without it, the
    /// decision covers entries first attempted up to now).
    #[arg(long)]
    pub from: Option<String>,
    #[command(flatten)]
    pub queue: QueueArg,
    /// The migration whose drain gate the decision is for: without --queue, the decision is
    /// recorded under its plan's brokers.old.dead_letter (the queue that gate reads).
    #[arg(long, value_name = "NAME")]
    pub migration: Option<String>,
    /// Print the recorded decision as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_reason(s: &str) -> Result<CloseReason, String> {
    CloseReason::parse(s).map_err(|e| e.to_string())
}

pub(super) async fn close(ctx: &Ctx, mut a: CloseArgs) -> CliResult {
    let now = ctx.now_ms()?;
    if let Some(name) = &a.migration {
        queue_of_migration(ctx, &mut a.queue, name).await?;
    }
    let queue = a.queue.name().to_string();
    let disposition = match &a.from {
        Some(file) => {
            let report = run_triage(file, TriageOptions::default())?;
            let group = report
                .groups
                .iter()
                .find(|g| {
                    g.signature == a.signature
                        && g.error_class == a.class
                        && g.consumer_version == a.version
                })
                .ok_or_else(|| {
                    let near: Vec<String> = report
                        .groups
                        .iter()
                        .filter(|g| g.signature == a.signature)
                        .map(|g| {
                            format!(
                                "--class {:?} --version {:?}",
                                g.error_class, g.consumer_version
                            )
                        })
                        .collect();
                    CliError::input(format!(
                        "no group ({}, {}, {:?}) in {file}{}",
                        a.class,
                        a.version,
                        a.signature,
                        if near.is_empty() {
                            " (see `migrate dlq triage` for the signatures it has)".to_string()
                        } else {
                            format!("; that signature is there with {}", near.join(", "))
                        }
                    ))
                })?;
            Disposition::close(&queue, group, a.reason, &a.by, now, a.note)
                .map_err(|e| CliError::input(e.to_string()))?
        }
        None => {
            if a.by.trim().is_empty() {
                return Err(CliError::input("a decision needs who took it (--by)"));
            }
            Disposition {
                id: 0,
                queue,
                signature: a.signature,
                signature_version: SignatureVersion::V1.as_str().to_string(),
                error_class: a.class,
                consumer_version: a.version,
                affected_count: None,
                first_seen: None,
                last_seen: None,
                action: Action::Close(a.reason),
                decided_by: a.by.trim().to_string(),
                decided_at_ms: now,
                note: a.note,
            }
        }
    };
    let store = ctx.store().await?;
    let id = store.record(&disposition).await?;
    let recorded = Disposition { id, ..disposition };
    if a.json {
        print_json(&recorded)?;
    } else {
        to_stdout(|out| {
            writeln!(
                out,
                "recorded #{id}: {} {} {:?} closed as {} by {}{}",
                recorded.error_class,
                recorded.consumer_version,
                recorded.signature,
                a.reason,
                recorded.decided_by,
                recorded
                    .affected_count
                    .map(|n| format!(" ({n} entries)"))
                    .unwrap_or_default()
            )
        })?;
    }
    Ok(ExitCode::SUCCESS)
}
