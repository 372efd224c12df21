//! Bounds on a plan's text, checked before it is parsed for real: its size, how deep it nests,
//! and how large it grows once anchors and aliases are expanded.
//!
//! A YAML alias (`*name`) stands for a copy of the node its anchor (`&name`) marks, and an
//! anchored node can hold aliases in turn: 25 KB of text can stand for gigabytes of values (the
//! "billion laughs"). Deep flow nesting (`[[[[...`) makes the YAML scanners quadratic. A plan is
//! a few KiB, a few hundred values, six levels deep; the bounds here are far above that and far
//! below what costs memory or time.
//!
//! [`check`] reads the text as a stream of `yaml-rust2` events and stops at the first bound
//! passed (depth, values after expansion, scalar bytes after expansion), before anything is
//! built. It then walks the same text as `serde_yaml` will read it, counting what the walk
//! visits (aliases expanded by the same parser, lazily) and stopping at the same bounds: the
//! two parsers agree on valid YAML, and the second walk covers a text on which they would not.
//!
//! [`read_file`] reads a plan file through a bounded reader (`/dev/zero` stops at the cap).

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::rc::Rc;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};
use yaml_rust2::parser::{Event, Parser};

/// Largest plan accepted, in bytes (1 MiB).
pub const MAX_PLAN_BYTES: usize = 1 << 20;

/// Deepest nesting of mappings and sequences accepted.
pub const MAX_DEPTH: usize = 32;

/// Most `[` and `{` the parser may read ahead of the value it is at. A flow collection (`[...]`,
/// `{...}`) that could be a mapping key is read to its end before its first value comes out, and
/// both YAML parsers spend, on each piece read ahead, time in proportion to how deeply nested it
/// is: this bound (and [`MAX_LOOKAHEAD_BYTES`]) keeps that linear. A plan in block style reads
/// ahead one value at a time; one written as JSON reads ahead the whole document.
pub const MAX_LOOKAHEAD_BRACKETS: usize = 256;

/// Most bytes the parser may read ahead of the value it is at (256 KiB): one long value, or a
/// long comment.
pub const MAX_LOOKAHEAD_BYTES: usize = 256 << 10;

/// Most values (scalars, mappings, sequences) a plan may hold once its aliases are expanded.
pub const MAX_NODES: u64 = 100_000;

/// Most scalar bytes a plan may hold once its aliases are expanded (4 MiB).
pub const MAX_EXPANDED_BYTES: u64 = 4 << 20;

/// Largest `file:` secret read, in bytes (64 KiB).
pub const MAX_SECRET_FILE_BYTES: usize = 64 << 10;

/// A bound the plan's text passes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TooLarge {
    /// The text is longer than [`MAX_PLAN_BYTES`].
    #[error(
        "the plan is {size} bytes, over the cap of {cap} bytes (1 MiB) on a plan; a plan is a \
         few KiB: check that this is the plan file"
    )]
    Bytes {
        /// The text's length.
        size: usize,
        /// [`MAX_PLAN_BYTES`].
        cap: usize,
    },
    /// Mappings and sequences nest deeper than [`MAX_DEPTH`].
    #[error(
        "the plan nests more than {cap} levels deep (a plan nests about 6): the YAML is not a \
         plan, or a bracket is not closed"
    )]
    Depth {
        /// Where the nesting passes the bound (1-based), when known.
        line: Option<usize>,
        /// [`MAX_DEPTH`].
        cap: usize,
    },
    /// The parser had to read too far ahead (a deep or long flow collection, or one very long
    /// value).
    #[error(
        "the YAML here holds a flow collection ([...] or {{...}}) with more than {brackets} \
         brackets, or a value or comment longer than {bytes} bytes, that a parser has to read \
         whole before it can go on: write the plan in block style, one key per line, as \
         docs/plan.md shows"
    )]
    Lookahead {
        /// Where the reading ahead started (1-based), when known.
        line: Option<usize>,
        /// [`MAX_LOOKAHEAD_BRACKETS`].
        brackets: usize,
        /// [`MAX_LOOKAHEAD_BYTES`].
        bytes: usize,
    },
    /// More than [`MAX_NODES`] values once aliases are expanded.
    #[error(
        "the plan stands for more than {cap} values once its aliases (*name) are expanded (a \
         plan has a few hundred): an anchor repeated in another anchor multiplies; write the \
         values out, or use fewer aliases"
    )]
    Nodes {
        /// Where the count passes the bound (1-based), when known.
        line: Option<usize>,
        /// [`MAX_NODES`].
        cap: u64,
    },
    /// More than [`MAX_EXPANDED_BYTES`] of scalars once aliases are expanded.
    #[error(
        "the plan's values come to more than {cap} bytes once its aliases (*name) are expanded: \
         an alias of a long text repeats it; write the values out, or use fewer aliases"
    )]
    ExpandedBytes {
        /// Where the count passes the bound (1-based), when known.
        line: Option<usize>,
        /// [`MAX_EXPANDED_BYTES`].
        cap: u64,
    },
}

