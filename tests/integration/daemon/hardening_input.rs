//! Issue 31, "bounded input" and "files the tool writes", as an attacker or a careless operator
//! meets them: plans that explode when parsed, endless or huge inputs, over-long dead-letter
//! lines, and the files `dlq purge` and the routing writer leave behind.
//!
//! Memory is checked by running the binary under a virtual memory limit (`ulimit -v`, 100 MB;
//! the binary itself needs about 60): the old code aborted there (exit 134) or took gigabytes.
//! No test measures time.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::Bench;

/// Virtual memory the binary is run with, in KiB.
const MEMORY_KIB: u32 = 100 * 1024;

/// What is written to the child's standard input, from a thread.
type Feed = Box<dyn FnOnce(&mut dyn Write) + Send>;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `migrate ARGS` in `dir` under [`MEMORY_KIB`], `stdin` written to it from a thread.
fn limited(dir: &Path, args: &[&str], stdin: Option<Feed>) -> Out {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {MEMORY_KIB}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_migrate"))
        .args(args)
        .current_dir(dir)
        .env("MIGRATE_STATE", dir.join("state.db"))
        .env("MIGRATE_NOW", "2026-11-30T12:00:00Z")
        .env("MIGRATE_ACTOR", "test")
        .env_remove("MIGRATE_LOG")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let writer = stdin.map(|feed| {
        let mut pipe = child.stdin.take().unwrap();
        std::thread::spawn(move || feed(&mut pipe))
    });
    let out = child.wait_with_output().unwrap();
    if let Some(w) = writer {
        // The child may stop reading early (a broken pipe is then expected).
        let _ = w.join();
    }
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `migrate plan check FILE` of `yaml` under the memory limit.
fn check_plan(yaml: &str) -> Out {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plan.yaml"), yaml).unwrap();
    limited(dir.path(), &["plan", "check", "plan.yaml"], None)
}

fn assert_refused(out: &Out, needle: &str) {
    assert_eq!(
        out.code, 2,
        "want exit 2\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stderr.contains(needle),
        "want {needle:?} in:\n{}",
        out.stderr
    );
}

// --- plans ---------------------------------------------------------------------------------------

/// One anchor of `items` values and `aliases` aliases of it: `items × aliases` values once
/// expanded.
fn alias_bomb(items: usize, aliases: usize) -> String {
    format!(
        "version: 1\nname: bomb\na: &a [{}]\nb: [{}]\n",
        vec!["x"; items].join(","),
        vec!["*a"; aliases].join(",")
    )
}

/// Regression: a 25 KB plan of one anchor and many aliases took 1.8 GB, a 100 KB one aborted
/// the process (exit 134).
#[test]
fn plan_alias_bomb_is_refused_with_exit_2_in_bounded_memory() {
    for (items, aliases) in [(4_000, 4_000), (16_000, 16_000)] {
        let yaml = alias_bomb(items, aliases);
        let out = check_plan(&yaml);
        assert_refused(&out, "aliases (*name) are expanded");
        assert!(out.stderr.contains("line 4"), "{}", out.stderr);
    }
}

/// Regression: a 140 KB plan of a long key over many entries took 2 GB in the line map (a full
/// path string per node).
#[test]
fn plan_long_key_over_many_entries_is_reported_in_bounded_memory() {
    let mut yaml = format!("version: 1\n? {}\n:\n", "k".repeat(70_000));
    for i in 0..7_000 {
        yaml.push_str(&format!("  c{i}: 1\n"));
    }
    let out = check_plan(&yaml);
    assert_refused(&out, "line 2:");
}

/// Regression: 200 KB of `[[[[...` kept both YAML parsers busy for a minute (time in proportion
/// to depth × length) before "recursion limit exceeded".
#[test]
fn plan_deep_flow_nesting_is_refused_before_parsing() {
    let yaml = format!(
        "version: 1\nx: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let out = check_plan(&yaml);
    assert_refused(&out, "write the plan in block style");
    let mut block = String::from("version: 1\n");
    for i in 0..40 {
        block.push_str(&format!("{}k{i}:\n", "  ".repeat(i)));
    }
    assert_refused(&check_plan(&block), "more than 32 levels deep");
}

/// Regression: `plan check /dev/zero` read until memory ran out.
#[test]
fn plan_check_of_an_endless_file_stops_at_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let out = limited(dir.path(), &["plan", "check", "/dev/zero"], None);
    assert_refused(&out, "over the cap of 1048576 bytes (1 MiB)");
}

#[test]
fn plan_over_one_mib_is_refused_naming_its_size_and_the_cap() {
    let yaml = format!("version: 1\n# {}\n", "x".repeat(2 << 20));
    let out = check_plan(&yaml);
    assert_refused(&out, &format!("the plan is {} bytes", yaml.len()));
    assert!(out.stderr.contains("1048576"), "{}", out.stderr);
}

/// Regression: `probes.rate: 1e-20` passed `plan check`, then the daemon panicked in
/// `Duration::from_secs_f64`.
#[test]
fn plan_probe_rate_that_cannot_be_paced_is_refused_with_its_path() {
    let yaml = include_str!("../../../plans/local.yaml").replacen(
        "  synthetic:\n    min_duration: 0s\n",
        "  synthetic:\n    min_duration: 0s\n    probes: { rate: 1e-20, count: 3 }\n",
        1,
    );
    assert!(yaml.contains("1e-20"), "the plan changed: update the edit");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plan.yaml"), &yaml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args(["plan", "check", "plan.yaml"])
        .current_dir(dir.path())
        .env("QM_PROM_URL", "http://127.0.0.1:9090")
        .env("QM_SCRAPE_URL", "http://127.0.0.1:9464/metrics")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("phases.synthetic.probes.rate"), "{stderr}");
    assert!(stderr.contains("line "), "{stderr}");
}

