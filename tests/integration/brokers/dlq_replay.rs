//! `migrate dlq replay` end to end: what the canary and a resumed run leave in the output, and
//! what a failing output does to the outcome. Each on a SQLite state, and on PostgreSQL with
//! `--include-ignored` and `QM_TEST_POSTGRES_URL` (tests/common/dlq_bench.rs).

use crate::common;
use crate::on_both;

use common::dlq_bench::DlqBench;

/// Five envelopes of one group, first attempted the day before the bench's clock.
fn export(b: &DlqBench) -> &'static str {
    let envelope = |id: u32| {
        format!(
            r#"{{"payload":"{{\"order\":{id}}}","errorClass":"dependency_timeout","errorMessage":"timeout after 30012ms calling inventory-service","consumerVersion":"2.14.0","traceId":"t{id}","attempts":3,"firstAttemptAt":"2026-11-29T10:00:0{id}.000Z","deadLetteredAt":"2026-11-29T10:05:0{id}.000Z"}}"#
        )
    };
    let text: String = (1..=5).map(|i| envelope(i) + "\n").collect();
    std::fs::write(b.path("export.ndjson"), text).unwrap();
    "export.ndjson"
}

fn replay_args<'a>(file: &'a str, output: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "dlq",
        "replay",
        file,
        "--output",
        output,
        "--canary",
        "2",
        "--rate",
        "1000",
        "--by",
        "ana",
        "--queue",
        "orders.dlq",
    ];
    args.extend_from_slice(extra);
    args
}

/// The `x-replay-of` of each line of an NDJSON replay output, in order.
fn replayed(b: &DlqBench, output: &str) -> Vec<String> {
    std::fs::read_to_string(b.path(output))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["headers"]["x-replay-of"].as_str().unwrap().to_string()
        })
        .collect()
}

fn replay_continue_appends_to_the_canary_output(b: DlqBench) {
    let file = export(&b);
    let r = b.ok(&replay_args(file, "out.ndjson", &[]), 3);
    assert!(r.stdout.contains("--continue"), "{}", r.stdout);
    assert_eq!(replayed(&b, "out.ndjson").len(), 2);
    b.ok(&replay_args(file, "out.ndjson", &["--continue"]), 0);
    // The canary's two lines are still there, followed by the other three: each entry once.
    let want: Vec<String> = (1..=5)
        .map(|i| format!("2026-11-29T10:05:0{i}.000Z"))
        .collect();
    assert_eq!(replayed(&b, "out.ndjson"), want);
}
on_both!(replay_continue_appends_to_the_canary_output, "rp_continue");

/// Regression: a run cut in the middle of a line (a full disk, a kill) left a fragment at the
/// end of the output, and the next run appended its first line right after it: two messages
/// lost in one line of garbage.
fn replay_after_a_cut_line_starts_on_a_line_of_its_own(b: DlqBench) {
    let file = export(&b);
    std::fs::write(b.path("out.ndjson"), r#"{"payload":"{\"order\":0}","head"#).unwrap();
    b.ok(&replay_args(file, "out.ndjson", &[]), 3);
    let text = std::fs::read_to_string(b.path("out.ndjson")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].ends_with(r#""head"#),
        "the fragment stays alone: {text}"
    );
    for line in &lines[1..] {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["headers"]["x-replay-of"].is_string(), "{line}");
    }
}
on_both!(
    replay_after_a_cut_line_starts_on_a_line_of_its_own,
    "rp_cut"
);

