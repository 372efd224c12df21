//! The compiled, validated plan: what the rest of the controller reads.
//!
//! A `Plan` only exists once `compile` accepted the YAML: every duration parsed, every gate's source
//! known, the slice steps strictly increasing and ending at `slices`, `for: quiet` resolved, secrets
//! resolved (and redacted when displayed).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

pub use super::stale_model::StaleProducers;

/// Default number of slices when the plan does not say.
pub const DEFAULT_SLICES: u32 = 128;

/// Default `for_max_gap`: the longest time between two evaluations of a `for:` gate that still
/// counts as one unbroken streak.
pub const DEFAULT_FOR_MAX_GAP: Duration = Duration::from_secs(5 * 60);

/// A migration plan, compiled.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// `[a-z0-9-]+`, unique in the store.
    pub name: String,
    /// Total number of key slices.
    pub slices: u32,
    pub brokers: Brokers,
    pub retry: Retry,
    pub dedup: Option<Dedup>,
    /// Indicator sources by name.
    pub sources: BTreeMap<String, Source>,
    pub routing: RoutingPublish,
    /// Webhooks for the daemon's events.
    pub notify: Notify,
    /// The phases present in the plan, in their fixed order (`slices` is always there).
    pub phases: Vec<Phase>,
    /// The drain quiet period: `retry.max_backoff + retry.visibility_timeout` when `auto`.
    #[serde(with = "crate::plan::duration_serde")]
    pub quiet: Duration,
    /// Whether `quiet` was computed (`auto`) rather than written.
    pub quiet_auto: bool,
    /// The daemon advances by itself when every exit gate passes (default true).
    pub auto_advance: bool,
    /// `migrate bridge`: for producers that cannot be changed.
    pub bridge: Option<Bridge>,
    /// `preflight`: where each broker's settings are read from, and the checks waived.
    pub preflight: Preflight,
    /// `stale_producers:`: the built-in guard on producers still writing moved slices to the old
    /// broker (issue 58), added to `slices`, `drain` and `disconnect` as [`STALE_GUARD`].
    pub stale_producers: Option<StaleProducers>,
    /// `judge_budget:`: the false FAILs and false PASSes the migration's judges may spend
    /// together, split across them and their steps ([`crate::judge::budget`]).
    pub judge_budget: crate::judge::budget::Budget,
}

/// `preflight:` — per side, what `migrate preflight` and the daemon (before `synthetic`) read
/// and let through ([`crate::preflight`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Preflight {
    pub old: PreflightSide,
    pub new: PreflightSide,
}

impl Preflight {
    /// The side's part.
    pub fn side(&self, side: crate::preflight::Side) -> &PreflightSide {
        match side {
            crate::preflight::Side::Old => &self.old,
            crate::preflight::Side::New => &self.new,
        }
    }

    /// Every waiver, old side first.
    pub fn waivers(&self) -> Vec<crate::preflight::Waiver> {
        self.old
            .waive
            .iter()
            .chain(&self.new.waive)
            .cloned()
            .collect()
    }
}

/// One broker's `preflight.old|new`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PreflightSide {
    /// The monitoring endpoint: NATS's (`http://host:8222`, for `/varz`), RabbitMQ's
    /// management API (`http://user:pass@host:15672/api`; derived from the AMQP URL when absent).
    pub monitor: Option<Secret>,
    /// The checks waived on this side, each with its reason.
    pub waive: Vec<crate::preflight::Waiver>,
}

/// `bridge:` — the old ingress queue an unchangeable producer writes to, and where each message's
/// key is found. The bridge forwards to `brokers.old.queue` or to the new broker's queue/stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bridge {
    /// The queue on the old broker the producer writes to (never the one consumers read).
    pub ingress: String,
    /// Where a message's key is.
    pub key: BridgeKey,
    /// At most this many ingress messages forwarded at once (default 256); with those waiting
    /// behind a message of their key, at most twice as many held; a RabbitMQ ingress may hold
    /// up to ten times as many unacked (confirmed ones whose coalesced ack waits).
    pub prefetch: u16,
}

