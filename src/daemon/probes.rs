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

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::Shared;
use crate::brokers::{Adapter, HEADER_DEDUP_KEY, HEADER_KEY, Kind, Message};
use crate::machine::State;
use crate::plan::{Broker, PhaseKind, Plan, Probes};
use crate::probe::{self, HEADER_PROBE, ProbeKind};
use crate::routing::{Route, Side};
use crate::slice::slice_of;
use crate::stamp::RouteStamp;
use crate::store::Store;

/// The producer name on probes' route stamps.
pub const PROBE_PRODUCER: &str = "migrate-probe";

#[derive(Debug, Default)]
struct Counters {
    sent: [AtomicU64; 2],
    errors: AtomicU64,
}

/// Probe runs in progress, by migration, and what they sent.
#[derive(Debug, Default)]
pub struct ProbeRuns {
    runs: Mutex<HashMap<String, (i64, JoinHandle<()>)>>,
    counters: Arc<Mutex<HashMap<String, Arc<Counters>>>>,
}

impl Drop for ProbeRuns {
    fn drop(&mut self) {
        let runs = self.runs.get_mut().unwrap_or_else(PoisonError::into_inner);
        for (_, (_, task)) in runs.drain() {
            task.abort();
        }
    }
}

/// Whether the daemon that started a run still holds the lease (checked before each publish).
type Leading = Arc<dyn Fn() -> bool + Send + Sync>;

impl ProbeRuns {
    /// Stop every run: this daemon no longer holds the lease (or stops leading). The daemon that
    /// takes over starts them again, with the same probe keys.
    pub fn stop_all(&self) {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        for (name, (_, task)) in runs.drain() {
            if !task.is_finished() {
                tracing::info!(migration = %name, "probes: run stopped: this daemon no longer holds the lease");
            }
            task.abort();
        }
    }

    /// The migrations whose run is still going (started, neither complete nor stopped).
    pub fn running(&self) -> Vec<String> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<String> = runs
            .iter()
            .filter(|(_, (_, task))| !task.is_finished())
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

    /// Start the runs that should be running, stop the others. Called by the lease holder after
    /// every tick; without the lease (lost meanwhile) it stops every run and starts none.
    pub async fn reconcile<S: Store + Clone + 'static>(&self, shared: &Arc<Shared<S>>) {
        if !shared.is_leader() {
            self.stop_all();
            return;
        }
        let records = match shared.store.list().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("probes: cannot list migrations: {e}");
                return;
            }
        };
        let wanted: HashMap<String, i64> = records
            .iter()
            .filter(|r| r.state == State::Synthetic && !r.paused)
            .map(|r| (r.name.clone(), r.entered_at_ms))
            .collect();
        {
            let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
            runs.retain(|name, (run, task)| {
                let keep = wanted.get(name) == Some(run);
                if !keep {
                    task.abort();
                }
                keep
            });
        }
        for rec in records {
            let Some(&run) = wanted.get(&rec.name) else {
                continue;
            };
            if self
                .runs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&rec.name)
            {
                continue;
            }
            let plan = match shared.controller(true).load(&rec.name).await {
                Ok(l) => l.plan,
                Err(e) => {
                    tracing::warn!(migration = %rec.name, "probes: cannot load the plan: {e}");
                    continue;
                }
            };
            let Some(probes) = plan
                .phase(PhaseKind::Synthetic)
                .and_then(|p| p.probes.clone())
            else {
                continue;
            };
            // The lease may have run out while the plan was read.
            if !shared.is_leader() {
                self.stop_all();
                return;
            }
            let counters = self.counters(&rec.name);
            let clock = shared.config.clock.clone();
            let generation = u64::try_from(rec.generation).unwrap_or(0);
            // Weak: the runs live in `shared`; a run must not keep it alive.
            let weak: Weak<Shared<S>> = Arc::downgrade(shared);
            let leading: Leading = Arc::new(move || weak.upgrade().is_some_and(|s| s.is_leader()));
            tracing::info!(migration = %rec.name, rate = probes.rate, count = probes.count, "probes: starting a run");
            let task = tokio::spawn(send_run(
                plan, probes, run, generation, clock, counters, leading,
            ));
            self.runs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(rec.name.clone(), (run, task));
        }
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
        let _ = writeln!(
            out,
            "# HELP {name} Synthetic probes published and confirmed by the new broker, by kind.\n# TYPE {name} counter"
        );
        for m in &names {
            let mut label = String::new();
            crate::stamp::escape_label(&mut label, m);
            for kind in ProbeKind::ALL {
                let i = usize::from(kind == ProbeKind::Idempotency);
                let v = counters[*m].sent[i].load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "{name}{{migration=\"{label}\",probe=\"{}\"}} {v}",
                    kind.as_str()
                );
            }
        }
        let name = "queue_migrate_probe_publish_errors_total";
        let _ = writeln!(
            out,
            "# HELP {name} Synthetic probe publishes that failed (retried).\n# TYPE {name} counter"
        );
        for m in &names {
            let mut label = String::new();
            crate::stamp::escape_label(&mut label, m);
            let v = counters[*m].errors.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}{{migration=\"{label}\"}} {v}");
        }
        out
    }
}

