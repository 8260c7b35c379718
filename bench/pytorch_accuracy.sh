#!/usr/bin/env bash
# Trains torchvision models on a generated image folder (four texture
# classes, tests/make_pattern_images.py) in PyTorch (one process, global
# batch 32) and in cohort (`cohort local`, 2 workers of 16 each, the job's
# model the same torch.onnx.export file, so both start from the same
# weights), the same number of steps with the same optimizer and
# transforms; prints each one's test accuracy and exits 1 when cohort's is
# more than 2 points below PyTorch's.
#
#   bench/pytorch_accuracy.sh COHORT [STEPS [MODEL...]]
#
# Default: 150 steps; resnet18, mobilenet_v2, mobilenet_v3_small and
# squeezenet1_1. Needs /usr/bin/python3 with torchvision.
set -u
cohort=$(realpath "$1")
steps=${2:-150}
shift $(( $# < 2 ? $# : 2 ))
models=("$@")
[[ ${#models[@]} -eq 0 ]] && models=(resnet18 mobilenet_v2 mobilenet_v3_small squeezenet1_1)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests" && pwd)"
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$py "$here/make_pattern_images.py" "$work/data" 96 32 64 || exit 1

failures=0
printf "%-20s %6s %10s %10s\n" model steps pytorch cohort
for kind in "${models[@]}"; do
  size=32
  [[ $kind == squeezenet1_1 ]] && size=64
  d="$work/$kind"
  mkdir -p "$d"
  torch_acc=$($py "$here/pytorch_accuracy.py" "$kind" "$work/data" "$d/m.onnx" "$steps" 32 "$size" \
    2> "$d/torch.err" | sed -n 's/^accuracy //p')
  if [[ -z "$torch_acc" ]]; then
    echo "$kind: the PyTorch side failed: $(tail -3 "$d/torch.err")"
    failures=$((failures + 1))
    continue
  fi
  cat > "$d/job.textproto" <<SPEC
name: "$kind"
model { onnx: "m.onnx" }
data { kind: IMAGE_FOLDER dir: "$work/data"
       image_folder { classes: 4 image_size: $size scale_min: 0.5 } }
batch_size: 16
max_steps: $steps
optimizer { lr: 0.02 momentum: 0.9 }
lr_schedule { kind: COSINE }
SPEC
  if ! "$cohort" local --job="$d/job.textproto" --workers=2 --report="$d/report.json" --quiet \
       > "$d/cohort.out" 2>&1; then
    echo "$kind: cohort local failed: $(tail -3 "$d/cohort.out")"
    failures=$((failures + 1))
    continue
  fi
  cohort_acc=$($py -c 'import json, sys; print(json.load(open(sys.argv[1]))["test_accuracy"])' \
    "$d/report.json")
  verdict=$($py -c 'import sys; t, c = map(float, sys.argv[1:]); print("ok" if c >= t - 0.02 else "LOW")' \
    "$torch_acc" "$cohort_acc")
  printf "%-20s %6d %9.1f%% %9.1f%%  %s\n" "$kind" "$steps" \
    "$($py -c "print(100*$torch_acc)")" "$($py -c "print(100*$cohort_acc)")" "$verdict"
  [[ $verdict == ok ]] || failures=$((failures + 1))
done
exit $(( failures > 0 ))
