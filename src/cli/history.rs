//! `migrate history NAME`: the journal, oldest first, fitted to the terminal's width (`$COLUMNS`;
//! 80 when not a terminal): a longer entry wraps, its reason under it, as `status` wraps.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use super::fit::{self, wrap};
use super::{CliResult, Ctx, print_json, to_stdout};
use crate::controller::views::EntryView;
use crate::store::traits::*;

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The migration.
    pub name: String,
    /// Print as JSON (an array, oldest first).
    #[arg(long)]
    pub json: bool,
}

pub async fn run(ctx: &Ctx, args: HistoryArgs) -> CliResult {
    let store = ctx.existing_store().await?;
    let journal = store.journal(&args.name).await?;
    if args.json {
        print_json(&journal.iter().map(EntryView::of).collect::<Vec<_>>())?;
        return Ok(ExitCode::SUCCESS);
    }
    let views: Vec<EntryView> = journal.iter().map(EntryView::of).collect();
    let width = fit::width();
    to_stdout(|out| {
        lines(&views, width)
            .iter()
            .try_for_each(|l| writeln!(out, "{l}"))
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The journal's lines, none wider than `width`: an entry that fits is one line as before; a
/// longer one wraps, its continuation lines indented under the date.
pub fn lines(views: &[EntryView], width: usize) -> Vec<String> {
    // The command column as wide as its widest cell (a plan applied, a breach rollback...).
    let command_w = views
        .iter()
        .map(|v| v.command.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = Vec::new();
    for v in views {
        // Free text through the one text rule: no control character reaches the terminal.
        let actor = crate::outgoing::line(&v.actor);
        let reason = v.reason.as_deref().map(crate::outgoing::line);
        let line = format!(
            "{:>4}  {}  {:<command_w$} {} -> {}{}  gen {}  by {}{}{}",
            v.seq,
            v.at,
            v.command,
            v.from,
            v.to,
            if v.to_paused { " [paused]" } else { "" },
            v.generation,
            actor,
            if v.forced { "  FORCED" } else { "" },
            reason
                .as_ref()
                .map(|r| format!("  — {r}"))
                .unwrap_or_default(),
        );
        if line.chars().count() <= width {
            out.push(line);
            continue;
        }
        let (head, reason) = match &reason {
            Some(r) => (
                line[..line.len() - r.len() - "  — ".len()].to_string(),
                Some(r),
            ),
            None => (line, None),
        };
        out.extend(wrap(head.trim_end(), width, "", "      "));
        if let Some(r) = reason {
            out.extend(wrap(r, width, "      — ", "        "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(reason: Option<&str>) -> EntryView {
        EntryView {
            seq: 12,
            at: "2026-11-30T03:14:15Z".into(),
            command: "rollback".into(),
            from: "slices[2]".into(),
            from_paused: false,
            to: "slices[1]".into(),
            to_paused: true,
            actor: "daemon:orders-controller-7f9c (guard breach)".into(),
            reason: reason.map(Into::into),
            forced: false,
            generation: 41,
            evidence: serde_json::json!({}),
            epoch: None,
        }
    }

    /// Issue 44: `history` did not fit the terminal's width.
    #[test]
    fn history_fits_the_width_and_wraps_its_reasons() {
        let long = "guard breach: consumer error ratio on the new broker 0.031 is not < 0.01 \
                    for 3 evaluations; rolled back one step and paused until a person resumes it";
        let views = [entry(Some(long)), entry(None)];
        for width in [80, 60, 40] {
            let l = lines(&views, width);
            for line in &l {
                assert!(line.chars().count() <= width, "{width}: {line:?}\n{l:#?}");
            }
            let words = l.join(" ").split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(words.contains("rolled back one step and paused"), "{words}");
            assert!(
                words.contains("by daemon:orders-controller-7f9c"),
                "{words}"
            );
        }
        // A line that fits is printed as before.
        let short = [entry(Some("ok"))];
        assert_eq!(
            lines(&short, 200),
            [
                "  12  2026-11-30T03:14:15Z  rollback slices[2] -> slices[1] [paused]  gen 41  by \
              daemon:orders-controller-7f9c (guard breach)  — ok"
            ]
        );
    }
}
