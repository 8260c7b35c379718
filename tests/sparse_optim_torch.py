"""Compares cohort's row-wise rules (kernels/sparse_update_rules through
kernels/sparse_rule_dump) with PyTorch 1.13 stepping an
nn.EmbeddingBag(sparse=True) weight: torch.optim.SGD, Adagrad (with
lr_decay and initial_accumulator_value) and SparseAdam, over 20 steps of
random bags with repeated ids, in float32. The gradients are the
embedding's own sparse backward, uncoalesced: one row per id occurrence,
which the dump merges with MergeRows and torch with coalesce().

usage: sparse_optim_torch.py DUMP   (DUMP: kernels/sparse_rule_dump)
Exits 1 if any element at any step differs by more than 1e-6 relative
(|a - b| > 1e-6 * max(1, |b|)); prints the largest differences.
"""
import subprocess
import sys

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(0)

dump = sys.argv[1]
ROWS, DIM, STEPS, BAGS, IDS_PER_STEP = 50, 8, 20, 6, 24
TOL = 1e-6

CASES = [
    ("sgd", {"lr": 0.1}, lambda p: torch.optim.SGD(p, lr=0.1)),
    ("adagrad", {"lr": 0.1, "lr_decay": 0.01,
                 "initial_accumulator_value": 0.1, "eps": 1e-10},
     lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01,
                                   initial_accumulator_value=0.1, eps=1e-10)),
    ("adagrad", {"lr": 0.05, "eps": 1e-10},
     lambda p: torch.optim.Adagrad(p, lr=0.05)),
    ("adam", {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
     lambda p: torch.optim.SparseAdam(p, lr=0.01)),
    ("adam", {"lr": 0.05, "beta1": 0.8, "beta2": 0.95, "eps": 1e-6},
     lambda p: torch.optim.SparseAdam(p, lr=0.05, betas=(0.8, 0.95),
                                      eps=1e-6)),
]


def run_case(kind, values, make_opt, seed):
    gen = torch.Generator().manual_seed(seed)
    emb = torch.nn.EmbeddingBag(ROWS, DIM, mode="sum", sparse=True)
    with torch.no_grad():
        emb.weight.copy_(torch.randn(ROWS, DIM, generator=gen))
    opt = make_opt(emb.parameters())
    lines = [f"{ROWS} {DIM}", " ".join(f"{v:.9g}" for v in
                                        emb.weight.detach().flatten().tolist()),
             str(STEPS)]
    expected = []
    for _ in range(STEPS):
        # Few distinct ids (0..14 mostly), so rows repeat within a step and
        # across steps; a few steps also reach the rest of the table.
        high = ROWS if torch.rand(1, generator=gen).item() < 0.3 else 15
        ids = torch.randint(0, high, (IDS_PER_STEP,), generator=gen)
        offsets = torch.arange(0, IDS_PER_STEP, IDS_PER_STEP // BAGS)
        target = torch.randn(BAGS, DIM, generator=gen)
        opt.zero_grad()
        (emb(ids, offsets) * target).sum().backward()
        g = emb.weight.grad
        lines.append(str(g._indices().shape[1]))
        lines.append(" ".join(str(i) for i in g._indices()[0].tolist()))
        lines.append(" ".join(f"{v:.9g}" for v in g._values().flatten().tolist()))
        opt.step()
        expected.append(emb.weight.detach().flatten().clone())
    args = [dump, kind] + [f"{k}={v!r}" for k, v in values.items()]
    out = subprocess.run(args, input="\n".join(lines) + "\n",
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(f"FAIL {kind} {values}: dump exited {out.returncode}: "
              f"{out.stderr.strip()}")
        return False
    # %.9g names a float exactly once rounded back to float32.
    got = torch.tensor([float(x) for x in out.stdout.split()],
                       dtype=torch.float32).view(STEPS, ROWS * DIM)
    got = got.to(torch.float64)
    want = torch.stack(expected).to(torch.float64)
    diff = (got - want).abs()
    rel = (diff / want.abs().clamp(min=1.0)).max().item()
    exact = (diff == 0).double().mean().item()
    ok = rel <= TOL
    print(f"{'ok  ' if ok else 'FAIL'} {kind:8s} {values}: max abs diff "
          f"{diff.max().item():.3g}, max rel {rel:.3g}, "
          f"{100 * exact:.1f}% of elements bit-identical")
    return ok


def main():
    print(f"torch {torch.__version__}; table {ROWS} x {DIM}, {STEPS} steps")
    ok = all([run_case(kind, values, make, seed)
              for seed, (kind, values, make) in enumerate(CASES)])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
