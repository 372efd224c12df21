#!/usr/bin/env python3
"""`migrate bridge` against RabbitMQ's shovel (ack-mode on-confirm), RabbitMQ -> RabbitMQ.

Driven by bench/bridge.sh (which builds the binary and writes the plan); standard library only:
a minimal AMQP 0.9.1 client (publish with confirms, passive declare, purge, delete) and the
management API over urllib.

Each run: empty the queues, pre-load N identical messages (persistent, ~200-byte JSON payload,
header x-qm-key spread uniformly at random over K keys, fixed seed) into the run's ingress queue,
start the forwarder (the bridge process, or a dynamic shovel), and poll the destination queue's
message count (passive queue.declare: exact and immediate, unlike the management API's 5 s
statistics) every 20 ms until it holds N. Reported per run: wall seconds from the start (process
spawn / shovel PUT) to N at the destination, msgs/s over that, the steady rate between 10% and
90% of N, CPU of the migrate process (user+sys from /proc/PID/stat) and of RabbitMQ (beam.smp,
delta over the run; it serves both sides and runs the shovel itself).
"""

import argparse
import json
import os
import random
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")

# ---------------------------------------------------------------------------------------------
# A minimal AMQP 0.9.1 client


def shortstr(s):
    b = s.encode()
    return struct.pack("B", len(b)) + b


def longstr(b):
    if isinstance(b, str):
        b = b.encode()
    return struct.pack(">I", len(b)) + b


def table(d):
    body = b"".join(shortstr(k) + b"S" + longstr(v) for k, v in d.items())
    return struct.pack(">I", len(body)) + body


def frame(kind, channel, payload):
    return struct.pack(">BHI", kind, channel, len(payload)) + payload + b"\xce"


def method(channel, cls, mth, args=b""):
    return frame(1, channel, struct.pack(">HH", cls, mth) + args)


