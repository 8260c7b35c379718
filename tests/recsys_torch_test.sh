#!/usr/bin/env bash
# slice, embedding_bag and interaction, one at a time and in a small DLRM,
# forward and backward in float64 against PyTorch 1.13 (nn.EmbeddingBag,
# DLRM's interact_features), and the DLRM's ONNX export in ONNX Runtime
# against torch (tests/recsys_torch.py; skips without python3-torch).
#
#   recsys_torch_test.sh LAYER_DUMP MODEL_DUMP ONNX_FROM_SAFETENSORS
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
exec /usr/bin/python3 "$here/recsys_torch.py" "$1" "$2" "$3" \
  "$here/onnx_check.js" "$tmp"
