#!/usr/bin/python3
"""PyTorch's milliseconds per forward + backward for bench/layers_bench's
cases (batch 64, or 8 for the attention and transformer block at
D 256, 4 heads, L 256; float32, one thread, best of 5 x 10), to print
beside cohort's (an argument keeps only the cases whose name contains it):
  /usr/bin/python3 bench/layers_torch.py [FILTER]
"""
import os
import sys
import time

# torch.set_num_threads(1) does not reach Debian's OpenBLAS (pthread build),
# which would otherwise run the products on every core; it reads this
# variable when it loads, i.e. before torch is imported.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas_env  # noqa: E402

blas_env.apply_core()  # OpenBLAS's kernels on CPUs it does not know
import torch  # noqa: E402
from torch import nn  # noqa: E402

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


class Attention(nn.Module):
    """cohort's attention on [N, D, L]: nn.MultiheadAttention on [N, L, D]."""

    def __init__(self, dim, heads, causal):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.causal = causal

    def forward(self, x):
        x = x.transpose(1, 2)
        L = x.shape[1]
        mask = (torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
                if self.causal else None)
        return self.attn(x, x, x, attn_mask=mask,
                         need_weights=False)[0].transpose(1, 2)


class Block(nn.Module):
    """cohort's transformer_block (pre-norm GPT block) on [N, D, L]."""

    def __init__(self, dim, heads, ratio=4):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, ratio * dim), nn.GELU(),
                                 nn.Linear(ratio * dim, dim))

    def forward(self, x):
        x = x.transpose(1, 2)
        L = x.shape[1]
        mask = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
        a = self.ln1(x)
        h = x + self.attn(a, a, a, attn_mask=mask, need_weights=False)[0]
        return (h + self.mlp(self.ln2(h))).transpose(1, 2)


class Interact(nn.Module):
    """cohort's interaction { kind: DOT }: DLRM's interact_features."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        t = x.view(x.shape[0], -1, self.dim)
        z = torch.bmm(t, t.transpose(1, 2))
        n = z.shape[1]
        li = torch.tensor([i for i in range(n) for j in range(i)])
        lj = torch.tensor([j for i in range(n) for j in range(i)])
        return torch.cat([x[:, :self.dim], z[:, li, lj]], dim=1)


CASES = [c + (N,) for c in CASES] + [
    ("attention causal", Attention(256, 4, True), (256, 256), 8),
    ("attention bidir", Attention(256, 4, False), (256, 256), 8),
    ("transformer_block", Block(256, 4), (256, 256), 8),
    ("interaction dot 27 x 16", Interact(16), (27 * 16,), 128),
]
print("float32, 1 thread; best of 5 x 10; wall ms, then this thread's CPU ms")
only = sys.argv[1] if len(sys.argv) > 1 else ""
for name, m, shape, n in CASES:
    if only not in name:
        continue
    x = torch.randn((n,) + shape, requires_grad=True)
    dy = torch.randn_like(m(x))
    best, best_cpu = 1e9, 1e9
    for _ in range(5):
        t, c = time.perf_counter(), time.thread_time()
        for _ in range(10):
            m(x).backward(dy)
        best = min(best, (time.perf_counter() - t) / 10 * 1000)
        best_cpu = min(best_cpu, (time.thread_time() - c) / 10 * 1000)
    print("%-20s %-10s N=%-3d %8.3f ms %8.3f cpu" %
          (name, "x".join(map(str, shape)), n, best, best_cpu))
