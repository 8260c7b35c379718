#!/usr/bin/env bash
# The trained model leaves cohort, checked by runtimes nobody on
# this project wrote. `cohort export` writes a checkpoint's model
#  - as ONNX: python3-onnx's checker (full_check) accepts it, and ONNX
#    Runtime (npm onnxruntime-node) gives `cohort predict`'s outputs on the
#    same inputs within 1e-4 (tests/onnx_check.js);
#  - as safetensors with PyTorch's state_dict names: Debian's python3-torch
#    loads it strictly into an equivalent torch.nn model whose outputs match
#    within 1e-4 (tests/torch_check.py).
# Every check prints the largest difference. Bad input is one line, exit 2.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cohort="$1"
check="$(dirname "${BASH_SOURCE[0]}")/torch_check.py"
examples="$(dirname "${BASH_SOURCE[0]}")/../examples"
onnx_check="$(dirname "${BASH_SOURCE[0]}")/onnx_check.js"
ort_dir=${COHORT_NODE_DIR:-/opt/cohort-node}

# check_onnx NAME CKPT X.npy Y.npy: export, checker, ONNX Runtime.
check_onnx() {
  local name=$1 ckpt=$2 x=$3 y=$4 out
  "$cohort" export --checkpoint="$ckpt" --format=onnx --out="$tmp/$name.onnx" \
    > /dev/null 2> "$tmp/$name.err" || { fail "$name: export onnx: $(cat "$tmp/$name.err")"; return; }
  if $py -c "import onnx" 2> /dev/null; then
    if out=$($py -c 'import onnx, sys; m = onnx.load(sys.argv[1]); onnx.checker.check_model(m, full_check=True); print(len(m.graph.node), "nodes, opset", m.opset_import[0].version)' "$tmp/$name.onnx" 2>&1); then
      ok "$name: onnx.checker.check_model(full_check=True): $out"
    else
      fail "$name: the ONNX checker refuses the export: $out"
    fi
  else
    ok "$name: SKIPPED the ONNX checker: python3-onnx is not installed (tools/setup installs it)"
  fi
  if [[ ! -f "$ort_dir/node_modules/onnxruntime-node/package.json" ]] || ! command -v node > /dev/null; then
    ok "$name: SKIPPED ONNX Runtime: onnxruntime-node is not in $ort_dir (tools/setup installs it)"
    return
  fi
  if out=$(node "$onnx_check" "$ort_dir" "$tmp/$name.onnx" "$x" "$y" 2>&1); then
    ok "$name: $out"
  else
    fail "$name: ONNX Runtime: $out"
  fi
}
py=/usr/bin/python3

# train_export NAME SHAPE MODEL-BLOCK DATA-BLOCK: trains briefly, exports,
# predicts on random inputs of SHAPE, and compares with PyTorch.
train_export() {
  local name=$1 shape=$2 model=$3 data=$4
  cat > "$tmp/$name.textproto" <<SPEC
name: "$name"
model { $model }
$data
batch_size: 16
max_steps: 12
optimizer { kind: ADAM lr: 0.01 }
SPEC
  "$cohort" train --job="$tmp/$name.textproto" --checkpoint-dir="$tmp/$name" \
    --quiet > /dev/null 2> "$tmp/$name.err" || { fail "$name: train: $(cat "$tmp/$name.err")"; return; }
  local ckpt="$tmp/$name/ckpt-000000000012.cohort"
  "$cohort" export --checkpoint="$ckpt" --format=safetensors \
    --out="$tmp/$name.safetensors" > /dev/null 2> "$tmp/$name.err" ||
    { fail "$name: export: $(cat "$tmp/$name.err")"; return; }
  $py -c "import numpy as np; np.save('$tmp/${name}_x.npy', np.random.default_rng(5).normal(0, 1, ($shape)).astype(np.float32))"
  "$cohort" predict --checkpoint="$ckpt" --input="$tmp/${name}_x.npy" \
    --out="$tmp/${name}_y.npy" --batch=7 > /dev/null 2> "$tmp/$name.err" ||
    { fail "$name: predict: $(cat "$tmp/$name.err")"; return; }
  check_onnx "$name" "$ckpt" "$tmp/${name}_x.npy" "$tmp/${name}_y.npy"
  check_torch "$name" "$ckpt" "$tmp/${name}_x.npy" "$tmp/${name}_y.npy"
}

