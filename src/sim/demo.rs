//! `migrate demo`: the real controller drives `plans/demo.yaml` against the embedded world, in
//! lockstep with it (one simulated minute per world step, a controller tick every other step), so
//! that a run is reproducible from its seed. The report's invariants are counted from the
//! consumer's database and the dead-letter queues.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use serde::Serialize;

mod stale_fault;

use super::view::{self, Event, Frame, View, thousands};
use super::world::{Fault, Settings, World, WorldError};
use crate::controller::views::EntryView;
use crate::controller::{Actor, Controller, ControllerError};
use crate::daemon::{self, Config, DaemonClock, DaemonError, Shared};
use crate::machine::{Command, State};
use crate::plan::Resolve;
use crate::store::StoreError;
use crate::store::any::AnyStore;
use crate::store::sqlite::SqliteStore;
use crate::store::traits::*;

/// The plan the demo runs.
pub const PLAN: &str = include_str!("../../plans/demo.yaml");
/// 2026-11-30T00:00:00Z: every run starts at the same simulated instant.
pub const START_MS: i64 = 1_795_996_800_000;
/// A controller tick every this many world steps.
const TICK_EVERY: u64 = 2;
/// A run that has not completed after this long (simulated) has failed.
const MAX_SIM_MS: i64 = 5 * 24 * 3_600_000;

/// What can stop the demo.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The scratch directory could not be prepared.
    #[error("cannot prepare {path}: {source}")]
    Scratch {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The world's consumer failed.
    #[error(transparent)]
    World(#[from] WorldError),
    /// The controller failed.
    #[error(transparent)]
    Controller(#[from] ControllerError),
    /// The daemon could not be set up.
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    /// The state store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The world's metrics endpoint could not listen.
    #[error("cannot serve the world's metrics: {0}")]
    Listen(std::io::Error),
}

/// How to run it.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    pub fault: Option<Fault>,
    /// Where the state store, the routing file and the consumer database go.
    pub dir: PathBuf,
    /// Simulated time per real time (1000: a simulated hour in 3.6 s) until the migration
    /// completes; `None`: as fast as it can.
    pub speed: Option<f64>,
}

/// The report: the numbers that prove nothing was lost, duplicated or reordered.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub seed: u64,
    pub fault: Option<String>,
    pub final_state: String,
    pub produced: u64,
    pub applied: u64,
    pub dead_lettered: u64,
    pub duplicates_delivered: u64,
    pub duplicates_applied: u64,
    /// produced − applied − dead_lettered, from the consumer's database and the dead-letter queues.
    pub lost: i64,
    pub order_violations: u64,
    /// Events older than the aggregate's applied version, refused by `accept_version`.
    pub superseded: u64,
    pub redeliveries: u64,
    pub replayed_dead_letters: u64,
    pub applied_by_route: BTreeMap<String, u64>,
    pub breaches: u64,
    pub rollbacks: u64,
    pub simulated_hours: f64,
    pub journal: Vec<EntryView>,
    /// What happened, as the live view printed it: the fault's events and the journal's steps.
    pub events: Vec<Event>,
    /// What the injected fault did (absent without `--fault`).
    pub fault_effects: Option<FaultReport>,
    /// Every invariant holds and the migration completed.
    pub ok: bool,
    /// The invariants that broke, in words.
    pub violations: Vec<String>,
}

struct DemoResolve(String);

impl Resolve for DemoResolve {
    fn env(&self, name: &str) -> Option<String> {
        (name == "QM_DEMO_METRICS_URL").then(|| self.0.clone())
    }
    fn read_file(&self, path: &Path) -> Result<String, String> {
        std::fs::read_to_string(path).map_err(|e| e.to_string())
    }
}

/// Serve `text` at /metrics on 127.0.0.1:0.
async fn serve_metrics(text: Arc<RwLock<String>>) -> Result<String, DemoError> {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let text = text.clone();
            async move { text.read().map(|t| t.clone()).unwrap_or_default() }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(DemoError::Listen)?;
    let addr = listener.local_addr().map_err(DemoError::Listen)?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}/metrics"))
}

