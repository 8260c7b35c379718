#!/usr/bin/env python3
"""Runs cohort's seed_workloads and the LibTorch yardstick side by side.

For each workload the two binaries alternate REPEATS times (so that machine
noise hits both alike); the medians and their ratio are printed as a
markdown table, and the exit status is 1 if cohort misses a workload's
goal: at least as fast as LibTorch, 1.5x on mobilenet and on
gpt (a gpt sample is a window of 256 tokens). The
benchmark checks its own claim.

usage: compare_seed_workloads.py COHORT_BIN TORCH_BIN [--threads N] [--repeats K]
"""
import argparse
import statistics
import subprocess
import sys

import blas_env

STEPS = {"lenet": 200, "conv1d": 40, "mlp": 20000, "mobilenet": 60, "gpt": 4}
# cohort's samples/s over LibTorch's that each workload must reach.
GOAL = {"mobilenet": 1.5, "gpt": 1.5}


def rate(binary, workload, steps, threads):
    env = blas_env.bench_env(threads)  # thread bounds, OpenBLAS's core
    out = subprocess.run([binary, workload, str(steps), str(threads)],
                         check=True, capture_output=True, text=True,
                         env=env).stdout
    name, key, value = out.split()
    assert name == workload and key == "samples_per_s", out
    return float(value)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cohort")
    p.add_argument("torch")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--workloads", default="lenet,conv1d,mlp,mobilenet,gpt")
    a = p.parse_args()
    print(f"threads {a.threads}, median of {a.repeats} alternating runs; "
          f"{blas_env.describe()}\n")
    print("| workload | cohort samples/s | LibTorch samples/s | ratio |")
    print("|---|---|---|---|")
    missed = []
    for w in a.workloads.split(","):
        ours, theirs = [], []
        for _ in range(a.repeats):
            ours.append(rate(a.cohort, w, STEPS[w], a.threads))
            theirs.append(rate(a.torch, w, STEPS[w], a.threads))
        m_ours, m_theirs = statistics.median(ours), statistics.median(theirs)
        ratio = m_ours / m_theirs
        if ratio < GOAL.get(w, 1.0):
            missed.append(f"{w} {ratio:.2f}x (goal {GOAL.get(w, 1.0)}x)")
        print(f"| {w} | {m_ours:,.0f} | {m_theirs:,.0f} | {ratio:.2f}x |",
              flush=True)
    if missed:
        print("\ngoal missed: " + ", ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
