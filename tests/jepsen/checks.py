"""The checks of the Jepsen-style suite (tests/jepsen/jepsen.py), as pure functions.

Each takes what a run left behind (journal rows, the audit rows the suite's own triggers wrote,
`lease_epochs`, the samples of `/readyz` and of the routing files, the takeovers measured) and
returns a list of violations, each a one-line string; an empty list means the check held.
Nothing here reads a clock, a file or the network, so `python3 -m unittest discover -s tests/jepsen -p "test_*.py"`
exercises every check with rows made by hand (each one shown failing as well as passing).
"""

import datetime

# The rungs of plans/local.yaml, as the journal names them (state, step).
LADDER = ["planned", "consume_dual", "synthetic", "slices[0]", "slices[1]", "slices[2]",
          "drain", "disconnect", "complete"]


def rung_name(state, step):
    """`slices`, 1 -> `slices[1]`; the name of a rung as the ladder above spells it."""
    if state == "slices":
        return f"slices[{step}]"
    return state


def rung(state, step):
    return LADDER.index(rung_name(state, step))


def ms(value):
    """A time from the database as ms since the epoch: a BIGINT of ms (or of s), or a timestamp
    as JSON renders it (`2026-12-04T13:44:47.425784+00:00`)."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value * 1000) if value < 1e11 else int(value)
    text = str(value).replace("Z", "+00:00")
    if len(text) > 6 and text[-3] != ":" and text[-6] not in "+-" and text[-3] in "+-":
        text += ":00"  # PostgreSQL's `+00` offset, which older fromisoformat refuses
    return int(datetime.datetime.fromisoformat(text).timestamp() * 1000)


def chain(migration, journal):
    """Every journal a chain: `init` first, `seq` and `generation` one above the previous, each
    `from` the previous `to`, each move legal (advance one rung up, not paused; rollback one rung
    down; pause and resume in place)."""
    out = []
    if not journal:
        return [f"{migration}: empty journal"]
    if journal[0]["command"] != "init" or journal[0]["seq"] != 1:
        out.append(f"{migration}: the journal does not start with init at seq 1: {journal[0]}")
    for a, b in zip(journal, journal[1:]):
        where = f"{migration} seq {b['seq']} ({b['command']} by {b['actor']})"
        if b["seq"] != a["seq"] + 1:
            out.append(f"{where}: seq {a['seq']} then {b['seq']}")
        if b["generation"] != a["generation"] + 1:
            out.append(f"{where}: generation {a['generation']} then {b['generation']}")
        prev_to = (rung_name(a["to_state"], a["to_step"]), a["to_paused"])
        this_from = (rung_name(b["from_state"], b["from_step"]), b["from_paused"])
        if prev_to != this_from:
            out.append(f"{where}: from {this_from} but the previous entry ended at {prev_to}")
        f, t = rung(b["from_state"], b["from_step"]), rung(b["to_state"], b["to_step"])
        cmd = b["command"]
        ok = {
            "advance": t == f + 1 and not b["from_paused"] and not b["to_paused"],
            "rollback": t + 1 == f,
            "pause": t == f and b["to_paused"],
            "resume": t == f and b["from_paused"] and not b["to_paused"],
        }.get(cmd, False)
        if not ok:
            out.append(f"{where}: illegal move {LADDER[f]} -> {LADDER[t]}")
    return out


def step_entered_twice(migration, journal):
    """No step entered twice: a rung is entered by `advance` again only after a rollback left
    it (a double apply of one decision, or a stale one applied after the step moved on, enters
    it twice)."""
    out, entered = [], set()
    for e in journal:
        t = rung(e["to_state"], e["to_step"])
        if e["command"] == "advance":
            if t in entered:
                out.append(f"{migration} seq {e['seq']}: {LADDER[t]} entered a second time "
                           f"(by {e['actor']}) without a rollback out of it")
            entered.add(t)
        elif e["command"] == "rollback":
            entered = {r for r in entered if r <= t}
        elif e["command"] == "init":
            entered = {t}
    return out


def holder_id(holder):
    """The `--id` of a lease holder: `ID#INSTANCE` since issue 54 (one holder per process), the
    id alone before."""
    if not isinstance(holder, str):
        return holder
    return holder.rsplit("#", 1)[0]


def non_holder(migration, journal, audit, daemons):
    """No write by a non-holder, as the suite's own trigger saw it: when a daemon's journal row
    was inserted, the `leases` row named another holder (or, with epochs, another epoch)."""
    out = []
    for e in journal:
        if e["actor"] not in daemons:
            continue
        a = audit.get(e["id"])
        if a is None:
            out.append(f"{migration} seq {e['seq']}: no audit row (trigger missing?)")
            continue
        lease = a["lease"] or {}
        holder = lease.get("holder")
        if holder_id(holder) != e["actor"]:
            out.append(f"{migration} seq {e['seq']}: {e['command']} {rung_name(e['from_state'], e['from_step'])}"
                       f" -> {rung_name(e['to_state'], e['to_step'])} written by {e['actor']} while "
                       f"the lease was {holder!r}'s")
        elif "epoch" in e and "epoch" in lease and e["epoch"] != lease["epoch"]:
            out.append(f"{migration} seq {e['seq']}: written under epoch {e['epoch']} while the "
                       f"lease was at epoch {lease['epoch']}")
    return out


def epoch_audit(migration, journal, epochs, daemons):
    """No write by a non-holder, audited by epoch: every daemon's row carries an epoch that
    `lease_epochs` gives to that daemon, and epochs never go back along the journal."""
    if not journal or "epoch" not in journal[0]:
        return [f"{migration}: the journal has no epoch column (no fencing token)"]
    if epochs is None:
        return [f"{migration}: no lease_epochs table"]
    out, highest = [], None
    holder_of = {r["epoch"]: holder_id(r["holder"]) for r in epochs}
    for e in journal:
        if e["actor"] not in daemons:
            continue
        ep = e["epoch"]
        if ep is None or ep not in holder_of:
            out.append(f"{migration} seq {e['seq']}: epoch {ep!r} is in no lease_epochs row")
        elif holder_of[ep] != e["actor"]:
            out.append(f"{migration} seq {e['seq']}: written by {e['actor']} under epoch {ep}, "
                       f"which was {holder_of[ep]}'s")
        if ep is not None and highest is not None and ep < highest:
            out.append(f"{migration} seq {e['seq']}: epoch {ep} after a row of epoch {highest}")
        if ep is not None:
            highest = ep if highest is None else max(highest, ep)
    return out


def readings_times(entry):
    """The `evaluated_at_ms` of every gate in a decision's evidence."""
    ev = entry.get("evidence")
    gates = (ev or {}).get("gates") or [] if isinstance(ev, dict) else []
    return [g["evaluated_at_ms"] for g in gates if isinstance(g, dict) and g.get("evaluated_at_ms")]