# check_torch NAME CKPT X.npy Y.npy: safetensors export, PyTorch.
check_torch() {
  local name=$1 ckpt=$2 x=$3 y=$4 out
  if ! $py -c "import torch" 2> /dev/null; then
    ok "$name: SKIPPED the PyTorch comparison: python3-torch is not installed (tools/setup installs it unless COHORT_SKIP_LIBTORCH=1)"
    return
  fi
  "$cohort" export --checkpoint="$ckpt" --format=safetensors \
    --out="$tmp/$name.safetensors" > /dev/null 2> "$tmp/$name.err" ||
    { fail "$name: export safetensors: $(cat "$tmp/$name.err")"; return; }
  if out=$($py "$check" "$name" "$tmp/$name.safetensors" "$x" "$y" 2>&1); then
    ok "$out"
  else
    fail "$name: $out"
  fi
}

train_export mlp "20, 100" \
  'layers { linear { out_features: 32 } } layers { batchnorm1d {} }
   layers { relu {} } layers { dropout { p: 0.2 } }
   layers { linear { out_features: 10 } }' \
  'data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 512 test_samples: 64 } }'
train_export cnn "9, 3, 16, 16" \
  'layers { conv2d { out_channels: 8 kernel: 3 padding: 1 } }
   layers { batchnorm2d {} } layers { relu {} }
   layers { maxpool2d { kernel: 2 } }
   layers { residual { out_channels: 16 stride: 2 } }
   layers { avgpool2d { kernel: 2 } } layers { flatten {} }
   layers { linear { out_features: 10 } }' \
  'data { kind: SYNTHETIC synthetic { shape: [3, 16, 16] train_samples: 512 test_samples: 64 } }'
# Activations, LayerNorm and GroupNorm (with and
# without affine), 1-D pooling.
train_export act_mlp "20, 24" \
  'layers { linear { out_features: 32 } } layers { layernorm {} }
   layers { gelu {} } layers { linear { out_features: 16 } }
   layers { groupnorm { groups: 4 } } layers { silu {} }
   layers { linear { out_features: 16 } } layers { leaky_relu { negative_slope: 0.2 } }
   layers { layernorm { no_affine: true } } layers { tanh {} }
   layers { linear { out_features: 12 } } layers { sigmoid {} }
   layers { gelu { tanh_approximation: true } } layers { linear { out_features: 10 } }' \
  'data { kind: SYNTHETIC synthetic { shape: 24 train_samples: 512 test_samples: 64 } }'
# MobileNetV2 and V3's piecewise-linear activations.
train_export hard_act "20, 24" \
  'layers { linear { out_features: 32 } } layers { relu6 {} }
   layers { linear { out_features: 16 } } layers { hardswish {} }
   layers { linear { out_features: 16 } } layers { hardsigmoid {} }
   layers { linear { out_features: 10 } }' \
  'data { kind: SYNTHETIC synthetic { shape: 24 train_samples: 512 test_samples: 64 } }'
# Adaptive average pooling as ONNX's AveragePool (8 -> 2) and
# GlobalAveragePool (output 1, keeping [C, 1, 1] for the flatten).
train_export adaptive_pool "9, 3, 8, 8" \
  'layers { conv2d { out_channels: 8 kernel: 3 padding: 1 } } layers { relu {} }
   layers { adaptive_avgpool2d { output: 2 } }
   layers { conv2d { out_channels: 8 kernel: 1 } }
   layers { adaptive_avgpool2d { output: 1 } } layers { flatten {} }
   layers { linear { out_features: 10 } }' \
  'data { kind: SYNTHETIC synthetic { shape: [3, 8, 8] train_samples: 512 test_samples: 64 } }'
# Softmax across the channels at each position (and over the features),
# PReLU with one slope per channel and one shared, nearest and bilinear
# upsampling (ONNX's Softmax, PRelu and Resize).
train_export softmax_prelu_upsample "9, 3, 8, 8" \
  'layers { conv2d { out_channels: 6 kernel: 3 padding: 1 } }
   layers { prelu { num_parameters: 6 } } layers { upsample { scale: 2 } }
   layers { conv2d { out_channels: 4 kernel: 3 stride: 2 padding: 1 } }
   layers { prelu {} } layers { upsample { scale: 3 mode: BILINEAR } }
   layers { softmax {} } layers { conv2d { out_channels: 4 kernel: 3 stride: 3 } }
   layers { flatten {} } layers { linear { out_features: 10 } }
   layers { prelu { num_parameters: 10 } } layers { softmax {} }' \
  'data { kind: SYNTHETIC synthetic { shape: [3, 8, 8] train_samples: 512 test_samples: 64 } }'
