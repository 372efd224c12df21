//! The whole CLI story against real HTTP sources: a migration from planned to complete, a
//! rollback at every state, holds when a source is down, `for:` durations with injected time.

use crate::common;

use common::Bench;

#[test]
fn a_whole_migration_from_planned_to_complete() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    assert_eq!(b.state(), ("planned".into(), None));
    assert_eq!(b.routing_file()["consume"], serde_json::json!(["old"]));

    let expected = [
        ("consume_dual", None, 0, vec!["old", "new"]),
        ("synthetic", None, 0, vec!["old", "new"]),
        ("slices", Some(0), 1, vec!["old", "new"]),
        ("slices", Some(1), 4, vec!["old", "new"]),
        ("slices", Some(2), 8, vec!["old", "new"]),
        ("drain", None, 8, vec!["old", "new"]),
        ("disconnect", None, 8, vec!["new"]),
        ("complete", None, 8, vec!["new"]),
    ];
    let mut last_generation = b.routing_file()["generation"].as_u64().unwrap();
    for (state, step, migrated, consume) in expected {
        let now = b.advance_green();
        assert_eq!(now, (state.to_string(), step));
        let doc = b.routing_file();
        assert_eq!(doc["state"], state);
        assert_eq!(doc["slices_migrated"], migrated);
        assert_eq!(doc["consume"], serde_json::json!(consume));
        let g = doc["generation"].as_u64().unwrap();
        assert!(g > last_generation, "generation must increase");
        last_generation = g;
    }

    // Nothing leaves complete.
    let r = b.ok(&["rollback", "local", "--reason", "too late"], 2);
    assert!(r.stderr.contains("complete"), "{}", r.stderr);

    // The journal is a consistent chain: each transition starts where the previous ended.
    let history = b.ok(&["history", "local", "--json"], 0).json();
    let entries = history.as_array().unwrap();
    assert_eq!(entries.first().unwrap()["command"], "init");
    for pair in entries.windows(2) {
        assert_eq!(pair[0]["to"], pair[1]["from"], "{pair:?}");
        assert_eq!(
            pair[1]["seq"].as_i64(),
            pair[0]["seq"].as_i64().map(|s| s + 1)
        );
    }
    // Every gated advance carries its evidence.
    let drain_exit = entries
        .iter()
        .find(|e| e["from"] == "drain")
        .expect("left drain");
    let gates = drain_exit["evidence"]["gates"].as_array().unwrap();
    assert_eq!(gates[0]["name"], "old queue empty");
    assert_eq!(gates[0]["verdict"], "pass");
}

/// A rollback of a paused migration does not tell the person to pause it.
#[test]
fn a_rollback_of_a_paused_migration_says_nothing_about_pausing() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.advance_green();
    b.ok(&["pause", "local", "--reason", "looking"], 0);
    let r = b.ok(&["rollback", "local", "--reason", "rehearsal"], 0);
    assert!(!r.stderr.contains("migrate pause"), "{}", r.stderr);
    assert_eq!(b.state(), ("planned".to_string(), None));
}

#[test]
fn rollback_at_every_state_moves_exactly_one_step_back() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    let r = b.ok(&["rollback", "local", "--reason", "nothing yet"], 2);
    assert!(r.stderr.contains("nothing to roll back"), "{}", r.stderr);

    let mut previous = b.state();
    loop {
        let now = b.advance_green();
        if now.0 == "complete" {
            break;
        }
        let before = b.status()["version"].as_i64().unwrap();
        let r = b.ok(&["rollback", "local", "--reason", "rehearsal"], 0);
        assert_eq!(b.state(), previous, "rollback from {now:?}");
        // Not paused: a daemon would advance it again; the command says so.
        assert!(
            r.stderr.contains("not paused by a rollback"),
            "{}",
            r.stderr
        );
        assert_eq!(b.status()["version"].as_i64().unwrap(), before + 1);
        // ...and the routing file follows.
        let doc = b.routing_file();
        assert_eq!(doc["state"], previous.0.as_str());
        // Climb back up to where we were.
        assert_eq!(b.advance_green(), now);
        previous = now;
    }
}

#[test]
fn a_source_that_is_down_holds_and_changes_nothing() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.advance_green(); // consume_dual
    b.advance_green(); // synthetic: its gate reads the prometheus source
    b.indicators.set_down(true);
    let version = b.status()["version"].as_i64().unwrap();
    let r = b.ok(&["advance", "local", "--json"], 3);
    let out = r.json();
    assert_eq!(out["gates"][0]["verdict"], "no_data");
    assert!(
        out["gates"][0]["reason"].as_str().unwrap().contains("503"),
        "{}",
        out["gates"][0]["reason"]
    );
    assert_eq!(b.status()["version"].as_i64().unwrap(), version);

    // A source that does not listen at all is a hold too.
    b.prom_url = "http://127.0.0.1:9".into();
    let r = b.ok(&["advance", "local", "--json"], 3);
    assert_eq!(r.json()["gates"][0]["verdict"], "no_data");
    let status = b.status();
    assert_eq!(status["gates"][0]["verdict"], "no_data");
    assert!(
        status["gates"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("127.0.0.1:9")
    );
    assert_eq!(status["version"].as_i64().unwrap(), version);
}

