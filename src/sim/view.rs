//! What the person running `migrate demo` sees: a live block redrawn in place on a terminal, plain
//! log lines otherwise.

use std::io::Write;
use std::time::Instant;

use crossterm::style::{Attribute, Color, Print, SetAttribute, SetForegroundColor};
use crossterm::terminal::{Clear, ClearType};
use crossterm::{cursor, queue};

use super::world::{Ledger, World};
use crate::controller::GateView;
use crate::gate::Verdict;
use crate::standing::Standing;

/// One moment of the run.
pub struct Frame<'a> {
    pub now_ms: i64,
    pub start_ms: i64,
    pub state: String,
    pub paused: bool,
    pub slices_migrated: u32,
    pub slices_total: u32,
    /// Where the migration stands: what [`crate::standing::standing`] returns, as every view
    /// prints it.
    pub standing: &'a Standing,
    pub gates: &'a [GateView],
    pub world: &'a World,
    /// The state changed since the previous frame.
    pub changed: bool,
}

/// Something that happened, printed as a line of its own (a fault striking, a step of the
/// journal), at a simulated moment.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Event {
    /// The simulated clock since the start (`T+5h46m`).
    pub t: String,
    /// The simulated instant (RFC 3339).
    pub at: String,
    pub text: String,
}

impl Event {
    pub fn new(at_ms: i64, start_ms: i64, text: impl Into<String>) -> Event {
        Event {
            t: clock(at_ms - start_ms),
            at: crate::time::rfc3339(at_ms),
            text: crate::outgoing::line(&text.into()),
        }
    }

    /// `T+5h46m new broker unreachable: ...`.
    pub fn line(&self) -> String {
        format!("{} {}", self.t, self.text)
    }
}

/// Where frames and events go.
pub trait View {
    fn frame(&mut self, f: &Frame<'_>);
    fn event(&mut self, e: &Event);
}

/// The simulated clock: `T+42m`, `T+5h46m`, `T+1d02h05m`.
pub fn clock(elapsed_ms: i64) -> String {
    let minutes = elapsed_ms.max(0) / 60_000;
    let (d, h, m) = (minutes / 1_440, minutes / 60 % 24, minutes % 60);
    match (d, h) {
        (0, 0) => format!("T+{m}m"),
        (0, h) => format!("T+{h}h{m:02}m"),
        (d, h) => format!("T+{d}d{h:02}h{m:02}m"),
    }
}

/// `1,632`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `produced 5,713 = applied 4,094 + outboxes 1,600 + in brokers 19 + dead 0`: where every
/// produced message is, adding up.
pub fn ledger_line(l: &Ledger) -> String {
    let mut s = format!(
        "produced {} = applied {} + outboxes {} + in brokers {} + dead {}",
        thousands(l.produced),
        thousands(l.applied),
        thousands(l.outboxes),
        thousands(l.in_brokers),
        thousands(l.dead_lettered),
    );
    if l.unaccounted != 0 {
        s.push_str(&format!(" + unaccounted {}", l.unaccounted));
    }
    s
}

fn flow(w: &World) -> String {
    format!(
        "applied old {} / new {}  dup blocked {}  redelivered {}",
        thousands(w.tally.processed[0]),
        thousands(w.tally.processed[1]),
        thousands(w.tally.duplicates_delivered),
        thousands(w.tally.redeliveries),
    )
}

fn sentence(f: &Frame<'_>) -> String {
    crate::outgoing::line(&f.standing.sentence())
}

/// A gate's value as the demo shows it: `require_deploy`'s process start time as the
/// simulated clock, not seconds since the epoch.
fn gate_value(g: &GateView, start_ms: i64) -> String {
    match g.value {
        Some(v) if g.name == "require_deploy" => clock((v * 1000.0) as i64 - start_ms),
        Some(v) => crate::fit::round_value(v, None),
        None => "-".into(),
    }
}

/// Plain lines: each event, plus where it stands every simulated hour.
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
        if hour > self.last_hour {
            let _ = writeln!(
                self.out,
                "{} {}{}: {}; {}",
                clock(f.now_ms - f.start_ms),
                f.state,
                if f.paused { " [paused]" } else { "" },
                sentence(f),
                ledger_line(&f.world.ledger()),
            );
        }
        self.last_hour = hour;
    }

    fn event(&mut self, e: &Event) {
        let _ = writeln!(self.out, "{}", e.line());
    }
}

