"""The scenarios of issue 54's faults (tests/jepsen/jepsen.py): a partition that heals only for
new connections, a same-`--id` replacement, a pause between commit and publish, a step of the
database host's clock, and `migrate bridge` under SIGSTOP and kill -9. Each records what shows
its promise (`World.saw`) and its own checks (`World.violation`), beside the common ones.

Every bound below is derived from what docs/robustness.md promises, in the suite's timing
(`--lease-ttl 3s --interval 1s`), plus the harness's sampling; none is tuned to a run."""

import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time

import checks
from faults import Bridge, Proxy, Redis
from rig import (BREACH, FAILING, INTERVAL_S, LIBFAKETIME, POLL_SLACK_S, TAKEOVER_BOUND_S, TTL_S,
                 free_port, wait_for)
from scenarios import stale_round

# The give-up rule: a leader whose rounds have not completed for ttl + one interval gives the
# lease up; its renewer looks every third of the ttl.
GIVE_UP_S = TTL_S + INTERVAL_S + TTL_S / 3
# A guard breach while the leader's established connections are silent: the leader gives up
# (GIVE_UP_S), another daemon (or itself, after its own standing by) takes over (ttl + one
# interval + sampling), and the breach is acted on at its next round (one interval) once its
# source answered and the rollback committed (1 s). A leader that reconnects at once acts sooner.
HALF_OPEN_BREACH_BOUND_S = GIVE_UP_S + TAKEOVER_BOUND_S + INTERVAL_S + 1.0
# "SIGTERM is honoured within a few seconds at any point of a round": the daemon's own test
# (guard_isolation.rs) asserts 5 s.
SIGTERM_BOUND_S = 5.0
# The next leader delivers what the outbox holds at its first watcher pass (every 25 ms) after it
# took over; the webhook's post to the suite's receiver on loopback, a second at most.
PUBLISH_BOUND_S = TAKEOVER_BOUND_S + 1.0
# db-clock-step: the slices' observe (the daemon's steady clock measures it).
OBSERVE_S = 15
# The bridge: "a standby takes over within about two" lease TTLs (`migrate bridge --help`); the
# harness samples every 100 ms and the standby opens its ingress after taking the lease.
BRIDGE_TTL_S = 3.0
BRIDGE_TAKEOVER_BOUND_S = 2 * BRIDGE_TTL_S + POLL_SLACK_S


def count(w, sql):
    rows = w.pg.sql(w.db, sql, check=False)
    return int(rows[0]) if rows else 0


def resume_all(w):
    for row in w.pg.sql(w.db, "SELECT name FROM migrations WHERE paused", check=False):
        w.cli(["resume", row, "--reason", "jepsen"], check=False)


def sigterm(w, d, what):
    """SIGTERM `d`; a violation unless it exits within SIGTERM_BOUND_S."""
    t0 = time.time()
    os.kill(d.proc.pid, signal.SIGTERM)
    try:
        d.proc.wait(timeout=SIGTERM_BOUND_S + 10)
    except subprocess.TimeoutExpired:
        pass
    took = time.time() - t0 if d.proc.poll() is not None else None
    w.violation("SIGTERM honoured within a few seconds", checks.within(f"{what}: {d.name} exited", took, SIGTERM_BOUND_S))
    w.saw(f"{what}: SIGTERM to {d.name}, " + (f"exited after {took:.2f} s" if took is not None else "still running"))
    if d.alive():
        d.signal(signal.SIGKILL)


# ---- half-open ---------------------------------------------------------------------------------