#[test]
fn garbage_metrics_hold_with_the_line_number() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.advance_green(); // consume_dual: its gate reads the scrape source
    b.indicators.world.lock().unwrap().extra_metrics = "broken{x=\"1\" 3\n".into();
    let r = b.ok(&["advance", "local", "--json"], 3);
    let reason = r.json()["gates"][0]["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("line 11"), "{reason}");
}

#[test]
fn for_durations_are_honoured_with_injected_time() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    while b.state().0 != "drain" {
        b.advance_green();
    }
    // quiet = max_backoff 2m + visibility_timeout 1m = 3m.
    let r = b.ok(&["advance", "local", "--json"], 3);
    assert!(
        r.json()["gates"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("held for 0s of 3m")
    );
    b.minute += 2;
    b.ok(&["advance", "local"], 3);
    // A message reappears (a retry came back): the clock restarts.
    b.indicators.set("app_old_depth", 4.0);
    b.minute += 1;
    let r = b.ok(&["advance", "local", "--json"], 3);
    assert_eq!(r.json()["gates"][0]["verdict"], "fail");
    b.indicators.set("app_old_depth", 0.0);
    b.minute += 1;
    b.ok(&["advance", "local"], 3);
    b.minute += 2;
    b.ok(&["advance", "local"], 3);
    b.minute += 1;
    b.ok(&["advance", "local"], 0);
    assert_eq!(b.state().0, "disconnect");
}

#[test]
fn minimum_time_is_a_minimum_never_sufficient() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    while b.state() != ("slices".into(), Some(0)) {
        b.advance_green();
    }
    // observe: 1m. Gates pass but the minute has not passed.
    let r = b.ok(&["advance", "local"], 3);
    assert!(r.stdout.contains("minimum time not met"), "{}", r.stdout);
    // Time passes but the gate fails: still no.
    b.minute += 5;
    b.indicators.set("app_error_ratio_new", 0.02);
    b.ok(&["advance", "local"], 3);
    b.indicators.set("app_error_ratio_new", 0.001);
    b.ok(&["advance", "local"], 0);
}

#[test]
fn a_failing_guard_blocks_advance() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    while b.state() != ("slices".into(), Some(0)) {
        b.advance_green();
    }
    b.minute += 5;
    b.indicators.set("app_error_ratio_new", 0.2);
    let r = b.ok(&["advance", "local", "--json"], 3);
    let blockers = r.json()["blockers"].to_string();
    assert!(
        blockers.contains("guard error ratio breach fails"),
        "{blockers}"
    );
}

#[test]
fn dry_run_shows_the_routing_it_would_publish_and_changes_nothing() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.advance_green();
    b.advance_green();
    let before = b.status();
    let r = b.ok(&["advance", "local", "--dry-run", "--json"], 0);
    let out = r.json();
    assert_eq!(out["routing"]["state"], "slices");
    assert_eq!(out["routing"]["slices_migrated"], 1);
    assert_eq!(out["applied"], serde_json::Value::Null);
    assert_eq!(b.status()["version"], before["version"]);
    assert_eq!(b.routing_file()["state"], "synthetic");
}

