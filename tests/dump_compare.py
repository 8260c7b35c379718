"""Feeds numbers to a cohort dump binary and compares what it prints with
PyTorch's values: shared by the layer comparisons against PyTorch 1.13."""
import subprocess

import torch


class DumpChecks:
    """Counts failed comparisons; each prints one ok/FAIL line."""

    def __init__(self, tolerance):
        self.tolerance = tolerance
        self.failed = 0

    @staticmethod
    def run(args, numbers):
        """Runs `args` with `numbers` (tensors, flattened in order) on stdin,
        one per line; the floats it prints."""
        stdin = "\n".join(repr(v) for v in torch.cat(
            [t.flatten().double() for t in numbers]).tolist())
        r = subprocess.run(args, input=stdin, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(r.stderr.strip())
        return [float(v) for v in r.stdout.split()]

    def compare(self, case, out, pieces):
        """pieces: (name, want), `want` in the engine's layout; the worst
        difference relative to the largest value of its piece."""
        at, worst, what = 0, 0.0, ""
        for name, want in pieces:
            n = want.numel()
            got = torch.tensor(out[at:at + n])
            at += n
            d = ((got - want.flatten()).abs().max() /
                 max(want.abs().max().item(), 1e-300)).item()
            if d >= worst:
                worst, what = d, name
        if at != len(out):
            print(f"FAIL: {case}: the dump printed {len(out)} numbers, "
                  f"PyTorch has {at}")
            self.failed += 1
            return
        ok = worst <= self.tolerance
        self.failed += not ok
        print(f"{'ok' if ok else 'FAIL'}: {case}: worst difference "
              f"{worst:.2e} of the largest value ({what})")
