#!/usr/bin/python3
"""PyTorch 1.13's side of the recommendation-model comparison: the zoo's
dlrm_small written in PyTorch, trained one pass over Criteo-format files
with nn.EmbeddingBag(sparse=True), then evaluated by exact AUC.

  ctr_torch.py --train F [F ...] --test F [--batch 128] [--lr 0.05]
               [--optimizer adagrad|sgd] [--threads 1] [--rows 32768]
               [--seed 1]

The files are read as cohort's CRITEO data set reads them (worker/data/
criteo_line.cc): dense features log(1 + max(x, 0)), empty 0; each
hexadecimal value hashed into its table's rows with the same SplitMix64
mix, an empty cell row 0. The model is dlrm_small's (common/zoo_specs.cc):
bottom MLP 13-64-16, 26 tables of `rows` x 16 initialised uniform in
[-1/sqrt(rows), 1/sqrt(rows)], DLRM's dot interaction, top MLP
367-128-64-1, BCE with logits. Adagrad steps the sparse table gradients
as torch.optim.Adagrad does (touched rows only) and the dense ones alike.

Prints one line: "train_samples_per_s X auc Y normalized_entropy Z
samples N seconds S" (the training pass's rate, data parsing excluded).

  ctr_torch.py --cohort-model ROWS [--sparse] [--dim D]

prints the same model as a cohort `model { ... }` block with tables of ROWS
rows instead (what the zoo's dlrm_small is at 32768), so that the scripts
comparing the two sides take both from here. --sparse makes the tables
sparse (embedding_bag.sparse: they live on the parameter-server shards and
each step moves only the rows its batch touches, as
nn.EmbeddingBag(sparse=True) steps only those); --dim D gives the tables D
features and the bottom MLP D outputs (default 16), for tables too big for
PyTorch's side to train at all.
"""
import argparse
import gzip
import math
import sys
import time

import numpy as np
import torch

DENSE, CATEGORICAL, DIM = 13, 26, 16
M64 = (1 << 64) - 1


def mix(z):
    """SplitMix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def read(paths, rows):
    labels, dense, cats = [], [], []
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            for line in f:
                cells = line.rstrip("\n").split("\t")
                labels.append(float(cells[0]))
                dense.append([int(c) if c else 0 for c in cells[1:1 + DENSE]])
                cats.append([int(c, 16) if c else -1
                             for c in cells[1 + DENSE:]])
    x = np.log1p(np.maximum(np.array(dense, dtype=np.float64), 0))
    raw = np.array(cats, dtype=np.int64)
    keys = mix(np.arange(CATEGORICAL, dtype=np.uint64))
    hashed = mix(raw.astype(np.uint64) ^ keys[None, :]) % np.uint64(rows)
    ids = np.where(raw < 0, 0, hashed.astype(np.int64))
    return (torch.tensor(x, dtype=torch.float32),
            torch.tensor(ids, dtype=torch.int64),
            torch.tensor(labels, dtype=torch.float32))


class Dlrm(torch.nn.Module):
    def __init__(self, rows):
        super().__init__()
        self.bottom = torch.nn.Sequential(
            torch.nn.Linear(DENSE, 64), torch.nn.ReLU(),
            torch.nn.Linear(64, DIM), torch.nn.ReLU())
        self.tables = torch.nn.ModuleList(
            torch.nn.EmbeddingBag(rows, DIM, mode="sum", sparse=True)
            for _ in range(CATEGORICAL))
        bound = 1 / math.sqrt(rows)
        for t in self.tables:
            torch.nn.init.uniform_(t.weight, -bound, bound)
        n = CATEGORICAL + 1
        self.li, self.lj = zip(*[(i, j) for i in range(n) for j in range(i)])
        self.top = torch.nn.Sequential(
            torch.nn.Linear(DIM + n * (n - 1) // 2, 128), torch.nn.ReLU(),
            torch.nn.Linear(128, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))

    def forward(self, dense, ids):
        x = self.bottom(dense)
        offsets = torch.arange(ids.shape[0])
        vectors = [x] + [t(ids[:, k].contiguous(), offsets)
                         for k, t in enumerate(self.tables)]
        v = torch.stack(vectors, dim=1)
        z = torch.bmm(v, v.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([x, z], dim=1)).squeeze(1)


def auc(scores, labels):
    """Exact ROC AUC, ties counted half (the Mann-Whitney statistic)."""
    order = np.argsort(scores, kind="stable")
    s, y = scores[order], labels[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    pos = y.sum()
    neg = len(y) - pos
    return (ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg)


def cohort_model(rows, dim=DIM, sparse=False):
    tables = ", ".join([str(rows)] * CATEGORICAL)
    dense_mlp = " ".join(f"layers {{ linear {{ out_features: {w} }} }} "
                         "layers { relu {} }" for w in (64, dim))
    top = " ".join(f"layers {{ linear {{ out_features: {w} }} }} "
                   "layers { relu {} }" for w in (128, 64))
    sparse_field = " sparse: true" if sparse else ""
    return f"""model {{
  layers {{ branch {{ combine: CONCAT
    paths {{ layers {{ slice {{ begin: 0 end: {DENSE} }} }} {dense_mlp} }}
    paths {{
      layers {{ slice {{ begin: {DENSE} end: {DENSE + 2 * CATEGORICAL} }} }}
      layers {{ embedding_bag {{ rows: [{tables}] dim: {dim}{sparse_field} }} }}
    }}
  }} }}
  layers {{ interaction {{ kind: DOT dim: {dim} }} }}
  {top}
  layers {{ linear {{ out_features: 1 }} }}
}}"""


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--cohort-model":
        p = argparse.ArgumentParser()
        p.add_argument("--cohort-model", type=int, required=True,
                       metavar="ROWS")
        p.add_argument("--sparse", action="store_true")
        p.add_argument("--dim", type=int, default=DIM)
        a = p.parse_args()
        print(cohort_model(a.cohort_model, a.dim, a.sparse))
        return 0
    p = argparse.ArgumentParser()
    p.add_argument("--train", nargs="+", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--optimizer", choices=["adagrad", "sgd"],
                   default="adagrad")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rows", type=int, default=32768)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dense, ids, labels = read(a.train, a.rows)
    tdense, tids, tlabels = read([a.test], a.rows)
    model = Dlrm(a.rows)
    if a.optimizer == "adagrad":
        opt = torch.optim.Adagrad(model.parameters(), lr=a.lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    n = labels.shape[0]
    start = time.monotonic()
    for b in range(0, n, a.batch):
        e = min(n, b + a.batch)
        opt.zero_grad()
        loss = loss_fn(model(dense[b:e], ids[b:e]), labels[b:e])
        loss.backward()
        opt.step()
    seconds = time.monotonic() - start
    with torch.no_grad():
        logits = torch.cat([model(tdense[b:b + 4096], tids[b:b + 4096])
                            for b in range(0, tlabels.shape[0], 4096)])
        log_loss = loss_fn(logits, tlabels).item()
    y = tlabels.numpy().astype(np.float64)
    rate = y.mean()
    entropy = -(rate * math.log(rate) + (1 - rate) * math.log(1 - rate))
    print(f"train_samples_per_s {n / seconds:.1f} "
          f"auc {auc(logits.numpy().astype(np.float64), y):.6f} "
          f"normalized_entropy {log_loss / entropy:.6f} "
          f"samples {n} seconds {seconds:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