#[test]
fn force_needs_a_reason_and_is_journaled() {
    let mut b = Bench::new();
    b.init();
    b.advance_green(); // planned -> consume_dual has no gates
    // Sources report nothing: the gate fails.
    let r = b.run(&["advance", "local", "--force"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    b.ok(&["advance", "local"], 3);
    b.ok(
        &[
            "advance",
            "local",
            "--force",
            "--reason",
            "consumer verified by hand",
        ],
        0,
    );
    let history = b.ok(&["history", "local", "--json"], 0).json();
    let last = history.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["forced"], true);
    assert_eq!(last["reason"], "consumer verified by hand");
    assert!(
        !last["evidence"]["overridden"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn complete_needs_the_name_as_confirmation() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    while b.state().0 != "disconnect" {
        b.advance_green();
    }
    b.minute += 5;
    let r = b.ok(&["advance", "local"], 2);
    assert!(r.stderr.contains("--confirm local"), "{}", r.stderr);
    b.ok(&["advance", "local", "--confirm", "wrong"], 2);
    assert_eq!(b.state().0, "disconnect");
    b.ok(&["advance", "local", "--confirm", "local"], 0);
    assert_eq!(b.state().0, "complete");
}

#[test]
fn pause_resume_and_abort() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    while b.state() != ("slices".into(), Some(1)) {
        b.advance_green();
    }
    b.ok(&["pause", "local"], 0);
    b.minute += 5;
    let r = b.ok(&["advance", "local"], 2);
    assert!(r.stderr.contains("paused"), "{}", r.stderr);
    b.ok(&["pause", "local"], 2);
    // Rollback still works while paused, and stays paused.
    b.ok(&["rollback", "local", "--reason", "r"], 0);
    assert_eq!(b.status()["paused"], true);
    b.ok(&["resume", "local"], 0);
    b.ok(&["resume", "local"], 2);
    b.advance_green();
    b.ok(&["abort", "local"], 2); // needs a reason
    b.ok(&["abort", "local", "--reason", "vendor incident"], 0);
    let s = b.status();
    assert_eq!(s["state"], "synthetic");
    assert_eq!(s["paused"], true);
    assert_eq!(s["routing"]["slices_migrated"], 0);
    assert_eq!(s["routing"]["consume"], serde_json::json!(["old", "new"]));
    assert_eq!(b.routing_file()["slices_migrated"], 0);
}

#[test]
fn unknown_migration_and_bad_input_exit_2_and_change_nothing() {
    let b = Bench::new();
    b.init();
    let r = b.ok(&["status", "nope"], 2);
    assert!(
        r.stderr.contains("no migration named \"nope\""),
        "{}",
        r.stderr
    );
    b.ok(&["advance", "nope"], 2);
    b.ok(&["init", "/does/not/exist.yaml"], 2);
    let r = b.ok(&["init", b.plan.to_str().unwrap()], 2);
    assert!(r.stderr.contains("already exists"), "{}", r.stderr);
    b.ok(&["resume", "local"], 2);
    let r = b.ok(&["advance", "local", "--now", "not a time"], 2);
    assert!(r.stderr.contains("--now"), "{}", r.stderr);
    assert_eq!(b.status()["version"], 1);
}

/// Regression: reading commands opened a mistyped `--state` path in create mode, answered "no
/// migrations" (exit 0) and left an empty store (with its -wal and -shm files) behind.
#[test]
fn reading_a_mistyped_state_path_says_so_and_creates_nothing() {
    let b = Bench::new();
    b.init();
    let typo = b.path("stat.db");
    for args in [
        vec!["status"],
        vec!["status", "local"],
        vec!["history", "local"],
        vec!["routing", "local"],
        vec!["pause", "local"],
        vec!["advance", "local", "--dry-run"],
    ] {
        let r = b.run_env(&args, &[("MIGRATE_STATE", typo.to_str().unwrap())]);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("no state store at"), "{}", r.stderr);
        assert!(r.stderr.contains("migrate init"), "{}", r.stderr);
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
    }
    // `init` creates a store where it is told to.
    b.ok(&["status", "local"], 0);
}

/// Regression (issue 32): a state URL of an unknown scheme, or a PostgreSQL or SQLite URL its
/// driver cannot read, exited 1 as if the database had failed; it is bad input (exit 2), said in
/// one message that names no other cause and keeps the password out.
#[test]
fn an_unsupported_or_malformed_state_url_is_invalid_input() {
    let b = Bench::new();
    for (url, says) in [
        (
            "mysql://root:hunter2@db/qm",
            "unsupported state URL mysql://***@db/qm",
        ),
        (
            "postgres://qm:hunter2@127.0.0.1:notaport/qm",
            "malformed state URL postgres://***@127.0.0.1:notaport/qm",
        ),
        (
            "sqlite://qm.db?mode=bogus",
            "malformed state URL sqlite://qm.db?***",
        ),
    ] {
        let r = b.run_env(
            &["init", b.plan.to_str().unwrap()],
            &[("MIGRATE_STATE", url)],
        );
        assert_eq!(r.code, 2, "{url}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{url}: {}", r.stderr);
        assert!(!r.stderr.contains("hunter2"), "{url}: {}", r.stderr);
        assert_eq!(r.stderr.trim().lines().count(), 1, "{url}: {}", r.stderr);
        assert!(!r.stderr.contains("database error"), "{url}: {}", r.stderr);
    }
}

/// Issue 32: `migrate prune` says what it removed per table, counts first with `--dry-run`,
/// and keeps the journal and the memory of the step the migration is in.
#[test]
fn prune_says_what_it_removed_per_table_and_keeps_what_a_gate_reads() {
    let mut b = Bench::new();
    b.init();
    b.ok(&["advance", "local"], 0);
    b.indicators.set("app_new_consumer_connected", 0.0);
    b.ok(&["advance", "local"], 3);
    b.ok(&["advance", "local"], 3);
    let journal = b.ok(&["history", "local", "--json"], 0).json();
    b.minute += 60;
    let dry = b
        .ok(&["prune", "--older-than", "30m", "--dry-run", "--json"], 0)
        .json();
    assert_eq!(dry["dry_run"], true);
    assert!(
        dry["removed"]["gate_evaluations"].as_u64().unwrap() >= 2,
        "{dry}"
    );
    let real = b.ok(&["prune", "--older-than", "30m", "--json"], 0).json();
    assert_eq!(real["dry_run"], false);
    assert_eq!(real["removed"], dry["removed"], "{real}");
    let text = b.ok(&["prune", "--older-than", "30m"], 0).stdout;
    for table in ["gate_evaluations", "gate_memory", "scrapes", "outbox"] {
        assert!(text.contains(table), "{text}");
    }
    assert!(text.starts_with("removed rows older than "), "{text}");
    // The journal whole, the current step's memory still read by status.
    assert_eq!(b.ok(&["history", "local", "--json"], 0).json(), journal);
    let g = &b.status()["gates"][0];
    assert_eq!(g["verdict"], "fail", "{g}");
    // A mistyped migration is bad input, not "nothing to prune".
    b.ok(&["prune", "--older-than", "1d", "--migration", "nope"], 2);
    b.ok(&["prune", "--older-than", "0s"], 2);
}

#[test]
fn status_json_contract() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.advance_green();
    let s = b.status();
    for field in [
        "migration",
        "state",
        "step",
        "paused",
        "version",
        "entered_at",
        "routing",
        "gates",
    ] {
        assert!(s.get(field).is_some(), "status --json lacks {field}: {s}");
    }
    let g = &s["gates"][0];
    assert_eq!(g["phase"], "consume_dual");
    assert_eq!(g["name"], "new consumer connected");
    assert_eq!(g["kind"], "exit");
    assert_eq!(g["verdict"], "no_data");
    // Issue 44: one short line in every view; the CLI's advice once, under its table.
    assert_eq!(g["reason"], "awaiting first evaluation");
    assert!(g["evaluated_at"].is_null(), "{g}");
    // Regression (issue 32): the hint sent the user to `advance --dry-run`, which records
    // nothing, to see the gate evaluated here. It says what shows and what records.
    let text = b.ok(&["status", "local"], 0).stdout;
    let hint = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        hint.matches("`migrate advance local --dry-run`").count(),
        1,
        "{text}"
    );
    assert!(
        hint.contains("`migrate advance local --dry-run` shows it now and records nothing")
            && hint.contains("recorded by a running daemon's next round"),
        "{hint}"
    );
    b.ok(&["advance", "local", "--dry-run"], 0);
    // A dry run records nothing...
    assert_eq!(
        b.status()["gates"][0]["reason"],
        "awaiting first evaluation"
    );
    // ...a real evaluation does.
    b.indicators.set("app_new_consumer_connected", 0.0);
    b.ok(&["advance", "local"], 3);
    let g = b.status()["gates"][0].clone();
    assert_eq!(g["verdict"], "fail");
    assert_eq!(g["value"], 0.0);
    assert!(g["evaluated_at"].is_string());
    for field in [
        "migration",
        "generation",
        "state",
        "step",
        "paused",
        "slices_total",
        "slices_migrated",
        "consume",
        "brokers",
        "updated_at",
    ] {
        assert!(s["routing"].get(field).is_some(), "routing lacks {field}");
    }
    let all = b.ok(&["status", "--json"], 0).json();
    assert!(all.is_array());
}

