#!/usr/bin/env python3
"""Checks the invariants of one end-to-end scenario from what the processes left behind.

  verify.py --produced FILE --db CONSUMER.db --history HISTORY.json [--conflicts N]

- conservation, counted from the consumer's database (not from metrics): every event the
  producer saw confirmed is in the ledger exactly once, and nothing is in the ledger that the
  producer did not at least attempt (FILE.attempted);
- per-key order: each order's events were applied with versions 1, 2, 3... in that order;
- the journal is a chain (each transition starts where the previous one ended), shows every phase
  from consume_dual to complete, and at least one rollback by a guard breach;
- exactly N messages were set aside as conflicts (the injected ones).
Prints a summary; exits 1 on the first broken invariant, with what broke.
"""
import argparse
import collections
import json
import sqlite3
import sys


def fail(msg):
    print(f"verify: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def lines(path):
    try:
        with open(path) as f:
            return [l.strip() for l in f if l.strip()]
    except FileNotFoundError:
        return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--produced", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--history", required=True)
    ap.add_argument("--conflicts", type=int, default=0)
    ap.add_argument("--rollbacks", type=int, default=1, help="at least this many guard rollbacks")
    a = ap.parse_args()

    confirmed = lines(a.produced)
    attempted = set(lines(a.produced + ".attempted"))
    if not confirmed:
        fail("the producer confirmed nothing")
    if len(set(confirmed)) != len(confirmed):
        fail("the producer log repeats a key")

    db = sqlite3.connect(a.db)
    rows = db.execute("SELECT seq, key, order_id, version, route FROM ledger ORDER BY seq").fetchall()
    applied = collections.Counter(r[1] for r in rows)
    doubled = [k for k, n in applied.items() if n > 1]
    if doubled:
        fail(f"{len(doubled)} events applied more than once, e.g. {doubled[:3]}")
    missing = [k for k in confirmed if k not in applied]
    if missing:
        fail(f"{len(missing)} confirmed events never applied, e.g. {missing[:3]}")
    unknown = [k for k in applied if k not in attempted]
    if unknown:
        fail(f"{len(unknown)} applied events the producer never sent, e.g. {unknown[:3]}")

    last = {}
    for seq, key, order, version, route in rows:
        expected = last.get(order, 0) + 1
        if version != expected:
            fail(f"order {order}: version {version} applied after {expected - 1} (ledger seq {seq})")
        last[order] = version

    conflicts = db.execute("SELECT count(*) FROM set_aside").fetchone()[0]
    if conflicts != a.conflicts:
        fail(f"{conflicts} messages set aside as conflicts, expected {a.conflicts}")
    routes = collections.Counter(r[4] for r in rows)

    with open(a.history) as f:
        journal = json.load(f)
    prev = None
    for e in journal:
        if prev is not None and (e["from"], e["from_paused"]) != (prev["to"], prev["to_paused"]):
            fail(f"journal seq {e['seq']} starts at {e['from']} but seq {prev['seq']} ended at {prev['to']}")
        prev = e
    visited = {e["to"].split("[")[0] for e in journal}
    for phase in ["consume_dual", "synthetic", "slices", "drain", "disconnect", "complete"]:
        if phase not in visited:
            fail(f"the journal never reached {phase}: {[e['to'] for e in journal]}")
    rollbacks = [e for e in journal if e["command"] == "rollback"]
    if len(rollbacks) < a.rollbacks:
        fail(f"{len(rollbacks)} rollbacks in the journal, expected at least {a.rollbacks}")
    seqs = [e["seq"] for e in journal]
    if len(set(seqs)) != len(seqs):
        fail("a journal entry appears twice")

    path = " -> ".join(e["to"] + (" (paused)" if e["to_paused"] else "") for e in journal)
    print(f"verify: ok: {len(confirmed)} confirmed, {len(rows)} applied once each "
          f"({dict(routes)}), {len(last)} orders in version order, {conflicts} conflict(s) set aside")
    print(f"verify: journal ({len(journal)} transitions, {len(rollbacks)} rollback(s)): {path}")


if __name__ == "__main__":
    main()