/// Regression: `--output` was opened for reading too (to look at its last byte), so with a FIFO
/// or a process substitution the replay held a read end itself: once its reader died the writes
/// no longer failed, and the run blocked for good when the pipe filled instead of aborting.
#[cfg(unix)]
fn replay_into_a_pipe_whose_reader_died_aborts_instead_of_blocking(b: DlqBench) {
    let envelope = |id: u32| {
        format!(
            r#"{{"payload":"{{\"order\":{id},\"pad\":\"{pad}\"}}","errorClass":"dependency_timeout","errorMessage":"timeout","consumerVersion":"2.14.0","traceId":"t{id}","attempts":3,"firstAttemptAt":"2026-11-29T10:00:00.000Z","deadLetteredAt":"2026-11-29T10:05:00.000Z"}}"#,
            pad = "x".repeat(400)
        )
    };
    let text: String = (1..=2_000).map(|i| envelope(i) + "\n").collect();
    std::fs::write(b.path("big.ndjson"), text).unwrap();
    let fifo = b.path("out.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // A reader that takes one byte and dies.
    let mut reader = std::process::Command::new("head")
        .args(["-c", "1"])
        .arg(&fifo)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let fifo_arg = fifo.to_str().unwrap();
    let mut args = replay_args("big.ndjson", fifo_arg, &[]);
    // No canary, no pacing to speak of: the whole file at once.
    let canary = args.iter().position(|a| *a == "--canary").unwrap();
    args[canary + 1] = "0";
    let rate = args.iter().position(|a| *a == "--rate").unwrap();
    args[rate + 1] = "100000";
    let mut replay = b
        .command(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = replay.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = replay.kill();
            let _ = replay.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let _ = reader.wait();
    let status = status.expect("the replay blocked on a pipe nobody reads");
    assert_eq!(status.code(), Some(1), "a dead reader is a failed write");
}
#[cfg(unix)]
on_both!(
    replay_into_a_pipe_whose_reader_died_aborts_instead_of_blocking,
    "rp_pipe"
);

fn replay_flush_failure_after_the_canary_is_not_a_pause(b: DlqBench) {
    let file = export(&b);
    // /dev/full takes the buffered lines and fails when they are flushed.
    let r = b.ok(&replay_args(file, "/dev/full", &[]), 1);
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(!all.contains("paused"), "{all}");
    assert!(!all.contains("with --continue"), "{all}");
    assert!(all.contains("could not be flushed"), "{all}");
    // Nothing of this run is known to have gone out: resuming starts from the first entry.
    assert!(all.contains("--skip 0"), "{all}");
}
on_both!(
    replay_flush_failure_after_the_canary_is_not_a_pause,
    "rp_flush"
);

/// Publishes everything but the messages whose body is in `fail`.
struct FailsSome {
    fail: &'static [&'static str],
}

impl queue_migrate::dlq::replay::Publisher for FailsSome {
    async fn publish(
        &mut self,
        m: &queue_migrate::dlq::replay::ReplayMessage<'_>,
    ) -> Result<(), queue_migrate::dlq::replay::PublishError> {
        let body = m.payload.to_bytes();
        if self.fail.iter().any(|f| *body == *f.as_bytes()) {
            return Err(queue_migrate::dlq::replay::PublishError::Rejected(
                "nack".into(),
            ));
        }
        Ok(())
    }
    async fn flush(&mut self) -> Result<(), queue_migrate::dlq::replay::PublishError> {
        Ok(())
    }
}

struct Now(i64);

impl queue_migrate::dlq::replay::Pacer for Now {
    fn now_ms(&self) -> i64 {
        self.0
    }
    async fn sleep_until(&mut self, at_ms: i64) {
        self.0 = self.0.max(at_ms);
    }
}

#[test]
fn replay_completed_with_failures_does_not_record_a_failed_group_as_replayed() {
    use queue_migrate::dlq::envelope::{DeadLetter, Payload};
    use queue_migrate::dlq::replay::{
        self, Event, GroupTally, Outcome, ReplayMachine, ReplayPolicy,
    };
    use queue_migrate::time::parse_timestamp;

    let entry = |group: &str, i: u32| {
        let e = DeadLetter {
            payload: Payload::Bytes(format!("{group}{i}").into_bytes()),
            error_class: group.to_string(),
            error_message: "m".into(),
            consumer_version: "1".into(),
            trace_id: None,
            attempts: 3,
            first_attempt_at: format!("2026-11-29T10:00:0{i}.000Z"),
            dead_lettered_at: format!("2026-11-29T10:05:0{i}.000Z"),
        };
        (group.to_string(), e)
    };
    // Two groups, three entries each, interleaved; one message of group b fails: one failure in
    // six is under the default threshold, and below the sample the rate is not even checked.
    let entries: Vec<(String, DeadLetter)> = (1..=3)
        .flat_map(|i| [entry("a", i), entry("b", i)])
        .collect();
    let now = parse_timestamp("2026-11-30T00:00:00Z").unwrap();
    let mut machine = ReplayMachine::new(ReplayPolicy {
        canary: 0,
        ..ReplayPolicy::default()
    })
    .unwrap();
    let mut tally = GroupTally::default();
    let summary = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(replay::run(
            &mut machine,
            entries.iter().map(|(_, e)| e),
            &mut FailsSome { fail: &["b2"] },
            &mut Now(now),
            |event: &Event<'_, &DeadLetter>, _| match event {
                Event::Published(e) => tally.observe(&e.error_class, e, true),
                Event::Failed(e, _) | Event::Held(e, _) => tally.observe(&e.error_class, e, false),
            },
        ));
    assert_eq!(summary.outcome, Outcome::Completed);
    assert_eq!((summary.stats.published, summary.stats.failed), (5, 1));
    // Only group a went out whole: b stays open, and says how many of its messages failed.
    let replayed: Vec<&String> = tally.replayed().map(|(k, _)| k).collect();
    assert_eq!(replayed, ["a"]);
    let (open, count) = tally.unfinished().next().unwrap();
    assert_eq!(open, "b");
    assert_eq!((count.published, count.failed), (2, 1));
    assert_eq!(tally.unfinished().count(), 1);
    let (_, a) = tally.replayed().next().unwrap();
    assert_eq!(a.first_seen.as_deref(), Some("2026-11-29T10:00:01.000Z"));
    assert_eq!(a.last_seen.as_deref(), Some("2026-11-29T10:00:03.000Z"));
    // From the first failure (entry 4, b2) on, a later run sends everything again.
    assert_eq!(summary.resume.skip, 3);
}

