#!/usr/bin/env bash
# GELU, SiLU, tanh, sigmoid, LeakyReLU, ReLU6, hardsigmoid, hardswish,
# LayerNorm, GroupNorm, MaxPool1d, AvgPool1d, AdaptiveAvgPool2d, Softmax,
# PReLU, Upsample, ConvTranspose2d, Conv2d's rectangular and
# padding="same" forms, the per-position Linear, to_sequence and
# sequence_pool, forward and backward in float64, against PyTorch 1.13's
# modules
# (tests/layers_torch.py; skips without python3-torch).
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/layers_torch.py" "$1"
