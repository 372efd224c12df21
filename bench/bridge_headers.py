#!/usr/bin/env python3
"""What the bridge's route stamp costs RabbitMQ: its CPU (beam.smp user+sys) per message to accept
a confirmed persistent publish, and to deliver it to a consumer acking every 64 (multiple=true),
for the bench's messages with their 2 headers against the same messages with the 6 route-stamp
headers `migrate bridge` adds. The two kinds alternate order round by round.

  python3 bench/bridge_headers.py [N=50000] [ROUNDS=3]

Standard library only (the AMQP client of bench/bridge_bench.py); RabbitMQ on loopback, guest.
"""

import os
import statistics
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bridge_bench as b  # noqa: E402

# The values are the widths of a real stamp (src/stamp.rs, RouteStamp::headers).
STAMP = {
    "x-qm-broker": "rabbitmq-old",
    "x-qm-route": "old",
    "x-qm-slice": "17",
    "x-qm-generation": "3",
    "x-qm-producer": "bridge",
    "x-qm-at": "1764590000000",
}


def drain(queue, n, beam):
    """Consume the n messages of `queue` (prefetch 256, one multiple ack per 64); CPU and rate."""
    a = b.Amqp()
    c0 = b.cpu_seconds(beam)
    t0 = time.monotonic()
    a.sock.sendall(b.method(1, 60, 10, struct.pack(">IHB", 0, 256, 0)))  # basic.qos
    a.expect(1, 60, 11)
    consume = struct.pack(">H", 0) + b.shortstr(queue) + b.shortstr("h") + b"\x00" + b.table({})
    a.sock.sendall(b.method(1, 60, 20, consume))
    a.expect(1, 60, 21)
    got = last = 0
    while got < n:
        kind, _ch, payload = a.read_frame()
        if kind == 1 and payload[:4] == struct.pack(">HH", 60, 60):  # basic.deliver
            tag = struct.unpack(">Q", payload[5 + payload[4] : 13 + payload[4]])[0]
            got += 1
            if got - last >= 64 or got == n:
                a.sock.sendall(b.method(1, 60, 80, struct.pack(">QB", tag, 1)))
                last = got
    a.close_cleanly()  # returns once the broker processed every ack
    cpu = b.cpu_seconds(beam) - c0
    wall = time.monotonic() - t0
    b.delete_drained(queue)
    return cpu / n * 1e6, n / wall


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    plain = b.messages(n, 1000, 200, 7)
    kinds = {"2 headers": plain, "8 headers": [({**h, **STAMP}, body) for h, body in plain]}
    results = {name: [] for name in kinds}
    beam = b.beam_pid()
    print(f"load average {b.loadavg()}, N {n}, rounds {rounds}")
    for r in range(rounds):
        order = list(kinds) if r % 2 == 0 else list(reversed(kinds))
        for name in order:
            queue = f"bench.headers.{r}.{name[0]}"
            a = b.Amqp()
            a.declare(queue)
            a.purge(queue)
            c0 = b.cpu_seconds(beam)
            t0 = time.monotonic()
            a.publish_all(queue, kinds[name])
            publish = (b.cpu_seconds(beam) - c0) / n * 1e6
            rate = n / (time.monotonic() - t0)
            a.close_cleanly()
            deliver, drained = drain(queue, n, beam)
            results[name].append((publish, deliver))
            print(
                f"round {r} {name}: publish {publish:.1f} µs/msg ({rate:.0f}/s), "
                f"deliver+ack {deliver:.1f} µs/msg ({drained:.0f}/s)",
                flush=True,
            )
    for name, rows in results.items():
        p = statistics.median(x[0] for x in rows)
        d = statistics.median(x[1] for x in rows)
        print(f"{name}: median publish {p:.1f} µs/msg, deliver+ack {d:.1f} µs/msg, sum {p + d:.1f}")


if __name__ == "__main__":
    main()
