#!/usr/bin/env python3
"""Jepsen-style trials of the daemon's lease: two or three `migrate run` on a PostgreSQL of the
suite's own, under faults, then checks (tests/jepsen/checks.py). Driven by scripts/jepsen.sh.

  jepsen.py --migrate BIN [--work DIR] [--seed N] [--only NAME,...] [--report FILE]

Faults: kill -9 of the leader; SIGSTOP of the leader at random, mid-source-wait (a slow fake
source, a long --source-timeout, the truth flipped from pass to fail while it sleeps) and
mid-commit (another session holds the migration's row, so the commit waits on its lock); a
partition between a daemon and PostgreSQL (the daemon in a network namespace, iptables drops its
PostgreSQL traffic); clocks skewed by +-2 min and +-2 h and a forward jump of 2 h (libfaketime);
PostgreSQL restarted during transitions.

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
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402

PG_BIN = "/usr/lib/postgresql/15/bin"
LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
NS = "qmjepsen"
HOST_IF, NS_IF = "qmjh0", "qmjn0"
HOST_IP, NS_IP = "10.231.42.1", "10.231.42.2"

# The daemons' timing: short, so that a scenario takes tens of seconds. A standby asks for the
# lease every third of the ttl, so an interval of a third of the ttl makes "ttl + one interval"
# the takeover the lease's design promises.
TTL_S = 3.0
INTERVAL_S = 1.0
# The harness samples /readyz every 100 ms and a fault is timed from just before the signal:
# what a takeover may take on top of the lease's ttl + one interval.
POLL_SLACK_S = 0.3
TAKEOVER_BOUND_S = TTL_S + INTERVAL_S + POLL_SLACK_S

GREEN = {
    "app_new_consumer_connected": 1.0,
    "app_probe_ok": 1.0,
    "app_error_ratio_new": 0.001,
    "app_old_depth": 0.0,
    "app_old_publishers": 0.0,
}
# The slices' exit gate fails at this ratio (< 0.01 wanted) while the guard (< 0.05) holds.
FAILING = 0.03
# A breach of the guard: the daemon rolls back (and pauses).
BREACH = 0.1

T_START = time.time()


def say(msg):
    print(f"[{time.time() - T_START:6.1f}s] {msg}", flush=True)


def sh(args, check=True, **kw):
    return subprocess.run(args, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, **kw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, timeout=0.3, data=None):
    """(status, body) of a GET (or POST of `data`), None when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, data=data) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except Exception:
        return None


# ---- the suite's own PostgreSQL ----------------------------------------------------------------

class Postgres:
    def __init__(self, work, listen):
        self.dir = os.path.join(work, "pg")
        self.port = free_port()
        self.listen = listen

    def initdb(self):
        os.makedirs(self.dir, exist_ok=True)
        shutil.chown(self.dir, "postgres", "postgres")
        r = sh(["runuser", "-u", "postgres", "--", f"{PG_BIN}/initdb", "-D", f"{self.dir}/data",
                "-A", "trust", "-U", "postgres"], check=False)
        if r.returncode:
            raise RuntimeError(f"initdb: {r.stderr}")
        with open(f"{self.dir}/data/pg_hba.conf", "a") as f:
            f.write(f"host all all {HOST_IP}/30 trust\n")
        self.start()

    def start(self):
        opts = (f"-c listen_addresses={','.join(self.listen)} -p {self.port} -k {self.dir} "
                "-c fsync=off -c max_connections=100")
        r = sh(["runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "-D", f"{self.dir}/data",
                "-l", f"{self.dir}/pg.log", "-w", "-t", "60", "start", "-o", opts], check=False)
        if r.returncode:
            raise RuntimeError(f"pg_ctl start: {r.stderr}{r.stdout}")

    def stop(self, mode="fast"):
        sh(["runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "-D", f"{self.dir}/data",
            "-m", mode, "-w", "-t", "30", "stop"], check=False)

    def url(self, db, host="127.0.0.1"):
        return f"postgres://postgres@{host}:{self.port}/{db}"

    def sql(self, db, text, check=True):
        """Rows of `text` (psql -At), one string each."""
        r = sh(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p",
                str(self.port), "-U", "postgres", "-d", db, "-c", text], check=False,
               env={**os.environ, "PGCONNECT_TIMEOUT": "3"})
        if r.returncode and check:
            raise RuntimeError(f"psql: {r.stderr.strip()} in {text[:80]}")
        return [line for line in r.stdout.splitlines() if line]

    def json_rows(self, db, query):
        return [json.loads(line) for line in self.sql(db, f"SELECT row_to_json(q) FROM ({query}) q")]

    def has_table(self, db, name):
        return bool(self.sql(db, f"SELECT 1 FROM pg_tables WHERE tablename = '{name}'"))

    def session(self, db):
        """An interactive psql, to hold a lock: `.stdin.write(...)`, then `.stdin.close()`."""
        return subprocess.Popen(["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U",
                                 "postgres", "-d", db], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)


