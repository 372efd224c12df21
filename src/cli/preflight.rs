//! `migrate preflight PLAN`: read both brokers' durability settings and refuse, naming the
//! setting and the fix, whatever may lose acknowledged writes (issue 58; the checks are
//! [`crate::preflight`]'s, the readers [`crate::brokers::durability`]'s).

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::{CliError, CliResult, Ctx, exit_after_printing, print_json, to_stdout};
use crate::controller::ControllerError;
use crate::outgoing;
use crate::plan::{Diagnostic, SecretsMode};
use crate::preflight::Outcome;
use crate::preflight::Preflighted;

/// What `migrate preflight --help` teaches: the checks, a waiver, the daemon, the exit codes.
pub const LONG_ABOUT: &str = r#"Read both brokers' durability settings and refuse what may lose acknowledged writes.

A broker's acknowledgement is what the migration counts as a confirmation. Refused, each
with the setting and the fix:
  readable                        the broker's settings could not be read at all
  single_node                     one node (it cannot survive losing it)
  nats.storage                    a stream in memory
  nats.replicas                   a stream on fewer than 3 servers
  nats.sync                       JetStream syncing to disk on an interval (2m by default),
                                  or no monitoring endpoint to tell (preflight.X.monitor)
  kafka.replication_factor        a topic with fewer than 3 replicas
  kafka.min_insync_replicas       min.insync.replicas below 2
  kafka.unclean_leader_election   unclean.leader.election.enable=true
  kafka.acks                      our producer's acks not all
  rabbitmq.queue_type             a classic (or non-durable) queue: use quorum or a stream
  rabbitmq.publisher_confirms     our publisher not waiting for confirms
  redis.appendonly                appendonly no
  redis.appendfsync               appendfsync no (everysec: a warning, one second of writes)
  redis.replica_failover          replicas, while our publisher does not WAIT
A setting that cannot be read is refused too. The plan may waive a check, with a reason:

  preflight:
    new:
      monitor: http://127.0.0.1:8222      # NATS /varz; RabbitMQ: the management API
      waive:
        - { check: single_node, reason: "local test server, one node" }

The daemon runs the same checks before the first step that writes to the new broker
(synthetic, or the first slices step), pauses the migration on a refusal, and journals the
waivers it used.

Only the brokers' secrets are needed: a source's (a Prometheus URL) may be unset here, and a
broker whose URL does not resolve is reported unread, naming the variable.

Exit codes: 0 nothing refused, 1 a broker could not be read (readable not waived),
2 the plan is invalid, 3 refused."#;

/// `migrate preflight PLAN`'s arguments.
#[derive(Debug, Args)]
pub struct PreflightArgs {
    /// The plan file (YAML, version 1; see docs/plan.md).
    pub plan: PathBuf,
    /// Print the result as JSON: the settings read, the findings, the unread brokers.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Answer<'a> {
    ok: bool,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    errors: &'a [Diagnostic],
    #[serde(flatten)]
    preflight: Option<&'a Preflighted>,
}

pub async fn run(ctx: &Ctx, args: PreflightArgs) -> CliResult {
    let yaml = crate::plan::bounds::read_file(&args.plan).map_err(|message| {
        CliError::from(ControllerError::PlanFile {
            path: args.plan.clone(),
            message,
        })
    })?;
    // Only the brokers are read: a secret of a source (a Prometheus URL) need not resolve here,
    // and a broker's that does not makes that broker unread, naming the variable.
    let compiled = match crate::plan::compile_with_secrets_mode(
        &yaml,
        args.plan.parent(),
        &ctx.resolve,
        SecretsMode::Deferred,
    ) {
        Ok(c) => c,
        Err(errors) => {
            if args.json {
                let printed = print_json(&Answer {
                    ok: false,
                    errors: &errors,
                    preflight: None,
                });
                return exit_after_printing(printed, ExitCode::from(2));
            }
            eprintln!("{}: {} error(s)", args.plan.display(), errors.len());
            for e in &errors {
                eprintln!("  {e}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    let p = crate::adapters::preflight::run(&compiled.plan).await;
    let code = exit_code(&p);
    let printed = if args.json {
        print_json(&Answer {
            ok: p.passed(),
            errors: &[],
            preflight: Some(&p),
        })
    } else {
        to_stdout(|out| write_report(out, &compiled.plan.name, &p))
    };
    exit_after_printing(printed, ExitCode::from(code))
}

/// 1 when a broker could not be read, else 3 when anything is refused, else 0.
fn exit_code(p: &Preflighted) -> u8 {
    if p.unread_refused() {
        1
    } else if p.report.refused() {
        3
    } else {
        0
    }
}

/// The text report: one line a finding, each refusal with its fix, the unread brokers.
fn write_report(out: &mut impl Write, name: &str, p: &Preflighted) -> io::Result<()> {
    let verdict = match exit_code(p) {
        0 => "passes",
        1 => "incomplete: a broker could not be read",
        _ => "REFUSED: may lose acknowledged writes",
    };
    writeln!(out, "preflight of {}: {verdict}", outgoing::line(name))?;
    let check_w = p
        .report
        .findings
        .iter()
        .map(|f| f.check.as_str().len())
        .max()
        .unwrap_or(0);
    for f in &p.report.findings {
        writeln!(
            out,
            "  {:<7} {} {:<8} {:<check_w$}  {} = {}",
            f.outcome.label(),
            f.side,
            outgoing::line(&f.broker),
            f.check.as_str(),
            outgoing::line(&f.setting),
            outgoing::line(&f.value),
        )?;
        if f.outcome != Outcome::Pass {
            writeln!(out, "          {}", outgoing::line(&f.why))?;
        }
        if let (Some(fix), Outcome::Refuse | Outcome::Warn) = (&f.fix, f.outcome) {
            writeln!(out, "          fix: {}", outgoing::line(fix))?;
        }
        if f.outcome == Outcome::Refuse {
            writeln!(
                out,
                "          or waive it: preflight.{}.waive: [{{ check: {}, reason: \"...\" }}]",
                f.side, f.check
            )?;
        }
        if let Some(w) = &f.waiver {
            writeln!(out, "          waived: {}", outgoing::line(w))?;
        }
    }
    for w in &p.report.unused_waivers {
        writeln!(
            out,
            "  note: preflight.{}.waive {} let nothing through (it passes, or no broker has it)",
            w.side, w.check
        )?;
    }
    Ok(())
}