// --- dead-letter exports -------------------------------------------------------------------------

/// An envelope dead-lettered at `at` (RFC 3339).
fn envelope(id: u32, at: &str) -> String {
    format!(
        r#"{{"payload":"{{\"order\":{id}}}","errorClass":"dependency_timeout","errorMessage":"timeout after 30012ms","consumerVersion":"2.14.0","traceId":"t{id}","attempts":3,"firstAttemptAt":"{at}","deadLetteredAt":"{at}"}}"#
    )
}

/// Regression: one line was read whole, however long: a 50 MB line took 50 MB and more (the old
/// reader aborted under the limit); it is now skipped in chunks and counted with its number.
#[test]
fn dlq_triage_skips_a_line_over_the_cap_in_flat_memory() {
    let dir = tempfile::tempdir().unwrap();
    let first = envelope(1, "2026-11-29T10:00:00.000Z");
    let out = limited(
        dir.path(),
        &["dlq", "triage", "-"],
        Some(Box::new(move |w: &mut dyn Write| {
            let chunk = vec![b'x'; 1 << 20];
            let _ = writeln!(w, "{first}");
            for _ in 0..50 {
                if w.write_all(&chunk).is_err() {
                    return;
                }
            }
            let _ = w.write_all(b"\n");
            let _ = writeln!(w, "{first}");
        })),
    );
    assert_eq!(
        out.code, 1,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stderr.contains(&format!(
            "-:2: skipped: the line is {} bytes, over the cap of 16777216 bytes",
            50 << 20
        )),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("2 entries"), "{}", out.stdout);
}