# The audit the suite installs in each scenario's database (after `migrate init` made the
# schema): what the `leases` row said at each journal insert, on the database's clock, and every
# change of the lease's holder (or epoch).
AUDIT_SQL = """
CREATE TABLE jepsen_journal_audit (id BIGINT PRIMARY KEY, db_ms BIGINT NOT NULL, lease JSONB);
CREATE FUNCTION jepsen_journal_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO jepsen_journal_audit VALUES (NEW.id,
    (extract(epoch FROM clock_timestamp()) * 1000)::bigint,
    (SELECT to_jsonb(l) FROM leases l WHERE l.name = 'controller'));
  RETURN NEW;
END $$;
CREATE TRIGGER jepsen_journal_audit AFTER INSERT ON journal
  FOR EACH ROW EXECUTE FUNCTION jepsen_journal_audit();
CREATE TABLE jepsen_lease_changes (n BIGSERIAL PRIMARY KEY, db_ms BIGINT NOT NULL, op TEXT,
  old JSONB, new JSONB);
CREATE FUNCTION jepsen_lease_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' OR TG_OP = 'INSERT'
     OR to_jsonb(OLD)->>'holder' IS DISTINCT FROM to_jsonb(NEW)->>'holder'
     OR to_jsonb(OLD)->>'epoch' IS DISTINCT FROM to_jsonb(NEW)->>'epoch' THEN
    INSERT INTO jepsen_lease_changes (db_ms, op, old, new) VALUES (
      (extract(epoch FROM clock_timestamp()) * 1000)::bigint, TG_OP,
      CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE to_jsonb(OLD) END,
      CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE to_jsonb(NEW) END);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER jepsen_lease_changes AFTER INSERT OR UPDATE OR DELETE ON leases
  FOR EACH ROW EXECUTE FUNCTION jepsen_lease_changes();
"""


# ---- a network namespace joined to this machine by a veth pair ---------------------------------

