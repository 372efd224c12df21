//! The controller's own Prometheus metrics (`GET /metrics`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::controller::GateReport;
use crate::metrics_text::{Kind, family, sample};
use crate::plan::{Check, GateKind, Plan};
use crate::routing::RoutingDocument;

#[derive(Debug, Default)]
struct Inner {
    migrations: BTreeMap<String, Gauges>,
    transitions: BTreeMap<(String, String), u64>,
    breaches: BTreeMap<(String, String), u64>,
    evaluation_errors: BTreeMap<String, u64>,
    ticks: u64,
    /// Rows deleted by the retention, per table.
    pruned: crate::store::retention::Pruned,
    /// Seconds the last tick took, all ticks took, and the longest took.
    tick_seconds: f64,
    tick_seconds_sum: f64,
    tick_seconds_max: f64,
    leader: bool,
    /// The lease epoch this daemon holds (0: none).
    lease_epoch: i64,
    /// This daemon's `--id` and instance (empty until said: [`Metrics::identity`]).
    identity: (String, String),
    /// Local clock minus the database's, sampled at the last lease attempt the database
    /// answered; `None` (no sample served) until the first.
    clock_skew_seconds: Option<f64>,
    /// Steps of the database's clock seen at lease samples, and how far the gates' clock runs
    /// behind the database's for the steps forward it did not take (issue 54).
    db_clock_steps: u64,
    db_clock_lag_seconds: f64,
    /// Writes refused by the fence (see [`crate::store::fence`]).
    fenced_writes: u64,
    /// Migrations a round skipped because it could not take their lock, by migration.
    lock_skips: BTreeMap<String, u64>,
    /// Ticks cut at their deadline, by migration.
    ticks_cut: BTreeMap<String, u64>,
    /// Times this daemon gave its lease up because its rounds did not complete.
    leases_given_up: u64,
}

#[derive(Debug, Default, Clone)]
struct Gauges {
    state: String,
    step: Option<usize>,
    paused: bool,
    slices_migrated: u32,
    slices_total: u32,
    generation: u64,
    gates: Vec<GateGauge>,
    /// The standing's kind ([`crate::standing::Standing::kind`]); empty until first seen.
    standing: &'static str,
}

/// One gate as its series show it.
#[derive(Debug, Clone)]
struct GateGauge {
    name: String,
    phase: String,
    /// `exit` or `guard`.
    kind: String,
    source: String,
    verdict: &'static str,
    /// The value the verdict rests on (`new` for a compare gate).
    value: Option<f64>,
    /// The `old` side of a compare gate.
    old_value: Option<f64>,
    /// What the value is compared with, and how: a threshold gate's number and its operator,
    /// a compare gate's `max(old × ratio, old + absolute)` and `<=`.
    limit: Option<(f64, &'static str)>,
    /// A `kafka_lag` gate's largest partition lag among those its query selects.
    largest: Option<crate::indicators::kafka_lag::LargestPartition>,
}

/// The limit gate `report` was held to (see [`GateGauge::limit`]), from its definition in
/// `plan`; `None` for requirements and gates the plan no longer has.
fn limit_of(plan: &Plan, report: &GateReport) -> Option<(f64, &'static str)> {
    let phase = plan
        .phases
        .iter()
        .find(|p| p.kind.as_str() == report.phase)?;
    let gates = if report.kind == GateKind::Guard {
        &phase.guard
    } else {
        &phase.exit
    };
    let gate = gates.iter().find(|g| g.name == report.name)?;
    match &gate.check {
        Check::Threshold { op, value, .. } => Some((*value, op.as_str())),
        Check::Compare {
            ratio, absolute, ..
        } => {
            let old = report.eval.old_value?;
            Some(((old * ratio).max(old + absolute), "<="))
        }
        // The FAIL test's boundary, `1/alpha`, the e-value must stay under.
        Check::Judge(_) => Some((report.eval.old_value?, "<")),
        // Its value is the number of producers that lag.
        Check::RoutingApplied { .. } => Some((0.0, "<=")),
    }
}

/// Counters and gauges updated by the loop, rendered on demand.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

const STATES: [&str; 7] = [
    "planned",
    "consume_dual",
    "synthetic",
    "slices",
    "drain",
    "disconnect",
    "complete",
];

impl Metrics {
    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> Option<R> {
        self.inner.lock().ok().map(|mut g| f(&mut g))
    }

