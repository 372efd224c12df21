//! Realistic dead-letter exports, generated deterministically from a seed: for tests, the
//! benchmark and rehearsals (`migrate dlq generate`, hidden).
//!
//! The shape follows what the dead-letter article says real queues look like: a concentrated
//! distribution (a handful of causes hold most entries: an incident of two hours, a live defect
//! spread over the whole period, a retired producer...) and a long tail of one-offs. On request:
//! tricky messages (UUIDs in both cases, digits inside words, nested and escaped quotes, multibyte
//! text, an emoji across the 120-unit cut, a lone surrogate as a JS writer leaves it), binary
//! (non-UTF-8) payloads, and corrupt lines (truncated JSON, a non-UTF-8 line, a missing field, an
//! impossible date, something that is not an object).

use super::envelope::{Payload, base64_encode};
use crate::time::format_timestamp;

/// Errors of this module.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenerateError {
    /// A fraction outside `0..=1`.
    #[error("{name} must be between 0 and 1, not {value}")]
    Fraction {
        /// The option.
        name: &'static str,
        /// Its value.
        value: f64,
    },
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// The PRNG seed: the same options give the same bytes.
    pub seed: u64,
    /// Lines to produce (corrupt ones included).
    pub lines: u64,
    /// The start of the period (ms).
    pub start_ms: i64,
    /// The length of the period (ms).
    pub period_ms: i64,
    /// Share of one-off entries (the tail).
    pub tail: f64,
    /// Share of entries with a tricky message.
    pub tricky: f64,
    /// Share of entries with a binary payload.
    pub binary: f64,
    /// Share of corrupt lines.
    pub corrupt: f64,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            seed: 1,
            lines: 1000,
            // 2026-01-05T00:00:00Z, 60 days.
            start_ms: 1_767_571_200_000,
            period_ms: 60 * 86_400_000,
            tail: 0.05,
            tricky: 0.0,
            binary: 0.02,
            corrupt: 0.0,
        }
    }
}

impl GenerateOptions {
    /// Check the shares.
    ///
    /// # Errors
    /// [`GenerateError::Fraction`].
    pub fn validate(&self) -> Result<(), GenerateError> {
        for (name, value) in [
            ("tail", self.tail),
            ("tricky", self.tricky),
            ("binary", self.binary),
            ("corrupt", self.corrupt),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(GenerateError::Fraction { name, value });
            }
        }
        Ok(())
    }
}

/// SplitMix64: small, fast, good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1_u64 << 53) as f64
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

struct Cause {
    weight: f64,
    class: &'static str,
    version: &'static str,
    /// Where in the period (fraction) and how long (ms) its entries fall.
    window: (f64, i64),
    message: fn(&mut Rng) -> String,
}

fn uuid(rng: &mut Rng, upper: bool) -> String {
    let a = rng.next_u64();
    let b = rng.next_u64();
    let s = format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xFFFF,
        a & 0xFFFF,
        b >> 48,
        b & 0xFFFF_FFFF_FFFF
    );
    if upper { s.to_uppercase() } else { s }
}

const CAUSES: &[Cause] = &[
    Cause {
        weight: 0.42,
        class: "dependency_timeout",
        version: "2.14.0",
        window: (0.55, 2 * 3_600_000),
        message: |r| {
            format!(
                "timeout after {}ms calling inventory-service for order {}",
                30_000 + r.below(100),
                uuid(r, false)
            )
        },
    },
    Cause {
        weight: 0.23,
        class: "validation",
        version: "2.13.2",
        window: (0.0, 60 * 86_400_000),
        message: |r| {
            format!(
                "field 'shipping.postcode' rejected: value \"{}\" does not match pattern",
                r.below(99_999)
            )
        },
    },
    Cause {
        weight: 0.14,
        class: "reference_not_found",
        version: "2.14.0",
        window: (0.2, 20 * 86_400_000),
        message: |r| {
            let upper = r.chance(0.3);
            format!("customer {} not found (404)", uuid(r, upper))
        },
    },
    Cause {
        weight: 0.09,
        class: "dependency_unavailable",
        version: "2.14.0",
        window: (0.8, 6 * 3_600_000),
        message: |r| format!("payments returned 503 after {} attempts", 3 + r.below(3)),
    },
    Cause {
        weight: 0.07,
        class: "unknown",
        version: "1.9.7",
        window: (0.0, 30 * 86_400_000),
        message: |r| {
            format!(
                "cannot decode event v1 field 'legacyId' = '{}': producer format retired",
                r.below(1_000_000)
            )
        },
    },
];

