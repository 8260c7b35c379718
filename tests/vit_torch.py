#!/usr/bin/python3
"""The PyTorch side of tests/vit_torch_test.sh: the zoo's vit_tiny as a
PyTorch user writes a small vision transformer (nn.Conv2d patches, a
learned position parameter, nn.TransformerEncoderLayer(norm_first=True,
activation="gelu"), nn.LayerNorm, the mean over the patches, nn.Linear).

  vit_torch.py prepare DIR
      Gives the module random starting weights and writes them under the
      zoo model's tensor names (DIR/init.safetensors), a batch of images
      and labels (DIR/x.npy, DIR/y.npy), and one SGD step (lr 0.1) on it in
      training mode, in float64 (DIR/step.pt) and float32 (DIR/step32.pt).
      Prints the module's parameter count.
  vit_torch.py compare NAME DIR COHORT.safetensors COHORT_Y.npy
      Loads cohort's export (renamed to the module's names) strictly into
      a fresh module, compares every parameter with DIR/step.pt and the
      module's evaluation-mode outputs on DIR/x.npy with cohort predict's;
      prints the largest differences (each relative to the tensor's largest
      value, or to 1 for smaller tensors) and exits 1 when predict differs
      by more than 1e-4 or the step by more than 1e-4 and by more than
      PyTorch's own float32 step does (times 3).
"""
import copy
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_check  # noqa: E402
import torch_save  # noqa: E402

TOL = 1e-4
N, CLASSES, DEPTH = 4, 1000, 4


class ViTTiny(nn.Module):
    """The zoo's vit_tiny: input [N, 3, 224, 224], 1000 classes."""

    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 192, kernel_size=16, stride=16)
        self.pos = nn.Parameter(torch.zeros(196, 192))
        self.blocks = nn.ModuleList([
            nn.TransformerEncoderLayer(192, nhead=3, dim_feedforward=768,
                                       dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(DEPTH)])
        self.norm = nn.LayerNorm(192)
        self.head = nn.Linear(192, CLASSES)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = x + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(dim=1))


# A block's tensors: cohort's transformer_block's name -> the encoder
# layer's.
BLOCK = {"ln1.weight": "norm1.weight", "ln1.bias": "norm1.bias",
         "attn.in_proj_weight": "self_attn.in_proj_weight",
         "attn.in_proj_bias": "self_attn.in_proj_bias",
         "attn.out_proj.weight": "self_attn.out_proj.weight",
         "attn.out_proj.bias": "self_attn.out_proj.bias",
         "ln2.weight": "norm2.weight", "ln2.bias": "norm2.bias",
         "mlp.0.weight": "linear1.weight", "mlp.0.bias": "linear1.bias",
         "mlp.2.weight": "linear2.weight", "mlp.2.bias": "linear2.bias"}


def torch_names():
    """The zoo's tensor names (layer positions: patch conv 0, to_sequence
    1, positions 2, blocks 3-6, norm 7, pool 8, head 9) -> the module's."""
    names = {"0.weight": "patch.weight", "0.bias": "patch.bias",
             "2.weight": "pos", "7.weight": "norm.weight",
             "7.bias": "norm.bias", "9.weight": "head.weight",
             "9.bias": "head.bias"}
    for i in range(DEPTH):
        for ours, theirs in BLOCK.items():
            names["%d.%s" % (3 + i, ours)] = "blocks.%d.%s" % (i, theirs)
    return names


def build():
    torch.manual_seed(11)
    m = ViTTiny()
    # Zero positions, LayerNorm's ones and zeros and zero biases would hide
    # mistakes (a transposed table, weight and bias swapped): random values
    # there, PyTorch's initialisation for the weights.
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name == "pos":
                p.normal_(0.0, 1.0)
            elif p.dim() == 1:
                p.normal_(1.0 if "norm" in name and name.endswith("weight")
                          else 0.0, 0.1)
    return m


def sgd_step(module, x, y, dtype):
    m = copy.deepcopy(module).to(dtype)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    loss = nn.functional.cross_entropy(m(torch.from_numpy(x).to(dtype)),
                                       torch.from_numpy(y))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return m.state_dict()


def prepare(d):
    m = build()
    ours = {v: k for k, v in torch_names().items()}
    state = m.state_dict()
    if sorted(ours) != sorted(state):
        raise SystemExit("the name map misses %s" %
                         sorted(set(state) ^ set(ours)))
    torch_save.save(d + "/init.safetensors",
                    {ours[k]: v for k, v in state.items()})
    rng = np.random.default_rng(5)
    x = rng.normal(0, 1, (N, 3, 224, 224)).astype(np.float32)
    y = rng.integers(0, CLASSES, N).astype(np.int64)
    np.save(d + "/x.npy", x)
    np.save(d + "/y.npy", y)
    torch.save(sgd_step(m, x, y, torch.float64), d + "/step.pt")
    torch.save(sgd_step(m, x, y, torch.float32), d + "/step32.pt")
    print("%d parameters" % sum(p.numel() for p in m.parameters()))


def relative(a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / max(a.abs().max().item(), 1.0)).item()


def largest_difference(want, got):
    worst, worst_name = 0.0, ""
    for name, t in want.items():
        r = relative(t, got[name])
        if r > worst:
            worst, worst_name = r, name
    return worst, worst_name


def compare(d, cohort_path, cohort_y):
    tensors, _ = torch_check.read_safetensors(cohort_path)
    names = torch_names()
    m = build()
    m.load_state_dict({names.get(k, k): v for k, v in tensors.items()},
                      strict=True)
    want = torch.load(d + "/step.pt")
    worst, worst_name = largest_difference(want, m.state_dict())
    torch32, _ = largest_difference(want, torch.load(d + "/step32.pt"))
    m.eval()
    with torch.no_grad():
        y = m(torch.from_numpy(np.load(d + "/x.npy"))).double()
    if y.std(0).max() < 1e-3 * y.abs().max():
        print("the outputs hardly depend on the input: nothing to compare")
        sys.exit(1)
    c = torch.from_numpy(np.load(cohort_y)).double()
    if c.shape != y.shape:
        print("cohort predict gave %s where PyTorch gives %s" %
              (list(c.shape), list(y.shape)))
        sys.exit(1)
    out = ((y - c).abs().max() / y.abs().max()).item()
    print("loads strictly; after one SGD step the largest difference from "
          "PyTorch's float64 step is %.3g (%s; PyTorch's float32 step: %.3g); "
          "predict differs by %.3g" % (worst, worst_name, torch32, out))
    step_ok = worst <= max(TOL, 3 * torch32)
    sys.exit(0 if step_ok and out <= TOL else 1)


def main():
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2])
    else:
        compare(*sys.argv[3:6])


if __name__ == "__main__":
    main()