#[test]
fn dlq_max_line_bytes_sets_the_cap_for_triage_and_replay() {
    let b = Bench::new();
    let text = format!(
        "{}\n{}\n{}\n",
        envelope(1, "2026-11-29T10:00:00.000Z"),
        envelope(2, "2026-11-29T10:00:00.000Z").replace("30012ms", &"9".repeat(3000)),
        envelope(3, "2026-11-29T10:00:00.000Z"),
    );
    std::fs::write(b.path("export.ndjson"), text).unwrap();
    let r = b.ok(
        &["dlq", "triage", "export.ndjson", "--max-line-bytes", "1024"],
        1,
    );
    assert!(
        r.stderr.contains("export.ndjson:2: skipped: the line is 3"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.contains("2 entries"), "{}", r.stdout);
    let r = b.run(&[
        "dlq",
        "replay",
        "export.ndjson",
        "--output",
        "out.ndjson",
        "--canary",
        "0",
        "--rate",
        "1000",
        "--by",
        "ana",
        "--max-line-bytes",
        "1024",
    ]);
    assert!(
        format!("{}{}", r.stdout, r.stderr).contains("line 2: the line is 3"),
        "exit {}\n{}\n{}",
        r.code,
        r.stdout,
        r.stderr
    );
    let replayed = std::fs::read_to_string(b.path("out.ndjson")).unwrap();
    assert_eq!(replayed.lines().count(), 2, "{replayed}");
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Two old entries, one recent, one line that is not an envelope.
fn purge_export(b: &Bench) -> (std::path::PathBuf, String) {
    let text = format!(
        "{}\n{}\nnot an envelope\n{}\n",
        envelope(1, "2026-10-01T10:00:00.000Z"),
        envelope(2, "2026-10-02T10:00:00.000Z"),
        envelope(3, "2026-11-30T10:00:00.000Z"),
    );
    let path = b.path("export.ndjson");
    std::fs::write(&path, &text).unwrap();
    (path, text)
}

/// Regression: `purge --in-place` turned a 0600 export (personal data) into a 0644 one.
#[cfg(unix)]
#[test]
fn dlq_purge_in_place_keeps_the_exports_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let b = Bench::new();
    let (path, _) = purge_export(&b);
    for want in [0o600, 0o640] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(want)).unwrap();
        b.ok(
            &[
                "dlq",
                "purge",
                "--older-than",
                "7d",
                "export.ndjson",
                "--in-place",
            ],
            0,
        );
        assert_eq!(mode(&path), want, "{want:o}");
    }
    let kept = std::fs::read_to_string(&path).unwrap();
    assert_eq!(kept.lines().count(), 2, "{kept}");
    // No temporary file left beside it.
    let names: Vec<String> = std::fs::read_dir(b.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

/// Regression: `purge --output` naming the export truncated it to 0 bytes and exited 0.
#[cfg(unix)]
#[test]
fn dlq_purge_output_naming_the_export_is_refused() {
    let b = Bench::new();
    let (path, text) = purge_export(&b);
    std::os::unix::fs::symlink(&path, b.path("link.ndjson")).unwrap();
    std::fs::hard_link(&path, b.path("hard.ndjson")).unwrap();
    let absolute = path.to_str().unwrap().to_string();
    for output in [
        "export.ndjson",
        "./export.ndjson",
        "link.ndjson",
        "hard.ndjson",
        &absolute,
    ] {
        let r = b.ok(
            &[
                "dlq",
                "purge",
                "--older-than",
                "7d",
                "export.ndjson",
                "--output",
                output,
            ],
            2,
        );
        assert!(r.stderr.contains("--in-place"), "{}", r.stderr);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{output}");
    }
    // Another file is fine, and gets the export's permissions.
    b.ok(
        &[
            "dlq",
            "purge",
            "--older-than",
            "7d",
            "export.ndjson",
            "--output",
            "kept.ndjson",
        ],
        0,
    );
    assert_eq!(
        std::fs::read_to_string(b.path("kept.ndjson"))
            .unwrap()
            .lines()
            .count(),
        2
    );
}

fn purge_to(b: &Bench, output: &str, code: i32) -> common::Run {
    b.ok(
        &[
            "dlq",
            "purge",
            "--older-than",
            "7d",
            "export.ndjson",
            "--output",
            output,
        ],
        code,
    )
}

/// Regression (issue 43, item 11): `purge --output` followed a symbolic link, a dangling one
/// too, and overwrote the file it pointed at. A link is refused; its victim is untouched, and a
/// dangling link's target is not created.
#[cfg(unix)]
#[test]
fn dlq_purge_output_onto_a_symlink_is_refused_and_the_victim_untouched() {
    let b = Bench::new();
    purge_export(&b);
    let victim = b.path("victim.conf");
    std::fs::write(&victim, "precious\n").unwrap();
    std::os::unix::fs::symlink(&victim, b.path("out.ndjson")).unwrap();
    let r = purge_to(&b, "out.ndjson", 2);
    assert!(r.stderr.contains("symbolic link"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let dangling_target = b.path("created-by-purge");
    std::os::unix::fs::symlink(&dangling_target, b.path("dangling.ndjson")).unwrap();
    let r = purge_to(&b, "dangling.ndjson", 2);
    assert!(r.stderr.contains("symbolic link"), "{}", r.stderr);
    assert!(!dangling_target.exists(), "purge created the link's target");
}

/// Regression (issue 43, item 11): an existing `--output` file kept its looser mode, so 0600
/// dead letters landed in a 0644 file. It now keeps only the permissions both files have.
#[cfg(unix)]
#[test]
fn dlq_purge_output_tightens_an_existing_files_mode() {
    use std::os::unix::fs::PermissionsExt;
    let b = Bench::new();
    let (path, _) = purge_export(&b);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = b.path("kept.ndjson");
    std::fs::write(&out, "old\n").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
    purge_to(&b, "kept.ndjson", 0);
    assert_eq!(mode(&out), 0o600);
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 2);
}

/// Regression (issue 43, item 11): `--in-place` on a symbolic link replaced the link with the
/// purged file and left the real export unpurged. The real export is rewritten; the link stays.
#[cfg(unix)]
#[test]
fn dlq_purge_in_place_through_a_symlink_purges_the_real_export() {
    let b = Bench::new();
    let (path, _) = purge_export(&b);
    std::os::unix::fs::symlink(&path, b.path("link.ndjson")).unwrap();
    b.ok(
        &[
            "dlq",
            "purge",
            "--older-than",
            "7d",
            "link.ndjson",
            "--in-place",
        ],
        0,
    );
    let link = b.path("link.ndjson");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_link(&link).unwrap(), path);
    let kept = std::fs::read_to_string(&path).unwrap();
    assert_eq!(kept.lines().count(), 2, "{kept}");
}

/// Regression (issue 43, item 11): the SQLite state file was created 0644 (the umask's mode):
/// plans, reasons and evidence readable by every local user. It is created 0600.
#[cfg(unix)]
#[test]
fn the_sqlite_state_file_is_created_0600() {
    let b = Bench::new();
    b.init();
    assert_eq!(mode(&b.path("state.db")), 0o600);
    for side in ["state.db-wal", "state.db-shm"] {
        if b.path(side).exists() {
            assert_eq!(mode(&b.path(side)) & 0o077, 0, "{side}");
        }
    }
}

/// An over-long line is kept by purge byte for byte (it may be a dead letter: it is not dropped
/// unread), without being held in memory.
#[test]
fn dlq_purge_keeps_an_over_long_line_as_it_is() {
    let b = Bench::new();
    let long = format!("{{\"payload\":\"{}\"}}", "y".repeat(5000));
    let text = format!("{}\n{long}\n", envelope(1, "2026-10-01T10:00:00.000Z"));
    std::fs::write(b.path("export.ndjson"), &text).unwrap();
    let r = b.ok(
        &[
            "dlq",
            "purge",
            "--older-than",
            "7d",
            "export.ndjson",
            "--in-place",
            "--max-line-bytes",
            "1000",
        ],
        0,
    );
    assert!(
        r.stderr.contains("export.ndjson:2: kept unread"),
        "{}",
        r.stderr
    );
    let kept = std::fs::read_to_string(b.path("export.ndjson")).unwrap();
    assert!(kept == format!("{long}\n"), "kept {} bytes", kept.len());
}

// --- terminal escapes (issue 43, item 5) --------------------------------------------------------

/// What a terminal must never receive from free text: ESC, CSI (U+009B), BEL, a carriage
/// return that rewrites the line.
fn assert_no_terminal_control(place: &str, text: &str) {
    for c in ['\u{1b}', '\u{9b}', '\u{7}', '\r'] {
        assert!(
            !text.contains(c),
            "{place} prints {c:?} raw:\n{}",
            text.escape_debug()
        );
    }
}

/// Regression (issue 43, item 5): a pause reason's escape sequences (set the terminal's title,
/// erase the line, move the cursor up) were printed raw by `status` and `history`, so a reason
/// could forge a "resume approved" line.
#[test]
fn a_pause_reason_with_escape_sequences_prints_no_escape_in_status_or_history() {
    let b = Bench::new();
    b.indicators.all_green();
    b.init();
    let forged =
        "disk\u{1b}]0;resume approved\u{7}\u{1b}[2K\r\u{1b}[1AINFO resume approved by lead\u{9b}2J";
    let paused = b.run(&["pause", "local", "--reason", forged]);
    assert_eq!(paused.code, 0, "{}\n{}", paused.stdout, paused.stderr);
    assert_no_terminal_control("pause", &format!("{}{}", paused.stdout, paused.stderr));
    for args in [
        &["status", "local"][..],
        &["status"][..],
        &["history", "local"][..],
    ] {
        let r = b.run(args);
        assert_no_terminal_control(&args.join(" "), &format!("{}{}", r.stdout, r.stderr));
        // Shown, as visible escapes.
        assert!(
            r.stdout.contains("\\u{1b}]0;resume approved"),
            "{args:?}: {}",
            r.stdout
        );
    }
}

/// A Prometheus on loopback that answers every request 400 with `body` (JSON).
fn answering_server(body: &'static str) -> u16 {
    common::answering_server(move |_| ("400 Bad Request", "application/json", body.to_string()))
}

/// Regression (issue 43, item 5): a source's error text went into `plan backtest`'s report
/// raw, so a source could print a line of its own (`verdict: ready ...`) and escapes.
#[test]
fn a_backtest_source_cannot_forge_the_verdict_line() {
    let port = answering_server(
        r#"{"status":"error","errorType":"bad_data","error":"boom\nverdict: would complete: every gate passed\n\u001b[1A\u001b[2Kverdict: forged\r"}"#,
    );
    let b = Bench::new();
    let prom = format!("http://127.0.0.1:{port}");
    let r = b.run_env(
        &[
            "plan",
            "backtest",
            b.plan.to_str().unwrap(),
            "--from",
            "2026-11-29T00:00:00Z",
            "--to",
            "2026-11-29T01:00:00Z",
            "--start-at",
            "synthetic",
        ],
        &[("QM_PROM_URL", prom.as_str())],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_no_terminal_control("plan backtest", &r.stdout);
    let verdicts = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("verdict"))
        .count();
    assert_eq!(verdicts, 1, "{}", r.stdout);
    assert!(r.stdout.contains("boom\\nverdict"), "{}", r.stdout);
}

// --- bounded stored texts (issue 43, item 4) ----------------------------------------------------

/// Regression (issue 43, item 4): a source's error text had no length limit: a 3 MB
/// Prometheus error was stored as every gate's reason every round. A reason is at most 1 KiB,
/// wherever it goes (the answer, the store), and says how much was cut.
#[test]
fn a_huge_source_error_is_stored_and_shown_within_one_kib() {
    static BODY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let body: &'static str = BODY.get_or_init(|| {
        format!(
            r#"{{"status":"error","errorType":"bad_data","error":"{}"}}"#,
            "E".repeat(3 << 20)
        )
    });
    let port = answering_server(body);
    let b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.ok(&["advance", "local"], 0);
    b.ok(&["advance", "local"], 0);
    assert_eq!(b.state().0, "synthetic");
    let prom = format!("http://127.0.0.1:{port}");
    let env = [("QM_PROM_URL", prom.as_str())];
    let held = b.run_env(&["advance", "local", "--json"], &env);
    assert_eq!(held.code, 3, "{}\n{}", held.stdout, held.stderr);
    for g in held.json()["gates"].as_array().unwrap() {
        let reason = g["reason"].as_str().unwrap();
        assert!(reason.len() <= 1024, "{} bytes: {reason}", reason.len());
    }
    let status = b.run_env(&["status", "local", "--json"], &env);
    assert!(
        status.stdout.len() < 64 * 1024,
        "{} bytes",
        status.stdout.len()
    );
    let db = std::fs::metadata(b.path("state.db")).unwrap().len();
    assert!(db < 2 << 20, "the store is {db} bytes");
}
