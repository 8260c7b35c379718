#!/usr/bin/python3
"""Training speed of the standard models, cohort against PyTorch 1.13.

One program per side, the same shapes, batch and optimizer (SGD, lr 0.01,
momentum 0.9), random data, alternating runs, median; threads bounded on
both sides (OpenBLAS and OpenMP included). cohort runs `cohort train
--devices=cpu:1 --threads=T` and reports samples/s over its training
steps; PyTorch (/usr/bin/python3, Debian's torch and torchvision) times
the same number of steps after two warm-up steps. Prints a markdown table
with the ratio and exits 1 where cohort is below GOAL times PyTorch.

  standard_models.py COHORT [--threads 1,2] [--repeats 3] [--models ...]

Models: resnet18_cifar (the zoo's CIFAR layout, batch 32), resnet18
(torchvision's layout at 3x32x32 through `model { onnx }`, batch 32),
resnet50 (the zoo's, torchvision's layout at 224, batch 8), mobilenet_v2
(torchvision's at 224 through `model { onnx }`, batch 8).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

GOAL = 1.5
# name: (input shape, classes, batch, steps, cohort model block)
MODELS = {
    "resnet18_cifar": ((3, 32, 32), 10, 32, 12, 'zoo: "resnet18_cifar"'),
    "resnet18": ((3, 32, 32), 10, 32, 12, 'onnx: "resnet18.onnx"'),
    "resnet50": ((3, 224, 224), 1000, 8, 6, 'zoo: "resnet50"'),
    "mobilenet_v2": ((3, 224, 224), 1000, 8, 10, 'onnx: "mobilenet_v2.onnx"'),
}


def torch_model(name):
    import torch
    import torchvision
    shape, classes = MODELS[name][0], MODELS[name][1]
    kind = "resnet18" if name.startswith("resnet18") else name
    m = getattr(torchvision.models, kind)(num_classes=classes)
    if name == "resnet18_cifar":  # a 3x3 stem and no max pool
        m.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        m.maxpool = torch.nn.Identity()
    return m, shape, classes


def export(name, path):
    import torch
    m, shape, _ = torch_model(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, torch.randn(2, *shape), path,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=13)


def torch_rate(name, threads):
    """PyTorch's side, in this process (run as a child of main())."""
    import torch
    torch.set_num_threads(threads)
    m, shape, classes = torch_model(name)
    batch, steps = MODELS[name][2], MODELS[name][3]
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, *shape)
    y = torch.randint(0, classes, (batch,))
    m.train()

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()

    for _ in range(2):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return batch * steps / (time.perf_counter() - start)


def env_for(threads):
    return dict(os.environ, OPENBLAS_NUM_THREADS=str(threads),
                OMP_NUM_THREADS=str(threads))


def cohort_rate(cohort, name, threads, work):
    shape, classes, batch, steps, model = MODELS[name]
    spec = os.path.join(work, name + ".textproto")
    with open(spec, "w") as f:
        f.write("model { %s }\n" % model)
        f.write("data { kind: SYNTHETIC synthetic { shape: [%s] classes: %d "
                "} }\n" % (", ".join(map(str, shape)), classes))
        f.write("batch_size: %d max_steps: %d eval { disable: true }\n"
                "optimizer { kind: SGD lr: 0.01 momentum: 0.9 }\n" %
                (batch, steps + 2))
    report = os.path.join(work, "report.json")
    subprocess.run([cohort, "train", "--job=" + spec, "--devices=cpu:1",
                    "--threads=%d" % threads, "--quiet", "--report=" + report],
                   check=True, capture_output=True, env=env_for(threads))
    with open(report) as f:
        return json.load(f)["samples_per_s"]


def child_rate(name, threads):
    out = subprocess.run([sys.executable, os.path.abspath(__file__),
                          "--torch-side", name, str(threads)],
                         check=True, capture_output=True, text=True,
                         env=env_for(threads)).stdout
    return float(out.split()[-1])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-side":
        print(torch_rate(sys.argv[2], int(sys.argv[3])))
        return 0
    p = argparse.ArgumentParser()
    p.add_argument("cohort")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--models", default=",".join(MODELS))
    a = p.parse_args()
    cohort = os.path.abspath(a.cohort)
    missed = []
    print("median of %d alternating runs; training samples/s\n" % a.repeats)
    print("| model | threads | cohort | PyTorch 1.13 | ratio |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for name in a.models.split(","):
            if "onnx" in MODELS[name][4]:
                export(name, os.path.join(work, name + ".onnx"))
            for threads in map(int, a.threads.split(",")):
                ours, theirs = [], []
                for _ in range(a.repeats):
                    ours.append(cohort_rate(cohort, name, threads, work))
                    theirs.append(child_rate(name, threads))
                mo, mt = statistics.median(ours), statistics.median(theirs)
                print("| %s | %d | %.2f | %.2f | %.2fx |" %
                      (name, threads, mo, mt, mo / mt), flush=True)
                if mo / mt < GOAL:
                    missed.append("%s at %d threads: %.2fx" %
                                  (name, threads, mo / mt))
    if missed:
        print("\nbelow the goal of %.1fx PyTorch: %s" % (GOAL, "; ".join(missed)))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
