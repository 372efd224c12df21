//! The synthetic phase's probes: while a migration is in `synthetic` (not paused) and its plan
//! has `synthetic: { probes: .. }`, the daemon that holds the lease publishes marked probe
//! messages through the new broker's adapter (see [`crate::probe`] for the wire format and what
//! consumers do with them).
//!
//! A run is identified by the instant the migration entered `synthetic`; probe keys are derived
//! from it, so a daemon that restarts (or a standby that takes over) re-sends probes with the
//! same keys, which the consumers' dedup absorbs. A run stops when the migration leaves
//! `synthetic`, is paused, or has sent `count` probes, and when this daemon no longer holds the
//! lease: runs are stopped as the loss is noticed ([`ProbeRuns::stop_all`], by the renewal that
//! finds another holder and by a tick that finds the lease run out), and a run checks the lease
//! itself before each publish, so that it never publishes on behalf of a daemon that no longer
//! owns the migration. No run starts without the lease.
//!
//! A run stopped with the lease is not over: it stays listed with how far it got, and when this
//! daemon leads again (a brief lapse the next renewal makes good, or the lease taken back later)
//! the next [`ProbeRuns::reconcile`] resumes it from its next probe. So is a run stopped because
//! its migration was paused: pausing keeps the step (and so the run id), and the first reconcile
//! after the migration is resumed goes on from its next probe. A run that sent every probe is over
//! and never sent again by this daemon, whether the lease lapsed or the migration was paused
//! meanwhile. Only leaving `synthetic` (or entering it again: a new run id) drops a run. A
//! resumed run is paced from its resumption: the probes left go out at the run's rate.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::adapters::from_plan;
use crate::brokers::{Adapter, BrokerError, HEADER_DEDUP_KEY, HEADER_KEY, Message};
use crate::metrics_text::{self, Kind};
use crate::plan::{Broker, Plan, Probes};
use crate::probe::{self, HEADER_PROBE, ProbeKind};
use crate::routing::{Route, Side};
use crate::slice::slice_of;
use crate::stamp::RouteStamp;

/// The producer name on probes' route stamps.
pub const PROBE_PRODUCER: &str = "migrate-probe";

#[derive(Debug, Default)]
struct Counters {
    sent: [AtomicU64; 2],
    errors: AtomicU64,
}

/// How far a run got. Kept while the run is listed, so that a run stopped with the lease (or by a
/// pause) resumes where it stopped instead of sending its probes again from the first.
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// Copies of the idempotency probe the broker confirmed.
    pub(super) repeats: AtomicU32,
    /// Latency probes the broker confirmed (`1..=latency`).
    pub(super) latency: AtomicU32,
    /// Every probe was sent (or none can be: `brokers.new` has no destination): never started
    /// again.
    pub(super) over: AtomicBool,
}

/// One migration's run.
#[derive(Debug)]
pub(super) struct Run {
    /// When the migration entered `synthetic` (the probe keys derive from it).
    pub(super) id: i64,
    /// Finished once the run is over or stopped (lease lost, aborted).
    pub(super) task: JoinHandle<()>,
    pub(super) progress: Arc<Progress>,
}

/// Probe runs in progress, by migration, and what they sent.
#[derive(Debug, Default)]
pub struct ProbeRuns {
    pub(super) runs: Mutex<HashMap<String, Run>>,
    counters: Arc<Mutex<HashMap<String, Arc<Counters>>>>,
    connector: Connector,
}

impl Drop for ProbeRuns {
    fn drop(&mut self) {
        let runs = self.runs.get_mut().unwrap_or_else(PoisonError::into_inner);
        for (_, run) in runs.drain() {
            run.task.abort();
        }
    }
}

/// Whether the daemon that started a run still holds the lease (checked before each publish).
pub(super) type Leading = Arc<dyn Fn() -> bool + Send + Sync>;

