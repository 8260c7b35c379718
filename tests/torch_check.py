#!/usr/bin/python3
"""Loads a cohort safetensors export into an equivalent torch.nn model
(Debian's python3-torch, an implementation nobody on this project wrote),
strictly (every name and shape must match), runs it on the inputs cohort
predict ran on, and compares the outputs.

  torch_check.py MODEL FILE.safetensors X.npy COHORT_Y.npy

MODEL names a model the test trained: mlp, cnn (with a residual block and
both poolings) or conv1d (zoo conv1d_bn). Prints the largest difference and
exits 1 above 1e-4 relative (to the output's largest magnitude).
"""
import json
import struct
import sys

import numpy as np
import torch
from torch import nn


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    types = {"F32": np.float32, "I64": np.int64}
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        a = np.frombuffer(data[begin:end], dtype=types[t["dtype"]])
        tensors[name] = torch.from_numpy(a.reshape(t["shape"]).copy())
    return tensors, meta


class BasicBlock(nn.Module):
    """torchvision's BasicBlock, with its names."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = x if self.downsample is None else self.downsample(x)
        return torch.relu(y + s)


def model(name):
    if name == "mlp":
        return nn.Sequential(nn.Linear(100, 32), nn.BatchNorm1d(32), nn.ReLU(),
                             nn.Dropout(0.2), nn.Linear(32, 10))
    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.MaxPool2d(2, 2), BasicBlock(8, 16, 2), nn.AvgPool2d(2, 2),
            nn.Flatten(), nn.Linear(16 * 2 * 2, 10))
    if name == "conv1d":
        return nn.Sequential(
            nn.Conv1d(3, 16, 3, 1, 1), nn.BatchNorm1d(16), nn.ReLU(),
            nn.Conv1d(16, 32, 3, 1, 1), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Conv1d(32, 3, 3, 1, 1))
    raise SystemExit("unknown model " + name)


def main():
    name, path, x_path, y_path = sys.argv[1:5]
    tensors, meta = read_safetensors(path)
    m = model(name)
    m.load_state_dict(tensors, strict=True)
    m.eval()
    with torch.no_grad():
        y = m(torch.from_numpy(np.load(x_path))).numpy()
    theirs = np.load(y_path)
    if y.shape != theirs.shape:
        print("shapes differ: torch %s, cohort %s" % (y.shape, theirs.shape))
        return 1
    diff = np.abs(y - theirs).max()
    rel = diff / max(np.abs(y).max(), 1e-12)
    print("%s: %d tensors loaded strictly; outputs %s; largest difference "
          "%.3g (%.3g of the largest output); job %s" %
          (name, len(tensors), y.shape, diff, rel,
           meta.get("cohort.job_spec", "").split("\n")[0]))
    return 0 if rel <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
