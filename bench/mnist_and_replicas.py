#!/usr/bin/env python3
"""One epoch of LeNet-5 on MNIST: cohort against LibTorch, and replica scaling.

1. `cohort train --job=examples/mnist_lenet5.textproto --threads=1` and the
   LibTorch program of the same work (bench/torch_mnist_lenet5.cc) alternate
   REPEATS times; wall time of the whole command (data loading included) and
   test accuracy are printed, with medians.
2. The same job with --replicas=cpu:1 and cpu:2 (samples/s from --report),
   alternating; the ratio is printed.
Exit status 1 if cohort's median wall time is not below LibTorch's, if its
accuracy is below 98.0%, or if cpu:2 gives less than 1.6x cpu:1.

usage: mnist_and_replicas.py COHORT TORCH_BIN MNIST_DIR [--repeats K]
"""
import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import blas_env

JOB = "examples/mnist_lenet5.textproto"


def cohort_epoch(cohort, data, extra, report):
    t = time.monotonic()
    subprocess.run([cohort, "train", f"--job={JOB}", f"--data-dir={data}",
                    "--quiet", f"--report={report}"] + extra, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t
    with open(report) as f:
        return wall, json.load(f)


def torch_epoch(torch_bin, raw_dir):
    t = time.monotonic()
    out = subprocess.run([torch_bin, raw_dir, "1"], check=True,
                         capture_output=True, text=True).stdout
    wall = time.monotonic() - t
    acc = float(re.search(r"test_accuracy ([0-9.]+)", out).group(1))
    return wall, acc


def main():
    blas_env.apply_core()  # both sides on the same OpenBLAS kernels
    p = argparse.ArgumentParser()
    p.add_argument("cohort")
    p.add_argument("torch")
    p.add_argument("mnist_dir")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    tmp = tempfile.mkdtemp()
    report = os.path.join(tmp, "r.json")
    # LibTorch reads only uncompressed IDX files.
    raw = os.path.join(tmp, "raw")
    os.mkdir(raw)
    for name in os.listdir(a.mnist_dir):
        src = os.path.join(a.mnist_dir, name)
        if name.endswith(".gz"):
            with gzip.open(src) as i, open(os.path.join(raw, name[:-3]), "wb") as o:
                shutil.copyfileobj(i, o)
        else:
            shutil.copy(src, raw)

    ours, theirs, acc_ours, acc_theirs = [], [], [], []
    for _ in range(a.repeats):
        wall, r = cohort_epoch(a.cohort, a.mnist_dir, ["--threads=1"], report)
        ours.append(wall)
        acc_ours.append(r["test_accuracy"])
        wall, acc = torch_epoch(a.torch, raw)
        theirs.append(wall)
        acc_theirs.append(acc)
    print("## One epoch of LeNet-5 on MNIST, 1 thread, wall time incl. loading\n")
    print("| | wall s (median) | runs | test accuracy |")
    print("|---|---|---|---|")
    print(f"| cohort | {statistics.median(ours):.2f} | "
          f"{', '.join(f'{x:.2f}' for x in ours)} | "
          f"{', '.join(f'{100 * x:.2f}%' for x in acc_ours)} |")
    print(f"| LibTorch 1.13 | {statistics.median(theirs):.2f} | "
          f"{', '.join(f'{x:.2f}' for x in theirs)} | "
          f"{', '.join(f'{100 * x:.2f}%' for x in acc_theirs)} |")

    one, two = [], []
    for _ in range(a.repeats):
        one.append(cohort_epoch(a.cohort, a.mnist_dir, ["--replicas=cpu:1"],
                                report)[1]["samples_per_s"])
        two.append(cohort_epoch(a.cohort, a.mnist_dir, ["--replicas=cpu:2"],
                                report)[1]["samples_per_s"])
    scale = statistics.median(two) / statistics.median(one)
    print("\n## Local replicas, LeNet-5 on MNIST, batch 64 per replica\n")
    print("| replicas | samples/s (median) | runs |")
    print("|---|---|---|")
    print(f"| cpu:1 | {statistics.median(one):,.0f} | "
          f"{', '.join(f'{x:,.0f}' for x in one)} |")
    print(f"| cpu:2 | {statistics.median(two):,.0f} | "
          f"{', '.join(f'{x:,.0f}' for x in two)} |")
    print(f"\ncpu:2 / cpu:1 = {scale:.2f}x")
    shutil.rmtree(tmp)

    failed = []
    if statistics.median(ours) >= statistics.median(theirs):
        failed.append("cohort's epoch is not faster than LibTorch's")
    if min(acc_ours) < 0.98:
        failed.append("cohort's test accuracy fell below 98.0%")
    if scale < 1.6:
        failed.append("cpu:2 gives less than 1.6x cpu:1")
    for f in failed:
        print("CHECK FAILED: " + f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