/// Where the bridge finds a message's key (what its slice is computed from).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BridgeKey {
    /// A header, matched case-insensitively.
    Header(String),
    /// A field of the JSON payload: a top-level name, or a JSON pointer (`/order/id`).
    Json(String),
}

/// The built-in stale-producer guard's name, in every phase it watches.
pub const STALE_GUARD: &str = "stale producers";

/// `synthetic: { probes: ... }` — marked probe messages the daemon publishes through the new
/// broker while the migration is in `synthetic`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Probes {
    /// Probes per second.
    pub rate: f64,
    /// How many latency probes in all.
    pub count: u32,
    /// How many copies of the one idempotency probe (one effect expected; default 5).
    pub repeat: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Brokers {
    pub old: Broker,
    pub new: Broker,
}

/// One side of the migration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Broker {
    /// A display name (`rabbitmq`, `nats`): what the routing document and route stamps say.
    pub name: String,
    /// `amqp`, `nats`, `redis` ...
    pub kind: String,
    pub url: Secret,
    pub queue: Option<String>,
    pub stream: Option<String>,
    pub dead_letter: Option<String>,
}

impl Broker {
    /// The queue (RabbitMQ, Redis) or stream (NATS) consumers read on this broker.
    pub fn destination(&self) -> Option<&str> {
        self.queue.as_deref().or(self.stream.as_deref())
    }
}

/// A value that may hold a secret: shown redacted, its reference kept for display.
///
/// A plan compiled with [`SecretsMode::Deferred`](crate::plan::SecretsMode) may hold a secret
/// that could not be resolved on this machine: [`Secret::value`] then says why, and whatever
/// needs the value (a broker connection, a source fetch, a webhook, etcd) fails there, naming it.
#[derive(Clone, PartialEq)]
pub struct Secret {
    /// What the plan wrote (`${OLD_BROKER_URL}`, `file:/run/secrets/x`, or a literal).
    pub reference: String,
    /// The resolved value (never printed), or why it could not be resolved here.
    value: Result<String, Unresolved>,
}

/// Why a secret of a stored plan has no value on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unresolved {
    /// `${VAR}` references whose variables are not set.
    #[error("{} not set here", names(.0))]
    Env(Vec<String>),
    /// A `file:` secret that cannot be read.
    #[error("the secret file {} cannot be read here: {message}", .path.display())]
    File { path: PathBuf, message: String },
}

fn names(vars: &[String]) -> String {
    let quoted: Vec<String> = vars.iter().map(|v| format!("`{v}`")).collect();
    match quoted.as_slice() {
        [one] => format!("environment variable {one} is"),
        many => format!("environment variables {} are", many.join(", ")),
    }
}

impl Secret {
    /// A resolved secret.
    pub fn new(reference: impl Into<String>, value: impl Into<String>) -> Secret {
        Secret {
            reference: reference.into(),
            value: Ok(value.into()),
        }
    }

    /// A value written as is (a store URL): its own reference.
    pub fn literal(value: impl Into<String>) -> Secret {
        let value = value.into();
        Secret::new(value.clone(), value)
    }

    /// A secret that could not be resolved on this machine.
    pub fn unresolved(reference: impl Into<String>, why: Unresolved) -> Secret {
        Secret {
            reference: reference.into(),
            value: Err(why),
        }
    }

    /// The value, or why it could not be resolved here (never printed: callers say what
    /// needed it, with the error, which names the variable or the file, not the value).
    ///
    /// # Errors
    /// The secret was left unresolved when its plan was compiled.
    pub fn value(&self) -> Result<&str, &Unresolved> {
        self.value.as_deref()
    }