fn replay_refusal_of_old_entries_says_how_many_which_lines_and_what_to_do(b: DlqBench) {
    let file = export(&b);
    // Lines 2 and 4 were first attempted long before the bench's clock (line 4 the earliest).
    let text = std::fs::read_to_string(b.path(file))
        .unwrap()
        .replace("2026-11-29T10:00:02.000Z", "2025-06-01T00:00:00.000Z")
        .replace("2026-11-29T10:00:04.000Z", "2025-02-01T00:00:00.000+01:00");
    std::fs::write(b.path(file), text).unwrap();
    let mut args = replay_args(file, "out.ndjson", &[]);
    let by = args.iter().position(|a| *a == "--by").unwrap();
    args[by + 1] = "Ana O'Neil";
    let r = b.ok(&args, 2);
    for want in [
        "nothing was sent",
        "2 of 5 selected entries first attempted more than --max-age 7d ago",
        "lines 2, 4 of export.ndjson",
        "the oldest, line 4, at 2025-02-01T00:00:00.000+01:00",
        "migrate dlq close --class dependency_timeout --version 2.14.0 --signature 'timeout after <n>ms calling inventory-service' --reason window_expired --by 'Ana O'\\''Neil' --queue orders.dlq --from export.ndjson",
        "--force-old",
    ] {
        assert!(r.stderr.contains(want), "{want:?} not in:\n{}", r.stderr);
    }
    assert!(!b.path("out.ndjson").exists());
}
on_both!(
    replay_refusal_of_old_entries_says_how_many_which_lines_and_what_to_do,
    "rp_refuse"
);
