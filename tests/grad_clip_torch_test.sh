#!/usr/bin/env bash
# Gradient clipping against PyTorch 1.13's clip_grad_value_ and
# clip_grad_norm_ (tests/grad_clip_torch.py; skips without python3-torch).
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/grad_clip_torch.py" "$1"
