//! `migrate plan check FILE`: validate a plan, report every error at once, print derived values.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::{CliError, CliResult, Ctx, exit_after_printing, print_json, to_stdout};
use crate::controller::ControllerError;
use crate::machine::Ladder;
use crate::plan::{Compiled, Diagnostic};

#[derive(Debug, Subcommand)]
pub enum PlanCmd {
    /// Validate a plan: every error with its path and line; on success the derived values
    /// (quiet period, dedup window check, where the routing document is written, the steps with
    /// their minimum time and what each publishes).
    Check(CheckArgs),
    /// Replace a registered migration's plan by the edited file: shows the diff, refuses changes
    /// that would break the migration in its current state, journals it with --reason.
    Apply(super::plan_apply::ApplyArgs),
    /// Rehearse the plan over a past window of its sources' real metrics: when each step would
    /// have been entered, what held it, the guard breaches, each gate's shares, a verdict.
    /// Touches no broker, store or routing.
    Backtest(super::plan_backtest::BacktestArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The plan file (YAML, version 1; see docs/plan.md).
    pub file: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Report<'a> {
    ok: bool,
    errors: &'a [Diagnostic],
    warnings: &'a [Diagnostic],
    derived: Option<Derived>,
}

#[derive(Serialize)]
struct Derived {
    name: String,
    slices: u32,
    quiet: String,
    quiet_auto: bool,
    dedup_window: Option<String>,
    dedup_required: Option<String>,
    /// `routing.file` resolved against the plan's directory (`None`: no file is written).
    routing_file: Option<String>,
    /// `routing.etcd`: the key and the gateway (a password masked).
    routing_etcd: Option<String>,
    /// The built-in stale-producer guard (`stale_producers:`), as one line.
    stale_producers: Option<String>,
    /// The judges' error budget per migration and its split (`None`: no judge).
    judge_budget: Option<String>,
    /// Each judge: its share of the budget and the raw counters it reads.
    judges: Vec<String>,
    steps: Vec<StepView>,
}

#[derive(Serialize)]
struct StepView {
    state: String,
    slices_migrated: u32,
    consume: String,
    /// The least time the migration stays in this step (the phase's `min_duration`, `observe`
    /// for each step of `slices`, `retain` for `disconnect`); `None` for planned and complete.
    min_time: Option<String>,
}

fn derived(compiled: &Compiled) -> Derived {
    let plan = &compiled.plan;
    let ladder = Ladder::of(plan);
    let ms = crate::time::human;
    let (judge_budget, judges) = super::plan_check_judges::judge_lines(plan);
    Derived {
        judge_budget,
        judges,
        name: plan.name.clone(),
        slices: plan.slices,
        quiet: ms(plan.quiet),
        quiet_auto: plan.quiet_auto,
        dedup_window: plan.dedup.as_ref().map(|d| ms(d.window)),
        dedup_required: plan.dedup.as_ref().map(|d| ms(d.required_window())),
        routing_file: plan.routing.file.as_ref().map(|f| f.display().to_string()),
        routing_etcd: plan
            .routing
            .etcd
            .as_ref()
            .map(|e| format!("{} at {}", e.key, e.endpoint.redacted())),
        stale_producers: plan.stale_producers.as_ref().map(stale_text),
        steps: ladder
            .rungs()
            .iter()
            .map(|s| {
                let r = ladder.routing(*s);
                StepView {
                    state: s.to_string(),
                    slices_migrated: r.slices_migrated,
                    consume: r
                        .consume
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join("+"),
                    min_time: s
                        .phase()
                        .and_then(|k| plan.phase(k))
                        .map(|p| ms(p.min_duration)),
                }
            })
            .collect(),
    }
}

pub fn run(ctx: &Ctx, args: CheckArgs) -> CliResult {
    let yaml = crate::plan::bounds::read_file(&args.file).map_err(|message| {
        CliError::from(ControllerError::PlanFile {
            path: args.file.clone(),
            message,
        })
    })?;
    let file = args.file.display().to_string();
    match crate::plan::compile(&yaml, args.file.parent(), &ctx.resolve) {
        Err(errors) => {
            if args.json {
                let printed = print_json(&Report {
                    ok: false,
                    errors: &errors,
                    warnings: &[],
                    derived: None,
                });
                return exit_after_printing(printed, ExitCode::from(2));
            }
            eprintln!("{file}: {} error(s)", errors.len());
            for e in &errors {
                eprintln!("  {e}");
            }
            Ok(ExitCode::from(2))
        }
        Ok(compiled) => {
            let d = derived(&compiled);
            if args.json {
                print_json(&Report {
                    ok: true,
                    errors: &[],
                    warnings: &compiled.warnings,
                    derived: Some(d),
                })?;
                return Ok(ExitCode::SUCCESS);
            }
            to_stdout(|out| write_derived(out, &file, &d, &compiled))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The stale-producer guard as `plan check` states it: its bounds, where the grace comes from.
fn stale_text(s: &crate::plan::StaleProducers) -> String {
    let ms = crate::time::human;
    let grace = if s.grace_auto {
        format!(
            "{} (auto: the routing's measured propagation, p99 63 ms to 1,000 long-polling \
             producers, plus the follower's 1 s re-poll, doubled and rounded up)",
            ms(s.grace)
        )
    } else {
        ms(s.grace)
    };
    format!(
        "guard `{}` in slices, drain and disconnect on source {}: a message on the old broker \
         stamped by a generation older than the one that moved its slice trips it once \
         {grace} has passed since that publish; producer clocks trusted to within {}; a trip \
         counts for {} and pauses the migration",
        crate::plan::STALE_GUARD,
        s.source,
        ms(s.clock_skew),
        ms(s.window)
    )
}

/// What `plan check` says of a valid plan.
fn write_derived(
    out: &mut impl Write,
    file: &str,
    d: &Derived,
    compiled: &Compiled,
) -> io::Result<()> {
    writeln!(
        out,
        "{file}: ok — migration {:?}, {} slices",
        d.name, d.slices
    )?;
    let retry = &compiled.plan.retry;
    let ms = crate::time::human;
    writeln!(
        out,
        "  drain quiet period: {}{}",
        d.quiet,
        if d.quiet_auto {
            format!(
                " (auto = retry.max_backoff {} + retry.visibility_timeout {})",
                ms(retry.max_backoff),
                ms(retry.visibility_timeout)
            )
        } else {
            String::new()
        }
    )?;
    if let (Some(w), Some(r)) = (&d.dedup_window, &d.dedup_required) {
        writeln!(
            out,
            "  dedup window: {w} >= required {r} (max_redelivery_delay + max_consumer_delay + reprocess_margin)"
        )?;
    }
    match (&d.routing_file, &d.routing_etcd) {
        (None, None) => writeln!(
            out,
            "  routing document: served by the daemon's HTTP API only (no routing.file, no routing.etcd)"
        )?,
        (file, etcd) => {
            if let Some(f) = file {
                writeln!(out, "  routing document: written to {f}")?;
            }
            if let Some(e) = etcd {
                writeln!(out, "  routing document: written to etcd key {e}")?;
            }
        }
    }
    if let Some(stale) = &d.stale_producers {
        writeln!(out, "  stale producers: {stale}")?;
    }
    if let Some(budget) = &d.judge_budget {
        writeln!(out, "  judge budget: {budget}")?;
        for j in &d.judges {
            writeln!(out, "    judge {j}")?;
        }
    }
    writeln!(
        out,
        "  steps (min: the least time in the step, never enough on its own to leave it):"
    )?;
    let min_w = d
        .steps
        .iter()
        .map(|s| s.min_time.as_deref().map_or(1, |m| m.chars().count()))
        .max()
        .unwrap_or(1);
    for s in &d.steps {
        writeln!(
            out,
            "    {:<14} min {:>min_w$}   producers: {:>5} of {} slices to new   consumers read: {}",
            s.state,
            s.min_time.as_deref().unwrap_or("-"),
            s.slices_migrated,
            d.slices,
            s.consume
        )?;
    }
    if !compiled.warnings.is_empty() {
        writeln!(out, "  {} warning(s):", compiled.warnings.len())?;
        for w in &compiled.warnings {
            writeln!(out, "    {w}")?;
        }
    }
    Ok(())
}