    /// What to show a person: the reference when it is one, else the value, through
    /// [`crate::redact::url`] (userinfo and query string masked: a reference may embed a
    /// variable in a URL that also holds a literal credential, `http://u:${PW}@h?token=x`).
    pub fn redacted(&self) -> String {
        match &self.value {
            Ok(value) if *value == self.reference => crate::redact::url(value),
            _ => crate::redact::url(&self.reference),
        }
    }

    /// The plan's reference, redacted ([`Secret::redacted`]), when the value came from one
    /// (`${PROM_URL}`, `file:/run/secrets/x`; also when it is unresolved here); `None` for a
    /// value written as is. Messages about the secret's URL show the URL redacted, and name
    /// the reference next to it: the variable or file to check.
    pub fn reference_shown(&self) -> Option<String> {
        match &self.value {
            Ok(value) if *value == self.reference => None,
            _ => Some(self.redacted()),
        }
    }

    /// The parts of the resolved value that must never be shown, in every form a server may
    /// echo them ([`crate::outgoing::forms`]: raw, percent-decoded, `Basic`, quoted), for
    /// [`crate::redact::known`]; none when it is unresolved.
    pub fn secret_parts(&self) -> Vec<String> {
        self.value
            .as_deref()
            .map(crate::outgoing::forms)
            .unwrap_or_default()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({})", self.redacted())
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Retry {
    #[serde(with = "crate::plan::duration_serde")]
    pub max_backoff: Duration,
    #[serde(with = "crate::plan::duration_serde")]
    pub visibility_timeout: Duration,
}

/// How the consumers deduplicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DedupMode {
    /// Keys in SQL, in the effect's transaction (the window must cover the formula).
    #[default]
    Durable,
    /// Keys in Redis with a processing lease (same rule).
    Redis,
    /// A bounded in-memory cache: recent duplicates only (a warning when the margin exceeds it).
    Window,
}

/// The dedup policy and the three terms of the window formula (`docs/design.md`, "Idempotent
/// consumers and the dedup window").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dedup {
    pub mode: DedupMode,
    #[serde(with = "crate::plan::duration_serde")]
    pub window: Duration,
    #[serde(with = "crate::plan::duration_serde")]
    pub max_redelivery_delay: Duration,
    #[serde(with = "crate::plan::duration_serde")]
    pub max_consumer_delay: Duration,
    #[serde(with = "crate::plan::duration_serde")]
    pub reprocess_margin: Duration,
}

impl Dedup {
    /// The smallest safe window: max redelivery delay + max consumer delay + reprocess margin
    /// (saturating: absurd inputs give `Duration::MAX`, never a panic).
    pub fn required_window(&self) -> Duration {
        self.max_redelivery_delay
            .saturating_add(self.max_consumer_delay)
            .saturating_add(self.reprocess_margin)
    }
}

/// Where indicator readings come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A Prometheus server: PromQL instant queries over its HTTP API. `ui`: where people open
    /// its web UI (`ui:`), for the console's "open in Prometheus" links.
    Prometheus {
        url: Secret,
        #[serde(skip_serializing_if = "Option::is_none")]
        ui: Option<String>,
    },
    /// A /metrics endpoint scraped by the controller itself.
    Scrape { url: Secret },
    /// An NDJSON export of a dead-letter queue, triaged against the recorded decisions
    /// (queries: `open_groups`, `entries`).
    DeadLetters { export: PathBuf },
    /// A Kafka consumer group's lag on `topics`, read from the cluster at `url`
    /// (`kafka://host:port,...`): [`crate::indicators::kafka_lag`].
    KafkaLag {
        url: Secret,
        group: String,
        topics: Vec<String>,
    },
}

/// Where the routing document is mirrored (the daemon's HTTP endpoint always serves it).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct RoutingPublish {
    /// Written atomically on every change; relative paths are relative to the plan file.
    pub file: Option<PathBuf>,
    /// Written to an etcd key through etcd's v3 HTTP/JSON gateway.
    pub etcd: Option<EtcdPublish>,
}

