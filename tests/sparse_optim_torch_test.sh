#!/usr/bin/env bash
# The row-wise rules' 20-step trajectories (SGD, Adagrad, SparseAdam on an
# nn.EmbeddingBag(sparse=True) weight) against PyTorch 1.13
# (tests/sparse_optim_torch.py; skips without python3-torch).
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/sparse_optim_torch.py" "$1"
