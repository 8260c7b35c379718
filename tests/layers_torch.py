"""Compares cohort's GELU, SiLU, tanh, sigmoid, LeakyReLU, ReLU6,
hardsigmoid, hardswish, LayerNorm, GroupNorm, MaxPool1d, AvgPool1d,
AdaptiveAvgPool2d, Softmax, PReLU, Upsample, ConvTranspose2d, Conv2d's
rectangular and padding="same" forms, the per-position Linear and the
vision transformer's to_sequence and sequence_pool (worker/layers/, float64)
with PyTorch 1.13's modules on random inputs: the
forward output, the input gradient and every parameter gradient for a random
upstream gradient.

usage: layers_torch.py DUMP   (DUMP: worker/layers/layer_dump)
Prints the worst difference per layer kind (relative to the largest
magnitude of the compared tensor) and exits 1 above 1e-5.
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
torch.manual_seed(20)
torch.set_default_dtype(torch.float64)
TOLERANCE = 1e-5


def to_cohort(t):
    """NCHW -> the CPU engine's batch-inner {C, N, ...} (dense stays)."""
    return t if t.dim() == 2 else t.transpose(0, 1).contiguous()


def from_cohort(flat, shape):
    """The engine's layout, flat, -> torch's NCHW of `shape`."""
    if len(shape) == 2:
        return torch.tensor(flat).reshape(shape)
    inner = (shape[1], shape[0]) + tuple(shape[2:])
    return torch.tensor(flat).reshape(inner).transpose(0, 1)


class PositionLinear(nn.Linear):
    """cohort's linear { per_position: true }: nn.Linear(C, O) at each
    position of [N, C, L], as a transformer applies it to [N, L, C]."""

    def forward(self, x):
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class ToSequence(nn.Module):
    """cohort's to_sequence: a patch convolution's [N, C, H, W] as a ViT
    sequence, x.flatten(2).transpose(1, 2) ([N, H * W, C]), given back in
    cohort's [N, C, L]."""

    def forward(self, x):
        return x.flatten(2).transpose(1, 2).transpose(1, 2)


class SequenceMean(nn.Module):
    """cohort's sequence_pool { mode: MEAN } on [N, D, L]: a ViT's
    x.mean(dim=1) on [N, L, D]."""

    def forward(self, x):
        return x.transpose(1, 2).mean(dim=1)