def sc_half_open(w):
    """A partition that heals only for new connections: the daemons reach PostgreSQL through the
    suite's proxy, which makes the leader's established connections silent (then everybody's),
    no FIN, no RST, while new ones pass; a guard breach 1 s into it."""
    proxy = Proxy(w.pg.port)
    w.closers.append(proxy.close)
    w.source.set("app_error_ratio_new", FAILING)  # the slices hold: their exit fails, the guard holds
    for n in ("d1", "d2"):
        w.add(n, db_port=proxy.listen(n))
    windows = []
    for rnd, whom in enumerate(("the leader", "every daemon")):
        if not all(w.wait_state(m, {"slices[0]"}, timeout=25) for m in w.migrations):
            w.notes.append(f"round {rnd}: the migrations never reached slices[0]")
            return
        time.sleep(1)
        old = w.leader()
        if old is None:
            w.notes.append(f"round {rnd}: no single leader")
            return
        rb0 = count(w, "SELECT count(*) FROM journal WHERE migration = 'm1' AND command = 'rollback'")
        gave0 = old.gave_up_lines()
        cut0 = old.lines("WARN", "did not answer within")
        t0 = time.time()
        names = {old.name} if rnd == 0 else set(w.daemons)
        n = proxy.freeze(names)
        w.saw(f"half-open {rnd}: {n} established connections of {whom} ({', '.join(sorted(names))}) "
              f"silent, {old.name} leading; new connections pass")
        time.sleep(1.0)
        tb = time.time()
        w.source.set("app_error_ratio_new", BREACH)

        def rolled_back():
            rows = w.pg.sql(w.db, "SELECT actor FROM journal WHERE migration = 'm1' AND command = "
                                  f"'rollback' ORDER BY seq OFFSET {rb0} LIMIT 1", check=False)
            return (time.time(), rows[0]) if rows else None

        acted = wait_for(rolled_back, HALF_OPEN_BREACH_BOUND_S + 10, 0.1)
        took = acted and acted[0] - tb
        w.violation("a breach during a half-open partition acted on in bound",
                    checks.within(f"half-open {rnd}: m1's breach rolled back", took, HALF_OPEN_BREACH_BOUND_S))
        windows.append((t0, acted[0] if acted else time.time()))
        w.saw(f"half-open {rnd}: m1's breach " + (f"rolled back by {acted[1]} {took:.2f} s after it began "
              f"(bound {HALF_OPEN_BREACH_BOUND_S:.1f} s)" if acted else "never acted on"))
        w.source.set("app_error_ratio_new", FAILING)
        m = old.metrics()
        w.saw(f"half-open {rnd}: {old.name} cut {old.lines('WARN', 'did not answer within') - cut0} store calls "
              f"at their client-side deadline, gave its lease up {old.gave_up_lines() - gave0} times "
              f"(queue_migrate_lease_given_up_total {m.get('queue_migrate_lease_given_up_total')}), "
              f"opened {proxy.opened(old.name, t0)} new connections since the fault")
        sigterm(w, old, f"half-open {rnd}")
        old.start()
        resume_all(w)
    w.violation("/readyz never 200 for a leader that runs no round",
                checks.ready_without_rounds(w.samples, list(w.source.asks), windows,
                                            GIVE_UP_S + INTERVAL_S + POLL_SLACK_S))


# ---- same --id ---------------------------------------------------------------------------------

def sc_same_id(w):
    """Two processes with one `--id`: the replacement started while the first leads (it stands
    by), the first stopped 1 s into a slow source wait that answers "pass", the replacement takes
    over, the first resumed; then the same the other way round."""
    w.source.set("app_error_ratio_new", FAILING)
    for n in ("d1", "d1r"):
        w.source.delay[n] = 2.5
    d1 = w.add("d1", source_timeout="10s")
    if w.leader(timeout=10) is not d1 or w.wait_state("m1", {"slices[0]"}, timeout=25) is None:
        w.notes.append("d1 did not lead m1 into slices[0]")
        return
    t0 = time.time()
    d1r = w.add("d1r", ident="d1", source_timeout="10s")
    time.sleep(4)
    early = [t for t, r in w.samples if t >= t0 and r.get("d1r")]
    w.violation("a same-id replacement stands by while the lease is held",
                [f"d1r (--id d1) answered ready {len(early)} times while d1 held the lease"] if early else [])
    w.saw(f"same-id: d1r started with --id d1 while d1 leads: ready {len(early)} times in 4 s, "
          f"{'alive' if d1r.alive() else 'EXITED'}")
    for old in (d1, d1r):
        if w.leader() is not old:
            w.notes.append(f"{old.name} was not leading for its pause")
            continue
        stale_round(w, old, f"SIGSTOP of {old.name} mid-source-wait, same --id", lambda d: d.signal(signal.SIGSTOP),
                    lambda d: d.signal(signal.SIGCONT))
    exited = [d.name for d in (d1, d1r) if not d.alive()]
    w.violation("no crash loop of a same-id process", [f"{n} exited" for n in exited])
    changes = w.pg.json_rows(w.db, "SELECT * FROM jepsen_lease_changes ORDER BY n")
    w.violation("an epoch per acquisition", checks.epoch_per_acquisition(changes))
    same = sum(1 for c in changes if c["old"] and c["new"] and c["old"]["holder"] != c["new"]["holder"]
               and checks.holder_id(c["old"]["holder"]) == checks.holder_id(c["new"]["holder"]))
    w.saw(f"same-id: {same} hand-overs between two instances of --id d1, epochs "
          + ", ".join(str(c["new"]["epoch"]) for c in changes if c["new"]))
    if not same:
        w.notes.append("no hand-over between the two instances of one --id happened")


