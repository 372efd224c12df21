//! Which dead-letter queue a command's decisions are about (`--queue`, or the one a migration's
//! plan names), and the decisions recorded for it.

use clap::Args;

use crate::cli::{CliError, Ctx};
use crate::dlq::disposition::Disposition;
use crate::store::dispositions::DispositionStore;

#[derive(Debug, Args)]
pub struct QueueArg {
    /// The dead-letter queue the decisions are about [default: with --migration NAME (close,
    /// replay) or --from-broker NAME (triage), that plan's brokers.old.dead_letter; otherwise
    /// `default`].
    #[arg(long, env = "MIGRATE_DLQ_QUEUE")]
    pub queue: Option<String>,
}

impl QueueArg {
    /// The queue given, or `default`.
    pub fn name(&self) -> &str {
        self.queue.as_deref().unwrap_or("default")
    }
}

pub(super) async fn queue_decisions(ctx: &Ctx, queue: &str) -> Result<Vec<Disposition>, CliError> {
    let store = ctx.store().await?;
    Ok(DispositionStore::list(&store)
        .await?
        .into_iter()
        .filter(|d| d.queue == queue)
        .collect())
}

/// The queue of decisions about migration `name`'s dead letters: `queue` when given (said on
/// stderr when it is not the one the plan names), else its plan's `brokers.old.dead_letter`; set
/// into `queue`. A plan that names none leaves `queue` as it is.
pub(super) async fn queue_of_migration(
    ctx: &Ctx,
    queue: &mut QueueArg,
    name: &str,
) -> Result<(), CliError> {
    let store = ctx.existing_store().await?;
    let fetcher = ctx.fetcher()?;
    let mut controller = ctx.controller(&store, &fetcher);
    controller.read_only = true;
    let plan = controller.load(name).await?.plan;
    let Some(dead_letter) = plan.brokers.old.dead_letter else {
        return Ok(());
    };
    match &queue.queue {
        Some(given) if *given != dead_letter => eprintln!(
            "migrate dlq: note: the drain gate of {name} reads the decisions of queue {dead_letter:?} (its plan's brokers.old.dead_letter), not of {given:?} (--queue)"
        ),
        Some(_) => {}
        None => queue.queue = Some(dead_letter),
    }
    Ok(())
}