class Amqp:
    def __init__(self, host="127.0.0.1", port=5672, user="guest", password="guest", vhost="/"):
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.sock.sendall(b"AMQP\x00\x00\x09\x01")
        self.expect(0, 10, 10)  # connection.start
        props = table({"product": "queue-migrate bench/bridge_bench.py"})
        self.sock.sendall(
            method(0, 10, 11, props + shortstr("PLAIN") + longstr(f"\0{user}\0{password}") + shortstr("en_US"))
        )
        args = self.expect(0, 10, 30)  # connection.tune
        channel_max, frame_max, _heartbeat = struct.unpack(">HIH", args[:8])
        self.frame_max = frame_max or 131072
        self.sock.sendall(method(0, 10, 31, struct.pack(">HIH", channel_max, self.frame_max, 0)))
        self.sock.sendall(method(0, 10, 40, shortstr(vhost) + shortstr("") + b"\x00"))
        self.expect(0, 10, 41)
        self.sock.sendall(method(1, 20, 10, shortstr("")))
        self.expect(1, 20, 11)
        self.confirms = False

    def read_frame(self):
        while True:
            if len(self.buf) >= 7:
                kind, channel, size = struct.unpack(">BHI", self.buf[:7])
                if len(self.buf) >= 8 + size:
                    payload = self.buf[7 : 7 + size]
                    self.buf = self.buf[8 + size :]
                    return kind, channel, payload
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.buf += chunk

    def expect(self, channel, cls, mth):
        while True:
            kind, ch, payload = self.read_frame()
            if kind != 1:
                continue
            c, m = struct.unpack(">HH", payload[:4])
            if (c, m) == (cls, mth) and ch == channel:
                return payload[4:]
            if (c, m) in ((10, 50), (20, 40)):
                code = struct.unpack(">H", payload[4:6])[0]
                text = payload[7 : 7 + payload[6]].decode(errors="replace")
                raise RuntimeError(f"AMQP close {code}: {text}")
            if (c, m) == (10, 60):  # connection.blocked: wait for unblocked
                continue

    def declare(self, queue, passive=False):
        bits = (1 if passive else 0) | 2  # passive, durable
        self.sock.sendall(method(1, 50, 10, struct.pack(">H", 0) + shortstr(queue) + bytes([bits]) + table({})))
        args = self.expect(1, 50, 11)
        n = args[0]
        count, consumers = struct.unpack(">II", args[1 + n : 9 + n])
        return count, consumers

    def count(self, queue):
        return self.declare(queue, passive=True)[0]

    def purge(self, queue):
        self.sock.sendall(method(1, 50, 30, struct.pack(">H", 0) + shortstr(queue) + b"\x00"))
        self.expect(1, 50, 31)

    def delete(self, queue):
        self.sock.sendall(method(1, 50, 40, struct.pack(">H", 0) + shortstr(queue) + b"\x00"))
        self.expect(1, 50, 41)

    def publish_all(self, queue, messages, window=4000, batch=200):
        """Publish (headers, payload) pairs persistently, confirmed; return when all are."""
        if not self.confirms:
            self.sock.sendall(method(1, 85, 10, b"\x00"))
            self.expect(1, 85, 11)
            self.confirms = True
            self.next_tag = 1
            self.acked = 0
        rk = struct.pack(">H", 0) + shortstr("") + shortstr(queue) + b"\x00"
        pub = method(1, 60, 40, rk)
        sent = self.acked
        out = []
        first = self.next_tag
        for headers, payload in messages:
            props = table(headers) + b"\x02"  # headers, delivery-mode 2
            header = struct.pack(">HHQH", 60, 0, len(payload), (1 << 13) | (1 << 12)) + props
            out.append(pub + frame(2, 1, header) + frame(3, 1, payload))
            self.next_tag += 1
            if len(out) >= batch:
                self.sock.sendall(b"".join(out))
                out = []
                while self.next_tag - 1 - self.acked > window:
                    self.read_acks(block=True)
        if out:
            self.sock.sendall(b"".join(out))
        while self.acked < self.next_tag - 1:
            self.read_acks(block=True)
        return self.next_tag - first

    def read_acks(self, block):
        kind, ch, payload = self.read_frame()
        if kind != 1:
            return
        c, m = struct.unpack(">HH", payload[:4])
        if (c, m) == (60, 80):
            tag, multiple = struct.unpack(">QB", payload[4:13])
            if multiple & 1:
                self.acked = max(self.acked, tag)
            else:
                # singles arrive in order for one publisher on one queue; count them
                self.acked = max(self.acked, tag)
        elif (c, m) == (60, 120):
            raise RuntimeError("publish nacked by the broker")
        elif (c, m) in ((10, 50), (20, 40)):
            raise RuntimeError(f"AMQP close: {payload[6:60]!r}")

    def close_cleanly(self):
        """connection.close, waiting for close-ok: every frame sent before was processed."""
        self.sock.sendall(method(0, 10, 50, struct.pack(">H", 200) + shortstr("") + struct.pack(">HH", 0, 0)))
        while True:
            kind, ch, payload = self.read_frame()
            if kind == 1 and ch == 0 and payload[:4] == struct.pack(">HH", 10, 51):
                break
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def delete_drained(queue):
    """Delete `queue`, which a run has drained; fail if it still holds messages."""
    a = Amqp()
    left = a.count(queue)
    a.delete(queue)
    a.close_cleanly()
    if left != 0:
        raise RuntimeError(f"{queue} still holds {left} messages")


# ---------------------------------------------------------------------------------------------
# The management API


class Management:
    def __init__(self, base="http://127.0.0.1:15672/api", user="guest", password="guest"):
        self.base = base.rstrip("/")
        mgr = urllib.request.HTTPPasswordMgrWithDefaultRealm()
        mgr.add_password(None, self.base, user, password)
        self.opener = urllib.request.build_opener(urllib.request.HTTPBasicAuthHandler(mgr))
        import base64

        self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def call(self, verb, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=verb)
        req.add_header("Authorization", self.auth)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                text = r.read()
                return json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            if e.code == 404 and verb == "DELETE":
                return None
            raise RuntimeError(f"{verb} {path}: HTTP {e.code} {e.read()[:300]!r}") from e


# ---------------------------------------------------------------------------------------------
# CPU


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
    except (OSError, IndexError, ValueError):
        return float("nan")


