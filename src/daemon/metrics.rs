//! The controller's own Prometheus metrics (`GET /metrics`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

use crate::controller::GateReport;
use crate::indicators::exposition::escape_label_value as esc;
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
}

#[derive(Debug, Default, Clone)]
struct Gauges {
    state: String,
    step: Option<usize>,
    paused: bool,
    slices_migrated: u32,
    slices_total: u32,
    generation: u64,
    gates: Vec<(String, String, String, Option<f64>)>,
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

    pub fn gates(&self, migration: &str, reports: &[GateReport]) {
        self.with(|m| {
            let g = m.migrations.entry(migration.to_string()).or_default();
            g.gates = reports
                .iter()
                .map(|r| {
                    (
                        r.name.clone(),
                        r.kind.to_string(),
                        r.eval.verdict.as_str().to_string(),
                        r.eval.value,
                    )
                })
                .collect();
            for r in reports {
                if r.eval.verdict == crate::gate::Verdict::Hold && r.eval.value.is_none() {
                    *m.evaluation_errors.entry(r.source.clone()).or_default() += 1;
                }
            }
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

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn render(m: &Inner) -> String {
    let mut out = String::new();
    head(
        &mut out,
        "queue_migrate_up",
        "gauge",
        "1 while the controller runs.",
    );
    let _ = writeln!(out, "queue_migrate_up 1");
    head(
        &mut out,
        "queue_migrate_leader",
        "gauge",
        "1 when this controller holds the lease and acts.",
    );
    let _ = writeln!(out, "queue_migrate_leader {}", u8::from(m.leader));
    head(
        &mut out,
        "queue_migrate_ticks_total",
        "counter",
        "Evaluation ticks run.",
    );
    let _ = writeln!(out, "queue_migrate_ticks_total {}", m.ticks);
    head(
        &mut out,
        "queue_migrate_tick_seconds_total",
        "counter",
        "Seconds the ticks took, all together (divide its rate by the ticks' for the mean).",
    );
    let _ = writeln!(
        out,
        "queue_migrate_tick_seconds_total {}",
        m.tick_seconds_sum
    );
    head(
        &mut out,
        "queue_migrate_tick_seconds",
        "gauge",
        "Seconds the last tick took.",
    );
    let _ = writeln!(out, "queue_migrate_tick_seconds {}", m.tick_seconds);
    head(
        &mut out,
        "queue_migrate_tick_seconds_max",
        "gauge",
        "Seconds the longest tick since the daemon started took.",
    );
    let _ = writeln!(out, "queue_migrate_tick_seconds_max {}", m.tick_seconds_max);
    head(
        &mut out,
        "queue_migrate_state",
        "gauge",
        "1 for the state the migration is in.",
    );
    for (name, g) in &m.migrations {
        for s in STATES {
            let _ = writeln!(
                out,
                "queue_migrate_state{{migration=\"{}\",state=\"{s}\"}} {}",
                esc(name),
                u8::from(g.state == s)
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
        head(&mut out, metric, "gauge", help);
        for (name, g) in &m.migrations {
            let _ = writeln!(out, "{metric}{{migration=\"{}\"}} {}", esc(name), get(g));
        }
    }
    head(
        &mut out,
        "queue_migrate_gate_value",
        "gauge",
        "The last reading of each gate.",
    );
    for (name, g) in &m.migrations {
        for (gate, kind, _, value) in &g.gates {
            if let Some(v) = value {
                let _ = writeln!(
                    out,
                    "queue_migrate_gate_value{{migration=\"{}\",gate=\"{}\",kind=\"{kind}\"}} {v}",
                    esc(name),
                    esc(gate)
                );
            }
        }
    }
    head(
        &mut out,
        "queue_migrate_gate_verdict",
        "gauge",
        "1 for each gate's last verdict.",
    );
    for (name, g) in &m.migrations {
        for (gate, kind, verdict, _) in &g.gates {
            for v in ["pass", "hold", "fail"] {
                let _ = writeln!(
                    out,
                    "queue_migrate_gate_verdict{{migration=\"{}\",gate=\"{}\",kind=\"{kind}\",verdict=\"{v}\"}} {}",
                    esc(name),
                    esc(gate),
                    u8::from(verdict == v)
                );
            }
        }
    }
    head(
        &mut out,
        "queue_migrate_transitions_total",
        "counter",
        "Transitions made by this controller.",
    );
    for ((name, command), n) in &m.transitions {
        let _ = writeln!(
            out,
            "queue_migrate_transitions_total{{migration=\"{}\",command=\"{}\"}} {n}",
            esc(name),
            esc(command)
        );
    }
    head(
        &mut out,
        "queue_migrate_breaches_total",
        "counter",
        "Guard breaches seen.",
    );
    for ((name, gate), n) in &m.breaches {
        let _ = writeln!(
            out,
            "queue_migrate_breaches_total{{migration=\"{}\",gate=\"{}\"}} {n}",
            esc(name),
            esc(gate)
        );
    }
    head(
        &mut out,
        "queue_migrate_evaluation_errors_total",
        "counter",
        "Gate evaluations that held for lack of a reading, by source.",
    );
    for (source, n) in &m.evaluation_errors {
        let _ = writeln!(
            out,
            "queue_migrate_evaluation_errors_total{{source=\"{}\"}} {n}",
            esc(source)
        );
    }
    head(
        &mut out,
        "queue_migrate_pruned_rows_total",
        "counter",
        "Rows the retention (--retain) deleted, by table.",
    );
    for (table, n) in m.pruned.tables() {
        let _ = writeln!(
            out,
            "queue_migrate_pruned_rows_total{{table=\"{table}\"}} {n}"
        );
    }
    out
}