/// A piece of a line, maybe in a colour and bold.
struct Span {
    text: String,
    colour: Option<Color>,
    bold: bool,
}

fn plain(text: impl Into<String>) -> Span {
    Span {
        text: text.into(),
        colour: None,
        bold: false,
    }
}

/// The spans of a line cut to `width` characters (`…` marking a cut).
fn fit(spans: Vec<Span>, width: usize) -> Vec<Span> {
    let total: usize = spans.iter().map(|s| s.text.chars().count()).sum();
    if total <= width {
        return spans;
    }
    let mut room = width.saturating_sub(1);
    let mut out = Vec::new();
    for mut s in spans {
        let n = s.text.chars().count();
        if n <= room {
            room -= n;
            out.push(s);
            continue;
        }
        s.text = s.text.chars().take(room).collect();
        s.text.push('…');
        out.push(s);
        break;
    }
    out
}

/// A block redrawn in place (at most ten times a second) with crossterm, in colour unless told
/// not to. Every line is cut to the terminal's width (read again at each frame: a resized
/// terminal gets lines of its new width) and the block to its height, so that no line wraps and
/// the cursor movements that redraw the block land where they should.
pub struct Live<W: Write> {
    out: W,
    drawn: usize,
    last: Option<Instant>,
    colour: bool,
    /// Fixed `(columns, rows)`, else the terminal's.
    size: Option<(usize, usize)>,
    /// The block drawn last (redrawn under an event).
    block: Vec<Vec<Span>>,
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
            size: None,
            block: Vec::new(),
        }
    }

    /// A view of a fixed size instead of the terminal's (tests).
    pub fn sized(out: W, colour: bool, columns: usize, rows: usize) -> Live<W> {
        Live {
            size: Some((columns, rows)),
            ..Live::new(out, colour)
        }
    }

    fn size(&self) -> (usize, usize) {
        self.size.unwrap_or_else(|| {
            crossterm::terminal::size()
                .map(|(c, r)| (usize::from(c), usize::from(r)))
                .unwrap_or((80, 24))
        })
    }

    /// The block's lines, before they are cut to the width.
    fn lines(f: &Frame<'_>, columns: usize) -> Vec<Vec<Span>> {
        let mut lines = Vec::new();
        let mut head = vec![
            plain(format!(
                "queue-migrate demo  {}  state ",
                clock(f.now_ms - f.start_ms)
            )),
            Span {
                text: f.state.clone(),
                colour: None,
                bold: true,
            },
        ];
        if f.paused {
            head.push(plain("  "));
            head.push(Span {
                text: "[PAUSED]".into(),
                colour: Some(Color::DarkYellow),
                bold: false,
            });
        }
        lines.push(head);
        // Where it stands, whole (a pause's reason matters): wrapped, at most three lines.
        let colour = match f.standing {
            Standing::Moving | Standing::Complete => Color::DarkGreen,
            Standing::Waiting { .. } | Standing::Soaking { .. } => Color::DarkCyan,
            Standing::Blind { .. } | Standing::NeedsPerson { .. } | Standing::NotDriven { .. } => {
                Color::DarkYellow
            }
            Standing::Blocked { .. } | Standing::Aborted { .. } => Color::DarkRed,
        };
        for l in crate::fit::wrap(&sentence(f), columns, "", "  ")
            .into_iter()
            .take(3)
        {
            lines.push(vec![Span {
                text: l,
                colour: Some(colour),
                bold: false,
            }]);
        }
        // The bar takes what the line leaves it, 8 to 32 characters.
        let bar_width = columns.saturating_sub(48).clamp(8, 32);
        let filled = (f.slices_migrated as usize * bar_width) / (f.slices_total.max(1) as usize);
        lines.push(vec![plain(format!(
            "slices to new [{}{}] {:>3}/{}   traffic {:.0} msg/min",
            "#".repeat(filled.min(bar_width)),
            ".".repeat(bar_width - filled.min(bar_width)),
            f.slices_migrated,
            f.slices_total,
            f.world.rate_now()
        ))]);
        let w = f.world;
        let ledger = w.ledger();
        lines.push(vec![Span {
            text: ledger_line(&ledger),
            // Messages waiting in outboxes: a broker does not take them.
            colour: (ledger.outboxes > 0 || ledger.unaccounted != 0).then_some(Color::DarkYellow),
            bold: false,
        }]);
        let first = flow(w);
        let second = format!(
            "queued old {} / new {}  dead {} / {}",
            w.old.depth(),
            w.new.depth(),
            w.old.dead.len(),
            w.new.dead.len(),
        );
        if first.chars().count() + 2 + second.chars().count() <= columns {
            lines.push(vec![plain(format!("{first}  {second}"))]);
        } else {
            lines.push(vec![plain(first)]);
            lines.push(vec![plain(second)]);
        }
        let name_w = f
            .gates
            .iter()
            .map(|g| g.name.chars().count())
            .max()
            .unwrap_or(0)
            .min(32);
        for g in f.gates {
            let (verdict, colour) = match g.verdict {
                Verdict::Pass => ("PASS", Color::DarkGreen),
                Verdict::Soaking => ("SOAKING", Color::DarkCyan),
                Verdict::NoData => ("NO DATA", Color::DarkYellow),
                Verdict::Fail => ("FAIL", Color::DarkRed),
            };
            let name: String = g.name.chars().take(name_w).collect();
            lines.push(vec![
                plain(format!("  {:<5} ", g.kind)),
                Span {
                    text: verdict.into(),
                    colour: Some(colour),
                    bold: false,
                },
                plain(format!(
                    " {name:<name_w$} {:>10}  {}",
                    gate_value(g, f.start_ms),
                    crate::outgoing::line(&g.reason)
                )),
            ]);
        }
        lines
    }

    fn draw(&mut self, lines: &[Vec<Span>]) -> std::io::Result<()> {
        if let Ok(up) = u16::try_from(self.drawn)
            && up > 0
        {
            queue!(self.out, cursor::MoveToPreviousLine(up))?;
        }
        for l in lines {
            queue!(self.out, Clear(ClearType::CurrentLine))?;
            for s in l {
                if !self.colour || (s.colour.is_none() && !s.bold) {
                    queue!(self.out, Print(&s.text))?;
                    continue;
                }
                if s.bold {
                    queue!(self.out, SetAttribute(Attribute::Bold))?;
                }
                if let Some(c) = s.colour {
                    queue!(self.out, SetForegroundColor(c))?;
                }
                queue!(self.out, Print(&s.text), SetAttribute(Attribute::Reset))?;
            }
            queue!(self.out, Print("\n"))?;
        }
        // Lines left over from a taller previous frame.
        queue!(self.out, Clear(ClearType::FromCursorDown))?;
        self.out.flush()?;
        self.drawn = lines.len();
        Ok(())
    }
}