/// The fault's schedule: when it strikes and when it is over.
#[derive(Debug, Default)]
struct FaultState {
    struck_at: Option<i64>,
    over: bool,
    breach_seen_at: Option<i64>,
    fixed_at: Option<i64>,
    /// While the fault is active: ticks seen, transitions made, gates holding.
    active_from: Option<i64>,
    active_to: Option<i64>,
    /// The crash's restart was told.
    restart_told: bool,
    /// The outage's last progress event.
    told_at: Option<i64>,
    /// The stale-producer fault's own state.
    stale: stale_fault::StaleFault,
}

impl FaultState {
    /// Every fault's start: armed the first time the migration is in `step`, to strike `delay_ms`
    /// later. Answers when it strikes (struck already or not yet) until it is over.
    fn arm(&mut self, state: &State, step: State, now: i64, delay_ms: i64) -> Option<i64> {
        if self.struck_at.is_none() && *state == step {
            self.struck_at = Some(now + delay_ms);
        }
        self.struck_at.filter(|_| !self.over)
    }
}

/// What the fault did, for the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FaultReport {
    pub kind: String,
    /// When it struck and when it was over (simulated, RFC 3339).
    pub from: Option<String>,
    pub to: Option<String>,
    /// Transitions committed while it was active.
    pub transitions_during: u64,
    /// Controller ticks while it was active in which at least one gate held.
    pub ticks_with_holds_during: u64,
    pub ticks_during: u64,
    /// The same window on the simulated clock (`T+5h46m`).
    pub from_t: Option<String>,
    pub to_t: Option<String>,
    /// The most messages the producers' outboxes held while it was active.
    pub outbox_peak: u64,
    /// `stale-producer`: the producers the consumer's check counted stale messages of, with
    /// their count (every one of them consumed from the old broker: none lost).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub stale_producers: BTreeMap<String, u64>,
}

/// Run the whole story.
///
/// # Errors
/// Setup failures and store/database failures; a broken invariant is not an error but a report
/// with `ok: false`.
pub async fn run(opts: &Options, view: &mut dyn View) -> Result<Report, DemoError> {
    let plan_path = write_plan(&opts.dir)?;
    let metrics_text = Arc::new(RwLock::new(String::new()));
    let metrics_url = serve_metrics(metrics_text.clone()).await?;
    let resolve: Arc<dyn Resolve + Send + Sync> = Arc::new(DemoResolve(metrics_url));

    let mut world = World::new(
        Settings::demo(opts.seed, opts.fault),
        START_MS,
        &opts.dir.join("consumer.db"),
    )
    .await?;
    if let Ok(mut t) = metrics_text.write() {
        *t = world.render_metrics();
    }

    let clock = Arc::new(AtomicI64::new(START_MS));
    let operator = Actor {
        name: "demo-operator".into(),
        reason: None,
    };
    let (store, shared) = start_daemon(&opts.dir, &plan_path, resolve, &clock, &operator).await?;

    let mut fault = FaultState::default();
    let mut fault_report = opts.fault.map(|f| FaultReport {
        kind: f.name().to_string(),
        ..FaultReport::default()
    });
    let mut last_generation = 0_i64;
    let mut steps: u64 = 0;
    let mut completed_at: Option<i64> = None;
    let mut last_state = String::new();
    let mut events: Vec<Event> = Vec::new();
    let mut journal_told = 0_usize;
    let started = tokio::time::Instant::now();
    loop {
        world.step().await?;
        steps += 1;
        if let Ok(mut t) = metrics_text.write() {
            *t = world.render_metrics();
        }
        if !steps.is_multiple_of(TICK_EVERY) {
            continue;
        }
        clock.store(world.now_ms, Ordering::SeqCst);
        daemon::tick_all(&shared).await;
        // Announce what the round committed (the store's outbox).
        shared.deliver_outbox().await;
        let c = shared.controller(false);
        let loaded = c.load_cached("demo", shared.plans()).await?;
        let record = &loaded.record;
        let doc = crate::controller::publish::document(&loaded.plan, record);
        world.follow(doc.clone());
        let journal = store.journal("demo").await?;
        let mut told = new_steps(&journal, journal_told, &doc);
        journal_told = journal.len();
        // Was the fault active while the world stepped and the controller ticked just now?
        let active = fault.active_from.is_some_and(|f| world.now_ms > f)
            && fault.active_to.is_none_or(|t| world.now_ms <= t);
        schedule_fault(
            opts.fault,
            &mut fault,
            &mut world,
            &record.state,
            record.paused,
            &c,
            &operator,
            &mut told,
        )
        .await?;

        let state_label = record.state.to_string();
        let gates = c.last_gates(&loaded).await?;
        if let Some(fr) = fault_report.as_mut()
            && active
        {
            tally_fault(fr, record.generation > last_generation, &gates, &world);
        }
        last_generation = record.generation;
        let pause = if record.paused {
            crate::standing::Pause::of(&journal)
        } else {
            None
        };
        let standing = crate::controller::views::standing_of(
            &loaded,
            &gates,
            pause.as_ref(),
            None,
            world.now_ms,
        );
        for e in told {
            view.event(&e);
            events.push(e);
        }
        view.frame(&Frame {
            now_ms: world.now_ms,
            start_ms: START_MS,
            state: state_label.clone(),
            paused: record.paused,
            slices_migrated: doc.slices_migrated,
            slices_total: doc.slices_total,
            standing: &standing,
            gates: &gates,
            world: &world,
            changed: state_label != last_state,
        });
        last_state = state_label;

        if record.state == State::Complete && completed_at.is_none() {
            completed_at = Some(world.now_ms);
            world.producing = false;
        }
        if pace(&world, completed_at, opts.speed, started).await {
            break;
        }
    }
    final_report(opts, &mut world, &store, &fault, fault_report, events).await
}