def stale_readings(migration, journal, tenure_start, reading_real_ms, daemons):
    """No decision committed on readings older than the lease that committed it: each gate's
    reading (on the real clock, `reading_real_ms(entry, t)`) is at or after the acquisition of
    the tenure under which the row was written (`tenure_start(entry)`, ms on the database's
    clock; None when unknown)."""
    out = []
    for e in journal:
        if e["actor"] not in daemons or e["command"] == "init":
            continue
        start = tenure_start(e)
        times = readings_times(e)
        if start is None or not times:
            continue
        oldest = min(reading_real_ms(e, t) for t in times)
        # 50 ms: the harness's two clocks (the database's, the daemon's corrected one) agree to
        # a few ms on one machine.
        if oldest + 50 < start:
            out.append(f"{migration} seq {e['seq']}: {e['command']} by {e['actor']} rests on a "
                       f"reading {(start - oldest) / 1000:.2f} s older than the lease it was "
                       f"committed under")
    return out


def journal_on_db_clock(migration, journal, audit, bound_ms=2000):
    """The journal's `at` is the database's time at commit: within `bound_ms` of the database
    clock the suite's trigger read at insert, and never going back along the journal."""
    out, prev = [], None
    for e in journal:
        a = audit.get(e["id"])
        if a is not None and abs(e["at"] - a["db_ms"]) > bound_ms:
            out.append(f"{migration} seq {e['seq']}: at is {(e['at'] - a['db_ms']) / 1000:+.1f} s off "
                       f"the database's clock (written by {e['actor']})")
        if prev is not None and e["at"] < prev:
            out.append(f"{migration} seq {e['seq']}: at goes back {(prev - e['at']) / 1000:.1f} s")
        prev = e["at"]
    return out


