//! The demo's world: producers with a daily traffic shape, two brokers, and an idempotent consumer
//! on SQLite, stepped one simulated minute at a time.
//!
//! Producers route with the real [`Router`](crate::router::Router); the consumer applies effects
//! through the real durable dedup ([`crate::dedup::sql`]) and `accept_version` in one SQLite
//! transaction per message; the metrics it exports are what the plan's gates read over HTTP.
//! Everything random comes from one seeded generator (the SplitMix64 of `dlq::generate`).

mod audit;
mod metrics;
mod stale;

use std::collections::{HashSet, VecDeque};

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

use super::broker::{Broker, BrokerError, Delivery, Message, Policy};
use crate::dedup::metrics::{ConsumerMetrics, Outcome};
use crate::dedup::sql::{self, Claim, VersionCheck};
use crate::dedup::{BusinessKey, PayloadHash};
use crate::dlq::generate::Rng;
use crate::router::Router;
use crate::routing::{RoutingDocument, Side};
use crate::stamp::{PublishedCounter, RouteLabel};

/// One simulated minute.
pub const STEP_MS: i64 = 60_000;

/// An injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// At the third slice step a bad deploy makes the new route fail 40% of messages.
    BadDeploy,
    /// At the second slice step the consumer crashes mid-batch (effects committed, acks lost).
    ConsumerCrash,
    /// At the second slice step the new broker is unreachable for 90 minutes.
    BrokerOutage,
    /// At the second slice step one producer instance stops following the routing document: it
    /// keeps routing by the first step's generation, writing moved slices to the old broker.
    StaleProducer,
}

impl Fault {
    /// The name `--fault` takes (`bad-deploy`...), as reports show it.
    pub fn name(self) -> &'static str {
        match self {
            Fault::BadDeploy => "bad-deploy",
            Fault::ConsumerCrash => "consumer-crash",
            Fault::BrokerOutage => "broker-outage",
            Fault::StaleProducer => "stale-producer",
        }
    }
}

/// The shape of the world.
#[derive(Debug, Clone)]
pub struct Settings {
    pub seed: u64,
    pub aggregates: u64,
    pub producers: Vec<&'static str>,
    /// Messages per minute off-peak and at the peak of the day.
    pub base_rate: f64,
    pub peak_rate: f64,
    /// The demo's day (a compressed traffic cycle).
    pub day_ms: i64,
    /// Messages the consumer handles per minute (below the peak: a backlog builds at peak).
    pub consumer_capacity: usize,
    /// The least time between two events of one aggregate.
    pub aggregate_spacing_ms: i64,
    /// A consumer deploy (restart) this often.
    pub deploy_every_ms: i64,
    /// Transient failure rate of the effect, both routes.
    pub transient_errors: f64,
    /// Chance a producer loses a publish confirmation and publishes again.
    pub lost_confirm: f64,
    pub policy: Policy,
    pub fault: Option<Fault>,
    /// The stale-producer check's bounds (the plan's `stale_producers`).
    pub stale: crate::stale::Bounds,
}

impl Settings {
    pub fn demo(seed: u64, fault: Option<Fault>) -> Settings {
        Settings {
            seed,
            aggregates: 4_000,
            producers: vec!["checkout", "billing", "refunds"],
            base_rate: 12.0,
            peak_rate: 60.0,
            day_ms: 4 * 3_600_000,
            consumer_capacity: 48,
            aggregate_spacing_ms: 3 * 3_600_000,
            deploy_every_ms: 100 * 60_000,
            transient_errors: 0.01,
            lost_confirm: 0.003,
            policy: Policy {
                visibility_timeout_ms: 5 * 60_000,
                base_backoff_ms: 60_000,
                max_backoff_ms: 15 * 60_000,
                max_attempts: 5,
            },
            fault,
            // plans/demo.yaml's `stale_producers`: one controller tick (two simulated minutes)
            // of grace; the world's clocks agree, the skew bound is the daemon's default.
            stale: crate::stale::Bounds {
                grace_ms: 2 * 60_000,
                clock_skew_ms: 2_000,
            },
        }
    }
}

