#!/usr/bin/env python3
"""Counters for bench/judge_backtest.sh, as an app exports them and Prometheus scrapes them.

Written for this bench alone, apart from `src/sim` (it shares no code and no model with the
simulator): two routes (`old`, `new`), each served by two pods; each pod exports
`qm_bt_handled_total` (every message handled, failed ones included) and `qm_bt_failed_total`,
scraped every SCRAPE seconds (3 s past the scrape grid). Each pod restarts about every 3 hours
(exponential gaps): both its counters drop to what it counted since the restart (a counter reset
the judge must handle per series). Output: OpenMetrics for `promtool tsdb create-blocks-from
openmetrics`, the series one after the other, each in time order.

Traffic per route: Poisson messages at `--traffic` per second, each failing with the route's
rate; per case:

- `bursts`: identical routes (1%), plus bursts of 50 failed messages at once, 6 an hour on each
  side at independent Poisson times. Truth: ratio 1.
- `boundary`: new's rate exactly 1.2x old's (1.2% vs 1%), with bursts of 50 failed messages at
  6 an hour on old and 7.2 an hour on new (so that new's failures are exactly 1.2x old's in
  expectation, bursts included). Truth: ratio 1.2, the boundary.
- `overdispersed`: each second's failure count is Poisson with a mean that is itself random,
  Gamma with the second's expected failures as its shape and scale 1, so the count's variance is
  twice the binomial's; new 1.2x old. Truth: ratio 1.2.
- `share`: both routes fail at the same rate every second (1%, and 5% while a shared dependency is
  slow: episodes at 4 an hour, each 1 to 5 minutes long); while the dependency is slow a heavy
  key's batches go to new (300 msg/s instead of 100), so new's share of the traffic moves with
  the failure rate. Truth: ratio 1.
- `plain`: identical routes (1%), nothing else. Truth: ratio 1.
- `ratio12`: new 1.2x old, nothing else (the scrape rows). Truth: ratio 1.2.
- `doubled`: new 2x old (2% vs 1%). Truth: ratio 2.
"""
import argparse
import math
import random
import sys

CASES = {
    # name: (new/old failure ratio, bursts per hour old, new, overdispersed, moving share)
    "bursts": (1.0, 6.0, 6.0, False, False),
    "boundary": (1.2, 6.0, 7.2, False, False),
    "overdispersed": (1.2, 0.0, 0.0, True, False),
    "share": (1.0, 0.0, 0.0, False, True),
    "plain": (1.0, 0.0, 0.0, False, False),
    "ratio12": (1.2, 0.0, 0.0, False, False),
    "doubled": (2.0, 0.0, 0.0, False, False),
}
BURST = 50
RESTART_EVERY_S = 3 * 3600
SLOW_PER_HOUR, SLOW_RATE, HEAVY_TRAFFIC = 4.0, 0.05, 300.0


def poisson(rng, mean):
    """An exact Poisson draw (Knuth's product of uniforms, in pieces of mean at most 20)."""
    k = 0
    while mean > 0:
        piece = min(mean, 20.0)
        mean -= piece
        limit, product = math.exp(-piece), rng.random()
        while product > limit:
            k += 1
            product *= rng.random()
    return k


def big_poisson(rng, mean):
    """A Poisson draw for large means (hundreds and more): normal, rounded, never negative."""
    if mean < 200:
        return poisson(rng, mean)
    return max(0, round(rng.gauss(mean, math.sqrt(mean))))


def halves(rng, n):
    """n split into two pods' shares, each message to either with probability 1/2 (exact)."""
    first = bin(rng.getrandbits(n)).count("1") if n > 0 else 0
    return first, n - first


def arrivals(rng, per_hour, seconds):
    """Times (seconds) of a Poisson process of `per_hour` over [0, seconds)."""
    out, t = [], 0.0
    if per_hour <= 0:
        return out
    while True:
        t += rng.expovariate(per_hour / 3600.0)
        if t >= seconds:
            return out
        out.append(t)


def episodes(rng, seconds):
    """The slow dependency's episodes: (start, end) seconds, not overlapping."""
    out, t = [], 0.0
    while True:
        t += rng.expovariate(SLOW_PER_HOUR / 3600.0)
        if t >= seconds:
            return out
        end = t + rng.uniform(60, 300)
        out.append((t, end))
        t = end