def beam_pid():
    out = subprocess.run(["pgrep", "-u", "rabbitmq", "beam.smp"], capture_output=True, text=True).stdout.split()
    if not out:
        out = subprocess.run(["pgrep", "beam.smp"], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else None


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# ---------------------------------------------------------------------------------------------
# The messages


def messages(n, keys, size, seed):
    rng = random.Random(seed)
    pad_to = size
    out = []
    for i in range(n):
        key = f"order-{rng.randrange(keys)}"
        body = json.dumps({"type": "order.paid", "orderId": key, "seq": i, "amount": rng.randrange(10**6), "pad": ""})
        pad = max(0, pad_to - len(body))
        body = body.replace('"pad": ""', '"pad": "' + "x" * pad + '"').encode()
        out.append(({"x-qm-key": key, "x-qm-dedup-key": f"order.paid:{key}:{i}"}, body))
    return out


# ---------------------------------------------------------------------------------------------
# One run


def wait_for(amqp, queue, n, t0, timeout, proc=None):
    """Poll `queue`'s count until it reaches n; return (t_done, samples)."""
    samples = []
    deadline = t0 + timeout
    while True:
        c = amqp.count(queue)
        now = time.monotonic()
        samples.append((now - t0, c))
        if c >= n:
            return now, samples
        if now > deadline:
            raise RuntimeError(f"{queue} holds {c} of {n} after {timeout}s")
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the forwarder exited ({proc.returncode}) with {queue} at {c} of {n}")
        time.sleep(0.02)


def steady_rate(samples, n):
    """msgs/s between the first samples at >= 10% and >= 90% of n."""
    lo = next((s for s in samples if s[1] >= 0.1 * n), None)
    hi = next((s for s in samples if s[1] >= 0.9 * n), None)
    if lo is None or hi is None or hi[0] <= lo[0]:
        return float("nan")
    return (hi[1] - lo[1]) / (hi[0] - lo[0])


def first_seen(samples):
    return next((t for t, c in samples if c > 0), float("nan"))


def prepare(amqp, ingress, dest, msgs):
    for q in (ingress, dest):
        amqp.declare(q)
        amqp.purge(q)
    t = time.monotonic()
    amqp.publish_all(ingress, msgs)
    load_s = time.monotonic() - t
    c = amqp.count(ingress)
    if c != len(msgs):
        raise RuntimeError(f"{ingress} holds {c} after loading {len(msgs)}")
    return load_s


def reductions(mgmt, ingress, dest):
    """Erlang reductions (units of work) of the two queue processes and of the forwarder's channels
    (the consuming one, the publishing ones), from the management API. Its statistics are emitted
    every 5 s: callers wait 6 s before each snapshot."""
    out = {}
    for role, q in (("ingress_queue", ingress), ("dest_queue", dest)):
        out[role] = mgmt.call("GET", "/queues/%2f/" + urllib.parse.quote(q, safe="")).get("reductions") or 0
    harness = {
        c["name"]
        for c in mgmt.call("GET", "/connections")
        if (c.get("client_properties") or {}).get("product", "").startswith("queue-migrate bench/")
    }
    out["consumer_channel"] = out["publisher_channels"] = 0
    for ch in mgmt.call("GET", "/channels"):
        if (ch.get("connection_details") or {}).get("name") in harness:
            continue
        role = "consumer_channel" if ch.get("consumer_count", 0) > 0 else "publisher_channels"
        out[role] += ch.get("reductions") or 0
    return out


def per_message(after, before, n):
    return {k: round((after.get(k, 0) - before.get(k, 0)) / n) for k in after}


def settle_ingress(mgmt, ingress, seconds=15.0):
    """Wait until the ingress has nothing ready nor unacked (management API, lags ~5 s)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        q = mgmt.call("GET", "/queues/%2f/" + urllib.parse.quote(ingress, safe=""))
        if q.get("messages", 1) == 0 and q.get("messages_unacknowledged", 1) == 0:
            return True
        time.sleep(0.5)
    return False


def run_bridge(args, amqp, mgmt, msgs, prefetch, round_no):
    ingress, dest = args.bridge_in, args.bridge_out
    load_s = prepare(amqp, ingress, dest, msgs)
    name = f"{args.migration_prefix}-{prefetch}"
    env = dict(os.environ, MIGRATE_STATE=args.state, MIGRATE_LOG=os.environ.get("MIGRATE_LOG", "warn"))
    log = open(os.path.join(args.out, f"bridge-{prefetch}-r{round_no}.log"), "w")
    if args.reductions:
        time.sleep(6)
        red0 = reductions(mgmt, ingress, dest)
    beam = beam_pid()
    beam0 = cpu_seconds(beam)
    load0 = loadavg()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [args.migrate, "bridge", name, "--metrics", args.metrics, "--id", f"bench-{round_no}"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        t_done, samples = wait_for(amqp, dest, len(msgs), t0, args.timeout, proc)
        cpu = cpu_seconds(proc.pid)
        beam_cpu = cpu_seconds(beam) - beam0
        confirmed = scrape_confirmed(args.metrics)
        if args.reductions:
            time.sleep(6)
            red = per_message(reductions(mgmt, ingress, dest), red0, len(msgs))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    drained = settle_ingress(mgmt, ingress)
    return row("bridge", prefetch, round_no, msgs, load_s, t0, t_done, samples, beam_cpu, drained,
               load0, red if args.reductions else None, migrate_cpu=cpu, confirmed=confirmed)


def row(kind, prefetch, round_no, msgs, load_s, t0, t_done, samples, beam_cpu, drained, load0,
        red, migrate_cpu=None, confirmed=None):
    """One round's result, the same fields for the bridge and the shovel."""
    wall = t_done - t0
    return {
        "reductions_per_msg": red,
        "forwarder": f"{kind} prefetch {prefetch}",
        "kind": kind,
        "prefetch": prefetch,
        "round": round_no,
        "n": len(msgs),
        "load_s": round(load_s, 2),
        "wall_s": round(wall, 3),
        "first_s": round(first_seen(samples), 3),
        "rate": round(len(msgs) / wall, 1),
        "steady_rate": round(steady_rate(samples, len(msgs)), 1),
        "migrate_cpu_s": None if migrate_cpu is None else round(migrate_cpu, 2),
        "beam_cpu_s": round(beam_cpu, 2),
        "confirmed_metric": confirmed,
        "ingress_drained": drained,
        "loadavg_start": load0,
        "loadavg_end": loadavg(),
    }


def scrape_confirmed(addr):
    try:
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    total = 0.0
    for line in text.splitlines():
        if line.startswith("queue_migrate_bridge_confirmed_total"):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def run_shovel(args, amqp, mgmt, msgs, prefetch, round_no):
    ingress, dest = args.shovel_in, args.shovel_out
    load_s = prepare(amqp, ingress, dest, msgs)
    uri = args.amqp_url
    value = {
        "src-protocol": "amqp091",
        "src-uri": uri,
        "src-queue": ingress,
        "dest-protocol": "amqp091",
        "dest-uri": uri,
        "dest-queue": dest,
        "ack-mode": "on-confirm",
        "prefetch-count": prefetch,
        "src-delete-after": "never",
    }
    path = "/parameters/shovel/%2f/" + args.shovel_name
    mgmt.call("DELETE", path)
    if args.reductions:
        time.sleep(6)
        red0 = reductions(mgmt, ingress, dest)
    beam = beam_pid()
    beam0 = cpu_seconds(beam)
    load0 = loadavg()
    t0 = time.monotonic()
    mgmt.call("PUT", path, {"value": value})
    try:
        t_done, samples = wait_for(amqp, dest, len(msgs), t0, args.timeout)
        beam_cpu = cpu_seconds(beam) - beam0
        if args.reductions:
            time.sleep(6)
            red = per_message(reductions(mgmt, ingress, dest), red0, len(msgs))
    finally:
        time.sleep(0.5)  # let the last multiple-ack reach the source before the shovel stops
        mgmt.call("DELETE", path)
    drained = settle_ingress(mgmt, ingress)
    return row("shovel", prefetch, round_no, msgs, load_s, t0, t_done, samples, beam_cpu, drained,
               load0, red if args.reductions else None)


# ---------------------------------------------------------------------------------------------


def summarize(results, prefetches):
    rows = []
    for p in prefetches:
        for kind in ("bridge", "shovel"):
            rs = [r for r in results if r["kind"] == kind and r["prefetch"] == p]
            if not rs:
                continue
            med = lambda k: statistics.median(r[k] for r in rs if r[k] is not None) if any(r[k] is not None for r in rs) else None
            rows.append(
                {
                    "kind": kind,
                    "prefetch": p,
                    "runs": len(rs),
                    "n": rs[0]["n"],
                    "wall_s": med("wall_s"),
                    "rate": med("rate"),
                    "rates": [r["rate"] for r in rs],
                    "steady_rate": med("steady_rate"),
                    "migrate_cpu_s": med("migrate_cpu_s"),
                    "beam_cpu_s": med("beam_cpu_s"),
                }
            )
    ratios = {}
    for p in prefetches:
        b = next((r for r in rows if r["kind"] == "bridge" and r["prefetch"] == p), None)
        s = next((r for r in rows if r["kind"] == "shovel" and r["prefetch"] == p), None)
        if b and s:
            ratios[p] = {
                "rate": round(b["rate"] / s["rate"], 3),
                "steady_rate": round(b["steady_rate"] / s["steady_rate"], 3),
                # per round, bridge and shovel of the same round
                "per_round": [
                    round(rb["rate"] / rs_["rate"], 3)
                    for rb in results
                    if rb["kind"] == "bridge" and rb["prefetch"] == p
                    for rs_ in results
                    if rs_["kind"] == "shovel" and rs_["prefetch"] == p and rs_["round"] == rb["round"]
                ],
            }
    return rows, ratios


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--migrate", required=True)
    ap.add_argument("--state", required=True, help="MIGRATE_STATE of the initialised migrations")
    ap.add_argument("--migration-prefix", default="bench-bridge", help="migration NAME is PREFIX-PREFETCH")
    ap.add_argument("--out", required=True, help="directory for logs and results.json")
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prefetch", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--metrics", default="127.0.0.1:19466")
    ap.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672/%2f")
    ap.add_argument("--management", default="http://127.0.0.1:15672/api")
    ap.add_argument("--bridge-in", default="bench.in")
    ap.add_argument("--bridge-out", default="bench.out")
    ap.add_argument("--shovel-in", default="bench.in2")
    ap.add_argument("--shovel-out", default="bench.out2")
    ap.add_argument("--shovel-name", default="bench-bridge-shovel")
    ap.add_argument("--only", choices=["bridge", "shovel"], help="run one side only")
    ap.add_argument(
        "--reductions",
        action="store_true",
        help="also record RabbitMQ's Erlang reductions per message (queue processes, channels); "
        "adds 12 s of waiting per run",
    )
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    msgs = messages(args.n, args.keys, args.size, args.seed)
    size = statistics.mean(len(p) for _, p in msgs)
    print(f"# {args.n} messages, payload {size:.0f} bytes, {len({h['x-qm-key'] for h, _ in msgs})} keys", flush=True)
    amqp = Amqp()
    mgmt = Management(args.management)
    results = []
    for rnd in range(1, args.rounds + 1):
        for p in args.prefetch:
            order = ["bridge", "shovel"] if rnd % 2 == 1 else ["shovel", "bridge"]
            if args.only:
                order = [args.only]
            for kind in order:
                runner = run_bridge if kind == "bridge" else run_shovel
                r = runner(args, amqp, mgmt, msgs, p, rnd)
                results.append(r)
                print(json.dumps(r), flush=True)
                with open(os.path.join(args.out, "results.json"), "w") as f:
                    json.dump({"runs": results}, f, indent=1)
    rows, ratios = summarize(results, args.prefetch)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"runs": results, "medians": rows, "ratio_bridge_over_shovel": ratios}, f, indent=1)
    print()
    print("| forwarder | prefetch | runs | N | median wall s | median msgs/s | runs msgs/s | median steady msgs/s (10-90%) | median migrate CPU s | median RabbitMQ CPU s |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    for r in rows:
        cpu = "-" if r["migrate_cpu_s"] is None else f"{r['migrate_cpu_s']:.2f}"
        print(
            f"| {r['kind']} | {r['prefetch']} | {r['runs']} | {r['n']} | {r['wall_s']:.2f} | {r['rate']:.0f} | "
            f"{', '.join(f'{x:.0f}' for x in r['rates'])} | {r['steady_rate']:.0f} | {cpu} | {r['beam_cpu_s']:.2f} |"
        )
    print()
    for p, x in ratios.items():
        print(f"prefetch {p}: bridge/shovel = {x['rate']} (medians, wall), {x['steady_rate']} (steady), per round {x['per_round']}")
    if args.reductions:
        print()
        print("| run | ingress queue | consumer channel | destination queue | publisher channel(s) |")
        print("|---|---:|---:|---:|---:|")
        for r in results:
            x = r["reductions_per_msg"]
            print(f"| {r['forwarder']} r{r['round']} | {x['ingress_queue']} | {x['consumer_channel']} | {x['dest_queue']} | {x['publisher_channels']} |")
    amqp.close()


if __name__ == "__main__":
    sys.exit(main())
