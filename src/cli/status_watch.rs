//! `migrate status --watch`'s screen, fitted to the terminal whatever fails (issue 56): the
//! gates that one source could not be read for share one summary (the source, how it failed,
//! the gates it leaves without data, its reason once) instead of repeating its error row by
//! row, and a block taller than the screen is cut with a count of the lines hidden, the refresh
//! line always last.
//!
//! Pure: the watch loop reads the store and the terminal's size, this only lays out lines.

use crate::controller::GateView;
use crate::fit;
use crate::plan::GateKind;

/// At most this many lines for the reason of one source's summary: a longer one is cut (`…`),
/// since `migrate status` prints it whole (and a blind standing's sentence quotes it).
pub const MAX_REASON_LINES: usize = 2;

/// Gates of one view that share one source's error: the first one's index, and every one's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shared {
    pub first: usize,
    pub gates: Vec<usize>,
}

/// The gates without data because their source could not be read (unreachable, an HTTP error,
/// an answer that could not be parsed), grouped by source, cause and reason, where two or more
/// share one: their rows say the same error.
pub fn shared_errors(gates: &[GateView]) -> Vec<Shared> {
    let mut groups: Vec<Shared> = Vec::new();
    for (i, g) in gates.iter().enumerate() {
        if !source_unread(g) {
            continue;
        }
        let same = |s: &Shared| {
            let f = &gates[s.first];
            f.source == g.source && f.cause == g.cause && f.reason == g.reason
        };
        match groups.iter_mut().find(|s| same(s)) {
            Some(s) => s.gates.push(i),
            None => groups.push(Shared {
                first: i,
                gates: vec![i],
            }),
        }
    }
    groups.retain(|s| s.gates.len() > 1);
    groups
}

/// No data because its source could not be read.
fn source_unread(g: &GateView) -> bool {
    g.verdict == crate::gate::Verdict::NoData
        && g.evaluated_at.is_some()
        && g.cause.is_some_and(crate::gate::NoDataCause::source_unread)
}

/// The summary of `shared` (gates of `gates`): `source prom unreachable (12s ago): no data for
/// 8 gates: exit errors, lag; guard depth`, wrapped to `width`, then its reason once, cut to
/// [`MAX_REASON_LINES`]; every text through the one text rule.
pub fn summary(gates: &[GateView], shared: &Shared, width: usize) -> Vec<String> {
    let first = &gates[shared.first];
    let cause = first.cause.unwrap_or(crate::gate::NoDataCause::SourceDown);
    let of_kind = |kind: GateKind| -> Vec<&str> {
        shared
            .gates
            .iter()
            .map(|&i| &gates[i])
            .filter(|g| g.kind == kind)
            .map(|g| g.name.as_str())
            .collect()
    };
    let kinds: Vec<String> = [(GateKind::Exit, "exit"), (GateKind::Guard, "guard")]
        .into_iter()
        .filter_map(|(kind, word)| {
            let names = of_kind(kind);
            (!names.is_empty()).then(|| format!("{word} {}", names.join(", ")))
        })
        .collect();
    let age = first
        .age_ms
        .map(|a| format!(" ({} ago)", crate::time::human_ms(a)))
        .unwrap_or_default();
    let head = format!(
        "{}{age}: no data for {} gates: {}",
        crate::standing::unread(&first.source, cause, &first.reason),
        shared.gates.len(),
        kinds.join("; ")
    );
    let mut lines = fit::wrap(&crate::outgoing::line(&head), width, "  ", "    ");
    let mut reason = fit::wrap(&crate::outgoing::line(&first.reason), width, "    ", "    ");
    if reason.len() > MAX_REASON_LINES {
        reason.truncate(MAX_REASON_LINES);
        if let Some(last) = reason.last_mut() {
            *last = fit::truncate(&format!("{last} …"), width);
        }
    }
    lines.extend(reason);
    lines
}

/// The screen: `body`, then `refresh` (the refresh line, wrapped), in at most `height - 1`
/// lines (the cursor's line stays free, so the screen never scrolls). A body that does not fit
/// is cut, a line saying how many lines are hidden in its place; the refresh line is always
/// shown, cut to what is left on a screen smaller than it.
pub fn screen(body: &[String], refresh: &[String], width: usize, height: usize) -> Vec<String> {
    let room = height.saturating_sub(1).max(1);
    if body.len() + refresh.len() <= room {
        return body.iter().chain(refresh).cloned().collect();
    }
    let refresh: Vec<String> = match refresh.len() > room {
        true => match refresh.first() {
            Some(first) => vec![fit::truncate(first, width)],
            None => Vec::new(),
        },
        false => refresh.to_vec(),
    };
    let keep = room.saturating_sub(refresh.len() + 1);
    let mut out: Vec<String> = body[..keep.min(body.len())].to_vec();
    let hidden = body.len() - out.len();
    if out.len() + refresh.len() < room {
        out.push(fit::truncate(
            &format!(
                "… {hidden} line{} hidden (a taller terminal, or `migrate status`, shows them)",
                if hidden == 1 { "" } else { "s" }
            ),
            width,
        ));
    }
    out.extend(refresh);
    out
}

#[cfg(test)]
mod tests;
