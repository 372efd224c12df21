//! Our triage against the dead-letter article's own JS (`tests/fixtures/dlq/seed_triage.js`, run
//! with node): same groups, counts, firstSeen/lastSeen, spanHours and samples, same skipped lines,
//! same signatures on tricky and random messages.
//!
//! One representation differs and is normalized before comparing: where JS holds a lone
//! surrogate (a cut inside a pair), `JSON.stringify` writes the escape `\ud83d` and we write the
//! six characters `\ud83d` (see `src/dlq/signature.rs`); the node output's lone-surrogate escapes
//! are rewritten as escaped backslashes before parsing.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use queue_migrate::dlq::envelope::EnvelopeRef;
use queue_migrate::dlq::generate::{GenerateOptions, Generator, Rng};
use queue_migrate::dlq::signature::{SignatureVersion, Signer};
use queue_migrate::dlq::triage::{TriageOptions, render_json, triage_reader};
use serde_json::Value;

fn driver() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dlq/seed_triage.js")
}

fn node(args: &[&Path]) -> String {
    let out = Command::new("node")
        .arg(driver())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("node is needed for this test (the machine image has it): {e}"));
    assert!(
        out.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("node prints UTF-8")
}

/// Rewrite `\uD800`–`\uDFFF` escapes (JSON.stringify only escapes lone surrogates) as an escaped
/// backslash followed by `udxxx`, which is how our strings hold them.
fn normalize_lone_surrogates(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut chars = json.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(next) = chars.next() else {
            out.push(c);
            break;
        };
        if next == 'u' {
            let hex: String = chars.clone().take(4).collect();
            let unit = u16::from_str_radix(&hex, 16).expect("4 hex digits after \\u");
            if (0xD800..=0xDFFF).contains(&unit) {
                for _ in 0..4 {
                    chars.next();
                }
                out.push_str(&format!("\\\\u{unit:04x}"));
                continue;
            }
        }
        out.push(c);
        out.push(next);
    }
    out
}

fn seed(path: &Path) -> (Value, Vec<u64>) {
    let text = normalize_lone_surrogates(&node(&[path]));
    let v: Value = serde_json::from_str(&text).expect("node output is JSON");
    let skipped = v["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|n| n.as_u64().expect("line number"))
        .collect();
    (v["groups"].clone(), skipped)
}

fn ours(path: &Path) -> (Value, Vec<u64>, usize) {
    let file = std::fs::File::open(path).expect("export");
    let options = TriageOptions {
        max_line_errors: usize::MAX,
        ..TriageOptions::default()
    };
    let report = triage_reader(std::io::BufReader::new(file), options).expect("reads");
    let json: Value = serde_json::from_str(&render_json(&report.groups)).expect("our JSON");
    let skipped = report.errors.iter().map(|e| e.line).collect();
    (json, skipped, report.groups.len())
}

fn assert_same(path: &Path) -> usize {
    let (theirs, their_skipped) = seed(path);
    let (mine, my_skipped, groups) = ours(path);
    assert_eq!(my_skipped, their_skipped, "skipped lines differ");
    let (theirs, mine) = (
        theirs.as_array().expect("array"),
        mine.as_array().expect("array"),
    );
    assert_eq!(mine.len(), theirs.len(), "group count");
    for (i, (m, t)) in mine.iter().zip(theirs).enumerate() {
        // spanHours: the same f64 (JSON texts of one f64 may differ in form, e.g. 1e-6).
        assert_eq!(
            m["spanHours"].as_f64(),
            t["spanHours"].as_f64(),
            "group {i} spanHours: {m} vs {t}"
        );
        let strip = |v: &Value| {
            let mut v = v.clone();
            v.as_object_mut().expect("object").remove("spanHours");
            v
        };
        assert_eq!(strip(m), strip(t), "group {i}");
    }
    groups
}

fn write_lines(lines: impl IntoIterator<Item = Vec<u8>>) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    for line in lines {
        file.write_all(&line).expect("write");
        file.write_all(b"\n").expect("write");
    }
    file.flush().expect("flush");
    file
}

#[test]
fn generated_concentrated_exports_match_the_seed() {
    for seed_value in [1, 2, 3] {
        let options = GenerateOptions {
            seed: seed_value,
            lines: 20_000,
            tail: 0.05,
            tricky: 0.1,
            binary: 0.05,
            corrupt: 0.01,
            ..GenerateOptions::default()
        };
        let file = write_lines(Generator::new(options));
        let groups = assert_same(file.path());
        assert!(groups > 500, "seed {seed_value}: only {groups} groups");
    }
}

fn envelope(class: &str, version: &str, message_json: &str, first: &str) -> Vec<u8> {
    format!(
        r#"{{"payload":"x","errorClass":{},"errorMessage":{message_json},"consumerVersion":{},"traceId":null,"attempts":2,"firstAttemptAt":"{first}","deadLetteredAt":"{first}"}}"#,
        Value::String(class.into()),
        Value::String(version.into())
    )
    .into_bytes()
}