/// An etcd key the routing document is written to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EtcdPublish {
    /// The gateway's base URL (`http://127.0.0.1:2379`).
    pub endpoint: Secret,
    pub key: String,
}

/// Who hears about transitions, breaches, long holds and "ready to advance".
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Notify {
    pub webhooks: Vec<Webhook>,
    /// A gate holding longer than this is reported (once per hold).
    #[serde(with = "crate::plan::duration_serde::option")]
    pub hold_after: Option<Duration>,
}

/// A webhook receiving JSON events (with a Slack-compatible `text` field).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Webhook {
    /// Shown with its path masked too ([`crate::outgoing::webhook_url`]): a chat webhook's
    /// path is its credential.
    #[serde(serialize_with = "webhook_url_shown")]
    pub url: Secret,
    /// Sent as `Authorization: Bearer <token>`.
    pub token: Option<Secret>,
}

fn webhook_url_shown<S: serde::Serializer>(url: &Secret, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::outgoing::webhook_url(&url.redacted()))
}

/// The five phases, in their fixed order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseKind {
    ConsumeDual,
    Synthetic,
    Slices,
    Drain,
    Disconnect,
}

impl PhaseKind {
    pub const ALL: [PhaseKind; 5] = [
        PhaseKind::ConsumeDual,
        PhaseKind::Synthetic,
        PhaseKind::Slices,
        PhaseKind::Drain,
        PhaseKind::Disconnect,
    ];

    /// The name used in plans, state and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseKind::ConsumeDual => "consume_dual",
            PhaseKind::Synthetic => "synthetic",
            PhaseKind::Slices => "slices",
            PhaseKind::Drain => "drain",
            PhaseKind::Disconnect => "disconnect",
        }
    }
}

impl fmt::Display for PhaseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a guard breach does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreachAction {
    /// Move one step back (then pause).
    #[default]
    Rollback,
    /// Pause where it is.
    Pause,
    /// Only notify.
    Alert,
}

/// What a gate is to its phase, as evaluations are stored and shown (`exit`, `guard`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GateKind {
    /// Must pass to advance (`exit:` gates, `require_peak`, `require_deploy`).
    Exit,
    /// Watched continuously: a failure is a breach (`guard:` gates).
    Guard,
}

impl GateKind {
    /// As it is stored and printed: `exit`, `guard`.
    pub fn as_str(self) -> &'static str {
        match self {
            GateKind::Exit => "exit",
            GateKind::Guard => "guard",
        }
    }

    /// The kind [`GateKind::as_str`] names; `None` for any other text.
    pub fn parse(text: &str) -> Option<GateKind> {
        match text {
            "exit" => Some(GateKind::Exit),
            "guard" => Some(GateKind::Guard),
            _ => None,
        }
    }
}

impl fmt::Display for GateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// One phase of the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phase {
    pub kind: PhaseKind,
    /// Minimum time in the phase — or in each step for `slices` (`observe`), `retain` for
    /// `disconnect`. Never sufficient on its own.
    #[serde(with = "crate::plan::duration_serde")]
    pub min_duration: Duration,
    /// All must pass to advance.
    pub exit: Vec<Gate>,
    /// Watched continuously; a failure is a breach.
    pub guard: Vec<Gate>,
    pub on_breach: BreachAction,
    /// `slices` only: the number of migrated slices at each step, strictly increasing, last = slices.
    pub steps: Vec<u32>,
    /// `slices` only: the highest reading seen during the step must reach `at_least`.
    pub require_peak: Option<Requirement>,
    /// `slices` only: the reading (a process start time) must be later than the step's start.
    pub require_deploy: Option<Requirement>,
    /// `synthetic` only: probes the daemon publishes through the new broker.
    pub probes: Option<Probes>,
}