async fn connect(broker: &Broker) -> Option<Adapter> {
    let Some(kind) = Kind::parse(&broker.kind) else {
        tracing::warn!(kind = %broker.kind, "probes: no adapter for this broker kind");
        return None;
    };
    let url = match broker.url.value() {
        Ok(url) => url,
        Err(why) => {
            tracing::warn!("probes: the {} broker's URL: {why}", broker.name);
            return None;
        }
    };
    match Adapter::connect(kind, url).await {
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
    let route = Route {
        target: Side::New,
        slice: slice_of(&key, plan.slices),
        generation,
    };
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
    let at = u64::try_from(at_ms).unwrap_or(0);
    if let Ok(stamp) = RouteStamp::new(&route, plan.brokers.new.name.clone(), PROBE_PRODUCER, at) {
        for (name, value) in stamp.headers() {
            message.headers.insert(name.to_string(), value);
        }
    }
    message
}

/// Publish `message` until confirmed (`true`), or until the lease is lost (`false`: nothing
/// more is published), or the run is aborted.
async fn publish(
    adapter: &Adapter,
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
        match adapter.publish(queue, message).await {
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

async fn send_run(
    plan: Plan,
    probes: Probes,
    run: i64,
    generation: u64,
    clock: super::Clock,
    counters: Arc<Counters>,
    leading: Leading,
) {
    let lost = |plan: &Plan| {
        tracing::info!(migration = %plan.name, "probes: run stopped: this daemon no longer holds the lease");
    };
    let Some(queue) = plan.brokers.new.destination().map(str::to_string) else {
        tracing::warn!(migration = %plan.name, "probes: brokers.new has no queue or stream");
        return;
    };
    let adapter = loop {
        if !leading() {
            return lost(&plan);
        }
        if let Some(a) = connect(&plan.brokers.new).await {
            break a;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    if let Err(e) = adapter.declare(&queue).await {
        tracing::warn!("probes: {e}");
    }
    for _ in 0..probes.repeat {
        let m = probe_message(&plan, run, generation, None, clock());
        if !publish(&adapter, &queue, &m, &counters, &leading).await {
            return lost(&plan);
        }
        counters.sent[1].fetch_add(1, Ordering::Relaxed);
    }
    let mut sent = 0u32;
    while sent < probes.count {
        let due = probe::due(probes.rate, probes.count, clock() - run).max(sent + 1);
        while sent < due {
            sent += 1;
            let m = probe_message(&plan, run, generation, Some(sent), clock());
            if !publish(&adapter, &queue, &m, &counters, &leading).await {
                return lost(&plan);
            }
            counters.sent[0].fetch_add(1, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_secs_f64(1.0 / probes.rate)).await;
    }
    tracing::info!(migration = %plan.name, sent, "probes: run complete");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::BusinessKey;
    use crate::stamp::RouteStamp;

    fn plan() -> Plan {
        let yaml = include_str!("../../plans/local.yaml").replace(
            "  synthetic:\n    min_duration: 0s\n",
            "  synthetic:\n    min_duration: 0s\n    probes: { rate: 2, count: 3 }\n",
        );
        struct Env;
        impl crate::plan::Resolve for Env {
            fn env(&self, _: &str) -> Option<String> {
                Some("http://127.0.0.1:1".into())
            }
            fn read_file(&self, _: &std::path::Path) -> Result<String, String> {
                Err("no files".into())
            }
        }
        crate::plan::compile(&yaml, None, &Env).expect("plan").plan
    }

    /// A daemon holding the lease with one migration in `synthetic` whose probes go to a new
    /// broker that never answers (its run keeps trying to connect, as a run keeps publishing).
    async fn synthetic_daemon(
        dir: &std::path::Path,
    ) -> Arc<Shared<crate::store::sqlite::SqliteStore>> {
        use crate::machine::Snapshot;
        use crate::store::{Commit, NewMigration};
        let yaml = include_str!("../../plans/local.yaml")
            .replace(
                "  synthetic:\n    min_duration: 0s\n",
                "  synthetic:\n    min_duration: 0s\n    probes: { rate: 2, count: 3 }\n",
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
                },
            )
            .await
            .unwrap();
        store.mark_published("local", rec.generation).await.unwrap();
        struct Env;
        impl crate::plan::Resolve for Env {
            fn env(&self, _: &str) -> Option<String> {
                Some("http://127.0.0.1:1".into())
            }
            fn read_file(&self, path: &std::path::Path) -> Result<String, String> {
                std::fs::read_to_string(path).map_err(|e| e.to_string())
            }
        }
        let config = super::super::Config {
            interval: Duration::from_secs(1),
            source_timeout: Duration::from_secs(1),
            queries_per_request: crate::indicators::fetch::QUERIES_PER_REQUEST,
            lease_ttl: Duration::from_secs(5),
            watch_interval: Duration::from_secs(1),
            holder: "a".into(),
            token: None,
            read_only_api: false,
            confirm_complete: vec![],
            clock: Arc::new(crate::time::now_ms),
        };
        let shared = Shared::new(store, config, Arc::new(Env)).unwrap();
        super::super::renew(&shared).await;
        assert!(shared.is_leader());
        shared.probes.reconcile(&shared).await;
        assert_eq!(shared.probes.running(), ["local"]);
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
            shared.probes.running().is_empty(),
            "probes still run for a migration another daemon owns: {:?}",
            shared.probes.running()
        );
        // And none starts without the lease.
        shared.probes.reconcile(&shared).await;
        assert!(shared.probes.running().is_empty());
    }

    #[tokio::test]
    async fn a_probe_run_stops_by_itself_when_the_lease_runs_out_unrenewed() {
        let dir = tempfile::tempdir().unwrap();
        let shared = synthetic_daemon(dir.path()).await;
        // The renewals fail from now on (the store is unreachable): the lease runs out within
        // 300 ms of the daemon's margin, and nothing tells the run but the lease itself.
        let margin = i64::try_from(shared.config.lease_ttl.as_millis() / 5).unwrap();
        shared.lease_until.store(
            crate::time::now_ms() + margin + 300,
            std::sync::atomic::Ordering::SeqCst,
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(6);
        while !shared.probes.running().is_empty() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(!shared.is_leader());
        assert!(
            shared.probes.running().is_empty(),
            "a probe run outlived the lease by seconds"
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
