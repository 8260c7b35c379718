#!/usr/bin/python3
"""What two cores can give a model's training, against what threads give it.

For each model of bench/standard_models.py, each round runs cohort three
ways on the bench's own spec: one process on 1 thread alone; two such
processes at once, each on its own copy of the work; and one process on 2
threads. The "ceiling" is the two processes' summed samples/s over the lone
one's: what the machine gives a second core when nothing is shared between
the cores but the machine itself (caches beyond L2, memory, the host under a
virtual machine). The "gain" is the 2-thread run's samples/s over the lone
one's. A gain well under the ceiling is lost in the engine's threading; a
ceiling under 2 is lost in the machine. Rounds alternate their order
(alone, together, 2 threads; then the reverse) and the medians are printed.

  two_core_ceiling.py COHORT [--rounds 3] [--models resnet50,...]

Prints a markdown table; exits 0 (a measurement, not a goal) unless a run
fails.
"""
import argparse
import os
import statistics
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standard_models as bench  # noqa: E402


def together(cohort, name, works):
    """Samples/s of two 1-thread processes started at once."""
    rates = [None, None]

    def run(i):
        rates[i] = bench.cohort_timing(cohort, name, 1, works[i])["rate"]

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if None in rates:
        raise RuntimeError("%s: a concurrent run failed" % name)
    return rates


def one_round(cohort, name, works, reverse):
    steps = [
        ("alone", lambda: bench.cohort_timing(cohort, name, 1, works[0])),
        ("together", lambda: together(cohort, name, works)),
        ("threads", lambda: bench.cohort_timing(cohort, name, 2, works[0])),
    ]
    result = {}
    for key, step in (reversed(steps) if reverse else steps):
        result[key] = step()
    alone = result["alone"]["rate"]
    return {"alone": alone, "together": result["together"],
            "ceiling": sum(result["together"]) / alone,
            "gain": result["threads"]["rate"] / alone}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cohort")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--models", default=",".join(bench.MODELS))
    a = p.parse_args()
    models = bench.checked_models(p, a.models)
    if a.rounds < 1:
        p.error("--rounds: at least 1, got %d" % a.rounds)
    cohort = bench.checked_cohort(p, a.cohort)
    print("| model | 1 thread alone | two 1-thread processes, each | ceiling "
          "| 2 threads, gain | ceiling / gain by round |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as top:
        works = [os.path.join(top, "p%d" % i) for i in (0, 1)]
        for work in works:
            os.mkdir(work)
        for name in models:
            for work in works:
                bench.prepare_model(name, work)
            rounds = [one_round(cohort, name, works, r % 2 == 1)
                      for r in range(a.rounds)]
            med = lambda k: statistics.median(r[k] for r in rounds)
            each = statistics.median(x for r in rounds for x in r["together"])
            print("| %s | %.2f | %.2f | %.2f | %.2f | %s |" % (
                name, med("alone"), each, med("ceiling"), med("gain"),
                ", ".join("%.2f / %.2f" % (r["ceiling"], r["gain"])
                          for r in rounds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
