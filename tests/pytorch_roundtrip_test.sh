#!/usr/bin/env bash
# torchvision's resnet18, mobilenet_v2, mobilenet_v3_small and
# squeezenet1_1 round-trip through cohort under their own names: the job
# spec names the torch.onnx.export file (`model { onnx }`), whose
# initializers are the starting weights; one SGD step on the same batch
# gives every parameter and BatchNorm statistic PyTorch's exact (float64)
# step gives, within 1e-4 or, where float32 cannot get that close, as
# close as PyTorch's own float32 step (tests/pytorch_roundtrip.py says
# why); the safetensors export loads into the torchvision module with
# load_state_dict(strict=True) and reproduces `cohort predict` (1e-4);
# `cohort checkpoint show` lists the state_dict's names. Skips where
# /usr/bin/python3 has no torchvision.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
here="$(dirname "${BASH_SOURCE[0]}")"
py=/usr/bin/python3
if ! $py -c "import torch, torchvision" 2>/dev/null; then
  echo "SKIP: $py has no torch or torchvision (tools/setup installs python3-torchvision)"
  exit 0
fi

# roundtrip KIND SHAPE: prepare, one step in cohort, export, compare.
roundtrip() {
  local kind=$1 shape=$2 d="$tmp/$1"
  mkdir -p "$d"
  if ! $py "$here/pytorch_roundtrip.py" prepare "$kind" "$d" > "$d/prepare.out" 2>&1; then
    fail "$kind: the PyTorch side failed: $(tail -3 "$d/prepare.out")"
    return
  fi
  # The spec sits beside the graph and names it relatively.
  cat > "$d/job.textproto" <<SPEC
name: "$kind"
model { onnx: "m.onnx" }
data { kind: NUMPY dir: "$d" numpy { shape: [$shape] classes: 10
       train_x: "x.npy" train_y: "y.npy" test_x: "x.npy" test_y: "y.npy" } }
batch_size: 8
max_steps: 1
optimizer { lr: 0.1 }
eval { disable: true }
SPEC
  step_and_compare "$kind" "$d" "$cohort" "$py" "$here/pytorch_roundtrip.py"
}

roundtrip resnet18 "3, 32, 32"
roundtrip mobilenet_v2 "3, 224, 224"
roundtrip mobilenet_v3_small "3, 32, 32"
roundtrip squeezenet1_1 "3, 64, 64"

# The checkpoint speaks the state_dict's names.
show=$("$cohort" checkpoint show "$tmp/resnet18/ckpt/ckpt-000000000001.cohort" 2>&1)
if [[ "$show" == *"layer1.0.conv1.weight"* && "$show" == *"layer4.1.bn2.running_var"* ]]; then
  ok "checkpoint show lists torchvision's names (layer1.0.conv1.weight, ...)"
else
  fail "checkpoint show: $(head -c 600 <<< "$show")"
fi

# A spec naming a graph that is not there: one line naming the field.
sed 's#onnx: "m.onnx"#onnx: "missing.onnx"#' "$tmp/resnet18/job.textproto" > "$tmp/bad.textproto"
err=$("$cohort" train --job="$tmp/bad.textproto" 2>&1)
rc=$?
if [[ $rc -eq 2 && $(wc -l <<< "$err") -eq 1 && "$err" == *'model.onnx "missing.onnx"'* ]]; then
  ok "a missing graph is named: $err"
else
  fail "missing graph: exit $rc: $err"
fi

finish
