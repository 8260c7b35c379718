#!/usr/bin/env bash
# Does an imported model train as fast as the same model written as a
# spec? Times `cohort train` (one replica, one thread, SYNTHETIC or TOKENS
# data) on each pair, alternating runs, and prints samples/s:
#  - torchvision's resnet18 at 3x32x32 through `model { onnx }` (SUM
#    branches of conv, BatchNorm, ReLU) against the same network written
#    with `residual` blocks;
#  - the GPT of tests/pytorch_transformer.py through `model { onnx }`
#    (branches of layernorm, attention, per-position linear, GELU)
#    against the same network written with `transformer_block`s.
# Exits 1 when an imported model's median is more than 3% below its spec's.
#
#   bench/import_speed.sh COHORT [RUNS]   (default 3 runs of each)
set -u
cohort=$(realpath "$1")
runs=${2:-3}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests" && pwd)"
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

$py - "$work/resnet18.onnx" <<'PY' || exit 1
import sys, warnings, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet18(num_classes=10)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(m, torch.randn(2, 3, 32, 32), sys.argv[1],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=13)
PY
$py "$here/pytorch_transformer.py" export gpt "$work/gpt.onnx" || exit 1
$py "$here/pytorch_transformer.py" corpus "$work" || exit 1

image_data='data { kind: SYNTHETIC synthetic { shape: [3, 32, 32] classes: 10 } }'
token_data="data { kind: TOKENS dir: \"$work\"
  tokens { train: \"train.npy\" test: \"test.npy\" context: 16 vocab_size: 32 } }"
stage() {  # stage CHANNELS STRIDE: two BasicBlocks
  echo "layers { residual { out_channels: $1 stride: $2 } } layers { residual { out_channels: $1 } }"
}
cat > "$work/resnet18_onnx.textproto" <<SPEC
model { onnx: "resnet18.onnx" }
$image_data
SPEC
cat > "$work/resnet18_spec.textproto" <<SPEC
model {
  layers { conv2d { out_channels: 64 kernel: 7 stride: 2 padding: 3 no_bias: true } }
  layers { batchnorm2d {} } layers { relu {} }
  layers { maxpool2d { kernel: 3 stride: 2 padding: 1 } }
  $(stage 64 1) $(stage 128 2) $(stage 256 2) $(stage 512 2)
  layers { global_avgpool {} } layers { linear { out_features: 10 } }
}
$image_data
SPEC
cat > "$work/gpt_onnx.textproto" <<SPEC
model { onnx: "gpt.onnx" }
$token_data
SPEC
cat > "$work/gpt_spec.textproto" <<SPEC
model {
  layers { embedding { vocab_size: 32 dim: 32 } } layers { positional_embedding {} }
  layers { transformer_block { heads: 4 } } layers { transformer_block { heads: 4 } }
  layers { layernorm { per_position: true } }
  layers { linear { out_features: 32 per_position: true no_bias: true } }
}
$token_data
SPEC

# speed NAME STEPS: samples/s of one run.
speed() {
  { cat "$work/$1.textproto"; echo "batch_size: 32 max_steps: $2 optimizer { lr: 0.01 } eval { disable: true }"; } \
    > "$work/run.textproto"
  "$cohort" train --job="$work/run.textproto" --devices=cpu:1 --threads=1 --quiet \
    --report="$work/report.json" > "$work/run.out" 2>&1 || {
    echo "$1: $(tail -2 "$work/run.out")" >&2
    echo 0
    return
  }
  $py -c 'import json, sys; print(json.load(open(sys.argv[1]))["samples_per_s"])' "$work/report.json"
}

median() { printf "%s\n" "$@" | sort -g | sed -n "$(( ($# + 1) / 2 ))p"; }

failures=0
printf "%-10s %-28s %-28s %s\n" model "imported (samples/s)" "spec (samples/s)" ratio
for model in resnet18:60 gpt:3000; do
  name=${model%%:*}
  steps=${model##*:}
  imported=() written=()
  for ((i = 0; i < runs; ++i)); do
    imported+=("$(speed "${name}_onnx" "$steps")")
    written+=("$(speed "${name}_spec" "$steps")")
  done
  a=$(median "${imported[@]}")
  b=$(median "${written[@]}")
  ratio=$($py -c "import sys; a, b = map(float, sys.argv[1:]); print('%.3f' % (a / b if b else 0))" "$a" "$b")
  verdict=$($py -c "import sys; print('ok' if float(sys.argv[1]) >= 0.97 else 'SLOW')" "$ratio")
  printf "%-10s %-28s %-28s %s %s\n" "$name" "${imported[*]}" "${written[*]}" "$ratio" "$verdict"
  [[ $verdict == ok ]] || failures=$((failures + 1))
done
exit $(( failures > 0 ))