def two_ready(samples):
    """No two daemons ready at once: in no sample of every daemon's `/readyz` (taken within a
    few ms of each other) do two answer 200. Returns violations, one per episode."""
    out, episode = [], None
    for t, ready in samples:
        both = sorted(n for n, r in ready.items() if r)
        if len(both) > 1:
            if episode is None:
                episode = [t, t, both]
            episode[1] = t
        elif episode is not None:
            out.append(f"{'+'.join(episode[2])} ready at once for {episode[1] - episode[0] + 0.1:.1f} s")
            episode = None
    if episode is not None:
        out.append(f"{'+'.join(episode[2])} ready at once until the end of the run")
    return out


def routing_monotonic(samples, journals):
    """Routing generations monotonic: the generation each routing file showed never went down
    between two samples, and the journal's generations go up (checked by `chain`)."""
    out, seen = [], {}
    for t, name, gen in samples:
        if name in seen and gen < seen[name]:
            out.append(f"{name}: routing generation {seen[name]} then {gen}")
        seen[name] = max(gen, seen.get(name, gen))
    for name, gen in seen.items():
        last = journals.get(name, [])
        if last and gen > last[-1]["generation"]:
            out.append(f"{name}: the routing file at generation {gen}, ahead of the journal "
                       f"({last[-1]['generation']})")
    return out


def takeovers(records, bound_s):
    """Takeover within ttl + one interval whatever the skew: each fault of the leader was
    followed by another daemon ready within `bound_s`."""
    out = []
    for r in records:
        if r["took"] is None:
            out.append(f"{r['fault']} of {r['leader']} ({r['skew']}): no daemon took over within "
                       f"{r['waited']:.1f} s")
        elif r["took"] > bound_s:
            out.append(f"{r['fault']} of {r['leader']} ({r['skew']}): takeover after {r['took']:.2f} s"
                       f" > {bound_s:.2f} s")
    return out


def idempotency_id(header, event):
    """The idempotency id of a webhook: its `Idempotency-Key` header or a field of the event."""
    for key in ("idempotency_id", "idempotency_key", "event_id", "id"):
        if event.get(key) is not None:
            return event[key]
    return header


def webhooks(hooks, journals, fenced):
    """Transition webhooks: each announces an entry the journal has (never a write that did not
    commit); one transition announced more than once (by two daemons, by a daemon again after
    a restart) carries one idempotency id every time. Once fenced, every event carries the
    epoch and an idempotency id. `hooks`: (time, daemon, Idempotency-Key header, event)."""
    out, seen, bare = [], {}, 0
    for _, who, header, ev in hooks:
        if fenced and (ev.get("epoch") is None or idempotency_id(header, ev) is None):
            bare += 1
        if ev.get("event") != "transition":
            continue
        d = ev.get("details") or {}
        m, seq = ev.get("migration"), d.get("seq")
        entry = next((e for e in journals.get(m, []) if e["seq"] == seq), None)
        if entry is None or entry["generation"] != d.get("generation") or \
                rung_name(entry["to_state"], entry["to_step"]) != d.get("to"):
            out.append(f"{m} seq {seq}: {who} announced {d.get('command')} {d.get('from')} -> {d.get('to')}, "
                       f"which the journal does not have")
            continue
        seen.setdefault((m, seq), []).append((who, idempotency_id(header, ev)))
    for (m, seq), sent in sorted(seen.items()):
        ids = {i for _, i in sent}
        if len(sent) > 1 and (None in ids or len(ids) > 1):
            out.append(f"{m} seq {seq}: announced {len(sent)} times (by {', '.join(w for w, _ in sent)}) "
                       f"without one idempotency id")
    if bare:
        out.append(f"{bare} events without an epoch or an idempotency id")
    return out


# ---- the checks of the newer faults (issue 54) ------------------------------------------------

def within(what, took, bound_s):
    """`what` happened within `bound_s` (`took` the seconds it took, None: it never did)."""
    if took is None:
        return [f"{what}: never happened (bound {bound_s:.1f} s)"]
    if took > bound_s:
        return [f"{what}: after {took:.2f} s > {bound_s:.1f} s"]
    return []


