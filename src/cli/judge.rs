//! `migrate judge simulate`: the power calculator of a `judge` gate (how often it would decide
//! wrongly, how soon it decides) beside a plain threshold gate on the same simulated runs.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::{CliError, CliResult, nonzero_duration, print_json, to_stdout};
use crate::judge::Config;
use crate::sim::judge::{Outcome, Read, Report, Scenario, ShareMoves, World, simulate_in};

#[derive(Debug, Subcommand)]
pub enum JudgeCmd {
    /// Simulate both routes and judge them through the daemon's gate code: the judge's and a
    /// threshold gate's (`new < old × (1 + tolerance) for: 1m`) false-fail and false-pass rates
    /// and times to a decision.
    #[command(long_about = SIMULATE_LONG_ABOUT)]
    Simulate(SimulateArgs),
}

/// `judge simulate --help`: what it does, the world's departures, and each column.
pub const SIMULATE_LONG_ABOUT: &str = r#"Simulate both routes and judge them through the daemon's gate code.

Each run draws both routes' traffic for --duration and reads it every --every through the same
code the daemon runs: the judge gate, and beside it a threshold gate
`new < old × (1 + tolerance) for: 1m` on the last minute's failure rates. By default the world
is the judge's own model (Poisson traffic, independent failures, an even traffic split, exact
counts at every check). The departures below (all off by default; with any of them both routes
are drawn second by second) show how the gates fare where real traffic departs from it:
  --bursts 6/h --burst-size 50   bursts of failed messages on each side, independently
  --dispersion 2                 a random per-second failure rate (variance 2× the binomial's)
  --share-moves 0.8              new's share moving in stretches while both sides fail more
  --scrape 15s [--read increase] counters seen only at scrapes (raw, or via increase())
  --regression-at 40m            new as old until then, --ratio times worse after

Output, one row per gate (judge, threshold), shares of the runs:
  false fail   new not worse than the tolerance (ratio <= 1 + tolerance): runs that failed
               at any check (0 when new is worse)
  false pass   new worse than the tolerance: runs whose first decision was a PASS (0 when new
               is not worse); with --regression-at, a PASS before the regression counts too
  FAIL, PASS   runs whose first decision was a FAIL, a PASS
  undecided    runs that never decided within --duration
  median, p90  time to the first decision over ALL runs; with --regression-at, time from the
               regression's start to the first FAIL at or after it (the gate read throughout,
               as a guard is). A run that never decided (never failed) counts as censored at
               the run's end, so a quantile that falls on such runs prints as "> " the time
               left: it is longer than the run
  before regr. with --regression-at: runs whose first decision came before the regression
               started (an exit gate would have moved on before it)
--json prints the same: each gate's shares, `median_decision_s` / `p90_decision_s` with
`median_censored` / `p90_censored`, and the scenario and world simulated."#;

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
    /// Bursts of failed messages on each side, independently, Poisson in time: a rate per hour
    /// (`6/h`, `0.1/min`, `6` meaning per hour); each adds --burst-size failed messages on top
    /// of the base failures. Default: none.
    #[arg(long, value_name = "RATE", default_value = "0", value_parser = per_hour)]
    pub bursts: f64,
    /// Failed messages in a burst.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub burst_size: u64,
    /// Overdispersion: each second's failure rate is the rate times a gamma draw of mean 1, so
    /// that a side's failures per second have K times the binomial's variance (at --traffic and
    /// --base-rate). Each side draws its own (independent failures, the harder case for a
    /// test), or the same with --dispersion-shared. Default 1: none.
    #[arg(long, value_name = "K", default_value_t = 1.0)]
    pub dispersion: f64,
    /// With --dispersion: the same draw for both sides each second (a shared dependency).
    #[arg(long)]
    pub dispersion_shared: bool,
    /// A moving share: in stretches (a heavy key's batches on new while a shared dependency is
    /// slow), new takes this share of both routes' traffic (0.5 outside them) and both sides'
    /// failure rates are multiplied by --share-slowdown. Stretches last --share-stretch on
    /// average (exponential), with gaps of four times that: a fifth of the time. Default: off.
    #[arg(long, value_name = "SHARE")]
    pub share_moves: Option<f64>,
    /// With --share-moves: both sides' failure rates in a stretch, times their rates outside.
    #[arg(long, value_name = "X", default_value_t = 5.0)]
    pub share_slowdown: f64,
    /// With --share-moves: a stretch's mean length.
    #[arg(long, default_value = "1m", value_parser = nonzero_duration("a stretch of no time"))]
    pub share_stretch: Duration,
    /// Counters seen only at scrapes this far apart (whole seconds; each side at its own
    /// random phase): the judge reads the raw counters as of each side's last scrape, as the
    /// daemon does (a check with no new scrape is merged into the next interval), and so does
    /// the threshold gate. Default: exact counts at every check.
    #[arg(long, value_parser = nonzero_duration("a scrape every 0s"))]
    pub scrape: Option<Duration>,
    /// With --scrape: `raw` (the daemon's reading), or `increase` to show what Prometheus's
    /// `sum(increase(x[$step]))` extrapolation would have given the judge (for comparison only).
    #[arg(long, value_enum, default_value = "raw")]
    pub read: Read,
    /// A regression that starts mid-step: new's failure rate is old's until then, --ratio
    /// times it after; the times to a decision are measured from it. Default: from the start.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub regression_at: Option<Duration>,
    /// The report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A rate per hour: `6/h`, `0.1/min`, `1/s`, or a bare number (per hour).
