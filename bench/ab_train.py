#!/usr/bin/env python3
"""Two cohort builds side by side on the same training work, alternating,
for checking that a change kept the speed (within 5%).

For each case it runs `cohort train` (one process) or `cohort local`
(W workers) with build A, then build B, REPEATS times, reads samples/s
from each run's JSON report, and prints the medians and B/A. Cases:
  train-r1   cohort train, MNIST LeNet-5, --devices=cpu:1
  train-r2   cohort train, MNIST LeNet-5, --devices=cpu:2 --threads=2
  local-w2   cohort local --workers=2 --threads=1, MNIST LeNet-5
  ps-w2      the same in parameter-server mode (SYNC, 2 shards)
Each run also checks its report: every step ran and the loss is finite.

usage: ab_train.py COHORT_A COHORT_B MNIST_DIR [--repeats 5]
                   [--max-steps 400] [--tolerance 0.05]

Exit status 1 if a run fails or B's median is below (1 - tolerance) x A's
in any case.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MNIST_JOB = os.path.join(ROOT, "examples", "mnist_lenet5.textproto")


def job_file(tmp, steps, ps):
    """The MNIST job cut to `steps` steps, in PS mode (SYNC, 2 shards) if
    asked (`cohort local` has no --max-steps)."""
    with open(MNIST_JOB) as f:
        text = f.read() + f"\nmax_steps: {steps}\n"
    if ps:
        text += "mode: PS\nps { shards: 2 consistency: SYNC }\n"
    path = os.path.join(tmp, "ps.textproto" if ps else "job.textproto")
    with open(path, "w") as f:
        f.write(text)
    return path


def command(cohort, case, job, mnist, report):
    common = [f"--job={job}", f"--data-dir={mnist}", f"--report={report}"]
    if case == "train-r1":
        return [cohort, "train", "--quiet", "--devices=cpu:1"] + common
    if case == "train-r2":
        return [cohort, "train", "--quiet", "--devices=cpu:2",
                "--threads=2"] + common
    return [cohort, "local", "--workers=2", "--threads=1"] + common + (
        ["--shards=2"] if case == "ps-w2" else [])


def run(cohort, case, job, mnist, tmp):
    report = os.path.join(tmp, "report.json")
    if os.path.exists(report):
        os.remove(report)
    out = subprocess.run(command(cohort, case, job, mnist, report),
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"{cohort} {case} failed ({out.returncode}): "
                 f"{out.stderr.strip()[-400:]}")
    with open(report) as f:
        r = json.load(f)
    rate = r.get("samples_per_s") or r.get("result", {}).get("samples_per_s")
    loss = r.get("final_loss", r.get("result", {}).get("final_loss", 0))
    if not rate or not math.isfinite(loss):
        sys.exit(f"{cohort} {case}: no rate or a non-finite loss in {r}")
    return rate


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cohort_a")
    ap.add_argument("cohort_b")
    ap.add_argument("mnist")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-steps", type=int, default=400)
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--cases", default="train-r1,train-r2,local-w2,ps-w2")
    args = ap.parse_args()
    ok = True
    print(f"samples/s, median of {args.repeats} alternating runs, "
          f"{args.max_steps} steps")
    print("| case | A | B | B/A |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases.split(","):
            job = job_file(tmp, args.max_steps, case == "ps-w2")
            a, b = [], []
            for _ in range(args.repeats):
                a.append(run(args.cohort_a, case, job, args.mnist, tmp))
                b.append(run(args.cohort_b, case, job, args.mnist, tmp))
            ma, mb = statistics.median(a), statistics.median(b)
            print(f"| {case} | {ma:.0f} | {mb:.0f} | {mb / ma:.3f} |")
            if mb < (1 - args.tolerance) * ma:
                ok = False
    print("PASS" if ok else f"FAILED: B more than {args.tolerance:.0%} slower")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