struct Producer {
    name: &'static str,
    /// Publishes not yet confirmed, in order (a producer never reorders its own messages).
    outbox: VecDeque<(Message, Side)>,
}

/// Counts the world keeps about itself (the report's conservation uses the database instead).
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub produced: u64,
    pub published: u64,
    pub duplicates_delivered: u64,
    pub redeliveries: u64,
    pub failures: u64,
    pub replayed: u64,
    pub probe_deliveries: u64,
    pub probe_effects: u64,
    pub attempts_ok: [u64; 2],
    pub attempts_err: [u64; 2],
    pub processed: [u64; 2],
}

/// The world.
pub struct World {
    pub settings: Settings,
    rng: Rng,
    pub now_ms: i64,
    start_ms: i64,
    pub old: Broker,
    pub new: Broker,
    pub router: Router,
    producers: Vec<Producer>,
    next_version: Vec<u64>,
    next_at: Vec<i64>,
    pool: SqlitePool,
    pub metrics: ConsumerMetrics,
    pub published: PublishedCounter,
    pub tally: Tally,
    produced_keys: HashSet<String>,
    applied_keys: HashSet<String>,
    duplicate_effects: u64,
    consumer_started_ms: i64,
    consumer_down_until: Option<i64>,
    last_deploy_ms: i64,
    pub producing: bool,
    /// Fault switches, turned on by the driver at the right step.
    pub bad_deploy: bool,
    pub crash_pending: bool,
    /// What the last crash did, once it struck.
    pub crashed: Option<Crash>,
    probe_sent: bool,
    probe_seq: u64,
    probe_latency_s: [Option<f64>; 2],
    /// The consumer's stale-producer check on the old broker.
    pub stale: crate::stale::StaleGuard,
    /// A producer instance that stopped following the routing: its index and the document it
    /// keeps routing by.
    pub pinned: Option<(usize, RoutingDocument)>,
    /// The document followed before the current one (what a pinned producer keeps).
    previous_doc: Option<RoutingDocument>,
}

fn side_index(s: Side) -> usize {
    match s {
        Side::Old => 0,
        Side::New => 1,
    }
}

fn label(s: Side) -> RouteLabel {
    match s {
        Side::Old => RouteLabel::Old,
        Side::New => RouteLabel::New,
    }
}