impl ProbeRuns {
    /// Stop every run going: this daemon no longer holds the lease (or stops leading). The runs
    /// stay listed with how far they got: when this daemon leads again, [`ProbeRuns::reconcile`]
    /// resumes those that were not over and leaves those that were (a run that sent every probe
    /// is not sent again). A daemon that takes over starts them anew, with the same probe keys.
    pub fn stop_all(&self) {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        for (name, run) in runs.iter() {
            if !run.task.is_finished() {
                tracing::info!(migration = %name, "probes: run stopped: this daemon no longer holds the lease");
                run.task.abort();
            }
        }
    }

    /// The migrations whose run is still going (started, neither complete nor stopped).
    pub fn running(&self) -> Vec<String> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<String> = runs
            .iter()
            .filter(|(_, run)| !run.task.is_finished())
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }

    fn counters(&self, migration: &str) -> Arc<Counters> {
        self.counters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(migration.to_string())
            .or_default()
            .clone()
    }

    /// Start sending `migration`'s run `run`: the probes left (those `progress` says are not sent yet) on a task of
    /// its own; it stops once every probe was sent or when `leading` turns false.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn spawn_run(
        &self,
        migration: &str,
        plan: Plan,
        probes: Probes,
        run: i64,
        generation: u64,
        clock: super::DaemonClock,
        progress: Arc<Progress>,
        leading: Leading,
    ) -> JoinHandle<()> {
        let counters = self.counters(migration);
        tokio::spawn(send_run(
            plan,
            probes,
            run,
            generation,
            clock,
            counters,
            progress,
            self.connector.clone(),
            leading,
        ))
    }

    /// `queue_migrate_probes_sent_total{migration,probe}` and
    /// `queue_migrate_probe_publish_errors_total{migration}`.
    pub fn render(&self) -> String {
        let counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = String::new();
        if counters.is_empty() {
            return out;
        }
        let mut names: Vec<&String> = counters.keys().collect();
        names.sort();
        let name = "queue_migrate_probes_sent_total";
        metrics_text::family(
            &mut out,
            name,
            Kind::Counter,
            "Synthetic probes published and confirmed by the new broker, by kind.",
        );
        for m in &names {
            for kind in ProbeKind::ALL {
                let i = usize::from(kind == ProbeKind::Idempotency);
                let v = counters[*m].sent[i].load(Ordering::Relaxed);
                let labels = [("migration", m.as_str()), ("probe", kind.as_str())];
                metrics_text::sample(&mut out, name, &labels, v);
            }
        }
        let name = "queue_migrate_probe_publish_errors_total";
        metrics_text::family(
            &mut out,
            name,
            Kind::Counter,
            "Synthetic probe publishes that failed (retried).",
        );
        for m in &names {
            let v = counters[*m].errors.load(Ordering::Relaxed);
            metrics_text::sample(&mut out, name, &[("migration", m.as_str())], v);
        }
        out
    }
}

/// How runs reach the new broker: through its adapter (or a fake broker, in this module's tests).
#[derive(Debug, Clone, Default)]
enum Connector {
    #[default]
    Brokers,
    #[cfg(test)]
    Fake(Arc<tests::FakeBroker>),
}

impl Connector {
    async fn connect(&self, broker: &Broker) -> Option<Sink> {
        match self {
            Connector::Brokers => connect(broker).await.map(|a| Sink::Broker(Box::new(a))),
            #[cfg(test)]
            Connector::Fake(fake) => Some(Sink::Fake(fake.clone())),
        }
    }
}

/// Where a run publishes.
enum Sink {
    Broker(Box<Adapter>),
    #[cfg(test)]
    Fake(Arc<tests::FakeBroker>),
}

impl Sink {
    async fn declare(&self, queue: &str) -> Result<(), BrokerError> {
        match self {
            Sink::Broker(adapter) => adapter.declare(queue).await,
            #[cfg(test)]
            Sink::Fake(_) => Ok(()),
        }
    }

    async fn publish(&self, queue: &str, message: &Message) -> Result<(), BrokerError> {
        match self {
            Sink::Broker(adapter) => adapter.publish(queue, message).await,
            #[cfg(test)]
            Sink::Fake(fake) => {
                fake.publish(message);
                Ok(())
            }
        }
    }
}

