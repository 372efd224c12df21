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
    let fetcher = ctx.fetcher()?;
    let store = scrape_store(ctx, &plan).await?;
    let readings = backtest::readings::read(&plan, store.as_ref(), &fetcher, instants).await;
    let outcome = backtest::backtest(&plan, &readings, start_at, &changes).map_err(input)?;
    let mut sources: Vec<String> = readings
        .unavailable
        .values()
        .map(|why| format!("{why}: its gates hold"))
        .collect();
    sources.extend(readings.notes.iter().cloned());
    sources.extend(backtest::step_notes(&plan, step_ms));
    // Every note through the one text rule: a source's text masks the plan's secrets and
    // forges no line (the verdict's included).
    let known = plan.known_secrets();
    let sources: Vec<String> = sources
        .iter()
        .map(|s| {
            crate::outgoing::text(
                s,
                &known,
                crate::outgoing::Shape::Line,
                crate::outgoing::LINE_MAX,
            )
        })
        .collect();
    let report =
        backtest::report::report(&plan.name, &outcome, step_ms, start_at.to_string(), sources);
    if args.json {
        print_json(&report)?;
    } else {
        to_stdout(|out| backtest::report::write_text(out, &report))?;
    }
    Ok(ExitCode::SUCCESS)
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
