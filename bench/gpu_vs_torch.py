#!/usr/bin/env python3
"""Training images/s of cohort's GPU engine against PyTorch on the same GPU,
in the same run, on synthetic data.

Models: lenet_cifar and resnet18_cifar on 3x32x32 inputs with 10
classes, in float32 and resnet18_cifar also in bf16, at --batch; and
resnet50 on 3x224x224 inputs with 1000 classes in bf16 at --resnet50-batch
(256). For each it runs
  cohort train --devices=gpu:0 (SGD momentum 0.9, `precision: BF16` for bf16)
and the same model (written here in plain torch.nn, torchvision's
architecture, so torchvision is not needed), batch and optimizer in PyTorch
(cuDNN benchmark mode on, no TF32; bf16 = torch.autocast to bfloat16 around
the forward pass and the loss, float32 weights), timing steps after a
warm-up, and prints a markdown table with the ratio.

Checks (exit status 1 on failure): cohort at least 1.0x PyTorch's images/s
on the small models and 0.9x on resnet50 (its targets); and that
the two runs are comparable: both report the same parameter count, cohort
ran every step, and both losses are finite.

Needs a CUDA GPU and PyTorch (`import torch`); without them it prints why
and exits 0, having measured nothing.

usage: gpu_vs_torch.py COHORT [--steps 200] [--batch 128]
                              [--resnet50-steps 100] [--resnet50-batch 256]
                              [--models NAME,...] [--channels-last]
"""
import argparse
import collections
import json
import math
import os
import subprocess
import sys
import tempfile
import time

SPEC = """name: "{model}-gpu-bench"
model {{ zoo: "{model}" }}
data {{ kind: SYNTHETIC
        synthetic {{ shape: [{shape}] classes: {classes}
                    train_samples: {samples} test_samples: {batch} }}
        loader_threads: 4 }}
batch_size: {batch}
max_steps: {steps}
optimizer {{ kind: SGD lr: 0.01 momentum: 0.9 }}
eval {{ disable: true }}
precision: {precision}
seed: 1
"""

# Cohort keeps the synthetic training set in host memory as float32; a
# ResNet-50 sample is 602 KB, so large inputs cycle through fewer samples
# than steps x batch.
DATA_BUDGET_BYTES = 2 << 30

# One row of the table. `name` is the cohort zoo model and the key of
# torch_models(); `large` takes --resnet50-steps/--resnet50-batch.
Case = collections.namedtuple(
    "Case", "name shape classes bf16 min_ratio large")

CASES = [
    Case("lenet_cifar", (3, 32, 32), 10, False, 1.0, False),
    Case("resnet18_cifar", (3, 32, 32), 10, False, 1.0, False),
    Case("resnet18_cifar", (3, 32, 32), 10, True, 1.0, False),
    Case("resnet50", (3, 224, 224), 1000, True, 0.9, True),
]


def label(case):
    return f"{case.name} {'bf16' if case.bf16 else 'fp32'}"


def torch_models(torch):
    nn = torch.nn

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.f = nn.Sequential(
                nn.Conv2d(3, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                nn.Linear(84, 10))

        def forward(self, x):
            return self.f(x)

    def shortcut(cin, cout, stride):
        if stride == 1 and cin == cout:
            return None
        return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                             nn.BatchNorm2d(cout))

    class Block(nn.Module):
        """torchvision's BasicBlock."""

        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = shortcut(cin, cout, stride)

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class Bottleneck(nn.Module):
        """torchvision's Bottleneck (v1.5: the stride on the 3x3)."""

        def __init__(self, cin, cout, stride):
            super().__init__()
            w = cout // 4
            self.c1 = nn.Conv2d(cin, w, 1, bias=False)
            self.b1 = nn.BatchNorm2d(w)
            self.c2 = nn.Conv2d(w, w, 3, stride, 1, bias=False)
            self.b2 = nn.BatchNorm2d(w)
            self.c3 = nn.Conv2d(w, cout, 1, bias=False)
            self.b3 = nn.BatchNorm2d(cout)
            self.down = shortcut(cin, cout, stride)

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            y = torch.relu(self.b2(self.c2(y)))
            y = self.b3(self.c3(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    def resnet(stem, block, widths, blocks, classes):
        layers = list(stem)
        cin = 64
        for stage, (w, n) in enumerate(zip(widths, blocks)):
            for i in range(n):
                layers.append(block(cin, w, 2 if stage > 0 and i == 0 else 1))
                cin = w
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                   nn.Linear(cin, classes)]
        return nn.Sequential(*layers)

    def resnet18_cifar():
        stem = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64),
                nn.ReLU()]
        return resnet(stem, Block, [64, 128, 256, 512], [2, 2, 2, 2], 10)

    def resnet50():
        stem = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
        return resnet(stem, Bottleneck, [256, 512, 1024, 2048], [3, 4, 6, 3],
                      1000)

    return {"lenet_cifar": LeNet, "resnet18_cifar": resnet18_cifar,
            "resnet50": resnet50}