    /// Ticks run so far.
    pub fn ticks(&self) -> u64 {
        self.with(|m| m.ticks).unwrap_or(0)
    }

    /// A tick ran, as leader or not, and took `took`.
    pub fn tick(&self, leader: bool, took: std::time::Duration) {
        self.with(|m| {
            let seconds = took.as_secs_f64();
            m.ticks += 1;
            m.tick_seconds = seconds;
            m.tick_seconds_sum += seconds;
            m.tick_seconds_max = m.tick_seconds_max.max(seconds);
            m.leader = leader;
        });
    }

    /// Whether this daemon leads, said between ticks (the lease ran out or was taken).
    pub fn leading(&self, leader: bool) {
        self.with(|m| m.leader = leader);
    }

    /// The database clock's steps seen so far, and the gates' clock's lag behind it (s).
    pub fn db_clock(&self, steps: u64, lag_seconds: f64) {
        self.with(|m| {
            m.db_clock_steps = steps;
            m.db_clock_lag_seconds = lag_seconds;
        });
    }

    /// The epoch of the lease held (0: none) and the clock skew measured at its renewal.
    pub fn lease(&self, epoch: i64, skew_seconds: Option<f64>) {
        self.with(|m| {
            m.lease_epoch = epoch;
            if skew_seconds.is_some() {
                m.clock_skew_seconds = skew_seconds;
            }
        });
    }

    /// This daemon's `--id` and the random id of this process instance (the lease's holder is
    /// both: [`crate::store::lease_keeper::instance_holder`]).
    pub fn identity(&self, id: &str, instance: &str) {
        self.with(|m| m.identity = (id.to_string(), instance.to_string()));
    }

    /// The writes the fence refused so far.
    pub fn fenced(&self, total: u64) {
        self.with(|m| m.fenced_writes = total);
    }

    /// A round skipped `migration`: its lock was held by another session.
    /// A migration's tick was cut at its deadline ([`super::Config::tick_deadline`]).
    pub fn tick_cut(&self, migration: &str) {
        self.with(|m| *m.ticks_cut.entry(migration.to_string()).or_default() += 1);
    }

    /// This daemon gave its lease up: no round completed within the lease TTL.
    pub fn lease_given_up(&self) {
        self.with(|m| m.leases_given_up += 1);
    }

    pub fn lock_skipped(&self, migration: &str) {
        self.with(|m| *m.lock_skips.entry(migration.to_string()).or_default() += 1);
    }

    pub fn routing(&self, doc: &RoutingDocument) {
        self.with(|m| {
            let g = m.migrations.entry(doc.migration.clone()).or_default();
            g.state = doc.state.clone();
            g.step = doc.step;
            g.paused = doc.paused;
            g.slices_migrated = doc.slices_migrated;
            g.slices_total = doc.slices_total;
            g.generation = doc.generation;
        });
    }

    /// A migration's gates as just evaluated under `plan`.
    pub fn gates(&self, migration: &str, plan: &Plan, reports: &[GateReport]) {
        let gauges: Vec<GateGauge> = reports
            .iter()
            .map(|r| GateGauge {
                name: r.name.clone(),
                phase: r.phase.clone(),
                kind: r.kind.as_str().to_string(),
                source: r.source.clone(),
                verdict: r.eval.verdict.as_str(),
                value: r.eval.value,
                old_value: r.eval.old_value,
                limit: limit_of(plan, r),
                largest: r.largest_partition.clone(),
            })
            .collect();
        self.with(|m| {
            let g = m.migrations.entry(migration.to_string()).or_default();
            g.gates = gauges;
            for r in reports {
                if r.eval.verdict == crate::gate::Verdict::NoData && r.eval.value.is_none() {
                    *m.evaluation_errors.entry(r.source.clone()).or_default() += 1;
                }
            }
        });
    }

