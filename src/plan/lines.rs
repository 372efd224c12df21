//! Where each node of a plan's YAML starts: a map from a path (`phases.slices.steps[2]`) to its
//! 1-based line, so that every diagnostic can name the line a person has to look at.
//!
//! `serde_yaml` gives values without positions, so the plan is read a second time here as a stream
//! of `yaml-rust2` events with their markers. A mapping entry is recorded at its key's line (a
//! "missing value" or "unknown field" error points at the key); a sequence item at the line where
//! the item starts. Block and flow styles (`{ a: 1 }`, `[1, 2]`) produce the same events, so both
//! work. Lookups fall back to the nearest ancestor that has a line (aliases, merged keys, paths of
//! nodes that do not exist such as a missing field).
//!
//! Building the map never fails: on a syntax error it keeps what it saw before the error (the
//! compiler reports the syntax error itself, from `serde_yaml`).
//!
//! The map is a tree: each node holds its own key (or index) once, under its parent, never its
//! whole path, so the map costs about the text's own size however long its keys and however
//! many its entries. A lookup walks the path down the tree, trying each place a key may end (a
//! key may hold `.` or `[`).

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// A node's id in the tree; [`ROOT`] is the document's root.
type NodeId = u32;
const ROOT: NodeId = 0;

/// One step of a path under its parent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Step {
    /// A mapping entry: `.key` (`key` at the root).
    Key(Box<str>),
    /// A sequence item: `[index]`.
    Index(usize),
}

/// Path → 1-based line of the node (of the key, for a mapping entry).
#[derive(Debug, Clone)]
pub(crate) struct LineMap {
    /// The line of each node, by id (the root's is unused).
    lines: Vec<usize>,
    /// A node's child by its step.
    children: HashMap<(NodeId, Step), NodeId>,
}

impl Default for LineMap {
    fn default() -> Self {
        LineMap {
            lines: vec![0],
            children: HashMap::new(),
        }
    }
}

impl LineMap {
    /// Reads `yaml` (the first document only) and records the line of every node.
    pub(crate) fn build(yaml: &str) -> LineMap {
        let mut walker = Walker::default();
        let mut parser = Parser::new_from_str(yaml);
        // A syntax error ends the walk; what was recorded so far stays useful.
        let _ = parser.load(&mut walker, false);
        walker.map
    }

    /// The line of `path`, or of its nearest ancestor that has one (`None` for the root).
    pub(crate) fn line(&self, path: &str) -> Option<usize> {
        let mut p = path;
        loop {
            if p.is_empty() {
                return None;
            }
            if let Some(node) = self.find(ROOT, p) {
                return self.lines.get(node as usize).copied();
            }
            p = parent(p);
        }
    }

    /// The node under `node` whose path continues with exactly `rest`; when several do (keys
    /// holding `.`), the one recorded first.
    fn find(&self, node: NodeId, rest: &str) -> Option<NodeId> {
        if rest.is_empty() {
            return Some(node);
        }
        let mut found: Option<NodeId> = None;
        let mut keep = |n: Option<NodeId>| {
            if let Some(n) = n {
                found = Some(found.map_or(n, |f| f.min(n)));
            }
        };
        // `[index]`, written as `index_path` writes it.
        if let Some(r) = rest.strip_prefix('[')
            && let Some(close) = r.find(']')
            && let Ok(i) = r[..close].parse::<usize>()
            && r[..close] == *i.to_string()
            && let Some(&child) = self.children.get(&(node, Step::Index(i)))
        {
            keep(self.find(child, &r[close + 1..]));
        }
        // `.key` (`key` at the root): the key ends at a `.`, a `[` or the end of the path.
        let body = if node == ROOT {
            Some(rest)
        } else {
            rest.strip_prefix('.')
        };
        if let Some(body) = body {
            let ends = body
                .match_indices(['.', '['])
                .map(|(i, _)| i)
                .chain([body.len()]);
            for end in ends {
                let step = Step::Key(body[..end].into());
                if let Some(&child) = self.children.get(&(node, step)) {
                    keep(self.find(child, &body[end..]));
                }
            }
        }
        found
    }

    /// The child of `parent` at `step`, created at `line` when new (a repeated key keeps the
    /// first line).
    fn child(&mut self, parent: NodeId, step: Step, line: usize) -> NodeId {
        let next = NodeId::try_from(self.lines.len()).unwrap_or(NodeId::MAX);
        let id = *self.children.entry((parent, step)).or_insert(next);
        if id == next {
            self.lines.push(line);
        }
        id
    }
}

