//! Every `migrate dlq` command that reads or writes the state store, on each backend: SQLite
//! (the default, always) and PostgreSQL (`QM_TEST_POSTGRES_URL`, e.g.
//! `postgres://postgres@127.0.0.1:5432/postgres`; each test in a database of its own). The
//! PostgreSQL runs are `#[ignore]`d without the URL, so that they never pass unrun: `.ci/run` runs
//! them with `--include-ignored`.
//!
//! Regression (issue 32): on a PostgreSQL state, `close`, `decisions`, `gate`, `triage
//! --against-history`, `watch` and `report` exited 1 ("kept in a SQLite state store for now"),
//! and `replay` published every message and only then failed to record, so a re-run sent them
//! all again.

use crate::common;
use crate::on_both;

use common::dlq_bench::DlqBench;
#[cfg(feature = "brokers")]
use common::dlq_bench::{NEW_BROKER_LINE, OLD_BROKER_LINE, drain_rabbitmq, preflight_waived};

/// A dead letter of group `class` (consumer 2.14.0), numbered `n`, first attempted the day
/// before the bench's clock at `hour`.
fn envelope(class: &str, message: &str, n: u32, hour: u32) -> String {
    serde_json::json!({
        "payload": serde_json::json!({"orderId": format!("o-{n}"), "n": n}).to_string(),
        "errorClass": class,
        "errorMessage": message,
        "consumerVersion": "2.14.0",
        "traceId": format!("t{n}"),
        "attempts": 3,
        "firstAttemptAt": format!("2026-11-29T{hour:02}:00:{n:02}.000Z"),
        "deadLetteredAt": format!("2026-11-29T{hour:02}:05:{n:02}.000Z"),
    })
    .to_string()
}

const TIMEOUT: &str = "timeout after 30012ms calling inventory-service";
const INVALID: &str = "field amount rejected: value -3 does not match pattern";

/// Five timeouts and three validation errors.
fn export() -> Vec<String> {
    (1..=5)
        .map(|n| envelope("dependency_timeout", TIMEOUT, n, 10))
        .chain((6..=8).map(|n| envelope("validation", INVALID, n, 10)))
        .collect()
}

/// [`export`] written to export.ndjson: the signature of its timeouts.
fn timeouts_exported(d: &DlqBench) -> String {
    d.write("export.ndjson", &export());
    signature_of(d, "export.ndjson", "dependency_timeout")
}