#[test]
fn tricky_exports_match_the_seed() {
    let rocket = format!("{}🚀 after the cut", "a".repeat(119));
    let robot = format!("{}🤖 after the cut", "a".repeat(119));
    let smile = format!("{}😀 after the cut", "a".repeat(119));
    let messages: Vec<String> = vec![
        Value::String("timeout after 30012ms".into()).to_string(),
        Value::String("timeout after 30044ms".into()).to_string(),
        Value::String("order 3F2504E0-4F89-11D3-9A0C-0305E82C3301 gone".into()).to_string(),
        Value::String("order 3f2504e0-4f89-11d3-9a0c-0305e82c3301 gone".into()).to_string(),
        Value::String(r#"nested 'a "b" c' and "d 'e'" x"#.into()).to_string(),
        Value::String(r#"escaped \"q\" and it's"#.into()).to_string(),
        Value::String(rocket).to_string(),
        Value::String(robot).to_string(),
        Value::String(smile).to_string(),
        Value::String("é".repeat(130)).to_string(),
        r#""JS cut this \ud83d""#.to_string(),
        r#""JS cut this \ud83e""#.to_string(),
        r#""lone low \udc00 inside 12""#.to_string(),
        Value::String("tab\tnul\u{0} newline\n 7".into()).to_string(),
        Value::String(String::new()).to_string(),
    ];
    let times = [
        "2026-03-01T10:00:00.000Z",
        "2026-03-01T08:30:00.000Z",
        "2026-03-02T10:00:00.123Z",
        "2026-03-01T10:00:00+02:00",
        "2026-02-28T23:59:59.9999Z",
        "2026-03-01T10:00:00Z",
    ];
    let mut lines = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        for (j, t) in times.iter().enumerate().take(1 + i % times.len()) {
            let class = if j % 4 == 3 { "a|b" } else { "validation" };
            lines.push(envelope(class, "1.0", m, t));
        }
    }
    // Lines both sides must skip, at known places.
    lines.insert(3, b"{\"truncated\": ".to_vec());
    lines.insert(7, b"\xff\xfe not utf-8".to_vec());
    lines.insert(9, envelope("c", "1", "\"m\"", "2026-02-30T00:00:00Z"));
    lines.insert(11, envelope("c", "1", "\"m\"", "2026-03-01T24:00:00Z"));
    lines.insert(13, b"   ".to_vec());
    lines.insert(15, b"null".to_vec());
    lines.push(
        br#"{"payload":{"base64":"@@"},"errorClass":"c","errorMessage":"m","consumerVersion":"1","attempts":1,"firstAttemptAt":"2026-03-01T00:00:00Z","deadLetteredAt":"2026-03-01T00:00:00Z"}"#.to_vec(),
    );
    lines.push(
        br#"{"payload":{"base64":"/w=="},"errorClass":"c","errorMessage":"m","consumerVersion":"1","traceId":"t","attempts":1,"firstAttemptAt":"2026-03-01T00:00:00Z","deadLetteredAt":"2026-03-01T00:00:00Z"}"#.to_vec(),
    );
    let file = write_lines(lines);
    let (_, skipped, _) = ours(file.path());
    assert_eq!(skipped.len(), 6, "{skipped:?}");
    assert_same(file.path());
}

struct Wtf8(Vec<u8>);

impl<'de> serde::Deserialize<'de> for Wtf8 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Wtf8;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Wtf8, E> {
                Ok(Wtf8(v.to_vec()))
            }
        }
        d.deserialize_bytes(V)
    }
}

#[test]
fn signatures_match_the_seed_on_random_tricky_messages() {
    const TOKENS: &[&str] = &[
        "0",
        "7",
        "42",
        "a",
        "f",
        "F",
        "e",
        "g",
        "x",
        "-",
        " ",
        "'",
        "\\\"",
        "\\\\",
        "é",
        "🚀",
        "日",
        "\\ud83d",
        "\\ude00",
        "\\n",
        "\\u0000",
        "ms",
        "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
        "3F2504E0-4F89-11D3-9A0C-0305E82C3301",
        "aaaaaaaa-",
        "ffff-",
        "0000",
    ];
    let mut rng = Rng::new(2026);
    let mut texts = Vec::new();
    for i in 0..4000 {
        let len = if i % 10 == 0 {
            150 + rng.below(200)
        } else {
            rng.below(40)
        };
        let mut s = String::from("\"");
        for _ in 0..len {
            s.push_str(TOKENS[rng.below(TOKENS.len() as u64) as usize]);
        }
        s.push('"');
        texts.push(s);
    }
    let array = format!("[{}]", texts.join(","));
    let mut file = tempfile::NamedTempFile::new().expect("temp");
    file.write_all(array.as_bytes()).expect("write");
    file.flush().expect("flush");

    let theirs: Vec<String> = serde_json::from_str(&normalize_lone_surrogates(&node(&[
        Path::new("--signatures"),
        file.path(),
    ])))
    .expect("node output");
    let messages: Vec<Wtf8> = serde_json::from_str(&array).expect("messages");
    let mut signer = Signer::new(SignatureVersion::V1);
    assert_eq!(theirs.len(), messages.len());
    for (i, (m, t)) in messages.iter().zip(&theirs).enumerate() {
        assert_eq!(&signer.sign_wtf8(&m.0), t, "message {i}: {}", texts[i]);
    }
    // The fast reader hands the same bytes to the signer.
    let line = envelope("c", "1", &texts[0], "2026-03-01T00:00:00Z");
    let view = EnvelopeRef::parse(&line).expect("valid");
    assert_eq!(view.error_message_wtf8(), messages[0].0.as_slice());
}