impl Phase {
    /// Every gate of the phase as its evaluations are stored, `(name, kind)`, in the order they
    /// are evaluated: the exit gates, `require_peak` and `require_deploy` (kind `exit`), then the
    /// guards.
    pub fn gate_keys(&self) -> Vec<(&str, GateKind)> {
        let mut keys: Vec<(&str, GateKind)> = self
            .exit
            .iter()
            .map(|g| (g.name.as_str(), GateKind::Exit))
            .collect();
        if self.require_peak.is_some() {
            keys.push(("require_peak", GateKind::Exit));
        }
        if self.require_deploy.is_some() {
            keys.push(("require_deploy", GateKind::Exit));
        }
        keys.extend(
            self.guard
                .iter()
                .map(|g| (g.name.as_str(), GateKind::Guard)),
        );
        keys
    }

    /// The gate `(name, kind)` (`None` for a requirement or a gate the phase does not have).
    pub fn gate(&self, name: &str, kind: GateKind) -> Option<&Gate> {
        match kind {
            GateKind::Exit => &self.exit,
            GateKind::Guard => &self.guard,
        }
        .iter()
        .find(|g| g.name == name)
    }

    /// The source that `(name, kind)`, as [`Phase::gate_keys`] names it, reads.
    pub fn source_of(&self, name: &str, kind: GateKind) -> Option<&str> {
        if let Some(g) = self.gate(name, kind) {
            return Some(&g.source);
        }
        let requirement = match (kind, name) {
            (GateKind::Exit, "require_peak") => self.require_peak.as_ref(),
            (GateKind::Exit, "require_deploy") => self.require_deploy.as_ref(),
            _ => None,
        };
        requirement.map(|r| r.source.as_str())
    }
}

/// `require_peak` / `require_deploy`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Requirement {
    pub source: String,
    pub query: String,
    /// `require_peak` only.
    pub at_least: Option<f64>,
}

/// A gate: a named condition over one source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gate {
    pub name: String,
    pub source: String,
    pub check: Check,
    /// Must have passed continuously this long (`for:`).
    #[serde(with = "crate::plan::duration_serde::option")]
    pub hold_for: Option<Duration>,
    /// With `for:` only: the longest time between two evaluations that keeps the streak
    /// (`for_max_gap:`, default [`DEFAULT_FOR_MAX_GAP`]); a longer gap restarts it, since
    /// nobody saw the condition hold meanwhile. `None` without `for:`.
    #[serde(
        with = "crate::plan::duration_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub for_max_gap: Option<Duration>,
    /// Evaluations with a value needed in the current step before it may pass (default 1).
    pub min_samples: u32,
}

/// The condition of a gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// `query` + `pass_if: "<op> <number>"`.
    Threshold {
        query: String,
        op: CmpOp,
        value: f64,
    },
    /// `compare: { new, old }` + `tolerance`: pass when new <= max(old*ratio, old+absolute),
    /// both read at the same moment.
    Compare {
        new: String,
        old: String,
        ratio: f64,
        absolute: f64,
    },
    /// `judge: { new: {events, failures}, old: {events, failures}, tolerance, ... }`: an
    /// always-valid sequential test of "is new's failure rate worse than old's by more than
    /// `tolerance`?" ([`crate::judge`]).
    Judge(Box<JudgeCheck>),
    /// `routing_applied: { window }`: every producer the daemon saw on the routing long-poll
    /// within `window` applied at least the step's generation ([`crate::gate::routing_applied`]).
    /// Its gate reads no declared source: its `source` is [`ROUTING_SOURCE`].
    RoutingApplied {
        #[serde(with = "crate::plan::duration_serde")]
        window: Duration,
    },
}

/// The `source` of a `routing_applied` gate: not a declared source, the daemon's own knowledge
/// of who polls the routing document.
pub const ROUTING_SOURCE: &str = "routing long-poll";

/// A `routing_applied` gate's window when the plan gives none: long enough for a producer
/// parked in a 30 s long-poll to be seen at least three times.
pub const DEFAULT_ROUTING_WINDOW: Duration = Duration::from_secs(120);