#[test]
fn routing_left_behind_by_a_failed_write_is_republished_by_the_next_command() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    // Make the routing file unwritable: a directory stands where the file goes.
    let target = b.path("local.routing.json");
    std::fs::remove_file(&target).unwrap();
    std::fs::create_dir(&target).unwrap();
    let r = b.run(&["advance", "local"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("the transition is committed"),
        "{}",
        r.stderr
    );
    let s = b.status();
    assert_eq!(s["state"], "consume_dual");
    assert_eq!(s["routing_published"], false);
    std::fs::remove_dir(&target).unwrap();
    b.minute += 1;
    b.status();
    let doc = b.routing_file();
    assert_eq!(doc["state"], "consume_dual");
    assert_eq!(b.status()["routing_published"], true);
}

#[test]
fn concurrent_commands_never_both_apply() {
    let b = Bench::new();
    b.init();
    let b = std::sync::Arc::new(b);
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let b = b.clone();
            std::thread::spawn(move || b.run(&["pause", "local"]).code)
        })
        .collect();
    let codes: Vec<i32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(codes.iter().filter(|c| **c == 0).count(), 1, "{codes:?}");
    assert!(codes.iter().all(|c| [0, 2, 4].contains(c)), "{codes:?}");
    let history = b.ok(&["history", "local", "--json"], 0).json();
    let pauses = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["command"] == "pause")
        .count();
    assert_eq!(pauses, 1);
}