class Netns:
    """`NS` with `NS_IF` (NS_IP), joined to `HOST_IF` (HOST_IP) here; inside it only loopback and
    the pair's other end are reachable (iptables, policy DROP); `partition(port)` drops the
    traffic to and from PostgreSQL's port, `heal()` lets it through again."""

    def __init__(self):
        self.ok, self.why = False, None

    @staticmethod
    def teardown():
        sh(["ip", "netns", "del", NS], check=False)
        sh(["ip", "link", "del", HOST_IF], check=False)

    def setup(self):
        self.teardown()
        steps = [
            ["ip", "netns", "add", NS],
            ["ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF],
            ["ip", "link", "set", NS_IF, "netns", NS],
            ["ip", "addr", "add", f"{HOST_IP}/30", "dev", HOST_IF],
            ["ip", "link", "set", HOST_IF, "up"],
            ["ip", "netns", "exec", NS, "ip", "addr", "add", f"{NS_IP}/30", "dev", NS_IF],
            ["ip", "netns", "exec", NS, "ip", "link", "set", NS_IF, "up"],
            ["ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up"],
        ]
        ipt = ["ip", "netns", "exec", NS, "iptables", "-w"]
        steps += [
            ipt + ["-A", "INPUT", "-i", "lo", "-j", "ACCEPT"],
            ipt + ["-A", "INPUT", "-s", HOST_IP, "-j", "ACCEPT"],
            ipt + ["-P", "INPUT", "DROP"],
            ipt + ["-A", "OUTPUT", "-o", "lo", "-j", "ACCEPT"],
            ipt + ["-A", "OUTPUT", "-d", HOST_IP, "-j", "ACCEPT"],
            ipt + ["-P", "OUTPUT", "DROP"],
            ipt + ["-P", "FORWARD", "DROP"],
        ]
        for s in steps:
            r = sh(s, check=False)
            if r.returncode:
                self.why = f"`{' '.join(s)}` refused: {r.stderr.strip() or r.returncode}"
                self.teardown()
                return False
        r = sh(["ip", "netns", "exec", NS, "ping", "-c", "1", "-W", "2", HOST_IP], check=False)
        if r.returncode and shutil.which("ping"):
            self.why = f"no traffic over the veth pair: {r.stdout.strip()}"
            self.teardown()
            return False
        self.ok = True
        return True

    def partition(self, port):
        ipt = ["ip", "netns", "exec", NS, "iptables", "-w"]
        sh(ipt + ["-I", "OUTPUT", "1", "-p", "tcp", "-d", HOST_IP, "--dport", str(port), "-j", "DROP"])
        sh(ipt + ["-I", "INPUT", "1", "-p", "tcp", "-s", HOST_IP, "--sport", str(port), "-j", "DROP"])

    def heal(self, port):
        ipt = ["ip", "netns", "exec", NS, "iptables", "-w"]
        sh(ipt + ["-D", "OUTPUT", "-p", "tcp", "-d", HOST_IP, "--dport", str(port), "-j", "DROP"], check=False)
        sh(ipt + ["-D", "INPUT", "-p", "tcp", "-s", HOST_IP, "--sport", str(port), "-j", "DROP"], check=False)


# ---- the fake indicator source -----------------------------------------------------------------

class Source:
    """Prometheus' `/api/v1/query` and a `/metrics` page serving the app_* metrics, under a path
    prefix per daemon (`/d1/...`) so the suite knows who asks. A query of `app_error_ratio_new`
    takes `delay[daemon]` seconds, answering the value it had when the request ARRIVED (the
    reading is taken, then the answer travels slowly)."""

    def __init__(self, hosts):
        self.lock = threading.Lock()
        self.values = dict(GREEN)
        self.delay = {}
        self.asks = []  # (real time, daemon, query, value)
        self.hooks = []  # (real time, daemon, Idempotency-Key header, event JSON)
        self.servers = []
        self.port = free_port()
        for host in hosts:
            srv = ThreadingHTTPServer((host, self.port), self.handler())
            srv.daemon_threads = True
            threading.Thread(target=srv.serve_forever, daemon=True).start()
            self.servers.append(srv)

    def set(self, metric, value):
        with self.lock:
            self.values[metric] = value

    def handler(self):
        source = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def answer(self, params):
                parts = urllib.parse.urlsplit(self.path)
                segs = parts.path.strip("/").split("/", 1)
                who, rest = (segs + [""])[:2]
                with source.lock:
                    values = dict(source.values)
                    delay = source.delay.get(who, 0)
                if rest == "metrics":
                    body = "".join(f"# TYPE {k} gauge\n{k} {v}\n" for k, v in values.items())
                    return self.send(200, body, "text/plain; version=0.0.4")
                if rest != "api/v1/query":
                    return self.send(404, "not found", "text/plain")
                q = (params.get("query") or [""])[0].strip()
                t = (params.get("time") or [str(time.time())])[0]
                v = values.get(q)
                with source.lock:
                    source.asks.append((time.time(), who, q, v))
                if q == "app_error_ratio_new" and delay:
                    time.sleep(delay)
                result = [] if v is None else [{"metric": {}, "value": [float(t), str(v)]}]
                self.send(200, json.dumps({"status": "success", "data": {
                    "resultType": "vector", "result": result}}), "application/json")

            def send(self, code, body, ctype):
                data = body.encode()
                try:
                    self.send_response(code)
                    self.send_header("content-type", ctype)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

            def do_GET(self):
                self.answer(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query))

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n).decode(errors="replace")
                who, _, rest = urllib.parse.urlsplit(self.path).path.strip("/").partition("/")
                if rest == "hook":
                    try:
                        event = json.loads(body)
                    except ValueError:
                        event = {"unparsed": body[:200]}
                    with source.lock:
                        source.hooks.append((time.time(), who, self.headers.get("idempotency-key"), event))
                    return self.send(200, "{}", "application/json")
                params = urllib.parse.parse_qs(body)
                params.update(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query))
                self.answer(params)

        return H

    def close(self):
        for s in self.servers:
            s.shutdown()
            s.server_close()


