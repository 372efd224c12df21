//! The options every subcommand accepts, and the parsers options share.

use std::time::Duration;

use clap::Args;

/// The help heading of [`Global`]'s options.
const GLOBAL: &str = "Global options";

/// Options every subcommand accepts, before or after its name. Shown apart, under "Global
/// options", after the subcommand's own: not every subcommand uses them (`slice` and `demo` use
/// none), and each says which do.
#[derive(Debug, Args)]
pub struct Global {
    /// The state store: a SQLite file path, sqlite://PATH, or postgres://USER@HOST/DB (the
    /// migrations, their journal, DLQ decisions).
    #[arg(
        long,
        global = true,
        env = "MIGRATE_STATE",
        default_value = "./queue-migrate.db",
        help_heading = GLOBAL
    )]
    pub state: String,
    /// Who acts, for the journal of a command that changes a migration (default: $USER).
    #[arg(long, global = true, env = "MIGRATE_ACTOR", help_heading = GLOBAL)]
    pub actor: Option<String>,
    /// How long to wait for an indicator source before its gate holds (status, advance, run),
    /// or for the etcd gateway a routing document is written to (above 0).
    #[arg(
        long,
        global = true,
        help_heading = GLOBAL,
        default_value = "10s",
        value_parser = nonzero_duration("a zero timeout fails every indicator request, so every gate would hold")
    )]
    pub source_timeout: Duration,
    /// Most series one `/metrics` scrape source may hold (status, advance, run): a target with
    /// more gives no reading (its gates hold, "too many series: N > cap") and none of it is
    /// kept. An exporter's label-cardinality bug must not fill the store.
    #[arg(
        long,
        global = true,
        help_heading = GLOBAL,
        env = "MIGRATE_MAX_SERIES",
        default_value_t = crate::indicators::fetch::MAX_SERIES as u32,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_series: u32,
    /// The log lines on standard error: `text` (for people) or `json` (one object a line, the
    /// migration, phase and gate as fields, for a log pipeline).
    #[arg(
        long,
        global = true,
        env = "MIGRATE_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text,
        help_heading = GLOBAL
    )]
    pub log_format: LogFormat,
    /// Evaluate as if it were this instant (RFC 3339). For tests and rehearsals.
    #[arg(
        long,
        global = true,
        env = "MIGRATE_NOW",
        hide = true,
        help_heading = GLOBAL
    )]
    pub now: Option<String>,
}

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line a message, for people (colour on a terminal).
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `message` and every field of
    /// the event (`migration`, `phase`, `gate`...) at the top level.
    Json,
}

/// The parser of a duration option (humantime: `10s`, `500ms`, `2m`, `7d`) where zero makes no
/// sense: refused with `why`, instead of a daemon that spins or a gate that always holds.
pub fn nonzero_duration(
    why: &'static str,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    move |text: &str| {
        let d = humantime::parse_duration(text)
            .map_err(|e| format!("{e} (want a duration like 10s, 500ms, 2m)"))?;
        if d.is_zero() {
            Err(format!("must be above 0: {why}"))
        } else {
            Ok(d)
        }
    }
}
