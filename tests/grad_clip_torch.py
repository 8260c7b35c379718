"""Compares cohort's gradient clipping (worker/optim/grad_clip) with
PyTorch 1.13's clip_grad_value_ and clip_grad_norm_ on random gradients.

usage: grad_clip_torch.py DUMP   (DUMP: worker/optim/grad_clip_dump)
Exits 1 on any value or norm off by more than 1e-5 relative (of the largest
value).
"""
import subprocess
import sys

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(0)

dump = sys.argv[1]
torch.manual_seed(20)
failed = 0
# (max_norm, max_value, shapes of the parameters, pieces cohort sums over)
CASES = [(1.0, 0.0, [(30, 20), (20,), (10, 20), (10,)], 97),
         (0.05, 0.0, [(300,)], 64),
         (1e6, 0.0, [(50,)], 7),          # norm far below: untouched
         (0.5, 0.02, [(40, 5), (5,)], 33),  # value first, then norm
         (0.0, 0.01, [(100,)], 100)]
for max_norm, max_value, shapes, piece in CASES:
    params = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    for p in params:
        p.grad = torch.randn(p.shape) * 0.1
    flat = torch.cat([p.grad.flatten() for p in params]).tolist()
    out = subprocess.run([dump, str(max_norm), str(max_value), str(piece)],
                         input="\n".join(repr(v) for v in flat), check=True,
                         capture_output=True, text=True).stdout.split()
    ours_norm, ours = float(out[0]), [float(v) for v in out[1:]]
    if max_value > 0:
        torch.nn.utils.clip_grad_value_(params, max_value)
    norm = (torch.nn.utils.clip_grad_norm_(params, max_norm).item()
            if max_norm > 0 else
            torch.cat([p.grad.flatten() for p in params]).norm().item())
    theirs = torch.cat([p.grad.flatten() for p in params]).tolist()
    scale = max(abs(v) for v in theirs)
    worst = max(abs(a - b) for a, b in zip(ours, theirs)) / scale
    norm_err = abs(ours_norm - norm) / norm
    ok = len(ours) == len(theirs) and worst <= 1e-5 and norm_err <= 1e-5
    failed += not ok
    print(f"{'ok' if ok else 'FAIL'}: clip_grad_norm {max_norm} "
          f"clip_grad_value {max_value}, {len(flat)} values in pieces of "
          f"{piece}: norm {ours_norm:.6g} (PyTorch {norm:.6g}), largest "
          f"difference {worst:.1e} of the largest value")
sys.exit(1 if failed else 0)