/// `a.b[2].c` → `a.b[2]` → `a.b` → `a` → ``.
fn parent(path: &str) -> &str {
    if path.ends_with(']')
        && let Some(i) = path.rfind('[')
    {
        return &path[..i];
    }
    match path.rfind('.') {
        Some(i) => &path[..i],
        None => "",
    }
}

/// Joins a mapping key onto a path.
pub(crate) fn key_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// Joins a sequence index onto a path.
pub(crate) fn index_path(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

enum Frame {
    /// A mapping at `node`; `key` is the node of the entry whose value comes next, `None` when
    /// the next node is a key.
    Mapping { node: NodeId, key: Option<NodeId> },
    /// A sequence at `node`; `next` is the index of the next item.
    Sequence { node: NodeId, next: usize },
    /// A collection used as a mapping key (not something a plan has): its content is skipped.
    ComplexKey { depth: usize },
}

#[derive(Default)]
struct Walker {
    map: LineMap,
    stack: Vec<Frame>,
    /// The root node was seen (only the first document is read).
    done: bool,
}

impl Walker {
    /// A node starts (scalar, alias, or collection). Returns the node, or `None` when it is a
    /// mapping key (or inside one) rather than a value.
    fn node(&mut self, scalar_key: Option<&str>, line: usize) -> Option<NodeId> {
        match self.stack.last_mut() {
            None => {
                if self.done {
                    return None;
                }
                Some(ROOT)
            }
            Some(Frame::ComplexKey { .. }) => None,
            Some(Frame::Mapping { node, key }) => match key.take() {
                None => {
                    // This node is a key: the next one is its value.
                    let name = scalar_key.unwrap_or("?");
                    let entry = self.map.child(*node, Step::Key(name.into()), line);
                    *key = Some(entry);
                    None
                }
                Some(entry) => Some(entry),
            },
            Some(Frame::Sequence { node, next }) => {
                let (parent, index) = (*node, *next);
                *next += 1;
                Some(self.map.child(parent, Step::Index(index), line))
            }
        }
    }

    fn is_key_position(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Mapping { key: None, .. }))
    }

    fn open(&mut self, mapping: bool, line: usize) {
        if let Some(Frame::ComplexKey { depth }) = self.stack.last_mut() {
            *depth += 1;
            return;
        }
        if self.is_key_position() {
            // A mapping or sequence used as a key: record a placeholder key, skip its content.
            self.node(None, line);
            self.stack.push(Frame::ComplexKey { depth: 1 });
            return;
        }
        let Some(node) = self.node(None, line) else {
            // A second document: ignored.
            self.stack.push(Frame::ComplexKey { depth: 1 });
            return;
        };
        self.stack.push(if mapping {
            Frame::Mapping { node, key: None }
        } else {
            Frame::Sequence { node, next: 0 }
        });
    }

    fn close(&mut self) {
        if let Some(Frame::ComplexKey { depth }) = self.stack.last_mut()
            && *depth > 1
        {
            *depth -= 1;
            return;
        }
        self.stack.pop();
        if self.stack.is_empty() {
            self.done = true;
        }
    }
}

impl MarkedEventReceiver for Walker {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        match ev {
            Event::Scalar(value, ..) => {
                if self.node(Some(&value), line).is_some() && self.stack.is_empty() {
                    self.done = true;
                }
            }
            Event::Alias(_) => {
                self.node(None, line);
            }
            Event::MappingStart(..) => self.open(true, line),
            Event::SequenceStart(..) => self.open(false, line),
            Event::MappingEnd | Event::SequenceEnd => self.close(),
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: &str = "\
version: 1
name: orders
brokers:
  old:
    name: rabbitmq
    url: x
phases:
  slices:
    steps:
      - 6
      - 32
    exit:
      - name: a
        source: prom

      - name: b
        pass_if: \">= 1\"
";