/// (class, signature) of each group of `file`, as triage prints them.
fn groups(d: &DlqBench, file: &str) -> Vec<(String, String)> {
    let triage = d.ok(&["dlq", "triage", file, "--format", "json"], 0).json();
    triage
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["errorClass"].as_str().unwrap().to_string(),
                g["signature"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn signature_of(d: &DlqBench, file: &str, class: &str) -> String {
    groups(d, file)
        .into_iter()
        .find(|(c, _)| c == class)
        .map(|(_, s)| s)
        .unwrap()
}

// ---------------------------------------------------------------------------------------------

/// close (with and without --from), decisions, gate, triage --against-history and purge.
fn decisions_gate_and_history(d: DlqBench) {
    let timeout = timeouts_exported(&d);
    let invalid = signature_of(&d, "export.ndjson", "validation");
    let gate = d.ok(
        &["dlq", "gate", "export.ndjson", "--queue", "orders.dlq"],
        3,
    );
    assert!(gate.stdout.starts_with("GATED"), "{}", gate.stdout);

    let closed = d
        .ok(
            &[
                "dlq",
                "close",
                "--from",
                "export.ndjson",
                "--class",
                "dependency_timeout",
                "--version",
                "2.14.0",
                "--signature",
                &timeout,
                "--reason",
                "already_processed",
                "--by",
                "ana",
                "--queue",
                "orders.dlq",
                "--json",
            ],
            0,
        )
        .json();
    assert_eq!(closed["affectedCount"], 5, "{closed}");
    d.ok(
        &[
            "dlq",
            "close",
            "--class",
            "validation",
            "--version",
            "2.14.0",
            "--signature",
            &invalid,
            "--reason",
            "fixed_in_code",
            "--by",
            "bo",
            "--queue",
            "orders.dlq",
            "--note",
            "PR 12",
        ],
        0,
    );
    let listed = d
        .ok(&["dlq", "decisions", "--queue", "orders.dlq", "--json"], 0)
        .json();
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2, "[{}] {listed:?}", d.kind());
    assert_eq!(listed[0]["signature"], timeout.as_str());
    assert_eq!(listed[1]["note"], "PR 12");
    let table = d.ok(&["dlq", "decisions", "--all-queues"], 0).stdout;
    assert!(
        table.contains("fixed_in_code") && table.contains("orders.dlq"),
        "{table}"
    );
    // Without --queue: every queue (issue 42); the queue `default` has none.
    let every = d.ok(&["dlq", "decisions"], 0).stdout;
    assert!(every.contains("orders.dlq"), "{every}");
    let other = d.ok(&["dlq", "decisions", "--queue", "default"], 0).stdout;
    assert!(
        other.contains("no decisions recorded for queue \"default\""),
        "{other}"
    );

    let gate = d.ok(
        &["dlq", "gate", "export.ndjson", "--queue", "orders.dlq"],
        0,
    );
    assert!(gate.stdout.starts_with("PASS"), "{}", gate.stdout);

    // The timeouts came back after the decision covered them: recurring.
    let mut back = export();
    back.push(envelope("dependency_timeout", TIMEOUT, 9, 12));
    d.write("back.ndjson", &back);
    let split = d
        .ok(
            &[
                "dlq",
                "triage",
                "back.ndjson",
                "--against-history",
                "--queue",
                "orders.dlq",
                "--format",
                "json",
            ],
            0,
        )
        .json();
    assert_eq!(split["recurring"].as_array().unwrap().len(), 1, "{split}");
    assert_eq!(split["covered"].as_array().unwrap().len(), 1, "{split}");
    assert_eq!(split["fresh"].as_array().unwrap().len(), 0, "{split}");
    d.ok(&["dlq", "gate", "back.ndjson", "--queue", "orders.dlq"], 3);

    // Retention: two hours later, decisions older than an hour go.
    let mut d = d;
    d.b.minute += 120;
    let purged = d.ok(&["dlq", "purge", "--older-than", "1h", "--decisions"], 0);
    assert!(
        purged.stderr.contains("removed 2 decisions"),
        "{}",
        purged.stderr
    );
    let listed = d
        .ok(&["dlq", "decisions", "--all-queues", "--json"], 0)
        .json();
    assert_eq!(listed, serde_json::json!([]));
}
on_both!(decisions_gate_and_history, "dlq_decide");

/// Regression: `dlq close` without `--queue` recorded under queue `default`, so the drain gate
/// of the migration (which reads its plan's `brokers.old.dead_letter`) never saw the decision.
fn close_for_a_migration_uses_its_dead_letter_queue(d: DlqBench) {
    d.ok(&["init", d.b.plan.to_str().unwrap()], 0);
    let close = |extra: &[&str]| {
        let mut args = vec![
            "dlq",
            "close",
            "--migration",
            "local",
            "--class",
            "validation",
            "--version",
            "2.14.0",
            "--signature",
            "s",
            "--reason",
            "fixed_in_code",
            "--by",
            "ana",
            "--json",
        ];
        args.extend_from_slice(extra);
        d.ok(&args, 0)
    };
    let recorded = close(&[]).json();
    assert_eq!(recorded["queue"], "local.dlq", "{recorded}");
    let listed = d
        .ok(&["dlq", "decisions", "--queue", "local.dlq", "--json"], 0)
        .json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let default = d
        .ok(&["dlq", "decisions", "--queue", "default", "--json"], 0)
        .json();
    assert_eq!(default, serde_json::json!([]));
    // An explicit --queue wins, and the command says which queue the gate reads.
    let elsewhere = close(&["--queue", "other.dlq"]);
    assert_eq!(elsewhere.json()["queue"], "other.dlq");
    assert!(
        elsewhere
            .stderr
            .contains("reads the decisions of queue \"local.dlq\""),
        "{}",
        elsewhere.stderr
    );
    // An unknown migration is an input error.
    let mut args = vec![
        "dlq",
        "close",
        "--migration",
        "nope",
        "--class",
        "c",
        "--version",
    ];
    args.extend([
        "v",
        "--signature",
        "s",
        "--reason",
        "fixed_in_code",
        "--by",
        "ana",
    ]);
    d.ok(&args, 2);
}
on_both!(
    close_for_a_migration_uses_its_dead_letter_queue,
    "dlq_close"
);

/// A replay of the timeouts (`signature`) of export.ndjson into out.ndjson, no canary.
fn replay_args(signature: &str) -> Vec<&str> {
    vec![
        "dlq",
        "replay",
        "export.ndjson",
        "--class",
        "dependency_timeout",
        "--version",
        "2.14.0",
        "--signature",
        signature,
        "--output",
        "out.ndjson",
        "--canary",
        "0",
        "--rate",
        "1000",
        "--by",
        "ana",
        "--queue",
        "orders.dlq",
    ]
}

/// The `x-replay-of` of each line of out.ndjson.
fn replayed(d: &DlqBench) -> Vec<String> {
    std::fs::read_to_string(d.b.path("out.ndjson"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["headers"]["x-replay-of"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Regression: a replay published everything, then failed to record; the re-run sent it all
/// again. Now each message is recorded before it goes: whatever fails, a re-run sends nothing
/// twice, and what an earlier run left in doubt goes again only when asked.
fn replay_records_before_it_sends_and_never_sends_twice(d: DlqBench) {
    let timeout = timeouts_exported(&d);
    let args = replay_args(&timeout);
    d.ok(&["dlq", "decisions"], 0); // the schema exists
    // The store takes the claims but cannot mark anything sent: the first message goes out,
    // its fate cannot be recorded, and the run stops there.
    d.refuse("UPDATE", true);
    let r = d.ok(&args, 1);
    assert!(
        r.stderr.contains("stopped: the state store failed"),
        "{}",
        r.stderr
    );
    assert_eq!(replayed(&d).len(), 1);
    d.refuse("UPDATE", false);

    // The re-run sends the other four; the first is in doubt, not sent again, its group open.
    let r = d.ok(&args, 1);
    assert!(r.stdout.contains("4 published"), "{}", r.stdout);
    assert!(
        r.stdout.contains("1 entries not sent again"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("1 in doubt") && r.stderr.contains("stay open"),
        "{}",
        r.stderr
    );
    let want: Vec<String> = (1..=5)
        .map(|n| format!("2026-11-29T10:05:0{n}.000Z"))
        .collect();
    assert_eq!(replayed(&d), want, "each entry once");
    // Once more: nothing goes.
    let r = d.ok(&args, 1);
    assert!(
        r.stdout.contains("0 published") && r.stdout.contains("4 skipped"),
        "{}",
        r.stdout
    );
    assert_eq!(replayed(&d).len(), 5);
    let none = d
        .ok(&["dlq", "decisions", "--queue", "orders.dlq", "--json"], 0)
        .json();
    assert_eq!(none, serde_json::json!([]), "the group stays open");

    // Checked: it did not arrive (say). Sent again on request, and the group is replayed whole.
    let mut resend = args.clone();
    resend.push("--resend-in-doubt");
    let r = d.ok(&resend, 0);
    assert!(
        r.stdout.contains("recorded 1 group(s) as replayed"),
        "{}",
        r.stdout
    );
    assert_eq!(replayed(&d).len(), 6);
    let decided = d
        .ok(&["dlq", "decisions", "--queue", "orders.dlq", "--json"], 0)
        .json();
    assert_eq!(decided[0]["action"], "replay", "{decided}");
    assert_eq!(decided[0]["affectedCount"], 5, "{decided}");
    // A completed replay run again sends nothing and records nothing new.
    let r = d.ok(&args, 0);
    assert!(r.stdout.contains("0 published"), "{}", r.stdout);
    let decided = d
        .ok(&["dlq", "decisions", "--queue", "orders.dlq", "--json"], 0)
        .json();
    assert_eq!(decided.as_array().unwrap().len(), 1);
    // Another destination is another ledger.
    let mut elsewhere = args.clone();
    let output = elsewhere.iter().position(|a| *a == "out.ndjson").unwrap();
    elsewhere[output] = "other.ndjson";
    let r = d.ok(&elsewhere, 0);
    assert!(r.stdout.contains("5 published"), "{}", r.stdout);
}
on_both!(
    replay_records_before_it_sends_and_never_sends_twice,
    "dlq_replay"
);

/// A store that cannot record what a replay sends: refused before the first publish.
fn replay_on_a_store_that_cannot_record_sends_nothing(d: DlqBench) {
    let timeout = timeouts_exported(&d);
    d.ok(&["dlq", "decisions"], 0); // the schema exists
    d.refuse("INSERT", true);
    let r = d.ok(&replay_args(&timeout), 1);
    assert!(
        r.stderr.contains("refused, nothing was sent"),
        "{}",
        r.stderr
    );
    assert!(replayed(&d).is_empty());
    d.refuse("INSERT", false);
    d.ok(&replay_args(&timeout), 0);
    assert_eq!(replayed(&d).len(), 5);
}
on_both!(
    replay_on_a_store_that_cannot_record_sends_nothing,
    "dlq_refuse"
);

/// watch keeps the signatures it saw (new for a day), report lists the week's decisions.
fn watch_and_report(d: DlqBench) {
    d.write("export.ndjson", &export());
    let watch = |d: &DlqBench| {
        d.ok(
            &["dlq", "watch", "export.ndjson", "--queue", "orders.dlq"],
            0,
        )
        .stdout
    };
    let first = watch(&d);
    assert!(
        first.contains("dlq_new_signatures{queue=\"orders.dlq\"} 2"),
        "{first}"
    );
    assert!(
        first.contains("dlq_open_groups{queue=\"orders.dlq\"} 2"),
        "{first}"
    );
    let timeout = signature_of(&d, "export.ndjson", "dependency_timeout");
    d.ok(
        &[
            "dlq",
            "close",
            "--from",
            "export.ndjson",
            "--class",
            "dependency_timeout",
            "--version",
            "2.14.0",
            "--signature",
            &timeout,
            "--reason",
            "already_processed",
            "--by",
            "ana",
            "--queue",
            "orders.dlq",
        ],
        0,
    );
    let mut d = d;
    d.b.minute += 25 * 60;
    let later = watch(&d);
    // First seen a day and more ago: no longer new (the store kept when).
    assert!(
        later.contains("dlq_new_signatures{queue=\"orders.dlq\"} 0"),
        "{later}"
    );
    assert!(
        later.contains("dlq_open_groups{queue=\"orders.dlq\"} 1"),
        "{later}"
    );
    let report = d
        .ok(
            &[
                "dlq",
                "report",
                "export.ndjson",
                "--owner",
                "ana",
                "--queue",
                "orders.dlq",
            ],
            0,
        )
        .stdout;
    assert!(report.contains("already_processed"), "{report}");
    assert!(report.contains("dependency_timeout"), "{report}");
}
on_both!(watch_and_report, "dlq_watch");

// ---------------------------------------------------------------------------------------------
// The whole dead-letter story of a migration, on real servers.

impl DlqBench {
    fn state(&self) -> String {
        let s = self.ok(&["status", "local", "--json"], 0).json();
        s["state"].as_str().unwrap().to_string()
    }
}

/// A migration from one RabbitMQ queue to another reaches drain with dead letters left on the
/// old side: triage, close one group (recorded under the plan's dead-letter queue without
/// `--queue`), replay the other to the migration's brokers (and once more: nothing goes twice),
/// and the drain gate passes on the decisions: `advance` leaves drain without `--force`.
#[cfg(feature = "brokers")]
fn the_dead_letter_story(d: DlqBench) {
    use queue_migrate::brokers::{Adapter, Kind};
    let amqp = std::env::var("QM_TEST_AMQP_URL").expect("needs QM_TEST_AMQP_URL");
    let id = format!("{}-{}", std::process::id(), d.kind());
    let (old_queue, new_queue) = (format!("qm-story-old-{id}"), format!("qm-story-new-{id}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let new = rt.block_on(async {
        let new = Adapter::connect(Kind::RabbitMq, &amqp).await.unwrap();
        new.declare(&new_queue).await.unwrap();
        new.declare(&old_queue).await.unwrap();
        new
    });
    let yaml = include_str!("../../../plans/local.yaml")
        .replace(
            OLD_BROKER_LINE,
            &format!("old: {{ name: rabbitmq, kind: rabbitmq, url: \"{amqp}\", queue: {old_queue}, dead_letter: {old_queue}.dlq }}"),
        )
        .replace(
            NEW_BROKER_LINE,
            &format!("new: {{ name: rabbitmq-new, kind: rabbitmq, url: \"{amqp}\", queue: {new_queue} }}"),
        )
        .replace(
            "  app: { scrape: \"${QM_SCRAPE_URL}\" }",
            "  app: { scrape: \"${QM_SCRAPE_URL}\" }\n  old_dlq: { dead_letters: dlq.ndjson }",
        )
        .replace(
            "      - { name: old queue empty,",
            "      - { name: old dead letters handled, source: old_dlq, query: open_groups, pass_if: \"== 0\" }\n      - { name: old queue empty,",
        )
        + &format!("\nbridge: {{ ingress: {old_queue}.ingress, key: {{ json: orderId }} }}\n");
    assert!(
        yaml.contains(&new_queue) && yaml.contains("old_dlq"),
        "plans/local.yaml changed"
    );
    let mut d = d.with_plan(&preflight_waived(&yaml));
    d.b.indicators.all_green();
    d.ok(&["init", d.b.plan.to_str().unwrap()], 0);
    for _ in 0..40 {
        if d.state() == "drain" {
            break;
        }
        match d.run(&["advance", "local", "--confirm", "local"]).code {
            0 | 3 => d.b.minute += 1,
            other => panic!("advance exited {other}"),
        }
    }
    assert_eq!(d.state(), "drain");
    d.write("dlq.ndjson", &export());
    d.b.minute += 10;
    let r = d.ok(&["advance", "local", "--json"], 3);
    let gate = r.json()["gates"][0].clone();
    assert_eq!(gate["name"], "old dead letters handled", "{gate}");
    assert!(
        gate["reason"].as_str().unwrap().contains("2 open groups"),
        "{gate}"
    );

    // Triage, then close the validation errors for the migration (no --queue).
    let invalid = signature_of(&d, "dlq.ndjson", "validation");
    let timeout = signature_of(&d, "dlq.ndjson", "dependency_timeout");
    let closed = d
        .ok(
            &[
                "dlq",
                "close",
                "--migration",
                "local",
                "--from",
                "dlq.ndjson",
                "--class",
                "validation",
                "--version",
                "2.14.0",
                "--signature",
                &invalid,
                "--reason",
                "fixed_in_code",
                "--by",
                "oncall",
                "--json",
            ],
            0,
        )
        .json();
    assert_eq!(closed["queue"], format!("{old_queue}.dlq"), "{closed}");
    let r = d.ok(&["advance", "local", "--json"], 3);
    let reason = r.json()["gates"][0]["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("1 open groups"), "{reason}");

    // Replay the timeouts to the migration's brokers (drain: every key routes to new).
    let replay = [
        "dlq",
        "replay",
        "dlq.ndjson",
        "--migration",
        "local",
        "--class",
        "dependency_timeout",
        "--version",
        "2.14.0",
        "--signature",
        &timeout,
        "--dedup-key",
        "order.paid:{orderId}:{n}",
        "--canary",
        "0",
        "--rate",
        "1000",
        "--by",
        "oncall",
    ];
    let r = d.ok(&replay, 0);
    assert!(
        r.stdout.contains("5 published (0 to old, 5 to new)")
            && r.stdout.contains("recorded 1 group(s) as replayed"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    let again = d.ok(&replay, 0);
    assert!(
        again.stdout.contains("0 published") && again.stdout.contains("5 skipped"),
        "{}",
        again.stdout
    );
    let arrived = rt.block_on(drain_rabbitmq(&new, &new_queue, "story", 5));
    let mut keys: Vec<&str> = arrived
        .iter()
        .map(|m| m.header("x-qm-key").unwrap())
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["o-1", "o-2", "o-3", "o-4", "o-5"],
        "each once, on the new side"
    );
    let decided = d
        .ok(
            &[
                "dlq",
                "decisions",
                "--queue",
                &format!("{old_queue}.dlq"),
                "--json",
            ],
            0,
        )
        .json();
    assert_eq!(decided.as_array().unwrap().len(), 2, "{decided}");

    // The drain gate passes on the decisions: no --force.
    d.b.minute += 3;
    let r = d.ok(&["advance", "local", "--json"], 0);
    assert_eq!(r.json()["gates"][0]["verdict"], "pass", "{}", r.stdout);
    assert_eq!(d.state(), "disconnect");
    let history = d.ok(&["history", "local", "--json"], 0).json();
    let last = history.as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["from"].as_str(), last["forced"].as_bool()),
        (Some("drain"), Some(false)),
        "{last}"
    );
}

#[cfg(feature = "brokers")]
mod the_dead_letter_story {
    #[test]
    #[ignore = "needs QM_TEST_AMQP_URL"]
    fn sqlite() {
        super::the_dead_letter_story(super::DlqBench::sqlite());
    }

    #[test]
    #[ignore = "needs QM_TEST_POSTGRES_URL and QM_TEST_AMQP_URL"]
    fn postgres() {
        super::the_dead_letter_story(super::DlqBench::postgres("dlq_story"));
    }
}

/// A replay killed (SIGKILL) in the middle, then run again: every entry goes out at most once,
/// and all of them but those left in doubt (said by the re-run) went.
fn a_replay_killed_midway_and_run_again_sends_each_entry_once(d: DlqBench) {
    let lines: Vec<String> = (1..=40)
        .map(|n| envelope("dependency_timeout", TIMEOUT, n % 60, 10 + n / 60))
        .collect();
    d.write("export.ndjson", &lines);
    let timeout = signature_of(&d, "export.ndjson", "dependency_timeout");
    let mut args = replay_args(&timeout);
    let rate = args.iter().position(|a| *a == "1000").unwrap();
    args[rate] = "20";
    let mut child =
        d.b.command(&args)
            .env("MIGRATE_STATE", &d.state)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
    common::poll_until(
        "a few lines replayed",
        std::time::Duration::from_secs(30),
        || replayed(&d).len() >= 5,
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let before = replayed(&d).len();
    assert!(before < 40, "the kill came too late to test anything");
    args[rate] = "1000";
    let r = d.run(&args);
    let in_doubt: usize = r
        .stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("replay: ")?
                .split(" entries not sent again")
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    let after = replayed(&d);
    let unique: std::collections::BTreeSet<&String> = after.iter().collect();
    assert_eq!(
        unique.len(),
        after.len(),
        "[{}] an entry went twice: {after:?}",
        d.kind()
    );
    assert!(in_doubt <= 1, "{}", r.stdout);
    assert!(
        after.len() == 40 || after.len() + in_doubt == 40,
        "[{}] {} lines, {in_doubt} in doubt\n{}\n{}",
        d.kind(),
        after.len(),
        r.stdout,
        r.stderr
    );
    assert_eq!(
        r.code,
        if in_doubt == 0 { 0 } else { 1 },
        "{}\n{}",
        r.stdout,
        r.stderr
    );
}
on_both!(
    a_replay_killed_midway_and_run_again_sends_each_entry_once,
    "dlq_kill"
);

/// The same command run again after the canary pause, without `--continue`: the canary batch
/// that went is skipped, and the run pauses after a canary of the next ones; `--continue` then
/// sends the rest. Each entry once.
fn a_canary_run_again_sends_the_next_canary_not_the_same(d: DlqBench) {
    let timeout = timeouts_exported(&d);
    let mut args = replay_args(&timeout);
    let canary = args.iter().position(|a| *a == "--canary").unwrap();
    args[canary + 1] = "2";
    d.ok(&args, 3);
    assert_eq!(replayed(&d).len(), 2);
    let r = d.ok(&args, 3);
    assert!(
        r.stdout.contains("2 skipped as sent by an earlier run"),
        "{}",
        r.stdout
    );
    assert_eq!(replayed(&d).len(), 4);
    args.push("--continue");
    d.ok(&args, 0);
    let want: Vec<String> = (1..=5)
        .map(|n| format!("2026-11-29T10:05:0{n}.000Z"))
        .collect();
    assert_eq!(
        replayed(&d),
        want,
        "[{}] each entry once, in order",
        d.kind()
    );
}
on_both!(
    a_canary_run_again_sends_the_next_canary_not_the_same,
    "dlq_canary"
);

/// Issue 42: two `dlq close` of one group at once recorded two decisions. One decision per group
/// and queue: the other close is refused, with what was decided.
fn two_concurrent_closes_record_one_decision(d: DlqBench) {
    let close = |by: &str| {
        let args = [
            "dlq",
            "close",
            "--class",
            "dependency_timeout",
            "--version",
            "2.14.0",
            "--signature",
            "Timeout after <n>ms",
            "--reason",
            "already_processed",
            "--by",
            by,
            "--queue",
            "orders.dlq",
        ];
        d.command(&args).output().unwrap()
    };
    // The store's schema in place before the two race.
    d.ok(&["dlq", "decisions"], 0);
    for round in 0..3 {
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| close("ana"));
            let b = s.spawn(|| close("bo"));
            (a.join().unwrap(), b.join().unwrap())
        });
        let ok = [&a, &b].iter().filter(|o| o.status.success()).count();
        // The first round: one of the two records; later rounds: both refused.
        assert_eq!(ok, usize::from(round == 0), "[{}] round {round}", d.kind());
        for o in [&a, &b].iter().filter(|o| !o.status.success()) {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("already closed"), "[{}] {err}", d.kind());
        }
    }
    let all = d.ok(&["dlq", "decisions", "--json"], 0).json();
    assert_eq!(
        all.as_array().map(Vec::len),
        Some(1),
        "[{}] {all}",
        d.kind()
    );
}

on_both!(two_concurrent_closes_record_one_decision, "dlq_close_race");

/// `dlq close` of the timeouts of export.ndjson for `reason`, by `by`.
fn close_args<'a>(signature: &'a str, reason: &'a str, by: &'a str) -> Vec<&'a str> {
    vec![
        "dlq",
        "close",
        "--class",
        "dependency_timeout",
        "--version",
        "2.14.0",
        "--signature",
        signature,
        "--reason",
        reason,
        "--by",
        by,
        "--queue",
        "orders.dlq",
    ]
}

/// Issue 54: two concurrent `dlq close` of one group with different reasons both recorded.
/// One decision per group whatever the reasons: the other is refused (exit 4, a conflict),
/// saying what was decided; a later close of the same group, for any reason, too.
fn two_closes_with_different_reasons_record_one_decision(d: DlqBench) {
    d.ok(&["dlq", "decisions"], 0);
    let signature = "Timeout after <n>ms";
    for round in 0..3 {
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| {
                let args = close_args(signature, "already_processed", "ana");
                d.command(&args).output().unwrap()
            });
            let b = s.spawn(|| {
                let args = close_args(signature, "window_expired", "bo");
                d.command(&args).output().unwrap()
            });
            (a.join().unwrap(), b.join().unwrap())
        });
        let ok = [&a, &b].iter().filter(|o| o.status.success()).count();
        assert_eq!(ok, usize::from(round == 0), "[{}] round {round}", d.kind());
        for o in [&a, &b].iter().filter(|o| !o.status.success()) {
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(4), "[{}] {err}", d.kind());
            assert!(err.contains("already closed as"), "[{}] {err}", d.kind());
        }
    }
    let all = d.ok(&["dlq", "decisions", "--json"], 0).json();
    assert_eq!(
        all.as_array().map(Vec::len),
        Some(1),
        "[{}] {all}",
        d.kind()
    );
}
on_both!(
    two_closes_with_different_reasons_record_one_decision,
    "dlq_close_reasons"
);