async fn connect(broker: &Broker) -> Option<Adapter> {
    match from_plan::connect(broker, Side::New).await {
        Ok(a) => Some(a),
        Err(e) => {
            tracing::warn!("probes: {e}");
            None
        }
    }
}

/// The probe message `seq` (`None`: the idempotency probe).
fn probe_message(plan: &Plan, run: i64, generation: u64, seq: Option<u32>, at_ms: i64) -> Message {
    let run_id = u64::try_from(run).unwrap_or(0);
    let (kind, dedup_key, key) = match seq {
        Some(seq) => (
            ProbeKind::Latency,
            probe::latency_key(&plan.name, run_id, seq),
            format!("probe-{seq}"),
        ),
        None => (
            ProbeKind::Idempotency,
            probe::idempotency_key(&plan.name, run_id),
            "probe-idempotency".to_string(),
        ),
    };
    let route = Route::new(Side::New, slice_of(&key, plan.slices), generation);
    let payload = serde_json::json!({
        "probe": kind.as_str(),
        "migration": plan.name,
        "run": run_id,
        "seq": seq,
    });
    let mut message = Message::new(payload.to_string().into_bytes())
        .with_header(HEADER_PROBE, kind.as_str())
        .with_header(HEADER_DEDUP_KEY, dedup_key)
        .with_header(HEADER_KEY, key);
    if let Ok(stamp) = RouteStamp::new(&route, plan.brokers.new.name.clone(), PROBE_PRODUCER, at_ms)
    {
        for (name, value) in stamp.headers() {
            message.headers.insert(name.to_string(), value);
        }
    }
    message
}

