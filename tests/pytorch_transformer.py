#!/usr/bin/python3
"""The PyTorch side of tests/pytorch_transformer_test.sh and
bench/pytorch_transformer_accuracy.sh: two next-token models written the
way PyTorch users write them, exported to ONNX as README.md says.

  encoder  nn.TransformerEncoder (post-norm, ReLU, batch_first) under a
           causal mask, nn.Embedding for tokens and positions, a Linear
           head; opset 13, so LayerNorm arrives in parts.
  gpt      a GPT written by hand: pre-norm blocks whose attention is one
           Linear(D, 3D) split into Q, K and V, a masked_fill causal mask,
           GELU; LayerNormalization (opset 17); a head without bias.

  pytorch_transformer.py prepare KIND DIR
      Exports KIND to DIR/m.onnx, writes a token file of exactly BATCH
      windows (DIR/train.npy, uint16) and those windows as DIR/x.npy
      ([BATCH, 1, L] floats, as `cohort predict` takes them), and takes one
      SGD step (lr 0.1) on them in float64 (DIR/step.pt) and float32
      (DIR/step32.pt).
  pytorch_transformer.py compare KIND DIR COHORT.safetensors COHORT_Y.npy
      Loads cohort's export strictly into a fresh KIND, compares every
      tensor with DIR/step.pt and the module's outputs on DIR/x.npy with
      cohort predict's ([N, V, L]); prints the largest differences and
      exits 1 above 1e-4 (the step: above 1e-4 and 3x PyTorch's own
      float32 distance).
  pytorch_transformer.py export KIND OUT.onnx
      Exports KIND with PyTorch's initial weights.
  pytorch_transformer.py corpus DIR
      A next-token task (DIR/train.npy, DIR/test.npy) that needs attention:
      90% of the time the next token is a fixed function of the token two
      places back, otherwise random (best accuracy about 0.9).
  pytorch_transformer.py accuracy KIND DIR STEPS BATCH
      Exports KIND to DIR/KIND.onnx, trains it on DIR/train.npy for STEPS
      steps of BATCH windows (Adam, lr 3e-3 annealed by cosine) and prints
      its next-token accuracy on DIR/test.npy as `accuracy A`.
"""
import copy
import math
import os
import sys
import warnings

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_check  # noqa: E402

