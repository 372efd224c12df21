//! Where `migrate dlq replay` sends the messages: NDJSON lines (a file, or standard output), or
//! a migration's brokers (`--migration`), each message to the side its key routes to now.

use std::io::{BufWriter, Write};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::replay_args::ReplayArgs;
use crate::cli::{CliError, Ctx};
use crate::controller::follow::follow_store;
use crate::controller::publish;
use crate::dlq::broker_publisher::BrokerPublisher;
use crate::dlq::replay::{NdjsonPublisher, PublishError, Publisher, ReplayMessage};
use crate::dlq::replay_route::{DedupKey, KeySource};
use crate::router::Router;
use crate::routing::Side;

/// How often a replay to the brokers reads the migration's routing from the store (as the
/// bridge does by default): a step taken during the replay reaches it within this.
const ROUTING_INTERVAL: Duration = Duration::from_millis(500);

/// The replay's destination.
pub(super) enum Target {
    /// NDJSON lines.
    Ndjson(NdjsonPublisher<Box<dyn Write + Send>>),
    /// A migration's brokers, and the task that keeps its routing current.
    Brokers {
        publisher: Box<BrokerPublisher>,
        follow: JoinHandle<()>,
    },
}

impl Target {
    /// Stop following the routing; for a replay to the brokers, how many messages each side
    /// confirmed (old, new).
    pub(super) fn finish(self) -> Option<(u64, u64)> {
        match self {
            Target::Ndjson(_) => None,
            Target::Brokers { publisher, follow } => {
                follow.abort();
                Some((publisher.sent(Side::Old), publisher.sent(Side::New)))
            }
        }
    }
}

impl Publisher for Target {
    async fn publish(&mut self, message: &ReplayMessage<'_>) -> Result<(), PublishError> {
        match self {
            Target::Ndjson(p) => p.publish(message).await,
            Target::Brokers { publisher, .. } => publisher.publish(message).await,
        }
    }

    async fn flush(&mut self) -> Result<(), PublishError> {
        match self {
            Target::Ndjson(p) => p.flush().await,
            Target::Brokers { publisher, .. } => publisher.flush().await,
        }
    }
}

/// The brokers of migration `name` as its stored plan names them, routed by the routing the
/// store holds for it (followed while the replay runs), keys found by `key_field` or the plan's
/// `bridge.key`, dedup keys built by `dedup` (`--dedup-key`, `--no-dedup-key`). Says on stderr
/// where the messages go.
///
/// # Errors
/// Exit 2: an unknown migration, no key source, no `--dedup-key` (nor `--no-dedup-key`) or a
/// template that is not one, a plan without `brokers.old.queue` and
/// `brokers.new.queue` (or stream), a broker kind without adapter or a URL without a value here.
/// Exit 1: the store cannot be read, or its routing is refused.
pub(super) async fn brokers(
    ctx: &Ctx,
    name: &str,
    key_field: Option<&str>,
    dedup: (Option<&str>, bool),
) -> Result<Target, CliError> {
    let store = ctx.existing_store().await?;
    let fetcher = ctx.fetcher()?;
    let mut controller = ctx.controller(&store, &fetcher);
    controller.read_only = true;
    let loaded = controller.load(name).await?;
    let plan = loaded.plan;
    let key = KeySource::choose(key_field, plan.bridge.as_ref().map(|b| &b.key))
        .map_err(|e| CliError::input(e.to_string()))?;
    let dedup = DedupKey::choose(dedup.0, dedup.1).map_err(|e| CliError::input(e.to_string()))?;
    let (Some(old_queue), Some(new_queue)) = (
        plan.brokers.old.destination(),
        plan.brokers.new.destination(),
    ) else {
        return Err(CliError::input(format!(
            "replaying to the brokers of {name} needs the queues consumers read: \
             brokers.old.queue and brokers.new.queue (or stream) in its plan"
        )));
    };
    let router = Router::builder(plan.name.clone())
        .slices(plan.slices)
        .build();
    let document = publish::document(&plan, &loaded.record);
    let announce = format!(
        "replay: to the brokers of {name} by its routing (generation {}, {} of {} slices on new): \
         {} queue {old_queue} (old) / {} queue {new_queue} (new); keys from {}; {}",
        document.generation,
        document.slices_migrated,
        document.slices_total,
        plan.brokers.old.name,
        plan.brokers.new.name,
        key.describe(),
        dedup.describe()
    );
    router
        .offer(document)
        .map_err(|e| CliError::new(1, format!("the stored routing of {name} is refused: {e}")))?;
    let publisher = BrokerPublisher::new(
        key,
        dedup,
        router.clone(),
        (&plan.brokers.old, old_queue),
        (&plan.brokers.new, new_queue),
    )
    .map_err(|e| CliError::plan_broker(&e, "replay"))?;
    let follow = follow_store(
        store.clone(),
        router,
        plan.clone(),
        name.to_string(),
        ROUTING_INTERVAL,
    );
    eprintln!("{announce}");
    Ok(Target::Brokers {
        publisher: Box::new(publisher),
        follow,
    })
}

/// The destination the options name: `--migration`'s brokers, or NDJSON lines on standard
/// output (`to_stdout`) or appended to `--output`. Says on stderr where a broker replay goes.
///
/// # Errors
/// As [`brokers`]; exit 2 when the output file cannot be opened.
pub(super) async fn open(ctx: &Ctx, a: &ReplayArgs, to_stdout: bool) -> Result<Target, CliError> {
    if let Some(name) = &a.migration {
        let dedup = (a.dedup_key.as_deref(), a.no_dedup_key);
        return brokers(ctx, name, a.key_field.as_deref(), dedup).await;
    }
    // A file stands for a queue: what an earlier run (the canary) wrote there went out and
    // stays, so the file is appended to, never truncated.
    let sink: Box<dyn Write + Send> = if to_stdout {
        Box::new(BufWriter::new(std::io::stdout()))
    } else {
        Box::new(BufWriter::new(open_to_append(&a.output).map_err(|e| {
            CliError::input(format!("cannot open {}: {e}", a.output))
        })?))
    };
    Ok(Target::Ndjson(NdjsonPublisher::new(sink)))
}

/// The destination as the ledger names it: `migration:NAME`, `stdout` or `file:/absolute/path`
/// (once the file exists).
pub(super) fn destination(a: &ReplayArgs, to_stdout: bool) -> String {
    match &a.migration {
        Some(name) => format!("migration:{name}"),
        None if to_stdout => "stdout".to_string(),
        None => format!(
            "file:{}",
            std::fs::canonicalize(&a.output)
                .map_or_else(|_| a.output.clone(), |p| p.display().to_string())
        ),
    }
}

/// dies still fails the writes). A regular file that ends in part of a line (an earlier run cut
/// by a full disk or a kill) gets a line end first, so that the fragment stays a line of its own
/// and the first new line is whole; a file that cannot be read is appended to as it is.
fn open_to_append(path: &str) -> std::io::Result<std::fs::File> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let meta = file.metadata()?;
    if meta.is_file() && meta.len() > 0 && !ends_a_line(path, meta.len()) {
        file.write_all(b"\n")?;
    }
    Ok(file)
}

/// Whether the regular file `path` (of `len` > 0 bytes) ends with a line end; `true` when it
/// cannot be read, so that nothing is added to it.
fn ends_a_line(path: &str, len: u64) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let last = std::fs::File::open(path).and_then(|mut f| {
        f.seek(SeekFrom::Start(len - 1))?;
        let mut last = [0u8; 1];
        f.read_exact(&mut last)?;
        Ok(last)
    });
    last.map_or(true, |b| b == *b"\n")
}
