"""The scenarios of the lease suite (tests/jepsen/jepsen.py): each drives a World's daemons
through its faults; the checks run after it."""

import random
import signal
import time

from rig import FAILING, GREEN, INTERVAL_S, TTL_S, say, wait_for

# How long the new leader's rounds may stop after a takeover while an ex-leader's transaction
# holds a row (the daemon's --db-lock-timeout is a fifth of the 3 s lease: 0.6 s).
WEDGE_S = 2 + 2 * INTERVAL_S + 1

# ---- the scenarios ----------------------------------------------------------------------------

def three(w, **kw):
    for n in ("d1", "d2", "d3"):
        w.add(n, **kw)


def hit_leader(w, fault, hit, after, wait):
    """After a random `wait` (s, a range), `hit` the leader, time the takeover, then `after`."""
    time.sleep(random.uniform(*wait))
    old = w.leader(timeout=5)
    if old is None:
        w.notes.append(f"no single leader before a {fault}")
        return
    t0 = time.time()
    hit(old)
    w.takeover(fault, old, t0)
    after(old, t0)


def kill9(d):
    d.signal(signal.SIGKILL)


def restart(d, _t0):
    d.start()


def sc_kill9(w):
    """kill -9 of the leader at random instants during transitions (3 times)."""
    three(w)
    stop, t = w.churning()
    for _ in range(3):
        hit_leader(w, "kill -9", kill9, restart, (1.0, 4.0))
    time.sleep(2)
    stop.set()
    t.join()


def sc_pause_random(w):
    """SIGSTOP of the leader at random instants, for 3.5-6 s (longer than the ttl), 3 times."""
    three(w)
    stop, t = w.churning()

    def resume(d, t0):
        time.sleep(max(0.0, random.uniform(3.5, 6.0) - (time.time() - t0)))
        d.signal(signal.SIGCONT)

    for _ in range(3):
        hit_leader(w, "SIGSTOP", lambda d: d.signal(signal.SIGSTOP), resume, (1.0, 3.0))
    time.sleep(3)
    stop.set()
    t.join()


def stale_round(w, old, fault, begin, end, m="m1"):
    """The worst moment: the truth is "pass", the leader's slow query arrives (the reading is
    taken), 1 s later `begin(old)` (a pause, a partition) while the answer travels; the truth turns
    to failing; a standby takes over (and holds: its readings fail); 1.5 s later `end(old)`.
    Returns whether the moment was reached."""
    w.source.set("app_error_ratio_new", GREEN["app_error_ratio_new"])
    n0 = len(w.source.asks)
    asked = wait_for(lambda: next((a for a in w.source.asks[n0:]
                                   if a[1] == old.name and a[2] == "app_error_ratio_new"), None), 10, 0.02)
    if asked is None:
        w.source.set("app_error_ratio_new", FAILING)
        w.notes.append(f"{fault}: {old.name} never asked the slow source")
        return False
    time.sleep(max(0.0, asked[0] + 1.0 - time.time()))
    lines0, ended0, gave_up0 = old.fenced_lines(), old.ended_by_server_lines(), old.gave_up_lines()
    t0 = time.time()
    begin(old)
    w.source.set("app_error_ratio_new", FAILING)
    w.takeover(fault, old, t0)
    time.sleep(1.5)
    end(old)
    time.sleep(4)
    w.fence_round(fault, old, lines0, ended0, gave_up0)
    return True


def sc_pause_source_wait(w):
    """SIGSTOP of the leader 1 s into a 2.5 s source wait (--source-timeout 10s, above the
    ttl) that will answer "pass" though the truth has turned to failing (twice)."""
    w.source.set("app_error_ratio_new", FAILING)
    for n in ("d1", "d2"):
        w.source.delay[n] = 2.5
        w.add(n, source_timeout="10s")
    if w.wait_state("m1", {"slices[0]"}, timeout=25) is None:
        w.notes.append("m1 never reached slices[0]")
        return
    time.sleep(1)
    for _ in range(2):
        old = w.leader()
        if old is None:
            w.notes.append("no single leader")
            continue
        stale_round(w, old, "SIGSTOP mid-source-wait", lambda d: d.signal(signal.SIGSTOP),
                    lambda d: d.signal(signal.SIGCONT))