/// Publish `message` until confirmed (`true`), or until the lease is lost (`false`: nothing
/// more is published), or the run is aborted.
async fn publish(
    sink: &Sink,
    queue: &str,
    message: &Message,
    counters: &Counters,
    leading: &Leading,
) -> bool {
    let mut backoff = Duration::from_millis(200);
    loop {
        if !leading() {
            return false;
        }
        match sink.publish(queue, message).await {
            Ok(()) => return true,
            Err(e) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("probes: {e}; retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Send the probes of `run` that `progress` says are not sent yet; mark it over once every probe
/// was sent. Returns early (not over) when the lease is lost.
#[allow(clippy::too_many_arguments)]
async fn send_run(
    plan: Plan,
    probes: Probes,
    run: i64,
    generation: u64,
    clock: super::DaemonClock,
    counters: Arc<Counters>,
    progress: Arc<Progress>,
    connector: Connector,
    leading: Leading,
) {
    let lost = |plan: &Plan| {
        tracing::info!(migration = %plan.name, "probes: run stopped: this daemon no longer holds the lease");
    };
    let Some(queue) = plan.brokers.new.destination().map(str::to_string) else {
        tracing::warn!(migration = %plan.name, "probes: brokers.new has no queue or stream");
        // Not a lease matter: starting it again would not help.
        progress.over.store(true, Ordering::SeqCst);
        return;
    };
    let sink = loop {
        if !leading() {
            return lost(&plan);
        }
        if let Some(s) = connector.connect(&plan.brokers.new).await {
            break s;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    if let Err(e) = sink.declare(&queue).await {
        tracing::warn!("probes: {e}");
    }
    // A resumed run goes on from its first probe not confirmed (one cut short by the lease may be
    // sent twice: same key, dedup absorbs it).
    while progress.repeats.load(Ordering::SeqCst) < probes.repeat {
        let m = probe_message(&plan, run, generation, None, clock.gates_ms());
        if !publish(&sink, &queue, &m, &counters, &leading).await {
            return lost(&plan);
        }
        counters.sent[1].fetch_add(1, Ordering::Relaxed);
        progress.repeats.fetch_add(1, Ordering::SeqCst);
    }
    // Paced from where this session of the run starts: one resumed after a pause or a lease gap
    // goes on at its rate, not with a burst of every probe the gap made due.
    let mut sent = progress.latency.load(Ordering::SeqCst);
    let (base, since) = (sent, clock.gates_ms());
    while sent < probes.count {
        let due = (base + probe::due(probes.rate, probes.count - base, clock.gates_ms() - since))
            .max(sent + 1);
        while sent < due {
            sent += 1;
            let m = probe_message(&plan, run, generation, Some(sent), clock.gates_ms());
            if !publish(&sink, &queue, &m, &counters, &leading).await {
                return lost(&plan);
            }
            counters.sent[0].fetch_add(1, Ordering::Relaxed);
            progress.latency.store(sent, Ordering::SeqCst);
        }
        // The plan bounds the rate (0.001 to 1000 per second); a value past them (a plan from
        // elsewhere) waits a second rather than panic.
        let pause =
            Duration::try_from_secs_f64(1.0 / probes.rate).unwrap_or(Duration::from_secs(1));
        tokio::time::sleep(pause).await;
    }
    progress.over.store(true, Ordering::SeqCst);
    tracing::info!(migration = %plan.name, sent, "probes: run complete");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::Shared;
    use crate::dedup::BusinessKey;
    use crate::machine::State;
    use crate::plan::PhaseKind;
    use crate::stamp::RouteStamp;
    use crate::store::traits::*;

    fn plan() -> Plan {
        let yaml = include_str!("../../plans/local.yaml").replace(
            "  synthetic:\n    min_duration: 0s\n",
            "  synthetic:\n    min_duration: 0s\n    probes: { rate: 2, count: 3 }\n",
        );
        crate::plan::compile(&yaml, None, &crate::plan::LoopbackResolve)
            .expect("plan")
            .plan
    }

    /// A broker that confirms every publish at once and remembers each probe's dedup key.
    #[derive(Debug, Default)]
    pub(super) struct FakeBroker {
        keys: Mutex<Vec<String>>,
        /// When each was published (tokio's clock: paused time in the tests).
        at: Mutex<Vec<tokio::time::Instant>>,
    }

    impl FakeBroker {
        pub(super) fn publish(&self, message: &Message) {
            let key = message.header(HEADER_DEDUP_KEY).unwrap_or_default();
            self.keys.lock().unwrap().push(key.to_string());
            self.at.lock().unwrap().push(tokio::time::Instant::now());
        }

        fn keys(&self) -> Vec<String> {
            self.keys.lock().unwrap().clone()
        }

        /// Copies of the idempotency probe, and the latency probes (each key once, or panics).
        fn sent(&self) -> (usize, usize) {
            let keys = self.keys();
            let repeats = keys.iter().filter(|k| k.ends_with(".idempotency")).count();
            let mut latency: Vec<&String> = keys
                .iter()
                .filter(|k| !k.ends_with(".idempotency"))
                .collect();
            let n = latency.len();
            latency.sort();
            latency.dedup();
            assert_eq!(latency.len(), n, "a latency probe sent twice: {keys:?}");
            (repeats, n)
        }
    }

    /// A daemon holding the lease with one migration in `synthetic` whose probes go to a new
    /// broker that never answers (its run keeps trying to connect, as a run keeps publishing).
    async fn synthetic_daemon(
        dir: &std::path::Path,
    ) -> Arc<Shared<crate::store::sqlite::SqliteStore>> {
        daemon_with_probes(dir, "{ rate: 2, count: 3 }", None).await
    }

    /// [`synthetic_daemon`] with these `probes`, publishing to `fake` if given.
    async fn daemon_with_probes(
        dir: &std::path::Path,
        probes: &str,
        fake: Option<Arc<FakeBroker>>,
    ) -> Arc<Shared<crate::store::sqlite::SqliteStore>> {
        daemon_clocked(dir, probes, fake, Arc::new(crate::time::now_ms)).await
    }

    /// [`daemon_with_probes`], the daemon's clock (probe pacing and stamps) being `clock`.
    async fn daemon_clocked(
        dir: &std::path::Path,
        probes: &str,
        fake: Option<Arc<FakeBroker>>,
        clock: crate::time::Clock,
    ) -> Arc<Shared<crate::store::sqlite::SqliteStore>> {
        use crate::machine::Snapshot;
        use crate::store::{Commit, NewMigration};
        let yaml = include_str!("../../plans/local.yaml")
            .replace(
                "  synthetic:\n    min_duration: 0s\n",
                &format!("  synthetic:\n    min_duration: 0s\n    probes: {probes}\n"),
            )
            .replace("nats://127.0.0.1:4222", "nats://127.0.0.1:1");
        let path = dir.join("local.yaml");
        std::fs::write(&path, &yaml).unwrap();
        let store = crate::store::sqlite::SqliteStore::open("sqlite::memory:")
            .await
            .unwrap();
        let now = crate::time::now_ms();
        store
            .create(&NewMigration {
                name: "local".into(),
                plan_yaml: yaml.clone(),
                plan_path: path.display().to_string(),
                plan_hash: crate::controller::plan_hash(&yaml),
                now_ms: now,
                actor: "test".into(),
            })
            .await
            .unwrap();
        let rec = store
            .commit(
                "local",
                &Commit {
                    expected_version: 1,
                    command: "advance".into(),
                    to: Snapshot {
                        state: State::Synthetic,
                        paused: false,
                    },
                    at_ms: now,
                    actor: "test".into(),
                    reason: None,
                    forced: true,
                    evidence: serde_json::Value::Null,
                    memory: Vec::new(),
                },
            )
            .await
            .unwrap();
        store.mark_published("local", rec.generation).await.unwrap();
        let config = super::super::Config {
            interval: Duration::from_secs(1),
            source_timeout: Duration::from_secs(1),
            queries_per_request: crate::indicators::fetch::QUERIES_PER_REQUEST,
            max_series: crate::indicators::fetch::MAX_SERIES,
            // Long enough for a test's real time: only the tests lapse it.
            lease_ttl: Duration::from_secs(60),
            watch_interval: Duration::from_secs(1),
            holder: "a".into(),
            instance: String::new(),
            access: Default::default(),
            read_only_api: false,
            allowed_hosts: Vec::new(),
            confirm_complete: vec![],
            clock: super::super::DaemonClock::simulated(clock),
            http: crate::daemon::http::Limits::default(),
            retain: None,
            max_clock_skew: std::time::Duration::from_secs(2),
        };
        let mut shared =
            Shared::new(store, config, Arc::new(crate::plan::LoopbackResolve)).unwrap();
        if let Some(fake) = fake {
            Arc::get_mut(&mut shared).unwrap().rounds.probes.connector = Connector::Fake(fake);
        }
        super::super::renew(&shared).await;
        assert!(shared.is_leader());
        shared.rounds.probes.reconcile(&shared).await;
        assert_eq!(shared.rounds.probes.running(), ["local"]);
        shared
    }

    #[tokio::test]
    async fn probe_runs_stop_when_another_daemon_takes_the_lease() {
        let dir = tempfile::tempdir().unwrap();
        let shared = synthetic_daemon(dir.path()).await;
        // Another daemon holds the lease now (ours ran out unrenewed; it took it).
        let now = crate::time::now_ms();
        let lease = super::super::LEASE;
        shared.store.release_lease(lease, "a").await.unwrap();
        let taken = shared
            .store
            .acquire_lease(lease, "b", now, 5_000)
            .await
            .unwrap();
        assert_eq!(taken.holder, "b");
        // Our next renewal finds it: the runs stop with it.
        super::super::renew(&shared).await;
        assert!(!shared.is_leader());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            shared.rounds.probes.running().is_empty(),
            "probes still run for a migration another daemon owns: {:?}",
            shared.rounds.probes.running()
        );
        // And none starts without the lease.
        shared.rounds.probes.reconcile(&shared).await;
        assert!(shared.rounds.probes.running().is_empty());
    }

    #[tokio::test]
    async fn a_probe_run_stops_by_itself_when_the_lease_runs_out_unrenewed() {
        let dir = tempfile::tempdir().unwrap();
        let shared = synthetic_daemon(dir.path()).await;
        // The renewals fail from now on (the store is unreachable): the lease runs out within
        // 300 ms of the daemon's margin, and nothing tells the run but the lease itself.
        let margin = i64::try_from(shared.config.lease_ttl.as_millis() / 5).unwrap();
        shared
            .lease
            .set_until(shared.config.clock.lease_ms() + margin + 300);
        let deadline = std::time::Instant::now() + Duration::from_secs(6);
        while !shared.rounds.probes.running().is_empty() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(!shared.is_leader());
        assert!(
            shared.rounds.probes.running().is_empty(),
            "a probe run outlived the lease by seconds"
        );
    }

    /// Let the runs go on in paused time until `done` (at most 100 s of it).
    async fn until(what: &str, done: impl Fn() -> bool) {
        for _ in 0..1000 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what}: not within 100 s");
    }

    /// Run `f` (the store's work: SQLite answers from a thread of its own) with the clock going:
    /// paused time would jump to the store pool's timeouts while it waits for that thread.
    async fn real_time<F: std::future::Future>(f: F) -> F::Output {
        tokio::time::resume();
        let out = f.await;
        tokio::time::pause();
        out
    }

    #[tokio::test]
    async fn a_probe_run_that_stopped_on_a_lease_lapse_starts_again_when_the_lease_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let fake = Arc::new(FakeBroker::default());
        let shared =
            daemon_with_probes(dir.path(), "{ rate: 2, count: 20 }", Some(fake.clone())).await;
        tokio::time::pause();
        // The five copies of the idempotency probe, then latency probes one by one.
        until("two latency probes", || fake.keys().len() >= 7).await;
        // Two renewals fail in a row: the lease is within its margin of running out, and the run
        // sees it before its next probe and stops by itself (nothing calls stop_all).
        let margin = i64::try_from(shared.config.lease_ttl.as_millis() / 5).unwrap();
        shared
            .lease
            .set_until(shared.config.clock.lease_ms() + margin);
        assert!(!shared.is_leader());
        until("the run stops", || {
            shared.rounds.probes.running().is_empty()
        })
        .await;
        let stopped = fake.keys().len();
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(
            fake.keys().len(),
            stopped,
            "a probe published without the lease"
        );
        // The next renewal takes the lease back (nobody else took it), then the tick's reconcile.
        real_time(super::super::renew(&shared)).await;
        assert!(shared.is_leader());
        real_time(shared.rounds.probes.reconcile(&shared)).await;
        assert_eq!(
            shared.rounds.probes.running(),
            ["local"],
            "the run stopped on a lease lapse is never started again"
        );
        // It resumes where it stopped: no probe sent twice, and the run completes.
        until("one more latency probe", || fake.keys().len() > stopped).await;
        // Lost to another daemon for a while (stop_all), then ours again: resumed again.
        real_time(async {
            let lease = super::super::LEASE;
            shared.store.release_lease(lease, "a").await.unwrap();
            let now = crate::time::now_ms();
            let taken = shared.store.acquire_lease(lease, "b", now, 60_000).await;
            assert_eq!(taken.unwrap().holder, "b");
            super::super::renew(&shared).await;
            assert!(!shared.is_leader());
            shared.store.release_lease(lease, "b").await.unwrap();
            super::super::renew(&shared).await;
            assert!(shared.is_leader());
        })
        .await;
        until("the run stops", || {
            shared.rounds.probes.running().is_empty()
        })
        .await;
        real_time(shared.rounds.probes.reconcile(&shared)).await;
        assert_eq!(shared.rounds.probes.running(), ["local"]);
        until("the run completes", || {
            shared.rounds.probes.running().is_empty()
        })
        .await;
        assert_eq!(fake.sent(), (5, 20), "{:?}", fake.keys());
        let metrics = shared.rounds.probes.render();
        assert!(
            metrics.contains(
                "queue_migrate_probes_sent_total{migration=\"local\",probe=\"latency\"} 20\n"
            ),
            "{metrics}"
        );
    }

    #[tokio::test]
    async fn a_finished_probe_run_is_not_sent_again_after_the_lease_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let fake = Arc::new(FakeBroker::default());
        let shared =
            daemon_with_probes(dir.path(), "{ rate: 2, count: 3 }", Some(fake.clone())).await;
        tokio::time::pause();
        until("the run completes", || {
            shared.rounds.probes.running().is_empty()
        })
        .await;
        assert_eq!(fake.sent(), (5, 3));
        // Another daemon takes the lease (ours ran out unrenewed), then gives it back.
        real_time(async {
            let lease = super::super::LEASE;
            shared.store.release_lease(lease, "a").await.unwrap();
            let now = crate::time::now_ms();
            let taken = shared.store.acquire_lease(lease, "b", now, 60_000).await;
            assert_eq!(taken.unwrap().holder, "b");
            super::super::renew(&shared).await;
            assert!(!shared.is_leader());
            // A tick without the lease stops the runs too.
            shared.rounds.probes.reconcile(&shared).await;
            shared.store.release_lease(lease, "b").await.unwrap();
            super::super::renew(&shared).await;
            assert!(shared.is_leader());
            shared.rounds.probes.reconcile(&shared).await;
        })
        .await;
        assert!(
            shared.rounds.probes.running().is_empty(),
            "a finished run was started again"
        );
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(fake.sent(), (5, 3), "{:?}", fake.keys());
    }

    /// `migrate pause` (or `resume`) on the migration, then the tick's reconcile.
    async fn set_paused(shared: &Arc<Shared<crate::store::sqlite::SqliteStore>>, paused: bool) {
        use crate::machine::Snapshot;
        use crate::store::Commit;
        real_time(async {
            let rec = shared.store.get("local").await.unwrap();
            assert_eq!(rec.state, State::Synthetic);
            assert_ne!(rec.paused, paused);
            let after = shared
                .store
                .commit(
                    "local",
                    &Commit {
                        expected_version: rec.version,
                        command: if paused { "pause" } else { "resume" }.into(),
                        to: Snapshot {
                            state: State::Synthetic,
                            paused,
                        },
                        at_ms: crate::time::now_ms(),
                        actor: "test".into(),
                        reason: None,
                        forced: false,
                        evidence: serde_json::Value::Null,
                        memory: Vec::new(),
                    },
                )
                .await
                .unwrap();
            // The same step: the same run id.
            assert_eq!(after.entered_at_ms, rec.entered_at_ms);
            assert!(shared.is_leader());
            shared.rounds.probes.reconcile(shared).await;
        })
        .await;
    }

    #[tokio::test]
    async fn a_finished_probe_run_is_not_sent_again_after_a_pause_and_unpause() {
        let dir = tempfile::tempdir().unwrap();
        let fake = Arc::new(FakeBroker::default());
        let shared =
            daemon_with_probes(dir.path(), "{ rate: 2, count: 3 }", Some(fake.clone())).await;
        tokio::time::pause();
        until("the run completes", || {
            shared.rounds.probes.running().is_empty()
        })
        .await;
        assert_eq!(fake.sent(), (5, 3));
        set_paused(&shared, true).await;
        assert!(shared.rounds.probes.running().is_empty());
        set_paused(&shared, false).await;
        assert!(
            shared.rounds.probes.running().is_empty(),
            "a finished run was started again after an unpause"
        );
        // And at the ticks after that.
        real_time(shared.rounds.probes.reconcile(&shared)).await;
        assert!(shared.rounds.probes.running().is_empty());
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(fake.sent(), (5, 3), "{:?}", fake.keys());
    }

    #[tokio::test]
    async fn a_probe_run_paused_midway_resumes_where_it_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let fake = Arc::new(FakeBroker::default());
        let shared =
            daemon_with_probes(dir.path(), "{ rate: 2, count: 20 }", Some(fake.clone())).await;
        tokio::time::pause();
        until("two latency probes", || fake.keys().len() >= 7).await;
        // Paused: the run stops at the tick, and nothing is published while it stays paused.
        set_paused(&shared, true).await;
        until("the run stops", || {
            shared.rounds.probes.running().is_empty()
        })
        .await;
        let stopped = fake.keys().len();
        assert!(stopped < 5 + 20, "the run completed before the pause");
        real_time(shared.rounds.probes.reconcile(&shared)).await;
        assert!(
            shared.rounds.probes.running().is_empty(),
            "a paused run restarted"
        );
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(fake.keys().len(), stopped, "a probe published while paused");
        // Unpaused (same run id): the run resumes from its first probe not confirmed.
        set_paused(&shared, false).await;
        assert_eq!(
            shared.rounds.probes.running(),
            ["local"],
            "the run is not started again after an unpause"
        );
        until("the run completes", || {
            shared.rounds.probes.running().is_empty()
        })
        .await;
        // No idempotency copy again, no latency probe twice (sent() panics on a repeat).
        assert_eq!(fake.sent(), (5, 20), "{:?}", fake.keys());
        // Over: a later tick leaves it alone.
        real_time(shared.rounds.probes.reconcile(&shared)).await;
        assert!(shared.rounds.probes.running().is_empty());
    }

    #[tokio::test]
    async fn a_probe_run_resumed_after_a_long_pause_goes_on_at_its_rate_not_in_a_burst() {
        let dir = tempfile::tempdir().unwrap();
        let fake = Arc::new(FakeBroker::default());
        // The daemon's clock follows tokio's, so that paused time moves it too.
        let (start_ms, start) = (crate::time::now_ms(), tokio::time::Instant::now());
        let clock: crate::time::Clock = Arc::new(move || {
            start_ms + i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX)
        });
        let shared = daemon_clocked(
            dir.path(),
            "{ rate: 2, count: 20 }",
            Some(fake.clone()),
            clock,
        )
        .await;
        tokio::time::pause();
        until("two latency probes", || fake.keys().len() >= 7).await;
        set_paused(&shared, true).await;
        until("the run stops", || {
            shared.rounds.probes.running().is_empty()
        })
        .await;
        let stopped = fake.keys().len();
        // Paused for 20 s: at 2 a second, every probe left is due by the end of it.
        tokio::time::sleep(Duration::from_secs(20)).await;
        set_paused(&shared, false).await;
        until("the run completes", || {
            shared.rounds.probes.running().is_empty()
        })
        .await;
        assert_eq!(fake.sent(), (5, 20), "{:?}", fake.keys());
        let at = fake.at.lock().unwrap().clone();
        let gaps: Vec<Duration> = at[stopped..].windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.len() >= 2, "{gaps:?}");
        assert!(
            gaps.iter().all(|g| *g >= Duration::from_millis(450)),
            "the probes left were sent in a burst, not at 2 a second: {gaps:?}"
        );
    }

    #[test]
    fn probes_carry_a_business_key_a_mark_and_a_new_route_stamp() {
        let plan = plan();
        assert!(
            plan.phase(PhaseKind::Synthetic)
                .and_then(|p| p.probes.clone())
                .is_some()
        );
        let latency = probe_message(&plan, 1_700_000_000_000, 4, Some(7), 1_700_000_000_500);
        let idem = probe_message(&plan, 1_700_000_000_000, 4, None, 1_700_000_000_600);
        let key = |m: &Message| BusinessKey::parse(m.header(HEADER_DEDUP_KEY).unwrap()).unwrap();
        assert_eq!(key(&latency).as_str(), "probe:local:1700000000000.7");
        assert_eq!(key(&idem).as_str(), "probe:local:1700000000000.idempotency");
        assert_eq!(latency.header(HEADER_PROBE), Some("latency"));
        assert_eq!(idem.header(HEADER_PROBE), Some("idempotency"));
        let stamp = RouteStamp::from_headers(
            latency
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        )
        .unwrap();
        assert_eq!(stamp.side, crate::stamp::RouteLabel::New);
        assert_eq!(stamp.broker, plan.brokers.new.name);
        assert_eq!(stamp.producer, PROBE_PRODUCER);
        assert_eq!(stamp.generation, 4);
        assert_eq!(stamp.at_ms, 1_700_000_000_500);
        // The same probe of the same run is the same message key: a resend is a duplicate.
        let again = probe_message(&plan, 1_700_000_000_000, 4, Some(7), 1_700_000_009_999);
        assert_eq!(key(&again), key(&latency));
        let probe = crate::probe::Probe::from_headers(
            idem.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        );
        assert_eq!(probe.map(|p| p.kind), Some(ProbeKind::Idempotency));
    }
}
