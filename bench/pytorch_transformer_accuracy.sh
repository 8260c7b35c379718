#!/usr/bin/env bash
# Trains the transformers of tests/pytorch_transformer.py (nn.TransformerEncoder
# under a causal mask; a GPT written by hand) on a generated next-token
# task in PyTorch (one process, global batch 32) and in cohort (`cohort
# local`, 2 workers of 16 each, the job's model the same torch.onnx.export
# file, so both start from the same weights), the same number of steps
# with the same optimizer (Adam, lr 3e-3, cosine); prints each one's
# next-token test accuracy and exits 1 when cohort's is more than 2 points
# below PyTorch's. The task's best accuracy is about 0.85 (the first
# position of a window cannot be predicted).
#
#   bench/pytorch_transformer_accuracy.sh COHORT [STEPS [MODEL...]]
#
# Default: 300 steps; encoder and gpt. Needs /usr/bin/python3 with torch.
set -u
cohort=$(realpath "$1")
steps=${2:-300}
shift $(( $# < 2 ? $# : 2 ))
models=("$@")
[[ ${#models[@]} -eq 0 ]] && models=(encoder gpt)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests" && pwd)"
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$py "$here/pytorch_transformer.py" corpus "$work" || exit 1

failures=0
printf "%-10s %6s %10s %10s\n" model steps pytorch cohort
for kind in "${models[@]}"; do
  torch_acc=$($py "$here/pytorch_transformer.py" accuracy "$kind" "$work" "$steps" 32 \
    2> "$work/$kind.torch.err" | sed -n 's/^accuracy //p')
  if [[ -z "$torch_acc" ]]; then
    echo "$kind: the PyTorch side failed: $(tail -3 "$work/$kind.torch.err")"
    failures=$((failures + 1))
    continue
  fi
  cat > "$work/$kind.textproto" <<SPEC
name: "$kind"
model { onnx: "$kind.onnx" }
data { kind: TOKENS dir: "$work"
       tokens { train: "train.npy" test: "test.npy" context: 16 vocab_size: 32 } }
batch_size: 16
max_steps: $steps
optimizer { kind: ADAM lr: 0.003 }
lr_schedule { kind: COSINE }
SPEC
  if ! "$cohort" local --job="$work/$kind.textproto" --workers=2 --report="$work/$kind.json" \
       --quiet > "$work/$kind.out" 2>&1; then
    echo "$kind: cohort local failed: $(tail -3 "$work/$kind.out")"
    failures=$((failures + 1))
    continue
  fi
  cohort_acc=$($py -c 'import json, sys; print(json.load(open(sys.argv[1]))["test_metrics"]["accuracy"])' \
    "$work/$kind.json")
  verdict=$($py -c 'import sys; t, c = map(float, sys.argv[1:]); print("ok" if c >= t - 0.02 else "LOW")' \
    "$torch_acc" "$cohort_acc")
  printf "%-10s %6d %9.1f%% %9.1f%%  %s\n" "$kind" "$steps" \
    "$($py -c "print(100*$torch_acc)")" "$($py -c "print(100*$cohort_acc)")" "$verdict"
  [[ $verdict == ok ]] || failures=$((failures + 1))
done
exit $(( failures > 0 ))