/// Issue 54: a replay of a group a close decided sent every message and recorded a second
/// decision. Refused before anything is sent (exit 4), the close the only decision.
fn a_replay_of_a_closed_group_sends_nothing(d: DlqBench) {
    let timeout = timeouts_exported(&d);
    d.ok(&close_args(&timeout, "already_processed", "ana"), 0);
    let r = d.ok(&replay_args(&timeout), 4);
    assert!(
        r.stderr.contains("refused, nothing was sent") && r.stderr.contains("already closed as"),
        "[{}] {}",
        d.kind(),
        r.stderr
    );
    assert_eq!(replayed(&d), Vec::<String>::new(), "[{}]", d.kind());
    let all = d.ok(&["dlq", "decisions", "--json"], 0).json();
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 1, "[{}] {all:?}", d.kind());
    assert_eq!(all[0]["action"], "close", "[{}] {all:?}", d.kind());
}
on_both!(
    a_replay_of_a_closed_group_sends_nothing,
    "dlq_replay_closed"
);

/// Issue 54: `close` racing `replay` both recorded, the replay sending every message. The
/// replay holds the group from before its first message: a close while it runs is refused
/// (exit 4), and the replay's is the one decision.
fn a_close_racing_a_replay_is_refused(d: DlqBench) {
    let lines: Vec<String> = (1..=12)
        .map(|n| envelope("dependency_timeout", TIMEOUT, n, 10))
        .collect();
    d.write("export.ndjson", &lines);
    let timeout = signature_of(&d, "export.ndjson", "dependency_timeout");
    let mut args = replay_args(&timeout);
    let rate = args.iter().position(|a| *a == "1000").unwrap();
    args[rate] = "4";
    let mut replay = d.command(&args).spawn().unwrap();
    // Once the replay sent its first message (it held the group before), close the group.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let sent_one =
        || std::fs::read_to_string(d.b.path("out.ndjson")).is_ok_and(|t| t.contains('\n'));
    while !sent_one() {
        assert!(
            std::time::Instant::now() < deadline,
            "[{}] no message",
            d.kind()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let close = d.run(&close_args(&timeout, "window_expired", "bo"));
    let replay = replay.wait().unwrap();
    assert_eq!(close.code, 4, "[{}] {}", d.kind(), close.stderr);
    assert!(
        close.stderr.contains("is being replayed"),
        "[{}] {}",
        d.kind(),
        close.stderr
    );
    assert!(replay.success(), "[{}]", d.kind());
    assert_eq!(replayed(&d).len(), 12, "[{}]", d.kind());
    let all = d.ok(&["dlq", "decisions", "--json"], 0).json();
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 1, "[{}] {all:?}", d.kind());
    assert_eq!(all[0]["action"], "replay", "[{}] {all:?}", d.kind());
    // Decided: a close now is refused as well, and says by what.
    let again = d.run(&close_args(&timeout, "window_expired", "bo"));
    assert_eq!(again.code, 4, "[{}] {}", d.kind(), again.stderr);
    assert!(
        again.stderr.contains("already replayed"),
        "[{}] {}",
        d.kind(),
        again.stderr
    );
}
on_both!(a_close_racing_a_replay_is_refused, "dlq_close_replay_race");

/// Issue 42: `dlq decisions` without `--queue` showed the queue `default` only.
fn decisions_without_a_queue_show_every_queue(d: DlqBench) {
    for queue in ["orders.dlq", "billing.dlq"] {
        d.ok(
            &[
                "dlq",
                "close",
                "--class",
                "validation",
                "--version",
                "1.0.0",
                "--signature",
                "bad input",
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
    let all = d.ok(&["dlq", "decisions"], 0).stdout;
    assert!(
        all.contains("orders.dlq") && all.contains("billing.dlq"),
        "[{}] {all}",
        d.kind()
    );
    let one = d
        .ok(&["dlq", "decisions", "--queue", "billing.dlq"], 0)
        .stdout;
    assert!(!one.contains("orders.dlq"), "[{}] {one}", d.kind());
}

on_both!(decisions_without_a_queue_show_every_queue, "dlq_all_queues");

/// Issue 42: of two `dlq replay` runs of one queue at once, the one that reached an entry the
/// other was sending called it in doubt ("1 in doubt", `--resend-in-doubt`, exit 1) though
/// nothing was. It waits for the other run's claim to settle, and skips what it sent.
///
/// Run A sends to a pipe nobody reads yet, with entries of 256 KiB: it blocks writing the first
/// one, between its claim and its settle. Run B reads the same entries from its standard input;
/// once it took the first one (the test's write of it returned), A is let go.
fn two_concurrent_replays_wait_for_each_other_instead_of_calling_claims_in_doubt(d: DlqBench) {
    use std::io::{Read, Write};
    use std::process::Stdio;
    let big = "x".repeat(256 << 10);
    let lines: Vec<String> = (1..=3)
        .map(|n| {
            let mut v: serde_json::Value =
                serde_json::from_str(&envelope("dependency_timeout", TIMEOUT, n, 10)).unwrap();
            v["payload"] = serde_json::json!({"orderId": format!("o-{n}"), "pad": big})
                .to_string()
                .into();
            v.to_string()
        })
        .collect();
    d.write("export.ndjson", &lines);
    let timeout = signature_of(&d, "export.ndjson", "dependency_timeout");
    d.ok(&["dlq", "decisions"], 0); // the schema exists
    // Both to standard output: one destination, one ledger.
    let args = |file| {
        replay_args(&timeout)
            .into_iter()
            .map(|a| match a {
                "export.ndjson" => file,
                "out.ndjson" => "-",
                a => a,
            })
            .map(str::to_string)
            .collect::<Vec<String>>()
    };
    let a_args = args("export.ndjson");
    let b_args = args("-");
    fn strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    let mut a = d
        .command(&strs(&a_args))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut a_out = a.stdout.take().unwrap();
    let mut first = [0u8; 1];
    // A wrote the first byte of entry 1: it claimed it, and blocks on the full pipe.
    assert_eq!(
        a_out.read(&mut first).unwrap(),
        1,
        "[{}] A sent nothing",
        d.kind()
    );

    let b_file = std::fs::File::create(d.path("b.ndjson")).unwrap();
    let mut b = d
        .command(&strs(&b_args))
        .stdin(Stdio::piped())
        .stdout(b_file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut b_in = b.stdin.take().unwrap();
    // Returns once B read most of entry 1 (the pipe holds 64 KiB): B is about to claim it.
    b_in.write_all(format!("{}\n", lines[0]).as_bytes())
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    // A goes on: it settles entry 1 as sent while B waits.
    let drain = std::thread::spawn(move || {
        let mut rest = Vec::new();
        a_out.read_to_end(&mut rest).unwrap();
        rest
    });
    for line in &lines[1..] {
        b_in.write_all(format!("{line}\n").as_bytes()).unwrap();
    }
    drop(b_in);
    let b = b.wait_with_output().unwrap();
    let a_rest = drain.join().unwrap();
    let a = a.wait_with_output().unwrap();

    let a_err = String::from_utf8_lossy(&a.stderr);
    let b_err = String::from_utf8_lossy(&b.stderr);
    for (run, out, err) in [("A", &a.status, &a_err), ("B", &b.status, &b_err)] {
        assert!(
            out.success() && !err.contains("in doubt"),
            "[{}] run {run} exited {out}: {err}",
            d.kind()
        );
    }
    let a_text = String::from_utf8([&first[..], &a_rest].concat()).unwrap();
    let b_text = std::fs::read_to_string(d.path("b.ndjson")).unwrap();
    let mut sent: Vec<String> = a_text
        .lines()
        .chain(b_text.lines())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["headers"]["x-replay-of"].as_str().unwrap().to_string()
        })
        .collect();
    sent.sort();
    let want: Vec<String> = (1..=3)
        .map(|n| format!("2026-11-29T10:05:0{n}.000Z"))
        .collect();
    assert_eq!(
        sent,
        want,
        "[{}] each entry once\nA: {a_err}\nB: {b_err}",
        d.kind()
    );
}

on_both!(
    two_concurrent_replays_wait_for_each_other_instead_of_calling_claims_in_doubt,
    "dlq_replay_race"
);
