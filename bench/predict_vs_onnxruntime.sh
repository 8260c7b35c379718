#!/usr/bin/env bash
# Inference speed: `cohort predict` against ONNX Runtime running cohort's own
# export of the same model, on the same inputs, at the same thread count and
# batch size. Prints a markdown table and exits 1 where cohort's images/s are
# below ONNX Runtime's, or where the two disagree on the logits.
#
#   bench/predict_vs_onnxruntime.sh COHORT [--runs=3] [--threads=1,2]
#                                   [--batches=1,8] [--images=64]
#
# The model: the zoo's resnet50 (torchvision's layout) at 3x224x224 with 1000
# classes, trained two SGD steps on SYNTHETIC data so that its BatchNorm
# statistics are not the initial ones, then written by `cohort train
# --export` as ONNX. The inputs: IMAGES normal(0, 1) images in one float32
# .npy, the same file for both sides.
#
# Method, per thread count T and batch size B, RUNS rounds, each round
# running cohort (twice) and then ONNX Runtime, so that both sides see the
# same machine load; the reported images/s are medians over the rounds.
#  - cohort: `cohort predict --batch=B` with OMP_NUM_THREADS and
#    OPENBLAS_NUM_THREADS set to T (predict's compute threads follow them),
#    as a user runs it (predict's default --streams: at batch 1, T copies of
#    the model take the batches in turn, one thread each; at batch 8, one
#    copy). The table also gives `--streams=1` (one forward pass at a time
#    on all T threads, as ONNX Runtime runs), for which the verdict does not
#    count.
#    Its wall time includes starting, reading the checkpoint and the first
#    batch (which builds oneDNN's primitives); a run over one batch measures
#    exactly that, so each round's rate is (IMAGES - B) / (time of the run
#    over IMAGES - time of the run over the first B images), the two runs
#    back to back (the run over one batch has one stream either way).
#  - ONNX Runtime: onnxruntime-node, CPU execution provider, intra-op
#    threads T, inter-op 1, all graph optimizations (its defaults for a
#    user); the first batch is a warm-up and session.run over the other
#    IMAGES - B images is timed (bench/predict_vs_onnxruntime.js).
# Both sides therefore time the same IMAGES - B images after one batch of
# warm-up. The outputs of every round are compared: the largest absolute
# logit difference must be within 1e-3 of ONNX Runtime's largest |logit|.
#
# About 5 minutes on two idle cores. Other processes on the machine skew
# the two sides differently (OpenMP's barriers wait for a preempted thread,
# ONNX Runtime's pool does not), so it warns when the load is not near 0.
#
# onnxruntime-node is the one tools/setup installs (in $COHORT_NODE_DIR,
# default /opt/cohort-node); without it or node this exits 2.
set -u
py=/usr/bin/python3
here=$(dirname "$(realpath "${BASH_SOURCE[0]}")")  # bazel run links the script
ort_js="$here/predict_vs_onnxruntime.js"
ort_dir=${COHORT_NODE_DIR:-/opt/cohort-node}
[[ $# -ge 1 ]] || { echo "usage: $0 COHORT [--runs=N] [--threads=T,...] [--batches=B,...] [--images=N]" >&2; exit 2; }
cohort=$(realpath "$1")
shift
runs=3 threads=1,2 batches=1,8 images=64
for arg in "$@"; do
  case $arg in
    --runs=*) runs=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --batches=*) batches=${arg#*=} ;;
    --images=*) images=${arg#*=} ;;
    *) echo "$0: unknown argument $arg" >&2; exit 2 ;;
  esac
