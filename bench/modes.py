#!/usr/bin/env python3
"""ALLREDUCE against the parameter-server modes on one job.

Runs `cohort local --workers=W --threads=1` (MNIST LeNet-5 by default) once
per mode: ALLREDUCE, PS SYNC, PS SSP (staleness 2) and PS ASYNC, optionally
with one straggler (--straggler=RANK:FACTOR) and a floor on every worker's
step time (--min-step-ms, which makes workers sharing this machine's few
cores behave like workers on machines of their own: without it a sleeping
straggler hands its core to the others), and writes

  * a markdown table: samples/s, time to the target test accuracy (wall
    time at the end of the first epoch's evaluation that reached it), final
    accuracy, bytes moved per worker per step (from the parameter count:
    ring all-reduce 2(W-1)/W x the model, PS push + pull 2 x the model), and
    the staleness histogram the shards observed (from `cohort status`);
  * an SVG plot of test accuracy against wall time, one line per mode.

The learning rate follows a cosine decay over the run (the example spec's
STEP schedule is tuned for one epoch). Exit status 1 if a run fails or a
check fails: --check-accuracy (SSP and ASYNC end at or above --target) and
--check-speedup=X (SSP and ASYNC reach X times ALLREDUCE's samples/s).

usage: modes.py COHORT MNIST_DIR [--workers 4] [--epochs 3] [--straggler R:F]
                [--min-step-ms MS] [--out-md FILE] [--out-svg FILE]
                [--target 0.98] [--check-accuracy] [--check-speedup X]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

MODES = [
    ("ALLREDUCE", ""),
    ("PS SYNC", "mode: PS\nps { consistency: SYNC }\n"),
    ("PS SSP(2)", "mode: PS\nps { consistency: SSP staleness: 2 }\n"),
    ("PS ASYNC", "mode: PS\nps { consistency: ASYNC }\n"),
]
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"]


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def watch_status(cohort, address, stop, last):
    """Keeps the newest `cohort status --json` answer in last[0]."""
    while not stop.is_set():
        r = subprocess.run([cohort, "status", f"--coordinator={address}",
                            "--json", "--timeout=2"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            try:
                last[0] = json.loads(r.stdout)
            except ValueError:
                pass
        stop.wait(0.5)


def run(cohort, job, a, report):
    port = free_port()
    address = f"127.0.0.1:{port}"
    cmd = [cohort, "local", f"--job={job}", f"--workers={a.workers}",
           "--threads=1", f"--data-dir={a.mnist}", f"--report={report}",
           f"--listen={address}"]
    if a.straggler:
        cmd.append(f"--straggler={a.straggler}")
    if a.min_step_ms:
        cmd.append(f"--min-step-ms={a.min_step_ms}")
    stop, last = threading.Event(), [None]
    watcher = threading.Thread(target=watch_status,
                               args=(cohort, address, stop, last))
    watcher.start()
    start = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    stop.set()
    watcher.join()
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode})")
    with open(report) as f:
        rep = json.load(f)
    rep["_wall"] = time.time() - start
    rep["_status"] = last[0] or {}
    return rep


def staleness(status):
    hist = [0] * 9
    for shard in status.get("shards", []):
        for k, v in enumerate(shard.get("stats", {}).get(
                "stalenessHistogram", [])):
            if k < len(hist):
                hist[k] += int(v)
    total = sum(hist)
    if total == 0:
        return "-"
    mean = sum(k * v for k, v in enumerate(hist)) / total
    top = max(k for k, v in enumerate(hist) if v)
    return f"mean {mean:.2f}, max {top}{'+' if top == 8 else ''}"


def svg(curves, path, title):
    w, h, left, bottom, top, right = 640, 400, 60, 50, 30, 150
    tmax = max(t for c in curves.values() for t, _ in c) * 1.05 or 1
    lo = min(min(acc for _, acc in c) for c in curves.values() if c)
    lo = min(0.97, (int(lo * 100) - 1) / 100)
    def x(t): return left + (w - left - right) * t / tmax
    def y(a): return top + (h - top - bottom) * (1 - (a - lo) / (1 - lo))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}"'
           f' font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w/2 - 60}" y="18" font-size="14">{title}</text>']
    for i in range(6):
        a = lo + (1 - lo) * i / 5
        out.append(f'<line x1="{left}" x2="{w-right}" y1="{y(a):.1f}" '
                   f'y2="{y(a):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="5" y="{y(a)+4:.1f}">{100*a:.1f}%</text>')
    for i in range(6):
        t = tmax * i / 5
        out.append(f'<text x="{x(t)-10:.1f}" y="{h-bottom+18}">{t:.0f}s</text>')
    out.append(f'<text x="{w/2-60}" y="{h-10}">wall time (s)</text>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{h-bottom}" '
               f'stroke="black"/>')
    out.append(f'<line x1="{left}" x2="{w-right}" y1="{h-bottom}" '
               f'y2="{h-bottom}" stroke="black"/>')
    for i, (name, c) in enumerate(curves.items()):
        color = COLORS[i % len(COLORS)]
        pts = " ".join(f"{x(t):.1f},{y(acc):.1f}" for t, acc in c)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" '
                   f'stroke-width="2"/>')
        for t, acc in c:
            out.append(f'<circle cx="{x(t):.1f}" cy="{y(acc):.1f}" r="3" '
                       f'fill="{color}"/>')
        out.append(f'<text x="{w-right+10}" y="{top+20+18*i}" '
                   f'fill="{color}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser()
    p.add_argument("cohort")
    p.add_argument("mnist")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--straggler", default="")
    p.add_argument("--min-step-ms", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--check-accuracy", action="store_true")
    p.add_argument("--check-speedup", type=float, default=0)
    p.add_argument("--target", type=float, default=0.98)
    p.add_argument("--job", default=os.path.join(
        here, "..", "examples", "mnist_lenet5.textproto"))
    p.add_argument("--out-md", default="")
    p.add_argument("--out-svg", default="")
    a = p.parse_args()
    tmp = tempfile.mkdtemp()
    with open(a.job) as f:
        base = f.read()
    rows, curves = [], {}
    for name, extra in MODES:
        job = os.path.join(tmp, name.replace(" ", "_") + ".textproto")
        with open(job, "w") as f:
            # The spec's STEP schedule is tuned for one epoch; several
            # epochs decay the rate with a cosine instead.
            body = "\n".join(l for l in base.splitlines()
                             if not l.startswith(("epochs:", "lr_schedule",
                                                  "optimizer")))
            f.write(body + f"\nepochs: {a.epochs}\n"
                    f"optimizer {{ kind: SGD lr: {a.lr} momentum: 0.9 }}\n"
                    "lr_schedule { kind: COSINE }\n" + extra)
        rep = run(a.cohort, job, a, os.path.join(tmp, "r.json"))
        epochs = rep.get("epoch_results") or []
        c = [(e["wall_seconds"], e["test_accuracy"]) for e in epochs
             if e.get("test_accuracy") is not None]
        curves[name] = c
        hit = next((t for t, acc in c if acc >= a.target), None)
        params = rep.get("parameters") or 0
        w = a.workers
        moved = 4 * params * (2 * (w - 1) / w if name == "ALLREDUCE" else 2)
        rows.append((name, rep["samples_per_s"], hit, rep["test_accuracy"],
                     moved, staleness(rep["_status"])))
        print(f"{name}: {rep['samples_per_s']:.0f} samples/s, "
              f"accuracy {rep['test_accuracy']}", file=sys.stderr)
    base_rate = rows[0][1]
    lines = [f"{a.workers} workers, {a.epochs} epochs, SGD lr {a.lr} "
             "cosine"
             + (f", straggler {a.straggler}" if a.straggler else "")
             + (f", step floor {a.min_step_ms} ms" if a.min_step_ms else "")
             + "\n",
             "| mode | samples/s | vs ALLREDUCE | time to "
             f"{100*a.target:.0f}% | final accuracy | bytes/step/worker | "
             "staleness (clocks) |",
             "|---|---|---|---|---|---|---|"]
    for name, rate, hit, acc, moved, st in rows:
        lines.append(f"| {name} | {rate:,.0f} | {rate/base_rate:.2f}x | "
                     f"{'%.1f s' % hit if hit is not None else 'not reached'}"
                     f" | {100*acc:.2f}% | {moved/1e6:.2f} MB | {st} |")
    table = "\n".join(lines) + "\n"
    print(table)
    if a.out_md:
        with open(a.out_md, "w") as f:
            f.write(table)
    if a.out_svg:
        svg(curves, a.out_svg, "MNIST LeNet-5, test accuracy"
            + (f" (straggler {a.straggler})" if a.straggler else ""))
    return check(rows, a)


def check(rows, a):
    """PASS/FAIL lines for the requested checks; 1 if any failed."""
    failed = 0
    base_rate = rows[0][1]
    for name, rate, _, acc, _, _ in rows:
        if name not in ("PS SSP(2)", "PS ASYNC"):
            continue
        if a.check_accuracy:
            ok = acc >= a.target
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'}: {name} final accuracy "
                  f"{100*acc:.2f}% (need {100*a.target:.0f}%)")
        if a.check_speedup:
            ok = rate >= a.check_speedup * base_rate
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'}: {name} {rate:,.0f} samples/s "
                  f"= {rate/base_rate:.2f}x ALLREDUCE (need "
                  f"{a.check_speedup}x)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
