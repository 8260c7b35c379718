#!/usr/bin/env python3
"""Samples/s of 1 and of 2 worker processes (1 thread each) on MNIST LeNet-5.

Runs `cohort local --workers=W --threads=1` on examples/mnist_lenet5.textproto
(one epoch; the coordinator's report gives the job's samples/s, the sum over
workers), alternating W = 1, 2 (default collective_wait: AUTO, which spins
when there is a core per worker), and 2 with each explicit collective_wait,
REPEATS times, and prints the medians and the ratios to one worker. Exit
status 1 if 2 workers with the default setting give less than 1.7x one.

usage: scaling.py COHORT MNIST_DIR [--repeats K] [--job FILE]
  (bazel run //bench:scaling -- $PWD/../shared/data/mnist)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(cohort, job, mnist, workers, report):
    subprocess.run([cohort, "local", f"--job={job}", f"--workers={workers}",
                    "--threads=1", f"--data-dir={mnist}", f"--report={report}"],
                   check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    with open(report) as f:
        r = json.load(f)
    return r["samples_per_s"], r["test_accuracy"]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser()
    p.add_argument("cohort", nargs="?",
                   default=os.path.join(here, "..", "cli", "cohort"))
    p.add_argument("mnist")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--job", default=os.path.join(
        here, "..", "examples", "mnist_lenet5.textproto"))
    a = p.parse_args()
    tmp = tempfile.mkdtemp()
    report = os.path.join(tmp, "r.json")
    setups = [("1", a.job, 1), ("2 (default)", a.job, 2)]
    for wait in ("WAIT_SPIN", "WAIT_BLOCK"):
        path = os.path.join(tmp, f"{wait}.textproto")
        with open(a.job) as f, open(path, "w") as o:
            o.write(f.read() + f"\ncluster {{ collective_wait: {wait} }}\n")
        setups.append((f"2, {wait}", path, 2))
    rates = {name: [] for name, _, _ in setups}
    acc = {name: [] for name, _, _ in setups}
    for _ in range(a.repeats):
        for name, job, w in setups:
            rate, accuracy = run(a.cohort, job, a.mnist, w, report)
            rates[name].append(rate)
            acc[name].append(accuracy)
    print("## Workers, LeNet-5 on MNIST, one epoch, 1 thread per worker\n")
    print("| workers | samples/s (median) | vs 1 | runs | test accuracy |")
    print("|---|---|---|---|---|")
    one = statistics.median(rates["1"])
    for name, _, _ in setups:
        m = statistics.median(rates[name])
        print(f"| {name} | {m:,.0f} | {m / one:.2f}x | "
              f"{', '.join(f'{x:,.0f}' for x in rates[name])} | "
              f"{', '.join(f'{100 * x:.2f}%' for x in acc[name])} |")
    ratio = statistics.median(rates["2 (default)"]) / one
    print(f"\n2 workers (default) / 1 worker = {ratio:.2f}x")
    if ratio < 1.7:
        print("CHECK FAILED: 2 workers give less than 1.7x one worker")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