impl TooLarge {
    /// The line where the bound was passed, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            TooLarge::Bytes { .. } => None,
            TooLarge::Depth { line, .. }
            | TooLarge::Lookahead { line, .. }
            | TooLarge::Nodes { line, .. }
            | TooLarge::ExpandedBytes { line, .. } => *line,
        }
    }
}

/// Checks every bound on `yaml` before it is parsed into values.
///
/// # Errors
/// The first bound passed. A syntax error is not one: the parser that builds the values reports
/// it.
pub fn check(yaml: &str) -> Result<(), TooLarge> {
    if yaml.len() > MAX_PLAN_BYTES {
        return Err(TooLarge::Bytes {
            size: yaml.len(),
            cap: MAX_PLAN_BYTES,
        });
    }
    check_events(yaml)?;
    check_serde(yaml)
}

/// The size of a node once expanded: values and scalar bytes.
#[derive(Debug, Default, Clone, Copy)]
struct Size {
    nodes: u64,
    bytes: u64,
}

impl Size {
    fn add(&mut self, other: Size) {
        self.nodes = self.nodes.saturating_add(other.nodes);
        self.bytes = self.bytes.saturating_add(other.bytes);
    }
}

/// What the `yaml-rust2` scanner has read since the last event, shared with [`Watched`].
#[derive(Debug, Default, Clone, Copy)]
struct Ahead {
    bytes: usize,
    brackets: usize,
    /// Bytes read in all.
    offset: usize,
    /// [`Watched`] stopped the input: a lookahead bound was passed.
    cut: bool,
}

/// The text as the scanner reads it, one `char` at a time, ending it early (a fake end of input)
/// once the scanner reads too far ahead of the parser.
struct Watched<'a> {
    chars: std::str::Chars<'a>,
    ahead: Rc<Cell<Ahead>>,
}

impl Iterator for Watched<'_> {
    type Item = char;
    fn next(&mut self) -> Option<char> {
        let mut a = self.ahead.get();
        if a.cut {
            return None;
        }
        let c = self.chars.next()?;
        a.bytes += c.len_utf8();
        a.offset += c.len_utf8();
        if matches!(c, '[' | '{') {
            a.brackets += 1;
        }
        if a.bytes > MAX_LOOKAHEAD_BYTES || a.brackets > MAX_LOOKAHEAD_BRACKETS {
            a.cut = true;
        }
        self.ahead.set(a);
        if a.cut { None } else { Some(c) }
    }
}

