//! `migrate bridge NAME`: forward an unchangeable producer's queue by the live routing.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::{CliError, CliResult, Ctx, nonzero_duration, redact_url};
use crate::adapters::from_plan;
use crate::bridge::metrics::BridgeMetrics;
use crate::bridge::{self, Brokers, Settings};
use crate::brokers::Adapter;
use crate::controller::follow::follow_store;
use crate::controller::publish;
use crate::plan::Broker;
use crate::router::Router;
use crate::routing::Side;

/// Read the plan's `bridge.ingress` on the old broker and forward every message, by its key's
/// slice and the live routing document, to `brokers.old.queue` or the new broker; ack the ingress
/// only after the destination confirmed. One bridge per migration forwards (a lease in the
/// store); start a second one anywhere as a standby.
///
/// A RabbitMQ message reaches RabbitMQ with its AMQP properties and typed headers (persistent
/// always; user_id only when it is the bridge's own user), and NATS or Redis with its properties
/// as x-amqp-* headers and typed headers as text (docs/bridge.md). The producer label of
/// queue_migrate_published_total keeps the first 64 distinct x-qm-producer values; later ones
/// count under `other`.
///
/// Example:
///   migrate bridge orders --metrics 127.0.0.1:9466
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct BridgeArgs {
    /// The migration (its plan needs a `bridge:` section).
    pub name: String,
    /// Where /metrics and /healthz listen.
    #[arg(long, default_value = "127.0.0.1:9466")]
    pub metrics: SocketAddr,
    /// How long the bridge lease lasts without renewal; a standby takes over within about two.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub lease_ttl: Duration,
    /// How often the routing document is read from the store (above 0).
    #[arg(
        long,
        default_value = "500ms",
        value_parser = nonzero_duration("a zero interval would read the store in a busy loop")
    )]
    pub routing_interval: Duration,
    /// This instance's name in the lease (default: bridge@HOST:PID).
    #[arg(long)]
    pub id: Option<String>,
    /// Worker threads. One forwards as fast as two where the brokers take the CPU, with about
    /// a tenth less of it (BENCHMARKS.md); raise it when the bridge's own CPU is the limit.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,
}

/// The `side` broker of the stored plan, for the bridge.
async fn connect(broker: &Broker, side: Side) -> Result<Adapter, CliError> {
    from_plan::connect(broker, side)
        .await
        .map_err(|e| CliError::plan_broker(&e, "the bridge cannot start"))
}

pub async fn run(ctx: &Ctx, args: BridgeArgs) -> CliResult {
    if args.lease_ttl < Duration::from_secs(1) {
        return Err(CliError::input(format!(
            "--lease-ttl {}: must be at least 1s (a standby takes over within about two)",
            humantime::format_duration(args.lease_ttl)
        )));
    }
    let store = ctx.existing_store().await?;
    let fetcher = ctx.fetcher()?;
    let mut controller = ctx.controller(&store, &fetcher);
    controller.read_only = true;
    let loaded = controller.load(&args.name).await?;
    let plan = loaded.plan;
    let Some(spec) = plan.bridge.clone() else {
        return Err(CliError::input(format!(
            "the stored plan of {0} has no `bridge:` section (editing the file alone changes nothing: the store keeps the plan `migrate init` read); add one to the plan file, e.g.\n  bridge: {{ ingress: {0}.ingress, key: {{ json: orderId }} }}\nthen apply it: `migrate plan apply {1} --reason \"add the bridge\"` (see docs/bridge.md and docs/plan.md)",
            args.name, loaded.record.plan_path
        )));
    };
    let (Some(old_queue), Some(new_queue)) = (
        plan.brokers.old.destination(),
        plan.brokers.new.destination(),
    ) else {
        return Err(CliError::input(
            "the bridge needs brokers.old.queue and brokers.new.queue (or stream)",
        ));
    };
    let holder = args.id.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        format!("bridge@{host}:{}", std::process::id())
    });
    let settings = Settings {
        migration: plan.name.clone(),
        ingress: spec.ingress.clone(),
        key: spec.key.clone(),
        prefetch: spec.prefetch,
        old_queue: old_queue.to_string(),
        dead_letter: plan.brokers.old.dead_letter.clone(),
        new_queue: new_queue.to_string(),
        old_name: plan.brokers.old.name.clone(),
        new_name: plan.brokers.new.name.clone(),
        holder: holder.clone(),
        lease_ttl: args.lease_ttl,
        visibility_timeout: plan.retry.visibility_timeout,
    };
    let brokers = Brokers {
        old: Arc::new(connect(&plan.brokers.old, Side::Old).await?),
        new: Arc::new(connect(&plan.brokers.new, Side::New).await?),
    };

    let builder = Router::builder(plan.name.clone());
    let router = builder.slices(plan.slices).build();
    // The routing as just read, so that the first message goes where the migration says.
    if let Err(e) = router.offer(publish::document(&plan, &loaded.record)) {
        return Err(CliError::new(
            1,
            format!("the stored routing of {} is refused: {e}", args.name),
        ));
    }
    let follow = follow_store(
        store.clone(),
        router.clone(),
        plan.clone(),
        args.name.clone(),
        args.routing_interval,
    );

    let metrics = Arc::new(BridgeMetrics::new(&plan.name).with_stale_bounds(stale_bounds(&plan)));
    let listener = tokio::net::TcpListener::bind(args.metrics)
        .await
        .map_err(|e| CliError::new(1, format!("cannot listen on {}: {e}", args.metrics)))?;
    let server = {
        let metrics = metrics.clone();
        let app = axum::Router::new()
            .route(
                "/metrics",
                axum::routing::get(move || {
                    let metrics = metrics.clone();
                    async move {
                        (
                            [(
                                axum::http::header::CONTENT_TYPE,
                                "text/plain; version=0.0.4; charset=utf-8",
                            )],
                            metrics.render(),
                        )
                    }
                }),
            )
            .route("/healthz", axum::routing::get(|| async { "ok\n" }));
        tokio::spawn(axum::serve(listener, app).into_future())
    };
    eprintln!(
        "migrate bridge: {holder} for {} (state {}): {} on {} -> {} (old) / {} on {} (new); /metrics on http://{}; Ctrl-C to stop",
        plan.name,
        redact_url(&ctx.global.state),
        spec.ingress,
        plan.brokers.old.name,
        old_queue,
        new_queue,
        plan.brokers.new.name,
        args.metrics
    );
    let result = bridge::run(
        store,
        settings,
        brokers,
        router,
        metrics,
        super::run::shutdown_signal(),
    )
    .await;
    follow.abort();
    server.abort();
    result.map_err(|e| CliError::new(1, e.to_string()))?;
    eprintln!("migrate bridge: stopped");
    Ok(ExitCode::SUCCESS)
}

/// The stale-producer check's bounds: the plan's `stale_producers`, else the defaults (3 s
/// grace, 2 s skew).
fn stale_bounds(plan: &crate::plan::Plan) -> crate::stale::Bounds {
    plan.stale_producers
        .as_ref()
        .map(|s| crate::stale::Bounds {
            grace_ms: crate::time::millis(s.grace),
            clock_skew_ms: crate::time::millis(s.clock_skew),
        })
        .unwrap_or_default()
}
