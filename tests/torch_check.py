#!/usr/bin/python3
"""Loads a cohort safetensors export into an equivalent torch.nn model
(Debian's python3-torch, an implementation nobody on this project wrote),
strictly (every name and shape must match), runs it on the inputs cohort
predict ran on, and compares the outputs.

  torch_check.py MODEL FILE.safetensors X.npy COHORT_Y.npy

The torch model is built from the layer list the export records
(metadata cohort.layers) with sizes from the tensors' shapes: every layer
kind, residual blocks as torchvision's BasicBlock and Bottleneck, branch
blocks as a ModuleList of Sequential paths (grouped and dilated
convolutions included), and the transformer layers (with a vision
transformer's to_sequence and sequence_pool) on cohort's
per-sample [N, D, L] layout, transposed to torch's [N, L, D] around
nn.LayerNorm, nn.MultiheadAttention and a per-position nn.Linear, token
ids arriving as floats
[N, 1, L], and the tied head sharing the embedding's weight. MODEL only
names the case in the printed line. Prints the largest difference and exits
1 above 1e-4 relative (to the output's largest magnitude).
"""
import json
import struct
import sys

import numpy as np
import torch
from torch import nn


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    types = {"F32": np.float32, "I64": np.int64}
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        a = np.frombuffer(data[begin:end], dtype=types[t["dtype"]])
        tensors[name] = torch.from_numpy(a.reshape(t["shape"]).copy())
    return tensors, meta


class BasicBlock(nn.Module):
    """torchvision's BasicBlock, with its names."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = x if self.downsample is None else self.downsample(x)
        return torch.relu(y + s)


class GlobalPool(nn.Module):
    """cohort's global_avgpool: the mean of each channel, flat."""

    def forward(self, x):
        return x.mean(dim=tuple(range(2, x.dim())))


class Bottleneck(nn.Module):
    """torchvision's Bottleneck (stride on the 3x3), with its names."""

    def __init__(self, cin, width, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        s = x if self.downsample is None else self.downsample(x)
        return torch.relu(y + s)


class Branch(nn.Module):
    """cohort's branch: paths over the same input, concatenated along the
    channels (features), summed or multiplied (a [N, C, 1, 1] gate
    broadcast over [N, C, H, W]); state_dict names paths.P.I.NAME."""

    def __init__(self, paths, combine):
        super().__init__()
        self.paths = nn.ModuleList(paths)
        self.combine = combine

    def forward(self, x):
        outs = [p(x) for p in self.paths]
        if self.combine == "SUM":
            return sum(outs[1:], outs[0])
        if self.combine == "MUL":
            y = outs[0]
            for o in outs[1:]:
                y = y * o
            return y
        return torch.cat(outs, dim=1)


class TokenEmbedding(nn.Embedding):
    """cohort's embedding {vocab_size, dim}: float ids [N, 1, L] ->
    [N, D, L]; weight {V, D}."""

    def forward(self, x):
        return super().forward(x[:, 0, :].long()).transpose(1, 2)


class PositionalEmbedding(nn.Embedding):
    """cohort's positional_embedding: [N, D, L] plus weight {L, D}
    (nn.Embedding(L, D) at positions 0..L-1)."""

    def forward(self, x):
        return x + self.weight.t().unsqueeze(0)


class ToSequence(nn.Module):
    """cohort's to_sequence: [N, C, H, W] -> [N, C, H * W] (a ViT's
    x.flatten(2).transpose(1, 2), kept in cohort's [N, D, L])."""

    def forward(self, x):
        return x.flatten(2)


class SequenceMean(nn.Module):
    """cohort's sequence_pool { mode: MEAN }: [N, D, L] -> [N, D] (a ViT's
    x.mean(dim=1) on [N, L, D])."""

    def forward(self, x):
        return x.mean(dim=2)


class PositionLayerNorm(nn.LayerNorm):
    """cohort's layernorm { per_position: true }: nn.LayerNorm(C) at each
    position of [N, C, L]."""

    def forward(self, x):
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class PositionLinear(nn.Linear):
    """cohort's linear { per_position: true }: nn.Linear(C, O) at each
    position of [N, C, L] (torch's [N, L, C]); weight {O, C}, bias {O}."""

    def forward(self, x):
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class Attention(nn.MultiheadAttention):
    """cohort's attention: nn.MultiheadAttention(D, H, dropout,
    batch_first=True) self-attention, causal unless bidirectional, on
    [N, D, L]; its own state_dict names (in_proj_weight, out_proj.bias...)."""

    def __init__(self, dim, heads, dropout, causal):
        super().__init__(dim, heads, dropout=dropout, batch_first=True)
        self.causal = causal

    def attend(self, x):
        """On torch's [N, L, D]."""
        mask = None
        if self.causal:
            n = x.shape[1]
            mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        return super().forward(x, x, x, attn_mask=mask,
                               need_weights=False)[0]

    def forward(self, x):
        return self.attend(x.transpose(1, 2)).transpose(1, 2)


class TransformerBlock(nn.Module):
    """cohort's transformer_block: the pre-norm GPT block
    h = x + drop(attn(ln1(x))), y = h + drop(mlp(ln2(h))) on [N, D, L]."""

    def __init__(self, dim, heads, ratio, dropout, causal, eps):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim, eps=eps)
        self.attn = Attention(dim, heads, dropout, causal)
        self.ln2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = nn.Sequential(nn.Linear(dim, ratio * dim), nn.GELU(),
                                 nn.Linear(ratio * dim, dim))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h = x.transpose(1, 2)
        h = h + self.drop(self.attn.attend(self.ln1(h)))
        return (h + self.drop(self.mlp(self.ln2(h)))).transpose(1, 2)


