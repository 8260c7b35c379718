"""Compares cohort's embedding, positional_embedding and tied_lm_head
(worker/layers/, float64) with PyTorch 1.13 on random inputs: outputs, input
gradients and parameter gradients for a random upstream gradient.

usage: embedding_torch.py LAYER_DUMP TIED_MODEL_DUMP
  LAYER_DUMP: worker/layers/layer_dump (one layer)
  TIED_MODEL_DUMP: tests/tied_model_dump (a model, so the head is tied)
The embedding is nn.Embedding on ids [N, L]; the positional embedding adds
nn.Embedding(L, D)(arange(L)); the tied model is GPT-2's ends: wte, wpe, an
optional position-wise conv1d, logits = h @ wte.weight.T, so the shared
weight's gradient sums both uses. Prints the worst difference per case
(relative to the largest magnitude of the compared tensor) and exits 1
above 1e-5.
"""
import sys

try:
    import torch
    from torch import nn
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(0)

from dump_compare import DumpChecks  # noqa: E402

layer_dump, model_dump = sys.argv[1], sys.argv[2]
torch.manual_seed(21)
torch.set_default_dtype(torch.float64)
checks = DumpChecks(1e-5)


def ids(vocab, n, length):
    return torch.randint(0, vocab, (n, length))


def embedding_case(vocab, dim, n, length):
    emb = nn.Embedding(vocab, dim)
    x = ids(vocab, n, length)
    y = emb(x)                              # [N, L, D]
    dy = torch.randn(y.shape)
    y.backward(dy)
    # ids {1, N, L}; activations {D, N, L}: torch's [N, L, D] turned around.
    cohort = lambda t: t.permute(2, 0, 1)
    out = checks.run([layer_dump, f"embedding {{ vocab_size: {vocab} dim: {dim} }}",
               str(n), "1", str(length)],
              [x.double(), cohort(dy), emb.weight.detach()])
    checks.compare(f"embedding({vocab}, {dim}) on [{n}, {length}]", out,
            [("output", cohort(y.detach())),
             ("input gradient", torch.zeros(n * length)),
             ("weight gradient", emb.weight.grad)])


def positional_case(dim, n, length):
    wpe = nn.Embedding(length, dim)
    with torch.no_grad():
        wpe.weight.mul_(3)
    x = torch.randn(n, dim, length, requires_grad=True)  # torch's [N, D, L]
    y = x + wpe(torch.arange(length)).t()
    dy = torch.randn(y.shape)
    y.backward(dy)
    cohort = lambda t: t.transpose(0, 1)   # [N, D, L] -> {D, N, L}
    out = checks.run([layer_dump, "positional_embedding {}", str(n), str(dim),
               str(length)], [cohort(x.detach()), cohort(dy),
                              wpe.weight.detach()])
    checks.compare(f"positional_embedding on [{n}, {dim}, {length}]", out,
            [("output", cohort(y.detach())),
             ("input gradient", cohort(x.grad)),
             ("weight gradient", wpe.weight.grad)])


def tied_case(vocab, dim, n, length, conv):
    wte, wpe = nn.Embedding(vocab, dim), nn.Embedding(length, dim)
    mix = nn.Conv1d(dim, dim, 1) if conv else None
    x = ids(vocab, n, length)
    h = wte(x) + wpe(torch.arange(length))         # [N, L, D]
    if mix is not None:
        h = mix(h.transpose(1, 2)).transpose(1, 2)
    logits = h @ wte.weight.t()                     # [N, L, V]
    dy = torch.randn(logits.shape)
    logits.backward(dy)
    cohort = lambda t: t.permute(2, 0, 1)           # -> {V, N, L}
    spec = (f"layers {{ embedding {{ vocab_size: {vocab} dim: {dim} }} }} "
            "layers { positional_embedding {} } ")
    params = [wte, wpe]
    if mix is not None:
        spec += f"layers {{ conv1d {{ out_channels: {dim} kernel: 1 }} }} "
        params.append(mix)
    spec += "layers { tied_lm_head {} }"
    weights = [p.detach() for m in params for p in m.parameters()]
    out = checks.run([model_dump, spec, str(n), "1", str(length)],
              [x.double(), cohort(dy)] + weights)
    grads = [(name, p.grad) for m, name in zip(params, ["wte", "wpe", "conv"])
             for p in m.parameters()]
    checks.compare(f"tied model embedding({vocab}, {dim}) -> positional"
            f"{' -> conv1d k1' if conv else ''} -> tied head on [{n}, {length}]",
            out, [("logits", cohort(logits.detach()))] +
            [(f"{name} gradient", g) for name, g in grads])


try:
    embedding_case(11, 37, 3, 9)
    embedding_case(256, 64, 4, 40)  # more columns and features than a tile
    embedding_case(5, 3, 2, 1)
    positional_case(37, 3, 9)
    positional_case(64, 2, 33)
    tied_case(13, 8, 3, 6, conv=False)
    tied_case(40, 35, 2, 17, conv=True)
except RuntimeError as e:
    print(f"FAIL: a dump refused its input: {e}")
    sys.exit(1)
sys.exit(1 if checks.failed else 0)
