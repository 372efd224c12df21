//! `migrate` killed with SIGKILL at random instants during transitions, on SQLite and on
//! PostgreSQL: the CLI (`advance`, `rollback`) and the daemon (`migrate run` driving a fast plan,
//! with guard breaches that roll back and pause).
//!
//! After every kill:
//! - the journal is a chain: `init` first, each `seq` and `generation`
//!   one above the previous (so none repeats), each `from` the previous `to`, each move a legal
//!   one (advance one rung up, rollback one rung down, pause/resume in place), and what was
//!   journaled before is still there unchanged (append-only);
//! - a killed command added at most one entry; one that finished with exit 0 added exactly one
//!   (acknowledged means durable), one that held (exit 3) none;
//! - the routing file is whole JSON, never ahead of the journal, and equal to the journal entry of
//!   its generation (a file behind means the kill fell between the commit and the publication);
//! - the next start converges: `migrate status` (the CLI loops) or the restarted daemon's first
//!   tick (the daemon loops) re-publishes, after which the routing file's generation, state, step,
//!   slices and pause equal the status, and the status equals the journal's last entry.
//!
//! `QM_CRASH_ITERATIONS` is the number of CLI kills per backend (default 150 on SQLite, 70 on
//! PostgreSQL); the daemon loops kill a quarter as many daemons, and leave the routing behind on
//! purpose every eighth round (a publication that fails) so that a restarted daemon's
//! re-publication is exercised whatever the kills hit. `QM_CRASH_SEED` replays a run's delays
//! (the seed is printed). The journal and the row are read from the store in this process between
//! kills; `migrate history --json` and `migrate status` are compared with them every few rounds
//! and after every kill that left the routing behind. The PostgreSQL tests are ignored
//! unless asked for (`--include-ignored`, with `QM_TEST_POSTGRES_URL` set, as `.ci/run` does), each
//! in a database of its own (dropped when it passes).

use crate::common;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Bench, DaemonChild, Postgres, fast_local_plan, poll_until};
use queue_migrate::controller::views::EntryView;
use queue_migrate::store::MigrationRecord;
use queue_migrate::store::any::AnyStore;
use queue_migrate::store::traits::*;
use serde_json::Value;

/// The rungs of plans/local.yaml, as the journal names them.
const LADDER: [&str; 9] = [
    "planned",
    "consume_dual",
    "synthetic",
    "slices[0]",
    "slices[1]",
    "slices[2]",
    "drain",
    "disconnect",
    "complete",
];

fn rung(state: &str) -> usize {
    LADDER
        .iter()
        .position(|s| *s == state)
        .unwrap_or_else(|| panic!("unknown state {state:?} in the journal"))
}

/// `slices[1]` → (`slices`, Some(1)), as the routing document and `status` write it.
fn doc_state(state: &str) -> (String, Option<u64>) {
    match state.strip_prefix("slices[") {
        Some(rest) => (
            "slices".to_string(),
            Some(rest.trim_end_matches(']').parse().unwrap()),
        ),
        None => (state.to_string(), None),
    }
}