const WORDS: &[&str] = &[
    "ledger",
    "invoice",
    "coupon",
    "refund",
    "carrier",
    "warehouse",
    "tax",
    "quota",
    "locale",
    "currency",
    "bundle",
    "voucher",
    "parcel",
    "gift",
    "loyalty",
    "partner",
    "region",
    "catalog",
];
const VERBS: &[&str] = &[
    "rejected",
    "overflowed",
    "duplicated",
    "unparsable",
    "expired",
    "locked",
    "missing",
];

fn one_off(rng: &mut Rng) -> String {
    // Words, not digits: a one-off must stay its own group after normalization.
    let mut s = String::new();
    for i in 0..(3 + rng.below(4)) {
        if i > 0 {
            s.push(if rng.chance(0.2) { '.' } else { ' ' });
        }
        let word: &&str = rng.pick(WORDS);
        s.push_str(word);
        if rng.chance(0.5) {
            s.push('_');
            for _ in 0..3 {
                s.push(char::from(b'a' + rng.below(26) as u8));
            }
        }
    }
    format!("{s} {} (code {})", *rng.pick(VERBS), rng.below(1000))
}

/// Marks where a lone high surrogate goes; replaced by `\ud83d` in the JSON text.
const LONE: &str = "\u{E000}LONE\u{E000}";