# ---- commit-publish ----------------------------------------------------------------------------

def sc_commit_publish(w):
    """The leader stopped between its commit and its publish: the suite's receiver holds the
    leader's webhooks unanswered, the leader commits a transition, its post is held, SIGSTOP;
    the next leader must deliver it from the outbox (twice)."""
    for n in ("d1", "d2"):
        w.add(n)
    stop, t = w.churning()
    for i in range(2):
        old = w.leader()
        if old is None:
            w.notes.append(f"{i}: no single leader")
            continue
        n0 = len(w.source.held)
        w.source.released.clear()
        w.source.hold = {old.name}
        held = wait_for(lambda: next((h for h in w.source.held[n0:] if h[3].get("event") == "transition"),
                                     None), 15, 0.02)
        if held is None:
            w.source.release()
            w.notes.append(f"{i}: {old.name} announced no transition in 15 s")
            continue
        t0 = time.time()
        old.signal(signal.SIGSTOP)
        key = checks.idempotency_id(held[2], held[3])
        w.saw(f"commit-publish {i}: {old.name} committed {key} and was stopped before its publish was taken")
        w.takeover("SIGSTOP between commit and publish", old, t0)

        def by_another():
            return next((h for h in list(w.source.hooks)
                         if h[1] != old.name and checks.idempotency_id(h[2], h[3]) == key), None)

        got = wait_for(by_another, PUBLISH_BOUND_S + 10, 0.05)
        took = got and got[0] - t0
        w.violation("a transition committed before a pause delivered by the next leader",
                    checks.within(f"{key} delivered by another daemon after {old.name}'s pause", took, PUBLISH_BOUND_S))
        w.saw(f"commit-publish {i}: {key} " + (f"delivered by {got[1]} (epoch {got[3].get('epoch')}) "
              f"{took:.2f} s after the pause" if got else "never delivered by another daemon"))
        w.source.release()
        time.sleep(max(0.0, 6 - (time.time() - t0)))
        old.signal(signal.SIGCONT)
        time.sleep(2)
    stop.set()
    t.join()
    # Every committed transition delivered at least once: the outbox drained (a leader delivers
    # at its next watcher pass), each row's event taken by the receiver.
    wait_for(lambda: True if not count(w, "SELECT count(*) FROM outbox WHERE delivered_at IS NULL") else None,
             PUBLISH_BOUND_S, 0.2)
    rows = w.pg.json_rows(w.db, "SELECT migration, seq, delivered_at FROM outbox")
    w.violation("every committed transition delivered at least once", checks.undelivered(rows, list(w.source.hooks)))
    w.saw(f"commit-publish: {len(rows)} transitions in the outbox, {len(w.source.hooks)} events taken, "
          f"{len(w.source.refused)} held and refused")


# ---- db-clock-step -----------------------------------------------------------------------------

def observe_long(text):
    return text.replace("observe: 1s", f"observe: {OBSERVE_S}s", 1)


def sc_db_clock_step(w):
    """The database host's clock steps +2 min (libfaketime under the suite's PostgreSQL) 3 s into
    m1's observe of 15 s, one daemon: the step is logged and counted, and the observe is not
    shortened."""
    db_clock_step(w, ("d1",))


def sc_db_clock_step_standby(w):
    """The same with a standby beside the leader: the step ends the lease in the database's eyes;
    the standby, watching the leader's row on its own monotonic clock, does not take it while the
    leader renews (before that fix both were ready for up to a third of the ttl)."""
    db_clock_step(w, ("d1", "d2"))