train_export prelu_softmax_1d "9, 4, 20" \
  'layers { conv1d { out_channels: 5 kernel: 3 padding: 1 } }
   layers { prelu { num_parameters: 5 init: 0.1 } } layers { softmax {} }
   layers { flatten {} } layers { linear { out_features: 10 } }' \
  'data { kind: SYNTHETIC synthetic { shape: [4, 20] train_samples: 512 test_samples: 64 } }'
# Transposed convolutions (ONNX ConvTranspose, output_padding, groups) and
# conv2d's rectangular windows and padding SAME (Conv with per-dim
# kernel_shape and strides, pads [top, left, bottom, right]; an even kernel
# pads one more below and to the right).
train_export conv_forms "9, 3, 12, 12" \
  'layers { conv2d { out_channels: 6 kernel_hw: [1, 7] padding_hw: [0, 3] } }
   layers { conv2d { out_channels: 6 kernel_hw: [7, 1] padding_hw: [3, 0] } }
   layers { relu {} } layers { conv2d { out_channels: 8 kernel: 4 padding_mode: SAME } }
   layers { conv2d { out_channels: 8 kernel: 3 stride_hw: [2, 1] padding: 1 groups: 2 } }
   layers { conv_transpose2d { out_channels: 6 kernel: 3 stride: 2 padding: 1 output_padding: 1 groups: 2 } }
   layers { relu {} } layers { conv2d { out_channels: 4 kernel: 3 dilation: 2 padding_mode: SAME } }
   layers { conv_transpose2d { out_channels: 4 kernel: 2 no_bias: true } }
   layers { global_avgpool {} } layers { linear { out_features: 10 } }' \
  'data { kind: SYNTHETIC synthetic { shape: [3, 12, 12] train_samples: 512 test_samples: 64 } }'
train_export norm_cnn "9, 3, 12, 12" \
  'layers { conv2d { out_channels: 8 kernel: 3 padding: 1 } }
   layers { groupnorm { groups: 2 } } layers { silu {} }
   layers { conv2d { out_channels: 8 kernel: 3 stride: 2 } }
   layers { layernorm {} } layers { gelu {} }
   layers { groupnorm { groups: 8 no_affine: true } } layers { flatten {} }
   layers { linear { out_features: 10 } }' \
  'data { kind: SYNTHETIC synthetic { shape: [3, 12, 12] train_samples: 512 test_samples: 64 } }'
train_export pool1d "9, 4, 30" \
  'layers { conv1d { out_channels: 6 kernel: 3 padding: 1 } }
   layers { maxpool1d { kernel: 3 stride: 2 padding: 1 } } layers { leaky_relu {} }
   layers { layernorm {} } layers { avgpool1d { kernel: 4 stride: 3 padding: 2 } }
   layers { groupnorm { groups: 3 } } layers { avgpool1d { kernel: 2 } }
   layers { flatten {} } layers { linear { out_features: 10 } }' \
  'data { kind: SYNTHETIC synthetic { shape: [4, 30] train_samples: 512 test_samples: 64 } }'
# Grouped, depthwise and dilated convolutions; an inverted residual (SUM
# branch with an identity path) and an inception-style CONCAT branch.
train_export mobilenet "9, 3, 16, 16" \
  'layers { conv2d { out_channels: 8 kernel: 3 padding: 1 no_bias: true } }
   layers { batchnorm2d {} } layers { relu {} }
   layers { branch { combine: SUM paths {
     layers { conv2d { out_channels: 16 kernel: 1 no_bias: true } }
     layers { batchnorm2d {} } layers { relu {} }
     layers { conv2d { out_channels: 16 kernel: 3 padding: 1 groups: 16 } }
     layers { relu {} } layers { conv2d { out_channels: 8 kernel: 1 } } }
     paths {} } }
   layers { branch { paths { layers { conv2d { out_channels: 4 kernel: 1 } } }
     paths { layers { conv2d { out_channels: 6 kernel: 3 padding: 2 dilation: 2 groups: 2 } } }
     paths {} } }
   layers { conv2d { out_channels: 18 kernel: 3 stride: 2 padding: 1 groups: 18 } }
   layers { global_avgpool {} } layers { linear { out_features: 10 } }' \
  'data { kind: SYNTHETIC synthetic { shape: [3, 16, 16] train_samples: 512 test_samples: 64 } }'
