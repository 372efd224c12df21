#!/usr/bin/env python3
"""Report what makes src/ hard to hold in one's head (issue 34's two checks), for each crate of
the workspace (src/ and crates/*/src/; each crate on its own: the client library cannot import the
application, the compiler sees to that).

1. Every file with more than --max-lines lines of non-test code (the lines before the
   first column-0 `#[cfg(test)]`).
2. Every import cycle between files: the file-level graph of `use crate::..`, `use super::..`,
   `use self::..` (grouped trees included) and inline `crate::x::y` / `super::x` / `child::x` paths, each
   resolved to the file that defines the module; a name a module imports or re-exports
   (`pub use child::Item`) resolves to the file it comes from. `mod x;` is not an import, and
   test modules (`#[cfg(test)]` items, `mod tests;` files) are ignored. Each cycle is printed
   with the line of each import; the shortest cycles are listed until every import that lies
   on a cycle is on a listed one.
3. With --max-fn-lines N, every function of non-test code longer than N lines, counted from the
   line of its `fn` to the line of its closing brace (attributes and doc comments not counted; a
   function nested in another counts in both).
4. Every cycle between the crate's top-level modules (`store`, `dlq`, `bridge`...): the same
   graph with each file counted as the top-level module it is in, so that layers hold too
   (a file-level graph can be acyclic while `store -> dlq -> store` is not).

Exits 1 when anything is reported, 0 otherwise. Standard library only.
"""

import argparse
import collections
import glob
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
USE_RE = re.compile(r"(?<![\w$])use\s+([^;]*);")
INLINE_RE = re.compile(r"(?<![\w:$])((?:crate|super|self)(?:::" + IDENT + r")+)")
CHILD_RE = re.compile(r"(?<![\w:$])(" + IDENT + r"(?:::" + IDENT + r")+)")
DEF_RE = re.compile(r"\b(?:fn|struct|enum|trait|type|const|static|mod|union)\s+(" + IDENT + ")")
VIS = r"(?:pub(?:\([^)]*\))?\s+)?"
CFG_TEST_RE = re.compile(r"#\[cfg\(test\)\]\s*(?=" + VIS + r"(?:mod|use|fn|impl)\b)")
TEST_MOD_RE = re.compile(r"#\[cfg\(test\)\]\s*" + VIS + r"mod\s+(" + IDENT + r")\s*;")


def blank(s):
    return "".join(c if c == "\n" else " " for c in s)


