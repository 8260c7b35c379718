#!/usr/bin/env bash
# Attention (causal and bidirectional), per-position LayerNorm and
# the transformer block, forward and backward in float64, against PyTorch
# 1.13's modules (tests/attention_torch.py; skips without python3-torch).
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/attention_torch.py" "$1"
