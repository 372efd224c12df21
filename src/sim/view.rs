//! What the person running `migrate demo` sees: a live block redrawn in place on a terminal, plain
//! log lines otherwise.

use std::io::Write;
use std::time::Instant;

use super::world::World;
use crate::controller::GateView;
use crate::gate::Verdict;
use crate::time::{human_ms, rfc3339};

/// One moment of the run.
pub struct Frame<'a> {
    pub now_ms: i64,
    pub start_ms: i64,
    pub state: String,
    pub paused: bool,
    pub slices_migrated: u32,
    pub slices_total: u32,
    pub gates: &'a [GateView],
    pub world: &'a World,
    /// The state changed since the previous frame.
    pub changed: bool,
}

/// Where frames go.
pub trait View {
    fn frame(&mut self, f: &Frame<'_>);
}

fn counts(w: &World) -> String {
    format!(
        "produced {}  applied old {} / new {}  dup blocked {}  redelivered {}  in old {} / new {}  dead {} / {}",
        w.tally.produced,
        w.tally.processed[0],
        w.tally.processed[1],
        w.tally.duplicates_delivered,
        w.tally.redeliveries,
        w.old.depth(),
        w.new.depth(),
        w.old.dead.len(),
        w.new.dead.len(),
    )
}

fn clock(f: &Frame<'_>) -> String {
    format!("T+{}", human_ms(f.now_ms - f.start_ms))
}

/// Plain lines: one per state change, plus a heartbeat every simulated hour.
pub struct Lines<W: Write> {
    out: W,
    last_hour: i64,
}

impl<W: Write> Lines<W> {
    pub fn new(out: W) -> Lines<W> {
        Lines { out, last_hour: 0 }
    }
}

impl<W: Write> View for Lines<W> {
    fn frame(&mut self, f: &Frame<'_>) {
        let hour = (f.now_ms - f.start_ms) / 3_600_000;
        if f.changed {
            let _ = writeln!(
                self.out,
                "{} {} -> {}{}  ({} of {} slices to new)",
                clock(f),
                rfc3339(f.now_ms),
                f.state,
                if f.paused { " [paused]" } else { "" },
                f.slices_migrated,
                f.slices_total
            );
        } else if hour > self.last_hour {
            let waiting: Vec<String> = f
                .gates
                .iter()
                .filter(|g| g.verdict != Verdict::Pass)
                .map(|g| format!("{} {}", g.name, g.verdict.as_str()))
                .collect();
            let _ = writeln!(
                self.out,
                "{} in {}{}; {}{}",
                clock(f),
                f.state,
                if f.paused { " [paused]" } else { "" },
                counts(f.world),
                if waiting.is_empty() {
                    String::new()
                } else {
                    format!("; waiting on: {}", waiting.join(", "))
                }
            );
        }
        self.last_hour = hour;
    }
}

/// A block redrawn in place (at most ten times a second), in colour unless told not to.
pub struct Live<W: Write> {
    out: W,
    drawn: usize,
    last: Option<Instant>,
    colour: bool,
}

impl<W: Write> Live<W> {
    /// `colour`: bold and coloured verdicts (false: the same block, without colour codes; the
    /// cursor movements that redraw it stay).
    pub fn new(out: W, colour: bool) -> Live<W> {
        Live {
            out,
            drawn: 0,
            last: None,
            colour,
        }
    }

