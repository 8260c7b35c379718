#!/usr/bin/python3
"""PyTorch's milliseconds per forward + backward for bench/layers_bench's
cases (batch 64, float32, one thread, best of 5 x 10), to print beside
cohort's:
  /usr/bin/python3 bench/layers_torch.py
"""
import time

import torch
from torch import nn

torch.set_num_threads(1)
N = 64
CASES = [
    ("relu", nn.ReLU(), (32, 16, 16)),
    ("gelu", nn.GELU(), (32, 16, 16)),
    ("gelu tanh", nn.GELU(approximate="tanh"), (32, 16, 16)),
    ("silu", nn.SiLU(), (32, 16, 16)),
    ("tanh", nn.Tanh(), (32, 16, 16)),
    ("sigmoid", nn.Sigmoid(), (32, 16, 16)),
    ("leaky_relu", nn.LeakyReLU(), (32, 16, 16)),
    ("batchnorm2d", nn.BatchNorm2d(32), (32, 16, 16)),
    ("layernorm", nn.LayerNorm((32, 16, 16)), (32, 16, 16)),
    ("groupnorm 8", nn.GroupNorm(8, 32), (32, 16, 16)),
    ("layernorm", nn.LayerNorm(512), (512,)),
    ("groupnorm 8", nn.GroupNorm(8, 512), (512,)),
    ("maxpool1d k3 s2 p1", nn.MaxPool1d(3, 2, 1), (32, 256)),
    ("avgpool1d k3 s2 p1", nn.AvgPool1d(3, 2, 1), (32, 256)),
]
print("batch %d, float32, 1 thread; best of 5 x 10" % N)
for name, m, shape in CASES:
    x = torch.randn((N,) + shape, requires_grad=True)
    dy = torch.randn_like(m(x))
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(10):
            m(x).backward(dy)
        best = min(best, (time.perf_counter() - t) / 10 * 1000)
    print("%-20s %-10s %8.3f ms" % (name, "x".join(map(str, shape)), best))
