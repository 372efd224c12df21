#!/usr/bin/env python3
"""One row of bench/judge_backtest.sh's table from `migrate plan backtest --windows --json`.

Usage: judge_backtest_stats.py CASE_LABEL TRUE_RATIO TOLERANCE STEP ANSWER.json

Each window is one step's judge over one hour. Truth: a ratio at most 1 + tolerance should pass,
above should fail; at exactly 1 + tolerance (the boundary) both a FAIL and a PASS are wrong.
False FAIL = FAILs / windows where it should pass; false PASS = PASSes / windows where it should
fail; decided = (PASS + FAIL) / windows; median and p90 time to a decision over all windows with
the undecided counted as after the hour (censored). Each rate with its 95% Clopper-Pearson
interval. Also prints (to stderr) the most frequent wrong-decision reasons, for the diagnosis.
"""
import collections
import json
import math
import sys


def binom_cdf(k, n, p):
    """P(X <= k), X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0:
        return 1.0
    if p >= 1:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    base = math.lgamma(n + 1)
    return min(1.0, sum(math.exp(base - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq) for i in range(k + 1)))


def solve(f, target):
    """p in [0, 1] with f(p) = target, f decreasing in p (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(k, n, alpha=0.05):
    # lower: P(X >= k) = alpha / 2, i.e. P(X <= k - 1) = 1 - alpha / 2.
    lower = 0.0 if k == 0 else solve(lambda p: binom_cdf(k - 1, n, p), 1 - alpha / 2)
    upper = 1.0 if k == n else solve(lambda p: binom_cdf(k, n, p), alpha / 2)
    return lower, upper


def rate(k, n):
    lo, hi = clopper_pearson(k, n)
    return f"{100 * k / n:.2f}% ({100 * lo:.2f}–{100 * hi:.2f}%)"


def secs(ms):
    return "> 1 h" if ms is None else f"{ms / 1000:.0f} s"


def main():
    label, truth, tolerance, step, path = sys.argv[1:6]
    truth, tolerance = float(truth), float(tolerance)
    answer = json.load(open(path))
    (judge,) = answer["judges"]
    n = judge["windows"]
    boundary = 1 + tolerance
    should_pass = truth <= boundary + 1e-9
    should_fail = truth >= boundary - 1e-9
    ff = rate(judge["failed"], n) if should_pass else "—"
    fp = rate(judge["passed"], n) if should_fail else "—"
    decided = judge["passed"] + judge["failed"]
    print(
        f"| {label} | {truth:g} | {step} | {n} | {ff} | {fp} | {rate(decided, n)} | "
        f"{secs(judge['median_ms'])} / {secs(judge['p90_ms'])} |"
    )
    unread = sum(1 for w in answer["windows"] for d in w["judges"] if (d["reason"] or "").startswith("source "))
    if unread:
        print(f"  {label}: WARNING: {unread} windows undecided because their counts were not read (source errors)", file=sys.stderr)
    wrong = collections.Counter()
    for w in answer["windows"]:
        (d,) = w["judges"]
        if (d["decision"] == "fail" and should_pass) or (d["decision"] == "pass" and should_fail):
            reason = (d["reason"] or "PASS").split(":")[0][:160]
            wrong[(d["decision"], reason)] += 1
    for (decision, reason), count in wrong.most_common(3):
        print(f"  {label}: {count} wrong {decision.upper()}: {reason}", file=sys.stderr)


if __name__ == "__main__":
    main()
