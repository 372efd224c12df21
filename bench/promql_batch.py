#!/usr/bin/env python3
"""What Prometheus spends answering the controller-scale fleet's 5,000 distinct PromQL queries of
one round (crates/queue-migrate-bench/benches/controller_scale.rs, `distinct`: 5 query shapes x
1,000 migration names), sent one per request or K per request joined by `or` (each wrapped in
label_replace with its own `qm_q` label, so that no query's series hides another's). Prints
Prometheus's CPU (user + sys from /proc) and the wall time per K, two rounds.

  python3 bench/promql_batch.py [K ...]      # default: 1 10 50

Needs a Prometheus on 127.0.0.1:9090 scraping itself (`scripts/services.sh start prometheus`)
and python3 (standard library only).
"""
import http.client, json, os, sys, time, urllib.parse
K = [int(k) for k in sys.argv[1:]] or [1, 10, 50]
def pid():
    for p in os.listdir('/proc'):
        if p.isdigit():
            try:
                if b'prometheus' in open(f'/proc/{p}/cmdline','rb').read().split(b'\0')[0]:
                    return p
            except OSError: pass
P = pid()
if P is None:
    sys.exit('bench/promql_batch.py: no prometheus process here; run (as root): bash scripts/services.sh start prometheus')
def cpu():
    f = open(f'/proc/{P}/stat').read().rsplit(')',1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
shapes = ['sum(rate(prometheus_http_requests_total{{job!="{n}"}}[1m]))',
          'max(up{{job="prometheus",instance!="{n}"}})',
          'sum(prometheus_tsdb_head_series{{job!="{n}"}})',
          'max(up{{job="prometheus",instance!="{n}"}}) or vector(0)',
          'count(up{{job!="{n}"}})']
queries = [s.format(n=f'scale-{i:04d}') for i in range(1000) for s in shapes]
c = http.client.HTTPConnection('127.0.0.1', 9090)
def get(q, t):
    c.request('GET', '/api/v1/query?' + urllib.parse.urlencode({'query': q, 'time': t}))
    r = c.getresponse(); body = r.read()
    d = json.loads(body)
    assert d['status'] == 'success', body[:300]
    return d['data']['result']
for rnd in range(2):
    for k in K:
        t = f'{time.time():.3f}'
        c0, w0 = cpu(), time.time(); got = 0
        for i in range(0, len(queries), k):
            part = queries[i:i+k]
            if k == 1:
                got += len(get(part[0], t))
            else:
                q = ' or '.join(f'label_replace(({x}), "qm_q", "{j}", "", "")' for j, x in enumerate(part))
                res = get(q, t)
                got += len(res)
        c1, w1 = cpu(), time.time()
        print(f'round {rnd} k={k}: {len(queries)} queries in {len(queries)//k} requests, series {got}, '
              f'Prometheus CPU {c1-c0:.2f} s, wall {w1-w0:.2f} s', flush=True)
