#!/usr/bin/env bash
# Compressed gradient buckets (PowerSGD, FP16, BF16) against PyTorch 1.13's
# DDP communication hooks (tests/compression_torch.py; skips without
# python3-torch).
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/compression_torch.py" "$1"