# (kind, cohort layer text, torch module factory(per-sample shape), shapes)
CASES = [
    ("gelu", "gelu {}", lambda s: nn.GELU(), [(4, 7), (3, 2, 5), (2, 3, 4, 5)]),
    ("gelu(tanh)", "gelu { tanh_approximation: true }",
     lambda s: nn.GELU(approximate="tanh"), [(4, 7), (2, 3, 4, 5)]),
    ("silu", "silu {}", lambda s: nn.SiLU(), [(4, 7), (3, 2, 5), (2, 3, 4, 5)]),
    ("tanh", "tanh {}", lambda s: nn.Tanh(), [(4, 7), (2, 3, 4, 5)]),
    ("sigmoid", "sigmoid {}", lambda s: nn.Sigmoid(), [(4, 7), (2, 3, 4, 5)]),
    ("leaky_relu", "leaky_relu {}", lambda s: nn.LeakyReLU(),
     [(4, 7), (2, 3, 4, 5)]),
    ("leaky_relu", "leaky_relu { negative_slope: 0.3 }",
     lambda s: nn.LeakyReLU(0.3), [(3, 2, 5)]),
    ("relu6", "relu6 {}", lambda s: nn.ReLU6(), [(4, 7), (2, 3, 4, 5)]),
    ("hardsigmoid", "hardsigmoid {}", lambda s: nn.Hardsigmoid(),
     [(4, 7), (2, 3, 4, 5)]),
    ("hardswish", "hardswish {}", lambda s: nn.Hardswish(),
     [(4, 7), (3, 2, 5), (2, 3, 4, 5)]),
    ("layernorm", "layernorm {}", lambda s: nn.LayerNorm(s[1:]),
     [(4, 7), (3, 4, 6), (2, 3, 4, 5)]),
    ("layernorm", "layernorm { eps: 0.01 no_affine: true }",
     lambda s: nn.LayerNorm(s[1:], eps=0.01, elementwise_affine=False),
     [(4, 7), (2, 3, 4, 5)]),
    ("groupnorm", "groupnorm { groups: 2 }", lambda s: nn.GroupNorm(2, s[1]),
     [(4, 6), (3, 4, 6), (2, 6, 4, 5)]),
    ("groupnorm", "groupnorm { groups: 6 eps: 0.001 }",
     lambda s: nn.GroupNorm(6, s[1], eps=0.001), [(3, 6, 5), (2, 6, 3, 3)]),
    ("groupnorm", "groupnorm { groups: 1 no_affine: true }",
     lambda s: nn.GroupNorm(1, s[1], affine=False), [(4, 6), (2, 6, 3, 3)]),
    ("maxpool1d", "maxpool1d { kernel: 2 }", lambda s: nn.MaxPool1d(2),
     [(3, 4, 11)]),
    ("maxpool1d", "maxpool1d { kernel: 3 stride: 2 padding: 1 }",
     lambda s: nn.MaxPool1d(3, 2, 1), [(3, 4, 11), (2, 2, 8)]),
    ("avgpool1d", "avgpool1d { kernel: 2 }", lambda s: nn.AvgPool1d(2),
     [(3, 4, 11)]),
    ("avgpool1d", "avgpool1d { kernel: 5 stride: 3 padding: 2 }",
     lambda s: nn.AvgPool1d(5, 3, 2), [(3, 4, 11), (2, 2, 8)]),
    ("adaptive_avgpool2d", "adaptive_avgpool2d { output: 1 }",
     lambda s: nn.AdaptiveAvgPool2d(1), [(2, 3, 5, 6)]),
    # 7 -> 3 and 5 -> 3, 8 -> 3: overlapping windows of different sizes.
    ("adaptive_avgpool2d", "adaptive_avgpool2d { output: 3 }",
     lambda s: nn.AdaptiveAvgPool2d(3), [(2, 3, 7, 7), (2, 3, 5, 8)]),
    ("adaptive_avgpool2d", "adaptive_avgpool2d { output: 2 }",
     lambda s: nn.AdaptiveAvgPool2d(2), [(2, 3, 4, 4)]),
    # An output larger than the input repeats rows and columns.
    ("adaptive_avgpool2d", "adaptive_avgpool2d { output: 5 }",
     lambda s: nn.AdaptiveAvgPool2d(5), [(2, 2, 3, 4)]),
    ("conv_transpose2d", "conv_transpose2d { out_channels: 4 kernel: 3 }",
     lambda s: nn.ConvTranspose2d(s[1], 4, 3), [(2, 3, 5, 6)]),
    ("conv_transpose2d",
     "conv_transpose2d { out_channels: 4 kernel: 3 stride: 2 padding: 1 "
     "output_padding: 1 }",
     lambda s: nn.ConvTranspose2d(s[1], 4, 3, 2, 1, 1), [(2, 3, 5, 4)]),
    ("conv_transpose2d",
     "conv_transpose2d { out_channels: 3 kernel: 4 stride: 2 padding: 1 }",
     lambda s: nn.ConvTranspose2d(s[1], 3, 4, 2, 1), [(2, 5, 4, 4)]),
    ("conv_transpose2d",
     "conv_transpose2d { out_channels: 6 kernel: 3 stride: 2 groups: 2 "
     "no_bias: true }",
     lambda s: nn.ConvTranspose2d(s[1], 6, 3, 2, groups=2, bias=False),
     [(2, 4, 3, 5)]),
    ("conv_transpose2d",
     "conv_transpose2d { out_channels: 4 kernel: 3 stride: 3 padding: 2 "
     "output_padding: 2 groups: 2 }",
     lambda s: nn.ConvTranspose2d(s[1], 4, 3, 3, 2, 2, groups=2),
     [(2, 2, 3, 3)]),
    ("conv2d(rectangular)",
     "conv2d { out_channels: 4 kernel_hw: [1, 7] padding_hw: [0, 3] }",
     lambda s: nn.Conv2d(s[1], 4, (1, 7), padding=(0, 3)), [(2, 3, 5, 9)]),
    ("conv2d(rectangular)",
     "conv2d { out_channels: 4 kernel_hw: [7, 1] padding_hw: [3, 0] }",
     lambda s: nn.Conv2d(s[1], 4, (7, 1), padding=(3, 0)), [(2, 3, 9, 5)]),
    ("conv2d(rectangular)",
     "conv2d { out_channels: 4 kernel: 3 stride_hw: [2, 1] padding: 1 }",
     lambda s: nn.Conv2d(s[1], 4, 3, stride=(2, 1), padding=1),
     [(2, 3, 8, 7)]),
    ("conv2d(rectangular)",
     "conv2d { out_channels: 6 kernel_hw: [3, 5] stride_hw: [1, 2] "
     "padding_hw: [1, 2] groups: 3 no_bias: true }",
     lambda s: nn.Conv2d(s[1], 6, (3, 5), (1, 2), (1, 2), groups=3,
                         bias=False), [(2, 3, 6, 9)]),
    ("conv2d(same)", "conv2d { out_channels: 4 kernel: 3 padding_mode: SAME }",
     lambda s: nn.Conv2d(s[1], 4, 3, padding="same"), [(2, 3, 6, 7)]),
    # Even kernels: PyTorch puts the odd zero below and to the right.
    ("conv2d(same)", "conv2d { out_channels: 4 kernel: 4 padding_mode: SAME }",
     lambda s: nn.Conv2d(s[1], 4, 4, padding="same"), [(2, 3, 6, 7)]),
    ("conv2d(same)",
     "conv2d { out_channels: 4 kernel_hw: [2, 5] padding_mode: SAME }",
     lambda s: nn.Conv2d(s[1], 4, (2, 5), padding="same"), [(2, 3, 5, 8)]),
    ("conv2d(same)",
     "conv2d { out_channels: 4 kernel: 3 dilation: 2 padding_mode: SAME }",
     lambda s: nn.Conv2d(s[1], 4, 3, padding="same", dilation=2),
     [(2, 3, 7, 8)]),
    ("conv2d(same)",
     "conv2d { out_channels: 4 kernel_hw: [2, 3] dilation: 3 "
     "padding_mode: SAME groups: 2 }",
     lambda s: nn.Conv2d(s[1], 4, (2, 3), padding="same", dilation=3,
                         groups=2), [(2, 2, 7, 8)]),
    # Over the features of {F}, across the channels at each position of
    # {C, L} and {C, H, W}; 300 positions pass one block of the CPU kernel.
    ("softmax", "softmax {}", lambda s: nn.Softmax(dim=1),
     [(4, 7), (3, 4, 6), (2, 3, 4, 5), (2, 5, 300)]),
    ("prelu", "prelu {}", lambda s: nn.PReLU(), [(4, 7), (2, 3, 4, 5)]),
    ("prelu", "prelu { num_parameters: 3 }", lambda s: nn.PReLU(3),
     [(4, 3), (2, 3, 7), (2, 3, 4, 5)]),
    ("upsample", "upsample { scale: 2 }",
     lambda s: nn.Upsample(scale_factor=2), [(2, 3, 4, 5)]),
    ("upsample", "upsample { scale: 3 }",
     lambda s: nn.Upsample(scale_factor=3), [(2, 2, 3, 4)]),
    ("upsample(bilinear)", "upsample { scale: 2 mode: BILINEAR }",
     lambda s: nn.Upsample(scale_factor=2, mode="bilinear"),
     [(2, 3, 4, 5), (1, 2, 1, 6)]),
    ("upsample(bilinear)", "upsample { scale: 3 mode: BILINEAR }",
     lambda s: nn.Upsample(scale_factor=3, mode="bilinear"),
     [(2, 2, 3, 7)]),
    # One position, a few, and an MLP's widths over 130 positions.
    ("linear(per_position)", "linear { out_features: 5 per_position: true }",
     lambda s: PositionLinear(s[1], 5), [(3, 4, 7), (2, 6, 1)]),
    ("linear(per_position)",
     "linear { out_features: 3 no_bias: true per_position: true }",
     lambda s: PositionLinear(s[1], 3, bias=False), [(2, 8, 9)]),
    ("linear(per_position)", "linear { out_features: 128 per_position: true }",
     lambda s: PositionLinear(s[1], 128), [(2, 32, 130)]),
    ("linear(per_position)", "linear { out_features: 32 per_position: true }",
     lambda s: PositionLinear(s[1], 32), [(2, 128, 130)]),
    # Square and rectangular patch grids, one row, one pixel.
    ("to_sequence", "to_sequence {}", lambda s: ToSequence(),
     [(2, 3, 4, 4), (3, 5, 2, 7), (2, 4, 1, 6), (2, 3, 1, 1)]),
    ("sequence_pool", "sequence_pool {}", lambda s: SequenceMean(),
     [(3, 4, 7), (2, 6, 196), (2, 5, 1)]),
    ("sequence_pool", "sequence_pool { mode: MEAN }",
     lambda s: SequenceMean(), [(4, 3, 9)]),
]

