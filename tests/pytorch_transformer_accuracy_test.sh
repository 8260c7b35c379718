#!/usr/bin/env bash
# The transformers of tests/pytorch_transformer.py, trained on 2 cohort
# workers from their torch.onnx.export files, reach the next-token accuracy
# PyTorch reaches from the same weights in the same steps (within 2
# points): bench/pytorch_transformer_accuracy.sh. Skips where
# /usr/bin/python3 has no torch.
set -u
cohort="$1"
bench="$2"
if ! /usr/bin/python3 -c "import torch, onnx" 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch or onnx (tools/setup installs python3-torch and python3-onnx)"
  exit 0
fi
"$bench" "$cohort" 300 encoder gpt