    /// Where a migration stands now.
    pub fn standing(&self, migration: &str, kind: &'static str) {
        self.with(|m| {
            m.migrations
                .entry(migration.to_string())
                .or_default()
                .standing = kind
        });
    }

    /// The retention deleted `rows`.
    pub fn pruned(&self, rows: &crate::store::retention::Pruned) {
        self.with(|m| m.pruned += *rows);
    }

    pub fn transition(&self, migration: &str, command: &str) {
        self.with(|m| {
            *m.transitions
                .entry((migration.to_string(), command.to_string()))
                .or_default() += 1;
        });
    }

    pub fn breach(&self, migration: &str, gate: &str) {
        self.with(|m| {
            *m.breaches
                .entry((migration.to_string(), gate.to_string()))
                .or_default() += 1;
        });
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        self.with(|m| render(m)).unwrap_or_default()
    }
}

/// Who follows the routing document ([`crate::indicators::followers`]): producers remembered per
/// migration, the cap, and those forgotten to keep it.
pub fn render_followers(out: &mut String, followers: &crate::indicators::followers::Followers) {
    family(
        out,
        "queue_migrate_routing_followers",
        Kind::Gauge,
        "Producers this daemon remembers from the routing long-poll (those that said their id), by migration.",
    );
    for (migration, n) in followers.counts() {
        sample(
            out,
            "queue_migrate_routing_followers",
            &[("migration", migration.as_str())],
            n,
        );
    }
    family(
        out,
        "queue_migrate_routing_followers_max",
        Kind::Gauge,
        "Most producers remembered at once, across all migrations (--http-max-followers).",
    );
    sample(
        out,
        "queue_migrate_routing_followers_max",
        &[],
        followers.cap(),
    );
    family(
        out,
        "queue_migrate_routing_followers_evicted_total",
        Kind::Counter,
        "Producers forgotten to keep the cap (the one seen longest ago goes first).",
    );
    sample(
        out,
        "queue_migrate_routing_followers_evicted_total",
        &[],
        followers.evicted(),
    );
}

fn render(m: &Inner) -> String {
    let mut text = String::new();
    lease_families(&mut text, m);
    tick_families(&mut text, m);
    migration_families(&mut text, m);
    gate_families(&mut text, m);
    counter_families(&mut text, m);
    text
}

/// Steps of the database's clock, and how far the gates' clock lags it (issue 54).
fn db_clock_families(out: &mut String, m: &Inner) {
    family(
        out,
        "queue_migrate_db_clock_steps_total",
        Kind::Counter,
        "Steps of the database's clock (its readings moving more than 1 s apart from the monotonic clock between two lease samples); observe, min_duration and for: are not shortened by them.",
    );
    sample(
        out,
        "queue_migrate_db_clock_steps_total",
        &[],
        m.db_clock_steps,
    );
    family(
        out,
        "queue_migrate_gates_clock_lag_seconds",
        Kind::Gauge,
        "How far the clock the gates are measured on runs behind the database's: the steps forward it did not take (0 unless the database's clock stepped forward).",
    );
    sample(
        out,
        "queue_migrate_gates_clock_lag_seconds",
        &[],
        m.db_clock_lag_seconds,
    );
}

/// The controller's own series: up, leadership, lease, clock skew, fencing, round locks.
fn lease_families(out: &mut String, m: &Inner) {
    family(
        out,
        "queue_migrate_up",
        Kind::Gauge,
        "1 while the controller runs.",
    );
    sample(out, "queue_migrate_up", &[], 1);
    family(
        out,
        "queue_migrate_leader",
        Kind::Gauge,
        "1 when this controller holds the lease and acts.",
    );
    sample(out, "queue_migrate_leader", &[], u8::from(m.leader));
    family(
        out,
        "queue_migrate_lease_epoch",
        Kind::Gauge,
        "The epoch of the lease this controller holds (0 if none).",
    );
    sample(out, "queue_migrate_lease_epoch", &[], m.lease_epoch);
    if !m.identity.0.is_empty() {
        family(
            out,
            "queue_migrate_instance_info",
            Kind::Gauge,
            "This controller's --id and the random id of this process instance (the lease is held as ID#INSTANCE).",
        );
        let (id, instance) = &m.identity;
        let labels = [("id", id.as_str()), ("instance", instance.as_str())];
        sample(out, "queue_migrate_instance_info", &labels, 1);
    }
    family(
        out,
        "queue_migrate_clock_skew_seconds",
        Kind::Gauge,
        "This host's clock minus the database's, sampled at each lease attempt (no sample until the database answered one).",
    );
    if let Some(skew) = m.clock_skew_seconds {
        sample(out, "queue_migrate_clock_skew_seconds", &[], skew);
    }
    db_clock_families(out, m);
    family(
        out,
        "queue_migrate_fenced_writes_total",
        Kind::Counter,
        "Writes refused and rolled back because the lease was no longer held with their epoch.",
    );
    sample(
        out,
        "queue_migrate_fenced_writes_total",
        &[],
        m.fenced_writes,
    );
    family(
        out,
        "queue_migrate_lease_given_up_total",
        Kind::Counter,
        "Times this controller gave its lease up because no round completed within the lease TTL (a store or a connection that does not answer).",
    );
    sample(
        out,
        "queue_migrate_lease_given_up_total",
        &[],
        m.leases_given_up,
    );
    family(
        out,
        "queue_migrate_ticks_cut_total",
        Kind::Counter,
        "Ticks of a migration cut at their deadline (the source timeout plus the store's): nothing they had not committed was.",
    );
    for (name, n) in &m.ticks_cut {
        sample(
            out,
            "queue_migrate_ticks_cut_total",
            &[("migration", name.as_str())],
            *n,
        );
    }
    family(
        out,
        "queue_migrate_round_lock_skips_total",
        Kind::Counter,
        "Migrations a round skipped because another session held their lock.",
    );
    for (name, n) in &m.lock_skips {
        sample(
            out,
            "queue_migrate_round_lock_skips_total",
            &[("migration", name.as_str())],
            *n,
        );
    }
}

/// The ticks' count and durations.
fn tick_families(out: &mut String, m: &Inner) {
    family(
        out,
        "queue_migrate_ticks_total",
        Kind::Counter,
        "Evaluation ticks run.",
    );
    sample(out, "queue_migrate_ticks_total", &[], m.ticks);
    family(
        out,
        "queue_migrate_tick_seconds_total",
        Kind::Counter,
        "Seconds the ticks took, all together (divide its rate by the ticks' for the mean).",
    );
    sample(
        out,
        "queue_migrate_tick_seconds_total",
        &[],
        m.tick_seconds_sum,
    );
    family(
        out,
        "queue_migrate_tick_seconds",
        Kind::Gauge,
        "Seconds the last tick took.",
    );
    sample(out, "queue_migrate_tick_seconds", &[], m.tick_seconds);
    family(
        out,
        "queue_migrate_tick_seconds_max",
        Kind::Gauge,
        "Seconds the longest tick since the daemon started took.",
    );
    sample(
        out,
        "queue_migrate_tick_seconds_max",
        &[],
        m.tick_seconds_max,
    );
}

/// Each migration's state, standing and step gauges.
fn migration_families(out: &mut String, m: &Inner) {
    family(
        out,
        "queue_migrate_state",
        Kind::Gauge,
        "1 for the state the migration is in.",
    );
    for (name, g) in &m.migrations {
        for s in STATES {
            let labels = [("migration", name.as_str()), ("state", s)];
            sample(out, "queue_migrate_state", &labels, u8::from(g.state == s));
        }
    }
    family(
        out,
        "queue_migrate_standing",
        Kind::Gauge,
        "1 for where the migration stands (moving, waiting, soaking, blocked, blind, needs_person, not_driven, aborted, complete).",
    );
    for (name, g) in m.migrations.iter().filter(|(_, g)| !g.standing.is_empty()) {
        for s in crate::standing::Standing::KINDS {
            let labels = [("migration", name.as_str()), ("standing", s)];
            sample(
                out,
                "queue_migrate_standing",
                &labels,
                u8::from(g.standing == s),
            );
        }
    }
    type Gauge = (&'static str, &'static str, fn(&Gauges) -> f64);
    let gauges: [Gauge; 5] = [
        (
            "queue_migrate_step",
            "The 0-based slice step (-1 outside slices).",
            |g| g.step.map_or(-1.0, |s| s as f64),
        ),
        ("queue_migrate_paused", "1 when paused.", |g| {
            f64::from(u8::from(g.paused))
        }),
        (
            "queue_migrate_slices_migrated",
            "Slices whose producers send to the new broker.",
            |g| f64::from(g.slices_migrated),
        ),
        ("queue_migrate_slices_total", "Total slices.", |g| {
            f64::from(g.slices_total)
        }),
        (
            "queue_migrate_routing_generation",
            "The routing generation published.",
            |g| g.generation as f64,
        ),
    ];
    for (metric, help, get) in gauges {
        family(out, metric, Kind::Gauge, help);
        for (name, g) in &m.migrations {
            sample(out, metric, &[("migration", name.as_str())], get(g));
        }
    }
}

/// The largest partition's lag of each gate on a `kafka_lag` source (issue 57), with the gate's
/// `labels` and which topic and partition it is (one series per gate: the partition may change
/// from one round to the next).
fn largest_partition_family<'a>(
    out: &mut String,
    m: &'a Inner,
    labels: fn(&'a str, &'a GateGauge) -> Vec<(&'static str, &'a str)>,
) {
    let metric = "queue_migrate_gate_largest_partition_lag";
    family(
        out,
        metric,
        Kind::Gauge,
        "A kafka_lag gate's largest partition lag among those its query selects (its value is usually their sum).",
    );
    for (name, g) in &m.migrations {
        for gate in &g.gates {
            let Some(l) = &gate.largest else { continue };
            let partition = l.partition.to_string();
            let mut labels = labels(name, gate);
            labels.push(("topic", l.topic.as_str()));
            labels.push(("partition", partition.as_str()));
            sample(out, metric, &labels, l.lag as f64);
        }
    }
}