/// Writes the demo's plan into the scratch directory `dir` (created if need be).
fn write_plan(dir: &Path) -> Result<PathBuf, DemoError> {
    let scratch = |e| DemoError::Scratch {
        path: dir.to_path_buf(),
        source: e,
    };
    std::fs::create_dir_all(dir).map_err(scratch)?;
    let plan_path = dir.join("demo.yaml");
    std::fs::write(&plan_path, PLAN).map_err(scratch)?;
    Ok(plan_path)
}

/// Opens the demo's store in `dir`, builds the daemon's shared state on the simulated `clock`
/// (this controller the leader) and initialises the migration from `plan_path`.
async fn start_daemon(
    dir: &Path,
    plan_path: &Path,
    resolve: Arc<dyn Resolve + Send + Sync>,
    clock: &Arc<AtomicI64>,
    operator: &Actor,
) -> Result<(AnyStore, Arc<Shared<AnyStore>>), DemoError> {
    let store: AnyStore = SqliteStore::open(&dir.join("state.db").display().to_string())
        .await?
        .with_writer_clock();
    let config = demo_config(clock.clone());
    let shared: Arc<Shared<AnyStore>> = Shared::new(store.clone(), config, resolve)?;
    shared.leader.store(true, Ordering::SeqCst);
    shared.set_preflight_reader(Some(super::preflight::reader()));
    shared
        .controller(false)
        .init(plan_path, operator, START_MS)
        .await?;
    Ok((store, shared))
}

/// The journal's steps from the `from`-th entry on as events (the init entry names a temporary
/// path: not a step).
fn new_steps(
    journal: &[crate::store::JournalEntry],
    from: usize,
    doc: &crate::routing::RoutingDocument,
) -> Vec<Event> {
    journal
        .iter()
        .skip(from)
        .filter(|e| e.command != "init")
        .map(|e| Event::new(e.at_ms, START_MS, step_text(e, doc)))
        .collect()
}

/// The daemon's settings for the demo: a one-second tick on the simulated `clock`, a
/// read-only API, completion confirmed in advance.
fn demo_config(clock: Arc<AtomicI64>) -> Config {
    Config {
        interval: std::time::Duration::from_secs(1),
        source_timeout: std::time::Duration::from_secs(5),
        queries_per_request: crate::indicators::fetch::QUERIES_PER_REQUEST,
        max_series: crate::indicators::fetch::MAX_SERIES,
        lease_ttl: std::time::Duration::from_secs(15),
        watch_interval: std::time::Duration::from_secs(1),
        holder: "controller".into(),
        instance: String::new(),
        access: Default::default(),
        read_only_api: true,
        allowed_hosts: Vec::new(),
        confirm_complete: vec!["demo".into()],
        clock: DaemonClock::simulated(Arc::new(move || clock.load(Ordering::SeqCst))),
        http: crate::daemon::http::Limits::default(),
        retain: None,
        max_clock_skew: std::time::Duration::from_secs(2),
    }
}

