#!/usr/bin/env python3
"""Jepsen-style trials of the daemon's lease: two or three `migrate run` on a PostgreSQL of the
suite's own, under faults, then checks (tests/jepsen/checks.py). Driven by scripts/jepsen.sh.

  jepsen.py --migrate BIN [--work DIR] [--seed N] [--only NAME,...] [--report FILE]

Faults: kill -9 of the leader; SIGSTOP of the leader at random, mid-source-wait (a slow fake
source, a long --source-timeout, the truth flipped from pass to fail while it sleeps) and
mid-commit (another session holds the migration's row, so the commit waits on its lock); a
partition between a daemon and PostgreSQL (the daemon in a network namespace, iptables drops its
PostgreSQL traffic); clocks skewed by +-2 min and +-2 h and a forward jump of 2 h (libfaketime);
PostgreSQL restarted during transitions. Issue 54's (tests/jepsen/scenarios_faults.py): a
partition that heals only for new connections (the suite's proxy silences established
connections), a same-`--id` replacement, a pause between commit and publish, a step of the
database host's clock, and `migrate bridge` under SIGSTOP and kill -9.

Checks after each scenario: every journal a chain; no step entered twice; no write by a non-holder
(the suite's own trigger on `journal` records the `leases` row at each insert; with epochs, an
audit by epoch against `lease_epochs`); no two daemons ready at once (every daemon's /readyz
polled every 100 ms); routing generations monotonic; no decision committed on readings older
than the lease that committed it; the journal's `at` on the database's clock; takeover within
ttl + one interval whatever the skew. Prints every violation and a summary, writes the figures
as JSON to --report, exits 1 when any check failed.

PostgreSQL here is the suite's own (its data directory under the work dir, its own port): it is
restarted as a fault, so it is never the shared one. Everything started is stopped on exit.
"""

import argparse
import json
import os
import random
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rig import HOST_IP, NS, NS_IP, T_START, TAKEOVER_BOUND_S, Netns, Postgres, Source, say  # noqa: E402
from scenarios import SCENARIOS  # noqa: E402
from scenarios_faults import FAULT_SCENARIOS, KNOWN_FAILING, WORLDS  # noqa: E402
from world import World  # noqa: E402

# ---- the suite --------------------------------------------------------------------------------

class Suite:
    def __init__(self, args):
        self.root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
        self.migrate = os.path.abspath(args.migrate)
        self.work = args.work
        os.chmod(self.work, 0o755)
        self.audit_epochs = not args.before_fencing
        self.netns = Netns()
        self.pg = None
        self.source = None

    def setup(self):
        if self.netns.setup():
            say(f"network namespace {NS}: {NS_IP} <-> {HOST_IP} (veth), iptables inside")
        listen = ["127.0.0.1"] + ([HOST_IP] if self.netns.ok else [])
        self.pg = Postgres(self.work, listen)
        self.pg.initdb()
        say(f"PostgreSQL of the suite on port {self.pg.port} ({self.pg.dir})")
        self.source = Source(listen)

    def teardown(self):
        if self.source:
            self.source.close()
        if self.pg:
            self.pg.stop("immediate")
        self.netns.teardown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--migrate", required=True)
    ap.add_argument("--work", default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--report", default=None)
    ap.add_argument("--before-fencing", "--no-epoch-audit", dest="before_fencing", action="store_true",
                    help="a build from before the lease's fencing token: skip the checks of its "
                         "contract (epochs, 'fenced' log lines and counter, the epoch and skew "
                         "metrics, the epoch in `history --json`), which it cannot meet")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(time.time()) % 100000
    random.seed(seed)
    if args.work is None:
        import tempfile
        args.work = tempfile.mkdtemp(prefix="qm-jepsen.")
    os.makedirs(args.work, exist_ok=True)
    say(f"jepsen: seed {seed} (--seed {seed} replays the random instants), work dir {args.work}")
    only = {s for s in args.only.split(",") if s}
    suite = Suite(args)
    results, skipped = [], []

    def on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        suite.setup()
        for name, run in SCENARIOS + FAULT_SCENARIOS:
            if only and name not in only:
                continue
            if name in KNOWN_FAILING and name not in only:
                skipped.append(f"excluded: {name}, a known failure (--only {name} runs it)")
                say(f"{skipped[-1]}: {KNOWN_FAILING[name]}")
                continue
            opts = WORLDS.get(name, lambda _work: {})(suite.work)
            if opts is None:
                skipped.append(f"skipped: {name}: redis-server is not installed (scripts/services.sh install redis)")
                say(skipped[-1])
                continue
            if name == "partition" and not suite.netns.ok:
                skipped.append(f"skipped: partition: {suite.netns.why}")
                say(skipped[-1])
                continue
            say(f"== {name}: {run.__doc__.strip().splitlines()[0]}")
            started = time.time()
            w = World(suite, name, **opts)
            try:
                with w:
                    run(w)
            except Exception:
                w.notes.append("the scenario failed: " + traceback.format_exc().strip().splitlines()[-1])
                traceback.print_exc()
            # PostgreSQL may have been left down by a failed restart scenario.
            if not suite.pg.sql("postgres", "SELECT 1", check=False):
                suite.pg.start()
            v = w.verdict()
            v["seconds"] = round(time.time() - started, 1)
            results.append(v)
            for check, found in v["violations"].items():
                for line in found[:8]:
                    say(f"  VIOLATION [{check}] {line}")
                if len(found) > 8:
                    say(f"  ... and {len(found) - 8} more of [{check}]")
            for n in v["notes"]:
                say(f"  note: {n}")
            say(f"  {name}: {v['entries']} journal entries, {v['webhooks']} webhooks, {v['holder_changes']} lease changes, "
                f"{sum(len(x) for x in v['violations'].values())} violations, fenced log lines "
                f"{v['fenced_log_lines']}, {v['seconds']} s")
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    finally:
        suite.teardown()
    total = sum(sum(len(x) for x in r["violations"].values()) for r in results)
    say("== summary")
    for r in results:
        n = sum(len(x) for x in r["violations"].values())
        say(f"  {r['scenario']:<18} {n:>3} violations {r['seconds']:>6.1f} s  " + ", ".join(
            f"{k}: {len(x)}" for k, x in r["violations"].items()))
    for s in skipped:
        say(f"  {s}")
    tk = [t for r in results for t in r["takeovers"] if t["took"] is not None]
    if tk:
        say(f"  takeovers: {len(tk)}, longest {max(t['took'] for t in tk):.2f} s (bound {TAKEOVER_BOUND_S:.2f} s)")
    say(f"jepsen: {total} violations over {len(results)} scenarios, {time.time() - T_START:.0f} s")
    if args.report:
        with open(args.report, "w") as f:
            json.dump({"seed": seed, "results": results, "skipped": skipped,
                       "bound_s": TAKEOVER_BOUND_S, "seconds": round(time.time() - T_START)}, f, indent=1)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