    #[test]
    fn block_style_lines() {
        let m = LineMap::build(BLOCK);
        let cases: &[(&str, Option<usize>)] = &[
            ("version", Some(1)),
            ("name", Some(2)),
            ("brokers", Some(3)),
            ("brokers.old", Some(4)),
            ("brokers.old.url", Some(6)),
            ("phases.slices.steps", Some(9)),
            ("phases.slices.steps[0]", Some(10)),
            ("phases.slices.steps[1]", Some(11)),
            ("phases.slices.exit[0]", Some(13)),
            ("phases.slices.exit[0].source", Some(14)),
            ("phases.slices.exit[1]", Some(16)),
            ("phases.slices.exit[1].pass_if", Some(17)),
            // Missing nodes fall back to the nearest ancestor.
            ("phases.slices.exit[1].for", Some(16)),
            ("phases.slices.exit[7].name", Some(12)),
            ("phases.drain.quiet", Some(7)),
            ("nothing.here", None),
            ("", None),
        ];
        for (path, want) in cases {
            assert_eq!(m.line(path), *want, "{path}");
        }
    }

    #[test]
    fn flow_style_lines() {
        let yaml = "\
brokers:
  old: { name: rabbitmq, url: x,
         queue: orders }
steps: [6, 32,
  64]
gates: [ { name: a, for: 5m }, {name: b} ]
";
        let m = LineMap::build(yaml);
        let cases: &[(&str, Option<usize>)] = &[
            ("brokers.old", Some(2)),
            ("brokers.old.name", Some(2)),
            ("brokers.old.queue", Some(3)),
            ("steps[1]", Some(4)),
            ("steps[2]", Some(5)),
            ("gates[0].for", Some(6)),
            ("gates[1].name", Some(6)),
        ];
        for (path, want) in cases {
            assert_eq!(m.line(path), *want, "{path}");
        }
    }

    #[test]
    fn complex_keys_and_aliases_do_not_confuse_paths() {
        let yaml = "\
a: &x { b: 1 }
? [k1, k2]
: { ignored: 1 }
c: *x
d:
  e: 2
";
        let m = LineMap::build(yaml);
        assert_eq!(m.line("a.b"), Some(1));
        assert_eq!(m.line("c"), Some(4));
        assert_eq!(m.line("c.b"), Some(4));
        assert_eq!(m.line("d.e"), Some(6));
        assert_eq!(m.line("ignored"), None);
    }

    #[test]
    fn syntax_error_keeps_what_was_seen() {
        let m = LineMap::build("a: 1\nb: [1, 2\nc: 3\n");
        assert_eq!(m.line("a"), Some(1));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}", path in "[a-z.\\[\\]0-9]{0,20}") {
            let m = LineMap::build(&s);
            let _ = m.line(&path);
        }
    }

    #[test]
    fn a_key_holding_a_dot_is_found_and_the_first_recorded_wins() {
        let yaml = "\
sources:
  prom.eu:
    url: x
  prom:
    eu: 1
    us: [a, b]
";
        let m = LineMap::build(yaml);
        assert_eq!(m.line("sources.prom.eu"), Some(2));
        assert_eq!(m.line("sources.prom.eu.url"), Some(3));
        assert_eq!(m.line("sources.prom"), Some(4));
        assert_eq!(m.line("sources.prom.us[1]"), Some(6));
        assert_eq!(
            m.line("sources.prom.us[01]"),
            Some(6),
            "falls back to the list"
        );
    }

    /// Regression: a full path string per node made a long key over many entries cost the key's
    /// length times the entries (140 KB of YAML took 2 GB); each key is now stored once.
    #[test]
    fn a_long_key_over_many_entries_is_stored_once() {
        let key = "k".repeat(70_000);
        let mut yaml = format!("? {key}\n:\n");
        for i in 0..7_000 {
            yaml.push_str(&format!("  c{i}: 1\n"));
        }
        let m = LineMap::build(&yaml);
        let stored: usize = m
            .children
            .keys()
            .map(|(_, step)| match step {
                Step::Key(k) => k.len(),
                Step::Index(_) => 0,
            })
            .sum();
        assert!(
            stored <= yaml.len(),
            "{stored} bytes of keys for {} of YAML",
            yaml.len()
        );
        assert_eq!(m.line(&format!("{key}.c6999")), Some(7_002));
    }

    #[test]
    fn parent_paths() {
        assert_eq!(parent("a.b[2].c"), "a.b[2]");
        assert_eq!(parent("a.b[2]"), "a.b");
        assert_eq!(parent("a"), "");
        assert_eq!(parent("x[0][1]"), "x[0]");
    }
}