/// Every gate's reading, limit and verdict.
fn gate_families(out: &mut String, m: &Inner) {
    // Every gate series: migration, phase, gate, kind (exit/guard), source.
    fn labels<'a>(name: &'a str, g: &'a GateGauge) -> Vec<(&'static str, &'a str)> {
        vec![
            ("migration", name),
            ("phase", g.phase.as_str()),
            ("gate", g.name.as_str()),
            ("kind", g.kind.as_str()),
            ("source", g.source.as_str()),
        ]
    }
    type Side = (&'static str, &'static str, fn(&GateGauge) -> Option<f64>);
    let sides: [Side; 3] = [
        (
            "queue_migrate_gate_value",
            "The last reading of each gate (the new side of a compare gate).",
            |g| g.value,
        ),
        (
            "queue_migrate_gate_old_value",
            "The old side of a compare gate, read at the same moment as its value.",
            |g| g.old_value,
        ),
        (
            "queue_migrate_gate_limit",
            "What each gate's value is held to: a threshold gate's number, a compare gate's max(old x ratio, old + absolute); op says how.",
            |g| g.limit.map(|(l, _)| l),
        ),
    ];
    for (metric, help, get) in sides {
        family(out, metric, Kind::Gauge, help);
        for (name, m) in &m.migrations {
            for g in &m.gates {
                let Some(v) = get(g) else { continue };
                let mut labels = labels(name, g);
                if let ("queue_migrate_gate_limit", Some((_, op))) = (metric, g.limit) {
                    labels.push(("op", op));
                }
                sample(out, metric, &labels, v);
            }
        }
    }
    largest_partition_family(out, m, labels);
    family(
        out,
        "queue_migrate_gate_verdict",
        Kind::Gauge,
        "1 for each gate's last verdict.",
    );
    for (name, m) in &m.migrations {
        for g in &m.gates {
            for v in crate::gate::Verdict::ALL.map(crate::gate::Verdict::as_str) {
                let mut labels = labels(name, g);
                labels.push(("verdict", v));
                sample(
                    out,
                    "queue_migrate_gate_verdict",
                    &labels,
                    u8::from(g.verdict == v),
                );
            }
        }
    }
}