/// One tick while the fault was active, counted in its report.
fn tally_fault(
    fr: &mut FaultReport,
    transitioned: bool,
    gates: &[crate::controller::GateView],
    world: &World,
) {
    fr.ticks_during += 1;
    if transitioned {
        fr.transitions_during += 1;
    }
    if gates.iter().any(|g| g.verdict.is_waiting()) {
        fr.ticks_with_holds_during += 1;
    }
    fr.outbox_peak = fr.outbox_peak.max(world.outboxed() as u64);
}

/// Whether the story is over after this tick; until it completes, the story at `speed` (the
/// pace a person can follow) when one is given.
async fn pace(
    world: &World,
    completed_at: Option<i64>,
    speed: Option<f64>,
    started: tokio::time::Instant,
) -> bool {
    if let Some(done) = completed_at {
        // Let everything in flight finish (the old broker is empty already; new drains).
        if world.settled() || world.now_ms - done > 24 * 3_600_000 {
            return true;
        }
    } else if let Some(speed) = speed {
        // The story at the pace a person can follow, until it completes.
        let elapsed_s = (world.now_ms - START_MS) as f64 / 1000.0 / speed;
        if let Ok(d) = std::time::Duration::try_from_secs_f64(elapsed_s) {
            tokio::time::sleep_until(started + d).await;
        }
    }
    world.now_ms - START_MS > MAX_SIM_MS
}

/// Drains the rest of the world, whatever the state, so that the audit counts what reached the
/// consumer (the consumer keeps reading what the routing names), and reports the run.
async fn final_report(
    opts: &Options,
    world: &mut World,
    store: &AnyStore,
    fault: &FaultState,
    fault_report: Option<FaultReport>,
    events: Vec<Event>,
) -> Result<Report, DemoError> {
    let mut extra = 0;
    while !world.settled() && extra < 24 * 60 {
        world.step().await?;
        extra += 1;
    }
    let record = store.get("demo").await?;
    let journal = store.journal("demo").await?;
    let audit = world.audit().await?;
    let lost = i64::try_from(audit.produced).unwrap_or(i64::MAX)
        - i64::try_from(audit.applied).unwrap_or(0)
        - i64::try_from(audit.dead_lettered).unwrap_or(0);
    let violations = violations(&record.state, lost, &audit);
    let breaches = journal
        .iter()
        .filter(|e| {
            e.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("guard breach"))
        })
        .count() as u64;
    let rollbacks = journal.iter().filter(|e| e.command == "rollback").count() as u64;
    Ok(Report {
        seed: opts.seed,
        fault: opts.fault.map(|f| f.name().to_string()),
        final_state: record.state.name().to_string(),
        produced: audit.produced,
        applied: audit.applied,
        dead_lettered: audit.dead_lettered,
        duplicates_delivered: world.tally.duplicates_delivered,
        duplicates_applied: audit.duplicates_applied,
        lost,
        order_violations: audit.order_violations,
        superseded: audit.superseded,
        redeliveries: world.tally.redeliveries,
        replayed_dead_letters: world.tally.replayed,
        applied_by_route: BTreeMap::from([
            ("old".to_string(), world.tally.processed[0]),
            ("new".to_string(), world.tally.processed[1]),
        ]),
        breaches,
        rollbacks,
        simulated_hours: (world.now_ms - START_MS) as f64 / 3_600_000.0,
        journal: journal.iter().map(EntryView::of).collect(),
        events,
        fault_effects: fault_report.map(|mut fr| {
            fr.from = fault.active_from.map(crate::time::rfc3339);
            fr.to = fault.active_to.map(crate::time::rfc3339);
            fr.from_t = fault.active_from.map(|t| view::clock(t - START_MS));
            fr.to_t = fault.active_to.map(|t| view::clock(t - START_MS));
            for ((producer, _), n) in world.stale.counts().stale_series() {
                *fr.stale_producers.entry(producer.clone()).or_insert(0) += n;
            }
            fr
        }),
        ok: violations.is_empty(),
        violations,
    })
}

