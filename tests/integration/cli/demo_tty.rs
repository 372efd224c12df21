//! The terminal views under tmux (a real pseudo-terminal): `migrate demo` on 80 columns, whose
//! live view redrawn in place never writes a line wider than the screen (a wrapped line broke
//! the redraw into a scrolling garble) and whose final report comes out whole; `migrate status
//! --watch`, redrawn in place as the migration moves.
//!
//! Needs tmux (`scripts/ui_tools.sh install`): ignored by a plain `cargo test`, run by `.ci/run`
//! with `--include-ignored` after the install.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::Bench;

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("tmux {args:?}: {e} (scripts/ui_tools.sh install)"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The demo's report: from its first line to the end, as words (a wrapped line and the line it
/// continues read the same), the temporary directory's name (pid) left out.
fn report_words(text: &str) -> Vec<String> {
    let from = text
        .find("migration complete in")
        .unwrap_or_else(|| panic!("no report in:\n{text}"));
    let end = text[from..].find("EXIT=").map_or(text.len(), |i| from + i);
    text[from..end]
        .split_whitespace()
        .map(|w| {
            if w.contains("queue-migrate-demo-") {
                "DIR".to_string()
            } else {
                w.to_string()
            }
        })
        .collect()
}

#[test]
#[ignore = "needs tmux (scripts/ui_tools.sh install)"]
fn demo_under_an_80_column_terminal_never_wraps_a_line_and_keeps_its_report() {
    let bin = env!("CARGO_BIN_EXE_migrate");
    let session = format!("qm-demo-tty-{}", std::process::id());
    let cmd = format!(
        "env -u COLUMNS -u LINES -u MIGRATE_STATE -u NO_COLOR TERM=xterm-256color {bin} demo --seed 1 \
         --speed 5000; echo EXIT=$?; sleep 600"
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "80",
        "-y",
        "30",
        &cmd,
    ]);
    struct Kill(String);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("tmux")
                .args(["kill-session", "-t", &self.0])
                .output();
        }
    }
    let _kill = Kill(session.clone());
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut screens = Vec::new();
    let all = loop {
        // The visible screen while it runs, with wrapped lines joined (-J): a line wider than
        // the terminal shows as one long line.
        screens.push(tmux(&["capture-pane", "-p", "-J", "-t", &session]));
        let all = tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", &session]);
        if all.contains("EXIT=") {
            break all;
        }
        assert!(Instant::now() < deadline, "the demo did not end:\n{all}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(all.contains("EXIT=0"), "{all}");
    for text in screens.iter().chain(std::iter::once(&all)) {
        for line in text.lines() {
            assert!(
                line.chars().count() <= 80,
                "a line of {} columns: {line:?} in\n{text}",
                line.chars().count()
            );
        }
    }
    // The live block was drawn (and redrawn in place: it shows once at the end).
    assert!(all.contains("slices to new ["), "{all}");
    assert_eq!(all.matches("queue-migrate demo  T+").count(), 1, "{all}");
    // The report, the same as the same seed prints when not on a terminal.
    let piped = Command::new(bin)
        .args(["demo", "--seed", "1"])
        .env_remove("MIGRATE_STATE")
        .output()
        .expect("migrate demo");
    let piped = String::from_utf8_lossy(&piped.stdout);
    assert_eq!(
        report_words(&all),
        report_words(&piped),
        "{all}\n---\n{piped}"
    );
    assert!(all.contains("ok: nothing lost"), "{all}");
}

/// Issue 44: a fault struck without a word on the live view. In a terminal each `--fault` now
/// prints its event lines above the live block, on the simulated clock, whole (wrapped, never
/// cut), each once; the block shows where the migration stands (the standing's sentence) and
/// the outbox counter.
#[test]
#[ignore = "needs tmux (scripts/ui_tools.sh install)"]
fn demo_in_tmux_prints_an_event_line_for_each_fault() {
    let bin = env!("CARGO_BIN_EXE_migrate");
    let runs = [
        (
            "broker-outage",
            "4",
            &[
                "new broker unreachable: the gates reading it have no data",
                "new broker unreachable for 30m: producers buffering",
                "new broker reachable again after 1h 30m",
            ][..],
        ),
        (
            "bad-deploy",
            "2",
            &[
                "bad deploy of the consumer on the new route",
                "rollback slices[2] -> slices[1] [paused]",
                "the team rolls the consumer's deploy back",
            ][..],
        ),
        (
            "consumer-crash",
            "3",
            &["consumer crashed mid-batch:", "consumer restarted:"][..],
        ),
    ];
    // The three side by side: each in its own 80x30 terminal.
    let sessions: Vec<Session> = runs
        .iter()
        .map(|(fault, seed, _)| {
            let cmd = format!(
                "env -u COLUMNS -u LINES -u MIGRATE_STATE -u NO_COLOR TERM=xterm-256color {bin} \
                 demo --seed {seed} --fault {fault} --speed 20000; echo EXIT=$?; sleep 600"
            );
            Session::start(
                &format!("qm-demo-fault-{fault}-{}", std::process::id()),
                80,
                30,
                &cmd,
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(400);
    for (session, (fault, _, wants)) in sessions.iter().zip(runs.iter()) {
        let all = loop {
            let all = tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", &session.0]);
            if all.contains("EXIT=") {
                break all;
            }
            assert!(
                Instant::now() < deadline,
                "{fault}: the demo did not end:\n{all}"
            );
            std::thread::sleep(Duration::from_millis(500));
        };
        assert!(all.contains("EXIT=0"), "{fault}: {all}");
        for line in all.lines() {
            assert!(line.chars().count() <= 80, "{fault}: {line:?} in\n{all}");
        }
        // Event lines wrap under an indent: read them joined.
        let joined = all.replace("\n    ", " ");
        for want in *wants {
            let events: Vec<&str> = joined
                .lines()
                .filter(|l| l.starts_with("T+") && l.contains(want))
                .collect();
            assert_eq!(events.len(), 1, "{fault}: {want:?} once in\n{all}");
        }
        // The live block was redrawn under the events: one block, at the bottom, which says
        // where it stands in the standing's words and counts the outboxes.
        assert_eq!(all.matches("queue-migrate demo  T+").count(), 1, "{all}");
        assert!(all.contains("+ outboxes "), "{all}");
        assert!(
            all.contains("complete: the old broker may be decommissioned"),
            "{all}"
        );
        assert!(
            all.contains(&format!("fault {fault}: ")),
            "the report's fault window:\n{all}"
        );
    }
}

#[test]
#[ignore = "needs tmux (scripts/ui_tools.sh install)"]
fn status_watch_redraws_in_place_as_the_migration_moves() {
    let b = Bench::new();
    b.init();
    let bin = env!("CARGO_BIN_EXE_migrate");
    let session = format!("qm-status-watch-{}", std::process::id());
    let cmd = format!(
        "cd {dir} && env -u COLUMNS -u LINES MIGRATE_STATE={state} QM_PROM_URL={prom} \
         QM_SCRAPE_URL={scrape} {bin} status local --watch --interval 200ms; echo EXIT=$?; sleep 600",
        dir = b.dir.path().display(),
        state = b.path("state.db").display(),
        prom = b.prom_url,
        scrape = b.indicators.scrape_url(),
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "50",
        "-y",
        "20",
        &cmd,
    ]);
    struct Kill(String);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("tmux")
                .args(["kill-session", "-t", &self.0])
                .output();
        }
    }
    let _kill = Kill(session.clone());
    let screen = |want: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let all = tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", &session]);
            if all.contains(want) {
                return all;
            }
            assert!(Instant::now() < deadline, "never showed {want:?}:\n{all}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    screen("local: planned");
    b.ok(
        &["pause", "local", "--reason", "a pause the watch shows"],
        0,
    );
    let all = screen("a pause the watch shows");
    // Redrawn in place: one block on the screen and in the history, the new one.
    assert_eq!(all.matches("local: planned").count(), 1, "{all}");
    assert!(all.contains("[PAUSED]"), "{all}");
    for line in all.lines() {
        assert!(line.chars().count() <= 50, "{line:?} in\n{all}");
    }
    // Until interrupted.
    tmux(&["send-keys", "-t", &session, "C-c"]);
    screen("EXIT=0");
}

/// Issue 44: a step not yet evaluated printed seven lines of advice per gate; with three gates
/// an 80x24 `status --watch` lost its footer. Now each gate says "awaiting first evaluation"
/// and the advice comes once, under the table.
#[test]
#[ignore = "needs tmux (scripts/ui_tools.sh install)"]
fn status_watch_80x24_with_three_unevaluated_gates_keeps_its_footer() {
    let gate = "      - { name: new consumer connected, source: app, query: app_new_consumer_connected, pass_if: \">= 1\" }";
    let plan = include_str!("../../../plans/local.yaml").replace(
        gate,
        &format!(
            "{gate}\n{}\n{}",
            gate.replace(
                "new consumer connected,",
                "new consumer connected on every partition,"
            ),
            gate.replace(
                "new consumer connected,",
                "new consumer connected in every region,"
            ),
        ),
    );
    let b = Bench::with_plan(&plan);
    b.init();
    b.ok(&["advance", "local"], 0);
    let bin = env!("CARGO_BIN_EXE_migrate");
    let session = format!("qm-status-watch-80x24-{}", std::process::id());
    let cmd = format!(
        "cd {dir} && env -u COLUMNS -u LINES MIGRATE_STATE={state} QM_PROM_URL={prom} \
         QM_SCRAPE_URL={scrape} {bin} status local --watch --interval 200ms; echo EXIT=$?; sleep 600",
        dir = b.dir.path().display(),
        state = b.path("state.db").display(),
        prom = b.prom_url,
        scrape = b.indicators.scrape_url(),
    );
    let _kill = Session::start(&session, 80, 24, &cmd);
    let deadline = Instant::now() + Duration::from_secs(30);
    let screen = loop {
        let screen = tmux(&["capture-pane", "-p", "-t", &session]);
        if screen.contains("Ctrl-C to stop") || Instant::now() > deadline {
            break screen;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        screen.contains("Ctrl-C to stop"),
        "the footer is gone:\n{screen}"
    );
    assert_eq!(
        screen.matches("awaiting first evaluation").count(),
        3,
        "the three gates:\n{screen}"
    );
    assert_eq!(screen.matches("--dry-run").count(), 1, "{screen}");
    // No daemon runs here: the standing says so first (issue 56).
    assert!(
        screen
            .lines()
            .next()
            .is_some_and(|l| l.starts_with("local: not driven")),
        "{screen}"
    );
    tmux(&["send-keys", "-t", &session, "C-c"]);
}

/// Issue 56: with a source down, `status --watch` repeated its error under each gate reading
/// it, and on a small screen the guards and the refresh line fell off. Now the gates share one
/// summary naming the source and each of them, the error said once beside the standing's.
#[test]
#[ignore = "needs tmux (scripts/ui_tools.sh install)"]
fn status_watch_80x24_with_a_source_down_says_its_error_once_for_its_gates() {
    let gate = "      - { name: new consumer connected, source: app, query: app_new_consumer_connected, pass_if: \">= 1\" }";
    let plan = include_str!("../../../plans/local.yaml").replace(
        gate,
        &format!(
            "{gate}\n{}\n{}",
            gate.replace(
                "new consumer connected,",
                "new consumer connected on every partition,"
            ),
            gate.replace(
                "new consumer connected,",
                "new consumer connected in every region,"
            ),
        ),
    );
    let b = Bench::with_plan(&plan);
    b.init();
    b.ok(&["advance", "local"], 0);
    // Nothing listens there: the three gates are evaluated without data, the source unreachable.
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/metrics", l.local_addr().unwrap())
    };
    let r = b.run_env(&["advance", "local"], &[("QM_SCRAPE_URL", &refused)]);
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    let bin = env!("CARGO_BIN_EXE_migrate");
    let session = format!("qm-status-watch-down-{}", std::process::id());
    let cmd = format!(
        "cd {dir} && env -u COLUMNS -u LINES MIGRATE_STATE={state} QM_PROM_URL={prom} \
         QM_SCRAPE_URL={refused} {bin} status local --watch --interval 200ms; echo EXIT=$?; sleep 600",
        dir = b.dir.path().display(),
        state = b.path("state.db").display(),
        prom = b.prom_url,
    );
    let _kill = Session::start(&session, 80, 24, &cmd);
    let deadline = Instant::now() + Duration::from_secs(30);
    let screen = loop {
        let screen = tmux(&["capture-pane", "-p", "-t", &session]);
        if screen.contains("Ctrl-C to stop") || Instant::now() > deadline {
            break screen;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        screen.contains("Ctrl-C to stop"),
        "the footer is gone:\n{screen}"
    );
    let flat = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        flat.matches("source app unreachable").count(),
        2,
        "the standing and one summary:\n{screen}"
    );
    assert!(flat.contains("no data for 3 gates: exit new consumer connected, new consumer connected on every partition, new consumer connected in every region"), "{screen}");
    assert_eq!(
        flat.matches("cannot connect").count(),
        2,
        "the standing and the summary, not each gate:\n{screen}"
    );
    tmux(&["send-keys", "-t", &session, "C-c"]);
}

/// A tmux session running a command, killed when dropped.
struct Session(String);

impl Session {
    fn start(name: &str, columns: u16, rows: u16, cmd: &str) -> Session {
        let (x, y) = (columns.to_string(), rows.to_string());
        tmux(&["new-session", "-d", "-s", name, "-x", &x, "-y", &y, cmd]);
        Session(name.to_string())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .output();
    }
}
