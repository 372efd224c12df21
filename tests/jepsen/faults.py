"""The machinery of the suite's newer faults (tests/jepsen/jepsen.py, issue 54): a TCP proxy of
the suite's own between the daemons and PostgreSQL whose established connections can be made
silent (a partition that heals only for new connections), a minimal Redis client (RESP) for the
bridge's streams (on a Redis of the scenario's own), and one `migrate bridge` under the suite's control."""

import asyncio
import os
import socket
import subprocess
import threading
import time
import urllib.parse

from rig import Child, free_port, http

# ---- a proxy whose established connections go silent --------------------------------------------


class Proxy:
    """A TCP proxy to PostgreSQL (127.0.0.1:`target_port`) on one port per daemon
    (`listen(name)`). `freeze(names)` makes the connections those daemons have open at that moment
    silent for good: their bytes are no longer forwarded either way, and nothing is closed (no
    FIN, no RST; the kernels on both ends still acknowledge), as a lost NAT or conntrack entry or
    a failed-over load balancer leaves them. Connections opened after it pass. Runs an asyncio
    loop in a thread of its own."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.lock = threading.Lock()
        self.conns = []  # [name, opened at, frozen (bool), [writers]]
        self.servers = []

    def listen(self, name):
        port = free_port()

        async def serve():
            return await asyncio.start_server(lambda r, w: self.accept(name, r, w), "127.0.0.1", port)

        self.servers.append(asyncio.run_coroutine_threadsafe(serve(), self.loop).result(10))
        return port

    async def accept(self, name, client_r, client_w):
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.close()
            return
        conn = [name, time.time(), False, [client_w, up_w]]
        with self.lock:
            self.conns.append(conn)
        try:
            await asyncio.gather(self.pipe(conn, client_r, up_w), self.pipe(conn, up_r, client_w),
                                 return_exceptions=True)
        except asyncio.CancelledError:
            pass  # the suite closes the proxy: the task ends quietly

    async def pipe(self, conn, reader, writer):
        while True:
            data = await reader.read(65536)
            if conn[2]:
                # Silent for good: what arrives is dropped, an end is not passed on either.
                await asyncio.Event().wait()
            if not data:
                break
            writer.write(data)
            await writer.drain()
        writer.close()

    def freeze(self, names):
        """Silence the connections of `names` open now; answers how many."""
        with self.lock:
            hit = [c for c in self.conns if c[0] in names and not c[2]]
            for c in hit:
                c[2] = True
        return len(hit)

    def opened(self, name, since=0.0):
        with self.lock:
            return sum(1 for c in self.conns if c[0] == name and c[1] >= since)

    def close(self):
        async def stop():
            for s in self.servers:
                s.close()
            with self.lock:
                for c in self.conns:
                    for w in c[3]:
                        w.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)


# ---- a minimal Redis client --------------------------------------------------------------------


class Redis:
    """Enough RESP2 for the bridge scenario: `cmd(*args)` answers the reply (bytes, int, list,
    None), raising on an error reply."""

    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379), timeout=10)
        self.file = self.sock.makefile("rb")
        if u.password:
            self.cmd("AUTH", *([urllib.parse.unquote(u.username)] if u.username else []),
                     urllib.parse.unquote(u.password))
        db = (u.path or "/").strip("/")
        if db:
            self.cmd("SELECT", db)

    def cmd(self, *args):
        out = [f"*{len(args)}\r\n".encode()]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(f"${len(b)}\r\n".encode() + b + b"\r\n")
        self.sock.sendall(b"".join(out))
        return self.read()

    def read(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")

    def close(self):
        self.sock.close()


# ---- one `migrate bridge` ----------------------------------------------------------------------


class Bridge(Child):
    """`migrate bridge NAME` with its own `--id` and `/metrics` port, on the scenario's state."""

    end_timeout = 10

    def __init__(self, world, name, migration, env, ident=None):
        self.w, self.name, self.migration, self.env = world, name, migration, env
        self.ident = ident or name  # `--id`: two bridges may share one (a stable-name replacement)
        self.port = free_port()
        self.proc, self.stopped = None, False
        self.log = os.path.join(world.dir, f"{name}.log")

    def start(self):
        cmd = [self.w.migrate, "bridge", self.migration, "--metrics", f"127.0.0.1:{self.port}",
               "--lease-ttl", "3s", "--id", self.ident]
        log = open(self.log, "a")
        self.proc = subprocess.Popen(cmd, cwd=self.w.dir, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        log.close()
        with open(os.path.join(self.w.suite.work, "pids"), "a") as f:
            f.write(f"{self.proc.pid}\n")
        self.stopped = False

    def metrics(self):
        """The bridge's own series (`queue_migrate_bridge_*`), summed over their labels."""
        if not self.alive() or self.stopped:
            return None
        r = http(f"http://127.0.0.1:{self.port}/metrics", timeout=1)
        if not r or r[0] != 200:
            return None
        out = {}
        for line in r[1].splitlines():
            if line.startswith("queue_migrate_bridge_") and " " in line:
                k, v = line.rsplit(" ", 1)
                k = k.split("{", 1)[0]
                try:
                    out[k] = out.get(k, 0.0) + float(v)
                except ValueError:
                    pass
        return out

    def active(self):
        m = self.metrics()
        return bool(m and m.get("queue_migrate_bridge_active"))

    def lines(self, text):
        try:
            with open(self.log, errors="replace") as f:
                return sum(1 for line in f if text in line)
        except FileNotFoundError:
            return 0