/// The counters: transitions, breaches, evaluation errors, pruned rows.
fn counter_families(out: &mut String, m: &Inner) {
    family(
        out,
        "queue_migrate_transitions_total",
        Kind::Counter,
        "Transitions made by this controller.",
    );
    for ((name, command), n) in &m.transitions {
        let labels = [("migration", name.as_str()), ("command", command.as_str())];
        sample(out, "queue_migrate_transitions_total", &labels, n);
    }
    family(
        out,
        "queue_migrate_breaches_total",
        Kind::Counter,
        "Guard breaches seen.",
    );
    for ((name, gate), n) in &m.breaches {
        let labels = [("migration", name.as_str()), ("gate", gate.as_str())];
        sample(out, "queue_migrate_breaches_total", &labels, n);
    }
    family(
        out,
        "queue_migrate_evaluation_errors_total",
        Kind::Counter,
        "Gate evaluations that held for lack of a reading, by source.",
    );
    for (source, n) in &m.evaluation_errors {
        let labels = [("source", source.as_str())];
        sample(out, "queue_migrate_evaluation_errors_total", &labels, n);
    }
    family(
        out,
        "queue_migrate_pruned_rows_total",
        Kind::Counter,
        "Rows the retention (--retain) deleted, by table.",
    );
    for (table, n) in m.pruned.tables() {
        sample(
            out,
            "queue_migrate_pruned_rows_total",
            &[("table", table)],
            n,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{Evaluation, Memory, Verdict};

    fn plan() -> Plan {
        // plans/local.yaml with a compare guard beside its threshold gates.
        let yaml = include_str!("../../plans/local.yaml").replace(
            "      - { name: error ratio breach, source: prom, query: app_error_ratio_new, pass_if: \"< 0.05\" }",
            "      - { name: error ratio breach, source: prom, query: app_error_ratio_new, pass_if: \"< 0.05\" }\n      - { name: latency vs old, source: prom, compare: { new: app_latency_new, old: app_latency_old }, tolerance: { ratio: 1.2, absolute: 0.05 } }",
        );
        crate::plan::compile(&yaml, None, &crate::plan::LoopbackResolve)
            .expect("plan")
            .plan
    }

    fn report(name: &str, kind: GateKind, value: f64, old: Option<f64>) -> GateReport {
        GateReport {
            phase: "slices".into(),
            name: name.into(),
            kind,
            source: "prom".into(),
            query: "q".into(),
            eval: Evaluation {
                verdict: Verdict::Pass,
                value: Some(value),
                old_value: old,
                reason: "r".into(),
                samples: 1,
                soak: None,
                cause: None,
                memory: Memory::default(),
            },
            largest_partition: None,
            evaluated_at_ms: 0,
            memory_read: None,
        }
    }

    /// Issue 57: a kafka_lag gate's largest partition lag is a gauge beside its value (the
    /// sum), naming the topic and partition; a gate without one has no such series.
    #[test]
    fn a_kafka_lag_gate_exports_its_largest_partition_lag() {
        let m = Metrics::default();
        let mut lag = report("error ratio low", GateKind::Exit, 1234.0, None);
        lag.largest_partition = Some(crate::indicators::kafka_lag::LargestPartition {
            topic: "orders".into(),
            partition: 3,
            lag: 900,
        });
        let other = report("latency vs old", GateKind::Guard, 0.31, Some(0.25));
        m.gates("orders", &plan(), &[lag, other]);
        let text = m.render();
        let line = "queue_migrate_gate_largest_partition_lag{migration=\"orders\",phase=\"slices\",\
                    gate=\"error ratio low\",kind=\"exit\",source=\"prom\",topic=\"orders\",\
                    partition=\"3\"} 900";
        assert!(text.lines().any(|l| l == line), "{text}");
        assert!(
            text.contains("# TYPE queue_migrate_gate_largest_partition_lag gauge"),
            "{text}"
        );
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("queue_migrate_gate_largest_partition_lag{"))
                .count(),
            1,
            "{text}"
        );
    }

    /// Issue 32: every gate series names the migration, phase, kind and source; a compare gate
    /// exports its old side and its limit beside its new value, a threshold gate its number.
    #[test]
    fn gate_series_carry_phase_kind_source_and_a_compare_gate_both_sides_and_its_limit() {
        let m = Metrics::default();
        m.gates(
            "orders",
            &plan(),
            &[
                report("error ratio low", GateKind::Exit, 0.002, None),
                report("latency vs old", GateKind::Guard, 0.31, Some(0.25)),
            ],
        );
        let text = m.render();
        let l = |gate: &str, kind: &str| {
            format!(
                "migration=\"orders\",phase=\"slices\",gate=\"{gate}\",kind=\"{kind}\",source=\"prom\""
            )
        };
        for line in [
            format!(
                "queue_migrate_gate_value{{{}}} 0.002",
                l("error ratio low", "exit")
            ),
            format!(
                "queue_migrate_gate_limit{{{},op=\"<\"}} 0.01",
                l("error ratio low", "exit")
            ),
            format!(
                "queue_migrate_gate_value{{{}}} 0.31",
                l("latency vs old", "guard")
            ),
            format!(
                "queue_migrate_gate_old_value{{{}}} 0.25",
                l("latency vs old", "guard")
            ),
            // max(0.25 × 1.2, 0.25 + 0.05) = 0.3
            format!(
                "queue_migrate_gate_limit{{{},op=\"<=\"}} 0.3",
                l("latency vs old", "guard")
            ),
            format!(
                "queue_migrate_gate_verdict{{{},verdict=\"pass\"}} 1",
                l("latency vs old", "guard")
            ),
        ] {
            assert!(text.contains(&line), "{line} missing from:\n{text}");
        }
        // A threshold gate has no old side.
        assert!(!text.contains(&format!(
            "queue_migrate_gate_old_value{{{}}}",
            l("error ratio low", "exit")
        )));
        // Every gate series has the five labels.
        for line in text
            .lines()
            .filter(|l| l.starts_with("queue_migrate_gate_"))
        {
            for label in ["migration=", "phase=", "gate=", "kind=", "source="] {
                assert!(line.contains(label), "{line}");
            }
        }
    }

    /// Regression (Jepsen suite, skew-minutes): a daemon just started served a skew of 0 s
    /// before the database had answered any lease attempt, a reading it never took.
    #[test]
    fn the_clock_skew_is_not_served_before_a_lease_attempt_measured_it() {
        let m = Metrics::default();
        m.lease(0, None);
        let text = m.render();
        assert!(
            text.contains("# TYPE queue_migrate_clock_skew_seconds gauge"),
            "{text}"
        );
        assert!(
            !text.contains("\nqueue_migrate_clock_skew_seconds "),
            "{text}"
        );
        m.lease(0, Some(-120.0));
        m.lease(7, None);
        let text = m.render();
        assert!(
            text.contains("\nqueue_migrate_clock_skew_seconds -120\n"),
            "{text}"
        );
        assert!(text.contains("\nqueue_migrate_lease_epoch 7\n"), "{text}");
    }
}
