"""Compares cohort's attention, per-position LayerNorm and transformer block
(worker/layers/, float64) with PyTorch 1.13's nn.MultiheadAttention,
nn.LayerNorm and a pre-norm GPT block built from them, on random inputs: the
forward output, the input gradient and every parameter gradient for a
random upstream gradient.

usage: attention_torch.py DUMP   (DUMP: worker/layers/layer_dump)
Prints the worst difference per case (relative to the largest magnitude of
the compared tensor) and exits 1 above 1e-5.
"""
import subprocess
import sys

try:
    import torch
    from torch import nn
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(0)

dump = sys.argv[1]
torch.manual_seed(21)
torch.set_default_dtype(torch.float64)
TOLERANCE = 1e-5


def causal_mask(length):
    """True above the diagonal: query i does not see keys j > i."""
    return torch.triu(torch.ones(length, length, dtype=torch.bool), 1)


class Attention(nn.Module):
    """[N, D, L] -> [N, D, L] (cohort's per-sample {D, L})."""

    def __init__(self, dim, heads, causal):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.causal = causal

    def forward(self, x):
        x = x.transpose(1, 2)
        mask = causal_mask(x.shape[1]) if self.causal else None
        y = self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]
        return y.transpose(1, 2)


class PositionNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        return self.ln(x.transpose(1, 2)).transpose(1, 2)


class Block(nn.Module):
    """The design's pre-norm GPT block; attributes in parameter order."""

    def __init__(self, dim, heads, ratio, causal):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, ratio * dim), nn.GELU(),
                                 nn.Linear(ratio * dim, dim))
        self.causal = causal

    def forward(self, x):
        x = x.transpose(1, 2)
        mask = causal_mask(x.shape[1]) if self.causal else None
        a = self.ln1(x)
        h = x + self.attn(a, a, a, attn_mask=mask, need_weights=False)[0]
        return (h + self.mlp(self.ln2(h))).transpose(1, 2)


# (cohort layer text, torch module, batch, D, L)
CASES = []
dims = [8, 16, 32, 64]
for causal in (True, False):
    for heads in (1, 2, 4):
        for i, length in enumerate((1, 7, 64, 130)):
            dim = dims[(i + heads) % 4]
            text = f"attention {{ heads: {heads} bidirectional: {str(not causal).lower()} }}"
            CASES.append((text, Attention(dim, heads, causal), 2, dim, length))
for dim, length in ((8, 5), (32, 130)):
    CASES.append(("layernorm { per_position: true }", PositionNorm(dim), 3,
                  dim, length))
CASES.append(("layernorm { per_position: true eps: 0.01 }",
              PositionNorm(16), 2, 16, 9))
CASES[-1][1].ln.eps = 0.01
for ratio, causal, dim, heads, length in ((4, True, 32, 4, 70),
                                          (2, True, 16, 2, 7),
                                          (4, False, 16, 4, 130),
                                          (2, False, 64, 2, 1)):
    text = (f"transformer_block {{ heads: {heads} mlp_ratio: {ratio} "
            f"bidirectional: {str(not causal).lower()} }}")
    CASES.append((text, Block(dim, heads, ratio, causal), 2, dim, length))

failed = 0
for text, m, n, dim, length in CASES:
    with torch.no_grad():  # parameters away from their initial values
        for p in m.parameters():
            p.add_(torch.randn(p.shape) * 0.2)
    x = torch.randn(n, dim, length).requires_grad_()
    y = m(x)
    dy = torch.randn(y.shape)
    y.backward(dy)
    cohort = lambda t: t.transpose(0, 1).contiguous().flatten()
    numbers = [cohort(x.detach()), cohort(dy)]
    numbers += [p.detach().flatten() for p in m.parameters()]
    stdin = "\n".join(repr(v) for v in torch.cat(numbers).tolist())
    args = [dump, text, str(n), str(dim), str(length)]
    run = subprocess.run(args, input=stdin, capture_output=True, text=True)
    where = f"{text} on N={n} D={dim} L={length}"
    if run.returncode != 0:
        print(f"FAIL: {where}: layer_dump: {run.stderr.strip()}")
        failed += 1
        continue
    out = [float(v) for v in run.stdout.split()]
    pieces = [("output", y.detach()), ("input gradient", x.grad)]
    pieces += [(name + " gradient", p.grad) for name, p in m.named_parameters()]
    at, worst, what = 0, 0.0, ""
    for name, want in pieces:
        k = want.numel()
        got = torch.tensor(out[at:at + k])
        if name in ("output", "input gradient"):  # {D, N, L} -> [N, D, L]
            got = got.reshape(dim, n, length).transpose(0, 1)
        got = got.reshape(want.shape)
        at += k
        d = ((got - want).abs().max() /
             max(want.abs().max().item(), 1e-300)).item()
        if d >= worst:
            worst, what = d, name
    if at != len(out):
        print(f"FAIL: {where}: layer_dump printed {len(out)} numbers, "
              f"PyTorch has {at}")
        failed += 1
        continue
    ok = worst <= TOLERANCE
    failed += not ok
    print(f"{'ok' if ok else 'FAIL'}: {where}: worst difference {worst:.2e} "
          f"of the largest value ({what})")
print(f"{len(CASES) - failed} of {len(CASES)} cases within {TOLERANCE}")
sys.exit(1 if failed else 0)