def strip(text):
    """Blanks comments, string and char literals, keeping every newline (and so line numbers)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c, two, word_before = text[i], text[i:i + 2], i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")
        raw = re.match(r'b?r(#*)"', text[i:i + 80]) if c in "br" and not word_before else None
        if two == "//":
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif two == "/*":
            depth, j = 1, i + 2
            while j < n and depth:
                step = {"/*": 1, "*/": -1}.get(text[j:j + 2], 0)
                depth, j = depth + step, j + (2 if step else 1)
        elif raw:
            end = text.find('"' + raw.group(1), i + raw.end())
            j = n if end < 0 else end + 1 + len(raw.group(1))
        elif c == '"' or (two == 'b"' and not word_before):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
        elif c == "'" and (m := re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])):
            j = i + m.end()
        else:
            out.append(c)
            i += 1
            continue
        out.append(blank(text[i:j]))
        i = j
    return "".join(out)


def block_end(code, j):
    """The index just past the item starting at j: past its `;`, or past its `{ .. }` block."""
    while j < len(code) and code[j] not in ";{":
        j += 1
    depth = 0
    while j < len(code):
        depth += {"{": 1, "}": -1}.get(code[j], 0)
        j += 1
        if depth == 0:
            break
    return j


def drop_test_items(code):
    while m := CFG_TEST_RE.search(code):
        j = block_end(code, m.end())
        code = code[:m.start()] + blank(code[m.start():j]) + code[j:]
    return code


FN_RE = re.compile(r"\bfn\s+(" + IDENT + r")")


def long_functions(code, max_lines):
    """Each function of `code` (stripped, test items blanked) over `max_lines` lines:
    (line of its `fn`, name, lines), a declaration without a body (`fn f();`) skipped."""
    out = []
    for m in FN_RE.finditer(code):
        j, depth = m.end(), 0  # the body's `{`: the first `{` or `;` outside () and []
        while j < len(code) and not (depth == 0 and code[j] in "{;"):
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(code[j], 0)
            j += 1
        if j >= len(code) or code[j] == ";":
            continue
        first, last = code.count("\n", 0, m.start()) + 1, code.count("\n", 0, block_end(code, j) - 1) + 1
        if last - first + 1 > max_lines:
            out.append((first, m.group(1), last - first + 1))
    return out


def inline_mods(code):
    """Each inline `mod name { .. }` of a file: (start, end, name)."""
    return [(m.start(), block_end(code, m.start()), m.group(1))
            for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", code)]


def parse_tree(text):
    """`a::{b, c::D as E, f::*}` -> [(['a','b'], 'b'), (['a','c','D'], 'E'), (['a','f','*'], '*')]."""
    toks, pos = re.findall(r"::|[{},*]|" + IDENT, text), 0

    def tree(prefix):
        nonlocal pos
        out, path = [], list(prefix)
        while pos < len(toks):
            t, pos = toks[pos], pos + 1
            if t == "{":
                while pos < len(toks) and toks[pos] != "}":
                    out += tree(path)
                    pos += pos < len(toks) and toks[pos] == ","
                pos += 1
                return out
            if t in (",", "}"):
                pos -= 1
                break
            if t == "as":
                pos += 1
                return out + [(path, toks[pos - 1])]
            if t != "::":
                path = path + [t]
        if path != list(prefix) or not prefix:
            if path and path[-1] == "self":
                path = path[:-1]
            out.append((path, path[-1] if path else ""))
        return out

    return [(p, a) for p, a in tree([]) if p]


class Crate:
    def __init__(self, src, test_files):
        self.mods, self.files = {}, {}  # module path -> file; file -> (module path, code)
        for root, _, names in os.walk(src):
            for name in (n for n in names if n.endswith(".rs")):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, src)[:-3].split(os.sep)
                if rel == ["main"] or path in test_files:
                    continue
                mod = tuple(rel[:-1] if rel[-1] == "mod" else ([] if rel == ["lib"] else rel))
                with open(path, encoding="utf-8") as f:
                    self.mods[mod], self.files[path] = path, (mod, drop_test_items(strip(f.read())))
        self.imports = {p: self.uses(mod, code) for p, (mod, code) in self.files.items()}

    def uses(self, mod, code):
        """Each `use` of a file into src/: (line, absolute path, name it binds or '*')."""
        out, spans = [], inline_mods(code)
        for m in USE_RE.finditer(code):
            line = code.count("\n", 0, m.start()) + 1
            for path, alias in parse_tree(m.group(1)):
                absolute = self.absolute(self.mod_at(mod, spans, m.start()), path)
                if absolute is not None:
                    out.append((line, absolute, alias))
        return out

    @staticmethod
    def mod_at(mod, spans, pos):
        return tuple(mod) + tuple(name for start, end, name in spans if start <= pos < end)

    def absolute(self, mod, path):
        if path[0] == "crate":
            return path[1:]
        if path[0] in ("self", "super"):
            base = list(mod)
            while path and path[0] in ("self", "super"):
                base, path = base[:-1] if path[0] == "super" else base, path[1:]
            return base + path
        if tuple(mod) + (path[0],) in self.mods:
            return list(mod) + path
        return None  # another crate, std, or a local item: not a file of src/

    def resolve(self, path, seen=()):
        """The file that defines `path` (following imports and re-exports), or None."""
        cut = next((c for c in range(len(path), -1, -1) if tuple(path[:c]) in self.mods), None)
        if cut is None:
            return None
        file = self.mods[tuple(path[:cut])]
        if cut == len(path) or (file, path[cut]) in seen:
            return file
        name, seen = path[cut], seen + ((file, path[cut]),)
        for _, target, alias in self.imports[file]:
            if alias == name:
                return self.resolve(target + path[cut + 1:], seen) or file
        if name not in DEF_RE.findall(self.files[file][1]):
            for _, target, alias in self.imports[file]:
                found = self.resolve(target[:-1] + [name], seen) if alias == "*" else None
                if found and name in DEF_RE.findall(self.files[found][1]):
                    return found
        return file

    def graph(self):
        edges = collections.defaultdict(dict)  # file -> {file: (line, path)}
        for file, (mod, code) in self.files.items():
            found = [(line, target[:-1] if alias == "*" else target) for line, target, alias in self.imports[file]]
            body, spans = USE_RE.sub(lambda m: blank(m.group(0)), code), inline_mods(code)
            for m in INLINE_RE.finditer(body):
                target = self.absolute(self.mod_at(mod, spans, m.start()), m.group(1).split("::"))
                found.append((body.count("\n", 0, m.start()) + 1, target))
            # A path through a child module (`abort::AbortArgs` in cli/mod.rs) is an edge too.
            for m in CHILD_RE.finditer(body):
                here, path = self.mod_at(mod, spans, m.start()), m.group(1).split("::")
                if tuple(here) + (path[0],) in self.mods:
                    found.append((body.count("\n", 0, m.start()) + 1, list(here) + path))
            for line, target in found:
                dest = self.resolve(target)
                if dest and dest != file and dest not in edges[file]:
                    edges[file][dest] = (line, "::".join(["crate"] + target))
        return edges


def shortest_path(edges, start, goal):
    prev, queue = {start: None}, collections.deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = []
            while node is not None:
                path, node = [node] + path, prev[node]
            return path
        for nxt in sorted(edges.get(node, {})):
            if nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return None


def cycles(edges):
    """Shortest cycles, shortest first, until every edge that lies on a cycle is on a listed one."""
    found = set()
    for a in list(edges):
        for b in edges[a]:
            back = shortest_path(edges, b, a)
            if back:
                cycle = [a] + back[:-1]
                i = cycle.index(min(cycle))
                found.add(tuple(cycle[i:] + cycle[:i]))
    covered, out = set(), []
    for cycle in sorted(found, key=lambda c: (len(c), c)):
        pairs = set(zip(cycle, cycle[1:] + cycle[:1]))
        if not pairs <= covered:
            covered |= pairs
            out.append(list(cycle) + [cycle[0]])
    return out


def main():
    head, tail = __doc__.split("\n\n", 1)
    parser = argparse.ArgumentParser(description=head, epilog=tail, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", action="append", help="a crate's source directory, repeatable "
                        "(default: each crate of the workspace: src and crates/*/src)")
    parser.add_argument("--max-lines", type=int, default=1000, help="non-test lines allowed in a file (default: 1000)")
    parser.add_argument("--max-fn-lines", type=int, help="lines allowed in a function of non-test code "
                        "(default: not checked)")
    args = parser.parse_args()
    srcs = args.src or ["src"] + sorted(glob.glob(os.path.join("crates", "*", "src")))
    reported = sum(check(src, args.max_lines, args.max_fn_lines) for src in srcs)
    return 1 if reported else 0


def check(src, max_lines, max_fn_lines=None):
    """Reports the long files, the long functions (when `max_fn_lines` is given) and the cycles of
    the crate whose sources are in `src`."""
    sources = {}
    for root, _, names in sorted(os.walk(src)):
        for name in sorted(n for n in names if n.endswith(".rs")):
            with open(os.path.join(root, name), encoding="utf-8") as f:
                sources[os.path.join(root, name)] = f.read()
    test_files = set()
    for path, text in sources.items():
        base = os.path.dirname(path) if os.path.basename(path) in ("mod.rs", "lib.rs") else path[:-3]
        for m in TEST_MOD_RE.finditer(strip(text)):
            test_files |= {os.path.join(base, m.group(1) + ".rs"), os.path.join(base, m.group(1), "mod.rs")}
    reported = 0
    for path, text in sources.items():
        lines = text.splitlines()
        count = next((i for i, line in enumerate(lines) if line.startswith("#[cfg(test)]")), len(lines))
        if path not in test_files and count > max_lines:
            print(f"too long: {path}: {count} lines of non-test code (at most {max_lines})")
            reported += 1
        if path not in test_files and max_fn_lines is not None:
            for line, name, n in long_functions(drop_test_items(strip(text)), max_fn_lines):
                print(f"too long: {path}:{line}: fn {name}: {n} lines (at most {max_fn_lines})")
                reported += 1
    edges = Crate(src, test_files).graph()
    for cycle in cycles(edges):
        print("cycle: " + " -> ".join(cycle))
        for a, b in zip(cycle, cycle[1:]):
            print(f"    {a}:{edges[a][b][0]} uses {edges[a][b][1]}")
        reported += 1
    modules = collections.defaultdict(dict)  # top-level module -> {module: (file, line, path)}
    for a, dests in edges.items():
        for b, (line, path) in dests.items():
            ta, tb = top_module(src, a), top_module(src, b)
            if ta != tb and tb not in modules[ta]:
                modules[ta][tb] = (a, line, path)
    for cycle in cycles(modules):
        print("module cycle: " + " -> ".join(cycle))
        for a, b in zip(cycle, cycle[1:]):
            file, line, path = modules[a][b]
            print(f"    {file}:{line} uses {path}")
        reported += 1
    return reported


def top_module(src, path):
    """The crate's top-level module a file is in (`src/store/fence.rs` -> `store`)."""
    return os.path.relpath(path, src)[:-3].split(os.sep)[0]


if __name__ == "__main__":
    sys.exit(main())