/// Errors of the world: only its consumer database can fail.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    /// The consumer's SQLite database failed.
    #[error("consumer database: {0}")]
    Database(#[from] sqlx::Error),
    /// The dedup library failed.
    #[error("consumer dedup: {0}")]
    Dedup(#[from] sql::SqlDedupError),
}

impl World {
    /// A world starting at `start_ms`, its consumer database at `db_path`.
    ///
    /// # Errors
    /// The consumer database cannot be created.
    pub async fn new(
        settings: Settings,
        start_ms: i64,
        db_path: &std::path::Path,
    ) -> Result<World, WorldError> {
        let options = SqliteConnectOptions::new()
            .filename(db_path)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .synchronous(sqlx::sqlite::SqliteSynchronous::Normal);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            // A ping before each message's transaction would only wake SQLite's thread.
            .test_before_acquire(false)
            .connect_with(options)
            .await?;
        sql::ensure_schema(&pool).await?;
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS effects (id INTEGER PRIMARY KEY AUTOINCREMENT, \
             key TEXT NOT NULL, aggregate TEXT NOT NULL, version INTEGER NOT NULL, \
             route TEXT NOT NULL, status TEXT NOT NULL, at INTEGER NOT NULL)",
        )
        .execute(&pool)
        .await?;
        let n = usize::try_from(settings.aggregates).unwrap_or(1);
        let producers = settings
            .producers
            .iter()
            .map(|name| Producer {
                name,
                outbox: VecDeque::new(),
            })
            .collect();
        let published = PublishedCounter::new();
        let metrics = ConsumerMetrics::with_name("consumer_messages_total").unwrap_or_default();
        let mut rng = Rng::new(settings.seed);
        // Aggregates start at random points so that traffic does not come in waves.
        let next_at = (0..n)
            .map(|_| start_ms + i64::try_from(rng.below(6 * 3_600_000)).unwrap_or(0))
            .collect();
        Ok(World {
            old: Broker::new("old", settings.policy),
            new: Broker::new("new", settings.policy),
            // The simulation follows whichever migration its plan names (one per world): the
            // first document's name is kept, as the deprecated constructor does until it goes.
            #[allow(deprecated)]
            router: Router::with_default_slices(128),
            producers,
            next_version: vec![1; n],
            next_at,
            pool,
            metrics,
            published,
            tally: Tally::default(),
            produced_keys: HashSet::new(),
            applied_keys: HashSet::new(),
            duplicate_effects: 0,
            consumer_started_ms: start_ms,
            consumer_down_until: None,
            last_deploy_ms: start_ms,
            producing: true,
            bad_deploy: false,
            crash_pending: false,
            crashed: None,
            probe_sent: false,
            probe_seq: 0,
            probe_latency_s: [None, None],
            stale: crate::stale::StaleGuard::new(settings.stale),
            pinned: None,
            previous_doc: None,
            rng,
            now_ms: start_ms,
            start_ms,
            settings,
        })
    }

    /// Follow a routing document (producers and consumer see it at once); the consumer records
    /// a new generation with the old broker's position at its publish.
    pub fn follow(&mut self, doc: RoutingDocument) {
        let mark = crate::stale::Mark::Position(self.old.position());
        self.stale.follow(&doc, self.now_ms, Some(mark));
        let current = self.router.document();
        if current
            .as_ref()
            .is_some_and(|c| c.generation < doc.generation)
        {
            self.previous_doc = current.map(|c| (*c).clone());
        }
        let _ = self.router.offer(doc);
    }

    fn broker_of(&self, side: Side) -> &Broker {
        match side {
            Side::Old => &self.old,
            Side::New => &self.new,
        }
    }

    fn broker(&mut self, side: Side) -> &mut Broker {
        match side {
            Side::Old => &mut self.old,
            Side::New => &mut self.new,
        }
    }

    fn broker_name(&self, side: Side) -> String {
        self.router
            .broker_name(side)
            .unwrap_or_else(|| side.as_str().to_string())
    }

    /// Messages per minute now, on the demo's daily curve.
    pub fn rate_now(&self) -> f64 {
        let s = &self.settings;
        let phase = ((self.now_ms - self.start_ms).rem_euclid(s.day_ms)) as f64 / s.day_ms as f64;
        let wave = (std::f64::consts::TAU * (phase - 0.25)).sin().max(0.0);
        s.base_rate + (s.peak_rate - s.base_rate) * wave.powi(2)
    }

    /// Whether there is nothing left anywhere: brokers and producers empty.
    pub fn settled(&self) -> bool {
        self.old.depth() == 0
            && self.new.depth() == 0
            && self.producers.iter().all(|p| p.outbox.is_empty())
    }

    /// Messages waiting in the producers' outboxes (publishes the broker has not confirmed).
    pub fn outboxed(&self) -> usize {
        self.producers.iter().map(|p| p.outbox.len()).sum()
    }

    /// Where every produced message is now, each counted once: applied, in an outbox, queued
    /// in a broker, dead-lettered. The four add up to `produced` (`unaccounted` says by how
    /// much they do not).
    pub fn ledger(&self) -> Ledger {
        let produced = self.produced_keys.len() as u64;
        let applied = self.applied_keys.len() as u64;
        let outboxes = self.outboxed() as u64;
        let queued: HashSet<&str> = self
            .old
            .queued()
            .chain(self.new.queued())
            .filter(|m| !m.probe && !self.applied_keys.contains(&m.key))
            .map(|m| m.key.as_str())
            .collect();
        let dead = self.dead_keys(|k| !self.applied_keys.contains(k) && !queued.contains(k));
        let in_brokers = queued.len() as u64;
        let dead_lettered = dead.len() as u64;
        let counted = i128::from(applied)
            + i128::from(outboxes)
            + i128::from(in_brokers)
            + i128::from(dead_lettered);
        Ledger {
            produced,
            applied,
            outboxes,
            in_brokers,
            dead_lettered,
            unaccounted: i64::try_from(i128::from(produced) - counted).unwrap_or(i64::MAX),
        }
    }

    /// The keys of both dead-letter queues (probes aside) that `keep` keeps.
    fn dead_keys(&self, keep: impl Fn(&str) -> bool) -> HashSet<&str> {
        self.old
            .dead
            .iter()
            .chain(self.new.dead.iter())
            .filter(|m| !m.probe && keep(&m.key))
            .map(|m| m.key.as_str())
            .collect()
    }

    pub fn consumer_up(&self) -> bool {
        self.consumer_down_until.is_none()
    }

    /// One simulated minute.
    ///
    /// # Errors
    /// The consumer database failed.
    pub async fn step(&mut self) -> Result<(), WorldError> {
        self.now_ms += STEP_MS;
        let now = self.now_ms;
        self.old.advance(now);
        self.new.advance(now);
        self.flush_outboxes();
        if self.producing {
            self.produce();
        }
        self.probes();
        self.replay_old_dead_letters();
        self.lifecycle();
        if self.consumer_up() {
            self.consume().await?;
        }
        Ok(())
    }

    fn flush_outboxes(&mut self) {
        for i in 0..self.producers.len() {
            while let Some((m, side)) = self.producers[i].outbox.front().cloned() {
                let producer = self.producers[i].name;
                if self.publish_now(producer, m, side).is_err() {
                    break;
                }
                self.producers[i].outbox.pop_front();
            }
        }
    }

    fn publish_now(&mut self, producer: &str, m: Message, side: Side) -> Result<(), BrokerError> {
        let broker = self.broker_name(side);
        self.broker(side).publish(m.clone())?;
        self.published.add(&broker, label(side), producer, 1);
        self.tally.published += 1;
        // A lost confirmation: the producer cannot know the broker has it, and publishes again.
        if self.rng.chance(self.settings.lost_confirm) && self.broker(side).publish(m).is_ok() {
            self.published.add(&broker, label(side), producer, 1);
            self.tally.published += 1;
        }
        Ok(())
    }

    fn produce(&mut self) {
        let rate = self.rate_now();
        let mut n = rate.floor() as usize;
        if self.rng.chance(rate.fract()) {
            n += 1;
        }
        for _ in 0..n {
            // An aggregate whose next event is due (a few tries; skip when all are busy).
            let mut pick = None;
            for _ in 0..8 {
                let a = usize::try_from(self.rng.below(self.settings.aggregates)).unwrap_or(0);
                if self.next_at[a] <= self.now_ms {
                    pick = Some(a);
                    break;
                }
            }
            let Some(a) = pick else { continue };
            let version = self.next_version[a];
            self.next_version[a] += 1;
            let jitter = i64::try_from(self.rng.below(3_600_000)).unwrap_or(0);
            self.next_at[a] = self.now_ms + self.settings.aggregate_spacing_ms + jitter;
            let aggregate = format!("order-{a}");
            let Ok(key) = BusinessKey::new("order", &aggregate, &format!("v{version}")) else {
                continue;
            };
            let mut route = self.router.route(&aggregate);
            let mut message = Message {
                key: key.to_string(),
                aggregate,
                version,
                payload: format!(
                    "{{\"order\":{a},\"version\":{version},\"total\":{}}}",
                    self.rng.below(50_000)
                ),
                slice: route.slice,
                generation: route.generation,
                producer: "",
                at_ms: self.now_ms,
                position: 0,
                probe: false,
                attempts: 0,
            };
            self.tally.produced += 1;
            self.produced_keys.insert(message.key.clone());
            let p = usize::try_from(self.rng.below(self.producers.len() as u64)).unwrap_or(0);
            let producer = self.producers[p].name;
            message.producer = producer;
            if let Some(pinned) = self.pinned_route(p, &message.aggregate) {
                route = pinned;
                message.generation = route.generation;
            }
            if !self.producers[p].outbox.is_empty()
                || self
                    .publish_now(producer, message.clone(), route.target)
                    .is_err()
            {
                self.producers[p].outbox.push_back((message, route.target));
            }
        }
    }

    /// Synthetic probes while the migration is in `synthetic`: the idempotency probe (one
    /// message published five times on the new broker) and a latency probe through each broker
    /// every minute.
    fn probes(&mut self) {
        let state = self.router.document().map(|d| d.state.clone());
        if state.as_deref() != Some("synthetic") {
            return;
        }
        if !self.probe_sent {
            let probe = Message {
                key: "probe:idempotency:1".into(),
                aggregate: "probe-idempotency".into(),
                version: 1,
                payload: "{\"probe\":\"idempotency\"}".into(),
                slice: 0,
                generation: self.router.generation(),
                producer: "probe",
                at_ms: self.now_ms,
                position: 0,
                probe: true,
                attempts: 0,
            };
            let mut sent = 0;
            for _ in 0..5 {
                if self.new.publish(probe.clone()).is_ok() {
                    sent += 1;
                }
            }
            self.probe_sent = sent == 5;
        }
        for side in [Side::Old, Side::New] {
            self.probe_seq += 1;
            let m = Message {
                key: format!("probe:latency:{}", self.probe_seq),
                aggregate: format!("probe-latency-{}", self.probe_seq),
                version: 1,
                payload: format!("{{\"sent_at\":{}}}", self.now_ms),
                slice: 0,
                generation: self.router.generation(),
                producer: "probe",
                at_ms: self.now_ms,
                position: 0,
                probe: true,
                attempts: 0,
            };
            let _ = self.broker(side).publish(m);
        }
    }

    /// The team triages the old dead-letter queue during `drain` and replays it (rate limited) to
    /// where producers send now; the consumer's dedup absorbs any that were applied already.
    fn replay_old_dead_letters(&mut self) {
        let state = self.router.document().map(|d| d.state.clone());
        if state.as_deref() != Some("drain") {
            return;
        }
        for _ in 0..20 {
            let Some(mut m) = self.old.dead.pop() else {
                break;
            };
            m.attempts = 0;
            if self.new.publish(m.clone()).is_err() {
                self.old.dead.push(m);
                break;
            }
            self.tally.replayed += 1;
        }
    }

    /// Deploys (restarts) and crashes of the consumer.
    fn lifecycle(&mut self) {
        if let Some(until) = self.consumer_down_until
            && self.now_ms >= until
        {
            self.consumer_down_until = None;
            self.consumer_started_ms = self.now_ms;
            self.last_deploy_ms = self.now_ms;
        }
        if self.consumer_up() && self.now_ms - self.last_deploy_ms >= self.settings.deploy_every_ms
        {
            self.last_deploy_ms = self.now_ms;
            self.consumer_started_ms = self.now_ms;
        }
    }

    async fn consume(&mut self) -> Result<(), WorldError> {
        let sides = self.router.consume();
        let crash = std::mem::take(&mut self.crash_pending);
        // A fair share for each side first, then what is left to whichever side has more.
        let mut budget = self.settings.consumer_capacity;
        let share = budget / sides.len().max(1);
        for pass in 0..2 {
            for &side in &sides {
                let want = if pass == 0 { share } else { budget };
                if want == 0 {
                    continue;
                }
                let now = self.now_ms;
                let Ok(batch) = self.broker(side).receive(want, now) else {
                    continue;
                };
                budget -= batch.len();
                if crash {
                    // Half of the batch is applied, then the process dies before acking
                    // anything: every message comes back after the visibility timeout.
                    let half = batch.len() / 2;
                    self.crashed = Some(Crash {
                        applied: half,
                        unacked: batch.len(),
                        down_ms: 20 * 60_000,
                    });
                    for d in batch.into_iter().take(half) {
                        let _ = self.apply(side, &d).await?;
                    }
                    self.consumer_down_until = Some(self.now_ms + 20 * 60_000);
                    return Ok(());
                }
                for d in batch {
                    self.handle(side, d).await?;
                }
            }
        }
        Ok(())
    }

    async fn handle(&mut self, side: Side, d: Delivery) -> Result<(), WorldError> {
        if side == Side::Old {
            self.check_stale(&d);
        }
        let i = side_index(side);
        let failing = self.rng.chance(self.settings.transient_errors)
            || (self.bad_deploy && side == Side::New && self.rng.chance(0.4));
        if failing && !d.message.probe {
            self.tally.failures += 1;
            self.tally.attempts_err[i] += 1;
            let last = d.message.attempts >= self.settings.policy.max_attempts;
            self.metrics.record(
                label(side),
                if last {
                    Outcome::DeadLettered
                } else {
                    Outcome::Failed
                },
            );
            let now = self.now_ms;
            self.broker(side).nack(d.tag, now);
            return Ok(());
        }
        self.tally.attempts_ok[i] += 1;
        if d.message.attempts > 1 {
            self.tally.redeliveries += 1;
        }
        let outcome = self.apply(side, &d).await?;
        self.metrics.record(label(side), outcome);
        self.broker(side).ack(d.tag);
        Ok(())
    }

    /// The consumer's effect: claim the business key and check the aggregate's version in the same
    /// transaction as the effect row.
    async fn apply(&mut self, side: Side, d: &Delivery) -> Result<Outcome, WorldError> {
        let m = &d.message;
        let Ok(key) = BusinessKey::parse(&m.key) else {
            return Ok(Outcome::Conflict);
        };
        let hash = PayloadHash::of_bytes(m.payload.as_bytes());
        let mut tx = self.pool.begin().await?;
        let claim = sql::claim(&mut tx, &key, &hash, self.now_ms).await?;
        let outcome = match claim {
            Claim::Fresh if m.probe => {
                if m.key.starts_with("probe:idempotency") {
                    self.tally.probe_effects += 1;
                } else if let Some(sent) = m
                    .payload
                    .strip_prefix("{\"sent_at\":")
                    .and_then(|r| r.strip_suffix('}'))
                    .and_then(|r| r.parse::<i64>().ok())
                {
                    let latency = (self.now_ms - sent) as f64 / 1000.0;
                    let slot = &mut self.probe_latency_s[side_index(side)];
                    *slot = Some(slot.map_or(latency, |l| 0.7 * l + 0.3 * latency));
                }
                Outcome::Processed
            }
            Claim::Fresh => {
                let version = i64::try_from(m.version).unwrap_or(i64::MAX);
                let status = match sql::accept_version(&mut tx, &m.aggregate, version).await? {
                    VersionCheck::Accepted => "applied",
                    VersionCheck::Stale { .. } => "superseded",
                };
                sqlx::query(
                    "INSERT INTO effects (key, aggregate, version, route, status, at) \
                     VALUES (?, ?, ?, ?, ?, ?)",
                )
                .bind(&m.key)
                .bind(&m.aggregate)
                .bind(version)
                .bind(side.as_str())
                .bind(status)
                .bind(self.now_ms)
                .execute(&mut *tx)
                .await?;
                if !self.applied_keys.insert(m.key.clone()) {
                    self.duplicate_effects += 1;
                }
                self.tally.processed[side_index(side)] += 1;
                Outcome::Processed
            }
            Claim::Duplicate => {
                self.tally.duplicates_delivered += 1;
                Outcome::DuplicateBlocked
            }
            Claim::Conflict { .. } => Outcome::Conflict,
        };
        if m.probe && m.key.starts_with("probe:idempotency") {
            self.tally.probe_deliveries += 1;
        }
        tx.commit().await?;
        Ok(outcome)
    }
}

/// What a consumer crash did: effects committed, acks lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crash {
    /// Messages of the batch applied before the crash.
    pub applied: usize,
    /// Messages of the batch left unacked (all of it): they come back for redelivery.
    pub unacked: usize,
    pub down_ms: i64,
}

/// Where the produced messages are at one moment ([`World::ledger`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Ledger {
    pub produced: u64,
    pub applied: u64,
    /// In the producers' outboxes: not yet confirmed by a broker.
    pub outboxes: u64,
    /// Queued in a broker (ready, unacked or waiting for a retry), not applied yet.
    pub in_brokers: u64,
    pub dead_lettered: u64,
    /// `produced` minus the four above (0 when nothing is lost).
    pub unaccounted: i64,
}

/// What the database and the dead-letter queues say at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Audit {
    pub produced: u64,
    pub applied: u64,
    pub dead_lettered: u64,
    pub duplicates_applied: u64,
    pub order_violations: u64,
    pub superseded: u64,
    /// Effects for keys nobody produced (must be 0).
    pub unknown_effects: u64,
}