/// The queries of one side of a `judge` gate's counts form: counters since the step began
/// (`$step` in a query is replaced by the step's age, e.g. `increase(x_total[$step])`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JudgeSide {
    pub events: String,
    pub failures: String,
}

/// A `judge` gate's condition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JudgeCheck {
    /// What it compares: failure counts or latency histograms.
    #[serde(flatten)]
    pub form: JudgeForm,
    /// Tolerance, confidence (as `alpha`), `min_events`, `max_duration`.
    pub config: crate::judge::Config,
}

/// What a `judge` compares.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum JudgeForm {
    /// Failures among events, per side.
    Counts { new: JudgeSide, old: JudgeSide },
    /// A quantile of each side's histogram ([`crate::judge::latency`]).
    Latency(LatencyJudge),
}

/// The latency form of a `judge`: each side's `_bucket` query, with `$le` where the boundary
/// goes, read at each `le` of the histogram and at `+Inf`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyJudge {
    /// The quantile and the finite `le` values.
    #[serde(flatten)]
    pub buckets: crate::judge::latency::Buckets,
    /// The `le` label values as the exporter writes them (`+Inf` last).
    pub le_labels: Vec<String>,
    /// Each side's bucket query with `$le`.
    pub new: String,
    pub old: String,
    /// New's queries at each `le` label, then old's (what a reading gives, in order).
    #[serde(skip)]
    pub queries: Vec<String>,
}

impl LatencyJudge {
    /// The judge for `quantile` over the `le` labels (`+Inf` added when missing), each side's
    /// query with `$le`.
    pub fn new(quantile: f64, le: &[(f64, String)], new: String, old: String) -> Self {
        let mut le_labels: Vec<String> = le
            .iter()
            .filter(|(v, _)| v.is_finite())
            .map(|(_, l)| l.clone())
            .collect();
        le_labels.push("+Inf".into());
        let queries = [&new, &old]
            .iter()
            .flat_map(|q| le_labels.iter().map(move |l| q.replace("$le", l)))
            .collect();
        Self {
            buckets: crate::judge::latency::Buckets {
                quantile,
                le: le
                    .iter()
                    .map(|(v, _)| *v)
                    .filter(|v| v.is_finite())
                    .collect(),
            },
            le_labels,
            new,
            old,
            queries,
        }
    }
}

impl JudgeCheck {
    /// The queries, in the order a reading gives their values: for counts new events, new
    /// failures, old events, old failures; for latency new's buckets then old's.
    pub fn queries(&self) -> Vec<&str> {
        match &self.form {
            JudgeForm::Counts { new, old } => {
                vec![&new.events, &new.failures, &old.events, &old.failures]
            }
            JudgeForm::Latency(l) => l.queries.iter().map(String::as_str).collect(),
        }
    }
}

/// A comparison operator of `pass_if`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CmpOp {
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = "==")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = ">")]
    Gt,
}

impl CmpOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Ge => ">=",
            CmpOp::Gt => ">",
        }
    }

    /// `value <op> threshold`. NaN never holds (callers turn NaN into a hold before this).
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            CmpOp::Lt => value < threshold,
            CmpOp::Le => value <= threshold,
            CmpOp::Eq => value == threshold,
            CmpOp::Ne => value != threshold,
            CmpOp::Ge => value >= threshold,
            CmpOp::Gt => value > threshold,
        }
    }
}

impl Plan {
    /// The phase of a kind, when the plan has it.
    pub fn phase(&self, kind: PhaseKind) -> Option<&Phase> {
        self.phases.iter().find(|p| p.kind == kind)
    }

    /// The slice steps (the `slices` phase is mandatory, so never empty after compile).
    pub fn steps(&self) -> &[u32] {
        self.phase(PhaseKind::Slices)
            .map(|p| p.steps.as_slice())
            .unwrap_or(&[])
    }

