#!/usr/bin/env python3
"""Checks the invariants of one end-to-end scenario from what the processes left behind.

  verify.py --produced FILE [--produced FILE2...] --db CONSUMER.db --history HISTORY.json
            [--conflicts N] [--rollbacks N] [--stale-trips N --stale-producer NAME ...]

- conservation, counted from the consumer's database (not from metrics): every event the
  producer saw confirmed is in the ledger exactly once, and nothing is in the ledger that the
  producer did not at least attempt (FILE.attempted);
- per-key order: each order's events were applied with versions 1, 2, 3... in that order;
- the journal is a chain (each transition starts where the previous one ended), shows every phase
  from consume_dual to complete, and at least one rollback by a guard breach;
- exactly N messages were set aside as conflicts (the injected ones);
- the built-in stale-producer guard (issue 58) tripped exactly --stale-trips times (0: no false
  trip over every move of the scenario), each trip a pause (never a rollback) naming
  --stale-producer; with --pinned-routes, the detection time: from the first message the pinned
  producer wrote to a moved slice past the grace (and the clock-skew bound) after the move, to
  the pause in the journal (--journal-db: the journal's millisecond times);
- with --backlog-routes: the events stamped for the old broker before their slice moved and
  applied after the move (the backlog at each move), at least --min-backlog of them;
- with --preflight: `migrate preflight` on the plan without its waivers exited 3 naming each
  refused setting with its fix, and (--refused) the daemon paused in consume_dual on the same
  refusal, the journal showing nothing past it until the waivers were applied.
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
    ap.add_argument("--produced", required=True, action="append", help="repeatable: one per producer")
    ap.add_argument("--db", required=True)
    ap.add_argument("--history", required=True)
    ap.add_argument("--conflicts", type=int, default=0)
    ap.add_argument("--rollbacks", type=int, default=1, help="at least this many guard rollbacks")
    ap.add_argument("--stale-trips", type=int, default=0, help="exactly this many stale-guard trips")
    ap.add_argument("--stale-producer", help="the producer each stale trip must name")
    ap.add_argument("--pinned-routes", help="the pinned producer's FILE.routes (detection time)")
    ap.add_argument("--backlog-routes", help="a following producer's FILE.routes (the backlog at each move)")
    ap.add_argument("--min-backlog", type=int, default=1)
    ap.add_argument("--slices", type=int, default=16)
    ap.add_argument("--steps", default="", help="the plan's slices steps, e.g. 4,8,16")
    ap.add_argument("--grace-ms", type=int, default=3000)
    ap.add_argument("--skew-ms", type=int, default=2000)
    ap.add_argument("--journal-db", help="the SQLite state store: the journal's millisecond times")
    ap.add_argument("--preflight", help="the output of `migrate preflight` on the plan without waivers")
    ap.add_argument("--preflight-rc", type=int)
    ap.add_argument("--refused", help="the journal (JSON) when the daemon had refused")
    ap.add_argument("--record", help="append this run's stale figures (JSON line) to this file")
    a = ap.parse_args()

    confirmed = [k for p in a.produced for k in lines(p)]
    attempted = {k for p in a.produced for k in lines(p + ".attempted")}
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

    stale_checks(a, journal, db)
    if a.preflight:
        preflight_checks(a, journal)

    path = " -> ".join(e["to"] + (" (paused)" if e["to_paused"] else "") for e in journal)
    print(f"verify: ok: {len(confirmed)} confirmed, {len(rows)} applied once each "
          f"({dict(routes)}), {len(last)} orders in version order, {conflicts} conflict(s) set aside")
    print(f"verify: journal ({len(journal)} transitions, {len(rollbacks)} rollback(s)): {path}")


STALE_GUARD = "stale producers"


def stale_trips(journal):
    """The journal entries where the built-in stale-producer guard failed (a breach)."""
    out = []
    for e in journal:
        gates = (e.get("evidence") or {}).get("gates") or []
        if any(g.get("name") == STALE_GUARD and g.get("verdict") == "fail" for g in gates):
            out.append(e)
    return out


def journal_ms(a, journal):
    """seq -> the journal's time in ms (the SQLite store's column), else from the JSON's seconds."""
    if a.journal_db:
        db = sqlite3.connect(a.journal_db)
        return dict(db.execute("SELECT seq, at FROM journal").fetchall())
    import datetime
    out = {}
    for e in journal:
        t = datetime.datetime.fromisoformat(e["at"].replace("Z", "+00:00"))
        out[e["seq"]] = int(t.timestamp() * 1000)
    return out