def db_clock_step(w, daemons):
    clock = os.path.join(w.dir, "pg.faketime")
    with open(clock, "w") as f:
        f.write("+0\n")
    os.chmod(clock, 0o644)
    fake = {"LD_PRELOAD": LIBFAKETIME, "FAKETIME_TIMESTAMP_FILE": clock, "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1"}

    def normal_clock():
        w.pg.stop("fast")
        w.pg.start()

    w.pg.stop("fast")
    w.closers.append(normal_clock)
    w.pg.start(env=fake)
    for n in daemons:
        w.add(n)
    entered = wait_for(lambda: w.pg.sql(w.db, "SELECT at FROM journal WHERE migration = 'm1' AND "
                                              "to_state = 'slices' AND to_step = 0 ORDER BY seq LIMIT 1",
                                        check=False) or None, 30, 0.1)
    if entered is None:
        w.notes.append("m1 never entered slices[0]")
        return
    entered_ms = int(entered[0])
    time.sleep(max(0.0, entered_ms / 1000 + 3 - time.time()))
    steps0 = {n: d.metrics().get("queue_migrate_db_clock_steps_total", 0) for n, d in w.daemons.items()}
    with open(clock, "w") as f:
        f.write("+120\n")
    stepped = time.time()
    w.db_step = (stepped, 120_000)
    w.saw(f"db-clock-step: the database's clock stepped +120 s {stepped - entered_ms / 1000:.1f} s into m1's observe of {OBSERVE_S} s")
    left = wait_for(lambda: w.pg.sql(w.db, "SELECT at FROM journal WHERE migration = 'm1' AND "
                                           "from_state = 'slices' AND from_step = 0 ORDER BY seq LIMIT 1",
                                     check=False) or None, OBSERVE_S + 25, 0.1)
    if left is None:
        w.notes.append(f"m1 did not leave slices[0] within {OBSERVE_S + 25} s")
    else:
        # Committed after the step: its `at` is the database's clock, 120 s ahead of the real one.
        stayed = (int(left[0]) - 120_000 - entered_ms) / 1000
        w.saw(f"db-clock-step: m1 left slices[0] after {stayed:.1f} s (observe {OBSERVE_S} s)")
        w.violation("a database clock step does not shorten observe",
                    [f"m1 left slices[0] after {stayed:.1f} s < observe {OBSERVE_S} s"] if stayed < OBSERVE_S - 0.05 else [])
    seen = []
    for n, d in w.daemons.items():
        m = d.metrics()
        steps = m.get("queue_migrate_db_clock_steps_total", 0) - steps0[n]
        lag = m.get("queue_migrate_gates_clock_lag_seconds")
        with open(d.log, errors="replace") as f:
            logged = sum(1 for line in f if "WARN" in line and "the database's clock stepped" in line)
        seen.append((n, steps, lag, logged))
        w.saw(f"db-clock-step: {n} counted {steps:.0f} steps, gates clock lag {lag}, logged {logged} times")
    if not any(s >= 1 and g > 0 for _, s, _, g in seen):
        w.violation("a database clock step is logged and counted",
                    [f"{n}: queue_migrate_db_clock_steps_total +{s}, {g} log lines" for n, s, _, g in seen])


# ---- bridge ------------------------------------------------------------------------------------

def own_redis(work):
    """A redis-server of the scenario's own on a free port (the end-to-end suite, which runs beside
    this one in .ci/run, stops and restarts the shared Redis as a fault), or None when no
    redis-server is installed (scripts/services.sh install redis). Returns (url, stop)."""
    binary = shutil.which("redis-server")
    if not binary:
        return None
    port = free_port()
    data = os.path.join(work, "redis")
    os.makedirs(data, exist_ok=True)
    proc = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                             "--appendonly", "no", "--dir", data],
                            stdout=open(os.path.join(data, "redis.log"), "wb"),
                            stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}"

    def up():
        try:
            r = Redis(url)
        except OSError:
            return None
        try:
            return r.cmd("PING")
        finally:
            r.close()
    if wait_for(up, 10, 0.1) is None:
        proc.kill()
        return None

    def stop():
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
    return url, stop


class Streams:
    """The bridge scenario's Redis streams, on a Redis of its own, named for this run."""

    def __init__(self, url):
        self.url = url
        self.prefix = f"qm-jepsen-{os.getpid()}-{int(time.time())}"
        self.ingress, self.old, self.new = (f"{self.prefix}-{s}" for s in ("ingress", "old", "new"))

    def plan(self, text):
        head, _, rest = text.partition("brokers:\n")
        _, _, rest = rest.partition("\n\n")
        text = (head + "brokers:\n"
                f'  old: {{ name: old, kind: redis, url: "{self.url}", stream: {self.old} }}\n'
                f'  new: {{ name: new, kind: redis, url: "{self.url}", stream: {self.new} }}\n\n'
                f"bridge:\n  ingress: {self.ingress}\n  key: {{ json: orderId }}\n  prefetch: 8\n\n" + rest)
        head, _, _ = text.partition("\npreflight:")
        return head + "\n"

    def delivered(self, streams=None):
        r = Redis(self.url)
        try:
            out = []
            for s in streams or (self.old, self.new):
                for _, fields in r.cmd("XRANGE", s, "-", "+") or []:
                    f = dict(zip(fields[::2], fields[1::2]))
                    try:
                        out.append(json.loads(f.get(b"payload", b"{}"))["n"])
                    except (ValueError, KeyError, TypeError):
                        pass
            return out
        finally:
            r.close()



