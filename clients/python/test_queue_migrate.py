"""python3 clients/python/test_queue_migrate.py [VECTORS]: the module against the slice vectors
(tests/fixtures/vectors), the stamp examples of docs/routing.md, the Router's document rules and
the file follower. Exits non-zero on the first failure. Run by tests/integration/library/clients.rs (cargo test)."""

import json
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import queue_migrate as qm  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def raises(f, text):
    try:
        f()
    except ValueError as e:
        assert text in str(e), f"{text!r} not in {e}"
        return
    raise AssertionError(f"no error, expected {text!r}")


def replace(path, text):
    """Write `text` to `path` whole: a temporary file beside it, then a rename over it."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    vectors = sys.argv[1] if len(sys.argv) > 1 else ROOT / "tests/fixtures/vectors/slices.jsonl"
    n = 0
    with open(vectors, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                v = json.loads(line)
                assert qm.slice_of(v["key"], v["slices"]) == v["slice"], v
                n += 1
    assert n > 1000, n

    docs = (ROOT / "docs/routing.md").read_text(encoding="utf-8")

    def block(marker):
        text = docs.split(f"<!-- {marker} -->")[1].split("```")[1]
        return text.split("\n", 1)[1]

    headers = [tuple(l.split(": ", 1)) for l in block("stamp-headers").strip().split("\n")]
    stamp = qm.stamp_from_headers(headers)
    payload = json.loads(block("stamp-json"))
    assert qm.stamp_from_json(payload["route"]) == stamp
    assert qm.stamp_from_headers(qm.stamp_headers(stamp)) == stamp
    assert list(qm.stamp_headers(stamp).items()) == headers
    assert qm.stamp_to_json(stamp) == payload["route"]
    upper = [(k.upper(), v) for k, v in headers] + [("content-type", "x"), ("x-qm-future", "1")]
    assert qm.stamp_from_headers(upper) == stamp
    raises(lambda: qm.stamp_from_headers([h for h in headers if h[0] != "x-qm-slice"]),
           "x-qm-slice is missing")
    raises(lambda: qm.stamp_from_headers(headers + [("X-QM-AT", "1")]),
           "x-qm-at appears more than once")
    for field, bad in [("x-qm-slice", "4294967296"), ("x-qm-slice", "-1"), ("x-qm-slice", "+8"),
                       ("x-qm-generation", " 7"), ("x-qm-at", "1e3"),
                       ("x-qm-at", "9223372036854775808"), ("x-qm-route", "OLD"),
                       ("x-qm-broker", ""), ("x-qm-producer", "has space")]:
        changed = [(k, bad if k == field else v) for k, v in headers]
        raises(lambda: qm.stamp_from_headers(changed), f"{field} = ")

    def doc(generation, migrated):
        return {"migration": "orders", "generation": generation, "state": "slices", "step": 0,
                "paused": False, "slices_total": 128, "slices_migrated": migrated,
                "consume": ["old", "new"], "brokers": {"old": "rabbitmq", "new": "nats"},
                "updated_at": "2026-11-30T00:00:00Z"}

    router = qm.Router("orders", slices=128, brokers={"old": "rabbitmq", "new": "nats"})
    assert router.route("order-0") == ("old", 8, 0)
    assert router.stamp(router.route("order-0"), "checkout", 1)["broker"] == "rabbitmq"
    assert router.offer(doc(7, 9)) == "accepted"
    assert router.route("order-0") == ("new", 8, 7)
    assert router.stamp(router.route("order-0"), "checkout", 1)["broker"] == "nats"
    assert router.offer(doc(6, 0)) == "not newer"
    raises(lambda: router.offer(dict(doc(8, 0), migration="other")), 'migration "other"')
    raises(lambda: router.offer(doc(9, 129)), "slices_migrated")
    assert router.generation == 7
    unnamed = qm.Router("orders")
    raises(lambda: unnamed.stamp(unnamed.route("k"), "p", 0), "x-qm-broker is unknown")

    # Regression (issue 56): a router of `orders` took the `payments` document before its first
    # one (from offer or a file) and stamped `nats`; now refused with an error the caller sees.
    orders = qm.Router("orders", slices=128, brokers={"old": "rabbitmq", "new": "nats"})
    raises(lambda: orders.offer(dict(doc(3, 128), migration="payments")),
           'migration "payments", but this router follows "orders"')
    assert orders.stamp(orders.route("order-0"), "checkout", 1)["broker"] == "rabbitmq"
    raises(lambda: orders.follow_http("http://127.0.0.1:9", "payments"), "payments")
    with tempfile.TemporaryDirectory() as d:
        wrong = os.path.join(d, "payments.routing.json")
        with open(wrong, "w") as f:
            json.dump(dict(doc(3, 128), migration="payments"), f)
        try:
            orders.follow_file(wrong, 0.02)
            raise AssertionError("follow_file took the payments file")
        except qm.OtherMigrationError as e:
            assert e.got == "payments" and e.expected == "orders", e
    assert orders.generation == 0

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "orders.routing.json")
        with open(path, "w") as f:
            json.dump(doc(3, 0), f)
        followed = qm.Router("orders", slices=128)
        follower = followed.follow_file(path, 0.02)
        assert followed.generation == 3
        with open(path, "w") as f:
            f.write("{ not json")
        time.sleep(0.2)
        assert followed.generation == 3 and follower.status()["last_error"]
        with open(path, "w") as f:
            json.dump(doc(4, 128), f)
        assert followed.wait_for_generation(4, 5.0)
        assert followed.route("order-0").target == "new"
        # Rewritten for another migration later: refused, said in the status, routes kept.
        # Written as the controller writes it (a whole file renamed over it): a follower's read
        # between an open(path, "w") and its write took the empty file for the error
        # ("Expecting value"), and the loop below stopped at it.
        replace(path, json.dumps(dict(doc(9, 0), migration="payments")))
        deadline = time.monotonic() + 5
        while not follower.status()["last_error"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert '"payments"' in (follower.status()["last_error"] or ""), follower.status()
        assert followed.generation == 4 and followed.route("order-0").target == "new"
        follower.stop()
    reports_what_it_applied(doc)
    print(f"ok: {n} vectors, stamp wire format, router rules, another migration refused, "
          "file follower, producer id and applied generation on the long-poll and as a metric")


def reports_what_it_applied(doc):
    """Issue 58: the producer says which generation it applied, on the long-poll and as a metric."""
    import http.server
    import threading
    import urllib.parse

    asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            asked.append(self.path)
            if self.headers.get("If-None-Match") == '"5"':
                time.sleep(0.05)
                self.send_response(304)
                self.send_header("ETag", '"5"')
                self.end_headers()
                return
            body = json.dumps(doc(5, 2)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    router = qm.Router("orders", slices=128, producer='py "test"\n1')
    assert ('queue_migrate_routing_applied_generation{migration="orders",'
            'producer="py \\"test\\"\\n1"} 0\n') in router.metrics_text(), router.metrics_text()
    default = qm.Router("orders").producer
    assert default.endswith(f"-{os.getpid()}-" + default.rsplit("-", 1)[1]), default
    follower = router.follow_http(f"http://127.0.0.1:{server.server_address[1]}", wait_seconds=1,
                                  min_backoff=0.02)
    deadline = time.monotonic() + 10
    while len(asked) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    follower.stop()
    server.shutdown()
    params = [urllib.parse.parse_qs(urllib.parse.urlsplit(u).query) for u in asked[:2]]
    assert params[0]["producer"] == ['py "test"\n1'], params
    assert params[0]["applied"] == ["0"] and params[1]["applied"] == ["5"], params
    assert params[1]["wait"] == ["1s"], params
    assert 'n1"} 5\n' in router.metrics_text(), router.metrics_text()
    assert qm.APPLIED_METRIC == "queue_migrate_routing_applied_generation"


if __name__ == "__main__":
    main()