/// CLI kills per backend: `QM_CRASH_ITERATIONS`, else `default` (the daemon loops kill a quarter
/// as many daemons).
fn iterations(default: usize) -> usize {
    std::env::var("QM_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The defaults: PostgreSQL commands take about three times as long here (a connection and
/// several synchronous commits per command), so fewer kills keep both backends near a minute.
const SQLITE_KILLS: usize = 150;
const POSTGRES_KILLS: usize = 70;

/// SplitMix64: the kill delays, reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn new(test: &str) -> Rng {
        let seed = std::env::var("QM_CRASH_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("{test}: seed {seed} (QM_CRASH_SEED={seed} replays these delays)");
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A migration of the fast plan in a store (SQLite in the bench's directory, or a database of
/// its own on PostgreSQL), driven through the real binary.
struct Rig {
    bench: Bench,
    state: String,
    /// The CLI's clock is the bench's injected one (false: the wall clock, as the daemon's).
    injected_time: bool,
    /// The same store, read in this process between kills (cheaper than a `migrate history`).
    store: AnyStore,
    rt: tokio::runtime::Runtime,
}

impl Rig {
    fn new(state: Option<String>, injected_time: bool) -> Rig {
        let bench = Bench::with_plan(&fast_local_plan());
        bench.indicators.all_green();
        let state = state.unwrap_or_else(|| bench.path("state.db").display().to_string());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let store = rt
            .block_on(queue_migrate::store::any::open(&state))
            .unwrap();
        let rig = Rig {
            bench,
            state,
            injected_time,
            store,
            rt,
        };
        rig.ok(&["init", "local.yaml"], 0);
        rig
    }

    /// The journal as `migrate history --json` shows it, read from the store directly.
    fn journal(&self) -> Vec<Value> {
        let entries = self.rt.block_on(self.store.journal("local")).unwrap();
        entries
            .iter()
            .map(|e| serde_json::to_value(EntryView::of(e)).unwrap())
            .collect()
    }

    /// The migration's row.
    fn record(&self) -> MigrationRecord {
        self.rt.block_on(self.store.get("local")).unwrap()
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.bench.command(args);
        c.env("MIGRATE_STATE", &self.state);
        if !self.injected_time {
            c.env_remove("MIGRATE_NOW");
        }
        c
    }

    fn ok(&self, args: &[&str], code: i32) -> String {
        let out = self.cmd(args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(code),
            "migrate {args:?}\nstdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    fn history(&self) -> Vec<Value> {
        serde_json::from_str(&self.ok(&["history", "local", "--json"], 0)).unwrap()
    }

    /// `migrate status`: loading the migration re-publishes a routing left behind.
    fn status(&self) -> Value {
        serde_json::from_str(&self.ok(&["status", "local", "--json"], 0)).unwrap()
    }

    /// The routing file's generation, `None` while there is no routing file.
    fn routing_generation(&self) -> Option<i64> {
        let path = self.bench.path("local.routing.json");
        std::fs::metadata(&path).ok().filter(|m| m.is_file())?;
        self.routing()["generation"].as_i64()
    }

    /// A transition whose publication fails (the routing file's path is a directory for the
    /// while): committed, the routing left behind exactly as by a kill between the commit and
    /// the publication. The path is freed again before returning.
    fn commit_without_publishing(&self, args: &[&str]) {
        let path = self.bench.path("local.routing.json");
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir_all(path.join("in-the-way")).unwrap();
        let out = self.cmd(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("the transition is committed"), "{stderr}");
        std::fs::remove_dir_all(&path).unwrap();
    }

    /// The routing file, which must always be whole JSON (it is replaced by a rename).
    fn routing(&self) -> Value {
        let path = self.bench.path("local.routing.json");
        let text = std::fs::read_to_string(&path).expect("the routing file exists after init");
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("the routing file is not whole JSON ({e}):\n{text}"))
    }
}

/// The last entry of a journal that [`check_journal`] accepted.
#[derive(Debug, Clone, PartialEq)]
struct Last {
    seq: i64,
    generation: i64,
    state: String,
    paused: bool,
}

/// The journal is a chain of legal moves, and extends `before` without changing it.
fn check_journal(journal: &[Value], before: &[Value]) -> Last {
    assert!(!journal.is_empty(), "an empty journal");
    let first = &journal[0];
    assert_eq!(first["command"], "init", "{first}");
    assert_eq!(first["seq"], 1, "{first}");
    assert!(
        journal.len() >= before.len(),
        "the journal lost entries: {} then {}",
        before.len(),
        journal.len()
    );
    for (i, (old, new)) in before.iter().zip(journal).enumerate() {
        assert_eq!(old, new, "journal entry {i} changed");
    }
    for pair in journal.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let ctx = || format!("\n{a}\n{b}");
        assert_eq!(
            b["seq"].as_i64().unwrap(),
            a["seq"].as_i64().unwrap() + 1,
            "seq must go up by one{}",
            ctx()
        );
        assert_eq!(
            b["generation"].as_i64().unwrap(),
            a["generation"].as_i64().unwrap() + 1,
            "generation must go up by one{}",
            ctx()
        );
        assert_eq!(a["to"], b["from"], "from must be the previous to{}", ctx());
        assert_eq!(a["to_paused"], b["from_paused"], "{}", ctx());
        let (from, to) = (
            rung(b["from"].as_str().unwrap()),
            rung(b["to"].as_str().unwrap()),
        );
        let (was_paused, paused) = (
            b["from_paused"].as_bool().unwrap(),
            b["to_paused"].as_bool().unwrap(),
        );
        match b["command"].as_str().unwrap() {
            "advance" => {
                assert_eq!(to, from + 1, "advance moves one rung up{}", ctx());
                assert!(!was_paused && !paused, "advance while paused{}", ctx());
            }
            "rollback" => assert_eq!(to + 1, from, "rollback moves one rung down{}", ctx()),
            "pause" => assert!(to == from && paused, "{}", ctx()),
            "resume" => assert!(to == from && was_paused && !paused, "{}", ctx()),
            other => panic!("unexpected command {other}{}", ctx()),
        }
    }
    let last = journal.last().unwrap();
    Last {
        seq: last["seq"].as_i64().unwrap(),
        generation: last["generation"].as_i64().unwrap(),
        state: last["to"].as_str().unwrap().to_string(),
        paused: last["to_paused"].as_bool().unwrap(),
    }
}

/// The routing file is never ahead of the journal and equals the entry of its generation; the
/// store never says published what the file does not have; the row equals the journal's last
/// entry. Returns whether the routing needs re-publishing (the kill fell between a commit and its
/// publication, or between the file write and the store noting it).
fn check_after_kill(rig: &Rig, journal: &[Value], last: &Last) -> bool {
    let doc = rig.routing();
    let generation = doc["generation"].as_i64().unwrap();
    assert!(
        generation <= last.generation,
        "the routing file (generation {generation}) is ahead of the journal ({})",
        last.generation
    );
    let entry = journal
        .iter()
        .find(|e| e["generation"] == generation)
        .unwrap_or_else(|| panic!("no journal entry of the routing's generation {generation}"));
    let (state, step) = doc_state(entry["to"].as_str().unwrap());
    assert_eq!(doc["state"], state.as_str(), "{doc}\n{entry}");
    assert_eq!(doc["step"].as_u64(), step, "{doc}\n{entry}");
    assert_eq!(doc["paused"], entry["to_paused"], "{doc}\n{entry}");

    let rec = rig.record();
    assert_eq!(
        rec.state.to_string(),
        last.state,
        "the row and the journal differ"
    );
    assert_eq!(rec.paused, last.paused);
    assert_eq!(rec.version, last.seq);
    assert_eq!(rec.generation, last.generation);
    assert!(
        rec.published_generation <= generation,
        "the store says generation {} is published, the file has {generation}",
        rec.published_generation
    );
    generation < last.generation || rec.published_generation < rec.generation
}

/// The CLI's own views agree: `migrate history --json` is the journal read directly, `migrate
/// status` (which re-publishes a routing left behind) equals its last entry with the routing
/// published, and the routing file is the status' routing.
fn check_converged(rig: &Rig, journal: &[Value], last: &Last) {
    assert_eq!(
        rig.history(),
        journal,
        "history --json and the store differ"
    );
    let mut s = rig.status();
    if s["routing_published"] == false {
        // The status of the very command that re-published shows the row as it was loaded,
        // before the re-publication: the one after it must see it published.
        s = rig.status();
    }
    let (state, step) = doc_state(&last.state);
    assert_eq!(s["state"], state.as_str(), "{s}\n{last:?}");
    assert_eq!(s["step"].as_u64(), step, "{s}");
    assert_eq!(s["paused"], last.paused, "{s}");
    assert_eq!(s["version"], last.seq, "{s}");
    assert_eq!(s["routing"]["generation"], last.generation, "{s}");
    assert_eq!(s["routing_published"], true, "{s}");
    let doc = rig.routing();
    for field in [
        "generation",
        "state",
        "step",
        "paused",
        "slices_total",
        "slices_migrated",
        "consume",
    ] {
        assert_eq!(
            doc[field], s["routing"][field],
            "routing file and status differ in {field}:\n{doc}\n{s}"
        );
    }
}

/// How a child ended.
fn ending(status: std::process::ExitStatus) -> Result<i32, i32> {
    match (status.code(), status.signal()) {
        (Some(code), _) => Ok(code),
        (None, Some(sig)) => Err(sig),
        (None, None) => panic!("a child neither exited nor was killed: {status:?}"),
    }
}

#[derive(Default)]
struct Tally {
    kills: usize,
    finished: usize,
    committed_by_killed: usize,
    routing_behind: usize,
    transitions: usize,
}

impl Tally {
    fn print(&self, test: &str, took: Duration) {
        eprintln!(
            "{test}: {} killed ({} of them after committing), {} finished first, {} left the \
             routing to re-publish, {} transitions journaled, in {took:.1?}",
            self.kills,
            self.committed_by_killed,
            self.finished,
            self.routing_behind,
            self.transitions
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The CLI.

fn cli_loop(test: &str, state: Option<String>, kills: usize) {
    let started = Instant::now();
    let mut rng = Rng::new(test);
    let mut rig = Rig::new(state, true);

    // How long an uninterrupted command takes here: the first kill window. It then adapts, so
    // that kills straddle the commit: shorter after a command that finished first, longer after
    // one killed before it committed. Half the delays fall in the window's second half.
    let mut took: Vec<Duration> = (0..3)
        .map(|_| {
            rig.bench.minute += 1;
            let t = Instant::now();
            rig.ok(&["advance", "local"], 0);
            t.elapsed()
        })
        .collect();
    took.sort();
    let mut window = (took[1].as_millis() as u64 * 6 / 5).clamp(30, 3000);
    eprintln!("{test}: an advance takes {took:?}: first kill window 0..{window} ms");
    let mut journal = rig.journal();
    let mut last = check_journal(&journal, &[]);
    check_after_kill(&rig, &journal, &last);
    check_converged(&rig, &journal, &last);

    let mut tally = Tally::default();
    for i in 0..kills {
        rig.bench.minute += 1;
        let rollback = last.state == "disconnect" || (last.state != "planned" && rng.chance(35));
        let args: &[&str] = if rollback {
            &["rollback", "local", "--reason", "crash test"]
        } else {
            &["advance", "local"]
        };
        let delay = if rng.chance(50) {
            rng.below(window + 1)
        } else {
            window / 2 + rng.below(window / 2 + 1)
        };
        let mut child = rig
            .cmd(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The fault itself: SIGKILL after a random delay.
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let ended = ending(child.wait().unwrap());

        let now = rig.journal();
        let next = check_journal(&now, &journal);
        let behind = check_after_kill(&rig, &now, &next);
        let added = now.len() - journal.len();
        match ended {
            Err(9) => {
                tally.kills += 1;
                assert!(
                    added <= 1,
                    "iteration {i}: one killed command added {added}"
                );
                tally.committed_by_killed += added;
            }
            Ok(0) => {
                tally.finished += 1;
                assert_eq!(
                    added, 1,
                    "iteration {i}: {args:?} exited 0 but journaled {added}"
                );
            }
            Ok(3) => {
                tally.finished += 1;
                assert_eq!(added, 0, "iteration {i}: a hold journaled {added}");
            }
            other => panic!("iteration {i}: {args:?} ended {other:?}"),
        }
        tally.transitions += added;
        window = match (ended, added) {
            (Ok(_), _) => window * 19 / 20,
            (Err(_), 0) => window * 21 / 20,
            (Err(_), _) => window,
        }
        .clamp(30, 3000);
        if behind {
            // The next start (`status` loads the migration) re-publishes.
            tally.routing_behind += 1;
            check_converged(&rig, &now, &next);
            assert!(!check_after_kill(&rig, &now, &next), "still behind");
        } else if i % 10 == 9 {
            check_converged(&rig, &now, &next);
        }
        journal = now;
        last = next;
    }
    check_converged(&rig, &journal, &last);
    tally.print(test, started.elapsed());
    eprintln!("{test}: last kill window 0..{window} ms");
    assert!(tally.kills > 0, "no command was killed");
}

#[test]
fn cli_killed_at_random_instants_on_sqlite_keeps_a_consistent_journal_and_routing() {
    cli_loop("cli/sqlite", None, iterations(SQLITE_KILLS));
}

#[test]
#[ignore = "needs QM_TEST_POSTGRES_URL (scripts/services.sh start postgres)"]
fn cli_killed_at_random_instants_on_postgres_keeps_a_consistent_journal_and_routing() {
    let db = Postgres::fresh("crash_cli");
    cli_loop(
        "cli/postgres",
        Some(db.url.clone()),
        iterations(POSTGRES_KILLS),
    );
    db.drop_database();
}

// ---------------------------------------------------------------------------------------------
// The daemon.

fn spawn_daemon(rig: &Rig, id: &str) -> DaemonChild {
    let cmd = rig.cmd(&[
        "run",
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "50ms",
        "--lease-ttl",
        "2s",
        "--id",
        id,
    ]);
    DaemonChild::spawn(cmd, Duration::from_secs(30)).expect("the daemon printed its address")
}

/// Wait until `d` leads, then for two more ticks of its loop (the second of them started after
/// it led, so it ticked the migration): the routing file must then be at `generation`. Returns
/// how long after the daemon's start that was.
fn republished_within_a_tick(rig: &Rig, d: &DaemonChild, generation: i64) -> Duration {
    let started = Instant::now();
    let mut led_at = None;
    poll_until(
        "the restarted daemon to lead",
        Duration::from_secs(15),
        || {
            led_at = d
                .healthz()
                .filter(|h| h["leader"] == true)
                .and_then(|h| h["ticks"].as_u64());
            led_at.is_some()
        },
    );
    let n = led_at.unwrap();
    // A migration's tick may outlive its round (issue 54): two rounds, then no tick running.
    poll_until(
        "two ticks of the restarted daemon, none of them still running",
        Duration::from_secs(15),
        || {
            d.ticks() >= n + 2
                && d.healthz()
                    .is_some_and(|h| h["ticks_running"].as_u64() == Some(0))
        },
    );
    assert!(
        rig.routing_generation().is_some_and(|g| g >= generation),
        "a tick of the restarted daemon did not re-publish generation {generation}: {:?}",
        rig.routing_generation()
    );
    started.elapsed()
}

fn daemon_loop(test: &str, state: Option<String>, kills: usize) {
    let started = Instant::now();
    let mut rng = Rng::new(test);
    let rig = Rig::new(state, false);
    let mut journal = rig.journal();
    let mut last = check_journal(&journal, &[]);
    let mut behind = check_after_kill(&rig, &journal, &last);
    let mut tally = Tally::default();
    let mut slowest_republish = Duration::ZERO;
    let rounds = (kills / 4).max(3);
    for i in 0..rounds {
        // A guard breach now and then: the daemon rolls back one step and pauses.
        let breach = rng.chance(25);
        rig.bench
            .indicators
            .set("app_error_ratio_new", if breach { 0.2 } else { 0.001 });
        if !behind && i % 8 == 0 {
            // Now and then a routing left behind for certain (the kills find that window only
            // by luck): a rollback committed but not published, then no routing file at all.
            if rung(&last.state) > 1 {
                rig.commit_without_publishing(&["rollback", "local", "--reason", "crash test"]);
            } else {
                rig.commit_without_publishing(&["advance", "local"]);
            }
            let now = rig.journal();
            last = check_journal(&now, &journal);
            journal = now;
            behind = true;
            tally.routing_behind += 1;
        }
        // Same id: a restarted controller renews its own lease at once.
        let d = spawn_daemon(&rig, "crash");
        if behind {
            // The restarted daemon's first tick as the leader re-publishes what was left behind.
            let took = republished_within_a_tick(&rig, &d, last.generation);
            slowest_republish = slowest_republish.max(took);
        }
        // The fault itself: SIGKILL after a random delay (the daemon climbs a rung a tick; the
        // drain waits 2 s).
        std::thread::sleep(Duration::from_millis(rng.below(1500)));
        d.kill9();
        tally.kills += 1;

        let now = rig.journal();
        let next = check_journal(&now, &journal);
        behind = check_after_kill(&rig, &now, &next);
        let added = now.len() - journal.len();
        tally.transitions += added;
        tally.committed_by_killed += usize::from(added > 0);
        journal = now;
        last = next;
        if behind {
            // Left as it is for the next daemon to repair.
            tally.routing_behind += 1;
            continue;
        }
        // Let the CLI steer (it would re-publish, so not while the routing is behind): resume a
        // paused migration, bring it down from the drain so that the daemon has rungs to climb.
        if i % 5 == 4 {
            check_converged(&rig, &journal, &last);
        }
        if last.paused {
            rig.ok(&["resume", "local"], 0);
        }
        let mut state = last.state.clone();
        while rung(&state) >= rung("drain") || (rung(&state) > 1 && rng.chance(15)) {
            let out: Value = serde_json::from_str(&rig.ok(
                &["rollback", "local", "--reason", "crash test", "--json"],
                0,
            ))
            .unwrap();
            state = out["to"].as_str().unwrap().to_string();
        }
        let now = rig.journal();
        last = check_journal(&now, &journal);
        journal = now;
        if i % 10 == 9 {
            eprintln!("{test}: round {}: at {}", i + 1, last.state);
        }
    }
    // A last start: it converges, and the journal and status agree.
    let d = spawn_daemon(&rig, "crash");
    republished_within_a_tick(&rig, &d, last.generation);
    d.kill9();
    let now = rig.journal();
    let last = check_journal(&now, &journal);
    check_after_kill(&rig, &now, &last);
    check_converged(&rig, &now, &last);
    tally.print(test, started.elapsed());
    eprintln!(
        "{test}: slowest re-publication by a restarted daemon (from its start): \
         {slowest_republish:?}"
    );
    assert!(
        tally.transitions >= rounds / 2,
        "the daemons hardly moved ({} transitions in {rounds} rounds)",
        tally.transitions
    );
}

#[test]
fn daemon_killed_at_random_instants_on_sqlite_keeps_a_consistent_journal_and_routing() {
    daemon_loop("daemon/sqlite", None, iterations(SQLITE_KILLS));
}

#[test]
#[ignore = "needs QM_TEST_POSTGRES_URL (scripts/services.sh start postgres)"]
fn daemon_killed_at_random_instants_on_postgres_keeps_a_consistent_journal_and_routing() {
    let db = Postgres::fresh("crash_daemon");
    daemon_loop(
        "daemon/postgres",
        Some(db.url.clone()),
        iterations(POSTGRES_KILLS),
    );
    db.drop_database();
}
