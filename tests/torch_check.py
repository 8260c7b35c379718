#!/usr/bin/python3
"""Loads a cohort safetensors export into an equivalent torch.nn model
(Debian's python3-torch, an implementation nobody on this project wrote),
strictly (every name and shape must match), runs it on the inputs cohort
predict ran on, and compares the outputs.

  torch_check.py MODEL FILE.safetensors X.npy COHORT_Y.npy

The torch model is built from the layer list the export records
(metadata cohort.layers) with sizes from the tensors' shapes: every layer
kind, residual blocks as torchvision's BasicBlock and Bottleneck, branch
blocks as a ModuleList of Sequential paths (grouped and dilated
convolutions included). MODEL only
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


class Branch(nn.Module):
    """cohort's branch: paths over the same input, concatenated along the
    channels (features) or summed; state_dict names paths.P.I.NAME."""

    def __init__(self, paths, combine):
        super().__init__()
        self.paths = nn.ModuleList(paths)
        self.combine = combine

    def forward(self, x):
        outs = [p(x) for p in self.paths]
        if self.combine == "SUM":
            return sum(outs[1:], outs[0])
        return torch.cat(outs, dim=1)


def make_layer(layer, prefix, tensors, in_shape):
    """The torch module of one cohort layer whose tensors are named
    PREFIX.NAME, on per-sample inputs of shape `in_shape` (LayerNorm and
    GroupNorm take their sizes from it)."""
    (kind, a), = layer.items()
    w = tensors.get(prefix + ".weight")
    has_bias = prefix + ".bias" in tensors
    if kind == "linear":
        return nn.Linear(w.shape[1], w.shape[0], bias=has_bias)
    if kind in ("conv1d", "conv2d"):
        conv = nn.Conv1d if kind == "conv1d" else nn.Conv2d
        groups = a.get("groups", 1) or 1
        return conv(w.shape[1] * groups, w.shape[0], w.shape[2],
                    a.get("stride", 1) or 1, a.get("padding", 0),
                    a.get("dilation", 1) or 1, groups, bias=has_bias)
    if kind in ("batchnorm1d", "batchnorm2d"):
        bn = nn.BatchNorm1d if kind == "batchnorm1d" else nn.BatchNorm2d
        return bn(w.shape[0], eps=a.get("eps", 1e-5))
    if kind == "relu":
        return nn.ReLU()
    if kind in ("maxpool2d", "avgpool2d", "maxpool1d", "avgpool1d"):
        k = a["kernel"]
        pool = {"maxpool2d": nn.MaxPool2d, "avgpool2d": nn.AvgPool2d,
                "maxpool1d": nn.MaxPool1d, "avgpool1d": nn.AvgPool1d}[kind]
        return pool(k, a.get("stride", k), a.get("padding", 0))
    if kind == "global_avgpool":
        return GlobalPool()
    if kind == "flatten":
        return nn.Flatten()
    if kind == "dropout":
        return nn.Dropout(a.get("p", 0.0))
    if kind == "gelu":
        tanh = a.get("tanh_approximation", False)
        return nn.GELU(approximate="tanh" if tanh else "none")
    if kind == "silu":
        return nn.SiLU()
    if kind == "tanh":
        return nn.Tanh()
    if kind == "sigmoid":
        return nn.Sigmoid()
    if kind == "leaky_relu":
        return nn.LeakyReLU(a.get("negative_slope", 0.01))
    if kind == "layernorm":
        return nn.LayerNorm(in_shape, eps=a.get("eps", 1e-5),
                            elementwise_affine=w is not None)
    if kind == "groupnorm":
        return nn.GroupNorm(a["groups"], in_shape[0], eps=a.get("eps", 1e-5),
                            affine=w is not None)
    if kind == "residual":
        c1 = tensors[prefix + ".conv1.weight"]
        out = a["out_channels"]
        if a.get("bottleneck", False):
            return Bottleneck(c1.shape[1], c1.shape[0], out,
                              a.get("stride", 1))
        return BasicBlock(c1.shape[1], out, a.get("stride", 1))
    if kind == "branch":
        paths = [sequence(path.get("layers", []), "%s.paths.%d." % (prefix, p),
                          tensors, in_shape)
                 for p, path in enumerate(a.get("paths", []))]
        return Branch(paths, a.get("combine", "CONCAT"))
    raise SystemExit("no torch form for layer kind " + kind)


def sequence(layers, prefix, tensors, in_shape):
    """An nn.Sequential of `layers` (tensors PREFIX + index + .NAME), each
    layer's input shape found by passing a zero sample through the ones
    before it."""
    mods = []
    x = torch.zeros((1,) + tuple(in_shape))
    for i, layer in enumerate(layers):
        if mods:
            with torch.no_grad():
                x = mods[-1].eval()(x)
        mods.append(make_layer(layer, prefix + str(i), tensors,
                               tuple(x.shape[1:])))
    return nn.Sequential(*mods)


def from_layers(layers, tensors, input_shape):
    """The nn.Sequential of cohort's layer list (the export's cohort.layers
    metadata), sizes read from the tensors' shapes and the input shape."""
    return sequence(layers, "", tensors, input_shape)


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
