"""One scenario's world (tests/jepsen/jepsen.py): a fresh database with two migrations, the
daemons, the samplers of /readyz and of the routing files, and the verdict of every check."""

import json
import os
import random
import subprocess
import threading
import time

import checks
from rig import AUDIT_SQL, BREACH, GREEN, TAKEOVER_BOUND_S, Daemon, say, wait_for

# ---- one scenario's world ---------------------------------------------------------------------

class World:
    def __init__(self, suite, name, migrations=("m1", "m2"), plan_edit=None, **extra):
        self.suite, self.name = suite, name
        for k, v in extra.items():
            setattr(self, k, v)  # what a scenario's world needs besides (the bridge's streams)
        self.plan_edit = plan_edit  # the plan's text -> the scenario's (its own steps, a bridge)
        self.pg, self.source, self.migrate = suite.pg, suite.source, suite.migrate
        self.db = "s_" + name.replace("-", "_")
        self.dir = os.path.join(suite.work, name)
        os.makedirs(self.dir, exist_ok=True)
        self.daemons = {}
        self.migrations = list(migrations)
        self.samples, self.routing_samples, self.takeovers = [], [], []
        self.notes = []
        self.wedged = []
        self.fence_rounds = []
        self.ready_while_down = []
        self.contract = []
        # The newer faults' own checks (issue 54): check name -> violations; and what the
        # scenario saw that shows the promise held (printed under the scenario, in the report).
        self.found = {}
        self.seen = []
        self.closers = []  # called on exit, after the daemons ended (a proxy, a bridge)
        # A step of the database's clock (db-clock-step): (its real instant, ms); instants the
        # database stamped after it are that much ahead of the real clock.
        self.db_step = None
        self.polling = False
        self.pg.sql("postgres", f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")
        self.pg.sql("postgres", f"CREATE DATABASE {self.db}")
        self.source.values = dict(GREEN)
        self.source.delay = {}
        self.source.hooks = []
        self.source.hold, self.source.held, self.source.refused = set(), [], []
        for m in self.migrations:
            self.cli(["init", self.plan(m)])
        self.pg.sql(self.db, AUDIT_SQL)

    def plan(self, name):
        text = open(os.path.join(self.suite.root, "plans/local.yaml")).read()
        for a, b in [("name: local", f"name: {name}"), ("local.routing.json", f"{name}.routing.json"),
                     ("observe: 1m", "observe: 1s"), ("retain: 2m", "retain: 0s"),
                     ("max_backoff: 2m", "max_backoff: 1s"), ("visibility_timeout: 1m", "visibility_timeout: 1s"),
                     ("max_redelivery_delay: 2m", "max_redelivery_delay: 1s")]:
            text = text.replace(a, b, 1)
        # Every event to the suite's receiver, to check what the daemons announce.
        text += '\nnotify:\n  webhooks:\n    - { url: "${QM_HOOK_URL}" }\n'
        if self.plan_edit:
            text = self.plan_edit(text)
        path = os.path.join(self.dir, f"{name}.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def cli(self, args, check=True):
        env = {**os.environ, "MIGRATE_STATE": self.pg.url(self.db), "MIGRATE_ACTOR": "operator",
               "QM_PROM_URL": f"http://127.0.0.1:{self.source.port}/cli",
               "QM_SCRAPE_URL": f"http://127.0.0.1:{self.source.port}/cli/metrics",
               "QM_HOOK_URL": f"http://127.0.0.1:{self.source.port}/cli/hook"}
        r = subprocess.run([self.migrate] + args, cwd=self.dir, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        if check and r.returncode:
            raise RuntimeError(f"migrate {' '.join(args)}: {r.returncode}\n{r.stderr}")
        return r

    def add(self, name, **kw):
        d = Daemon(self, name, **kw)
        self.daemons[name] = d
        d.start()
        return d

    # -- observation ----------------------------------------------------------------------------

    def poll(self):
        """Every 100 ms: each daemon's /readyz, each routing file's generation."""
        while self.polling:
            t = time.time()
            ready = {n: d.ready() for n, d in list(self.daemons.items())}
            self.samples.append((t, ready))
            for m in self.migrations:
                try:
                    with open(os.path.join(self.dir, f"{m}.routing.json")) as f:
                        gen = json.load(f).get("generation")
                    if isinstance(gen, int):
                        self.routing_samples.append((t, m, gen))
                except (OSError, ValueError):
                    pass
            time.sleep(max(0.0, 0.1 - (time.time() - t)))

    def __enter__(self):
        self.polling = True
        self.poller = threading.Thread(target=self.poll, daemon=True)
        self.poller.start()
        return self

    def __exit__(self, *exc):
        self.polling = False
        self.poller.join(timeout=5)
        # What the daemons say at the end, for the checks of the fencing contract.
        self.final_metrics = {n: d.metrics() for n, d in self.daemons.items() if d.alive() and not d.stopped}
        self.final_lease = self.pg.sql(self.db, "SELECT epoch FROM leases WHERE name = 'controller'",
                                       check=False)
        for d in self.daemons.values():
            d.end()
        for close in self.closers:
            try:
                close()
            except Exception as e:  # noqa: BLE001 - a clean-up must not hide the verdict
                self.notes.append(f"clean-up: {e}")
        return False

    def violation(self, check, lines):
        """Record `lines` (violations, maybe none) under `check`."""
        self.found.setdefault(check, []).extend(lines)

    def saw(self, line):
        self.seen.append(line)
        say(f"  {line}")

    def leader(self, timeout=15, exclude=()):
        """The one daemon answering ready (None after `timeout`)."""
        def alone():
            ready = [d for n, d in self.daemons.items() if n not in exclude and d.ready()]
            return ready[0] if len(ready) == 1 else None
        return wait_for(alone, timeout, 0.05)

    def takeover(self, fault, old, t0, wait=None):
        """Wait until a daemon other than `old` is ready; record how long it took since `t0`."""
        wait = wait or max(3 * TAKEOVER_BOUND_S, 12)
        new = self.leader(timeout=wait - (time.time() - t0), exclude=(old.name,))
        took = None if new is None else time.time() - t0
        self.takeovers.append({"fault": fault, "leader": old.name, "skew": old.skew_label(),
                               "new": new and new.name, "new_skew": new and new.skew_label(),
                               "took": took, "waited": time.time() - t0})
        say(f"  {fault} of {old.name} ({old.skew_label()}): "
            + (f"{new.name} ({new.skew_label()}) ready after {took:.2f} s" if new else f"no takeover in {wait:.0f} s"))
        return new

    def state(self, m):
        rows = self.pg.sql(self.db, f"SELECT state, step, paused FROM migrations WHERE name = '{m}'", check=False)
        if not rows:
            return None
        s, step, paused = rows[0].split("|")
        return checks.rung_name(s, int(step) if step else None), paused == "t"

    def wait_state(self, m, want, timeout=20):
        def reached():
            s = self.state(m)
            return s if s and s[0] in want else None
        return wait_for(reached, timeout, 0.1)

    def fence_round(self, fault, old, lines0, ended0=0, gave_up0=0):
        """After a stale round: what the ex-leader logged ("fenced") and counted since, the
        writes of it that the server refused by ending its idle transaction, and whether it gave
        its lease up (its ticks stopped before writing) because its rounds could not complete."""
        counted = old.metrics().get("queue_migrate_fenced_writes_total")
        ended = old.ended_by_server_lines() - ended0
        gave_up = old.gave_up_lines() - gave_up0
        self.fence_rounds.append(
            (fault, old.name, old.fenced_lines() - lines0, counted, ended, gave_up))

    def churn(self, stop, period=5.0):
        """Transitions keep happening: a guard breach for a second every `period` (the daemon
        rolls back a slice step and pauses), and the operator resumes what is paused."""
        nxt = time.time() + period * random.uniform(0.5, 1)
        while not stop.is_set():
            if time.time() >= nxt:
                self.source.set("app_error_ratio_new", BREACH)
                stop.wait(1.0)
                self.source.set("app_error_ratio_new", GREEN["app_error_ratio_new"])
                nxt = time.time() + period * random.uniform(0.6, 1.2)
            for row in self.pg.sql(self.db, "SELECT name FROM migrations WHERE paused", check=False):
                self.cli(["resume", row, "--reason", "jepsen churn"], check=False)
            stop.wait(0.5)

    def churning(self):
        stop = threading.Event()
        t = threading.Thread(target=self.churn, args=(stop,), daemon=True)
        t.start()
        return stop, t

    # -- the checks -----------------------------------------------------------------------------

    def contract_checks(self, journals, epochs):
        """`migrate history --json` shows each entry's epoch as the table has it; the leader's
        `queue_migrate_lease_epoch` is the lease's epoch."""
        out = []
        for m, j in journals.items():
            r = self.cli(["history", m, "--json"], check=False)
            try:
                shown = json.loads(r.stdout)
            except ValueError:
                out.append(f"{m}: history --json did not answer JSON ({r.returncode})")
                continue
            if j and "epoch" not in j[0]:
                out.append(f"{m}: the journal has no epoch column")
                continue
            for e, h in zip(j, shown):
                # An entry written without a lease (the operator's) may have none.
                if e.get("epoch") is not None and h.get("epoch") != e["epoch"]:
                    out.append(f"{m} seq {e['seq']}: history --json shows epoch {h.get('epoch', 'none')!r}, "
                               f"the journal {e['epoch']!r}")
                    break
        leaders = [n for n, m in self.final_metrics.items() if m.get("queue_migrate_leader") == 1]
        for n in leaders:
            shown = self.final_metrics[n].get("queue_migrate_lease_epoch")
            if shown is None or not self.final_lease or int(shown) != int(self.final_lease[0]):
                out.append(f"{n}: queue_migrate_lease_epoch {shown}, the lease's epoch {self.final_lease}")
        return out

    def verdict(self):
        db, names = self.db, {d.ident for d in self.daemons.values()}
        journals = {}
        for m in self.migrations:
            rows = self.pg.json_rows(db, f"SELECT * FROM journal WHERE migration = '{m}' ORDER BY seq")
            for r in rows:
                try:
                    r["evidence"] = json.loads(r["evidence"]) if isinstance(r["evidence"], str) else r["evidence"]
                except ValueError:
                    r["evidence"] = None
            journals[m] = rows
        audit = {r["id"]: r for r in self.pg.json_rows(db, "SELECT * FROM jepsen_journal_audit")}
        changes = self.pg.json_rows(db, "SELECT * FROM jepsen_lease_changes ORDER BY n")
        epochs = (self.pg.json_rows(db, "SELECT * FROM lease_epochs WHERE lease = 'controller' ORDER BY epoch")
                  if self.pg.has_table(db, "lease_epochs") else None)
        fenced = bool(epochs is not None and journals and any("epoch" in r for j in journals.values() for r in j))
        epoch_start = {r["epoch"]: checks.ms(r["acquired_at"]) for r in (epochs or [])}

        def real_ms(db_ms):
            if self.db_step is None or db_ms is None:
                return db_ms
            at, step = self.db_step
            return db_ms - step if db_ms >= at * 1000 + step else db_ms

        def tenure_start(e):
            if fenced and e.get("epoch") in epoch_start:
                return real_ms(epoch_start[e["epoch"]])
            a = audit.get(e["id"])
            if a is None:
                return None
            # The harness's own record: the last change of holder before the insert.
            start = None
            for c in changes:
                if c["db_ms"] <= a["db_ms"] and c["new"] is not None:
                    start = c["db_ms"]
            return real_ms(start)

        def reading_real_ms(e, t):
            d = self.daemons.get(e["actor"])
            a = audit.get(e["id"])
            if d is None or a is None:
                return t
            off = d.offset_at(a["db_ms"])
            # A writer that stamps its own clock shows it in `at`; one that stamps the database's
            # does not, and its readings are then taken to be on that clock too.
            return t - off if off and abs(e["at"] - a["db_ms"] - off) < abs(e["at"] - a["db_ms"]) else t

        found = {}
        for m, j in journals.items():
            found.setdefault("journal a chain", []).extend(checks.chain(m, j))
            found.setdefault("no step entered twice", []).extend(checks.step_entered_twice(m, j))
            found.setdefault("no write by a non-holder (lease row at insert)", []).extend(
                checks.non_holder(m, j, audit, names))
            found.setdefault("no write by a non-holder (audit by epoch)", []).extend(
                checks.epoch_audit(m, j, epochs, names) if self.suite.audit_epochs else [])
            found.setdefault("no decision on readings older than its lease", []).extend(
                checks.stale_readings(m, j, tenure_start, reading_real_ms, names))
            found.setdefault("journal at on the database's clock", []).extend(
                checks.journal_on_db_clock(m, j, audit))
        found["no two daemons ready at once"] = checks.two_ready(self.samples)
        found["routing generations monotonic"] = checks.routing_monotonic(self.routing_samples, journals)
        found["transition webhooks: committed, announced once per id"] = checks.webhooks(
            self.source.hooks, journals, self.suite.audit_epochs)
        found["rounds keep running (no wedge)"] = list(self.wedged)
        found["/readyz truthful while PostgreSQL is down"] = list(self.ready_while_down)
        if self.suite.audit_epochs:
            # The ex-leader of a stale round had its decision in flight: at least one of a
            # scenario's rounds must show the refusal (a round may also end with the ex-leader
            # giving up before writing, which is no refusal to log). The refusal is the fence
            # (logged "fenced" and counted), or PostgreSQL ending the paused ex-leader's idle
            # transaction (--db-idle-in-transaction-timeout), which rolls its write back.
            # Since issue 54 a leader whose rounds cannot complete gives its lease up and stops
            # its ticks before they write: the stale decision is never sent, which the checks
            # above (no write by a non-holder, no decision on old readings) confirm; it counts.
            refused = any((n > 0 and c) or e > 0 or g > 0 for _, _, n, c, e, g in self.fence_rounds)
            if self.fence_rounds and not refused:
                found["a refused write is logged (fenced) and counted"] = [
                    f"{f}: {d} logged {n} WARN lines with \"fenced\", queue_migrate_fenced_writes_total {c}, "
                    f"{e} transactions ended by the server, gave its lease up {g} times"
                    for f, d, n, c, e, g in self.fence_rounds]
            found["the fencing contract (history --json, metrics)"] = self.contract + self.contract_checks(journals, epochs)
        found["takeover within ttl + one interval"] = checks.takeovers(self.takeovers, TAKEOVER_BOUND_S)
        found["one process per epoch (events)"] = checks.shared_epoch(self.source.hooks, set(self.daemons))
        for k, v in self.found.items():
            found.setdefault(k, []).extend(v)
        entries = sum(len(j) for j in journals.values())
        fenced_lines = {n: d.fenced_lines() for n, d in self.daemons.items()}
        return {"scenario": self.name, "entries": entries, "journal_by": {
                    n: sum(1 for j in journals.values() for r in j if r["actor"] == n) for n in self.daemons},
                "holder_changes": sum(1 for c in changes if c["new"] is not None),
                "webhooks": len(self.source.hooks),
                "violations": {k: v for k, v in found.items() if v},
                "takeovers": self.takeovers, "fenced_log_lines": fenced_lines, "notes": self.notes,
                "seen": self.seen,
                "fence_rounds": self.fence_rounds,
                "epochs": len(epochs) if epochs is not None else None}