fn tricky(rng: &mut Rng) -> String {
    let n = rng.below(14);
    match n {
        0 => format!(
            "id {} UPPER and {} lower",
            uuid(rng, true),
            uuid(rng, false)
        ),
        1 => format!(
            "v2beta{} build-{}x 0x{:x} 1e{}",
            rng.below(20),
            rng.below(99),
            rng.next_u64() >> 40,
            rng.below(9)
        ),
        2 => format!(
            r#"nested 'a "b" c' and "d 'e' f" and it's {} o'clock"#,
            rng.below(12)
        ),
        3 => format!(r#"escaped \"quote\" and \'single\' {}"#, rng.below(50)),
        4 => format!("unclosed ' quote then \"q{}\"", rng.below(9)),
        5 => format!(
            "ação inválida: número {} não é válido — ü ß € 日本語",
            rng.below(1000)
        ),
        6 => format!(
            "{}🚀 rocket across the cut {}",
            "a".repeat(119),
            rng.below(3)
        ),
        7 => format!(
            "{}{} emoji family",
            "b".repeat(118 + rng.below(3) as usize),
            ["🤖", "😀", "👍🏽"][rng.below(3) as usize]
        ),
        8 => format!("cut by a JS writer {}{LONE}", rng.below(5)),
        9 => format!("{}é{}", "c".repeat(100), "d".repeat(40)),
        10 => format!("tabs\tand\nnewlines\r{} and a NUL \u{0}", rng.below(4)),
        11 => format!(
            "{} digits 12345678901234567890 {}",
            "x".repeat(rng.below(130) as usize),
            rng.below(9)
        ),
        12 => format!(
            "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa{} glued hex",
            rng.below(16)
        ),
        _ => format!("'{}'", "q".repeat(200 + rng.below(5) as usize)),
    }
}

fn corrupt(rng: &mut Rng, good: &str) -> Vec<u8> {
    match rng.below(6) {
        0 => good.as_bytes()[..good.len() / 2].to_vec(),
        1 => {
            let mut b = good.as_bytes().to_vec();
            let at = b.len() / 3;
            b.insert(at, 0xFF);
            b
        }
        2 => good
            .replacen("\"errorClass\"", "\"errorKlass\"", 1)
            .into_bytes(),
        3 => good.replacen("T", "X", 1).into_bytes(),
        4 => b"[\"not\", \"an\", \"object\"]".to_vec(),
        _ => good
            .replacen("\"attempts\":", "\"attempts\":-", 1)
            .into_bytes(),
    }
}

/// The line generator.
#[derive(Debug, Clone)]
pub struct Generator {
    options: GenerateOptions,
    rng: Rng,
    produced: u64,
}

impl Generator {
    /// A generator for `options`.
    pub fn new(options: GenerateOptions) -> Generator {
        Generator {
            rng: Rng::new(options.seed),
            options,
            produced: 0,
        }
    }

    fn envelope(&mut self) -> String {
        let o = &self.options;
        let r = &mut self.rng;
        let (class, version, message, first_ms) = if r.chance(o.tricky) {
            let at = o.start_ms + r.below(o.period_ms.max(1) as u64) as i64;
            (*r.pick(&["validation", "unknown"]), "3.0.0", tricky(r), at)
        } else if r.chance(o.tail) {
            let at = o.start_ms + r.below(o.period_ms.max(1) as u64) as i64;
            (
                *r.pick(&["unknown", "validation", "dependency_timeout"]),
                *r.pick(&["2.13.2", "2.14.0"]),
                one_off(r),
                at,
            )
        } else {
            let total: f64 = CAUSES.iter().map(|c| c.weight).sum();
            let mut x = r.unit() * total;
            let mut cause = &CAUSES[0];
            for c in CAUSES {
                cause = c;
                if x < c.weight {
                    break;
                }
                x -= c.weight;
            }
            let start = o.start_ms + (cause.window.0 * o.period_ms as f64) as i64;
            let len = cause.window.1.min(o.period_ms).max(1);
            let at = start + r.below(len as u64) as i64;
            (cause.class, cause.version, (cause.message)(r), at)
        };
        let payload = if r.chance(o.binary) {
            let n = 8 + r.below(48) as usize;
            let mut bytes: Vec<u8> = (0..n).map(|_| r.below(256) as u8).collect();
            bytes[0] = 0xFF;
            Payload::Bytes(bytes)
        } else {
            Payload::Bytes(
                format!(
                    "{{\"orderId\":\"{}\",\"amount\":{}.{:02},\"items\":[{}]}}",
                    uuid(r, false),
                    r.below(1000),
                    r.below(100),
                    r.below(9)
                )
                .into_bytes(),
            )
        };
        let payload_json = match &payload {
            Payload::Bytes(b) => match std::str::from_utf8(b) {
                Ok(s) => serde_json::Value::String(s.to_string()),
                Err(_) => serde_json::json!({ "base64": base64_encode(b) }),
            },
            Payload::Json(v) => v.clone(),
        };
        let dead_ms = first_ms + 1000 + r.below(600_000) as i64;
        let trace = if r.chance(0.9) {
            serde_json::Value::String(format!("{:016x}{:016x}", r.next_u64(), r.next_u64()))
        } else {
            serde_json::Value::Null
        };
        let line = serde_json::json!({
            "payload": payload_json,
            "errorClass": class,
            "errorMessage": message,
            "consumerVersion": version,
            "traceId": trace,
            "attempts": 1 + r.below(5),
            "firstAttemptAt": format_timestamp(first_ms),
            "deadLetteredAt": format_timestamp(dead_ms),
        })
        .to_string();
        if line.contains(LONE) {
            // serde_json writes U+E000 as itself.
            line.replace(LONE, "\\ud83d")
        } else {
            line
        }
    }

    /// The next line (no newline).
    pub fn next_line(&mut self) -> Vec<u8> {
        self.produced += 1;
        let good = self.envelope();
        if self.options.corrupt > 0.0 && self.rng.chance(self.options.corrupt) {
            corrupt(&mut self.rng, &good)
        } else {
            good.into_bytes()
        }
    }
}

impl Iterator for Generator {
    type Item = Vec<u8>;
    fn next(&mut self) -> Option<Vec<u8>> {
        (self.produced < self.options.lines).then(|| self.next_line())
    }
}

/// Write `options.lines` lines to `out`.
///
/// # Errors
/// Writing failed.
pub fn write_export<W: std::io::Write>(
    options: GenerateOptions,
    out: &mut W,
) -> std::io::Result<()> {
    for line in Generator::new(options) {
        out.write_all(&line)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::triage::{TriageOptions, triage_reader};
    use super::*;

    #[test]
    fn deterministic_and_concentrated() {
        let options = GenerateOptions {
            lines: 5000,
            seed: 7,
            ..GenerateOptions::default()
        };
        let a: Vec<_> = Generator::new(options.clone()).collect();
        let b: Vec<_> = Generator::new(options.clone()).collect();
        assert_eq!(a, b);
        let text = a.join(&b"\n"[..]);
        let r = triage_reader(text.as_slice(), TriageOptions::default()).expect("reads");
        assert_eq!((r.entries, r.skipped), (5000, 0));
        let top5: u64 = r.groups.iter().take(5).map(|g| g.count).sum();
        assert!(top5 as f64 > 0.9 * 5000.0, "top 5 hold {top5}");
        let one_offs = r.groups.iter().filter(|g| g.count == 1).count();
        assert!(one_offs > 150, "{one_offs} one-offs");
        // The incident is short, the live defect long.
        assert!(r.groups[0].span_hours <= 2.0);
        assert!(r.groups[1].span_hours > 24.0 * 30.0);
    }

    #[test]
    fn corrupt_lines_are_caught_and_tricky_ones_are_valid() {
        let options = GenerateOptions {
            lines: 3000,
            corrupt: 0.05,
            tricky: 0.2,
            binary: 0.1,
            ..GenerateOptions::default()
        };
        let text = Generator::new(options).collect::<Vec<_>>().join(&b"\n"[..]);
        let r = triage_reader(text.as_slice(), TriageOptions::default()).expect("reads");
        assert!(r.skipped > 100 && r.skipped < 200, "{}", r.skipped);
        assert_eq!(r.entries + r.skipped, 3000);
        assert!(
            GenerateOptions {
                tail: 2.0,
                ..GenerateOptions::default()
            }
            .validate()
            .is_err()
        );
    }
}