def routes(path):
    """FILE.routes: key -> (side, slice, generation, at_ms)."""
    out = {}
    for l in lines(path):
        key, side, sl, gen, at = l.split()
        out[key] = (side, int(sl), int(gen), int(at))
    return out


def moves(journal, at_ms, slices, steps):
    """(time ms, generation, slices moved) of each entry that moved slices to the new broker."""
    out, before = [], 0
    for e in journal:
        state = e["to"]
        n = before
        if state.startswith("slices["):
            step = int(state[len("slices["):-1])
            n = steps[step] if step < len(steps) else slices
        elif state.split("[")[0] in ("drain", "disconnect", "complete"):
            n = slices
        elif state.split("[")[0] in ("planned", "consume_dual", "synthetic"):
            n = 0
        if n > before:
            out.append((at_ms[e["seq"]], e["generation"], n))
        before = n
    return out


def stale_checks(a, journal, db):
    trips = stale_trips(journal)
    if len(trips) != a.stale_trips:
        fail(f"{len(trips)} stale-producer guard trips in the journal, expected {a.stale_trips}: "
             f"{[(e['seq'], e['to'], (e['reason'] or '')[:160]) for e in trips]}")
    for e in trips:
        if e["command"] == "rollback" or not e["to_paused"]:
            fail(f"journal seq {e['seq']}: a stale trip must pause where it stands, not {e['command']} to {e['to']}")
        if a.stale_producer and f"producer {a.stale_producer} " not in (e["reason"] or ""):
            fail(f"journal seq {e['seq']}: the stale trip does not name producer {a.stale_producer}: {e['reason']!r}")
    at_ms = journal_ms(a, journal)
    moved = moves(journal, at_ms, a.slices, [int(x) for x in a.steps.split(",") if x])
    applied = dict(db.execute("SELECT key, applied_at_ms FROM ledger").fetchall())
    if a.backlog_routes:
        # Per move: the events stamped for the old broker before the move took their slice, and
        # applied after it (the backlog the consumer read after the publish).
        backlog = [0] * len(moved)
        for key, (side, sl, gen, at) in routes(a.backlog_routes).items():
            if side != "old" or key not in applied:
                continue
            for i, (t, g, n) in enumerate(moved):
                if at < t <= applied[key] and sl < n and gen < g:
                    backlog[i] += 1
                    break
        print(f"verify: backlog on the old broker at each move (events stamped before it, consumed "
              f"after it): {backlog}; {len(trips)} stale trip(s)")
        if sum(backlog) < a.min_backlog:
            fail(f"only {sum(backlog)} events of a backlog consumed after a move (at least {a.min_backlog} expected)")
    print(f"verify: stale guard: {len(trips)} trip(s) over {len(moved)} slice moves")
    if a.pinned_routes and trips:
        trip = trips[0]
        pinned = routes(a.pinned_routes)
        # The move that made the pinned producer stale: the first one past its generation.
        pin_gen = max((g for (_, _, g, _) in pinned.values()), default=0)
        move = next(((t, g, n) for t, g, n in moved if g > pin_gen), None)
        if move is None:
            fail("no move after the pinned producer's generation")
        t_move, g_move, n_move = move
        grace_end = t_move + a.grace_ms + a.skew_ms
        late = sorted(at for (side, sl, g, at) in pinned.values()
                      if side == "old" and sl < n_move and g < g_move and at > grace_end)
        if not late:
            fail("the pinned producer wrote nothing to a moved slice past the grace")
        first = late[0]
        # Everything it wrote to the moved slices after the move went to the old broker and was
        # still applied once (conservation above covers it; counted here to say so).
        after = [k for k, (side, sl, g, at) in pinned.items()
                 if side == "old" and sl < n_move and g < g_move and at > t_move]
        unapplied = [k for k in after if k not in applied]
        print(f"verify: stale: {len(after)} messages of {a.stale_producer} to moved slices after the "
              f"move, on the old broker, {len(after) - len(unapplied)} of them applied once")
        if unapplied:
            fail(f"{len(unapplied)} stale messages never applied, e.g. {unapplied[:3]}")
        paused = at_ms[trip["seq"]]
        detection = paused - first
        print(f"verify: stale: producer {a.stale_producer} pinned at generation {pin_gen}; slices moved "
              f"to {n_move} at generation {g_move}; first stale message {first - t_move} ms after the "
              f"publish (grace {a.grace_ms} ms + skew {a.skew_ms} ms); paused {detection} ms after it "
              f"(journal seq {trip['seq']}): detection {detection / 1000:.2f} s")
        if a.record:
            with open(a.record, "a") as f:
                f.write(json.dumps({"detection_ms": detection, "first_stale_after_publish_ms": first - t_move,
                                    "moves": len(moved), "trips": len(trips),
                                    "expected_trips": a.stale_trips}) + "\n")
    elif a.record:
        with open(a.record, "a") as f:
            f.write(json.dumps({"moves": len(moved), "trips": len(trips),
                                "expected_trips": a.stale_trips}) + "\n")