#[test]
fn the_drain_gate_waits_for_the_old_dead_letters_to_be_closed() {
    let yaml = include_str!("../../../plans/local.yaml")
        .replace(
            "  app: { scrape: \"${QM_SCRAPE_URL}\" }",
            "  app: { scrape: \"${QM_SCRAPE_URL}\" }\n  old_dlq: { dead_letters: local.dlq.ndjson }",
        )
        .replace(
            "      - { name: old queue empty,",
            "      - { name: old dead letters handled, source: old_dlq, query: open_groups, pass_if: \"== 0\" }\n      - { name: old queue empty,",
        );
    let mut b = Bench::with_plan(&yaml);
    b.indicators.all_green();
    let envelope = |id: u32| {
        format!(
            r#"{{"payload":"{{\"order\":{id}}}","errorClass":"dependency_timeout","errorMessage":"timeout after 30012ms calling inventory-service","consumerVersion":"2.14.0","traceId":"t{id}","attempts":3,"firstAttemptAt":"2026-11-29T10:00:0{id}.000Z","deadLetteredAt":"2026-11-29T10:05:00.000Z"}}"#
        )
    };
    let export: String = (1..=3).map(|i| envelope(i) + "\n").collect();
    std::fs::write(b.path("local.dlq.ndjson"), export).unwrap();
    b.init();
    while b.state().0 != "drain" {
        b.advance_green();
    }
    b.minute += 10;
    let r = b.ok(&["advance", "local", "--json"], 3);
    let gate = r.json()["gates"][0].clone();
    assert_eq!(gate["name"], "old dead letters handled");
    assert_eq!(gate["verdict"], "fail");
    let reason = gate["reason"].as_str().unwrap();
    assert!(reason.contains("1 open groups (3 entries)"), "{reason}");
    assert!(reason.contains("dependency_timeout"), "{reason}");
    // The team decides: the group is closed (recorded in the same store, for the old DLQ).
    let triage = b
        .ok(
            &["dlq", "triage", "local.dlq.ndjson", "--format", "json"],
            0,
        )
        .json();
    let signature = triage[0]["signature"].as_str().unwrap().to_string();
    b.ok(
        &[
            "dlq",
            "close",
            "--queue",
            "local.dlq",
            "--signature",
            &signature,
            "--class",
            "dependency_timeout",
            "--version",
            "2.14.0",
            "--reason",
            "already_processed",
            "--by",
            "oncall",
        ],
        0,
    );
    b.minute += 3; // and the old queue has been empty for the quiet period
    let r = b.ok(&["advance", "local", "--json"], 0);
    let gate = r.json()["gates"][0].clone();
    assert_eq!(gate["verdict"], "pass", "{gate}");
    assert_eq!(b.state().0, "disconnect");
}

// ---------------------------------------------------------------------------------------------
// Standard output closed or full: `migrate history NAME | head -1`, `migrate routing NAME >
// /dev/full`. Every command printed with `println!`, which panics (exit 101, a backtrace) when
// the write fails — for `init` and the transitions, after the step was committed.

/// A pipe whose reader is already gone: the first write gets EPIPE, whatever the output's size.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

