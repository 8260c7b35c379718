#!/usr/bin/python3
"""Chaos test of cohort's elastic recovery: kill -9 workers, check the job.

Starts a coordinator and 3 workers training LeNet-5 (MNIST when --data-dir
holds it, else the built-in synthetic set) with periodic checkpoints, then
every 20-40 s (random, seeded, printed) kills a random worker with SIGKILL
and starts a replacement at once. When the job ends it prints, per kill, the
detection time, the recovery time, the steps lost and the world sizes, and
checks that:
  - the job SUCCEEDED and every worker that was not killed exited 0 (a
    replacement the coordinator refuses fails the run; it is started once
    more, so that the rest of the run still has 3 workers to measure);
  - every failure was detected within the heartbeat bound (plus slack, plus
    any stall of the whole machine seen meanwhile);
  - every recovery (kill -> first step of the next generation) took <= 30 s;
  - `cohort checkpoint verify` passes on the checkpoint directory;
  - the final test accuracy is within 0.5 points of an undisturbed run of
    the same spec (run first, without --min-step-ms, so it is quick).
It also prints goodput (defined in the output) next to the undisturbed
throttled rate. The last line is `chaos: PASS` or `chaos: FAIL <reasons>`,
and the exit status matches (0 / 1; 2 for bad usage).

Python 3 standard library only. Every process it starts is killed (by pid)
when it exits, also on SIGTERM (a test timeout).
"""

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

WORKERS = 3  # max_workers; min_workers is one less, so 2 survivors go on.
BATCH = 64  # per worker
HEARTBEAT_MS = 500
HEARTBEAT_MISSES = 3
# The coordinator declares a worker dead after MISSES x INTERVAL of silence,
# checked by a watchdog every min(100 ms, interval); its last heartbeat was
# sent before the kill, so that bound holds from the kill. The slack covers
# the watchdog tick (0.1 s) and a thread waiting for a core on a small
# machine that runs 3 trainers, the coordinator and this script (0.4 s).
# Stalls of the whole machine (a preempted VM, a burst of load) delay the
# coordinator's watchdog as much as anything: the bound of each kill grows
# by the stalls this script itself saw while that kill was being detected
# (StallProbe), so that the verdict does not depend on how busy the
# machine was, while a watchdog that misses its bound still fails.
DETECT_BOUND_S = HEARTBEAT_MS * HEARTBEAT_MISSES / 1000.0
DETECT_SLACK_S = 0.5
RECOVERY_BOUND_S = 30.0
ACCURACY_POINTS = 0.5
KILL_GAP_S = (20.0, 40.0)
# Each `cohort status` costs about 0.2 s of CPU (process start-up), so the
# poller runs once a second; timings come from the coordinator's records.
POLL_S = 1.0
# Rough cost of one kill (regroup, restore, replayed steps), used only to
# size the job so that it ends near --duration.
RECOVERY_ESTIMATE_S = 4.0
# Seconds kept back from --duration for start-up, the final evaluation,
# stopping and verifying; no kill comes in the last KILL_QUIET_S of the
# planned training (a worker killed while others evaluate and finish tests
# nothing about recovery).
RESERVE_S = 15.0
KILL_QUIET_S = 12.0
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")

DATASETS = {
    # name: (train samples, epochs in short mode)
    "mnist": (60000, 3),
    "synthetic": (16384, 6),
}


def log(msg):
    print(msg, flush=True)


def find_mnist(data_dir):
    """The MNIST directory under data_dir (DIR/mnist or DIR), or None."""
    if not data_dir:
        return None
    for d in (os.path.join(data_dir, "mnist"), data_dir):
        if not os.path.isdir(d):
            continue
        names = os.listdir(d)
        if any(n.startswith("train-images-idx3-ubyte") for n in names):
            return os.path.abspath(d)
    return None


