#!/usr/bin/env bash
# Every optimizer's 20-step trajectory against PyTorch 1.13
# (tests/optim_torch.py; skips without python3-torch).
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/optim_torch.py" "$1"