VOCAB, LENGTH, DIM, HEADS = 32, 16, 32, 4
BATCH = 8
TOL = 1e-4


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(LENGTH, DIM)
        layer = nn.TransformerEncoderLayer(DIM, HEADS, 2 * DIM, 0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2,
                                             enable_nested_tensor=False)
        self.head = nn.Linear(DIM, VOCAB)
        self.register_buffer(
            "mask", torch.triu(torch.full((LENGTH, LENGTH), float("-inf")), 1),
            persistent=False)

    def forward(self, ids):
        x = self.embed(ids) + self.pos(torch.arange(ids.shape[1]))
        return self.head(self.encoder(x, mask=self.mask))


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(DIM, 3 * DIM)
        self.c_proj = nn.Linear(DIM, DIM)

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(DIM, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2)
                   for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.ones(t, t).tril().view(1, 1, t, t)
        att = att.masked_fill(causal == 0, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(DIM)
        self.attn = SelfAttention()
        self.ln_2 = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(),
                                 nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(LENGTH, DIM)
        self.h = nn.ModuleList([Block(), Block()])
        self.ln_f = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


MODELS = {"encoder": (Encoder, 13), "gpt": (GPT, 17)}


def build(kind, randomise):
    torch.manual_seed(11)
    m = MODELS[kind][0]()
    if randomise:
        # LayerNorm's ones and zeros and the zero biases would hide
        # mistakes: random values everywhere, small enough for a lively
        # softmax.
        with torch.no_grad():
            for name, p in m.named_parameters():
                p.normal_(0.0, 0.3 if p.dim() > 1 else 0.1)
                if p.dim() == 1 and name.endswith("weight") and (
                        "norm" in name or "ln" in name):
                    p.add_(1.0)
    return m


def export(m, kind, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, torch.zeros(2, LENGTH, dtype=torch.long), path,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False,
                          opset_version=MODELS[kind][1])


def windows(tokens, count):
    x = np.stack([tokens[i * LENGTH:(i + 1) * LENGTH] for i in range(count)])
    y = np.stack([tokens[i * LENGTH + 1:(i + 1) * LENGTH + 1]
                  for i in range(count)])
    return torch.from_numpy(x.astype(np.int64)), torch.from_numpy(
        y.astype(np.int64))


def loss_of(m, x, y):
    return nn.functional.cross_entropy(m(x).reshape(-1, VOCAB), y.reshape(-1))


def sgd_step(module, x, y, dtype):
    m = copy.deepcopy(module).to(dtype)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    opt.zero_grad()
    loss_of(m, x, y).backward()
    opt.step()
    return m.state_dict()


def prepare(kind, d):
    m = build(kind, True)
    export(m, kind, d + "/m.onnx")
    tokens = np.random.default_rng(5).integers(0, VOCAB, BATCH * LENGTH + 1)
    np.save(d + "/train.npy", tokens.astype(np.uint16))
    x, y = windows(tokens, BATCH)
    np.save(d + "/x.npy", x.numpy().astype(np.float32)[:, None, :])
    torch.save(sgd_step(m, x, y, torch.float64), d + "/step.pt")
    torch.save(sgd_step(m, x, y, torch.float32), d + "/step32.pt")


def largest_difference(want, got):
    worst, worst_name = 0.0, ""
    for name, t in want.items():
        a, b = t.double(), got[name].double()
        r = ((a - b).abs().max() / max(a.abs().max().item(), 1.0)).item()
        if r > worst:
            worst, worst_name = r, name
    return worst, worst_name


def compare(kind, d, cohort_path, cohort_y):
    m = build(kind, True)
    m.load_state_dict(torch_check.read_safetensors(cohort_path)[0], strict=True)
    want = torch.load(d + "/step.pt")
    worst, worst_name = largest_difference(want, m.state_dict())
    torch32, _ = largest_difference(want, torch.load(d + "/step32.pt"))
    m.eval()
    x = torch.from_numpy(np.load(d + "/x.npy")[:, 0, :].astype(np.int64))
    with torch.no_grad():
        y = m(x).double()
    c = torch.from_numpy(np.load(cohort_y)).double().transpose(1, 2)
    if c.shape != y.shape:
        print("cohort predict gave %s where PyTorch gives %s" %
              (list(c.shape), list(y.shape)))
        sys.exit(1)
    out = ((y - c).abs().max() / y.abs().max()).item()
    print("loads strictly; after one SGD step the largest difference from "
          "PyTorch's float64 step is %.3g (%s; PyTorch's float32 step: "
          "%.3g); predict differs by %.3g" % (worst, worst_name, torch32, out))
    sys.exit(0 if worst <= max(TOL, 3 * torch32) and out <= TOL else 1)


def corpus(d):
    rng = np.random.default_rng(8)
    table = rng.integers(0, VOCAB, VOCAB)
    for name, size in (("train", 40000), ("test", 4000)):
        t = list(rng.integers(0, VOCAB, 2))
        noise = rng.random(size)
        other = rng.integers(0, VOCAB, size)
        for i in range(size - 2):
            t.append(table[t[-2]] if noise[i] < 0.9 else other[i])
        np.save("%s/%s.npy" % (d, name), np.array(t, dtype=np.uint16))


def accuracy(kind, d, steps, batch):
    torch.set_num_threads(2)
    m = build(kind, False)
    export(m, kind, "%s/%s.onnx" % (d, kind))
    train = np.load(d + "/train.npy").astype(np.int64)
    count = (len(train) - 1) // LENGTH
    x, y = windows(train, count)
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    g = torch.Generator().manual_seed(1)
    m.train()
    done = 0
    while done < steps:
        for idx in torch.randperm(count, generator=g).split(batch):
            if len(idx) < batch or done == steps:
                break
            opt.zero_grad()
            loss_of(m, x[idx], y[idx]).backward()
            opt.step()
            sched.step()
            done += 1
    test = np.load(d + "/test.npy").astype(np.int64)
    tx, ty = windows(test, (len(test) - 1) // LENGTH)
    m.eval()
    with torch.no_grad():
        right = (m(tx).argmax(-1) == ty).double().mean().item()
    print("accuracy %.4f" % right)


def main():
    cmd = sys.argv[1]
    if cmd == "prepare":
        prepare(sys.argv[2], sys.argv[3])
    elif cmd == "compare":
        compare(*sys.argv[2:6])
    elif cmd == "export":
        export(build(sys.argv[2], False), sys.argv[2], sys.argv[3])
    elif cmd == "corpus":
        corpus(sys.argv[2])
    else:
        accuracy(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))


if __name__ == "__main__":
    main()
