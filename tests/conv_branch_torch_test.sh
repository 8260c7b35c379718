#!/usr/bin/env bash
# Grouped, depthwise and dilated convolutions and branch blocks
# against PyTorch 1.13 in float64, forward and backward
# (tests/conv_branch_torch.py; skips without python3-torch).
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/conv_branch_torch.py" "$1"