def preflight_checks(a, journal):
    text = open(a.preflight).read()
    if a.preflight_rc != 3:
        fail(f"`migrate preflight` on the plan without waivers exited {a.preflight_rc}, expected 3 (refused)")
    for needle in ["REFUSED: may lose acknowledged writes", "REFUSED old rabbitmq single_node",
                   "REFUSED old rabbitmq rabbitmq.queue_type", "fix: declare", "REFUSED new nats     single_node",
                   "REFUSED new nats     nats.replicas", "REFUSED new nats     nats.sync",
                   "or waive it: preflight.new.waive"]:
        if needle not in text:
            fail(f"`migrate preflight` output lacks {needle!r}:\n{text}")
    with open(a.refused) as f:
        refused = json.load(f)
    last = refused[-1]
    if (last["command"], last["to"], last["to_paused"]) != ("pause", "consume_dual", True):
        fail(f"the daemon did not pause in consume_dual on the refusal: {last['command']} to {last['to']}")
    reason = last["reason"] or ""
    for needle in ["preflight refused", "single_node", "fix: run a cluster of 3 nodes",
                   "rabbitmq.queue_type", "preflight.old.waive"]:
        if needle not in reason:
            fail(f"the daemon's refusal lacks {needle!r}: {reason!r}")
    if any(e["to"].split("[")[0] not in ("planned", "consume_dual") for e in refused):
        fail(f"something past consume_dual before the waivers: {[e['to'] for e in refused]}")
    # Nothing moved until the plan with the waivers was applied, then resumed.
    applied = next((e for e in journal if e["command"] == "plan apply"), None)
    synthetic = next((e for e in journal if e["to"] == "synthetic"), None)
    if applied is None or synthetic is None or synthetic["seq"] < applied["seq"]:
        fail("the migration entered synthetic before the waivers were applied")
    print(f"verify: preflight: refused (exit 3) without waivers, the daemon paused in consume_dual "
          f"(journal seq {last['seq']}); entered synthetic after the waivers (seq {synthetic['seq']})")


if __name__ == "__main__":
    main()