    /// Every value of the plan that may hold a secret: the brokers' URLs and monitoring
    /// endpoints, the sources' URLs,
    /// the etcd endpoint, the webhooks' URLs and tokens.
    pub fn secrets(&self) -> Vec<&Secret> {
        let mut out = vec![&self.brokers.old.url, &self.brokers.new.url];
        out.extend(self.preflight.old.monitor.as_ref());
        out.extend(self.preflight.new.monitor.as_ref());
        out.extend(self.sources.values().filter_map(|s| match s {
            Source::Prometheus { url, .. }
            | Source::Scrape { url }
            | Source::KafkaLag { url, .. } => Some(url),
            Source::DeadLetters { .. } => None,
        }));
        out.extend(self.routing.etcd.as_ref().map(|e| &e.endpoint));
        for hook in &self.notify.webhooks {
            out.push(&hook.url);
            out.extend(hook.token.as_ref());
        }
        out
    }

    /// Every secret value this plan holds, parsed and resolved, in every form it may come
    /// back in ([`crate::outgoing::Secrets`]): the brokers', sources' and etcd's credentials,
    /// each webhook's credentials, token and path. What any text about this plan is redacted
    /// with before it is shown or stored.
    pub fn known_secrets(&self) -> crate::outgoing::Secrets {
        let mut known = crate::outgoing::Secrets::none();
        for secret in self.secrets() {
            if let Ok(value) = secret.value() {
                known.add(value);
            }
        }
        for hook in &self.notify.webhooks {
            if let Ok(url) = hook.url.value() {
                known.add_webhook(url);
            }
        }
        known
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored and printed forms of a gate kind are the strings they were before the enum:
    /// store rows, JSON and text tables stay the same.
    #[test]
    fn a_gate_kind_reads_and_prints_as_its_stored_word() {
        for (kind, word) in [(GateKind::Exit, "exit"), (GateKind::Guard, "guard")] {
            assert_eq!(kind.as_str(), word);
            assert_eq!(GateKind::parse(word), Some(kind));
            assert_eq!(kind.to_string(), word);
            assert_eq!(
                serde_json::to_string(&kind).ok(),
                Some(format!("\"{word}\""))
            );
        }
        assert_eq!(GateKind::parse("Exit"), None);
        // Table columns pad it like the string they printed.
        assert_eq!(format!("[{:<5}]", GateKind::Exit), "[exit ]");
    }

    #[test]
    fn a_reference_is_shown_only_where_the_value_came_from_one() {
        let prom = Secret::new("${PROM_URL}", "http://u:pw@prom:9090");
        assert_eq!(prom.reference_shown().as_deref(), Some("${PROM_URL}"));
        let file = Secret::new("file:/run/etcd-url", "http://root:pw@etcd:2379/");
        assert_eq!(
            file.reference_shown().as_deref(),
            Some("file:/run/etcd-url")
        );
        let embedded = Secret::new(
            "http://u:${PW}@h/?token=lit3ral",
            "http://u:pw@h/?token=lit3ral",
        );
        assert_eq!(
            embedded.reference_shown().as_deref(),
            Some("http://***@h/?***")
        );
        assert_eq!(
            Secret::literal("http://u:pw@h:1/metrics").reference_shown(),
            None
        );
    }

    #[test]
    fn a_reference_with_literal_credentials_is_shown_redacted() {
        let s = Secret::new(
            "http://u:${PW}@h:1/?token=lit3ral",
            "http://u:pw@h:1/?token=lit3ral",
        );
        assert_eq!(s.redacted(), "http://***@h:1/?***");
        let unresolved = Secret::unresolved(
            "http://u:${PW}@h:1/?token=lit3ral",
            Unresolved::Env(vec!["PW".into()]),
        );
        assert_eq!(unresolved.redacted(), "http://***@h:1/?***");
        assert_eq!(Secret::new("${X}", "v").redacted(), "${X}");
    }
}