def mid_commit_round(w, old, fault, begin, end, i, m="m1"):
    """The other worst moment: another session holds `m`'s row, the truth turns to "pass", the
    leader's transition waits on the lock; then `begin(old)` (a pause, a partition), the truth
    turns to failing, the lock is let go (the stopped leader's statement takes it and its
    transaction stays open), a standby takes over and must keep running rounds; 12 s after the
    fault `end(old)`."""
    # FOR KEY SHARE: the round's FOR SHARE goes through, a transition's FOR UPDATE waits.
    lock = w.pg.session(w.db)
    lock.stdin.write(f"BEGIN;\nSELECT 1 FROM migrations WHERE name = '{m}' FOR KEY SHARE;\n")
    lock.stdin.flush()
    time.sleep(0.3)
    w.source.set("app_error_ratio_new", GREEN["app_error_ratio_new"])
    waiting = False
    for _ in range(100):
        if w.pg.sql(w.db, "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                          "AND wait_event_type = 'Lock'", check=False):
            waiting = True
            break
        time.sleep(0.05)
    if not waiting:
        w.notes.append(f"{fault} {i}: no commit ever waited on the lock")
    lines0, ended0, gave_up0 = old.fenced_lines(), old.ended_by_server_lines(), old.gave_up_lines()
    t0 = time.time()
    begin(old)
    w.source.set("app_error_ratio_new", FAILING)
    time.sleep(0.3)
    lock.stdin.write("COMMIT;\n")
    lock.stdin.close()
    lock.wait(timeout=10)
    new = w.takeover(fault, old, t0)
    if new is not None:
        # The new leader's rounds must go on (no wedge): its ticks move within a few seconds
        # (a lock timeout of a fifth of the lease, two intervals, a second to spare), long before the ex-leader
        # is let go.
        h0 = (new.health() or {}).get("ticks", 0)
        time.sleep(WEDGE_S)
        h1 = (new.health() or {}).get("ticks", 0)
        if h1 <= h0:
            w.wedged.append(f"{fault} {i}: the new leader {new.name} ran no round in the {WEDGE_S:.0f} s "
                            f"after its takeover (the ex-leader's transaction held the row)")
    time.sleep(max(0.0, 12 - (time.time() - t0)))
    end(old)
    time.sleep(4)
    w.fence_round(fault, old, lines0, ended0, gave_up0)


def sc_pause_mid_commit(w):
    """SIGSTOP of the leader while its commit waits on a row lock another session holds; the
    lock is let go while it is stopped (twice)."""
    w.source.set("app_error_ratio_new", FAILING)
    for n in ("d1", "d2"):
        w.add(n)
    for i in range(2):
        if w.wait_state("m1", {"slices[0]", "slices[1]"}, timeout=25) is None:
            w.notes.append("m1 never reached a slice step")
            return
        old = w.leader()
        if old is None:
            w.notes.append("no single leader")
            continue
        mid_commit_round(w, old, "SIGSTOP mid-commit", lambda d: d.signal(signal.SIGSTOP),
                         lambda d: d.signal(signal.SIGCONT), i)


def sc_partition(w):
    """d1, in the namespace, partitioned from PostgreSQL: once 1 s into a slow source wait that
    answers "pass" (healed 1.5 s after the takeover), once for 8 s at a random instant."""
    net = w.suite.netns
    w.source.set("app_error_ratio_new", FAILING)
    w.source.delay["d1"] = 2.5
    d1 = w.add("d1", netns=True, source_timeout="10s")
    if w.leader(timeout=10) is not d1:
        w.notes.append("d1 did not lead first")
    for n in ("d2", "d3"):
        w.add(n)
    if w.wait_state("m1", {"slices[0]"}, timeout=25) is None:
        w.notes.append("m1 never reached slices[0]")
        return
    port = w.pg.port
    if w.leader() is d1:
        stale_round(w, d1, "partition mid-source-wait", lambda d: net.partition(port),
                    lambda d: net.heal(port))
    else:
        w.notes.append("d1 was not the leader for the partition mid-source-wait")
    w.source.delay["d1"] = 0
    time.sleep(6)  # d1 catches up after the healing
    if make_leader(w, d1) and w.wait_state("m1", {"slices[0]", "slices[1]"}, timeout=10):
        mid_commit_round(w, d1, "partition mid-commit", lambda d: net.partition(port),
                         lambda d: net.heal(port), 0)
    else:
        w.notes.append("d1 could not lead in a slice step for the partition mid-commit")
    # Once more at a random instant, d1 leading again (the others killed and restarted).
    w.source.set("app_error_ratio_new", GREEN["app_error_ratio_new"])
    time.sleep(6)  # d1 catches up after the healing
    if make_leader(w, d1):
        stop, t = w.churning()
        time.sleep(random.uniform(0.5, 2.5))
        t0 = time.time()
        net.partition(port)
        w.takeover("partition", d1, t0)
        time.sleep(max(0.0, 8 - (time.time() - t0)))
        net.heal(port)
        time.sleep(5)
        stop.set()
        t.join()
    else:
        w.notes.append("d1 did not lead again")


def make_leader(w, d):
    """`d` leads: the others are killed until it is ready, then started again. False when it
    never became ready (the lease stays with a dead holder whose clock is ahead)."""
    others = [o for o in w.daemons.values() if o is not d and o.alive()]
    before = w.leader(timeout=2)
    if before is d:
        return True
    t0 = time.time()
    for o in others:
        o.signal(signal.SIGKILL)
    if before is not None:
        ok = w.takeover("kill -9", before, t0) is d
    else:
        ok = w.leader(timeout=12) is d
    for o in others:
        o.start()
    if not ok:
        w.notes.append(f"{d.name} ({d.skew_label()}) could not be made the leader")
    return ok


def skewed(w, skews):
    """Daemons with clocks `skews` (s) and the real one: the real one leads first, the skewed
    ones join (a clock ahead must not take a live lease); then each in turn is made the leader
    and killed (a clock behind must not lose its live lease, one ahead must not keep a dead
    one)."""
    stop, t = w.churning()
    w.add("d0")
    w.leader(timeout=10)
    for i, s in enumerate(skews, start=1):
        w.add(f"d{i}", skew_s=s)
    time.sleep(3)
    for d in list(w.daemons.values()):
        if not make_leader(w, d):
            continue
        time.sleep(random.uniform(1.5, 3))
        t0 = time.time()
        d.signal(signal.SIGKILL)
        w.takeover("kill -9", d, t0)
        d.start()
    for n, d in w.daemons.items():
        if d.skew_s and d.alive():
            # The last one killed has just restarted: the gauge appears once the database has
            # answered its first lease attempt (a lease interval, 1 s here).
            skew = wait_for(lambda: d.metrics().get("queue_migrate_clock_skew_seconds"), 5, 0.2)
            if skew is None:
                w.contract.append(f"{n}: no queue_migrate_clock_skew_seconds in /metrics within 5 s")
            elif abs(abs(skew) - abs(d.skew_s)) > max(2, abs(d.skew_s) * 0.05):
                w.contract.append(f"{n}: queue_migrate_clock_skew_seconds {skew} for a skew of {d.skew_s} s")
    stop.set()
    t.join()


def sc_skew_minutes(w):
    """Clocks +2 min and -2 min off the real one (libfaketime)."""
    skewed(w, [120, -120])


def sc_skew_hours(w):
    """Clocks +2 h and -2 h off the real one."""
    skewed(w, [7200, -7200])


def sc_clock_jump(w):
    """d1's clock jumps 2 h forward while it leads; later kill -9 of whoever leads."""
    stop, t = w.churning()
    d1 = w.add("d1", jump=True)
    w.leader(timeout=10)
    w.add("d2")
    time.sleep(2)
    if w.leader() is d1:
        with open(d1.clock_file, "w") as f:
            f.write("+2h\n")
        d1.jumped_at = time.time()
        say("  d1's clock jumped +2h while leading")
    else:
        w.notes.append("d1 was not leading at the jump")
    for i in range(2):
        hit_leader(w, "kill -9", kill9, restart, (4.0, 4.0) if i == 0 else (1.5, 3.0))
    stop.set()
    t.join()


def sc_pg_restart(w):
    """PostgreSQL stopped (immediate or fast) and started again during transitions, 4 times;
    after each, a leader is ready again within ttl + one interval of PostgreSQL answering (plus
    the pool's reconnection), and none is ready while it is down past a lease period."""
    three(w)
    stop, t = w.churning()
    for i in range(4):
        time.sleep(random.uniform(1.0, 3.0))
        mode = random.choice(["immediate", "fast"])
        w.pg.stop(mode)
        down = time.time()
        time.sleep(random.uniform(1.0, 4.0))
        w.pg.start()
        up = time.time()
        if up - down > TTL_S + INTERVAL_S + 0.5:
            stale = [s for s in w.samples if down + TTL_S + INTERVAL_S + 0.3 < s[0] < up and any(s[1].values())]
            if stale:
                w.ready_while_down.append(f"restart {i}: a daemon answered ready {len(stale)} times while "
                                          f"PostgreSQL had been down for over ttl + one interval")
        new = w.leader(timeout=TTL_S * 4)
        say(f"  PostgreSQL {mode} restart {i}: down {up - down:.1f} s, a leader "
            + (f"ready {time.time() - up:.2f} s after it was up" if new else "not back"))
        w.takeovers.append({"fault": f"PostgreSQL restart ({mode})", "leader": "-", "skew": "0",
                            "new": new and new.name, "new_skew": "0",
                            "took": None if new is None else time.time() - up,
                            "waited": time.time() - up})
    time.sleep(2)
    stop.set()
    t.join()


SCENARIOS = [
    ("kill9", sc_kill9),
    ("pause-random", sc_pause_random),
    ("pause-source-wait", sc_pause_source_wait),
    ("pause-mid-commit", sc_pause_mid_commit),
    ("partition", sc_partition),
    ("skew-minutes", sc_skew_minutes),
    ("skew-hours", sc_skew_hours),
    ("clock-jump", sc_clock_jump),
    ("pg-restart", sc_pg_restart),
]


