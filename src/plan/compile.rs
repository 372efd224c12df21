//! YAML plan (format v1) → [`Plan`], or every problem found, each with its path and line.
//!
//! The YAML is read into a `serde_yaml::Value` and walked by hand, so that one pass collects every
//! error (unknown fields, wrong types, bad durations, unknown sources, ...) instead of stopping at
//! the first, and so that each one carries the path a person can search for
//! (`phases.slices.exit[2].pass_if`) and its line (from [`LineMap`]). Warnings (allowed but
//! probably not meant) are kept apart from errors.
//!
//! Compilation is pure: the only IO (environment variables, `file:` secrets) goes through the
//! [`Resolve`] passed in, [`SystemResolve`] in the CLI, a map in tests.
//!
//! The format is described for users in `docs/plan.md`; keep the two in step.

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_yaml::{Mapping, Value};

use super::duration_serde::format as human;
use super::lines::{LineMap, index_path, key_path};
mod bridge;

use super::model::{
    BreachAction, Broker, Brokers, Check, CmpOp, DEFAULT_FOR_MAX_GAP, DEFAULT_SLICES, Dedup,
    DedupMode, EtcdPublish, Gate, Notify, Phase, PhaseKind, Plan, Requirement, Retry,
    RoutingPublish, Secret, Source, Unresolved, Webhook,
};

/// The only plan format version this build reads.
pub const SUPPORTED_VERSIONS: &[u64] = &[1];

/// Broker kinds that have an adapter; another kind is a warning (a typo such as `ampq` shows up
/// at `plan check` rather than at connect time).
pub const KNOWN_BROKER_KINDS: &[&str] = &[
    "amqp",
    "rabbitmq",
    "nats",
    "jetstream",
    "redis",
    "redis-streams",
];

/// Longest duration a plan may carry (10 years): every sum and product the controller makes of
/// them stays far inside what a `Duration`, an `Instant` or milliseconds in an `i64` hold.
pub const MAX_DURATION: Duration = Duration::from_secs(3650 * 86_400);

/// Largest `slices` accepted.
pub const MAX_SLICES: u32 = 65_536;

/// IO the compiler needs, injected so that compilation stays pure.
pub trait Resolve {
    /// The value of an environment variable, `None` when it is not set.
    fn env(&self, name: &str) -> Option<String>;
    /// The contents of a file (`file:` secrets); the error says why it could not be read.
    ///
    /// # Errors
    /// When the file cannot be read.
    fn read_file(&self, path: &Path) -> Result<String, String>;
    /// What identifies the file's current contents without reading it (size, times, inode):
    /// equal stamps mean unchanged contents, so a compiled plan is kept without opening the file
    /// again (a daemon out of file descriptors still evaluates its guards). `None`: unknown, the
    /// file is read to compare.
    fn file_stamp(&self, _path: &Path) -> Option<FileStamp> {
        None
    }
}

/// A file's metadata that changes whenever its contents do (see [`Resolve::file_stamp`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    /// Device, inode and status-change time (nanoseconds) on Unix: a file replaced by a rename
    /// (a Kubernetes Secret's update) or rewritten within a timestamp tick is another stamp.
    identity: (u64, u64, i64, i64),
}

impl FileStamp {
    /// The stamp of `path` (following links), read with `stat` (no file descriptor).
    #[must_use]
    pub fn of(path: &Path) -> Option<FileStamp> {
        let m = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let identity = {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino(), m.ctime(), m.ctime_nsec())
        };
        #[cfg(not(unix))]
        let identity = (0, 0, 0, 0);
        Some(FileStamp {
            len: m.len(),
            modified: m.modified().ok(),
            identity,
        })
    }
}

/// The process environment and the file system: what the CLI passes.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolve;

impl Resolve for SystemResolve {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn read_file(&self, path: &Path) -> Result<String, String> {
        super::bounds::read_secret_file(path)
    }

    fn file_stamp(&self, path: &Path) -> Option<FileStamp> {
        FileStamp::of(path)
    }
}

/// What compilation does with a `${VAR}` that is not set or a `file:` secret that cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecretsMode {
    /// An error: every secret must resolve (`plan check`, `init`, the daemon).
    #[default]
    Required,
    /// A warning: the secret is kept unresolved ([`Secret::value`] says why) and whatever uses
    /// it fails there, naming the variable or the file. For a stored plan read by a command that
    /// talks to no broker (`status`, `pause`, `abort`...) on a machine without the secrets.
    Deferred,
}

/// One error or warning about a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    /// Where, in the plan's own terms: `phases.slices.steps[2]`; empty for the whole plan.
    pub path: String,
    /// 1-based line of that node (of the key, for a mapping entry), when known.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    /// `line 12: phases.slices.steps[2]: steps must be strictly increasing (32 after 64)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// A plan that compiled, with what deserves a second look.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    pub plan: Plan,
    /// Allowed but probably not meant (no `consume_dual`, a phase without exit gates, ...).
    pub warnings: Vec<Diagnostic>,
}

/// Compiles a plan.
///
/// `plan_dir` is the directory of the plan file: relative `routing.file` and `file:` secret paths
/// are taken relative to it (as written when `None`). `resolve` provides environment variables
/// and secret files.
///
/// # Errors
/// Every problem found, all at once, each with its path and line, ordered by line (the `Vec` is
/// never empty). Secret values never appear in them.
pub fn compile(
    yaml: &str,
    plan_dir: Option<&Path>,
    resolve: &dyn Resolve,
) -> Result<Compiled, Vec<Diagnostic>> {
    compile_with_secrets_mode(yaml, plan_dir, resolve, SecretsMode::Required)
}

/// [`compile()`], with what an unresolvable secret is: an error ([`SecretsMode::Required`], what
/// [`compile()`] does) or a warning and an unresolved [`Secret`] ([`SecretsMode::Deferred`]).
///
/// # Errors
/// As [`compile()`]; in [`SecretsMode::Deferred`], an unset variable or an unreadable secret file
/// is not one (a malformed reference such as `${1X}` still is).
pub fn compile_with_secrets_mode(
    yaml: &str,
    plan_dir: Option<&Path>,
    resolve: &dyn Resolve,
    secrets: SecretsMode,
) -> Result<Compiled, Vec<Diagnostic>> {
    // Before anything is built: an alias bomb or a deep nesting costs nothing past its bound.
    if let Err(e) = super::bounds::check(yaml) {
        return Err(vec![Diagnostic {
            path: String::new(),
            line: e.line(),
            message: e.to_string(),
        }]);
    }
    let mut root: Value = match serde_yaml::from_str(yaml) {
        Ok(v) => v,
        Err(e) => {
            return Err(vec![Diagnostic {
                path: String::new(),
                line: e.location().map(|l| l.line()),
                message: format!("not valid YAML: {e}"),
            }]);
        }
    };
    let mut cx = Cx {
        yaml,
        lines: OnceCell::new(),
        errors: Vec::new(),
        warnings: Vec::new(),
        resolve,
        secrets,
        plan_dir,
    };
    if let Err(e) = root.apply_merge() {
        cx.error("", format!("cannot apply a merge key (<<): {e}"));
        return Err(cx.errors);
    }
    let plan = cx.plan(&root);
    let by_line = |d: &Diagnostic| d.line.unwrap_or(usize::MAX);
    cx.errors.sort_by_key(by_line);
    cx.warnings.sort_by_key(by_line);
    match plan {
        Some(plan) if cx.errors.is_empty() => Ok(Compiled {
            plan,
            warnings: cx.warnings,
        }),
        _ => {
            if cx.errors.is_empty() {
                // Every path that yields no plan reports why; this is a safety net.
                cx.error("", "the plan could not be compiled");
            }
            Err(cx.errors)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Field lists (what "unknown field" errors offer instead).

const TOP_FIELDS: &[&str] = &[
    "version",
    "name",
    "slices",
    "auto_advance",
    "brokers",
    "retry",
    "dedup",
    "sources",
    "routing",
    "notify",
    "phases",
    "bridge",
];
const BROKERS_FIELDS: &[&str] = &["old", "new"];
const BROKER_FIELDS: &[&str] = &["name", "kind", "url", "queue", "stream", "dead_letter"];
const RETRY_FIELDS: &[&str] = &["max_backoff", "visibility_timeout"];
const DEDUP_FIELDS: &[&str] = &[
    "mode",
    "window",
    "max_redelivery_delay",
    "max_consumer_delay",
    "reprocess_margin",
];
const SOURCE_FIELDS: &[&str] = &["prometheus", "scrape", "dead_letters"];
/// What a gate may ask a `dead_letters` source.
const DEAD_LETTER_QUERIES: &[&str] = &["open_groups", "entries"];
const ROUTING_FIELDS: &[&str] = &["file", "etcd"];
const ETCD_FIELDS: &[&str] = &["endpoint", "key"];
const NOTIFY_FIELDS: &[&str] = &["webhooks", "hold_after"];
const WEBHOOK_FIELDS: &[&str] = &["url", "token"];
const PHASE_NAMES: &[&str] = &["consume_dual", "synthetic", "slices", "drain", "disconnect"];
const CONSUME_DUAL_FIELDS: &[&str] = &["min_duration", "exit", "guard", "on_breach"];
const SYNTHETIC_FIELDS: &[&str] = &["min_duration", "probes", "exit", "guard", "on_breach"];
const SLICES_FIELDS: &[&str] = &[
    "steps",
    "observe",
    "require_peak",
    "require_deploy",
    "exit",
    "guard",
    "on_breach",
];
const DRAIN_FIELDS: &[&str] = &["min_duration", "quiet", "exit", "guard", "on_breach"];
const DISCONNECT_FIELDS: &[&str] = &["retain", "exit", "guard", "on_breach"];
const GATE_FIELDS: &[&str] = &[
    "name",
    "source",
    "query",
    "pass_if",
    "compare",
    "tolerance",
    "for",
    "for_max_gap",
    "min_samples",
];
const COMPARE_FIELDS: &[&str] = &["new", "old"];
const TOLERANCE_FIELDS: &[&str] = &["ratio", "absolute"];
const PEAK_FIELDS: &[&str] = &["source", "query", "at_least"];
const DEPLOY_FIELDS: &[&str] = &["source", "query"];

fn phase_fields(kind: PhaseKind) -> &'static [&'static str] {
    match kind {
        PhaseKind::ConsumeDual => CONSUME_DUAL_FIELDS,
        PhaseKind::Synthetic => SYNTHETIC_FIELDS,
        PhaseKind::Slices => SLICES_FIELDS,
        PhaseKind::Drain => DRAIN_FIELDS,
        PhaseKind::Disconnect => DISCONNECT_FIELDS,
    }
}

/// The field that holds a phase's minimum time.
fn min_duration_field(kind: PhaseKind) -> &'static str {
    match kind {
        PhaseKind::Slices => "observe",
        PhaseKind::Disconnect => "retain",
        PhaseKind::ConsumeDual | PhaseKind::Synthetic | PhaseKind::Drain => "min_duration",
    }
}

/// A hint for a field that exists elsewhere in the format.
fn misplaced_hint(key: &str, what: &str) -> Option<String> {
    let s = match key {
        "min_duration" if what.contains("slices") => {
            "the slices phase sets its minimum time per step with `observe`"
        }
        "min_duration" if what.contains("disconnect") => {
            "the disconnect phase sets its minimum time with `retain`"
        }
        "observe" => "`observe` belongs to the slices phase",
        "retain" => "`retain` belongs to the disconnect phase",
        "quiet" => "`quiet` belongs to the drain phase",
        "steps" | "require_peak" | "require_deploy" => "only the slices phase has this",
        "probes" => "`probes` belongs to the synthetic phase",
        "publish" if what.contains("routing") => {
            "routing takes `file` (the daemon's HTTP endpoint always serves the document)"
        }
        _ => return None,
    };
    Some(s.to_string())
}

// ---------------------------------------------------------------------------------------------
// The walk.

struct Cx<'a> {
    yaml: &'a str,
    /// The line of each path, built when a first diagnostic needs one: a plan without any
    /// (a stored plan compiled again at each daemon start) is parsed once.
    lines: OnceCell<LineMap>,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
    resolve: &'a dyn Resolve,
    secrets: SecretsMode,
    plan_dir: Option<&'a Path>,
}

/// What a source is, as far as gates need to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SourceKind {
    Prometheus,
    Scrape,
    DeadLetters,
}

/// The sources section: the valid ones, and every declared name with its kind when known (so
/// that a gate on a source whose URL failed is not reported as "unknown source" as well).
#[derive(Default)]
struct Sources {
    valid: BTreeMap<String, Source>,
    declared: BTreeMap<String, Option<SourceKind>>,
}

/// What gates are checked against.
struct GateCtx<'s> {
    /// `None` when the `sources` section itself is broken: source names are then not checked.
    sources: Option<&'s Sources>,
    /// The drain quiet period, when it could be computed.
    quiet: Option<Duration>,
}

