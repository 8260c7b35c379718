#!/usr/bin/python3
"""Loads a cohort safetensors export into an equivalent torch.nn model
(Debian's python3-torch, an implementation nobody on this project wrote),
strictly (every name and shape must match), runs it on the inputs cohort
predict ran on, and compares the outputs.

  torch_check.py MODEL FILE.safetensors X.npy COHORT_Y.npy

The torch model is built from the layer list the export records
(metadata cohort.layers) with sizes from the tensors' shapes: every layer
kind, residual blocks as torchvision's BasicBlock and Bottleneck. MODEL only
names the case in the printed line. Prints the largest difference and exits
1 above 1e-4 relative (to the output's largest magnitude).
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


class GlobalPool(nn.Module):
    """cohort's global_avgpool: the mean of each channel, flat."""

    def forward(self, x):
        return x.mean(dim=tuple(range(2, x.dim())))


class Bottleneck(nn.Module):
    """torchvision's Bottleneck (stride on the 3x3), with its names."""

    def __init__(self, cin, width, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        s = x if self.downsample is None else self.downsample(x)
        return torch.relu(y + s)


def from_layers(layers, tensors, input_shape):
    """The nn.Sequential of cohort's layer list (the export's cohort.layers
    metadata), sizes read from the tensors' shapes, or, for layers without
    parameters that need one (layernorm, groupnorm), from the per-sample
    shapes a zero sample of `input_shape` takes through the layers."""
    mods = []
    shapes = []
    x = torch.zeros((1,) + tuple(input_shape))
    for i, layer in enumerate(layers):
        if mods:
            with torch.no_grad():
                x = mods[-1].eval()(x)
        shapes.append(tuple(x.shape[1:]))
        (kind, a), = layer.items()
        w = tensors.get("%d.weight" % i)
        if kind == "linear":
            mods.append(nn.Linear(w.shape[1], w.shape[0],
                                  bias="%d.bias" % i in tensors))
        elif kind in ("conv1d", "conv2d"):
            conv = nn.Conv1d if kind == "conv1d" else nn.Conv2d
            mods.append(conv(w.shape[1], w.shape[0], w.shape[2],
                             a.get("stride", 1), a.get("padding", 0),
                             bias="%d.bias" % i in tensors))
        elif kind in ("batchnorm1d", "batchnorm2d"):
            bn = nn.BatchNorm1d if kind == "batchnorm1d" else nn.BatchNorm2d
            mods.append(bn(w.shape[0], eps=a.get("eps", 1e-5)))
        elif kind == "relu":
            mods.append(nn.ReLU())
        elif kind in ("maxpool2d", "avgpool2d"):
            k = a["kernel"]
            pool = nn.MaxPool2d if kind == "maxpool2d" else nn.AvgPool2d
            mods.append(pool(k, a.get("stride", k), a.get("padding", 0)))
        elif kind == "global_avgpool":
            mods.append(GlobalPool())
        elif kind == "flatten":
            mods.append(nn.Flatten())
        elif kind == "dropout":
            mods.append(nn.Dropout(a.get("p", 0.0)))
        elif kind == "gelu":
            tanh = a.get("tanh_approximation", False)
            mods.append(nn.GELU(approximate="tanh" if tanh else "none"))
        elif kind == "silu":
            mods.append(nn.SiLU())
        elif kind == "tanh":
            mods.append(nn.Tanh())
        elif kind == "sigmoid":
            mods.append(nn.Sigmoid())
        elif kind == "leaky_relu":
            mods.append(nn.LeakyReLU(a.get("negative_slope", 0.01)))
        elif kind == "layernorm":
            mods.append(nn.LayerNorm(shapes[i], eps=a.get("eps", 1e-5),
                                     elementwise_affine=w is not None))
        elif kind == "groupnorm":
            mods.append(nn.GroupNorm(a["groups"], shapes[i][0],
                                     eps=a.get("eps", 1e-5),
                                     affine=w is not None))
        elif kind in ("maxpool1d", "avgpool1d"):
            k = a["kernel"]
            pool = nn.MaxPool1d if kind == "maxpool1d" else nn.AvgPool1d
            mods.append(pool(k, a.get("stride", k), a.get("padding", 0)))
        elif kind == "residual":
            c1 = tensors["%d.conv1.weight" % i]
            out = a["out_channels"]
            if a.get("bottleneck", False):
                mods.append(Bottleneck(c1.shape[1], c1.shape[0], out,
                                       a.get("stride", 1)))
            else:
                mods.append(BasicBlock(c1.shape[1], out, a.get("stride", 1)))
        else:
            raise SystemExit("no torch form for layer kind " + kind)
    return nn.Sequential(*mods)


def main():
    name, path, x_path, y_path = sys.argv[1:5]
    tensors, meta = read_safetensors(path)
    m = from_layers(json.loads(meta["cohort.layers"]), tensors,
                    json.loads(meta["cohort.input_shape"]))
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