def job_spec(name, data, epochs, ckpt_dir, max_restarts):
    """The job spec: identical for the undisturbed and the disturbed run but
    for the checkpoint directory (each run needs its own)."""
    if data == "mnist":
        data_block = "data { kind: MNIST }"
    else:
        data_block = ("data { kind: SYNTHETIC synthetic { shape: [1, 28, 28] "
                      "classes: 10 train_samples: %d test_samples: 4096 "
                      "noise: 2.0 } }" % DATASETS["synthetic"][0])
    # A cosine schedule ends every run at a small rate, so the final
    # accuracy depends little on how the world size changed on the way
    # (measured: 2 and 3 workers end within 0.2 points of each other).
    return f"""name: "{name}"
model {{ zoo: "lenet5" }}
{data_block}
batch_size: {BATCH}
epochs: {epochs}
optimizer {{ kind: SGD lr: 0.05 momentum: 0.9 }}
lr_schedule {{ kind: COSINE }}
loss: CROSS_ENTROPY
seed: 1
checkpoint {{ dir: "{ckpt_dir}" every_steps: 25 keep: 3 }}
cluster {{
  min_workers: {WORKERS - 1}
  max_workers: {WORKERS}
  heartbeat_interval_ms: {HEARTBEAT_MS}
  heartbeat_misses: {HEARTBEAT_MISSES}
  max_restarts: {max_restarts}
}}
"""


class Cluster:
    """A coordinator and its workers as child processes of this script.

    Owns the processes it starts; kill_all() ends every one still running,
    by pid. Not thread-safe: one thread starts and kills processes (the
    status poller only reads the coordinator's address).
    """

    def __init__(self, cohort, workdir, label, data_dir, min_step_ms):
        self.cohort = cohort
        self.workdir = workdir
        self.label = label
        self.data_dir = data_dir
        self.min_step_ms = min_step_ms
        self.coordinator = None
        self.address = None
        self.workers = []  # [{"proc", "index", "log", "killed_at"}]
        self._files = []

    def _open_log(self, name):
        path = os.path.join(self.workdir, f"{self.label}-{name}.log")
        f = open(path, "wb")
        self._files.append(f)
        return path, f

    def start_coordinator(self, spec_path, report_path, serve_after_done):
        path, f = self._open_log("coordinator")
        args = [self.cohort, "coordinator", f"--job={spec_path}",
                "--listen=127.0.0.1:0", f"--report={report_path}"]
        if serve_after_done:
            args.append("--serve-after-done")
        self.coordinator = subprocess.Popen(args, stdout=f, stderr=f)
        self.coordinator_log = path
        # Port 0: the coordinator names the port it got.
        deadline = time.time() + 30
        while time.time() < deadline:
            with open(path, "r", errors="replace") as r:
                m = re.search(r"serving on ([^\s,]+)", r.read())
            if m:
                self.address = m.group(1)
                return self.address
            if self.coordinator.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{self.label} coordinator did not start: "
                           f"{tail(path)}")

    def start_worker(self, replaces=None):
        index = len(self.workers)
        path, f = self._open_log(f"worker{index}")
        args = [self.cohort, "worker", f"--coordinator={self.address}"]
        if self.data_dir:
            args.append(f"--data-dir={self.data_dir}")
        if self.min_step_ms:
            args.append(f"--min-step-ms={self.min_step_ms}")
        proc = subprocess.Popen(args, stdout=f, stderr=f)
        w = {"proc": proc, "index": index, "log": path, "killed_at": None,
             "replaces": replaces}
        self.workers.append(w)
        return w

    def live_workers(self):
        return [w for w in self.workers
                if w["killed_at"] is None and w["proc"].poll() is None]

    def kill(self, w):
        """SIGKILL; returns the time just before the signal was sent."""
        t = time.time()
        os.kill(w["proc"].pid, signal.SIGKILL)
        w["killed_at"] = t
        w["proc"].wait()
        return t

    def status(self, timeout_s=2):
        """The coordinator's StatusResponse as a dict, or None."""
        try:
            out = subprocess.run(
                [self.cohort, "status", f"--coordinator={self.address}",
                 "--json", f"--timeout={timeout_s}"],
                capture_output=True, timeout=timeout_s + 5)
        except (subprocess.TimeoutExpired, OSError):
            return None
        if out.returncode != 0:
            return None
        try:
            return json.loads(out.stdout)
        except ValueError:
            return None

    def stop_coordinator(self):
        subprocess.run([self.cohort, "stop", f"--coordinator={self.address}"],
                       capture_output=True, timeout=30)
        try:
            self.coordinator.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass

    def wait_workers(self, timeout_s):
        deadline = time.time() + timeout_s
        for w in self.workers:
            try:
                w["proc"].wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass

    def kill_all(self):
        procs = [w["proc"] for w in self.workers]
        if self.coordinator is not None:
            procs.append(self.coordinator)
        for p in procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    pass
        for f in self._files:
            f.close()
        self._files = []