impl<W: Write> View for Live<W> {
    fn frame(&mut self, f: &Frame<'_>) {
        if !f.changed && self.last.is_some_and(|t| t.elapsed().as_millis() < 100) {
            return;
        }
        self.last = Some(Instant::now());
        let (columns, rows) = self.size();
        // One column spare: a line as wide as the screen leaves some terminals' cursor past
        // the edge, and the next newline would skip a line.
        let width = columns.saturating_sub(1).max(1);
        let mut lines: Vec<Vec<Span>> = Self::lines(f, width)
            .into_iter()
            .map(|l| fit(l, width))
            .collect();
        // The block never scrolls the screen: what a moved cursor cannot reach stays drawn.
        lines.truncate(rows.saturating_sub(1).max(1));
        let _ = self.draw(&lines);
        self.block = lines;
    }

    /// The event above the block, for good (wrapped to the width, never cut), and the block
    /// drawn again under it.
    fn event(&mut self, e: &Event) {
        let (columns, _) = self.size();
        let width = columns.saturating_sub(1).max(1);
        let lines: Vec<Vec<Span>> = crate::fit::wrap(&e.text, width, &format!("{} ", e.t), "    ")
            .into_iter()
            .map(|l| vec![plain(l)])
            .collect();
        let _ = self.draw(&lines);
        // What was just drawn stays: the block goes under it.
        self.drawn = 0;
        let block = std::mem::take(&mut self.block);
        if !block.is_empty() {
            let _ = self.draw(&block);
        }
        self.block = block;
    }
}

/// Nothing (for `--json`, where stdout carries only the report).
pub struct Quiet;