/// The `yaml-rust2` pass: stops at the first event past a bound, so a deep or exploding text
/// costs no more than the events before it; and stops its scanner once it reads too far ahead
/// (deep flow nesting costs both parsers time in proportion to depth × length).
fn check_events(yaml: &str) -> Result<(), TooLarge> {
    let ahead = Rc::new(Cell::new(Ahead::default()));
    let mut parser = Parser::new(Watched {
        chars: yaml.chars(),
        ahead: Rc::clone(&ahead),
    });
    // One frame per open collection: its anchor id (0: none) and its size so far.
    let mut stack: Vec<(usize, Size)> = Vec::new();
    let mut anchors: HashMap<usize, Size> = HashMap::new();
    let mut total = Size::default();
    let mut line = 1;
    loop {
        let next = parser.next_token();
        let a = ahead.get();
        if a.cut {
            return Err(TooLarge::Lookahead {
                line: Some(line),
                brackets: MAX_LOOKAHEAD_BRACKETS,
                bytes: MAX_LOOKAHEAD_BYTES,
            });
        }
        let Ok((event, mark)) = next else {
            // A syntax error: the parser that builds the values reports it. Past it this pass
            // saw nothing, so the rest is held to the lookahead bound on brackets as a whole.
            let rest = yaml.get(a.offset..).unwrap_or_default();
            if rest.bytes().filter(|b| matches!(b, b'[' | b'{')).count() > MAX_LOOKAHEAD_BRACKETS {
                return Err(TooLarge::Lookahead {
                    line: Some(line),
                    brackets: MAX_LOOKAHEAD_BRACKETS,
                    bytes: MAX_LOOKAHEAD_BYTES,
                });
            }
            return Ok(());
        };
        ahead.set(Ahead {
            offset: a.offset,
            ..Ahead::default()
        });
        line = mark.line();
        let leaf = |size: Size, stack: &mut Vec<(usize, Size)>, total: &mut Size| {
            total.add(size);
            if let Some((_, s)) = stack.last_mut() {
                s.add(size);
            }
        };
        match event {
            Event::StreamEnd => return Ok(()),
            Event::Scalar(value, _, anchor, _) => {
                let size = Size {
                    nodes: 1,
                    bytes: value.len() as u64,
                };
                if anchor > 0 {
                    anchors.insert(anchor, size);
                }
                leaf(size, &mut stack, &mut total);
            }
            Event::Alias(id) => {
                let size = anchors
                    .get(&id)
                    .copied()
                    .unwrap_or(Size { nodes: 1, bytes: 0 });
                leaf(size, &mut stack, &mut total);
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                total.add(Size { nodes: 1, bytes: 0 });
                stack.push((anchor, Size { nodes: 1, bytes: 0 }));
                if stack.len() > MAX_DEPTH {
                    return Err(TooLarge::Depth {
                        line: Some(line),
                        cap: MAX_DEPTH,
                    });
                }
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((anchor, size)) = stack.pop() {
                    if anchor > 0 {
                        anchors.insert(anchor, size);
                    }
                    if let Some((_, parent)) = stack.last_mut() {
                        parent.add(size);
                    }
                }
            }
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {}
        }
        over(total, Some(line))?;
    }
}

fn over(total: Size, line: Option<usize>) -> Result<(), TooLarge> {
    if total.nodes > MAX_NODES {
        return Err(TooLarge::Nodes {
            line,
            cap: MAX_NODES,
        });
    }
    if total.bytes > MAX_EXPANDED_BYTES {
        return Err(TooLarge::ExpandedBytes {
            line,
            cap: MAX_EXPANDED_BYTES,
        });
    }
    Ok(())
}

/// The `serde_yaml` pass: visits the document as the compiler's parse will (aliases expanded by
/// the same parser, as the walk reaches them) and stops at the first bound passed.
fn check_serde(yaml: &str) -> Result<(), TooLarge> {
    let budget = Budget::default();
    let result = Count {
        budget: &budget,
        depth: 0,
    }
    .deserialize(serde_yaml::Deserializer::from_str(yaml));
    match (result, budget.passed.take()) {
        (_, Some(passed)) => Err(passed),
        // Anything else (a syntax error, a duplicate key...) is for the real parse to report.
        _ => Ok(()),
    }
}

#[derive(Default)]
struct Budget {
    total: Cell<Size>,
    passed: Cell<Option<TooLarge>>,
}

/// Visits one value and everything in it, counting.
#[derive(Clone, Copy)]
struct Count<'b> {
    budget: &'b Budget,
    depth: usize,
}

