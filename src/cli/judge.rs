//! `migrate judge simulate`: the power calculator of a `judge` gate (how often it would decide
//! wrongly, how soon it decides) beside a plain threshold gate on the same simulated runs.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::{CliError, CliResult, nonzero_duration, print_json, to_stdout};
use crate::judge::Config;
use crate::sim::judge::{Outcome, Report, Scenario, simulate};

#[derive(Debug, Subcommand)]
pub enum JudgeCmd {
    /// Simulate both routes and judge them through the daemon's gate code: the judge's and a
    /// threshold gate's (`new < old × (1 + tolerance) for: 1m`) false-fail and false-pass rates
    /// and times to a decision.
    Simulate(SimulateArgs),
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Messages per second on each side.
    #[arg(long, value_name = "MSG/S", default_value_t = 100.0)]
    pub traffic: f64,
    /// The old route's failure rate (0.01: 1%).
    #[arg(long, default_value_t = 0.01)]
    pub base_rate: f64,
    /// New's failure rate over old's (1: identical routes).
    #[arg(long, default_value_t = 1.0)]
    pub ratio: f64,
    /// How often the gates are checked (the daemon's `--interval`).
    #[arg(long, default_value = "15s", value_parser = nonzero_duration("a zero interval never moves"))]
    pub every: Duration,
    /// How long each run lasts.
    #[arg(long, default_value = "1h", value_parser = nonzero_duration("a zero run decides nothing"))]
    pub duration: Duration,
    /// How many runs.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// The random seed (the same seed, the same runs).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The judge's `tolerance` (and the threshold gate's).
    #[arg(long, default_value_t = 0.2)]
    pub tolerance: f64,
    /// The judge's `confidence`.
    #[arg(long, default_value_t = 0.99)]
    pub confidence: f64,
    /// The judge's `min_events`.
    #[arg(long, default_value_t = 1000)]
    pub min_events: u64,
    /// The judge's `min_failures` (both sides, weighed, before a PASS).
    #[arg(long, default_value_t = crate::judge::DEFAULT_MIN_FAILURES)]
    pub min_failures: u64,
    /// Simulate the latency form for this quantile (0.99: p99) instead of failure counts: each
    /// side's latencies lognormal (median 100 ms, σ 0.5) in buckets 10 ms × 1.1^k, new's
    /// scaled by --ratio; --base-rate is not used.
    #[arg(long, value_name = "Q")]
    pub quantile: Option<f64>,
    /// The report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: JudgeCmd) -> CliResult {
    let JudgeCmd::Simulate(a) = cmd;
    if !(0.0..=10.0).contains(&a.tolerance) || !(0.5..=0.999_999).contains(&a.confidence) {
        return Err(CliError::input(format!(
            "--tolerance must be in [0, 10] and --confidence in [0.5, 0.999999], got {} and {}",
            a.tolerance, a.confidence
        )));
    }
    let scenario = Scenario {
        traffic: a.traffic,
        base_rate: a.base_rate,
        ratio: a.ratio,
        every: a.every,
        duration: a.duration,
        runs: a.runs,
        seed: a.seed,
        config: Config {
            tolerance: a.tolerance,
            alpha: 1.0 - a.confidence,
            alpha_pass: 1.0 - a.confidence,
            confidence: Some(a.confidence),
            min_events: a.min_events,
            min_failures: a.min_failures,
            max_duration: a.duration,
        },
        quantile: a.quantile,
    };
    let report = simulate(&scenario).map_err(|e| CliError::input(e.to_string()))?;
    if a.json {
        print_json(&report)?;
    } else {
        to_stdout(|out| write_text(out, &report))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn seconds(s: Option<f64>) -> String {
    s.map_or("-".into(), |s| format!("{s:.0}s"))
}

fn write_text(out: &mut impl Write, r: &Report) -> std::io::Result<()> {
    let s = &r.scenario;
    if let Some(q) = s.quantile {
        writeln!(
            out,
            "{} runs of {}, checked every {}: {} msg/s per side, p{} latency, new {}x old's; \
             tolerance {}, confidence {}, min_events {}",
            s.runs,
            humantime::format_duration(s.duration),
            humantime::format_duration(s.every),
            s.traffic,
            q * 100.0,
            s.ratio,
            s.config.tolerance,
            1.0 - s.config.alpha,
            s.config.min_events
        )?;
        return write_table(out, r);
    }
    writeln!(
        out,
        "{} runs of {}, checked every {}: {} msg/s per side, old fails {}%, new {}x that; \
         tolerance {}, confidence {}, min_events {}",
        s.runs,
        humantime::format_duration(s.duration),
        humantime::format_duration(s.every),
        s.traffic,
        s.base_rate * 100.0,
        s.ratio,
        s.config.tolerance,
        1.0 - s.config.alpha,
        s.config.min_events
    )?;
    write_table(out, r)
}

fn write_table(out: &mut impl Write, r: &Report) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<10} {:>10} {:>10} {:>7} {:>7} {:>10} {:>9} {:>9}",
        "gate", "false fail", "false pass", "FAIL", "PASS", "undecided", "median", "p90"
    )?;
    let row = |out: &mut dyn Write, name: &str, o: &Outcome| {
        writeln!(
            out,
            "{:<10} {:>9.2}% {:>9.2}% {:>6.1}% {:>6.1}% {:>9.1}% {:>9} {:>9}",
            name,
            o.false_fail_rate * 100.0,
            o.false_pass_rate * 100.0,
            o.fail_rate * 100.0,
            o.pass_rate * 100.0,
            o.undecided_rate * 100.0,
            seconds(o.median_decision_s),
            seconds(o.p90_decision_s)
        )
    };
    row(out, "judge", &r.judge)?;
    row(out, "threshold", &r.threshold)?;
    if r.judge.passes_before_min_events > 0 {
        writeln!(
            out,
            "judge passed before min_events in {} runs",
            r.judge.passes_before_min_events
        )?;
    }
    Ok(())
}