fn per_hour(text: &str) -> Result<f64, String> {
    let (n, per) = text.split_once('/').unwrap_or((text, "h"));
    let n: f64 = n
        .trim()
        .parse()
        .map_err(|e| format!("{e} (want a rate like 6/h)"))?;
    let scale = match per.trim() {
        "h" | "hour" => 1.0,
        "m" | "min" => 60.0,
        "s" => 3600.0,
        other => return Err(format!("unknown unit {other:?} (want /h, /min or /s)")),
    };
    if n.is_finite() && n >= 0.0 {
        Ok(n * scale)
    } else {
        Err(format!("must be at least 0, got {n}"))
    }
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
    let world = World {
        bursts_per_hour: a.bursts,
        burst_size: a.burst_size,
        dispersion: a.dispersion,
        dispersion_shared: a.dispersion_shared,
        share_moves: a.share_moves.map(|share| ShareMoves {
            share,
            slowdown: a.share_slowdown,
            stretch: a.share_stretch,
        }),
        scrape: a.scrape,
        read: a.read,
        regression_at: a.regression_at,
    };
    let report = simulate_in(&scenario, &world).map_err(|e| CliError::input(e.to_string()))?;
    if a.json {
        print_json(&report)?;
    } else {
        to_stdout(|out| write_text(out, &report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A time to a decision: `> 1h` when censored (more than the time left at the run's end).
fn seconds(s: f64, censored: bool) -> String {
    if censored {
        let whole = Duration::from_secs(s.max(0.0).round() as u64);
        format!("> {}", humantime::format_duration(whole))
    } else {
        format!("{s:.0}s")
    }
}

fn write_text(out: &mut impl Write, r: &Report) -> std::io::Result<()> {
    let s = &r.scenario;
    let what = match s.quantile {
        Some(q) => format!("p{} latency, new {}x old's", q * 100.0, s.ratio),
        None => format!("old fails {}%, new {}x that", s.base_rate * 100.0, s.ratio),
    };
    writeln!(
        out,
        "{} runs of {}, checked every {}: {} msg/s per side, {what}; \
         tolerance {}, confidence {}, min_events {}",
        s.runs,
        humantime::format_duration(s.duration),
        humantime::format_duration(s.every),
        s.traffic,
        s.config.tolerance,
        1.0 - s.config.alpha,
        s.config.min_events
    )?;
    let world = describe(&r.world);
    if !world.is_empty() {
        writeln!(out, "world: {}", world.join("; "))?;
    }
    write_table(out, r)
}

/// The departures simulated, in words (none: the judge's own model).
fn describe(w: &World) -> Vec<String> {
    let mut said = Vec::new();
    if w.bursts_per_hour > 0.0 {
        said.push(format!(
            "bursts of {} failed messages, {}/h on each side",
            w.burst_size, w.bursts_per_hour
        ));
    }
    if w.dispersion != 1.0 {
        let how = if w.dispersion_shared {
            "shared"
        } else {
            "independent"
        };
        said.push(format!(
            "failure rate overdispersed {}x ({how})",
            w.dispersion
        ));
    }
    if let Some(m) = w.share_moves {
        said.push(format!(
            "new's share {} in stretches of {} (a fifth of the time), failure rates {}x there",
            m.share,
            humantime::format_duration(m.stretch),
            m.slowdown
        ));
    }
    if let Some(scrape) = w.scrape {
        let how = match w.read {
            Read::Raw => "the raw counters",
            Read::Increase => "increase() extrapolated",
        };
        said.push(format!(
            "scraped every {}, the judge reads {how}",
            humantime::format_duration(scrape)
        ));
    }
    if let Some(at) = w.regression_at {
        said.push(format!(
            "the regression starts at {}",
            humantime::format_duration(at)
        ));
    }
    said
}

fn write_table(out: &mut impl Write, r: &Report) -> std::io::Result<()> {
    let regression = r.world.regression_at.is_some();
    writeln!(
        out,
        "{:<10} {:>10} {:>10} {:>7} {:>7} {:>10} {:>9} {:>9}{}",
        "gate",
        "false fail",
        "false pass",
        "FAIL",
        "PASS",
        "undecided",
        "median",
        "p90",
        if regression { "  before regr." } else { "" }
    )?;
    let row = |out: &mut dyn Write, name: &str, o: &Outcome| {
        writeln!(
            out,
            "{:<10} {:>9.2}% {:>9.2}% {:>6.1}% {:>6.1}% {:>9.1}% {:>9} {:>9}{}",
            name,
            o.false_fail_rate * 100.0,
            o.false_pass_rate * 100.0,
            o.fail_rate * 100.0,
            o.pass_rate * 100.0,
            o.undecided_rate * 100.0,
            seconds(o.median_decision_s, o.median_censored),
            seconds(o.p90_decision_s, o.p90_censored),
            if regression {
                format!(" {:>13.1}%", o.decided_before_regression * 100.0)
            } else {
                String::new()
            }
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
    let what = if regression {
        "from the regression's start to the first FAIL"
    } else {
        "to the first decision"
    };
    writeln!(
        out,
        "median, p90: time {what}, over all runs; a run without one is censored at the \
         run's end (\"> T\": longer than the run). Columns: --help."
    )
}