def torch_run(torch, case, steps, batch, channels_last):
    """PyTorch's images/s, parameter count and last loss for `case`."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda:0")
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = torch_models(torch)[case.name]().to(dev, memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, *case.shape, device=dev).to(memory_format=fmt)
    y = torch.randint(0, case.classes, (batch,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16,
                            enabled=case.bf16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    start = time.time()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    rate = steps * batch / (time.time() - start)
    params = sum(p.numel() for p in model.parameters())
    return rate, params, float(loss)


def cohort_run(cohort, case, steps, batch):
    """Cohort's JSON report for `case` (samples_per_s, parameters, ...)."""
    sample_bytes = 4 * math.prod(case.shape)
    batches = max(1, min(steps, DATA_BUDGET_BYTES // (batch * sample_bytes)))
    tmp = tempfile.mkdtemp()
    job = os.path.join(tmp, "job.textproto")
    with open(job, "w") as f:
        f.write(SPEC.format(
            model=case.name, shape=", ".join(map(str, case.shape)),
            classes=case.classes, batch=batch, steps=steps,
            samples=batch * batches,
            precision="BF16" if case.bf16 else "FP32"))
    report = os.path.join(tmp, "report.json")
    r = subprocess.run([cohort, "train", f"--job={job}", "--devices=gpu:0",
                        f"--report={report}", "--quiet"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"cohort train ({label(case)}) failed:\n{r.stderr}")
    with open(report) as f:
        return json.load(f)


def comparability_errors(case, steps, ours, their_params, their_loss):
    """Why the two runs of `case` do not measure the same work, if they
    do not."""
    errors = []
    if ours["parameters"] != their_params:
        errors.append(f"{label(case)}: cohort has {ours['parameters']:,} "
                      f"parameters, PyTorch {their_params:,}")
    if ours["steps"] != steps:
        errors.append(f"{label(case)}: cohort ran {ours['steps']} steps, "
                      f"not {steps}")
    loss = ours.get("final_loss")
    if not isinstance(loss, (int, float)) or not math.isfinite(loss):
        errors.append(f"{label(case)}: cohort's final loss is {loss}")
    if not math.isfinite(their_loss):
        errors.append(f"{label(case)}: PyTorch's last loss is {their_loss}")
    return errors


def main():
    p = argparse.ArgumentParser(
        description="cohort's GPU engine against PyTorch, images/s")
    p.add_argument("cohort", help="the cohort binary")
    p.add_argument("--steps", type=int, default=200,
                   help="timed steps of the CIFAR-sized models")
    p.add_argument("--batch", type=int, default=128,
                   help="batch of the CIFAR-sized models")
    p.add_argument("--resnet50-steps", type=int, default=100,
                   help="timed steps of resnet50")
    p.add_argument("--resnet50-batch", type=int, default=256,
                   help="batch of resnet50")
    p.add_argument("--models", default="",
                   help="comma-separated subset of "
                        + ", ".join(sorted({c.name for c in CASES})))
    p.add_argument("--channels-last", action="store_true",
                   help="PyTorch in channels_last memory format (its "
                        "fastest bf16 convolutions) instead of NCHW")
    a = p.parse_args()
    if min(a.steps, a.batch, a.resnet50_steps, a.resnet50_batch) < 1:
        p.error("steps and batches must be at least 1")
    wanted = set(filter(None, a.models.split(",")))
    unknown = wanted - {c.name for c in CASES}
    if unknown:
        p.error(f"unknown models: {', '.join(sorted(unknown))}")
    cases = [c for c in CASES if not wanted or c.name in wanted]
    try:
        import torch
    except ImportError:
        print("SKIP: PyTorch is not installed; nothing measured")
        return 0
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device; nothing measured")
        return 0
    print(f"{torch.cuda.get_device_name(0)}, PyTorch {torch.__version__}; "
          f"CIFAR-sized: batch {a.batch}, {a.steps} steps; resnet50: batch "
          f"{a.resnet50_batch}, {a.resnet50_steps} steps; PyTorch "
          f"{'channels_last' if a.channels_last else 'NCHW'}\n")
    print("| model | cohort images/s | PyTorch images/s | ratio | target |")
    print("|---|---|---|---|---|")
    slow, errors = [], []
    for case in cases:
        steps = a.resnet50_steps if case.large else a.steps
        batch = a.resnet50_batch if case.large else a.batch
        theirs, their_params, their_loss = torch_run(
            torch, case, steps, batch, a.channels_last)
        torch.cuda.empty_cache()  # leave the memory to cohort's process
        ours = cohort_run(a.cohort, case, steps, batch)
        errors += comparability_errors(case, steps, ours, their_params,
                                       their_loss)
        ratio = ours["samples_per_s"] / theirs
        if ratio < case.min_ratio:
            slow.append(label(case))
        print(f"| {label(case)} | {ours['samples_per_s']:,.0f} | "
              f"{theirs:,.0f} | {ratio:.2f}x | {case.min_ratio:.1f}x |")
    print()
    for e in errors:
        print(f"FAIL: not comparable: {e}")
    if slow:
        print(f"FAIL: below target: {', '.join(slow)}")
    if not slow and not errors:
        print("PASS: cohort at or above the target on every model (1.0x "
              "PyTorch on the small models, 0.9x on resnet50)")
    return 1 if slow or errors else 0


if __name__ == "__main__":
    sys.exit(main())