done
for b in ${batches//,/ }; do
  if (( images % b != 0 || images < 2 * b )); then
    echo "$0: --images=$images must be a multiple of every batch and at least two batches of $b" >&2
    exit 2
  fi
done
if ! command -v node > /dev/null || [[ ! -f "$ort_dir/node_modules/onnxruntime-node/package.json" ]]; then
  echo "$0: needs node and onnxruntime-node in $ort_dir (tools/setup installs them)" >&2
  exit 2
fi
$py -c "import numpy" 2> /dev/null || { echo "$0: needs numpy for $py (tools/setup installs python3-numpy)" >&2; exit 2; }

# Both sides share the machine with whatever else runs: say so when it is busy.
load=$(cut -d' ' -f1 /proc/loadavg)
if $py -c "import sys; sys.exit(float(sys.argv[1]) < 0.5)" "$load"; then
  echo "$0: warning: load average $load before starting; the timings will be noisy" >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/resnet50.textproto" <<'SPEC'
model { zoo: "resnet50" }
data { kind: SYNTHETIC synthetic { shape: [3, 224, 224] classes: 1000 } }
batch_size: 4
epochs: 1
eval { disable: true }
optimizer { kind: SGD lr: 0.01 momentum: 0.9 }
SPEC
echo "training resnet50 two steps and exporting it as ONNX..." >&2
"$cohort" train --job="$work/resnet50.textproto" --max-steps=2 --devices=cpu:1 --threads=2 \
  --checkpoint-dir="$work/ckpt" --export="$work/resnet50.onnx" --quiet \
  > "$work/train.out" 2>&1 || { echo "cohort train: $(tail -3 "$work/train.out")" >&2; exit 2; }

$py - "$work" "$images" ${batches//,/ } <<'PY' || exit 2
import sys
import numpy as np
work, n, batches = sys.argv[1], int(sys.argv[2]), map(int, sys.argv[3:])
x = np.random.default_rng(0).normal(0, 1, (n, 3, 224, 224)).astype(np.float32)
np.save(f"{work}/x.npy", x)
for b in batches:  # the first batch alone, for cohort's fixed costs
    np.save(f"{work}/x_{b}.npy", x[:b])
PY

# seconds T B IN OUT [FLAG...]: wall seconds of one `cohort predict` on T
# threads.
seconds() {
  local start=$EPOCHREALTIME
  OMP_NUM_THREADS=$1 OPENBLAS_NUM_THREADS=$1 "$cohort" predict \
    --checkpoint="$work/ckpt" --input="$3" --out="$4" --batch="$2" --threads="$1" \
    "${@:5}" > "$work/predict.out" 2>&1 || { echo "cohort predict: $(cat "$work/predict.out")" >&2; return 1; }
  $py -c "import sys; print('%.3f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$start" "$EPOCHREALTIME"
}

failures=0
rows=()
for t in ${threads//,/ }; do
  for b in ${batches//,/ }; do
    small=() large=() single=() ort=() diffs=() scales=()
    for ((r = 0; r < runs; ++r)); do
      small+=("$(seconds "$t" "$b" "$work/x_$b.npy" "$work/y_small.npy")") || exit 2
      large+=("$(seconds "$t" "$b" "$work/x.npy" "$work/y.npy")") || exit 2
      single+=("$(seconds "$t" "$b" "$work/x.npy" "$work/y1.npy" --streams=1)") || exit 2
      cmp -s "$work/y.npy" "$work/y1.npy" ||
        { echo "cohort predict: --streams=1 gives other outputs" >&2; exit 2; }
      out=$(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t node "$ort_js" "$ort_dir" \
        "$work/resnet50.onnx" "$work/x.npy" "$t" "$b" "$work/y.npy") ||
        { echo "onnxruntime: $out" >&2; exit 2; }
      read -r rate diff scale < <($py -c 'import json, sys; r = json.loads(sys.argv[1]); print("%.2f" % (r["images"] / r["seconds"]), r["max_abs_diff"], r["max_abs_output"])' "$out")
      ort+=("$rate") diffs+=("$diff") scales+=("$scale")
    done
    read -r cohort_rate single_rate ort_rate ratio single_ratio diff scale verdict < <($py - \
      "$images" "$b" "${small[*]}" "${large[*]}" "${single[*]}" "${ort[*]}" "${diffs[*]}" \
      "${scales[*]}" <<'PY'
import statistics
import sys
n, b = int(sys.argv[1]), int(sys.argv[2])
small, large, single, ort, diffs, scales = (
    [float(v) for v in a.split()] for a in sys.argv[3:9])
def rate(over_all):
    return statistics.median((n - b) / (l - s) if l > s else 0.0
                             for s, l in zip(small, over_all))
ort = statistics.median(ort)
diff, scale = max(diffs), max(scales)
ratio, single_ratio = rate(large) / ort, rate(single) / ort
verdict = ("ok" if ratio >= 1 else "SLOW") + ("" if diff <= 1e-3 * scale else "+DIFFERS")
print(f"{rate(large):.2f} {rate(single):.2f} {ort:.2f} {ratio:.3f} {single_ratio:.3f} "
      f"{diff:.2e} {scale:.3g} {verdict}")
PY
    )
    echo "threads $t batch $b: cohort seconds over $b images: ${small[*]}; over $images: ${large[*]}; with --streams=1: ${single[*]}; onnxruntime images/s: ${ort[*]}" >&2
    rows+=("| $t | $b | $cohort_rate | $ort_rate | $ratio | $single_rate | $single_ratio | $diff (of $scale) | $verdict |")
    [[ $verdict == ok ]] || failures=$((failures + 1))
  done
done

echo
echo "ResNet-50 at 224x224, $images images per run, median of $runs:"
echo
echo "| threads | batch | cohort images/s | ORT images/s | ratio | cohort --streams=1 | its ratio | max abs logit diff (of max abs logit) | verdict |"
echo "|---|---|---|---|---|---|---|---|---|"
printf "%s\n" "${rows[@]}"
exit $(( failures > 0 ))