class Producer:
    """XADDs numbered messages (JSON `{"orderId": "kN", "n": N}`, 25 keys) to the ingress at
    `rate` a second while running; numbers go on across pauses, each appended to `produced`
    once written."""

    def __init__(self, streams, rate=50):
        self.streams, self.rate, self.produced = streams, rate, []
        self.stop, self.thread = threading.Event(), None

    def run(self):
        r = Redis(self.streams.url)
        n = self.produced[-1] if self.produced else 0
        try:
            while not self.stop.is_set():
                n += 1
                body = json.dumps({"orderId": f"k{n % 25}", "n": n})
                r.cmd("XADD", self.streams.ingress, "*", "payload", body)
                self.produced.append(n)
                time.sleep(1 / self.rate)
        finally:
            r.close()

    def start(self):
        self.stop.clear()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def pause(self):
        self.stop.set()
        if self.thread:
            self.thread.join()


def active_bridge(bridges, exclude=()):
    act = [b for b in bridges if b not in exclude and b.active()]
    return act[0] if len(act) == 1 else None


def bridge_takeover(w, bridges, fault, old, t0):
    new = wait_for(lambda: active_bridge(bridges, exclude=(old,)), 3 * BRIDGE_TAKEOVER_BOUND_S, 0.05)
    took = new and time.time() - t0
    w.violation("the standby bridge takes over within two ttls",
                checks.within(f"{fault} of {old.name}: {new.name if new else 'no bridge'} active", took,
                              BRIDGE_TAKEOVER_BOUND_S))
    w.saw(f"bridge: {fault} of {old.name}: " + (f"{new.name} active after {took:.2f} s" if new else "no takeover"))
    return new


def bridge_faults(w, bridges, producer):
    """The bridge scenario's faults, the producer running."""
    active = wait_for(lambda: active_bridge(bridges), 20, 0.1)
    if active is None:
        n = sum(1 for b in bridges if b.active())
        w.violation("one bridge active at a time", [f"no single active bridge in 20 s ({n} active)"])
        return
    time.sleep(3)
    # 1. A pause with nothing in flight: the paused bridge must forward nothing once resumed.
    producer.pause()
    wait_for(lambda: True if (active.metrics() or {}).get("queue_migrate_bridge_pending", 1) == 0 else None, 10, 0.1)
    time.sleep(1)
    before = (active.metrics() or {}).get("queue_migrate_bridge_forwarded_total")
    t0 = time.time()
    active.signal(signal.SIGSTOP)
    producer.start()
    new = bridge_takeover(w, bridges, "SIGSTOP (quiet)", active, t0)
    time.sleep(max(0.0, 8 - (time.time() - t0)))
    resumed = time.time()
    active.signal(signal.SIGCONT)
    time.sleep(3)
    after = (active.metrics() or {}).get("queue_migrate_bridge_forwarded_total")
    late = None if before is None or after is None else after - before
    w.violation("a paused bridge forwards nothing once resumed (its lease gone)",
                [f"{active.name} forwarded {late:.0f} messages after it was resumed"] if late else
                ([f"{active.name}: forwarded_total not read ({before}, {after})"] if late is None else []))
    w.saw(f"bridge: {active.name} resumed after {resumed - t0:.1f} s stopped: {late} forwards after, "
          f"active {active.active()}, logged 'stopping'/'lost' "
          f"{active.lines('runs out unrenewed') + active.lines('lost the lease')} times")
    # 2. A pause under load, 3. kill -9 of the active one.
    for fault in ("SIGSTOP (under load)", "kill -9"):
        cur = new or active_bridge(bridges)
        if cur is None:
            w.notes.append(f"no active bridge before {fault}")
            return
        time.sleep(random.uniform(1.0, 2.0))
        t0 = time.time()
        cur.signal(signal.SIGKILL if fault == "kill -9" else signal.SIGSTOP)
        new = bridge_takeover(w, bridges, fault, cur, t0)
        time.sleep(max(0.0, 7 - (time.time() - t0)))
        if fault == "kill -9":
            cur.start()
        else:
            cur.signal(signal.SIGCONT)
        time.sleep(2)


