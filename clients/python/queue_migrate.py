"""queue-migrate for Python producers (3.8+, standard library only).

The slice function, a Router that follows the routing document (the daemon's long-poll with
ETag, or a file), and the route stamp's header and JSON forms: the same rules as the Rust crate
(docs/routing.md).

    import queue_migrate as qm
    router = qm.Router("orders", slices=128, brokers={"old": "rabbitmq", "new": "nats"})
    follower = router.follow_http("http://127.0.0.1:8480")   # a daemon thread
    route = router.route(order_id)          # Route(target="old"|"new", slice, generation)
    stamp = router.stamp(route, "checkout", qm.now_ms())
    publish(route.target, qm.stamp_headers(stamp), body)
    metrics_text += router.metrics_text()   # queue_migrate_routing_applied_generation
    follower.stop()
"""

import hashlib
import itertools
import json
import os
import socket
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple, Union

MAX_DOCUMENT_BYTES = 64 * 1024


def slice_of(key: str, slices: int) -> int:
    """First four bytes of SHA-256 over the key's UTF-8, big-endian, modulo slices (0 counts as 1)."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % max(slices, 1)


def now_ms() -> int:
    """The wall clock in milliseconds since the Unix epoch (a stamp's `at`)."""
    return time.time_ns() // 1_000_000


class Route(NamedTuple):
    """Where one message goes, and under which generation that was decided."""

    target: str  # "old" or "new"
    slice: int
    generation: int


def route_of(doc: dict, key: str) -> Route:
    """The route of `key` under a routing document: new when its slice is below slices_migrated."""
    s = slice_of(key, doc["slices_total"])
    return Route("new" if s < doc["slices_migrated"] else "old", s, doc["generation"])


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def incoherent(doc) -> Optional[str]:
    """Why a document is refused, or None if it is coherent (the Router's rule)."""
    if not isinstance(doc, dict):
        return "not an object"
    if not isinstance(doc.get("migration"), str):
        return "migration is not a string"
    g = doc.get("generation")
    if not _is_int(g) or g < 0:
        return "generation is not a non-negative integer"
    total, migrated = doc.get("slices_total"), doc.get("slices_migrated")
    if not _is_int(total) or not 1 <= total <= 0xFFFFFFFF:
        return "slices_total must be 1 to 2^32-1"
    if not _is_int(migrated) or not 0 <= migrated <= total:
        return "slices_migrated must be 0 to slices_total"
    consume = doc.get("consume")
    if not isinstance(consume, list) or not consume or any(s not in ("old", "new") for s in consume):
        return "consume must list old and/or new"
    brokers = doc.get("brokers")
    if not isinstance(brokers, dict) or not all(isinstance(brokers.get(s), str) for s in ("old", "new")):
        return "brokers must name old and new"
    return None


class RoutingError(ValueError):
    """A routing document refused (incoherent, or for another migration)."""


class OtherMigrationError(RoutingError):
    """A routing document for another migration than the router's (.expected, .got)."""

    def __init__(self, expected: str, got: str):
        super().__init__(
            f"routing document is for migration {json.dumps(got)}, "
            f"but this router follows {json.dumps(expected)}")
        self.expected = expected
        self.got = got


def _file_migration(path: str) -> Optional[str]:
    """The migration a routing file names now, or None if it cannot be read as JSON."""
    try:
        if os.stat(path).st_size > MAX_DOCUMENT_BYTES:
            return None
        with open(path, "rb") as f:
            doc = json.loads(f.read(MAX_DOCUMENT_BYTES + 1))
    except (OSError, ValueError):
        return None
    return doc.get("migration") if isinstance(doc, dict) and isinstance(doc.get("migration"), str) else None


class StampError(ValueError):
    """A route stamp that is missing, repeated or not in the wire format; the message names the field."""


class Follower:
    """A running follower (a daemon thread): status() says how it is doing; stop() ends it."""

    def __init__(self):
        self._stop = threading.Event()
        self.accepted = 0
        self.consecutive_failures = 0
        self.last_error: Optional[str] = None
        self.thread: Optional[threading.Thread] = None

    def status(self) -> dict:
        return {
            "accepted": self.accepted,
            "consecutive_failures": self.consecutive_failures,
            "last_error": self.last_error,
        }

    def stop(self) -> None:
        self._stop.set()

    def _ok(self, accepted: bool) -> None:
        self.accepted += int(accepted)
        self.consecutive_failures = 0
        self.last_error = None

    def _failed(self, e: BaseException) -> None:
        self.consecutive_failures += 1
        self.last_error = str(e)


#: The metric a router exposes: the generation it applied, by migration and producer.
APPLIED_METRIC = "queue_migrate_routing_applied_generation"
_ROUTERS = itertools.count(1)


def _label_value(v: str) -> str:
    """A Prometheus label value, escaped (backslash, double quote, line feed)."""
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Router:
    """The latest routing document of one migration and route(key) over it (thread-safe).

    Until a first document: every key to old, generation 0, slices over `slices`, broker names
    from `brokers` (the plan's names: one label from the first message on). A document replaces
    the current one only if coherent, for the router's migration and of a higher generation;
    another migration's document raises OtherMigrationError (offer, follow_file at start) or is
    the follower's last_error. A Router without `migration` is deprecated: it takes the first
    document's migration. `producer` is the id it reports on every long-poll (with the
    generation it applied, so that the daemon learns who follows) and in metrics_text();
    default HOSTNAME-PID-N.
    """

    def __init__(self, migration: Optional[str] = None, slices: int = 128,
                 brokers: Optional[Dict[str, str]] = None, producer: Optional[str] = None):
        if isinstance(migration, int) and not isinstance(migration, bool):
            # The old positional form Router(slices, brokers): kept one release.
            migration, slices, brokers = None, migration, brokers if brokers is not None else (
                slices if isinstance(slices, dict) else None)
        if migration is None:
            warnings.warn("Router() without a migration takes another migration's document: "
                          "give the migration's name", DeprecationWarning, stacklevel=2)
        elif not isinstance(migration, str) or not migration:
            raise TypeError("migration must be a non-empty string")
        self.slices = max(slices, 1)
        self.brokers = brokers
        self.migration = migration
        self._doc: Optional[dict] = None
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.producer = (f"{socket.gethostname()}-{os.getpid()}-{next(_ROUTERS)}"
                         if producer is None else str(producer))

    def metrics_text(self) -> str:
        """Prometheus text: queue_migrate_routing_applied_generation{migration, producer}, the
        generation this router applied (0 before the first document). Serve it on your /metrics."""
        out = (f"# HELP {APPLIED_METRIC} The routing document's generation this producer applied "
               f"(0: none yet, every key to old).\n# TYPE {APPLIED_METRIC} gauge\n")
        if self.migration is not None:
            out += (f'{APPLIED_METRIC}{{migration="{_label_value(self.migration)}",'
                    f'producer="{_label_value(self.producer)}"}} {self.generation}\n')
        return out

    def route(self, key: str) -> Route:
        doc = self._doc  # one read of one reference: a whole document
        if doc is None:
            return Route("old", slice_of(key, self.slices), 0)
        return route_of(doc, key)

    @property
    def document(self) -> Optional[dict]:
        return self._doc

    @property
    def generation(self) -> int:
        doc = self._doc
        return 0 if doc is None else doc["generation"]

    def consume(self) -> List[str]:
        doc = self._doc
        return ["old"] if doc is None else list(doc["consume"])

    def broker_name(self, side: str) -> Optional[str]:
        """The broker's name on `side`: the document's, else the names given; None if neither."""
        doc = self._doc
        names = self.brokers if doc is None else doc["brokers"]
        return None if names is None else names.get(side)

    def offer(self, doc: dict) -> str:
        """'accepted' or 'not newer'; raises RoutingError for a refused document."""
        why = incoherent(doc)
        if why:
            raise RoutingError(f"routing document refused: {why}")
        with self._lock:
            expected = self._doc["migration"] if self._doc is not None else self.migration
            if expected is not None and doc["migration"] != expected:
                raise OtherMigrationError(expected, doc["migration"])
            if self._doc is not None and doc["generation"] <= self._doc["generation"]:
                return "not newer"
            self._doc = doc
            self._changed.notify_all()
            return "accepted"

    def wait_for_generation(self, generation: int, timeout: float) -> bool:
        """Block until a document of at least `generation` is current, or `timeout` seconds pass."""
        with self._lock:
            return self._changed.wait_for(lambda: self.generation >= generation, timeout)

    def stamp(self, route: Route, producer: str, at_ms: int) -> dict:
        """The route stamp of a message routed by `route`, published by `producer` at `at_ms`."""
        broker = self.broker_name(route.target)
        if broker is None:
            raise StampError("route stamp: x-qm-broker is unknown: give the plan's broker names "
                             "to Router(brokers=...)")
        return new_stamp(route, broker, producer, at_ms)

    def follow_http(self, base_url: str, migration: Optional[str] = None,
                    token: Optional[str] = None, wait_seconds: int = 30,
                    min_backoff: float = 1.0, max_backoff: float = 30.0) -> Follower:
        """Long-poll GET {base}/v1/migrations/{migration}/routing?wait=30s&producer=ID&applied=G
        with If-None-Match (the daemon learns who follows and which generation each applied).

        A failure keeps the last good document and retries after 1 s, doubling up to 30 s; never
        more than one request a second that brings nothing new. `migration` defaults to the
        router's; another name raises OtherMigrationError.
        """
        migration = self.migration if migration is None else migration
        if not migration:
            raise TypeError("follow_http needs the migration's name")
        if self.migration is not None and migration != self.migration:
            raise OtherMigrationError(self.migration, migration)
        if self.migration is None:
            self.migration = migration
        url = (f"{base_url.rstrip('/')}/v1/migrations/"
               f"{urllib.parse.quote(migration, safe='')}/routing?wait={wait_seconds}s"
               f"&producer={urllib.parse.quote(self.producer, safe='')}")
        follower = Follower()

        def loop():
            backoff = min_backoff
            while not follower._stop.is_set():
                started = time.monotonic()
                brought = False
                doc = self._doc  # one document: the validator and the generation applied
                applied = 0 if doc is None else doc["generation"]
                request = urllib.request.Request(f"{url}&applied={applied}")
                if doc is not None:
                    request.add_header("If-None-Match", f'"{applied}"')
                if token:
                    request.add_header("Authorization", f"Bearer {token}")
                try:
                    try:
                        with urllib.request.urlopen(request, timeout=wait_seconds + 15) as r:
                            body = r.read(MAX_DOCUMENT_BYTES + 1)
                            if len(body) > MAX_DOCUMENT_BYTES:
                                raise RoutingError(f"document larger than {MAX_DOCUMENT_BYTES} bytes")
                            brought = self.offer(json.loads(body)) == "accepted"
                    except urllib.error.HTTPError as e:
                        if e.code != 304:
                            raise
                    follower._ok(brought)
                    backoff = min_backoff
                    if not brought:
                        left = min_backoff - (time.monotonic() - started)
                        if left > 0:
                            follower._stop.wait(left)
                except Exception as e:  # noqa: BLE001 - any failure keeps the last good document
                    follower._failed(e)
                    follower._stop.wait(backoff)
                    backoff = min(backoff * 2, max_backoff)

        follower.thread = threading.Thread(target=loop, name="qm-follow-http", daemon=True)
        follower.thread.start()
        return follower

    def follow_file(self, path: str, interval: float = 1.0) -> Follower:
        """Read the routing file now and whenever its mtime, size or inode changes.

        Raises OtherMigrationError if the file names another migration than the router's now (the
        wrong file); later refusals, like a missing or malformed file, are the follower's
        last_error.
        """
        named = _file_migration(path)
        if self.migration is not None and named is not None and named != self.migration:
            raise OtherMigrationError(self.migration, named)
        follower = Follower()
        seen = [None]

        def check():
            try:
                st = os.stat(path)
                ident = (st.st_mtime_ns, st.st_size, st.st_ino)
                if ident == seen[0]:
                    return
                if st.st_size > MAX_DOCUMENT_BYTES:
                    raise RoutingError(f"{path} is larger than {MAX_DOCUMENT_BYTES} bytes")
                with open(path, "rb") as f:
                    doc = json.loads(f.read(MAX_DOCUMENT_BYTES + 1))
                seen[0] = ident
                follower._ok(self.offer(doc) == "accepted")
            except Exception as e:  # noqa: BLE001 - a bad file keeps the last good document
                follower._failed(e)

        check()

        def loop():
            while not follower._stop.wait(interval):
                check()

        follower.thread = threading.Thread(target=loop, name="qm-follow-file", daemon=True)
        follower.thread.start()
        return follower


# --- The route stamp ---------------------------------------------------------------------------

HEADERS = ("x-qm-broker", "x-qm-route", "x-qm-slice", "x-qm-generation", "x-qm-producer", "x-qm-at")
ROUTES = ("old", "new", "bridge", "replay")
_NAME = re.compile(r"[A-Za-z0-9._\-:@/+]{1,128}")
_DIGITS = re.compile(r"[0-9]{1,20}")
_U32, _U64, _I64 = 2**32 - 1, 2**64 - 1, 2**63 - 1


def _invalid(field: str, value, expected: str) -> StampError:
    return StampError(f"route stamp: {field} = {str(value)[:64]!r} is invalid: expected {expected}")


def _name(field: str, value) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise _invalid(field, value, "1 to 128 characters of A-Z a-z 0-9 . _ - : @ / +")
    return value


def new_stamp(route: Route, broker: str, producer: str, at_ms: int) -> dict:
    """A stamp {broker, route, slice, generation, producer, at} for a message routed by `route`."""
    return {
        "broker": _name("x-qm-broker", broker),
        "route": route.target,
        "slice": route.slice,
        "generation": route.generation,
        "producer": _name("x-qm-producer", producer),
        "at": max(0, int(at_ms)),
    }


def stamp_headers(stamp: dict) -> Dict[str, str]:
    """The six headers, lowercase names, decimal values."""
    return {
        "x-qm-broker": stamp["broker"],
        "x-qm-route": stamp["route"],
        "x-qm-slice": str(stamp["slice"]),
        "x-qm-generation": str(stamp["generation"]),
        "x-qm-producer": stamp["producer"],
        "x-qm-at": str(stamp["at"]),
    }


def _decimal(field: str, text: str, top: int) -> int:
    if not _DIGITS.fullmatch(text) or int(text) > top:
        raise _invalid(field, text, f"a decimal integer from 0 to {top}")
    return int(text)


def stamp_from_headers(headers: Union[Dict[str, str], Iterable[Tuple[str, str]]]) -> dict:
    """Read a stamp from headers (a dict or (name, value) pairs; names case-insensitive)."""
    pairs = headers.items() if isinstance(headers, dict) else headers
    found: Dict[str, str] = {}
    for name, value in pairs:
        lower = str(name).lower()
        if lower not in HEADERS:
            continue
        if lower in found:
            raise StampError(f"route stamp: header {lower} appears more than once")
        found[lower] = str(value)
    for h in HEADERS:
        if h not in found:
            raise StampError(f"route stamp: {h} is missing")
    route = found["x-qm-route"]
    if route not in ROUTES:
        raise _invalid("x-qm-route", route, "old, new, bridge or replay")
    return {
        "broker": _name("x-qm-broker", found["x-qm-broker"]),
        "route": route,
        "slice": _decimal("x-qm-slice", found["x-qm-slice"], _U32),
        "generation": _decimal("x-qm-generation", found["x-qm-generation"], _U64),
        "producer": _name("x-qm-producer", found["x-qm-producer"]),
        "at": _decimal("x-qm-at", found["x-qm-at"], _I64),
    }


def stamp_to_json(stamp: dict) -> dict:
    """The JSON form (the payload's `route` field)."""
    return {k: stamp[k] for k in ("broker", "route", "slice", "generation", "producer", "at")}


def stamp_from_json(value) -> dict:
    """Read the JSON form; unknown fields are ignored."""
    if not isinstance(value, dict):
        raise StampError("route stamp: the route field is not a JSON object")

    def get(name):
        if name not in value:
            raise StampError(f"route stamp: route.{name} is missing")
        return value[name]

    def integer(name, top):
        v = get(name)
        if not _is_int(v) or not 0 <= v <= top:
            raise _invalid(f"route.{name}", json.dumps(v), f"an integer from 0 to {top}")
        return v

    route = get("route")
    if route not in ROUTES:
        raise _invalid("route.route", json.dumps(route), "old, new, bridge or replay")
    return {
        "broker": _name("route.broker", get("broker")),
        "route": route,
        "slice": integer("slice", _U32),
        "generation": integer("generation", _U64),
        "producer": _name("route.producer", get("producer")),
        "at": integer("at", _I64),
    }
