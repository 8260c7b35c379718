#!/usr/bin/env bash
# The zoo's vit_tiny (patches, to_sequence, positions, 4 bidirectional
# pre-norm blocks, layernorm, sequence_pool, linear head) against the same
# network written in PyTorch 1.13 with nn.TransformerEncoderLayer
# (tests/vit_torch.py): from the same starting weights (--init-from under
# the zoo's names), one SGD step on the same batch of 224x224 images gives
# every parameter PyTorch's float64 step (within 1e-4, or PyTorch's own
# float32 distance), and `cohort predict` PyTorch's outputs (1e-4); the
# PyTorch module has the zoo model's parameter count. Skips where
# /usr/bin/python3 has no torch.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
here="$(dirname "${BASH_SOURCE[0]}")"
py=/usr/bin/python3
if ! $py -c "import torch" 2>/dev/null; then
  echo "SKIP: $py has no torch (tools/setup installs python3-torch)"
  exit 0
fi

d="$tmp/vit_tiny"
mkdir -p "$d"
if ! out=$($py "$here/vit_torch.py" prepare "$d" 2>&1); then
  fail "vit_tiny: the PyTorch side failed: $(tail -3 <<< "$out")"
  finish
  exit
fi
if [[ "$out" == "2158120 parameters" ]]; then
  ok "the PyTorch module has vit_tiny's $out"
else
  fail "the PyTorch module: $out, vit_tiny has 2158120 parameters"
fi
cat > "$d/job.textproto" <<SPEC
name: "vit_tiny"
model { zoo: "vit_tiny" }
init_from: "$d/init.safetensors"
data { kind: NUMPY dir: "$d" numpy { shape: [3, 224, 224] classes: 1000
       train_x: "x.npy" train_y: "y.npy" test_x: "x.npy" test_y: "y.npy" } }
batch_size: 4
max_steps: 1
optimizer { lr: 0.1 }
eval { disable: true }
SPEC
step_and_compare vit_tiny "$d" "$cohort" "$py" "$here/vit_torch.py"
finish