# Squeeze-and-excitation: a MUL branch whose [C, 1, 1] gate (ONNX Mul's
# broadcasting) scales the identity path.
train_export se_block "9, 3, 12, 12" \
  'layers { conv2d { out_channels: 8 kernel: 3 padding: 1 } } layers { relu {} }
   layers { branch { combine: MUL paths {}
     paths { layers { avgpool2d { kernel: 12 } } layers { conv2d { out_channels: 2 kernel: 1 } }
       layers { relu {} } layers { conv2d { out_channels: 8 kernel: 1 } }
       layers { sigmoid {} } } } }
   layers { global_avgpool {} } layers { linear { out_features: 10 } }' \
  'data { kind: SYNTHETIC synthetic { shape: [3, 12, 12] train_samples: 512 test_samples: 64 } }'
# A vision transformer: patches (a strided conv2d) to a sequence (ONNX
# Reshape), the transformer layers sequence-major, the mean over the
# patches (ReduceMean) into a linear head.
train_export vit "9, 3, 16, 16" \
  'layers { conv2d { out_channels: 12 kernel: 4 stride: 4 } } layers { to_sequence {} }
   layers { positional_embedding {} }
   layers { transformer_block { heads: 3 bidirectional: true } }
   layers { transformer_block { heads: 2 mlp_ratio: 2 bidirectional: true } }
   layers { layernorm { per_position: true } } layers { sequence_pool { mode: MEAN } }
   layers { linear { out_features: 10 } }' \
  'data { kind: SYNTHETIC synthetic { shape: [3, 16, 16] train_samples: 512 test_samples: 64 } }'
$py "$examples/make_conv1d_data.py" "$tmp/c1d" --train 64 --test 16 --shards 1 > /dev/null
train_export conv1d "5, 3, 10000" 'zoo: "conv1d_bn"' \
  "data { kind: NUMPY dir: \"$tmp/c1d\" numpy { shape: [3, 10000] target_shape: [3, 10000]
         train_x: \"train_x_0.npy\" train_y: \"train_y_0.npy\" test_x: \"test_x.npy\" test_y: \"test_y.npy\" } }"

# Every zoo model (ResNet-50 on two 224x224 images), one training step:
# ONNX Runtime and PyTorch against cohort predict.
zoo_onnx() {  # zoo_onnx ZOO SHAPE
  local zoo=$1 shape=$2
  cat > "$tmp/$zoo.textproto" <<SPEC
name: "$zoo"
model { zoo: "$zoo" }
data { kind: SYNTHETIC synthetic { shape: [$shape] classes: 10 train_samples: 8 test_samples: 2 } }
batch_size: 2
max_steps: 1
eval { disable: true }
optimizer { lr: 0.01 }
SPEC
  "$cohort" train --job="$tmp/$zoo.textproto" --checkpoint-dir="$tmp/$zoo" --quiet \
    > /dev/null 2> "$tmp/$zoo.err" || { fail "$zoo: train: $(cat "$tmp/$zoo.err")"; return; }
  $py -c "import numpy as np; np.save('$tmp/${zoo}_x.npy', np.random.default_rng(6).normal(0, 1, (2, $shape)).astype(np.float32))"
  "$cohort" predict --checkpoint="$tmp/$zoo/ckpt-000000000001.cohort" \
    --input="$tmp/${zoo}_x.npy" --out="$tmp/${zoo}_y.npy" > /dev/null 2> "$tmp/$zoo.err" ||
    { fail "$zoo: predict: $(cat "$tmp/$zoo.err")"; return; }
  check_onnx "$zoo" "$tmp/$zoo/ckpt-000000000001.cohort" "$tmp/${zoo}_x.npy" "$tmp/${zoo}_y.npy"
  check_torch "$zoo" "$tmp/$zoo/ckpt-000000000001.cohort" "$tmp/${zoo}_x.npy" "$tmp/${zoo}_y.npy"
}
zoo_onnx mlp_seed "100"
zoo_onnx mlp_mnist "1, 28, 28"
zoo_onnx lenet5 "1, 28, 28"
zoo_onnx lenet_cifar "3, 32, 32"
zoo_onnx resnet18_cifar "3, 32, 32"
zoo_onnx resnet50 "3, 224, 224"
zoo_onnx vit_tiny "3, 224, 224"

