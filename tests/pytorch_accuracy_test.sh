#!/usr/bin/env bash
# A torchvision model trained on 2 cohort workers from its
# torch.onnx.export file reaches the test accuracy PyTorch reaches from the
# same weights in the same steps (within 2 points), on a generated image
# folder: bench/pytorch_accuracy.sh with mobilenet_v2 (the bench runs all
# four models). Skips where /usr/bin/python3 has no torchvision.
set -u
cohort="$1"
bench="$2"
if ! /usr/bin/python3 -c "import torch, torchvision, PIL" 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torchvision (tools/setup installs python3-torchvision)"
  exit 0
fi
"$bench" "$cohort" 150 mobilenet_v2
