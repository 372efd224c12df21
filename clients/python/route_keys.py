"""python3 clients/python/route_keys.py DAEMON_URL MIGRATION SLICES OLD_NAME NEW_NAME

Follows the daemon's routing document; for each stdin line {"keys": [...], "generation": G}
waits (up to 10 s) until the document of generation >= G arrived, then prints one line:
{"generation": g, "routes": [[target, slice, broker], ...]}. What tests/integration/library/clients.rs compares with
the Rust Router and the Node.js module."""

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import queue_migrate as qm  # noqa: E402


def main():
    url, migration, slices, old, new = sys.argv[1:6]
    router = qm.Router(migration, slices=int(slices), brokers={"old": old, "new": new},
                       producer="python-producer")
    follower = router.follow_http(url, migration, wait_seconds=5)
    for line in sys.stdin:
        if not line.strip():
            continue
        ask = json.loads(line)
        router.wait_for_generation(ask["generation"], 10.0)
        routes = []
        for key in ask["keys"]:
            r = router.route(key)
            routes.append([r.target, r.slice, router.stamp(r, "python-producer", qm.now_ms())["broker"]])
        print(json.dumps({"generation": router.generation, "routes": routes}), flush=True)
    follower.stop()


if __name__ == "__main__":
    main()