impl View for Quiet {
    fn frame(&mut self, _: &Frame<'_>) {}
    fn event(&mut self, _: &Event) {}
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
        draw_sized(colour, 80, "above 0.01")
    }

    fn draw_sized(colour: bool, columns: usize, reason: &str) -> String {
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
            kind: crate::plan::GateKind::Exit,
            source: "prom".into(),
            verdict: Verdict::Fail,
            value: Some(0.5),
            reason: reason.into(),
            evaluated_at: None,
            evaluated_at_ms: None,
            age_ms: None,
            soak: None,
            cause: None,
            largest_partition: None,
        }];
        let mut out = Vec::new();
        let standing = Standing::NeedsPerson {
            person: crate::standing::Person::Paused {
                by: Some("controller".into()),
                why: Some("guard breach: error_rate".into()),
                at_ms: Some(60_000),
                failing_guard: None,
                last_round: None,
                guards_evaluated: true,
            },
        };
        Live::sized(&mut out, colour, columns, 24).frame(&Frame {
            now_ms: 60_000,
            start_ms: 0,
            state: "slices".into(),
            paused: true,
            standing: &standing,
            slices_migrated: 1,
            slices_total: 8,
            gates: &gates,
            world: &world,
            changed: true,
        });
        String::from_utf8(out).expect("utf8")
    }

    /// Issue 44: the demo's live view showed `[PAUSED]` with no reason and worded its own
    /// state; it prints what the standing function returns (here a pause, with who and why).
    #[test]
    fn demo_live_view_prints_the_standing_with_the_pause_reason() {
        let text = visible(&draw(false));
        let want = crate::standing::Standing::NeedsPerson {
            person: crate::standing::Person::Paused {
                by: Some("controller".into()),
                why: Some("guard breach: error_rate".into()),
                at_ms: Some(60_000),
                failing_guard: None,
                last_round: None,
                guards_evaluated: true,
            },
        }
        .sentence();
        let joined = text.replace("\n  ", " ");
        assert!(joined.contains(&want), "{want:?} in\n{text}");
        assert!(want.contains("guard breach: error_rate"), "{want}");
    }

    /// Issue 44: `require_deploy`'s value (a process start time) showed as an epoch.
    #[test]
    fn demo_shows_require_deploy_on_the_simulated_clock() {
        let g = GateView {
            phase: "slices".into(),
            name: "require_deploy".into(),
            kind: crate::plan::GateKind::Exit,
            source: "world".into(),
            verdict: Verdict::Pass,
            value: Some(1_795_996_800.0 + 5.0 * 3_600.0 + 46.0 * 60.0),
            reason: "a consumer restarted during this step".into(),
            evaluated_at: None,
            evaluated_at_ms: None,
            age_ms: None,
            soak: None,
            cause: None,
            largest_partition: None,
        };
        assert_eq!(gate_value(&g, 1_795_996_800_000), "T+5h46m");
        assert_eq!(clock(42 * 60_000), "T+42m");
        assert_eq!(clock(26 * 3_600_000 + 5 * 60_000), "T+1d02h05m");
        assert_eq!(thousands(1_632), "1,632");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
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
        // Red as crossterm writes it (a 256-colour index), then the reset.
        assert!(coloured.contains("\x1b[38;5;1mFAIL\x1b[0m"), "{coloured:?}");
        assert!(sgr_count(&coloured) > 0);
    }

    /// The text a terminal shows: escape sequences (CSI ... final byte) taken out.
    fn visible(text: &str) -> String {
        let mut out = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\x1b' && chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    /// Regression: a gate line longer than the terminal wrapped, and the cursor movements that
    /// redraw the block then landed lines too low: a scrolling garble.
    #[test]
    fn no_live_line_is_wider_than_the_terminal() {
        let reason = "the error ratio of the new broker's consumers is above the threshold of \
                      the plan for the third evaluation in a row; waiting";
        for columns in [120, 80, 40] {
            for colour in [false, true] {
                let text = visible(&draw_sized(colour, columns, reason));
                for line in text.lines() {
                    assert!(
                        line.chars().count() < columns,
                        "{columns}: {line:?} in\n{text}"
                    );
                }
                assert!(text.contains("FAIL"), "{text}");
            }
        }
    }
}