def tail(path, lines=8):
    try:
        with open(path, "r", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return f"(no {path})"


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class StallProbe(threading.Thread):
    """Sleeps PERIOD_S at a time and records each wake-up later than
    LATE_S past its time: (wall time of the wake-up, seconds late). A
    scheduler that keeps this thread off the cores keeps the coordinator's
    threads off them alike."""

    PERIOD_S = 0.02
    LATE_S = 0.05

    def __init__(self):
        super().__init__(daemon=True)
        self.lock = threading.Lock()
        self.stalls = []
        self._halt = threading.Event()

    def run(self):
        last = time.monotonic()
        while not self._halt.wait(self.PERIOD_S):
            now = time.monotonic()
            late = now - last - self.PERIOD_S
            if late > self.LATE_S:
                with self.lock:
                    self.stalls.append((time.time(), late))
            last = now

    def stalled_s(self, t0, t1):
        """Seconds of stalls that overlap the wall-clock window [t0, t1]."""
        total = 0.0
        with self.lock:
            for end, late in self.stalls:
                start = end - late
                total += max(0.0, min(end, t1) - max(start, t0))
        return total

    def stop(self):
        self._halt.set()
        self.join(timeout=10)


class Poller(threading.Thread):
    """Polls the coordinator's status every POLL_S: keeps the latest answer
    and a (time, step, generation, world size) sample of each."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        self.cluster = cluster
        self.lock = threading.Lock()
        self.latest = None
        self.samples = []
        self.terminal_at = None
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            s = self.cluster.status()
            now = time.time()
            if s is not None:
                with self.lock:
                    self.latest = s
                    self.samples.append((now, int(s.get("step", 0)),
                                         int(s.get("generation", 0)),
                                         s.get("worldSize", 0)))
                    if s.get("state") in TERMINAL and self.terminal_at is None:
                        self.terminal_at = now
            self._halt.wait(POLL_S)

    def snapshot(self):
        with self.lock:
            return self.latest, self.terminal_at

    def stop(self):
        self._halt.set()
        self.join(timeout=10)


def undisturbed_run(args, workdir, data, data_dir, epochs, max_restarts):
    """The same spec at full speed with no kills: the accuracy reference."""
    ckpt = os.path.join(workdir, "undisturbed-ckpt")
    spec = os.path.join(workdir, "undisturbed.textproto")
    with open(spec, "w") as f:
        f.write(job_spec("chaos-undisturbed", data, epochs, ckpt,
                         max_restarts))
    report = os.path.join(workdir, "undisturbed-report.json")
    c = Cluster(args.cohort, workdir, "undisturbed", data_dir, 0)
    try:
        t0 = time.time()
        c.start_coordinator(spec, report, serve_after_done=False)
        for _ in range(WORKERS):
            c.start_worker()
        try:
            c.coordinator.wait(timeout=max(120, args.duration))
        except subprocess.TimeoutExpired:
            raise RuntimeError("the undisturbed run did not end in time: "
                               + tail(c.coordinator_log))
        c.wait_workers(30)
        wall = time.time() - t0
    finally:
        c.kill_all()
    r = read_json(report)
    if c.coordinator.returncode != 0 or not r or r.get("state") != "SUCCEEDED":
        raise RuntimeError("the undisturbed run failed: "
                           + tail(c.coordinator_log))
    if r.get("test_accuracy") is None:
        raise RuntimeError("the undisturbed run reported no test accuracy")
    return r, wall


def disturbed_run(args, workdir, data, data_dir, epochs, max_restarts,
                  min_step_ms, planned_train_s, rng, failures):
    """The chaos run. Returns what the analysis needs."""
    ckpt = os.path.join(workdir, "ckpt")
    spec = os.path.join(workdir, "chaos.textproto")
    with open(spec, "w") as f:
        f.write(job_spec("chaos", data, epochs, ckpt, max_restarts))
    report = os.path.join(workdir, "chaos-report.json")
    c = Cluster(args.cohort, workdir, "chaos", data_dir, min_step_ms)
    kills = []
    poller = None
    probe = StallProbe()
    probe.start()
    try:
        c.start_coordinator(spec, report, serve_after_done=True)
        for _ in range(WORKERS):
            c.start_worker()
        poller = Poller(c)
        poller.start()
        # Training starts: the first step reported.
        deadline = time.time() + 120
        while True:
            s, done = poller.snapshot()
            if s and int(s.get("step", 0)) > 0 or done:
                break
            if time.time() > deadline:
                raise RuntimeError("the chaos job never trained: "
                                   + tail(c.coordinator_log))
            time.sleep(0.1)
        started = time.time()
        log(f"training started; kills every {KILL_GAP_S[0]:.0f}-"
            f"{KILL_GAP_S[1]:.0f} s (seed {args.seed}) until "
            f"{planned_train_s - KILL_QUIET_S:.0f} s")
        next_kill = started + rng.uniform(*KILL_GAP_S)
        end_by = started + 3 * planned_train_s + 120
        while True:
            s, done = poller.snapshot()
            now = time.time()
            if done:
                break
            if now > end_by:
                failures.append(f"the job did not end within "
                                f"{end_by - started:.0f} s of its first step")
                break
            restart_refused(c, started, kills)
            quiet = now > started + planned_train_s - KILL_QUIET_S
            if now >= next_kill and not quiet:
                # Kill into a running generation, not a regroup.
                s = c.status() or s
                if s and s.get("state") == "RUNNING" and \
                        not s.get("regrouping"):
                    kills.append(kill_one(c, s, rng, started,
                                         args.replace_after))
                    next_kill = time.time() + rng.uniform(*KILL_GAP_S)
                else:
                    next_kill = now + 0.5
            time.sleep(0.05)
        final = c.status(timeout_s=5) or poller.snapshot()[0]
        _, terminal_at = poller.snapshot()
        poller.stop()
        poller_samples = poller.samples
        c.stop_coordinator()
        c.wait_workers(60)
        survivors = [w for w in c.workers if w["killed_at"] is None]
    finally:
        c.kill_all()
        if poller is not None:
            poller.stop()
        probe.stop()
    return {
        "final": final, "report": read_json(report), "kills": kills,
        "samples": poller_samples, "started": started,
        "terminal_at": terminal_at or time.time(), "ckpt": ckpt,
        "survivors": survivors, "coordinator_log": c.coordinator_log,
        "probe": probe,
    }


def restart_refused(c, started, kills):
    """A replacement that exited with an error (e.g. refused because the
    coordinator did not yet know its predecessor was dead) is started once
    more, once the failure must have been detected, so that the rest of the
    run keeps 3 workers. Its exit status still fails the run (see the
    checks in main)."""
    killed_at = {k["pid"]: k["t"] for k in kills}
    for w in list(c.workers):
        rc = w["proc"].poll()
        if w["replaces"] is None or w.get("retried") or rc in (None, 0) \
                or w["killed_at"] is not None:
            continue
        if time.time() < killed_at.get(w["replaces"], 0) + DETECT_BOUND_S \
                + DETECT_SLACK_S:
            continue
        w["retried"] = True
        again = c.start_worker(replaces=w["replaces"])
        again["retried"] = True  # once per kill
        log(f"  +{time.time() - started:6.1f}s replacement pid "
            f"{w['proc'].pid} exited {rc} ({tail(w['log'], 1).strip()}); "
            f"started pid {again['proc'].pid} instead")


def kill_one(c, status, rng, started, replace_after):
    victim = rng.choice(c.live_workers())
    ranks = {w.get("pid"): w.get("rank") for w in status.get("workers", [])}
    rank = ranks.get(victim["proc"].pid, "?")
    step = int(status.get("step", 0))
    t = c.kill(victim)
    if replace_after > 0:
        time.sleep(replace_after)
    replacement = c.start_worker(replaces=victim["proc"].pid)
    k = {"t": t, "pid": victim["proc"].pid, "rank": rank, "step": step,
         "generation": int(status.get("generation", 0)),
         "replacement": replacement["proc"].pid, "worker": replacement}
    log(f"  +{t - started:6.1f}s kill -9 pid {k['pid']} (rank {rank}, "
        f"step ~{step}); replacement pid {k['replacement']}")
    return k


def analyse_kills(kills, generations):
    """Matches each kill with the generations opened after it (and before
    the next kill). Returns one row per kill, and the failure generations
    that no kill explains."""
    gens = sorted(generations, key=lambda g: int(g.get("generation", 0)))
    rows = []
    explained = set()
    for i, k in enumerate(kills):
        t_next = kills[i + 1]["t"] if i + 1 < len(kills) else float("inf")
        window = [g for g in gens
                  if k["t"] <= g.get("regroupStartedUnixS", 0) < t_next]
        row = {"kill": k, "detect": None, "bound_only": False,
               "recover": None, "previous": None, "restored": None,
               "lost": None, "cause": ""}
        first = int(window[0]["generation"]) if window else 1 << 62
        before = [g["worldSize"] for g in gens if int(g["generation"]) < first]
        sizes = before[-1:] + [g["worldSize"] for g in window]
        row["worlds"] = "->".join(str(x) for x in sizes)
        fail = [g for g in window if g.get("afterFailure")]
        explained.update(int(g["generation"]) for g in fail)
        if fail:
            g = fail[0]
            row["cause"] = g.get("cause", "")
            if "(while regrouping after" in row["cause"]:
                # A growth regroup (the replacement joined first) that the
                # death turned into a recovery: regroupStartedUnixS is the
                # growth's. The dead worker's silence when declared dead
                # bounds the detection: its last heartbeat preceded the kill.
                row["detect"] = g.get("silentS", 0)
                row["bound_only"] = True
            else:
                row["detect"] = g["regroupStartedUnixS"] - k["t"]
        trained = [g for g in window if g.get("firstStepUnixS", 0) > 0]
        if trained:
            # A generation superseded before it trained (a replacement
            # joined at once) restored nothing; the one that trained did.
            row["recover"] = trained[0]["firstStepUnixS"] - k["t"]
            # The newest step reported before the kill is the first
            # regroup's; later generations' count steps trained since.
            row["previous"] = int(window[0].get("previousStep", 0))
            row["restored"] = int(trained[0].get("restoredStep", 0))
            row["lost"] = max(0, row["previous"] - row["restored"])
        rows.append(row)
    unexplained = [g for g in gens if g.get("afterFailure")
                   and int(g["generation"]) not in explained]
    return rows, unexplained


def fmt(x, spec="%.2f"):
    return "-" if x is None else spec % x


def print_tables(rows, generations, started):
    log("")
    log("Kills. AT: seconds after the first step. DETECT: kill -> "
        "regroupStartedUnixS of the next")
    log("failure generation ('<=': bounded by its silentS instead, when the "
        "replacement's join had")
    log("opened the regroup first). RECOVER: kill -> firstStepUnixS of the "
        "first generation after it")
    log("that trained. LOST: max(0, previousStep - restoredStep): the newest "
        "step reported before the")
    log("kill minus the step training resumed from. WORLD: world sizes of "
        "the generations it caused.")
    log("REPL: exit status of the replacement started at the kill.")
    log("%-3s %8s %7s %5s %7s %7s %7s %8s %5s %-9s %-6s %s" % (
        "#", "AT", "PID", "RANK", "DETECT", "RECOVER", "PREV", "RESTORED",
        "LOST", "WORLD", "REPL", "CAUSE"))
    for i, r in enumerate(rows, 1):
        k = r["kill"]
        w = k["worker"]
        repl = ("killed" if w["killed_at"] else
                "exit %s" % w["proc"].returncode)
        detect = ("<=" if r["bound_only"] else "") + fmt(r["detect"])
        log("%-3d %8.1f %7d %5s %7s %7s %7s %8s %5s %-9s %-6s %s" % (
            i, k["t"] - started, k["pid"], k["rank"], detect,
            fmt(r["recover"]), fmt(r["previous"], "%d"),
            fmt(r["restored"], "%d"), fmt(r["lost"], "%d"), r["worlds"],
            repl, r["cause"][:60]))
    log("")
    log("Generations:")
    log("%-4s %5s %6s %9s %9s %8s %8s %s" % (
        "GEN", "WORLD", "FAIL", "FORMED", "1ST STEP", "PREV", "RESTORED",
        "CAUSE"))
    for g in sorted(generations, key=lambda g: int(g.get("generation", 0))):
        rel = (lambda t: "-" if not t else "%.1f" % (t - started))
        log("%-4s %5s %6s %9s %9s %8s %8s %s" % (
            g.get("generation"), g.get("worldSize"),
            "yes" if g.get("afterFailure") else "no",
            rel(g.get("formedUnixS")), rel(g.get("firstStepUnixS")),
            g.get("previousStep", 0), g.get("restoredStep", 0),
            g.get("cause", "")))


def baseline_rate(samples, first_kill_t):
    """Global samples/s in generation 1 before the first kill: the
    undisturbed rate of this throttled run."""
    pts = [(t, step) for (t, step, gen, world) in samples
           if gen == 1 and step > 0 and t < first_kill_t]
    if len(pts) < 2 or pts[-1][0] - pts[0][0] < 2:
        return None
    (t0, s0), (t1, s1) = pts[0], pts[-1]
    return (s1 - s0) * BATCH * WORKERS / (t1 - t0)


def parse_args():
    p = argparse.ArgumentParser(
        description="Kill -9 cohort workers during a training job and check "
        "that it recovers (detection, recovery, steps lost, checkpoints, "
        "accuracy, goodput).")
    p.add_argument("--cohort", required=True, help="the cohort binary")
    p.add_argument("--duration", type=float, default=180,
                   help="total wall seconds to aim for (180: the short "
                   "test; 1800: tools/chaos); sizes the job")
    p.add_argument("--data-dir", default=os.environ.get("COHORT_DATA_DIR", ""),
                   help="data root (with mnist/) or an MNIST directory; "
                   "default $COHORT_DATA_DIR; synthetic data without it")
    p.add_argument("--seed", type=int, default=None,
                   help="kill schedule seed (default: from the clock; "
                   "printed)")
    p.add_argument("--epochs", type=int, default=0,
                   help="override the epochs (default by data set and "
                   "duration)")
    p.add_argument("--min-step-ms", type=int, default=0,
                   help="override the per-step time (default: sized so the "
                   "job fills --duration)")
    p.add_argument("--replace-after", type=float, default=0,
                   help="seconds between a kill and starting its "
                   "replacement (default 0: at once)")
    p.add_argument("--workdir", default="",
                   help="logs, specs, checkpoints (default: a new temp dir)")
    args = p.parse_args()
    if args.duration < 60:
        p.error("--duration must be at least 60 seconds")
    if not os.access(args.cohort, os.X_OK):
        p.error(f"--cohort={args.cohort} is not an executable")
    if args.seed is None:
        args.seed = int(time.time()) % 100000
    return args


def size_chaos_run(args, t_begin, total_steps):
    """--min-step-ms and the planned training seconds, so that the chaos
    run (its kills' recoveries included) ends near --duration."""
    left = args.duration - (time.time() - t_begin)
    planned = max(30.0, (left - RESERVE_S) /
                  (1 + RECOVERY_ESTIMATE_S / (sum(KILL_GAP_S) / 2)))
    min_step_ms = args.min_step_ms or max(5, int(1000 * planned / total_steps))
    return min_step_ms, total_steps * min_step_ms / 1000.0


def check_workers_and_kills(run, rows, unexplained, final):
    """The job's end, the workers' exits and the per-kill bounds."""
    failures = []
    state = final.get("state")
    if state != "SUCCEEDED":
        failures.append(f"job ended {state}: {final.get('reason', '')}")
    # Workers that were never killed and failed, grouped by their last line
    # (numbers masked), so 40 identical refusals read as one reason.
    groups = {}
    for w in run["survivors"]:
        rc = w["proc"].returncode
        if rc == 0:
            continue
        line = tail(w["log"], 1).strip()
        key = (rc, re.sub(r"\d+", "N", line))
        groups.setdefault(key, []).append((w, line))
    for (rc, _), ws in groups.items():
        w, line = ws[0]
        who = (f"replacement pid {w['proc'].pid} (for killed pid "
               f"{w['replaces']})" if w["replaces"] else
               f"worker pid {w['proc'].pid}")
        more = f" (and {len(ws) - 1} more like it)" if len(ws) > 1 else ""
        failures.append(f"{who}, never killed, exited {rc}{more}: {line}")
    if not run["kills"]:
        failures.append("no worker was killed (the job was too short)")
    for i, r in enumerate(rows, 1):
        if r["detect"] is None:
            failures.append(f"kill {i}: no failure generation followed it")
            continue
        # From the dead worker's last heartbeat (at most one interval
        # before the kill) to the detection.
        t = r["kill"]["t"]
        stalled = run["probe"].stalled_s(t - HEARTBEAT_MS / 1000.0,
                                         t + r["detect"])
        fixed = DETECT_BOUND_S + DETECT_SLACK_S
        bound = fixed + stalled
        if r["detect"] > bound:
            failures.append(f"kill {i}: detected after {r['detect']:.2f} s "
                            f"> {bound:.2f} s ({fixed:.2f} s + {stalled:.2f}"
                            f" s the machine stalled)")
        elif stalled > 0:
            log(f"kill {i}: the machine stalled {stalled:.2f} s while it was "
                f"detected; its bound was {bound:.2f} s")
        if r["recover"] is None:
            failures.append(f"kill {i}: training never resumed after it")
        elif r["recover"] > RECOVERY_BOUND_S:
            failures.append(f"kill {i}: recovery took {r['recover']:.1f} s "
                            f"> {RECOVERY_BOUND_S:.0f} s")
    for g in unexplained:
        failures.append(f"generation {g['generation']} opened after a "
                        f"failure no kill explains: {g.get('cause')}")
    return failures


def check_checkpoints(cohort, ckpt):
    verify = subprocess.run([cohort, "checkpoint", "verify", ckpt],
                            capture_output=True, text=True)
    log(f"cohort checkpoint verify {ckpt}: exit {verify.returncode}")
    log(verify.stdout.rstrip())
    if verify.returncode != 0:
        return [f"checkpoint verify: {verify.stderr.strip()}"]
    return []


def check_accuracy(report, ref_acc):
    acc = report.get("test_accuracy")
    if acc is None:
        return ["the chaos run reported no test accuracy"]
    diff = 100 * (acc - ref_acc)
    log(f"test accuracy: chaos {100 * acc:.2f}% vs undisturbed "
        f"{100 * ref_acc:.2f}% ({diff:+.2f} points; bound "
        f"±{ACCURACY_POINTS})")
    if abs(diff) > ACCURACY_POINTS:
        return [f"test accuracy {100 * acc:.2f}% is {abs(diff):.2f} points "
                f"from the undisturbed {100 * ref_acc:.2f}%"]
    return []


def print_goodput(run, generations, trained_samples, min_step_ms):
    """Goodput: the samples the final model trained on (epochs x train set;
    lost and replayed steps do not count) over the wall time from the
    first step to the job's end. Next to it, the rate of the same run
    before anything was killed."""
    first_step = min((g.get("firstStepUnixS") or 1e300) for g in generations) \
        if generations else run["started"]
    wall = run["terminal_at"] - first_step
    goodput = trained_samples / wall if wall > 0 else 0
    first_kill = run["kills"][0]["t"] if run["kills"] else float("inf")
    base = baseline_rate(run["samples"], first_kill)
    log(f"goodput: {trained_samples} samples (epochs x train set) / "
        f"{wall:.1f} s (first step -> job end, every regroup, replayed "
        f"step and evaluation included) = {goodput:.0f} samples/s")
    if base:
        log(f"undisturbed throttled rate: {base:.0f} samples/s (generation "
            f"1, {WORKERS} workers at --min-step-ms={min_step_ms}, before the "
            f"first kill); goodput is {100 * goodput / base:.0f}% of it")


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    workdir = args.workdir or tempfile.mkdtemp(
        prefix="chaos-", dir=os.environ.get("TEST_TMPDIR"))
    os.makedirs(workdir, exist_ok=True)
    # Bazel's timeout and Ctrl-C end the children too (Cluster.kill_all).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t_begin = time.time()

    mnist = find_mnist(args.data_dir)
    data = "mnist" if mnist else "synthetic"
    train_samples, short_epochs = DATASETS[data]
    epochs = args.epochs or (short_epochs if args.duration < 900
                             else 2 * short_epochs)
    max_restarts = int(args.duration / KILL_GAP_S[0]) + 10
    total_steps = epochs * -(-train_samples // (BATCH * WORKERS))
    log(f"chaos: seed {args.seed}, duration {args.duration:.0f} s, "
        f"workdir {workdir}")
    log(f"data: {data}" + (f" ({mnist})" if mnist else
                           f" (no MNIST under --data-dir='{args.data_dir}')"))
    log(f"job: lenet5, {epochs} epochs, batch {BATCH} x {WORKERS} workers "
        f"({total_steps} steps at full size), checkpoint every 25 steps, "
        f"heartbeat {HEARTBEAT_MS} ms x {HEARTBEAT_MISSES}, max_restarts "
        f"{max_restarts}")

    failures = []
    try:
        ref, ref_wall = undisturbed_run(args, workdir, data, mnist, epochs,
                                        max_restarts)
        log(f"undisturbed run: {ref_wall:.1f} s wall, test accuracy "
            f"{100 * ref['test_accuracy']:.2f}%, "
            f"{ref.get('samples_per_s', 0):.0f} samples/s (unthrottled)")
        min_step_ms, planned = size_chaos_run(args, t_begin, total_steps)
        log(f"chaos run: --min-step-ms={min_step_ms}, about {planned:.0f} s "
            "of training")
        run = disturbed_run(args, workdir, data, mnist, epochs, max_restarts,
                            min_step_ms, planned, rng, failures)
    except RuntimeError as e:
        log(f"chaos: FAIL {e} (logs: {workdir})")
        return 1

    final = run["final"] or {}
    generations = final.get("generations", [])
    rows, unexplained = analyse_kills(run["kills"], generations)
    print_tables(rows, generations, run["started"])
    failures += check_workers_and_kills(run, rows, unexplained, final)
    log("")
    failures += check_checkpoints(args.cohort, run["ckpt"])
    failures += check_accuracy(run["report"] or {}, ref["test_accuracy"])
    print_goodput(run, generations, epochs * train_samples, min_step_ms)
    lost = sum(r["lost"] or 0 for r in rows)
    log(f"kills {len(rows)}, restarts {final.get('restarts')}, generations "
        f"{len(generations)}, steps lost {lost}, total wall "
        f"{time.time() - t_begin:.0f} s")
    if failures:
        log("logs: " + workdir)
        log("coordinator log tail:\n" + tail(run["coordinator_log"]))
        log("chaos: FAIL " + "; ".join(failures))
        return 1
    log("chaos: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