# ---- the daemons ------------------------------------------------------------------------------

class Daemon:
    """One `migrate run`, maybe in the namespace, maybe with a skewed clock (`skew_s`, or a
    clock file whose offset the suite changes: `jump`)."""

    def __init__(self, world, name, skew_s=0, netns=False, jump=False, source_timeout="2s"):
        self.w, self.name, self.skew_s, self.netns, self.jump = world, name, skew_s, netns, jump
        self.ip = NS_IP if netns else "127.0.0.1"
        self.port = 18480 if netns else free_port()
        self.source_timeout = source_timeout
        self.proc, self.stopped = None, False
        self.log = os.path.join(world.dir, f"{name}.log")
        self.clock_file = os.path.join(world.dir, f"{name}.faketime")
        self.jumped_at = None  # real time of the jump, when it happened

    def skew_label(self):
        if self.jump:
            return "jump +2h"
        if not self.skew_s:
            return "0"
        s = self.skew_s
        return f"{s:+d}s" if abs(s) < 60 else (f"{s // 60:+d}min" if abs(s) < 3600 else f"{s // 3600:+d}h")

    def offset_at(self, real_ms):
        """The daemon's clock minus the real one at real instant `real_ms` (ms)."""
        if self.jump:
            return 7200_000 if self.jumped_at is not None and real_ms >= self.jumped_at * 1000 else 0
        return self.skew_s * 1000

    def start(self):
        host = HOST_IP if self.netns else "127.0.0.1"
        src = f"http://{host}:{self.w.source.port}/{self.name}"
        env = {**os.environ, "MIGRATE_STATE": self.w.pg.url(self.w.db, host),
               "QM_PROM_URL": src, "QM_SCRAPE_URL": f"{src}/metrics", "QM_HOOK_URL": f"{src}/hook",
               "MIGRATE_LOG": "info",
               "MIGRATE_ACTOR": self.name}
        env.pop("MIGRATE_API_TOKEN", None)
        if self.netns:
            # Off loopback the daemon wants a token for its mutating calls (the suite makes none).
            env["MIGRATE_API_TOKEN"] = "jepsen-not-a-secret"
        if self.skew_s or self.jump:
            env.update(LD_PRELOAD=LIBFAKETIME, FAKETIME_DONT_FAKE_MONOTONIC="1")
            if self.jump:
                if not os.path.exists(self.clock_file):
                    with open(self.clock_file, "w") as f:
                        f.write("+0\n")
                env.update(FAKETIME_TIMESTAMP_FILE=self.clock_file, FAKETIME_NO_CACHE="1")
            else:
                env["FAKETIME"] = f"{self.skew_s:+d}s"
        cmd = [self.w.migrate, "run", "--listen", f"{self.ip}:{self.port}",
               "--interval", f"{int(INTERVAL_S * 1000)}ms", "--lease-ttl", f"{int(TTL_S)}s",
               "--id", self.name, "--source-timeout", self.source_timeout,
               "--queries-per-request", "1", "--retain", "off"]
        if self.netns:
            cmd = ["ip", "netns", "exec", NS] + cmd  # exec'd in place: the pid is migrate's
        log = open(self.log, "a")
        self.proc = subprocess.Popen(cmd, cwd=self.w.dir, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        log.close()
        with open(os.path.join(self.w.suite.work, "pids"), "a") as f:
            f.write(f"{self.proc.pid}\n")  # for scripts/jepsen.sh's trap, should this driver die
        self.stopped = False
        for _ in range(100):
            if self.health() is not None:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not start (see {self.log})")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def url(self, path):
        return f"http://{self.ip}:{self.port}{path}"

    def health(self):
        r = http(self.url("/healthz"))
        if r and r[0] == 200:
            try:
                return json.loads(r[1])
            except ValueError:
                return None
        return None

    def ready(self):
        if not self.alive() or self.stopped:
            return False
        r = http(self.url("/readyz"))
        return bool(r and r[0] == 200)

    def signal(self, sig):
        if self.alive():
            os.kill(self.proc.pid, sig)
        self.stopped = sig == signal.SIGSTOP
        if sig == signal.SIGKILL and self.proc is not None:
            self.proc.wait(timeout=10)

    def metrics(self):
        r = http(self.url("/metrics"), timeout=1)
        out = {}
        if r and r[0] == 200:
            for line in r[1].splitlines():
                if line.startswith("queue_migrate_") and " " in line:
                    k, v = line.rsplit(" ", 1)
                    try:
                        out[k] = float(v)
                    except ValueError:
                        pass
        return out

    def end(self):
        if self.alive():
            if self.stopped:
                os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=8)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def fenced_lines(self):
        try:
            with open(self.log, errors="replace") as f:
                return sum(1 for line in f if "fenced" in line and "WARN" in line)
        except FileNotFoundError:
            return 0