worst = {}
failed = 0
for kind, text, make, shapes in CASES:
    for shape in shapes:
        m = make(shape)
        with torch.no_grad():  # parameters away from their ones and zeros
            for p in m.parameters():
                p.add_(torch.randn(p.shape) * 0.5)
        # Wide enough that relu6's upper kink (6) is crossed too.
        scale = 4 if kind == "relu6" else 2
        x = (torch.randn(shape) * scale).requires_grad_()
        y = m(x)
        dy = torch.randn(y.shape)
        y.backward(dy)
        numbers = [to_cohort(x.detach()).flatten(), to_cohort(dy).flatten()]
        numbers += [p.detach().flatten() for p in m.parameters()]
        stdin = "\n".join(repr(v) for v in torch.cat(numbers).tolist())
        args = [dump, text, str(shape[0])] + [str(d) for d in shape[1:]]
        run = subprocess.run(args, input=stdin, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAIL: {kind} {list(shape)}: layer_dump: {run.stderr.strip()}")
            failed += 1
            continue
        out = [float(v) for v in run.stdout.split()]
        pieces = [("output", y.detach()), ("input gradient", x.grad)]
        pieces += [(name + " gradient", p.grad)
                   for name, p in m.named_parameters()]
        at, case_worst, what = 0, 0.0, ""
        for name, want in pieces:
            n = want.numel()
            got = (from_cohort(out[at:at + n], tuple(want.shape))
                   if name in ("output", "input gradient") else
                   torch.tensor(out[at:at + n]).reshape(want.shape))
            at += n
            d = ((got - want).abs().max() /
                 max(want.abs().max().item(), 1e-300)).item()
            if d >= case_worst:
                case_worst, what = d, name
        if at != len(out):
            print(f"FAIL: {kind} {list(shape)}: layer_dump printed {len(out)} "
                  f"numbers, PyTorch has {at}")
            failed += 1
            continue
        ok = case_worst <= TOLERANCE
        failed += not ok
        if not ok:
            print(f"FAIL: {text} on {list(shape)}: {what} differs by "
                  f"{case_worst:.2e} of its largest value")
        if case_worst >= worst.get(kind, (-1.0, ""))[0]:
            worst[kind] = (case_worst, f"{text} on {list(shape)}, {what}")
for kind, (d, where) in worst.items():
    print(f"{'ok' if d <= TOLERANCE else 'FAIL'}: {kind}: worst difference "
          f"{d:.2e} of the largest value ({where})")
sys.exit(1 if failed else 0)
