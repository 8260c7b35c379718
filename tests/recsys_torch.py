"""Compares cohort's recommendation-model layers with PyTorch 1.13:
slice, embedding_bag (an nn.ModuleList of nn.EmbeddingBag, mode sum and
mean, one id per bag through per-sample offsets) and interaction (DLRM's
interact_features written in torch, and CAT), one layer at a time and in a
small DLRM (worker/layers, float64): outputs, input gradients and every
parameter gradient for a random upstream gradient. Then the same DLRM's
ONNX export (worker/onnx_export.h, from a safetensors file of torch's
weights) in ONNX Runtime against torch's outputs.

usage: recsys_torch.py LAYER_DUMP MODEL_DUMP TO_ONNX ONNX_CHECK_JS TMPDIR
  LAYER_DUMP: worker/layers/layer_dump; MODEL_DUMP: tests/tied_model_dump;
  TO_ONNX: tests/onnx_from_safetensors; ONNX_CHECK_JS: tests/onnx_check.js.
Prints the worst difference per case (relative to the largest magnitude of
the compared tensor) and exits 1 above 1e-5 (1e-4 for ONNX Runtime in
float32). Skips without python3-torch; skips the ONNX Runtime step without
node and onnxruntime-node (COHORT_NODE_DIR, default /opt/cohort-node).
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import torch
    from torch import nn
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dump_compare import DumpChecks  # noqa: E402
from torch_save import save  # noqa: E402  (the safetensors writer)

layer_dump, model_dump, to_onnx, onnx_check, tmp = sys.argv[1:6]
torch.manual_seed(22)
torch.set_default_dtype(torch.float64)
checks = DumpChecks(1e-5)


class Slice(nn.Module):
    """cohort's slice { begin end }: x[:, begin:end]."""

    def __init__(self, begin, end):
        super().__init__()
        self.begin, self.end = begin, end

    def forward(self, x):
        return x[:, self.begin:self.end]


def row_ids(x):
    """[N, 2 T] float pairs (r >> 24, r & 0xFFFFFF) -> [N, T] int64 rows."""
    return x[:, 0::2].long() * (1 << 24) + x[:, 1::2].long()


class Bags(nn.ModuleList):
    """cohort's embedding_bag: nn.EmbeddingBag per feature, one id per bag
    (offsets 0..N-1); state_dict keys "<t>.weight"."""

    def __init__(self, rows, dim, mode):
        super().__init__([nn.EmbeddingBag(r, dim, mode=mode) for r in rows])

    def forward(self, x):
        ids = row_ids(x)
        offsets = torch.arange(ids.shape[0])
        return torch.cat([bag(ids[:, t].contiguous(), offsets)
                          for t, bag in enumerate(self)], dim=1)


class Interact(nn.Module):
    """DLRM's interact_features (dlrm_s_pytorch.py, arch_interaction_op
    "dot", arch_interaction_itself False) on the concatenation [N, d (1+T)]
    of the bottom MLP's output and the T embeddings; "cat" keeps it."""

    def __init__(self, dim, kind="dot"):
        super().__init__()
        self.dim, self.kind = dim, kind

    def forward(self, x):
        if self.kind == "cat":
            return x
        batch_size = x.shape[0]
        t = x.view(batch_size, -1, self.dim)
        z = torch.bmm(t, torch.transpose(t, 1, 2))
        _, ni, nj = z.shape
        offset = 0  # arch_interaction_itself False
        li = torch.tensor([i for i in range(ni) for j in range(i + offset)],
                          dtype=torch.long)
        lj = torch.tensor([j for i in range(nj) for j in range(i + offset)],
                          dtype=torch.long)
        zflat = z[:, li, lj]
        return torch.cat([x[:, :self.dim]] + [zflat], dim=1)


def ids_input(rows, n, gen):
    """Random rows of each table as the float pairs the data set writes."""
    cols = []
    for r in rows:
        ids = torch.randint(0, r, (n,), generator=gen)
        cols += [(ids >> 24).double(), (ids & 0xFFFFFF).double()]
    return torch.stack(cols, dim=1)