/// What the run broke of the migration's promises: not completing, a loss, a duplicate effect,
/// an order violation, an effect nobody produced a key for.
fn violations(state: &State, lost: i64, audit: &super::world::Audit) -> Vec<String> {
    let mut violations = Vec::new();
    if *state != State::Complete {
        violations.push(format!(
            "the migration did not complete (ended in {})",
            state
        ));
    }
    if lost != 0 {
        violations.push(format!("{lost} message(s) lost"));
    }
    if audit.duplicates_applied != 0 {
        violations.push(format!(
            "{} duplicate effect(s) applied",
            audit.duplicates_applied
        ));
    }
    if audit.order_violations != 0 {
        violations.push(format!(
            "{} per-key order violation(s)",
            audit.order_violations
        ));
    }
    if audit.unknown_effects != 0 {
        violations.push(format!(
            "{} effect(s) for keys nobody produced",
            audit.unknown_effects
        ));
    }
    violations
}

/// A step of the journal as an event: `advance slices[0] -> slices[1] (32 of 128 slices to
/// new) by controller: every exit gate passes...`.
fn step_text(e: &crate::store::JournalEntry, doc: &crate::routing::RoutingDocument) -> String {
    let mut s = format!(
        "{} {} -> {}{}",
        e.command,
        e.from.state,
        e.to.state,
        if e.to.paused { " [paused]" } else { "" }
    );
    if e.from.state != e.to.state {
        s.push_str(&format!(
            " ({} of {} slices to new)",
            doc.slices_migrated, doc.slices_total
        ));
    }
    s.push_str(&format!(" by {}", e.actor));
    if let Some(r) = &e.reason {
        s.push_str(&format!(": {r}"));
    }
    s
}

/// Strike the fault at its moment, and play the team's part: notice the breach, fix, resume.
/// What a person would see happen is added to `told`.
#[allow(clippy::too_many_arguments)]
async fn schedule_fault(
    fault: Option<Fault>,
    fs: &mut FaultState,
    world: &mut World,
    state: &State,
    paused: bool,
    c: &Controller<'_, AnyStore>,
    operator: &Actor,
    told: &mut Vec<Event>,
) -> Result<(), DemoError> {
    let Some(fault) = fault else {
        return Ok(());
    };
    let now = world.now_ms;
    match fault {
        Fault::BadDeploy => bad_deploy(fs, world, state, paused, c, operator, told, now).await?,
        Fault::ConsumerCrash => consumer_crash(fs, world, state, told, now),
        Fault::BrokerOutage => broker_outage(fs, world, state, told, now),
        Fault::StaleProducer => {
            let resume = fs.stale.tick(world, state, paused, now, START_MS, told);
            fs.active_from = fs.stale.active_from;
            fs.active_to = fs.stale.active_to;
            if resume {
                let actor = Actor {
                    reason: Some(format!(
                        "{}'s instance follows the routing again; resuming",
                        stale_fault::PRODUCER
                    )),
                    ..operator.clone()
                };
                c.command("demo", &Command::Resume, &actor, serde_json::json!({}), now)
                    .await?;
            }
        }
    }
    Ok(())
}