def sc_bridge(w):
    """Two `migrate bridge` with one `--id` (Redis streams on a Redis of the scenario's own)
    under a producer at 50/s: SIGSTOP of the active one with nothing in flight (its forwards
    counted before and after), SIGSTOP under load, kill -9; the standby takes over each time,
    nothing is lost."""
    streams = w.streams
    w.closers.append(w.redis_stop)
    env = {**os.environ, "MIGRATE_STATE": w.pg.url(w.db), "MIGRATE_LOG": "info"}
    # One `--id` for both, as a replacement with a stable name has: the lease is held per process
    # instance, so the second stands by all the same.
    bridges = [Bridge(w, f"b{i}", "m1", env, ident="bridge") for i in (1, 2)]
    for b in bridges:
        w.closers.insert(0, b.end)
        b.start()
        time.sleep(1)
    # Some slices to the new stream: the operator advances m1 into slices[0] (gates pass).
    for _ in range(3):
        w.cli(["advance", "m1", "--reason", "jepsen: slices to new"], check=False)
    producer = Producer(streams)
    producer.start()
    both = []

    def sample(halt):
        while not halt.is_set():
            if sum(1 for b in bridges if b.active()) > 1:
                both.append(time.time())
            halt.wait(0.1)

    halt = threading.Event()
    sampler = threading.Thread(target=sample, args=(halt,), daemon=True)
    sampler.start()
    try:
        bridge_faults(w, bridges, producer)
    finally:
        producer.pause()
        # Entries a stopped bridge's blocked read took are claimed back after the visibility
        # timeout (1 s here) by the active one.
        produced = producer.produced
        got = wait_for(lambda: (lambda d: d if set(produced) <= set(d) else None)(streams.delivered()), 20, 0.5)
        delivered = got if got is not None else streams.delivered()
        halt.set()
        sampler.join()
    w.violation("nothing lost through the bridge", checks.lost(produced, delivered))
    changes = w.pg.json_rows(w.db, "SELECT * FROM jepsen_lease_changes WHERE "
                                   "coalesce(new->>'name', old->>'name') = 'bridge:m1' ORDER BY n")
    w.violation("an epoch per acquisition (bridge:m1)", checks.epoch_per_acquisition(changes))
    state = w.state("m1")
    w.saw(f"bridge: m1 at {state and state[0]}; lease bridge:m1 epochs "
          + ", ".join(str(c["new"]["epoch"]) for c in changes if c["new"]))
    w.saw(f"bridge: {len(set(produced))} produced, {len(streams.delivered([streams.old]))} forwarded to old, "
          f"{len(streams.delivered([streams.new]))} to new, {len(delivered)} in all "
          f"({len(delivered) - len(set(delivered))} duplicates), samples with two active: {len(both)}")
    # A stopped bridge's gauge cannot be read; a resumed one's may say 1 for a moment before its
    # session sees the lease gone: two active counts past 0.5 s in a row.
    w.violation("one bridge active at a time", checks.overlaps(both, 0.5))


def bridge_world(work):
    """The bridge scenario's World: one migration whose plan has a `bridge:` on Redis streams of a
    Redis of its own; None when redis-server is not installed."""
    redis = own_redis(os.path.join(work, "bridge"))
    if not redis:
        return None
    url, stop = redis
    streams = Streams(url)
    return {"migrations": ("m1",), "plan_edit": streams.plan, "streams": streams,
            "redis_stop": stop}


# name -> the World's options from the suite's work dir (None: skipped, what it needs is missing).
WORLDS = {
    "db-clock-step": lambda _work: {"plan_edit": observe_long},
    "db-clock-step-standby": lambda _work: {"plan_edit": observe_long},
    "bridge": bridge_world,
}

FAULT_SCENARIOS = [
    ("half-open", sc_half_open),
    ("same-id", sc_same_id),
    ("commit-publish", sc_commit_publish),
    ("db-clock-step", sc_db_clock_step),
    ("db-clock-step-standby", sc_db_clock_step_standby),
    ("bridge", sc_bridge),
]

# Scenarios that show a violation not fixed yet: run only when named in --only (each says why).
KNOWN_FAILING = {}