# The other way: weights saved from PyTorch start a cohort run
# (--init-from); at a vanishing learning rate the trained model is
# PyTorch's, output for output.
if $py -c "import torch" 2> /dev/null; then
  save="$(dirname "${BASH_SOURCE[0]}")/torch_save.py"
  $py "$save" "$tmp/torch.safetensors" "$tmp/torch_x.npy" "$tmp/torch_y.npy"
  cat > "$tmp/init.textproto" <<SPEC
name: "init"
model { layers { linear { out_features: 32 } } layers { relu {} }
        layers { linear { out_features: 10 } } }
data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 64 test_samples: 16 } }
batch_size: 16
max_steps: 1
optimizer { lr: 1e-30 }
SPEC
  "$cohort" train --job="$tmp/init.textproto" --init-from="$tmp/torch.safetensors" \
    --checkpoint-dir="$tmp/init" --quiet > /dev/null 2> "$tmp/init.err" ||
    fail "--init-from: $(cat "$tmp/init.err")"
  "$cohort" predict --checkpoint="$tmp/init/ckpt-000000000001.cohort" \
    --input="$tmp/torch_x.npy" --out="$tmp/init_y.npy" > /dev/null 2>&1
  if out=$($py -c 'import numpy as np, sys; a, b = np.load(sys.argv[1]), np.load(sys.argv[2]); d = np.abs(a - b).max(); print("largest difference %.3g (%.3g of the largest output)" % (d, d / np.abs(a).max())); sys.exit(0 if d / np.abs(a).max() <= 1e-4 else 1)' "$tmp/torch_y.npy" "$tmp/init_y.npy" 2>&1); then
    ok "PyTorch weights into cohort (--init-from): cohort's outputs against PyTorch's: $out"
  else
    fail "--init-from: outputs differ from PyTorch's: $out"
  fi
  $py "$save" "$tmp/bad.safetensors" "$tmp/bx.npy" "$tmp/by.npy" --bad-shape
  expect_refused_text "--init-from with another model's weights" \
    "bad.safetensors: tensor 2.weight has shape [16, 32] where the model's is [10, 32]" \
    "$cohort" train --job="$tmp/init.textproto" --init-from="$tmp/bad.safetensors"
else
  ok "SKIPPED PyTorch -> cohort: python3-torch is not installed"
fi
printf 'garbage!' > "$tmp/garbage.safetensors"
expect_refused_text "--init-from: not a safetensors file" \
  "garbage.safetensors: not a valid safetensors file" \
  "$cohort" train --job="$tmp/mlp.textproto" --init-from="$tmp/garbage.safetensors"

# --export on train: the final model straight out of the run, without a
# checkpoint directory of its own.
if "$cohort" train --job="$tmp/mlp.textproto" --quiet --export="$tmp/direct.onnx" \
     > "$tmp/direct.out" 2>&1 && [[ -s "$tmp/direct.onnx" ]] &&
   $py -c 'import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)' "$tmp/direct.onnx" 2> /dev/null; then
  ok "cohort train --export=FILE.onnx: $(grep wrote "$tmp/direct.out" | cut -d: -f1,2)"
else
  fail "cohort train --export: $(tail -2 "$tmp/direct.out")"
fi

# Bad input: one line, exit 2.
ckpt="$tmp/mlp/ckpt-000000000012.cohort"
expect_refused_text "train --export of an unknown kind" \
  "--export must name a .onnx or .safetensors file" \
  "$cohort" train --job="$tmp/mlp.textproto" --export="$tmp/model.tflite"
expect_refused_text "export: an unknown format" "--format must be onnx or safetensors, got \"tflite\"" \
  "$cohort" export --checkpoint="$ckpt" --format=tflite --out="$tmp/x"
expect_refused_text "export: a missing checkpoint" "no-such.cohort" \
  "$cohort" export --checkpoint="$tmp/no-such.cohort" --format=safetensors --out="$tmp/x"
expect_refused_text "predict: inputs of the wrong shape" \
  "cnn_x.npy: inputs of shape (9, 3, 16, 16) where the model takes (N, 100)" \
  "$cohort" predict --checkpoint="$ckpt" --input="$tmp/cnn_x.npy" --out="$tmp/y.npy"
head -c 3000 "$ckpt" > "$tmp/short.cohort"
expect_refused "export: a damaged checkpoint" "short.cohort" \
  "$cohort" export --checkpoint="$tmp/short.cohort" --format=safetensors --out="$tmp/x"

finish
