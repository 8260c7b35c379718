#!/usr/bin/python3
"""Two cohort builds on one standard model at 1 and 2 threads, in pairs.

For checking what a change does to thread scaling on a machine whose speed
drifts by a fifth within minutes. Each round runs build A and build B at
every thread count on bench/standard_models.py's own spec for MODEL, the
order of builds and of thread counts reversed every other round, so that a
drift falls on both builds alike. Prints each run, then per build and
thread count the median samples/s, and per build the median of each
round's own 2-thread/1-thread gain.

  ab_threads.py COHORT_A COHORT_B MODEL [--rounds 4] [--threads 1,2]

A measurement, not a goal: exits 0 unless a run fails or an argument is
wrong.
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standard_models as bench  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("cohort_a")
    p.add_argument("cohort_b")
    p.add_argument("model")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--threads", default="1,2")
    a = p.parse_args()
    bench.checked_models(p, a.model, "MODEL")
    if a.rounds < 1:
        p.error("--rounds: at least 1, got %d" % a.rounds)
    a.threads = bench.checked_threads(p, a.threads)
    a.cohort_a = bench.checked_cohort(p, a.cohort_a, "COHORT_A")
    a.cohort_b = bench.checked_cohort(p, a.cohort_b, "COHORT_B")
    return a


def run_rounds(a, work):
    """{(build, threads): [samples/s per round]}"""
    builds = [("A", a.cohort_a), ("B", a.cohort_b)]
    rates = {}
    for r in range(a.rounds):
        forward = r % 2 == 0
        for build, binary in builds if forward else builds[::-1]:
            for threads in a.threads if forward else a.threads[::-1]:
                rate = bench.cohort_timing(binary, a.model, threads,
                                           work)["rate"]
                rates.setdefault((build, threads), []).append(rate)
                print("round %d  %s  %d threads  %.2f samples/s" %
                      (r, build, threads, rate), flush=True)
    return rates


def report(a, rates):
    print("\n| build | threads | median samples/s | runs |")
    print("|---|---|---|---|")
    for (build, threads), v in sorted(rates.items()):
        print("| %s | %d | %.2f | %s |" % (build, threads, statistics.median(v),
                                           ", ".join("%.2f" % x for x in v)))
    if len(a.threads) < 2:
        return
    low, high = a.threads[0], a.threads[-1]
    for build in ("A", "B"):
        gains = [h / l for l, h in zip(rates[(build, low)],
                                       rates[(build, high)])]
        print("%s: %d threads over %d, median %.3f (%s)" %
              (build, high, low, statistics.median(gains),
               ", ".join("%.2f" % g for g in gains)))


def main():
    a = parse_args()
    with tempfile.TemporaryDirectory() as work:
        bench.prepare_model(a.model, work)
        report(a, run_rounds(a, work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
