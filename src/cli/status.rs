//! `migrate status [NAME]`: phase, step, routing and every gate with its last value, fitted to
//! the terminal's width (`$COLUMNS`; 80 when not a terminal); `--watch` redraws it in place.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::fit::{self, round_value};
use super::status_watch;
use super::{CliError, CliResult, Ctx, print_json, to_stdout};
use crate::controller::views::StatusView;
use crate::plan::Threshold;
use crate::standing::Pause;
use crate::store::traits::*;
use crate::time::rfc3339;

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The migration (all of them when left out).
    pub name: Option<String>,
    /// Print as JSON.
    #[arg(long, conflicts_with = "watch")]
    pub json: bool,
    /// Redraw in place until interrupted (Ctrl-C); not a terminal: print again whenever it
    /// changes.
    #[arg(long)]
    pub watch: bool,
    /// How often `--watch` reads the store again.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration, requires = "watch")]
    pub interval: Duration,
}

/// One migration as `status` shows it: the view, the thresholds of its gates (from the plan,
/// in the view's gate order) and the pause that holds it.
pub struct Shown {
    pub view: StatusView,
    pub thresholds: Vec<Option<Threshold>>,
    pub pause: Option<Pause>,
}

/// [`fit::wrap`] of `text` through the one text rule ([`crate::outgoing::line`]): a reason, a
/// source's error or a name that holds ESC or other control characters prints them as escapes,
/// never sets the terminal's title or erases a line.
fn wrap(text: &str, width: usize, first: &str, indent: &str) -> Vec<String> {
    fit::wrap(&crate::outgoing::line(text), width, first, indent)
}

/// A gate row's text before its reason, the widths of the columns shared by every row.
fn gate_cells(s: &Shown) -> Vec<[String; 5]> {
    s.view
        .gates
        .iter()
        .zip(&s.thresholds)
        .map(|(g, t)| {
            [
                g.kind.to_string(),
                g.verdict.label().to_string(),
                crate::outgoing::line(&g.name),
                value_cell(g, *t),
                t.map(|t| t.text()).unwrap_or_default(),
            ]
        })
        .collect()
}

/// A gate's value as its row shows it; a `kafka_lag` gate's with its largest partition lag
/// beside it (issue 57): `1234 (max 900 on orders/3)`.
fn value_cell(g: &crate::controller::GateView, t: Option<Threshold>) -> String {
    let value = g.value.map_or_else(|| "-".into(), |v| round_value(v, t));
    match &g.largest_partition {
        Some(l) => format!("{value} ({})", crate::outgoing::line(&l.text())),
        None => value,
    }
}

/// Below this many characters left for the reason beside a row, every row's reason goes on
/// the lines under it.
const REASON_ROOM: usize = 24;

/// A gate's reason with the age of its reading (issue 56): a person sees what is stale.
fn aged(g: &crate::controller::GateView) -> String {
    match g.age_ms {
        Some(age) => format!("{} ({} ago)", g.reason, crate::time::human_ms(age)),
        None => g.reason.clone(),
    }
}

/// The lines of one migration, none wider than `width`. `shared`: the gates that share one
/// source's error share one summary ([`status_watch::summary`]), as `--watch` shows them.
pub fn lines(s: &Shown, width: usize, shared: bool) -> Vec<String> {
    let v = &s.view;
    let mut out = Vec::new();
    // Where it stands, first: the one line a person reads at 3 a.m.
    out.extend(wrap(
        &v.standing.sentence,
        width,
        &format!("{}: ", v.migration),
        "    ",
    ));
    // The state as the journal, `history` and `--from` write it: `slices[2]`.
    let step = v.step.map(|s| format!("[{s}]")).unwrap_or_default();
    let head = format!(
        "{}: {}{}{}  (version {}, since {})",
        v.migration,
        v.state,
        step,
        if v.paused { " [PAUSED]" } else { "" },
        v.version,
        v.entered_at
    );
    out.extend(wrap(&head, width, "", "    "));
    if v.paused {
        let text = match &s.pause {
            Some(p) => format!(
                "{} (by {}, {})",
                p.reason.as_deref().unwrap_or("no reason given"),
                p.actor,
                rfc3339(p.at_ms)
            ),
            None => "no pause in the journal".into(),
        };
        out.extend(wrap(&text, width, "  paused: ", "    "));
    }
    let routing = format!(
        "generation {}, {} of {} slices to new, consumers read {}{}",
        v.routing.generation,
        v.routing.slices_migrated,
        v.routing.slices_total,
        v.routing
            .consume
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("+"),
        if v.routing_published {
            ""
        } else {
            "  (NOT yet published: the next command retries)"
        }
    );
    out.extend(wrap(&routing, width, "  routing: ", "    "));
    if let Some(e) = &v.publish_error {
        out.extend(wrap(e, width, "  publisher behind: ", "    "));
    }
    if let Some(e) = &v.plan_error {
        let text = format!(
            "NOT loadable with this environment's secrets (a daemon here answers 503 for it and \
             does not act on it): {e}"
        );
        out.extend(wrap(&text, width, "  ", "    "));
    }
    out.extend(gate_lines(s, width, shared));
    // Said once, under the table: the views other than the CLI say "awaiting first evaluation".
    if v.gates.iter().any(|g| g.evaluated_at.is_none()) {
        out.extend(wrap(
            &crate::controller::not_evaluated_advice(&v.migration),
            width,
            "  ",
            "    ",
        ));
    }
    out
}

