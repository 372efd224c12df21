//! `migrate plan backtest PLAN --from TIME --to TIME`: rehearse a plan over a past window of its
//! sources' real metrics (docs/plan.md, "Rehearse before you start").

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::{CliError, CliResult, Ctx, print_json, to_stdout};
use crate::backtest::{self, BacktestError, Instants, WhatIf};
use crate::controller::ControllerError;
use crate::plan::SecretsMode;
use crate::store::any::AnyStore;

#[derive(Debug, Args)]
pub struct BacktestArgs {
    /// The plan file (YAML, version 1; see docs/plan.md).
    pub file: PathBuf,
    /// The window's start: RFC 3339 (2026-11-24T00:00:00Z) or relative to now (-7d, -36h).
    #[arg(long, allow_hyphen_values = true)]
    pub from: String,
    /// The window's end: RFC 3339, relative (-1h), or `now`.
    #[arg(long, allow_hyphen_values = true, default_value = "now")]
    pub to: String,
    /// How often the gates are judged, as the daemon's rounds would (`--interval` of `run`).
    #[arg(long, default_value = "1m", value_parser = super::nonzero_duration("a zero step never moves"))]
    pub step: Duration,
    /// The step the rehearsal starts in, entered at --from (`synthetic`, `slices[2]`); default:
    /// planned (as if `migrate init` ran at --from, the daemon entering the first phase at once).
    #[arg(long)]
    pub start_at: Option<String>,
    /// Rerun with a changed threshold: GATE=THRESHOLD (`pass_if`'s number, a compare gate's
    /// ratio, require_peak=AT_LEAST). Repeatable.
    #[arg(long = "what-if", value_name = "GATE=THRESHOLD")]
    pub what_if: Vec<String>,
    /// Cut the range into consecutive windows of this length (a whole number of --step) and
    /// rehearse each on its own from the same start step (--start-at), as if a migration entered
    /// that step at each window's start: each window reads only its own instants and starts with
    /// a fresh memory, through the same rehearsal as one window. The answer is a line per window
    /// (each judge's first decision, PASS or FAIL, and how long after the window's start, or
    /// undecided; the window's verdict) and, per judge of the start step, how many windows it
    /// passed, failed and left undecided, with the median and p90 time to a decision (undecided
    /// windows counted as deciding after the window). E.g. `--from ... --to ... --step 10s
    /// --windows 1h --start-at 'slices[1]'`: how often a judge would have decided wrongly.
    /// Not with --what-if.
    #[arg(long, value_parser = super::nonzero_duration("a window of zero holds no instant"))]
    pub windows: Option<Duration>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// An instant: RFC 3339, `now`, or `-DURATION` before `now_ms`.
fn instant(text: &str, now_ms: i64, option: &str) -> Result<i64, CliError> {
    let text = text.trim();
    if text == "now" {
        return Ok(now_ms);
    }
    if let Some(ago) = text.strip_prefix('-') {
        let d = humantime::parse_duration(ago).map_err(|e| {
            CliError::input(format!(
                "{option} {text}: {e} (want RFC 3339 such as 2026-11-24T00:00:00Z, or -7d, -36h)"
            ))
        })?;
        return Ok(now_ms.saturating_sub(crate::time::millis(d)));
    }
    crate::time::parse_rfc3339(text).map_err(|e| {
        CliError::input(format!(
            "{option}: {e} (want RFC 3339 such as 2026-11-24T00:00:00Z, or -7d, -36h)"
        ))
    })
}

fn input(e: BacktestError) -> CliError {
    CliError::input(e.to_string())
}

pub async fn run(ctx: &Ctx, args: BacktestArgs) -> CliResult {
    let yaml = crate::plan::bounds::read_file(&args.file).map_err(|message| {
        CliError::from(ControllerError::PlanFile {
            path: args.file.clone(),
            message,
        })
    })?;
    // Broker secrets are not needed here: a source URL that does not resolve makes its gates
    // hold, naming the variable.
    let compiled = crate::plan::compile_with_secrets_mode(
        &yaml,
        args.file.parent(),
        &ctx.resolve,
        SecretsMode::Deferred,
    )
    .map_err(|errors| CliError::from(ControllerError::Plan(errors)))?;
    let plan = compiled.plan;
    let now = ctx.now_ms()?;
    let from = instant(&args.from, now, "--from")?;
    let to = instant(&args.to, now, "--to")?;
    let step_ms = crate::time::millis(args.step);
    let instants = Instants::new(from, to, step_ms).map_err(input)?;
    let start_at = backtest::start_state(&plan, args.start_at.as_deref()).map_err(input)?;
    let changes = args
        .what_if
        .iter()
        .map(|w| WhatIf::parse(w))
        .collect::<Result<Vec<_>, _>>()
        .map_err(input)?;
    // Checked before any source is read.
    backtest::apply_what_if(&plan, &changes).map_err(input)?;
    let windows = match args.windows {
        Some(_) if !changes.is_empty() => {
            return Err(CliError::input(
                "--windows rehearses the plan as written: drop --what-if (or run without --windows)",
            ));
        }
        Some(w) => {
            let window_ms = crate::time::millis(w);
            backtest::windows::cuts(&instants, window_ms).map_err(input)?;
            Some(window_ms)
        }
        None => None,
    };
    let fetcher = ctx.fetcher()?;
    let store = scrape_store(ctx, &plan).await?;
    let readings = backtest::readings::read(&plan, store.as_ref(), &fetcher, instants).await;
    if let Some(window_ms) = windows {
        let notes = notes(&plan, &readings, step_ms);
        let all = backtest::windows::rehearse_windows(&plan, &readings, start_at, window_ms)
            .map_err(input)?;
        let outages = readings.outages();
        let report = backtest::windows::WindowsReport {
            plan: &plan.name,
            from: crate::time::rfc3339(instants.at(0)),
            to: crate::time::rfc3339(instants.last()),
            step: crate::time::human_ms(step_ms),
            window: crate::time::human_ms(window_ms),
            start_at: start_at.to_string(),
            sources: notes,
            outages: &outages,
            judges: &all.judges,
            windows: &all.windows,
        };
        if args.json {
            print_json(&report)?;
        } else {
            to_stdout(|out| backtest::windows::write_text(out, &report))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let outcome = backtest::backtest(&plan, &readings, start_at, &changes).map_err(input)?;
    let sources = notes(&plan, &readings, step_ms);
    let report =
        backtest::report::report(&plan.name, &outcome, step_ms, start_at.to_string(), sources);
    if args.json {
        print_json(&report)?;
    } else {
        to_stdout(|out| backtest::report::write_text(out, &report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What a person should know of the sources and the step, each note through the one text rule
/// (a source's text masks the plan's secrets and forges no line).
fn notes(plan: &crate::plan::Plan, readings: &backtest::Readings, step_ms: i64) -> Vec<String> {
    let mut sources: Vec<String> = readings
        .unavailable
        .values()
        .map(|why| format!("{why}: its gates hold"))
        .collect();
    sources.extend(readings.notes.iter().cloned());
    sources.extend(backtest::step_notes(plan, step_ms));
    let known = plan.known_secrets();
    sources
        .iter()
        .map(|s| {
            crate::outgoing::text(
                s,
                &known,
                crate::outgoing::Shape::Line,
                crate::outgoing::LINE_MAX,
            )
        })
        .collect()
}

/// The store whose scrape history answers for the plan's scrape sources: only when the plan has
/// one and the store exists (a missing SQLite file is not created).
async fn scrape_store(ctx: &Ctx, plan: &crate::plan::Plan) -> Result<Option<AnyStore>, CliError> {
    let scrapes = plan
        .sources
        .values()
        .any(|s| matches!(s, crate::plan::Source::Scrape { .. }));
    if !scrapes {
        return Ok(None);
    }
    if let Some(file) = crate::store::any::sqlite_file(&ctx.global.state)
        && !file.exists()
    {
        return Ok(None);
    }
    ctx.store().await.map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_is_rfc3339_now_or_before_now() {
        let now = 1_764_460_800_000;
        assert_eq!(instant("now", now, "--to").ok(), Some(now));
        assert_eq!(
            instant("-7d", now, "--from").ok(),
            Some(now - 7 * 86_400_000)
        );
        assert_eq!(
            instant("2025-11-30T00:00:00Z", now, "--from").ok(),
            Some(1_764_460_800_000)
        );
        assert!(instant("-7 parsecs", now, "--from").is_err());
        assert!(instant("last week", now, "--from").is_err());
    }
}
