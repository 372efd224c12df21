//! `migrate dlq triage FILE --jobs N` prints what one thread prints, byte for byte, on generated
//! exports of several seeds and shapes, in both formats (the ranges are merged in file order:
//! first-appearance ties, samples, global line numbers of bad lines).

use std::path::Path;
use std::process::Command;

fn migrate(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("runs migrate")
}

#[test]
fn jobs_give_the_report_of_one_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    // (seed, tail, tricky, binary, corrupt): a long tail of one-offs; few large groups; tricky
    // messages, binary payloads and corrupt lines (bad lines numbered across ranges).
    let shapes = [
        ("7", "0.3", "0", "0.02", "0"),
        ("42", "0", "0", "0.02", "0"),
        ("43", "0.01", "0.05", "0.05", "0.003"),
    ];
    for (seed, tail, tricky, binary, corrupt) in shapes {
        let out = migrate(
            &[
                "dlq",
                "generate",
                "--lines",
                "6000",
                "--seed",
                seed,
                "--tail",
                tail,
                "--tricky",
                tricky,
                "--binary",
                binary,
                "--corrupt",
                corrupt,
            ],
            dir.path(),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = format!("export-{seed}.ndjson");
        std::fs::write(dir.path().join(&file), &out.stdout).expect("writes");
        // At least 256 KiB a range: 6,000 lines give 7 ranges.
        assert!(
            out.stdout.len() > 7 * 256 * 1024,
            "{} bytes",
            out.stdout.len()
        );
        for format in ["json", "table"] {
            let one = migrate(
                &[
                    "dlq", "triage", &file, "--format", format, "--jobs", "1", "--top", "40",
                ],
                dir.path(),
            );
            assert!(!one.stdout.is_empty());
            for jobs in ["2", "3", "7"] {
                let many = migrate(
                    &[
                        "dlq", "triage", &file, "--format", format, "--jobs", jobs, "--top", "40",
                    ],
                    dir.path(),
                );
                assert_eq!(
                    many.status.code(),
                    one.status.code(),
                    "seed {seed} {format} --jobs {jobs}"
                );
                assert!(
                    many.stdout == one.stdout,
                    "seed {seed} {format} --jobs {jobs}: stdout differs"
                );
                assert_eq!(
                    String::from_utf8_lossy(&many.stderr),
                    String::from_utf8_lossy(&one.stderr),
                    "seed {seed} {format} --jobs {jobs}: skipped lines differ"
                );
            }
        }
    }
}