class TiedLMHead(nn.Module):
    """cohort's tied_lm_head: logits [N, V, L] = E x with the model's first
    embedding's weight E {V, D}. The embedding is held in a list, not as a
    submodule, so the state_dict has nothing of the head's own (as cohort's
    export: the tied weight is written once, under the embedding's name)."""

    def __init__(self, embedding):
        super().__init__()
        self.tied = [embedding]

    def forward(self, x):
        return torch.einsum("vd,ndl->nvl", self.tied[0].weight, x)


def make_layer(layer, prefix, tensors, in_shape, ctx=None):
    """The torch module of one cohort layer whose tensors are named
    PREFIX.NAME, on per-sample inputs of shape `in_shape` (LayerNorm and
    GroupNorm take their sizes from it). The transformer layers (and a
    per-position linear) take their sizes from the spec and `in_shape` alone (so a model can be built
    without tensors); `ctx` holds the model's first embedding module for a
    tied head."""
    (kind, a), = layer.items()
    ctx = {} if ctx is None else ctx
    if kind == "embedding":
        return TokenEmbedding(a["vocab_size"], a["dim"])
    if kind == "positional_embedding":
        return PositionalEmbedding(in_shape[1], in_shape[0])
    if kind == "layernorm" and a.get("per_position", False):
        return PositionLayerNorm(in_shape[0], eps=a.get("eps", 1e-5),
                                 elementwise_affine=not a.get("no_affine",
                                                              False))
    if kind == "linear" and a.get("per_position", False):
        return PositionLinear(in_shape[0], a["out_features"],
                              bias=not a.get("no_bias", False))
    if kind == "attention":
        return Attention(in_shape[0], a["heads"], a.get("dropout", 0.0),
                         not a.get("bidirectional", False))
    if kind == "transformer_block":
        return TransformerBlock(in_shape[0], a["heads"],
                                a.get("mlp_ratio", 4) or 4,
                                a.get("dropout", 0.0),
                                not a.get("bidirectional", False),
                                a.get("eps", 1e-5) or 1e-5)
    if kind == "to_sequence":
        return ToSequence()
    if kind == "sequence_pool":
        return SequenceMean()
    if kind == "tied_lm_head":
        if "embedding" not in ctx:
            raise SystemExit("%s: tied_lm_head without an embedding before it"
                             % prefix)
        return TiedLMHead(ctx["embedding"])
    w = tensors.get(prefix + ".weight")
    has_bias = prefix + ".bias" in tensors
    if kind == "linear":
        return nn.Linear(w.shape[1], w.shape[0], bias=has_bias)
    if kind in ("conv1d", "conv2d"):
        conv = nn.Conv1d if kind == "conv1d" else nn.Conv2d
        groups = a.get("groups", 1) or 1
        # conv2d's [height, width] fields and padding SAME, as PyTorch's.
        stride = tuple(a.get("stride_hw", ())) or a.get("stride", 1) or 1
        padding = tuple(a.get("padding_hw", ())) or a.get("padding", 0)
        if a.get("padding_mode") == "SAME":
            padding = "same"
        return conv(w.shape[1] * groups, w.shape[0], tuple(w.shape[2:]),
                    stride, padding, a.get("dilation", 1) or 1, groups,
                    bias=has_bias)
    if kind == "conv_transpose2d":
        groups = a.get("groups", 1) or 1
        return nn.ConvTranspose2d(w.shape[0], w.shape[1] * groups, w.shape[2],
                                  a.get("stride", 1) or 1,
                                  a.get("padding", 0),
                                  a.get("output_padding", 0), groups,
                                  bias=has_bias)
    if kind in ("batchnorm1d", "batchnorm2d"):
        bn = nn.BatchNorm1d if kind == "batchnorm1d" else nn.BatchNorm2d
        return bn(w.shape[0], eps=a.get("eps", 1e-5))
    if kind == "relu":
        return nn.ReLU()
    if kind in ("maxpool2d", "avgpool2d", "maxpool1d", "avgpool1d"):
        k = a["kernel"]
        pool = {"maxpool2d": nn.MaxPool2d, "avgpool2d": nn.AvgPool2d,
                "maxpool1d": nn.MaxPool1d, "avgpool1d": nn.AvgPool1d}[kind]
        return pool(k, a.get("stride", k), a.get("padding", 0))
    if kind == "global_avgpool":
        return GlobalPool()
    if kind == "flatten":
        return nn.Flatten()
    if kind == "dropout":
        return nn.Dropout(a.get("p", 0.0))
    if kind == "gelu":
        tanh = a.get("tanh_approximation", False)
        return nn.GELU(approximate="tanh" if tanh else "none")
    if kind == "silu":
        return nn.SiLU()
    if kind == "tanh":
        return nn.Tanh()
    if kind == "sigmoid":
        return nn.Sigmoid()
    if kind == "leaky_relu":
        return nn.LeakyReLU(a.get("negative_slope", 0.01))
    if kind == "relu6":
        return nn.ReLU6()
    if kind == "hardsigmoid":
        return nn.Hardsigmoid()
    if kind == "hardswish":
        return nn.Hardswish()
    if kind == "adaptive_avgpool2d":
        return nn.AdaptiveAvgPool2d(a["output"])
    if kind == "softmax":
        return nn.Softmax(dim=1)
    if kind == "prelu":
        return nn.PReLU(w.shape[0])
    if kind == "upsample":
        bilinear = a.get("mode", "NEAREST") == "BILINEAR"
        return nn.Upsample(scale_factor=a["scale"],
                           mode="bilinear" if bilinear else "nearest")
    if kind == "layernorm":
        return nn.LayerNorm(in_shape, eps=a.get("eps", 1e-5),
                            elementwise_affine=w is not None)
    if kind == "groupnorm":
        return nn.GroupNorm(a["groups"], in_shape[0], eps=a.get("eps", 1e-5),
                            affine=w is not None)
    if kind == "residual":
        c1 = tensors[prefix + ".conv1.weight"]
        out = a["out_channels"]
        if a.get("bottleneck", False):
            return Bottleneck(c1.shape[1], c1.shape[0], out,
                              a.get("stride", 1))
        return BasicBlock(c1.shape[1], out, a.get("stride", 1))
    if kind == "branch":
        paths = [sequence(path.get("layers", []), "%s.paths.%d." % (prefix, p),
                          tensors, in_shape, ctx)
                 for p, path in enumerate(a.get("paths", []))]
        return Branch(paths, a.get("combine", "CONCAT"))
    raise SystemExit("no torch form for layer kind " + kind)