/// Run `migrate ARGS` at the bench's minute with standard output on `stdout`.
fn run_into(b: &Bench, args: &[&str], stdout: impl Into<std::process::Stdio>) -> (i32, String) {
    let out = b.command(args).stdout(stdout).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn full_disk() -> std::fs::File {
    std::fs::File::create("/dev/full").unwrap()
}

#[test]
fn history_into_a_closed_pipe_exits_quietly_without_a_panic() {
    let b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.ok(&["pause", "local", "--reason", "lunch"], 0);
    b.ok(&["resume", "local"], 0);
    for args in [
        &["history", "local"][..],
        &["history", "local", "--json"],
        &["status", "local"],
        &["status", "--json"],
        &["routing", "local"],
    ] {
        let (code, err) = run_into(&b, args, closed_pipe());
        assert!(!err.contains("panicked"), "migrate {args:?}:\n{err}");
        assert_eq!(code, 0, "migrate {args:?}:\n{err}");
        assert_eq!(
            err, "",
            "migrate {args:?}: the reader chose to stop; nothing to say"
        );
    }
}

#[test]
fn init_json_into_a_closed_pipe_commits_and_exits_quietly() {
    let b = Bench::new();
    b.indicators.all_green();
    let plan = b.plan.to_str().unwrap().to_string();
    let (code, err) = run_into(&b, &["init", &plan, "--json"], closed_pipe());
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(code, 0, "{err}");
    assert_eq!(b.state(), ("planned".into(), None));
    // A transition printed as text, into a closed pipe, likewise.
    let (code, err) = run_into(&b, &["pause", "local", "--reason", "x"], closed_pipe());
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(code, 0, "{err}");
    assert_eq!(b.status()["paused"], true);
}

#[test]
fn routing_into_a_full_disk_says_cannot_write_and_exits_1() {
    let b = Bench::new();
    b.indicators.all_green();
    b.init();
    for args in [
        &["routing", "local"][..],
        &["status", "local"],
        &["status", "local", "--json"],
        &["history", "local"],
        &["history", "local", "--json"],
        &["advance", "local", "--dry-run"],
    ] {
        let (code, err) = run_into(&b, args, full_disk());
        assert!(!err.contains("panicked"), "migrate {args:?}:\n{err}");
        assert_eq!(code, 1, "migrate {args:?}:\n{err}");
        assert!(
            err.starts_with("migrate: cannot write to standard output: No space left on device"),
            "migrate {args:?}:\n{err}"
        );
    }
    // A transition is committed before its report fails to be written: exit 1 says the report
    // is missing, the journal has the step.
    let (code, err) = run_into(&b, &["pause", "local", "--reason", "x"], full_disk());
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot write to standard output"), "{err}");
    assert_eq!(b.status()["paused"], true);
}

/// plans/local.yaml whose broker URLs are `${OLD_BROKER_URL}` and `${NEW_BROKER_URL}` (passwords
/// the on-call machine does not have), renamed `name`.
fn plan_with_broker_secrets(name: &str) -> String {
    include_str!("../../../plans/local.yaml")
        .replacen("name: local", &format!("name: {name}"), 1)
        .replacen("local.routing.json", &format!("{name}.routing.json"), 1)
        .replacen("\"amqp://127.0.0.1:5672/%2f\"", "\"${OLD_BROKER_URL}\"", 1)
        .replacen("\"nats://127.0.0.1:4222\"", "\"${NEW_BROKER_URL}\"", 1)
}

const BROKER_SECRETS: [(&str, &str); 2] = [
    (
        "OLD_BROKER_URL",
        "amqp://orders:s3cr3t-old@127.0.0.1:5672/%2f",
    ),
    ("NEW_BROKER_URL", "nats://orders:s3cr3t-new@127.0.0.1:4222"),
];

/// `migrate ARGS` with the broker secrets set.
fn with_secrets(b: &Bench, args: &[&str]) -> common::Run {
    b.run_env(args, &BROKER_SECRETS)
}

/// `migrate ARGS` on a machine where the variables `unset` are not set.
fn without(b: &Bench, args: &[&str], unset: &[&str]) -> common::Run {
    let mut c = b.command(args);
    for var in unset {
        c.env_remove(var);
    }
    let out = c.output().unwrap();
    common::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn expect(r: common::Run, code: i32, what: &str) -> common::Run {
    assert_eq!(
        r.code, code,
        "{what} exited {} (want {code})\nstdout:\n{}\nstderr:\n{}",
        r.code, r.stdout, r.stderr
    );
    for (_, secret) in BROKER_SECRETS {
        assert!(
            !r.stdout.contains(secret) && !r.stderr.contains(secret),
            "{what} printed a secret"
        );
    }
    r
}

const NO_BROKERS: &[&str] = &["OLD_BROKER_URL", "NEW_BROKER_URL"];

#[test]
fn pause_rollback_abort_resume_and_status_work_without_the_plans_broker_secrets() {
    let mut b = Bench::with_plan(&plan_with_broker_secrets("orders"));
    b.indicators.all_green();
    expect(
        with_secrets(&b, &["init", b.plan.to_str().unwrap()]),
        0,
        "init",
    );
    while with_secrets(&b, &["status", "orders", "--json"]).json()["step"] != 1 {
        match with_secrets(&b, &["advance", "orders"]).code {
            0 => {}
            3 => b.minute += 1,
            other => panic!("advance exited {other}"),
        }
    }
    let state = |b: &Bench| {
        let s = expect(
            without(b, &["status", "orders", "--json"], NO_BROKERS),
            0,
            "status orders",
        )
        .json();
        (
            s["state"].as_str().unwrap().to_string(),
            s["step"].as_u64(),
            s["paused"].as_bool().unwrap(),
        )
    };
    // The on-call machine has the store, not the broker passwords.
    assert_eq!(state(&b), ("slices".into(), Some(1), false));
    let doc = expect(
        without(&b, &["routing", "orders"], NO_BROKERS),
        0,
        "routing",
    )
    .json();
    assert_eq!(doc["slices_migrated"], 4);
    expect(without(&b, &["status"], NO_BROKERS), 0, "status");

    expect(without(&b, &["pause", "orders"], NO_BROKERS), 0, "pause");
    assert_eq!(state(&b), ("slices".into(), Some(1), true));
    expect(
        without(
            &b,
            &["rollback", "orders", "--reason", "errors up"],
            NO_BROKERS,
        ),
        0,
        "rollback",
    );
    assert_eq!(state(&b), ("slices".into(), Some(0), true));
    expect(
        without(&b, &["abort", "orders", "--reason", "3 a.m."], NO_BROKERS),
        0,
        "abort",
    );
    assert_eq!(state(&b), ("synthetic".into(), None, true));
    assert_eq!(
        b.routing_file_of("orders")["slices_migrated"],
        0,
        "the routing file follows"
    );
    expect(without(&b, &["resume", "orders"], NO_BROKERS), 0, "resume");
    assert_eq!(state(&b), ("synthetic".into(), None, false));
    let history = expect(
        without(&b, &["history", "orders", "--json"], NO_BROKERS),
        0,
        "history",
    )
    .json();
    let commands: Vec<_> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["command"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        commands[commands.len() - 4..],
        ["pause", "rollback", "abort", "resume"]
    );

    // A gate whose source URL is not set here holds, naming the variable; nothing moves.
    b.minute += 1;
    let mut unset = NO_BROKERS.to_vec();
    unset.push("QM_PROM_URL");
    let r = expect(
        without(&b, &["advance", "orders", "--json"], &unset),
        3,
        "advance without QM_PROM_URL",
    );
    let gate = r.json()["gates"][0].clone();
    assert_eq!(gate["verdict"], "no_data", "{gate}");
    assert!(
        gate["reason"].as_str().unwrap().contains("QM_PROM_URL"),
        "{gate}"
    );
    assert_eq!(state(&b), ("synthetic".into(), None, false));
    // The brokers are not needed to evaluate gates: with the source set, advance moves.
    expect(
        without(&b, &["advance", "orders"], NO_BROKERS),
        0,
        "advance without broker secrets",
    );
    assert_eq!(state(&b), ("slices".into(), Some(0), false));
}

#[test]
fn status_lists_every_migration_when_one_stored_plan_cannot_resolve_here() {
    let b = Bench::new();
    b.init();
    let orders = b.path("orders.yaml");
    std::fs::write(&orders, plan_with_broker_secrets("orders")).unwrap();
    expect(
        with_secrets(&b, &["init", orders.to_str().unwrap()]),
        0,
        "init orders",
    );
    let all = expect(
        without(&b, &["status", "--json"], NO_BROKERS),
        0,
        "status --json",
    )
    .json();
    let names: Vec<_> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["migration"].as_str().unwrap().to_string())
        .collect();
    assert!(
        names.contains(&"orders".to_string()) && names.contains(&"local".to_string()),
        "{names:?}"
    );
    let text = expect(without(&b, &["status"], NO_BROKERS), 0, "status").stdout;
    assert!(
        text.contains("orders: planned") && text.contains("local: planned"),
        "{text}"
    );
}

#[test]
fn a_transition_whose_etcd_endpoint_is_not_set_here_commits_and_reports_the_publisher_behind() {
    let yaml = include_str!("../../../plans/local.yaml").replacen(
        "routing: { file: local.routing.json }",
        "routing:\n  file: local.routing.json\n  etcd: { endpoint: \"${QM_ETCD_URL}\", key: /qm/local/routing }",
        1,
    );
    let b = Bench::with_plan(&yaml);
    // No etcd listens there: init commits and reports the publisher behind (exit 1).
    let r = b.run_env(
        &["init", b.plan.to_str().unwrap()],
        &[("QM_ETCD_URL", "http://127.0.0.1:1")],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let r = expect(
        without(&b, &["pause", "local"], &["QM_ETCD_URL"]),
        1,
        "pause without QM_ETCD_URL",
    );
    assert!(
        r.stderr.contains("the transition is committed") && r.stderr.contains("QM_ETCD_URL"),
        "{}",
        r.stderr
    );
    let s = expect(
        without(&b, &["status", "local", "--json"], &["QM_ETCD_URL"]),
        0,
        "status",
    )
    .json();
    assert_eq!(s["paused"], true);
    assert_eq!(s["routing_published"], false);
    assert!(
        s["publish_error"].as_str().unwrap().contains("QM_ETCD_URL"),
        "{s}"
    );
    // The file publisher needs no secret: it follows the committed state.
    assert_eq!(b.routing_file()["paused"], true);
}

/// Where `needle` starts in each line that has it, in characters.
fn columns(text: &str, needle: &str) -> Vec<usize> {
    text.lines()
        .filter_map(|l| l.find(needle).map(|i| l[..i].chars().count()))
        .collect()
}

#[test]
fn tables_stay_aligned_with_cells_longer_than_28_characters() {
    let name = "orders-eu-west-1-checkout-to-nats-2026";
    let plan = include_str!("../../../plans/local.yaml")
        .replace("name: local\n", &format!("name: {name}\n"))
        .replace(
            "      - { name: new consumer connected, source: app, query: app_new_consumer_connected, pass_if: \">= 1\" }",
            "      - { name: new consumer connected, source: app, query: app_new_consumer_connected, pass_if: \">= 1\" }\n      - { name: new consumer connected on every partition of the stream, source: app, query: app_new_consumer_connected, pass_if: \">= 1\" }",
        );
    let b = Bench::with_plan(&plan);
    b.init();
    b.ok(&["advance", name], 0);
    // Two gates, one name of 53 characters: the value and the reason start where they do in the
    // other row.
    let status = b.ok(&["status", name], 0).stdout;
    // The gate table, below the standing: no daemon runs, so it is not driven (issue 56).
    assert!(
        status.starts_with(&format!("{name}: not driven: ")),
        "{status}"
    );
    let table = status
        .split_once(&format!("\n{name}: consume_dual"))
        .map_or("", |(_, t)| t);
    let reasons = columns(table, "awaiting first evaluation");
    assert_eq!(reasons.len(), 2, "{status}");
    assert_eq!(reasons[0], reasons[1], "{status}");
    b.indicators.all_green();
    let dry = b.ok(&["advance", name, "--dry-run"], 0).stdout;
    let gate_rows: Vec<&str> = dry.lines().filter(|l| l.starts_with("  exit ")).collect();
    assert_eq!(gate_rows.len(), 2, "{dry}");
    let value_ends: Vec<usize> = gate_rows
        .iter()
        .map(|l| l.find("1  ").expect("a value of 1"))
        .collect();
    assert_eq!(value_ends[0], value_ends[1], "{dry}");

    // Decisions on a queue whose name is longer than the old fixed column.
    for (queue, class) in [
        ("orders.dlq", "validation"),
        (
            "payments-dead-letter-queue-eu-west-1",
            "reference_not_found",
        ),
    ] {
        b.ok(
            &[
                "dlq",
                "close",
                "--class",
                class,
                "--version",
                "2.14.0",
                "--signature",
                "s",
                "--reason",
                "fixed_in_code",
                "--by",
                "ana",
                "--queue",
                queue,
            ],
            0,
        );
    }
    let decisions = b.ok(&["dlq", "decisions", "--all-queues"], 0).stdout;
    let versions = columns(&decisions, "2.14.0");
    assert_eq!(versions.len(), 2, "{decisions}");
    assert_eq!(versions[0], versions[1], "{decisions}");
}

#[test]
fn a_retried_advance_with_from_does_not_move_twice() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    let first = b.advance_green();
    let from = first.0.clone();
    let second = loop {
        let r = b.run(&["advance", "local", "--from", &from]);
        match r.code {
            0 => break b.state(),
            3 => b.minute += 1,
            other => panic!("advance --from exited {other}\n{}\n{}", r.stdout, r.stderr),
        }
    };
    assert_ne!(second, first);
    let version = b.status()["version"].as_i64().unwrap();

    // The same command again (a retried runbook step): nothing moves, exit 5, and why.
    let r = b.ok(&["advance", "local", "--from", &from], 5);
    assert!(
        r.stderr
            .contains(&format!("is in {}, not {from}", second.0)),
        "{}",
        r.stderr
    );
    let r = b.ok(
        &["rollback", "local", "--reason", "retried", "--from", &from],
        5,
    );
    assert!(r.stderr.contains("nothing done"), "{}", r.stderr);
    assert_eq!(b.state(), second);
    assert_eq!(b.status()["version"].as_i64().unwrap(), version);

    // A state the plan does not have is bad input: exit 2, with the plan's states.
    for bogus in ["slices[99]", "draining", "slices[+0]"] {
        let r = b.ok(&["advance", "local", "--from", bogus], 2);
        assert!(
            r.stderr.contains("its states are: planned, "),
            "{}",
            r.stderr
        );
    }
    assert_eq!(b.status()["version"].as_i64().unwrap(), version);

    // The state it is in: the rollback goes through.
    b.ok(
        &["rollback", "local", "--reason", "back", "--from", &second.0],
        0,
    );
    assert_eq!(b.state(), first);
}

#[test]
fn a_slice_step_reads_the_same_in_status_history_and_from() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    while b.state().0 != "slices" {
        b.advance_green();
    }
    let shown = b.ok(&["status", "local"], 0).stdout;
    // Where it stands first, then the state line.
    let mut lines = shown.lines();
    assert!(
        lines.next().unwrap_or_default().starts_with("local: "),
        "{shown}"
    );
    // (The standing may wrap: its next lines are indented.)
    let state = lines
        .find(|l| !l.starts_with("    "))
        .unwrap_or_default()
        .to_string();
    assert!(state.starts_with("local: slices[0]"), "{shown}");
    let history = b.ok(&["history", "local", "--json"], 0).json();
    let last = history.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["to"], "slices[0]", "{last}");
    b.ok(
        &["rollback", "local", "--reason", "r", "--from", "slices[0]"],
        0,
    );
    assert_ne!(b.state().0, "slices");
}

