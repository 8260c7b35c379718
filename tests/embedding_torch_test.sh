#!/usr/bin/env bash
# embedding, positional_embedding and the tied output head (in a
# model, where the head shares the embedding's weight), forward and backward
# in float64, against PyTorch 1.13 (tests/embedding_torch.py; skips without
# python3-torch).
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/embedding_torch.py" "$1" "$2"
