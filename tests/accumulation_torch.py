#!/usr/bin/python3
"""Gradient accumulation against PyTorch 1.13.

  accumulation_torch.py COHORT WORKDIR

Eleven samples in batches of 4 with 3 batches accumulated make one
optimizer step per epoch whose batches hold 4, 4 and 3 samples: the step
must be the mean over all eleven (each batch weighing by its samples, not
1/3 each), whatever order the sampler deals them in. cohort trains 6 such
steps (SGD with momentum, weight decay and clip_grad_norm) from weights this
script writes (--init-from); torch takes the same 6 full-batch steps with
torch.optim.SGD and clip_grad_norm_. Prints the largest difference and
exits 1 above 1e-5; also checks that weighting each batch 1/3 would have
been caught.
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

try:
    import torch
    from torch import nn
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(0)

cohort, work = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(20)
x = rng.standard_normal((11, 20)).astype(np.float32)
y = rng.integers(0, 5, 11).astype(np.int64)
np.save(os.path.join(work, "x.npy"), x)
np.save(os.path.join(work, "y.npy"), y)

torch.manual_seed(3)
model = nn.Sequential(nn.Linear(20, 16), nn.Tanh(), nn.Linear(16, 5))
init = {k: v.detach().numpy().astype(np.float32)
        for k, v in model.state_dict().items()}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    return {k: np.frombuffer(data[t["data_offsets"][0]:t["data_offsets"][1]],
                             dtype=np.float32).reshape(t["shape"])
            for k, t in header.items()}


write_safetensors(os.path.join(work, "init.safetensors"), init)
spec = """name: "accumulate-torch"
model { layers { linear { out_features: 16 } } layers { tanh {} }
        layers { linear { out_features: 5 } } }
data { kind: NUMPY dir: "%s" numpy { shape: 20 classes: 5
       train_x: "x.npy" train_y: "y.npy" test_x: "x.npy" test_y: "y.npy" } }
batch_size: 4
gradient_accumulation_steps: 3
epochs: 6
optimizer { lr: 0.2 momentum: 0.9 weight_decay: 0.01 clip_grad_norm: 0.5 }
seed: 4
""" % work
with open(os.path.join(work, "job.textproto"), "w") as f:
    f.write(spec)
run = subprocess.run(
    [cohort, "train", "--job=" + os.path.join(work, "job.textproto"),
     "--devices=cpu:1", "--quiet",
     "--init-from=" + os.path.join(work, "init.safetensors"),
     "--export=" + os.path.join(work, "final.safetensors"),
     "--report=" + os.path.join(work, "report.json")],
    capture_output=True, text=True)
if run.returncode != 0:
    sys.exit("cohort train failed: " + run.stderr.strip())
steps = json.load(open(os.path.join(work, "report.json")))["steps"]
got = read_safetensors(os.path.join(work, "final.safetensors"))


def torch_run(weights):
    """6 steps; `weights`: each of the 3 batches' share of the gradient
    (None: the full-batch mean)."""
    m = nn.Sequential(nn.Linear(20, 16), nn.Tanh(), nn.Linear(16, 5)).double()
    m.load_state_dict({k: torch.from_numpy(v).double() for k, v in init.items()})
    opt = torch.optim.SGD(m.parameters(), lr=np.float32(0.2).item(),
                          momentum=np.float32(0.9).item(),
                          weight_decay=np.float32(0.01).item())
    xs, ys = torch.from_numpy(x).double(), torch.from_numpy(y)
    for _ in range(6):
        opt.zero_grad()
        if weights is None:
            nn.functional.cross_entropy(m(xs), ys).backward()
        else:
            # Any split of the 11 samples into 4, 4, 3 gives the same mean,
            # so the order cohort's sampler used does not matter for it.
            for (a, b), w in zip(((0, 4), (4, 8), (8, 11)), weights):
                (w * nn.functional.cross_entropy(m(xs[a:b]), ys[a:b])).backward()
        nn.utils.clip_grad_norm_(m.parameters(), np.float32(0.5).item())
        opt.step()
    return {k: v.numpy() for k, v in m.state_dict().items()}


want = torch_run(None)
wrong = torch_run((1 / 3, 1 / 3, 1 / 3))
worst = max(np.abs(got[k] - want[k]).max() for k in want)
apart = max(np.abs(wrong[k] - want[k]).max() for k in want)
scale = max(np.abs(want[k]).max() for k in want)
print("accumulation of 4 + 4 + 3 samples vs PyTorch 1.13 full batch, %d "
      "steps: max |diff| %.2e (parameters up to %.2f); weighting the batches "
      "1/3 each would be %.2e off" % (steps, worst, scale, apart))
ok = steps == 6 and worst <= 1e-5 and apart > 1e-4
sys.exit(0 if ok else 1)