# ---- one scenario's world ---------------------------------------------------------------------

class World:
    def __init__(self, suite, name, migrations=("m1", "m2")):
        self.suite, self.name = suite, name
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
        self.polling = False
        self.pg.sql("postgres", f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")
        self.pg.sql("postgres", f"CREATE DATABASE {self.db}")
        self.source.values = dict(GREEN)
        self.source.delay = {}
        self.source.hooks = []
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
        return False

    def leader(self, timeout=15, exclude=()):
        """The one daemon answering ready (None after `timeout`)."""
        end = time.time() + timeout
        while time.time() < end:
            ready = [d for n, d in self.daemons.items() if n not in exclude and d.ready()]
            if len(ready) == 1:
                return ready[0]
            time.sleep(0.05)
        return None

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
        end = time.time() + timeout
        while time.time() < end:
            s = self.state(m)
            if s and s[0] in want:
                return s
            time.sleep(0.1)
        return None

    def fence_round(self, fault, old, lines0):
        """After a stale round: what the ex-leader logged ("fenced") and counted since."""
        counted = old.metrics().get("queue_migrate_fenced_writes_total")
        self.fence_rounds.append((fault, old.name, old.fenced_lines() - lines0, counted))

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
        db, names = self.db, set(self.daemons)
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

        def tenure_start(e):
            if fenced and e.get("epoch") in epoch_start:
                return epoch_start[e["epoch"]]
            a = audit.get(e["id"])
            if a is None:
                return None
            # The harness's own record: the last change of holder before the insert.
            start = None
            for c in changes:
                if c["db_ms"] <= a["db_ms"] and c["new"] is not None:
                    start = c["db_ms"]
            return start

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
            # giving up before writing, which is no refusal to log).
            if self.fence_rounds and not any(n > 0 and c for _, _, n, c in self.fence_rounds):
                found["a refused write is logged (fenced) and counted"] = [
                    f"{f}: {d} logged {n} WARN lines with \"fenced\", queue_migrate_fenced_writes_total {c}"
                    for f, d, n, c in self.fence_rounds]
            found["the fencing contract (history --json, metrics)"] = self.contract + self.contract_checks(journals, epochs)
        found["takeover within ttl + one interval"] = checks.takeovers(self.takeovers, TAKEOVER_BOUND_S)
        entries = sum(len(j) for j in journals.values())
        fenced_lines = {n: d.fenced_lines() for n, d in self.daemons.items()}
        return {"scenario": self.name, "entries": entries, "journal_by": {
                    n: sum(1 for j in journals.values() for r in j if r["actor"] == n) for n in self.daemons},
                "holder_changes": sum(1 for c in changes if c["new"] is not None),
                "webhooks": len(self.source.hooks),
                "violations": {k: v for k, v in found.items() if v},
                "takeovers": self.takeovers, "fenced_log_lines": fenced_lines, "notes": self.notes,
                "fence_rounds": self.fence_rounds,
                "epochs": len(epochs) if epochs is not None else None}


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
    deadline = time.time() + 10
    asked = None
    while time.time() < deadline and asked is None:
        asked = next((a for a in w.source.asks[n0:] if a[1] == old.name and a[2] == "app_error_ratio_new"), None)
        time.sleep(0.02)
    if asked is None:
        w.source.set("app_error_ratio_new", FAILING)
        w.notes.append(f"{fault}: {old.name} never asked the slow source")
        return False
    time.sleep(max(0.0, asked[0] + 1.0 - time.time()))
    lines0 = old.fenced_lines()
    t0 = time.time()
    begin(old)
    w.source.set("app_error_ratio_new", FAILING)
    w.takeover(fault, old, t0)
    time.sleep(1.5)
    end(old)
    time.sleep(4)
    w.fence_round(fault, old, lines0)
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
    transaction stays open), a standby takes over and must keep running rounds; 6 s after the
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
    lines0 = old.fenced_lines()
    t0 = time.time()
    begin(old)
    w.source.set("app_error_ratio_new", FAILING)
    time.sleep(0.3)
    lock.stdin.write("COMMIT;\n")
    lock.stdin.close()
    lock.wait(timeout=10)
    new = w.takeover(fault, old, t0)
    if new is not None:
        # The new leader's rounds must go on (no wedge): its ticks move.
        h0 = (new.health() or {}).get("ticks", 0)
        time.sleep(3)
        h1 = (new.health() or {}).get("ticks", 0)
        if h1 <= h0:
            w.wedged.append(f"{fault} {i}: the new leader {new.name} ran no round in the 3 s after "
                            f"its takeover (the ex-leader's transaction held the row)")
    time.sleep(max(0.0, 6 - (time.time() - t0)))
    end(old)
    time.sleep(4)
    w.fence_round(fault, old, lines0)


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
            m = d.metrics()
            skew = m.get("queue_migrate_clock_skew_seconds")
            if skew is None:
                w.contract.append(f"{n}: no queue_migrate_clock_skew_seconds in /metrics")
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
        for name, run in SCENARIOS:
            if only and name not in only:
                continue
            if name == "partition" and not suite.netns.ok:
                skipped.append(f"skipped: partition: {suite.netns.why}")
                say(skipped[-1])
                continue
            say(f"== {name}: {run.__doc__.strip().splitlines()[0]}")
            started = time.time()
            w = World(suite, name)
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
        say(f"  {r['scenario']:<18} {n:>3} violations  " + ", ".join(
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