    /// `text` in the SGR style `sgr` (e.g. `1` bold, `31` red) when in colour.
    fn paint(&self, sgr: &str, text: &str) -> String {
        if self.colour {
            format!("\x1b[{sgr}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

impl<W: Write> View for Live<W> {
    fn frame(&mut self, f: &Frame<'_>) {
        if !f.changed && self.last.is_some_and(|t| t.elapsed().as_millis() < 100) {
            return;
        }
        self.last = Some(Instant::now());
        let mut lines = Vec::new();
        let bar_width = 32usize;
        let filled = (f.slices_migrated as usize * bar_width) / (f.slices_total.max(1) as usize);
        lines.push(format!(
            "queue-migrate demo  {}  state {}{}",
            clock(f),
            self.paint("1", &f.state),
            if f.paused {
                format!("  {}", self.paint("33", "[PAUSED]"))
            } else {
                String::new()
            }
        ));
        lines.push(format!(
            "slices to new [{}{}] {:>3}/{}   traffic {:.0} msg/min",
            "#".repeat(filled),
            ".".repeat(bar_width - filled),
            f.slices_migrated,
            f.slices_total,
            f.world.rate_now()
        ));
        lines.push(counts(f.world));
        for g in f.gates {
            let verdict = match g.verdict {
                Verdict::Pass => self.paint("32", "PASS"),
                Verdict::Hold => self.paint("33", "HOLD"),
                Verdict::Fail => self.paint("31", "FAIL"),
            };
            let mut reason = g.reason.clone();
            reason.truncate(70);
            lines.push(format!(
                "  {:<5} {verdict} {:<32} {:>10}  {}",
                g.kind,
                g.name,
                g.value
                    .map(|v| format!("{v:.4}"))
                    .unwrap_or_else(|| "-".into()),
                reason
            ));
        }
        let mut buf = String::new();
        if self.drawn > 0 {
            buf.push_str(&format!("\x1b[{}F", self.drawn));
        }
        for l in &lines {
            buf.push_str("\x1b[2K");
            buf.push_str(l);
            buf.push('\n');
        }
        // Clear lines left over from a taller previous frame.
        for _ in lines.len()..self.drawn {
            buf.push_str("\x1b[2K\n");
        }
        let _ = self.out.write_all(buf.as_bytes());
        let _ = self.out.flush();
        self.drawn = lines.len().max(self.drawn);
    }
}

/// Nothing (for `--json`, where stdout carries only the report).
pub struct Quiet;

impl View for Quiet {
    fn frame(&mut self, _: &Frame<'_>) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::world::Settings;

    /// The SGR (colour, bold) sequences in `text`: ESC [ digits;… m.
    fn sgr_count(text: &str) -> usize {
        text.split('\x1b')
            .skip(1)
            .filter(|rest| {
                rest.strip_prefix('[').is_some_and(|r| {
                    let end = r.find(|c: char| !(c.is_ascii_digit() || c == ';'));
                    end.is_some_and(|i| r[i..].starts_with('m'))
                })
            })
            .count()
    }

    fn draw(colour: bool) -> String {
        let dir = tempfile::tempdir().expect("tempdir");
        let world = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(World::new(
                Settings::demo(1, None),
                0,
                &dir.path().join("c.db"),
            ))
            .expect("world");
        let gates = [GateView {
            phase: "slices".into(),
            name: "error_rate".into(),
            kind: "exit".into(),
            verdict: Verdict::Fail,
            value: Some(0.5),
            reason: "above 0.01".into(),
            evaluated_at: None,
        }];
        let mut out = Vec::new();
        Live::new(&mut out, colour).frame(&Frame {
            now_ms: 60_000,
            start_ms: 0,
            state: "slices".into(),
            paused: true,
            slices_migrated: 1,
            slices_total: 8,
            gates: &gates,
            world: &world,
            changed: true,
        });
        String::from_utf8(out).expect("utf8")
    }

    #[test]
    fn demo_live_view_honours_no_color() {
        let plain = draw(false);
        assert_eq!(sgr_count(&plain), 0, "{plain:?}");
        assert!(
            plain.contains("FAIL") && plain.contains("[PAUSED]"),
            "{plain:?}"
        );
        // Still redrawn in place: clearing lines is not colour.
        assert!(plain.contains("\x1b[2K"), "{plain:?}");
        let coloured = draw(true);
        assert!(coloured.contains("\x1b[31mFAIL\x1b[0m"), "{coloured:?}");
        assert!(sgr_count(&coloured) > 0);
    }
}