def layer_case(case, text, module, x, grad_input=True):
    """One layer through layer_dump: output, input gradient, parameters."""
    x = x.clone().requires_grad_(grad_input)
    y = module(x)
    dy = torch.randn(y.shape)
    y.backward(dy)
    params = list(module.parameters())
    out = checks.run([layer_dump, text, str(x.shape[0]), str(x.shape[1])],
              [x.detach(), dy] + [p.detach() for p in params])
    dx = x.grad if grad_input else torch.zeros(x.shape)
    checks.compare(case, out, [("output", y.detach()), ("input gradient", dx)] +
            [(f"table {i} gradient", p.grad) for i, p in enumerate(params)])


def bag_case(rows, dim, n, mode, repeats=False):
    gen = torch.Generator().manual_seed(len(rows) * 100 + dim)
    module = Bags(rows, dim, mode)
    with torch.no_grad():
        for p in module.parameters():
            p.mul_(3)
    x = ids_input(rows, n, gen)
    if repeats:  # samples sharing rows: their gradients add up
        x[n // 2:] = x[:n - n // 2]
    text = (f"embedding_bag {{ rows: {list(rows)} dim: {dim} "
            f"mode: {mode.upper()} }}")
    layer_case(f"embedding_bag({mode}, rows {list(rows)}, dim {dim}) on "
               f"[{n}, {2 * len(rows)}]", text, module, x, grad_input=False)


def interaction_case(kind, dim, vectors, n):
    x = torch.randn(n, dim * vectors)
    layer_case(f"interaction({kind}, {vectors} x {dim}) on [{n}, "
               f"{dim * vectors}]",
               f"interaction {{ kind: {kind.upper()} dim: {dim} }}",
               Interact(dim, kind), x)


def slice_case(begin, end, features, n):
    layer_case(f"slice({begin}, {end}) on [{n}, {features}]",
               f"slice {{ begin: {begin} end: {end} }}", Slice(begin, end),
               torch.randn(n, features))


class Branch(nn.Module):
    """cohort's branch { combine: CONCAT }: paths = ModuleList."""

    def __init__(self, paths):
        super().__init__()
        self.paths = nn.ModuleList(paths)

    def forward(self, x):
        return torch.cat([p(x) for p in self.paths], dim=1)


def dlrm(dense, rows, dim):
    """A small DLRM and its cohort layers (as JSON LayerSpecs)."""
    t = len(rows)
    model = nn.Sequential(
        Branch([nn.Sequential(Slice(0, dense), nn.Linear(dense, 8), nn.ReLU(),
                              nn.Linear(8, dim)),
                nn.Sequential(Slice(dense, dense + 2 * t),
                              Bags(rows, dim, "sum"))]),
        Interact(dim), nn.Linear(dim + (t + 1) * t // 2, 4), nn.ReLU(),
        nn.Linear(4, 1))
    layers = [
        {"branch": {"combine": "CONCAT", "paths": [
            {"layers": [{"slice": {"begin": 0, "end": dense}},
                        {"linear": {"outFeatures": 8}}, {"relu": {}},
                        {"linear": {"outFeatures": dim}}]},
            {"layers": [{"slice": {"begin": dense, "end": dense + 2 * t}},
                        {"embeddingBag": {"rows": rows, "dim": dim}}]}]}},
        {"interaction": {"kind": "DOT", "dim": dim}},
        {"linear": {"outFeatures": 4}}, {"relu": {}},
        {"linear": {"outFeatures": 1}}]
    return model, layers


def dlrm_input(dense, rows, n, gen):
    return torch.cat([torch.randn(n, dense, generator=gen),
                      ids_input(rows, n, gen)], dim=1)


def text_of(layers):
    """The JSON LayerSpecs as the text format tied_model_dump parses."""
    def value(v):
        if isinstance(v, dict):
            return "{ " + " ".join(field(k, x) for k, x in v.items()) + " }"
        if isinstance(v, list):
            return "[" + ", ".join(str(x) for x in v) + "]"
        return str(v)

    def field(k, v):
        name = "".join("_" + c.lower() if c.isupper() else c for c in k)
        if isinstance(v, list) and v and isinstance(v[0], dict):
            return " ".join(f"{name} {value(x)}" for x in v)
        return f"{name}: {value(v)}" if not isinstance(v, dict) else \
            f"{name} {value(v)}"
    return " ".join(f"layers {value(l)}" for l in layers)


def model_case(dense, rows, dim, n):
    """The whole DLRM through the engine: output and every gradient."""
    model, layers = dlrm(dense, rows, dim)
    gen = torch.Generator().manual_seed(7)
    x = dlrm_input(dense, rows, n, gen)
    y = model(x)
    dy = torch.randn(y.shape)
    y.backward(dy)
    params = list(model.parameters())
    out = checks.run([model_dump, text_of(layers), str(n), str(x.shape[1])],
              [x, dy] + [p.detach() for p in params])
    checks.compare(f"DLRM (dense {dense}, {len(rows)} tables, dim {dim}) on "
            f"[{n}, {x.shape[1]}]", out, [("output", y.detach())] +
            [(f"{name} gradient", p.grad)
             for name, p in model.named_parameters()])


def onnx_case(dense, rows, dim, n):
    """torch's DLRM -> safetensors -> ONNX -> ONNX Runtime, against torch."""
    model, layers = dlrm(dense, rows, dim)
    model = model.float()
    gen = torch.Generator().manual_seed(8)
    x = dlrm_input(dense, rows, n, gen).float()
    with torch.no_grad():
        y = model(x)
    st, onnx_path = os.path.join(tmp, "dlrm.safetensors"), \
        os.path.join(tmp, "dlrm.onnx")
    save(st, model.state_dict(), {"cohort.layers": json.dumps(layers),
                                  "cohort.input_shape": f"[{x.shape[1]}]"})
    np.save(os.path.join(tmp, "x.npy"), x.numpy())
    np.save(os.path.join(tmp, "y.npy"), y.numpy())
    r = subprocess.run([to_onnx, st, onnx_path], capture_output=True,
                       text=True)
    if r.returncode != 0:
        print(f"FAIL: DLRM ONNX export: {r.stderr.strip()}")
        checks.failed += 1
        return
    try:
        import onnx
        m = onnx.load(onnx_path)
        onnx.checker.check_model(m, full_check=True)
        names = {i.name for i in m.graph.initializer}
        tables = [f"0.paths.1.1.{t}.weight" for t in range(len(rows))]
        missing = [t for t in tables if t not in names]
        if missing:
            raise ValueError(f"no initializer {missing[0]}")
        print(f"ok: DLRM ONNX export: onnx.checker (full_check) accepts "
              f"{len(m.graph.node)} nodes; the {len(rows)} tables are "
              f"initializers 0.paths.1.1.<t>.weight")
    except ImportError:
        print("ok: SKIPPED the ONNX checker: python3-onnx is not installed")
    except Exception as e:  # the checker's own exception types vary
        print(f"FAIL: DLRM ONNX export: the checker refuses it: {e}")
        checks.failed += 1
    ort = os.environ.get("COHORT_NODE_DIR", "/opt/cohort-node")
    if not shutil.which("node") or not os.path.exists(
            os.path.join(ort, "node_modules", "onnxruntime-node",
                         "package.json")):
        print(f"ok: SKIPPED ONNX Runtime: onnxruntime-node is not in {ort}")
        return
    r = subprocess.run(["node", onnx_check, ort, onnx_path,
                        os.path.join(tmp, "x.npy"),
                        os.path.join(tmp, "y.npy")],
                       capture_output=True, text=True)
    ok = r.returncode == 0
    checks.failed += not ok
    print(f"{'ok' if ok else 'FAIL'}: DLRM ONNX Runtime against torch: "
          f"{(r.stdout + r.stderr).strip()}")


try:
    slice_case(0, 13, 65, 4)
    slice_case(13, 65, 65, 3)
    slice_case(5, 6, 9, 2)
    bag_case([7, 3, 50], 4, 6, "sum")
    bag_case([7, 3, 50], 4, 6, "mean")
    bag_case([5, 9], 16, 12, "sum", repeats=True)
    bag_case([1000] * 26, 16, 5, "sum")
    interaction_case("dot", 4, 3, 5)
    interaction_case("dot", 16, 27, 4)   # DLRM's Criteo widths
    interaction_case("dot", 3, 1, 2)     # no pairs: the first vector only
    interaction_case("cat", 4, 3, 3)
    model_case(3, [6, 11, 40], 4, 7)
    model_case(13, [20] * 26, 16, 3)
except RuntimeError as e:
    print(f"FAIL: a dump refused its input: {e}")
    sys.exit(1)
onnx_case(13, [20] * 26, 16, 9)
sys.exit(1 if checks.failed else 0)
