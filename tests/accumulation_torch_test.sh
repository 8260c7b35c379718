#!/usr/bin/env bash
# Gradient accumulation against PyTorch 1.13: batches of 4, 4 and
# 3 samples accumulated into one step train as the full batch of 11 does
# (tests/accumulation_torch.py; skips without python3-torch).
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}"
exec /usr/bin/python3 "$(dirname "$0")/accumulation_torch.py" "$(readlink -f "$1")" "$work"