def overlap(spans, a, b, start):
    """Seconds of [a, b) inside `spans` (sorted), from index `start`; and the next start."""
    total, i = 0.0, start
    while i < len(spans) and spans[i][1] <= a:
        i += 1
    j = i
    while j < len(spans) and spans[j][0] < b:
        total += max(0.0, min(b, spans[j][1]) - max(a, spans[j][0]))
        j += 1
    return total, i


def generate(case, hours, scrape, traffic, base, seed):
    """Per route and pod, the two counters' values at each scrape."""
    ratio, bursts_old, bursts_new, overdispersed, moving = CASES[case]
    rng = random.Random(seed)
    seconds = hours * 3600
    n = seconds // scrape
    slow = episodes(rng, seconds) if moving else []
    out = {}
    for route, rate, per_hour in (("old", base, bursts_old), ("new", base * ratio, bursts_new)):
        burst_at = [0] * n
        for t in arrivals(rng, per_hour, seconds):
            burst_at[int(t) // scrape] += BURST
        handled = [[0] * n, [0] * n]
        failed = [[0] * n, [0] * n]
        totals = [[0, 0], [0, 0]]  # per pod: handled, failed since its last restart
        next_restart = [rng.expovariate(1 / RESTART_EVERY_S) for _ in range(2)]
        cursor = 0
        for k in range(n):
            a, b = k * scrape, (k + 1) * scrape
            slow_s, cursor = overlap(slow, a, b, cursor) if moving else (0.0, 0)
            calm_s = scrape - slow_s
            if moving and route == "new":
                events_mean = traffic * calm_s + HEAVY_TRAFFIC * slow_s
                fail_mean = traffic * calm_s * rate + HEAVY_TRAFFIC * slow_s * SLOW_RATE
            else:
                events_mean = traffic * scrape
                fail_mean = traffic * (calm_s * rate + slow_s * SLOW_RATE)
            if overdispersed:
                # A sum of `scrape` independent Gamma(mu_s, 1) means is Gamma(scrape * mu_s, 1).
                fail_mean = rng.gammavariate(fail_mean, 1.0) if fail_mean > 0 else 0.0
            fails = big_poisson(rng, fail_mean)
            events = max(big_poisson(rng, events_mean), fails)
            fails += burst_at[k]
            events += burst_at[k]
            ev, fa = halves(rng, events), halves(rng, fails)
            for pod in (0, 1):
                if b >= next_restart[pod]:
                    # Restarted in this interval: counts from 0 since (what it counted after).
                    totals[pod] = [0, 0]
                    next_restart[pod] = b + rng.expovariate(1 / RESTART_EVERY_S)
                totals[pod][0] += ev[pod]
                totals[pod][1] += fa[pod]
                handled[pod][k] = totals[pod][0]
                failed[pod][k] = totals[pod][1]
        out[route] = (handled, failed)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", required=True, choices=sorted(CASES))
    p.add_argument("--hours", type=int, required=True)
    p.add_argument("--start", type=int, required=True, help="the first scrape grid time, epoch seconds")
    p.add_argument("--scrape", type=int, default=10, help="scrape interval, seconds")
    p.add_argument("--traffic", type=float, default=100.0, help="messages per second per route")
    p.add_argument("--base-rate", type=float, default=0.01, help="old's failure rate")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    data = generate(a.case, a.hours, a.scrape, a.traffic, a.base_rate, a.seed)
    with open(a.out, "w") as f:
        for i, name in enumerate(("qm_bt_handled_total", "qm_bt_failed_total")):
            f.write(f"# TYPE {name} gauge\n")
            for route in ("old", "new"):
                for pod in (0, 1):
                    values = data[route][i][pod]
                    labels = f'{name}{{route="{route}",pod="{route}-{pod}"}} '
                    ts = a.start + 3
                    f.write("".join(f"{labels}{v} {ts + k * a.scrape}\n" for k, v in enumerate(values)))
        f.write("# EOF\n")
    print(f"{a.case}: {a.hours} h, scrape {a.scrape} s, {len(values)} scrapes x 8 series", file=sys.stderr)


if __name__ == "__main__":
    main()