impl Count<'_> {
    fn take<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        let mut total = self.budget.total.get();
        total.add(Size {
            nodes: 1,
            bytes: bytes as u64,
        });
        self.budget.total.set(total);
        let passed = if self.depth > MAX_DEPTH {
            Err(TooLarge::Depth {
                line: None,
                cap: MAX_DEPTH,
            })
        } else {
            over(total, None)
        };
        passed.map_err(|e| {
            let message = e.to_string();
            self.budget.passed.set(Some(e));
            E::custom(message)
        })
    }

    fn child(self) -> Self {
        Count {
            budget: self.budget,
            depth: self.depth + 1,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.take(0)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.take(0)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.take(0)
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        self.take(0)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        self.take(0)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.take(0)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.take(v.len())
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<(), E> {
        self.take(v.len())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.take(0)
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.take(0)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.take(0)?;
        self.child().deserialize(d)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.take(0)?;
        self.child().deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.take(0)?;
        while seq.next_element_seed(self.child())?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.take(0)?;
        while map.next_key_seed(self.child())?.is_some() {
            map.next_value_seed(self.child())?;
        }
        Ok(())
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged value (`!tag value`): the tag, then the value.
        use serde::de::VariantAccess;
        self.take(0)?;
        let ((), variant) = data.variant_seed(self.child())?;
        variant.newtype_variant_seed(self.child())
    }
}

/// Reads a plan file of at most [`MAX_PLAN_BYTES`] through a bounded reader: a larger file (or a
/// device that never ends, `/dev/zero`) stops at the cap.
///
/// # Errors
/// A sentence for `cannot read the plan PATH: ...`: the file cannot be opened or read, is over
/// the cap (with its size when known), or is not UTF-8.
pub fn read_file(path: &Path) -> Result<String, String> {
    read_capped(path, MAX_PLAN_BYTES).map_err(|e| match e {
        Capped::Io(e) => e.to_string(),
        Capped::Over { size: Some(size) } => TooLarge::Bytes {
            size,
            cap: MAX_PLAN_BYTES,
        }
        .to_string(),
        Capped::Over { size: None } => format!(
            "the plan is over the cap of {MAX_PLAN_BYTES} bytes (1 MiB) on a plan (reading \
                 stopped there); a plan is a few KiB: check that this is the plan file"
        ),
        Capped::NotUtf8 => "the plan is not UTF-8 text".to_string(),
    })
}

/// Reads a `file:` secret of at most [`MAX_SECRET_FILE_BYTES`] through a bounded reader.
///
/// # Errors
/// The file cannot be opened or read, is over the cap, or is not UTF-8.
pub fn read_secret_file(path: &Path) -> Result<String, String> {
    read_capped(path, MAX_SECRET_FILE_BYTES).map_err(|e| match e {
        Capped::Io(e) => e.to_string(),
        Capped::Over { size } => format!(
            "the file is {}over the cap of {MAX_SECRET_FILE_BYTES} bytes (64 KiB) on a secret \
             file: check that it holds the secret alone",
            size.map(|s| format!("{s} bytes, ")).unwrap_or_default()
        ),
        Capped::NotUtf8 => "the file is not UTF-8 text".to_string(),
    })
}

enum Capped {
    Io(std::io::Error),
    /// Over the cap; the size when the file system knows it.
    Over {
        size: Option<usize>,
    },
    NotUtf8,
}

fn read_capped(path: &Path, cap: usize) -> Result<String, Capped> {
    let file = std::fs::File::open(path).map_err(Capped::Io)?;
    let known = file
        .metadata()
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map(|m| usize::try_from(m.len()).unwrap_or(usize::MAX));
    if let Some(size) = known.filter(|&s| s > cap) {
        return Err(Capped::Over { size: Some(size) });
    }
    let mut bytes = Vec::with_capacity(known.unwrap_or(0).min(cap));
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(Capped::Io)?;
    if bytes.len() > cap {
        // A file that grew between the two looks, or one the file system cannot size.
        return Err(Capped::Over {
            size: known.filter(|&s| s > cap),
        });
    }
    String::from_utf8(bytes).map_err(|_| Capped::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `depth` levels of `[`, then as many `]`.
    fn nested(depth: usize) -> String {
        format!("x: {}{}\n", "[".repeat(depth), "]".repeat(depth))
    }

    /// Each anchor an array of ten aliases of the one before: 10^levels values.
    fn laughs(levels: usize) -> String {
        let mut s = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..=levels {
            let items = vec![format!("*a{}", i - 1); 10].join(", ");
            s.push_str(&format!("a{i}: &a{i} [{items}]\n"));
        }
        s
    }

    #[test]
    fn ordinary_plans_pass() {
        for plan in [
            include_str!("../../plans/orders.yaml"),
            include_str!("../../plans/local.yaml"),
            include_str!("../../plans/demo.yaml"),
        ] {
            assert_eq!(check(plan), Ok(()));
        }
        assert_eq!(check(&nested(MAX_DEPTH - 1)), Ok(()));
        assert_eq!(check(&laughs(3)), Ok(()), "a few aliases are fine");
        assert_eq!(check("a: [1, 2\n"), Ok(()), "syntax errors are not ours");
        // A plan written as JSON is read ahead whole: fine within the bound.
        let json = format!(
            "{{\"version\": 1, \"steps\": [{}]}}",
            vec!["[1]"; MAX_LOOKAHEAD_BRACKETS - 10].join(", ")
        );
        assert_eq!(check(&json), Ok(()));
    }

    #[test]
    fn an_alias_bomb_is_refused_before_it_expands() {
        let err = check(&laughs(9)).unwrap_err();
        assert!(matches!(err, TooLarge::Nodes { .. }), "{err:?}");
        assert!(err.to_string().contains("aliases"), "{err}");
    }

    #[test]
    fn an_alias_of_a_long_text_is_counted_in_bytes() {
        let long = "y".repeat(100_000);
        let mut s = format!("a: &a \"{long}\"\nb: [");
        s.push_str(&vec!["*a"; 60].join(", "));
        s.push_str("]\n");
        assert!(matches!(check(&s), Err(TooLarge::ExpandedBytes { .. })));
    }

    /// Regression: both YAML parsers spend time in proportion to depth × length on flow
    /// nesting (`[[[[...`); 200 KB of it took a minute before "recursion limit exceeded".
    #[test]
    fn deep_nesting_is_refused_at_the_bound() {
        let err = check(&nested(200_000)).unwrap_err();
        assert!(
            matches!(err, TooLarge::Lookahead { line: Some(1), .. }),
            "{err:?}"
        );
        // Deep but within the lookahead: the depth bound.
        let err = check(&nested(MAX_DEPTH + 1)).unwrap_err();
        assert!(
            matches!(err, TooLarge::Depth { line: Some(1), .. }),
            "{err:?}"
        );
        // A syntax error before it does not let it through.
        let after_error = format!("a: [1, 2\n{}", nested(200_000));
        assert!(matches!(
            check(&after_error),
            Err(TooLarge::Lookahead { .. })
        ));
        // Block style too.
        let mut block = String::new();
        for i in 0..(MAX_DEPTH + 2) {
            block.push_str(&format!("{}k{i}:\n", "  ".repeat(i)));
        }
        assert!(matches!(check(&block), Err(TooLarge::Depth { .. })));
    }

    #[test]
    fn a_long_text_is_refused_by_its_size() {
        let s = format!("name: {}\n", "x".repeat(MAX_PLAN_BYTES));
        assert_eq!(
            check(&s),
            Err(TooLarge::Bytes {
                size: s.len(),
                cap: MAX_PLAN_BYTES
            })
        );
    }

    #[test]
    fn the_serde_pass_counts_what_the_event_pass_would() {
        // Straight to the second pass: the same bounds, from the parser that builds the values.
        assert!(matches!(
            check_serde(&laughs(9)),
            Err(TooLarge::Nodes { .. })
        ));
        assert_eq!(check_serde(&laughs(3)), Ok(()));
        assert!(check_serde(&nested(MAX_DEPTH + 5)).is_err());
        assert_eq!(check_serde("a: !tag [1, 2]\nb: !!str 3\n"), Ok(()));
    }

    #[test]
    fn reading_stops_at_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.yaml");
        std::fs::write(&big, vec![b'#'; MAX_PLAN_BYTES + 10]).unwrap();
        let err = read_file(&big).unwrap_err();
        assert!(
            err.contains(&format!("{} bytes", MAX_PLAN_BYTES + 10)),
            "{err}"
        );
        assert!(err.contains("1 MiB"), "{err}");
        #[cfg(unix)]
        {
            let err = read_file(Path::new("/dev/zero")).unwrap_err();
            assert!(err.contains("over the cap"), "{err}");
        }
        let ok = dir.path().join("ok.yaml");
        std::fs::write(&ok, "version: 1\n").unwrap();
        assert_eq!(read_file(&ok).unwrap(), "version: 1\n");
    }
}
