//! The slice function against the vectors computed with the migration article's own code
//! (`tests/fixtures/vectors/slices.jsonl`, a copy of `../shared/vectors/slices.jsonl`), and the
//! Node.js and Python snippets of `docs/routing.md` against the same vectors, so that producers in
//! other languages route exactly as the library does.
#![cfg(feature = "routing")]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use queue_migrate::slice::slice_of;

struct Vector {
    key: String,
    slices: u32,
    slice: u32,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn vectors() -> (String, Vec<Vector>) {
    let path = root().join("tests/fixtures/vectors/slices.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let vectors: Vec<Vector> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("slices.jsonl line {}: {e}", i + 1));
            let field = |name: &str| {
                v.get(name)
                    .unwrap_or_else(|| panic!("line {}: no {name}", i + 1))
            };
            Vector {
                key: field("key").as_str().unwrap().to_string(),
                slices: u32::try_from(field("slices").as_u64().unwrap()).unwrap(),
                slice: u32::try_from(field("slice").as_u64().unwrap()).unwrap(),
            }
        })
        .collect();
    assert!(vectors.len() > 1000, "only {} vectors", vectors.len());
    (text, vectors)
}

#[test]
fn slice_of_matches_every_vector_of_seed_000() {
    let (_, vectors) = vectors();
    let mut wrong = Vec::new();
    for v in &vectors {
        let got = slice_of(&v.key, v.slices);
        if got != v.slice {
            wrong.push(format!(
                "{:?} / {}: got {got}, want {}",
                v.key, v.slices, v.slice
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} wrong:\n{}",
        wrong.len(),
        vectors.len(),
        wrong.join("\n")
    );
}

/// Run `program snippet` with the vectors on stdin; `None` if the interpreter is missing.
fn run_snippet(program: &str, snippet: &Path, input: &str) -> Option<Vec<u32>> {
    let child = Command::new(program)
        .arg(snippet)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let _ = writeln!(
                std::io::stderr(),
                "skipped: {program} is not installed, {} not checked against the vectors",
                snippet.display()
            );
            return None;
        }
        Err(e) => panic!("{program}: {e}"),
    };
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "{program} {}: {}\n{}",
        snippet.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                l.trim()
                    .parse()
                    .unwrap_or_else(|e| panic!("{program} printed {l:?}: {e}"))
            })
            .collect(),
    )
}

fn check_snippet(program: &str, file: &str) {
    let (text, vectors) = vectors();
    let snippet: PathBuf = root().join("docs/snippets").join(file);
    // The snippet the docs show is the file tested here, verbatim.
    let docs = std::fs::read_to_string(root().join("docs/routing.md")).unwrap();
    let source = std::fs::read_to_string(&snippet).unwrap();
    assert!(
        docs.contains(source.trim_end()),
        "docs/routing.md does not contain docs/snippets/{file} verbatim"
    );
    let Some(got) = run_snippet(program, &snippet, &text) else {
        return;
    };
    assert_eq!(
        got.len(),
        vectors.len(),
        "{program} printed {} lines",
        got.len()
    );
    for (v, g) in vectors.iter().zip(&got) {
        assert_eq!(*g, v.slice, "{program}: {:?} / {}", v.key, v.slices);
        assert_eq!(*g, slice_of(&v.key, v.slices));
    }
}

#[test]
fn the_node_snippet_matches_the_vectors() {
    check_snippet("node", "slice.js");
}

#[test]
fn the_python_snippet_matches_the_vectors() {
    check_snippet("python3", "slice.py");
}
