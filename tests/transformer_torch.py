#!/usr/bin/python3
"""Builds a transformer model of cohort's layers in PyTorch (Debian's
python3-torch 1.13, through tests/torch_check.py's modules), gives every
parameter random values, and writes

  - OUT.safetensors: its state_dict (cohort's parameter names) with the
    metadata `cohort export --format=safetensors` writes (cohort.layers,
    cohort.input_shape), so tests/onnx_from_safetensors can export it and
    `cohort train --init-from` can load it;
  - X.npy: token ids as floats [N, 1, L], as the TOKENS data set gives them;
  - Y.npy: the torch model's outputs on X (evaluation mode).

  transformer_torch.py CASE OUT.safetensors X.npy Y.npy
  transformer_torch.py CASE --textproto   (the model block of a job spec)

CASE names a model below. Prints one line.
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_check  # noqa: E402
import torch_save  # noqa: E402

# name: (vocab, length, layers, shapes of the older layers' tensors, which
# torch_check sizes from them). Every new layer, causal and bidirectional
# attention, several head counts, per-position LayerNorm with and without
# affine, an MLP of per-position linear layers (nn.Linear on [N, L, D],
# widening and back, with and without bias), and a transformer layer next
# to an old one (conv1d, kernel 1; GELU) so the exporter's layout changes
# are exercised.
CASES = {
    "gpt": (256, 12, [
        {"embedding": {"vocab_size": 256, "dim": 32}},
        {"positional_embedding": {}},
        {"transformer_block": {"heads": 4}},
        {"transformer_block": {"heads": 2, "mlp_ratio": 2, "dropout": 0.1}},
        {"attention": {"heads": 8}},
        {"linear": {"out_features": 48, "per_position": True}},
        {"gelu": {}},
        {"linear": {"out_features": 32, "per_position": True,
                    "no_bias": True}},
        {"layernorm": {"per_position": True}},
        {"tied_lm_head": {}},
    ], {}),
    "bert": (50, 9, [
        {"embedding": {"vocab_size": 50, "dim": 24}},
        {"positional_embedding": {}},
        {"transformer_block": {"heads": 3, "bidirectional": True,
                               "eps": 1e-6}},
        {"attention": {"heads": 1, "bidirectional": True}},
        {"layernorm": {"per_position": True, "no_affine": True}},
        {"conv1d": {"out_channels": 24, "kernel": 1}},
        {"gelu": {}},
        {"layernorm": {"per_position": True}},
        {"attention": {"heads": 2}},
        {"tied_lm_head": {}},
    ], {"5.weight": (24, 24, 1), "5.bias": (24,)}),
}


def textproto(value):
    """A JSON layer object as protobuf text format."""
    if isinstance(value, dict):
        return " ".join("%s { %s }" % (k, textproto(v)) if isinstance(v, dict)
                        else "%s: %s" % (k, textproto(v))
                        for k, v in value.items())
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def check_blocks(model, x):
    """Each transformer_block against an implementation nobody here wrote:
    nn.TransformerEncoderLayer(norm_first=True, activation="gelu") with the
    same weights, on the block's own input. Returns the largest
    difference."""
    worst = 0.0
    h = torch.from_numpy(x)
    with torch.no_grad():
        for m in model:
            if isinstance(m, torch_check.TransformerBlock):
                d = m.ln1.normalized_shape[0]
                ref = torch.nn.TransformerEncoderLayer(
                    d, m.attn.num_heads, m.mlp[0].out_features, 0.0, "gelu",
                    m.ln1.eps, batch_first=True, norm_first=True).eval()
                ref.self_attn.load_state_dict(m.attn.state_dict())
                ref.linear1.load_state_dict(m.mlp[0].state_dict())
                ref.linear2.load_state_dict(m.mlp[2].state_dict())
                ref.norm1.load_state_dict(m.ln1.state_dict())
                ref.norm2.load_state_dict(m.ln2.state_dict())
                n = h.shape[2]
                mask = (torch.triu(torch.full((n, n), float("-inf")), 1)
                        if m.attn.causal else None)
                want = ref(h.transpose(1, 2), src_mask=mask).transpose(1, 2)
                worst = max(worst, (m(h) - want).abs().max().item())
            h = m(h)
    return worst


def main():
    if sys.argv[2] == "--textproto":
        print(" ".join("layers { %s }" % textproto(layer)
                       for layer in CASES[sys.argv[1]][2]))
        return
    case, out, x_path, y_path = sys.argv[1:5]
    vocab, length, layers, shapes = CASES[case]
    torch.manual_seed(7)
    model = torch_check.from_layers(
        layers, {k: torch.zeros(v) for k, v in shapes.items()}, [1, length])
    # Random values everywhere (LayerNorm's ones and zeros, attention's zero
    # biases would hide mistakes), small enough for a lively softmax.
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.3 if "weight" in name else 0.1)
            if "ln" in name and name.endswith("weight") or (
                    "weight" in name and p.dim() == 1):
                p.add_(1.0)
    state = model.state_dict()
    torch_save.save(out, state, {
        "cohort.layers": json.dumps(layers),
        "cohort.input_shape": json.dumps([1, length]),
    })
    ids = np.random.default_rng(3).integers(0, vocab, (5, 1, length))
    x = ids.astype(np.float32)
    np.save(x_path, x)
    model.eval()
    with torch.no_grad():
        y = model(torch.from_numpy(x)).numpy()
    np.save(y_path, y)
    worst = check_blocks(model, x)
    print("%s: torch model of %d layers, %d tensors, outputs %s; its blocks "
          "against nn.TransformerEncoderLayer(norm_first=True): largest "
          "difference %.3g" % (case, len(layers), len(state), y.shape, worst))
    return 0 if worst <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