def ready_without_rounds(samples, asks, windows, bound_s):
    """`/readyz` never says 200 for a leader that runs no round: inside each (start, end) of
    `windows`, a daemon that has answered ready for over `bound_s` without a break must have
    asked the source (what every round of a running migration does) within the last `bound_s`.
    `asks`: (time, daemon, query, value). One violation per daemon and episode."""
    out = []
    last_ask = {}
    for t, who, _, _ in asks:
        last_ask.setdefault(who, []).append(t)
    since, reported = {}, set()
    for t, ready in samples:
        for n, r in ready.items():
            if not r:
                since.pop(n, None)
                continue
            since.setdefault(n, t)
            if not any(a <= t <= b for a, b in windows) or t - since[n] <= bound_s:
                continue
            recent = [a for a in last_ask.get(n, []) if t - bound_s <= a <= t]
            if not recent and (n, since[n]) not in reported:
                reported.add((n, since[n]))
                out.append(f"{n} answered ready at +{t - windows[0][0]:.1f} s of the fault with no "
                           f"round (no source asked) in the {bound_s:.1f} s before")
    return out


def shared_epoch(hooks, daemons):
    """One process per epoch: no two processes (two daemons, or two processes of one `--id`)
    posted events under one lease epoch (an epoch is one acquisition: the fence's token).
    `hooks`: (time, process, Idempotency-Key header, event)."""
    by_epoch = {}
    for _, who, _, ev in hooks:
        if who in daemons and ev.get("epoch") is not None:
            by_epoch.setdefault(ev["epoch"], set()).add(who)
    return [f"epoch {e}: events posted by {', '.join(sorted(w))}"
            for e, w in sorted(by_epoch.items()) if len(w) > 1]


def undelivered(outbox, hooks):
    """Every committed transition delivered at least once: each `outbox` row (a dict with
    `migration`, `seq`, `delivered_at`) marked delivered and its event (Idempotency-Key
    `MIGRATION:SEQ`) acknowledged by the receiver. `hooks`: what the receiver took (answered
    200)."""
    taken = {idempotency_id(h, ev) for _, _, h, ev in hooks}
    out = []
    for r in outbox:
        key = f"{r['migration']}:{r['seq']}"
        if key not in taken:
            out.append(f"{key}: committed, never delivered to the receiver"
                       + ("" if r.get("delivered_at") is None else " (though marked delivered)"))
        elif r.get("delivered_at") is None:
            out.append(f"{key}: delivered, still not marked delivered in the outbox")
    return out


def lost(produced, delivered):
    """Nothing lost: every id in `produced` is among `delivered` (duplicates are allowed: the
    consumers' dedup absorbs them)."""
    missing = sorted(set(produced) - set(delivered))
    if not missing:
        return []
    return [f"{len(missing)} of {len(set(produced))} messages never forwarded (first: "
            f"{', '.join(str(m) for m in missing[:5])})"]


def overlaps(times, longest_s, gap_s=0.15):
    """Two active at once for no longer than `longest_s`: `times` are the samples (100 ms apart)
    in which two were; samples less than `gap_s` apart make one episode."""
    out, start, last = [], None, None
    for t in sorted(times) + [None]:
        if t is not None and last is not None and t - last <= gap_s:
            last = t
            continue
        if start is not None and last - start + 0.1 > longest_s:
            out.append(f"two active at once for {last - start + 0.1:.1f} s")
        start = last = t
    return out


def epoch_per_acquisition(changes):
    """An epoch per acquisition, not per `--id`: each change of the lease's holder (`ID#INSTANCE`:
    two processes of one `--id` are two holders) raises the epoch above every earlier one.
    `changes`: the suite's `jepsen_lease_changes` rows (`old`, `new`: the row before and after)."""
    out, highest = [], None
    for c in changes:
        new, old = c.get("new"), c.get("old")
        if new is None:
            continue
        epoch = new.get("epoch")
        if (old is None or old.get("holder") != new.get("holder")) and highest is not None \
                and (epoch is None or epoch <= highest):
            out.append(f"{(old or {}).get('holder')} -> {new.get('holder')}: epoch {epoch}, "
                       f"not above {highest}")
        if epoch is not None:
            highest = epoch if highest is None else max(highest, epoch)
    return out
