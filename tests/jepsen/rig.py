"""The machinery of the lease suite (tests/jepsen/jepsen.py): the suite's own PostgreSQL and the
audit triggers it installs, a network namespace joined by a veth pair, the fake indicator source
(and webhook receiver), and one `migrate run` daemon under the suite's control."""

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


class Child:
    """A process the suite started (`proc`), stopped by SIGSTOP or not (`stopped`): alive, a
    signal, and its end (SIGCONT first if stopped, SIGTERM, then SIGKILL after `end_timeout` s).
    The daemons and the bridges are children."""

    proc, stopped, end_timeout = None, False, 8

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            os.kill(self.proc.pid, sig)
        self.stopped = sig == signal.SIGSTOP
        if sig == signal.SIGKILL and self.proc is not None:
            self.proc.wait(timeout=10)

    def end(self):
        if not self.alive():
            return
        if self.stopped:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=self.end_timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def wait_for(f, timeout, every):
    """The first answer of `f()` that is not None, asked every `every` s; None after `timeout` s."""
    end = time.time() + timeout
    while time.time() < end:
        v = f()
        if v is not None:
            return v
        time.sleep(every)
    return None


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

    def start(self, env=None):
        """Start it; `env`: variables added to its environment (libfaketime's, for a step of the
        database host's clock)."""
        opts = (f"-c listen_addresses={','.join(self.listen)} -p {self.port} -k {self.dir} "
                "-c fsync=off -c max_connections=100")
        r = sh(["runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "-D", f"{self.dir}/data",
                "-l", f"{self.dir}/pg.log", "-w", "-t", "60", "start", "-o", opts], check=False,
               env={**os.environ, **(env or {})})
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
        # Daemons whose webhooks are held unanswered (the publish not done) until `release()`,
        # then answered 503 and recorded in `refused`, not in `hooks`.
        self.hold = set()
        self.held = []  # (real time, daemon, Idempotency-Key header, event JSON) while held
        self.refused = []
        self.released = threading.Event()
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
                    hook = (time.time(), who, self.headers.get("idempotency-key"), event)
                    with source.lock:
                        held = who in source.hold
                        (source.held if held else source.hooks).append(hook)
                    if held:
                        source.released.wait(60)
                        with source.lock:
                            source.refused.append(hook)
                        return self.send(503, "held by the suite", "text/plain")
                    return self.send(200, "{}", "application/json")
                params = urllib.parse.parse_qs(body)
                params.update(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query))
                self.answer(params)

        return H

    def release(self):
        """Answer every held webhook 503, hold no more."""
        with self.lock:
            self.hold = set()
        self.released.set()

    def close(self):
        self.release()
        for s in self.servers:
            s.shutdown()
            s.server_close()


# ---- the daemons ------------------------------------------------------------------------------

class Daemon(Child):
    """One `migrate run`, maybe in the namespace, maybe with a skewed clock (`skew_s`, or a
    clock file whose offset the suite changes: `jump`)."""

    def __init__(self, world, name, skew_s=0, netns=False, jump=False, source_timeout="2s",
                 ident=None, db_port=None):
        self.w, self.name, self.skew_s, self.netns, self.jump = world, name, skew_s, netns, jump
        # `--id` (and the journal's actor): the name unless a second process takes the same one.
        self.ident = ident or name
        self.db_port = db_port  # PostgreSQL through the suite's proxy (half-open)
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
        db_url = (self.w.pg.url(self.w.db, host) if self.db_port is None
                  else f"postgres://postgres@127.0.0.1:{self.db_port}/{self.w.db}")
        env = {**os.environ, "MIGRATE_STATE": db_url,
               "QM_PROM_URL": src, "QM_SCRAPE_URL": f"{src}/metrics", "QM_HOOK_URL": f"{src}/hook",
               "MIGRATE_LOG": "info",
               "MIGRATE_ACTOR": self.ident}
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
               "--id", self.ident, "--source-timeout", self.source_timeout,
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

    def lines(self, *texts):
        """Lines of this daemon's log that contain every one of `texts`."""
        try:
            with open(self.log, errors="replace") as f:
                return sum(1 for line in f if all(t in line for t in texts))
        except FileNotFoundError:
            return 0

    def fenced_lines(self):
        try:
            with open(self.log, errors="replace") as f:
                # Not the warning at start that a long --source-timeout may be fenced.
                return sum(1 for line in f if "fenced" in line and "WARN" in line
                           and "--source-timeout" not in line)
        except FileNotFoundError:
            return 0

    def gave_up_lines(self):
        """Times this daemon gave its lease up because its rounds could not complete (issue 54):
        its ticks in flight were stopped before they wrote anything."""
        try:
            with open(self.log, errors="replace") as f:
                return sum(1 for line in f if "ERROR" in line and "giving the lease up" in line)
        except FileNotFoundError:
            return 0

    def ended_by_server_lines(self):
        """Writes the server refused by ending the session: a paused ex-leader's transaction
        left idle past --db-idle-in-transaction-timeout is rolled back by PostgreSQL."""
        try:
            with open(self.log, errors="replace") as f:
                return sum(1 for line in f if "WARN" in line
                           and "terminating connection due to idle-in-transaction timeout" in line)
        except FileNotFoundError:
            return 0


