//! The options of `migrate dlq replay`.

use std::time::Duration;

use clap::Args;

use super::export::LineCapArg;
use super::queue::QueueArg;
use crate::cli::nonzero_duration;

#[derive(Debug, Args)]
pub struct GroupArgs {
    /// The group's signature (as triage prints it).
    #[arg(long)]
    pub signature: Option<String>,
    /// The group's errorClass.
    #[arg(long = "class")]
    pub class: Option<String>,
    /// The group's consumerVersion.
    #[arg(long = "version")]
    pub version: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The export (NDJSON), or - for standard input.
    #[arg(default_value = "-")]
    pub file: String,
    #[command(flatten)]
    pub group: GroupArgs,
    /// Where the messages go: an NDJSON file, or - for standard output.
    #[arg(long, default_value = "-", conflicts_with = "migration")]
    pub output: String,
    /// Publish to this migration's brokers instead of writing NDJSON: each message to
    /// brokers.old.queue or brokers.new.queue (or stream) of its stored plan, by its key's slice
    /// under the routing the store holds for it now, each publish confirmed by the broker.
    #[arg(long, value_name = "NAME")]
    pub migration: Option<String>,
    /// With --migration: the JSON field of the payload that holds the aggregate key (or a JSON
    /// pointer, /order/id). Default: the plan's bridge.key, when it is a JSON field.
    #[arg(long, value_name = "NAME", requires = "migration")]
    pub key_field: Option<String>,
    /// With --migration (required, or --no-dedup-key): how each message's x-qm-dedup-key is
    /// built from its payload, as the producers build it: type:aggregate:event, each part text
    /// and {FIELD} or {/json/pointer}, e.g. 'order.paid:{orderId}:{version}'. A dead-letter
    /// envelope does not keep the original key, and consumers deduplicate by it: without it a
    /// consumer refuses the message, or applies twice what a re-run (or --skip N) sends again. A
    /// message whose key cannot be built is not published and counts as a failure.
    #[arg(
        long,
        value_name = "TEMPLATE",
        requires = "migration",
        conflicts_with = "no_dedup_key"
    )]
    pub dedup_key: Option<String>,
    /// With --migration: publish without x-qm-dedup-key (consumers that deduplicate by it refuse
    /// such messages or cannot recognise one sent twice).
    #[arg(long, requires = "migration")]
    pub no_dedup_key: bool,
    /// Messages per second.
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// Stop after this many and wait for --continue (0: no canary).
    #[arg(long, default_value_t = 50)]
    pub canary: u64,
    /// The canary batch was checked: skip it and go on without pausing.
    #[arg(long = "continue")]
    pub resume: bool,
    /// Skip this many entries at the start of the selection: an earlier run that stopped early
    /// sent them (it says the number). With --continue, the canary batch after them is skipped too.
    #[arg(long, default_value_t = 0)]
    pub skip: u64,
    /// Abort when the replay's own failure rate passes this (0..1).
    #[arg(long, default_value_t = 0.2)]
    pub abort_failure_rate: f64,
    /// Refuse entries first attempted longer ago than this.
    #[arg(
        long,
        default_value = "7d",
        value_parser = nonzero_duration("0s would refuse every entry; --force-old replays whatever their age")
    )]
    pub max_age: Duration,
    /// Replay entries older than --max-age anyway.
    #[arg(long)]
    pub force_old: bool,
    /// Who replays (recorded with the decision when the replay completes).
    #[arg(long)]
    pub by: String,
    /// Send again the entries an earlier run claimed and never learnt the fate of (killed,
    /// not confirmed by the broker, a store that failed): only once you checked that they did
    /// not arrive.
    #[arg(long)]
    pub resend_in_doubt: bool,
    #[command(flatten)]
    pub queue: QueueArg,
    #[command(flatten)]
    pub line_cap: LineCapArg,
}