def sequence(layers, prefix, tensors, in_shape, ctx=None):
    """An nn.Sequential of `layers` (tensors PREFIX + index + .NAME), each
    layer's input shape found by passing a zero sample through the ones
    before it (zero ids for a token model). Wires a tied head to the
    model's first embedding."""
    ctx = {} if ctx is None else ctx
    mods = []
    x = torch.zeros((1,) + tuple(in_shape))
    for i, layer in enumerate(layers):
        if mods:
            with torch.no_grad():
                x = mods[-1].eval()(x)
        mods.append(make_layer(layer, prefix + str(i), tensors,
                               tuple(x.shape[1:]), ctx))
        if isinstance(mods[-1], TokenEmbedding):
            ctx.setdefault("embedding", mods[-1])
    return nn.Sequential(*mods)


def from_layers(layers, tensors, input_shape):
    """The nn.Sequential of cohort's layer list (the export's cohort.layers
    metadata), sizes read from the tensors' shapes and the input shape
    (the transformer layers' from the specs: `tensors` may be empty)."""
    return sequence(layers, "", tensors, input_shape)


def main():
    name, path, x_path, y_path = sys.argv[1:5]
    tensors, meta = read_safetensors(path)
    m = from_layers(json.loads(meta["cohort.layers"]), tensors,
                    json.loads(meta["cohort.input_shape"]))
    m.load_state_dict(tensors, strict=True)
    m.eval()
    with torch.no_grad():
        y = m(torch.from_numpy(np.load(x_path))).numpy()
    theirs = np.load(y_path)
    if y.shape != theirs.shape:
        print("shapes differ: torch %s, cohort %s" % (y.shape, theirs.shape))
        return 1
    diff = np.abs(y - theirs).max()
    rel = diff / max(np.abs(y).max(), 1e-12)
    print("%s: %d tensors loaded strictly; outputs %s; largest difference "
          "%.3g (%.3g of the largest output); job %s" %
          (name, len(tensors), y.shape, diff, rel,
           meta.get("cohort.job_spec", "").split("\n")[0]))
    return 0 if rel <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