#[test]
fn status_at_columns_80_prints_no_line_over_80_characters() {
    let name = "orders-eu-west-1-checkout-to-nats-2026";
    let plan = include_str!("../../../plans/local.yaml")
        .replace("name: local\n", &format!("name: {name}\n"))
        .replace(
            "      - { name: new consumer connected, source: app, query: app_new_consumer_connected, pass_if: \">= 1\" }",
            "      - { name: new consumer connected, source: app, query: app_new_consumer_connected, pass_if: \">= 1\" }\n      - { name: new consumer connected on every partition of the stream, source: app, query: app_new_consumer_connected, pass_if: \">= 1\" }",
        );
    let b = Bench::with_plan(&plan);
    b.init();
    b.ok(&["advance", name], 0);
    b.indicators.all_green();
    b.indicators
        .set("app_new_consumer_connected", 0.333_333_333_333_333);
    // Blocked (0.33 is not >= 1), the evaluation recorded.
    b.run(&["advance", name]);
    let reason = "the new broker's disk alarm fired during the night shift; waiting for storage \
                  to be resized before going on (ticket OPS-4711, ask ana)";
    b.ok(&["pause", name, "--reason", reason], 0);
    let r = b.run_env(&["status"], &[("COLUMNS", "80")]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    for line in r.stdout.lines() {
        assert!(line.chars().count() <= 80, "{line:?} in\n{}", r.stdout);
    }
    // The pause's reason is shown (wrapped).
    let words: Vec<&str> = r.stdout.split_whitespace().collect();
    assert!(r.stdout.contains("paused:"), "{}", r.stdout);
    assert!(words.contains(&"OPS-4711,"), "{}", r.stdout);
    // `>= 1` has no decimals: the value shows one (its reason keeps what the gate said).
    assert!(words.contains(&"0.3"), "{}", r.stdout);
    // Narrower still: no line over 40.
    let r = b.run_env(&["status", name], &[("COLUMNS", "40")]);
    for line in r.stdout.lines() {
        assert!(line.chars().count() <= 40, "{line:?} in\n{}", r.stdout);
    }
}
