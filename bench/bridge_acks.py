#!/usr/bin/env python3
"""What the ack pattern costs RabbitMQ: consume N pre-loaded messages (nothing published) with
prefetch P and settle them

  multiple  every K deliveries, one basic.ack multiple=true (what the shovel does on confirms)
  single    each delivery on its own, in delivery order (multiple=false)
  shuffled  each delivery on its own, in random order with ~P/2 outstanding (multiple=false): the
            pattern of `migrate bridge`, whose forwards complete in any order across keys

and report the consume rate, RabbitMQ's CPU (beam.smp user+sys) per message and the queue
process's Erlang reductions per message.

  python3 bench/bridge_acks.py [--n 50000] [--prefetch 256 1024] [--rounds 2]

Standard library only (the AMQP client of bench/bridge_bench.py); RabbitMQ on loopback, guest.
"""

import argparse
import os
import random
import statistics
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bridge_bench as b  # noqa: E402

def consume(n, prefetch, mode, k, msgs, queue):
    a = b.Amqp()
    m = b.Management()
    a.declare(queue)
    a.purge(queue)
    a.publish_all(queue, msgs)
    time.sleep(6)  # management statistics every 5 s
    r0 = m.call("GET", "/queues/%2f/" + queue)["reductions"]
    beam = b.beam_pid()
    c0 = b.cpu_seconds(beam)
    t0 = time.monotonic()
    a.sock.sendall(b.method(1, 60, 10, struct.pack(">IHB", 0, prefetch, 0)))  # basic.qos
    a.expect(1, 60, 11)
    a.sock.sendall(
        b.method(1, 60, 20, struct.pack(">H", 0) + b.shortstr(queue) + b.shortstr("acks") + b"\x00" + b.table({}))
    )
    a.expect(1, 60, 21)
    rng = random.Random(1)
    got = last = 0
    out, pending = [], []
    ack = lambda tag, multiple: b.method(1, 60, 80, struct.pack(">QB", tag, 1 if multiple else 0))
    while got < n:
        kind, _ch, payload = a.read_frame()
        if kind == 1 and payload[:4] == struct.pack(">HH", 60, 60):  # basic.deliver
            tag = struct.unpack(">Q", payload[5 + payload[4] : 13 + payload[4]])[0]
            got += 1
            if mode == "shuffled":
                pending.append(tag)
                while len(pending) > prefetch // 2 or (got == n and pending):
                    i = rng.randrange(len(pending))
                    pending[i], pending[-1] = pending[-1], pending[i]
                    out.append(ack(pending.pop(), False))
            elif mode == "single":
                out.append(ack(tag, False))
            elif got - last >= k or got == n:
                out.append(ack(tag, True))
                last = got
        if out and len(a.buf) < 7:  # nothing more buffered: flush the acks
            a.sock.sendall(b"".join(out))
            out = []
    if out:
        a.sock.sendall(b"".join(out))
    a.close_cleanly()  # returns once the broker processed every ack
    wall = time.monotonic() - t0
    cpu = b.cpu_seconds(beam) - c0
    time.sleep(6)
    q = m.call("GET", "/queues/%2f/" + queue)
    b.delete_drained(queue)
    return {"rate": n / wall, "beam_us": cpu / n * 1e6, "reductions": (q["reductions"] - r0) / n}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--prefetch", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--k", type=int, default=64, help="deliveries per multiple ack")
    args = ap.parse_args()
    msgs = b.messages(args.n, 1000, 200, 42)
    res = {}
    for rnd in range(args.rounds):
        for p in args.prefetch:
            for mode in ("shuffled", "single", "multiple"):
                r = consume(args.n, p, mode, args.k, msgs, f"bench.acks.{rnd + 1}.{p}.{mode}")
                res.setdefault((p, mode), []).append(r)
                print(f"# round {rnd + 1} prefetch {p} {mode}: {r['rate']:.0f} msg/s, "
                      f"beam {r['beam_us']:.0f} us/msg, queue reductions/msg {r['reductions']:.0f}", flush=True)
    print()
    print("| prefetch | acks | runs | median consume msgs/s | median RabbitMQ CPU µs/msg | median queue reductions/msg |")
    print("|---:|---|---:|---:|---:|---:|")
    for (p, mode), rs in res.items():
        med = lambda key: statistics.median(r[key] for r in rs)
        print(f"| {p} | {mode} | {len(rs)} | {med('rate'):.0f} | {med('beam_us'):.0f} | {med('reductions'):.0f} |")


if __name__ == "__main__":
    sys.exit(main())
