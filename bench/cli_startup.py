#!/usr/bin/env python3
"""Start-up cost of the cohort CLI: wall time and peak memory of
`cohort --help` and of `cohort status` against a local coordinator, the
median of --repeats runs each, and which CUDA libraries each process mapped.

usage: cli_startup.py COHORT [--baseline OTHER_COHORT] [--repeats 5]
                             [--help-ms 50] [--status-ms 100]

With --baseline, the other binary (for example one built before the GPU
plugin) is measured in the same run, and the table shows both.

Checks (exit status 1 on failure): COHORT's medians are under --help-ms and
--status-ms, and neither command maps a CUDA library (read from the
dynamic loader's own trace, LD_DEBUG=files, which lists every object a
process opens, dlopen included).
"""
import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CUDA_LIBS = ("libcudart", "libcublas", "libcudnn", "libnccl", "libcuda.so")

JOB = """name: "cli-startup"
model { zoo: "mlp_seed" }
data { kind: SYNTHETIC synthetic { shape: [100] train_samples: 1024 } }
batch_size: 32
epochs: 1
optimizer { kind: SGD lr: 0.1 }
cluster { min_workers: 1 max_workers: 1 join_timeout_ms: 600000 }
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_once(argv):
    """Wall seconds and peak RSS (KiB) of one run of argv."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(argv)} failed ({code}): {err.strip()}")
    return wall, usage.ru_maxrss


def cuda_mapped(argv):
    """The CUDA libraries the loader opened while running argv."""
    env = dict(os.environ, LD_DEBUG="files")
    out = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, check=False)
    opened = set()
    for line in out.stderr.decode(errors="replace").splitlines():
        if "file=" in line:
            name = line.split("file=", 1)[1].split()[0]
            if any(lib in name for lib in CUDA_LIBS):
                opened.add(os.path.basename(name))
    return sorted(opened)


def wait_ready(cohort, addr, deadline=20):
    end = time.time() + deadline
    while time.time() < end:
        r = subprocess.run([cohort, "status", f"--coordinator={addr}"],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
        if r.returncode == 0:
            return
        time.sleep(0.1)
    sys.exit(f"the coordinator at {addr} did not answer within {deadline} s")


def measure(cohort, repeats, addr):
    rows = {}
    for name, argv in (("--help", [cohort, "--help"]),
                       ("status", [cohort, "status",
                                   f"--coordinator={addr}"])):
        run_once(argv)  # warm the page cache
        runs = [run_once(argv) for _ in range(repeats)]
        rows[name] = (statistics.median(w for w, _ in runs) * 1000,
                      statistics.median(m for _, m in runs) / 1024,
                      cuda_mapped(argv))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cohort")
    ap.add_argument("--baseline")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--help-ms", type=float, default=50)
    ap.add_argument("--status-ms", type=float, default=100)
    args = ap.parse_args()
    if args.repeats < 1:
        sys.exit("--repeats must be at least 1")

    with tempfile.TemporaryDirectory() as tmp:
        job = os.path.join(tmp, "job.textproto")
        with open(job, "w") as f:
            f.write(JOB)
        addr = f"127.0.0.1:{free_port()}"
        coord = subprocess.Popen(
            [args.cohort, "coordinator", f"--job={job}", f"--listen={addr}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(args.cohort, addr)
            results = [("cohort", measure(args.cohort, args.repeats, addr))]
            if args.baseline:
                results.append(("baseline",
                                measure(args.baseline, args.repeats, addr)))
        finally:
            coord.terminate()
            coord.wait()

    print(f"cohort CLI start-up, median of {args.repeats} "
          f"({os.cpu_count()} CPUs)")
    print("| binary | command | wall ms | peak RSS MiB | CUDA libraries mapped |")
    print("|---|---|---|---|---|")
    for label, rows in results:
        for cmd, (ms, mib, cuda) in rows.items():
            print(f"| {label} | {cmd} | {ms:.1f} | {mib:.1f} | "
                  f"{', '.join(cuda) or 'none'} |")

    ok = True
    rows = results[0][1]
    for cmd, limit in (("--help", args.help_ms), ("status", args.status_ms)):
        ms, _, cuda = rows[cmd]
        if ms >= limit:
            print(f"FAIL: cohort {cmd} took {ms:.1f} ms (limit {limit} ms)")
            ok = False
        if cuda:
            print(f"FAIL: cohort {cmd} mapped {', '.join(cuda)}")
            ok = False
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