/// The bad deploy strikes at the third slice step; the team rolls it back 20 minutes after the
/// page and resumes once the error ratio's window no longer holds the bad minutes.
#[allow(clippy::too_many_arguments)]
async fn bad_deploy(
    fs: &mut FaultState,
    world: &mut World,
    state: &State,
    paused: bool,
    c: &Controller<'_, AnyStore>,
    operator: &Actor,
    told: &mut Vec<Event>,
    now: i64,
) -> Result<(), DemoError> {
    // Strikes as the step begins: once (active from then on).
    if fs.arm(state, State::Slices(2), now, 0).is_some() && fs.active_from.is_none() {
        fs.active_from = Some(now);
        world.bad_deploy = true;
        told.push(Event::new(
            now,
            START_MS,
            "bad deploy of the consumer on the new route: 40% of the messages it \
             handles fail (retried, then dead-lettered)",
        ));
    }
    if fs.struck_at.is_some() && paused && fs.breach_seen_at.is_none() {
        fs.breach_seen_at = Some(now);
    }
    // The team rolls the consumer back 20 minutes after the page...
    if let Some(seen) = fs.breach_seen_at
        && fs.fixed_at.is_none()
        && now - seen >= 20 * 60_000
    {
        world.bad_deploy = false;
        fs.fixed_at = Some(now);
        fs.active_to = Some(now);
        told.push(Event::new(
            now,
            START_MS,
            format!(
                "the team rolls the consumer's deploy back, {} after the page; \
                 resuming once the error ratio's window has no bad minutes left",
                crate::time::human_ms(now - seen)
            ),
        ));
    }
    // ...and resumes once the error ratio's window no longer holds the bad minutes.
    if let Some(fixed) = fs.fixed_at
        && !fs.over
        && now - fixed >= 40 * 60_000
    {
        fs.over = true;
        let actor = Actor {
            reason: Some("bad deploy rolled back on the consumer; resuming".into()),
            ..operator.clone()
        };
        c.command("demo", &Command::Resume, &actor, serde_json::json!({}), now)
            .await?;
    }
    Ok(())
}

/// The consumer crashes mid-batch 30 minutes into the second slice step, and restarts.
fn consumer_crash(
    fs: &mut FaultState,
    world: &mut World,
    state: &State,
    told: &mut Vec<Event>,
    now: i64,
) {
    if fs
        .arm(state, State::Slices(1), now, 30 * 60_000)
        .is_some_and(|at| now >= at)
    {
        world.crash_pending = true;
        fs.over = true;
        fs.active_from = Some(now);
        fs.active_to = Some(now + 20 * 60_000);
    }
    // The crash strikes in the world's next minute: told once it did.
    if let Some(crash) = world.crashed
        && fs.told_at.is_none()
    {
        fs.told_at = Some(now);
        told.push(Event::new(
            now,
            START_MS,
            format!(
                "consumer crashed mid-batch: {} of {} effects committed, every ack lost; \
                 down for {}",
                crash.applied,
                crash.unacked,
                crate::time::human_ms(crash.down_ms)
            ),
        ));
    }
    if let Some(crash) = world.crashed
        && world.consumer_up()
        && !fs.restart_told
    {
        fs.restart_told = true;
        told.push(Event::new(
            now,
            START_MS,
            format!(
                "consumer restarted: the {} unacked messages come back after the \
                 visibility timeout; dedup blocks the {} already applied",
                crash.unacked, crash.applied
            ),
        ));
    }
}

/// The new broker is unreachable for 90 minutes from 10 minutes into the second slice step.
fn broker_outage(
    fs: &mut FaultState,
    world: &mut World,
    state: &State,
    told: &mut Vec<Event>,
    now: i64,
) {
    if let Some(at) = fs.arm(state, State::Slices(1), now, 10 * 60_000) {
        let down = now >= at && now < at + 90 * 60_000;
        let waiting = thousands(world.outboxed() as u64);
        if down && !world.new.down {
            fs.active_from = Some(now);
            fs.told_at = Some(now);
            told.push(Event::new(
                now,
                START_MS,
                "new broker unreachable: the gates reading it have no data; producers \
                 keep what they send to it in their outboxes",
            ));
        } else if down
            && let Some(last) = fs.told_at
            && now - last >= 30 * 60_000
        {
            fs.told_at = Some(now);
            let since = fs.active_from.map_or(0, |f| now - f);
            told.push(Event::new(
                now,
                START_MS,
                format!(
                    "new broker unreachable for {}: producers buffering {waiting} messages",
                    crate::time::human_ms(since)
                ),
            ));
        }
        if !down && world.new.down {
            fs.active_to = Some(now);
            fs.over = true;
            let since = fs.active_from.map_or(0, |f| now - f);
            told.push(Event::new(
                now,
                START_MS,
                format!(
                    "new broker reachable again after {}: producers publish the \
                     {waiting} messages buffered in their outboxes",
                    crate::time::human_ms(since)
                ),
            ));
        }
        world.new.down = down;
    }
}
