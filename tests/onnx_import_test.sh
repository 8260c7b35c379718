#!/usr/bin/env bash
# `cohort import` of torch.onnx.export graphs (training mode, no constant
# folding, as README.md "From PyTorch to cohort" says): a small CNN,
# torchvision's resnet18 (residual layers), mobilenet_v2 (relu6) and
# mobilenet_v3_small (hardswish, squeeze-and-excitation as MUL branches),
# squeezenet1_1 (Fire modules as CONCAT branches), an Inception-style
# block (a CONCAT branch), a CNN with Softmax, PReLU and Upsample and one
# with rectangular and padding="same" convolutions and a ConvTranspose2d
# each become a job spec and a safetensors file; `cohort train --init-from
# --max-steps=0` then `cohort predict` give PyTorch's evaluation-mode
# outputs (1e-4 of the largest output). A form cohort has no layer for
# (F.interpolate by 1.5) fails with exit 2 in one line naming the node.
# Skips where /usr/bin/python3 has no torch or torchvision.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
here="$(dirname "${BASH_SOURCE[0]}")"
py=/usr/bin/python3
if ! $py -c "import torch, torchvision" 2>/dev/null; then
  echo "SKIP: $py has no torch or torchvision (tools/setup installs python3-torchvision)"
  exit 0
fi

# check KIND: export, import, start from the weights, predict, compare.
check() {
  local kind=$1 d="$tmp/$1"
  mkdir -p "$d"
  if ! $py "$here/onnx_import_torch.py" "$kind" "$d/m.onnx" "$d/x.npy" \
       "$d/torch_y.npy" > "$d/export.out" 2>&1; then
    fail "$kind: torch.onnx.export failed: $(tail -3 "$d/export.out")"
    return
  fi
  if ! "$cohort" import --onnx="$d/m.onnx" --out="$d/job.textproto" \
       --weights="$d/w.safetensors" > "$d/import.out" 2>&1; then
    fail "$kind: cohort import: $(cat "$d/import.out")"
    return
  fi
  # A small data set: the placeholder's default size only costs time here.
  sed -i 's/ classes: \([0-9]*\) }/ classes: \1 train_samples: 8 test_samples: 4 }/' \
    "$d/job.textproto"
  if ! "$cohort" train --job="$d/job.textproto" --init-from="$d/w.safetensors" \
       --max-steps=0 --checkpoint-dir="$d/ckpt" > "$d/train.out" 2>&1; then
    fail "$kind: train --init-from: $(tail -3 "$d/train.out")"
    return
  fi
  if ! "$cohort" predict --checkpoint="$d/ckpt" --input="$d/x.npy" \
       --out="$d/cohort_y.npy" > "$d/predict.out" 2>&1; then
    fail "$kind: predict: $(tail -3 "$d/predict.out")"
    return
  fi
  local out
  if out=$($py -c 'import numpy as np, sys
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
d = np.abs(a - b).max() / np.abs(a).max()
spread = a.std(0).max() / np.abs(a).max()
print("largest difference %.3g of the largest output (outputs spread %.2g)" % (d, spread))
sys.exit(0 if a.shape == b.shape and d <= 1e-4 and spread > 1e-3 else 1)' \
       "$d/torch_y.npy" "$d/cohort_y.npy" 2>&1); then
    ok "$kind: $(sed "s/.*: \([0-9]* layers, [0-9]* tensors\);.*/\1/" "$d/import.out"); outputs as PyTorch's: $out"
  else
    fail "$kind: outputs differ from PyTorch's: $out"
  fi
}

check small
check resnet18
check concat
check mobilenet_v2
check mobilenet_v3_small
check squeezenet1_1
check softmax_prelu_upsample
check conv_forms
if grep -q "kernel_hw: 1 kernel_hw: 7" "$tmp/conv_forms/job.textproto" &&
   grep -q "stride_hw: 2 stride_hw: 1" "$tmp/conv_forms/job.textproto" &&
   grep -q "padding_mode: SAME" "$tmp/conv_forms/job.textproto" &&
   grep -q "conv_transpose2d {.*output_padding: 1" "$tmp/conv_forms/job.textproto"; then
  ok "conv_forms: rectangular windows, padding SAME (auto_pad SAME_UPPER) and conv_transpose2d written to the spec"
else
  fail "conv_forms: the spec lacks the rectangular, SAME or transposed fields: $(grep -c conv "$tmp/conv_forms/job.textproto") conv layers"
fi
if grep -q 'residual { out_channels: 128 stride: 2 } name: "layer2.0"' \
     "$tmp/resnet18/job.textproto" &&
   [ "$(grep -c "residual {" "$tmp/resnet18/job.textproto")" = 8 ] &&
   ! grep -q "branch" "$tmp/resnet18/job.textproto" &&
   grep -q "combine: CONCAT" "$tmp/concat/job.textproto" &&
   grep -q "relu6" "$tmp/mobilenet_v2/job.textproto" &&
   grep -q "combine: MUL" "$tmp/mobilenet_v3_small/job.textproto" &&
   grep -q "hardswish" "$tmp/mobilenet_v3_small/job.textproto" &&
   grep -q "prelu" "$tmp/softmax_prelu_upsample/job.textproto" &&
   grep -q "mode: BILINEAR" "$tmp/softmax_prelu_upsample/job.textproto"; then
  ok "resnet18's blocks are residual layers named as torchvision's modules, the Inception block a CONCAT branch, mobilenet_v3_small's squeeze-and-excitation MUL branches, PReLU and bilinear Upsample kept"
else
  fail "branches missing from the imported specs"
fi

# A form without a cohort layer: exit 2, one line naming the node.
d="$tmp/interpolate"
mkdir -p "$d"
$py "$here/onnx_import_torch.py" interpolate "$d/m.onnx" "$d/x.npy" "$d/y.npy" \
  > /dev/null 2>&1
"$cohort" import --onnx="$d/m.onnx" --out="$d/job.textproto" > "$d/out" 2> "$d/err"
rc=$?
if [[ $rc -eq 2 && $(wc -l < "$d/err") -eq 1 ]] &&
   grep -q "(Resize): scales \[1, 1, 1.5, 1.5\]; cohort's upsample takes one integer factor" "$d/err" &&
   [[ ! -e "$d/job.textproto" ]]; then
  ok "F.interpolate(scale_factor=1.5) is refused, exit 2: $(cat "$d/err")"
else
  fail "F.interpolate(scale_factor=1.5): exit $rc: $(cat "$d/err")"
fi

# The input is never overwritten; a file that is not ONNX is refused.
err=$("$cohort" import --onnx="$tmp/small/m.onnx" --out="$tmp/small/m.onnx" 2>&1)
rc=$?
if [[ $rc -eq 2 && "$err" == *"--out"* ]]; then
  ok "--out naming the --onnx file is refused: $err"
else
  fail "--out = --onnx: exit $rc: $err"
fi
echo "not a model" > "$tmp/junk.onnx"
err=$("$cohort" import --onnx="$tmp/junk.onnx" --out="$tmp/junk.textproto" 2>&1)
rc=$?
if [[ $rc -eq 2 && "$err" == *"junk.onnx: not an ONNX model"* ]]; then
  ok "a file that is not ONNX is refused: $err"
else
  fail "junk file: exit $rc: $err"
fi

finish
