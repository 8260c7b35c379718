"""Compares cohort's learning-rate schedules with PyTorch 1.13's schedulers
of the same name, step by step (one scheduler step per optimizer step).

usage: lr_schedule_torch.py DUMP   (DUMP: worker/optim/lr_schedule_dump)
Prints one line per case; exits 1 on any difference above 1e-6 relative.
"""
import subprocess
import sys

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(0)

dump = sys.argv[1]
LR = 0.1
T = 200
S = torch.optim.lr_scheduler

# (name, cohort's LrSchedule text, PyTorch scheduler from an optimizer)
CASES = [
    ("MULTI_STEP", "kind: MULTI_STEP milestones: [30, 80, 81, 150] gamma: 0.5",
     lambda o: S.MultiStepLR(o, milestones=[30, 80, 81, 150], gamma=0.5)),
    ("EXPONENTIAL", "kind: EXPONENTIAL gamma: 0.97",
     lambda o: S.ExponentialLR(o, gamma=0.97)),
    ("ONE_CYCLE defaults", "kind: ONE_CYCLE",
     lambda o: S.OneCycleLR(o, max_lr=LR, total_steps=T)),
    ("ONE_CYCLE", "kind: ONE_CYCLE pct_start: 0.25 div_factor: 10 "
     "final_div_factor: 100",
     lambda o: S.OneCycleLR(o, max_lr=LR, total_steps=T, pct_start=0.25,
                            div_factor=10, final_div_factor=100)),
    ("POLYNOMIAL linear", "kind: POLYNOMIAL",
     lambda o: S.PolynomialLR(o, total_iters=T, power=1.0)),
    ("POLYNOMIAL power 2", "kind: POLYNOMIAL power: 2",
     lambda o: S.PolynomialLR(o, total_iters=T, power=2.0)),
    ("STEP", "kind: STEP step_size: 40 gamma: 0.3",
     lambda o: S.StepLR(o, step_size=40, gamma=0.3)),
]

failed = 0
for name, text, make in CASES:
    ours = [float(x) for x in subprocess.run(
        [dump, str(LR), str(T), text], check=True, capture_output=True,
        text=True).stdout.split()]
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=LR)
    sched = make(opt)
    theirs = []
    for _ in range(T):
        theirs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours, theirs))
    ok = len(ours) == T and worst <= 1e-6
    failed += not ok
    print(f"{'ok' if ok else 'FAIL'}: {name}: {T} steps, largest relative "
          f"difference from PyTorch {torch.__version__} {worst:.2e} "
          f"(first {ours[0]:.6g} / {theirs[0]:.6g}, last {ours[-1]:.6g} / "
          f"{theirs[-1]:.6g})")
sys.exit(1 if failed else 0)
