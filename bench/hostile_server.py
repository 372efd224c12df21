#!/usr/bin/env python3
"""Hostile indicator sources for bench/hostile.sh (issue 43): on 127.0.0.1:PORT,
- GET /metrics: a /metrics target with SERIES series (default 1,000,000; short names, ~10 bytes
  a line, so that the whole target fits under the 16 MiB body cap and the series cap is what
  stops it);
- /api/v1/query_range and /api/v1/query: a 63 MB matrix answer (many series of many points),
  with its Content-Length, or streamed without one (to be read until the connection closes)
  when the third argument is `stream`.
Each answer to a query is counted on standard error ("answered N queries")."""
import http.server
import sys

PORT = int(sys.argv[1])
SERIES = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
STREAM = len(sys.argv) > 3 and sys.argv[3] == "stream"
ANSWERED = [0]

METRICS = "app_new_consumer_connected 1\n" + "".join(f"s{i:07d} 1\n" for i in range(SERIES - 1))
METRICS = METRICS.encode()


def big_matrix():
    point = '[1795996800,"1"],'
    per_series = 2000
    series = []
    size = 0
    i = 0
    while size < 63_000_000:
        s = '{"metric":{"i":"%d"},"values":[%s]}' % (i, (point * per_series)[:-1])
        series.append(s)
        size += len(s) + 1
        i += 1
    return ('{"status":"success","data":{"resultType":"matrix","result":[%s]}}' % ",".join(series)).encode()


MATRIX = big_matrix()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, body, kind):
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def query(self):
        ANSWERED[0] += 1
        print(f"answered {ANSWERED[0]} queries", file=sys.stderr, flush=True)
        if not STREAM:
            self.answer(MATRIX, "application/json")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for at in range(0, len(MATRIX), 1 << 20):
                self.wfile.write(MATRIX[at:at + (1 << 20)])
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):
        if self.path.startswith("/metrics"):
            self.answer(METRICS, "text/plain")
        else:
            self.query()

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        self.query()


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