/// The gate table of one migration: a row per gate with its reason (beside it, or under it
/// when too narrow), none wider than `width` (`shared`: see [`lines`]).
fn gate_lines(s: &Shown, width: usize, shared: bool) -> Vec<String> {
    let v = &s.view;
    let mut out = Vec::new();
    if v.gates.is_empty() {
        out.extend(wrap("no gates in this state", width, "  ", "    "));
    }
    let cells = gate_cells(s);
    let col = |i: usize| {
        cells
            .iter()
            .map(|c| c[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let w = [col(0), col(1), col(2), col(3), col(4)];
    let beside = 2 + w.iter().sum::<usize>() + 4 + 2;
    let groups = match shared {
        true => status_watch::shared_errors(&v.gates),
        false => Vec::new(),
    };
    for (i, (g, c)) in v.gates.iter().zip(&cells).enumerate() {
        if let Some(group) = groups.iter().find(|s| s.gates.contains(&i)) {
            if group.first == i {
                out.extend(status_watch::summary(&v.gates, group, width));
            }
            continue;
        }
        let reason = aged(g);
        let row = format!(
            "  {:<k$} {:<d$} {:<n$} {:>vw$} {:<t$}",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            k = w[0],
            d = w[1],
            n = w[2],
            vw = w[3],
            t = w[4],
        );
        if beside + REASON_ROOM <= width {
            // The reason beside the row, its next lines under its first.
            let first = format!("{row}  ");
            let indent = " ".repeat(first.chars().count());
            out.extend(wrap(&reason, width, &first, &indent));
        } else {
            // Too narrow: the row (wrapped if it must) and the reason under it.
            let row = row.trim_end();
            if row.chars().count() <= width {
                out.push(row.to_string());
            } else {
                out.extend(wrap(row, width, "  ", "    "));
            }
            out.extend(wrap(&reason, width, "      ", "      "));
        }
    }
    out
}

/// Every migration's lines, fitted to `width` (`shared`: see [`lines`]).
fn block(shown: &[Shown], width: usize, shared: bool) -> Vec<String> {
    shown.iter().flat_map(|s| lines(s, width, shared)).collect()
}

/// What `status` shows, read from the store: the migrations, and the failures of those that
/// could not be shown (without a name, one of them does not hide the others).
async fn read(ctx: &Ctx, name: Option<&str>) -> Result<(Vec<Shown>, Vec<CliError>), CliError> {
    let store = ctx.existing_store().await?;
    let fetcher = ctx.fetcher()?;
    let c = ctx.controller(&store, &fetcher);
    let single = name.is_some();
    let now_ms = ctx.now_ms_in(&store).await?;
    let names = match name {
        Some(n) => vec![n.to_string()],
        None => store.list().await?.into_iter().map(|r| r.name).collect(),
    };
    let mut shown = Vec::new();
    let mut failed: Vec<CliError> = Vec::new();
    for name in names {
        let one = async {
            let loaded = c.load(&name).await?;
            let view = c.status_view(&loaded, now_ms).await?;
            let phase = loaded
                .record
                .state
                .phase()
                .and_then(|k| loaded.plan.phase(k));
            let thresholds = view
                .gates
                .iter()
                .map(|g| phase.and_then(|p| p.threshold(&g.name, g.kind)))
                .collect();
            let pause = view.pause.clone();
            Ok::<_, crate::controller::ControllerError>(Shown {
                view,
                thresholds,
                pause,
            })
        };
        match one.await {
            Ok(s) => shown.push(s),
            Err(e) if single => return Err(e.into()),
            Err(e) => failed.push(e.into()),
        }
    }
    Ok((shown, failed))
}

/// The command fails naming every migration that could not be shown.
fn failures(failed: &[CliError]) -> Option<CliError> {
    let first = failed.first()?;
    let message = failed
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    Some(CliError::new(first.code, message))
}

fn nothing(ctx: &Ctx) -> String {
    nothing_in(&ctx.global.state)
}

/// What `status` says of an empty store: its URL through the one redaction rule.
fn nothing_in(state: &str) -> String {
    format!(
        "no migrations in {} (start with `migrate init PLAN`)",
        super::redact_url(state)
    )
}

pub async fn run(ctx: &Ctx, args: StatusArgs) -> CliResult {
    if args.watch {
        return watch(ctx, &args).await;
    }
    let single = args.name.is_some();
    let (shown, failed) = read(ctx, args.name.as_deref()).await?;
    let printed = if args.json {
        let views: Vec<&StatusView> = shown.iter().map(|s| &s.view).collect();
        match views.as_slice() {
            [one] if single => print_json(one),
            all => print_json(&all),
        }
    } else if shown.is_empty() && failed.is_empty() {
        to_stdout(|out| writeln!(out, "{}", nothing(ctx)))
    } else {
        let width = fit::width();
        to_stdout(|out| {
            block(&shown, width, false)
                .iter()
                .try_for_each(|l| writeln!(out, "{l}"))
        })
    };
    // A migration that could not be shown fails the command, whatever became of the report.
    if let Some(e) = failures(&failed) {
        return Err(e);
    }
    printed.map(|()| ExitCode::SUCCESS)
}

/// `--watch`: read and draw every `--interval` until Ctrl-C. On a terminal the block is redrawn
/// in place (cut to the screen's height, each line fitted to its width, read again each time:
/// a resized terminal gets a block of its new size); elsewhere it is printed again whenever it
/// changes.
async fn watch(ctx: &Ctx, args: &StatusArgs) -> CliResult {
    let terminal = io::stdout().is_terminal();
    let mut drawn = 0usize;
    let mut last: Option<Vec<String>> = None;
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let width = fit::width();
        let mut text = match read(ctx, args.name.as_deref()).await {
            Ok((shown, failed)) => {
                let mut t = if shown.is_empty() && failed.is_empty() {
                    wrap(&nothing(ctx), width, "", "  ")
                } else {
                    block(&shown, width, true)
                };
                for e in &failed {
                    t.extend(wrap(&e.to_string(), width, "error: ", "  "));
                }
                t
            }
            // A store that fails a read once does not end the watch: it says so and retries.
            Err(e) => wrap(&e.to_string(), width, "cannot read the store: ", "  "),
        };
        let refresh = wrap(
            &format!(
                "{}; every {}; Ctrl-C to stop",
                rfc3339(ctx.now_ms()?),
                humantime::format_duration(args.interval)
            ),
            width,
            "-- ",
            "   ",
        );
        if terminal {
            let height = crossterm::terminal::size().map_or(24, |(_, h)| usize::from(h));
            text = status_watch::screen(&text, &refresh, width, height);
            drawn = to_stdout(|out| redraw(out, drawn, &text))?;
        } else if last.as_ref() != Some(&text) {
            // Printed again when anything but the refresh line changed.
            to_stdout(|out| {
                text.iter()
                    .chain(&refresh)
                    .try_for_each(|l| writeln!(out, "{l}"))?;
                writeln!(out)
            })?;
        }
        last = Some(text);
        tokio::select! {
            _ = &mut interrupted => return Ok(ExitCode::SUCCESS),
            () = tokio::time::sleep(args.interval) => {}
        }
    }
}

/// Draw `lines` over the `drawn` lines drawn before (the cursor under them); returns how many
/// are drawn now.
pub fn redraw(out: &mut impl Write, drawn: usize, lines: &[String]) -> io::Result<usize> {
    use crossterm::{cursor, queue, terminal};
    if let Ok(up) = u16::try_from(drawn)
        && up > 0
    {
        queue!(out, cursor::MoveToPreviousLine(up))?;
    }
    // Line by line, then what is left below: a clear from the cursor down at the screen's top
    // corner would be a whole-screen clear, which tmux (`scroll-on-clear`) and some terminals
    // push into the scrollback, a copy per redraw.
    for l in lines {
        queue!(out, terminal::Clear(terminal::ClearType::CurrentLine))?;
        writeln!(out, "{l}")?;
    }
    queue!(out, terminal::Clear(terminal::ClearType::FromCursorDown))?;
    out.flush()?;
    Ok(lines.len())
}

#[cfg(test)]
mod tests {
    /// Regression: `migrate status` on an empty PostgreSQL store printed the state URL whole,
    /// password included.
    #[test]
    fn an_empty_store_is_named_without_its_password() {
        let shown = super::nothing_in("postgres://qm:pw-secret-123@db:5432/state?sslmode=require");
        assert!(!shown.contains("pw-secret-123"), "{shown}");
        assert!(!shown.contains("sslmode"), "{shown}");
        assert!(shown.contains("postgres://***@db:5432/state"), "{shown}");
    }

    use super::*;
    use crate::controller::GateView;
    use crate::gate::Verdict;
    use crate::plan::CmpOp;

    fn shown(paused: bool) -> Shown {
        let view = sample_view(paused);
        Shown {
            thresholds: vec![
                Some(Threshold {
                    op: CmpOp::Lt,
                    value: 0.01,
                });
                view.gates.len()
            ],
            view,
            pause: Some(Pause {
                command: "pause".into(),
                reason: Some("the new broker's disk alarm fired during the night shift; waiting for storage to be resized before going on".into()),
                actor: "ana".into(),
                at_ms: 0,
                breach: Vec::new(),
            }),
        }
    }

    fn sample_view(paused: bool) -> StatusView {
        let routing: crate::routing::RoutingDocument = serde_json::from_value(serde_json::json!({
            "migration": "orders", "generation": 7, "state": "slices", "step": 1,
            "slices_total": 16, "slices_migrated": 2, "consume": ["old", "new"], "paused": paused,
            "brokers": { "old": "rabbitmq", "new": "nats" },
            "updated_at": "2026-11-30T00:00:00Z"
        }))
        .unwrap_or_else(|e| panic!("routing document: {e}"));
        StatusView {
            migration: "orders".into(),
            state: "slices".into(),
            step: Some(1),
            paused,
            version: 9,
            entered_at: "2026-11-30T00:00:00Z".into(),
            routing,
            routing_published: true,
            publish_error: Some("etcd at http://127.0.0.1:2379 answered 503 Service Unavailable: the cluster has no leader, retrying with backoff".into()),
            plan_error: None,
            standing: crate::standing::Standing::Moving.view(),
            pause: None,
            gates: vec![GateView {
                phase: "slices".into(),
                name: "error ratio on the new broker's consumers".into(),
                kind: crate::plan::GateKind::Guard,
                source: "prom".into(),
                verdict: Verdict::Fail,
                value: Some(0.012_345_678_901_234),
                reason: "0.012345678901234 is not < 0.01 (query sum(rate(app_errors_total{broker=\"new\"}[5m])) / sum(rate(app_messages_total{broker=\"new\"}[5m])))".into(),
                evaluated_at: None,
                evaluated_at_ms: None,
                age_ms: None,
                soak: None,
                cause: None,
                largest_partition: None,
            }],
        }
    }

    #[test]
    fn status_fits_80_columns_and_shows_the_pause_and_rounded_values() {
        for width in [80, 40, 20] {
            let l = lines(&shown(true), width, false);
            for line in &l {
                assert!(line.chars().count() <= width, "{width}: {line:?}\n{l:#?}");
            }
            let text = l.join("\n");
            // Rounded: the reason has the whole number, the value column three decimals.
            assert!(
                l.iter().any(|l| l.split_whitespace().any(|w| w == "0.012")),
                "{text}"
            );
            assert!(text.contains("paused:"), "{text}");
            assert!(text.contains("night"), "{text}");
        }
        let text = lines(&shown(false), 80, false).join("\n");
        assert!(!text.contains("paused:"), "{text}");
    }

    /// Issue 57: a kafka_lag gate showed one number (the sum); its row now shows the largest
    /// partition's lag and which beside it.
    #[test]
    fn a_kafka_lag_gate_shows_its_largest_partition_beside_its_value() {
        let mut s = shown(false);
        s.thresholds = vec![None];
        s.view.gates[0].value = Some(1234.0);
        s.view.gates[0].largest_partition = Some(crate::indicators::kafka_lag::LargestPartition {
            topic: "orders".into(),
            partition: 3,
            lag: 900,
        });
        let text = lines(&s, 120, false).join("\n");
        assert!(text.contains("1234 (max 900 on orders/3)"), "{text}");
        s.view.gates[0].largest_partition = None;
        let text = lines(&s, 120, false).join("\n");
        assert!(!text.contains("max 900"), "{text}");
    }
}