impl Cx<'_> {
    fn line(&self, path: &str) -> Option<usize> {
        self.lines
            .get_or_init(|| LineMap::build(self.yaml))
            .line(path)
    }

    fn diag(&self, path: &str, message: String) -> Diagnostic {
        Diagnostic {
            path: path.to_string(),
            line: self.line(path),
            message,
        }
    }

    fn error(&mut self, path: &str, message: impl Into<String>) {
        let d = self.diag(path, message.into());
        self.errors.push(d);
    }

    fn warn(&mut self, path: &str, message: impl Into<String>) {
        let d = self.diag(path, message.into());
        self.warnings.push(d);
    }

    // --- the plan ----------------------------------------------------------------------------

    fn plan(&mut self, root: &Value) -> Option<Plan> {
        if matches!(root, Value::Null) {
            self.error(
                "",
                "the plan is empty: expected a mapping with version, name, brokers, retry, \
                 sources and phases",
            );
            return None;
        }
        let top = Obj::new(self, root, "", "the plan", TOP_FIELDS)?;

        if let Some((v, p)) = top.req(self, "version", "write `version: 1`") {
            self.version(v, &p);
        }
        let name = top
            .req(self, "name", "the migration's name, [a-z0-9-]+")
            .and_then(|(v, p)| self.plan_name(v, &p));
        let slices = match top.get("slices") {
            Some((v, p)) => self
                .uint(v, &p, 1, u64::from(MAX_SLICES))
                .and_then(|n| u32::try_from(n).ok()),
            None => Some(DEFAULT_SLICES),
        };
        let slices_written = top.get("slices").is_some();
        let auto_advance = match top.get("auto_advance") {
            Some((v, p)) => self.boolean(v, &p),
            None => Some(true),
        };
        let brokers = top
            .req(self, "brokers", "`old` and `new`")
            .and_then(|(v, p)| self.brokers(v, &p));
        let retry = top
            .req(self, "retry", "`max_backoff` and `visibility_timeout`")
            .and_then(|(v, p)| self.retry(v, &p));
        let dedup = match top.get("dedup") {
            Some((v, p)) => self.dedup(v, &p).map(Some),
            None => {
                self.warn(
                    "dedup",
                    "no `dedup` section: the dedup window (window >= max_redelivery_delay + \
                     max_consumer_delay + reprocess_margin) is not checked; during coexistence \
                     the same message can arrive by both brokers and only the consumer's dedup \
                     stops it from being applied twice",
                );
                Some(None)
            }
        };
        let sources_field = top.req(self, "sources", "a mapping of named indicator sources");
        let sources = sources_field.and_then(|(v, p)| self.sources(v, &p));
        let routing = match top.get("routing") {
            Some((v, p)) => self.routing(v, &p),
            None => Some(RoutingPublish::default()),
        };
        let notify = match top.get("notify") {
            Some((v, p)) => self.notify(v, &p),
            None => Some(Notify::default()),
        };
        let (quiet, quiet_auto) = self.quiet(root, retry.as_ref());
        let phases = top
            .req(self, "phases", "the phases, with at least `slices`")
            .and_then(|(v, p)| {
                let gates = GateCtx {
                    sources: sources.as_ref(),
                    quiet,
                };
                self.phases(v, &p, &gates, slices.map(|s| (s, slices_written)))
            });

        if let Some(phases) = &phases
            && let Some(quiet) = quiet
        {
            self.phase_warnings(phases, quiet);
        }
        let bridge = match top.get("bridge") {
            Some((v, p)) => self.bridge(v, &p, brokers.as_ref()).map(Some),
            None => Some(None),
        };

        Some(Plan {
            name: name?,
            slices: slices?,
            brokers: brokers?,
            retry: retry?,
            dedup: dedup?,
            sources: sources?.valid,
            routing: routing?,
            notify: notify?,
            phases: phases?,
            quiet: quiet?,
            quiet_auto,
            auto_advance: auto_advance?,
            bridge: bridge?,
        })
    }

    fn version(&mut self, v: &Value, path: &str) {
        let supported = SUPPORTED_VERSIONS
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        match v {
            Value::Number(n) if n.as_u64().is_some_and(|n| SUPPORTED_VERSIONS.contains(&n)) => {}
            Value::Number(n) => self.error(
                path,
                format!("unsupported plan version {n} (supported versions: {supported})"),
            ),
            other => self.error(
                path,
                format!(
                    "expected a version number (supported versions: {supported}), found {}",
                    describe(other)
                ),
            ),
        }
    }

    fn plan_name(&mut self, v: &Value, path: &str) -> Option<String> {
        let name = self.string(v, path)?;
        let ok = (1..=63).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            self.error(
                path,
                format!(
                    "the name must be 1 to 63 characters among a-z, 0-9 and `-` (it names the \
                     migration in the store, the CLI and URLs); got {}",
                    quote(&name)
                ),
            );
            return None;
        }
        Some(name)
    }

    // --- brokers, retry, dedup, sources, routing ---------------------------------------------

    fn brokers(&mut self, v: &Value, path: &str) -> Option<Brokers> {
        let o = Obj::new(self, v, path, "the brokers", BROKERS_FIELDS)?;
        let old = o
            .req(self, "old", "the broker migrated from")
            .and_then(|(v, p)| self.broker(v, &p));
        let new = o
            .req(self, "new", "the broker migrated to")
            .and_then(|(v, p)| self.broker(v, &p));
        let (old, new) = (old?, new?);
        if old.name == new.name {
            self.error(
                &key_path(&key_path(path, "new"), "name"),
                format!(
                    "both brokers are named {}: route stamps and the routing document tell the \
                     two sides apart by name, give them different names",
                    quote(&new.name)
                ),
            );
            return None;
        }
        Some(Brokers { old, new })
    }

    fn broker(&mut self, v: &Value, path: &str) -> Option<Broker> {
        let o = Obj::new(self, v, path, "a broker", BROKER_FIELDS)?;
        let name = o
            .req(self, "name", "a display name such as `rabbitmq`")
            .and_then(|(v, p)| self.nonempty_string(v, &p));
        let kind = o
            .req(self, "kind", "amqp, nats or redis")
            .and_then(|(v, p)| self.nonempty_string(v, &p));
        if let Some(kind) = &kind
            && !KNOWN_BROKER_KINDS.contains(&kind.as_str())
        {
            self.warn(
                &key_path(path, "kind"),
                format!(
                    "broker kind {} has no adapter in this migrate (known: {})",
                    quote(kind),
                    KNOWN_BROKER_KINDS.join(", ")
                ),
            );
        }
        let url = o
            .req(self, "url", "a connection URL, `${VAR}` or `file:/path`")
            .and_then(|(v, p)| self.secret(v, &p));
        let opt_string = |cx: &mut Self, key: &str| -> Option<Option<String>> {
            match o.get(key) {
                Some((v, p)) => cx.nonempty_string(v, &p).map(Some),
                None => Some(None),
            }
        };
        let queue = opt_string(self, "queue");
        let stream = opt_string(self, "stream");
        let dead_letter = opt_string(self, "dead_letter");
        Some(Broker {
            name: name?,
            kind: kind?,
            url: url?,
            queue: queue?,
            stream: stream?,
            dead_letter: dead_letter?,
        })
    }

    fn retry(&mut self, v: &Value, path: &str) -> Option<Retry> {
        let o = Obj::new(self, v, path, "the retry policy", RETRY_FIELDS)?;
        let max_backoff = o
            .req(self, "max_backoff", "the longest wait before a redelivery")
            .and_then(|(v, p)| self.duration(v, &p));
        let visibility_timeout = o
            .req(
                self,
                "visibility_timeout",
                "how long an unacked message stays invisible",
            )
            .and_then(|(v, p)| self.duration(v, &p));
        Some(Retry {
            max_backoff: max_backoff?,
            visibility_timeout: visibility_timeout?,
        })
    }

    fn dedup(&mut self, v: &Value, path: &str) -> Option<Dedup> {
        let o = Obj::new(self, v, path, "the dedup policy", DEDUP_FIELDS)?;
        let field = |cx: &mut Self, key: &str| {
            o.req(cx, key, "a duration")
                .and_then(|(v, p)| cx.duration(v, &p))
        };
        let window = field(self, "window");
        let redelivery = field(self, "max_redelivery_delay");
        let consumer = field(self, "max_consumer_delay");
        let margin = field(self, "reprocess_margin");
        let mode = match o.get("mode") {
            None => Some(DedupMode::Durable),
            Some((v, p)) => match self.string(v, &p).as_deref() {
                Some("durable") => Some(DedupMode::Durable),
                Some("redis") => Some(DedupMode::Redis),
                Some("window") => Some(DedupMode::Window),
                Some(other) => {
                    self.error(
                        &p,
                        format!(
                            "unknown dedup mode {}: durable (keys in SQL), redis, or window \
                             (in-memory, recent duplicates only)",
                            quote(other)
                        ),
                    );
                    None
                }
                None => None,
            },
        };
        let dedup = Dedup {
            mode: mode?,
            window: window?,
            max_redelivery_delay: redelivery?,
            max_consumer_delay: consumer?,
            reprocess_margin: margin?,
        };
        let required = dedup
            .max_redelivery_delay
            .checked_add(dedup.max_consumer_delay)
            .and_then(|d| d.checked_add(dedup.reprocess_margin));
        let window_path = key_path(path, "window");
        if dedup.mode == DedupMode::Window {
            // The in-memory window only catches recent duplicates, by design: a reprocess older
            // than the window is not detected. Say so; it is the operator's informed choice.
            if let Some(w) =
                crate::dedup::window::window_warning(dedup.window, dedup.reprocess_margin)
            {
                self.warn(&window_path, w);
            }
            return Some(dedup);
        }
        match required {
            None => {
                self.error(
                    &window_path,
                    "max_redelivery_delay + max_consumer_delay + reprocess_margin is too large \
                     to add up",
                );
                None
            }
            Some(required) if dedup.window < required => {
                self.error(
                    &window_path,
                    format!(
                        "window {} is shorter than max_redelivery_delay {} + max_consumer_delay \
                         {} + reprocess_margin {} = {}: a message redelivered or reprocessed \
                         inside that span would be applied twice; raise window to at least {}",
                        human(dedup.window),
                        human(dedup.max_redelivery_delay),
                        human(dedup.max_consumer_delay),
                        human(dedup.reprocess_margin),
                        human(required),
                        human(required),
                    ),
                );
                None
            }
            Some(_) => Some(dedup),
        }
    }

    fn sources(&mut self, v: &Value, path: &str) -> Option<Sources> {
        let Value::Mapping(map) = v else {
            self.error(
                path,
                format!(
                    "expected a mapping of named sources (e.g. `prom: {{ prometheus: \
                     \"http://127.0.0.1:9090\" }}`), found {}",
                    describe(v)
                ),
            );
            return None;
        };
        let mut out = Sources::default();
        for (k, v) in map {
            let Some(name) = self.key_name(k, path) else {
                continue;
            };
            let p = key_path(path, &name);
            let valid_name = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !valid_name {
                self.error(
                    &p,
                    format!(
                        "a source name is letters, digits, `-` and `_`; got {}",
                        quote(&name)
                    ),
                );
            }
            // Every declared name is kept, for the gates, even when its entry is invalid (its
            // error is recorded, so no plan is produced).
            let (kind, source) = self.source(v, &p);
            out.declared.insert(name.clone(), kind);
            if let Some(s) = source {
                out.valid.insert(name, s);
            }
        }
        Some(out)
    }

    fn source(&mut self, v: &Value, path: &str) -> (Option<SourceKind>, Option<Source>) {
        let Some(o) = Obj::new(self, v, path, "a source", SOURCE_FIELDS) else {
            return (None, None);
        };
        if let Some((v, p)) = o.get("dead_letters") {
            if o.get("prometheus").is_some() || o.get("scrape").is_some() {
                self.error(
                    path,
                    "a source is one of `prometheus`, `scrape` or `dead_letters`",
                );
                return (None, None);
            }
            let export = self.nonempty_string(v, &p).map(|f| self.relative(&f));
            return (
                Some(SourceKind::DeadLetters),
                export.map(|export| Source::DeadLetters { export }),
            );
        }
        match (o.get("prometheus"), o.get("scrape")) {
            (Some((v, p)), None) => {
                let url = self
                    .secret(v, &p)
                    .and_then(|s| self.http_url(s, &p, "prometheus"));
                (
                    Some(SourceKind::Prometheus),
                    url.map(|url| Source::Prometheus { url }),
                )
            }
            (None, Some((v, p))) => {
                let url = self
                    .secret(v, &p)
                    .and_then(|s| self.http_url(s, &p, "scrape"));
                (
                    Some(SourceKind::Scrape),
                    url.map(|url| Source::Scrape { url }),
                )
            }
            (Some(_), Some(_)) => {
                self.error(
                    path,
                    "a source is either `prometheus: URL` or `scrape: URL`, not both",
                );
                (None, None)
            }
            (None, None) => {
                self.error(
                    path,
                    "a source needs `prometheus: URL` (a Prometheus server) or `scrape: URL` (a \
                     /metrics endpoint)",
                );
                (None, None)
            }
        }
    }

    fn http_url(&mut self, url: Secret, path: &str, what: &str) -> Option<Secret> {
        // An unresolved secret (deferred) cannot be checked: whatever uses it fails anyway.
        let Ok(value) = url.value() else {
            return Some(url);
        };
        let lower = value.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            return Some(url);
        }
        let shown = if url.reference == value {
            quote(&url.redacted())
        } else {
            format!("the value of {}", quote(&url.redacted()))
        };
        self.error(
            path,
            format!("a {what} source URL must start with http:// or https://: {shown} does not"),
        );
        None
    }

    fn routing(&mut self, v: &Value, path: &str) -> Option<RoutingPublish> {
        let o = Obj::new(self, v, path, "routing", ROUTING_FIELDS)?;
        let file = o
            .get("file")
            .map(|(v, p)| self.nonempty_string(v, &p).map(|f| self.relative(&f)));
        let etcd = o.get("etcd").map(|(v, p)| self.etcd(v, &p));
        Some(RoutingPublish {
            file: present(file)?,
            etcd: present(etcd)?,
        })
    }

    fn etcd(&mut self, v: &Value, path: &str) -> Option<EtcdPublish> {
        let o = Obj::new(self, v, path, "routing.etcd", ETCD_FIELDS)?;
        let endpoint = o
            .req(
                self,
                "endpoint",
                "the etcd v3 gateway URL, e.g. http://127.0.0.1:2379",
            )
            .and_then(|(v, p)| {
                let s = self.secret(v, &p)?;
                self.http_url(s, &p, "etcd")
            });
        let key = o
            .req(
                self,
                "key",
                "the etcd key producers read, e.g. /queue-migrate/orders/routing",
            )
            .and_then(|(v, p)| self.nonempty_string(v, &p));
        Some(EtcdPublish {
            endpoint: endpoint?,
            key: key?,
        })
    }

    fn notify(&mut self, v: &Value, path: &str) -> Option<Notify> {
        let o = Obj::new(self, v, path, "notify", NOTIFY_FIELDS)?;
        let hold_after = o.get("hold_after").map(|(v, p)| self.duration(v, &p));
        let webhooks = match o.get("webhooks") {
            None => Some(Vec::new()),
            Some((Value::Sequence(items), p)) => {
                let hooks: Vec<Option<Webhook>> = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.webhook(item, &format!("{p}[{i}]")))
                    .collect();
                hooks.into_iter().collect()
            }
            Some((other, p)) => {
                self.error(
                    &p,
                    format!("expected a list of webhooks, found {}", describe(other)),
                );
                None
            }
        };
        Some(Notify {
            webhooks: webhooks?,
            hold_after: present(hold_after)?,
        })
    }

    fn webhook(&mut self, v: &Value, path: &str) -> Option<Webhook> {
        let o = Obj::new(self, v, path, "a webhook", WEBHOOK_FIELDS)?;
        let url = o
            .req(self, "url", "where to POST the JSON events")
            .and_then(|(v, p)| {
                let s = self.secret(v, &p)?;
                self.http_url(s, &p, "webhook")
            });
        let token = o.get("token").map(|(v, p)| self.secret(v, &p));
        Some(Webhook {
            url: url?,
            token: present(token)?,
        })
    }

    /// A path as written, taken relative to the plan's directory when it is relative.
    fn relative(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        match self.plan_dir {
            Some(dir) if p.is_relative() => dir.join(p),
            _ => p.to_path_buf(),
        }
    }

    /// The drain quiet period (`phases.drain.quiet`, `auto` by default) and whether it was
    /// computed. Read before the phases because `for: quiet` may appear in any phase.
    fn quiet(&mut self, root: &Value, retry: Option<&Retry>) -> (Option<Duration>, bool) {
        let path = "phases.drain.quiet";
        let written = root
            .get("phases")
            .and_then(|p| p.get("drain"))
            .and_then(|d| d.get("quiet"))
            .filter(|q| !matches!(q, Value::Null));
        match written {
            Some(Value::String(s)) if s.trim() == "auto" => {}
            Some(v) => return (self.duration(v, path), false),
            None => {}
        }
        let Some(retry) = retry else {
            return (None, true);
        };
        match retry.max_backoff.checked_add(retry.visibility_timeout) {
            Some(q) => (Some(q), true),
            None => {
                self.error(
                    "retry",
                    "max_backoff + visibility_timeout is too large to add up",
                );
                (None, true)
            }
        }
    }

    // --- phases --------------------------------------------------------------------------------

    /// `slices`: the plan's total and whether it was written (for messages).
    fn phases(
        &mut self,
        v: &Value,
        path: &str,
        gates: &GateCtx<'_>,
        slices: Option<(u32, bool)>,
    ) -> Option<Vec<Phase>> {
        let o = Obj::new(self, v, path, "phases", PHASE_NAMES)?;
        let mut out = Vec::new();
        let mut ok = true;
        for kind in PhaseKind::ALL {
            match o.get_raw(kind.as_str()) {
                Some((v, p)) => match self.phase(kind, v, &p, gates, slices) {
                    Some(phase) => out.push(phase),
                    None => ok = false,
                },
                None if kind == PhaseKind::Slices => {
                    self.error(
                        path,
                        "missing required phase `slices` (the steps that move producers to the \
                         new broker)",
                    );
                    ok = false;
                }
                None => {}
            }
        }
        ok.then_some(out)
    }

    fn phase(
        &mut self,
        kind: PhaseKind,
        v: &Value,
        path: &str,
        gates: &GateCtx<'_>,
        slices: Option<(u32, bool)>,
    ) -> Option<Phase> {
        let empty = Value::Mapping(Mapping::new());
        let v = if matches!(v, Value::Null) { &empty } else { v };
        let what = format!("the {kind} phase");
        let o = Obj::new(self, v, path, &what, phase_fields(kind))?;

        let min_duration = match o.get(min_duration_field(kind)) {
            Some((v, p)) => self.duration(v, &p),
            None => Some(Duration::ZERO),
        };
        let exit = match o.get("exit") {
            Some((v, p)) => self.gates(v, &p, gates),
            None => Some(Vec::new()),
        };
        let guard = match o.get("guard") {
            Some((v, p)) => self.gates(v, &p, gates),
            None => Some(Vec::new()),
        };
        let on_breach = match o.get("on_breach") {
            Some((v, p)) => self.breach_action(v, &p),
            None => Some(BreachAction::default()),
        };
        let (mut steps, mut require_peak, mut require_deploy) =
            (Some(Vec::new()), Some(None), Some(None));
        if kind == PhaseKind::Slices {
            steps = o
                .req(self, "steps", "e.g. `steps: [6, 32, 64, 128]`")
                .and_then(|(v, p)| self.steps(v, &p, slices));
            require_peak = match o.get("require_peak") {
                Some((v, p)) => self.requirement(v, &p, gates, true).map(Some),
                None => Some(None),
            };
            require_deploy = match o.get("require_deploy") {
                Some((v, p)) => self.requirement(v, &p, gates, false).map(Some),
                None => Some(None),
            };
        }
        let probes = match o.get("probes") {
            Some((v, p)) => self.probes(v, &p).map(Some),
            None => Some(None),
        };
        let unique = self.unique_gate_names(&o);
        let (exit, guard) = (exit?, guard?);
        unique?;
        Some(Phase {
            kind,
            min_duration: min_duration?,
            exit,
            guard,
            on_breach: on_breach?,
            steps: steps?,
            require_peak: require_peak?,
            require_deploy: require_deploy?,
            probes: probes?,
        })
    }

    /// Gate names are unique within a phase, across exit and guard. Read from the YAML itself so
    /// that a duplicate is reported even when one of the two gates has other errors.
    fn unique_gate_names(&mut self, o: &Obj<'_>) -> Option<()> {
        let mut seen: HashMap<&str, String> = HashMap::new();
        let mut ok = true;
        for list in ["exit", "guard"] {
            let Some((Value::Sequence(items), list_path)) = o.get(list) else {
                continue;
            };
            for (i, item) in items.iter().enumerate() {
                let Some(Value::String(name)) = item.get("name") else {
                    continue;
                };
                let gate_path = index_path(&list_path, i);
                if matches!(name.as_str(), "require_peak" | "require_deploy") {
                    // The requirements are recorded under these names: a gate sharing one shares
                    // its "held since" mark, so its `for:` may never be met (it holds). A warning,
                    // not an error: a plan stored before this check still loads.
                    self.warn(
                        &key_path(&gate_path, "name"),
                        format!(
                            "the gate name {} is the name the slices phase's requirement is \
                             recorded under: the two share a \"held since\" mark (the gate may \
                             hold for ever); call the gate something else",
                            quote(name)
                        ),
                    );
                }
                if let Some(first) = seen.get(name.as_str()) {
                    let at = match self.line(first) {
                        Some(line) => format!("{first}, line {line}"),
                        None => first.clone(),
                    };
                    self.error(
                        &key_path(&gate_path, "name"),
                        format!(
                            "duplicate gate name {} (first at {at}): gate names must be unique \
                             within a phase, across exit and guard, because status, the journal \
                             and \"held since\" marks refer to gates by name",
                            quote(name)
                        ),
                    );
                    ok = false;
                } else {
                    seen.insert(name, gate_path);
                }
            }
        }
        ok.then_some(())
    }

    fn breach_action(&mut self, v: &Value, path: &str) -> Option<BreachAction> {
        let s = self.string(v, path)?;
        match s.as_str() {
            "rollback" => Some(BreachAction::Rollback),
            "pause" => Some(BreachAction::Pause),
            "alert" => Some(BreachAction::Alert),
            _ => {
                self.error(
                    path,
                    format!(
                        "on_breach is one of rollback, pause, alert; got {}",
                        quote(&s)
                    ),
                );
                None
            }
        }
    }

    fn steps(&mut self, v: &Value, path: &str, slices: Option<(u32, bool)>) -> Option<Vec<u32>> {
        let Value::Sequence(items) = v else {
            self.error(
                path,
                format!(
                    "expected a list of slice counts, e.g. [6, 32, 64, 128], found {}",
                    describe(v)
                ),
            );
            return None;
        };
        if items.is_empty() {
            self.error(
                path,
                "needs at least one step (the last one migrates every slice)",
            );
            return None;
        }
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        let mut prev: Option<u32> = None;
        for (i, item) in items.iter().enumerate() {
            let p = index_path(path, i);
            let Some(step) = self
                .uint(item, &p, 1, u64::from(MAX_SLICES))
                .and_then(|n| u32::try_from(n).ok())
            else {
                ok = false;
                prev = None;
                continue;
            };
            if let Some(prev) = prev
                && step <= prev
            {
                self.error(
                    &p,
                    format!("steps must be strictly increasing ({step} after {prev})"),
                );
                ok = false;
            }
            if let Some((total, _)) = slices
                && step > total
            {
                self.error(
                    &p,
                    format!("step {step} is more than the plan's {total} slices"),
                );
                ok = false;
            }
            prev = Some(step);
            out.push(step);
        }
        if let (Some((total, written)), Some(&last)) = (slices, out.last())
            && ok
            && last != total
            && out.len() == items.len()
        {
            let default = if written {
                String::new()
            } else {
                format!(" (`slices` is not set, so it is the default {total})")
            };
            self.error(
                &index_path(path, items.len() - 1),
                format!("the last step must migrate every slice: {total}{default}, found {last}"),
            );
            ok = false;
        }
        ok.then_some(out)
    }

    fn requirement(
        &mut self,
        v: &Value,
        path: &str,
        gates: &GateCtx<'_>,
        peak: bool,
    ) -> Option<Requirement> {
        let (what, fields) = if peak {
            ("require_peak", PEAK_FIELDS)
        } else {
            ("require_deploy", DEPLOY_FIELDS)
        };
        let o = Obj::new(self, v, path, what, fields)?;
        let source = o
            .req(self, "source", "the name of a declared source")
            .and_then(|(v, p)| self.source_ref(v, &p, gates));
        let query = o
            .req(self, "query", "the query to read")
            .and_then(|(v, p)| {
                let q = self.nonempty_string(v, &p)?;
                self.check_query(source.as_ref(), &q, &p)?;
                Some(q)
            });
        let at_least = if peak {
            o.req(self, "at_least", "the lowest peak reading accepted")
                .and_then(|(v, p)| self.number(v, &p))
                .map(Some)
        } else {
            Some(None)
        };
        Some(Requirement {
            source: source?.0,
            query: query?,
            at_least: at_least?,
        })
    }

    // --- gates ---------------------------------------------------------------------------------

    fn gates(&mut self, v: &Value, path: &str, gates: &GateCtx<'_>) -> Option<Vec<Gate>> {
        let Value::Sequence(items) = v else {
            self.error(
                path,
                format!(
                    "expected a list of gates (`- name: ...`), found {}",
                    describe(v)
                ),
            );
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match self.gate(item, &index_path(path, i), gates) {
                Some(g) => out.push(g),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn gate(&mut self, v: &Value, path: &str, gates: &GateCtx<'_>) -> Option<Gate> {
        let o = Obj::new(self, v, path, "a gate", GATE_FIELDS)?;
        let name = o
            .req(self, "name", "what status and the journal call this gate")
            .and_then(|(v, p)| self.nonempty_string(v, &p));
        let source = o
            .req(self, "source", "the name of a declared source")
            .and_then(|(v, p)| self.source_ref(v, &p, gates));

        let query = o.get("query");
        let pass_if = o.get("pass_if");
        let compare = o.get("compare");
        let tolerance = o.get("tolerance");
        let check = match (query, compare) {
            (Some(_), Some(_)) => {
                self.error(
                    path,
                    "a gate takes either `query` + `pass_if` (a threshold) or `compare` + \
                     `tolerance` (new against old), not both",
                );
                None
            }
            (None, None) => {
                self.error(
                    path,
                    "a gate needs a condition: `query` + `pass_if` (e.g. \">= 1\"), or \
                     `compare: { new: QUERY, old: QUERY }`",
                );
                None
            }
            (Some((qv, qp)), None) => {
                if let Some((_, tp)) = &tolerance {
                    self.error(
                        tp,
                        "`tolerance` only applies to `compare` gates; a `query` gate uses \
                         `pass_if`",
                    );
                }
                let q = self.nonempty_string(qv, &qp).and_then(|q| {
                    self.check_query(source.as_ref(), &q, &qp)?;
                    Some(q)
                });
                let cmp = match &pass_if {
                    Some((v, p)) => self.pass_if(v, p),
                    None => {
                        self.error(
                            path,
                            "missing `pass_if` for `query`: the comparison that passes, e.g. \
                             \">= 1\", \"== 0\", \"< 0.01\"",
                        );
                        None
                    }
                };
                match (q, cmp) {
                    (Some(query), Some((op, value))) if tolerance.is_none() => {
                        Some(Check::Threshold { query, op, value })
                    }
                    _ => None,
                }
            }
            (None, Some((cv, cp))) => {
                if let Some((_, pp)) = &pass_if {
                    self.error(
                        pp,
                        "`pass_if` goes with `query`; a `compare` gate passes when new <= \
                         max(old x ratio, old + absolute), set by `tolerance`",
                    );
                }
                let pair = self.compare(cv, &cp, source.as_ref());
                let tol = match &tolerance {
                    Some((v, p)) => self.tolerance(v, p),
                    None => Some((1.0, 0.0)),
                };
                match (pair, tol) {
                    (Some((new, old)), Some((ratio, absolute))) if pass_if.is_none() => {
                        Some(Check::Compare {
                            new,
                            old,
                            ratio,
                            absolute,
                        })
                    }
                    _ => None,
                }
            }
        };

        let hold_for = match o.get("for") {
            Some((Value::String(s), _)) if s.trim() == "quiet" => Some(gates.quiet),
            Some((v, p)) => self.duration(v, &p).map(Some),
            None => Some(None),
        };
        let for_max_gap = self.for_max_gap(o.get("for_max_gap"), o.get("for").is_some());
        let min_samples = match o.get("min_samples") {
            Some((v, p)) => self
                .uint(v, &p, 1, u64::from(u32::MAX))
                .and_then(|n| u32::try_from(n).ok()),
            None => Some(1),
        };
        Some(Gate {
            name: name?,
            source: source?.0,
            check: check?,
            hold_for: hold_for?,
            for_max_gap: for_max_gap?,
            min_samples: min_samples?,
        })
    }

    /// A gate's `for_max_gap` (`field`): only beside `for` (`has_for`), where it defaults to
    /// [`DEFAULT_FOR_MAX_GAP`]; a duration above zero.
    fn for_max_gap(
        &mut self,
        field: Option<(&Value, String)>,
        has_for: bool,
    ) -> Option<Option<Duration>> {
        let Some((v, p)) = field else {
            return Some(has_for.then_some(DEFAULT_FOR_MAX_GAP));
        };
        if !has_for {
            self.error(
                &p,
                "`for_max_gap` bounds the time between two evaluations of a `for:` gate; this \
                 gate has no `for`: add one (e.g. `for: 30m`) or remove `for_max_gap`",
            );
            return None;
        }
        let gap = self.duration(v, &p)?;
        if gap.is_zero() {
            self.error(
                &p,
                "`for_max_gap` must be longer than 0s: it is the longest time between two \
                 evaluations that keeps a `for:` streak (default 5m)",
            );
            return None;
        }
        Some(Some(gap))
    }

    /// A gate's or requirement's `source`: its name and kind (kind `None` when unknown).
    fn source_ref(
        &mut self,
        v: &Value,
        path: &str,
        gates: &GateCtx<'_>,
    ) -> Option<(String, Option<SourceKind>)> {
        let name = self.nonempty_string(v, path)?;
        let Some(sources) = gates.sources else {
            return Some((name, None));
        };
        match sources.declared.get(&name) {
            Some(kind) => Some((name, *kind)),
            None => {
                let declared = if sources.declared.is_empty() {
                    "no sources are declared under `sources`".to_string()
                } else {
                    format!(
                        "declared sources: {}",
                        sources
                            .declared
                            .keys()
                            .map(String::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                self.error(path, format!("unknown source {}; {declared}", quote(&name)));
                None
            }
        }
    }

    /// Queries on a scrape source are evaluated by the controller itself: check they parse.
    fn check_query(
        &mut self,
        source: Option<&(String, Option<SourceKind>)>,
        query: &str,
        path: &str,
    ) -> Option<()> {
        if let Some((name, Some(SourceKind::DeadLetters))) = source {
            if DEAD_LETTER_QUERIES.contains(&query.trim()) {
                return Some(());
            }
            self.error(
                path,
                format!(
                    "the dead-letter source {} answers {}, not {}",
                    quote(name),
                    DEAD_LETTER_QUERIES.join(" or "),
                    quote(query)
                ),
            );
            return None;
        }
        let Some((name, Some(SourceKind::Scrape))) = source else {
            return Some(());
        };
        match crate::indicators::query::parse_query(query) {
            Ok(_) => Some(()),
            Err(e) => {
                self.error(
                    path,
                    format!(
                        "not a query the scrape source {} can answer: {e}",
                        quote(name)
                    ),
                );
                None
            }
        }
    }

    fn pass_if(&mut self, v: &Value, path: &str) -> Option<(CmpOp, f64)> {
        let Value::String(s) = v else {
            self.error(
                path,
                format!(
                    "expected a comparison in quotes such as \">= 1\" or \"== 0\", found {}",
                    describe(v)
                ),
            );
            return None;
        };
        match parse_pass_if(s) {
            Ok(c) => Some(c),
            Err(why) => {
                self.error(path, why);
                None
            }
        }
    }

    fn compare(
        &mut self,
        v: &Value,
        path: &str,
        source: Option<&(String, Option<SourceKind>)>,
    ) -> Option<(String, String)> {
        let o = Obj::new(self, v, path, "compare", COMPARE_FIELDS)?;
        if let Some((name, Some(SourceKind::DeadLetters))) = source {
            // Its readings are single numbers, never a pair of routes. A warning, not an error:
            // the gate holds (never passes), and a plan stored before this check still loads.
            self.warn(
                path,
                format!(
                    "the dead-letter source {} answers one number ({}), not a new/old pair: this \
                     gate holds for ever; use `query` + `pass_if`",
                    quote(name),
                    DEAD_LETTER_QUERIES.join(" or ")
                ),
            );
        }
        let side = |cx: &mut Self, key: &str, what: &str| {
            o.req(cx, key, what).and_then(|(v, p)| {
                let q = cx.nonempty_string(v, &p)?;
                cx.check_query(source, &q, &p)?;
                Some(q)
            })
        };
        let new = side(self, "new", "the query read on the new route");
        let old = side(self, "old", "the query read on the old route");
        Some((new?, old?))
    }

    fn tolerance(&mut self, v: &Value, path: &str) -> Option<(f64, f64)> {
        let o = Obj::new(self, v, path, "tolerance", TOLERANCE_FIELDS)?;
        let ratio = match o.get("ratio") {
            Some((v, p)) => self.number(v, &p).and_then(|r| {
                if r >= 1.0 {
                    Some(r)
                } else {
                    self.error(
                        &p,
                        format!(
                            "ratio must be at least 1 (new may be at most ratio x old); got {r}"
                        ),
                    );
                    None
                }
            }),
            None => Some(1.0),
        };
        let absolute = match o.get("absolute") {
            Some((v, p)) => self.number(v, &p).and_then(|a| {
                if a >= 0.0 {
                    Some(a)
                } else {
                    self.error(
                        &p,
                        format!(
                            "absolute must be at least 0 (new may be at most old + absolute); \
                             got {a}"
                        ),
                    );
                    None
                }
            }),
            None => Some(0.0),
        };
        Some((ratio?, absolute?))
    }

    // --- scalars -------------------------------------------------------------------------------

    fn string(&mut self, v: &Value, path: &str) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(_) | Value::Bool(_) => {
                self.error(
                    path,
                    format!(
                        "expected a string, found {}; put it in quotes if it is meant as text",
                        describe(v)
                    ),
                );
                None
            }
            other => {
                self.error(
                    path,
                    format!("expected a string, found {}", describe(other)),
                );
                None
            }
        }
    }

    fn nonempty_string(&mut self, v: &Value, path: &str) -> Option<String> {
        let s = self.string(v, path)?;
        if s.trim().is_empty() {
            self.error(path, "must not be empty");
            return None;
        }
        Some(s)
    }

    fn uint(&mut self, v: &Value, path: &str, min: u64, max: u64) -> Option<u64> {
        let n = match v {
            Value::Number(n) => n.as_u64().filter(|n| (min..=max).contains(n)),
            _ => None,
        };
        if n.is_none() {
            self.error(
                path,
                format!(
                    "expected a whole number from {min} to {max}, found {}",
                    describe(v)
                ),
            );
        }
        n
    }

    fn number(&mut self, v: &Value, path: &str) -> Option<f64> {
        let n = match v {
            Value::Number(n) => n.as_f64().filter(|f| f.is_finite()),
            _ => None,
        };
        if n.is_none() {
            self.error(
                path,
                format!("expected a finite number, found {}", describe(v)),
            );
        }
        n
    }

    fn boolean(&mut self, v: &Value, path: &str) -> Option<bool> {
        match v {
            Value::Bool(b) => Some(*b),
            other => {
                self.error(
                    path,
                    format!("expected true or false, found {}", describe(other)),
                );
                None
            }
        }
    }

    fn duration(&mut self, v: &Value, path: &str) -> Option<Duration> {
        const UNITS: &str = "add a unit: `90s`, `15m`, `24h`, `7d` (or combined, `1h30m`)";
        match v {
            Value::Number(n) => {
                self.error(
                    path,
                    format!("a bare number ({n}) is not a duration: {UNITS}"),
                );
                None
            }
            Value::String(s) => {
                let t = s.trim();
                if t.parse::<f64>().is_ok() {
                    self.error(
                        path,
                        format!("a bare number ({}) is not a duration: {UNITS}", quote(t)),
                    );
                    return None;
                }
                match humantime::parse_duration(t) {
                    Ok(d) if d > MAX_DURATION => {
                        self.error(
                            path,
                            format!(
                                "{} is longer than the {} (10 years) a duration in a plan may be",
                                quote(t),
                                human(MAX_DURATION)
                            ),
                        );
                        None
                    }
                    Ok(d) => Some(d),
                    Err(e) => {
                        self.error(
                            path,
                            format!(
                                "{} is not a duration ({e}): write it like `90s`, `15m`, `24h`, \
                                 `7d` or `1h30m`",
                                quote(t)
                            ),
                        );
                        None
                    }
                }
            }
            other => {
                self.error(
                    path,
                    format!(
                        "expected a duration such as `15m` or `24h`, found {}",
                        describe(other)
                    ),
                );
                None
            }
        }
    }

    /// A `url` value: `${VAR}` (whole or embedded), `file:/path`, or a literal.
    fn secret(&mut self, v: &Value, path: &str) -> Option<Secret> {
        let reference = self.string(v, path)?;
        let value = if let Some(file) = reference.strip_prefix("file:") {
            let file = file.trim();
            if file.is_empty() {
                self.error(
                    path,
                    "`file:` needs a path, e.g. `file:/run/secrets/broker-url`",
                );
                return None;
            }
            let full = self.relative(file);
            match self.resolve.read_file(&full) {
                Ok(text) => text.trim().to_string(),
                Err(e) if self.secrets == SecretsMode::Deferred => {
                    let why = Unresolved::File {
                        path: full,
                        message: e,
                    };
                    return Some(self.deferred(path, reference, why));
                }
                Err(e) => {
                    self.error(
                        path,
                        format!("cannot read the secret file {}: {e}", full.display()),
                    );
                    return None;
                }
            }
        } else {
            match expand_env(&reference, self.resolve) {
                Ok(v) => v,
                Err(Unexpanded { malformed, unset })
                    if malformed.is_empty() && self.secrets == SecretsMode::Deferred =>
                {
                    return Some(self.deferred(path, reference, Unresolved::Env(unset)));
                }
                Err(Unexpanded { malformed, unset }) => {
                    for p in malformed {
                        self.error(path, p);
                    }
                    for name in unset {
                        self.error(path, format!("environment variable `{name}` is not set"));
                    }
                    return None;
                }
            }
        };
        if value.trim().is_empty() {
            self.error(
                path,
                format!(
                    "{} resolves to an empty value",
                    quote(&crate::redact::url(&reference))
                ),
            );
            return None;
        }
        if reference == value && has_inline_password(&value) {
            self.warn(
                path,
                "a password is written in the plan: use `${VAR}` or `file:/path` so that it \
                 stays out of the plan file and its history (it is masked in output)",
            );
        }
        Some(Secret::new(reference, value))
    }

    /// A secret left unresolved ([`SecretsMode::Deferred`]), with a warning saying so.
    fn deferred(&mut self, path: &str, reference: String, why: Unresolved) -> Secret {
        self.warn(
            path,
            format!("{why}: whatever needs this value fails until it is"),
        );
        Secret::unresolved(reference, why)
    }

    /// A mapping key as a field or source name.
    fn key_name(&mut self, k: &Value, path: &str) -> Option<String> {
        match k {
            Value::String(s) => Some(s.clone()),
            other => {
                self.error(
                    path,
                    format!("field names must be strings, found {}", describe(other)),
                );
                None
            }
        }
    }

    // --- warnings ------------------------------------------------------------------------------

    fn phase_warnings(&mut self, phases: &[Phase], quiet: Duration) {
        let has = |k: PhaseKind| phases.iter().any(|p| p.kind == k);
        if !has(PhaseKind::ConsumeDual) {
            self.warn(
                "phases",
                "no `consume_dual` phase: consumers never read both brokers before producers \
                 move, so the first slice step publishes to a broker nobody has proven to \
                 consume from, and an abort has no dual-read state of its own to fall back to",
            );
        }
        if !has(PhaseKind::Drain) {
            self.warn(
                "phases",
                "no `drain` phase: nothing checks that the old queue (and its dead-letter \
                 queue) is empty before consumers stop reading it",
            );
        }
        for phase in phases {
            let path = key_path("phases", phase.kind.as_str());
            if phase.exit.is_empty() {
                self.warn(
                    &path,
                    format!(
                        "no exit gates: this phase advances on time alone ({} {}); allowed, \
                         but nothing measured says it is safe to move on",
                        min_duration_field(phase.kind),
                        human(phase.min_duration)
                    ),
                );
            }
            if phase.kind == PhaseKind::Slices && phase.guard.is_empty() {
                self.warn(
                    &path,
                    "no guard gates: nothing watches the migrated slices between evaluations, \
                     so a regression on the new route does not roll back by itself",
                );
            }
            if phase.kind == PhaseKind::Drain
                && !phase
                    .exit
                    .iter()
                    .any(|g| g.hold_for.is_some_and(|d| d >= quiet))
            {
                self.warn(
                    &path,
                    format!(
                        "no exit gate uses `for: quiet` ({}): an old queue that reads 0 once may \
                         still get messages back from retries and visibility timeouts",
                        human(quiet)
                    ),
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A mapping at a path: its unknown keys are reported when it is opened.

struct Obj<'v> {
    path: String,
    map: &'v Mapping,
}

impl<'v> Obj<'v> {
    /// Opens a mapping, reporting a wrong type or every unknown key.
    fn new(
        cx: &mut Cx<'_>,
        v: &'v Value,
        path: &str,
        what: &str,
        allowed: &[&str],
    ) -> Option<Obj<'v>> {
        let Value::Mapping(map) = v else {
            cx.error(
                path,
                format!(
                    "expected {what} (a mapping with {}), found {}",
                    allowed.join(", "),
                    describe(v)
                ),
            );
            return None;
        };
        for k in map.keys() {
            let Some(key) = cx.key_name(k, path) else {
                continue;
            };
            if allowed.contains(&key.as_str()) {
                continue;
            }
            let mut message = format!(
                "unknown field {} in {what}; allowed: {}",
                quote(&key),
                allowed.join(", ")
            );
            if let Some(hint) = misplaced_hint(&key, what) {
                message.push_str(&format!(" ({hint})"));
            } else if let Some(near) = closest(&key, allowed) {
                message.push_str(&format!(" (did you mean `{near}`?)"));
            }
            cx.error(&key_path(path, &key), message);
        }
        Some(Obj {
            path: path.to_string(),
            map,
        })
    }

    /// A field that is present, even with a null value.
    fn get_raw(&self, key: &str) -> Option<(&'v Value, String)> {
        self.map.get(key).map(|v| (v, key_path(&self.path, key)))
    }

    /// An optional field: `None` when missing or null.
    fn get(&self, key: &str) -> Option<(&'v Value, String)> {
        self.get_raw(key).filter(|(v, _)| !matches!(v, Value::Null))
    }

    /// A required field: reported when missing or null.
    fn req(&self, cx: &mut Cx<'_>, key: &str, what: &str) -> Option<(&'v Value, String)> {
        match self.get_raw(key) {
            None => {
                cx.error(
                    &self.path,
                    format!("missing required field `{key}` ({what})"),
                );
                None
            }
            Some((Value::Null, p)) => {
                cx.error(&p, format!("`{key}` has no value ({what})"));
                None
            }
            Some(found) => Some(found),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers.

/// An optional field's outcome: absent (`None`) is fine, present but invalid (`Some(None)`,
/// already reported) fails the whole.
fn present<T>(field: Option<Option<T>>) -> Option<Option<T>> {
    match field {
        None => Some(None),
        Some(inner) => inner.map(Some),
    }
}

/// `">= 1"`, `"==0"`, `"< 0.01"`, `"<= 1e-3"` → operator and finite number.
fn parse_pass_if(s: &str) -> Result<(CmpOp, f64), String> {
    const OPS: [(&str, CmpOp); 6] = [
        ("<=", CmpOp::Le),
        (">=", CmpOp::Ge),
        ("==", CmpOp::Eq),
        ("!=", CmpOp::Ne),
        ("<", CmpOp::Lt),
        (">", CmpOp::Gt),
    ];
    let t = s.trim();
    let shape = "pass_if is an operator (<, <=, ==, !=, >=, >) then a number, e.g. \">= 1\", \
                 \"== 0\", \"< 0.01\"";
    let Some((op, rest)) = OPS
        .iter()
        .find_map(|(text, op)| t.strip_prefix(text).map(|rest| (*op, rest)))
    else {
        let hint = if t.starts_with("=>") {
            " (did you mean `>=`?)"
        } else if t.starts_with("=<") {
            " (did you mean `<=`?)"
        } else if t.starts_with('=') {
            " (equality is `==`)"
        } else {
            ""
        };
        return Err(format!("malformed pass_if {}: {shape}{hint}", quote(t)));
    };
    let num = rest.trim();
    match num.parse::<f64>() {
        Ok(n) if n.is_finite() => Ok((op, n)),
        Ok(_) => Err(format!(
            "malformed pass_if {}: the threshold must be a finite number",
            quote(t)
        )),
        Err(_) => Err(format!(
            "malformed pass_if {}: {} is not a number; {shape}",
            quote(t),
            quote(num)
        )),
    }
}

/// Why `${...}` references could not be expanded: malformed ones (sentences), unset variables.
struct Unexpanded {
    malformed: Vec<String>,
    unset: Vec<String>,
}

/// Replaces every `${NAME}` with the variable's value; all problems are returned at once.
fn expand_env(s: &str, resolve: &dyn Resolve) -> Result<String, Unexpanded> {
    let mut out = String::with_capacity(s.len());
    let mut problems = Vec::new();
    let mut unset = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            problems.push("unterminated `${`: write `${NAME}`".to_string());
            rest = "";
            break;
        };
        let name = &after[..end];
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            problems.push(format!(
                "{} is not a variable name (letters, digits and `_`, not starting with a digit)",
                quote(&format!("${{{name}}}"))
            ));
        } else {
            match resolve.env(name) {
                Some(value) => out.push_str(&value),
                None => unset.push(name.to_string()),
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    if problems.is_empty() && unset.is_empty() {
        Ok(out)
    } else {
        Err(Unexpanded {
            malformed: problems,
            unset,
        })
    }
}

/// `scheme://user:password@host`: a password written in the URL itself.
fn has_inline_password(url: &str) -> bool {
    let Some(scheme_end) = url.find("://") else {
        return false;
    };
    let rest = &url[scheme_end + 3..];
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    match authority.rfind('@') {
        Some(at) => authority[..at].contains(':'),
        None => false,
    }
}

/// What a value is, for "expected X, found Y" (strings are cut short).
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "nothing (null)".to_string(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(s) => format!("a string ({})", quote(s)),
        Value::Sequence(_) => "a list".to_string(),
        Value::Mapping(_) => "a mapping".to_string(),
        Value::Tagged(t) => format!("a tagged value ({})", t.tag),
    }
}

/// A value in backquotes, cut at 60 characters.
fn quote(s: &str) -> String {
    const MAX: usize = 60;
    if s.chars().count() > MAX {
        let cut: String = s.chars().take(MAX).collect();
        format!("`{cut}...`")
    } else {
        format!("`{s}`")
    }
}

/// The allowed name closest to `key` (within 2 edits), for "did you mean".
fn closest<'a>(key: &str, allowed: &[&'a str]) -> Option<&'a str> {
    let key = key.to_ascii_lowercase().replace('-', "_");
    allowed
        .iter()
        .map(|a| (edit_distance(&key, a), *a))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, a)| a)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 2 || a.len() > 64 {
        return usize::MAX;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{BridgeKey, PhaseKind};
    use proptest::prelude::*;

    /// Environment variables and files from maps.
    #[derive(Default)]
    struct TestResolve {
        env: HashMap<String, String>,
        files: HashMap<PathBuf, String>,
    }

    impl TestResolve {
        fn with_env(pairs: &[(&str, &str)]) -> Self {
            TestResolve {
                env: pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                files: HashMap::new(),
            }
        }
    }

    impl Resolve for TestResolve {
        fn env(&self, name: &str) -> Option<String> {
            self.env.get(name).cloned()
        }
        fn read_file(&self, path: &Path) -> Result<String, String> {
            self.files
                .get(path)
                .cloned()
                .ok_or_else(|| "No such file or directory (os error 2)".to_string())
        }
    }

    fn resolve() -> TestResolve {
        TestResolve::with_env(&[
            (
                "OLD_BROKER_URL",
                "amqp://orders:s3cr3t-old@rabbit.internal:5672/%2f",
            ),
            (
                "NEW_BROKER_URL",
                "nats://orders:s3cr3t-new@nats.internal:4222",
            ),
            ("QM_PROM_URL", "http://127.0.0.1:19090"),
            ("QM_SCRAPE_URL", "http://127.0.0.1:19464/metrics"),
            ("PASS", "s3cr3t-pass"),
        ])
    }

    /// The example of the format's description, with its `...` filled in.
    const FULL: &str = r#"version: 1
name: orders
slices: 128
auto_advance: true
brokers:
  old: { name: rabbitmq, kind: amqp, url: "${OLD_BROKER_URL}", queue: orders, dead_letter: orders.dlq }
  new: { name: nats, kind: nats, url: "${NEW_BROKER_URL}", stream: ORDERS }
retry: { max_backoff: 15m, visibility_timeout: 5m }
dedup: { window: 90d, max_redelivery_delay: 1h, max_consumer_delay: 10m, reprocess_margin: 30d }
sources:
  prom: { prometheus: "http://127.0.0.1:9090" }
  consumer: { scrape: "http://127.0.0.1:9464/metrics" }
routing: { file: "orders.routing.json" }
phases:
  consume_dual:
    min_duration: 24h
    exit:
      - name: new consumer connected
        source: consumer
        query: 'queue_consumer_connected{broker="new"}'
        pass_if: ">= 1"
  synthetic:
    min_duration: 1h
    exit:
      - name: probe latency
        source: prom
        compare: { new: 'p99_new', old: 'p99_old' }
        tolerance: { ratio: 1.2, absolute: 0.05 }
    guard:
      - { name: probe errors, source: prom, query: 'probe_errors', pass_if: "== 0" }
    on_breach: pause
  slices:
    steps: [6, 32, 64, 128]
    observe: 2h
    require_peak: { source: prom, query: 'sum(rate(consumer_messages_total[5m]))', at_least: 300 }
    require_deploy: { source: consumer, query: 'min(process_start_time_seconds{job="consumer"})' }
    exit:
      - name: error rate
        source: prom
        compare: { new: 'err_new', old: 'err_old' }
        tolerance: { ratio: 1.1 }
        min_samples: 10
    guard:
      - name: error rate breach
        source: prom
        query: 'err_new'
        pass_if: "< 0.05"
        for: 5m
    on_breach: rollback
  drain:
    quiet: auto
    exit:
      - { name: old queue empty, source: prom, query: 'sum(rabbitmq_queue_messages{queue="orders"})', pass_if: "== 0", for: quiet }
  disconnect: { retain: 7d, exit: [ { name: no producers, source: prom, query: 'producers_old', pass_if: "== 0" } ] }
"#;

    fn ok(yaml: &str) -> Compiled {
        match compile(yaml, Some(Path::new("/etc/qm")), &resolve()) {
            Ok(c) => c,
            Err(errors) => panic!("expected the plan to compile, got:\n{}", lines(&errors)),
        }
    }

    fn errors(yaml: &str) -> Vec<Diagnostic> {
        match compile(yaml, Some(Path::new("/etc/qm")), &resolve()) {
            Ok(c) => panic!(
                "expected errors, the plan compiled (warnings: {})",
                lines(&c.warnings)
            ),
            Err(errors) => errors,
        }
    }

    fn lines(ds: &[Diagnostic]) -> String {
        ds.iter().map(|d| format!("  {d}\n")).collect()
    }

    /// 1-based line of the first line of `yaml` containing `needle`.
    fn line_of(yaml: &str, needle: &str) -> Option<usize> {
        yaml.lines().position(|l| l.contains(needle)).map(|i| i + 1)
    }

    /// `from` replaced by `to`, exactly once.
    fn edit(from: &str, to: &str) -> String {
        assert_eq!(
            FULL.matches(from).count(),
            1,
            "`{from}` must occur once in FULL"
        );
        FULL.replacen(from, to, 1)
    }

    #[test]
    fn deferred_secrets_compile_unresolved_with_a_warning_and_required_ones_are_errors() {
        let yaml = edit("\"${NEW_BROKER_URL}\"", "\"file:/run/secrets/nats\"");
        let env = TestResolve::with_env(&[("PASS", "s3cr3t-pass")]);
        let dir = Some(Path::new("/etc/qm"));
        let strict = compile(&yaml, dir, &env);
        assert!(
            matches!(&strict, Err(e) if e.len() == 2),
            "required: every unresolved secret is an error: {strict:?}"
        );
        let c = match compile_with_secrets_mode(&yaml, dir, &env, SecretsMode::Deferred) {
            Ok(c) => c,
            Err(e) => panic!("deferred compiles:\n{}", lines(&e)),
        };
        let old = &c.plan.brokers.old.url;
        assert_eq!(
            old.value(),
            Err(&Unresolved::Env(vec!["OLD_BROKER_URL".into()]))
        );
        assert_eq!(old.redacted(), "${OLD_BROKER_URL}");
        assert!(matches!(
            c.plan.brokers.new.url.value(),
            Err(Unresolved::File { path, .. }) if path == Path::new("/run/secrets/nats")
        ));
        let warned: Vec<_> = c.warnings.iter().map(|w| w.path.as_str()).collect();
        for path in ["brokers.old.url", "brokers.new.url"] {
            assert!(warned.contains(&path), "{path} is warned: {warned:?}");
        }
        assert!(
            c.warnings
                .iter()
                .any(|w| w.message.contains("`OLD_BROKER_URL` is not set here")),
            "{}",
            lines(&c.warnings)
        );
        // A malformed reference is an error in either mode.
        let bad = edit("\"${NEW_BROKER_URL}\"", "\"${1NEW}\"");
        assert!(compile_with_secrets_mode(&bad, dir, &env, SecretsMode::Deferred).is_err());
    }

    #[test]
    fn the_full_example_compiles() {
        let c = ok(FULL);
        assert_eq!(c.warnings, vec![], "{}", lines(&c.warnings));
        let p = &c.plan;
        assert_eq!(p.name, "orders");
        assert_eq!(p.slices, 128);
        assert!(p.auto_advance);
        assert_eq!(p.steps(), &[6, 32, 64, 128]);
        assert_eq!(p.brokers.old.queue.as_deref(), Some("orders"));
        assert_eq!(p.brokers.old.dead_letter.as_deref(), Some("orders.dlq"));
        assert_eq!(p.brokers.new.stream.as_deref(), Some("ORDERS"));
        assert_eq!(p.brokers.old.url.reference, "${OLD_BROKER_URL}");
        assert_eq!(
            p.brokers.old.url.value().unwrap(),
            "amqp://orders:s3cr3t-old@rabbit.internal:5672/%2f"
        );
        assert_eq!(
            p.phases.iter().map(|ph| ph.kind).collect::<Vec<_>>(),
            PhaseKind::ALL.to_vec()
        );
        assert!(matches!(
            p.sources.get("consumer"),
            Some(Source::Scrape { .. })
        ));
        assert!(matches!(
            p.sources.get("prom"),
            Some(Source::Prometheus { .. })
        ));

        let slices = p.phase(PhaseKind::Slices).cloned();
        let slices = slices.unwrap_or_else(|| panic!("no slices phase"));
        assert_eq!(slices.min_duration, Duration::from_secs(2 * 3600));
        assert_eq!(slices.on_breach, BreachAction::Rollback);
        assert_eq!(
            slices.require_peak,
            Some(Requirement {
                source: "prom".into(),
                query: "sum(rate(consumer_messages_total[5m]))".into(),
                at_least: Some(300.0),
            })
        );
        assert_eq!(
            slices.require_deploy.as_ref().map(|r| r.at_least),
            Some(None)
        );
        assert_eq!(
            slices.exit[0],
            Gate {
                name: "error rate".into(),
                source: "prom".into(),
                check: Check::Compare {
                    new: "err_new".into(),
                    old: "err_old".into(),
                    ratio: 1.1,
                    absolute: 0.0,
                },
                hold_for: None,
                for_max_gap: None,
                min_samples: 10,
            }
        );
        assert_eq!(
            slices.guard[0].check,
            Check::Threshold {
                query: "err_new".into(),
                op: CmpOp::Lt,
                value: 0.05
            }
        );
        assert_eq!(slices.guard[0].hold_for, Some(Duration::from_secs(300)));
        assert_eq!(slices.guard[0].for_max_gap, Some(DEFAULT_FOR_MAX_GAP));
        assert_eq!(slices.guard[0].min_samples, 1);

        let synthetic = p.phase(PhaseKind::Synthetic).map(|ph| ph.on_breach);
        assert_eq!(synthetic, Some(BreachAction::Pause));
        let disconnect = p.phase(PhaseKind::Disconnect).map(|ph| ph.min_duration);
        assert_eq!(disconnect, Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(
            p.dedup.as_ref().map(Dedup::required_window),
            Some(Duration::from_secs(30 * 86_400 + 3_600 + 600))
        );
    }

    #[test]
    fn derived_quiet_is_max_backoff_plus_visibility_timeout() {
        let c = ok(FULL);
        assert_eq!(c.plan.quiet, Duration::from_secs(20 * 60));
        assert!(c.plan.quiet_auto);
        let drain = c.plan.phase(PhaseKind::Drain).map(|d| d.exit[0].hold_for);
        assert_eq!(drain, Some(Some(Duration::from_secs(20 * 60))));

        // Written: used as is, also by `for: quiet` outside drain.
        let c = ok(&edit("quiet: auto", "quiet: 45m").replace("for: 5m", "for: quiet"));
        assert_eq!(c.plan.quiet, Duration::from_secs(45 * 60));
        assert!(!c.plan.quiet_auto);
        let guard = c.plan.phase(PhaseKind::Slices).map(|s| s.guard[0].hold_for);
        assert_eq!(guard, Some(Some(Duration::from_secs(45 * 60))));

        // Missing `quiet` is auto.
        let c = ok(&edit("    quiet: auto\n", ""));
        assert_eq!(c.plan.quiet, Duration::from_secs(20 * 60));
        assert!(c.plan.quiet_auto);
    }

    #[test]
    fn defaults() {
        let c = ok(&edit("slices: 128\nauto_advance: true\n", "")
            .replace("    on_breach: rollback\n", "")
            .replace("    min_duration: 24h\n", "")
            .replace("        min_samples: 10\n", "")
            .replace("        tolerance: { ratio: 1.1 }\n", ""));
        let p = c.plan;
        assert_eq!(p.slices, DEFAULT_SLICES);
        assert!(p.auto_advance);
        let slices = p
            .phase(PhaseKind::Slices)
            .map(|s| (s.on_breach, s.exit[0].clone()));
        let Some((on_breach, gate)) = slices else {
            panic!("no slices phase")
        };
        assert_eq!(on_breach, BreachAction::Rollback);
        assert_eq!(gate.min_samples, 1);
        assert!(
            matches!(gate.check, Check::Compare { ratio, absolute, .. } if ratio == 1.0 && absolute == 0.0)
        );
        let cd = p.phase(PhaseKind::ConsumeDual).map(|ph| ph.min_duration);
        assert_eq!(cd, Some(Duration::ZERO));
    }

    struct Case {
        what: &'static str,
        from: &'static str,
        to: &'static str,
        path: &'static str,
        /// Text on the line the error must point at (`None`: no line).
        at: Option<&'static str>,
        message: &'static str,
    }

    const CASES: &[Case] = &[
        Case {
            what: "unknown field at top level",
            from: "auto_advance: true\n",
            to: "auto_advance: true\ncolour: blue\n",
            path: "colour",
            at: Some("colour: blue"),
            message: "unknown field `colour` in the plan; allowed: version, name, slices",
        },
        Case {
            what: "unknown field deep inside a block gate",
            from: "        for: 5m\n",
            to: "        for: 5m\n        pass-iff: \"< 1\"\n",
            path: "phases.slices.guard[0].pass-iff",
            at: Some("pass-iff"),
            message: "did you mean `pass_if`?",
        },
        Case {
            what: "unknown field inside a flow gate",
            from: "for: quiet }",
            to: "for: quiet, colour: red }",
            path: "phases.drain.exit[0].colour",
            at: Some("colour: red"),
            message: "unknown field `colour` in a gate; allowed: name, source, query, pass_if",
        },
        Case {
            what: "misplaced field gets a hint",
            from: "    observe: 2h\n",
            to: "    min_duration: 2h\n",
            path: "phases.slices.min_duration",
            at: Some("min_duration: 2h"),
            message: "`observe`",
        },
        Case {
            what: "bad duration",
            from: "observe: 2h",
            to: "observe: two hours",
            path: "phases.slices.observe",
            at: Some("observe: two hours"),
            message: "`two hours` is not a duration",
        },
        Case {
            what: "bare number duration",
            from: "min_duration: 1h",
            to: "min_duration: 3600",
            path: "phases.synthetic.min_duration",
            at: Some("min_duration: 3600"),
            message: "a bare number (3600) is not a duration: add a unit",
        },
        Case {
            what: "bare number duration in quotes",
            from: "max_backoff: 15m",
            to: "max_backoff: \"900\"",
            path: "retry.max_backoff",
            at: Some("max_backoff"),
            message: "add a unit",
        },
        Case {
            what: "steps not increasing",
            from: "[6, 32, 64, 128]",
            to: "[6, 64, 32, 128]",
            path: "phases.slices.steps[2]",
            at: Some("steps:"),
            message: "steps must be strictly increasing (32 after 64)",
        },
        Case {
            what: "steps not increasing, block list",
            from: "steps: [6, 32, 64, 128]",
            to: "steps:\n      - 6\n      - 64\n      - 64 # again\n      - 128",
            path: "phases.slices.steps[2]",
            at: Some("- 64 # again"),
            message: "(64 after 64)",
        },
        Case {
            what: "last step is not slices",
            from: "[6, 32, 64, 128]",
            to: "[6, 32, 64]",
            path: "phases.slices.steps[2]",
            at: Some("steps:"),
            message: "the last step must migrate every slice: 128, found 64",
        },
        Case {
            what: "step above slices",
            from: "[6, 32, 64, 128]",
            to: "[6, 32, 200]",
            path: "phases.slices.steps[2]",
            at: Some("steps:"),
            message: "step 200 is more than the plan's 128 slices",
        },
        Case {
            what: "step zero",
            from: "[6, 32, 64, 128]",
            to: "[0, 32, 64, 128]",
            path: "phases.slices.steps[0]",
            at: Some("steps:"),
            message: "expected a whole number from 1",
        },
        Case {
            what: "unknown source",
            from: "source: prom, query: 'producers_old'",
            to: "source: promethus, query: 'producers_old'",
            path: "phases.disconnect.exit[0].source",
            at: Some("promethus"),
            message: "unknown source `promethus`; declared sources: consumer, prom",
        },
        Case {
            what: "malformed pass_if",
            from: "pass_if: \">= 1\"",
            to: "pass_if: \"=> 1\"",
            path: "phases.consume_dual.exit[0].pass_if",
            at: Some("=> 1"),
            message: "malformed pass_if `=> 1`",
        },
        Case {
            what: "pass_if without a number",
            from: "pass_if: \"< 0.05\"",
            to: "pass_if: \"< five percent\"",
            path: "phases.slices.guard[0].pass_if",
            at: Some("five percent"),
            message: "`five percent` is not a number",
        },
        Case {
            what: "pass_if that is not a string",
            from: "pass_if: \">= 1\"",
            to: "pass_if: 1",
            path: "phases.consume_dual.exit[0].pass_if",
            at: Some("pass_if: 1"),
            message: "expected a comparison in quotes",
        },
        Case {
            what: "duplicate gate names across exit and guard",
            from: "name: error rate breach",
            to: "name: error rate # again",
            path: "phases.slices.guard[0].name",
            at: Some("# again"),
            message: "duplicate gate name `error rate` (first at phases.slices.exit[0], line 38)",
        },
        Case {
            what: "unresolved variable",
            from: "${NEW_BROKER_URL}",
            to: "${NEW_BROKR_URL}",
            path: "brokers.new.url",
            at: Some("NEW_BROKR_URL"),
            message: "environment variable `NEW_BROKR_URL` is not set",
        },
        Case {
            what: "unresolved variable embedded in a URL",
            from: "\"http://127.0.0.1:9090\"",
            to: "\"http://prom:${PROM_PASSWORD}@127.0.0.1:9090\"",
            path: "sources.prom.prometheus",
            at: Some("PROM_PASSWORD"),
            message: "environment variable `PROM_PASSWORD` is not set",
        },
        Case {
            what: "unreadable secret file",
            from: "\"${NEW_BROKER_URL}\"",
            to: "\"file:/run/secrets/nats\"",
            path: "brokers.new.url",
            at: Some("file:/run/secrets/nats"),
            message: "cannot read the secret file /run/secrets/nats: No such file",
        },
        Case {
            what: "source URL that is not http",
            from: "\"http://127.0.0.1:9464/metrics\"",
            to: "\"127.0.0.1:9464/metrics\"",
            path: "sources.consumer.scrape",
            at: Some("127.0.0.1:9464/metrics"),
            message: "must start with http:// or https://",
        },
        Case {
            what: "version 2",
            from: "version: 1",
            to: "version: 2",
            path: "version",
            at: Some("version: 2"),
            message: "unsupported plan version 2 (supported versions: 1)",
        },
        Case {
            what: "version missing",
            from: "version: 1\n",
            to: "",
            path: "",
            at: None,
            message: "missing required field `version`",
        },
        Case {
            what: "compare with ratio below 1",
            from: "tolerance: { ratio: 1.1 }",
            to: "tolerance: { ratio: 0.9 }",
            path: "phases.slices.exit[0].tolerance.ratio",
            at: Some("ratio: 0.9"),
            message: "ratio must be at least 1",
        },
        Case {
            what: "negative absolute tolerance",
            from: "tolerance: { ratio: 1.1 }",
            to: "tolerance: { ratio: 1.1, absolute: -1 }",
            path: "phases.slices.exit[0].tolerance.absolute",
            at: Some("absolute: -1"),
            message: "absolute must be at least 0",
        },
        Case {
            what: "tolerance without compare",
            from: "        for: 5m\n",
            to: "        for: 5m\n        tolerance: { ratio: 2 }\n",
            path: "phases.slices.guard[0].tolerance",
            at: Some("ratio: 2"),
            message: "`tolerance` only applies to `compare` gates",
        },
        Case {
            what: "both query and compare",
            from: "        tolerance: { ratio: 1.1 }\n",
            to: "        tolerance: { ratio: 1.1 }\n        query: 'err_new'\n",
            path: "phases.slices.exit[0]",
            at: Some("- name: error rate"),
            message: "either `query` + `pass_if` (a threshold) or `compare`",
        },
        Case {
            what: "neither query nor compare",
            from: "        compare: { new: 'err_new', old: 'err_old' }\n        tolerance: { ratio: 1.1 }\n",
            to: "",
            path: "phases.slices.exit[0]",
            at: Some("- name: error rate"),
            message: "a gate needs a condition",
        },
        Case {
            what: "query without pass_if",
            from: "        pass_if: \"< 0.05\"\n",
            to: "",
            path: "phases.slices.guard[0]",
            at: Some("- name: error rate breach"),
            message: "missing `pass_if`",
        },
        Case {
            what: "scrape query the evaluator cannot parse",
            from: "{broker=\"new\"}",
            to: "{broker=~\"n.*\"}",
            path: "phases.consume_dual.exit[0].query",
            at: Some("broker=~"),
            message: "not a query the scrape source `consumer` can answer",
        },
        Case {
            what: "scrape query of a requirement",
            from: "{job=\"consumer\"}",
            to: "{job=~\"consumer\"}",
            path: "phases.slices.require_deploy.query",
            at: Some("require_deploy"),
            message: "scrape source `consumer`",
        },
        Case {
            what: "dedup window too short",
            from: "window: 90d",
            to: "window: 7d",
            path: "dedup.window",
            at: Some("dedup:"),
            message: "window 7d is shorter than max_redelivery_delay 1h + max_consumer_delay 10m + reprocess_margin 30d = 30d 1h 10m: a message redelivered or reprocessed inside that span would be applied twice; raise window to at least 30d 1h 10m",
        },
        Case {
            what: "wrong type",
            from: "slices: 128",
            to: "slices: many",
            path: "slices",
            at: Some("slices: many"),
            message: "expected a whole number from 1 to 65536, found a string (`many`)",
        },
        Case {
            what: "wrong type for a section",
            from: "retry: { max_backoff: 15m, visibility_timeout: 5m }",
            to: "retry: 15m",
            path: "retry",
            at: Some("retry: 15m"),
            message: "expected the retry policy (a mapping with max_backoff, visibility_timeout), found a string",
        },
        Case {
            what: "gates not a list",
            from: "  disconnect: { retain: 7d, exit: [ { name: no producers, source: prom, query: 'producers_old', pass_if: \"== 0\" } ] }",
            to: "  disconnect: { retain: 7d, exit: { name: no producers } }",
            path: "phases.disconnect.exit",
            at: Some("disconnect:"),
            message: "expected a list of gates",
        },
        Case {
            what: "bad plan name",
            from: "name: orders\n",
            to: "name: Orders_EU\n",
            path: "name",
            at: Some("name: Orders_EU"),
            message: "a-z, 0-9 and `-`",
        },
        Case {
            what: "bad on_breach",
            from: "on_breach: pause",
            to: "on_breach: panic",
            path: "phases.synthetic.on_breach",
            at: Some("on_breach: panic"),
            message: "on_breach is one of rollback, pause, alert; got `panic`",
        },
        Case {
            what: "min_samples zero",
            from: "min_samples: 10",
            to: "min_samples: 0",
            path: "phases.slices.exit[0].min_samples",
            at: Some("min_samples: 0"),
            message: "expected a whole number from 1",
        },
        Case {
            what: "bad for",
            from: "for: 5m",
            to: "for: ever",
            path: "phases.slices.guard[0].for",
            at: Some("for: ever"),
            message: "`ever` is not a duration",
        },
        Case {
            what: "for_max_gap not a duration",
            from: "        for: 5m\n",
            to: "        for: 5m\n        for_max_gap: 2\n",
            path: "phases.slices.guard[0].for_max_gap",
            at: Some("for_max_gap: 2"),
            message: "a bare number (2) is not a duration",
        },
        Case {
            what: "for_max_gap zero",
            from: "        for: 5m\n",
            to: "        for: 5m\n        for_max_gap: 0s\n",
            path: "phases.slices.guard[0].for_max_gap",
            at: Some("for_max_gap: 0s"),
            message: "`for_max_gap` must be longer than 0s",
        },
        Case {
            what: "for_max_gap without for",
            from: "        min_samples: 10\n",
            to: "        min_samples: 10\n        for_max_gap: 10m\n",
            path: "phases.slices.exit[0].for_max_gap",
            at: Some("for_max_gap: 10m"),
            message: "this gate has no `for`",
        },
        Case {
            what: "unknown phase",
            from: "  drain:\n",
            to: "  sliced: {}\n  drain:\n",
            path: "phases.sliced",
            at: Some("sliced:"),
            message: "unknown field `sliced` in phases; allowed: consume_dual, synthetic, slices, drain, disconnect (did you mean `slices`?)",
        },
        Case {
            what: "missing required field of a gate",
            from: "      - name: probe latency\n",
            to: "      -\n",
            path: "phases.synthetic.exit[0]",
            at: Some("source: prom"),
            message: "missing required field `name`",
        },
        Case {
            what: "same name for both brokers",
            from: "name: nats,",
            to: "name: rabbitmq,",
            path: "brokers.new.name",
            at: Some("stream: ORDERS"),
            message: "both brokers are named `rabbitmq`",
        },
        Case {
            what: "a source that is both kinds",
            from: "prom: { prometheus: \"http://127.0.0.1:9090\" }",
            to: "prom: { prometheus: \"http://127.0.0.1:9090\", scrape: \"http://x/metrics\" }",
            path: "sources.prom",
            at: Some("prom: {"),
            message: "either `prometheus: URL` or `scrape: URL`, not both",
        },
        Case {
            what: "at_least not a number",
            from: "at_least: 300",
            to: "at_least: lots",
            path: "phases.slices.require_peak.at_least",
            at: Some("at_least: lots"),
            message: "expected a finite number",
        },
    ];

    #[test]
    fn each_error_kind_has_its_path_line_and_message() {
        for case in CASES {
            let yaml = edit(case.from, case.to);
            let errs = errors(&yaml);
            assert_eq!(
                errs.len(),
                1,
                "{}: expected exactly one error, got:\n{}",
                case.what,
                lines(&errs)
            );
            let e = &errs[0];
            assert_eq!(e.path, case.path, "{}: path ({e})", case.what);
            let want_line = case.at.and_then(|needle| line_of(&yaml, needle));
            assert!(
                case.at.is_none() || want_line.is_some(),
                "{}: needle not found",
                case.what
            );
            assert_eq!(e.line, want_line, "{}: line ({e})", case.what);
            assert!(
                e.message.contains(case.message),
                "{}: message\n  got:  {}\n  want: ...{}...",
                case.what,
                e.message,
                case.message
            );
            for secret in ["s3cr3t", "hunter2"] {
                assert!(!e.message.contains(secret), "{}: leaks a secret", case.what);
            }
        }
    }

    #[test]
    fn duplicate_names_are_reported_even_when_a_gate_is_broken() {
        let yaml =
            edit("name: error rate breach", "name: error rate").replacen("for: 5m", "for: 5", 1);
        let errs = errors(&yaml);
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            vec!["phases.slices.guard[0].name", "phases.slices.guard[0].for"],
            "{}",
            lines(&errs)
        );
    }

    /// `for_max_gap` beside `for`, whatever `for` is (`quiet` too); one given without `for` is an
    /// error at its path, reported with the plan's other errors.
    #[test]
    fn for_max_gap_goes_with_for_and_defaults_to_five_minutes() {
        let c = ok(&edit(
            "        for: 5m\n",
            "        for: 5m\n        for_max_gap: 90s\n",
        )
        .replace("for: quiet }", "for: quiet, for_max_gap: 1h }"));
        let guard = c
            .plan
            .phase(PhaseKind::Slices)
            .map(|s| s.guard[0].for_max_gap);
        assert_eq!(guard, Some(Some(Duration::from_secs(90))));
        let drain = c
            .plan
            .phase(PhaseKind::Drain)
            .map(|d| d.exit[0].for_max_gap);
        assert_eq!(drain, Some(Some(Duration::from_secs(3600))));
        assert_eq!(DEFAULT_FOR_MAX_GAP, Duration::from_secs(300));

        let yaml = edit("        min_samples: 10\n", "        for_max_gap: 10m\n")
            .replace("for: quiet }", "for: quiet, for_max_gap: 0ms }")
            .replacen("observe: 2h", "observe: soon", 1);
        let errs = errors(&yaml);
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "phases.slices.observe",
                "phases.slices.exit[0].for_max_gap",
                "phases.drain.exit[0].for_max_gap",
            ],
            "{}",
            lines(&errs)
        );
    }

    #[test]
    fn missing_slices_phase() {
        let start = FULL.find("  slices:\n").unwrap_or(0);
        let end = FULL.find("  drain:\n").unwrap_or(0);
        let yaml = format!("{}{}", &FULL[..start], &FULL[end..]);
        let errs = errors(&yaml);
        assert_eq!(errs.len(), 1, "{}", lines(&errs));
        assert_eq!(errs[0].path, "phases");
        assert_eq!(errs[0].line, line_of(&yaml, "phases:"));
        assert!(errs[0].message.contains("missing required phase `slices`"));
    }

    #[test]
    fn display_of_a_diagnostic() {
        let d = Diagnostic {
            path: "phases.slices.steps[2]".into(),
            line: Some(12),
            message: "steps must be strictly increasing (32 after 64)".into(),
        };
        assert_eq!(
            d.to_string(),
            "line 12: phases.slices.steps[2]: steps must be strictly increasing (32 after 64)"
        );
        let d = Diagnostic {
            path: String::new(),
            line: None,
            message: "missing required field `name`".into(),
        };
        assert_eq!(d.to_string(), "missing required field `name`");
    }

    #[test]
    fn every_error_at_once() {
        let yaml = FULL
            .replacen("version: 1", "version: 2", 1)
            .replacen("[6, 32, 64, 128]", "[6, 64, 32, 128]", 1)
            .replacen(
                "source: prom, query: 'producers_old'",
                "source: promethus, query: 'producers_old'",
                1,
            )
            .replacen("observe: 2h", "observe: 2 hours-ish", 1)
            .replacen(
                "auto_advance: true\n",
                "auto_advance: true\ncolour: blue\n",
                1,
            );
        let errs = errors(&yaml);
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "version",
                "colour",
                "phases.slices.steps[2]",
                "phases.slices.observe",
                "phases.disconnect.exit[0].source",
            ],
            "{}",
            lines(&errs)
        );
        // Ordered by line.
        let ls: Vec<usize> = errs.iter().filter_map(|e| e.line).collect();
        assert_eq!(ls.len(), 5);
        assert!(ls.windows(2).all(|w| w[0] <= w[1]), "{ls:?}");
    }

    #[test]
    fn warnings_are_apart_from_errors() {
        // Everything warned about, nothing wrong.
        let yaml = FULL
            .replacen("dedup: { window: 90d, max_redelivery_delay: 1h, max_consumer_delay: 10m, reprocess_margin: 30d }\n", "", 1)
            .replacen(
                "  consume_dual:\n    min_duration: 24h\n    exit:\n      - name: new consumer connected\n        source: consumer\n        query: 'queue_consumer_connected{broker=\"new\"}'\n        pass_if: \">= 1\"\n",
                "",
                1,
            )
            .replacen(
                "    guard:\n      - name: error rate breach\n        source: prom\n        query: 'err_new'\n        pass_if: \"< 0.05\"\n        for: 5m\n",
                "",
                1,
            )
            .replacen(", for: quiet }", " }", 1)
            .replacen(
                "  disconnect: { retain: 7d, exit: [ { name: no producers, source: prom, query: 'producers_old', pass_if: \"== 0\" } ] }",
                "  disconnect: { retain: 7d }",
                1,
            );
        let c = ok(&yaml);
        let got: Vec<(&str, &str)> = c
            .warnings
            .iter()
            .map(|w| (w.path.as_str(), w.message.as_str()))
            .collect();
        let expect: &[(&str, &str)] = &[
            ("phases", "no `consume_dual` phase"),
            ("phases.slices", "no guard gates"),
            ("phases.drain", "no exit gate uses `for: quiet` (20m)"),
            (
                "phases.disconnect",
                "no exit gates: this phase advances on time alone (retain 7d)",
            ),
            ("dedup", "no `dedup` section"),
        ];
        assert_eq!(got.len(), expect.len(), "{}", lines(&c.warnings));
        for (path, msg) in expect {
            assert!(
                got.iter().any(|(p, m)| p == path && m.contains(msg)),
                "missing warning {path}: {msg}\n{}",
                lines(&c.warnings)
            );
        }
        // Warnings carry lines too.
        let drain = c.warnings.iter().find(|w| w.path == "phases.drain");
        assert_eq!(drain.and_then(|w| w.line), line_of(&yaml, "  drain:"));
        // An error elsewhere: only errors come back.
        let errs = errors(&yaml.replacen("version: 1", "version: 3", 1));
        assert_eq!(errs.len(), 1, "{}", lines(&errs));
    }

    #[test]
    fn bridge_and_probes_compile() {
        let yaml = edit(
            "  synthetic:\n    min_duration: 1h\n",
            "  synthetic:\n    min_duration: 1h\n    probes: { rate: 5, count: 100 }\n",
        ) + "bridge: { ingress: orders.ingress, key: { json: /order/id } }\n";
        let c = ok(&yaml);
        let bridge = c.plan.bridge.clone().expect("a bridge");
        assert_eq!(bridge.ingress, "orders.ingress");
        assert_eq!(bridge.key, BridgeKey::Json("/order/id".into()));
        assert_eq!(bridge.prefetch, 256);
        let probes = c
            .plan
            .phase(PhaseKind::Synthetic)
            .and_then(|p| p.probes.clone());
        assert_eq!(
            probes,
            Some(crate::plan::Probes {
                rate: 5.0,
                count: 100,
                repeat: 5
            })
        );
        assert_eq!(c.plan.brokers.old.destination(), Some("orders"));
        assert_eq!(c.plan.brokers.new.destination(), Some("ORDERS"));
    }

    /// Regression: a plan with a bridge and no dead-letter queue checked clean, though the
    /// bridge then cannot park a message the new broker refuses and stalls on it.
    #[test]
    fn a_bridge_without_a_dead_letter_queue_is_a_warning() {
        let with =
            format!("{FULL}bridge: {{ ingress: orders.ingress, key: {{ json: orderId }} }}\n");
        assert!(
            !lines(&ok(&with).warnings).contains("dead_letter"),
            "{}",
            lines(&ok(&with).warnings)
        );
        let without = with.replace(", dead_letter: orders.dlq", "");
        assert_ne!(without, with, "the fixture names a dead-letter queue");
        let c = ok(&without);
        let w = c.warnings.iter().find(|w| w.path == "bridge");
        assert!(
            w.is_some_and(|w| w.message.contains("brokers.old.dead_letter")
                && w.message.contains("max_payload")),
            "{}",
            lines(&c.warnings)
        );
        assert!(c.plan.bridge.is_some(), "a warning, not an error");
    }

    #[test]
    fn a_bridge_reading_the_consumers_queue_is_refused() {
        let yaml =
            format!("{FULL}bridge: {{ ingress: orders, key: {{ header: x-id, json: id }} }}\n");
        let errs = errors(&yaml);
        let text = lines(&errs);
        assert!(
            text.contains("bridge.ingress") && text.contains("read its own output"),
            "{text}"
        );
        assert!(
            text.contains("bridge.key") && text.contains("not both"),
            "{text}"
        );
        let errs = errors(&format!(
            "{FULL}bridge: {{ ingress: in, key: {{}}, prefetch: 0 }}\n"
        ));
        let text = lines(&errs);
        assert!(text.contains("missing the key's place"), "{text}");
        assert!(text.contains("bridge.prefetch"), "{text}");
        let errs = errors(&format!(
            "{FULL}bridge: {{ ingress: in, key: {{ json: a/b }} }}\n"
        ));
        assert!(lines(&errs).contains("JSON pointer"), "{}", lines(&errs));
    }

    #[test]
    fn probes_are_checked_and_belong_to_synthetic() {
        let bad = edit(
            "  synthetic:\n    min_duration: 1h\n",
            "  synthetic:\n    min_duration: 1h\n    probes: { rate: 0, count: 0, repeat: 1 }\n",
        );
        let text = lines(&errors(&bad));
        for path in [
            "phases.synthetic.probes.rate",
            "phases.synthetic.probes.count",
            "phases.synthetic.probes.repeat",
        ] {
            assert!(text.contains(path), "missing {path}\n{text}");
        }
        let misplaced = edit(
            "  drain:\n    quiet: auto\n",
            "  drain:\n    quiet: auto\n    probes: { rate: 1, count: 1 }\n",
        );
        let text = lines(&errors(&misplaced));
        assert!(
            text.contains("`probes` belongs to the synthetic phase"),
            "{text}"
        );
    }

    /// Regression: `probes.rate: 1e-20` passed `plan check`, then the daemon panicked in
    /// `Duration::from_secs_f64(1 / rate)`.
    #[test]
    fn a_probe_rate_too_small_to_pace_is_an_error_with_its_line() {
        for rate in ["1e-20", "0.0001", "5e-324"] {
            let bad = edit(
                "  synthetic:\n    min_duration: 1h\n",
                &format!(
                    "  synthetic:\n    min_duration: 1h\n    probes: {{ rate: {rate}, count: 5 }}\n"
                ),
            );
            let errs = errors(&bad);
            let e = errs
                .iter()
                .find(|d| d.path == "phases.synthetic.probes.rate")
                .unwrap_or_else(|| panic!("{rate}: {}", lines(&errs)));
            assert_eq!(e.line, line_of(&bad, "probes:"), "{e}");
            assert!(e.message.contains("0.001"), "{e}");
        }
        let fine = edit(
            "  synthetic:\n    min_duration: 1h\n",
            "  synthetic:\n    min_duration: 1h\n    probes: { rate: 0.001, count: 5 }\n",
        );
        assert!(ok(&fine).plan.phases.iter().any(|p| p.probes.is_some()));
    }

    /// Durations are bounded (10 years), so that no sum or product of them overflows later.
    #[test]
    fn a_duration_past_ten_years_is_an_error_with_its_line() {
        let bad = edit("min_duration: 24h", "min_duration: 500000000y");
        let errs = errors(&bad);
        let e = errs
            .iter()
            .find(|d| d.path.ends_with("min_duration"))
            .unwrap_or_else(|| panic!("{}", lines(&errs)));
        assert_eq!(e.line, line_of(&bad, "500000000y"));
        assert!(e.message.contains("10 years"), "{e}");
        ok(&edit("min_duration: 24h", "min_duration: 3650d"));
    }

    #[test]
    fn other_warnings() {
        let c = ok(&edit("kind: nats", "kind: kafka")
            .replacen("\"http://127.0.0.1:9090\"", "\"http://admin:hunter2@127.0.0.1:9090\"", 1)
            .replacen("  drain:\n    quiet: auto\n    exit:\n      - { name: old queue empty, source: prom, query: 'sum(rabbitmq_queue_messages{queue=\"orders\"})', pass_if: \"== 0\", for: quiet }\n", "", 1));
        let paths: Vec<&str> = c.warnings.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(
            paths,
            vec!["brokers.new.kind", "sources.prom.prometheus", "phases"],
            "{}",
            lines(&c.warnings)
        );
        assert!(c.warnings[0].message.contains("`kafka` has no adapter"));
        assert!(
            c.warnings[1]
                .message
                .contains("password is written in the plan")
        );
        assert!(c.warnings[2].message.contains("no `drain` phase"));
        assert!(c.warnings.iter().all(|w| !w.message.contains("hunter2")));
        // The inline password is masked wherever the plan is shown.
        let json = serde_json::to_string(&c.plan).unwrap_or_default();
        assert!(json.contains("http://***@127.0.0.1:9090"), "{json}");
        assert!(!json.contains("hunter2"));
    }

    #[test]
    fn secrets_resolve_and_never_show() {
        let mut r = resolve();
        r.files.insert(
            PathBuf::from("/etc/qm/secrets/nats-url"),
            "  nats://orders:s3cr3t-file@nats.internal:4222\n".into(),
        );
        let yaml = edit("\"${NEW_BROKER_URL}\"", "\"file:secrets/nats-url\"").replacen(
            "\"http://127.0.0.1:9090\"",
            "\"http://prom:${PASS}@127.0.0.1:9090\"",
            1,
        );
        let c = compile(&yaml, Some(Path::new("/etc/qm")), &r)
            .unwrap_or_else(|e| panic!("{}", lines(&e)));
        let p = &c.plan;
        assert_eq!(p.brokers.new.url.reference, "file:secrets/nats-url");
        assert_eq!(
            p.brokers.new.url.value().unwrap(),
            "nats://orders:s3cr3t-file@nats.internal:4222"
        );
        let Some(Source::Prometheus { url }) = p.sources.get("prom") else {
            panic!("prom source")
        };
        assert_eq!(url.reference, "http://prom:${PASS}@127.0.0.1:9090");
        assert_eq!(
            url.value().unwrap(),
            "http://prom:s3cr3t-pass@127.0.0.1:9090"
        );

        let debug = format!("{c:?}");
        let json = serde_json::to_string(p).unwrap_or_default();
        assert!(json.contains("${OLD_BROKER_URL}") && json.contains("file:secrets/nats-url"));
        for shown in [&debug, &json] {
            assert!(!shown.contains("s3cr3t"), "secret shown: {shown}");
        }
    }

    #[test]
    fn serialized_plan_reads_like_the_yaml() {
        let c = ok(FULL);
        let json = serde_json::to_value(&c.plan).unwrap_or_default();
        assert_eq!(json["quiet"], "20m");
        assert_eq!(json["retry"]["max_backoff"], "15m");
        assert_eq!(json["dedup"]["window"], "90d");
        assert_eq!(json["phases"][2]["kind"], "slices");
        assert_eq!(json["phases"][2]["guard"][0]["hold_for"], "5m");
        assert_eq!(json["phases"][2]["guard"][0]["for_max_gap"], "5m");
        assert!(json["phases"][2]["exit"][0].get("for_max_gap").is_none());
        assert_eq!(
            json["phases"][2]["guard"][0]["check"]["threshold"]["op"],
            "<"
        );
        assert_eq!(
            json["sources"]["consumer"]["scrape"]["url"],
            "http://127.0.0.1:9464/metrics"
        );
    }

    #[test]
    fn routing_file_is_relative_to_the_plan() {
        let file = |dir: Option<&Path>, yaml: &str| {
            compile(yaml, dir, &resolve())
                .map(|c| c.plan.routing.file)
                .unwrap_or_else(|e| panic!("{}", lines(&e)))
        };
        assert_eq!(
            file(Some(Path::new("/etc/qm")), FULL),
            Some(PathBuf::from("/etc/qm/orders.routing.json"))
        );
        assert_eq!(file(None, FULL), Some(PathBuf::from("orders.routing.json")));
        let abs = FULL.replacen("\"orders.routing.json\"", "/var/lib/qm/orders.json", 1);
        assert_eq!(
            file(Some(Path::new("/etc/qm")), &abs),
            Some(PathBuf::from("/var/lib/qm/orders.json"))
        );
        let none = FULL.replacen("routing: { file: \"orders.routing.json\" }\n", "", 1);
        assert_eq!(file(Some(Path::new("/etc/qm")), &none), None);
    }

    #[test]
    fn pass_if_forms() {
        let cases: &[(&str, Option<(CmpOp, f64)>)] = &[
            (">=1", Some((CmpOp::Ge, 1.0))),
            (">= 1", Some((CmpOp::Ge, 1.0))),
            ("== 0", Some((CmpOp::Eq, 0.0))),
            ("!= 0", Some((CmpOp::Ne, 0.0))),
            ("< 0.01", Some((CmpOp::Lt, 0.01))),
            ("<= 1e-3", Some((CmpOp::Le, 0.001))),
            ("  >  -2.5 ", Some((CmpOp::Gt, -2.5))),
            ("= 1", None),
            ("=> 1", None),
            (">= ", None),
            (">= NaN", None),
            ("< inf", None),
            ("1", None),
            ("", None),
            ("≥ 1", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_pass_if(text).ok(), *want, "{text:?}");
        }
    }

    #[test]
    fn yaml_syntax_error_has_its_line() {
        let yaml = "version: 1\nname: orders\nbrokers: { old: [1, 2 }\n";
        let errs = errors(yaml);
        assert_eq!(errs.len(), 1, "{}", lines(&errs));
        assert_eq!(errs[0].line, Some(3), "{}", errs[0]);
        assert!(errs[0].message.starts_with("not valid YAML"));

        let errs = errors(&format!("{FULL}name: again\n"));
        assert_eq!(errs.len(), 1, "{}", lines(&errs));
        assert!(errs[0].message.contains("duplicate"), "{}", errs[0]);
    }

    #[test]
    fn not_a_plan_at_all() {
        for (yaml, want) in [
            ("", "the plan is empty"),
            ("# only a comment\n", "the plan is empty"),
            ("- 1\n- 2\n", "expected the plan (a mapping"),
            ("just words", "found a string (`just words`)"),
        ] {
            let errs = errors(yaml);
            assert_eq!(errs.len(), 1, "{yaml:?}: {}", lines(&errs));
            assert!(errs[0].message.contains(want), "{yaml:?}: {}", errs[0]);
        }
        // The minimum that is missing is all reported.
        let errs = errors("version: 1\n");
        let msgs: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
        for field in ["name", "brokers", "retry", "sources", "phases"] {
            let want = format!("missing required field `{field}`");
            assert!(msgs.iter().any(|m| m.starts_with(&want)), "{msgs:?}");
        }
    }

    #[test]
    fn merge_keys_and_null_phases() {
        let yaml = FULL
            .replacen(
                "      - { name: probe errors, source: prom, query: 'probe_errors', pass_if: \"== 0\" }",
                "      - &zero { name: probe errors, source: prom, query: 'probe_errors', pass_if: \"== 0\" }",
                1,
            )
            .replacen(
                "  disconnect: { retain: 7d, exit: [ { name: no producers, source: prom, query: 'producers_old', pass_if: \"== 0\" } ] }",
                "  disconnect:\n    exit:\n      - { <<: *zero, name: no producers }",
                1,
            );
        let c = ok(&yaml);
        let d = c
            .plan
            .phase(PhaseKind::Disconnect)
            .map(|p| p.exit[0].clone());
        assert_eq!(
            d.map(|g| (g.name, g.source)),
            Some(("no producers".into(), "prom".into()))
        );

        let c = ok(&edit(
            "  disconnect: { retain: 7d, exit: [ { name: no producers, source: prom, query: 'producers_old', pass_if: \"== 0\" } ] }",
            "  disconnect:",
        ));
        let d = c
            .plan
            .phase(PhaseKind::Disconnect)
            .map(|p| (p.min_duration, p.exit.len()));
        assert_eq!(d, Some((Duration::ZERO, 0)));
    }

    #[test]
    fn shipped_plans_compile() {
        let dir = Path::new("/srv/plans");
        for (file, yaml) in [
            ("orders.yaml", include_str!("../../plans/orders.yaml")),
            ("local.yaml", include_str!("../../plans/local.yaml")),
        ] {
            let c = compile(yaml, Some(dir), &resolve())
                .unwrap_or_else(|e| panic!("{file}:\n{}", lines(&e)));
            assert_eq!(c.warnings, vec![], "{file}:\n{}", lines(&c.warnings));
            assert_eq!(c.plan.phases.len(), 5, "{file}");
        }

        let orders = compile(
            include_str!("../../plans/orders.yaml"),
            Some(dir),
            &resolve(),
        )
        .unwrap_or_else(|e| panic!("{}", lines(&e)));
        assert_eq!(orders.plan.name, "orders");
        assert_eq!(orders.plan.quiet, Duration::from_secs(20 * 60));
        assert_eq!(orders.plan.steps(), &[6, 32, 64, 128]);

        let local = compile(
            include_str!("../../plans/local.yaml"),
            Some(dir),
            &resolve(),
        )
        .unwrap_or_else(|e| panic!("{}", lines(&e)));
        let p = local.plan;
        assert_eq!(p.name, "local");
        assert_eq!(p.slices, 8);
        assert_eq!(p.steps(), &[1, 4, 8]);
        assert_eq!(p.quiet, Duration::from_secs(3 * 60));
        assert_eq!(p.routing.file, Some(dir.join("local.routing.json")));
        let Some(Source::Prometheus { url }) = p.sources.get("prom") else {
            panic!("prom")
        };
        assert_eq!(url.value().unwrap(), "http://127.0.0.1:19090");
        let Some(Source::Scrape { url }) = p.sources.get("app") else {
            panic!("app")
        };
        assert_eq!(url.value().unwrap(), "http://127.0.0.1:19464/metrics");
        let drain = p.phase(PhaseKind::Drain).map(|d| d.exit[0].clone());
        assert_eq!(
            drain.map(|g| (g.source, g.check, g.hold_for)),
            Some((
                "app".to_string(),
                Check::Threshold {
                    query: "app_old_depth".into(),
                    op: CmpOp::Eq,
                    value: 0.0
                },
                Some(Duration::from_secs(180))
            ))
        );
        let slices = p
            .phase(PhaseKind::Slices)
            .map(|s| (s.guard.len(), s.on_breach));
        assert_eq!(slices, Some((1, BreachAction::Rollback)));
    }

    /// Line-level edits of the valid plan.
    fn mutate(base: &str, edits: &[(usize, u8, String)]) -> String {
        let mut lines: Vec<String> = base.lines().map(str::to_string).collect();
        for (at, op, text) in edits {
            if lines.is_empty() {
                lines.push(text.clone());
                continue;
            }
            let i = at % lines.len();
            match op % 6 {
                0 => {
                    lines.remove(i);
                }
                1 => {
                    let l = lines[i].clone();
                    lines.insert(i, l);
                }
                2 => lines.insert(i, text.clone()),
                3 => {
                    // Replace what follows the first `:` (a value).
                    let l = &lines[i];
                    if let Some(c) = l.find(':') {
                        lines[i] = format!("{}: {text}", &l[..c]);
                    }
                }
                4 => {
                    // Cut the line short.
                    let l = &lines[i];
                    let cut = l
                        .char_indices()
                        .nth(at % (l.len() + 1))
                        .map_or(l.len(), |(c, _)| c);
                    lines[i] = l[..cut].to_string();
                }
                _ => lines[i] = format!("  {}", lines[i]),
            }
        }
        lines.join("\n")
    }

    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("~".to_string()),
            Just("[]".to_string()),
            Just("{}".to_string()),
            Just("- x".to_string()),
            Just("quiet".to_string()),
            Just("\"${UNSET}\"".to_string()),
            Just("\"${\"".to_string()),
            Just("\"file:\"".to_string()),
            Just("18446744073709551615".to_string()),
            Just("99999999999999s".to_string()),
            Just("-1".to_string()),
            Just("1e999".to_string()),
            Just(".nan".to_string()),
            Just("&a [*a]".to_string()),
            Just("*nowhere".to_string()),
            Just("!tag x".to_string()),
            Just("<<: {}".to_string()),
            Just("? [a]\n: b".to_string()),
            "[ -~]{0,20}",
            "\\PC{0,12}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,300}") {
            let _ = compile(&s, Some(Path::new("/x")), &resolve());
        }

        #[test]
        fn yaml_like_text_never_panics(s in "[a-z_:{}\\[\\],\\- \n\"'#&*!|>~0-9.$]{0,300}") {
            let _ = compile(&s, None, &resolve());
        }

        #[test]
        fn mutated_plans_never_panic(
            edits in proptest::collection::vec((0usize..200, 0u8..6, fragment()), 1..6)
        ) {
            let yaml = mutate(FULL, &edits);
            match compile(&yaml, Some(Path::new("/x")), &resolve()) {
                Ok(c) => {
                    // A plan that compiles keeps its invariants.
                    let steps = c.plan.steps();
                    prop_assert!(!steps.is_empty());
                    prop_assert!(steps.windows(2).all(|w| w[0] < w[1]));
                    prop_assert_eq!(steps.last().copied(), Some(c.plan.slices));
                }
                Err(errs) => {
                    prop_assert!(!errs.is_empty());
                    for e in &errs {
                        prop_assert!(!e.message.contains("s3cr3t"));
                    }
                }
            }
        }
    }

    #[test]
    fn etcd_routing_and_notify_webhooks() {
        let yaml = FULL.replace(
            r#"routing: { file: "orders.routing.json" }"#,
            r#"routing:
  file: "orders.routing.json"
  etcd: { endpoint: "http://127.0.0.1:2379", key: /queue-migrate/orders/routing }
notify:
  hold_after: 30m
  webhooks:
    - { url: "https://hooks.example/T1", token: "${PASS}" }
    - { url: "http://127.0.0.1:9999/hook" }"#,
        );
        let c = ok(&yaml);
        let etcd = c.plan.routing.etcd.as_ref().expect("etcd");
        assert_eq!(etcd.key, "/queue-migrate/orders/routing");
        assert_eq!(etcd.endpoint.value().unwrap(), "http://127.0.0.1:2379");
        assert_eq!(c.plan.notify.webhooks.len(), 2);
        assert_eq!(c.plan.notify.hold_after, Some(Duration::from_secs(1800)));
        let token = c.plan.notify.webhooks[0].token.as_ref().expect("token");
        assert_eq!(token.value().unwrap(), "s3cr3t-pass");
        assert!(!format!("{:?}", c.plan).contains("s3cr3t-pass"));

        let bad = FULL.replace(
            r#"routing: { file: "orders.routing.json" }"#,
            r#"routing: { etcd: { endpoint: "127.0.0.1:2379" } }
notify: { webhooks: [ { url: "ftp://x", secret: y } ], hold_after: soon }"#,
        );
        let errs = lines(&errors(&bad));
        for needle in [
            "routing.etcd.endpoint",
            "routing.etcd: missing required field `key`",
            "notify.webhooks[0].url",
            "notify.webhooks[0].secret",
            "notify.hold_after",
        ] {
            assert!(errs.contains(needle), "missing {needle} in:\n{errs}");
        }
    }

    #[test]
    fn window_mode_warns_instead_of_failing_when_the_margin_exceeds_it() {
        let yaml = FULL.replace(
            "dedup: { window: 90d,",
            "dedup: { mode: window, window: 10m,",
        );
        let c = ok(&yaml);
        assert_eq!(
            c.plan.dedup.as_ref().map(|d| d.mode),
            Some(DedupMode::Window)
        );
        let w = lines(&c.warnings);
        assert!(
            w.contains("dedup.window") && w.contains("reprocess_margin"),
            "{w}"
        );
        // The durable mode keeps the hard error.
        let errs = lines(&errors(
            &FULL.replace("dedup: { window: 90d,", "dedup: { window: 10m,"),
        ));
        assert!(errs.contains("shorter than"), "{errs}");
        let bad = lines(&errors(&FULL.replace(
            "dedup: { window: 90d,",
            "dedup: { mode: cache, window: 90d,",
        )));
        assert!(bad.contains("unknown dedup mode"), "{bad}");
    }

    #[test]
    fn a_dead_letter_export_is_a_source_for_the_drain_gate() {
        let yaml = FULL
            .replace(
                "  consumer: { scrape: \"http://127.0.0.1:9464/metrics\" }",
                "  consumer: { scrape: \"http://127.0.0.1:9464/metrics\" }\n  old_dlq: { dead_letters: orders.dlq.ndjson }",
            )
            .replace(
                "      - { name: old queue empty,",
                "      - { name: old dead letters handled, source: old_dlq, query: open_groups, pass_if: \"== 0\" }\n      - { name: old queue empty,",
            );
        let c = ok(&yaml);
        assert_eq!(
            c.plan.sources.get("old_dlq"),
            Some(&Source::DeadLetters {
                export: PathBuf::from("/etc/qm/orders.dlq.ndjson")
            })
        );
        let bad = yaml.replace("query: open_groups", "query: sum(open)");
        let errs = lines(&errors(&bad));
        assert!(errs.contains("answers open_groups or entries"), "{errs}");
        // Regression: a compare gate on it compiled silently, then held for ever (one number,
        // not a pair); and so did a gate named as a requirement, whose memory it shared.
        let compare = yaml.replace(
            "query: open_groups, pass_if: \"== 0\"",
            "compare: { new: entries, old: entries }",
        );
        assert_ne!(compare, yaml);
        let warned = lines(&ok(&compare).warnings);
        assert!(warned.contains("answers one number"), "{warned}");
        let reserved = yaml.replace("name: old dead letters handled", "name: require_peak");
        assert_ne!(reserved, yaml);
        let warned = lines(&ok(&reserved).warnings);
        assert!(warned.contains("share a \"held since\" mark"), "{warned}");
    }
}
